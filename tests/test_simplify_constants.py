"""Simplify's rules about constants (src/lowering/passes/simplify.py): ``x + 0.0`` is ``x`` only
where ``x`` holds no -0.0 (-0.0 + 0.0 is +0.0): the add is dropped after exp, abs, an integer
conversion (and views and widening conversions of them) and kept elsewhere (products whose
terms underflow, narrowing conversions); checked bit for bit (sign of
zero, NaN) against the unsimplified Program, on inputs that make -0.0. Broadcast scalar
constants read by elementwise equations become Literals."""
from __future__ import annotations

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import lax
from starling.core.ir import eval_program
from starling.lowering.passes.dce import dce
from starling.lowering.passes.simplify import simplify

RNG = np.random.default_rng(0)

# -0.0 in every row and column, next to NaN, inf and ordinary values
A = np.array([[-0.0, 1.0, np.inf], [2.0, -0.0, np.nan], [-0.0, -3.0, 0.5]], np.float32)
B = np.array([[-0.0, 2.0, 1.0], [1.0, -0.0, -1.0], [0.0, 4.0, -0.0]], np.float32)
I = np.array([[0, -1, 2], [3, 0, 0], [1, 1, -2]], np.int32)


def _tiny_row(a):
    # (1, 2) of -3e-30, -0.5e-30 made from the input (not folded away): times 1e-30 the terms
    # underflow and the product's sum can round to -0.0
    return snp.stack([a[2, 1], -snp.abs(a[2, 2])])[None, :] * 1e-30


def _bits(x):
    x = np.asarray(x)
    return np.where(np.isnan(x), np.float32(np.nan), x).view(np.int32)


# (name, f, dropped): True: no add is left; False / None: one add is left (the user's, or None:
# another that makes the user's redundant)
CASES = [
    # a product's sum ends at -0.0 when its terms underflow (TINY below), so its add stays
    ("dot", lambda a, b, i: a @ b + 0.0, False),
    ("dot_transposed", lambda a, b, i: (a @ b).T + 0.0, False),
    ("dot_underflow", lambda a, b, i: _tiny_row(a) @ (snp.ones((2, 1), np.float32) * 1e-30)
     + 0.0, False),
    ("narrowing", lambda a, b, i: (a.astype(np.float64) * -1e-300).astype(np.float32) + 0.0,
     False),
    ("widening_of_exp", lambda a, b, i: snp.exp(a).astype(np.float64) + 0.0, True),
    ("exp_reshaped_slice", lambda a, b, i: snp.reshape(snp.exp(a), (9,))[2:7] + 0.0, True),
    # an outer product becomes multiply + add 0.0 (outer_product.py); the user's add goes
    ("k_is_one", lambda a, b, i: a[:, :1] @ b[:1, :] + 0.0, None),
    ("exp", lambda a, b, i: snp.exp(-a * 1e3) + 0.0, True),
    ("abs", lambda a, b, i: snp.abs(a) + 0.0, True),
    ("from_int", lambda a, b, i: i.astype(np.float32) + 0.0, True),
    ("twice", lambda a, b, i: (a + 0.0) + 0.0, None),   # the first add stays, the second goes
    ("multiply", lambda a, b, i: a * b + 0.0, False),
    ("sqrt", lambda a, b, i: snp.sqrt(a) + 0.0, False),
    ("input", lambda a, b, i: a + 0.0, False),
    ("neg_zero_literal", lambda a, b, i: lax.pad(a, -0.0, ((0, 1, 0), (0, 0, 0))) + 0.0, False),
]


@pytest.mark.parametrize("name, f, dropped", CASES, ids=[c[0] for c in CASES])
def test_plus_zero_dropped_only_without_negative_zeros(name, f, dropped):
    prog = st.make_ir(f)(A, B, I)
    out = dce(simplify(prog))
    adds = [e for e in out.eqns if e.primitive.name == "add"]
    assert len(adds) == (0 if dropped is True else 1), out
    args = [snp.asarray(x) for x in (A, B, I)]
    want = eval_program(prog, [], *args)[0]
    np.testing.assert_array_equal(_bits(eval_program(out, [], *args)[0]), _bits(want))
    np.testing.assert_array_equal(_bits(st.compile(f)(A, B, I)), _bits(want))


def test_broadcast_scalar_operands_become_literals():
    # grad of a mean: the cotangent 1/n is folded into a Literal and broadcast; elementwise
    # consumers read the Literal (no materialised (n,) array passed to a kernel)
    from starling.lowering.pipeline import run_pipeline

    def loss(x):
        return snp.mean(x * x)

    x = RNG.standard_normal((4, 8)).astype(np.float32)
    prog = st.make_ir(st.grad(loss))(x)
    out = run_pipeline(prog)
    assert not [e for e in out.eqns if e.primitive.name == "broadcast_in_dim"], out
    np.testing.assert_allclose(np.asarray(eval_program(out, out.consts, snp.asarray(x))[0]),
                               2 * x / x.size, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(st.compile(st.grad(loss))(x)), 2 * x / x.size,
                               rtol=1e-6)
    # the broadcast input keeps the result's shape; the constant becomes a Literal
    f = st.make_ir(lambda a: snp.broadcast_to(a, (3,)) * snp.broadcast_to(np.float32(2), (3,)))
    out = run_pipeline(f(np.float32(1.5)))
    np.testing.assert_array_equal(np.asarray(eval_program(out, out.consts, snp.asarray(np.float32(1.5)))[0]),
                                  np.full(3, 3.0, np.float32))
