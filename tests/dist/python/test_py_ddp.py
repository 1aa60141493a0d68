"""tinyfin.dist.DistributedDataParallel from Python: each rank trains on its slice of a global
batch, and in the same process an unwrapped copy of the model trains on the whole batch; the two
must agree within f32 tolerance after every step, and the wrapped parameters must be bitwise equal
on every rank."""
import numpy as np
import pytest

import tinyfin as tf
import tinyfin.dist as dist
import tinyfin.nn as nn
import tinyfin.nn.functional as F


class Net(nn.Module):
    """C++ modules (Linear) and a parameter registered in Python, in a Python subclass."""

    def __init__(self, seed, hidden=8):
        super().__init__()
        self.fc1 = nn.Linear(6, hidden, seed=seed)
        self.scale = nn.Parameter(tf.rand(hidden, seed=seed + 100) + 0.5)
        self.fc2 = nn.Linear(hidden, 3, seed=seed + 1)

    def forward(self, x):
        return self.fc2(tf.relu(self.fc1(x)) * self.scale)


def data(n, seed=3):
    g = np.random.default_rng(seed)
    return g.standard_normal((n, 6)).astype(np.float32), g.integers(0, 3, n).astype(np.int64)


def params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def train_pair(ctx, same_on_all, n, batch, steps_per_epoch=None, epochs=2, bucket_cap_mb=25, opt="sgd"):
    x, y = data(n)
    ref = Net(0)
    net = Net(0)
    ddp = dist.DistributedDataParallel(net, bucket_cap_mb=bucket_cap_mb)
    make = (lambda ps: tf.optim.SGD(ps, lr=0.1, momentum=0.9)) if opt == "sgd" else \
        (lambda ps: tf.optim.AdamW(ps, lr=1e-2))
    o_ref, o_ddp = make(list(ref.parameters())), make(list(ddp.parameters()))
    sampler = dist.ShardedSampler(n, batch, seed=5)
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        perm = tf._C.permutation(n, 5, epoch)
        for step in range(sampler.steps()):
            whole = perm[step * batch:step * batch + sampler.global_batch_size(step)]
            o_ref.zero_grad()
            F.cross_entropy(ref(tf.tensor(x[whole])), tf.tensor(y[whole])).backward()
            o_ref.step()

            mine = sampler.batch(step)
            o_ddp.zero_grad()
            ddp.set_batch_size(len(mine))
            if len(mine):
                F.cross_entropy(ddp(tf.tensor(x[mine])), tf.tensor(y[mine])).backward()
            ddp.synchronize_gradients()
            o_ddp.step()
            for a, b in zip(params(ref), params(net)):
                np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-5)
        for p in params(net):
            assert same_on_all(p)
    return ddp


def test_names_and_forward(ctx):
    net = Net(0)
    ddp = dist.DistributedDataParallel(net)
    names = [n for n, _ in ddp.named_parameters()]
    assert names == ["module." + n for n, _ in net.named_parameters()]
    assert names[:2] == ["module.scale", "module.fc1.weight"]  # own parameters first
    x = tf.tensor(data(4)[0])
    np.testing.assert_array_equal(ddp(x).detach().numpy(), net(x).detach().numpy())
    assert "DistributedDataParallel" in repr(ddp)


def test_parameters_broadcast_from_rank0(ctx, same_on_all):
    net = Net(ctx.rank)  # different initial parameters on each rank
    dist.DistributedDataParallel(net)
    for mine, rank0 in zip(params(net), params(Net(0))):
        np.testing.assert_array_equal(mine, rank0)
    net = Net(ctx.rank)
    dist.DistributedDataParallel(net, broadcast_parameters=False)
    assert not all(same_on_all(p) for p in params(net)) or ctx.world_size == 1


def test_ddp_equals_single_process_even_batches(ctx, same_on_all):
    train_pair(ctx, same_on_all, n=8 * ctx.world_size * 3, batch=8 * ctx.world_size)


def test_ddp_uneven_and_empty_ranks(ctx, same_on_all):
    # 2*batch + 1 samples: the last global batch has one sample, so all ranks but one are empty
    batch = 3 * ctx.world_size + 1
    train_pair(ctx, same_on_all, n=2 * batch + 1, batch=batch)


def test_ddp_one_bucket_per_parameter_overlaps_backward(ctx, same_on_all):
    ddp = train_pair(ctx, same_on_all, n=16 * ctx.world_size, batch=4 * ctx.world_size,
                     epochs=1, bucket_cap_mb=1e-6, opt="adamw")
    k = len(list(ddp.module.parameters()))
    assert ddp.bucket_layout() == [[i] for i in reversed(range(k))]
    # every bucket was complete, and its allreduce started, inside backward
    assert ddp.buckets_started_in_backward == k


def test_default_bucket_holds_everything(ctx):
    ddp = dist.DistributedDataParallel(Net(0))
    assert ddp.bucket_layout() == [[4, 3, 2, 1, 0]]


def test_no_sync_accumulates_then_averages(ctx, same_on_all):
    w = ctx.world_size
    x, y = data(8 * w)
    ref, net = Net(0), Net(0)
    ddp = dist.DistributedDataParallel(net)
    micro = [np.arange(0, 4 * w), np.arange(4 * w, 8 * w)]
    for idx in micro:
        F.cross_entropy(ref(tf.tensor(x[idx])), tf.tensor(y[idx])).backward()
    with ddp.no_sync():
        mine = micro[0][4 * ctx.rank:4 * ctx.rank + 4]
        F.cross_entropy(ddp(tf.tensor(x[mine])), tf.tensor(y[mine])).backward()
        ddp.synchronize_gradients()  # a no-op inside no_sync
        local = [p.grad.numpy().copy() for p in net.parameters()]
    mine = micro[1][4 * ctx.rank:4 * ctx.rank + 4]
    F.cross_entropy(ddp(tf.tensor(x[mine])), tf.tensor(y[mine])).backward()
    ddp.synchronize_gradients()
    for a, b in zip(ref.parameters(), net.parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=2e-4, atol=1e-6)
        assert same_on_all(b.grad.numpy())
    if w > 1:  # inside no_sync the gradient was this rank's own
        assert not all(same_on_all(g) for g in local)


def test_second_backward_without_sync_is_an_error(ctx):
    net = Net(0)
    ddp = dist.DistributedDataParallel(net)
    x = tf.tensor(data(2)[0])
    ddp(x).sum().backward()
    with pytest.raises(dist.DistError, match="produced twice"):
        ddp(x).sum().backward()
    ddp.synchronize_gradients()  # the ranks stay in step


def test_layout_mismatch(ctx):
    net = Net(0, hidden=8 + (ctx.rank == 1))
    if ctx.world_size == 1:
        pytest.skip("needs two ranks")
    with pytest.raises(dist.MismatchError, match="different parameter layout"):
        dist.DistributedDataParallel(net)


def test_wraps_modules_only(ctx):
    with pytest.raises(dist.DistError, match="wraps a tinyfin.nn.Module"):
        dist.DistributedDataParallel(tf.ones(3))
