"""starling.linalg on hard matrices (tests/hard_matrices.py): LAPACK-style scaled residuals and
orthogonality for eigh / svd / qr / cholesky, det / slogdet against closed forms, and gradients
at repeated eigenvalues / singular values (finite, and exact for basis-invariant losses, against
finite differences of NumPy). Hermitian-input gradients are symmetric."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import starling
import starling.numpy as snp
from starling import linalg as LA
from tests import hard_matrices as HM

EPS = np.finfo(np.float64).eps
MATS = HM.named(np.random.default_rng(0))
SYM = {k: v for k, v in MATS.items() if "sym" in k}


def N(x):
    return np.asarray(x)


def _norm(a):
    return max(np.linalg.norm(a, 2), np.finfo(float).tiny)


def _unitary_similar(a, rng):
    """``D a D^H`` with a random diagonal unitary ``D``: Hermitian when ``a`` is symmetric,
    with the same eigenvalues and singular values."""
    d = np.exp(1j * rng.uniform(0, 2 * np.pi, a.shape[-1]))
    return (d[:, None] * a) * np.conj(d)[None, :]


@pytest.mark.parametrize("cplx", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("name", sorted(SYM))
def test_eigh_scaled_residuals(name, cplx):
    a = SYM[name]
    if cplx:
        a = _unitary_similar(a, np.random.default_rng(1))
    n = a.shape[-1]
    w, v = (N(o) for o in LA.eigh(snp.asarray(a)))
    scale = n * EPS * _norm(a)
    assert np.linalg.norm(a @ v - v * w, 2) <= 10 * scale + np.finfo(float).tiny
    assert np.linalg.norm(np.conj(v.T) @ v - np.eye(n), 2) <= 10 * n * EPS
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=0, atol=10 * scale)
    assert np.all(np.diff(w) >= 0)


@pytest.mark.parametrize("name", sorted(MATS))
def test_svd_and_qr_scaled_residuals(name):
    a = MATS[name]
    m, n = a.shape
    u, s, vh = (N(o) for o in LA.svd(snp.asarray(a)))
    scale = max(m, n) * EPS * _norm(a)
    assert np.linalg.norm(a - (u * s) @ vh, 2) <= 10 * scale + np.finfo(float).tiny
    assert np.linalg.norm(u.T @ u - np.eye(m), 2) <= 10 * m * EPS
    assert np.linalg.norm(vh @ vh.T - np.eye(n), 2) <= 10 * n * EPS
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=0, atol=10 * scale)
    q, r = (N(o) for o in LA.qr(snp.asarray(a)))
    assert np.linalg.norm(a - q @ r, 2) <= 10 * scale + np.finfo(float).tiny
    assert np.linalg.norm(q.T @ q - np.eye(n), 2) <= 10 * n * EPS
    assert np.all(np.tril(r, -1) == 0)


@pytest.mark.parametrize("name", ["hilbert8 sym", "graded8 sym", "identity4 sym",
                                  "size1 sym", "huge sym", "tiny sym"])
def test_cholesky_of_positive_definite_hard_matrices(name):
    a = SYM[name]
    if name in ("huge sym", "tiny sym"):   # shift to positive definite, keeping the scale
        a = a + np.eye(a.shape[-1]) * np.abs(a).max()
    lo = N(LA.cholesky(snp.asarray(a)))
    n = a.shape[-1]
    assert np.all(np.triu(lo, 1) == 0)
    assert np.linalg.norm(a - lo @ lo.T, 2) <= 10 * n * EPS * _norm(a)


def test_det_and_slogdet_closed_forms():
    n, theta = 12, 1.2
    k = HM.kahan(n, theta)
    logdet = np.sum(np.arange(n)) * np.log(np.sin(theta))   # det = prod sin(theta)^i
    sign, la = LA.slogdet(snp.asarray(k))
    assert float(sign) == 1.0
    np.testing.assert_allclose(float(la), logdet, rtol=1e-13)
    np.testing.assert_allclose(float(LA.det(snp.asarray(k))), np.exp(logdet), rtol=1e-12)
    # Hilbert: det(H_n) = c_n^4 / c_{2n} with c_n = prod_{i<n} i! (Hilbert 1894)
    from math import factorial, prod
    c = [prod(factorial(i) for i in range(j)) for j in range(9)]
    np.testing.assert_allclose(float(LA.det(snp.asarray(HM.hilbert(4)))),
                               c[4] ** 4 / prod(factorial(i) for i in range(8)), rtol=1e-9)
    assert float(LA.det(snp.asarray(np.zeros((3, 3))))) == 0.0
    assert float(LA.det(snp.zeros((0, 0)))) == 1.0


# ---- gradients at repeated eigenvalues / singular values ---------------------------------------

def _fd_sym(f, x, eps=1e-6):
    """Central differences of ``f((x + x^T) / 2)``: the gradient along symmetric directions, the
    convention of the Hermitian-input functions (JAX / PyTorch)."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        g[idx] = (f((x + e + (x + e).T) / 2) - f((x - e + (x - e).T) / 2)) / (2 * eps)
    return g


@pytest.mark.parametrize("w", [[1, 1, 1, 1], [2, 2, 5, 5, 5], [0, 0, 1]])
def test_eigenvalue_sums_differentiable_at_repeated_eigenvalues(w):
    a = HM.with_eigenvalues(w, np.random.default_rng(2))
    n = len(w)
    for f in (lambda m: snp.sum(LA.eigvalsh(m)),
              lambda m: snp.sum(LA.eigh(m).eigenvalues * 2.0),
              lambda m: snp.sum(LA.eigh(m).eigenvalues ** 2)):
        g = N(starling.grad(f)(snp.asarray(a)))
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, g.T, atol=1e-12)
    # sum(w^2) = ||A||_F^2: gradient 2A, at any multiplicity
    g = N(starling.grad(lambda m: snp.sum(LA.eigh(m).eigenvalues ** 2))(snp.asarray(a)))
    np.testing.assert_allclose(g, 2 * a, atol=1e-10)
    np.testing.assert_allclose(N(starling.grad(lambda m: snp.sum(LA.eigvalsh(m)))(
        snp.asarray(a))), np.eye(n), atol=1e-12)


def test_eigenspace_projector_gradient_at_a_repeated_eigenvalue():
    rng = np.random.default_rng(3)
    a = HM.with_eigenvalues([1.0, 3.0, 3.0, 6.0], rng)
    g_w = rng.standard_normal((4, 4))

    def f(m):  # the projector onto the eigenspace of 3: basis-invariant
        v = LA.eigh(m).eigenvectors[:, 1:3]
        return snp.sum(snp.asarray(g_w) * (v @ v.T))

    def f_np(m):
        v = np.linalg.eigh(m)[1][:, 1:3]
        return np.sum(g_w * (v @ v.T))
    g = N(starling.grad(f)(snp.asarray(a)))
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, _fd_sym(f_np, a), rtol=1e-6, atol=1e-7)


def test_svd_gradients_at_repeated_singular_values():
    rng = np.random.default_rng(4)
    q = HM.with_singular_values([1.0, 1.0, 1.0], rng)     # orthogonal: all s equal
    fro = N(starling.grad(lambda m: snp.sqrt(snp.sum(LA.svd(m).S ** 2)))(snp.asarray(q)))
    np.testing.assert_allclose(fro, q / np.sqrt(3), atol=1e-12)
    nuc = N(starling.grad(lambda m: snp.sum(LA.svdvals(m)))(snp.asarray(q)))
    np.testing.assert_allclose(nuc, q, atol=1e-12)          # d||A||_* = U V^T
    a = HM.with_singular_values([3.0, 3.0, 1.0], rng, m=4)
    g_w = rng.standard_normal((4, 4))

    def f(m):  # the projector onto the left singular space of 3: basis-invariant
        u = LA.svd(m, full_matrices=False).U[:, :2]
        return snp.sum(snp.asarray(g_w) * (u @ u.T))

    def f_np(m):
        u = np.linalg.svd(m, full_matrices=False)[0][:, :2]
        return np.sum(g_w * (u @ u.T))
    g = N(starling.grad(f)(snp.asarray(a)))
    eps = 1e-6
    fd = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[idx] = eps
        fd[idx] = (f_np(a + e) - f_np(a - e)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)


def test_hermitian_input_gradients_are_symmetric_and_ignore_the_unread_triangle():
    rng = np.random.default_rng(5)
    a = HM.with_eigenvalues([1.0, 2.0, 4.0], rng) + 4 * np.eye(3)
    garbage = a + np.triu(rng.standard_normal((3, 3)), 1) * 100
    for f in (lambda m: snp.sum(LA.cholesky(m) ** 3),
              lambda m: snp.sum(LA.eigh(m).eigenvectors[:, 0] ** 2 * snp.arange(3.0)),
              lambda m: snp.sum(LA.eigvalsh(m) ** 3)):
        g = N(starling.grad(f)(snp.asarray(garbage)))
        np.testing.assert_allclose(g, g.T, atol=1e-12)
        np.testing.assert_allclose(g, N(starling.grad(f)(snp.asarray(a))), atol=1e-12)


@given(batch=st.lists(st.integers(0, 3), max_size=2), n=st.integers(0, 6),
       seed=st.integers(0, 2 ** 16))
def test_eigh_svd_batched_residuals_hypothesis(batch, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(tuple(batch) + (n, n))
    a = x + np.swapaxes(x, -1, -2)
    w, v = (N(o) for o in LA.eigh(snp.asarray(a)))
    u, s, vh = (N(o) for o in LA.svd(snp.asarray(x)))
    if a.size:
        scale = max(n, 1) * EPS * max(np.abs(a).max(), 1e-300) * n
        assert np.abs(a @ v - v * w[..., None, :]).max() <= 10 * scale
        assert np.abs((u * s[..., None, :]) @ vh - x).max() <= 10 * scale
    assert w.shape == tuple(batch) + (n,) and s.shape == tuple(batch) + (n,)


def _sym_in(f):
    return lambda m: f((m + snp.matrix_transpose(m)) * 0.5)


# Second derivatives, both modes, on hard but differentiable inputs (distinct eigenvalues /
# singular values, well enough conditioned for float64 finite differences).
GRAD_CASES = {
    "det hilbert4": (LA.det, HM.hilbert(4) * 10, 1e-4),
    "slogdet kahan6": (lambda m: LA.slogdet(m).logabsdet, HM.kahan(6), 1e-5),
    "inv graded4": (LA.inv, HM.graded(4, np.random.default_rng(6), 0.3), 1e-4),
    "solve kahan5": (lambda m: LA.solve(m, snp.ones((5, 2))), HM.kahan(5), 1e-4),
    "cholesky hilbert4": (_sym_in(LA.cholesky), HM.hilbert(4) + 0.1 * np.eye(4), 1e-4),
    "eigh graded4": (_sym_in(lambda m: tuple(LA.eigh(m))),
                     HM.graded(4, np.random.default_rng(9), 0.5), 1e-5),
    "eigvalsh clustered": (_sym_in(LA.eigvalsh),
                           HM.with_eigenvalues([1, 1.1, 1.2, 5], np.random.default_rng(7)), 1e-5),
    # (not Kahan's: its singular vectors have near-ties of their largest entries, where the
    # sign gauge jumps and finite differences across the jump are meaningless)
    "svd graded tall": (lambda m: tuple(LA.svd(m, full_matrices=False)),
                        HM.with_singular_values([3, 1, 0.1, 0.01], np.random.default_rng(10), m=6),
                        1e-4),
    "qr graded4": (lambda m: tuple(LA.qr(m)), HM.graded(4, np.random.default_rng(8), 0.5), 1e-4),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_second_derivatives_on_hard_matrices(name):
    from starling.test_util import check_grads
    f, x, tol = GRAD_CASES[name]
    check_grads(f, [x], order=2, modes=("fwd", "rev"), atol=tol, rtol=tol)


@pytest.mark.parametrize("n", [3, 70])   # the Jacobi kernel and LAPACK's path
def test_non_finite_matrices_give_nan_for_themselves_only(n):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, n, n))
    x[1, n - 1, 0] = np.nan
    sym = x + np.swapaxes(x, -1, -2)
    sym[2] = np.eye(n) + np.triu(np.full((n, n), np.inf), 1)   # inf only where eigh does not read
    for out in (LA.svdvals(snp.asarray(x)), LA.svd(snp.asarray(x)).U,
                LA.eigvalsh(snp.asarray(sym)), LA.eigh(snp.asarray(sym)).eigenvectors):
        out = N(out)
        assert np.isnan(out[1]).all()
        assert np.isfinite(out[0]).all() and np.isfinite(out[2]).all()
    np.testing.assert_allclose(N(LA.eigvalsh(snp.asarray(sym)))[2], np.ones(n))
    np.testing.assert_allclose(N(LA.svdvals(snp.asarray(x)))[0],
                               np.linalg.svd(x[0], compute_uv=False), rtol=1e-12)


def test_cholesky_and_pinv_of_non_finite_matrices():
    # potrf's comparisons let NaN pivots through: a non-finite lower triangle is a failure
    # (all-NaN factor, info, check_errors), the unread triangle does not matter; pinv of such
    # a matrix is NaN for it alone (NumPy's SVD raised for the whole stack)
    a = np.array([[4.0, 1, 0], [1, 3, 1], [0, 1, 2]])
    b = a.copy()
    b[2, 1] = np.nan
    c = a.copy()
    c[0, 2] = np.inf                                   # not read by the lower factorization
    stack = snp.asarray(np.stack([a, a * np.nan, b, c]))
    low = N(LA.cholesky(stack))
    assert np.isnan(low[1]).all() and np.isnan(low[2]).all()
    np.testing.assert_allclose(low[0], np.linalg.cholesky(a))
    np.testing.assert_allclose(low[3], np.linalg.cholesky(a))
    np.testing.assert_array_equal(N(LA.cholesky_ex(stack)[1]), [0, 1, 3, 0])
    with pytest.raises(LA.LinAlgError, match=r"cholesky: .*leading minor of order 3"):
        LA.cholesky(snp.asarray(b), check_errors=True)
    p = N(LA.pinv(snp.asarray(np.stack([a, a * np.nan]))))
    assert np.isnan(p[1]).all()
    np.testing.assert_allclose(p[0], np.linalg.pinv(a), rtol=1e-12)
