"""XLA-style ``gather`` / ``scatter`` with dimension numbers (``starling.lax.gather``,
``scatter``, ``scatter_add``, ``scatter_sub``, ``scatter_mul``, ``scatter_min``,
``scatter_max``), their ``GatherDimensionNumbers`` / ``ScatterDimensionNumbers`` and
``GatherScatterMode``.

Semantics (XLA's operational definition, as JAX documents it): ``start_indices`` has shape
``(*B, k)``; its last dim holds, for each batch position ``b``, the start of a slice of the
operand in the dims ``start_index_map`` (scatter: ``scatter_dims_to_operand_dims``). The other
operand dims start at 0, except the ``operand_batching_dims``, which are indexed by the
position of ``b`` along the paired ``start_indices_batching_dims``. Collapsed
(``inserted_window_dims``) and batching dims have slice size 1 and no dim in the result (the
updates); the remaining slice dims are the "offset" (window) dims, placed at ``offset_dims``
(``update_window_dims``) while the batch dims ``B`` fill the other positions in order.

Modes: "clip" (the default of neither: clamps each start into ``0 .. d - size`` so the whole
slice is in bounds), "fill" / "drop" (``None``, the default: a slice that is not entirely in
bounds is filled with ``fill_value`` in a gather and dropped in a scatter) and
"promise_in_bounds" (clamped here). Start indices are never wrapped: -1 is out of bounds.

Method: ONE call of the NumPy-style indexing primitive of src/arrays/ops/gather_scatter.py,
which indexes leading operand axes with broadcasting integer arrays: the operand is transposed
so that the indexed dims come first, each indexed dim gets ``start + iota(slice_size)`` (or the
batch position, for batching dims), and the result is transposed into XLA's output layout.
Dims sliced whole stay untouched windows. All transformation rules (JVP, transpose, vmap with
batched indices, sharding, the C++ kernels) are that primitive's own.
"""
from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from ...core import dtypes
from .. import numpy as snp
from ..convert import operand as _operand
from ..ops import gather_scatter as GS
from ..ops import shape_lax as SL
from ..ops.convert_element_type import convert_element_type
from ._util import dims_list, shape_str, static_ints

__all__ = ["GatherDimensionNumbers", "ScatterDimensionNumbers", "GatherScatterMode", "gather",
           "scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max"]


class GatherDimensionNumbers(NamedTuple):
    """How ``gather`` maps index vectors and slices (see the module docstring).

    Attributes:
        offset_dims: output dims holding the slice (window) dims, increasing.
        collapsed_slice_dims: operand dims of slice size 1 left out of the output.
        start_index_map: operand dim of each entry of an index vector.
        operand_batching_dims: operand dims indexed by the batch position instead.
        start_indices_batching_dims: the paired dims of ``start_indices``.
    """
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """How ``scatter`` maps index vectors and update windows (see the module docstring).

    Attributes:
        update_window_dims: dims of ``updates`` that are window dims, increasing.
        inserted_window_dims: operand dims of window size 1 absent from ``updates``.
        scatter_dims_to_operand_dims: operand dim of each entry of an index vector.
        operand_batching_dims: operand dims indexed by the batch position instead.
        scatter_indices_batching_dims: the paired dims of ``scatter_indices``.
    """
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


class GatherScatterMode(enum.Enum):
    """Out-of-bounds behaviour of ``gather`` / ``scatter`` (module docstring)."""
    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"

    @staticmethod
    def from_any(mode):
        """None, "fill", "drop" -> FILL_OR_DROP; "clip" -> CLIP; "promise_in_bounds"."""
        if isinstance(mode, GatherScatterMode):
            return mode
        if mode is None or mode in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if mode == "clip":
            return GatherScatterMode.CLIP
        if mode == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f"lax: unknown gather / scatter mode {mode!r}; valid: None, 'clip', "
                         "'fill', 'drop', 'promise_in_bounds' or a GatherScatterMode")


def _check_batching(op, ob, ib, rank, idx_rank):
    ob = dims_list(op, "operand_batching_dims", ob, rank)
    ib = dims_list(op, "indices batching dims", ib, max(idx_rank - 1, 0))
    if len(ob) != len(ib):
        raise ValueError(f"lax.{op}: operand_batching_dims {ob} and the indices batching dims "
                         f"{ib} must pair up (same length)")
    return ob, ib


def _plan(op, x_shape, idx_shape, index_map, sizes, ob, ib, dropped):
    """Index arrays' recipe: (indexed operand dims in order, window dims of those, per
    indexed dim: ("start", j) | ("batch", k) | ("ramp", None))."""
    rank = len(x_shape)
    if len(idx_shape) < 1 or idx_shape[-1] != len(index_map):
        raise ValueError(f"lax.{op}: indices of shape {shape_str(idx_shape)} need a last dim of "
                         f"size {len(index_map)} (one entry per start_index_map dim)")
    for d in set(index_map) & set(ob):
        raise ValueError(f"lax.{op}: dim {d} is both an indexed and a batching operand dim")
    for d, n in zip(x_shape, sizes):
        if not 0 <= n <= d:
            raise ValueError(f"lax.{op}: slice / window sizes {tuple(sizes)} must satisfy "
                             f"0 <= size <= dim for operand shape {shape_str(x_shape)}")
    for d in tuple(dropped) + tuple(ob):
        if sizes[d] != 1:
            raise ValueError(f"lax.{op}: collapsed / inserted and batching dims need slice size "
                             f"1, dim {d} has {sizes[d]}")
    for d, k in zip(ob, ib):
        if x_shape[d] != idx_shape[k]:
            raise ValueError(f"lax.{op}: batching dims differ in size: operand dim {d} is "
                             f"{x_shape[d]}, indices dim {k} is {idx_shape[k]}")
    how = {}
    for j, d in enumerate(index_map):
        how[d] = ("start", j)
    for d, k in zip(ob, ib):
        how[d] = ("batch", k)
    for d in range(rank):
        if d not in how and sizes[d] != x_shape[d]:
            how[d] = ("ramp", None)   # a partial window from 0: indexed by iota(size)
    indexed = tuple(sorted(how))
    windows = tuple(d for d in indexed if d not in dropped and how[d][0] != "batch")
    return indexed, windows, how


def _index_arrays(x_shape, idx, sizes, indexed, windows, how, mode, n_batch):
    """The index arrays (broadcasting to ``(*B, *[sizes of windows])``) and, for "fill" mode,
    nothing else: invalid slices are moved out of bounds so the primitive fills / drops them."""
    B = tuple(idx.shape[:-1])
    nw = len(windows)
    starts = {}
    valid = None
    for d in indexed:
        kind, j = how[d]
        if kind != "start":
            continue
        s = SL.reshape(SL.slice_in_dim(idx, j, j + 1, 1, len(B)), B)
        s = convert_element_type(s, dtypes.int64, False)
        top = x_shape[d] - sizes[d]
        if mode is GatherScatterMode.FILL_OR_DROP:
            ok = snp.logical_and(snp.greater_equal(s, 0), snp.less_equal(s, top))
            valid = ok if valid is None else snp.logical_and(valid, ok)
        else:
            s = snp.clip(s, 0, top)
        starts[d] = s
    out = []
    for d in indexed:
        kind, j = how[d]
        if kind == "start":
            s = starts[d]
            if valid is not None:
                # any part of the slice out of bounds: the whole slice leaves the operand
                s = snp.where(valid, s, x_shape[d])
            a = SL.reshape(s, B + (1,) * nw)
        elif kind == "batch":
            a = SL.iota(dtypes.int64, tuple(n if i == j else 1 for i, n in enumerate(B))
                        + (1,) * nw, j)
        else:
            a = None
        if d in windows:
            w = windows.index(d)
            ramp = SL.iota(dtypes.int64, (1,) * n_batch + tuple(
                sizes[d] if i == w else 1 for i in range(nw)), n_batch + w)
            a = ramp if a is None else snp.add(a, ramp)
        elif a is None:   # a collapsed dim taken at 0
            a = SL.reshape(SL.iota(dtypes.int64, (1,), 0), (1,) * (n_batch + nw))
        out.append(a)
    return out


def _mode_of(op, mode):
    m = GatherScatterMode.from_any(mode)
    return m, {"clip": "clip", "fill": "fill", "promise_in_bounds": "clip"}[m.value]


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """Gathers slices of ``operand`` at the starts in ``start_indices`` (XLA Gather).

    Args:
        operand: array of shape ``(d0, ..., dr-1)``.
        start_indices: integer array of shape ``(*B, k)``, ``k = len(start_index_map)``.
        dimension_numbers: a ``GatherDimensionNumbers``.
        slice_sizes: r static ints; 1 for collapsed and batching dims.
        unique_indices, indices_are_sorted: accepted hints (no effect on the result).
        mode: None / "fill" (default: slices not entirely in bounds give ``fill_value``),
            "clip" or "promise_in_bounds" (starts clamped so the slice is in bounds).
        fill_value: Python scalar for "fill"; default NaN for inexact dtypes, the minimum of
            signed and the maximum of unsigned integers, True for bool.
    Returns:
        Array of rank ``len(B) + len(offset_dims)``: the slice dims (sizes ``slice_sizes`` of the
        non-collapsed, non-batching dims, in operand order) at ``offset_dims``, ``B`` elsewhere.
        Linear in ``operand``; the indices get no gradient.
    Raises:
        ValueError: inconsistent dimension numbers, sizes or shapes. TypeError: non-integer
        indices.
    """
    x = _operand(operand, "lax.gather")
    idx = _operand(start_indices, "lax.gather")
    if not dtypes.is_integer(idx.dtype):
        raise TypeError(f"lax.gather: start_indices must be integers, got {idx.dtype}")
    dn = dimension_numbers
    if not isinstance(dn, GatherDimensionNumbers):
        raise TypeError(f"lax.gather: dimension_numbers must be a GatherDimensionNumbers, got "
                        f"{type(dn).__name__}")
    x_shape, rank = tuple(x.shape), x.ndim
    sizes = static_ints("gather", "slice_sizes", slice_sizes, rank)
    index_map = dims_list("gather", "start_index_map", dn.start_index_map, rank)
    collapsed = dims_list("gather", "collapsed_slice_dims", dn.collapsed_slice_dims, rank)
    ob, ib = _check_batching("gather", dn.operand_batching_dims,
                             dn.start_indices_batching_dims, rank, idx.ndim)
    n_batch = idx.ndim - 1
    n_off = rank - len(collapsed) - len(ob)
    offset_dims = dims_list("gather", "offset_dims", dn.offset_dims, n_batch + n_off)
    if len(offset_dims) != n_off or list(offset_dims) != sorted(offset_dims) or set(
            collapsed) & set(ob):
        raise ValueError(f"lax.gather: offset_dims {offset_dims} must be increasing with one "
                         f"entry per operand dim that is neither collapsed {collapsed} nor "
                         f"batching {ob} (operand rank {rank})")
    m, prim_mode = _mode_of("gather", mode)
    indexed, windows, how = _plan("gather", x_shape, tuple(idx.shape), index_map, sizes, ob,
                                  ib, collapsed)
    free = [d for d in range(rank) if d not in indexed]
    perm = tuple(indexed) + tuple(free)
    arrays = _index_arrays(x_shape, idx, sizes, indexed, windows, how, m, n_batch)
    fill = None
    if prim_mode == "fill":
        fill = GS.default_fill_value(x.dtype) if fill_value is None else fill_value
    xt = SL.transpose(x, perm) if perm != tuple(range(rank)) else x
    if arrays:
        out = GS.gather_p.bind(xt, *arrays, mode=prim_mode, fill_value=fill)
    else:
        out = SL.reshape(xt, (1,) * n_batch + x_shape) if n_batch else xt
        out = snp.broadcast_to(out, tuple(idx.shape[:-1]) + x_shape)
    # out: (*B, *windows, *free dims of x); keep the free dims' leading [0:size] windows.
    lead = n_batch + len(windows)
    keep = [d for d in free if d not in collapsed]
    if len(keep) != len(free):
        out = SL.squeeze(out, tuple(lead + i for i, d in enumerate(free) if d in collapsed))
    # offset dims in operand order
    order = list(windows) + keep
    cur = list(range(n_batch)) + [n_batch + order.index(d) for d in sorted(order)]
    batch_pos = [p for p in range(n_batch + n_off) if p not in offset_dims]
    final = [0] * (n_batch + n_off)
    for p, c in zip(batch_pos, cur[:n_batch]):
        final[p] = c
    for p, c in zip(offset_dims, cur[n_batch:]):
        final[p] = c
    final = tuple(final)
    return SL.transpose(out, final) if final != tuple(range(len(final))) else out


_SCATTER_OPS = {"scatter": "set", "scatter_add": "add", "scatter_mul": "multiply",
                "scatter_min": "min", "scatter_max": "max"}


def _scatter(op, operand, scatter_indices, updates, dimension_numbers, unique_indices, mode):
    x = _operand(operand, f"lax.{op}")
    idx = _operand(scatter_indices, f"lax.{op}")
    u = _operand(updates, f"lax.{op}")
    if not dtypes.is_integer(idx.dtype):
        raise TypeError(f"lax.{op}: scatter_indices must be integers, got {idx.dtype}")
    if u.dtype != x.dtype:
        raise TypeError(f"lax.{op}: updates dtype {u.dtype} differs from operand dtype "
                        f"{x.dtype}")
    dn = dimension_numbers
    if not isinstance(dn, ScatterDimensionNumbers):
        raise TypeError(f"lax.{op}: dimension_numbers must be a ScatterDimensionNumbers, got "
                        f"{type(dn).__name__}")
    x_shape, rank = tuple(x.shape), x.ndim
    index_map = dims_list(op, "scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims,
                          rank)
    inserted = dims_list(op, "inserted_window_dims", dn.inserted_window_dims, rank)
    ob, ib = _check_batching(op, dn.operand_batching_dims, dn.scatter_indices_batching_dims,
                             rank, idx.ndim)
    n_batch = idx.ndim - 1
    win_dims = dims_list(op, "update_window_dims", dn.update_window_dims, u.ndim)
    operand_windows = [d for d in range(rank) if d not in inserted and d not in ob]
    B = tuple(idx.shape[:-1])
    upd_batch = [p for p in range(u.ndim) if p not in win_dims]
    if (len(win_dims) != len(operand_windows) or list(win_dims) != sorted(win_dims)
            or tuple(u.shape[p] for p in upd_batch) != B or set(inserted) & set(ob)):
        raise ValueError(
            f"lax.{op}: updates of shape {shape_str(u.shape)} do not match: need the indices' "
            f"batch dims {shape_str(B)} at the non-window positions and one increasing "
            f"update_window_dims entry (got {win_dims}) per operand dim that is neither "
            f"inserted {inserted} nor batching {ob}")
    sizes = [1] * rank
    for d, p in zip(operand_windows, win_dims):
        sizes[d] = u.shape[p]
    m, prim_mode = _mode_of(op, mode)
    indexed, windows, how = _plan(op, x_shape, tuple(idx.shape), index_map, sizes, ob, ib,
                                  inserted)
    free = [d for d in range(rank) if d not in indexed]
    arrays = _index_arrays(x_shape, idx, sizes, indexed, windows, how, m, n_batch)
    # updates into (*B, *windows, *free) order: batch positions, then window dims by operand dim
    pos_of = dict(zip(operand_windows, win_dims))
    uperm = tuple(upd_batch) + tuple(pos_of[d] for d in windows) + tuple(pos_of[d] for d in free)
    ut = SL.transpose(u, uperm) if uperm != tuple(range(u.ndim)) else u
    perm = tuple(indexed) + tuple(free)
    identity = perm == tuple(range(rank))
    xt = x if identity else SL.transpose(x, perm)
    if not arrays:   # every dim a whole window and no index vector: combine directly
        ut = SL.reshape(ut, (int(np.prod(B, dtype=np.int64)),) + tuple(ut.shape[n_batch:]))
        arrays = [snp.zeros((ut.shape[0],), dtype=dtypes.int64)]
        xt = SL.reshape(xt, (1,) + tuple(xt.shape))
        out = GS.scatter_p.bind(xt, ut, *arrays, op=_SCATTER_OPS[op], mode="clip",
                                unique_indices=False)
        out = SL.reshape(out, tuple(xt.shape[1:]))
    else:
        out = GS.scatter_p.bind(xt, ut, *arrays, op=_SCATTER_OPS[op],
                                mode="drop" if prim_mode == "fill" else "clip",
                                unique_indices=bool(unique_indices))
    return out if identity else SL.transpose(out, tuple(int(i) for i in np.argsort(perm)))


def _scatter_doc(op, combine):
    return f"""Scatters ``updates`` into ``operand`` (XLA Scatter): each update element is
    {combine} the operand element it lands on.

    Args:
        operand: array of shape ``(d0, ..., dr-1)``.
        scatter_indices: integer array of shape ``(*B, k)``,
            ``k = len(scatter_dims_to_operand_dims)``.
        updates: array of the operand's dtype: ``B`` at the non-window positions, the window
            sizes (<= the operand dims) at ``update_window_dims``.
        dimension_numbers: a ``ScatterDimensionNumbers``.
        indices_are_sorted: accepted hint (no effect).
        unique_indices: a promise that no two updates land on one element.
        mode: None / "fill" / "drop" (default: a window not entirely in bounds is dropped),
            "clip" or "promise_in_bounds" (starts clamped so the window is in bounds).
    Returns:
        Array of the operand's shape and dtype. Repeated indices combine every update (for
        ``scatter``, the last in row-major order of ``B`` wins). Derivatives are those of the
        indexing primitive (src/arrays/ops/gather_scatter.py): linear for set / add, product
        rule for mul, ties shared for min / max.
    Raises:
        ValueError: inconsistent dimension numbers or shapes. TypeError: dtypes.
    """


def _make_scatter(op, combine):
    def fn(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
           unique_indices=False, mode=None):
        return _scatter(op, operand, scatter_indices, updates, dimension_numbers,
                        unique_indices, mode)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = _scatter_doc(op, combine)
    return fn


scatter = _make_scatter("scatter", "written over")
scatter_add = _make_scatter("scatter_add", "added to")
scatter_mul = _make_scatter("scatter_mul", "multiplied into")
scatter_min = _make_scatter("scatter_min", "combined by minimum with")
scatter_max = _make_scatter("scatter_max", "combined by maximum with")


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """``scatter_add`` of ``-updates`` (see ``scatter_add``)."""
    u = _operand(updates, "lax.scatter_sub")
    return _scatter("scatter_add", operand, scatter_indices, snp.negative(u), dimension_numbers,
                    unique_indices, mode)
