"""The GIL is released while ops run: Python threads run tinyfin ops concurrently."""
import sys
import threading
import time

import numpy as np
import pytest

import tinyfin as tf


# Far above the 16384 elements from which elementwise ops release, and slow enough (about a
# millisecond) for the counting thread to wake up while the op runs.
BIG = tf.randn(2048, 1024, seed=1)
BIG_OUT = tf.empty(2048, 1024)
SQUARE = tf.randn(192, 192, seed=1)
OPS = {
    "matmul": lambda: tf.matmul(SQUARE, SQUARE),
    "operator +": lambda: BIG + BIG,          # the fast path's number slot
    "operator <": lambda: BIG < BIG,          # its comparison slot
    "add out=": lambda: tf.add(BIG, BIG, out=BIG_OUT),  # its module function
    "operator * number": lambda: BIG * 2.0,   # the pybind11 binding behind it
    "exp": lambda: tf.exp(BIG),
}


@pytest.mark.parametrize("op", OPS)
def test_gil_released_during_ops(op):
    """With a huge switch interval the interpreter never takes the GIL from the main thread;
    the counting thread can only run while an op has released it. Not timed: it checks that the
    counter moved at all across op calls."""
    run = OPS[op]
    counter = [0]
    stop = threading.Event()
    started = threading.Event()

    def count():
        started.set()
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0)  # gives the GIL back, so the main thread can go on

    old = sys.getswitchinterval()
    t = threading.Thread(target=count)
    t.start()
    started.wait()
    sys.setswitchinterval(1000)
    try:
        moved = 0
        for _ in range(200):
            before = counter[0]
            run()
            moved += counter[0] - before
            if moved:
                break
    finally:
        sys.setswitchinterval(old)
        stop.set()
        t.join()
    assert moved > 0


def test_threads_compute_correctly_at_once():
    x = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    want = x @ x + 1
    errors = []

    def work():
        try:
            t = tf.tensor(x)
            for _ in range(20):
                np.testing.assert_allclose((t @ t + 1).numpy(), want, rtol=1e-4, atol=1e-4)
                y = tf.tensor(x, requires_grad=True)
                (y * y).sum().backward()
                np.testing.assert_allclose(y.grad.numpy(), 2 * x, rtol=1e-6)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_no_grad_is_per_thread():
    seen = []

    def other():
        seen.append(tf.is_grad_enabled())

    with tf.no_grad():
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert not tf.is_grad_enabled()
    assert seen == [True]
