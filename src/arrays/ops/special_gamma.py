"""The gamma-function family as elementwise primitives: ``lgamma``, ``digamma``, ``polygamma``
and the Hurwitz ``zeta``.

Values are SciPy's float64 functions (Cephes' algorithms) rounded once to the operands' dtype
(``special.in_float64``). Derivatives are exact identities written with these primitives, so
every order is available: ``lgamma' = digamma``, ``digamma' = polygamma(1, .)``,
``d/dx polygamma(n, x) = polygamma(n + 1, x)``, ``d/dq zeta(s, q) = -s zeta(s + 1, q)``. The
integer order ``n`` of polygamma and the exponent ``s`` of zeta have no derivative here (as in
JAX): a nonzero tangent for them raises NotImplementedError.
"""
from __future__ import annotations

import numpy as np
import scipy.special as _sc

from .arithmetic import add, multiply, negative
from .rules import defjvp
from .special import not_differentiable, special_op

__all__ = ["lgamma", "digamma", "polygamma", "zeta"]


def _polygamma_np(n, x):
    # psi^(n)(x) = (-1)**(n+1) n! zeta(n + 1, x) for integer n >= 1 (Abramowitz & Stegun 6.4.10),
    # psi itself for n == 0; NaN for an order that is not a nonnegative integer.
    ok = (n >= 0) & (n == np.floor(n))
    m = np.where(ok, n, 1.0)
    sign = np.where(np.fmod(m, 2.0) == 0.0, -1.0, 1.0)
    higher = sign * np.exp(_sc.gammaln(m + 1.0)) * _sc.zeta(m + 1.0, x)
    out = np.where(m == 0.0, _sc.psi(x), higher)
    return np.where(ok, out, np.nan)


lgamma = special_op(
    "lgamma", _sc.gammaln, [("x", "any real value.")],
    summary="Elementwise log of the absolute value of the gamma function, ``log|Gamma(x)|`` "
            "(``scipy.special.gammaln``; JAX's ``lax.lgamma``).",
    method="SciPy's ``gammaln`` (Cephes ``lgam``: Stirling's series for ``x >= 13``, a rational "
           "approximation on [2, 3] with the recurrence below, the reflection formula for "
           "``x < 0``) in float64, rounded once.",
    notes="``inf`` at 0 and the negative integers (the poles), ``inf`` at ``+-inf``. Derivative "
          "``digamma(x)``. The sign of ``Gamma(x)`` is not returned (use ``gammasgn``-style "
          "logic on ``floor(x)`` for negative ``x``).")
digamma = special_op(
    "digamma", _sc.psi, [("x", "any real value.")],
    summary="Elementwise digamma function ``psi(x) = d/dx log Gamma(x)``.",
    method="SciPy's ``psi`` (Cephes: the asymptotic series for large ``x``, the recurrence "
           "``psi(x + 1) = psi(x) + 1/x`` to reach it, a series around the positive root "
           "``x0 = 1.4616...`` so that values near it keep relative precision, reflection for "
           "``x < 0``) in float64, rounded once.",
    notes="``digamma(0.0) == -inf``, ``digamma(-0.0) == inf``, NaN at the negative integers, "
          "``digamma(inf) == inf``. Derivative ``polygamma(1, x)``.")
polygamma = special_op(
    "polygamma", _polygamma_np,
    [("n", "the order, a nonnegative integer value (any float or integer dtype); other values "
           "give NaN."), ("x", "any real value.")],
    summary="Elementwise polygamma function ``psi^(n)(x)``, the n-th derivative of ``digamma``.",
    method="``n == 0``: SciPy's ``psi``; ``n >= 1``: ``(-1)**(n+1) n! zeta(n + 1, x)`` with "
           "SciPy's Hurwitz ``zeta`` (Abramowitz & Stegun 6.4.10), in float64, rounded once.",
    notes="Poles at 0 and the negative integers (``inf``, as SciPy). For negative non-integer "
          "``x`` and large ``n`` the value is a near-cancelling sum (ill-conditioned): SciPy's "
          "``zeta`` there is good to about 1e-7 relative for ``n = 10`` near ``x = -2.5`` "
          "(1e-13 for ``n <= 3``). Derivative in ``x``: "
          "``polygamma(n + 1, x)``; ``n`` has none (NotImplementedError for a nonzero tangent, "
          "as in JAX).")
zeta = special_op(
    "zeta", _sc.zeta,
    [("s", "the exponent (real; ``s > 1`` for the series to converge)."),
     ("q", "the shift (``q > 0``, or any non-integer for SciPy's extension).")],
    summary="Elementwise Hurwitz zeta function ``zeta(s, q) = sum_{k >= 0} (k + q)**-s`` "
            "(Riemann's for ``q == 1``).",
    method="SciPy's ``zeta`` (Cephes: Euler-Maclaurin summation, a few direct terms plus the "
           "Bernoulli-number tail) in float64, rounded once.",
    notes="``zeta(1, q) == inf``; NaN for ``s < 1``. Derivative in ``q``: ``-s zeta(s + 1, q)``; "
          "``s`` has none (NotImplementedError for a nonzero tangent, as in JAX).")

defjvp(lgamma.primitive, lambda g, ans, x: multiply(g, digamma(x)))
defjvp(digamma.primitive, lambda g, ans, x: multiply(g, polygamma(1.0, x)))
defjvp(polygamma.primitive, not_differentiable("polygamma", "the order n"),
       lambda g, ans, n, x: multiply(g, polygamma(add(n, 1.0), x)))
defjvp(zeta.primitive, not_differentiable("zeta", "the exponent s"),
       lambda g, ans, s, q: multiply(g, negative(multiply(s, zeta(add(s, 1.0), q)))))
