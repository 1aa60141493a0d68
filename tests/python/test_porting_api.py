"""The PyTorch API that issue 32 left for last: GroupNorm, AdaptiveAvgPool2d, rectangular and
"same"/"valid" Conv2d, Dropout2d, ReLU(inplace), l1/smooth_l1/huber, cross_entropy's
label_smoothing and weight, nll_loss, Module.apply/requires_grad_/named_modules/load_state_dict,
einsum, grad_fn, retain_grad, the in-place forms, numpy's axis=/keepdims=, non_blocking, PyTorch
interop, argument errors of Tensor methods. References: float64 numpy of each definition,
float64 finite differences of that numpy for gradients, PyTorch's documented semantics."""
import numpy as np
import pytest

import tinyfin as tf
import tinyfin.nn as nn
import tinyfin.nn.functional as F
from conftest import rng, to_np


def fd_grad(f, x, weights, eps=1e-6):
    """d sum(f(x) * weights) / dx by central differences in float64."""
    x = x.astype(np.float64)
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (np.sum(f(xp) * weights) - np.sum(f(xm) * weights)) / (2 * eps)
    return g


def check_grad(tf_fn, np_fn, x, atol=2e-4, rtol=2e-3, seed=1):
    """tinyfin's gradient of sum(tf_fn(x) * w) against finite differences of np_fn."""
    out_np = np_fn(x.astype(np.float64))
    w = rng(seed).standard_normal(np.shape(out_np)).astype(np.float32)
    t = tf.tensor(x, requires_grad=True)
    out = tf_fn(t)
    np.testing.assert_allclose(to_np(out), out_np, rtol=1e-4, atol=1e-5)
    tf.sum(out * tf.tensor(w)).backward()
    np.testing.assert_allclose(to_np(t.grad), fd_grad(np_fn, x, w), rtol=rtol, atol=atol)


# ---- nn -----------------------------------------------------------------------------------

def group_norm_np(x, g, weight=None, bias=None, eps=1e-5):
    n, c = x.shape[:2]
    y = x.reshape(n, g, -1)
    y = (y - y.mean(-1, keepdims=True)) / np.sqrt(y.var(-1, keepdims=True) + eps)
    y = y.reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def test_group_norm_matches_definition_and_gradient():
    x = rng(0).standard_normal((2, 6, 3, 2)).astype(np.float32)
    gn = nn.GroupNorm(3, 6)
    assert to_np(gn.weight).tolist() == [1.0] * 6 and to_np(gn.bias).tolist() == [0.0] * 6
    w = rng(1).standard_normal(6).astype(np.float32)
    b = rng(2).standard_normal(6).astype(np.float32)
    with tf.no_grad():
        gn.weight.copy_(tf.tensor(w))
        gn.bias.copy_(tf.tensor(b))
    np.testing.assert_allclose(to_np(gn(tf.tensor(x))), group_norm_np(x.astype(np.float64), 3, w, b),
                               rtol=1e-4, atol=1e-5)
    check_grad(lambda t: F.group_norm(t, 2, tf.tensor(w), tf.tensor(b)),
               lambda a: group_norm_np(a, 2, w.astype(np.float64), b.astype(np.float64)), x[:, :, :2, :])
    assert [n for n, _ in gn.named_parameters()] == ["weight", "bias"]
    with pytest.raises(tf.ValueError):
        nn.GroupNorm(4, 6)
    with pytest.raises(tf.ShapeError):
        gn(tf.zeros(2, 4, 3))


def adaptive_np(x, oh, ow):
    h, w = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + (oh, ow))
    for i in range(oh):
        h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[..., i, j] = x[..., h0:h1, w0:w1].mean(axis=(-2, -1))
    return out


@pytest.mark.parametrize("size,out", [((7, 5), (3, 2)), ((8, 6), (4, 3)), ((5, 7), (1, 1)), ((5, 7), (2, None))])
def test_adaptive_avg_pool2d_bins_as_pytorch(size, out):
    x = rng(3).standard_normal((2, 3) + size).astype(np.float32)
    oh, ow = out[0], size[1] if out[1] is None else out[1]
    got = nn.AdaptiveAvgPool2d(out)(tf.tensor(x))
    assert tuple(got.shape) == (2, 3, oh, ow)
    np.testing.assert_allclose(to_np(got), adaptive_np(x.astype(np.float64), oh, ow), rtol=1e-5, atol=1e-6)
    check_grad(lambda t: F.adaptive_avg_pool2d(t, out), lambda a: adaptive_np(a, oh, ow), x[:1, :2])


def conv_np(x, w, b=None, stride=(1, 1), pad=((0, 0), (0, 0)), dilation=(1, 1)):
    x = np.pad(x, ((0, 0), (0, 0)) + tuple(pad))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                      j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out if b is None else out + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("kernel,stride,padding,dilation,expect_pad", [
    ((2, 3), (2, 1), (1, 0), 1, ((1, 1), (0, 0))),
    ((3, 3), 1, "same", 1, ((1, 1), (1, 1))),
    ((2, 4), 1, "same", 1, ((0, 1), (1, 2))),      # even kernels: the extra row/column after
    ((3, 2), 1, "same", (2, 1), ((2, 2), (0, 1))),
    ((3, 2), (1, 2), "valid", 1, ((0, 0), (0, 0))),
])
def test_conv2d_rectangular_same_valid(kernel, stride, padding, dilation, expect_pad):
    x = rng(4).standard_normal((2, 3, 6, 7)).astype(np.float32)
    conv = nn.Conv2d(3, 4, kernel, stride=stride, padding=padding, dilation=dilation, seed=5)
    w, b = to_np(conv.weight).astype(np.float64), to_np(conv.bias).astype(np.float64)
    assert w.shape == (4, 3) + kernel
    bound = 1 / np.sqrt(3 * kernel[0] * kernel[1])  # PyTorch's default init: fan_in = in * kh * kw
    assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2
    s = (stride, stride) if isinstance(stride, int) else stride
    d = (dilation, dilation) if isinstance(dilation, int) else dilation
    ref = conv_np(x.astype(np.float64), w, b, s, expect_pad, d)
    got = conv(tf.tensor(x))
    np.testing.assert_allclose(to_np(got), ref, rtol=1e-4, atol=1e-5)
    if padding == "same":
        assert tuple(got.shape[2:]) == (6, 7)
    np.testing.assert_allclose(to_np(F.conv2d(tf.tensor(x), conv.weight, conv.bias, s, padding, d)), ref,
                               rtol=1e-4, atol=1e-5)
    t = tf.tensor(x[:1], requires_grad=True)
    wr = rng(6).standard_normal(ref[:1].shape)
    tf.sum(conv(t) * tf.tensor(wr.astype(np.float32))).backward()
    np.testing.assert_allclose(to_np(t.grad), fd_grad(lambda a: conv_np(a, w, b, s, expect_pad, d), x[:1], wr),
                               rtol=2e-3, atol=2e-4)


def test_conv2d_same_needs_stride_one_and_bad_padding():
    with pytest.raises(tf.ValueError, match="stride 1"):
        nn.Conv2d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(tf.ValueError, match="'valid' or 'same'"):
        nn.Conv2d(1, 1, 3, padding="full")


def test_dropout2d_zeroes_whole_channels():
    x = tf.ones(4, 50, 3, 3)
    drop = nn.Dropout2d(0.4, seed=7)
    y = to_np(drop(x))
    per_channel = y.reshape(4, 50, 9)
    for ch in per_channel.reshape(200, 9):
        assert set(np.unique(ch)) <= {0.0, np.float32(1 / 0.6)} and len(np.unique(ch)) == 1
    dropped = (per_channel[:, :, 0] == 0).mean()
    assert 0.25 < dropped < 0.55
    assert not np.array_equal(to_np(drop(x)), y)  # each call draws a new mask
    drop.eval()
    assert drop(x) is x
    # the gradient flows through the kept channels only, scaled like the values
    drop.train()
    t = tf.ones(2, 8, 2, 2, requires_grad=True)
    out = nn.Dropout2d(0.5, seed=3)(t)
    out.sum().backward()
    np.testing.assert_array_equal(to_np(t.grad), to_np(out))


def test_relu_inplace_and_functional_inplace():
    x = tf.tensor([-1.0, 2.0, -3.0])
    v = x._version
    y = nn.ReLU(inplace=True)(x)
    assert y is x and to_np(x).tolist() == [0.0, 2.0, 0.0] and x._version > v
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    w = tf.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    h = w * 2
    nn.ReLU(inplace=True)(h)
    (h * h).sum().backward()
    np.testing.assert_allclose(to_np(w.grad), [0.0, 4.0, 16.0])  # d/dw (2w)^2 = 8w where 2w > 0
    with pytest.raises(tf.AutogradError):
        F.relu(w, inplace=True)  # a leaf that requires grad, with grad mode on


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(reduction):
    a = rng(8).standard_normal((4, 5)).astype(np.float32) * 2
    b = rng(9).standard_normal((4, 5)).astype(np.float32)
    red = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]

    def smooth(d, beta):
        d = np.abs(d)
        return np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta) if beta else d

    def huber(d, delta):
        d = np.abs(d)
        return np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))

    bt = tf.tensor(b)
    cases = [(lambda t: F.l1_loss(t, bt, reduction=reduction), lambda x: red(np.abs(x - b))),
             (lambda t: nn.L1Loss(reduction)(t, bt), lambda x: red(np.abs(x - b)))]
    for beta in (1.0, 0.5, 0.0):
        cases.append((lambda t, beta=beta: F.smooth_l1_loss(t, bt, reduction=reduction, beta=beta),
                      lambda x, beta=beta: red(smooth(x - b, beta))))
    cases.append((lambda t: nn.SmoothL1Loss(reduction, beta=0.7)(t, bt), lambda x: red(smooth(x - b, 0.7))))
    cases.append((lambda t: nn.HuberLoss(reduction, delta=1.5)(t, bt), lambda x: red(huber(x - b, 1.5))))
    for tf_fn, np_fn in cases:
        check_grad(tf_fn, np_fn, a)


def log_softmax_np(x, axis=-1):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def ce_np(x, y, weight=None, ignore_index=-100, smoothing=0.0, reduction="mean"):
    """PyTorch's documented cross_entropy with class indices, weight and label_smoothing."""
    n, c = x.shape
    w = np.ones(c) if weight is None else weight
    logp = log_softmax_np(x)
    keep = y != ignore_index
    ys = np.where(keep, y, 0)
    nll = -logp[np.arange(n), ys] * w[ys] * keep
    smooth = -(logp * w).sum(-1) / c * keep
    loss = (1 - smoothing) * nll + smoothing * smooth
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (w[ys] * keep).sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_cross_entropy_label_smoothing_weight_ignore(smoothing, reduction):
    x = rng(10).standard_normal((6, 4)).astype(np.float32)
    y = np.array([0, 3, -100, 2, 1, 3])
    weight = np.array([1.0, 0.5, 2.0, 1.5])
    check_grad(lambda t: F.cross_entropy(t, tf.tensor(y), tf.tensor(weight.astype(np.float32)),
                                         reduction=reduction, label_smoothing=smoothing),
               lambda a: ce_np(a, y, weight, smoothing=smoothing, reduction=reduction), x)
    loss = nn.CrossEntropyLoss(label_smoothing=smoothing, reduction=reduction)(tf.tensor(x), tf.tensor(y))
    np.testing.assert_allclose(to_np(loss), ce_np(x.astype(np.float64), y, smoothing=smoothing, reduction=reduction),
                               rtol=1e-5, atol=1e-6)


def test_cross_entropy_class_dim_one_and_probabilities():
    x = rng(11).standard_normal((2, 3, 4)).astype(np.float32)  # [N, C, d]
    y = np.array([[0, 2, 1, 1], [2, 0, 0, 1]])
    flat_x, flat_y = x.transpose(0, 2, 1).reshape(-1, 3), y.reshape(-1)
    got = F.cross_entropy(tf.tensor(x), tf.tensor(y), reduction="none", label_smoothing=0.2)
    assert tuple(got.shape) == (2, 4)
    np.testing.assert_allclose(to_np(got).reshape(-1), ce_np(flat_x.astype(np.float64), flat_y, smoothing=0.2,
                                                             reduction="none"), rtol=1e-5, atol=1e-6)
    p = rng(12).random((5, 3)).astype(np.float32)
    p /= p.sum(-1, keepdims=True)
    z = rng(13).standard_normal((5, 3)).astype(np.float32)
    check_grad(lambda t: F.cross_entropy(t, tf.tensor(p)), lambda a: -(p * log_softmax_np(a)).sum(-1).mean(), z)
    with pytest.raises(tf.ValueError):
        F.cross_entropy(tf.tensor(z), tf.tensor([0, 1, 2, 0, 1]), label_smoothing=1.5)


def test_nll_loss_weight_ignore_index():
    x = log_softmax_np(rng(14).standard_normal((5, 3)))
    y = np.array([2, -100, 0, 1, 2])
    w = np.array([0.2, 1.0, 3.0])
    keep = y != -100
    ys = np.where(keep, y, 0)
    ref = (-x[np.arange(5), ys] * w[ys] * keep).sum() / (w[ys] * keep).sum()
    got = F.nll_loss(tf.tensor(x.astype(np.float32)), tf.tensor(y), tf.tensor(w.astype(np.float32)))
    np.testing.assert_allclose(got.item(), ref, rtol=1e-5)
    np.testing.assert_allclose(nn.NLLLoss()(tf.tensor(x.astype(np.float32)), tf.tensor(y)).item(),
                               -x[np.arange(5), ys][keep].mean(), rtol=1e-5)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, seed=1)
        self.bn = nn.BatchNorm2d(2)
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.5, seed=2), nn.Linear(8, 3, seed=3))
        self.shared = self.conv  # reachable twice


def test_module_apply_requires_grad_named_modules_train_eval():
    net = Net()
    names = [n for n, _ in net.named_modules()]
    assert names == ["", "conv", "bn", "head", "head.0", "head.1", "head.2"]
    assert len([n for n, _ in net.named_modules(remove_duplicate=False)]) == 8
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Conv2d", "BatchNorm2d", "Flatten", "Dropout", "Linear", "Sequential", "Conv2d", "Net"]

    def init(m):  # the usual `model.apply(init_weights)`
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, 0.5)
    net.apply(init)
    assert np.all(to_np(net.head[2].weight) == 0.5)
    assert net.head.requires_grad_(False) is net.head
    assert not any(p.requires_grad for p in net.head.parameters())
    assert all(p.requires_grad for p in net.conv.parameters())
    net.eval()
    assert all(not m.training for m in net.modules())
    x = tf.ones(1, 8)
    assert np.array_equal(to_np(net.head[1](x)), to_np(x))  # eval Dropout is the identity
    net.train()
    assert all(m.training for m in net.modules())
    assert not np.array_equal(to_np(net.head[1](tf.ones(1, 64))), np.ones((1, 64), np.float32))


def test_load_state_dict_returns_missing_and_unexpected_keys():
    net = Net()
    sd = net.state_dict()
    del sd["bn.running_var"]
    sd["extra.weight"] = tf.zeros(1)
    result = net.load_state_dict(sd, strict=False)
    assert isinstance(result, nn.IncompatibleKeys)
    assert result.missing_keys == ["bn.running_var"] and result.unexpected_keys == ["extra.weight"]
    missing, unexpected = result
    assert missing == ["bn.running_var"]
    with pytest.raises(tf.ValueError, match="bn.running_var"):
        net.load_state_dict(sd)
    assert net.load_state_dict(Net().state_dict()) == ([], [])


# ---- einsum ---------------------------------------------------------------------------------

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("bhqk,bhkd->bqhd", [(2, 2, 3, 5), (2, 2, 5, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]),
    ("...ij,jk", [(2, 3, 4), (4, 2)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bii->bi", [(2, 3, 3)]),
    ("ijk->kji", [(2, 3, 4)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM_CASES)
def test_einsum_matches_numpy_with_gradients(equation, shapes):
    arrays = [rng(20 + i).standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)]
    ref = np.einsum(equation, *[a.astype(np.float64) for a in arrays])
    tensors = [tf.tensor(a, requires_grad=True) for a in arrays]
    out = tf.einsum(equation, *tensors)
    assert tuple(out.shape) == ref.shape
    np.testing.assert_allclose(to_np(out), ref, rtol=1e-4, atol=1e-5)
    w = rng(30).standard_normal(ref.shape)
    tf.sum(out * tf.tensor(np.asarray(w, np.float32))).backward()
    for i, (a, t) in enumerate(zip(arrays, tensors)):
        def f(x, i=i):
            ops = [b.astype(np.float64) for b in arrays]
            ops[i] = x
            return np.einsum(equation, *ops)
        np.testing.assert_allclose(to_np(t.grad), fd_grad(f, a, w), rtol=2e-3, atol=2e-4)


def test_einsum_errors_and_list_form():
    a, b = tf.ones(2, 3), tf.ones(3, 4)
    np.testing.assert_allclose(to_np(tf.einsum("ij,jk->ik", [a, b])), np.full((2, 4), 3.0))
    with pytest.raises(tf.ShapeError):
        tf.einsum("ij,jk->ik", a, tf.ones(4, 4))
    with pytest.raises(tf.ValueError):
        tf.einsum("ij,jk->ik", a)
    with pytest.raises(tf.ValueError):
        tf.einsum("ij->iz", a)


# ---- autograd introspection -----------------------------------------------------------------

def test_grad_fn_names_and_edges():
    w = tf.tensor([1.0, 2.0], requires_grad=True)
    assert w.grad_fn is None and tf.ones(2).grad_fn is None
    y = w * 3
    assert y.grad_fn is not None and y.grad_fn.name() == "MulBackward" and y.grad_fn.op == "mul"
    (acc, _), (const, _) = y.grad_fn.next_functions
    assert acc.name() == "AccumulateGrad" and const is None
    z = tf.matmul(y.reshape(1, 2), y.reshape(2, 1))
    assert z.grad_fn.name() == "MatmulBackward"
    assert len(z.grad_fn.next_functions) == 2
    assert y.detach().grad_fn is None
    with tf.no_grad():
        assert (w * 2).grad_fn is None


def test_retain_grad_keeps_non_leaf_gradients():
    x = tf.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * 3
    u = y * 2           # a use before retain_grad counts too, as in PyTorch
    y.retain_grad()
    z = (y * y).sum() + u.sum()
    z.backward()
    np.testing.assert_allclose(to_np(y.grad), 2 * np.array([3.0, -6.0, 9.0]) + 2)
    np.testing.assert_allclose(to_np(x.grad), 3 * (2 * np.array([3.0, -6.0, 9.0]) + 2))
    other = x * 5
    (other * other).sum().backward()
    assert other.grad is None  # not retained
    x.retain_grad()  # a leaf: nothing changes
    with pytest.raises(tf.AutogradError):
        tf.ones(2).retain_grad()


# ---- in-place forms -------------------------------------------------------------------------

def test_inplace_forms_values_and_versions():
    a = rng(40).standard_normal((3, 4)).astype(np.float32)
    cases = [
        ("relu_", (), np.maximum(a, 0)), ("clamp_", (-0.5, 0.5), np.clip(a, -0.5, 0.5)),
        ("clip_", (None, 0.1), np.minimum(a, 0.1)), ("mul_", (2.5,), a * 2.5), ("div_", (4.0,), a / 4),
        ("sub_", (1.0,), a - 1), ("abs_", (), np.abs(a)), ("neg_", (), -a), ("tanh_", (), np.tanh(a)),
        ("sigmoid_", (), 1 / (1 + np.exp(-a))), ("exp_", (), np.exp(a)), ("square_", (), a * a),
        ("zero_", (), np.zeros_like(a)), ("fill_", (7.0,), np.full_like(a, 7.0)),
    ]
    for name, args, ref in cases:
        t = tf.tensor(a)
        v = t._version
        out = getattr(t, name)(*args)
        assert out is t, name
        assert t._version > v, name
        np.testing.assert_allclose(to_np(t), ref, rtol=1e-6, atol=1e-6, err_msg=name)
    t = tf.tensor(a)
    t.add_(tf.tensor(a), alpha=-0.5)
    np.testing.assert_allclose(to_np(t), a * 0.5, rtol=1e-6)
    t.sub_(tf.tensor(a), alpha=2)
    np.testing.assert_allclose(to_np(t), a * -1.5, rtol=1e-6)
    t.copy_(tf.tensor(a))
    np.testing.assert_array_equal(to_np(t), a)
    col = tf.tensor(a)
    col[:, 1].relu_()  # through a view
    expect = a.copy()
    expect[:, 1] = np.maximum(expect[:, 1], 0)
    np.testing.assert_array_equal(to_np(col), expect)


def test_inplace_forms_under_autograd():
    w = tf.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    h = w * 1.0
    h.clamp_(0.0, 1.0)
    h.mul_(3.0)
    h.sum().backward()
    np.testing.assert_allclose(to_np(w.grad), [0.0, 3.0, 0.0])  # clamp's gradient: 1 inside the range
    with pytest.raises(tf.AutogradError):
        w.relu_()  # a leaf that requires grad, grad mode on
    with tf.no_grad():
        w.add_(tf.ones(3), alpha=-0.1)  # an optimizer step
    np.testing.assert_allclose(to_np(w), [-1.1, 0.4, 1.9], rtol=1e-6)
    # a tensor a rule saved, changed afterwards: backward names the op
    a = w * 1.0
    b = a * a
    a.relu_()
    with pytest.raises(tf.AutogradError, match="mul"):
        b.sum().backward()


# ---- numpy spellings, non_blocking ----------------------------------------------------------

def test_reductions_accept_axis_keepdims_dtype():
    a = rng(41).standard_normal((3, 4, 2)).astype(np.float32)
    t = tf.tensor(a)
    np.testing.assert_allclose(to_np(t.sum(axis=1)), a.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(to_np(tf.sum(t, axis=(0, 2), keepdims=True)), a.sum(axis=(0, 2), keepdims=True),
                               rtol=1e-5)
    np.testing.assert_allclose(to_np(t.mean(axis=[0, 1])), a.mean(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose(to_np(t.var(axis=0, unbiased=False)), a.var(axis=0), rtol=1e-4)
    np.testing.assert_allclose(to_np(t.std(0)), a.std(axis=0, ddof=1), rtol=1e-4)
    np.testing.assert_allclose(to_np(t.amax(axis=-1, keepdims=True)), a.max(-1, keepdims=True))
    assert to_np(t.argmax(axis=1)).tolist() == a.argmax(1).tolist()
    assert t.max(axis=0).values.shape == (4, 2)
    ints = tf.tensor([[1, 2], [3, 4]])
    s = ints.sum(dtype=tf.float32)
    assert s.dtype == tf.float32 and s.item() == 10.0
    assert bool(tf.tensor([[0, 1], [0, 0]]).any(axis=1)[0]) and not bool(tf.tensor([[0, 1]]).all(axis=1)[0])
    with pytest.raises(TypeError):
        t.sum(0, axis=1)


def test_non_blocking_is_accepted():
    t = tf.ones(2, 3)
    same = t.to("cpu", non_blocking=True)
    assert same.shares_storage(t) and same.data_ptr() == t.data_ptr()
    c = t.to("cpu", non_blocking=True, copy=True)
    assert c is not t and not c.shares_storage(t)
    other = tf.zeros(1, dtype=tf.float16)
    assert t.to(other).dtype == tf.float16
    model = nn.Linear(2, 2)
    assert model.to("cpu", non_blocking=True) is model


# ---- PyTorch interop ------------------------------------------------------------------------

def test_pytorch_interop_shares_memory():
    torch = pytest.importorskip("torch")
    t = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
    pt = torch.from_dlpack(t)
    pt[0, 0] = 10.0  # shared memory
    assert to_np(t)[0, 0] == 10.0
    pa = torch.as_tensor(t.numpy())
    pa[1, 1] = 40.0
    assert to_np(t)[1, 1] == 40.0
    assert torch.tensor(np.asarray(t)).tolist() == [[10.0, 2.0], [3.0, 40.0]]
    src = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    shared = tf.as_tensor(src)
    src[1, 2] = -1.0
    assert to_np(shared)[1, 2] == -1.0 and shared.dtype == tf.float32
    assert tf.as_tensor(torch.tensor([1, 2])).dtype == tf.int64
    needs_grad = torch.ones(2, requires_grad=True)
    assert to_np(tf.as_tensor(needs_grad)).tolist() == [1.0, 1.0]  # copied: torch refuses to export it
    assert to_np(tf.tensor(src)).tolist() == src.tolist()
    with pytest.raises(tf.DTypeError, match="from_dlpack"):
        torch.tensor(t)  # torch 1.13 reads it as a sequence; the message says what works


# ---- errors and __all__ ---------------------------------------------------------------------

def test_tensor_method_argument_errors_name_the_argument():
    t = tf.arange(12.0)
    cases = [(lambda: t.transpose(0, "x"), "Tensor.transpose: argument 'dim1' must be an integer, got str"),
             (lambda: t.narrow("a", 0, 1), "Tensor.narrow: argument 'dim' must be an integer, got str"),
             (lambda: t.requires_grad_("yes"), "Tensor.requires_grad_: argument 'requires_grad' must be a bool, got str"),
             (lambda: t.fill_("a"), "Tensor.fill_: argument 'value' must be a number, got str")]
    for call, message in cases:
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value) == message
    with pytest.raises(tf.ValueError, match="sizes must be integers"):
        t.reshape("three by four")


def test_all_exports_quantized_names_and_new_functions():
    for name in ("q8_0", "q4_0", "q4_k", "q6_k", "quantize", "dequantize", "matmul_q", "embedding_q", "einsum"):
        assert name in tf.__all__, name
    assert "sum" not in tf.__all__ and "max" not in tf.__all__
