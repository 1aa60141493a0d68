"""Methods of tinyfin.Tensor that are written in Python: numpy/DLPack interop, printing,
tolist, and the method forms of the ops (t.sum(), t.exp(), ...)."""
import builtins

import numpy as np

import tinyfin as tf
from . import _C

Tensor = _C.Tensor


def numpy(self, force=False):
    """A numpy array sharing this tensor's memory (cpu, blas). On a device whose memory the
    host cannot address (vulkan, opengl, cuda) this raises DeviceError: call .to("cpu") first,
    or pass force=True for an explicit copy."""
    t = self
    if force:
        t = t.detach()
        if t.host_data_is_null():
            t = t.cpu()
        if t.dtype == tf.bfloat16:
            t = t.float()
    return _C._to_numpy(t)


def _host_data_is_null(self):
    return self.numel() > 0 and _C._host_address(self) == 0


def __array__(self, dtype=None):
    a = _C._to_numpy(self)
    return a if dtype is None else a.astype(dtype, copy=False)


def __dlpack__(self, stream=None):
    if stream is not None and stream != -1:
        raise tf.ValueError("__dlpack__: tinyfin's exportable tensors are in host memory; stream must be None")
    return _C._to_dlpack(self)


def __dlpack_device__(self):
    return _C._dlpack_device(self)


def _host_copy(t):
    t = t.detach()
    if t.dtype == tf.bfloat16:
        t = t.float()
    if t.numel() > 0 and _C._host_address(t) == 0:
        t = t.cpu()
    return _C._to_numpy(t)


def tolist(self):
    a = _host_copy(self)
    return a.tolist() if a.ndim else a.item()


def __repr__(self):
    """Values as numpy prints them, then what differs from the defaults (as PyTorch)."""
    a = _host_copy(self)
    prefix = "tensor("
    body = np.array2string(a, separator=", ", prefix=prefix) if a.size else "[]"
    extras = []
    if a.size == 0 and a.ndim != 1:
        extras.append(f"size={tuple(self.shape)}")
    if self.dtype not in (tf.float32, tf.int64, tf.bool):
        extras.append(f"dtype={self.dtype!r}")
    if self.device.type != "cpu":
        extras.append(f"device='{self.device}'")
    if self.requires_grad:
        extras.append("requires_grad=True")
    return prefix + body + "".join(", " + e for e in extras) + ")"


def __iter__(self):
    if self.ndim == 0:
        raise tf.DTypeError("iteration over a rank-0 tensor")
    return (self[i] for i in range(self.shape[0]))


def __format__(self, spec):
    if self.ndim == 0:
        return format(self.item(), spec)
    return builtins.format(repr(self), spec)


def __reduce__(self):
    return (_rebuild, (_host_copy(self).copy(), self.dtype, str(self.device), self.requires_grad))


def _rebuild(array, dtype, device, requires_grad):
    return tf.tensor(array, dtype=dtype, device=device, requires_grad=requires_grad)


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


for _name in ["exp", "log", "relu", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid", "silu",
              "square", "abs", "neg", "gelu", "clamp", "sum", "mean", "amax", "amin", "var", "std",
              "argmax", "argmin", "max", "min", "softmax", "log_softmax", "matmul", "pow", "maximum",
              "minimum", "eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "div", "split",
              "chunk", "allclose", "flip", "index_select", "cumsum", "asin", "acos", "atan", "asinh", "acosh",
              "atanh"]:
    setattr(Tensor, _name, _method(getattr(tf, _name)))
Tensor.clip = Tensor.clamp
Tensor.negative = Tensor.neg
Tensor.multiply = Tensor.mul
Tensor.divide = Tensor.div
Tensor.subtract = Tensor.sub


def where(self, condition, other):
    return tf.where(condition, self, other)


def any(self, dim=None, keepdim=False):
    return tf.amax((self != 0).int(), dim, keepdim) != 0


def all(self, dim=None, keepdim=False):
    return tf.amin((self != 0).int(), dim, keepdim) != 0


def masked_fill(self, mask, value):
    return tf.where(mask, tf.full_like(self, value), self)


def type_as(self, other):
    return self.to(other.dtype)


for _fn in [numpy, __array__, __dlpack__, __dlpack_device__, tolist, __repr__, __iter__, __format__,
            __reduce__, where, any, all, masked_fill, type_as]:
    setattr(Tensor, _fn.__name__, _fn)
Tensor.host_data_is_null = _host_data_is_null
Tensor.__str__ = __repr__
Tensor.__array_priority__ = 1000  # numpy defers `array + tensor` to Tensor.__radd__
