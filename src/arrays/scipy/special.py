"""``starling.scipy.special``: SciPy's (and ``jax.scipy.special``'s) special functions.

Every function is elementwise with NumPy broadcasting (except ``logsumexp`` / ``softmax`` /
``log_softmax``, which reduce over axes), accepts arrays or Python scalars, promotes by JAX
rules (bool / integers to float32) and keeps the floating dtype. All are differentiable in
forward and reverse mode to every order where the maths allows (the exceptions raise
NotImplementedError: ``polygamma`` in ``n``, ``zeta`` in ``x``, third derivatives of
``gammainc`` / ``gammaincc`` in ``a``, second derivatives of ``betainc`` in ``a`` / ``b``),
batch under ``vmap`` and run inside ``compile``.

The primitives live in ``starling/arrays/ops/special*.py``, each with its method and source;
``starling.lax`` has JAX's spellings (``lgamma``, ``igamma``, ``erf_inv``, ``bessel_i0e``, ...).
"""
from __future__ import annotations

from ..numpy import (arctanh, equal, greater_equal, isinf, less, less_equal, log, log1p,
                     logical_and, logical_or, where)
from ..numpy import logsumexp  # noqa: F401  (SciPy's logsumexp(a, axis, b, keepdims, return_sign))
from ..ops.elementwise_family import promote_operands
from ..ops.arithmetic import multiply, negative, subtract
from ..ops.special import erf, erfc, erfcx, erfinv, log_ndtr, ndtr, ndtri  # noqa: F401
from ..ops.special_beta import betainc, betaln  # noqa: F401
from ..ops.special_beta_complement import betaincc  # noqa: F401
from ..ops.special_bessel import bessel_i0e as i0e, bessel_i1e as i1e  # noqa: F401
from ..ops.special_gamma import digamma, polygamma, zeta as _zeta
from ..ops.special_gamma import lgamma as gammaln  # noqa: F401
from ..ops.special_igamma import igamma as gammainc, igammac as gammaincc  # noqa: F401

__all__ = [
    "erf", "erfc", "erfinv", "erfcx", "ndtr", "ndtri", "log_ndtr", "gammaln", "digamma", "psi",
    "polygamma", "gammainc", "gammaincc", "betaln", "betainc", "betaincc", "zeta", "i0e", "i1e", "xlogy",
    "xlog1py", "entr", "logit", "expit", "logsumexp", "softmax", "log_softmax",
]

psi = digamma


def zeta(x, q=None):
    """Hurwitz zeta ``sum_{k >= 0} (k + q)**-x``; Riemann's zeta when ``q`` is None
    (``scipy.special.zeta(x, q=None)``).

    Args:
        x: array or Python scalar, the exponent (``x > 1`` for convergence); real dtype.
        q: None, or array / Python scalar broadcasting with ``x`` (``q > 0``).
    Returns:
        Array of the broadcast shape and the promoted floating dtype.
    Raises:
        TypeError: complex operands. ValueError: the shapes do not broadcast.

    Method and derivatives: see ``starling.lax.zeta`` (SciPy's Euler-Maclaurin summation;
    ``d/dq = -x zeta(x + 1, q)``; no derivative in ``x``).
    """
    return _zeta(x, 1.0 if q is None else q)


def _pair(op, x, y):
    return promote_operands(op, (x, y), "real_inexact")


def xlogy(x, y):
    """``x * log(y)``, defined as 0 where ``x == 0`` unless ``y`` is NaN (SciPy ``xlogy``).

    Args:
        x, y: arrays or Python scalars broadcasting to ``(*shape)``; real dtypes (promoted by
            JAX rules; bool / integers become float32).
    Returns:
        Array ``(*shape)`` of the promoted floating dtype.
    Raises:
        TypeError: complex operands. ValueError: the shapes do not broadcast.

    Derivatives are the partials of ``x log y``: ``d/dx = log(y)`` also at ``x == 0`` (where
    ``0 < y < inf``), ``d/dy = x / y``. Where ``x == 0`` and ``y`` is 0, negative or inf, ``y``
    is replaced by 1 before the log, so value and derivatives are 0 there (no NaN).
    """
    x, y = _pair("xlogy", x, y)
    bad = logical_and(equal(x, 0.0), logical_or(less_equal(y, 0.0), isinf(y)))
    return multiply(x, log(where(bad, 1.0, y)))


def xlog1py(x, y):
    """``x * log1p(y)``, defined as 0 where ``x == 0`` unless ``y`` is NaN (SciPy ``xlog1py``).

    Args:
        x, y: arrays or Python scalars broadcasting to ``(*shape)``; real dtypes (promoted by
            JAX rules; bool / integers become float32).
    Returns:
        Array ``(*shape)`` of the promoted floating dtype.
    Raises:
        TypeError: complex operands. ValueError: the shapes do not broadcast.

    Derivatives: ``d/dx = log1p(y)`` (also at ``x == 0``), ``d/dy = x / (1 + y)``; where
    ``x == 0`` and ``y <= -1`` or ``y == inf``, ``y`` is replaced by 0 first (value and
    derivatives 0 there).
    """
    x, y = _pair("xlog1py", x, y)
    bad = logical_and(equal(x, 0.0), logical_or(less_equal(y, -1.0), isinf(y)))
    return multiply(x, log1p(where(bad, 0.0, y)))


def entr(x):
    """Elementwise entropy term ``-x log(x)`` for ``x > 0``, 0 at ``x == 0``, ``-inf`` for
    ``x < 0`` (SciPy ``entr``).

    Args:
        x: array or Python scalar, shape ``(*shape)``; real dtype (bool / integers become
            float32).
    Returns:
        Array ``(*shape)``, the floating dtype.
    Raises:
        TypeError: complex input.

    Derivative ``-log(x) - 1`` (``inf`` at 0, NaN-free: 0 for ``x < 0``).
    """
    (x,) = promote_operands("entr", (x,), "real_inexact")
    return where(less(x, 0.0), -float("inf"), negative(xlogy(x, x)))


def logit(p):
    """Elementwise log-odds ``log(p / (1 - p))``, the inverse of ``expit`` (SciPy ``logit``).

    Args:
        p: array or Python scalar, shape ``(*shape)``; real dtype (bool / integers become
            float32). ``logit(0) == -inf``, ``logit(1) == inf``, NaN outside ``[0, 1]``.
    Returns:
        Array ``(*shape)``, the floating dtype.
    Raises:
        TypeError: complex input.

    Method: ``2 atanh(2p - 1)`` for ``1/4 <= p <= 3/4`` (``2p - 1`` is exact there, and no
    two logs cancel near ``p = 1/2``), ``log(p) - log1p(-p)`` outside (the terms differ in
    size: no cancellation, and ``1 - p`` is never rounded, so ``logit(1e-20)`` is accurate).
    Derivative ``1 / (p (1 - p))``.
    """
    (p,) = promote_operands("logit", (p,), "real_inexact")
    mid = logical_and(greater_equal(p, 0.25), less_equal(p, 0.75))
    centre = multiply(arctanh(subtract(multiply(where(mid, p, 0.5), 2.0), 1.0)), 2.0)
    return where(mid, centre, subtract(log(p), log1p(negative(p))))


def expit(x):
    """Elementwise logistic sigmoid ``1 / (1 + exp(-x))`` (SciPy ``expit``).

    Args:
        x: array or Python scalar, shape ``(*shape)``; real dtype (bool / integers become
            float32).
    Returns:
        Array ``(*shape)`` in ``[0, 1]``, the floating dtype.
    Raises:
        TypeError: complex input.

    The one implementation of ``starling.nn.functional.sigmoid`` (``exp(-|x|)`` never
    overflows; derivative ``s (1 - s)``).
    """
    from ...nn.functional import sigmoid   # nn sits above arrays: imported on use
    (x,) = promote_operands("expit", (x,), "real_inexact")
    return sigmoid(x)


def _all_axes(x, axis):
    return tuple(range(x.ndim)) if axis is None else axis


def softmax(x, axis=None):
    """``exp(x) / sum(exp(x), axis)``, computed with the max subtracted (SciPy ``softmax``:
    ``axis=None`` normalises over ALL entries).

    Args:
        x: array ``(*dims)``, real floating (bool / integers become float32).
        axis: None (every axis), an int or a tuple of ints.
    Returns:
        Array ``(*dims)`` of the floating dtype, summing to 1 over ``axis``.
    Raises:
        TypeError: complex input. ValueError / IndexError: an axis out of range.

    The one implementation of ``starling.nn.softmax``; a slice of only ``-inf`` gives NaN.
    """
    from ...nn.functional import _softmax   # nn sits above arrays: imported on use
    (x,) = promote_operands("softmax", (x,), "real_inexact")
    return _softmax(x, _all_axes(x, axis))


def log_softmax(x, axis=None):
    """``x - logsumexp(x, axis)`` (SciPy ``log_softmax``: ``axis=None`` over ALL entries).

    Args:
        x: array ``(*dims)``, real floating (bool / integers become float32).
        axis: None (every axis), an int or a tuple of ints.
    Returns:
        Array ``(*dims)`` of the floating dtype.
    Raises:
        TypeError: complex input. ValueError / IndexError: an axis out of range.

    The one implementation of ``starling.nn.log_softmax`` (the max entry's log-probability
    through ``log1p``, exact derivative).
    """
    from ...nn.functional import _log_softmax   # nn sits above arrays: imported on use
    (x,) = promote_operands("log_softmax", (x,), "real_inexact")
    return _log_softmax(x, _all_axes(x, axis))
