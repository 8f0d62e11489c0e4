"""eig / eigvals, lstsq, cond, tensorsolve / tensorinv and every norm order: values against NumPy
and closed forms on hard inputs, documented conventions (gauge, dtypes, NaN, empty), derivatives
(closed forms, subgradients at zeros and ties), errors, jit and vmap. The generic checks (eager
and staged against NumPy, check_grads order 2, vmap against a loop) come from the opinfos in
tests/opinfo/linalg_general.py."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import starling
import starling.numpy as snp
from starling.test_util import check_grads
from tests.hard_matrices import rnd

LA = snp.linalg
C = (np.float32, np.float64, np.complex64, np.complex128)


def A(x, dtype=None):
    return snp.asarray(np.asarray(x, dtype=dtype))


def tol(dt):
    return 1e-4 if np.dtype(dt) in (np.float32, np.complex64) else 1e-10


def assert_same_spectrum(got, want, atol):
    """The eigenvalues of each matrix agree as multisets (matched by least total distance, so
    that near-ties in sorting order do not matter)."""
    from scipy.optimize import linear_sum_assignment
    n = got.shape[-1]
    for g, w in zip(got.reshape(-1, n), want.reshape(-1, n)):
        d = np.abs(g[:, None] - w[None, :])
        i, j = linear_sum_assignment(d)
        assert d[i, j].max(initial=0) <= atol, (g, w)


def rotation(theta):
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s], [s, c]])


# ---- eig ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", C)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (1, 1)])
def test_eig_decomposes_and_matches_numpy(dt, shape):
    x = rnd(shape, dt, seed=1)
    w, v = LA.eig(A(x))
    want_dt = np.complex64 if np.dtype(dt) in (np.float32, np.complex64) else np.complex128
    assert w.dtype == want_dt and v.dtype == want_dt
    w, v = np.asarray(w, np.complex128), np.asarray(v, np.complex128)
    x64 = x.astype(np.complex128)
    scale = np.abs(x64).max()
    np.testing.assert_allclose(x64 @ v, v * w[..., None, :], atol=tol(dt) * 10 * scale)
    assert_same_spectrum(w, np.linalg.eigvals(x64), tol(dt) * 10 * scale)
    np.testing.assert_allclose(np.asarray(LA.eigvals(A(x)), np.complex128), w,
                               atol=tol(dt) * 10 * scale)


def test_eig_gauge_unit_norm_and_largest_entry_real_positive():
    x = rnd((3, 5, 5), np.complex128, seed=2)
    v = np.asarray(LA.eig(A(x)).eigenvectors)
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, rtol=1e-12)
    piv = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
    np.testing.assert_allclose(piv.imag, 0, atol=1e-15)
    assert (piv.real > 0).all()


def test_eig_real_input_gives_conjugate_pairs():
    # eigenvalues 2 and 0.5 +- 1.5i: real input, complex output with a conjugate pair
    x = np.array([[2.0, 0, 0], [0, 0.5, -1.5], [0, 1.5, 0.5]])
    q = np.linalg.qr(rnd((3, 3), seed=3))[0]
    x = q @ x @ q.T
    w, v = LA.eig(A(x))
    w, v = np.asarray(w), np.asarray(v)
    np.testing.assert_allclose(np.sort_complex(w), [0.5 - 1.5j, 0.5 + 1.5j, 2], atol=1e-12)
    i, j = np.flatnonzero(w.imag > 0)[0], np.flatnonzero(w.imag < 0)[0]
    np.testing.assert_allclose(w[i], np.conj(w[j]), atol=1e-14)
    np.testing.assert_allclose(v[:, i], np.conj(v[:, j]), atol=1e-14)
    k = np.flatnonzero(w.imag == 0)[0]
    np.testing.assert_allclose(v[:, k].imag, 0, atol=1e-15)   # a real eigenvalue's vector


def test_eig_rotation_closed_form():
    theta = 0.7
    w, v = LA.eig(A(rotation(theta)))
    w, v = np.asarray(w), np.asarray(v)
    np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(np.exp([1j * theta,
                                                                          -1j * theta])),
                               atol=1e-15)
    for j in range(2):   # (1, -+i) / sqrt(2) up to a phase
        u = np.array([1, -1j if w[j].imag > 0 else 1j]) / math.sqrt(2)
        assert abs(abs(np.vdot(u, v[:, j])) - 1) < 1e-14
    # d/dtheta of the eigenvalues e^(+-i theta) is +-i e^(+-i theta)
    f = lambda t: LA.eigvals(snp.stack([snp.stack([snp.cos(t), -snp.sin(t)]),  # noqa: E731
                                        snp.stack([snp.sin(t), snp.cos(t)])]))
    w0, dw = starling.jvp(f, (A(theta),), (A(1.0),))
    w0 = np.asarray(w0)
    np.testing.assert_allclose(np.asarray(dw), 1j * np.sign(w0.imag) * w0, atol=1e-13)


def test_eig_jordan_block():
    # Defective: LAPACK returns the eigenvalue twice and two (numerically) parallel vectors.
    # Perturbing the corner by eps moves the eigenvalues by +-sqrt(eps) (not differentiable).
    jordan = np.array([[1.0, 1.0], [0.0, 1.0]])
    w, v = LA.eig(A(jordan))
    np.testing.assert_allclose(np.asarray(w), [1, 1], atol=1e-15)
    v = np.asarray(v)
    assert abs(abs(np.vdot(v[:, 0], v[:, 1])) - 1) < 1e-12
    eps = 1e-10
    w = np.asarray(LA.eigvals(A(jordan + [[0, 0], [eps, 0]])))
    np.testing.assert_allclose(np.sort(w.real), [1 - 1e-5, 1 + 1e-5], rtol=1e-9)


@pytest.mark.parametrize("dt", C)
def test_grad_of_sum_of_eigenvalues_is_identity(dt):
    # d trace = trace(V^-1 dA V) = trace(dA): the identity for any diagonalizable input, also
    # with complex-conjugate pairs and repeated eigenvalues (the identity matrix)
    for x in (rnd((2, 4, 4), dt, seed=4), np.eye(3, dtype=dt),
              np.diag([1.0, 1.0 + 1e-6, 3.0]).astype(dt)):
        g = starling.grad(lambda a: snp.sum(snp.real(LA.eigvals(a))))(A(x))
        assert g.dtype == dt
        np.testing.assert_allclose(np.asarray(g), np.broadcast_to(np.eye(x.shape[-1]), x.shape),
                                   atol=tol(dt) * 10)


def test_grad_of_product_of_eigenvalues_is_that_of_det():
    # prod(w) = det(A): Jacobi's formula, d det = det(A) tr(A^-1 dA), so grad = det A^-T
    x = rnd((4, 4), np.complex128, seed=5)
    g = starling.grad(lambda a: snp.real(snp.prod(LA.eigvals(a))))(A(x))
    want = np.linalg.det(x) * np.linalg.inv(x).T
    # the gradient of re(f) for holomorphic f under the non-conjugating convention: f'(A)
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-9, atol=1e-12)


def test_eig_check_grads_real_and_complex_batched():
    rng = np.random.default_rng(6)
    sep = np.diag(np.arange(4) * 1.5)
    xr = rng.uniform(-1, 1, (2, 4, 4)) + sep
    xc = xr + 1j * rng.uniform(-1, 1, (2, 4, 4))
    for x in (xr, xc):
        check_grads(LA.eig, [x], order=2)
        check_grads(LA.eigvals, [x], order=2)


def test_eig_real_input_vjp_is_real():
    x = rnd((3, 3), seed=7) + np.diag([0.0, 2.0, 4.0])
    _, vjp = starling.vjp(LA.eig, A(x))
    ct = LA.eig(A(x))
    (g,) = vjp(type(ct)(*(snp.ones_like(c) for c in ct)))
    assert g.dtype == np.float64


def test_eig_nan_matrix_gives_nan_and_leaves_the_stack():
    x = rnd((3, 3, 3), seed=8)
    x[1, 0, 2] = np.nan
    for f in (LA.eig, starling.jit(LA.eig)):
        w, v = f(A(x))
        w, v = np.asarray(w), np.asarray(v)
        assert np.isnan(w[1]).all() and np.isnan(v[1]).all()
        assert_same_spectrum(w[[0, 2]], np.linalg.eigvals(x[[0, 2]]), 1e-12)


def test_eig_non_convergence_gives_nan_for_that_matrix_only(monkeypatch):
    # LAPACK geev rarely fails to converge; simulate it for the matrices whose [0, 0] is 7
    from starling.linalg import general_eigen
    real_geev = general_eigen._geev

    def geev(x, compute_v):
        if (x[..., 0, 0] == 7).any():
            raise np.linalg.LinAlgError("Eigenvalues did not converge")
        return real_geev(x, compute_v)
    monkeypatch.setattr(general_eigen, "_geev", geev)
    x = rnd((2, 3, 3, 3), seed=9)
    x[1, 0, 0, 0] = 7
    for f in (LA.eig, LA.eigvals):
        out = f(A(x))
        w = np.asarray(out[0] if isinstance(out, tuple) else out)
        assert w.shape == (2, 3, 3)
        assert np.isnan(w[1, 0]).all() and not np.isnan(np.delete(w.reshape(6, 3), 3, 0)).any()
        assert_same_spectrum(w[0], np.linalg.eigvals(x[0]), 1e-12)


def test_eig_dtypes_and_empty():
    assert LA.eig(A(np.eye(2, dtype=np.int32))).eigenvalues.dtype == np.complex64
    assert LA.eigvals(A(np.eye(2, dtype=np.float16))).dtype == np.complex64
    w, v = LA.eig(A(np.zeros((2, 0, 0))))
    assert w.shape == (2, 0) and v.shape == (2, 0, 0) and w.dtype == np.complex128


def test_eig_errors():
    with pytest.raises(ValueError, match=r"eig: expected a stack of square matrices .*\(2, 3\)"):
        LA.eig(A(np.ones((2, 3))))
    with pytest.raises(ValueError, match=r"eigvals: expected a stack of matrices .*\(3,\)"):
        LA.eigvals(A(np.ones(3)))


def test_eig_vmap_jit_match_eager():
    x = rnd((4, 4, 3), seed=9)   # the batch on the last axis
    got = starling.vmap(LA.eig, in_axes=2)(A(x))
    for k in range(3):
        want = LA.eig(A(x[..., k]))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g)[k], np.asarray(w), atol=1e-13)
    for g, w in zip(starling.jit(LA.eig)(A(x[..., 0])), LA.eig(A(x[..., 0]))):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-13)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 5), batch=st.lists(st.integers(0, 3), max_size=2),
       cplx=st.booleans(), seed=st.integers(0, 2**16))
def test_eig_hypothesis_shapes(n, batch, cplx, seed):
    x = rnd(tuple(batch) + (n, n), np.complex128 if cplx else np.float64, seed)
    w, v = (np.asarray(o) for o in LA.eig(A(x)))
    assert w.shape == tuple(batch) + (n,) and v.shape == x.shape
    scale = max(1, np.abs(x).max(initial=0))
    np.testing.assert_allclose(x @ v, v * w[..., None, :], atol=1e-10 * scale)


# ---- lstsq -------------------------------------------------------------------------------------

def np_lstsq(a, b, rcond=None):
    m, n = a.shape
    if rcond is None:
        rcond = max(m, n) * np.finfo(a.dtype).eps
    return np.linalg.lstsq(a, b, rcond=rcond)


def assert_lstsq(got, want, rtol=1e-10, atol=1e-12):
    assert len(got) == 4
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", ["tall", "tall_vec", "wide", "square", "rank_deficient_tall",
                                  "rank_deficient_wide", "zero", "complex", "no_rows",
                                  "no_cols"])
def test_lstsq_matches_numpy(case):
    a, b = {
        "tall": (rnd((6, 3), seed=1), rnd((6, 2), seed=2)),
        "tall_vec": (rnd((6, 3), seed=1), rnd((6,), seed=2)),
        "wide": (rnd((3, 6), seed=1), rnd((3, 2), seed=2)),
        "square": (rnd((4, 4), seed=1), rnd((4,), seed=2)),
        "rank_deficient_tall": (np.outer(rnd(6, seed=1), rnd(3, seed=3)), rnd((6, 2), seed=2)),
        "rank_deficient_wide": (np.outer(rnd(3, seed=1), rnd(6, seed=3)), rnd((3,), seed=2)),
        "zero": (np.zeros((5, 3)), rnd((5, 2), seed=2)),
        "complex": (rnd((6, 3), np.complex128, 1), rnd((6, 2), np.complex128, 2)),
        "no_rows": (np.zeros((0, 3)), np.zeros((0, 2))),
        "no_cols": (np.zeros((4, 0)), rnd((4,), seed=2)),
    }[case]
    got = LA.lstsq(A(a), A(b))
    want = np_lstsq(a, b)
    assert_lstsq(got, want)
    assert got.rank.dtype == np.int64


def test_lstsq_rcond():
    a = np.diag([1.0, 1e-3, 1e-9]) @ np.linalg.qr(rnd((3, 3), seed=4))[0]
    b = rnd((3,), seed=5)
    for rcond in (None, 1e-6, 1e-2, -1, 0.0):
        assert_lstsq(LA.lstsq(A(a), A(b), rcond=rcond), np_lstsq(a, b, rcond), rtol=1e-8)
    # negative: machine precision, as LAPACK gelsd
    assert int(LA.lstsq(A(a), A(b), rcond=-1).rank) == 3


def test_lstsq_batched_broadcasts_like_solve():
    a, b = rnd((2, 1, 5, 3), seed=6), rnd((4, 5, 2), seed=7)
    x, res, rank, s = LA.lstsq(A(a), A(b))
    assert x.shape == (2, 4, 3, 2) and res.shape == (2, 4, 2) and rank.shape == (2, 4)
    assert s.shape == (2, 4, 3)
    for i in range(2):
        for j in range(4):
            assert_lstsq((x[i, j], res[i, j], rank[i, j], s[i, j]), np_lstsq(a[i, 0], b[j]))
    # vmap over b alone: one factorization of a for all right-hand sides, same values
    got = starling.vmap(LA.lstsq, in_axes=(None, 0))(A(a[1, 0]), A(b))
    for j in range(4):
        assert_lstsq([np.asarray(o)[j] for o in got], np_lstsq(a[1, 0], b[j]))
    xv = LA.lstsq(A(a), A(b[0, :, 0])).solution   # 1-d b: one vector for every matrix
    assert xv.shape == (2, 1, 3)
    np.testing.assert_allclose(np.asarray(xv)[1, 0], np_lstsq(a[1, 0], b[0, :, 0])[0])


def test_lstsq_residuals_rank_deficient_eager_vs_traced():
    # NumPy (eager) returns empty residuals when rank < n; under jit / vmap the shape must be
    # known before the rank: the residuals of the minimum-norm solution, shape (k,)
    a = np.outer(rnd(5, seed=8), rnd(3, seed=9))
    b = rnd((5, 2), seed=10)
    assert LA.lstsq(A(a), A(b)).residuals.shape == (0,)
    x, res, rank, _ = starling.jit(LA.lstsq)(A(a), A(b))
    xn = np_lstsq(a, b)[0]
    np.testing.assert_allclose(np.asarray(x), xn, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(res), np.sum((b - a @ xn) ** 2, axis=0), rtol=1e-10)
    assert int(rank) == 1
    # one deficient matrix in an eager stack empties them all (as torch.linalg.lstsq)
    stack = np.stack([rnd((5, 3), seed=11), a])
    assert LA.lstsq(A(stack), A(b)).residuals.shape == (2, 0)
    assert starling.vmap(LA.lstsq, in_axes=(0, None))(A(stack), A(b)).residuals.shape == (2, 2)


def test_lstsq_derivative_closed_form():
    # full column rank: x = (A^T A)^-1 A^T b
    a, b = rnd((6, 3), seed=12), rnd((6,), seed=13)
    da, db = rnd((6, 3), seed=14), rnd((6,), seed=15)

    def normal_eq(a, b):
        return LA.solve(snp.matmul(a.mT, a), snp.matmul(a.mT, b))
    _, got = starling.jvp(lambda a, b: LA.lstsq(a, b).solution, (A(a), A(b)), (A(da), A(db)))
    _, want = starling.jvp(normal_eq, (A(a), A(b)), (A(da), A(db)))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9)


@pytest.mark.parametrize("shape", [((6, 3), (6, 2)), ((3, 5), (3,)), ((2, 5, 3), (2, 5, 1))])
def test_lstsq_check_grads_complex(shape):
    sa, sb = shape
    check_grads(lambda a, b: LA.lstsq(a, b), [rnd(sa, np.complex128, 16),
                                              rnd(sb, np.complex128, 17)], order=2)


def test_lstsq_errors():
    with pytest.raises(ValueError, match=r"lstsq: b of shape \(4,\) does not match a of shape "
                                         r"\(3, 2\): expected \(3,\) or \(\.\.\., 3, k\)"):
        LA.lstsq(A(np.ones((3, 2))), A(np.ones(4)))
    with pytest.raises(ValueError, match=r"lstsq: expected a stack of matrices"):
        LA.lstsq(A(np.ones(3)), A(np.ones(3)))
    with pytest.raises(ValueError, match=r"lstsq: .*broadcast"):
        LA.lstsq(A(np.ones((2, 3, 2))), A(np.ones((3, 3, 1))))


@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 5), n=st.integers(1, 5), k=st.integers(0, 2),
       batch=st.lists(st.integers(1, 2), max_size=1), seed=st.integers(0, 2**16))
def test_lstsq_hypothesis_shapes(m, n, k, batch, seed):
    a, b = rnd(tuple(batch) + (m, n), seed=seed), rnd(tuple(batch) + (m, k), seed=seed + 1)
    got = LA.lstsq(A(a), A(b))
    for i in np.ndindex(*batch):
        want = np_lstsq(a[i], b[i])
        res = np.asarray(got.residuals)[i]
        assert_lstsq((np.asarray(got.solution)[i], res if want[1].size else want[1],
                      np.asarray(got.rank)[i], np.asarray(got.singular_values)[i]), want,
                     rtol=1e-8, atol=1e-10)


# ---- cond --------------------------------------------------------------------------------------

P_ALL = [None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc"]


@pytest.mark.parametrize("p", P_ALL)
@pytest.mark.parametrize("dt", C)
def test_cond_matches_numpy(p, dt):
    x = rnd((2, 4, 4), dt, seed=20)
    got = LA.cond(A(x), p)
    assert got.dtype == np.finfo(dt).dtype
    np.testing.assert_allclose(np.asarray(got), np.linalg.cond(x, p), rtol=tol(dt) * 10)


@pytest.mark.parametrize("p", P_ALL)
def test_cond_ill_conditioned_and_singular(p):
    n = 6
    hilbert = 1.0 / (np.arange(n)[:, None] + np.arange(n)[None, :] + 1)
    np.testing.assert_allclose(np.asarray(LA.cond(A(hilbert), p)), np.linalg.cond(hilbert, p),
                               rtol=1e-6)
    # (NumPy's "nuc" raises here: the SVD of its NaN inverse does not converge)
    got = np.asarray(LA.cond(A(np.zeros((3, 3))), p))
    assert got == np.inf and (p == "nuc" or np.linalg.cond(np.zeros((3, 3)), p) == np.inf)
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])   # LU meets an exact zero pivot
    got = float(LA.cond(A(sing), p))
    want = np.inf if p == "nuc" else float(np.linalg.cond(sing, p))
    if p in (-2,):
        assert got < 1e-15 and want < 1e-15
    else:   # inf, or (from the SVD) a huge number, the same as NumPy's
        assert got == want or got > 1e15 and want > 1e15


def test_cond_rectangular_nonfinite_and_batch():
    x = rnd((3, 5), seed=21)
    np.testing.assert_allclose(float(LA.cond(A(x))), np.linalg.cond(x), rtol=1e-12)
    np.testing.assert_allclose(float(LA.cond(A(x.T), -2)), np.linalg.cond(x.T, -2), rtol=1e-12)
    st_ = rnd((3, 3, 3), seed=22)
    st_[0, 1, 1] = np.nan
    st_[1, 0, 0] = np.inf
    for p in P_ALL:
        got = np.asarray(LA.cond(A(st_), p))
        assert np.isnan(got[0]) and got[1] == np.inf
        np.testing.assert_allclose(got[2], np.linalg.cond(st_[2], p), rtol=1e-12)
    assert LA.cond(A(np.ones((0, 2, 2))), 1).shape == (0,)


def test_cond_derivatives():
    x = rnd((3, 3), seed=23) + 3 * np.eye(3)
    for p in P_ALL:
        check_grads(lambda a, p=p: LA.cond(a, p), [x], order=1)
    # cond_2 = s_max / s_min: d = (u1^T dA v1) / s_min - s_max (un^T dA vn) / s_min^2
    u, s, vh = np.linalg.svd(x)
    want = np.outer(u[:, 0], vh[0]) / s[-1] - s[0] * np.outer(u[:, -1], vh[-1]) / s[-1] ** 2
    np.testing.assert_allclose(np.asarray(starling.grad(LA.cond)(A(x))), want, rtol=1e-10)
    # singular: inf with a zero derivative, not NaN
    for p in (None, -2, 1, "fro"):
        g = np.asarray(starling.grad(lambda a, p=p: LA.cond(a, p))(A(np.zeros((2, 2)))))
        np.testing.assert_array_equal(g, 0)


def test_cond_errors():
    with pytest.raises(ValueError, match=r"cond: invalid norm order p=3 \(valid: None, 2"):
        LA.cond(A(np.eye(2)), 3)
    with pytest.raises(LA.LinAlgError, match=r"cond: p=1 needs square matrices .*\(2, 3\)"):
        LA.cond(A(np.ones((2, 3))), 1)
    with pytest.raises(LA.LinAlgError, match=r"cond: not defined on matrices without entries"):
        LA.cond(A(np.ones((0, 0))))
    with pytest.raises(ValueError, match=r"cond: expected a stack of matrices"):
        LA.cond(A(np.ones(3)))


# ---- tensorsolve / tensorinv -------------------------------------------------------------------

def test_tensorinv_is_the_tensordot_inverse():
    a = (rnd((24, 24), seed=24) + 24 * np.eye(24)).reshape(4, 6, 8, 3)
    ia = LA.tensorinv(A(a), ind=2)
    assert ia.shape == (8, 3, 4, 6)
    np.testing.assert_allclose(np.asarray(snp.tensordot(ia, A(a), axes=2)).reshape(24, 24),
                               np.eye(24), atol=1e-12)
    np.testing.assert_allclose(np.asarray(ia), np.linalg.tensorinv(a), rtol=1e-12)


def test_tensorsolve_solves_and_differentiates():
    a = (rnd((6, 6), seed=25) + 6 * np.eye(6)).reshape(2, 3, 3, 2)
    b = rnd((2, 3), seed=26)
    x = LA.tensorsolve(A(a), A(b))
    np.testing.assert_allclose(np.asarray(snp.tensordot(A(a), x, axes=2)), b, atol=1e-12)
    np.testing.assert_allclose(np.asarray(x), np.linalg.tensorsolve(a, b), rtol=1e-12)
    check_grads(LA.tensorsolve, [a, b], order=2)
    at = np.moveaxis(a, (0, 1), (2, 3))   # the (*J) axes first: axes names where they are
    np.testing.assert_allclose(np.asarray(LA.tensorsolve(A(at), A(b), axes=(0, 1))),
                               np.linalg.tensorsolve(at, b, axes=(0, 1)), rtol=1e-12)


def test_tensor_errors():
    with pytest.raises(LA.LinAlgError, match=r"tensorsolve: a of shape \(2, 3\) is not square "
                                             r"as a matrix: its leading dims \(2,\)"):
        LA.tensorsolve(A(np.ones((2, 3))), A(np.ones(2)))
    with pytest.raises(ValueError, match=r"tensorsolve: b of shape \(3,\) must be the leading "
                                         r"part of the shape of a, \(2, 2\)"):
        LA.tensorsolve(A(np.ones((2, 2))), A(np.ones(3)))
    with pytest.raises(ValueError, match=r"tensorsolve: duplicate axis 1"):
        LA.tensorsolve(A(np.ones((2, 2))), A(np.ones(2)), axes=(1, -1))
    with pytest.raises(ValueError, match=r"tensorinv: ind must be a positive integer, got 0"):
        LA.tensorinv(A(np.ones((2, 2))), 0)
    with pytest.raises(TypeError, match=r"tensorinv: ind must be an integer"):
        LA.tensorinv(A(np.ones((2, 2))), 1.5)
    with pytest.raises(LA.LinAlgError, match=r"tensorinv: a of shape \(2, 3\) with ind=1 is not "
                                             r"square"):
        LA.tensorinv(A(np.ones((2, 3))), 1)


# ---- norms: every order NumPy accepts ----------------------------------------------------------

VEC_ORDS = [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5, -1, -1.5]
MAT_ORDS = [None, "fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf]
VECS = {"random": rnd(5, seed=30), "zeros": np.zeros(4), "with_zeros": np.array([0., 3, -4, 0]),
        "nan": np.array([1., np.nan, 2]), "inf": np.array([1., np.inf, 2]),
        "complex": rnd(4, np.complex128, 31), "complex_zero": np.array([1 + 1j, 0, 2 - 1j])}


@pytest.mark.parametrize("ord_", VEC_ORDS)
def test_vector_norm_every_order(ord_):
    for name, v in VECS.items():
        with np.errstate(all="ignore"):
            want = np.linalg.norm(v, ord_)
        np.testing.assert_allclose(float(LA.norm(A(v), ord_)), want, rtol=1e-12,
                                   err_msg=name)
        np.testing.assert_allclose(float(LA.vector_norm(A(v), ord=2 if ord_ is None else ord_)),
                                   want, rtol=1e-12, err_msg=name)
        if np.isfinite(v).all() and (v != 0).all():
            check_grads(lambda x: LA.norm(x, ord_), [v], order=2 if ord_ != 0 else 1)


@pytest.mark.parametrize("ord_", VEC_ORDS)
def test_vector_norm_gradient_at_zeros_is_zero_not_nan(ord_):
    for v in (np.zeros(4), np.array([0., 3, -4, 0]), np.zeros(3, np.complex128)):
        g = np.asarray(starling.grad(lambda x: LA.norm(x, ord_))(A(v)))
        assert np.isfinite(g).all(), (ord_, v, g)
        np.testing.assert_array_equal(g[v == 0], 0)


def test_vector_norm_subgradients_closed_form():
    v = np.array([0., 3, -4, 0])
    g = lambda o: np.asarray(starling.grad(lambda x: LA.norm(x, o))(A(v)))  # noqa: E731
    np.testing.assert_allclose(g(2), [0, 0.6, -0.8, 0])
    np.testing.assert_allclose(g(1), [0, 1, -1, 0])
    np.testing.assert_allclose(g(np.inf), [0, 0, -1, 0])
    # ties of the max share the derivative equally
    np.testing.assert_allclose(np.asarray(starling.grad(lambda x: LA.norm(x, np.inf))(
        A([2.0, -2.0, 1.0]))), [0.5, -0.5, 0])


def test_vector_norm_empty():
    e = A(np.zeros((2, 0)))
    for o, want in [(2, 0.0), (1, 0.0), (np.inf, 0.0), (0, 0.0), (3, 0.0), (-1, np.inf)]:
        got = LA.vector_norm(e, ord=o, axis=1)
        assert got.shape == (2,)
        np.testing.assert_array_equal(np.asarray(got), want)
    assert LA.vector_norm(e, ord=np.inf, axis=1, keepdims=True).shape == (2, 1)
    with pytest.raises(ValueError, match=r"vector_norm: ord=-inf .* empty reduction"):
        LA.vector_norm(e, ord=-np.inf, axis=1)


MATS = {"random": rnd((3, 4), seed=32), "zeros": np.zeros((3, 3)),
        "rank1": np.outer([1., 2, 0], [0, 1., 1]), "inf": np.array([[1., np.inf], [1, 2]]),
        "complex": rnd((3, 3), np.complex128, 33), "ties": np.array([[1., -1], [1, 1]])}


@pytest.mark.parametrize("ord_", MAT_ORDS)
def test_matrix_norm_every_order(ord_):
    for name, m in MATS.items():
        want = np.linalg.norm(m, ord_)
        if ord_ in ("nuc", 2, -2) and not np.isfinite(m).all():
            want = np.nan   # documented: the SVD norms of a non-finite matrix are NaN
        np.testing.assert_allclose(float(LA.norm(A(m), ord_)), want, rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(float(LA.matrix_norm(A(m), ord="fro" if ord_ is None
                                                        else ord_)), want, rtol=1e-12)
        g = np.asarray(starling.grad(lambda x: LA.norm(x, ord_))(A(m)))
        assert np.isfinite(g).all() or not np.isfinite(m).all(), (name, g)
    check_grads(lambda x: LA.norm(x, ord_), [MATS["random"]], order=2)


def test_matrix_norm_nan_and_ties():
    x = A(np.array([[[1., np.nan], [1, 2]], [[3., 0], [0, 4]]]))
    for o in MAT_ORDS:
        got = np.asarray(LA.matrix_norm(x, ord="fro" if o is None else o))
        assert np.isnan(got[0])
        np.testing.assert_allclose(got[1], np.linalg.norm([[3., 0], [0, 4]], o), rtol=1e-12)
    # tied column sums share the derivative; so do tied singular values (basis-free)
    np.testing.assert_allclose(np.asarray(starling.grad(lambda a: LA.norm(a, 1))(
        A(MATS["ties"]))), [[0.5, -0.5], [0.5, 0.5]])
    np.testing.assert_allclose(np.asarray(starling.grad(lambda a: LA.norm(a, 2))(
        A(np.eye(3)))), np.eye(3) / 3, atol=1e-15)
    np.testing.assert_array_equal(np.asarray(starling.grad(lambda a: LA.norm(a, "fro"))(
        A(np.zeros((2, 2))))), 0)


def test_matrix_norm_empty():
    for shape in [(0, 3), (2, 0, 3), (3, 0)]:
        for o in ("fro", "nuc", 2, 1, np.inf):
            got = LA.matrix_norm(A(np.zeros(shape)), ord=o)
            assert got.shape == shape[:-2]
            np.testing.assert_array_equal(np.asarray(got), 0)
    with pytest.raises(ValueError, match=r"matrix_norm: ord=-2 .* without entries"):
        LA.matrix_norm(A(np.zeros((0, 3))), ord=-2)
    with pytest.raises(ValueError, match=r"matrix_norm: ord=-1 .* without any"):
        LA.matrix_norm(A(np.zeros((3, 0))), ord=-1)


# ---- jit against eager -------------------------------------------------------------------------

JIT_CASES = [
    ("eig", lambda x, b: LA.eig(x)), ("eigvals", lambda x, b: LA.eigvals(x)),
    ("lstsq", lambda x, b: LA.lstsq(x, b)),
    ("lstsq_wide", lambda x, b: LA.lstsq(x[:, :3], b[:, :3])),
    ("tensorsolve", lambda x, b: LA.tensorsolve(x, b[:, 0])),
    ("tensorinv", lambda x, b: LA.tensorinv(snp.reshape(x, (2, 2, 4)), ind=2)),
] + [(f"cond {p}", lambda x, b, p=p: LA.cond(x, p)) for p in P_ALL] \
  + [(f"norm {o}", lambda x, b, o=o: LA.norm(x, o)) for o in MAT_ORDS] \
  + [(f"vector_norm {o}", lambda x, b, o=o: LA.vector_norm(x, ord=o, axis=0))
     for o in VEC_ORDS if o is not None]


@pytest.mark.parametrize("name,fn", JIT_CASES, ids=[c[0] for c in JIT_CASES])
def test_jit_matches_eager(name, fn):
    x, b = A(rnd((2, 4, 4), seed=40) + 4 * np.eye(4)), A(rnd((2, 4, 2), seed=41))
    if name.startswith(("tensor", "cond", "norm", "vector")):
        x, b = x[0], b[0]
    got, want = starling.jit(fn)(x, b), fn(x, b)
    for g, w in zip(starling.tree.leaves(got), starling.tree.leaves(want)):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-14)
