#!/usr/bin/python3
"""A tinyfin.dist training loop in which the last rank fails at step 3, for test_failure.py:
    py_fail.py abort      the rank catches the exception and calls tinyfin.dist.abort
    py_fail.py uncaught   the exception leaves the script (tinyfin.dist's excepthook aborts)
    py_fail.py hang       the rank stops taking part; the others time out (TINYFIN_DIST_TIMEOUT)
and their exception, uncaught, aborts the job. The other ranks must stop, not hang."""
import sys
import time

import tinyfin as tf
import tinyfin.dist as dist
import tinyfin.nn as nn


def train(mode):
    ctx = dist.init()
    ddp = dist.DistributedDataParallel(nn.Linear(4, 2, seed=1))
    x = tf.ones(3, 4)
    for step in range(1000):
        if step == 3 and ctx.rank == ctx.world_size - 1:
            if mode == "hang":
                time.sleep(3600)
            raise RuntimeError("simulated failure in the data loader at step 3")
        ddp.backward(ddp(x).sum())


mode = sys.argv[1] if len(sys.argv) > 1 else "abort"
if mode == "abort":
    try:
        train(mode)
    except RuntimeError as e:
        dist.abort(2, str(e))
else:
    train(mode)
