"""Prefix scans of ``starling.lax``: ``associative_scan`` and ``cumsum``, ``cumprod``,
``cummax``, ``cummin``, ``cumlogsumexp``.

``associative_scan(fn, elems)`` is the work-efficient parallel prefix of Blelloch (1990),
"Prefix sums and their applications", in its recursive odd/even form (as in Ladner & Fischer):
combine neighbouring pairs (``n/2`` calls of ``fn`` on strided slices), scan those pair sums
recursively, which gives every odd prefix, then one more combine gives the even prefixes; the
two halves are interleaved. ``fn`` is called ``O(log n)`` times on whole slices (each call is
vectorised over all positions), doing ``O(n)`` work in total. It only needs ``fn`` to be
associative: the order of the operands of each call is the sequence order (``fn(earlier,
later)``), so non-commutative combines (matrix products, affine maps) are fine.

The ``cum*`` functions keep the operand's dtype (no widening, as in JAX; integer sums wrap) and
run the cumulative primitives of src/arrays/ops/cumulative.py (with their JVP / transpose /
batching rules); ``cumlogsumexp`` is an ``associative_scan`` of ``logaddexp``.
"""
from __future__ import annotations

from ...core import dtypes
from ... import tree
from .. import numpy as snp
from ..convert import operand as _operand
from ..ops import cumulative as CU
from ..ops import shape_lax as SL
from ._util import axis as _axis

__all__ = ["associative_scan", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"]


def _take(x, ax, start, stop, step=1):
    return SL.slice_in_dim(x, start, stop, step, ax)


def _interleave(even, odd, ax):
    """``[even0, odd0, even1, odd1, ...]`` along ``ax``; ``even`` has as many entries as ``odd``
    or one more."""
    ne, no = even.shape[ax], odd.shape[ax]
    if ne != no:   # pad odd with a copy of even's last entry, cut it off again below
        odd = SL.concatenate([odd, _take(even, ax, ne - 1, ne)], ax)
    pair = SL.concatenate([SL.expand_dims(even, (ax + 1,)), SL.expand_dims(odd, (ax + 1,))],
                          ax + 1)
    shape = tuple(even.shape)
    merged = SL.reshape(pair, shape[:ax] + (2 * ne,) + shape[ax + 1:])
    return merged if ne == no else _take(merged, ax, 0, ne + no)


def _prefix(combine, leaves, ax):
    n = leaves[0].shape[ax]
    if n < 2:
        return leaves
    pairs = combine([_take(x, ax, 0, n - 1, 2) for x in leaves],
                    [_take(x, ax, 1, n, 2) for x in leaves])
    odd = _prefix(combine, pairs, ax)   # prefixes ending at positions 1, 3, 5, ...
    m = odd[0].shape[ax]
    before = odd if n % 2 else [_take(o, ax, 0, m - 1) for o in odd]
    rest = combine(before, [_take(x, ax, 2, n, 2) for x in leaves])   # positions 2, 4, ...
    even = [SL.concatenate([_take(x, ax, 0, 1), r], ax) for x, r in zip(leaves, rest)]
    return [_interleave(e, o, ax) for e, o in zip(even, odd)]


def associative_scan(fn, elems, reverse=False, axis=0):
    """All prefix combinations ``fn(...fn(fn(e0, e1), e2)..., ei)`` along ``axis``.

    Args:
        fn: associative function of two pytrees of arrays (the earlier and the later operand)
            returning a pytree of the same structure and shapes; it is applied to stacks of
            elements along ``axis``, so it must be elementwise along that axis.
        elems: a pytree of arrays sharing the size ``n`` of ``axis``.
        reverse: scan from the end (suffix combinations ``fn(ei, fn(..., e_{n-1}))``).
        axis: static int, negative counted from the end.
    Returns:
        A pytree like ``elems``: entry ``i`` along ``axis`` combines entries ``0..i`` (or
        ``i..n-1`` with ``reverse``). Differentiable and batchable when ``fn`` is.
    Raises:
        ValueError: no leaves, leaves of different sizes along ``axis``, or a result of ``fn``
        with another structure.
    """
    leaves, treedef = tree.flatten(elems)
    if not leaves:
        raise ValueError("lax.associative_scan: elems has no arrays")
    leaves = [_operand(x, "lax.associative_scan") for x in leaves]
    ax = _axis("associative_scan", axis, leaves[0].ndim)
    sizes = {x.shape[ax] if x.ndim > ax else None for x in leaves}
    if len(sizes) != 1:
        raise ValueError(f"lax.associative_scan: every leaf needs the same size along axis "
                         f"{axis}, got shapes {[tuple(x.shape) for x in leaves]}")

    def combine(a, b):
        if reverse:   # the flipped sequence: the later element comes first in true order
            a, b = b, a
        out, out_def = tree.flatten(fn(tree.unflatten(treedef, a), tree.unflatten(treedef, b)))
        if out_def != treedef or len(out) != len(a):
            raise ValueError(f"lax.associative_scan: fn returned a {out_def}, expected the "
                             f"structure of elems {treedef}")
        return [_operand(o, "lax.associative_scan") for o in out]

    if reverse:
        leaves = [SL.rev(x, (ax,)) for x in leaves]
    out = _prefix(combine, leaves, ax)
    if reverse:
        out = [SL.rev(x, (ax,)) for x in out]
    return tree.unflatten(treedef, out)


def _cumulative(name, prim, summary):
    def fn(operand, axis=0, reverse=False):
        x = _operand(operand, f"lax.{name}")
        if x.ndim == 0:
            raise ValueError(f"lax.{name}: operand must have at least one dimension")
        return CU._scan(prim, x, _axis(name, axis, x.ndim), bool(reverse))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"""{summary} along ``axis``, in the operand's dtype (no widening).

    Args:
        operand: array of shape ``(*shape)``, at least 1-d.
        axis: static int (default 0), negative counted from the end.
        reverse: accumulate from the end of the axis.
    Returns:
        Array of the operand's shape and dtype.
    """
    return fn


cumsum = _cumulative("cumsum", CU.cumsum_p, "Running sum (integers wrap on overflow)")
cumprod = _cumulative("cumprod", CU.cumprod_p, "Running product (exact derivative with zeros)")
cummax = _cumulative("cummax", CU.cummax_p,
                     "Running maximum (a NaN propagates; the derivative goes to the entry that "
                     "first attained each running maximum)")
cummin = _cumulative("cummin", CU.cummin_p, "Running minimum (like ``cummax``)")


def cumlogsumexp(operand, axis=0, reverse=False):
    """Running ``log(sum(exp(x)))`` along ``axis``, computed stably as an
    ``associative_scan`` of ``logaddexp`` (no overflow for large entries; -inf entries add
    nothing).

    Args:
        operand: real floating array of shape ``(*shape)``, at least 1-d.
        axis: static int (default 0). reverse: accumulate from the end.
    Returns:
        Array of the operand's shape and dtype.
    Raises:
        TypeError: a non-floating operand.
    """
    x = _operand(operand, "lax.cumlogsumexp")
    if not dtypes.is_floating(x.dtype):
        raise TypeError(f"lax.cumlogsumexp: operand must be real floating, got {x.dtype}")
    if x.ndim == 0:
        raise ValueError("lax.cumlogsumexp: operand must have at least one dimension")
    return associative_scan(snp.logaddexp, x, reverse=reverse, axis=axis)
