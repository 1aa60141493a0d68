"""tinyfin.dist collectives from Python against closed forms every rank computes: rank r's
tensor is a function of r, so the reduction over the world is known on every rank."""
import os

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.dist as dist


def rank_data(r, shape, dtype=np.float32):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64).reshape(shape) * (r + 1) + r).astype(dtype)


def all_data(world, shape, dtype=np.float32):
    return np.stack([rank_data(r, shape, dtype) for r in range(world)])


def test_world(ctx):
    assert ctx.world_size == int(os.environ["OMPI_COMM_WORLD_SIZE"])
    assert ctx.rank == int(os.environ["OMPI_COMM_WORLD_RANK"])
    assert dist.rank() == dist.get_rank() == ctx.rank
    assert dist.world_size() == dist.get_world_size() == ctx.world_size
    assert dist.local_rank() == int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])
    assert dist.local_size() == int(os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"])
    assert dist.launcher() == "mpirun"
    assert dist.is_initialized()
    assert dist.init() is ctx  # one Context per process
    # every rank sees distinct ranks 0..N-1
    ranks = dist.all_gather(tf.tensor([ctx.rank])).tolist()
    assert ranks == list(range(ctx.world_size))


@pytest.mark.parametrize("op,ref", [("sum", np.sum), ("max", np.max), ("min", np.min),
                                    ("mean", np.mean)])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), ()])
def test_all_reduce_f32(ctx, op, ref, shape):
    t = tf.tensor(rank_data(ctx.rank, shape))
    out = dist.all_reduce(t, op)
    assert out is t  # in place
    want = ref(all_data(ctx.world_size, shape), axis=0)
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("dtype,tdtype", [(np.int32, tf.int32), (np.int64, tf.int64)])
@pytest.mark.parametrize("op,ref", [("sum", np.sum), ("max", np.max), ("min", np.min)])
def test_all_reduce_int(ctx, dtype, tdtype, op, ref):
    t = tf.tensor(rank_data(ctx.rank, (4, 3), dtype), dtype=tdtype)
    dist.all_reduce(t, op)
    assert t.dtype == tdtype
    np.testing.assert_array_equal(t.numpy(), ref(all_data(ctx.world_size, (4, 3), dtype), axis=0))


def test_all_reduce_reduceop_names(ctx):
    t = tf.ones(3)
    dist.all_reduce(t, dist.ReduceOp.AVG)
    np.testing.assert_allclose(t.numpy(), 1.0)
    dist.all_reduce(t, dist.ReduceOp.SUM)
    np.testing.assert_allclose(t.numpy(), ctx.world_size)


def test_all_reduce_strided_view_writes_back(ctx):
    base = tf.tensor(rank_data(ctx.rank, (4, 6)))
    view = base[:, 1::2]  # not contiguous: staged and written back into base
    assert not view.is_contiguous()
    dist.all_reduce(view)
    want = rank_data(ctx.rank, (4, 6))
    want[:, 1::2] = all_data(ctx.world_size, (4, 6)).sum(0)[:, 1::2]
    np.testing.assert_allclose(base.numpy(), want)


def test_all_reduce_mean_needs_a_float_dtype(ctx):
    with pytest.raises(tf.DTypeError, match="mean needs a float tensor"):
        dist.all_reduce(tf.ones(3, dtype=tf.int32), "mean")


def bf16_round(x):
    """float32 values rounded to nearest even bfloat16, returned as float32 (numpy has no bf16)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


HALF_ROUND = {"float16": lambda x: np.asarray(x, np.float32).astype(np.float16).astype(np.float32),
              "bfloat16": bf16_round}


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_all_reduce_half_sums_in_f32_and_rounds_once(ctx, name, op):
    rnd, tdtype = HALF_ROUND[name], getattr(tf, name)
    w = ctx.world_size
    # Values with more bits than the dtype keeps, rounded to it (numpy's rounding).
    vals = [rnd(np.linspace(-1.3, 2.9, 9, dtype=np.float32) * (r + 1) + 0.1 * r) for r in range(w)]
    t = tf.tensor(vals[ctx.rank]).to(tdtype)
    dist.all_reduce(t, op)
    assert t.dtype == tdtype
    stack = np.stack(vals)
    exact = {"sum": stack.sum(0, dtype=np.float32), "mean": stack.sum(0, dtype=np.float32) * np.float32(1 / w),
             "max": stack.max(0), "min": stack.min(0)}[op]
    np.testing.assert_array_equal(t.to(tf.float32).numpy(), rnd(exact))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_half_broadcast_gather_scatter(ctx, name):
    rnd, tdtype = HALF_ROUND[name], getattr(tf, name)
    w = ctx.world_size
    vals = [rnd(np.arange(2 * w, dtype=np.float32) * 0.37 + r) for r in range(w)]
    b = tf.tensor(vals[ctx.rank]).to(tdtype)
    dist.broadcast(b, src=w - 1)
    np.testing.assert_array_equal(b.to(tf.float32).numpy(), vals[w - 1])
    g = dist.all_gather(tf.tensor(vals[ctx.rank]).to(tdtype))
    assert g.dtype == tdtype
    np.testing.assert_array_equal(g.to(tf.float32).numpy(), np.concatenate(vals))
    s = dist.reduce_scatter(tf.tensor(vals[ctx.rank]).to(tdtype), "sum")
    total = np.stack(vals).sum(0, dtype=np.float32)
    np.testing.assert_array_equal(s.to(tf.float32).numpy(), rnd(total[2 * ctx.rank:2 * ctx.rank + 2]))


def test_bad_op_name(ctx):
    with pytest.raises(tf.ValueError, match="'sum', 'mean', 'max' or 'min'"):
        dist.all_reduce(tf.ones(3), "product")


@pytest.mark.parametrize("src", [0, 1, -1])
def test_broadcast(ctx, src):
    src = src % ctx.world_size
    t = tf.tensor(rank_data(ctx.rank, (3, 4)))
    assert dist.broadcast(t, src) is t
    np.testing.assert_array_equal(t.numpy(), rank_data(src, (3, 4)))


def test_broadcast_bool_and_bad_root(ctx):
    t = tf.tensor([ctx.rank == 0, ctx.rank != 0, True])
    dist.broadcast(t, 0)
    assert t.tolist() == [True, False, True]
    with pytest.raises(tf.ValueError, match="not a rank of this world"):
        dist.broadcast(t, ctx.world_size)


@pytest.mark.parametrize("shape", [(2, 3), (1,), ()])
def test_all_gather(ctx, shape):
    out = dist.all_gather(tf.tensor(rank_data(ctx.rank, shape)))
    want = all_data(ctx.world_size, shape)
    want = want.reshape((-1,) + tuple(shape[1:])) if shape else want
    assert out.shape == want.shape
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("op,ref", [("sum", np.sum), ("mean", np.mean), ("max", np.max)])
def test_reduce_scatter(ctx, op, ref):
    w = ctx.world_size
    shape = (2 * w, 3)
    out = dist.reduce_scatter(tf.tensor(rank_data(ctx.rank, shape)), op)
    full = ref(all_data(w, shape), axis=0)
    np.testing.assert_allclose(out.numpy(), full[2 * ctx.rank:2 * ctx.rank + 2], rtol=1e-6)


def test_reduce_scatter_indivisible(ctx):
    with pytest.raises(tf.ShapeError, match="equal pieces"):
        dist.reduce_scatter(tf.ones(ctx.world_size * 2 + 1))


def test_barrier(ctx):
    dist.barrier()


def test_shape_mismatch_is_detected_on_every_rank(ctx):
    t = tf.ones(2 + (ctx.rank == 1), 2)
    with pytest.raises(dist.MismatchError, match=r"rank 0 calls all_reduce of \[2, ?2\] f32, rank 1 calls "
                                                 r"all_reduce of \[3, ?2\] f32") as e:
        dist.all_reduce(t)
    assert isinstance(e.value, ValueError) and isinstance(e.value, tf.Error)
    np.testing.assert_array_equal(t.numpy(), 1.0)  # no data moved


def test_dtype_mismatch_is_detected(ctx):
    t = tf.ones(4, dtype=tf.int32 if ctx.rank == 1 else tf.float32)
    with pytest.raises(dist.MismatchError, match="i32"):
        dist.broadcast(t, 0)


def test_check_can_be_turned_off_and_on(ctx):
    assert ctx.check_shapes
    ctx.check_shapes = False
    try:
        t = tf.ones(5)
        dist.all_reduce(t)
        np.testing.assert_array_equal(t.numpy(), ctx.world_size)
    finally:
        ctx.check_shapes = True


def test_checksum_matches_hand_computed_fnv(ctx):
    t = tf.tensor([1.0, -2.0])
    h = 1469598103934665603
    for b in np.array([1.0, -2.0], np.float32).tobytes():
        h = ((h ^ b) * 1099511628211) % (1 << 64)
    assert dist.checksum([t]) == h


def test_device_tensor_through_staging(ctx):
    names = tf.available_backends()
    if "vulkan" not in names:
        pytest.skip("the vulkan plugin is not loaded in this build (lavapipe staging path)")
    t = tf.tensor(rank_data(ctx.rank, (5,)), device="vulkan:0")
    dist.all_reduce(t)
    assert t.device.type == "vulkan"
    np.testing.assert_allclose(t.cpu().numpy(), all_data(ctx.world_size, (5,)).sum(0))
