"""A sum of zero-padded pieces that do not overlap becomes one ``concatenate`` (used by simplify).

The transpose of a slice is a ``pad`` with zeros, so the gradient of code that splits an array
(``q, k, v = qkv[..., :d], qkv[..., d:2*d], qkv[..., 2*d:]``) sums one full-size padded array
per piece: each pad fills a buffer of the whole size and the adds read them all. When the
pieces sit side by side along one dim (every other dim whole) and no two overlap, the sum is
the pieces laid end to end, with zeros in the gaps: one ``concatenate`` writes the result once.

Exactness: at each position the sum adds one piece's value to zeros, i.e. ``x + 0.0``, which
turns ``-0.0`` into ``+0.0``; the rewrite keeps that ``add 0.0`` on each floating piece (fused into
the kernel that produces the piece; left out where the piece provably has no -0.0), so the
result has the same bits, NaN and inf included.
The rewrite applies only when every term is a pad with the literal padding value +0, no
interior padding, no cropping, the (strong) dtype of the sum, and no other use.
"""
from __future__ import annotations

import functools

import numpy as np

from ...core.avals import ShapedArray
from ...core.ir import Literal
from .util import emit


def _terms(v, producers, uses, depth=64):
    """The leaves of the add tree whose root computes ``v`` (the root's own operands are
    ``v``'s producer's), through adds whose result has no other use."""
    eqn = producers.get(v)
    if eqn is not None and eqn.primitive.name == "add" and uses.get(v, 0) == 1 and depth:
        return [t for x in eqn.invars for t in _terms(x, producers, uses, depth - 1)]
    return [v]


def _piece(v, producers, uses, out_aval):
    """(operand, lo, hi, padding_config) of ``v`` when it is a zero pad the rewrite may take,
    else None."""
    if isinstance(v, Literal) or uses.get(v, 0) != 1:
        return None
    eqn = producers.get(v)
    if eqn is None or eqn.primitive.name != "pad":
        return None
    x, pv = eqn.invars
    if not isinstance(pv, Literal):
        return None
    val = np.asarray(pv.val)
    if val.ndim != 0 or val != 0 or (val.dtype.kind in "fc" and np.signbit(val.real)):
        return None
    cfg = tuple(tuple(c) for c in eqn.params["padding_config"])
    if any(i != 0 or lo < 0 or hi < 0 for lo, hi, i in cfg):
        return None
    if (x.aval.dtype != out_aval.dtype or x.aval.weak_type
            or tuple(v.aval.shape) != tuple(out_aval.shape)):
        return None
    return x, cfg


def pad_sum_eqns(eqn, producers, uses, consumer_is_add, no_negative_zero):
    """Equations computing the ``add`` ``eqn`` as a concatenate of its padded terms (the last
    equation's outvar is the result), or None when the rule does not apply. ``consumer_is_add``:
    the sum feeds another add (that add's rewrite takes the whole tree); ``no_negative_zero(v)``:
    True when ``v`` provably holds no -0.0 (its ``add 0.0`` is left out)."""
    out = eqn.outvars[0]
    if consumer_is_add or out.aval.weak_type:
        return None
    shape = tuple(out.aval.shape)
    if not all(type(n) is int for n in shape):
        return None
    terms = [t for x in eqn.invars for t in _terms(x, producers, uses)]
    pieces = [_piece(t, producers, uses, out.aval) for t in terms]
    if len(pieces) < 2 or any(p is None for p in pieces):
        return None
    # The one dim along which the pieces are placed (every other dim is whole in each piece).
    axes = {d for _, cfg in pieces for d, (lo, hi, _) in enumerate(cfg) if lo or hi}
    if len(axes) != 1:
        return None
    ax = axes.pop()
    spans = sorted(((cfg[ax][0], shape[ax] - cfg[ax][1], x) for x, cfg in pieces),
                   key=lambda s: s[0])
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
        return None   # overlapping pieces add up: not a placement

    # Pieces that are reshapes merging dims (heads x head_dim -> model dim) are placed before
    # the merge: the concatenate then reads the unmerged (often transposed) operands directly
    # and the merged result is a free view of it.
    full = shape
    split = _unmerged([x for _, _, x in spans], producers, shape, ax)
    if split is not None:
        srcs, inner = split
        unit = int(np.prod(inner))
        if all(lo % unit == 0 and hi % unit == 0 for lo, hi, _ in spans):
            full = shape[:ax] + (shape[ax] // unit,) + inner + shape[ax + 1:]
            spans = [(lo // unit, hi // unit, y) for (lo, hi, _), y in zip(spans, srcs)]
    dt = np.dtype(out.aval.dtype)
    eqns = []

    op = functools.partial(emit, eqns)

    zero = Literal(dt.type(0), ShapedArray((), dt, False))

    def gap(n):
        return op("broadcast_in_dim", [zero], shape=full[:ax] + (n,) + full[ax + 1:],
                  broadcast_dimensions=())

    parts, at = [], 0
    for lo, hi, x in spans:
        if lo > at:
            parts.append(gap(lo - at))
        if hi > lo:
            keep = dt.kind in "iub" or no_negative_zero(x)
            parts.append(x if keep else op("add", [x, zero]))
        at = hi
    if at < full[ax]:
        parts.append(gap(full[ax] - at))
    if len(parts) > 1:
        op("concatenate", parts, dimension=ax)
    elif not eqns:
        return None   # one integer piece, or an empty dim: nothing to gain
    if full != shape:
        op("reshape", [eqns[-1].outvars[0]], new_sizes=shape)
    return eqns


def _unmerged(pieces, producers, shape, ax):
    """``(sources, inner)`` when every piece is a ``reshape`` of a source shaped
    ``shape[:ax] + (m,) + inner + shape[ax + 1:]`` (``inner`` the same non-empty dims for all:
    the piece's dim ``ax`` is ``m * prod(inner)``), else None."""
    lead, trail = shape[:ax], shape[ax + 1:]
    srcs, inner = [], None
    for x in pieces:
        eqn = producers.get(x)
        if eqn is None or eqn.primitive.name != "reshape":
            return None
        y = eqn.invars[0]
        ys = tuple(y.aval.shape)
        mid = ys[ax:len(ys) - len(trail)]
        if (len(ys) < len(shape) + 1 or ys[:ax] != lead or ys[len(ys) - len(trail):] != trail
                or not all(type(n) is int for n in ys) or inner not in (None, mid[1:])):
            return None
        inner = mid[1:]
        srcs.append(y)
    return srcs, inner
