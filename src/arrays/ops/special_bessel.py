"""Exponentially scaled modified Bessel functions of the first kind, ``bessel_i0e(x) =
exp(-|x|) I0(x)`` and ``bessel_i1e(x) = exp(-|x|) I1(x)``, as elementwise primitives (finite
for every finite ``x``, where ``I0`` / ``I1`` overflow past ``|x| ~ 713``).

Values are SciPy's ``i0e`` / ``i1e`` (Cephes: Clenshaw's Chebyshev expansions on ``[0, 8]`` and
in ``8 / |x|`` beyond) in float64, rounded once. Derivatives (A&S 9.6.27 with the scaling):
``i0e'(x) = i1e(x) - sign(x) i0e(x)`` and ``i1e'(x) = i0e(x) - i1e(x) (sign(x) + 1 / x)``,
whose limit at 0 is ``1/2``.
"""
from __future__ import annotations

import scipy.special as _sc

from .arithmetic import add, divide, equal, multiply, sign, subtract
from .math_select import where
from .rules import defjvp
from .special import special_op

__all__ = ["bessel_i0e", "bessel_i1e"]

bessel_i0e = special_op(
    "bessel_i0e", _sc.i0e, [("x", "any real value.")],
    summary="Elementwise exponentially scaled modified Bessel function of order 0, "
            "``exp(-|x|) I0(x)`` (``scipy.special.i0e``; JAX's ``lax.bessel_i0e``).",
    method="SciPy's ``i0e`` (Cephes: Chebyshev expansions, Clenshaw's recurrence) in float64, "
           "rounded once.",
    notes="Even; ``i0e(0) == 1``, ``i0e(+-inf) == 0``. Derivative ``i1e(x) - sign(x) i0e(x)``.")
bessel_i1e = special_op(
    "bessel_i1e", _sc.i1e, [("x", "any real value.")],
    summary="Elementwise exponentially scaled modified Bessel function of order 1, "
            "``exp(-|x|) I1(x)`` (``scipy.special.i1e``; JAX's ``lax.bessel_i1e``).",
    method="SciPy's ``i1e`` (Cephes: Chebyshev expansions, Clenshaw's recurrence) in float64, "
           "rounded once.",
    notes="Odd; ``i1e(+-inf) == 0``. Derivative ``i0e(x) - i1e(x) (sign(x) + 1/x)``, 1/2 at 0.")


def _i1e_d(g, ans, x):
    zero = equal(x, 0.0)
    safe = where(zero, 1.0, x)
    d = subtract(bessel_i0e(x), multiply(ans, add(sign(x), divide(1.0, safe))))
    return multiply(g, where(zero, 0.5, d))


defjvp(bessel_i0e.primitive,
       lambda g, ans, x: multiply(g, subtract(bessel_i1e(x), multiply(sign(x), ans))))
defjvp(bessel_i1e.primitive, _i1e_d)
