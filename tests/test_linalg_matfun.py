"""Tests of the matrix functions of starling.linalg: matrix_exp / expm_frechet, matrix_sqrth,
polar, and matrix_power on batches. References: SciPy (expm, expm_frechet, sqrtm, polar), closed
forms, finite differences (check_grads), Python loops (vmap) and eager runs (jit)."""
import ml_dtypes
import numpy as np
import pytest
import scipy.linalg as sl
from hypothesis import given
from hypothesis import strategies as st

import starling
import starling.numpy as snp
from starling import linalg as LA
from starling.test_util import check_grads

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 2e-5, np.complex64: 2e-5, np.float64: 1e-12, np.complex128: 1e-12}


def A(x):
    return snp.asarray(np.asarray(x))


def N(x):
    return np.asarray(x)


def rnd(shape, dtype=np.float64, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return (scale * x).astype(dtype)


def spd(n, dtype=np.float64, seed=0, batch=(), shift=1.0):
    x = rnd(batch + (n, n), dtype, seed)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) / n + shift * np.eye(n)).astype(dtype)


def per_matrix(fn, x, *more):
    """``fn`` applied to each matrix of the stacks (the loop reference)."""
    x = np.asarray(x)
    flat = [np.asarray(m).reshape((-1,) + x.shape[-2:]) for m in (x,) + more]
    outs = [fn(*ms) for ms in zip(*flat)]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([o[k] for o in outs]).reshape(x.shape[:-2] + outs[0][k].shape)
                     for k in range(len(outs[0])))
    return np.stack(outs).reshape(x.shape[:-2] + outs[0].shape)


def close(got, want, tol):
    got, want = np.asarray(got), np.asarray(want)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


# ---- matrix_exp --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [1e-3, 0.2, 1.0, 4.0, 30.0])
def test_matrix_exp_matches_scipy(dtype, scale):
    x = rnd((3, 4, 4), dtype, seed=1, scale=scale / 4)
    got = LA.matrix_exp(A(x))
    assert got.dtype == dtype and got.shape == x.shape
    want = sl.expm(x.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64))
    # exp's condition number grows with ||x||: scale the tolerance with it.
    close(got, want, TOL[dtype] * max(1.0, scale) ** 2)


def test_matrix_exp_closed_forms():
    # nilpotent: the series stops
    nil = np.triu(rnd((4, 4), seed=2), 1)
    want = np.eye(4) + nil + nil @ nil / 2 + nil @ nil @ nil / 6
    close(LA.matrix_exp(A(nil)), want, 1e-15)
    # diagonal
    d = np.array([-20.0, -1.0, 0.0, 0.5, 7.0])
    close(LA.matrix_exp(A(np.diag(d))), np.diag(np.exp(d)), 1e-14)
    # rotation generators, small and large angles (the large one needs squarings)
    for theta in (0.3, 2.0, 40.0):
        g = np.array([[0.0, -theta], [theta, 0.0]])
        c, s = np.cos(theta), np.sin(theta)
        close(LA.matrix_exp(A(g)), [[c, -s], [s, c]], 1e-14 * max(1.0, theta))
    # a similarity of a diagonal matrix with a large norm
    v = np.array([[1.0, 2.0], [0.5, 3.0]])
    x = v @ np.diag([-30.0, 5.0]) @ np.linalg.inv(v)
    close(LA.matrix_exp(A(x)), v @ np.diag(np.exp([-30.0, 5.0])) @ np.linalg.inv(v), 1e-12)


def test_matrix_exp_zero_one_empty():
    close(LA.matrix_exp(A(np.zeros((2, 3, 3)))), np.broadcast_to(np.eye(3), (2, 3, 3)), 0)
    close(LA.matrix_exp(A([[0.7]])), [[np.exp(0.7)]], 1e-15)
    close(LA.matrix_exp(A(np.array([[[1j * np.pi]]]))), [[[-1.0]]], 1e-15)
    for shape in [(0, 0), (2, 0, 0), (0, 3, 3)]:
        got = LA.matrix_exp(A(np.zeros(shape)))
        assert got.shape == shape and got.dtype == np.float64


def test_matrix_exp_non_finite_gives_nan_per_matrix():
    x = np.stack([np.eye(2), [[np.nan, 0.0], [0.0, 1.0]], [[np.inf, 0.0], [0.0, 0.0]]])
    got = N(LA.matrix_exp(A(x)))
    close(got[0], sl.expm(np.eye(2)), 1e-15)
    assert np.isnan(got[1:]).all()
    assert np.isnan(N(starling.jit(LA.matrix_exp)(A(x)))[1:]).all()


def test_matrix_exp_squarings_are_per_matrix():
    # A small matrix batched with a large one gets the result it gets alone (no over-squaring:
    # a shared number of squarings would square it 2^k times too often and lose digits).
    small = rnd((5, 5), seed=3, scale=1e-3)
    big = rnd((5, 5), seed=4, scale=50.0)
    got = N(LA.matrix_exp(A(np.stack([small, big]))))
    np.testing.assert_array_equal(got[0], N(LA.matrix_exp(A(small))))
    np.testing.assert_array_equal(got[1], N(LA.matrix_exp(A(big))))
    close(got[0], sl.expm(small), 1e-15)


def test_matrix_exp_dtype_policy_and_errors():
    assert LA.matrix_exp(A(np.eye(2, dtype=np.int32))).dtype == np.float32
    h = LA.matrix_exp(A(np.eye(2, dtype=np.float16)))
    assert h.dtype == np.float16
    close(N(h).astype(np.float32), np.e * np.eye(2), 1e-3)
    assert LA.matrix_exp(A(np.eye(2, dtype=ml_dtypes.bfloat16))).dtype == ml_dtypes.bfloat16
    with pytest.raises(ValueError, match=r"matrix_exp: expected a stack of square matrices .*"
                                         r"\(2, 3\)"):
        LA.matrix_exp(A(np.ones((2, 3))))
    with pytest.raises(ValueError, match=r"matrix_exp: .*ndim >= 2, got shape \(3,\)"):
        LA.matrix_exp(A(np.ones(3)))
    with pytest.raises(ValueError, match=r"expm_frechet: the direction must match the matrix"):
        LA.expm_frechet(A(np.eye(2)), A(np.eye(3)))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_expm_frechet_matches_scipy(dtype):
    x, e = rnd((2, 4, 4), dtype, seed=5, scale=0.8), rnd((2, 4, 4), dtype, seed=6, scale=100.0)
    want = per_matrix(lambda a, b: sl.expm_frechet(a, b, compute_expm=False), x, e)
    close(LA.expm_frechet(A(x), A(e)), want, 1e-12)
    # closed form: L(x, x) = x exp(x) (x commutes with itself)
    close(LA.expm_frechet(A(x), A(x)), x @ sl.expm(x), 1e-12)


def test_matrix_exp_gradient_closed_form():
    # d tr(exp(x)) = tr(exp(x) dx): the gradient is exp(x)^T
    x = rnd((3, 3), seed=7)
    g = starling.grad(lambda a: snp.trace(LA.matrix_exp(a)))(A(x))
    close(g, sl.expm(x).T, 1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_matrix_exp_check_grads(dtype):
    x = rnd((2, 3, 3), dtype, seed=8)
    check_grads(LA.matrix_exp, (A(x),), order=2)
    big = rnd((3, 3), dtype, seed=9, scale=3.0)      # needs squarings
    check_grads(LA.matrix_exp, (A(big),), order=1, rtol=1e-4)
    check_grads(LA.expm_frechet, (A(x), A(rnd((2, 3, 3), dtype, seed=10))), order=2)


def test_matrix_exp_vmap_and_jit():
    x = rnd((4, 3, 3), seed=11)
    ref = per_matrix(sl.expm, x)
    close(starling.vmap(LA.matrix_exp)(A(x)), ref, 1e-13)
    xt = np.moveaxis(x, 0, 2)
    close(starling.vmap(LA.matrix_exp, in_axes=2, out_axes=1)(A(xt)), np.moveaxis(ref, 0, 1),
          1e-13)
    np.testing.assert_array_equal(N(starling.jit(LA.matrix_exp)(A(x))), N(LA.matrix_exp(A(x))))
    e = rnd((4, 3, 3), seed=12)
    got = starling.vmap(LA.expm_frechet, in_axes=(None, 0))(A(x[0]), A(e))
    close(got, per_matrix(lambda b: sl.expm_frechet(x[0], b, compute_expm=False), e), 1e-13)
    # reverse mode under vmap and jit agree with the loop
    f = starling.grad(lambda a: snp.sum(snp.sin(LA.matrix_exp(a))))
    close(starling.vmap(f)(A(x)), np.stack([N(f(A(m))) for m in x]), 1e-13)
    close(starling.jit(f)(A(x[0])), f(A(x[0])), 1e-15)


@given(batch=st.lists(st.integers(0, 3), max_size=2), n=st.integers(1, 5),
       scale=st.sampled_from([0.01, 1.0, 20.0]), seed=st.integers(0, 2**16))
def test_matrix_exp_hypothesis_shapes(batch, n, scale, seed):
    x = rnd(tuple(batch) + (n, n), seed=seed, scale=scale / n)
    got = LA.matrix_exp(A(x))
    assert got.shape == x.shape
    if x.size:
        close(got, per_matrix(sl.expm, x), 1e-12 * max(1.0, scale) ** 2)


# ---- matrix_sqrth ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_sqrth_matches_scipy(dtype):
    a = spd(4, dtype, seed=13, batch=(2, 3))
    got = LA.matrix_sqrth(A(a))
    assert got.dtype == dtype and got.shape == a.shape
    close(got, per_matrix(sl.sqrtm, a.astype(np.complex128 if np.dtype(dtype).kind == "c"
                                              else np.float64)), TOL[dtype] * 10)


def test_matrix_sqrth_closed_forms_and_hermitian_part():
    close(LA.matrix_sqrth(A(np.diag([4.0, 9.0, 0.25, 0.0]))), np.diag([2.0, 3.0, 0.5, 0.0]),
          1e-15)
    c, s = np.cos(0.4), np.sin(0.4)
    r = np.array([[c, -s], [s, c]])
    close(LA.matrix_sqrth(A(r @ np.diag([16.0, 1.0]) @ r.T)), r @ np.diag([4.0, 1.0]) @ r.T,
          1e-14)
    x = rnd((3, 3), seed=14) + 3 * np.eye(3)        # not symmetric: its Hermitian part is used
    close(LA.matrix_sqrth(A(x)), sl.sqrtm((x + x.T) / 2), 1e-13)
    # tiny negative eigenvalues (rounding of a PSD matrix) are clipped
    v = rnd((4, 2), seed=15)
    psd = v @ v.T
    got = N(LA.matrix_sqrth(A(psd)))
    close(got @ got, psd, 1e-13)
    assert np.linalg.eigvalsh(got).min() > -1e-7


def test_matrix_sqrth_zero_empty_nan():
    close(LA.matrix_sqrth(A(np.zeros((2, 2)))), np.zeros((2, 2)), 0)
    assert LA.matrix_sqrth(A(np.zeros((3, 0, 0)))).shape == (3, 0, 0)
    got = N(LA.matrix_sqrth(A(np.stack([np.eye(2), [[1.0, np.nan], [np.nan, 1.0]]]))))
    close(got[0], np.eye(2), 0)
    assert np.isnan(got[1]).all()
    with pytest.raises(ValueError, match=r"matrix_sqrth: expected a stack of square"):
        LA.matrix_sqrth(A(np.ones((2, 3))))


def test_matrix_sqrth_gradient_at_identity_is_finite_and_symmetric():
    eye = A(np.eye(3))
    e = rnd((3, 3), seed=16)
    # L_sqrt(I, E) = E / 2 on Hermitian E: d/dt sum(sqrth(I + t E)) = sum(sym(E)) / 2
    d = starling.grad(lambda t: snp.sum(LA.matrix_sqrth(eye + t * A(e))))(A(0.0))
    np.testing.assert_allclose(float(d), np.sum(e) / 2, rtol=1e-13)
    w = rnd((3, 3), seed=17)
    g = N(starling.grad(lambda x: snp.sum(A(w) * LA.matrix_sqrth(x)))(eye))
    close(g, (w + w.T) / 4, 1e-14)
    # repeated eigenvalues that are not the identity: finite, symmetric, second order too
    q = np.linalg.qr(rnd((4, 4), seed=18))[0]
    rep = q @ np.diag([2.0, 2.0, 2.0, 5.0]) @ q.T
    check_grads(LA.matrix_sqrth, (A(rep),), order=2)
    check_grads(LA.matrix_sqrth, (eye,), order=2)
    w4 = rnd((4, 4), seed=19)
    g = N(starling.grad(lambda x: snp.sum(A(w4) * LA.matrix_sqrth(x)))(A(rep)))
    assert np.isfinite(g).all()
    close(g, g.T, 1e-14)


def test_matrix_sqrth_gradient_infinite_at_singular_psd():
    # documented: ds_ij = (V^H dA V)_ij / (r_i + r_j) with r_i + r_j = 0 for a singular matrix
    v = np.array([[1.0], [2.0]])
    _, t = starling.jvp(LA.matrix_sqrth, (A(v @ v.T),), (A(np.eye(2)),))
    assert not np.isfinite(N(t)).all()


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_matrix_sqrth_check_grads(dtype):
    check_grads(LA.matrix_sqrth, (A(spd(3, dtype, seed=19, batch=(2,))),), order=2)


def test_matrix_sqrth_vmap_and_jit():
    a = spd(3, seed=20, batch=(4,))
    ref = per_matrix(sl.sqrtm, a)
    close(starling.vmap(LA.matrix_sqrth)(A(a)), ref, 1e-13)
    close(starling.vmap(LA.matrix_sqrth, in_axes=1, out_axes=2)(A(np.moveaxis(a, 0, 1))),
          np.moveaxis(ref, 0, 2), 1e-13)
    np.testing.assert_array_equal(N(starling.jit(LA.matrix_sqrth)(A(a))),
                                  N(LA.matrix_sqrth(A(a))))
    f = starling.grad(lambda x: snp.sum(snp.cos(LA.matrix_sqrth(x))))
    close(starling.vmap(f)(A(a)), np.stack([N(f(A(m))) for m in a]), 1e-13)
    close(starling.jit(f)(A(a[0])), f(A(a[0])), 1e-15)


@given(n=st.integers(1, 6), batch=st.lists(st.integers(1, 3), max_size=2),
       cond=st.sampled_from([1.0, 1e3, 1e8]), complex_=st.booleans(), seed=st.integers(0, 2**16))
def test_matrix_sqrth_hypothesis_spd(n, batch, cond, complex_, seed):
    dt = np.complex128 if complex_ else np.float64
    q = np.linalg.qr(rnd(tuple(batch) + (n, n), dt, seed))[0]
    w = np.logspace(0, -np.log10(cond), n)
    a = (q * w[..., None, :]) @ np.conj(np.swapaxes(q, -1, -2))
    s = N(LA.matrix_sqrth(A(a)))
    close(s, np.conj(np.swapaxes(s, -1, -2)), 1e-15)
    close(s @ s, a, 1e-13)
    # sqrt amplifies the absolute eigenvalue error eps * ||a|| by 1 / (2 sqrt(w_min))
    close(np.linalg.eigvalsh(s), np.broadcast_to(np.sqrt(w)[::-1], s.shape[:-1]),
          1e-14 / np.sqrt(w.min()))


# ---- polar -------------------------------------------------------------------------------------

def scipy_polar(a, side):
    return per_matrix(lambda m: sl.polar(m, side=side), a)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 5), (2, 3, 3)])
@pytest.mark.parametrize("side", ["right", "left"])
def test_polar_matches_scipy(dtype, shape, side):
    a = rnd(shape, dtype, seed=21)
    u, h = LA.polar(A(a), side=side)
    ru, rh = scipy_polar(a, side)
    assert u.dtype == dtype and h.dtype == dtype
    assert u.shape == ru.shape and h.shape == rh.shape
    tol = TOL[dtype] * 10
    close(u, ru, tol)
    close(h, rh, tol)
    close(N(u) @ N(h) if side == "right" else N(h) @ N(u), a, tol)


def test_polar_ill_conditioned():
    rng = np.random.default_rng(22)
    q1, q2 = (np.linalg.qr(rng.standard_normal((8, 8)))[0] for _ in range(2))
    a = q1 @ np.diag(np.logspace(0, -12, 8)) @ q2.T
    u, h = map(N, LA.polar(A(a)))
    ru, rh = sl.polar(a)
    close(u.T @ u, np.eye(8), 1e-14)
    close(u @ h, a, 1e-14)
    close(h, rh, 1e-14)            # H is well conditioned in the absolute sense
    close(u, ru, 1e-3)             # U's condition number is ~ 1 / sigma_min = 1e12


def test_polar_rank_deficient_and_zero():
    rng = np.random.default_rng(23)
    a = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 4))       # rank 2, tall
    for x in (a, np.diag([3.0, 1.0, 0.0]), np.zeros((3, 2))):
        u, h = map(N, LA.polar(A(x)))
        close(u.T @ u, np.eye(x.shape[1]), 1e-13)     # U is one of many choices: unitary
        close(u @ h, x, 1e-13)
        close(h, sl.polar(x)[1], 1e-13)               # H is unique


def test_polar_non_finite_and_empty_and_errors():
    x = np.stack([np.eye(2), [[np.nan, 1.0], [0.0, 1.0]]])
    u, h = map(N, LA.polar(A(x)))
    close(u[0], np.eye(2), 1e-15)
    assert np.isnan(u[1]).all() and np.isnan(h[1]).all()
    for shape, side, hs in [((0, 3), "right", (3, 3)), ((3, 0), "right", (0, 0)),
                            ((2, 0, 0), "left", (2, 0, 0)), ((0, 4, 2), "left", (0, 4, 4))]:
        u, h = LA.polar(A(np.zeros(shape)), side=side)
        assert u.shape == shape and h.shape == hs
    with pytest.raises(ValueError, match=r"polar: side must be 'right' or 'left', got 'up'"):
        LA.polar(A(np.eye(2)), side="up")
    with pytest.raises(ValueError, match=r"polar: .*ndim >= 2"):
        LA.polar(A(np.ones(3)))


def test_polar_float32_accuracy():
    a = rnd((3, 5, 4), np.float32, seed=24)
    u, h = map(N, LA.polar(A(a)))
    close(np.swapaxes(u, -1, -2) @ u, np.broadcast_to(np.eye(4), (3, 4, 4)), 1e-5)
    close(u @ h, a, 1e-5)


def test_polar_batch_converges_per_matrix():
    # a well- and an ill-conditioned matrix in one batch: each as accurate as alone
    rng = np.random.default_rng(25)
    q1, q2 = (np.linalg.qr(rng.standard_normal((5, 5)))[0] for _ in range(2))
    x = np.stack([q1 @ np.diag([1.0, 0.9, 0.8, 0.7, 0.6]) @ q2.T,
                  q1 @ np.diag(np.logspace(0, -10, 5)) @ q2.T])
    u, h = map(N, LA.polar(A(x)))
    for i in range(2):
        ui, hi = map(N, LA.polar(A(x[i])))
        close(u[i], ui, 1e-14)
        close(h[i], hi, 1e-14)


@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (3, 5)])
@pytest.mark.parametrize("side", ["right", "left"])
def test_polar_check_grads(shape, side):
    a = rnd(shape, seed=26) + np.eye(*shape)
    check_grads(lambda x: LA.polar(x, side=side), (A(a),), order=2)


def test_polar_check_grads_complex_batch_and_repeated_singular_values():
    ac = rnd((2, 4, 3), np.complex128, seed=27)
    check_grads(LA.polar, (A(ac),), order=2)
    q = np.linalg.qr(rnd((4, 4), seed=28))[0]       # orthogonal: all singular values are 1
    check_grads(LA.polar, (A(q),), order=2)
    check_grads(lambda x: LA.polar(x, side="left"), (A(2 * q[:, :3]),), order=1)


def test_polar_vmap_and_jit():
    a = rnd((4, 5, 3), seed=29)
    ru, rh = scipy_polar(a, "right")
    u, h = starling.vmap(LA.polar)(A(a))
    close(u, ru, 1e-13)
    close(h, rh, 1e-13)
    u, h = starling.vmap(lambda x: LA.polar(x, side="left"), in_axes=2, out_axes=0)(
        A(np.moveaxis(a, 0, 2)))
    lu, lh = scipy_polar(a, "left")
    close(u, lu, 1e-13)
    close(h, lh, 1e-13)
    ju, jh = starling.jit(LA.polar)(A(a))
    eu, eh = LA.polar(A(a))
    np.testing.assert_array_equal(N(ju), N(eu))
    np.testing.assert_array_equal(N(jh), N(eh))
    f = starling.grad(lambda x: snp.sum(snp.sin(LA.polar(x)[0])) + snp.sum(LA.polar(x)[1] ** 2))
    close(starling.vmap(f)(A(a)), np.stack([N(f(A(m))) for m in a]), 1e-12)
    close(starling.jit(f)(A(a[0])), f(A(a[0])), 1e-14)


@given(m=st.integers(1, 5), n=st.integers(1, 5), batch=st.lists(st.integers(1, 2), max_size=2),
       side=st.sampled_from(["right", "left"]), seed=st.integers(0, 2**16))
def test_polar_hypothesis_shapes(m, n, batch, side, seed):
    a = rnd(tuple(batch) + (m, n), seed=seed)
    u, h = LA.polar(A(a), side=side)
    ru, rh = scipy_polar(a, side)
    close(h, rh, 1e-12)
    if min(m, n) == np.linalg.matrix_rank(a.reshape((-1, m, n))).min():   # full rank: U unique
        close(u, ru, 1e-10)


# ---- matrix_power on batches -------------------------------------------------------------------

@pytest.mark.parametrize("n", [-3, -1, 0, 2, 5])
def test_matrix_power_batches_vmap_grads(n):
    x = rnd((3, 4, 4), seed=30) + 4 * np.eye(4)
    ref = np.linalg.matrix_power(x, n)
    close(LA.matrix_power(A(x), n), ref, 1e-13)
    f = lambda a: LA.matrix_power(a, n)     # noqa: E731
    close(starling.vmap(f)(A(x)), ref, 1e-13)
    close(starling.vmap(f, in_axes=2, out_axes=1)(A(np.moveaxis(x, 0, 2))),
          np.moveaxis(ref, 0, 1), 1e-13)
    close(starling.jit(f)(A(x)), ref, 1e-13)
    check_grads(f, (A(x),), order=2)
    g = starling.grad(lambda a: snp.sum(f(a)))(A(x))
    assert g.shape == x.shape
    if n == 0:
        np.testing.assert_array_equal(N(g), 0.0)


@pytest.mark.parametrize("fn", [LA.matrix_exp, LA.matrix_sqrth, lambda x: LA.polar(x)[0]])
def test_dtype_policy_integers_and_half(fn):
    x = np.array([[4, 1], [1, 3]])
    want = N(fn(A(x.astype(np.float32))))
    got = fn(A(x))
    assert got.dtype == np.float32
    close(got, want, 0)
    half = fn(A(x.astype(np.float16)))
    assert half.dtype == np.float16
    close(N(half).astype(np.float32), want, 2e-3)
