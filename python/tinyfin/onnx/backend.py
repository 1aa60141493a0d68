"""tinyfin.onnx.backend: onnx.backend.base.Backend over tinyfin.onnx.InferenceSession, so that
ONNX's backend-test machinery (onnx.backend.test) can drive tinyfin:

    import tinyfin.onnx.backend as backend
    rep = backend.prepare(model, device="CPU")      # device: "CPU" or a tinyfin backend name
    outputs = rep.run([x, y])
"""
from onnx.backend.base import Backend, BackendRep

from . import InferenceSession, UnsupportedError  # noqa: F401


def _backend_name(device):
    device = (device or "CPU").lower()
    return "cpu" if device == "cpu" else device.split(":")[0]


class TinyfinRep(BackendRep):
    def __init__(self, session):
        self.session = session

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            feeds = {i.name: x for i, x in zip(self.session.get_inputs(), inputs)}
        return tuple(self.session.run(None, feeds))


class TinyfinBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):
        try:
            cls.prepare(model, device, **kwargs)
            return True
        except Exception:
            return False

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        data = model if isinstance(model, (bytes, bytearray)) else model.SerializeToString()
        return TinyfinRep(InferenceSession(data, backend=_backend_name(device), **kwargs))

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device):
        import tinyfin
        return _backend_name(device) in tinyfin.available_backends()


is_compatible = TinyfinBackend.is_compatible
prepare = TinyfinBackend.prepare
run_model = TinyfinBackend.run_model
run_node = TinyfinBackend.run_node
supports_device = TinyfinBackend.supports_device
