"""Special functions as elementwise primitives: the error-function family (``erf``, ``erfc``,
``erfinv``, ``erfcx``, ``ndtr``, ``ndtri``, ``log_ndtr``) and the helpers the other special-function
files (special_gamma.py, special_igamma.py, special_beta.py, special_bessel.py) share.

All are real-floating elementwise ops (integers and bool are promoted to float32, complex raises
TypeError). The NumPy implementation evaluates W. J. Cody's rational Chebyshev approximations in
float64 and rounds once to the input dtype, so every float dtype gets a correctly rounded or
1-ulp result:

    W. J. Cody, "Rational Chebyshev approximations for the error function",
    Math. Comp. 23 (1969) 631-637 (the coefficients of his CALERF routine; relative error
    below 1e-16 on each of the intervals |x| <= 0.46875, 0.46875 < |x| <= 4, |x| > 4).

Derivatives: ``d erf(x) = 2/sqrt(pi) exp(-x^2)`` and ``d erfc = -d erf`` (exact, not the
derivative of the approximation). Batching comes from the elementwise family. As primitives,
code generators can render them with the C library's ``erf`` / ``erfc``.

The public names are ``starling.scipy.special`` (and JAX's ``starling.lax`` spellings);
``starling.nn.functional`` imports ``erf`` / ``erfc`` (gelu), ``starling.random`` ``ndtr`` /
``ndtri`` (truncated_normal).

Functions whose NumPy implementation is SciPy's (``in_float64``) evaluate it in float64 and
round once to the operands' dtype: float32 results are then correctly rounded whenever SciPy's
float64 value is within half a float32 ulp, and float16 / bfloat16 / float8 results round once
(never through float32). The cpp backend runs them through NumPy (no C++ formula yet), so a
compiled program gives the eager values bit for bit.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as _sc

from ...core import casting, dtypes, scalar as S
from .arithmetic import divide, multiply, negative, square, subtract
from .math_basic import exp
from .elementwise_docs import ACCEPTS, entry, fill, unary_doc
from .elementwise_family import nary, unary
from .rules import defjvp

__all__ = ["erf", "erfc", "erfinv", "erfcx", "ndtr", "ndtri", "log_ndtr"]

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


erf = unary("erf", _erf_np, formula=S.math1("erf"), domain="real_inexact", doc=unary_doc(
    "Elementwise error function ``erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt``.",
    "real_inexact", notes="Cody's rational Chebyshev approximations (Math. Comp. 23, 1969), "
    "evaluated in float64 and rounded once. ``erf(+-inf) == +-1``; nan propagates."))
erfc = unary("erfc", _erfc_np, formula=S.math1("erfc"), domain="real_inexact", doc=unary_doc(
    "Elementwise complementary error function ``erfc(x) = 1 - erf(x)``, accurate where "
    "``erf(x)`` is close to 1.", "real_inexact", notes="Cody's rational Chebyshev "
    "approximations (Math. Comp. 23, 1969), evaluated in float64 and rounded once. "
    "``erfc(-inf) == 2``, ``erfc(inf) == 0``; nan propagates."))


def _d_erf(x):
    return multiply(exp(negative(square(x))), _TWO_OVER_SQRT_PI)


defjvp(erf.primitive, lambda g, ans, x: multiply(g, _d_erf(x)))
defjvp(erfc.primitive, lambda g, ans, x: negative(multiply(g, _d_erf(x))))


# ---- shared by the special-function files -------------------------------------------------------

def in_float64(fn):
    """A NumPy implementation that evaluates ``fn`` (a float64 SciPy / NumPy function of
    ``nin`` arrays) in float64 and rounds the result once to the first operand's dtype (all
    operands share it: the elementwise family promotes first)."""
    def impl(*xs):
        dt = np.asarray(xs[0]).dtype
        out = fn(*[casting.astype(x, dtypes.float64) for x in xs])
        return casting.astype(np.asarray(out, np.float64), dt)
    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


def special_doc(summary, args, *, method, notes=""):
    """Google-style docstring of a real-floating elementwise special function.

    Args:
        summary: first paragraph (str).
        args: ``[(name, description)]`` of the operands, in order.
        method: the numerical method and its source (str, one paragraph).
        notes: special values, derivatives (str, one paragraph).
    """
    many = len(args) > 1
    shape = "shapes broadcasting to ``(*shape)``" if many else "shape ``(*shape)``"
    text = fill(summary) + "\n\nArgs:\n"
    for name, desc in args:
        text += entry(f"{name}: ", f"array or Python scalar of {shape}; {desc}")
    text += "Returns:\n" + entry("", "Array of shape ``(*shape)`` and the (promoted) floating "
                                      "dtype.")
    text += "Raises:\n" + entry("TypeError: ", "complex operands, or dtypes without a "
                                                "promotion (the message names the op).")
    if many:
        text += entry("ValueError: ", "the shapes do not broadcast (the message names the op "
                                      "and the shapes).")
    dtype_rule = "Dtypes: " + ("operands promote by JAX rules to one dtype; " if many else "") + \
        ACCEPTS["real_inexact"] + "."
    text += "\n" + fill(dtype_rule) + "\n\n" + fill("Method: " + method) + "\n"
    if notes:
        text += "\n" + fill(notes) + "\n"
    return text


def special_op(name, fn, args, *, summary, method, notes=""):
    """Declares a real-floating elementwise primitive computed by ``in_float64(fn)`` and returns
    its public wrapper (``.primitive`` set); ``args`` as in ``special_doc``."""
    doc = special_doc(summary, args, method=method, notes=notes)
    impl = in_float64(fn)
    if len(args) == 1:
        return unary(name, impl, domain="real_inexact", doc=doc)
    return nary(name, impl, len(args), domain="real_inexact", doc=doc)


def not_differentiable(op, arg):
    """A JVP function (for ``defjvp``) for an operand the op has no derivative for: raises
    NotImplementedError naming the op and the operand, never a silent zero."""
    def fn(g, ans, *args, **params):
        raise NotImplementedError(f"{op}: the derivative with respect to {arg} is not "
                                  f"implemented; differentiate with respect to the other "
                                  f"operands only (hold {arg} fixed, e.g. with stop_gradient)")
    return fn


# ---- erfinv, erfcx, the normal distribution -----------------------------------------------------
_SQRT_PI_2 = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT_HALF_PI = math.sqrt(math.pi / 2.0)
_SQRT_HALF = math.sqrt(0.5)

erfinv = special_op(
    "erfinv", _sc.erfinv, [("x", "in ``[-1, 1]``.")],
    summary="Elementwise inverse error function: ``erf(erfinv(x)) == x``.",
    method="SciPy's ``erfinv`` (Boost's rational approximations in float64), rounded once.",
    notes="``erfinv(+-1) == +-inf``; NaN outside ``[-1, 1]``. Derivative "
          "``sqrt(pi) / 2 * exp(erfinv(x)**2)``.")
erfcx = special_op(
    "erfcx", _sc.erfcx, [("x", "any real value.")],
    summary="Elementwise scaled complementary error function ``erfcx(x) = exp(x**2) erfc(x)``, "
            "finite where ``erfc`` underflows (``erfcx(x) ~ 1 / (x sqrt(pi))`` for large x).",
    method="SciPy's ``erfcx`` (S. G. Johnson's Faddeeva package: Chebyshev fits on "
           "subintervals and a continued fraction for large x), rounded once.",
    notes="``erfcx(inf) == 0``; ``erfcx(x)`` overflows to inf for ``x < -26.6`` (float64). "
          "Derivative ``2 x erfcx(x) - 2 / sqrt(pi)``.")


def _ndtri_np(p):
    """Wichura's AS 241 PPND16 in float64: a degree-7 rational function in three regions
    (``|p - 1/2| <= 0.425``; ``r = sqrt(-log min(p, 1-p)) <= 5``; ``r > 5``)."""
    p = np.asarray(p, np.float64)
    q = p - 0.5
    central = q * _poly(0.180625 - q * q, _AS241_A) / _poly(0.180625 - q * q, _AS241_B)
    r = np.sqrt(-np.log(np.maximum(np.where(q < 0, p, 1.0 - p), 1e-300)))
    near = _poly(r - 1.6, _AS241_C) / _poly(r - 1.6, _AS241_D)
    far = _poly(r - 5.0, _AS241_E) / _poly(r - 5.0, _AS241_F)
    tail = np.where(r <= 5.0, near, far)
    out = np.where(np.abs(q) <= 0.425, central, np.where(q < 0, -tail, tail))
    out = np.where(p <= 0.0, -np.inf, np.where(p >= 1.0, np.inf, out))
    return np.where((p < 0.0) | (p > 1.0) | np.isnan(p), np.nan, out)


def _poly(x, coeffs):
    acc = np.zeros_like(x) + coeffs[-1]
    for c in coeffs[-2::-1]:
        acc = acc * x + c
    return acc


# M. J. Wichura, "Algorithm AS 241: The percentage points of the normal distribution", Applied
# Statistics 37 (1988) 477-484, PPND16 (relative error ~1e-16); coefficients in increasing degree.
_AS241_A = (3.3871328727963666080, 1.3314166789178437745e2, 1.9715909503065514427e3,
            1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
            3.3430575583588128105e4, 2.5090809287301226727e3)
_AS241_B = (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
            2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
            5.2264952788528545610e3)
_AS241_C = (1.42343711074968357734, 4.63033784615654529590, 5.76949722146069140550,
            3.64784832476320460504, 1.27045825245236838258, 2.41780725177450611770e-1,
            2.27238449892691845833e-2, 7.74545014278341407640e-4)
_AS241_D = (1.0, 2.05319162663775882187, 1.67638483018380384940, 6.89767334985100004550e-1,
            1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
            1.05075007164441684324e-9)
_AS241_E = (6.65790464350110377720, 5.46378491116411436990, 1.78482653991729133580,
            2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
            2.71155556874348757815e-5, 2.01033439929228813265e-7)
_AS241_F = (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1,
            1.48753612908506148525e-2, 7.86869131145613259100e-4, 1.84631831751005468180e-5,
            1.42151175831644588870e-7, 2.04426310338993978564e-15)

ndtri = special_op(
    "ndtri", _ndtri_np, [("p", "a probability in ``[0, 1]``.")],
    summary="Elementwise inverse of the standard normal CDF: ``ndtr(ndtri(p)) == p``.",
    method="M. J. Wichura, \"Algorithm AS 241: The percentage points of the normal "
           "distribution\", Applied Statistics 37 (1988) 477-484, PPND16 (relative error about "
           "1e-16), evaluated in float64 and rounded once.",
    notes="``ndtri(0) == -inf``, ``ndtri(1) == inf``; NaN outside ``[0, 1]``. Derivative "
          "``sqrt(2 pi) exp(ndtri(p)**2 / 2)``.")
log_ndtr = special_op(
    "log_ndtr", _sc.log_ndtr, [("x", "any real value.")],
    summary="Elementwise log of the standard normal CDF, ``log(ndtr(x))``, accurate in both tails "
            "(``log_ndtr(-40) == -804.6...``, ``log_ndtr(10) == -7.6e-24``).",
    method="SciPy's ``log_ndtr`` (``log(erfcx(-x / sqrt 2) / 2) - x**2 / 2`` for negative x, "
           "``log1p(-ndtr(-x))`` above), rounded once.",
    notes="``log_ndtr(-inf) == -inf``, ``log_ndtr(inf) == 0``. Derivative ``pdf(x) / cdf(x)`` "
          "computed as ``1 / (sqrt(pi / 2) erfcx(-x / sqrt 2))``: no cancellation in either "
          "tail (it tends to ``-x`` for ``x -> -inf``, to 0 for ``x -> inf``).")
_SQRT_HALF_LO = -4.833646656726457e-17   # sqrt(1/2) - _SQRT_HALF (the double's error)


def _split(v):
    # Veltkamp's split: v == hi + lo exactly, each with at most 26 significant bits
    t = v * 134217729.0   # 2**27 + 1
    hi = t - (t - v)
    return hi, v - hi


def _ndtr_np(x):
    """``erfc(-x / sqrt 2) / 2`` with ``x / sqrt 2 = z + dz`` to double-double precision (Dekker's
    exact product and the error of sqrt(1/2)'s double), and the first-order correction
    ``erfc(-z - dz) = erfc(-z) + dz * 2/sqrt(pi) exp(-z**2)``: no ``x**2``-ulp loss in the tail."""
    z = x * _SQRT_HALF
    with np.errstate(invalid="ignore", over="ignore"):
        xh, xl = _split(np.where(np.isfinite(x) & (np.abs(x) < 1e300), x, 0.0))
        ch, cl = _split(np.float64(_SQRT_HALF))
        dz = ((xh * ch - z) + xh * cl + xl * ch) + xl * cl + x * _SQRT_HALF_LO
        corr = dz * _TWO_OVER_SQRT_PI * _exp_neg_sq(np.minimum(np.abs(z), 30.0))
    out = (_erfc_np(-z) + np.where(np.isfinite(corr), corr, 0.0)) * 0.5
    return np.where(np.isnan(x), x, out)


ndtr = special_op(
    "ndtr", _ndtr_np, [("x", "any real value.")],
    summary="Elementwise standard normal CDF ``ndtr(x) = (1 + erf(x / sqrt 2)) / 2``.",
    method="``erfc(-x / sqrt 2) / 2`` with Cody's erfc (see ``erfc``) in float64, rounded once, "
           "where ``x / sqrt 2`` is carried to double-double precision (Dekker's exact product) "
           "and its low part enters through the first-order correction ``dz * 2/sqrt(pi) "
           "exp(-z**2)``: full relative precision in the lower tail (``ndtr(-37) == 5.7e-300``; "
           "Cephes / SciPy lose about ``x**2`` ulps there to the rounding of ``x / sqrt 2``).",
    notes="``ndtr(-inf) == 0``, ``ndtr(inf) == 1``. Derivative: the normal density "
          "``exp(-x**2 / 2) / sqrt(2 pi)``.")


defjvp(ndtr.primitive, lambda g, ans, x: multiply(
    g, divide(exp(multiply(square(x), -0.5)), _SQRT_2PI)))
defjvp(erfinv.primitive, lambda g, ans, x: multiply(g, multiply(exp(square(ans)), _SQRT_PI_2)))
defjvp(erfcx.primitive, lambda g, ans, x: multiply(
    g, subtract(multiply(2.0, multiply(x, ans)), _TWO_OVER_SQRT_PI)))
defjvp(ndtri.primitive, lambda g, ans, p: multiply(
    g, multiply(exp(multiply(square(ans), 0.5)), _SQRT_2PI)))
defjvp(log_ndtr.primitive, lambda g, ans, x: divide(
    g, multiply(erfcx(multiply(x, -_SQRT_HALF)), _SQRT_HALF_PI)))
