"""Special functions as elementwise primitives: ``erf`` and ``erfc``.

Both are real-floating elementwise ops (integers and bool are promoted to float32, complex raises
TypeError). The NumPy implementation evaluates W. J. Cody's rational Chebyshev approximations in
float64 and rounds once to the input dtype, so every float dtype gets a correctly rounded or
1-ulp result:

    W. J. Cody, "Rational Chebyshev approximations for the error function",
    Math. Comp. 23 (1969) 631-637 (the coefficients of his CALERF routine; relative error
    below 1e-16 on each of the intervals |x| <= 0.46875, 0.46875 < |x| <= 4, |x| > 4).

Derivatives: ``d erf(x) = 2/sqrt(pi) exp(-x^2)`` and ``d erfc = -d erf`` (exact, not the
derivative of the approximation). Batching comes from the elementwise family. As primitives,
code generators can render them with the C library's ``erf`` / ``erfc``.

These are imported by ``starling.nn.functional`` (gelu); they are not (yet) in the
``starling.numpy`` namespace.
"""
from __future__ import annotations

import math

import numpy as np

from ...core import casting
from .arithmetic import multiply, negative, square
from .math_basic import exp
from .elementwise_docs import unary_doc
from .elementwise_family import unary
from .rules import defjvp

__all__ = ["erf", "erfc"]

# Cody (1969), CALERF: erf on |x| <= 0.46875 (A / B, in x^2), erfc on 0.46875 < |x| <= 4
# (C / D, in |x|), erfc on |x| > 4 (P / Q, in 1 / x^2). Leading term last, as Cody lists them.
_A = (3.1611237438705656, 113.864154151050156, 377.485237685302021, 3209.37758913846947,
      0.185777706184603153)
_B = (23.6012909523441209, 244.024637934444173, 1282.61652607737228, 2844.23683343917062)
_C = (0.564188496988670089, 8.88314979438837594, 66.1191906371416295, 298.635138197400131,
      881.95222124176909, 1712.04761263407058, 2051.07837782607147, 1230.33935479799725,
      2.15311535474403846e-8)
_D = (15.7449261107098347, 117.693950891312499, 537.181101862009858, 1621.38957456669019,
      3290.79923573345963, 4362.61909014324716, 3439.36767414372164, 1230.33935480374942)
_P = (0.305326634961232344, 0.360344899949804439, 0.125781726111229246, 0.0160837851487422766,
      6.58749161529837803e-4, 0.0163153871373020978)
_Q = (2.56852019228982242, 1.87295284992346047, 0.527905102951428412, 0.0605183413124413191,
      0.00233520497626869185)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _nested(x, num, den, lead):
    # Cody's nested evaluation: ((lead x + n0) x + n1) x ... and ((x + d0) x + d1) x ...
    xnum = lead * x
    xden = x
    for a, b in zip(num, den):
        xnum = (xnum + a) * x
        xden = (xden + b) * x
    return xnum, xden


def _exp_neg_sq(y):
    # exp(-y^2) without the rounding error of y^2: y = t + d with t = floor(16 y) / 16 exact.
    t = np.floor(y * 16.0) / 16.0
    return np.exp(-t * t) * np.exp(-(y - t) * (y + t))


def _parts(x):
    """(erf on the small interval, erfc(|x|) elsewhere, |x| <= 0.46875 mask) in float64."""
    y = np.minimum(np.abs(x), 30.0)  # erfc(30) underflows to 0; avoids inf / inf below
    ysq = y * y
    num, den = _nested(ysq, _A[:3], _B[:3], _A[4])
    small = x * (num + _A[3]) / (den + _B[3])
    num, den = _nested(y, _C[:7], _D[:7], _C[8])
    mid = (num + _C[7]) / (den + _D[7])
    z = 1.0 / np.maximum(ysq, 16.0)
    num, den = _nested(z, _P[:4], _Q[:4], _P[5])
    tail = (_INV_SQRT_PI - z * (num + _P[4]) / (den + _Q[4])) / np.maximum(y, 4.0)
    big = _exp_neg_sq(y) * np.where(y <= 4.0, mid, tail)
    return small, big, y <= 0.46875


def _erf_np(x):
    xd = np.asarray(x, np.float64)
    small, big, is_small = _parts(xd)
    out = np.where(is_small, small, np.copysign(1.0 - big, xd))
    out = np.where(np.isnan(xd), xd, out)
    return casting.astype(out, np.asarray(x).dtype)


def _erfc_np(x):
    xd = np.asarray(x, np.float64)
    small, big, is_small = _parts(xd)
    out = np.where(is_small, 1.0 - small, np.where(xd < 0, 2.0 - big, big))
    out = np.where(np.isnan(xd), xd, out)
    return casting.astype(out, np.asarray(x).dtype)


erf = unary("erf", _erf_np, domain="real_inexact", doc=unary_doc(
    "Elementwise error function ``erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt``.",
    "real_inexact", notes="Cody's rational Chebyshev approximations (Math. Comp. 23, 1969), "
    "evaluated in float64 and rounded once. ``erf(+-inf) == +-1``; nan propagates."))
erfc = unary("erfc", _erfc_np, domain="real_inexact", doc=unary_doc(
    "Elementwise complementary error function ``erfc(x) = 1 - erf(x)``, accurate where "
    "``erf(x)`` is close to 1.", "real_inexact", notes="Cody's rational Chebyshev "
    "approximations (Math. Comp. 23, 1969), evaluated in float64 and rounded once. "
    "``erfc(-inf) == 2``, ``erfc(inf) == 0``; nan propagates."))


def _d_erf(x):
    return multiply(exp(negative(square(x))), _TWO_OVER_SQRT_PI)


defjvp(erf.primitive, lambda g, ans, x: multiply(g, _d_erf(x)))
defjvp(erfc.primitive, lambda g, ans, x: negative(multiply(g, _d_erf(x))))
