"""Finite differences and integration: diff, ediff1d, gradient, trapezoid, unwrap.

All are compositions of slicing, arithmetic, concatenation and cumsum, so they trace, stage,
vmap and differentiate through the rules of those primitives. Integer and bool inputs of
gradient / trapezoid / unwrap are promoted to the default float (JAX; NumPy gives float64).
"""
from __future__ import annotations

import math
import operator

from ...core import dtypes
from ..convert import operand
from .axes import normalize_axes, normalize_axis
from .elementwise_family import promote_operands
from .reductions import _ns
from .shape_lax import slice_in_dim

__all__ = ["diff", "ediff1d", "gradient", "trapezoid", "unwrap"]


def static_int(op, name, v):
    """``v`` as a Python int (a static argument); TypeError naming ``op`` otherwise."""
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{op}: {name} must be a Python int, got {type(v).__name__}") from None


def _sl(x, start, stop, axis):
    """``x[start:stop]`` along ``axis`` with Python slice semantics for negative bounds."""
    n = x.shape[axis]
    start, stop, _ = slice(start, stop).indices(n)
    return slice_in_dim(x, start, max(start, stop), axis=axis)


def _edge_broadcast(v, shape, axis):
    """A 0-d prepend / append value as a slab of ``shape`` with one entry along ``axis``."""
    if v.ndim:
        return v
    shape = list(shape)
    shape[axis] = 1
    return _ns().broadcast_to(v, tuple(shape))


def diff(a, /, n=1, axis=-1, prepend=None, append=None):
    """The ``n``-th discrete difference along ``axis`` (NumPy ``diff``).

    ``out[..., i, ...] = a[..., i + 1, ...] - a[..., i, ...]``, applied ``n`` times. Bool input
    gives ``a[i + 1] != a[i]`` (NumPy).

    Args:
        a: array of shape ``(*pre, m, *post)``, ``m`` along ``axis``; at least 1-D.
        n: static int >= 0: the number of times to difference (0 returns ``a``).
        axis: the axis (negative allowed).
        prepend, append: values joined to ``a`` along ``axis`` first; a scalar is broadcast to
            one entry along ``axis``, an array must match ``a`` elsewhere. Dtypes promote
            with ``a``'s (JAX rules, Python scalars weakly).
    Returns:
        Array of shape ``(*pre, max(m' - n, 0), *post)`` (``m'`` = ``m`` plus the joined
        entries) and the promoted dtype.
    Raises:
        ValueError: 0-d ``a``, negative ``n``, shapes that do not join.
        TypeError: non-int ``n``; dtypes that do not promote. AxisError: bad ``axis``.
    """
    snp = _ns()
    n = static_int("diff", "n", n)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {n}")
    a = operand(a, "diff")
    if a.ndim == 0:
        raise ValueError("diff: the input must be at least 1-D, got a 0-d array")
    axis = normalize_axis("diff", axis, a.ndim)
    if prepend is not None or append is not None:
        given = [v for v in (prepend, append) if v is not None]
        a, *given = promote_operands("diff", [a] + given)
        given = [_edge_broadcast(operand(v, "diff"), a.shape, axis) for v in given]
        pre = [given.pop(0)] if prepend is not None else []
        a = snp.concatenate(pre + [a] + given, axis=axis)
    for _ in range(n):
        if a.shape[axis] == 0:
            break
        hi, lo = _sl(a, 1, None, axis), _sl(a, None, -1, axis)
        a = snp.not_equal(hi, lo) if a.dtype == dtypes.bool_ else snp.subtract(hi, lo)
    return a


def ediff1d(ary, /, to_end=None, to_begin=None):
    """Differences between consecutive elements of the flattened ``ary`` (NumPy ``ediff1d``).

    Args:
        ary: array of any shape, numeric dtype; flattened to ``(n,)``.
        to_end, to_begin: optional values (flattened) appended / prepended to the differences;
            they are cast to ``ary``'s dtype, which must be a same-kind cast (NumPy).
    Returns:
        1-D array ``(len(to_begin) + max(n - 1, 0) + len(to_end),)`` of ``ary``'s dtype.
    Raises:
        TypeError: bool ``ary``; ``to_begin`` / ``to_end`` not same-kind castable to its dtype.
    """
    snp = _ns()
    a = snp.reshape(operand(ary, "ediff1d"), (-1,))
    if a.dtype == dtypes.bool_:
        raise TypeError("ediff1d: bool input has no subtraction; cast it to an integer dtype")
    parts = [snp.subtract(a[1:], a[:-1])]
    for name, v, at_end in (("to_begin", to_begin, False), ("to_end", to_end, True)):
        if v is None:
            continue
        v = snp.reshape(snp.asarray(v) if type(v) in (int, float, complex, bool, list, tuple)
                        else operand(v, "ediff1d"), (-1,))
        if not snp.can_cast(v.dtype, a.dtype, "same_kind"):
            raise TypeError(f"ediff1d: {name} of dtype {v.dtype} cannot be cast to the input "
                            f"dtype {a.dtype} (a same-kind cast is required)")
        v = v.astype(a.dtype)
        parts = parts + [v] if at_end else [v] + parts
    return parts[0] if len(parts) == 1 else snp.concatenate(parts)


def _spacings(op, f, varargs, axes):
    """One spacing per axis: ``(kind, value)`` with kind "h" (0-d step) or "x" (coordinates)."""
    snp = _ns()
    if not varargs:
        return [("h", None)] * len(axes)
    def conv(v):
        if type(v) in (int, float):
            return v
        return operand(snp.asarray(v) if isinstance(v, (list, tuple)) else v, op)

    varargs = [conv(v) for v in varargs]
    if len(varargs) == 1 and (type(varargs[0]) in (int, float) or varargs[0].ndim == 0):
        varargs = varargs * len(axes)
    if len(varargs) != len(axes):
        raise TypeError(f"{op}: expected 0, 1 or {len(axes)} spacing arguments (one per axis), "
                        f"got {len(varargs)}")
    out = []
    for ax, v in zip(axes, varargs):
        nd = 0 if type(v) in (int, float) else v.ndim
        if nd == 0:
            out.append(("h", v))
        elif nd == 1:
            if v.shape[0] != f.shape[ax]:
                raise ValueError(f"{op}: 1-D coordinates must match the length {f.shape[ax]} of "
                                 f"axis {ax}, got shape {tuple(v.shape)}")
            out.append(("x", v))
        else:
            raise ValueError(f"{op}: spacings must be scalars or 1-D coordinate arrays, got "
                             f"shape {tuple(v.shape)}")
    return out


def _along(v, ndim, axis):
    """A 1-D ``v`` shaped to broadcast along ``axis`` of an ``ndim``-D array."""
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return _ns().reshape(v, tuple(shape))


def _gradient_axis(f, axis, kind, h, edge_order):
    snp = _ns()
    nd = f.ndim
    at = lambda s, e: _sl(f, s, e, axis)  # noqa: E731
    f0, f1, f2 = at(0, 1), at(1, 2), at(2, 3)
    l1, l2, l3 = at(-1, None), at(-2, -1), at(-3, -2)
    if kind == "h":
        h = 1.0 if h is None else h
        inner = (at(2, None) - at(None, -2)) / (2.0 * h) if f.shape[axis] > 2 else None
        if edge_order == 1:
            first, last = (f1 - f0) / h, (l1 - l2) / h
        else:
            first = (-1.5 * f0 + 2.0 * f1 - 0.5 * f2) / h
            last = (0.5 * l3 - 2.0 * l2 + 1.5 * l1) / h
    else:
        # Second-order differences on a non-uniform grid: the three-point Lagrange derivative
        # (Fornberg 1988, "Generation of finite difference formulas on arbitrarily spaced grids").
        x = h.astype(f.dtype) if h.dtype != f.dtype else h
        dx = snp.diff(x)
        inner = None
        if f.shape[axis] > 2:
            d1, d2 = _along(dx[:-1], nd, axis), _along(dx[1:], nd, axis)
            inner = ((-d2 / (d1 * (d1 + d2))) * at(None, -2) + ((d2 - d1) / (d1 * d2)) * at(1, -1)
                     + (d1 / (d2 * (d1 + d2))) * at(2, None))
        if edge_order == 1:
            first, last = (f1 - f0) / dx[0], (l1 - l2) / dx[-1]
        else:
            d1, d2 = dx[0], dx[1]
            first = (-(2.0 * d1 + d2) / (d1 * (d1 + d2)) * f0 + (d1 + d2) / (d1 * d2) * f1
                     - d1 / (d2 * (d1 + d2)) * f2)
            d1, d2 = dx[-2], dx[-1]
            last = (d2 / (d1 * (d1 + d2)) * l3 - (d2 + d1) / (d1 * d2) * l2
                    + (2.0 * d2 + d1) / (d2 * (d1 + d2)) * l1)
    parts = [first] + ([inner] if inner is not None else []) + [last]
    return snp.concatenate(parts, axis=axis)


def gradient(f, /, *varargs, axis=None, edge_order=1):
    """Gradient of sampled values by finite differences (NumPy ``gradient``).

    Interior points use second-order central differences (on non-uniform grids the three-point
    formula of Fornberg 1988); the two boundary points use first- or second-order one-sided
    differences (``edge_order``). Along every axis the result has the input's length.

    Args:
        f: array ``(*dims)``, numeric; integers / bool are promoted to the default float.
        *varargs: spacings: none (unit spacing), one scalar for every axis, or one per axis in
            ``axis``, each a scalar step or a 1-D coordinate array of that axis's length
            (need not be uniform; traced values allowed).
        axis: None (all axes), an int or a tuple of ints.
        edge_order: 1 or 2.
    Returns:
        One array of ``f``'s shape per axis (a tuple; a single array when one axis is asked
        for), of the promoted inexact dtype of ``f`` and the spacings.
    Raises:
        ValueError: ``edge_order`` not 1 or 2; an axis shorter than ``edge_order + 1``;
            coordinates of the wrong length or rank. TypeError: wrong number of spacings.
        AxisError: bad ``axis``.
    """
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    f = operand(f, "gradient")
    if f.ndim == 0:
        raise ValueError("gradient: the input must be at least 1-D, got a 0-d array")
    axes = tuple(range(f.ndim)) if axis is None else normalize_axes("gradient", axis, f.ndim)
    specs = _spacings("gradient", f, varargs, axes)
    arrays = [v for _, v in specs if v is not None and type(v) not in (int, float)]
    f, *_ = promote_operands("gradient", [f] + arrays, "inexact")
    out = []
    for ax, (kind, h) in zip(axes, specs):
        if f.shape[ax] < edge_order + 1:
            raise ValueError(f"gradient: axis {ax} has {f.shape[ax]} elements; at least "
                             f"edge_order + 1 = {edge_order + 1} are required")
        if h is not None and type(h) not in (int, float) and h.dtype != f.dtype:
            h = h.astype(f.dtype) if kind == "h" else h
        if kind == "h" and h is not None and type(h) in (int, float):
            h = float(h)
        out.append(_gradient_axis(f, ax, kind, h, edge_order))
    return out[0] if len(out) == 1 else tuple(out)


def trapezoid(y, /, x=None, dx=1.0, axis=-1):
    """Integral of ``y`` along ``axis`` by the composite trapezoidal rule (NumPy ``trapezoid``).

    ``sum((y[i + 1] + y[i]) / 2 * d[i])`` with ``d = diff(x)`` or ``d = dx``.

    Args:
        y: array ``(*pre, m, *post)``, numeric; integers / bool promote to the default float.
        x: optional sample points: 1-D ``(m,)`` or of ``y``'s shape. Overrides ``dx``.
        dx: the spacing when ``x`` is None (a scalar, possibly traced).
        axis: the axis to integrate along.
    Returns:
        Array ``(*pre, *post)`` of the promoted inexact dtype; 0 for ``m < 2``.
    Raises:
        ValueError: ``x`` of a shape that matches neither form. AxisError: bad ``axis``.
    """
    snp = _ns()
    y = operand(y, "trapezoid")
    if y.ndim == 0:
        raise ValueError("trapezoid: y must be at least 1-D, got a 0-d array")
    axis = normalize_axis("trapezoid", axis, y.ndim)
    if x is None:
        y, d = promote_operands("trapezoid", [y, dx], "inexact")
    else:
        x = operand(snp.asarray(x) if isinstance(x, (list, tuple)) else x, "trapezoid")
        y, x = promote_operands("trapezoid", [y, x], "inexact")
        if x.ndim == 1 and x.shape[0] == y.shape[axis]:
            d = _along(snp.diff(x), y.ndim, axis)
        elif x.ndim == y.ndim:
            d = snp.diff(x, axis=axis)
        else:
            raise ValueError(f"trapezoid: x must be 1-D of length {y.shape[axis]} or have y's "
                             f"rank {y.ndim}, got shape {tuple(x.shape)}")
    mid = (_sl(y, 1, None, axis) + _sl(y, None, -1, axis)) / 2.0
    return snp.sum(d * mid, axis=axis)


def unwrap(p, /, discont=None, axis=-1, *, period=2 * math.pi):
    """Unwraps a phase signal: jumps larger than ``discont`` along ``axis`` are replaced by
    their value modulo ``period`` (NumPy ``unwrap``).

    Each difference ``d`` is mapped into ``[-period/2, period/2)`` (``period/2`` for positive
    ``d`` on the boundary), and the cumulative sum of the corrections is added; corrections
    of differences with ``|d| < discont`` are dropped.

    Args:
        p: array ``(*dims)``, real; integers / bool promote to the default float (JAX; NumPy
            keeps integer arithmetic for integer input and period).
        discont: the largest jump left alone; default and values below ``period / 2`` act as
            ``period / 2``.
        axis: the axis (negative allowed).
        period: the period of the signal (default 2 pi).
    Returns:
        Array of ``p``'s shape and promoted float dtype.
    Raises:
        TypeError: complex ``p``. ValueError: 0-d ``p``. AxisError: bad ``axis``.
    """
    snp = _ns()
    p = operand(p, "unwrap")
    if p.ndim == 0:
        raise ValueError("unwrap: p must be at least 1-D, got a 0-d array")
    axis = normalize_axis("unwrap", axis, p.ndim)
    p, = promote_operands("unwrap", [p], "real_inexact")
    if p.shape[axis] < 2:
        return p
    half = period / 2
    discont = half if discont is None else snp.maximum(discont, half)
    dd = snp.diff(p, axis=axis)
    ddmod = snp.remainder(dd + half, period) - half
    ddmod = snp.where((ddmod == -half) & (dd > 0), half, ddmod)
    correct = snp.where(snp.abs(dd) < discont, 0, ddmod - dd).astype(p.dtype)
    rest = _sl(p, 1, None, axis) + snp.cumsum(correct, axis=axis)
    return snp.concatenate([_sl(p, 0, 1, axis), rest], axis=axis)

