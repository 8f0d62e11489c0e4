"""Linear algebra (Array API 2023.12): the main-namespace functions (matmul, matrix_transpose,
tensordot, vecdot) and the ``linalg`` extension. Results are checked through the defining
identities (``x = Q R``, ``x = U diag(S) Vh``, ...) and against NumPy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import starling.numpy as xp
from tests.array_api import (
    COMPLEX_FLOATS, DEFAULT_INT, FLOATS, INTS, NUMERIC, REAL_FLOATS, REAL_OF, dname,
)

la = xp.linalg
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _rtol(dt):
    return 1e-4 if np.dtype(dt) in (np.dtype(np.float32), np.dtype(np.complex64)) else 1e-10


def _rand(shape, dt, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, shape)
    if np.dtype(dt).kind == "c":
        a = a + 1j * rng.uniform(-1, 1, shape)
    return a.astype(dt)


def _spd(n, dt, batch=(), seed=0):
    a = _rand(batch + (n, n), dt, seed)
    h = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n, dtype=dt)
    return h.astype(dt)


def _close(got, want, dt, factor=1.0):
    g = np.asarray(got)
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    np.testing.assert_allclose(g, want, rtol=_rtol(dt) * factor, atol=_rtol(dt) * factor)


# ---- main namespace ----------------------------------------------------------------------------

@given(data=st.data())
def test_matmul_shapes_and_values(data):
    dt = data.draw(st.sampled_from(NUMERIC))
    b1 = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    b2 = data.draw(hnp.broadcastable_shapes(b1, min_dims=0, max_dims=2, max_side=3))
    m, k, n = (data.draw(st.integers(1, 3)) for _ in range(3))
    form = data.draw(st.sampled_from(["mm", "vm", "mv", "vv"]))
    s1 = (k,) if form[0] == "v" else b1 + (m, k)
    s2 = (k,) if form[1] == "v" else b2 + (k, n)
    a = (np.arange(int(np.prod(s1))) % 3).reshape(s1).astype(dt)
    b = (np.arange(int(np.prod(s2))) % 4).reshape(s2).astype(dt)
    r = xp.matmul(xp.asarray(a), xp.asarray(b))
    want = np.matmul(a, b)
    assert r.dtype == dt and r.shape == want.shape
    np.testing.assert_allclose(np.asarray(r), want, rtol=1e-5)


def test_matmul_promotes_and_does_not_conjugate():
    a = xp.asarray([[1j, 2]], dtype=xp.complex64)
    b = xp.asarray([[1j], [1]], dtype=xp.complex128)
    r = xp.matmul(a, b)
    assert r.dtype == xp.complex128 and np.asarray(r).tolist() == [[1 + 0j]]  # 1j*1j + 2
    assert xp.matmul(xp.ones((2, 2), dtype=xp.int8), xp.ones((2, 2), dtype=xp.int16)).dtype == \
        xp.int16
    with pytest.raises((ValueError, TypeError)):
        xp.matmul(xp.ones((2, 3)), xp.ones((2, 3)))


def test_matrix_transpose():
    x = _rand((2, 3, 4), np.float32)
    r = xp.matrix_transpose(xp.asarray(x))
    assert r.shape == (2, 4, 3) and r.dtype == xp.float32
    np.testing.assert_array_equal(np.asarray(r), np.swapaxes(x, -1, -2))
    with pytest.raises((ValueError, TypeError)):
        xp.matrix_transpose(xp.ones((3,)))


def test_tensordot():
    a, b = _rand((2, 3, 4), np.float64), _rand((3, 4, 5), np.float64, 1)
    _close(xp.tensordot(xp.asarray(a), xp.asarray(b)), np.tensordot(a, b), np.float64)  # axes 2
    _close(xp.tensordot(xp.asarray(a), xp.asarray(b), axes=([1, 2], [0, 1])),
           np.tensordot(a, b, axes=([1, 2], [0, 1])), np.float64)
    _close(xp.tensordot(xp.asarray(a), xp.asarray(b), axes=((1,), (0,))),
           np.tensordot(a, b, axes=((1,), (0,))), np.float64)
    c = _rand((4, 2), np.float64, 2)
    _close(xp.tensordot(xp.asarray(a), xp.asarray(c), axes=1), np.tensordot(a, c, axes=1),
           np.float64)
    _close(xp.tensordot(xp.asarray(a), xp.asarray(c), axes=0), np.tensordot(a, c, axes=0),
           np.float64)
    assert xp.tensordot(xp.ones((2,), dtype=xp.int8), xp.ones((2,), dtype=xp.int32),
                        axes=1).dtype == xp.int32


@pytest.mark.parametrize("dt", FLOATS + INTS, ids=dname)
def test_vecdot(dt):
    a = (_rand((2, 3), dt) * 4).astype(dt) if dt in INTS else _rand((2, 3), dt)
    b = (_rand((3,), dt, 1) * 4).astype(dt) if dt in INTS else _rand((3,), dt, 1)
    r = xp.vecdot(xp.asarray(a), xp.asarray(b))
    want = np.sum(np.conj(a) * b, axis=-1)  # the first argument is conjugated
    assert r.dtype == dt and r.shape == (2,)
    np.testing.assert_allclose(np.asarray(r), want, rtol=_rtol(dt) if dt in FLOATS else 0)
    r = xp.vecdot(xp.asarray(a.T), xp.asarray(b[:, None]), axis=0)
    np.testing.assert_allclose(np.asarray(r), want, rtol=_rtol(dt) if dt in FLOATS else 0)


def test_vecdot_complex_conjugates_first_argument():
    a = xp.asarray([1j, 2])
    b = xp.asarray([1j, 1])
    assert complex(xp.vecdot(a, b)) == 3 + 0j  # conj(1j)*1j + 2
    assert complex(la.vecdot(a, b)) == 3 + 0j


# ---- linalg extension --------------------------------------------------------------------------

@pytest.mark.parametrize("dt", FLOATS, ids=dname)
def test_cholesky(dt):
    x = _spd(3, dt, (2,))
    low = la.cholesky(xp.asarray(x))
    assert low.dtype == dt and low.shape == x.shape
    L = np.asarray(low)
    np.testing.assert_allclose(np.triu(L, 1), 0)
    _close(L @ np.conj(np.swapaxes(L, -1, -2)), x, dt, 10)
    up = np.asarray(la.cholesky(xp.asarray(x), upper=True))
    np.testing.assert_allclose(np.tril(up, -1), 0)
    _close(np.conj(np.swapaxes(up, -1, -2)) @ up, x, dt, 10)


def test_cross():
    a = _rand((2, 3), np.float64)
    b = _rand((3,), np.float64, 1)
    _close(la.cross(xp.asarray(a), xp.asarray(b)), np.cross(a, b), np.float64)
    c = _rand((3, 2), np.float64, 2)
    _close(la.cross(xp.asarray(c), xp.asarray(c[::-1] + 1), axis=-2),
           np.cross(c, c[::-1] + 1, axis=0), np.float64)
    r = la.cross(xp.asarray([1, 0, 0], dtype=xp.int16), xp.asarray([0, 1, 0], dtype=xp.int32))
    assert r.dtype == xp.int32 and np.asarray(r).tolist() == [0, 0, 1]
    with pytest.raises((ValueError, TypeError)):
        la.cross(xp.ones((2,)), xp.ones((2,)))  # the compute axis must have size 3


@pytest.mark.parametrize("dt", FLOATS, ids=dname)
def test_det_slogdet_inv_solve(dt):
    x = _spd(3, dt, (2,)) + _rand((2, 3, 3), dt, 3)
    _close(la.det(xp.asarray(x)), np.linalg.det(x), dt, 10)
    assert la.det(xp.asarray(x)).dtype == dt
    s = la.slogdet(xp.asarray(x))
    assert s._fields == ("sign", "logabsdet")
    assert s.sign.dtype == dt and s.logabsdet.dtype == REAL_OF.get(dt, dt)
    assert s.sign.shape == (2,) and s.logabsdet.shape == (2,)
    ref = np.linalg.slogdet(x)
    _close(s.sign, ref[0], dt, 10)
    _close(s.logabsdet, ref[1], dt, 10)
    inv = la.inv(xp.asarray(x))
    assert inv.dtype == dt
    _close(np.asarray(inv) @ x, np.broadcast_to(np.eye(3), x.shape), dt, 100)
    b = _rand((2, 3, 2), dt, 4)
    sol = la.solve(xp.asarray(x), xp.asarray(b))
    assert sol.shape == (2, 3, 2) and sol.dtype == dt
    _close(x @ np.asarray(sol), b, dt, 100)
    v = _rand((3,), dt, 5)
    sol = la.solve(xp.asarray(x), xp.asarray(v))  # x2 of shape (M,) is a vector
    assert sol.shape == (2, 3)
    _close(np.einsum("bij,bj->bi", x, np.asarray(sol)), np.broadcast_to(v, (2, 3)), dt, 100)


def test_slogdet_singular():
    s = la.slogdet(xp.asarray([[1.0, 2.0], [2.0, 4.0]], dtype=xp.float64))
    assert float(s.sign) == 0.0 and float(s.logabsdet) == -np.inf
    s = la.slogdet(xp.zeros((2, 2), dtype=xp.complex128))
    assert complex(s.sign) == 0j and float(s.logabsdet) == -np.inf


def test_diagonal_and_trace():
    x = np.arange(24).reshape(2, 3, 4)
    for off in (-3, -1, 0, 1, 3, 4):
        _eq = np.diagonal(x, offset=off, axis1=-2, axis2=-1)
        np.testing.assert_array_equal(np.asarray(la.diagonal(xp.asarray(x), offset=off)), _eq)
        np.testing.assert_array_equal(
            np.asarray(la.trace(xp.asarray(x), offset=off)),
            np.trace(x, offset=off, axis1=-2, axis2=-1))
    assert la.trace(xp.asarray(x, dtype=xp.int8)).dtype == DEFAULT_INT
    assert la.trace(xp.asarray(x, dtype=xp.uint8)).dtype == xp.uint64
    assert la.trace(xp.asarray(x, dtype=xp.float32)).dtype == xp.float32
    r = la.trace(xp.asarray(np.full((2, 2), 100), dtype=xp.int8), dtype=xp.int16)
    assert r.dtype == xp.int16 and int(r) == 200
    assert float(la.trace(xp.ones((2, 0)))) == 0.0  # empty sum


@pytest.mark.parametrize("dt", FLOATS, ids=dname)
def test_eigh_eigvalsh(dt):
    x = _spd(4, dt, (2,))
    w, v = la.eigh(xp.asarray(x))
    r = la.eigh(xp.asarray(x))
    assert r._fields == ("eigenvalues", "eigenvectors")
    assert w.dtype == REAL_OF.get(dt, dt) and w.shape == (2, 4)
    assert v.dtype == dt and v.shape == (2, 4, 4)
    W, V = np.asarray(w), np.asarray(v)
    _close(V @ (W[..., None] * np.conj(np.swapaxes(V, -1, -2))), x, dt, 100)
    _close(np.sort(W, axis=-1), np.linalg.eigvalsh(x), dt, 100)
    ev = la.eigvalsh(xp.asarray(x))
    assert ev.dtype == REAL_OF.get(dt, dt)
    _close(np.sort(np.asarray(ev), axis=-1), np.linalg.eigvalsh(x), dt, 100)


@pytest.mark.parametrize("ord_", ["fro", "nuc", 1, 2, np.inf, -1, -2, -np.inf])
@pytest.mark.parametrize("dt", FLOATS, ids=dname)
def test_matrix_norm(ord_, dt):
    x = _rand((2, 3, 4), dt)
    want = np.linalg.norm(x, ord=ord_, axis=(-2, -1))
    r = la.matrix_norm(xp.asarray(x), ord=ord_)
    assert r.dtype == REAL_OF.get(dt, dt) and r.shape == (2,)
    _close(r, want, dt, 10)
    r = la.matrix_norm(xp.asarray(x), ord=ord_, keepdims=True)
    assert r.shape == (2, 1, 1)
    if ord_ == "fro":
        _close(la.matrix_norm(xp.asarray(x)), want, dt, 10)  # the default


def test_matrix_power():
    x = _rand((2, 3, 3), np.float64) + 2 * np.eye(3)
    for n in (0, 1, 2, 3, -1, -2):
        _close(la.matrix_power(xp.asarray(x), n), np.linalg.matrix_power(x, n), np.float64, 100)
    r = la.matrix_power(xp.asarray([[1, 1], [0, 1]]), 5)
    assert np.asarray(r).tolist() == [[1, 5], [0, 1]]


def test_matrix_rank():
    x = np.stack([np.eye(3), np.diag([1.0, 1.0, 0.0]), np.ones((3, 3))])
    r = la.matrix_rank(xp.asarray(x))
    assert r.dtype == DEFAULT_INT and np.asarray(r).tolist() == [3, 2, 1]
    r = la.matrix_rank(xp.asarray(np.diag([1.0, 1e-3, 1e-8])), rtol=1e-4)
    assert int(r) == 2
    r = la.matrix_rank(xp.asarray(np.stack([np.diag([1.0, 1e-3])] * 2)),
                       rtol=xp.asarray([1e-4, 1e-2]))
    assert np.asarray(r).tolist() == [2, 1]


def test_outer():
    a, b = np.array([1.0, 2.0]), np.array([3.0, -1.0, 0.5])
    r = la.outer(xp.asarray(a), xp.asarray(b))
    assert r.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(r), np.outer(a, b))
    assert la.outer(xp.ones((2,), dtype=xp.int8), xp.ones((1,), dtype=xp.float64)).dtype == \
        xp.float64


@pytest.mark.parametrize("dt", FLOATS, ids=dname)
def test_pinv(dt):
    x = _rand((2, 4, 3), dt)
    p = la.pinv(xp.asarray(x))
    assert p.shape == (2, 3, 4) and p.dtype == dt
    _close(p, np.linalg.pinv(x), dt, 100)
    r = la.pinv(xp.asarray(np.diag([1.0, 1e-8])), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(r), np.diag([1.0, 0.0]))


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
@pytest.mark.parametrize("dt", FLOATS, ids=dname)
def test_qr(shape, dt):
    x = _rand(shape, dt)
    m, n = shape[-2:]
    k = min(m, n)
    q, r = la.qr(xp.asarray(x))
    assert la.qr(xp.asarray(x))._fields == ("Q", "R")
    assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
    assert q.dtype == dt and r.dtype == dt
    Q, R = np.asarray(q), np.asarray(r)
    _close(Q @ R, x, dt, 100)
    np.testing.assert_allclose(np.tril(R, -1), 0, atol=1e-6)
    qc, rc = la.qr(xp.asarray(x), mode="complete")
    assert qc.shape == shape[:-2] + (m, m) and rc.shape == shape[:-2] + (m, n)
    _close(np.asarray(qc) @ np.asarray(rc), x, dt, 100)
    eye = np.conj(np.swapaxes(np.asarray(qc), -1, -2)) @ np.asarray(qc)
    _close(eye, np.broadcast_to(np.eye(m), eye.shape), dt, 100)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
@pytest.mark.parametrize("dt", FLOATS, ids=dname)
def test_svd_svdvals(shape, dt):
    x = _rand(shape, dt)
    m, n = shape[-2:]
    k = min(m, n)
    res = la.svd(xp.asarray(x), full_matrices=False)
    assert res._fields == ("U", "S", "Vh")
    u, s, vh = (np.asarray(a) for a in res)
    assert u.shape == shape[:-2] + (m, k) and s.shape == shape[:-2] + (k,)
    assert vh.shape == shape[:-2] + (k, n)
    assert res.S.dtype == REAL_OF.get(dt, dt) and res.U.dtype == dt
    _close((u * s[..., None, :]) @ vh, x, dt, 100)
    assert (np.diff(s, axis=-1) <= 1e-6).all()  # descending
    full = la.svd(xp.asarray(x))  # full_matrices=True by default
    assert full.U.shape == shape[:-2] + (m, m) and full.Vh.shape == shape[:-2] + (n, n)
    sv = la.svdvals(xp.asarray(x))
    assert sv.dtype == REAL_OF.get(dt, dt)
    _close(sv, np.linalg.svd(x, compute_uv=False), dt, 100)


@pytest.mark.parametrize("ord_", [1, 2, 3, 0.5, np.inf, -np.inf, 0, -1, -2])
@pytest.mark.parametrize("dt", FLOATS, ids=dname)
def test_vector_norm(ord_, dt):
    x = _rand((2, 3, 4), dt)
    r = la.vector_norm(xp.asarray(x), ord=ord_)
    assert r.dtype == REAL_OF.get(dt, dt) and r.shape == ()
    _close(r, np.linalg.norm(x.ravel(), ord=ord_), dt, 10)
    for axis in (1, -1, (0, 2)):
        r = la.vector_norm(xp.asarray(x), axis=axis, ord=ord_)
        ax = axis if isinstance(axis, int) else axis
        if isinstance(ax, tuple):
            want = np.linalg.norm(np.moveaxis(x, ax, (-2, -1)).reshape(3, -1), ord=ord_, axis=-1)
        else:
            want = np.linalg.norm(x, ord=ord_, axis=ax)
        _close(r, want, dt, 10)
    r = la.vector_norm(xp.asarray(x), axis=(0, 2), keepdims=True, ord=ord_)
    assert r.shape == (1, 3, 1)


def test_vector_norm_default_and_special():
    assert float(la.vector_norm(xp.asarray([3.0, 4.0]))) == 5.0
    assert float(la.vector_norm(xp.asarray([3.0, -4.0, 0.0]), ord=0)) == 2.0
    assert float(la.vector_norm(xp.asarray([np.inf, 1.0]))) == np.inf
    assert np.isnan(float(la.vector_norm(xp.asarray([np.nan, 1.0]))))


@pytest.mark.parametrize("name", ["matmul", "matrix_transpose", "tensordot", "vecdot"])
def test_linalg_reexports(name):
    a = xp.asarray(_rand((3, 3), np.float64))
    f, g = getattr(xp, name), getattr(la, name)
    args = (a,) if name == "matrix_transpose" else (a, a)
    np.testing.assert_array_equal(np.asarray(f(*args)), np.asarray(g(*args)))


@pytest.mark.parametrize("dt", REAL_FLOATS + COMPLEX_FLOATS, ids=dname)
def test_linalg_keeps_float_dtypes(dt):
    x = xp.asarray(_spd(2, dt))
    for fn in (la.cholesky, la.det, la.inv, la.pinv, lambda a: la.solve(a, a),
               lambda a: la.matrix_power(a, 2), la.matrix_transpose, la.diagonal, la.trace):
        assert fn(x).dtype == dt
