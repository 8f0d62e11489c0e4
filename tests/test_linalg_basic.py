"""Tests of starling.numpy.linalg: errors, singular input, dtype policy, decomposition
identities, staging, and hypothesis properties against NumPy."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import starling.numpy as snp
from starling.core.ir import check_program, eval_program
from starling.transforms.stage import eval_shape, make_ir
from tests.hard_matrices import rnd

LA = snp.linalg


def A(x, dtype=None):
    return snp.asarray(np.asarray(x, dtype=dtype))


def spd(n, dtype=np.float64, seed=0, batch=()):
    x = rnd(batch + (n, n), dtype, seed)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(dtype)


# ---- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["det", "slogdet", "inv", "cholesky", "eigh", "eigvalsh"])
def test_non_square_raises_naming_shape(name):
    with pytest.raises(ValueError, match=rf"{name}: expected a stack of square matrices .*"
                                         r"\(2, 3\) \(2 != 3\)"):
        getattr(LA, name)(A(np.ones((2, 3))))


@pytest.mark.parametrize("name", ["det", "inv", "qr", "svd", "svdvals", "pinv", "matrix_rank",
                                  "diagonal", "trace", "matrix_norm"])
def test_wrong_ndim_raises(name):
    with pytest.raises(ValueError, match=rf"{name}: expected a stack of matrices .*ndim >= 2, "
                                         r"got shape \(3,\)"):
        getattr(LA, name)(A(np.ones(3)))


def test_solve_shape_errors():
    a = A(np.eye(3))
    with pytest.raises(ValueError, match=r"solve: x2 of shape \(4,\) does not match x1 of shape "
                                         r"\(3, 3\): expected \(3,\) or \(\.\.\., 3, k\)"):
        LA.solve(a, A(np.ones(4)))
    with pytest.raises(ValueError, match=r"solve: x2 of shape \(2, 3\) does not match"):
        LA.solve(a, A(np.ones((2, 3))))
    with pytest.raises(ValueError, match=r"solve: .*broadcast.*\(2,\).*\(3,\)"):
        LA.solve(A(np.ones((2, 3, 3))), A(np.ones((3, 3, 1))))
    with pytest.raises(ValueError, match=r"solve: expected a stack of square"):
        LA.solve(A(np.ones((3, 2))), A(np.ones(3)))


def test_linalg_error_is_a_value_error_and_exported():
    # Failures give NaN by default (issue 15) and raise LinAlgError only with check_errors=True.
    assert issubclass(LA.LinAlgError, ValueError)
    singular = A(np.array([[1.0, 2.0], [2.0, 4.0]]))
    not_pd = A(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(LA.LinAlgError, match=r"inv: the matrix of shape \(2, 2\) is singular.*"
                                              r"getrf"):
        LA.inv(singular, check_errors=True)
    with pytest.raises(LA.LinAlgError, match=r"solve: .*singular"):
        LA.solve(singular, A(np.ones(2)), check_errors=True)
    with pytest.raises(LA.LinAlgError, match=r"cholesky: .*not positive definite.*order 2"):
        LA.cholesky(not_pd, check_errors=True)
    assert np.isnan(np.asarray(LA.inv(singular))).all()
    assert np.isnan(np.asarray(LA.solve(singular, A(np.ones(2))))).all()
    assert np.isnan(np.asarray(LA.cholesky(not_pd))).all()
    assert np.isnan(np.asarray(LA.cholesky(not_pd, upper=True))).all()


def test_bad_options_raise():
    x = A(np.eye(3))
    with pytest.raises(ValueError, match=r"qr: mode must be"):
        LA.qr(x, mode="raw")
    with pytest.raises(ValueError, match=r"eigh: UPLO must be"):
        LA.eigh(x, UPLO="X")
    with pytest.raises(ValueError, match=r"matrix_norm: invalid norm order 3"):
        LA.matrix_norm(x, ord=3)
    with pytest.raises(ValueError, match=r"norm: invalid norm order 'fro' for vectors"):
        LA.norm(A(np.ones(3)), ord="fro")
    with pytest.raises(ValueError, match=r"vector_norm: invalid norm order 'nuc'"):
        LA.vector_norm(A(np.ones(3)), ord="nuc")
    with pytest.raises(ValueError, match=r"norm: ord=1 with axis=None needs a 1-d or 2-d"):
        LA.norm(A(np.ones((2, 2, 2))), ord=1)
    with pytest.raises(ValueError, match=r"norm: axis 3 is out of bounds"):
        LA.norm(A(np.ones((2, 2))), axis=3)
    with pytest.raises(TypeError, match=r"matrix_power: exponent must be an integer"):
        LA.matrix_power(x, 1.5)
    with pytest.raises(ValueError, match=r"multi_dot: shapes \(2, 3\) and \(4, 5\)"):
        LA.multi_dot([A(np.ones((2, 3))), A(np.ones((4, 5)))])


# ---- singular and special input ----------------------------------------------------------------

def test_det_and_slogdet_of_singular_matrices():
    x = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert float(LA.det(A(x))) == 0.0
    sign, logabs = LA.slogdet(A(x))
    assert float(sign) == 0.0 and float(logabs) == -np.inf
    sign, logabs = LA.slogdet(A(np.zeros((2, 2), np.complex64)))
    assert sign.dtype == np.complex64 and logabs.dtype == np.float32
    assert complex(sign) == 0 and float(logabs) == -np.inf


def test_slogdet_avoids_overflow():
    x = np.eye(200) * 10.0  # det = 1e200 overflows float32, not the log
    sign, logabs = LA.slogdet(A(x, np.float32))
    assert float(sign) == 1.0
    np.testing.assert_allclose(float(logabs), 200 * np.log(10.0), rtol=1e-5)
    assert float(LA.det(A(x, np.float32))) == np.inf


def test_slogdet_named_fields_and_complex_sign():
    x = rnd((3, 3), np.complex128)
    res = LA.slogdet(A(x))
    want = np.linalg.slogdet(x)
    np.testing.assert_allclose(complex(res.sign), want.sign, rtol=1e-12)
    np.testing.assert_allclose(float(res.logabsdet), want.logabsdet, rtol=1e-12)


def test_empty_matrices():
    assert float(LA.det(A(np.zeros((0, 0))))) == 1.0
    assert LA.inv(A(np.zeros((2, 0, 0)))).shape == (2, 0, 0)
    assert LA.det(A(np.zeros((0, 3, 3)))).shape == (0,)
    assert LA.pinv(A(np.zeros((2, 0, 3)))).shape == (2, 3, 0)
    assert LA.matrix_rank(A(np.zeros((4, 0)))).dtype == np.int64


# ---- dtype policy ------------------------------------------------------------------------------

def test_integer_input_promotes_to_float32():
    x = A(np.array([[2, 1], [1, 3]], np.int64))
    for f in (LA.det, LA.inv, LA.cholesky, LA.svdvals, LA.eigvalsh, LA.pinv):
        assert f(x).dtype == np.float32, f
    assert LA.norm(x).dtype == np.float32
    assert LA.solve(x, A(np.array([1, 2]))).dtype == np.float32
    np.testing.assert_allclose(float(LA.det(x)), 5.0, rtol=1e-6)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_computed_in_float32_returned_in_input_dtype(dt):
    x = np.array([[4.0, 1.0], [1.0, 3.0]])
    for f in (LA.det, LA.inv, LA.cholesky, LA.svdvals):
        got = f(A(x, dt))
        assert got.dtype == np.dtype(dt)
        want = np.asarray(getattr(np.linalg, f.__name__)(x.astype(np.float32))).astype(dt)
        np.testing.assert_array_equal(np.asarray(got), want)
    u, s, vh = LA.svd(A(x, dt))
    assert u.dtype == s.dtype == vh.dtype == np.dtype(dt)


def test_matrix_rank_uses_the_input_dtype_eps():
    # A rank-1 matrix rounded to float16 is full rank at float32 resolution, rank 1 at float16's.
    v = np.array([0.3, 0.7, 1.1, 1.9])
    x = np.outer(v, v).astype(np.float16)
    assert int(LA.matrix_rank(A(x))) == 1


def test_matrix_power_keeps_integers_and_inverts():
    x = np.array([[1, 1], [1, 0]], np.int64)
    got = LA.matrix_power(A(x), 10)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(got), np.linalg.matrix_power(x, 10))
    got = LA.matrix_power(A(x), -1)
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.linalg.inv(x), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(LA.matrix_power(A(x), 0)), np.eye(2))


# ---- identities --------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float64, np.complex128])
def test_decomposition_identities(dt):
    x = rnd((2, 4, 3), dt, 3)
    q, r = LA.qr(A(x))
    np.testing.assert_allclose(np.asarray(snp.matmul(q, r)), x, atol=1e-12)
    q, r = LA.qr(A(x), mode="complete")
    assert q.shape == (2, 4, 4) and r.shape == (2, 4, 3)
    u, s, vh = LA.svd(A(x), full_matrices=False)
    rec = np.asarray(u) * np.asarray(s)[..., None, :] @ np.asarray(vh)
    np.testing.assert_allclose(rec, x, atol=1e-12)
    h = spd(3, dt, 4)
    w, v = LA.eigh(A(h))
    rec = np.asarray(v) * np.asarray(w)[..., None, :] @ np.conj(np.asarray(v)).T
    np.testing.assert_allclose(rec, h, atol=1e-10)
    low = np.asarray(LA.cholesky(A(h)))
    np.testing.assert_allclose(low @ np.conj(low).T, h, atol=1e-10)
    up = np.asarray(LA.cholesky(A(h), upper=True))
    np.testing.assert_allclose(np.conj(up).T @ up, h, atol=1e-10)
    np.testing.assert_allclose(np.triu(up), up)


def test_pinv_moore_penrose_conditions():
    x = rnd((5, 3), np.float64, 5)
    x[:, 2] = x[:, 0]  # rank 2
    p = np.asarray(LA.pinv(A(x)))
    np.testing.assert_allclose(x @ p @ x, x, atol=1e-10)
    np.testing.assert_allclose(p @ x @ p, p, atol=1e-10)
    np.testing.assert_allclose((x @ p).T, x @ p, atol=1e-10)
    assert int(LA.matrix_rank(A(x))) == 2


def test_norm_against_numpy_defaults():
    x = rnd((3, 4), np.float64, 6)
    for kw in ({}, {"ord": "nuc"}, {"ord": 2}, {"ord": -np.inf, "axis": 0},
               {"ord": 0.5, "axis": 1, "keepdims": True}):
        np.testing.assert_allclose(np.asarray(LA.norm(A(x), **kw)), np.linalg.norm(x, **kw),
                                   rtol=1e-12)


def test_trace_and_diagonal_offsets():
    x = np.arange(24).reshape(2, 3, 4)
    for k in (-3, -1, 0, 2, 4):
        np.testing.assert_array_equal(np.asarray(LA.diagonal(A(x), offset=k)),
                                      np.linalg.diagonal(x, offset=k))
        np.testing.assert_array_equal(np.asarray(LA.trace(A(x), offset=k)),
                                      np.linalg.trace(x, offset=k))


def test_multi_dot_matches_numpy():
    arrs = [rnd((10, 30), seed=1), rnd((30, 5), seed=2), rnd((5, 60), seed=3), rnd((60,), seed=4)]
    np.testing.assert_allclose(np.asarray(LA.multi_dot([A(a) for a in arrs])),
                               np.linalg.multi_dot(arrs), rtol=1e-10)


def test_namespace_reexports():
    for name in ("matmul", "tensordot", "vecdot", "cross", "outer", "matrix_transpose", "svdvals",
                 "vector_norm", "matrix_norm", "diagonal", "trace"):
        assert name in LA.__all__ and callable(getattr(LA, name))


# ---- staging -----------------------------------------------------------------------------------

def test_staged_solve_and_decompositions():
    a, b = spd(3, seed=7, batch=(2,)), rnd((3, 2), seed=8)

    def f(a, b):
        q, r = LA.qr(a)
        return LA.solve(a, b), LA.det(a), LA.svdvals(r), LA.slogdet(a).logabsdet

    prog = make_ir(f)(A(a), A(b))
    check_program(prog)
    outs = eval_program(prog, prog.consts, A(a), A(b))
    np.testing.assert_allclose(np.asarray(outs[0]), np.linalg.solve(a, b), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(outs[1]), np.linalg.det(a), rtol=1e-10)
    sd = eval_shape(lambda x: LA.svd(x, full_matrices=True), A(np.ones((2, 5, 3), np.float32)))
    assert [s.shape for s in sd] == [(2, 5, 5), (2, 3), (2, 3, 3)]


# ---- hypothesis --------------------------------------------------------------------------------

@st.composite
def solve_shapes(draw):
    n = draw(st.integers(1, 4))
    batch = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2)))]
    ba = [d if draw(st.booleans()) else 1 for d in batch][draw(st.integers(0, len(batch))):]
    if draw(st.booleans()):
        return tuple(ba) + (n, n), (n,)
    bb = [d if draw(st.booleans()) else 1 for d in batch][draw(st.integers(0, len(batch))):]
    return tuple(ba) + (n, n), tuple(bb) + (n, draw(st.integers(0, 3)))


@given(solve_shapes())
def test_solve_broadcasting_matches_numpy(shapes):
    sa, sb = shapes
    a = rnd(sa, seed=1) + 4 * np.eye(sa[-1])
    b = rnd(sb, seed=2)
    want = np.linalg.solve(a, b)
    got = LA.solve(A(a), A(b))
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-12)
