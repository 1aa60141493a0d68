"""Shared helpers of the tinyfin.onnx pytest files (suite "onnx", PYTHONPATH=<builddir>/python):
models are built here with onnx.helper from fixed seeds; nothing is downloaded."""
import numpy as np
import pytest

import tinyfin as tf


@pytest.fixture(autouse=True)
def _cpu_default():
    tf.backend_set("cpu")
    yield
    tf.backend_set("cpu")


def rng(seed=0):
    return np.random.default_rng(seed)


def make_model(nodes, inputs, outputs, initializers=(), opset=17, ir_version=8):
    from onnx import helper
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)


def value(name, elem_type, shape):
    from onnx import helper
    return helper.make_tensor_value_info(name, elem_type, shape)


def init(name, array):
    from onnx import numpy_helper
    return numpy_helper.from_array(np.asarray(array), name)


def other_backends():
    return [b for b in tf.available_backends() if b != "cpu"]
