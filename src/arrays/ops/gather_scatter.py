"""The indexing primitives: ``gather``, ``scatter``, ``argwhere`` and ``choose``.

Every NumPy-style indexing expression (``x[idx]``, ``x.at[idx].set(v)``, ``take``, ``diagonal``,
...) is normalised in Python (statically) into at most one of these, plus static slicing and
reshapes for basic indexing. Their convention:

``gather(x, *indices, mode, fill_value)``
    ``x`` of shape ``(d0, ..., d{k-1}, *rest)`` indexed on its k LEADING axes by k integer arrays
    whose shapes broadcast to ``B``; the output has shape ``(*B, *rest)``:
    ``out[b, r] = x[indices[0][b], ..., indices[k-1][b], r]``.
``scatter(x, updates, *indices, op, mode, unique_indices)``
    the same indexing; ``updates`` has shape exactly ``(*B, *rest)`` and the dtype of ``x``;
    returns a copy of ``x`` where each indexed element is combined with its update by ``op``:
    "set" (replace), "add", "multiply", "min", "max". Duplicate indices accumulate all their
    updates for add / multiply / min / max (``np.add.at`` semantics); for "set" the LAST update
    in C order of ``B`` wins, deterministically.

Index values: negative indices of signed dtypes are first wrapped once (``i + d`` for ``i < 0``),
as in NumPy; then ``mode`` decides what an index outside ``0..d-1`` does:

=====================  ========================================================================
mode                   meaning
=====================  ========================================================================
"clip"                 clamped into ``0..d-1``
"wrap"                 taken modulo ``d`` (applied to the raw index, so -1 is d-1 as well)
"fill"                 gather: the output element is ``fill_value``; scatter: same as "drop"
"drop"                 scatter: the update is ignored; gather: same as "fill"
"promise_in_bounds"    the caller promises in-bounds indices; out-of-bounds ones give
                       unspecified values but never touch memory outside the array (gather
                       clamps, scatter drops)
=====================  ========================================================================

An axis of size 0 has no valid index: gathers from it give ``fill_value`` (mode "fill") or 0.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ...core.trace import ConcretizationError
from .elementwise_family import broadcast_shapes

GATHER_MODES = ("clip", "wrap", "fill", "drop", "promise_in_bounds")
SCATTER_OPS = ("set", "add", "multiply", "min", "max")
_INTP_MAX = np.iinfo(np.intp).max


def default_fill_value(dt):
    """The fill of out-of-bounds gathers: NaN for inexact dtypes (float4_e2m1fn, which has no NaN:
    its largest finite value), the minimum for signed ints, the maximum for unsigned, True for
    bool (JAX's choice: values that stand out)."""
    if dtypes.is_bool(dt):
        return True
    if dtypes.is_signed_int(dt):
        return int(np.iinfo(dt).min)
    if dtypes.is_unsigned_int(dt):
        return int(np.iinfo(dt).max)
    if dt == dtypes.float4_e2m1fn:
        return float(dtypes.finfo(dt).max)
    if dtypes.is_complex(dt):
        return complex(np.nan, np.nan)
    return float("nan")


def _check_indices(op, x_aval, idx_avals):
    k = len(idx_avals)
    if k > len(x_aval.shape):
        raise IndexError(f"{op}: {k} index arrays for an operand of ndim {len(x_aval.shape)}")
    for a in idx_avals:
        if not dtypes.is_integer(a.dtype):
            raise TypeError(f"{op}: index arrays must have an integer dtype, got {a.dtype}")
    return broadcast_shapes(op, *[a.shape for a in idx_avals]) if k else ()


def _normalize_indices(idx, shape, mode):
    """Returns (index arrays as intp, wrapped and moded; valid mask or None when all valid)."""
    out = []
    valid = None
    for i, d in zip(idx, shape):
        i = np.asarray(i)
        if i.dtype == np.uint64:
            i = np.minimum(i, _INTP_MAX)  # huge unsigned values stay out of bounds, not negative
        i = i.astype(np.intp, copy=False)
        if mode == "wrap":
            i = np.mod(i, d) if d else np.zeros_like(i)
            out.append(i)
            continue
        if i.size and i.min() < 0:
            i = np.where(i < 0, i + d, i)
        if i.size and (i.min() < 0 or i.max() >= d):
            if mode in ("fill", "drop", "promise_in_bounds"):
                ok = (i >= 0) & (i < d)
                valid = ok if valid is None else valid & ok
            i = np.clip(i, 0, max(d - 1, 0))
        out.append(i)
    return out, valid


# ---- gather ------------------------------------------------------------------------------------

gather_p = Primitive("gather", family="indexing")


def _gather_abstract_eval(x, *idx, mode, fill_value):
    batch = _check_indices("gather", x, idx)
    return ShapedArray(batch + tuple(x.shape[len(idx):]), x.dtype, x.weak_type)


def _gather_impl(x, *idx, mode, fill_value):
    x = np.asarray(x)
    k = len(idx)
    if k == 0:
        return x
    batch = np.broadcast_shapes(*[np.shape(i) for i in idx])
    rest = x.shape[k:]
    if 0 in x.shape[:k]:
        # No index is valid on an empty axis: the result is all fill (or zeros for clip/wrap).
        fill = fill_value if mode in ("fill", "drop") else 0
        return np.full(batch + rest, np.asarray(fill).astype(x.dtype), dtype=x.dtype)
    norm, valid = _normalize_indices(idx, x.shape, mode)
    out = x[tuple(norm)]
    if valid is not None and mode in ("fill", "drop"):
        fill = np.asarray(fill_value).astype(x.dtype)
        mask = np.broadcast_to(valid, batch).reshape(batch + (1,) * len(rest))
        out = np.where(mask, out, fill)
    return out


gather_p.abstract_eval = _gather_abstract_eval
gather_p.impl = _gather_impl
gather_p.weak_type = lambda x_weak, *idx_weak, **params: x_weak


def gather(x, *indices, mode="clip", fill_value=None):
    """Gathers ``x[indices[0][b], ..., indices[k-1][b], ...]`` for every ``b`` in the broadcast
    shape ``B`` of the index arrays (see the module docstring for ``mode``).

    Args:
        x: operand of shape ``(d0, ..., d{k-1}, *rest)``.
        *indices: k integer arrays (Arrays/Tracers) broadcasting to ``B``.
        mode: "clip", "wrap", "fill", "drop" or "promise_in_bounds".
        fill_value: Python scalar for mode "fill"/"drop" (default: ``default_fill_value``).
    Returns:
        Array of shape ``(*B, *rest)`` and the dtype (and weak type) of ``x``.
    """
    if mode in ("fill", "drop"):
        fill_value = default_fill_value(x.dtype) if fill_value is None else fill_value
    else:
        fill_value = None
    return gather_p.bind(x, *indices, mode=mode, fill_value=fill_value)


# ---- scatter -----------------------------------------------------------------------------------

scatter_p = Primitive("scatter", family="indexing")


def _scatter_abstract_eval(x, updates, *idx, op, mode, unique_indices):
    batch = _check_indices("scatter", x, idx)
    want = batch + tuple(x.shape[len(idx):])
    if tuple(updates.shape) != want:
        raise ValueError(f"scatter: updates of shape {tuple(updates.shape)} for an indexed shape "
                         f"{want}")
    if updates.dtype != x.dtype:
        raise TypeError(f"scatter: updates dtype {updates.dtype} differs from operand dtype "
                        f"{x.dtype}")
    return x


_UFUNCS = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


def _scatter_impl(x, updates, *idx, op, mode, unique_indices):
    x = np.asarray(x)
    updates = np.asarray(updates)
    k = len(idx)
    if k == 0:
        return updates.copy() if op == "set" else _UFUNCS[op](x, updates)
    out = np.array(x, copy=True)
    batch = np.broadcast_shapes(*[np.shape(i) for i in idx])
    if 0 in x.shape[:k] or 0 in batch:
        return out
    mode = "drop" if mode in ("fill", "promise_in_bounds") else mode
    norm, valid = _normalize_indices(idx, x.shape, mode)
    if valid is not None or (op == "set" and not unique_indices):
        norm = [i if i.shape == batch else np.broadcast_to(i, batch) for i in norm]
        if valid is not None:
            valid = np.broadcast_to(valid, batch)
            norm = [i[valid] for i in norm]
            updates = updates[valid]
        else:
            norm = [i.reshape(-1) for i in norm]
            updates = updates.reshape((-1,) + updates.shape[len(batch):])
    if op == "set":
        if not unique_indices and len(norm[0]) > 1:
            # NumPy does not promise which duplicate wins; we keep the last one explicitly.
            flat = np.ravel_multi_index(tuple(norm), x.shape[:k])
            order = np.argsort(flat, kind="stable")   # equal targets stay in update order
            runs = flat[order]
            last = np.ones(len(runs), dtype=bool)
            last[:-1] = runs[1:] != runs[:-1]
            keep = order[last]
            norm = [i[keep] for i in norm]
            updates = updates[keep]
        out[tuple(norm)] = updates
    else:
        _UFUNCS[op].at(out, tuple(norm), updates)
    return out


scatter_p.abstract_eval = _scatter_abstract_eval
scatter_p.impl = _scatter_impl
scatter_p.weak_type = lambda x_weak, *rest, **params: x_weak


def scatter(x, updates, *indices, op="set", mode="drop", unique_indices=False):
    """Returns ``x`` with ``x[indices...] <op>= updates`` applied functionally (module docstring).

    Args:
        x: operand of shape ``(d0, ..., d{k-1}, *rest)``.
        updates: shape ``(*B, *rest)``, the dtype of ``x``.
        *indices: k integer arrays broadcasting to ``B``.
        op: "set", "add", "multiply", "min" or "max".
        mode: "drop", "fill" (= drop), "clip", "wrap" or "promise_in_bounds".
        unique_indices: a promise that no index repeats (lets "set" skip de-duplication).
    Returns:
        Array of the shape, dtype and weak type of ``x``.
    """
    return scatter_p.bind(x, updates, *indices, op=op, mode=mode,
                          unique_indices=bool(unique_indices))


# ---- argwhere ----------------------------------------------------------------------------------

argwhere_p = Primitive("argwhere", family="indexing")


def _argwhere_abstract_eval(x, *, size, fill_value):
    if size is None:
        raise ConcretizationError(
            f"argwhere: the number of nonzero elements of a traced {x.str_short()} depends on "
            "its values; pass a static size= (and fill_value=) to get a fixed-shape result")
    return ShapedArray((size, len(x.shape)), dtypes.int64, False)


def _argwhere_impl(x, *, size, fill_value):
    out = np.argwhere(np.asarray(x)).astype(np.int64, copy=False)
    if size is None:
        return out
    if out.shape[0] >= size:
        return np.ascontiguousarray(out[:size])
    pad = np.full((size - out.shape[0], out.shape[1]), fill_value, dtype=np.int64)
    return np.concatenate([out, pad])


argwhere_p.abstract_eval = _argwhere_abstract_eval
argwhere_p.impl = _argwhere_impl


# ---- choose ------------------------------------------------------------------------------------

choose_p = Primitive("choose", family="indexing")


def _choose_abstract_eval(which, *choices, mode):
    if not (dtypes.is_integer(which.dtype) or dtypes.is_bool(which.dtype)):
        raise TypeError(f"choose: the index array must be integer or bool, got {which.dtype}")
    if any(c.dtype != choices[0].dtype for c in choices):
        raise TypeError("choose: all choices must have one dtype, got "
                        f"{', '.join(str(c.dtype) for c in choices)}")
    shape = broadcast_shapes("choose", which.shape, *[c.shape for c in choices])
    return ShapedArray(shape, choices[0].dtype, all(c.weak_type for c in choices))


def _choose_impl(which, *choices, mode):
    which = np.asarray(which)
    n = len(choices)
    if which.dtype == np.bool_:
        which = which.astype(np.intp)
    elif which.dtype == np.uint64:
        which = np.minimum(which, _INTP_MAX)
    which = which.astype(np.intp, copy=False)
    which = np.mod(which, n) if mode == "wrap" else np.clip(which, 0, n - 1)
    shape = np.broadcast_shapes(which.shape, *[np.shape(c) for c in choices])
    dt = np.asarray(choices[0]).dtype
    if n == 2:
        return np.where(np.broadcast_to(which, shape) == 1, choices[1], choices[0]).astype(dt)
    stacked = np.stack([np.broadcast_to(c, shape) for c in choices])
    return np.take_along_axis(stacked, np.broadcast_to(which, shape)[None], 0)[0]


choose_p.abstract_eval = _choose_abstract_eval
choose_p.impl = _choose_impl
choose_p.weak_type = lambda which_weak, *weak, **params: all(weak)
