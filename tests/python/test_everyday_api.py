"""The everyday PyTorch API of issue 32: optimizers with param_groups, state_dict and exact
resume, Adam and amsgrad against float64 numpy references, lr schedulers against their closed
forms, checkpoints of nested structures without pickle, nn.init, nn.utils, isnan/isinf/isfinite,
randint/randperm/linspace, manual_seed, grad modes, `with tf.device(...)`, true division,
__all__, and argument errors that name the argument."""
import builtins
import io
import math
import subprocess
import sys

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.nn as nn
import tinyfin.nn.functional as F
from tinyfin.optim import lr_scheduler
from conftest import other_backends, rng, to_np


# ---- optimizers --------------------------------------------------------------------------------

def _adam_reference(p, grads, lr, b1, b2, eps, wd, decoupled, amsgrad):
    """torch.optim.Adam/AdamW in float64, from their documented update rules."""
    p = p.astype(np.float64)
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    vmax = np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        g = g.astype(np.float64)
        if decoupled:
            p = p * (1 - lr * wd)
        elif wd:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        denom = np.sqrt(vmax if amsgrad else v) / math.sqrt(1 - b2 ** t) + eps
        p = p - lr / (1 - b1 ** t) * m / denom
    return p


@pytest.mark.parametrize("cls,decoupled,wd,amsgrad", [
    (tf.optim.Adam, False, 0.0, False), (tf.optim.Adam, False, 0.1, False), (tf.optim.Adam, False, 0.1, True),
    (tf.optim.AdamW, True, 0.1, False), (tf.optim.AdamW, True, 0.1, True)])
def test_adam_and_adamw_follow_the_update_rule(cls, decoupled, wd, amsgrad):
    r = rng(1)
    p0 = r.standard_normal((3, 4)).astype(np.float32)
    grads = [r.standard_normal((3, 4)).astype(np.float32) for _ in range(5)]
    p = tf.tensor(p0, requires_grad=True)
    opt = cls([p], lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=wd, amsgrad=amsgrad)
    for g in grads:
        p.grad = tf.tensor(g)
        opt.step()
    want = _adam_reference(p0, grads, 0.01, 0.9, 0.99, 1e-8, wd, decoupled, amsgrad)
    np.testing.assert_allclose(to_np(p), want, rtol=2e-5, atol=2e-6)


def test_param_groups_have_their_own_lr_and_weight_decay():
    a = tf.tensor([1.0, 2.0], requires_grad=True)
    b = tf.tensor([3.0], requires_grad=True)
    opt = tf.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5, "weight_decay": 0.1}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[0]["weight_decay"] == 0.0
    a.grad = tf.tensor([1.0, 1.0])
    b.grad = tf.tensor([2.0])
    opt.step()
    np.testing.assert_allclose(to_np(a), [0.9, 1.9], rtol=1e-6)
    np.testing.assert_allclose(to_np(b), [3.0 - 0.5 * (2.0 + 0.1 * 3.0)], rtol=1e-6)
    opt.param_groups[1]["lr"] = 0.0
    opt.step()
    np.testing.assert_allclose(to_np(b), [3.0 - 0.5 * 2.3], rtol=1e-6)
    with pytest.raises(builtins.TypeError, match="unknown options"):
        tf.optim.SGD([{"params": [a], "lr_typo": 1}])


def _train(model, opt, sched, steps, x, y, scaler=None):
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        if sched is not None:
            sched.step()


@pytest.mark.parametrize("make_opt", [
    lambda ps: tf.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    lambda ps: tf.optim.AdamW(ps, lr=0.01, weight_decay=0.05),
    lambda ps: tf.optim.Adam(ps, lr=0.01, amsgrad=True)])
def test_checkpoint_resume_is_bit_exact(make_opt, tmp_path):
    r = rng(2)
    x = tf.tensor(r.standard_normal((16, 6)).astype(np.float32))
    y = tf.tensor(r.integers(0, 3, 16))

    def build():
        model = nn.Sequential(nn.Linear(6, 8, seed=1), nn.ReLU(), nn.Linear(8, 3, seed=2))
        opt = make_opt(model.parameters())
        sched = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        scaler = tf.amp.GradScaler(init_scale=256.0, growth_interval=3)
        return model, opt, sched, scaler

    model, opt, sched, scaler = build()
    _train(model, opt, sched, 4, x, y, scaler)
    tf.save({"model": model.state_dict(), "optim": opt.state_dict(), "sched": sched.state_dict(),
             "scaler": scaler.state_dict(), "step": 4}, tmp_path / "ckpt.tfnn")
    _train(model, opt, sched, 3, x, y, scaler)
    want = [to_np(p).copy() for p in model.parameters()]

    model2, opt2, sched2, scaler2 = build()
    ckpt = tf.load(tmp_path / "ckpt.tfnn")
    assert ckpt["step"] == 4
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optim"])
    sched2.load_state_dict(ckpt["sched"])
    scaler2.load_state_dict(ckpt["scaler"])
    assert opt2.param_groups[0]["lr"] == 0.1 * 0.5 ** 2 or opt2.param_groups[0]["lr"] == 0.01 * 0.5 ** 2
    _train(model2, opt2, sched2, 3, x, y, scaler2)
    for a, b in zip(want, model2.parameters()):
        np.testing.assert_array_equal(a, to_np(b))  # bit for bit


def test_optimizer_state_dict_layout():
    p = tf.ones(2, requires_grad=True)
    q = tf.ones(3, requires_grad=True)
    opt = tf.optim.AdamW([{"params": [p]}, {"params": [q], "lr": 0.5}], lr=0.1)
    p.grad = tf.ones(2)
    opt.step()
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == [0] and sd["param_groups"][1]["params"] == [1]
    assert sd["param_groups"][1]["lr"] == 0.5
    assert set(sd["state"]) == {0} and sd["state"][0]["step"] == 1
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    with pytest.raises(tf.ValueError, match="groups"):
        tf.optim.AdamW([p], lr=0.1).load_state_dict(sd)


# ---- schedulers -----------------------------------------------------------------------------

def _lrs(sched, opt, n):
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def _opt(lr=1.0):
    return tf.optim.SGD([tf.ones(1, requires_grad=True)], lr=lr, momentum=0.9)


def test_step_cosine_lambda_linear():
    opt = _opt(0.1)
    assert _lrs(lr_scheduler.StepLR(opt, 3, gamma=0.5), opt, 7) == pytest.approx(
        [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025])
    opt = _opt(1.0)
    got = _lrs(lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.1), opt, 5)
    assert got == pytest.approx([0.1 + 0.9 * (1 + math.cos(math.pi * e / 4)) / 2 for e in range(5)])
    opt = _opt(2.0)
    assert _lrs(lr_scheduler.LambdaLR(opt, lambda e: 1 / (e + 1)), opt, 3) == pytest.approx([2, 1, 2 / 3])
    opt = _opt(1.0)
    assert _lrs(lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3), opt, 5) == pytest.approx(
        [0.25, 0.5, 0.75, 1, 1])


def test_sequential_warmup_then_cosine():
    opt = _opt(1.0)
    warm = lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    cos = lr_scheduler.CosineAnnealingLR(opt, T_max=3)
    seq = lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2])
    got = _lrs(seq, opt, 6)
    # warmup epochs 0, 1; then cosine from epoch 0 at step 2
    want = [0.5, 0.75] + [(1 + math.cos(math.pi * e / 3)) / 2 for e in range(4)]
    assert got == pytest.approx(want)


def test_one_cycle_matches_its_formula():
    opt = tf.optim.SGD([tf.ones(1, requires_grad=True)], lr=0.1, momentum=0.9)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.3)
    initial, low = 1.0 / 25, 1.0 / 25 / 1e4

    def cos(a, b, pct):
        return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1)
    want_lr, want_m = [], []
    for s in range(10):
        if s <= 2:  # phase one ends at pct_start * total - 1 = 2
            want_lr.append(cos(initial, 1.0, s / 2))
            want_m.append(cos(0.95, 0.85, s / 2))
        else:
            want_lr.append(cos(1.0, low, (s - 2) / 7))
            want_m.append(cos(0.85, 0.95, (s - 2) / 7))
    got_lr, got_m = [], []
    for _ in range(10):
        got_lr.append(opt.param_groups[0]["lr"])
        got_m.append(opt.param_groups[0]["momentum"])
        opt.step()
        sched.step()
    assert got_lr == pytest.approx(want_lr) and got_m == pytest.approx(want_m)
    with pytest.raises(tf.ValueError):
        sched.step()


# ---- checkpoints -----------------------------------------------------------------------------

def test_nested_checkpoint_round_trip(tmp_path):
    ckpt = {"model": {"w": tf.tensor([1.0, 2.0])}, "list": [1, 2.5, "x", None, True, (3, 4)],
            "step": 300, 7: float("inf"), "empty": {}, "nested": [{"t": tf.tensor([[1, 2]])}]}
    tf.save(ckpt, tmp_path / "c.tfnn")
    back = tf.load(tmp_path / "c.tfnn")
    assert back["step"] == 300 and back[7] == math.inf and back["empty"] == {}
    assert back["list"] == [1, 2.5, "x", None, True, (3, 4)]
    np.testing.assert_array_equal(to_np(back["model"]["w"]), [1, 2])
    np.testing.assert_array_equal(to_np(back["nested"][0]["t"]), [[1, 2]])
    buf = io.BytesIO()
    tf.save([tf.ones(2), {"a": 1}], buf)
    buf.seek(0)
    back = tf.load(buf)
    assert isinstance(back, list) and back[1] == {"a": 1}


def test_checkpoints_refuse_objects_and_never_unpickle(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))
    with pytest.raises(builtins.TypeError, match="cannot save a Evil"):
        tf.save({"x": Evil()}, tmp_path / "e.tfnn")
    # a hand-made structure entry naming a type is rejected, not executed
    bad = '{"$object": "os.system"}'.encode() + b" " * (-len('{"$object": "os.system"}') % 4)
    struct = tf.tensor(np.frombuffer(bad, dtype="<i4").copy())
    tf._C.nn.save(str(tmp_path / "b.tfnn"), [("t0", tf.ones(1)), ("__tinyfin_structure_v1__", struct)])
    with pytest.raises(tf.ValueError, match="malformed"):
        tf.load(tmp_path / "b.tfnn")


# ---- nn.init, nn.utils -------------------------------------------------------------------------

def test_init_bounds_and_statistics():
    w = tf.empty(200, 300)
    nn.init.xavier_uniform_(w, seed=1)
    bound = math.sqrt(6 / 500)
    a = to_np(w)
    assert a.min() >= -bound and a.max() <= bound and abs(a.std() - bound / math.sqrt(3)) < 0.02 * bound
    nn.init.kaiming_normal_(w, mode="fan_in", nonlinearity="relu", seed=2)
    assert abs(to_np(w).std() - math.sqrt(2 / 300)) < 0.02 * math.sqrt(2 / 300)
    nn.init.constant_(w, 0.5)
    assert (to_np(w) == 0.5).all()
    assert nn.init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    lin = nn.Linear(3, 2)
    nn.init.zeros_(lin.weight)  # a parameter: written under no_grad
    assert (to_np(lin.weight) == 0).all() and lin.weight.requires_grad


def test_clip_grad_and_parameters_to_vector():
    a = tf.tensor([1.0, 2.0], requires_grad=True)
    b = tf.tensor([[3.0]], requires_grad=True)
    a.grad, b.grad = tf.tensor([3.0, 4.0]), tf.tensor([[12.0]])
    norm = nn.utils.clip_grad_norm_([a, b], max_norm=6.5)
    assert norm.item() == pytest.approx(13.0)
    np.testing.assert_allclose(to_np(a.grad), [1.5, 2.0], rtol=1e-5)
    a.grad = tf.tensor([3.0, -4.0])
    norm = nn.utils.clip_grad_norm_([a], max_norm=1.0, norm_type=math.inf)
    assert norm.item() == 4.0
    np.testing.assert_allclose(to_np(a.grad), [0.75, -1.0], rtol=1e-5)
    a.grad = tf.tensor([3.0, -4.0])
    nn.utils.clip_grad_value_([a], 3.5)
    np.testing.assert_array_equal(to_np(a.grad), [3.0, -3.5])
    v = nn.utils.parameters_to_vector([a, b])
    np.testing.assert_array_equal(to_np(v), [1, 2, 3])
    nn.utils.vector_to_parameters(tf.tensor([5.0, 6.0, 7.0]), [a, b])
    np.testing.assert_array_equal(to_np(b), [[7]])


# ---- tensors and functions ------------------------------------------------------------------

def test_isnan_isinf_isfinite():
    x = tf.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0])
    assert to_np(tf.isnan(x)).tolist() == [False, True, False, False, False]
    assert to_np(tf.isinf(x)).tolist() == [False, False, True, True, False]
    assert to_np(x.isfinite()).tolist() == [True, False, False, False, True]
    assert to_np(tf.isnan(tf.tensor([1, 2]))).tolist() == [False, False]


def test_randint_randperm_linspace():
    k = tf.randint(3, 7, (2000,), seed=4)
    a = to_np(k)
    assert k.dtype == tf.int64 and a.min() == 3 and a.max() == 6
    assert all(abs(c - 500) < 100 for c in np.bincount(a)[3:])  # 4.5 sigma of a binomial(2000, 1/4)
    assert to_np(tf.randint(5, (3,), seed=1)).max() < 5
    p = to_np(tf.randperm(50, seed=3))
    assert sorted(p.tolist()) == list(range(50)) and p.tolist() != list(range(50))
    np.testing.assert_array_equal(to_np(tf.randperm(50, seed=3)), p)
    np.testing.assert_allclose(to_np(tf.linspace(-1, 2, 7)), np.linspace(-1, 2, 7), rtol=1e-6)


def test_manual_seed_matches_an_explicit_seed():
    tf.manual_seed(123)
    a = to_np(tf.randn(5))
    b = to_np(tf.randn(5))
    np.testing.assert_array_equal(a, to_np(tf.randn(5, seed=123)))
    assert not np.array_equal(a, b)
    tf.manual_seed(123)
    np.testing.assert_array_equal(to_np(tf.randn(5)), a)


def test_grad_modes():
    w = tf.ones(2, requires_grad=True)
    with tf.no_grad():
        assert not (w * 2).requires_grad
        with tf.enable_grad():
            assert (w * 2).requires_grad
        assert not tf.is_grad_enabled()
    with tf.set_grad_enabled(False):
        assert not (w * 2).requires_grad
    assert tf.is_grad_enabled()
    tf.set_grad_enabled(False)
    assert not tf.is_grad_enabled()
    tf.set_grad_enabled(True)
    with tf.inference_mode():
        assert not (w * 2).requires_grad

    @tf.no_grad()
    def f():
        return w * 2
    assert not f().requires_grad and tf.is_grad_enabled()


def test_device_context_manager():
    for name in tf.available_backends():
        with tf.device(name):
            assert tf.ones(2).device == tf.device(name)
        assert tf.ones(2).device == tf.device("cpu")
    others = [b for b in tf.available_backends() if b != "cpu"]
    if others:
        with tf.device(others[0]):
            with tf.device("cpu"):
                assert tf.zeros(1).device == tf.device("cpu")
            assert tf.zeros(1).device == tf.device(others[0])
    assert tf.zeros(1).device == tf.device("cpu")


def test_true_division_of_integer_tensors():
    t = tf.tensor([3, 4])
    r = t / 2
    assert r.dtype == tf.float32 and to_np(r).tolist() == [1.5, 2.0]
    assert to_np(t / tf.tensor([2, 8])).tolist() == [1.5, 0.5]
    assert to_np(6 / t).tolist() == [2.0, 1.5]
    assert to_np(tf.div(t, 2)).tolist() == [1.5, 2.0]
    assert to_np(tf.div(tf.tensor([-7, 7]), 2, rounding_mode="floor")).tolist() == [-4, 3]
    assert to_np(tf.div(tf.tensor([-7, 7]), 2, rounding_mode="trunc")).tolist() == [-3, 3]
    assert to_np(tf.div(tf.tensor([-7.0, 7.0]), 2.0, rounding_mode="floor")).tolist() == [-4, 3]
    with pytest.raises(tf.DTypeError, match="true division"):
        t /= 2


def test_star_import_does_not_shadow_builtins():
    code = ("from tinyfin import *\n"
            "import builtins\n"
            "for n in ['sum', 'max', 'min', 'abs', 'pow', 'ValueError', 'bool', 'float']:\n"
            "    assert globals().get(n, getattr(builtins, n)) is getattr(builtins, n), n\n"
            "assert tensor([1.0]).shape == (1,) and no_grad and float32\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert "tensor" in tf.__all__ and "sum" not in tf.__all__


def test_argument_errors_name_the_argument():
    x = tf.ones(2, 2)
    with pytest.raises(builtins.TypeError) as e:
        tf.matmul(x, "x")
    text = str(e.value)
    assert "incompatible function arguments" not in text and "tensor(" not in text
    assert text.startswith("matmul: argument") and "must be a tinyfin.Tensor, got str" in text
    with pytest.raises(builtins.TypeError, match="softmax: argument 'dim' must be an integer, got str"):
        tf.softmax(x, "last")


def test_new_factories_and_to_flags():
    t = tf.tensor([1, 2], dtype=tf.int32)
    z = t.new_zeros(2, 3)
    assert z.dtype == tf.int32 and z.shape == (2, 3) and to_np(z).sum() == 0
    assert to_np(t.new_full((2,), 7)).tolist() == [7, 7] and t.new_ones(1).dtype == tf.int32
    assert t.new_tensor([5.0, 6.0]).dtype == tf.int32
    c = t.to("cpu", non_blocking=True)
    assert c.shares_storage(t)
    d = t.to("cpu", copy=True)
    assert not d.shares_storage(t) and to_np(d).tolist() == [1, 2]


# ---- utils.data, BatchNorm -------------------------------------------------------------------

def test_dataloader_batches_shuffles_and_drops_last():
    from tinyfin.utils.data import DataLoader, TensorDataset
    x = tf.arange(10).reshape(10, 1).float()
    y = tf.arange(10)
    ds = TensorDataset(x, y)
    assert len(ds) == 10
    batches = list(DataLoader(ds, batch_size=4))
    assert [tuple(b[0].shape) for b in batches] == [(4, 1), (4, 1), (2, 1)]
    assert to_np(batches[2][1]).tolist() == [8, 9]
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert len(list(DataLoader(ds, batch_size=4, drop_last=True))) == 2
    loader = DataLoader(ds, batch_size=3, shuffle=True, seed=7)
    epoch1 = np.concatenate([to_np(b[1]) for b in loader])
    epoch2 = np.concatenate([to_np(b[1]) for b in loader])
    assert sorted(epoch1.tolist()) == list(range(10)) and sorted(epoch2.tolist()) == list(range(10))
    assert epoch1.tolist() != epoch2.tolist()  # a new order each epoch
    again = DataLoader(ds, batch_size=3, shuffle=True, seed=7)
    assert np.concatenate([to_np(b[1]) for b in again]).tolist() == epoch1.tolist()  # seeded
    pairs = list(DataLoader([(1, 2.0), (3, 4.0)], batch_size=2))
    assert to_np(pairs[0][0]).tolist() == [1, 3] and to_np(pairs[0][1]).tolist() == [2.0, 4.0]
    with pytest.raises(tf.ValueError):
        DataLoader(ds, batch_size=0)


def test_batchnorm2d_train_eval_and_running_stats():
    r = rng(5)
    xs = [r.standard_normal((4, 3, 2, 2)).astype(np.float32) * 2 + 1 for _ in range(2)]
    bn = nn.BatchNorm2d(3, momentum=0.1)
    with tf.no_grad():
        bn.weight.copy_(tf.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(tf.tensor([0.0, -1.0, 3.0]))
    rm, rv = np.zeros(3), np.ones(3)
    for x in xs:
        out = to_np(bn(tf.tensor(x)))
        mean = x.astype(np.float64).mean(axis=(0, 2, 3))
        var = x.astype(np.float64).var(axis=(0, 2, 3))
        want = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
        want = want * np.array([1, 2, 0.5])[None, :, None, None] + np.array([0, -1, 3])[None, :, None, None]
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
        n = x.size // 3
        rm = 0.9 * rm + 0.1 * mean
        rv = 0.9 * rv + 0.1 * var * n / (n - 1)
    np.testing.assert_allclose(to_np(bn.running_mean), rm, rtol=1e-5)
    np.testing.assert_allclose(to_np(bn.running_var), rv, rtol=1e-5)
    assert bn.num_batches_tracked.item() == 2
    assert set(bn.state_dict()) == {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    bn.eval()
    x = xs[0]
    want = (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5)
    want = want * np.array([1, 2, 0.5])[None, :, None, None] + np.array([0, -1, 3])[None, :, None, None]
    np.testing.assert_allclose(to_np(bn(tf.tensor(x))), want, rtol=1e-4, atol=1e-4)
    other = nn.BatchNorm2d(3)
    other.load_state_dict(bn.state_dict())
    np.testing.assert_allclose(to_np(other.running_var), rv, rtol=1e-5)


def test_batchnorm_gradient_matches_finite_differences():
    r = rng(6)
    x0 = r.standard_normal((5, 2)).astype(np.float64)
    c = r.standard_normal((5, 2))

    def loss64(x):  # sum(c * batchnorm(x)) with weight 1, bias 0, in float64
        m, v = x.mean(0), x.var(0)
        return float((c * (x - m) / np.sqrt(v + 1e-5)).sum())
    bn = nn.BatchNorm1d(2)
    x = tf.tensor(x0.astype(np.float32), requires_grad=True)
    (bn(x) * tf.tensor(c.astype(np.float32))).sum().backward()
    h = 1e-6
    num = np.zeros_like(x0)
    for i in np.ndindex(*x0.shape):
        d = np.zeros_like(x0)
        d[i] = h
        num[i] = (loss64(x0 + d) - loss64(x0 - d)) / (2 * h)
    np.testing.assert_allclose(to_np(x.grad), num, rtol=2e-3, atol=2e-4)
