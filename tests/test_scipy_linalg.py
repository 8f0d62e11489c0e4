"""``starling.scipy.linalg`` against SciPy: SciPy's conventions (upper Cholesky, 0-based LU
pivots, trans=, generalized eigh, qr modes), stacks, derivatives, vmap and compile."""
import numpy as np
import pytest
import scipy.linalg as sl

import starling as st
import starling.numpy as snp
from starling.scipy import linalg as sla
from starling.test_util import check_grads

RNG = np.random.default_rng(0)


def spd(n, k=None):
    a = RNG.normal(size=(n, n) if k is None else (k, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def close(got, want, tol=1e-10):
    np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("lower", [False, True])
def test_cholesky_cho_factor_cho_solve(lower):
    a = spd(4)
    close(sla.cholesky(a, lower=lower), sl.cholesky(a, lower=lower))
    b = RNG.normal(size=(4, 2))
    cf = sla.cho_factor(a, lower=lower)
    assert cf[1] is lower
    close(sla.cho_solve(cf, b), sl.cho_solve(sl.cho_factor(a, lower=lower), b))
    close(sla.cho_solve(cf, b[:, 0]), np.linalg.solve(a, b[:, 0]))


def test_lu_family_matches_scipy_conventions():
    a = RNG.normal(size=(5, 5))
    p, l_, u = sla.lu(a)
    wp, wl, wu = sl.lu(a)
    close(p, wp)
    close(l_, wl)
    close(u, wu)
    pl, u2 = sla.lu(a, permute_l=True)
    close(pl, wp @ wl)
    lu_, piv = sla.lu_factor(a)
    wlu, wpiv = sl.lu_factor(a)
    close(lu_, wlu)
    np.testing.assert_array_equal(np.asarray(piv), wpiv)
    b = RNG.normal(size=(5, 3))
    for trans in (0, 1, 2):
        close(sla.lu_solve((lu_, piv), b, trans=trans), sl.lu_solve((wlu, wpiv), b, trans=trans))
    c = a + 1j * RNG.normal(size=(5, 5))
    clu = sla.lu_factor(c)
    for trans in (1, 2):
        close(sla.lu_solve(clu, b, trans=trans), sl.lu_solve(sl.lu_factor(c), b, trans=trans))
    with pytest.raises(ValueError, match="trans"):
        sla.lu_solve((lu_, piv), b, trans=3)


@pytest.mark.parametrize("trans", [0, 1, 2, "T"])
@pytest.mark.parametrize("lower", [False, True])
def test_solve_triangular(trans, lower):
    a = np.triu(RNG.normal(size=(4, 4))) + 3 * np.eye(4) + 0.5j * np.triu(RNG.normal(size=(4, 4)))
    a = a.T if lower else a
    b = RNG.normal(size=(4, 2))
    for unit in (False, True):
        close(sla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit),
              sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit))
    close(sla.solve_triangular(a, b[:, 1], trans=trans, lower=lower),
          sl.solve_triangular(a, b[:, 1], trans=trans, lower=lower))


def test_solve_assume_a_and_transposed():
    a, b = spd(4), RNG.normal(size=(4,))
    for assume in ("gen", "sym", "pos"):
        close(sla.solve(a, b, assume_a=assume), sl.solve(a, b, assume_a=assume))
    g = RNG.normal(size=(4, 4))
    close(sla.solve(g, b, transposed=True), sl.solve(g, b, transposed=True))
    with pytest.raises(ValueError, match="assume_a"):
        sla.solve(a, b, assume_a="banded")


def test_eigh_generalized_and_subsets():
    a = RNG.normal(size=(5, 5))
    a = a + a.T
    b = spd(5)
    w, v = sla.eigh(a, b)
    ww = sl.eigh(a, b, eigvals_only=True)
    close(w, ww, 1e-9)
    v = np.asarray(v)
    close(v.T @ b @ v, np.eye(5), 1e-9)                  # b-orthonormal
    close(a @ v, b @ v * np.asarray(w), 1e-9)
    for lower in (True, False):
        close(sla.eigh(a, lower=lower, eigvals_only=True), sl.eigh(a, lower=lower,
                                                                     eigvals_only=True))
    sub = sla.eigh(a, eigvals_only=True, subset_by_index=(1, 3))
    close(sub, sl.eigh(a, eigvals_only=True, subset_by_index=(1, 3)))
    with pytest.raises(ValueError, match="subset_by_value"):
        sla.eigh(a, subset_by_value=(0, 1))
    with pytest.raises(ValueError, match="lo <= hi"):
        sla.eigh(a, subset_by_index=(3, 9))


def test_eigh_tridiagonal():
    d, e = RNG.normal(size=6), RNG.normal(size=5)
    close(sla.eigh_tridiagonal(d, e, eigvals_only=True), sl.eigh_tridiagonal(d, e, True))
    w, v = sla.eigh_tridiagonal(d, e)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    close(t @ np.asarray(v), np.asarray(v) * np.asarray(w))
    close(sla.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(2, 4)),
          sl.eigh_tridiagonal(d, e, True, select="i", select_range=(2, 4)))
    with pytest.raises(ValueError, match="select"):
        sla.eigh_tridiagonal(d, e, select="v", select_range=(0, 1))
    with pytest.raises(ValueError, match="n - 1"):
        sla.eigh_tridiagonal(d, e[:3])


def test_svd_qr_polar_expm_det_inv():
    a = RNG.normal(size=(5, 3))
    close(sla.svd(a, compute_uv=False), sl.svd(a, compute_uv=False))
    u, s, vh = sla.svd(a, full_matrices=False)
    close(np.asarray(u) * np.asarray(s) @ np.asarray(vh), a)
    q, r = sla.qr(a)
    assert q.shape == (5, 5) and r.shape == (5, 3)
    close(np.asarray(q) @ np.asarray(r), a)
    q, r = sla.qr(a, mode="economic")
    assert q.shape == (5, 3) and r.shape == (3, 3)
    (r_only,) = sla.qr(a, mode="r")
    close(np.abs(np.asarray(r_only)), np.abs(sl.qr(a, mode="r")[0]))
    with pytest.raises(ValueError, match="pivoting"):
        sla.qr(a, pivoting=True)
    m = RNG.normal(size=(4, 4))
    for side in ("right", "left"):
        up, pp = sla.polar(m, side=side)
        wu, wp = sl.polar(m, side=side)
        close(up, wu, 1e-9)
        close(pp, wp, 1e-9)
    close(sla.expm(m), sl.expm(m), 1e-12)
    e = RNG.normal(size=(4, 4))
    ex, fr = sla.expm_frechet(m, e)
    wex, wfr = sl.expm_frechet(m, e)
    close(ex, wex, 1e-12)
    close(fr, wfr, 1e-11)
    close(sla.det(m), sl.det(m))
    close(sla.inv(m), sl.inv(m))


def test_sqrtm_and_sylvester_values_and_derivatives():
    m = RNG.normal(size=(4, 4))
    y = np.asarray(sla.sqrtm(m))
    assert y.dtype == np.complex128
    close(y @ y, m)
    close(y, sl.sqrtm(m.astype(complex)))
    spdm = spd(3)
    close(sla.sqrtm(spdm), sl.sqrtm(spdm))
    a, b, c = RNG.normal(size=(3, 3)), RNG.normal(size=(2, 2)), RNG.normal(size=(3, 2))
    close(sla.solve_sylvester(a, b, c), sl.solve_sylvester(a, b, c))
    check_grads(sla.solve_sylvester, tuple(snp.asarray(x) for x in (a, b, c)), order=2)
    check_grads(lambda x: snp.real(sla.sqrtm(x)), (snp.asarray(spdm),), order=2, atol=1e-5,
                rtol=1e-5)
    # a stack, with one singular equation: NaN for it alone
    aa = np.stack([a, np.zeros((3, 3))])
    bb = np.stack([b, np.zeros((2, 2))])
    out = np.asarray(sla.solve_sylvester(aa, bb, np.stack([c, c])))
    close(out[0], sl.solve_sylvester(a, b, c))
    assert np.isnan(out[1]).all()


def test_schur_eager_compiled_vmapped():
    m = RNG.normal(size=(4, 4))
    for output in ("real", "complex"):
        t, z = sla.schur(m, output=output)
        wt, wz = sl.schur(m, output=output)
        close(t, wt)
        close(z, wz)
    t, z = st.compile(sla.schur)(m)
    close(np.asarray(z) @ np.asarray(t) @ np.asarray(z).T, m)
    ms = RNG.normal(size=(3, 4, 4))
    ts, zs = st.vmap(sla.schur)(ms)
    for i in range(3):
        close(ts[i], sl.schur(ms[i])[0])
    with pytest.raises(TypeError, match="cannot be differentiated"):
        st.grad(lambda x: snp.sum(sla.schur(x)[0]))(snp.asarray(m))
    with pytest.raises(ValueError, match="output"):
        sla.schur(m, output="x")


def test_block_diag_and_toeplitz():
    a, b = np.ones((2, 2)), np.arange(3.0)
    close(sla.block_diag(a, b, 5.0), sl.block_diag(a, b, 5.0))
    assert sla.block_diag().shape == (1, 0)
    c, r = np.array([1.0, 2, 3]), np.array([1.0, 4, 5, 6])
    close(sla.toeplitz(c, r), sl.toeplitz(c, r))
    cc = np.array([1.0, 2 + 1j, 3])
    close(sla.toeplitz(cc), sl.toeplitz(cc))
    close(st.vmap(sla.toeplitz)(np.stack([c, 2 * c])),
          np.stack([sl.toeplitz(c), sl.toeplitz(2 * c)]))


def test_stacks_transforms_compile():
    a = spd(3, k=2)
    b = RNG.normal(size=(2, 3, 2))

    def f(a, b):
        return sla.cho_solve(sla.cho_factor(a), b)
    want = np.stack([sl.cho_solve(sl.cho_factor(a[i]), b[i]) for i in range(2)])
    close(f(a, b), want)
    close(st.compile(f)(a, b), want)
    close(st.vmap(f)(a, b), want)
    check_grads(lambda a, b: sla.solve_triangular(a, b, lower=True, trans=1),
                (snp.asarray(np.tril(a[0])), snp.asarray(b[0])), order=2)
    bpd = spd(3)
    check_grads(lambda a: sla.eigh((a + a.T) / 2, bpd)[0], (snp.asarray(a[0]),), order=2,
                atol=1e-5, rtol=1e-5)
