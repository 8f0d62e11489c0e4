"""The regularized incomplete beta function ``betainc(a, b, x) = I_x(a, b)`` as an elementwise
primitive.

Values are SciPy's ``betainc`` (Boost's ``ibeta``: power series, continued fraction and the
asymptotic expansions of DiDonato & Morris, ACM TOMS 18 (1992), Algorithm 708) in float64,
rounded once. The derivative in ``x`` is the Beta(a, b) density
``x**(a-1) (1-x)**(b-1) / B(a, b)``; derivatives in ``a`` and ``b`` are not implemented (a
nonzero tangent for them raises NotImplementedError, as JAX's ``lax.betainc`` long did).
"""
from __future__ import annotations

import scipy.special as _sc

from .arithmetic import add, multiply, subtract
from .math_basic import exp, log, log1p
from .rules import defjvp
from .special import not_differentiable, special_op
from .special_gamma import digamma

__all__ = ["betainc", "betaln"]

betainc = special_op(
    "betainc", _sc.betainc,
    [("a", "first shape parameter, ``a >= 0``."), ("b", "second shape parameter, ``b >= 0``."),
     ("x", "in ``[0, 1]`` (NaN outside).")],
    summary="Elementwise regularized incomplete beta function "
            "``I_x(a, b) = integral_0^x t**(a-1) (1-t)**(b-1) dt / B(a, b)`` "
            "(``scipy.special.betainc``; JAX's ``lax.betainc``).",
    method="SciPy's ``betainc`` (Boost ``ibeta``, after DiDonato & Morris, \"Algorithm 708: "
           "significant digit computation of the incomplete beta function ratios\", ACM TOMS 18 "
           "(1992) 360-373) in float64, rounded once.",
    notes="``I_0 = 0``, ``I_1 = 1``; ``a == 0`` gives 1 and ``b == 0`` gives 0 for ``0 < x < 1`` "
          "(the limits, as SciPy). Derivative in ``x``: the Beta(a, b) density; in ``a`` and "
          "``b``: NotImplementedError.")


betaln = special_op(
    "betaln", _sc.betaln, [("a", "any real value."), ("b", "any real value.")],
    summary="Elementwise log of the absolute value of the beta function, "
            "``log|B(a, b)| = lgamma(a) + lgamma(b) - lgamma(a + b)``.",
    method="SciPy's ``betaln`` (Cephes ``lbeta``: an asymptotic expansion when one argument is "
           "large, so the three large ``lgamma`` terms never cancel) in float64, rounded once.",
    notes="Derivatives ``digamma(a) - digamma(a + b)`` and ``digamma(b) - digamma(a + b)``.")


def _density(a, b, x):
    # x**(a-1) (1-x)**(b-1) / B(a, b), from logs
    la = multiply(subtract(a, 1.0), log(x))
    lb = multiply(subtract(b, 1.0), log1p(multiply(x, -1.0)))
    return exp(subtract(add(la, lb), betaln(a, b)))


defjvp(betaln.primitive,
       lambda g, ans, a, b: multiply(g, subtract(digamma(a), digamma(add(a, b)))),
       lambda g, ans, a, b: multiply(g, subtract(digamma(b), digamma(add(a, b)))))
defjvp(betainc.primitive, not_differentiable("betainc", "a"),
       not_differentiable("betainc", "b"),
       lambda g, ans, a, b, x: multiply(g, _density(a, b, x)))
