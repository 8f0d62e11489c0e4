"""The minimum-norm subgradient convention for ops built from norms and roots: at a kink
(zero vector, zero matrix, zero singular value, the origin of hypot, a constant sample for std)
every derivative, forward and reverse, first and second order, is finite and minimum-norm (0),
never NaN; away from kinks the ordinary derivative (vs closed forms / finite differences)."""
import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import linalg as LA
from starling.test_util import check_grads

SCALAR_FNS = {
    "vector_norm": lambda x: LA.vector_norm(x),
    "vector_norm 1": lambda x: LA.vector_norm(x, ord=1),
    "vector_norm inf": lambda x: LA.vector_norm(x, ord=np.inf),
    "norm": lambda x: snp.linalg.norm(x),
    "fro": lambda x: LA.matrix_norm(snp.reshape(x, (2, 2))),
    "nuc": lambda x: LA.matrix_norm(snp.reshape(x, (2, 2)), ord="nuc"),
    "spectral": lambda x: LA.matrix_norm(snp.reshape(x, (2, 2)), ord=2),
    "min singular": lambda x: LA.matrix_norm(snp.reshape(x, (2, 2)), ord=-2),
    "std": lambda x: snp.std(x),
    "hypot": lambda x: snp.sum(snp.hypot(x[:2], x[2:])),
    "hypot of one": lambda x: snp.sum(snp.hypot(x, 0.0)),
}


# the kinks: zeros for every function, and any constant vector for std
@pytest.mark.parametrize("name, at", [(n, "zeros") for n in SCALAR_FNS] + [("std", "constant")])
def test_all_derivatives_at_the_kink_are_zero(name, at):
    f = SCALAR_FNS[name]
    x = snp.zeros(4, snp.float64) if at == "zeros" else snp.full((4,), 2.5, snp.float64)
    t = snp.asarray(np.array([1.0, -2.0, 0.5, 3.0]))
    g = st.grad(f)(x)
    jv = st.jvp(f, (x,), (t,))[1]
    h_rev = st.jacrev(st.grad(f))(x)
    h_fwd = st.jacfwd(st.grad(f))(x)
    hvp = st.jvp(st.grad(f), (x,), (t,))[1]
    for label, v in [("grad", g), ("jvp", jv), ("hessian rev", h_rev), ("hessian fwd", h_fwd),
                     ("hvp", hvp)]:
        v = np.asarray(v)
        assert np.isfinite(v).all() and (v == 0).all(), (name, label, v)
    assert float(f(x)) == 0.0
    # compiled: the same
    assert (np.asarray(st.compile(st.grad(f))(x)) == 0).all()


@pytest.mark.parametrize("name", list(SCALAR_FNS))
def test_smooth_away_from_kinks(name):
    x = snp.asarray(np.array([0.7, -1.3, 2.1, 0.4]))
    check_grads(SCALAR_FNS[name], (x,), order=2, atol=1e-5, rtol=1e-5)


def test_nuclear_norm_of_a_singular_matrix_drops_the_null_space():
    rng = np.random.default_rng(1)
    u, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    v, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    s = np.array([3.0, 1.0, 0.0])
    a = u[:, :3] * s @ v.T
    g = np.asarray(st.grad(lambda m: LA.matrix_norm(m, ord="nuc"))(snp.asarray(a)))
    want = u[:, :2] @ v[:, :2].T                      # U_r V_r^T: the minimum-norm subgradient
    np.testing.assert_allclose(g, want, atol=1e-12)
    t = rng.normal(size=(4, 3))
    jv = float(st.jvp(lambda m: LA.matrix_norm(m, ord="nuc"), (snp.asarray(a),),
                      (snp.asarray(t),))[1])
    assert jv == pytest.approx(float(np.sum(want * t)), abs=1e-12)
    # ord=-2 of a singular matrix (smallest singular value 0): derivative 0
    g2 = np.asarray(st.grad(lambda m: LA.matrix_norm(m, ord=-2))(snp.asarray(a[:3])))
    assert (g2 == 0).all()
