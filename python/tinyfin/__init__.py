"""tinyfin from Python: tensors with autograd on pluggable backends (docs/python.md).

The compiled half is tinyfin._C (pybind11 over libtinyfin.so); this package adds the
PyTorch-shaped argument handling that is pure Python: creation from nested lists, method forms of
the ops, no_grad, the random seed, save/load and the backend report as a dict.
"""
import builtins as _builtins
import functools as _functools
import json as _json
import threading as _threading
from collections import namedtuple as _namedtuple

import numpy as _np

from . import _C
from . import _errors as _arg_errors

_arg_errors.wrap_module(_C)  # argument errors that name the argument, before the names are taken
_arg_errors.wrap_methods(_C.Tensor)
from ._C import (  # noqa: E402  # noqa: F401  (re-exported API)
    Tensor, device, dtype,
    Error, ShapeError, DTypeError, ValueError, DeviceError, BackendError, FallbackError,
    OutOfMemoryError, PluginError, AutogradError,
    add, sub, mul, div, pow, maximum, minimum, eq, ne, lt, le, gt, ge, relu_backward, gelu_backward,
    neg, exp, relu, abs, log, sqrt, rsqrt, sin, cos, tanh, erf, sigmoid, silu, square, gelu,
    asin, acos, atan, asinh, acosh, atanh,
    clamp, where, matmul, sum, mean, amax, amin, var, argmax, argmin, cumsum,
    conv2d, conv2d_activation, max_pool2d, avg_pool2d, softmax, log_softmax, layer_norm, rms_norm, rope,
    scaled_dot_product_attention, embedding, cross_entropy, one_hot,
    quantize, dequantize, matmul_q, embedding_q, prepack_weight, mark_constant,
    cat, stack, narrow, from_numpy, from_dlpack,
    backend_set, select_backend_for_memory, backend_name, default_device, available_backends, synchronize, op_names,
    reset_stats, is_grad_enabled,
)

float32 = dtype.float32
float16 = dtype.float16
half = float16
bfloat16 = dtype.bfloat16
int32 = dtype.int32
int64 = dtype.int64
long = int64
bool = dtype.bool
float = float32
# ggml's block-quantized formats (docs/quantization.md): weights for matmul_q and embedding_q.
q8_0, q4_0, q4_1, q5_0, q5_1 = dtype.q8_0, dtype.q4_0, dtype.q4_1, dtype.q5_0, dtype.q5_1
q4_k, q5_k, q6_k, q8_k = dtype.q4_k, dtype.q5_k, dtype.q6_k, dtype.q8_k
_DTYPE_NAMES = {float32: "float32", float16: "float16", bfloat16: "bfloat16", int32: "int32",
                int64: "int64", bool: "bool", q8_0: "q8_0", q4_0: "q4_0", q4_1: "q4_1", q5_0: "q5_0",
                q5_1: "q5_1", q4_k: "q4_k", q5_k: "q5_k", q6_k: "q6_k", q8_k: "q8_k"}
dtype.__repr__ = dtype.__str__ = lambda self: "tinyfin." + _DTYPE_NAMES[self]

__version__ = _C.__version__  # meson.build's project version
concat = cat
clip = clamp
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh  # torch's aliases

# ---- Random numbers -------------------------------------------------------------------------
# rand/randn in C++ take an explicit seed; a call without one draws the next stream of the
# global seed (manual_seed), so a program is reproducible on every backend.
_seed_lock = _threading.Lock()
_seed = [0, 0]  # [seed, calls]


def manual_seed(seed):
    """Sets the seed of rand/randn/Dropout calls made without an explicit seed."""
    with _seed_lock:
        _seed[0] = int(seed)
        _seed[1] = 0


def _next_seed():
    """The first draw after manual_seed(s) uses s itself (so manual_seed(0); randn(3) equals
    randn(3, seed=0)); later draws use streams mixed from s and the draw count."""
    with _seed_lock:
        s = _seed[0] if _seed[1] == 0 else _C.mix_seed(_seed[0], _seed[1])
        _seed[1] += 1
    return s


# ---- Creation -------------------------------------------------------------------------------

def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, int) or isinstance(s, type(True)):
            raise ShapeError(f"sizes must be integers, got {type(s).__name__}")
    return list(size)


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad_(True)
    return t


_NUMPY_TO_TINYFIN = {
    _np.dtype("float32"): float32, _np.dtype("float16"): float16, _np.dtype("int32"): int32,
    _np.dtype("int64"): int64, _np.dtype("bool"): bool,
}
_TINYFIN_TO_NUMPY = {float32: "float32", float16: "float16", int32: "int32", int64: "int64",
                     bool: "bool", bfloat16: "float32"}


def _as_array(data):
    """Nested lists/numbers/arrays -> a numpy array, with clear errors for what is not data."""
    if isinstance(data, Tensor):
        return data.detach().cpu().numpy()
    if data is None:
        raise DTypeError("tensor: data is None; pass a number, a nested list or an array")
    try:
        a = data if isinstance(data, _np.ndarray) else _np.array(data)
    except (_builtins.ValueError, _builtins.TypeError) as e:  # ragged lists: numpy 1.24 raises ValueError
        raise ShapeError(f"tensor: data is not a rectangular nested list of numbers ({e})") from None
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise DTypeError("tensor: data must hold numbers or bools only (a ragged list, None or "
                         f"strings inside?), numpy read it as {a.dtype}")
    return a


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of data (nested lists, numbers, numpy arrays, tensors).

    Default dtypes as in PyTorch: floats -> float32, ints -> int64, bools -> bool; a numpy array
    keeps its dtype when tinyfin has it (float64 becomes float32)."""
    a = _as_array(data)
    if dtype is None:
        kind = a.dtype.kind
        dtype = (bool if kind == "b" else _NUMPY_TO_TINYFIN.get(a.dtype) or
                 (int64 if kind in "iu" else float32))
    elif not isinstance(dtype, _C.dtype):
        dtype = _C._full([], 0, dtype, None).dtype  # validates names such as "float32"
    host = _TINYFIN_TO_NUMPY[dtype]
    a = _np.require(a, dtype=host, requirements="C")  # keeps rank 0 (ascontiguousarray does not)
    t = _C._from_host(a, _NUMPY_TO_TINYFIN[a.dtype], device)
    if dtype == bfloat16:
        t = t.to(bfloat16)
    return _finish(t, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like tensor(), but a tensor of the right dtype and device is returned as is and a
    numpy array is shared when from_numpy can (no dtype or device change asked)."""
    if isinstance(data, Tensor) and (dtype is None or data.dtype == dtype) and (
            device is None or data.device == device):
        return data
    if isinstance(data, _np.ndarray) and dtype is None and device is None and \
            data.dtype in _NUMPY_TO_TINYFIN:
        return from_numpy(data)
    if dtype is None and device is None and not isinstance(data, (Tensor, _np.ndarray)) and \
            hasattr(data, "__dlpack__") and hasattr(data, "__dlpack_device__"):
        try:  # a PyTorch (or other DLPack) tensor in host memory: shared, as numpy arrays are
            return from_dlpack(data)
        except Exception:  # noqa: BLE001  (torch raises RuntimeError for a tensor that requires grad)
            pass  # a device, dtype or tensor DLPack export/import does not take: copy below
    if hasattr(data, "detach") and hasattr(data, "numpy") and not isinstance(data, (Tensor, _np.ndarray)):
        data = data.detach().cpu().numpy()  # e.g. a torch tensor of a dtype DLPack import refuses
    return tensor(data, dtype=dtype, device=device)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _finish(_C._empty(_size(size), dtype, device), requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _finish(_C._full(_size(size), 0.0, dtype, device), requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _finish(_C._full(_size(size), 1.0, dtype, device), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = bool if isinstance(fill_value, type(True)) else (
            int64 if isinstance(fill_value, int) else float32)
    return _finish(_C._full(_size((size,)), fill_value, dtype, device), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """start, start+step, ... < end; int64 when all of start, end, step are ints (as PyTorch)."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, int) for v in (start, end, step))
        dtype = int64 if ints else float32
    return _finish(_C._arange(start, end, step, dtype, device), requires_grad)


def rand(*size, seed=None, dtype=None, device=None, requires_grad=False):
    """Uniform [0, 1); seed=None draws the next stream of manual_seed's seed."""
    t = _C._rand(_size(size), _next_seed() if seed is None else seed, device)
    return _finish(t if dtype in (None, float32) else t.to(dtype), requires_grad)


def randn(*size, seed=None, dtype=None, device=None, requires_grad=False):
    t = _C._randn(_size(size), _next_seed() if seed is None else seed, device)
    return _finish(t if dtype in (None, float32) else t.to(dtype), requires_grad)


def _like(fn):
    @_functools.wraps(fn)
    def like(input, dtype=None, device=None, requires_grad=False, **kw):
        return fn(*input.shape, dtype=dtype or input.dtype, device=device or input.device,
                  requires_grad=requires_grad, **kw)
    like.__name__ = fn.__name__ + "_like"
    return like


empty_like, zeros_like, ones_like = _like(empty), _like(zeros), _like(ones)


def rand_like(input, seed=None, device=None, requires_grad=False):
    return rand(*input.shape, seed=seed, dtype=input.dtype, device=device or input.device,
                requires_grad=requires_grad)


def randn_like(input, seed=None, device=None, requires_grad=False):
    return randn(*input.shape, seed=seed, dtype=input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False):
    return full(input.shape, fill_value, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


# ---- Ops with PyTorch's argument juggling -----------------------------------------------------

_MaxMin = _namedtuple("max", ["values", "indices"])


def max(input, dim=None, keepdim=False):
    """max(t): the largest element; max(t, dim): (values, indices) as in PyTorch;
    max(a, b): elementwise maximum."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if isinstance(dim, int):
        return _MaxMin(amax(input, dim, keepdim), argmax(input, dim, keepdim))
    return amax(input, dim, keepdim)


def min(input, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if isinstance(dim, int):
        return _MaxMin(amin(input, dim, keepdim), argmin(input, dim, keepdim))
    return amin(input, dim, keepdim)


def std(input, dim=None, correction=1, keepdim=False):
    return sqrt(var(input, dim, correction=correction, keepdim=keepdim))


def split(tensor, split_size_or_sections, dim=0):
    """Views of pieces of the given size (an int: equal pieces, the last may be shorter)."""
    n = tensor.shape[dim]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0:
            raise ValueError(f"split: split_size must be positive, got {size}")
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
    else:
        sizes = list(split_size_or_sections)
    return tuple(_C._split(tensor, sizes, dim))


def chunk(input, chunks, dim=0):
    n = input.shape[dim]
    return split(input, -(-n // chunks), dim)


def pad(input, pad, mode="constant", value=0.0):
    """torch.nn.functional.pad: pad lists (before, after) pairs from the last axis backwards."""
    if mode != "constant":
        raise ValueError(f"pad: only mode='constant' is supported, got {mode!r}")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad: {len(pad)} values do not pair up over a tensor of rank {input.ndim}")
    pads = [0] * (2 * input.ndim)
    for i in range(len(pad) // 2):
        axis = input.ndim - 1 - i
        pads[2 * axis], pads[2 * axis + 1] = pad[2 * i], pad[2 * i + 1]
    return _C._pad(input, pads, value)


def reshape(input, shape):
    return input.reshape(shape)


def flatten(input, start_dim=0, end_dim=-1):
    return input.flatten(start_dim, end_dim)


def transpose(input, dim0, dim1):
    return input.transpose(dim0, dim1)


def permute(input, dims):
    return input.permute(dims)


def squeeze(input, dim=None):
    return input.squeeze(dim)


def unsqueeze(input, dim):
    return input.unsqueeze(dim)


def numel(input):
    return input.numel()


def allclose(input, other, rtol=1e-5, atol=1e-8):
    return _np.allclose(input.detach().cpu().numpy(), other.detach().cpu().numpy(), rtol, atol)


# ---- Autograd mode ----------------------------------------------------------------------------

_grad_modes = _threading.local()  # per thread: the modes to restore, innermost last


class _GradMode:
    """A context manager and decorator that sets grad mode on this thread and restores it."""
    _enabled = False

    def __enter__(self):
        stack = getattr(_grad_modes, "stack", None)
        if stack is None:
            stack = _grad_modes.stack = []
        stack.append(is_grad_enabled())
        _C._set_grad_enabled(self._enabled)
        return None

    def __exit__(self, *exc):
        _C._set_grad_enabled(_grad_modes.stack.pop())
        return False

    def __call__(self, fn):
        mode = self

        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with mode:
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Disables autograd recording on this thread: `with tinyfin.no_grad():` or `@tinyfin.no_grad()`."""
    _enabled = False


class enable_grad(_GradMode):
    """Enables recording on this thread, also inside no_grad."""
    _enabled = True


class inference_mode(_GradMode):
    """no_grad under PyTorch's other name (tinyfin has no separate inference tensors);
    inference_mode(False) enables grad mode."""

    def __init__(self, mode=True):
        self._enabled = not mode


class set_grad_enabled(_GradMode):
    """set_grad_enabled(False) turns recording off on this thread now; as a context manager it
    restores the previous mode on exit (as torch.set_grad_enabled)."""

    def __init__(self, mode):
        self._previous = is_grad_enabled()
        self._enabled = _builtins.bool(mode)
        _C._set_grad_enabled(self._enabled)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._previous)
        return False


# ---- Backends and the report ------------------------------------------------------------------

def info():
    """The registry report as a dict: the same document as `tinyfin-info --json`."""
    return _json.loads(_C.report_json())


def backends():
    """Loaded, usable backends best first, each {"name", "priority", "devices": [{"name",
    "kind", "memory_total", "memory_free", "host_addressable"}]} (from info())."""
    report = info()
    by_name = {p["name"]: p for p in report["plugins"] if p["outcome"] == "loaded"}
    out = []
    for name in available_backends():
        p = by_name.get(name, {})
        out.append({"name": name, "priority": p.get("priority", 0), "devices": p.get("devices", [])})
    return out


def stats():
    """Per-backend op, transfer and allocation counters (ops, bytes_to_device, bytes_to_host,
    allocations, bytes_allocated, bytes_in_use, peak_bytes_in_use since reset_stats()) and the
    fallbacks, as a dict."""
    return _C.stats()


# ---- Files ----------------------------------------------------------------------------------
# A dict of name -> Tensor is a plain TFNN file (the same as C++ nn::save writes and nn::load
# reads). Anything else (nested dicts, lists, numbers, strings: a checkpoint such as
# {"model": sd, "optim": osd, "step": 300}) is stored as its tensors, named by position, plus one
# entry holding the structure as JSON text; loading parses that JSON and nothing else (no pickle,
# no code runs), and accepts only the types listed here.

_STRUCTURE = "__tinyfin_structure_v1__"


def _file_arg(f, op, mode):
    """('path', str) for a path-like, ('file', f) for a binary file object; TypeError otherwise."""
    import os
    if isinstance(f, (str, bytes, os.PathLike)):
        path = os.fsdecode(os.fspath(f))
        return "path", path
    needed = "write" if mode == "w" else "read"
    if hasattr(f, needed) and not isinstance(f, Tensor):
        if isinstance(f, __import__("io").TextIOBase):
            raise _builtins.TypeError(f"{op}: the file object is in text mode; open it with "
                                      f"open(..., \"{mode}b\")")
        return "file", f
    raise _builtins.TypeError(f"{op}: f must be a path (str, bytes or os.PathLike) or a binary file "
                              f"object with .{needed}(), got {type(f).__name__}")


def _flatten(obj, tensors, op):
    if isinstance(obj, Tensor):
        name = f"t{len(tensors)}"
        tensors.append((name, obj.detach()))
        return {"$tensor": name}
    if obj is None or isinstance(obj, (_builtins.bool, int, str)):
        return obj
    if isinstance(obj, _builtins.float):
        return obj if _np.isfinite(obj) else {"$float": repr(obj)}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not (k is None or isinstance(k, (_builtins.bool, int, _builtins.float, str))):
                raise _builtins.TypeError(f"{op}: dict keys must be str, int, float, bool or None, "
                                          f"got {type(k).__name__}")
            items.append([k, _flatten(v, tensors, op)])
        return {"$dict": items}
    if isinstance(obj, (list, tuple)):
        return {"$list" if isinstance(obj, list) else "$tuple": [_flatten(v, tensors, op) for v in obj]}
    if isinstance(obj, (_np.integer, _np.floating, _np.bool_)):
        return _flatten(obj.item(), tensors, op)
    from .nn import Module
    if isinstance(obj, Module):
        return _flatten(obj.state_dict(), tensors, op)
    raise _builtins.TypeError(f"{op}: cannot save a {type(obj).__name__}; tensors, dicts, lists, "
                              "tuples, numbers, strings, bools and None can be saved")


def _unflatten(node, tensors, depth=0):
    if depth > 1000:
        raise ValueError("load: the checkpoint's structure is nested too deeply")
    if node is None or isinstance(node, (_builtins.bool, int, _builtins.float, str)):
        return node
    if isinstance(node, dict) and len(node) == 1:
        (kind, value), = node.items()
        if kind == "$tensor" and isinstance(value, str) and value in tensors:
            return tensors[value]
        if kind == "$float" and value in ("nan", "inf", "-inf"):
            return _builtins.float(value)
        if kind == "$dict" and isinstance(value, list):
            out = {}
            for item in value:
                if not (isinstance(item, list) and len(item) == 2):
                    break
                out[item[0]] = _unflatten(item[1], tensors, depth + 1)
            else:
                return out
        if kind in ("$list", "$tuple") and isinstance(value, list):
            items = [_unflatten(v, tensors, depth + 1) for v in value]
            return items if kind == "$list" else tuple(items)
    raise ValueError("load: the checkpoint's structure entry is malformed")


def save(obj, f):
    """Writes obj to f (a path or a binary file object opened for writing): a Module's
    state_dict or a dict of name -> Tensor as a TFNN file (docs/nn.md; C++ nn::load reads it),
    or a checkpoint of nested dicts, lists and tuples of tensors and plain values."""
    from .nn import Module
    kind, target = _file_arg(f, "save", "w")
    state = obj.state_dict() if isinstance(obj, Module) else obj
    flat = isinstance(state, dict) and state and _builtins.all(
        isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()) and _STRUCTURE not in state
    if flat:
        items = [(k, v.detach()) for k, v in state.items()]
    else:
        items = []
        structure = _json.dumps(_flatten(state, items, "save"), allow_nan=False)
        raw = structure.encode("utf-8")
        raw += b" " * (-len(raw) % 4)
        items.append((_STRUCTURE, _C._from_host(_np.frombuffer(raw, dtype="<i4").copy(), int32, "cpu")))
    if kind == "path":
        _C.nn.save(target, items)
        return
    import os
    import tempfile
    with tempfile.TemporaryDirectory(prefix="tinyfin-save-") as tmp:
        path = os.path.join(tmp, "checkpoint.tfnn")
        _C.nn.save(path, items)
        with open(path, "rb") as src:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                target.write(chunk)


def load(f, map_location=None):
    """Reads what save wrote (or C++ nn::save) from f, a path or a binary file object: a dict
    of name -> Tensor on map_location (the default device when None), or the saved checkpoint
    structure. Only JSON and tensors are read: loading runs no code."""
    from collections import OrderedDict
    kind, source = _file_arg(f, "load", "r")
    if kind == "path":
        entries = _C.nn.load_all(source, map_location)
    else:
        import os
        import tempfile
        with tempfile.TemporaryDirectory(prefix="tinyfin-load-") as tmp:
            path = os.path.join(tmp, "checkpoint.tfnn")
            with open(path, "wb") as dst:
                while True:
                    chunk = source.read(1 << 20)
                    if not chunk:
                        break
                    dst.write(chunk)
            entries = _C.nn.load_all(path, map_location)
    tensors = OrderedDict(entries)
    if _STRUCTURE not in tensors:
        return tensors
    raw = tensors.pop(_STRUCTURE)
    if raw.dtype != int32 or raw.ndim != 1:
        raise ValueError("load: the checkpoint's structure entry is malformed")
    try:
        node = _json.loads(raw.cpu().numpy().astype("<i4").tobytes().decode("utf-8"))
    except (_builtins.ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"load: the checkpoint's structure entry is not JSON ({e})") from None
    return _unflatten(node, tensors)


# ---- Devices ---------------------------------------------------------------------------------
# Python follows PyTorch: an op on tensors of two devices is a DeviceError naming both (cpu
# scalars excepted). set_mixed_devices("move") brings back the C++ default (the op runs on the
# best backend's device, copies counted in stats()).
set_mixed_devices = _C.set_mixed_devices
get_mixed_devices = _C.get_mixed_devices
set_mixed_devices("strict")

_device_selections = _threading.local()


def _device_enter(self):
    """`with tinyfin.device("vulkan:0"):` makes factories without device= place tensors there
    (it selects the backend, process-wide, as backend_set does) and restores the selection."""
    if self.index != 0:
        raise ValueError(f"with device({str(self)!r}): factories use a backend's device 0; pass "
                         "device= to each factory for another index")
    stack = getattr(_device_selections, "stack", None)
    if stack is None:
        stack = _device_selections.stack = []
    stack.append(info()["selection"]["requested"] or "auto")
    if not backend_set(self.type):
        backend_set(stack.pop())
        raise DeviceError(f"with device({str(self)!r}): backend {self.type!r} is not usable; see tinyfin.info()")
    return self


def _device_exit(self, *exc):
    backend_set(_device_selections.stack.pop())
    return False


device.__enter__ = _device_enter
device.__exit__ = _device_exit


def is_tensor(obj):
    return isinstance(obj, Tensor)


from ._indexing import flip, index_select  # noqa: E402
from . import _tensor  # noqa: E402,F401  (methods on Tensor)
from . import nn, optim  # noqa: E402,F401
from . import amp, utils  # noqa: E402,F401
from .amp import autocast, GradScaler  # noqa: E402,F401

from . import _api  # noqa: E402,F401  (isnan, randint, linspace, true division, ...)
from ._api import *  # noqa: E402,F401,F403

# `from tinyfin import *` exports the public names that do not shadow Python's builtins (sum,
# max, abs, pow, ValueError, bool, float...): reach those as tinyfin.sum.
__all__ = sorted(name for name in dir() if not name.startswith("_") and not hasattr(_builtins, name)
                 and name not in ("annotations",))
