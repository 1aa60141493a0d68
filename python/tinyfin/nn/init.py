"""tinyfin.nn.init: torch.nn.init's initialisers, filling a tensor in place under no_grad and
returning it. Random ones take an optional seed (else the next draw of tinyfin.manual_seed's
stream). Fans as PyTorch: for a weight [out, in, k...], fan_in = in * prod(k), fan_out = out * prod(k)."""
import math

import tinyfin as tf

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_"]


def calculate_gain(nonlinearity, param=None):
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise tf.ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(tensor):
    if tensor.ndim < 2:
        raise tf.ValueError(f"fan in and fan out need a tensor of rank >= 2, got shape {tuple(tensor.shape)}")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fill(tensor, values):
    with tf.no_grad():
        tensor.copy_(values)
    return tensor


def uniform_(tensor, a=0.0, b=1.0, seed=None):
    u = tf.rand(*tensor.shape, seed=seed, device=tensor.device)
    return _fill(tensor, u * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, seed=None):
    n = tf.randn(*tensor.shape, seed=seed, device=tensor.device)
    return _fill(tensor, n * std + mean)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, seed=None):
    """N(mean, std^2) redrawn outside [a, b] (drawn on the host from the seed, then copied)."""
    import numpy as np
    s = tf._next_seed() if seed is None else seed
    r = np.random.default_rng(s)
    out = r.normal(mean, std, tensor.numel())
    bad = (out < a) | (out > b)
    while bad.any():
        out[bad] = r.normal(mean, std, int(bad.sum()))
        bad = (out < a) | (out > b)
    return _fill(tensor, tf.tensor(out.reshape(tuple(tensor.shape)).astype(np.float32), device=tensor.device))


def constant_(tensor, val):
    return _fill(tensor, tf.full(tuple(tensor.shape), val, dtype=tensor.dtype, device=tensor.device))


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def eye_(tensor):
    if tensor.ndim != 2:
        raise tf.ValueError("eye_: the tensor must be 2-D")
    import numpy as np
    return _fill(tensor, tf.tensor(np.eye(*tensor.shape, dtype=np.float32), device=tensor.device))


def xavier_uniform_(tensor, gain=1.0, seed=None):
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, seed)


def xavier_normal_(tensor, gain=1.0, seed=None):
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), seed)


def _kaiming_std(tensor, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise tf.ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", seed=None):
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, seed)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", seed=None):
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), seed)
