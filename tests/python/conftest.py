"""Shared helpers of the tinyfin pytest suite (run by meson test, suite "python", with
PYTHONPATH=<builddir>/python; see tests/python/meson.build)."""
import numpy as np
import pytest

import tinyfin as tf


def loaded_backends():
    """Every usable backend of this build (cpu, blas, vulkan on lavapipe, opengl on llvmpipe...)."""
    return tf.available_backends()


def other_backends():
    return [b for b in loaded_backends() if b != "cpu"]


def to_np(t):
    return t.detach().cpu().float().numpy() if t.dtype == tf.bfloat16 else t.detach().cpu().numpy()


def rng(seed=0):
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def _cpu_default():
    """Each test starts with factories on cpu, whatever the previous one selected."""
    tf.backend_set("cpu")
    yield
    tf.backend_set("cpu")
