"""tinyfin.nn: modules (Module, Linear, Conv2d, ...) and tinyfin.nn.functional."""
from . import functional  # noqa: F401
from .modules import (  # noqa: F401
    AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, GELU, Identity, LayerNorm,
    Linear, MaxPool2d, Module, ModuleList, MSELoss, Parameter, ReLU, RMSNorm, Sequential, Sigmoid,
    SiLU, Softmax, Tanh,
)


from . import init, utils  # noqa: E402,F401
from .utils import clip_grad_norm_  # noqa: E402,F401  (also at tinyfin.nn, as before)
