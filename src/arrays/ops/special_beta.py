"""The regularized incomplete beta function ``betainc(a, b, x) = I_x(a, b)`` as an elementwise
primitive.

Values are SciPy's ``betainc`` (Boost's ``ibeta``: power series, continued fraction and the
asymptotic expansions of DiDonato & Morris, ACM TOMS 18 (1992), Algorithm 708) in float64,
rounded once. The derivative in ``x`` is the Beta(a, b) density
``x**(a-1) (1-x)**(b-1) / B(a, b)``; those in ``a`` and ``b`` are the primitives
``betainc_grad_a`` / ``betainc_grad_b`` (the continued fraction differentiated term by term:
special_beta_grad.py), whose own derivatives exist in ``x`` only.
"""
from __future__ import annotations

import scipy.special as _sc

from .arithmetic import add, multiply, subtract
from .math_basic import exp, log, log1p
from .rules import defjvp
from .special import not_differentiable, special_op
from .special_beta_grad import betainc_grads
from .special_gamma import digamma

__all__ = ["betainc", "betaln", "betainc_grad_a", "betainc_grad_b"]

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
          "``b``: ``betainc_grad_a`` / ``betainc_grad_b`` (NaN at ``a == 0`` or ``b == 0``).")

_GRAD_METHOD = (
    "Legendre's continued fraction of ``I_x`` (Abramowitz & Stegun 26.5.8) by the modified Lentz "
    "method, differentiated term by term in ``a`` and ``b`` (R. J. Boik and J. F. Robison-Cox, "
    "\"Derivatives of the incomplete beta function\", J. Statistical Software 3, 1998), with "
    "``I_x(a, b) = 1 - I_{1-x}(b, a)`` above ``x = (a + 1) / (a + b + 2)``; float64, rounded "
    "once. Relative accuracy about 1e-14 for ``a, b`` up to 100, 1e-13 near 1000 (the "
    "prefactor ``x**a (1-x)**b / B(a, b)`` is formed from logs that grow with ``a + b``).")
_ABX = [("a", "first shape parameter, ``a > 0``."), ("b", "second shape parameter, ``b > 0``."),
        ("x", "in ``[0, 1]``.")]
betainc_grad_a = special_op(
    "betainc_grad_a", lambda a, b, x: betainc_grads(a, b, x)[0], _ABX,
    summary="Elementwise ``d/da I_x(a, b)`` of the regularized incomplete beta function "
            "(always <= 0).",
    method=_GRAD_METHOD,
    notes="0 at ``x == 0`` and ``x == 1``; NaN outside the domain. Derivative in ``x``: the "
          "density times ``log x - digamma(a) + digamma(a + b)``; in ``a``, ``b``: "
          "NotImplementedError.")
betainc_grad_b = special_op(
    "betainc_grad_b", lambda a, b, x: betainc_grads(a, b, x)[1], _ABX,
    summary="Elementwise ``d/db I_x(a, b)`` of the regularized incomplete beta function "
            "(always >= 0).",
    method=_GRAD_METHOD,
    notes="0 at ``x == 0`` and ``x == 1``; NaN outside the domain. Derivative in ``x``: the "
          "density times ``log(1 - x) - digamma(b) + digamma(a + b)``; in ``a``, ``b``: "
          "NotImplementedError.")


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
defjvp(betainc.primitive,
       lambda g, ans, a, b, x: multiply(g, betainc_grad_a(a, b, x)),
       lambda g, ans, a, b, x: multiply(g, betainc_grad_b(a, b, x)),
       lambda g, ans, a, b, x: multiply(g, _density(a, b, x)))


def _psi_diff(a, ab):
    return subtract(digamma(a), digamma(ab))


defjvp(betainc_grad_a.primitive, not_differentiable("betainc_grad_a", "a"),
       not_differentiable("betainc_grad_a", "b"),
       lambda g, ans, a, b, x: multiply(g, multiply(
           _density(a, b, x), subtract(log(x), _psi_diff(a, add(a, b))))))
defjvp(betainc_grad_b.primitive, not_differentiable("betainc_grad_b", "a"),
       not_differentiable("betainc_grad_b", "b"),
       lambda g, ans, a, b, x: multiply(g, multiply(
           _density(a, b, x), subtract(log1p(multiply(x, -1.0)), _psi_diff(b, add(a, b))))))
