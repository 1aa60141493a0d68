"""Fixtures of the tinyfin.dist pytest files, which run on every rank of an mpirun job
(pytest_mpi.py): every rank runs the same tests in the same order, so their collectives meet."""
import numpy as np
import pytest

import tinyfin as tf
import tinyfin.dist as dist


@pytest.fixture(scope="session")
def ctx():
    return dist.init()


@pytest.fixture
def same_on_all(ctx):
    """same_on_all(array) -> True when every rank passes an equal array (bitwise)."""
    def check(a):
        a = np.ascontiguousarray(a)
        gathered = dist.all_gather(tf.tensor(a[None])).numpy()
        return all(np.array_equal(gathered[0], gathered[r]) for r in range(ctx.world_size))
    return check
