"""Training-mode Dropout (onnx/ops_elementwise.cpp): with a seed, the mask of numpy's legacy
generator (what ONNX's reference draws: np.random.seed(seed); uniform(0, 1, shape) >= ratio),
checked here against numpy itself; without one, a fresh mask per run; kept elements scaled by
1 / (1 - ratio) exactly; the mask output; the identity in inference mode; bad ratios refused."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import init, make_model, other_backends, rng, value


def session(ratio, training, seed=None, mask=True, backend="cpu"):
    attrs = {} if seed is None else {"seed": seed}
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "m"] if mask else ["y"], **attrs)
    outputs = [value("y", TensorProto.FLOAT, None)] + ([value("m", TensorProto.BOOL, None)] if mask else [])
    model = make_model([node], [value("x", TensorProto.FLOAT, [4, 50])], outputs,
                       [init("r", np.float32(ratio)), init("t", np.bool_(training))])
    return tfo.InferenceSession(model.SerializeToString(), backend=backend)


X = rng(0).standard_normal((4, 50)).astype(np.float32)


@pytest.mark.parametrize("backend", ["cpu"] + other_backends())
@pytest.mark.parametrize("ratio, seed", [(0.5, 0), (0.75, 3), (0.1, 12345)])
def test_seeded_mask_is_numpys(backend, ratio, seed):
    y, m = session(ratio, True, seed, backend=backend).run(None, {"x": X})
    np.random.seed(seed)
    want = np.random.uniform(0, 1, X.shape) >= ratio
    np.testing.assert_array_equal(m, want)
    np.testing.assert_array_equal(y, np.where(want, X * np.float32(1 / (1 - ratio)), 0).astype(np.float32))


def test_unseeded_masks_differ_between_runs_and_keep_about_one_minus_ratio():
    s = session(0.3, True, mask=True)
    x = np.ones((4, 50), np.float32)
    (y1, m1), (y2, m2) = s.run(None, {"x": x}), s.run(None, {"x": x})
    assert not np.array_equal(m1, m2)
    for y, m in ((y1, m1), (y2, m2)):
        np.testing.assert_allclose(y, np.where(m, 1 / 0.7, 0), rtol=1e-6)
        assert 0.5 < m.mean() < 0.9  # 200 draws of p = 0.7: 0.5 and 0.9 are more than 6 sigma away


def test_inference_mode_and_zero_ratio_are_the_identity():
    for ratio, training in ((0.5, False), (0.0, True)):
        y, m = session(ratio, training, seed=1).run(None, {"x": X})
        np.testing.assert_array_equal(y, X)
        assert m.all()


@pytest.mark.parametrize("ratio", [1.0, -0.1, 1.5])
def test_bad_ratios_are_refused(ratio):
    with pytest.raises(tfo.ModelError, match="ratio"):
        session(ratio, True, seed=1).run(None, {"x": X})
