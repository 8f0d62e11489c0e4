"""custom_jvp / custom_vjp inside staged bodies (cond, switch, scan, while, fori_loop,
checkpoint, shard_map, compile, export): the Program keeps the call (custom_jvp_call /
custom_vjp_call) so derivatives taken later use the user's rule, not the derivative of the
function. The rules below differ from the true derivative (2 and 3 instead of cos), so a lost
rule shows."""
from __future__ import annotations

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import lax
from starling.core.ir import inline_custom_calls
from starling.transforms.custom import custom_jvp_call_p, custom_vjp_call_p


@st.custom_jvp
def fj(x):
    return snp.sin(x)


fj.defjvp(lambda p, t: (snp.sin(p[0]), 2.0 * t[0]))


@st.custom_vjp
def fv(x):
    return snp.sin(x)


fv.defvjp(lambda x: (snp.sin(x), x), lambda res, ct: (3.0 * ct,))

RULES = [(fj, 2.0), (fv, 3.0)]
IDS = ["custom_jvp", "custom_vjp"]
X = np.float64(0.5)


def _contexts(h):
    """name -> scalar function that applies ``h`` once (derivative: h's rule)."""
    return {
        "cond": lambda x: lax.cond(x > -1.0, h, snp.cos, x),
        "switch": lambda x: lax.switch(1, [snp.cos, h], x),
        "scan": lambda x: lax.scan(lambda c, _: (h(c), None), x, None, length=1)[0],
        "fori_loop": lambda x: lax.fori_loop(0, 1, lambda i, c: h(c), x),
        "checkpoint": st.checkpoint(h),
        "checkpoint_in_cond": lambda x: lax.cond(x > -1.0, st.checkpoint(h), snp.cos, x),
        "compile": st.compile(h),
        "cond_in_compile": st.compile(lambda x: lax.cond(x > -1.0, h, snp.cos, x)),
        "nested_cond": lambda x: lax.cond(x > -1.0,
                                          lambda y: lax.cond(y > -2.0, h, snp.cos, y),
                                          snp.cos, x),
    }


CONTEXTS = sorted(_contexts(fj))


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("h,slope", RULES, ids=IDS)
def test_rule_survives_staging(h, slope, ctx):
    g = _contexts(h)[ctx]
    np.testing.assert_allclose(np.asarray(g(X)), np.sin(X), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(st.grad(g)(X)), slope, rtol=0)
    np.testing.assert_allclose(np.asarray(st.compile(st.grad(g))(X)), slope, rtol=0)
    xs = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(np.asarray(st.vmap(st.grad(g))(xs)), [slope] * 3, rtol=0)
    np.testing.assert_allclose(
        np.asarray(st.grad(lambda v: snp.sum(st.vmap(g)(v)))(xs)), [slope] * 3, rtol=0)


@pytest.mark.parametrize("ctx", ["cond", "scan", "fori_loop", "compile"])
def test_forward_mode_uses_the_rule(ctx):
    g = _contexts(fj)[ctx]
    y, t = st.jvp(g, (X,), (np.float64(1.5),))
    np.testing.assert_allclose([float(y), float(t)], [np.sin(X), 3.0], rtol=1e-15)


def test_while_loop_forward_mode_uses_the_rule():
    def g(x):
        return lax.while_loop(lambda c: c[1] < 2, lambda c: (fj(c[0]), c[1] + 1), (x, 0))[0]
    y, t = st.jvp(g, (X,), (np.float64(1.0),))
    np.testing.assert_allclose([float(y), float(t)], [np.sin(np.sin(X)), 4.0], rtol=1e-15)


@pytest.mark.parametrize("h,slope", RULES, ids=IDS)
def test_rule_applies_to_values_computed_from_outer_tracers(h, slope):
    # the body's argument depends on w (differentiated), through the cond's operands
    def g(w, x):
        return lax.cond(x > -1.0, lambda y: h(y * w), snp.cos, x)
    gw, gx = st.grad(g, argnums=(0, 1))(np.float64(2.0), X)
    np.testing.assert_allclose([float(gw), float(gx)], [slope * X, slope * 2.0], rtol=1e-15)


def test_body_closing_over_an_outer_value():
    # the custom function is called on a value the body closes over (a hoisted constant)
    def g(x, y):
        return lax.cond(x > -1.0, lambda a: a + fj(y), lambda a: a, x)
    gx, gy = st.grad(g, argnums=(0, 1))(X, np.float64(0.25))
    np.testing.assert_allclose([float(gx), float(gy)], [1.0, 2.0], rtol=0)


def test_nondiff_argnums_inside_cond():
    from functools import partial

    @partial(st.custom_jvp, nondiff_argnums=(0,))
    def scaled(k, x):
        return k * snp.sin(x)
    scaled.defjvp(lambda k, p, t: (k * snp.sin(p[0]), 10.0 * k * t[0]))
    g = lambda x: lax.cond(x > -1.0, lambda y: scaled(3.0, y), snp.cos, x)  # noqa: E731
    np.testing.assert_allclose(float(st.grad(g)(X)), 30.0, rtol=0)


def test_staged_program_records_the_call_and_backends_inline_it():
    prog = st.make_ir(lambda x: fj(x) + fv(x))(X)
    names = [e.primitive.name for e in prog.eqns]
    assert "custom_jvp_call" in names and "custom_vjp_call" in names
    flat = inline_custom_calls(prog)
    assert not any(e.primitive.meta.get("custom_call") for e in flat.eqns)
    from starling.core.ir import eval_program
    got = eval_program(flat, flat.consts, snp.asarray(X))
    np.testing.assert_allclose(float(got[0]), 2 * np.sin(X), rtol=1e-15)


def test_direct_rule_slots_agree_with_the_traces():
    # the primitives' jvp / batch slots (used by code that calls rules directly)
    prog = st.make_ir(fj)(X)
    eqn = next(e for e in prog.eqns if e.primitive is custom_jvp_call_p)
    args = [snp.asarray(c) for c in prog.consts[:eqn.params["num_consts"]]] + [snp.asarray(X)]
    tangents = [snp.zeros_like(a) for a in args[:-1]] + [snp.asarray(1.0)]
    p, t = custom_jvp_call_p.jvp(args, tangents, **eqn.params)
    np.testing.assert_allclose([float(p[0]), float(t[0])], [np.sin(X), 2.0], rtol=1e-15)
    xs = snp.asarray(np.array([0.1, 0.2]))
    outs, dims = custom_jvp_call_p.batch(args[:-1] + [xs], [None] * (len(args) - 1) + [0],
                                         **eqn.params)
    np.testing.assert_allclose(np.asarray(outs[0]), np.sin([0.1, 0.2]), rtol=1e-15)
    assert dims == [0]
    prog = st.make_ir(fv)(X)
    eqn = next(e for e in prog.eqns if e.primitive is custom_vjp_call_p)
    assert eqn.params["num_consts"] == 0


def test_export_keeps_the_primal_computation():
    e = st.export(lambda x: lax.cond(x[0] > -1.0, fj, snp.cos, x) + 1.0, snp.zeros(3))
    r = st.deserialize(e.serialize())
    np.testing.assert_allclose(np.asarray(r(snp.ones(3))), np.sin(1.0) + 1.0, rtol=1e-6)


@pytest.mark.parametrize("compiled", [False, True])
def test_gradient_of_a_sharded_input_is_laid_out_like_it(compiled):
    # the custom rule's cotangent (2 * ct of a broadcast sum) does not come from the input's
    # pieces; the gradient still has the input's layout, as in JAX
    from starling.sharding import Shard, distribute, make_mesh
    mesh = make_mesh((4,), ("i",), devices=st.devices()[:4])
    xs = distribute(snp.asarray(np.linspace(0.0, 1.0, 8)), mesh, [Shard(0)])
    h = st.compile(fj) if compiled else fj
    g = st.grad(lambda x: snp.sum(h(x)))(xs)
    assert g.placements == (Shard(0),) and g.mesh == mesh
    # the partitioner runs the custom function's own (elementwise) strategies: still split
    assert h(xs).placements == (Shard(0),)
    np.testing.assert_array_equal(np.asarray(g), np.full(8, 2.0, np.float32))
