"""The complement of the regularized incomplete beta function, ``betaincc(a, b, x) =
1 - I_x(a, b)``, computed directly as an elementwise primitive.

Why a primitive and not ``1 - betainc``: where ``I_x`` is near 1 the subtraction loses every
digit of the small complement, and the identity ``1 - I_x(a, b) = I_{1-x}(b, a)`` needs
``1 - x``, which rounds when ``x`` is tiny (``x = 1e-300``, ``a = 1e-3``: the complement is
0.4978, but ``I_{1 - x}`` sees ``1.0`` and gives 0). The distributions in
``starling.scipy.stats`` use it for survival functions and Student's t tails (Boost's
``students_t`` cdf uses ``ibetac`` the same way).
"""
from __future__ import annotations

import scipy.special as _sc

from .arithmetic import multiply, negative
from .rules import defjvp
from .special import special_op
from .special_beta import _density, betainc_grad_a, betainc_grad_b

__all__ = ["betaincc"]

betaincc = special_op(
    "betaincc", _sc.betaincc,
    [("a", "first shape parameter, ``a >= 0``."), ("b", "second shape parameter, ``b >= 0``."),
     ("x", "in ``[0, 1]`` (NaN outside).")],
    summary="Elementwise complement of the regularized incomplete beta function, "
            "``1 - I_x(a, b)``, without cancellation (``scipy.special.betaincc``).",
    method="SciPy's ``betaincc`` (Boost ``ibetac``, after DiDonato & Morris, \"Algorithm 708: "
           "significant digit computation of the incomplete beta function ratios\", ACM TOMS "
           "18 (1992) 360-373: the complement is summed directly, not subtracted) in float64, "
           "rounded once.",
    notes="``betaincc(a, b, 0) == 1``, ``betaincc(a, b, 1) == 0``. Derivatives are minus those "
          "of ``betainc``: ``-density`` in ``x``, ``-betainc_grad_a`` / ``-betainc_grad_b`` in "
          "``a`` / ``b`` (first order in the parameters).")

defjvp(betaincc.primitive,
       lambda g, ans, a, b, x: negative(multiply(g, betainc_grad_a(a, b, x))),
       lambda g, ans, a, b, x: negative(multiply(g, betainc_grad_b(a, b, x))),
       lambda g, ans, a, b, x: negative(multiply(g, _density(a, b, x))))
