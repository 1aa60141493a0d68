"""tinyfin.dist.ShardedSampler: the ranks' slices of each step are disjoint, balanced and together
the global batch of the single-process shuffle (tinyfin._C.permutation, the examples' order)."""
import numpy as np
import pytest

import tinyfin as tf
import tinyfin.dist as dist


@pytest.mark.parametrize("n,batch", [(103, 16), (10, 64), (0, 4), (64, 64)])
def test_union_of_slices_is_the_global_batch(ctx, n, batch):
    s = dist.ShardedSampler(n, batch, seed=7)
    assert s.steps() == len(s) == -(-n // batch)
    for epoch in (1, 2):
        s.set_epoch(epoch)
        perm = tf._C.permutation(n, 7, epoch)
        total = 0
        for step, mine in enumerate(s):
            assert mine.dtype == np.int64
            # every rank's slice, gathered in rank order (sizes differ: pad to the batch)
            padded = np.full(batch, -1, np.int64)
            padded[:len(mine)] = mine
            allr = dist.all_gather(tf.tensor(padded[None])).numpy()
            union = np.concatenate([row[row >= 0] for row in allr])
            np.testing.assert_array_equal(union, perm[step * batch:step * batch + s.global_batch_size(step)])
            sizes = [int((row >= 0).sum()) for row in allr]
            assert max(sizes) - min(sizes) <= 1
            total += len(mine)
        assert total == s.shard_size()


def test_epochs_reshuffle_and_seed_matters(ctx):
    s = dist.ShardedSampler(50, 50, seed=1)
    s.set_epoch(1)
    a = s.batch(0).copy()
    s.set_epoch(2)
    assert not np.array_equal(a, s.batch(0))
    t = dist.ShardedSampler(50, 50, seed=2)
    t.set_epoch(1)
    assert not np.array_equal(a, t.batch(0))


def test_no_shuffle_and_explicit_rank(ctx):
    s = dist.ShardedSampler(10, 4, shuffle=False, world_size=2, rank=1)
    assert s.batch(0).tolist() == [2, 3]
    assert s.batch(2).tolist() == [9]


def test_bad_arguments(ctx):
    with pytest.raises(tf.ValueError, match="global batch"):
        dist.ShardedSampler(10, 0)
    with pytest.raises(tf.ValueError, match="not in a world"):
        dist.ShardedSampler(10, 2, world_size=2, rank=2)
    with pytest.raises(tf.ValueError, match="outside"):
        dist.ShardedSampler(10, 2).batch(5)
