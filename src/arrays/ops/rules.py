"""Helpers for writing transformation rules next to each primitive.

Rule signatures (every family follows them):

* ``jvp(primals, tangents, **params) -> (primal_out, tangent_out)``; tangents may be ``Zero``;
  lists for multiple results. Written with user-level ops, so rules are themselves traceable.
* ``transpose(ct, *args, **params) -> list`` of cotangents, one per arg (None for args that are
  not ``UndefinedPrimal``); ``ct`` may be ``Zero``. Only for primitives linear in some inputs.
* ``batch(args, dims, **params) -> (out, out_dim)``: ``dims[i]`` is the batch axis of ``args[i]``
  or None when unbatched (at least one is batched). Lists for multiple results.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.ad_util import UndefinedPrimal, Zero, is_undefined, tangent_aval
from ...core.avals import ShapedArray
from ..array import wrap


def snp():
    """The starling.numpy module (imported lazily: it imports the op families)."""
    from .. import numpy as _snp  # the namespace imports the ops families: import lazily
    return _snp


# ---- zeros and tangent arithmetic ----------------------------------------------------------------

def zeros_like_aval(aval: ShapedArray):
    """A concrete zero array for ``aval`` (float0 zeros for integer tangents)."""
    return wrap(np.zeros(aval.shape, dtype=aval.dtype), aval.weak_type)


def instantiate(t):
    """A Zero becomes a zero Array of its aval; anything else is returned unchanged."""
    if type(t) is Zero:
        return zeros_like_aval(t.aval)
    return t


def add_tangents(a, b):
    """Sum of two tangents/cotangents, either of which may be Zero."""
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    return snp().add(a, b)


def check_tangent(prim, primal, tangent):
    """Validates a rule's tangent output against the primal's aval (catches rule bugs early)."""
    want = tangent_aval(primal.aval)
    got = tangent.aval
    if got.shape != want.shape or (got.dtype != want.dtype and want.dtype != dtypes.float0):
        raise TypeError(f"jvp rule of '{prim.name}' returned a tangent {got.str_short()} for a "
                        f"primal {primal.aval.str_short()} (expected {want.str_short()})")
    return tangent


def to_tangent_dtype(t, aval):
    """Casts a tangent to the tangent dtype of ``aval`` (e.g. after weak-type promotion)."""
    if type(t) is Zero:
        return t
    want = tangent_aval(aval)
    if want.dtype == dtypes.float0:
        return Zero(want)
    if t.dtype != want.dtype:
        from .convert_element_type import convert_element_type
        t = convert_element_type(t, want.dtype, False)
    return t


def broadcast_to_shape(x, shape):
    """``x`` broadcast to ``shape`` (returned unchanged when it already has that shape)."""
    if tuple(x.shape) == tuple(shape):
        return x
    return snp().broadcast_to(x, shape)


def unbroadcast(ct, aval):
    """Sums ``ct`` over the dims that broadcasting added to an operand of ``aval``."""
    if type(ct) is Zero:
        return Zero(tangent_aval(aval))
    shape = tuple(aval.shape)
    if tuple(ct.shape) == shape:
        return ct
    lead = len(ct.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and ct.shape[lead + i] != 1)
    out = snp().sum(ct, axis=axes) if axes else ct
    if tuple(out.shape) != shape:
        out = snp().reshape(out, shape)
    return out


# ---- declaring rules ---------------------------------------------------------------------------

def defjvp(prim, *fns):
    """JVP from per-input derivative functions.

    ``fns[i](g, ans, *primals, **params)`` returns the tangent contribution of input ``i`` given
    its (nonzero) tangent ``g`` and the primal output ``ans``; None marks a non-differentiable
    input. Contributions are summed.
    """
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        out = Zero(tangent_aval(ans.aval))
        for fn, g in zip(fns, tangents):
            if fn is None or type(g) is Zero:
                continue
            out = add_tangents(out, to_tangent_dtype(fn(g, ans, *primals, **params), ans.aval))
        return ans, out
    prim.jvp = rule
    return rule


def defjvp_zero(prim):
    """JVP of a primitive whose output is piecewise constant or integer (zero tangent)."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        if prim.multiple_results:
            return ans, [Zero(tangent_aval(a.aval)) for a in ans]
        return ans, Zero(tangent_aval(ans.aval))
    prim.jvp = rule
    return rule


def deflinear(prim, transpose):
    """A primitive linear in ALL its operands: jvp applies it to the tangents (zeros
    instantiated); ``transpose(ct, *args, **params)`` as in the module docstring."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            return ans, Zero(tangent_aval(ans.aval))
        ts = [instantiate(t) for t in tangents]
        return ans, prim.bind(*ts, **params)
    prim.jvp = rule
    prim.transpose = transpose
    prim.is_linear = True
    return rule


# ---- batching helpers --------------------------------------------------------------------------

def move_axis(x, src, dst):
    """Moves axis ``src`` of ``x`` to position ``dst`` (no-op when equal)."""
    if src == dst:
        return x
    return snp().moveaxis(x, src, dst)


def batch_size(args, dims):
    """The size of the mapped axis, read from the first batched operand."""
    for a, d in zip(args, dims):
        if d is not None:
            return a.shape[d]
    raise ValueError("batch rule called with no batched operand")


def bdim_to_front(x, d, size=None):
    """Puts the batch axis first; an unbatched operand is broadcast to ``size`` when given."""
    if d is None:
        if size is None:
            return x
        return snp().broadcast_to(snp().expand_dims(x, 0), (size,) + tuple(x.shape))
    return move_axis(x, d, 0)


def batch_elementwise(prim):
    """Batch rule for broadcasting elementwise primitives: batch axes go first, and batched
    operands of lower per-example rank get unit dims so NumPy broadcasting lines them up."""
    def rule(args, dims, **params):
        rank = max(a.ndim - (d is not None) for a, d in zip(args, dims))
        moved = []
        for a, d in zip(args, dims):
            if d is None:
                moved.append(a)
                continue
            a = move_axis(a, d, 0)
            pad = rank - (a.ndim - 1)
            if pad:
                a = snp().reshape(a, (a.shape[0],) + (1,) * pad + tuple(a.shape[1:]))
            moved.append(a)
        out = prim.bind(*moved, **params)
        if prim.multiple_results:
            return out, [0] * len(out)
        return out, 0
    prim.batch = rule
    return rule


def batch_unary_same_axis(prim):
    """Batch rule for shape-preserving one-operand primitives: the batch axis stays put."""
    def rule(args, dims, **params):
        out = prim.bind(*args, **params)
        return out, dims[0]
    prim.batch = rule
    return rule


__all__ = [
    "Zero", "UndefinedPrimal", "is_undefined", "tangent_aval", "instantiate", "add_tangents",
    "unbroadcast", "defjvp", "defjvp_zero", "deflinear", "batch_elementwise",
    "batch_unary_same_axis", "bdim_to_front", "move_axis", "batch_size", "to_tangent_dtype",
    "zeros_like_aval", "broadcast_to_shape",
]
