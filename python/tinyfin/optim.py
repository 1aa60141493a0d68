"""tinyfin.optim: SGD and AdamW, the C++ optimizers of include/tinyfin/nn.hpp (updates run on
each parameter's device, in place). One parameter group; lr is readable and settable."""
from tinyfin import _C


def _params(params):
    params = list(params)
    if params and isinstance(params[0], dict):
        raise TypeError("tinyfin.optim: parameter groups (dicts) are not supported; pass the tensors")
    return params


class SGD(_C.optim.SGD):
    def __init__(self, params, lr=1e-3, momentum=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(_params(params), lr, momentum, weight_decay, nesterov)

    def zero_grad(self, set_to_none=True):
        super().zero_grad()


class AdamW(_C.optim.AdamW):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(_params(params), lr, tuple(betas), eps, weight_decay)

    def zero_grad(self, set_to_none=True):
        super().zero_grad()


class WarmupCosine(_C.nn.WarmupCosine):
    """Learning rate at a step (the C++ nn::WarmupCosine): linear warmup from max_lr/warmup to
    max_lr over warmup steps, then cosine decay to min_lr at step total."""

    def __init__(self, max_lr, min_lr, warmup, total):
        super().__init__(max_lr, min_lr, warmup, total)
