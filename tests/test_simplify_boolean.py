"""Boolean identities of the simplify pass (src/lowering/passes/simplify.py): ``x & True`` and
``x | False`` are ``x``, also where the constant is made by ``y & False`` / ``y | True`` (as the
JVP rules of max / min / clamp make against a scalar). Checked against evaluating the
unsimplified Program on random inputs."""
from __future__ import annotations

import numpy as np
import pytest

import starling.numpy as snp
from starling.core.avals import ShapedArray
from starling.core.ir import Equation, Literal, Program, Var, eval_program
from starling.core.primitive import Primitive
from starling.lowering.passes.dce import dce
from starling.lowering.passes.simplify import simplify


def _bool_prog(build):
    """A Program over one bool[3] input built by ``build(x, eqn)``."""
    land, lor = Primitive.registry["logical_and"], Primitive.registry["logical_or"]
    aval = ShapedArray((3,), np.dtype(bool), False)
    x, y = Var(aval), Var(aval)
    eqns = []

    def eqn(prim, a, b):
        out = Var(aval)
        eqns.append(Equation({"and": land, "or": lor}[prim], [a, b], [out], {}))
        return out
    out = build(x, y, eqn)
    return Program([], [], [x, y], eqns, [out])


def _lit(v):
    return Literal(np.bool_(v), ShapedArray((), np.dtype(bool), False))


@pytest.mark.parametrize("build, kept", [
    (lambda x, y, e: e("and", x, _lit(True)), 0),
    (lambda x, y, e: e("or", _lit(False), x), 0),
    (lambda x, y, e: e("and", x, e("or", y, _lit(True))), 0),   # x & (y | True) = x
    (lambda x, y, e: e("or", x, e("and", _lit(False), y)), 0),  # x | (False & y) = x
    (lambda x, y, e: e("and", x, _lit(False)), 1),              # not an identity
    (lambda x, y, e: e("or", x, e("and", y, _lit(True))), 1),   # y & True = y, x | y stays
])
def test_simplify_boolean_identities(build, kept):
    prog = _bool_prog(build)
    out = dce(simplify(prog))
    assert len(out.eqns) == kept
    rng = np.random.default_rng(0)
    for _ in range(4):
        a, b = (snp.asarray(rng.integers(0, 2, 3).astype(bool)) for _ in range(2))
        assert np.array_equal(np.asarray(eval_program(out, [], a, b)[0]),
                              np.asarray(eval_program(prog, [], a, b)[0]))
