"""Indexing with index arrays and boolean masks (numpy's "advanced" indexing), index_select and
flip. Basic indexing (ints, slices with positive steps, None, ...) makes views in tinyfin._C;
an index list, integer array or tensor, or a boolean mask gathers a copy through the embedding op
(which copies rows of any dtype and is differentiable), and setting through one writes with
`where` into the view the other items select. The index values are read on the host (as numpy
and PyTorch do to size the result)."""
import builtins

import numpy as np

import tinyfin as tf
from . import _C

_BASIC = (int, slice, type(None), type(Ellipsis))


def _is_basic(item):
    return isinstance(item, _BASIC) and not isinstance(item, builtins.bool)


def _host_index(item):
    """An advanced index item as a numpy array (bool mask or int64 indices)."""
    if isinstance(item, _C.Tensor):
        a = item.detach().cpu().numpy() if item.dtype != tf.bfloat16 else None
        if a is None:
            raise tf.DTypeError("index: a bfloat16 tensor cannot index; use an integer or bool tensor")
    elif isinstance(item, builtins.bool):
        raise tf.DTypeError("index: a Python bool is not an index (numpy's a[True] is not supported); "
                            "use None to add an axis or a bool mask tensor")
    else:
        try:
            a = np.asarray(item)
        except (builtins.ValueError, builtins.TypeError) as e:
            raise tf.ShapeError(f"index: not a rectangular list of indices ({e})") from None
    if a.dtype == np.bool_:
        return a
    if a.size == 0 and a.dtype.kind == "f":  # [] reads as float64
        return a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise tf.DTypeError(f"index: index arrays must hold integers or bools, got {a.dtype} "
                            "(only integers, slices, None, ..., integer arrays/tensors/lists and "
                            "bool masks index a tensor)")
    return a.astype(np.int64)


def _normalise(idx, n, axis):
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx[(idx < -n) | (idx >= n)][0]
        raise tf.ValueError(f"index {bad} is out of range for dim {axis} of size {n}")
    return np.where(idx < 0, idx + n, idx)


def _gather(input, dim, idx):
    """input's slices idx (normalised int64 numpy array, any shape) along dim: shape
    input.shape[:dim] + idx.shape + input.shape[dim+1:]."""
    shape = tuple(input.shape)
    n = shape[dim]
    others = [d for d in range(len(shape)) if d != dim]
    rest = tuple(shape[d] for d in others)
    out_shape = shape[:dim] + idx.shape + shape[dim + 1:]
    if int(np.prod(out_shape, dtype=np.int64)) == 0:
        return tf.empty(*out_shape, dtype=input.dtype, device=input.device)
    moved = input.permute(dim, *others) if dim else input
    rows = moved.reshape(n, int(np.prod(rest, dtype=np.int64)))
    out = _C.embedding(tf.tensor(np.ascontiguousarray(idx), device=input.device), rows)
    out = out.reshape(idx.shape + rest)
    if dim == 0:
        return out
    m = idx.ndim
    # out's axes: idx's m axes, then the other axes in order; put idx's where dim was.
    order = list(range(m, m + dim)) + list(range(m)) + list(range(m + dim, m + len(rest)))
    return out.permute(*order)


def index_select(input, dim, index):
    """The slices index (an int list, array or tensor of any shape; negative counts from the end)
    of input along dim, as a new tensor of shape input.shape[:dim] + index.shape +
    input.shape[dim+1:] (numpy.take; PyTorch's index_select takes 1-D indices only).
    Differentiable."""
    rank = input.ndim
    if not -rank <= dim < rank:
        raise tf.ShapeError(f"index_select: dim {dim} is out of range for a tensor of rank {rank}")
    dim %= rank
    idx = _host_index(index)
    if idx.dtype == np.bool_:
        raise tf.DTypeError("index_select: index must hold integers; a bool mask indexes as x[mask]")
    return _gather(input, dim, _normalise(idx, input.shape[dim], dim))


def flip(input, dims):
    """A copy of input with the order of elements reversed along dims (an int or a sequence), as
    torch.flip and numpy.flip. tinyfin views have no negative strides, so x[::-1] is not a view;
    this is its copy."""
    if isinstance(dims, int):
        dims = (dims,)
    out = input
    for d in dims:
        n = input.shape[d]
        out = index_select(out, d, np.arange(n - 1, -1, -1, dtype=np.int64))
    return out


def _split_key(t, key):
    """(basic key with the advanced item replaced by full slices, the advanced item as a numpy
    array, the axis of the basic view it applies to)."""
    items = list(key) if isinstance(key, tuple) else [key]
    for k, item in enumerate(items):  # rank-0 integer tensors index like ints
        if isinstance(item, _C.Tensor) and item.ndim == 0 and item.dtype in (tf.int32, tf.int64):
            items[k] = item.item()
    advanced = [k for k, item in enumerate(items) if not _is_basic(item)]
    if not advanced:
        return tuple(items), None, None
    if len(advanced) > 1:
        raise tf.ValueError("index: only one index array or mask per indexing expression (numpy's "
                            "combined advanced indexing is not supported); index in two steps")
    pos = advanced[0]
    arr = _host_index(items[pos])
    width = arr.ndim if arr.dtype == np.bool_ else 1
    if arr.dtype == np.bool_ and arr.ndim == 0:
        raise tf.DTypeError("index: a rank-0 bool mask is not supported; use a mask with the indexed "
                            "axes' shape")
    items[pos:pos + 1] = [slice(None)] * width
    # Axes of the basic view before the advanced item: slices and None make one each, ints none,
    # ... the axes no item names.
    named = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
    axis = 0
    for it in items[:pos]:
        if it is Ellipsis:
            axis += t.ndim - named
        elif isinstance(it, (slice, type(None))):
            axis += 1
    return tuple(items), arr, axis


def _advanced_getitem(t, key):
    basic, arr, axis = _split_key(t, key)
    view = t[basic]
    if arr is None:
        return view
    if arr.dtype == np.bool_:
        k = arr.ndim
        shape = tuple(view.shape)
        if shape[axis:axis + k] != arr.shape:
            raise tf.ShapeError(f"index: a mask of shape {arr.shape} does not match the indexed axes "
                                f"{shape[axis:axis + k]} of shape {shape}")
        flat = view.reshape(*shape[:axis], -1, *shape[axis + k:])
        return _gather(flat, axis, np.flatnonzero(arr))
    return _gather(view, axis, _normalise(arr, view.shape[axis], axis))


def _as_value(value, like):
    if isinstance(value, _C.Tensor):
        return value.to(like.device).to(like.dtype) if value.dtype != like.dtype or \
            value.device != like.device else value
    return tf.tensor(value, dtype=like.dtype, device=like.device)


def _advanced_setitem(t, key, value):
    basic, arr, axis = _split_key(t, key)
    view = t[basic]
    if arr is None:
        view.copy_(value)
        return
    shape = tuple(view.shape)
    if arr.dtype == np.bool_:
        k = arr.ndim
        if shape[axis:axis + k] != arr.shape:
            raise tf.ShapeError(f"index: a mask of shape {arr.shape} does not match the indexed axes "
                                f"{shape[axis:axis + k]} of shape {shape}")
        selected = arr.reshape(-1)
        slots = np.cumsum(selected) - 1  # position k's slot among the selected ones
        hit, src_of = arr, np.where(selected, slots, 0).reshape(arr.shape)
        count = int(selected.sum())
    else:
        k = 1
        n = shape[axis]
        flat = _normalise(arr, n, axis).reshape(-1)
        src_of = np.zeros(n, np.int64)
        src_of[flat] = np.arange(flat.size)  # a repeated index: the last value wins, as numpy
        hit = np.zeros(n, np.bool_)
        hit[flat] = True
        count = flat.size
    if count == 0:
        return
    # Recorded by autograd as PyTorch records x[idx] = v (copy_ under grad mode).
    mask = tf.tensor(hit.reshape((1,) * axis + hit.shape + (1,) * (len(shape) - axis - k)),
                     device=view.device)
    if isinstance(value, (int, float)) and not isinstance(value, builtins.bool) or \
            isinstance(value, _C.Tensor) and value.numel() == 1 and not value.requires_grad:
        v = value.item() if isinstance(value, _C.Tensor) else value
        view.copy_(tf.where(mask, v, view))
        return
    target = shape[:axis] + (count,) + shape[axis + k:]
    src = _as_value(value, view)
    try:
        src = src.expand(*target).contiguous()
    except tf.Error:
        raise tf.ShapeError(f"index: cannot assign a value of shape {tuple(src.shape)} to "
                            f"{count} selected slices of shape {target}") from None
    full = _gather(src, axis, src_of)
    view.copy_(tf.where(mask, full, view))
