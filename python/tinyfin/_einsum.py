"""tinyfin.einsum: Einstein summation composed from tinyfin's differentiable ops.

Each operand first loses its repeated subscripts (a diagonal: the product with an identity mask,
summed) and the subscripts no other operand and not the output use (summed); operands are then
contracted pairwise, left to right, as one batched matmul each: the subscripts both share and
the output keeps are the batch, the shared ones the output drops are the contraction."""
import builtins as _builtins

import tinyfin as _tf

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _parse(equation, operands):
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->")
        explicit = True
    else:
        lhs, out, explicit = eq, None, False
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise _tf.ValueError(f"einsum: the equation {equation!r} has {len(terms)} operands, got {len(operands)} tensors")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in _LETTERS if c not in used]
    ell_rank = 0
    for term, t in zip(terms, operands):
        if "..." in term:
            ell_rank = _builtins.max(ell_rank, t.ndim - (len(term) - 3))
    ell = "".join(spare[:ell_rank])
    expanded = []
    for i, (term, t) in enumerate(zip(terms, operands)):
        for c in term.replace("...", ""):
            if not c.isalpha():
                raise _tf.ValueError(f"einsum: subscripts must be letters, got {c!r} in {equation!r}")
        if "..." in term:
            n = t.ndim - (len(term) - 3)
            if n < 0:
                raise _tf.ShapeError(f"einsum: operand {i} has rank {t.ndim}, fewer than the subscripts {term!r}")
            term = term.replace("...", ell[ell_rank - n:])
        if len(term) != t.ndim:
            raise _tf.ShapeError(f"einsum: operand {i} has rank {t.ndim} but subscripts {term!r}")
        expanded.append(term)
    if explicit:
        if "..." in out:
            out = out.replace("...", ell)
        for c in out:
            if not c.isalpha():
                raise _tf.ValueError(f"einsum: output subscripts must be letters, got {c!r}")
        if len(set(out)) != len(out):
            raise _tf.ValueError(f"einsum: the output subscripts {out!r} repeat a letter")
        for c in out:
            if not _builtins.any(c in term for term in expanded):
                raise _tf.ValueError(f"einsum: output subscript {c!r} appears in no operand")
    else:  # implicit: the broadcast dims, then the letters used once, in alphabetical order
        counts = {}
        for term in expanded:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return expanded, out


def _diagonal(t, term):
    """Removes repeated letters of term: t's elements where those axes agree."""
    while True:
        seen = {}
        for axis, c in enumerate(term):
            if c in seen:
                first = seen[c]
                n = t.shape[axis]
                if t.shape[first] != n:
                    raise _tf.ShapeError(f"einsum: subscript {c!r} has sizes {t.shape[first]} and {n} in one operand")
                shape = [1] * t.ndim
                shape[first], shape[axis] = n, n
                eye = _tf.tensor(_eye(n), dtype=t.dtype, device=t.device).reshape(shape)
                t = _tf.sum(t * eye, axis)
                term = term[:axis] + term[axis + 1:]
                break
            seen[c] = axis
        else:
            return t, term


def _eye(n):
    return [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]


def _sum_out(t, term, keep):
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return t, term
    return _tf.sum(t, axes), "".join(c for c in term if c in keep)


def _contract(a, ta, b, tb, keep):
    """a (subscripts ta) times b (tb), summing the shared letters not in keep."""
    sizes = {}
    for t, term in ((a, ta), (b, tb)):
        for c, n in zip(term, t.shape):
            if c in sizes and sizes[c] != n and 1 not in (sizes[c], n):
                raise _tf.ShapeError(f"einsum: subscript {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = _builtins.max(sizes.get(c, 1), n)
    batch = [c for c in ta if c in tb and c in keep]
    contract = [c for c in ta if c in tb and c not in keep]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]
    pa = a.permute([ta.index(c) for c in batch + left + contract]) if ta else a
    pb = b.permute([tb.index(c) for c in batch + contract + right]) if tb else b
    nb = [sizes[c] for c in batch]
    # size-1 axes broadcast against the other operand's (ellipsis dims, as in PyTorch)
    pa = pa.expand(nb + [sizes[c] for c in left + contract]) if pa.ndim else pa
    pb = pb.expand(nb + [sizes[c] for c in contract + right]) if pb.ndim else pb
    nl, nc, nr = (_prod(sizes[c] for c in g) for g in (left, contract, right))
    out = _tf.matmul(pa.reshape(nb + [nl, nc]), pb.reshape(nb + [nc, nr]))
    return out.reshape(nb + [sizes[c] for c in left + right]), "".join(batch + left + right)


def _prod(values):
    p = 1
    for v in values:
        p *= v
    return p


def einsum(equation, *operands):
    """Einstein summation as torch.einsum: einsum("ij,jk->ik", a, b), implicit output
    ("ij,jk"), "..." for broadcast dims, repeated subscripts for diagonals ("ii->i", "ii").
    Differentiable: it runs as tinyfin's sum, mul, permute, reshape and matmul."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    if not operands:
        raise _tf.ValueError("einsum: no operands")
    for i, t in enumerate(operands):
        if not isinstance(t, _tf.Tensor):
            raise TypeError(f"einsum: operand {i} must be a tinyfin.Tensor, got {type(t).__name__}")
    terms, out = _parse(equation, operands)
    items = []
    for i, (t, term) in enumerate(zip(operands, terms)):
        t, term = _diagonal(t, term)
        others = set(out).union(*(set(x) for j, x in enumerate(terms) if j != i))
        items.append(_sum_out(t, term, others))
    t, term = items[0]
    for i in range(1, len(items)):
        b, tb = items[i]
        keep = set(out).union(*(set(x) for _, x in items[i + 1:]))
        t, term = _contract(t, term, b, tb, keep)
    t, term = _sum_out(t, term, set(out))
    if term != out:
        t = t.permute([term.index(c) for c in out])
    return t
