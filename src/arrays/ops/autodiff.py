"""Primitives that exist for differentiation: stop_gradient."""
from __future__ import annotations

from ...core import scalar as S
from ...core.primitive import Primitive
from ..convert import operand
from . import rules as R
from . import rules_sharding as RS

stop_gradient_p = Primitive("stop_gradient", family="autodiff")
stop_gradient_p.impl = lambda x: x
stop_gradient_p.abstract_eval = lambda x: x
stop_gradient_p.weak_type = lambda w: w
stop_gradient_p.scalar_formula = S.ScalarFormula(S.same, lowp=None, name="stop_gradient")
R.defjvp_zero(stop_gradient_p)
stop_gradient_p.sharding = RS.elementwise(RS.UNARY_SUM)
R.batch_unary_same_axis(stop_gradient_p)
stop_gradient_p.sharding = RS.elementwise(selectors=0)   # the identity: every layout passes


def stop_gradient(x):
    """Identity on values; its derivative is zero in every mode (forward and reverse).

    Args:
        x: a pytree of arrays of any shape/dtype.
    Returns:
        The same values (``(*dims)``, same dtype), treated as constants by differentiation.
    """
    from ... import tree as tree_util
    return tree_util.map(lambda leaf: stop_gradient_p.bind(operand(leaf, "stop_gradient")), x)
