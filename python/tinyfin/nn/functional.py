"""tinyfin.nn.functional: the nn ops of ops.def with PyTorch's argument names."""
import tinyfin as tf
from tinyfin._C import (  # noqa: F401
    relu, gelu, silu, sigmoid, tanh, softmax, log_softmax, conv2d, max_pool2d, avg_pool2d,
    layer_norm, rms_norm, embedding, cross_entropy, scaled_dot_product_attention, rope,
)
from tinyfin import pad  # noqa: F401


def one_hot(tensor, num_classes=-1, dtype=None):
    """int64 by default, as PyTorch; num_classes=-1 takes max(tensor) + 1."""
    if num_classes < 0:
        num_classes = int(tf.amax(tensor).item()) + 1
    return tf.one_hot(tensor, num_classes, dtype)


def linear(input, weight, bias=None):
    """input @ weight.T + bias (weight [out, in]); the C++ op, so autocast lowers it as one."""
    return tf._C.linear(input, weight, bias)


def flatten(input, start_dim=0, end_dim=-1):
    return input.flatten(start_dim, end_dim)


def dropout(input, p=0.5, training=True, seed=None):
    """Zeroes elements with probability p and scales the rest by 1/(1-p) (identity unless training)."""
    if not training or p == 0:
        return input
    if not 0 <= p < 1:
        raise tf.ValueError(f"dropout: p must be in [0, 1), got {p}")
    keep = tf.rand(*input.shape, seed=seed, device=input.device) >= p
    return tf.where(keep, input * (1.0 / (1.0 - p)), tf.zeros_like(input))


def mse_loss(input, target, reduction="mean"):
    d = tf.square(input - target)
    if reduction == "none":
        return d
    if reduction == "sum":
        return tf.sum(d)
    if reduction == "mean":
        return tf.mean(d)
    raise tf.ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def nll_loss(input, target, reduction="mean"):
    picked = -tf.sum(input * tf.one_hot(target, input.shape[-1], input.dtype), dim=-1)
    return picked if reduction == "none" else (tf.sum(picked) if reduction == "sum" else tf.mean(picked))
