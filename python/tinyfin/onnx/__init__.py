"""tinyfin.onnx: ONNX models on tinyfin's backends (libtinyfin-onnx, docs/onnx.md), with ONNX
Runtime's names so that switching is one line:

    import tinyfin.onnx
    sess = tinyfin.onnx.InferenceSession("model.onnx", backend="vulkan")
    [y] = sess.run(None, {"x": x})           # numpy arrays in and out
    sess.get_inputs()[0].name, .shape, .type

Built when tinyfin is built with Debian's libonnx-dev; importing it otherwise raises ImportError.
`import tinyfin` alone never loads protobuf. tinyfin.onnx.backend implements
onnx.backend.base.Backend for ONNX's backend-test machinery.
"""
import os as _os

import numpy as _np

try:
    from .. import _onnx
except ImportError as _e:  # built without libonnx
    raise ImportError("tinyfin.onnx needs tinyfin built with libonnx (Debian libonnx-dev, "
                      f"libprotobuf-dev; meson -Donnx=enabled): {_e}") from None

ModelError = _onnx.ModelError
UnsupportedError = _onnx.UnsupportedError
InputError = _onnx.InputError

# ONNX's TensorProto.DataType numbers <-> numpy dtypes and ONNX Runtime's type strings.
_NUMPY = {1: _np.float32, 2: _np.uint8, 3: _np.int8, 4: _np.uint16, 5: _np.int16, 6: _np.int32,
          7: _np.int64, 9: _np.bool_, 10: _np.float16, 11: _np.float64, 12: _np.uint32, 13: _np.uint64}
_FROM_NUMPY = {_np.dtype(v): k for k, v in _NUMPY.items()}
_TYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
               8: "string", 9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64",
               16: "bfloat16"}
BFLOAT16 = 16


class NodeArg:
    """A graph input or output, as onnxruntime.NodeArg: name, shape (ints, with the symbol or None
    for an open dimension; a sequence's: each element's), type ("tensor(float)",
    "seq(tensor(float))", "optional(tensor(int64))")."""

    def __init__(self, info):
        self.name = info["name"]
        self.element_type = info["type"]
        self.kind = info["kind"]  # "tensor" or "sequence" (of tensors)
        self.optional = info["optional"]
        self.type = f"tensor({_TYPE_NAMES.get(info['type'], 'unknown')})"
        if self.kind == "sequence":
            self.type = f"seq({self.type})"
        if self.optional:
            self.type = f"optional({self.type})"
        if info["has_shape"]:
            self.shape = [d if d >= 0 else (n or None) for d, n in zip(info["shape"], info["dim_names"])]
        else:
            self.shape = None

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


def _to_bfloat16_bits(a):
    """float32 -> bfloat16 bits, rounded to nearest even (NaN kept NaN)."""
    bits = _np.ascontiguousarray(a, dtype=_np.float32).view(_np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(_np.uint16)
    return _np.where(_np.isnan(a), _np.uint16(0x7FC0), rounded)


class InferenceSession:
    """onnxruntime.InferenceSession's shape. path_or_bytes: a file path (external data is read from
    its folder, never outside it) or the serialized model. backend: "cpu", "vulkan", ... (None:
    tinyfin's current default). providers is accepted and ignored, for drop-in use. profile=True
    records which backend ran each node (node_report())."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, backend=None, profile=False,
                 shape_inference=True, max_tensor_bytes=1 << 34, base_dir=""):
        del sess_options, providers
        backend = backend or ""
        if isinstance(path_or_bytes, (bytes, bytearray)):
            self._s = _onnx.Session.from_bytes(bytes(path_or_bytes), backend, profile, shape_inference,
                                               max_tensor_bytes, base_dir)
        else:
            self._s = _onnx.Session(_os.fspath(path_or_bytes), backend, profile, shape_inference,
                                    max_tensor_bytes)
        self._inputs = [NodeArg(i) for i in self._s.inputs()]
        self._outputs = [NodeArg(o) for o in self._s.outputs()]

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        return [self.load_report()["backend"]]

    def load_report(self):
        """opset, nodes, folded (evaluated at load), initializer_bytes, backend, fusions (the
        load-time fusions that fired: name -> times; docs/onnx.md)."""
        return self._s.load_report()

    def last_run(self):
        """peak_bytes, nodes_run, fallbacks and (with profile) nodes: per node its backend and
        fallback count."""
        return self._s.last_run()

    def node_report(self):
        return self._s.last_run()["nodes"]

    def run(self, output_names, input_feed, run_options=None, output_type="numpy"):
        """Runs the graph: output_names None for every output; input_feed {name: numpy array or
        anything numpy.asarray takes, a tinyfin tensor or a DLPack tensor}. Returns numpy arrays, or
        with output_type="tinyfin" tinyfin tensors on the session's device in their compute dtype
        (float64 as float32, narrow ints as int32, uint32/uint64 as int64; docs/onnx.md), which
        DLPack consumers take as they are. With tinyfin or DLPack feeds, or tinyfin outputs, nothing
        passes through numpy: tensors go to the session's device as they are (a feed's dtype must
        then be its input's compute dtype; a numpy feed is converted to it). In numpy mode bfloat16
        tensors are uint16 bit patterns, as in ONNX's numpy_helper (a float feed is rounded).
        Sequences are lists of arrays and an empty optional is None, in feeds and outputs (numpy
        mode only), as in ONNX Runtime."""
        del run_options
        if output_type not in ("numpy", "tinyfin"):
            raise InputError(f"InputError: output_type must be 'numpy' or 'tinyfin', got {output_type!r}")
        if output_type == "tinyfin" or any(_is_tensor_feed(v) for v in input_feed.values()):
            outs = self._run_tensors(output_names, input_feed)
            return outs if output_type == "tinyfin" else [_tensor_to_numpy(t, o) for t, o in
                                                           zip(outs, self._wanted(output_names))]
        declared = {i.name: i for i in self._inputs}
        feeds = [(name, _host_value(name, value, declared.get(name))) for name, value in input_feed.items()]
        return [_from_host_value(v) for v in self._s.run(list(output_names or []), feeds)]

    def _wanted(self, output_names):
        by_name = {o.name: o for o in self._outputs}
        return [by_name[n] for n in output_names] if output_names else list(self._outputs)

    def _run_tensors(self, output_names, input_feed):
        import tinyfin as tf
        declared = {i.name: i.element_type for i in self._inputs}
        feeds = []
        for name, value in input_feed.items():
            if not isinstance(value, tf.Tensor):
                if hasattr(value, "__dlpack__") and not isinstance(value, _np.ndarray):
                    value = tf.from_dlpack(value)
                else:
                    value = _numpy_to_tensor(name, value, declared.get(name))
            feeds.append((name, value))
        return self._s.run_tensors(list(output_names or []), feeds)


def _host_tensor(name, value, element_type):
    """A feed as (ONNX element type, shape, bytes) for the session."""
    if hasattr(value, "numpy") and not isinstance(value, _np.ndarray):
        value = value.numpy()
    a = _np.asarray(value)
    a = a if a.flags.c_contiguous else a.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
    if element_type == BFLOAT16:
        # bfloat16 as ONNX's numpy helpers hold it: uint16 bit patterns; floats are rounded.
        bits = a if a.dtype == _np.uint16 else _to_bfloat16_bits(a.astype(_np.float32))
        return (BFLOAT16, list(a.shape), bits.reshape(-1).view(_np.uint8))
    if a.dtype == object or a.dtype.kind in "SU":
        raise UnsupportedError(f"UnsupportedError: input '{name}': string tensors are not supported")
    if a.dtype not in _FROM_NUMPY:
        raise InputError(f"InputError: input '{name}': numpy dtype {a.dtype} is not supported")
    return (_FROM_NUMPY[a.dtype], list(a.shape), a.reshape(-1).view(_np.uint8) if a.size else _np.zeros(0, _np.uint8))


def _host_value(name, value, info):
    """A feed as the session's value tuple: a list or tuple is a sequence, None an empty optional."""
    element_type = info.element_type if info is not None else None
    if value is None:
        return ("none",)
    if isinstance(value, (list, tuple)) and info is not None and info.kind == "sequence":
        return ("sequence", element_type, [_host_tensor(name, v, element_type) for v in value])
    return ("tensor",) + _host_tensor(name, value, element_type)


def _from_numpy_host(type_, shape, data):
    dtype = _np.uint16 if type_ == BFLOAT16 else _NUMPY[type_]
    return _np.frombuffer(data, dtype).reshape(shape).copy()


def _from_host_value(value):
    """A session output: a numpy array, a list of them (a sequence) or None (an empty optional)."""
    if value[0] == "none":
        return None
    if value[0] == "sequence":
        return [_from_numpy_host(*e) for e in value[2]]
    return _from_numpy_host(*value[1:])


def _is_tensor_feed(value):
    import tinyfin as tf
    return isinstance(value, tf.Tensor) or (hasattr(value, "__dlpack__") and not isinstance(value, _np.ndarray))


# The tinyfin dtype each ONNX element type is computed in (compute_dtype in onnx.hpp).
_COMPUTE = {1: "float32", 11: "float32", 10: "float16", 16: "bfloat16", 2: "int32", 3: "int32", 4: "int32",
            5: "int32", 6: "int32", 7: "int64", 12: "int64", 13: "int64", 9: "bool"}


def _numpy_to_tensor(name, value, element_type):
    """A numpy feed in the tensor path: converted on the host to its input's compute dtype."""
    import tinyfin as tf
    a = _np.asarray(value)
    if element_type == BFLOAT16:
        if a.dtype == _np.uint16:
            raise InputError(f"InputError: input '{name}' is bfloat16: with tinyfin tensors, feed a tinyfin "
                             "bfloat16 tensor or floats, not uint16 bit patterns")
        return tf.tensor(a.astype(_np.float32)).to(dtype=tf.bfloat16)
    compute = _COMPUTE.get(element_type)
    if compute is None:  # not an input: let the session name the problem
        return tf.tensor(_np.ascontiguousarray(a))
    numpy_dtype = {"float32": _np.float32, "float16": _np.float16, "int32": _np.int32, "int64": _np.int64,
                   "bool": _np.bool_}[compute]
    return tf.tensor(_np.ascontiguousarray(a.astype(numpy_dtype, copy=False)))


def _tensor_to_numpy(tensor, info):
    """An output tensor as numpy in the declared element type."""
    import tinyfin as tf
    if info.element_type == BFLOAT16:
        return _to_bfloat16_bits(tensor.to(dtype=tf.float32).numpy())  # exact: bf16 -> f32 -> bf16
    a = tensor.numpy()
    want = _NUMPY.get(info.element_type)
    return a.astype(want) if want is not None and a.dtype != want else a


def supported_ops():
    """[(op type, [implemented since-versions])]."""
    return _onnx.supported_ops()
