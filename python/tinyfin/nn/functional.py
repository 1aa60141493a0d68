"""tinyfin.nn.functional: the nn ops of ops.def with PyTorch's argument names."""
import tinyfin as tf
import builtins as _builtins

from tinyfin._C import (  # noqa: F401
    gelu, silu, sigmoid, tanh, softmax, log_softmax, max_pool2d, avg_pool2d,
    layer_norm, rms_norm, embedding, scaled_dot_product_attention, rope,
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


def dropout(input, p=0.5, training=True, inplace=False, seed=None):
    """Zeroes elements with probability p and scales the rest by 1/(1-p) (identity unless training)."""
    if not training or p == 0:
        return input
    if not 0 <= p < 1:
        raise tf.ValueError(f"dropout: p must be in [0, 1), got {p}")
    keep = tf.rand(*input.shape, seed=seed, device=input.device) >= p
    out = tf.where(keep, input * (1.0 / (1.0 - p)), tf.zeros_like(input))
    return input.copy_(out) if inplace else out


def _reduce(loss, reduction, op):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return tf.sum(loss)
    if reduction == "mean":
        return tf.mean(loss)
    raise tf.ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def mse_loss(input, target, reduction="mean"):
    return _reduce(tf.square(input - target), reduction, "mse_loss")


def l1_loss(input, target, reduction="mean"):
    """mean |input - target| (torch.nn.functional.l1_loss)."""
    return _reduce(tf.abs(input - target), reduction, "l1_loss")


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (beta=0: l1_loss), as PyTorch."""
    if beta < 0:
        raise tf.ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    d = tf.abs(input - target)
    if beta == 0:
        return _reduce(d, reduction, "smooth_l1_loss")
    loss = tf.where(d < beta, tf.square(d) * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, reduction, "smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0):
    """smooth_l1_loss scaled by delta (torch.nn.functional.huber_loss)."""
    d = tf.abs(input - target)
    loss = tf.where(d < delta, tf.square(d) * 0.5, (d - 0.5 * delta) * delta)
    return _reduce(loss, reduction, "huber_loss")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """torch.nn.functional.cross_entropy: logits [N, C] (or [C], or [N, C, d1, ...] with the
    classes in dim 1) and class indices [N] ([], [N, d1, ...]), or class probabilities of the
    logits' shape; weight [C], ignore_index, label_smoothing as PyTorch."""
    if size_average is not None or reduce is not None:
        raise tf.ValueError("cross_entropy: size_average and reduce are deprecated in PyTorch; "
                            "pass reduction='mean', 'sum' or 'none'")
    if not isinstance(input, tf.Tensor) or not isinstance(target, tf.Tensor):
        raise TypeError("cross_entropy: input and target must be tinyfin.Tensor")
    if target.dtype.is_floating_point:  # probabilities
        if tuple(target.shape) != tuple(input.shape):
            raise tf.ShapeError(f"cross_entropy: probability targets must have the input's shape "
                                f"{tuple(input.shape)}, got {tuple(target.shape)}")
        dim = 1 if input.ndim > 1 else 0
        classes = input.shape[dim]
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / classes
        logp = tf.log_softmax(input, dim)
        if weight is not None:
            logp = logp * weight.reshape([-1] + [1] * (input.ndim - dim - 1))
        loss = -tf.sum(target * logp, dim)
        if reduction == "mean" and input.ndim > 1:
            return tf.sum(loss) / (loss.numel())
        return _reduce(loss, reduction, "cross_entropy")
    if input.ndim == 1:
        out = cross_entropy(input.unsqueeze(0), target.reshape(1), weight, None, ignore_index, None,
                            reduction, label_smoothing)
        return out.reshape([]) if reduction == "none" else out
    if input.ndim > 2:
        classes = input.shape[1]
        perm = [0] + list(range(2, input.ndim)) + [1]
        flat = input.permute(perm).reshape(-1, classes)
        out = tf._C.cross_entropy(flat, target.reshape(-1), weight, reduction, ignore_index, label_smoothing)
        return out.reshape(target.shape) if reduction == "none" else out
    return tf._C.cross_entropy(input, target, weight, reduction, ignore_index, label_smoothing)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """-[p t log s(x) + (1 - t) log(1 - s(x))], computed stably from the logits as PyTorch."""
    log_sig = -softplus(-input)          # log sigmoid(x)
    log_one_minus = -softplus(input)     # log (1 - sigmoid(x))
    pos = target * log_sig if pos_weight is None else target * log_sig * pos_weight
    loss = -(pos + (1 - target) * log_one_minus)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above threshold (as PyTorch)."""
    bx = input * beta
    safe = tf.minimum(bx, tf.full_like(bx, threshold))
    soft = tf.log(tf.exp(safe) + 1.0) / beta
    return tf.where(bx > threshold, input, soft)


def relu(input, inplace=False):
    return input.relu_() if inplace else tf._C.relu(input)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return input.clamp_(min_val, max_val) if inplace else tf.clamp(input, min_val, max_val)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    out = tf.where(input >= 0, input, input * negative_slope)
    return input.copy_(out) if inplace else out


def _pair(v, name, op):
    if isinstance(v, int) and not isinstance(v, _builtins.bool):
        return (v, v)
    v = tuple(v)
    if len(v) != 2 or not _builtins.all(isinstance(i, int) for i in v):
        raise tf.ValueError(f"{op}: {name} must be an int or a pair of ints, got {v}")
    return v


def _same_padding(kernel, dilation):
    """PyTorch's padding='same': total = d (k - 1), the smaller half before."""
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    return [(t // 2, t - t // 2) for t in total]


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d: weight [out, in/groups, kh, kw]; padding an int, a pair,
    'valid' (0) or 'same' (output size = input size; stride must be 1, as PyTorch)."""
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if _pair(stride, "stride", "conv2d") != (1, 1):
                raise tf.ValueError("conv2d: padding='same' needs stride 1 (as in PyTorch)")
            (top, bottom), (left, right) = _same_padding(tuple(weight.shape[2:]), _pair(dilation, "dilation", "conv2d"))
            if top == bottom and left == right:
                padding = (top, left)
            else:  # an even kernel: one more row/column after, as PyTorch
                input = tf.pad(input, (left, right, top, bottom))
                padding = 0
        else:
            raise tf.ValueError(f"conv2d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
    return tf._C.conv2d(input, weight, bias, stride, padding, dilation, groups)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalises each sample's channels in num_groups groups (mean and biased variance over the
    group's channels and all spatial positions), then scales per channel (torch group_norm)."""
    if input.ndim < 2:
        raise tf.ShapeError(f"group_norm: expected input [N, C, ...], got shape {tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if num_groups < 1 or c % num_groups:
        raise tf.ValueError(f"group_norm: {c} channels do not split into {num_groups} groups")
    x = input.reshape(n, num_groups, -1)
    mean = tf.mean(x, -1, keepdim=True)
    var = tf.var(x, -1, correction=0, keepdim=True)
    out = ((x - mean) * tf.rsqrt(var + eps)).reshape(input.shape)
    shape = [1, c] + [1] * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _adaptive_matrix(n_in, n_out, dtype, device):
    """[n_out, n_in]: row i averages input bins floor(i n_in / n_out) .. ceil((i+1) n_in / n_out)."""
    import numpy as np
    m = np.zeros((n_out, n_in), dtype=np.float32)
    for i in range(n_out):
        start, end = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        m[i, start:end] = 1.0 / (end - start)
    return tf.tensor(m, device=device).to(dtype)


def adaptive_avg_pool2d(input, output_size):
    """Averages [.., H, W] into output_size bins (PyTorch's bin edges: floor(i H / out) to
    ceil((i + 1) H / out)); None in output_size keeps that size."""
    if input.ndim not in (3, 4):
        raise tf.ShapeError(f"adaptive_avg_pool2d: expected input [N, C, H, W] or [C, H, W], got shape "
                            f"{tuple(input.shape)}")
    h, w = input.shape[-2], input.shape[-1]
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    oh, ow = (h if output_size[0] is None else output_size[0]), (w if output_size[1] is None else output_size[1])
    if oh < 1 or ow < 1:
        raise tf.ValueError(f"adaptive_avg_pool2d: output_size must be positive, got {output_size}")
    if (oh, ow) == (1, 1):
        return tf.mean(input, (-2, -1), keepdim=True)
    if h % oh == 0 and w % ow == 0:
        return avg_pool2d(input, (h // oh, w // ow))
    rows = _adaptive_matrix(h, oh, input.dtype, input.device)
    cols = _adaptive_matrix(w, ow, input.dtype, input.device)
    return tf.matmul(tf.matmul(rows, input), cols.transpose(0, 1))


def dropout2d(input, p=0.5, training=True, inplace=False, seed=None):
    """Zeroes whole channels ([N, C, H, W] or [C, H, W]) with probability p and scales the others
    by 1/(1-p) (torch.nn.functional.dropout2d); identity unless training."""
    if not 0 <= p <= 1:
        raise tf.ValueError(f"dropout2d: p must be in [0, 1], got {p}")
    if not training or p == 0:
        return input
    if input.ndim not in (3, 4):
        raise tf.ShapeError(f"dropout2d: expected input [N, C, H, W] or [C, H, W], got shape {tuple(input.shape)}")
    mask_shape = list(input.shape[:-2]) + [1, 1]
    if p == 1:
        out = input * 0.0
    else:
        keep = tf.rand(*mask_shape, seed=seed, device=input.device) >= p
        out = input * (keep.to(input.dtype) * (1.0 / (1.0 - p)))
    return input.copy_(out) if inplace else out


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[i, target[i]] (log-probabilities [N, C]) with weight [C] and ignore_index; 'mean'
    divides by the summed weights of the rows kept, as PyTorch."""
    if size_average is not None or reduce is not None:
        raise tf.ValueError("nll_loss: size_average and reduce are deprecated in PyTorch; pass reduction=")
    keep = target != ignore_index
    safe = tf.where(keep, target, tf.zeros_like(target))
    picked = -tf.sum(input * tf.one_hot(safe, input.shape[-1], input.dtype), dim=-1)
    w = keep.to(input.dtype)
    if weight is not None:
        w = w * tf.index_select(weight, 0, safe)
    picked = picked * w
    if reduction == "mean":
        return tf.sum(picked) / tf.sum(w)
    return _reduce(picked, reduction, "nll_loss")
