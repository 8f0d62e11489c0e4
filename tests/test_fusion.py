"""The fusion pass (src/lowering/passes/fusion.py): which equations it groups, and that fused
Programs keep their meaning (numpy_ref evaluation, transformations of fused_kernel)."""
from __future__ import annotations

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.core.ir import check_program, eval_program
from starling.lowering.backends.cpp import CppPolicy
from starling.lowering.fused import fused_kernel_p
from starling.lowering.passes.fusion import FusionPolicy, fusion, inline_fused
from starling.lowering.pipeline import run_pipeline
from starling.transforms.stage import make_ir


def fused(f, *args, policy=None):
    prog = run_pipeline(make_ir(f)(*args))
    return prog, fusion(prog, policy or CppPolicy())


def kernels(prog):
    return [e for e in prog.eqns if e.primitive is fused_kernel_p]


def others(prog):
    return [e.primitive.name for e in prog.eqns if e.primitive is not fused_kernel_p]


def same_values(p1, p2, *args):
    a = eval_program(p1, p1.consts, *args)
    b = eval_program(p2, p2.consts, *args)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, equal_nan=True)


X = snp.asarray(np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6))
B = snp.asarray(np.arange(6, dtype=np.float32))


def test_elementwise_chain_is_one_kernel():
    prog, out = fused(lambda x: snp.tanh(x) * 0.5 + snp.exp(-x * x) * x - snp.sin(x) ** 2, X)
    assert len(kernels(out)) == 1 and others(out) == []
    sub = kernels(out)[0].params["program"]
    assert len(sub.eqns) == len(prog.eqns)
    check_program(out)
    same_values(prog, out, X)


def test_broadcast_bias_and_scalar_fuse():
    prog, out = fused(lambda x, b: snp.maximum(x + b, 0.0) * 2.0, X, B)
    assert len(kernels(out)) == 1 and others(out) == []
    same_values(prog, out, X, B)


def test_explicit_broadcast_and_reshape_views_are_pulled_in():
    def f(x, c):
        return x * snp.broadcast_to(snp.reshape(c, (4, 1)), (4, 6)) + 1.0
    c = snp.asarray(np.arange(4, dtype=np.float32))
    prog, out = fused(f, X, c)
    assert len(kernels(out)) == 1 and others(out) == [], out
    same_values(prog, out, X, c)


def test_trailing_reduction_fuses_with_its_producers():
    prog, out = fused(lambda x: snp.sum(snp.exp(x) * 2.0, axis=-1), X)
    assert len(kernels(out)) == 1 and others(out) == []
    same_values(prog, out, X)


def test_full_and_leading_reductions_fuse():
    for axis in (None, 0):
        prog, out = fused(lambda x: snp.max(x * x, axis=axis), X)
        assert len(kernels(out)) == 1 and others(out) == [], (axis, out)
        same_values(prog, out, X)


def test_two_reductions_over_one_input_share_a_kernel():
    prog, out = fused(lambda x: (snp.sum(x, axis=1), snp.max(x, axis=1)), X)
    assert len(kernels(out)) == 1
    assert len(kernels(out)[0].outvars) == 2
    same_values(prog, out, X)


def test_work_on_a_reduced_value_starts_a_new_kernel():
    # logsumexp: max -> subtract -> exp -> sum -> log: the reductions split the chain.
    prog, out = fused(lambda x: snp.logsumexp(x, axis=1), X)
    assert 2 <= len(kernels(out)) <= 4
    same_values(prog, out, X)


def test_horizontal_fusion_of_siblings_reading_one_input():
    prog, out = fused(lambda x: (snp.sin(x), snp.cos(x) * 3.0), X)
    assert len(kernels(out)) == 1
    assert len(kernels(out)[0].outvars) == 2
    same_values(prog, out, X)


def test_intermediate_used_outside_becomes_an_output():
    def f(x):
        y = snp.exp(x)
        return y @ snp.transpose(y), y + 1.0
    prog, out = fused(f, X)
    assert "dot_general" in others(out)
    same_values(prog, out, X)
    check_program(out)


def test_no_cycle_through_an_unfused_equation():
    # mask feeds a matmul whose result is combined with the mask again: the second use must
    # not join the first group (that would need the matmul inside the group).
    def f(x, w):
        m = snp.maximum(x, 0.0)
        return (m @ w) * (x > 0)
    w = snp.asarray(np.ones((6, 6), np.float32))
    prog, out = fused(f, X, w)
    check_program(out)
    same_values(prog, out, X, w)


def test_unsupported_dtype_stays_unfused():
    # float16 runs in kernels (cpp/lowp.py) except the ops defined on its bit patterns
    x16 = snp.asarray(np.ones((3,), np.float16))
    prog, out = fused(lambda x: snp.spacing(x), x16)
    assert kernels(out) == []
    prog, out = fused(lambda x: snp.exp(x) + 1, x16)
    assert len(kernels(out)) == 1


def test_complex_values_are_not_fused_without_decomposition():
    z = snp.asarray(np.ones((3,), np.complex64))
    prog, out = fused(lambda z: z * z + 1, z)
    assert kernels(out) == []


def test_generic_policy_groups_and_numpy_ref_runs_fused_programs():
    prog, out = fused(lambda x: snp.sum(snp.sqrt(snp.abs(x)) + 1.0, axis=1), X,
                      policy=FusionPolicy())
    assert kernels(out)
    same_values(prog, out, X)
    exe_out = st.compile(lambda x: snp.sum(snp.sqrt(snp.abs(x)) + 1.0, axis=1),
                         backend="numpy_ref")(X)
    np.testing.assert_allclose(np.asarray(exe_out),
                               np.asarray(eval_program(out, out.consts, X)[0]), rtol=1e-6)


def test_inline_fused_round_trips():
    prog, out = fused(lambda x, b: snp.exp(x + b) * 2.0, X, B)
    flat = inline_fused(out)
    assert not kernels(flat)
    check_program(flat)
    same_values(prog, flat, X, B)
    again = fusion(flat, CppPolicy())
    assert len(kernels(again)) == 1


def test_fused_kernel_has_jvp_and_batch_rules():
    prog, out = fused(lambda x: snp.sin(x) * x, X)

    def run(x):
        return eval_program(out, out.consts, x)[0]

    def ref(x):
        return snp.sin(x) * x

    t = snp.ones_like(X)
    y1, dy1 = st.jvp(run, (X,), (t,))
    y2, dy2 = st.jvp(ref, (X,), (t,))
    np.testing.assert_allclose(np.asarray(dy1), np.asarray(dy2), rtol=1e-6)
    g1 = st.grad(lambda x: snp.sum(run(x)))(X)
    g2 = st.grad(lambda x: snp.sum(ref(x)))(X)
    np.testing.assert_allclose(np.asarray(g1), np.asarray(g2), rtol=1e-6)
    v1 = st.vmap(run)(snp.stack([X, 2 * X]))
    v2 = st.vmap(ref)(snp.stack([X, 2 * X]))
    np.testing.assert_allclose(np.asarray(v1), np.asarray(v2), rtol=1e-6)


def test_fusion_inside_control_flow_bodies():
    def f(x):
        return st.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, snp.tanh(c[1]) * 2.0 + 1.0),
                             (0, x))[1]
    prog, out = fused(f, X)
    body = [e for e in out.eqns if e.primitive.name == "while"][0].params["body"]
    assert kernels(body)
    same_values(prog, out, X)


@pytest.mark.parametrize("shape,axes", [((4, 6), (1,)), ((4, 6), (0,)), ((2, 3, 4), (1,)),
                                        ((2, 3, 4), (0, 1)), ((2, 3, 4), (1, 2)), ((5,), (0,))])
def test_reductions_over_contiguous_axes_fuse(shape, axes):
    x = snp.asarray(np.random.default_rng(0).normal(size=shape).astype(np.float32))
    prog, out = fused(lambda x: snp.sum(x * 2.0, axis=axes), x)
    assert len(kernels(out)) == 1, out
    same_values(prog, out, x)


def test_accumulation_over_products_is_not_delayed_to_the_end():
    # acc = acc + x_k @ w_k: fusing the whole add chain into one kernel would run it after the
    # last product and keep every product alive until then; each add must follow its product.
    rng = np.random.default_rng(0)
    xs = [snp.asarray(rng.normal(size=(256, 8)).astype(np.float32)) for _ in range(5)]
    w = snp.asarray(rng.normal(size=(8, 256)).astype(np.float32))

    def f(w, *xs):
        acc = xs[0] @ w
        for x in xs[1:]:
            acc = acc + x @ w
        return acc
    prog, out = fused(f, w, *xs)
    check_program(out)
    same_values(prog, out, w, *xs)
    pending, most = set(), 0     # products computed and not yet read
    for e in out.eqns:
        pending -= set(e.invars)
        if e.primitive.name == "dot_general":
            pending.update(e.outvars)
        most = max(most, len(pending))
    assert most <= 2, [e.primitive.name for e in out.eqns]
    assert len(kernels(out)) == 4
    np.testing.assert_allclose(np.asarray(st.compile(f, backend="cpp")(w, *xs)),
                               np.asarray(f(w, *xs)), rtol=1e-5, atol=1e-5)


def test_epilogue_chain_over_one_product_still_fuses_across_a_later_product():
    # (x @ w1 + b) * (x @ w2): the group reading the first product is delayed past the second,
    # but keeps only that product alive instead of its own result: still one kernel.
    rng = np.random.default_rng(1)
    x = snp.asarray(rng.normal(size=(256, 8)).astype(np.float32))
    w1, w2 = (snp.asarray(rng.normal(size=(8, 256)).astype(np.float32)) for _ in range(2))
    b = snp.asarray(rng.normal(size=(256,)).astype(np.float32))

    def f(x, w1, w2, b):
        a = x @ w1 + b
        return a * (x @ w2)
    prog, out = fused(f, x, w1, w2, b)
    assert len(kernels(out)) == 1 and others(out).count("dot_general") == 2
    same_values(prog, out, x, w1, w2, b)
