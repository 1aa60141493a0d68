"""tinyfin.nn: modules (Module, Linear, Conv2d, ...) and tinyfin.nn.functional."""
from . import functional  # noqa: F401
from .modules import (  # noqa: F401
    AvgPool2d, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, GELU, Identity, LayerNorm,
    Linear, MaxPool2d, Module, ModuleList, MSELoss, Parameter, ReLU, RMSNorm, Sequential, Sigmoid,
    SiLU, Softmax, Tanh,
)


def clip_grad_norm_(parameters, max_norm):
    """Scales the gradients of parameters so that their global L2 norm is at most max_norm (the
    C++ nn::clip_grad_norm, as torch.nn.utils.clip_grad_norm_); returns the norm before clipping
    as a 0-d tensor on the gradients' device."""
    from tinyfin import _C
    return _C.nn.clip_grad_norm(list(parameters), float(max_norm))
