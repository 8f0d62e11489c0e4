"""Statistical reductions built from the reduction primitives of reductions.py: mean, var, std,
average, logsumexp, the NaN-aware reductions (nansum, nanprod, nanmean, nanvar, nanstd, nanmax,
nanmin) and the whole-array comparisons allclose / array_equal.

Dtypes: integer and bool inputs give the default float (float32), as in JAX, but are accumulated
in float64 (exact for |x| < 2**53) and rounded once. float16, bfloat16, float8 and float4 inputs
are accumulated in float32 and the result is rounded back to the input dtype once (NumPy does
the same for float16 means). Complex var / std return the real dtype.
"""
from __future__ import annotations

import builtins
import numbers

import numpy as np

from ...core import dtypes
from ...core.avals import is_symbolic
from ..convert import operand
from .autodiff import stop_gradient_p
from .axes import normalize_axes
from .convert_element_type import convert_element_type_p
from .elementwise_family import broadcast_shapes
from .reductions import (
    EVAL_TRACE, Array, _ACC32, _F32, _ns, apply, cast, check_mask, const, current_trace,
    extremum, is_empty_reduction, kept_shape, masked, no_out, reduce_and_p, reduce_max_p,
    reduce_min_p, reduce_prod_p, reduce_sum_p, reduced_shape, reduction_size, wrap, _sum_like,
)

__all__ = ["mean", "var", "std", "average", "logsumexp", "nansum", "nanprod", "nanmean",
           "nanvar", "nanstd", "nanmax", "nanmin", "allclose", "array_equal"]


def _count(n):
    """A divisor count: a float, or the symbolic dim itself (dynamic shapes: staged as a
    run-time value)."""
    return n if is_symbolic(n) else float(n)


def mean_dtypes(op, dt, dtype):
    """(accumulation dtype, result dtype) of mean-like reductions.

    Integers and bool give float32 but are accumulated in float64: float32 cannot hold int32 /
    int64 values exactly, and their rounding errors would not cancel (int32 max + min would be
    off by one before the division).
    """
    if dtype is not None:
        res = dtypes.canonicalize(dtype)
    elif dtypes.is_inexact(dt):
        res = dt
    else:
        return dtypes.float64, dtypes.DEFAULT_FLOAT
    return (_F32 if res in _ACC32 else res), res


def _broadcast_mask(op, where, shape, dt):
    """The where= mask broadcast to ``shape``, as 1 / 0 of dtype ``dt`` (for counting)."""
    snp = _ns()
    mask = check_mask(op, where, shape)
    return snp.where(mask, const(1, dt), const(0, dt)) if tuple(mask.shape) == tuple(shape) \
        else snp.broadcast_to(snp.where(mask, const(1, dt), const(0, dt)), shape)


def _mean_acc(op, x, axes, acc, keepdims, where):
    """Mean of ``x`` (already of dtype ``acc``) over ``axes``, in ``acc``."""
    snp = _ns()
    if where is None:
        s = apply(reduce_sum_p, x, axes, keepdims)
        return snp.divide(s, _count(reduction_size(x.shape, axes)))
    ones = _broadcast_mask(op, where, x.shape, acc)
    s = apply(reduce_sum_p, masked(op, x, where, 0), axes, keepdims)
    return snp.divide(s, apply(reduce_sum_p, ones, axes, keepdims))


def mean(x, /, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Arithmetic mean over the given axes (Array API ``mean`` plus NumPy's extras).

    Args:
        x: input array, shape ``(*dims)``.
        axis: None (all axes), an int or a tuple of ints (negative allowed).
        dtype: result dtype. None: floats and complex keep theirs; bool and integers give
            float32 (the default float). float16 / bfloat16 / float8 are accumulated in float32
            and rounded back once.
        out: must be None. keepdims: keep reduced axes as size 1.
        where: bool mask broadcastable to ``x.shape``: the mean of the selected entries.
    Returns:
        Array without the reduced axes. An empty reduction (or an all-False mask) gives NaN.
    Raises:
        AxisError: axis out of range. ValueError: duplicate axes, bad mask shape.
    """
    no_out("mean", out)
    return _mean("mean", x, axis, dtype, keepdims, where)


def _mean(op, x, axis, dtype, keepdims, where):
    x = operand(x, op)
    axes = normalize_axes(op, axis, x.ndim, sort=True)
    acc, res = mean_dtypes(op, x.dtype, dtype)
    if (type(x) is Array and where is None and dtypes.is_inexact(acc)
            and current_trace() is EVAL_TRACE):
        buf, weak = x._buf, x._weak and acc == x.dtype == res
        if buf.dtype != acc:
            buf = convert_element_type_p.impl(buf, new_dtype=acc, weak_type=False)
        r = np.divide(reduce_sum_p.impl(buf, axes=axes), acc.type(reduction_size(buf.shape, axes)))
        if keepdims:
            r = np.reshape(r, kept_shape(buf.shape, axes))
        if res != acc:
            r = convert_element_type_p.impl(r, new_dtype=res, weak_type=False)
        return wrap(r, weak)
    r = _mean_acc(op, cast(x, acc), axes, acc, keepdims, where)
    return cast(r, res)


# ---- variance ----------------------------------------------------------------------------------

def _correction(op, ddof, correction):
    if correction is not None and ddof not in (None, 0):
        raise ValueError(f"{op}: pass either ddof= (NumPy) or correction= (Array API), not both")
    c = correction if correction is not None else (ddof or 0)
    if isinstance(c, bool) or not isinstance(c, numbers.Real):
        raise TypeError(f"{op}: correction / ddof must be a real number, got {c!r}")
    return c


def _abs2(d):
    snp = _ns()
    if dtypes.is_complex(d.dtype):
        re, im = snp.real(d), snp.imag(d)
        return snp.add(snp.multiply(re, re), snp.multiply(im, im))
    return snp.multiply(d, d)


def _var_acc(op, x, axis, dtype, correction, keepdims, where):
    """Variance in the accumulation dtype; returns (variance, real result dtype)."""
    snp = _ns()
    x = operand(x, op)
    axes = normalize_axes(op, axis, x.ndim, sort=True)
    acc, res = mean_dtypes(op, x.dtype, dtype)
    if (type(x) is Array and where is None and acc in _REAL_FAST
            and current_trace() is EVAL_TRACE):
        return _var_eager(x, axes, acc, correction, keepdims), res
    xc = cast(x, acc)
    racc = dtypes.real_dtype(acc)
    m = _mean_acc(op, xc, axes, acc, True, where)
    d = snp.subtract(xc, m)
    if where is None:
        s = apply(reduce_sum_p, _abs2(d), axes, keepdims)
        n = reduction_size(x.shape, axes)
        # Array API: N - correction <= 0 gives NaN (a NaN divisor), not NumPy's inf.
        r = snp.divide(s, _count(n - correction) if n - correction > 0 else
                       const(float("nan"), racc))
    else:
        # Masked before squaring: a masked-out NaN would otherwise give 2 * NaN * 0 = NaN
        # in the derivative of the square.
        s = apply(reduce_sum_p, _abs2(masked(op, d, where, 0)), axes, keepdims)
        n = apply(reduce_sum_p, _broadcast_mask(op, where, x.shape, racc), axes, keepdims)
        dof = snp.subtract(n, correction)
        r = snp.divide(s, snp.where(dof > 0, dof, const(float("nan"), racc)))
    return r, dtypes.real_dtype(res)


_REAL_FAST = (dtypes.float32, dtypes.float64)


def _var_eager(x, axes, acc, correction, keepdims):
    """The composition of _var_acc run directly on the buffers (the same kernels in the same
    order, so the result is bit-identical to the staged program's)."""
    snp = _ns()
    sub, mul, div = (f.primitive.impl for f in (snp.subtract, snp.multiply, snp.divide))
    buf, weak = x._buf, x._weak and x.dtype == acc
    if buf.dtype != acc:
        buf = convert_element_type_p.impl(buf, new_dtype=acc, weak_type=False)
    n = reduction_size(buf.shape, axes)
    kept = kept_shape(buf.shape, axes)
    m = div(np.reshape(reduce_sum_p.impl(buf, axes=axes), kept), acc.type(n))
    d = sub(buf, m)
    r = reduce_sum_p.impl(mul(d, d), axes=axes)
    if keepdims:
        r = np.reshape(r, kept)
    dof = n - correction
    return wrap(div(r, acc.type(dof if dof > 0 else np.nan)), weak)


def var(x, /, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    """Variance ``sum(|x - mean|**2) / (N - correction)`` over the given axes (two-pass).

    Args:
        x: input array, shape ``(*dims)``.
        axis: None (all axes), an int or a tuple of ints (negative allowed).
        dtype: computation dtype (None: floats keep theirs, integers give float32; float16 /
            bfloat16 computed in float32).
        out: must be None.
        ddof: NumPy's name for ``correction`` (delta degrees of freedom).
        keepdims: keep reduced axes as size 1.
        where: bool mask of entries to include.
        correction: Array API name: 0 for the population variance, 1 for the sample variance.
    Returns:
        Array of the real dtype (complex64 -> float32) without the reduced axes. Where
        ``N - correction <= 0`` the divisor is 0 (inf or NaN, as NumPy).
    Raises:
        ValueError: both ``ddof`` and ``correction`` given; bad axes (AxisError).
        TypeError: non-numeric correction.
    """
    no_out("var", out)
    c = _correction("var", ddof, correction)
    r, res = _var_acc("var", x, axis, dtype, c, keepdims, where)
    return cast(r, res)


def _sqrt_var(v):
    """``sqrt(v)`` whose derivative is 0 where ``v == 0`` (not 0 * inf = NaN); same values."""
    snp = _ns()
    if type(v) is Array and current_trace() is EVAL_TRACE:
        return snp.sqrt(v)
    zero = snp.equal(v, 0)
    return snp.where(zero, const(0, v.dtype), snp.sqrt(snp.where(zero, const(1, v.dtype), v)))


def std(x, /, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    """Standard deviation: ``sqrt(var(x, ...))`` with the same arguments (see ``var``).

    Derivatives: where the variance is exactly 0 (a constant slice, or a single element), the
    gradient is 0 (a subgradient of the norm-like ``std`` at its minimum) instead of the NaN of
    ``0 * (1 / sqrt(0))`` that JAX and PyTorch give; elsewhere it is ``(x - mean) / (N' std)``.
    """
    no_out("std", out)
    c = _correction("std", ddof, correction)
    r, res = _var_acc("std", x, axis, dtype, c, keepdims, where)
    return cast(_sqrt_var(r), res)


# ---- average -----------------------------------------------------------------------------------

def average(a, /, axis=None, weights=None, returned=False, *, keepdims=False):
    """Weighted average ``sum(a * w) / sum(w)`` over the given axes (NumPy ``average``).

    Args:
        a: input array, shape ``(*dims)``.
        axis: None, an int or a tuple of ints.
        weights: None (plain mean), an array of ``a``'s shape, or (with ``axis``) an array of
            shape ``tuple(a.shape[ax] for ax in axis)`` applied along those axes.
        returned: also return the sum of the weights (broadcast to the result's shape).
        keepdims: keep reduced axes as size 1.
    Returns:
        The average (and the weight sums when ``returned``), of the promoted dtype of ``a`` and
        ``weights`` (integers give float32). Weights summing to 0 give inf / NaN (NumPy raises
        ZeroDivisionError, which a traced function cannot do).
    Raises:
        TypeError: weights of another shape without ``axis``.
        ValueError: weights whose shape matches neither ``a`` nor ``a.shape`` along ``axis``.
    """
    snp = _ns()
    a = operand(a, "average")
    given = normalize_axes("average", axis, a.ndim)
    axes = tuple(sorted(given))
    if weights is None:
        avg = mean(a, axes, keepdims=keepdims)
        if not returned:
            return avg
        n = const(reduction_size(a.shape, axes), avg.dtype)
        return avg, snp.broadcast_to(n, avg.shape)
    w = operand(weights, "average")
    dt, _ = dtypes.result_type((a.dtype, a.weak_type), (w.dtype, w.weak_type))
    acc, res = mean_dtypes("average", dt, None)
    ac, wc = cast(a, acc), cast(w, acc)
    if tuple(w.shape) != tuple(a.shape):
        if axis is None:
            raise TypeError(f"average: weights of shape {tuple(w.shape)} differ from a's shape "
                            f"{tuple(a.shape)}; pass axis= to apply them along given axes")
        along = tuple(a.shape[ax] for ax in given)
        if tuple(w.shape) != along:
            raise ValueError(f"average: weights of shape {tuple(w.shape)} match neither a's shape "
                             f"{tuple(a.shape)} nor its shape {along} along axis {axis}")
        order = tuple(sorted(range(len(given)), key=lambda i: given[i]))
        if order != tuple(range(len(given))):
            wc = snp.permute_dims(wc, order)
        along_shape = tuple(d if i in axes else 1 for i, d in enumerate(a.shape))
        wc = snp.broadcast_to(snp.reshape(wc, along_shape), a.shape)
    scl = apply(reduce_sum_p, wc, axes, keepdims)
    avg = snp.divide(apply(reduce_sum_p, snp.multiply(ac, wc), axes, keepdims), scl)
    avg = cast(avg, res)
    if returned:
        return avg, cast(snp.broadcast_to(scl, avg.shape), res)
    return avg


# ---- NaN-aware reductions ----------------------------------------------------------------------

def _not_nan(op, x, where):
    """Mask of the non-NaN entries (and'ed with ``where``); None when nothing is masked."""
    if not dtypes.is_inexact(x.dtype):
        return where
    snp = _ns()
    keep = snp.logical_not(snp.isnan(x))
    if where is not None:
        keep = snp.logical_and(keep, check_mask(op, where, x.shape))
    return keep


def nansum(x, /, axis=None, dtype=None, out=None, keepdims=False, *, initial=None, where=None):
    """``sum`` treating NaN as 0 (NumPy ``nansum``; same arguments as ``sum``)."""
    no_out("nansum", out)
    x = operand(x, "nansum")
    return _sum_like("nansum", reduce_sum_p, 0, "add", x, axis, dtype, keepdims, initial,
                     _not_nan("nansum", x, where))


def nanprod(x, /, axis=None, dtype=None, out=None, keepdims=False, *, initial=None, where=None):
    """``prod`` treating NaN as 1 (NumPy ``nanprod``; same arguments as ``prod``)."""
    no_out("nanprod", out)
    x = operand(x, "nanprod")
    return _sum_like("nanprod", reduce_prod_p, 1, "multiply", x, axis, dtype, keepdims, initial,
                     _not_nan("nanprod", x, where))


def nanmean(x, /, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """``mean`` of the non-NaN entries; an all-NaN slice gives NaN (NumPy ``nanmean``)."""
    no_out("nanmean", out)
    x = operand(x, "nanmean")
    return _mean("nanmean", x, axis, dtype, keepdims, _not_nan("nanmean", x, where))


def nanvar(x, /, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           correction=None):
    """``var`` of the non-NaN entries (NumPy ``nanvar``; same arguments as ``var``)."""
    no_out("nanvar", out)
    c = _correction("nanvar", ddof, correction)
    x = operand(x, "nanvar")
    r, res = _var_acc("nanvar", x, axis, dtype, c, keepdims, _not_nan("nanvar", x, where))
    return cast(r, res)


def nanstd(x, /, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           correction=None):
    """``std`` of the non-NaN entries (NumPy ``nanstd``; same arguments as ``std``, and the
    same zero gradient at zero variance)."""
    no_out("nanstd", out)
    c = _correction("nanstd", ddof, correction)
    x = operand(x, "nanstd")
    r, res = _var_acc("nanstd", x, axis, dtype, c, keepdims, _not_nan("nanstd", x, where))
    return cast(_sqrt_var(r), res)


def _nan_extremum(op, prim, combine, x, axis, keepdims, initial, where):
    x = operand(x, op)
    if not dtypes.is_inexact(x.dtype):
        return extremum(op, prim, combine, x, axis, keepdims, initial, where)
    snp = _ns()
    axes = normalize_axes(op, axis, x.ndim, sort=True)
    if initial is None:
        if where is not None:
            raise ValueError(f"{op}: where= needs initial= (the value of a slice with no selected "
                             f"entries)")
        if is_empty_reduction(x.shape, axes):
            empty = [ax for ax in axes if x.shape[ax] == 0]
            raise ValueError(f"{op}: zero-size reduction along axis {empty[0]} (array shape "
                             f"{tuple(x.shape)}) has no identity; pass initial=")
    keep = _not_nan(op, x, where)
    r = apply(prim, masked(op, x, keep, prim.meta["identity"](x.dtype)), axes, keepdims)
    if initial is not None:
        return cast(getattr(snp, combine)(r, initial), x.dtype)
    # A slice of NaNs only gives NaN (NumPy also warns).
    none_kept = apply(reduce_and_p, snp.logical_not(keep), axes, keepdims)
    return snp.where(none_kept, const(np.nan, x.dtype), r)


def nanmax(x, /, axis=None, out=None, keepdims=False, initial=None, where=None):
    """``max`` ignoring NaNs; an all-NaN slice gives NaN (NumPy ``nanmax``).

    Raises:
        ValueError: zero-size reduction without ``initial``; ``where`` without ``initial``.
    """
    no_out("nanmax", out)
    return _nan_extremum("nanmax", reduce_max_p, "maximum", x, axis, keepdims, initial, where)


def nanmin(x, /, axis=None, out=None, keepdims=False, initial=None, where=None):
    """``min`` ignoring NaNs; an all-NaN slice gives NaN (NumPy ``nanmin``)."""
    no_out("nanmin", out)
    return _nan_extremum("nanmin", reduce_min_p, "minimum", x, axis, keepdims, initial, where)


# ---- logsumexp ---------------------------------------------------------------------------------

def logsumexp(a, /, axis=None, b=None, keepdims=False, return_sign=False):
    """``log(sum(b * exp(a)))`` over the given axes, computed stably (SciPy ``logsumexp``).

    Method: with ``m = max(a)`` over the axes (0 where that max is not finite),
    ``logsumexp(a) = m + log(sum(b * exp(a - m)))``, so no ``exp`` overflows. Slices of only
    ``-inf`` give ``-inf``, a ``+inf`` entry gives ``+inf``, a NaN gives NaN; entries with
    ``b == 0`` are ignored (even infinite ones), as in SciPy.

    Derivatives: the gradient with respect to ``a`` is the softmax weights
    ``b * exp(a - logsumexp)``, exactly 0 at ``-inf`` entries; a slice of only ``-inf`` (value
    ``-inf``) has gradient 0, not NaN. Entries with ``b == 0`` count as absent, so the
    gradients with respect to them (``a`` and ``b``) are 0, as in JAX.

    Args:
        a: input array, shape ``(*dims)``; integers are promoted to float32. float16 / bfloat16
            are computed in float32 and rounded back.
        axis: None (all axes), an int or a tuple of ints.
        b: optional weights broadcastable with ``a`` (may be negative with ``return_sign``).
        keepdims: keep reduced axes as size 1.
        return_sign: also return the sign of the sum; the first result is then
            ``log(|sum(b * exp(a))|)``. For complex input the "sign" is ``s / |s|``.
    Returns:
        The result (and the sign) of shape ``(*dims)`` without the reduced axes. A negative
        weighted sum without ``return_sign`` gives NaN.
    Raises:
        AxisError / ValueError: bad axes, shapes of ``a`` and ``b`` that do not broadcast.
    """
    snp = _ns()
    x = operand(a, "logsumexp")
    infos = [(x.dtype, x.weak_type)]
    if b is not None:
        w = operand(b, "logsumexp")
        infos.append((w.dtype, w.weak_type))
    dt, _ = dtypes.result_type(*infos)
    acc, res = mean_dtypes("logsumexp", dt, None)
    racc = dtypes.real_dtype(acc)
    xc = cast(x, acc)
    if b is not None:
        wc = cast(w, acc)
        shape = broadcast_shapes("logsumexp", x.shape, w.shape)
        if tuple(xc.shape) != shape:
            xc = snp.broadcast_to(xc, shape)
        xc = snp.where(snp.equal(wc, const(0, acc)), const(-np.inf, acc), xc)
    axes = normalize_axes("logsumexp", axis, xc.ndim, sort=True)
    xr = snp.real(xc) if dtypes.is_complex(acc) else xc
    m = apply(reduce_max_p, xr, axes, True)
    m = snp.where(snp.isfinite(m), m, const(0, racc))
    # Derivatives: the result does not depend on the shift m, so it is held constant (the
    # gradient is then exactly the softmax weights, with exact zeros at -inf entries); a slice
    # whose sum is 0 (all -inf) gives -inf with gradient 0 instead of 0 * (1 / 0) = NaN.
    traced = not (type(xc) is Array and current_trace() is EVAL_TRACE)
    if traced:
        m = stop_gradient_p.bind(m)
    e = snp.exp(snp.subtract(xc, m))
    if b is not None:
        e = snp.multiply(wc, e)
    s = apply(reduce_sum_p, e, axes, keepdims)
    if not keepdims:
        m = snp.reshape(m, reduced_shape(xc.shape, axes))
    if return_sign:
        mag = snp.abs(s)
        if dtypes.is_complex(acc):
            sgn = snp.divide(s, cast(mag, acc))
        else:
            sgn = snp.sign(s)
        out = snp.add(_guarded_log(mag, traced), m)
        return cast(out, dtypes.real_dtype(res)), cast(sgn, res)
    return cast(snp.add(_guarded_log(s, traced), m), res)


def _guarded_log(s, traced):
    """``log(s)``; where ``s == 0`` the value is -inf (as log gives) with a zero derivative."""
    snp = _ns()
    if not traced:
        return snp.log(s)
    zero = snp.equal(s, 0)
    safe = snp.where(zero, const(1, s.dtype), s)
    return snp.where(zero, const(-np.inf, s.dtype), snp.log(safe))


# ---- whole-array comparisons -------------------------------------------------------------------

def allclose(a, b, /, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when ``|a - b| <= atol + rtol * |b|`` for every element (NumPy ``allclose``).

    Infinities are close only to the same infinity; NaN is close to nothing unless
    ``equal_nan``. Integer and bool inputs are compared in float64 (exact for |x| < 2**53).

    Args:
        a, b: arrays whose shapes broadcast. rtol, atol: non-negative tolerances.
        equal_nan: treat NaN as equal to NaN.
    Returns:
        A 0-d bool Array (NumPy returns a Python bool; ``bool(...)`` it when needed).
    Raises:
        ValueError: shapes do not broadcast. TypeError: dtypes do not promote.
    """
    snp = _ns()
    x, y = operand(a, "allclose"), operand(b, "allclose")
    broadcast_shapes("allclose", x.shape, y.shape)
    dt, _ = dtypes.result_type((x.dtype, x.weak_type), (y.dtype, y.weak_type))
    if not dtypes.is_inexact(dt):
        dt = dtypes.float64
    x, y = cast(x, dt), cast(y, dt)
    close = snp.less_equal(snp.abs(snp.subtract(x, y)),
                           snp.add(snp.multiply(snp.abs(y), rtol), atol))
    finite = snp.logical_and(snp.isfinite(x), snp.isfinite(y))
    ok = snp.where(finite, close, snp.equal(x, y))
    if equal_nan:
        ok = snp.logical_or(ok, snp.logical_and(snp.isnan(x), snp.isnan(y)))
    return apply(reduce_and_p, ok, tuple(range(ok.ndim)), False)


def array_equal(a1, a2, /, equal_nan=False):
    """True when both arrays have the same shape and equal elements (NumPy ``array_equal``).

    Args:
        a1, a2: arrays (no broadcasting: different shapes give False).
        equal_nan: treat NaN as equal to NaN.
    Returns:
        A 0-d bool Array.
    Raises:
        TypeError: dtypes that do not promote.
    """
    snp = _ns()
    x, y = operand(a1, "array_equal"), operand(a2, "array_equal")
    if tuple(x.shape) != tuple(y.shape):
        return const(False, dtypes.bool_)
    eq = snp.equal(x, y)
    if equal_nan and (dtypes.is_inexact(x.dtype) or dtypes.is_inexact(y.dtype)):
        eq = snp.logical_or(eq, snp.logical_and(snp.isnan(x), snp.isnan(y)))
    return apply(reduce_and_p, eq, tuple(range(eq.ndim)), False)
