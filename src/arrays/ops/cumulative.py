"""Cumulative (scan) ops: cumsum, cumprod, cumulative_sum, cumulative_prod, cummax, cummin.

Primitives (dtype kept; the wrappers choose the accumulation dtype first):

=========  ======================  ===================================================
primitive  params                  semantics
=========  ======================  ===================================================
cumsum     axis (int), reverse     running sum along ``axis`` (from the end if reverse)
cumprod    axis, reverse           running product
cummax     axis, reverse           running maximum; a NaN propagates to the rest
cummin     axis, reverse           running minimum
=========  ======================  ===================================================

Running sums and products of float16 / bfloat16 / float8 / float4 / float32 (complex64) are
accumulated in float64 (complex128) and each output is rounded back once: over 2^25 terms
they stay within an ulp or two of the exact running sum, where a sequential float32 sum
drifts by hundreds of ulps (or stagnates). Running max / min of the small floats compare in
float32. Integer overflow wraps, as in NumPy.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.ad_util import Zero, tangent_aval
from ...core.primitive import Primitive
from ...core.trace import EVAL_TRACE, current_trace
from ..array import Array, wrap
from ..convert import operand
from .axes import normalize_axis
from .convert_element_type import convert_element_type
from .shape_lax import iota, pad as lax_pad
from .reductions import _ACC32, _F32, _ns, const, no_out, sum_dtype

__all__ = ["cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "cummax", "cummin"]


_F64 = np.dtype(np.float64)
_WIDER = {np.dtype(np.float32): _F64,
          np.dtype(np.complex64): np.dtype(np.complex128)}


def _scan_impl(accumulate, with_dtype):
    def impl(x, *, axis, reverse):
        dt = x.dtype
        if reverse:
            x = np.flip(x, axis)
        if dt in _ACC32 and not with_dtype:
            out = accumulate(x.astype(_F32), axis=axis).astype(dt)
        elif dt in _ACC32 or (with_dtype and dt in _WIDER):
            # a sequential running sum drifts: in float32, 2^25 terms of 5e-4 stagnate once the
            # sum's spacing passes the terms (2% off). Accumulated in float64 (complex128) and
            # each output rounded once, it stays within an ulp of the exact running sum.
            out = accumulate(x.astype(_WIDER.get(dt, _F64)), axis=axis).astype(dt)
        elif with_dtype:
            # dtype= keeps the operand's dtype: NumPy would widen small ints (the wrapper decides).
            out = accumulate(x, axis=axis, dtype=dt)
        else:
            out = accumulate(x, axis=axis)
        return np.flip(out, axis) if reverse else out
    return impl


def _scan_abstract_eval(x, *, axis, reverse):
    return x


def _declare(name, accumulate, with_dtype):
    p = Primitive(name, family="cumulative")
    p.impl = _scan_impl(accumulate, with_dtype)
    p.abstract_eval = _scan_abstract_eval
    p.weak_type = lambda w, *, axis, reverse: w
    return p


cumsum_p = _declare("cumsum", np.add.accumulate, True)
cumprod_p = _declare("cumprod", np.multiply.accumulate, True)
cummax_p = _declare("cummax", np.maximum.accumulate, False)
cummin_p = _declare("cummin", np.minimum.accumulate, False)



# ---- transformation rules ----------------------------------------------------------------------
#
# cumsum: linear; its transpose is the running sum in the other direction.
# cumprod: the JVP is the scan of the product rule over pairs (p, dp) with the associative
#   combine (p1, dp1) . (p2, dp2) = (p1 p2, dp1 p2 + p1 dp2), run as a Hillis-Steele scan in
#   ceil(log2 n) shifted steps: no division by x, so zeros (one or several) are exact; O(n log n).
# cummax / cummin: each output's tangent is the tangent of the entry that FIRST attained that
#   running extremum in scan order (from the start, or from the end when reverse): later ties do
#   not take it over. Once the run turns NaN, the tangent is that of the first NaN.
# Batch rules: the batch axis stays put and ``axis`` is renumbered around it.
# Sharding: dims other than ``axis`` may be split; a pending reduction of the same kind passes
#   through (running sums of partial sums add up, likewise products, and a running maximum of a
#   pending maximum is the maximum of the pieces' running maxima).

def _shift(v, s, fill, axis, reverse):
    """``v`` moved by ``s`` steps along ``axis`` in scan order, ``fill`` entering at the start."""
    cfg = [(0, 0, 0)] * v.ndim
    cfg[axis] = (-s, s, 0) if reverse else (s, -s, 0)
    return lax_pad(v, const(fill, v.dtype), cfg)


def _cumprod_jvp(primals, tangents, *, axis, reverse):
    x, = primals
    t, = tangents
    ans = cumprod_p.bind(x, axis=axis, reverse=reverse)
    if type(t) is Zero or not dtypes.is_inexact(x.dtype):
        return ans, Zero(tangent_aval(ans.aval))
    snp = _ns()
    p, d, s, n = x, t, 1, x.shape[axis]
    while s < n:
        p_prev = _shift(p, s, 1, axis, reverse)
        d = snp.add(snp.multiply(p_prev, d), snp.multiply(_shift(d, s, 0, axis, reverse), p))
        p = snp.multiply(p_prev, p)
        s *= 2
    return ans, d


def _cum_extremum_jvp(prim):
    def rule(primals, tangents, *, axis, reverse):
        x, = primals
        t, = tangents
        ans = prim.bind(x, axis=axis, reverse=reverse)
        if type(t) is Zero or not dtypes.is_inexact(x.dtype):
            return ans, Zero(tangent_aval(ans.aval))
        n = x.shape[axis]
        if n <= 1:
            return ans, t
        snp = _ns()
        prev = _shift(ans, 1, 0, axis, reverse)
        same = snp.logical_or(snp.equal(ans, prev),
                              snp.logical_and(snp.isnan(ans), snp.isnan(prev)))
        pos = iota(dtypes.int64, tuple(x.shape), axis)
        start = snp.equal(pos, n - 1 if reverse else 0)
        new = snp.logical_or(start, snp.logical_not(same))
        # The position where the current run value first appeared: the last "new" position.
        if reverse:
            src = cummin_p.bind(snp.where(new, pos, n), axis=axis, reverse=True)
        else:
            src = cummax_p.bind(snp.where(new, pos, -1), axis=axis, reverse=False)
        return ans, snp.take_along_axis(t, src, axis=axis)
    prim.jvp = rule
    return rule


def _cumsum_transpose(ct, x, *, axis, reverse):
    if type(ct) is Zero:
        return [Zero(tangent_aval(x.aval))]
    return [cumsum_p.bind(ct, axis=axis, reverse=not reverse)]


def _scan_batch(prim):
    def rule(args, dims, *, axis, reverse):
        d = dims[0]
        return prim.bind(args[0], axis=axis + (axis >= d), reverse=reverse), d
    prim.batch = rule
    return rule


def _along_axis(params, ndim):
    return (params["axis"],)


def _declare_rules():
    from . import rules as R
    from . import rules_sharding as RS
    for p, partials in ((cumsum_p, ("sum",)), (cumprod_p, ("prod",)), (cummax_p, ("max",)),
                        (cummin_p, ("min",))):
        p.sharding = RS.along(_along_axis, partials)
    R.deflinear(cumsum_p, _cumsum_transpose)
    cumprod_p.jvp = _cumprod_jvp
    _cum_extremum_jvp(cummax_p)
    _cum_extremum_jvp(cummin_p)
    for p in (cumsum_p, cumprod_p, cummax_p, cummin_p):
        _scan_batch(p)


_declare_rules()

def _scan(prim, x, axis, reverse):
    if type(x) is Array and current_trace() is EVAL_TRACE:
        return wrap(prim.impl(x._buf, axis=axis, reverse=reverse), x._weak)
    return prim.bind(x, axis=axis, reverse=reverse)


def _flat_or_axis(op, x, axis, require_axis):
    """(operand, axis): ``axis=None`` flattens (NumPy), or is an error for ndim > 1 when the
    Array API function requires an axis."""
    if axis is None:
        if require_axis and x.ndim > 1:
            raise ValueError(f"{op}: axis is required for arrays with more than one dimension "
                             f"(got shape {tuple(x.shape)})")
        if x.ndim != 1:
            x = _ns().reshape(x, (-1,))
        return x, 0
    return x, normalize_axis(op, axis, x.ndim)


def _cumulative(op, prim, identity, x, axis, dtype, include_initial, require_axis, reverse=False):
    x = operand(x, op)
    x, ax = _flat_or_axis(op, x, axis, require_axis)
    acc = sum_dtype(op, x.dtype, dtype) if identity is not None else x.dtype
    if acc != x.dtype:
        x = convert_element_type(x, acc, False)
    r = _scan(prim, x, ax, reverse)
    if include_initial:
        snp = _ns()
        shape = tuple(1 if i == ax else d for i, d in enumerate(x.shape))
        first = snp.broadcast_to(const(identity, acc, x.weak_type), shape)
        r = snp.concatenate([first, r] if not reverse else [r, first], axis=ax)
    return r


def cumsum(x, /, axis=None, dtype=None, out=None):
    """Running sum along an axis (NumPy ``cumsum``).

    Args:
        x: input array, shape ``(*dims)``.
        axis: an int (negative allowed), or None to run over the flattened array.
        dtype: accumulation / result dtype; None: bool and signed ints accumulate in int64,
            unsigned ints in uint64, floats and complex keep theirs.
        out: must be None.
    Returns:
        Array of shape ``(*dims)`` (``(size,)`` for ``axis=None``); integer overflow wraps.
    Raises:
        AxisError: axis out of range (a ValueError and IndexError).
    """
    no_out("cumsum", out)
    if type(x) is Array and axis is not None and dtype is None \
            and current_trace() is EVAL_TRACE and x._buf.dtype.kind in "fc":
        return _scan(cumsum_p, x, normalize_axis("cumsum", axis, x.ndim), False)
    return _cumulative("cumsum", cumsum_p, 0, x, axis, dtype, False, False)


def cumprod(x, /, axis=None, dtype=None, out=None):
    """Running product along an axis (NumPy ``cumprod``; arguments as ``cumsum``)."""
    no_out("cumprod", out)
    return _cumulative("cumprod", cumprod_p, 1, x, axis, dtype, False, False)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running sum along an axis (Array API 2023.12 ``cumulative_sum``).

    Args:
        x: input array, shape ``(*dims)`` (a 0-d array is treated as shape ``(1,)``).
        axis: the axis; may be None only for arrays with at most one dimension.
        dtype: as ``cumsum`` (int8 -> int64, uint8 -> uint64, bool -> int64 by default).
        include_initial: prepend the sum of no elements (0), so the axis grows by one.
    Returns:
        Array of shape ``(*dims)``, with ``dims[axis] + 1`` when ``include_initial``.
    Raises:
        ValueError: ``axis=None`` for ndim > 1. AxisError: axis out of range.
    """
    return _cumulative("cumulative_sum", cumsum_p, 0, x, axis, dtype, include_initial, True)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running product along an axis (Array API ``cumulative_prod``; as ``cumulative_sum``,
    with the initial value 1)."""
    return _cumulative("cumulative_prod", cumprod_p, 1, x, axis, dtype, include_initial, True)


def cummax(x, /, axis=None, *, reverse=False):
    """Running maximum along an axis (NumPy ``np.maximum.accumulate``; JAX ``lax.cummax``).

    Args:
        x: input array, any dtype (complex compares lexicographically).
        axis: an int, or None to run over the flattened array.
        reverse: run from the end of the axis towards the start.
    Returns:
        Array of ``x``'s shape and dtype; once a NaN is met, the rest of the run is NaN.
    Raises:
        AxisError: axis out of range.
    """
    return _cumulative("cummax", cummax_p, None, x, axis, None, False, False, reverse)


def cummin(x, /, axis=None, *, reverse=False):
    """Running minimum along an axis; the mirror image of ``cummax``."""
    return _cumulative("cummin", cummin_p, None, x, axis, None, False, False, reverse)

