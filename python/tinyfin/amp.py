"""tinyfin.amp: mixed precision with PyTorch's names (docs/numerics.md).

    with tinyfin.autocast("bf16"):          # or tinyfin.bfloat16, "float16", enabled=False
        loss = F.cross_entropy(model(x), y)  # matmul/linear/conv2d/attention in bf16, the rest f32
    scaler = tinyfin.amp.GradScaler()       # f16 only: dynamic loss scaling
    scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
"""
import functools as _functools
import threading as _threading

from tinyfin import _C


class autocast:
    """Runs the ops of autocast's low-precision list in `dtype` (f16 or bf16) on this thread while
    the block runs; precision-sensitive ops in f32; parameters and their gradients stay f32.
    Nestable; `autocast(enabled=False)` or `autocast(tinyfin.float32)` turns it off inside.
    Also a decorator: `@tinyfin.autocast("bf16")`."""

    def __init__(self, dtype="bfloat16", enabled=True):
        # Validated now (DTypeError for a non-float dtype) rather than at __enter__.
        _C.amp._Autocast(dtype, enabled)
        self.dtype = dtype
        self.enabled = enabled
        self._scopes = _threading.local()

    def __enter__(self):
        stack = getattr(self._scopes, "stack", None)
        if stack is None:
            stack = self._scopes.stack = []
        scope = _C.amp._Autocast(self.dtype, self.enabled)
        scope.__enter__()
        stack.append(scope)
        return self

    def __exit__(self, *exc):
        self._scopes.stack.pop().__exit__(*exc)
        return False

    def __call__(self, fn):
        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.dtype, self.enabled):
                return fn(*args, **kwargs)
        return wrapper


def get_autocast_dtype():
    """The dtype of this thread's innermost autocast scope, or None when autocast is off."""
    return _C.amp.autocast_dtype()


def is_autocast_enabled():
    return _C.amp.autocast_dtype() is not None


class GradScaler(_C.amp.GradScaler):
    """torch.cuda.amp.GradScaler's rules: scale(loss), step(optimizer) skips on inf/NaN gradients,
    update() backs off or grows the scale. state_dict() is a dict of two tensors to save with
    tinyfin.save beside the model's; load_state_dict reads them back."""

    def state_dict(self):
        return dict(self._state())

    def load_state_dict(self, state):
        self._load_state(list(state.items()))
