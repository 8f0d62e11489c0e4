"""checkpoint (remat): same values and gradients in every mode; fewer stored residuals."""
import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.transforms.grad import _linearize_flat
from starling.test_util import check_grads


def mlp_block(w1, w2, x):
    h = snp.tanh(x @ w1)
    h = snp.sin(h) * h
    return snp.tanh(h @ w2)


def _args():
    rng = np.random.default_rng(0)
    return (snp.asarray(rng.normal(size=(4, 8))), snp.asarray(rng.normal(size=(8, 3))),
            snp.asarray(rng.normal(size=(5, 4))))


@pytest.mark.parametrize("policy", [None, "save_nothing", "save_dots"])
def test_values_and_gradients_unchanged(policy):
    w1, w2, x = _args()
    f = lambda *a: mlp_block(*a).sum()  # noqa: E731
    g = st.checkpoint(f, policy=policy) if policy else st.checkpoint(f)
    np.testing.assert_allclose(float(g(w1, w2, x)), float(f(w1, w2, x)), rtol=1e-12)
    for gr, gw in zip(st.grad(g, argnums=(0, 1, 2))(w1, w2, x),
                      st.grad(f, argnums=(0, 1, 2))(w1, w2, x)):
        np.testing.assert_allclose(np.asarray(gr), np.asarray(gw), rtol=1e-10)
    check_grads(g, (w1, w2, x), order=2)


def test_decorator_forms():
    @st.checkpoint
    def a(x):
        return snp.sin(x) ** 2

    @st.checkpoint(policy="save_dots")
    def b(x):
        return snp.sin(x) ** 2

    x = snp.asarray(0.3, dtype=np.float64)
    assert float(st.grad(a)(x)) == pytest.approx(np.sin(0.6))
    assert float(st.grad(b)(x)) == pytest.approx(np.sin(0.6))
    with pytest.raises(ValueError, match="policy"):
        st.checkpoint(lambda x: x, policy="bogus")


def _n_residuals(fun, *args):
    _, prog, _ = _linearize_flat(lambda *a: ([fun(*a)], None), list(args))
    return sum(int(np.prod(np.asarray(c).shape)) for c in prog.consts)


def test_residual_memory_shrinks():
    w1, w2, x = _args()
    f = lambda *a: mlp_block(*a).sum()  # noqa: E731
    plain = _n_residuals(f, w1, w2, x)
    nothing = _n_residuals(st.checkpoint(f), w1, w2, x)
    dots = _n_residuals(st.checkpoint(f, policy="save_dots"), w1, w2, x)
    inputs = sum(int(np.prod(a.shape)) for a in (w1, w2, x))
    assert nothing == inputs            # only the inputs are kept
    assert inputs < dots < plain        # plus the two matmul outputs (5x8 + 5x3)
    assert dots == inputs + 5 * 8 + 5 * 3


def test_checkpoint_under_vmap_and_jvp():
    w1, w2, x = _args()
    g = st.checkpoint(lambda w1, w2, xi: mlp_block(w1, w2, xi[None])[0].sum())
    per_ex = st.vmap(st.grad(g), in_axes=(None, None, 0))(w1, w2, x)
    ref = st.vmap(st.grad(lambda w1, w2, xi: mlp_block(w1, w2, xi[None])[0].sum()),
                  in_axes=(None, None, 0))(w1, w2, x)
    np.testing.assert_allclose(np.asarray(per_ex), np.asarray(ref), rtol=1e-10)
    t = snp.ones_like(x)
    _, tan = st.jvp(lambda x: st.checkpoint(mlp_block)(w1, w2, x), (x,), (t,))
    _, tan_ref = st.jvp(lambda x: mlp_block(w1, w2, x), (x,), (t,))
    np.testing.assert_allclose(np.asarray(tan), np.asarray(tan_ref), rtol=1e-12)
    gg = st.grad(lambda v: st.vmap(lambda xi: st.checkpoint(mlp_block)(w1, w2, xi[None]).sum())(
        v * 1.0).sum())(x)
    gg_ref = st.grad(lambda v: mlp_block(w1, w2, v).sum())(x)
    np.testing.assert_allclose(np.asarray(gg), np.asarray(gg_ref), rtol=1e-10)


def test_compiled_gradient_recomputes_the_checkpointed_function():
    # Staged, the recomputation is the forward pass's equations on the same inputs again: CSE
    # must not merge it back into the forward pass (which would keep its values as residuals).
    from starling.lowering.pipeline import run_pipeline
    from starling.transforms.stage import make_ir

    f = st.checkpoint(lambda x: snp.sum(snp.exp(snp.sin(x))))
    x = snp.asarray(np.linspace(-1.0, 1.0, 7))
    prog = run_pipeline(make_ir(st.value_and_grad(f))(x))
    names = [e.primitive.name for e in prog.eqns]
    assert names.count("sin") == 2 and names.count("exp") == 2, names
    v, g = st.compile(st.value_and_grad(f))(x)
    xn = np.asarray(x)
    np.testing.assert_allclose(float(v), np.exp(np.sin(xn)).sum(), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(g), np.exp(np.sin(xn)) * np.cos(xn), rtol=1e-12)
