"""The collective operations users call (JAX's ``lax`` names and signatures; also exported by
``starling.lax`` and ``starling.collectives``).

They work on pytrees, inside ``shard_map`` bodies (axes of the mesh) and under
``vmap(..., axis_name=)``; outside both they raise a NameError naming the axis. The torch
functional-collective spellings (``all_reduce``, ``all_gather_single``,
``reduce_scatter_single``, ``all_to_all_single``) are the same primitives with a group given by
axis names.
"""
from __future__ import annotations

from .. import tree as tree_util
from ..arrays.convert import operand
from ..core import dtypes
from ..core.axis_env import axis_size as _env_axis_size
from ..core.axis_env import normalize_axis_names
from .runtime.inprocess import accumulation_dtype
from .primitives import (all_gather_p, all_reduce_p, all_to_all_p, axis_index_p, ppermute_p,
                         pvary_p, reduce_scatter_p)


def _size(op, axes):
    return _env_axis_size(axes, op)


def _map(op, fn, x):
    return tree_util.map(lambda leaf: fn(operand(leaf, op)), x)


def _axis(op, axis, ndim, extra=0):
    if not -(ndim + extra) <= axis < ndim + extra:
        raise ValueError(f"{op}: axis {axis} is out of range for an operand with {ndim} dims")
    return axis % (ndim + extra)


def _countable(a):
    """Booleans summed are counted (as ``sum`` and JAX's psum do), not or-ed."""
    return a.astype(dtypes.DEFAULT_INT) if a.dtype == dtypes.bool_ else a


def psum(x, axis_name):
    """Sum over the devices (or vmap batch) along ``axis_name`` (a name or tuple of names); every
    member gets the total. Works on pytrees. Integer sums keep the operand's dtype and wrap;
    booleans are counted (int64, the dtype of ``sum`` of a bool array).

    Raises:
        NameError: an axis name bound by no enclosing shard_map / vmap.
    """
    axes = normalize_axis_names(axis_name, "psum")
    _size("psum", axes)
    return _map("psum", lambda a: all_reduce_p.bind(_countable(a), axes=axes, op="sum"), x)


def pmax(x, axis_name):
    """Maximum over ``axis_name`` (NaN propagates; derivative split evenly among ties)."""
    axes = normalize_axis_names(axis_name, "pmax")
    _size("pmax", axes)
    return _map("pmax", lambda a: all_reduce_p.bind(a, axes=axes, op="max"), x)


def pmin(x, axis_name):
    """Minimum over ``axis_name`` (NaN propagates; derivative split evenly among ties)."""
    axes = normalize_axis_names(axis_name, "pmin")
    _size("pmin", axes)
    return _map("pmin", lambda a: all_reduce_p.bind(a, axes=axes, op="min"), x)


def pmean(x, axis_name):
    """Mean over ``axis_name``: ``psum(x) / size`` (integers are promoted to the default float,
    as ``mean`` does; 16-bit floats are summed in float32 and the mean rounded once, as
    ``mean`` does, so a sum beyond float16's range does not make the mean inf)."""
    axes = normalize_axis_names(axis_name, "pmean")
    n = _size("pmean", axes)

    def one(a):
        if not dtypes.is_inexact(a.dtype):
            a = a.astype(dtypes.DEFAULT_FLOAT)
        wide = accumulation_dtype(a.dtype, "avg")
        if wide != a.dtype:
            return (all_reduce_p.bind(a.astype(wide), axes=axes, op="sum") / n).astype(a.dtype)
        return all_reduce_p.bind(a, axes=axes, op="sum") / n
    return _map("pmean", one, x)


def all_gather(x, axis_name, *, axis=0, tiled=False):
    """Every member's value, stacked along a new dim ``axis`` (``tiled=True``: concatenated
    along the existing dim ``axis``), in rank order. Shape: ``(*x.shape[:axis], n,
    *x.shape[axis:])`` or, tiled, dim ``axis`` multiplied by ``n``."""
    axes = normalize_axis_names(axis_name, "all_gather")
    n = _size("all_gather", axes)

    def one(a):
        ax = _axis("all_gather", axis, a.ndim, 0 if tiled else 1)
        return all_gather_p.bind(a, axes=axes, axis=ax, tiled=tiled, axis_size=n, out_size=None)
    return _map("all_gather", one, x)


_SCATTER_OPS = ("sum", "max", "min", "prod")


def psum_scatter(x, axis_name, *, scatter_dimension=0, tiled=False, op="sum"):
    """The sum over ``axis_name`` of which each member keeps its chunk along
    ``scatter_dimension`` (``tiled=False``: that dim must have size n and is removed;
    ``tiled=True``: it must be divisible by n and shrinks n-fold). ``op`` may also be
    "max" / "min" / "prod" (not differentiable). Booleans summed are counted, as in ``psum``.

    Raises:
        ValueError: a dim whose size does not fit the group size.
    """
    axes = normalize_axis_names(axis_name, "psum_scatter")
    n = _size("psum_scatter", axes)
    if op not in _SCATTER_OPS:
        raise ValueError(f"psum_scatter: op must be one of {_SCATTER_OPS}, got {op!r}")

    def one(a):
        if op == "sum":
            a = _countable(a)
        d = _axis("psum_scatter", scatter_dimension, a.ndim)
        size = a.shape[d]
        if (tiled and size % n) or (not tiled and size != n):
            need = f"divisible by {n}" if tiled else f"equal to {n}"
            raise ValueError(f"psum_scatter: dim {d} of the operand of shape {tuple(a.shape)} "
                             f"must be {need} (the size of axes {axes})")
        return reduce_scatter_p.bind(a, axes=axes, op=op, dim=d, tiled=tiled, axis_size=n,
                                     size=size // n if tiled else None)
    return _map("psum_scatter", one, x)


def all_to_all(x, axis_name, split_axis, concat_axis, *, tiled=False):
    """Member ``r`` receives chunk ``r`` (along ``split_axis``) of every member's value,
    concatenated in rank order along ``concat_axis`` (MPI's Alltoall). ``tiled=False``: the
    split dim has size n and is removed, and a dim of size n is inserted at ``concat_axis``.

    Raises:
        ValueError: a split dim that does not fit the group size.
    """
    axes = normalize_axis_names(axis_name, "all_to_all")
    n = _size("all_to_all", axes)

    def one(a):
        s = _axis("all_to_all", split_axis, a.ndim)
        c = _axis("all_to_all", concat_axis, a.ndim)
        size = a.shape[s]
        if (tiled and size % n) or (not tiled and size != n):
            need = f"divisible by {n}" if tiled else f"equal to {n}"
            raise ValueError(f"all_to_all: split dim {s} of the operand of shape "
                             f"{tuple(a.shape)} must be {need} (the size of axes {axes})")
        chunk = size // n
        return all_to_all_p.bind(a, axes=axes, split_axis=s, concat_axis=c, tiled=tiled,
                                 axis_size=n, split_size=chunk if tiled else None,
                                 concat_size=(chunk if c == s else a.shape[c]) * n
                                 if tiled else None)
    return _map("all_to_all", one, x)


def ppermute(x, axis_name, perm):
    """Sends each member's value along ``perm``, pairs ``(source rank, destination rank)``; a
    member no pair sends to receives zeros.

    Raises:
        ValueError: ranks out of range, or a rank sending / receiving twice.
    """
    axes = normalize_axis_names(axis_name, "ppermute")
    n = _size("ppermute", axes)
    perm = tuple((int(s), int(d)) for s, d in perm)
    if any(not 0 <= r < n for pair in perm for r in pair):
        raise ValueError(f"ppermute: ranks must be in [0, {n}) for axes {axes}, got perm {perm}")
    for k, verb in ((0, "sends"), (1, "receives")):
        ranks = [pair[k] for pair in perm]
        twice = sorted({r for r in ranks if ranks.count(r) > 1})
        if twice:
            raise ValueError(f"ppermute over axes {axes}: rank {twice[0]} {verb} more than once "
                             f"in perm {perm}; each rank may send once and receive once")
    return _map("ppermute", lambda a: ppermute_p.bind(a, axes=axes, perm=perm), x)


def axis_index(axis_name):
    """This device's rank along ``axis_name`` (int32 scalar; for a tuple of names, the linear
    index major to minor)."""
    axes = normalize_axis_names(axis_name, "axis_index")
    _size("axis_index", axes)
    return axis_index_p.bind(axes=axes)


def axis_size(axis_name) -> int:
    """The number of members along ``axis_name`` (a Python int)."""
    return _size("axis_size", normalize_axis_names(axis_name, "axis_size"))


def pvary(x, axis_name):
    """Marks values as varying over ``axis_name`` (identity on data; its transpose is psum). The
    replication typing inserts it where needed; explicit use is rarely necessary."""
    axes = normalize_axis_names(axis_name, "pvary")
    _size("pvary", axes)
    return _map("pvary", lambda a: pvary_p.bind(a, axes=axes), x)


pbroadcast = pvary


# ---- torch functional-collective spellings ----------------------------------------------------

def all_reduce(x, axis_name, op="sum"):
    """``psum`` / ``pmax`` / ``pmin`` / ``pmean`` by ``op`` ("sum", "max", "min", "avg")."""
    fns = {"sum": psum, "max": pmax, "min": pmin, "avg": pmean, "mean": pmean}
    if op not in fns:
        raise ValueError(f"all_reduce: op must be one of {sorted(fns)}, got {op!r}")
    return fns[op](x, axis_name)


def all_gather_single(x, axis_name, dim=0):
    """``all_gather(x, axis_name, axis=dim, tiled=True)`` (torch's all_gather_into_tensor)."""
    return all_gather(x, axis_name, axis=dim, tiled=True)


def reduce_scatter_single(x, axis_name, op="sum", dim=0):
    """``psum_scatter(x, axis_name, scatter_dimension=dim, tiled=True, op=op)``."""
    return psum_scatter(x, axis_name, scatter_dimension=dim, tiled=True, op=op)


reduce_scatter = reduce_scatter_single


def all_to_all_single(x, axis_name, split_dim=0, concat_dim=0):
    """``all_to_all(x, axis_name, split_dim, concat_dim, tiled=True)``."""
    return all_to_all(x, axis_name, split_dim, concat_dim, tiled=True)


__all__ = ["psum", "pmax", "pmin", "pmean", "all_gather", "psum_scatter", "all_to_all",
           "ppermute", "axis_index", "axis_size", "pvary", "pbroadcast", "all_reduce",
           "all_gather_single", "reduce_scatter", "reduce_scatter_single", "all_to_all_single"]
