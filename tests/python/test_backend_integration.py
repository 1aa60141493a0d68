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


@pytest.mark.parametrize("backend", other_backends())
def test_device_ops_counted_on_device(backend):
    tf.reset_stats()
    a = tf.ones(8, device=backend)
    b = (a * 2).cpu()
    s = tf.stats()
    assert b.tolist() == [2.0] * 8
    assert s["backends"][backend]["ops"] >= 1
    assert s["backends"][backend]["allocations"] >= 1


@pytest.mark.skipif("blas" not in other_backends(), reason="the blas plugin is not built (no OpenBLAS)")
def test_blas_falls_back_for_elementwise():
    """blas runs matmul only; elementwise ops on its tensors fall back to cpu and are counted."""
    tf.reset_stats()
    a = tf.ones(2, 2, device="blas")
    (a @ a).tolist()
    tf.exp(a).tolist()
    s = tf.stats()
    assert s["backends"]["blas"]["ops"] >= 1
    assert s["fallbacks"].get("exp", 0) >= 1 and s["total_fallbacks"] >= 1
