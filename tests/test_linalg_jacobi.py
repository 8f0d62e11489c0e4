"""The native batched Jacobi eigh / SVD (native/jacobi.h, starling.linalg.jacobi) against NumPy /
LAPACK, with LAPACK's scaled-residual criteria: ||A V - V L||_1 / (n eps ||A||_1) <= 10 and
||V^H V - I||_1 / (n eps) <= 10 (and the same for A - U S Vh, U and V), on hard matrices."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import starling
import starling.numpy as snp
from starling import _native
from starling.linalg import jacobi as J

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = 10.0


def _eps(dt):
    return np.finfo(dt).eps


def _h(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _n1(x):
    return np.linalg.norm(x, 1, axis=(-2, -1))


def _wide(dt):
    return np.complex128 if np.dtype(dt).kind == "c" else np.float64


def check_eigh(a, w, v, dt):
    """Scaled residual and orthogonality of each matrix of the stack (a: the full Hermitian
    matrices, in float64 / complex128); eigenvalues ascending and close to LAPACK's."""
    n = a.shape[-1]
    eps = _eps(dt)
    an = np.maximum(_n1(a), np.finfo(np.float64).tiny)
    v64, w64 = v.astype(_wide(dt)), w.astype(np.float64)
    res = _n1(a @ v64 - v64 * w64[..., None, :]) / (n * eps * an)
    orth = _n1(_h(v64) @ v64 - np.eye(n)) / (n * eps)
    assert res.max() <= TOL, res.max()
    assert orth.max() <= TOL, orth.max()
    assert np.all(np.diff(w, axis=-1) >= 0)
    ref = np.linalg.eigvalsh(a)
    err = np.abs(w64 - ref).max(axis=-1) / (n * eps * an)
    assert err.max() <= TOL, err.max()


def check_svd(a, u, s, vh, dt, full):
    m, n = a.shape[-2:]
    k = min(m, n)
    eps = _eps(dt)
    an = np.maximum(_n1(a), np.finfo(np.float64).tiny)
    u64, vh64 = u.astype(_wide(dt)), vh.astype(_wide(dt))
    assert u.shape[-2:] == ((m, m) if full else (m, k))
    assert vh.shape[-2:] == ((n, n) if full else (k, n))
    rec = (u64[..., :, :k] * s.astype(np.float64)[..., None, :]) @ vh64[..., :k, :]
    res = _n1(a - rec) / (max(m, n) * eps * an)
    ou = _n1(_h(u64) @ u64 - np.eye(u.shape[-1])) / (max(m, n) * eps)
    ov = _n1(vh64 @ _h(vh64) - np.eye(vh.shape[-2])) / (max(m, n) * eps)
    assert res.max() <= TOL, res.max()
    assert ou.max() <= TOL, ou.max()
    assert ov.max() <= TOL, ov.max()
    assert np.all(np.diff(s, axis=-1) <= 0) and np.all(s >= 0)
    ref = np.linalg.svd(a, compute_uv=False)
    err = np.abs(s - ref).max(axis=-1) / (max(m, n) * eps * an)
    assert err.max() <= TOL, err.max()


# ---- hard matrices ----------------------------------------------------------------------------

def _orth(rng, n, cplx):
    z = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if cplx else 0)
    q, _ = np.linalg.qr(z)
    return q


def _from_spectrum(rng, lam, cplx):
    q = _orth(rng, len(lam), cplx)
    a = (q * np.asarray(lam, dtype=np.float64)) @ _h(q)
    return (a + _h(a)) / 2


def wilkinson(n):
    """W_n^+ (n = 2m + 1): diagonal |m - i|, ones beside it; pairs of nearly equal eigenvalues."""
    m = (n - 1) // 2
    return np.diag(np.abs(np.arange(n) - m).astype(float)) + np.eye(n, k=1) + np.eye(n, k=-1)


def kahan(n, theta=1.2):
    s, c = np.sin(theta), np.cos(theta)
    return np.diag(s ** np.arange(n)) @ (np.eye(n) - c * np.triu(np.ones((n, n)), 1))


def hermitian_cases(n, cplx, rng):
    """Named (n, n) Hermitian test matrices (float64 / complex128)."""
    h = 1.0 / (np.arange(n)[:, None] + np.arange(n)[None, :] + 1.0)
    k = kahan(n)
    g = rng.standard_normal((n, n))
    d = np.diag(10.0 ** -np.arange(n, dtype=float) * 0.5)
    cases = {
        "random": _from_spectrum(rng, rng.standard_normal(n), cplx),
        "repeated": _from_spectrum(rng, np.repeat([1.0, -2.0], (n + 1) // 2)[:n], cplx),
        "clustered": _from_spectrum(rng, 1 + 1e-9 * rng.standard_normal(n), cplx),
        "graded": d @ (g @ g.T + n * np.eye(n)) @ d,
        "hilbert": h,
        "kahan": k + k.T,
        "rank_deficient": _from_spectrum(rng, np.r_[rng.standard_normal(n // 2),
                                                    np.zeros(n - n // 2)], cplx),
        "zero": np.zeros((n, n)),
        "identity": np.eye(n),
    }
    if n % 2 == 1:
        cases["wilkinson"] = wilkinson(n)
    return {name: (a.astype(np.complex128) if cplx else a.real) for name, a in cases.items()}


def _stack(cases):
    names = sorted(cases)
    return names, np.stack([cases[k] for k in names])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 5, 8, 21, 32, 63])
def test_eigh_hard_matrices(dt, n):
    rng = np.random.default_rng(n)
    cplx = np.dtype(dt).kind == "c"
    _, a = _stack(hermitian_cases(n, cplx, rng))
    x = np.ascontiguousarray(a.astype(dt))
    a = x.astype(_wide(dt))   # the reference is the rounded input
    for lower in (True, False):
        w, v, sweeps = _native.jacobi_eigh(x, lower, True)
        assert w.dtype == np.finfo(dt).dtype and v.dtype == dt
        check_eigh(a, w, v, dt)
        assert sweeps < 30
        w2, none, _ = _native.jacobi_eigh(x, lower, False)
        assert none is None
        np.testing.assert_array_equal(w2, w)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("m,n", [(1, 1), (1, 4), (4, 1), (7, 7), (12, 5), (5, 12), (33, 33),
                                 (64, 64), (64, 9)])
def test_svd_hard_matrices(dt, m, n):
    rng = np.random.default_rng(m * 100 + n)
    cplx = np.dtype(dt).kind == "c"
    k = min(m, n)
    mats = [rng.standard_normal((m, n)) + (1j * rng.standard_normal((m, n)) if cplx else 0),
            np.zeros((m, n)), np.eye(m, n)]
    kk = kahan(max(m, n))[:m, :n]
    mats += [kk, np.diag(10.0 ** -np.arange(m) * 0.5) @ rng.standard_normal((m, n))]
    low = rng.standard_normal((m, max(1, k // 2))) @ rng.standard_normal((max(1, k // 2), n))
    mats += [low, np.ones((m, n)), 1.0 / (np.arange(m)[:, None] + np.arange(n) + 1.0)]
    x = np.ascontiguousarray(np.stack(mats).astype(dt))
    a = x.astype(_wide(dt))
    # full rank: quadratic convergence. (Rank-deficient stacks may run to the sweep cap: the
    # columns of rounding-error size keep rotating against each other; results stay accurate.)
    assert _native.jacobi_svd(x[:1], False, True)[3] < 30
    for full in (False, True):
        u, s, vh, sweeps = _native.jacobi_svd(x, full, True)
        check_svd(a, u, s, vh, dt, full)
        none_u, s2, none_vh, _ = _native.jacobi_svd(x, full, False)
        assert none_u is None and none_vh is None
        np.testing.assert_array_equal(s2, s)


def _in_range(dt, scale):
    info = np.finfo(dt)
    return scale * 100 <= info.max and scale >= info.smallest_subnormal * 2 ** 30


@pytest.mark.parametrize("dt,scale", [
    (dt, scale) for dt in DTYPES for scale in (1e300, 1e-300, 2.0 ** -1070, 1e30, 1e-30)
    if _in_range(dt, scale)])   # scales each dtype can hold (1e300 is inf in float32)
def test_huge_and_tiny_scaling(dt, scale):
    rng = np.random.default_rng(1)
    cplx = np.dtype(dt).kind == "c"
    info = np.finfo(dt)
    a = np.stack([_from_spectrum(rng, rng.standard_normal(6), cplx) for _ in range(3)])
    x = np.ascontiguousarray((a * scale).astype(dt))
    w, v, _ = _native.jacobi_eigh(x, True, True)
    w1, v1, _ = _native.jacobi_eigh(np.ascontiguousarray(a.astype(dt)), True, True)
    # scaling by a power of two near 1 / max|a| first: the same bits up to the input rounding
    np.testing.assert_allclose(w / scale, w1, rtol=50 * info.eps, atol=50 * info.eps)
    check_eigh(x.astype(_wide(dt)) / scale, w / scale, v, dt)
    y = np.ascontiguousarray(x[:, :, :4])
    u, s, vh, _ = _native.jacobi_svd(y, False, True)
    check_svd(y.astype(_wide(dt)) / scale, u, s / scale, vh, dt, False)


@pytest.mark.parametrize("dt", DTYPES)
def test_nonfinite_input_gives_nan_for_that_matrix_only(dt):
    rng = np.random.default_rng(2)
    cplx = np.dtype(dt).kind == "c"
    a = np.stack([_from_spectrum(rng, rng.standard_normal(5), cplx) for _ in range(20)])
    a[3, 4, 1] = np.nan
    a[7, 2, 2] = np.inf
    a[9, 0, 3] = -np.inf   # upper triangle: read only with lower=False
    x = np.ascontiguousarray(a.astype(dt))
    w, v, sweeps = _native.jacobi_eigh(x, True, True)
    assert sweeps < 30
    assert np.isnan(w[[3, 7]]).all() and np.isnan(v[[3, 7]]).all()
    ok = np.setdiff1d(np.arange(20), [3, 7])
    assert np.isfinite(w[ok]).all()
    wu, _, _ = _native.jacobi_eigh(x, False, False)
    assert np.isnan(wu[[7, 9]]).all() and np.isfinite(wu[[3]]).all()
    u, s, vh, _ = _native.jacobi_svd(x, True, True)
    assert np.isnan(s[[3, 7, 9]]).all() and np.isnan(u[3]).all() and np.isnan(vh[9]).all()
    assert np.isfinite(s[ok[ok != 9]]).all()


@pytest.mark.parametrize("dt", DTYPES)
def test_unread_triangle_is_ignored(dt):
    rng = np.random.default_rng(3)
    cplx = np.dtype(dt).kind == "c"
    a = np.stack([_from_spectrum(rng, rng.standard_normal(9), cplx) for _ in range(17)])
    junk = rng.standard_normal(a.shape) * 1e3
    if cplx:   # also a nonzero imaginary part on the diagonal, which Hermitian input ignores
        junk = junk + 1j * rng.standard_normal(a.shape)
    lo = np.ascontiguousarray((np.tril(a) + np.triu(junk, 1) + 1j * 0 * junk).astype(dt))
    up = np.ascontiguousarray((np.triu(a) + np.tril(junk, -1)).astype(dt))
    if cplx:
        idx = np.arange(9)
        lo[:, idx, idx] += 1j * 5
        up[:, idx, idx] -= 1j * 7
    ref = np.ascontiguousarray(a.astype(dt))
    w, v, _ = _native.jacobi_eigh(ref, True, True)
    for x, lower in ((lo, True), (up, False)):
        w2, v2, _ = _native.jacobi_eigh(x, lower, True)
        np.testing.assert_allclose(w2, w, atol=30 * _eps(dt) * 9 * np.abs(w).max())
        check_eigh(ref.astype(_wide(dt)), w2, v2, dt)
        np.testing.assert_allclose(J.eigh_batched(x, lower)[0], w2)


def test_native_errors():
    with pytest.raises(TypeError, match="jacobi_eigh: dtype"):
        _native.jacobi_eigh(np.zeros((2, 3, 3), np.int32), True, True)
    with pytest.raises(ValueError, match="square matrices of size n <= 64"):
        _native.jacobi_eigh(np.zeros((2, 3, 4)), True, True)
    with pytest.raises(ValueError, match="n <= 64"):
        _native.jacobi_eigh(np.zeros((1, 65, 65)), True, True)
    with pytest.raises(ValueError, match=r"shape \(batch, m, n\)"):
        _native.jacobi_svd(np.zeros((3, 3)), True, True)
    with pytest.raises(ValueError, match="C-contiguous"):
        _native.jacobi_svd(np.zeros((2, 4, 6))[:, :, ::2], True, True)
    with pytest.raises(ValueError, match=r"min\(m, n\) <= 64"):
        _native.jacobi_svd(np.zeros((1, 65, 66)), True, True)
    assert _native.jacobi_lanes(np.dtype(np.float32)) == 16
    assert _native.jacobi_lanes(np.dtype(np.complex128)) == 8


def test_empty_batch_and_dispatch_rule():
    w, v, sweeps = _native.jacobi_eigh(np.zeros((0, 4, 4)), True, True)
    assert w.shape == (0, 4) and v.shape == (0, 4, 4) and sweeps == 0
    u, s, vh, _ = _native.jacobi_svd(np.zeros((0, 3, 5), np.complex64), True, True)
    assert u.shape == (0, 3, 3) and s.shape == (0, 3) and vh.shape == (0, 5, 5)
    assert J.use_jacobi_eigh((100, 8, 8), np.float32)
    assert not J.use_jacobi_eigh((1, 32, 32), np.float64)   # one matrix: LAPACK
    assert not J.use_jacobi_eigh((100, 65, 65), np.float32)
    assert not J.use_jacobi_eigh((100, 0, 0), np.float32)
    assert not J.use_jacobi_svd((100, 600, 8), np.float32)   # very tall: LAPACK
    assert not J.use_jacobi_svd((100, 12, 8), np.float32, full_matrices=True)
    assert J.use_jacobi_svd((100, 8, 8), np.float32, full_matrices=True)


def _count_native(monkeypatch):
    calls = {"eigh": 0, "svd": 0}

    class Proxy:
        def jacobi_eigh(self, *a):
            calls["eigh"] += 1
            return _native.jacobi_eigh(*a)

        def jacobi_svd(self, *a):
            calls["svd"] += 1
            return _native.jacobi_svd(*a)

    monkeypatch.setattr(J, "_native", lambda: Proxy())
    return calls


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 6])
def test_through_starling_numpy_linalg(dt, n, monkeypatch):
    calls = _count_native(monkeypatch)
    rng = np.random.default_rng(4)
    cplx = np.dtype(dt).kind == "c"
    a = np.stack([_from_spectrum(rng, rng.standard_normal(n), cplx) for _ in range(24)]) \
        .reshape(2, 12, n, n).astype(dt)
    x = snp.asarray(a)
    w, v = snp.linalg.eigh(x)
    w, v = np.asarray(w), np.asarray(v)
    assert w.shape == (2, 12, n) and v.shape == (2, 12, n, n)
    np.testing.assert_allclose(np.asarray(snp.linalg.eigvalsh(x)), w)
    u, s, vh = snp.linalg.svd(x)
    np.testing.assert_allclose(np.asarray(snp.linalg.svdvals(x)), np.asarray(s),
                               rtol=0, atol=30 * _eps(dt) * max(n, 1))
    if n == 0:
        assert calls == {"eigh": 0, "svd": 0}   # size 0 goes to NumPy
        return
    assert calls["eigh"] == 2 and calls["svd"] == 2
    a64 = a.astype(_wide(dt))
    check_eigh(a64, w, v, dt)
    check_svd(a64, np.asarray(u), np.asarray(s), np.asarray(vh), dt, True)
    if cplx:   # Starling's gauge: each eigenvector's entry of largest modulus is real positive
        piv = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
        np.testing.assert_allclose(piv.imag, 0, atol=10 * _eps(dt))
        assert (piv.real > 0).all()


def test_vmap_and_jit_take_the_native_kernels(monkeypatch):
    calls = _count_native(monkeypatch)
    rng = np.random.default_rng(5)
    a = np.stack([_from_spectrum(rng, rng.standard_normal(8), False) for _ in range(32)])
    x = snp.asarray(a.astype(np.float32))

    def f(m):
        return snp.linalg.eigvalsh(m).sum() + snp.linalg.svdvals(m).sum()

    ref = np.linalg.eigvalsh(a).sum(-1) + np.linalg.svd(a, compute_uv=False).sum(-1)
    got = np.asarray(starling.vmap(f)(x))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    assert calls["eigh"] >= 1 and calls["svd"] >= 1
    calls.update(eigh=0, svd=0)
    jitted = starling.jit(lambda m: snp.linalg.eigh(m)[0] * 2.0)
    np.testing.assert_allclose(np.asarray(jitted(x)), 2 * np.linalg.eigvalsh(a), rtol=1e-5,
                               atol=1e-4)
    assert calls["eigh"] == 1


@settings(max_examples=25, deadline=None)
@given(batch=st.lists(st.integers(1, 5), min_size=0, max_size=3), n=st.integers(1, 20),
       wide=st.integers(-3, 3), dt=st.sampled_from(DTYPES), seed=st.integers(0, 2 ** 16),
       full=st.booleans())
def test_hypothesis_shapes(batch, n, wide, dt, seed, full):
    rng = np.random.default_rng(seed)
    cplx = np.dtype(dt).kind == "c"
    shape = tuple(batch) + (n, n)
    g = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if cplx else 0)
    a = ((g + _h(g)) / 2).astype(dt)
    flat = np.ascontiguousarray(a.reshape(-1, n, n))
    w, v, _ = _native.jacobi_eigh(flat, True, True)
    check_eigh(flat.astype(_wide(dt)), w, v, dt)
    m = max(1, n + wide)
    r = np.ascontiguousarray(g[..., :m, :].reshape(-1, min(m, n), n).astype(dt)) if m <= n else \
        np.ascontiguousarray(rng.standard_normal((max(1, flat.shape[0]), m, n)).astype(dt))
    u, s, vh, _ = _native.jacobi_svd(r, full, True)
    check_svd(r.astype(_wide(dt)), u, s, vh, dt, full)


@pytest.mark.slow
@pytest.mark.parametrize("isa", ["generic", "avx2"])
def test_every_instruction_set(isa):
    """The baseline and AVX2 kernel copies (chosen by STARLING_GEMM_ISA at load) in a fresh
    process, on every dtype and a batch that is not a multiple of the lanes."""
    code = (
        "import numpy as np, sys; sys.path.insert(0, %r)\n"
        "from test_linalg_jacobi import check_eigh, check_svd, DTYPES, _wide\n"
        "from starling import _native\n"
        "rng = np.random.default_rng(0)\n"
        "for dt in DTYPES:\n"
        "    g = rng.standard_normal((19, 11, 11)) * (1 + 1j if np.dtype(dt).kind == 'c' else 1)\n"
        "    a = np.ascontiguousarray(((g + np.conj(np.swapaxes(g, 1, 2))) / 2).astype(dt))\n"
        "    w, v, _ = _native.jacobi_eigh(a, True, True)\n"
        "    check_eigh(a.astype(_wide(dt)), w, v, dt)\n"
        "    b = np.ascontiguousarray(g[:, :, :7].astype(dt))\n"
        "    u, s, vh, _ = _native.jacobi_svd(b, True, True)\n"
        "    check_svd(b.astype(_wide(dt)), u, s, vh, dt, True)\n"
        "print(_native.gemm_isa())\n" % os.path.dirname(__file__))
    env = dict(os.environ, STARLING_GEMM_ISA=isa)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() in (isa, "generic")
