"""Weights of the exported test models (tests/onnx/models/), regenerated from numpy seeds.

The committed .onnx files keep every parameter's name, element type and dims but not its data;
the model's metadata entry "tinyfin.weights" (JSON) says how each one is drawn:

    {"seed": S, "tensors": {"conv1.weight": ["normal", std, mean], "bn1.running_var":
     ["uniform", low, high], ...}}

Each tensor comes from numpy.random.default_rng([S, crc32(name)]) as float32, so the order of
the initializers does not matter. tools/onnx_export_models.py fills the PyTorch modules' state
with the same values before exporting (and checks that the exported initializers equal them),
so the outputs stored beside each model are PyTorch's for exactly these weights.
"""
import json
import zlib

import numpy as np

METADATA_KEY = "tinyfin.weights"


def draw(seed, name, shape, recipe):
    """The float32 values of one tensor."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    kind, a, b = recipe
    if kind == "normal":
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(a) + np.float32(b)).astype(np.float32)
    if kind == "uniform":
        return rng.uniform(a, b, shape).astype(np.float32)
    raise ValueError(f"unknown weight recipe {recipe!r} for {name}")


def recipes(model):
    """(seed, {name: recipe}) from an onnx.ModelProto's metadata."""
    for prop in model.metadata_props:
        if prop.key == METADATA_KEY:
            spec = json.loads(prop.value)
            return spec["seed"], spec["tensors"]
    raise ValueError(f"the model has no '{METADATA_KEY}' metadata")


def fill(model):
    """Puts the drawn data into the model's stripped initializers (in place); returns the model."""
    from onnx import TensorProto
    seed, tensors = recipes(model)
    by_name = {t.name: t for t in model.graph.initializer}
    for name, recipe in tensors.items():
        init = by_name[name]
        assert init.data_type == TensorProto.FLOAT, name
        values = draw(seed, name, tuple(init.dims), recipe)
        init.raw_data = values.tobytes()
    return model


def strip(model, seed, tensors):
    """Drops the data of the named initializers (float32, as draw() makes them) and records how to
    draw them again; returns the model."""
    from onnx import StringStringEntryProto
    by_name = {t.name: t for t in model.graph.initializer}
    for name in tensors:
        init = by_name[name]
        init.ClearField("raw_data")
        init.ClearField("float_data")
    del model.metadata_props[:]
    model.metadata_props.append(StringStringEntryProto(
        key=METADATA_KEY, value=json.dumps({"seed": seed, "tensors": tensors}, sort_keys=True)))
    return model
