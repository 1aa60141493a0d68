"""stats() from Python: ops per backend, transfers and fallbacks to cpu."""
import pytest

import tinyfin as tf
from conftest import other_backends


def test_stats_count_ops_and_transfers():
    tf.reset_stats()
    a = tf.ones(4)
    (a + a).sum().item()
    s = tf.stats()
    assert s["backends"]["cpu"]["ops"] >= 2
    assert s["total_fallbacks"] == 0 and s["fallbacks"] == {}


@pytest.mark.parametrize("backend", [b for b in other_backends() if b != "blas"])
def test_device_ops_counted_on_device(backend):
    tf.reset_stats()
    a = tf.ones(8, device=backend)
    b = (a * 2).cpu()
    s = tf.stats()
    assert b.tolist() == [2.0] * 8
    assert s["backends"][backend]["ops"] >= 1
    assert s["backends"][backend]["allocations"] >= 1
    assert s["backends"][backend]["bytes_to_host"] >= 32
    assert s["total_fallbacks"] == 0, s["fallbacks"]


@pytest.mark.skipif("blas" not in other_backends(), reason="the blas plugin is not built (no OpenBLAS)")
def test_blas_runs_elementwise_itself():
    """blas runs large f32 matmuls through OpenBLAS and every other op on the cpu plugin's
    kernels, which it links: no op on its tensors falls back to cpu."""
    a = tf.ones(128, 128, device="blas")
    tf.reset_stats()
    c = a @ a
    assert c.device == "blas:0" and c[0, 0].item() == 128
    assert abs(tf.exp(a).sum().item() - 128 * 128 * 2.718281828) < 1.0
    s = tf.stats()
    assert s["backends"]["blas"]["ops"] >= 3
    assert s["total_fallbacks"] == 0 and s["fallbacks"] == {}
    assert s["backends"].get("cpu", {}).get("ops", 0) == 0
