"""Static and dynamic slices of ``starling.lax``: ``slice``, ``slice_in_dim``, ``index_in_dim``,
``dynamic_slice`` (+ ``_in_dim`` / ``dynamic_index_in_dim``) and ``dynamic_update_slice`` (+
``_in_dim`` / ``dynamic_update_index_in_dim``).

Dynamic start indices follow JAX: a negative start first counts from the end once (``i + d``),
then every start is clamped into ``0 .. d - size`` so that the whole slice lies inside the
operand (an out-of-bounds start never raises and never reads or writes outside).

Method: starts known now (Python ints, eager arrays) become a static slice (a view). Traced
starts become ONE ``gather`` / ``scatter`` primitive over the dims actually cut (each indexed by
``start + iota(size)``; the others stay whole windows), so JVP, transpose (a dynamic slice's
transpose is a scatter-add of the cotangent into zeros), vmap with per-example starts and
compilation are the indexing primitives' own rules.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from .. import numpy as snp
from ..convert import operand as _operand
from ..ops import gather_scatter as GS
from ..ops import shape_lax as SL
from ..ops.convert_element_type import convert_element_type
from ._util import axis as _axis, concrete_value, shape_str, static_int, static_ints

__all__ = ["slice", "slice_in_dim", "index_in_dim", "dynamic_slice", "dynamic_slice_in_dim",
           "dynamic_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
           "dynamic_update_index_in_dim"]


def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001  (JAX's name)
    """``operand[s0:l0:st0, s1:l1:st1, ...]`` with static bounds.

    Args:
        operand: array of shape ``(d0, ..., dn-1)``.
        start_indices, limit_indices: one static int per dim, ``0 <= start <= limit <= d``.
        strides: one static int >= 1 per dim, or None (all 1).
    Returns:
        Array of shape ``(ceil((l0 - s0) / st0), ...)``.
    Raises:
        ValueError: wrong lengths or bounds out of range.
    """
    x = _operand(operand, "lax.slice")
    n = x.ndim
    starts = static_ints("slice", "start_indices", start_indices, n)
    limits = static_ints("slice", "limit_indices", limit_indices, n)
    st = None if strides is None else static_ints("slice", "strides", strides, n)
    return SL.static_slice(x, starts, limits, st)


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """``operand[..., start:limit:stride, ...]`` along one ``axis``.

    Args:
        operand: array of shape ``(*shape)``.
        start_index, limit_index: static ints or None (0 / the dim size); negative values count
            from the end (once; no clamping).
        stride: static int >= 1.
        axis: static int, negative counted from the end.
    Returns:
        Array of ``operand``'s shape with that dim ``ceil((limit - start) / stride)``.
    Raises:
        ValueError: bounds out of range after the negative adjustment.
    """
    x = _operand(operand, "lax.slice_in_dim")
    ax = _axis("slice_in_dim", axis, x.ndim)
    d = x.shape[ax]
    start = 0 if start_index is None else static_int("slice_in_dim", "start_index", start_index)
    limit = d if limit_index is None else static_int("slice_in_dim", "limit_index", limit_index)
    start, limit = (start + d if start < 0 else start), (limit + d if limit < 0 else limit)
    if not 0 <= start <= limit <= d:
        raise ValueError(f"lax.slice_in_dim: need 0 <= start <= limit <= {d} (the size of axis "
                         f"{ax}), got start {start_index} and limit {limit_index}")
    return SL.slice_in_dim(x, start, limit, static_int("slice_in_dim", "stride", stride), ax)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """``operand[..., index, ...]`` along ``axis`` for a static ``index`` (negative counts from
    the end); ``keepdims`` keeps the indexed dim with size 1.

    Raises:
        IndexError: ``index`` out of range for that dim.
    """
    x = _operand(operand, "lax.index_in_dim")
    ax = _axis("index_in_dim", axis, x.ndim)
    d = x.shape[ax]
    i = static_int("index_in_dim", "index", index)
    if not -d <= i < d:
        raise IndexError(f"lax.index_in_dim: index {i} is out of bounds for axis {ax} of size "
                         f"{d} (valid: {-d}..{d - 1})")
    i = i + d if i < 0 else i
    out = SL.slice_in_dim(x, i, i + 1, 1, ax)
    return out if keepdims else SL.squeeze(out, (ax,))


# ---- dynamic starts -----------------------------------------------------------------------------

def _starts(op, start_indices, ndim):
    """The start indices as a list of ``ndim`` scalars (Python ints or 0-d integer arrays)."""
    if hasattr(start_indices, "shape") and not isinstance(start_indices, (list, tuple)):
        if len(start_indices.shape) != 1:
            raise ValueError(f"lax.{op}: start_indices must be a sequence of scalars or a 1-d "
                             f"array, got shape {tuple(start_indices.shape)}")
        start_indices = [start_indices[i] for i in range(start_indices.shape[0])]
    starts = list(start_indices)
    if len(starts) != ndim:
        raise ValueError(f"lax.{op}: {len(starts)} start indices for an operand of rank {ndim}")
    out = []
    for s in starts:
        if isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
            out.append(int(s))
            continue
        s = _operand(s, f"lax.{op}")
        if s.shape != () or not dtypes.is_integer(s.dtype):
            raise TypeError(f"lax.{op}: each start index must be an integer scalar, got "
                            f"{s.dtype}{list(s.shape)}")
        out.append(s)
    return out


def _clamped_static(start, d, size):
    start = start + d if start < 0 else start
    return max(0, min(start, d - size))


def _clamped_traced(start, d, size):
    s = convert_element_type(_operand(start), dtypes.int64, False)
    s = snp.where(snp.less(s, 0), snp.add(s, d), s)
    return snp.clip(s, 0, d - size)


def _block_indices(x_shape, starts, sizes):
    """(dims cut, their index arrays, permutation putting them first) for a block of ``sizes``
    at ``starts``: index array j has shape ``(1, .., size_j, .., 1)`` over the k cut dims."""
    cut = [i for i, (d, n) in enumerate(zip(x_shape, sizes)) if n != d]
    k = len(cut)
    idx = []
    for j, i in enumerate(cut):
        s = starts[i]
        s = (_clamped_static(s, x_shape[i], sizes[i]) if isinstance(s, int)
             else _clamped_traced(s, x_shape[i], sizes[i]))
        ramp = SL.iota(dtypes.int64, (sizes[i],), 0)
        shape = (1,) * j + (sizes[i],) + (1,) * (k - j - 1)
        idx.append(SL.reshape(snp.add(ramp, s), shape))
    perm = tuple(cut) + tuple(i for i in range(len(x_shape)) if i not in cut)
    return cut, idx, perm


def _undo(perm):
    return tuple(int(i) for i in np.argsort(perm))


def _is_identity(perm):
    return perm == tuple(range(len(perm)))


def _known_starts(starts):
    vals = []
    for s in starts:
        v = s if isinstance(s, int) else concrete_value(s)
        if v is None:
            return None
        vals.append(int(v))
    return vals


def dynamic_slice(operand, start_indices, slice_sizes):
    """The block ``operand[s0:s0+n0, s1:s1+n1, ...]`` for start indices known only at run time.

    Args:
        operand: array of shape ``(d0, ..., dk-1)``.
        start_indices: k integer scalars (Python ints, 0-d arrays or tracers) or a 1-d integer
            array; negatives count from the end once, then each start is clamped into
            ``0 .. d_i - n_i`` (JAX / XLA semantics).
        slice_sizes: k static ints ``0 <= n_i <= d_i``.
    Returns:
        Array of shape ``(n0, ..., nk-1)`` and the dtype of ``operand``. Linear in ``operand``
        (its transpose scatter-adds into zeros); the starts get no gradient.
    Raises:
        ValueError: wrong counts or sizes larger than the operand. TypeError: a non-integer start.
    """
    x = _operand(operand, "lax.dynamic_slice")
    shape = tuple(x.shape)
    sizes = static_ints("dynamic_slice", "slice_sizes", slice_sizes, len(shape))
    if any(not 0 <= n <= d for n, d in zip(sizes, shape)):
        raise ValueError(f"lax.dynamic_slice: slice_sizes {sizes} must satisfy 0 <= size <= dim "
                         f"for operand shape {shape_str(shape)}")
    starts = _starts("dynamic_slice", start_indices, len(shape))
    known = _known_starts(starts)
    if known is not None or 0 in shape:
        known = known or [0] * len(shape)
        lo = [_clamped_static(s, d, n) for s, d, n in zip(known, shape, sizes)]
        return SL.static_slice(x, lo, [a + n for a, n in zip(lo, sizes)])
    cut, idx, perm = _block_indices(shape, starts, sizes)
    if not cut:
        return x
    out = GS.gather_p.bind(SL.transpose(x, perm), *idx, mode="clip", fill_value=None)
    return out if _is_identity(perm) else SL.transpose(out, _undo(perm))


def dynamic_update_slice(operand, update, start_indices):
    """``operand`` with the block at ``start_indices`` replaced by ``update``.

    Args:
        operand: array of shape ``(d0, ..., dk-1)``.
        update: array of shape ``(n0, ..., nk-1)``, ``n_i <= d_i``, the dtype of ``operand``.
        start_indices: k integer scalars or a 1-d integer array; clamped like ``dynamic_slice``
            (so the whole update is always written).
    Returns:
        Array of the shape and dtype of ``operand``. Linear in ``(operand, update)`` jointly.
    Raises:
        TypeError: dtypes differ or non-integer starts. ValueError: shapes do not fit.
    """
    x = _operand(operand, "lax.dynamic_update_slice")
    u = _operand(update, "lax.dynamic_update_slice")
    shape, sizes = tuple(x.shape), tuple(u.shape)
    if u.dtype != x.dtype:
        raise TypeError(f"lax.dynamic_update_slice: update dtype {u.dtype} differs from operand "
                        f"dtype {x.dtype}")
    if len(sizes) != len(shape) or any(n > d for n, d in zip(sizes, shape)):
        raise ValueError(f"lax.dynamic_update_slice: update of shape {shape_str(sizes)} does not "
                         f"fit in operand of shape {shape_str(shape)} (same rank, each dim <=)")
    starts = _starts("dynamic_update_slice", start_indices, len(shape))
    if 0 in sizes:
        return x
    cut, idx, perm = _block_indices(shape, starts, sizes)
    if not cut:
        return u
    out = GS.scatter_p.bind(SL.transpose(x, perm), SL.transpose(u, perm), *idx, op="set",
                            mode="clip", unique_indices=True)
    return out if _is_identity(perm) else SL.transpose(out, _undo(perm))


def _one_axis(x, ax, start):
    starts = [0] * x.ndim
    starts[ax] = start
    return starts


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0):
    """``dynamic_slice`` along one ``axis`` (the other dims whole)."""
    x = _operand(operand, "lax.dynamic_slice_in_dim")
    ax = _axis("dynamic_slice_in_dim", axis, x.ndim)
    sizes = list(x.shape)
    sizes[ax] = static_int("dynamic_slice_in_dim", "slice_size", slice_size)
    return dynamic_slice(x, _one_axis(x, ax, start_index), sizes)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True):
    """``operand[..., index, ...]`` along ``axis`` for a run-time ``index`` (negative counts
    from the end, then clamped into range); ``keepdims`` keeps that dim with size 1."""
    x = _operand(operand, "lax.dynamic_index_in_dim")
    ax = _axis("dynamic_index_in_dim", axis, x.ndim)
    out = dynamic_slice_in_dim(x, index, 1, ax)
    return out if keepdims else SL.squeeze(out, (ax,))


def dynamic_update_slice_in_dim(operand, update, start_index, axis):
    """``dynamic_update_slice`` along one ``axis`` (``update`` whole in the other dims)."""
    x = _operand(operand, "lax.dynamic_update_slice_in_dim")
    ax = _axis("dynamic_update_slice_in_dim", axis, x.ndim)
    return dynamic_update_slice(x, update, _one_axis(x, ax, start_index))


def dynamic_update_index_in_dim(operand, update, index, axis):
    """Writes ``update`` at ``index`` along ``axis``; ``update`` may lack that dim (it is then
    given size 1)."""
    x = _operand(operand, "lax.dynamic_update_index_in_dim")
    u = _operand(update, "lax.dynamic_update_index_in_dim")
    ax = _axis("dynamic_update_index_in_dim", axis, x.ndim)
    if u.ndim == x.ndim - 1:
        u = SL.expand_dims(u, (ax,))
    return dynamic_update_slice_in_dim(x, u, index, ax)
