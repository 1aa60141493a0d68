"""The GIL is released while ops run: Python threads run tinyfin ops concurrently."""
import sys
import threading
import time

import numpy as np

import tinyfin as tf


def test_gil_released_during_ops():
    """With a huge switch interval the interpreter never takes the GIL from the main thread;
    the counting thread can only run while an op has released it. Not timed: it checks that the
    counter moved at all across op calls."""
    a = tf.randn(192, 192, seed=1)
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
            tf.matmul(a, a)
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
