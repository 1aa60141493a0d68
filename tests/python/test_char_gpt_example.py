"""examples/char_gpt.py against the C++ examples/char_gpt on the tiny config: the same seed gives
the same initial parameters, batches and sampling stream, so the losses agree to float rounding
and both print the same report lines."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# CHAR_GPT_PY: the example of a checkout, when this file runs from a copy (scripts/test-packaging).
SCRIPT = os.environ.get("CHAR_GPT_PY") or os.path.join(ROOT, "examples", "char_gpt.py")
CHAR_GPT = os.environ.get("CHAR_GPT", "")
ARGS = ["--config", "tiny", "--steps", "20", "--eval-every", "10", "--eval-batches", "4",
        "--sample", "24", "--temperature", "0"]

pytestmark = pytest.mark.skipif(not os.path.isdir("/usr/share/games/fortunes"),
                                reason="Debian's fortunes package is not installed")


def run(cmd):
    env = dict(os.environ, TINYFIN_BACKEND="cpu")
    r = subprocess.run(cmd, capture_output=True, encoding="latin-1", timeout=240, env=env)  # samples are Latin-1 bytes
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def numbers(pattern, text):
    return [float(m) for m in re.findall(pattern, text, re.M)]


def test_python_example_matches_the_cpp_example():
    if not os.path.exists(CHAR_GPT):
        pytest.skip("CHAR_GPT (the C++ example) not set; meson sets it")
    py = run([sys.executable, SCRIPT] + ARGS)
    cpp = run([CHAR_GPT] + ARGS)
    for pattern in (r"^step +\d+/20  loss ([\d.]+)", r"val loss ([\d.]+)$"):
        a, b = numbers(pattern, py), numbers(pattern, cpp)
        assert len(a) == len(b) > 0, (pattern, py, cpp)
        assert a == pytest.approx(b, abs=2e-3), (pattern, a, b)
    # The sample: the prompt (a newline) and 24 generated characters. Not compared with the C++
    # text: after 20 steps the likeliest characters are near ties that rounding can swap.
    sample = py.split("tokens/s):\n", 1)[1].split("\ntotal time", 1)[0]
    assert len(sample) == 1 + 24, repr(sample)
    for line in ("backends that ran ops: cpu", "fallbacks: 0", "default backend: cpu"):
        assert line in py
    # The same memory estimate as the C++ example, and the measured peak within 20% of it.
    estimate = r"^memory estimate: training ([\d.]+) MiB .* inference ([\d.]+) MiB"
    assert re.findall(estimate, py, re.M) == re.findall(estimate, cpp, re.M) != []
    (need, peak), = [tuple(map(float, m)) for m in re.findall(
        r"^memory: estimate ([\d.]+) MiB, measured peak ([\d.]+) MiB of tensors on cpu$", py, re.M)]
    assert abs(peak - need) <= 0.2 * need, (need, peak)


def test_python_example_memory_requirement_selects_or_fails():
    """The stated requirement goes through select_backend_for_memory: on cpu it fits; a
    requirement no device has (a batch of 10^8 sequences) fails with the error naming devices."""
    out = run([sys.executable, SCRIPT, "--config", "tiny", "--steps", "0", "--sample", "0",
               "--eval-batches", "1"])
    assert "memory estimate: training" in out and "default backend: cpu" in out
    env = dict(os.environ, TINYFIN_BACKEND="cpu")
    r = subprocess.run([sys.executable, SCRIPT, "--config", "default", "--steps", "1",
                        "--batch", "100000000", "--sample", "0"],
                       capture_output=True, encoding="latin-1", timeout=240, env=env)
    assert r.returncode != 0
    assert "no device has the" in r.stderr and "MiB free" in r.stderr, r.stderr


def test_python_example_loss_decreases():
    out = run([sys.executable, SCRIPT, "--config", "tiny", "--steps", "30", "--eval-every", "0",
               "--eval-batches", "2", "--sample", "0", "--seed", "3"])
    losses = numbers(r"^step +\d+/30  loss ([\d.]+)", out)
    assert losses[-1] < losses[0] - 0.3, losses


def test_warmup_cosine_and_clip_grad_norm_bindings():
    import math

    import numpy as np

    import tinyfin as tf
    import tinyfin.nn as nn

    s = tf.optim.WarmupCosine(1e-2, 1e-3, 4, 20)
    assert [s(i) for i in range(4)] == pytest.approx([2.5e-3, 5e-3, 7.5e-3, 1e-2])
    assert s(12) == pytest.approx(1e-3 + 9e-3 * 0.5 * (1 + math.cos(math.pi * 8 / 16)))
    assert s(20) == pytest.approx(1e-3) and s(99) == pytest.approx(1e-3)
    with pytest.raises(tf.ValueError):
        tf.optim.WarmupCosine(1e-2, 1e-3, 30, 20)

    a = tf.tensor([[3.0, 0.0], [0.0, 0.0]], requires_grad=True)
    b = tf.tensor([4.0], requires_grad=True)
    ((a * tf.tensor([[1.0, 0.0], [0.0, 0.0]])).sum() * 3 + (b * 4).sum()).backward()  # grads 3, 4
    norm = nn.clip_grad_norm_([a, b], 1.0)
    assert norm.item() == pytest.approx(5.0)
    np.testing.assert_allclose(a.grad.numpy(), [[0.6, 0.0], [0.0, 0.0]], rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), [0.8], rtol=1e-5)
