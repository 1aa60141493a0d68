"""tinyfin.nn modules, optimizers, state dicts and TFNN files shared with the C++ API."""
import os
import subprocess

import numpy as np
import pytest

import tinyfin as tf
import tinyfin.nn as nn
import tinyfin.nn.functional as F
from conftest import rng


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1, seed=1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 4 * 4, 8, seed=2), nn.ReLU(), nn.Linear(8, 3, seed=3))
        self.scale = tf.ones(3, requires_grad=True)
        self.not_a_param = tf.ones(3)

    def forward(self, x):
        return self.head(self.pool(tf.relu(self.conv(x)))) * self.scale


def test_registration_and_names():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "conv.weight", "conv.bias", "head.1.weight", "head.1.bias", "head.3.weight", "head.3.bias"]
    assert len(list(net.parameters())) == 7
    assert list(net.state_dict()) == names
    assert all(p.requires_grad for p in net.parameters())
    assert net(tf.ones(2, 1, 8, 8)).shape == (2, 3)
    assert "Conv2d" in repr(net) and "(head): Sequential" in repr(net)


def test_linear_matches_reference_and_cpp_init():
    lin = nn.Linear(4, 3, seed=5)
    x = rng(0).standard_normal((2, 4)).astype(np.float32)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    np.testing.assert_allclose(lin(tf.tensor(x)).detach().numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    bound = 1 / np.sqrt(4)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert nn.Linear(4, 3, seed=5).weight.tolist() == lin.weight.tolist()
    assert nn.Linear(4, 3, bias=False).bias is None
    assert [n for n, _ in nn.Linear(4, 3, bias=False).named_parameters()] == ["weight"]


def test_modules_forward():
    x = tf.tensor(rng(1).standard_normal((2, 3, 6, 6)).astype(np.float32))
    np.testing.assert_allclose(nn.AvgPool2d(2)(x).numpy(), F.avg_pool2d(x, 2).numpy())
    np.testing.assert_allclose(nn.MaxPool2d(3, 1, 1)(x).numpy(), F.max_pool2d(x, 3, 1, 1).numpy())
    np.testing.assert_allclose(nn.GELU()(x).numpy(), tf.gelu(x).numpy())
    np.testing.assert_allclose(nn.GELU("tanh")(x).numpy(), tf.gelu(x, "tanh").numpy())
    assert nn.Flatten()(x).shape == (2, 108) and nn.Flatten(0)(x).shape == (216,)
    ln = nn.LayerNorm(6)
    np.testing.assert_allclose(ln(x).detach().numpy(), F.layer_norm(x, (6,)).numpy(), rtol=1e-6)
    assert [n for n, _ in ln.named_parameters()] == ["weight", "bias"]
    rms = nn.RMSNorm([6])
    np.testing.assert_allclose(rms(x).detach().numpy(), F.rms_norm(x, (6,)).numpy(), rtol=1e-6)
    emb = nn.Embedding(10, 4, seed=1)
    idx = tf.tensor([[1, 9], [0, 1]])
    np.testing.assert_array_equal(emb(idx).detach().numpy(), emb.weight.detach().numpy()[[[1, 9], [0, 1]]])


def test_dropout_train_eval():
    d = nn.Dropout(0.5, seed=3)
    x = tf.ones(1000)
    y = d(x).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 300 < (y == 0).sum() < 700
    seq = nn.Sequential(nn.Linear(2, 2), d)
    seq.eval()
    assert not d.training and not seq.training
    assert d(x).tolist() == x.tolist()
    seq.train()
    assert d.training


def test_state_dict_roundtrip_and_strict():
    a, b = Net(), Net()
    b.conv.weight.requires_grad  # noqa: B018
    with tf.no_grad():
        for p in b.parameters():
            p.fill_(0.25)
    a.load_state_dict(b.state_dict())
    for (n1, p1), (n2, p2) in zip(a.named_parameters(), b.named_parameters()):
        assert n1 == n2 and p1.tolist() == p2.tolist()
    sd = b.state_dict()
    del sd["scale"]
    with pytest.raises(tf.ValueError, match="scale"):
        a.load_state_dict(sd)
    missing, unexpected = a.load_state_dict(sd, strict=False)
    assert missing == ["scale"] and unexpected == []
    sd = b.state_dict()
    sd["scale"] = tf.ones(4)
    with pytest.raises(tf.ShapeError):
        a.load_state_dict(sd)


def test_save_load_python_roundtrip(tmp_path):
    net = Net()
    path = tmp_path / "net.tfnn"
    tf.save(net, path)
    loaded = tf.load(path)
    assert list(loaded) == [n for n, _ in net.named_parameters()]
    other = Net()
    other.load_state_dict(loaded)
    x = tf.ones(1, 1, 8, 8)
    np.testing.assert_allclose(other(x).detach().numpy(), net(x).detach().numpy())
    tf.save({"a": tf.arange(3), "b": tf.ones(2, dtype=tf.float16)}, tmp_path / "d.tfnn")
    d = tf.load(str(tmp_path / "d.tfnn"))
    assert d["a"].tolist() == [0, 1, 2] and d["a"].dtype == tf.int64 and d["b"].dtype == tf.float16


def tool():
    path = os.environ.get("TFNN_TOOL")
    if not path or not os.path.exists(path):
        pytest.fail("TFNN_TOOL (tests/python/tfnn_tool, built by meson) is not set")
    return path


def test_tfnn_file_written_by_cpp(tmp_path):
    path = tmp_path / "cpp.tfnn"
    subprocess.run([tool(), "write", str(path)], check=True)
    d = tf.load(path)
    assert list(d) == ["layer.weight", "layer.index", "half"]
    assert d["layer.weight"].tolist() == [[0, 1, 2], [3, 4, 5]] and d["layer.weight"].dtype == tf.float32
    assert d["layer.index"].tolist() == [7, -8, 9, 10] and d["layer.index"].dtype == tf.int64
    assert d["half"].dtype == tf.float16 and d["half"].tolist() == [0.5, 0.5]


def test_tfnn_file_read_by_cpp(tmp_path):
    path = tmp_path / "py.tfnn"
    tf.save({"w": tf.tensor([[1.5, -2.0]]), "n": tf.tensor([3, 4], dtype=tf.int32)}, path)
    out = subprocess.run([tool(), "read", str(path)], check=True, capture_output=True, text=True).stdout
    assert out.splitlines() == ["w f32 [1,2] 1.5 -2", "n i32 [2] 3 4"]


def test_sgd_matches_hand_computed():
    p = tf.tensor([1.0, -2.0], requires_grad=True)
    opt = tf.optim.SGD([p], lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
    # step 1: g = 2p, buf = g, p1 = p - 0.1 g = 0.8 p; step 2: g = 1.6 p, buf = 0.9 * 2p + 1.6p = 3.4p
    np.testing.assert_allclose(p.detach().numpy(), np.array([1.0, -2.0]) * (0.8 - 0.34), rtol=1e-6)
    assert opt.lr == pytest.approx(0.1)
    opt.lr = 0.01
    assert opt.lr == pytest.approx(0.01)


def test_adamw_matches_reference():
    p0 = np.array([1.0, -2.0, 0.5], np.float32)
    p = tf.tensor(p0, requires_grad=True)
    opt = tf.optim.AdamW([p], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    ref, m, v = p0.astype(np.float64), 0, 0
    for t in range(1, 4):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
        g = 2 * ref
        ref = ref * (1 - 0.01 * 0.1)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        ref = ref - 0.01 / (1 - 0.9 ** t) * m / (np.sqrt(v) / np.sqrt(1 - 0.999 ** t) + 1e-8)
    np.testing.assert_allclose(p.detach().numpy(), ref, rtol=1e-5)


def test_module_to_device_and_zero_grad():
    net = nn.Sequential(nn.Linear(3, 2, seed=1))
    net(tf.ones(1, 3)).sum().backward()
    assert net[0].weight.grad is not None
    net.zero_grad()
    assert net[0].weight.grad is None
    net.to("cpu")
    assert all(p.device == "cpu" and p.requires_grad for p in net.parameters())
    assert net(tf.ones(1, 3)).shape == (1, 2)


def test_parameter_helper():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(tf.ones(2))

        def forward(self, x):
            return x * self.w

    m = M()
    assert [n for n, _ in m.named_parameters()] == ["w"]
    with pytest.raises(tf.AutogradError):
        class Bad(nn.Module):
            def __init__(self):
                self.x = 1
        Bad()


def _permutation_reference(n, seed, epoch):
    """Fisher-Yates driven by splitmix64 from mix_seed(seed, 0x5eed0000 + epoch), in Python."""
    mask = (1 << 64) - 1
    state = tf._C.mix_seed(seed, 0x5EED0000 + epoch)
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        j = (z * (i + 1)) >> 64
        perm[i], perm[j] = perm[j], perm[i]
    return perm


@pytest.mark.parametrize("n,seed,epoch", [(0, 0, 1), (1, 5, 1), (10, 0, 1), (257, 42, 3), (1000, 7, -2)])
def test_permutation_matches_reference(n, seed, epoch):
    got = tf._C.permutation(n, seed, epoch)
    assert got.dtype == np.int64
    assert got.tolist() == _permutation_reference(n, seed, epoch)
    assert sorted(got.tolist()) == list(range(n))


def test_permutation_depends_on_epoch_and_rejects_negative_n():
    assert tf._C.permutation(100, 0, 1).tolist() != tf._C.permutation(100, 0, 2).tolist()
    with pytest.raises(tf.ValueError):
        tf._C.permutation(-1, 0, 1)
