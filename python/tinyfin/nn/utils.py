"""tinyfin.nn.utils: torch.nn.utils' gradient clipping and flat parameter vectors."""
import math

import tinyfin as tf
from tinyfin import _C

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]


def _list(parameters):
    return [parameters] if isinstance(parameters, tf.Tensor) else list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients so that their global norm is at most max_norm; returns the norm
    before clipping (a 0-d tensor). norm_type 2 runs the C++ nn::clip_grad_norm; inf and other
    p-norms are computed over the ops."""
    params = [p for p in _list(parameters) if p.grad is not None]
    if not params:
        return tf.zeros(())
    if norm_type == 2.0 and not error_if_nonfinite:
        return _C.nn.clip_grad_norm(params, float(max_norm))
    with tf.no_grad():
        grads = [p.grad for p in params]
        device = grads[0].device
        if norm_type == math.inf:
            norms = [tf.amax(tf.abs(g)).float().to(device) for g in grads]
            total = tf.amax(tf.stack(norms))
        else:
            sums = [tf.sum(tf.abs(g).float() ** float(norm_type)).to(device) for g in grads]
            total = tf.sum(tf.stack(sums)) ** (1.0 / norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise tf.ValueError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients "
                                "is non-finite; set error_if_nonfinite=False to clip anyway")
        coef = tf.minimum(float(max_norm) / (total + 1e-6), tf.ones(()))
        for g in grads:
            g.copy_(g * coef.to(g.dtype).to(g.device))
    return total


def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient element into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    with tf.no_grad():
        for p in _list(parameters):
            if p.grad is not None:
                p.grad.copy_(tf.clamp(p.grad, -clip_value, clip_value))


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated (one device)."""
    return tf.cat([p.reshape(-1) for p in _list(parameters)])


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of vec into the parameters, in place."""
    if not isinstance(vec, tf.Tensor) or vec.ndim != 1:
        raise tf.DTypeError("vector_to_parameters: vec must be a 1-D tinyfin.Tensor")
    at = 0
    with tf.no_grad():
        for p in _list(parameters):
            n = p.numel()
            p.copy_(vec[at:at + n].reshape(tuple(p.shape)))
            at += n
    if at != vec.numel():
        raise tf.ShapeError(f"vector_to_parameters: vec has {vec.numel()} elements, the parameters {at}")
