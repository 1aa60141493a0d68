"""tinyfin.nn: modules (Module, Linear, Conv2d, ...) and tinyfin.nn.functional."""
from . import functional  # noqa: F401
from .modules import (  # noqa: F401
    AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, BCEWithLogitsLoss, Conv2d, CrossEntropyLoss, Dropout,
    Dropout2d, Embedding, Flatten, GELU, GroupNorm, HuberLoss, Identity, IncompatibleKeys, L1Loss, LayerNorm, Linear,
    MaxPool2d, Module, ModuleList, MSELoss, NLLLoss, Parameter, ReLU, RMSNorm, Sequential, Sigmoid, SiLU,
    SmoothL1Loss, Softmax, Tanh,
)


from . import init, utils  # noqa: E402,F401
from .utils import clip_grad_norm_  # noqa: E402,F401  (also at tinyfin.nn, as before)
