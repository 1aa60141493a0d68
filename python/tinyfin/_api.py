"""Everyday functions PyTorch users reach for that are compositions of tinyfin's ops: isnan,
isinf, isfinite, randint, randperm, linspace, and div with true division and rounding_mode."""
import builtins as _builtins
import math as _math

import numpy as _np

import tinyfin as _tf
from . import _C

__all__ = ["isnan", "isinf", "isfinite", "randint", "randperm", "linspace", "div", "true_divide"]


def _is_float(t):
    return t.dtype.is_floating_point


def isnan(input):
    """True where input is NaN (never for integer tensors)."""
    if not _is_float(input):
        return _tf.zeros(*input.shape, dtype=_tf.bool, device=input.device)
    return input != input


def isinf(input):
    """True where input is +inf or -inf."""
    if not _is_float(input):
        return _tf.zeros(*input.shape, dtype=_tf.bool, device=input.device)
    return _tf.abs(input.detach()) == _math.inf


def isfinite(input):
    """True where input is neither NaN nor infinite: x - x is 0 exactly for finite x and NaN
    for NaN and +-inf."""
    if not _is_float(input):
        return _tf.ones(*input.shape, dtype=_tf.bool, device=input.device)
    x = input.detach()
    return (x - x) == 0


def randint(low, high=None, size=None, *, seed=None, dtype=None, device=None, generator=None):
    """Integers uniform in [low, high) (randint(high, size) starts at 0), int64 by default; seed
    as rand's. Drawn as floor(u * (high - low)) + low from rand's uniform u."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise _builtins.TypeError("randint: size (a tuple) is required, as randint(low, high, size)")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    low, high = int(low), int(high)
    if high <= low:
        raise _tf.ValueError(f"randint: high ({high}) must be greater than low ({low})")
    if high - low > 1 << 24:
        raise _tf.ValueError(f"randint: a range of {high - low} values is more than float32's 2^24 "
                             "steps can draw uniformly")
    size = tuple(size) if isinstance(size, (tuple, list)) else (size,)
    u = _tf.rand(*size, seed=seed, device=device)
    k = (u * float(high - low)).to(_tf.int64)  # u >= 0: the cast truncates, i.e. floors
    k = _tf.minimum(k, _tf.full((), high - low - 1, dtype=_tf.int64, device=k.device))
    out = k + low
    return out if dtype in (None, _tf.int64) else out.to(dtype)


def randperm(n, *, seed=None, dtype=None, device=None):
    """A random permutation of 0..n-1 (int64), reproducible from seed or manual_seed."""
    n = int(n)
    if n < 0:
        raise _tf.ValueError(f"randperm: n must be >= 0, got {n}")
    s = _tf._next_seed() if seed is None else int(seed)
    perm = _np.random.default_rng(s).permutation(n).astype(_np.int64)
    return _tf.tensor(perm, dtype=dtype or _tf.int64, device=device)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """steps values from start to end inclusive, evenly spaced (computed in float64, then cast)."""
    steps = int(steps)
    if steps < 0:
        raise _tf.ValueError(f"linspace: steps must be >= 0, got {steps}")
    values = _np.linspace(float(start), float(end), steps, dtype=_np.float64)
    t = _tf.tensor(values.astype(_np.float32), device=device)
    if dtype not in (None, _tf.float32):
        t = t.to(dtype)
    return _tf._finish(t, requires_grad)


_c_div = _C.div


def div(input, other, *, rounding_mode=None, out=None):
    """input / other. rounding_mode None: true division (integers divide as float32, as Python
    and PyTorch); "trunc": rounded toward zero; "floor": rounded down."""
    if rounding_mode not in (None, "trunc", "floor"):
        raise _tf.ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    if rounding_mode is None:
        if out is not None:
            return _c_div(input, other, out=out)
        return input / other if isinstance(input, _tf.Tensor) else other.__rtruediv__(input)
    a = input if isinstance(input, _tf.Tensor) else _tf.tensor(input)
    b = other if isinstance(other, _tf.Tensor) else _tf.full((), other, dtype=a.dtype, device=a.device)
    if not _is_float(a) and not _is_float(b):
        q = _c_div(a, b)  # integer division truncates toward zero
        if rounding_mode == "floor":
            r = a - q * b
            nonzero = r != 0
            below = _tf.where(nonzero, (r < 0) != (b < 0), _tf.zeros_like(nonzero))
            q = _tf.where(below, q - 1, q)
        return q
    q = a / b
    qi = q.to(_tf.int64).to(q.dtype)  # truncation toward zero (finite values)
    if rounding_mode == "floor":
        qi = qi - _tf.where(qi > q, _tf.ones_like(qi), _tf.zeros_like(qi))
    return qi


true_divide = div


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


for _fn in (isnan, isinf, isfinite, div):
    setattr(_tf.Tensor, _fn.__name__, _method(_fn))
_tf.Tensor.divide = _tf.Tensor.true_divide = _tf.Tensor.div


# ---- new_* and to(non_blocking=, copy=) --------------------------------------------------------

def _new(factory):
    def method(self, *size, dtype=None, device=None, requires_grad=False, **kw):
        return factory(*size, dtype=dtype or self.dtype, device=device or self.device,
                       requires_grad=requires_grad, **kw)
    method.__name__ = "new_" + factory.__name__
    method.__doc__ = f"tinyfin.{factory.__name__} with this tensor's dtype and device unless given."
    return method


_tf.Tensor.new_zeros = _new(_tf.zeros)
_tf.Tensor.new_ones = _new(_tf.ones)
_tf.Tensor.new_empty = _new(_tf.empty)


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    return _tf.full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                    requires_grad=requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return _tf.tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


_tf.Tensor.new_full = _new_full
_tf.Tensor.new_tensor = _new_tensor

_to = _tf.Tensor.to


def _to_with_flags(self, *args, non_blocking=False, copy=False, **kwargs):
    """Tensor.to(device or dtype, ...); non_blocking is accepted and ignored (copies are ordered
    on tinyfin's queues); copy=True returns a new tensor even when nothing changes."""
    out = _to(self, *args, **kwargs)
    if copy and out.shares_storage(self):
        out = out.clone()
    return out


_to_with_flags.__name__ = "to"
_tf.Tensor.to = _to_with_flags


# ---- Reductions with numpy's spellings (axis=, keepdims=) and dtype= ---------------------------

def _reduction(fn, name):
    def reduce(input, dim=None, *args, axis=None, keepdims=None, dtype=None, **kwargs):
        if axis is not None:
            if dim is not None:
                raise _builtins.TypeError(f"{name}: pass dim or axis, not both")
            dim = axis
        if keepdims is not None:
            if "keepdim" in kwargs:
                raise _builtins.TypeError(f"{name}: pass keepdim or keepdims, not both")
            kwargs["keepdim"] = keepdims
        if "unbiased" in kwargs:  # torch.var(x, unbiased=False): the older name of correction
            kwargs["correction"] = 1 if kwargs.pop("unbiased") else 0
        if dtype is not None:
            input = input.to(dtype)
        if isinstance(dim, list):
            dim = tuple(dim)
        return fn(input, dim, *args, **kwargs)
    reduce.__name__ = name
    reduce.__doc__ = (f"tinyfin.{name}(input, dim=None, keepdim=False): dim also as numpy's axis=, keepdim as "
                      "keepdims=; dtype= casts the input first (as PyTorch).")
    return reduce


_REDUCTIONS = ["sum", "mean", "amax", "amin", "var", "std", "argmax", "argmin", "max", "min"]
for _name in _REDUCTIONS:
    _wrapped = _reduction(getattr(_tf, _name), _name)
    globals()[_name] = _wrapped
    setattr(_tf.Tensor, _name, _method(_wrapped))
for _name in ("any", "all"):
    setattr(_tf.Tensor, _name, _method(_reduction(getattr(_tf.Tensor, _name), _name)))
__all__ += _REDUCTIONS


# ---- In-place forms (t.relu_(), t.clamp_(0, 1), ...) --------------------------------------------
# Each computes the op and writes it back with copy_, which autograd records as an in-place write
# (the tensor's history becomes the op's; a rule that saved the old values refuses to run, naming
# the op). The op reads a clone when autograd records, so the op's own rule never sees the write.

def _inplace(fn, name):
    def method(self, *args, **kwargs):
        recording = _tf.is_grad_enabled() and self.requires_grad and not self.is_leaf
        out = fn(self.clone() if recording else self, *args, **kwargs)
        if out.dtype != self.dtype:
            raise _tf.DTypeError(f"{name}: the result is {out.dtype}, which cannot be written into a "
                                 f"{self.dtype} tensor; use the out-of-place form")
        return self.copy_(out)
    method.__name__ = name
    method.__doc__ = f"In-place {name[:-1]}: writes the result into this tensor and returns it."
    return method


for _name in ["relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "square", "sin", "cos",
              "erf", "silu", "gelu", "clamp", "masked_fill", "asin", "acos", "atan", "asinh", "acosh", "atanh"]:
    setattr(_tf.Tensor, _name + "_", _inplace(getattr(_tf.Tensor, _name), _name + "_"))
_tf.Tensor.clip_ = _tf.Tensor.clamp_
_tf.Tensor.negative_ = _tf.Tensor.neg_


def _with_alpha(c_method, name):
    def method(self, other, *, alpha=1):
        if alpha != 1:
            other = other * alpha
        return c_method(self, other)
    method.__name__ = name
    method.__doc__ = f"self {'+' if name == 'add_' else '-'}= alpha * other, in place (as PyTorch's {name})."
    return method


_tf.Tensor.add_ = _with_alpha(_tf.Tensor.add_, "add_")
_tf.Tensor.sub_ = _with_alpha(_tf.Tensor.sub_, "sub_")


def _addcmul_(self, tensor1, tensor2, *, value=1):
    return self.add_(tensor1 * tensor2 * value)


def _addcdiv_(self, tensor1, tensor2, *, value=1):
    return self.add_(tensor1 / tensor2 * value)


def _lerp_(self, end, weight):
    return self.add_((end - self) * weight)


def _uniform_(self, a=0.0, b=1.0, *, seed=None):
    from .nn import init
    return init.uniform_(self, a, b, seed=seed)


def _normal_(self, mean=0.0, std=1.0, *, seed=None):
    from .nn import init
    return init.normal_(self, mean, std, seed=seed)


for _fn, _n in ((_addcmul_, "addcmul_"), (_addcdiv_, "addcdiv_"), (_lerp_, "lerp_"), (_uniform_, "uniform_"),
                (_normal_, "normal_")):
    _fn.__name__ = _n
    setattr(_tf.Tensor, _n, _fn)


# ---- einsum -------------------------------------------------------------------------------------
from ._einsum import einsum  # noqa: E402
__all__.append("einsum")


# ---- tril / triu (causal masks) -----------------------------------------------------------------

def _triangle(input, diagonal, lower):
    if input.ndim < 2:
        raise _tf.ShapeError(f"{'tril' if lower else 'triu'}: expected a tensor of rank >= 2, got shape "
                             f"{tuple(input.shape)}")
    n, m = input.shape[-2], input.shape[-1]
    offset = _tf.arange(m, device=input.device).reshape(1, m) - _tf.arange(n, device=input.device).reshape(n, 1)
    keep = offset <= diagonal if lower else offset >= diagonal
    return _tf.where(keep, input, _tf.zeros_like(input))


def tril(input, diagonal=0):
    """The elements on and below the diagonal-th diagonal of the last two dims, zeros elsewhere."""
    return _triangle(input, diagonal, True)


def triu(input, diagonal=0):
    """The elements on and above the diagonal-th diagonal of the last two dims, zeros elsewhere."""
    return _triangle(input, diagonal, False)


_tf.Tensor.tril = _method(tril)
_tf.Tensor.triu = _method(triu)
__all__ += ["tril", "triu"]


def _data_ptr(self):
    """The address of the first element in host memory (0 on a device the host cannot address)."""
    return _C._host_address(self)


_tf.Tensor.data_ptr = _data_ptr
