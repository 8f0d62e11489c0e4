"""``starling.scipy.integrate``: integration of sampled functions (SciPy's ``trapezoid`` and
``cumulative_trapezoid``; JAX's ``jax.scipy.integrate.trapezoid``)."""
from __future__ import annotations

from .. import numpy as snp
from ..convert import operand
from ..ops.axes import normalize_axis
from ..ops.elementwise_family import promote_operands

__all__ = ["trapezoid", "cumulative_trapezoid"]


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """Integral of ``y`` along ``axis`` by the composite trapezoidal rule
    (``scipy.integrate.trapezoid``): ``sum((y[i + 1] + y[i]) / 2 * d[i])`` with
    ``d = diff(x)`` or ``d = dx``.

    Args:
        y: array ``(*pre, m, *post)``, numeric; integers / bool promote to the default float.
        x: optional sample points: 1-D ``(m,)`` or of ``y``'s shape. Overrides ``dx``.
        dx: the spacing when ``x`` is None (a scalar, possibly traced).
        axis: the axis to integrate along.
    Returns:
        Array ``(*pre, *post)`` of the promoted inexact dtype; 0 for ``m < 2``.
    Raises:
        ValueError: ``x`` of a shape that matches neither form; 0-d ``y``. AxisError: bad
            ``axis``.

    The one implementation is ``starling.numpy.trapezoid``; differentiable in ``y``, ``x`` and
    ``dx``.
    """
    return snp.trapezoid(y, x=x, dx=dx, axis=axis)


def cumulative_trapezoid(y, x=None, dx=1.0, axis=-1, initial=None):
    """Running integral of ``y`` along ``axis`` by the trapezoidal rule
    (``scipy.integrate.cumulative_trapezoid``).

    Args:
        y: array ``(*pre, m, *post)``, numeric; integers / bool promote to the default float.
        x: optional sample points: 1-D ``(m,)`` or of ``y``'s shape. Overrides ``dx``.
        dx: the spacing when ``x`` is None (a scalar, possibly traced).
        axis: the axis to integrate along.
        initial: None (the result has ``m - 1`` entries along ``axis``) or 0 (a leading 0 is
            inserted: ``m`` entries). SciPy accepts no other value.
    Returns:
        Array ``(*pre, m - 1, *post)`` (or ``m`` with ``initial=0``), promoted inexact dtype;
        entry ``i`` is the integral from the first sample to sample ``i + 1``.
    Raises:
        ValueError: ``initial`` not None / 0; ``x`` of a wrong shape; 0-d ``y``.
        AxisError: bad ``axis``.

    Method: the areas ``(y[i] + y[i + 1]) / 2 * d[i]`` and a cumulative sum; differentiable
    in ``y``, ``x`` and ``dx``.
    """
    op = "cumulative_trapezoid"
    if initial is not None and initial != 0:
        raise ValueError(f"{op}: initial must be None or 0 (as SciPy), got {initial!r}")
    y = operand(y, op)
    if y.ndim == 0:
        raise ValueError(f"{op}: y must be at least 1-D, got a 0-d array")
    axis = normalize_axis(op, axis, y.ndim)
    m = y.shape[axis]
    if x is None:
        y, d = promote_operands(op, [y, dx], "inexact")
    else:
        y, x = promote_operands(op, [y, operand(x, op)], "inexact")
        if x.ndim == 1 and x.shape[0] == m:
            d = snp.reshape(snp.diff(x), [m - 1 if a == axis else 1 for a in range(y.ndim)])
        elif x.shape == y.shape:
            d = snp.diff(x, axis=axis)
        else:
            raise ValueError(f"{op}: x must be 1-D of length {m} or have y's shape "
                             f"{tuple(y.shape)}, got shape {tuple(x.shape)}")
    lo = snp.take(y, snp.arange(0, max(m - 1, 0)), axis=axis)
    hi = snp.take(y, snp.arange(1, max(m, 1)), axis=axis)
    out = snp.cumsum((lo + hi) / 2.0 * d, axis=axis)
    if initial is None:
        return out
    pad = [(1, 0) if a == axis else (0, 0) for a in range(y.ndim)]
    return snp.pad(out, pad)
