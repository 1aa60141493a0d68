"""Einsum (onnx/ops_nn.cpp) with ellipses, repeated labels (diagonals) and implicit outputs against
numpy.einsum in float64, on cpu and every other loaded backend."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import make_model, other_backends, rng, value

F = TensorProto.FLOAT


def run(equation, arrays, backend):
    names = [f"x{i}" for i in range(len(arrays))]
    model = make_model([helper.make_node("Einsum", names, ["y"], equation=equation)],
                       [value(n, F, a.shape) for n, a in zip(names, arrays)], [value("y", F, None)], opset=12)
    return tfo.InferenceSession(model.SerializeToString(), backend=backend).run(None, dict(zip(names, arrays)))[0]


CASES = [
    ("...ii->...i", [(3, 5, 5)]),
    ("...ii", [(2, 3, 4, 4)]),          # implicit: the ellipsis, then nothing (the trace per batch)
    ("ii->", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iji->j", [(3, 2, 3)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 2)]),
    ("...ij,jk", [(2, 3, 4), (4, 5)]),
    ("bii,bij->bj", [(2, 3, 3), (2, 3, 4)]),
    ("i...,i...->...", [(3, 2, 4), (3, 2, 4)]),
    ("ij...,jk...->ik...", [(2, 3), (3, 4)]),  # an empty ellipsis
]


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
@pytest.mark.parametrize("equation, shapes", CASES)
def test_einsum(backend, equation, shapes):
    g = rng(len(equation))
    arrays = [g.standard_normal(s).astype(np.float32) for s in shapes]
    want = np.einsum(equation, *[a.astype(np.float64) for a in arrays])
    np.testing.assert_allclose(run(equation, arrays, backend), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation, shapes, match", [
    ("ij,jk->ik", [(2, 3), (4, 5)], "sizes"),
    ("ii->i", [(2, 3)], "sizes"),
    ("1i->i", [(2, 3)], "letters"),
    ("...i...->i", [(2, 3)], "(?i)ellipsis"),
])
def test_bad_equations_are_model_errors(equation, shapes, match):
    arrays = [np.zeros(s, np.float32) for s in shapes]
    with pytest.raises(tfo.ModelError, match=match):
        run(equation, arrays, "cpu")
