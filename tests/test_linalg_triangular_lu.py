"""Tests of starling.linalg's triangular solves, LU factorization and failure handling
(triangular_solve, solve_triangular, cholesky_solve, lu_factor(_ex), lu, lu_solve, inv_ex,
solve_ex, cholesky_ex, check_errors) against SciPy / NumPy, finite differences and loops."""
import itertools

import numpy as np
import pytest
import scipy.linalg as sl
from hypothesis import given
from hypothesis import strategies as st

import starling
import starling.linalg as LA
import starling.numpy as snp
from starling.test_util import check_grads
from tests.hard_matrices import rnd

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 2e-4, np.complex64: 2e-4, np.float64: 1e-10, np.complex128: 1e-10}


def A(x):
    return snp.asarray(np.asarray(x))


def N(x):
    return np.asarray(x)


def well(shape, dtype=np.float64, seed=0):
    """Well-conditioned square matrices (diagonally dominant, so also their triangles)."""
    n = shape[-1]
    return (rnd(shape, dtype, seed) + (2 * n + 2) * np.eye(n)).astype(dtype)


def spd(shape, dtype=np.float64, seed=0):
    x = rnd(shape, dtype, seed)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def loop(fn, *arrays):
    """``fn`` applied matrix by matrix over the leading batch dims of ``arrays`` (NumPy)."""
    batch = arrays[0].shape[:-2]
    outs = [fn(*[a[i] for a in arrays]) for i in np.ndindex(batch)]
    if isinstance(outs[0], tuple) if outs else False:
        return tuple(np.stack(o).reshape(batch + o[0].shape) for o in zip(*outs))
    return np.stack(outs).reshape(batch + outs[0].shape) if outs else None


def close(got, want, dtype):
    np.testing.assert_allclose(N(got), want, rtol=TOL[dtype], atol=TOL[dtype])


# ---- triangular_solve / solve_triangular -------------------------------------------------------

def ref_triangular(a, b, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """scipy.linalg.solve_triangular per matrix (right side: through the transposed system;
    conj(a) alone: through conj of the system)."""
    trans = (2 if conjugate_a else 1) if transpose_a else 0

    def one(a, b):
        if not left_side:    # x op(a) = b  <=>  op(a)^T x^T = b^T
            t = {0: 1, 1: 0, 2: "conj"}[trans]
            if t == "conj":    # (a^H)^T = conj(a)
                return np.conj(sl.solve_triangular(a, np.conj(b.T), lower=lower,
                                                   unit_diagonal=unit_diagonal)).T
            return one_left(a, b.T, t).T
        return one_left(a, b, trans)

    def one_left(a, b, t):
        if conjugate_a and not transpose_a and left_side:
            return np.conj(sl.solve_triangular(a, np.conj(b), lower=lower,
                                               unit_diagonal=unit_diagonal))
        if conjugate_a and not transpose_a:   # right side of conj(a): (conj a)^T = a^H
            return sl.solve_triangular(a, b, trans=2, lower=lower, unit_diagonal=unit_diagonal)
        return sl.solve_triangular(a, b, trans=t, lower=lower, unit_diagonal=unit_diagonal)
    return loop(one, a, b)


FLAGS = list(itertools.product([True, False], repeat=5))   # left, lower, trans, conj, unit
# every flag combination in complex64 and float64, the plain ones in the other dtypes (the slow
# sweep runs them all)
FAST = [(dt, f) for dt in DTYPES for f in FLAGS
        if dt in (np.complex64, np.float64) or not (f[2] or f[3])]


@pytest.mark.parametrize("dtype,flags", FAST, ids=lambda v: "".join(
    "LlTCU"[i] if x else "_" for i, x in enumerate(v)) if isinstance(v, tuple)
    else np.dtype(v).name)
def test_triangular_solve_matches_scipy(dtype, flags):
    left, lower, trans, conj, unit = flags
    a = rnd((2, 4, 4), dtype, 1) * 0.3 + 3 * np.eye(4, dtype=dtype)
    a[..., 0, 3] = a[..., 3, 0] = 99    # garbage in the triangle that is not read
    np.fill_diagonal(a[1], 2) if unit else None
    b = rnd((2, 4, 3) if left else (2, 3, 4), dtype, 2)
    got = LA.triangular_solve(A(a), A(b), left_side=left, lower=lower, transpose_a=trans,
                              conjugate_a=conj, unit_diagonal=unit)
    assert got.dtype == dtype and got.shape == b.shape
    close(got, ref_triangular(a, b, left, lower, trans, conj, unit), dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("sizes", [(300, 5, 2), (3, 40, 20)])
def test_triangular_solve_both_paths_slow(dtype, flags, sizes):
    """Many small systems take the vectorised substitution, few large ones LAPACK trtrs."""
    left, lower, trans, conj, unit = flags
    c, n, k = sizes
    # off-diagonal entries of size 1/n: unit triangles with O(1) entries have condition numbers
    # growing like 2^n
    a = (rnd((c, n, n), dtype, 3) / n + np.eye(n)).astype(dtype)
    b = rnd((c, n, k) if left else (c, k, n), dtype, 4)
    got = LA.triangular_solve(A(a), A(b), left_side=left, lower=lower, transpose_a=trans,
                              conjugate_a=conj, unit_diagonal=unit)
    close(got, ref_numpy(a, b, left, lower, trans, conj, unit), dtype)


def ref_numpy(a, b, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """The same system written out densely and solved by NumPy's batched LU (an independent
    reference, fast for big stacks)."""
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        t = t - t * np.eye(a.shape[-1]) + np.eye(a.shape[-1])
    t = np.swapaxes(t, -1, -2) if transpose_a else t
    t = np.conj(t) if conjugate_a else t
    if left_side:
        return np.linalg.solve(t, b)
    return np.swapaxes(np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


@pytest.mark.parametrize("sizes", [(300, 5, 2), (3, 40, 20)])
def test_triangular_solve_substitution_and_trtrs_paths(sizes):
    c, n, k = sizes
    a, b = well((c, n, n), np.complex128, 3), rnd((c, n, k), np.complex128, 4)
    for lower, trans, conj in itertools.product([True, False], repeat=3):
        for left in (True, False):
            bb = b if left else np.swapaxes(b, -1, -2)
            got = LA.triangular_solve(A(a), A(bb), left_side=left, lower=lower,
                                      transpose_a=trans, conjugate_a=conj)
            close(got, ref_numpy(a, bb, left, lower, trans, conj, False), np.complex128)


def test_triangular_solve_defaults_are_jax_ones():
    # JAX: left_side=False, lower=False: x @ triu(a) = b
    a, b = well((3, 3)), rnd((2, 3))
    np.testing.assert_allclose(N(LA.triangular_solve(A(a), A(b))),
                               b @ np.linalg.inv(np.triu(a)), rtol=1e-12)


def test_solve_triangular_is_torchs_signature():
    a, b = well((2, 3, 3)), rnd((3, 2))   # batch dims broadcast
    got = LA.solve_triangular(A(a), A(b), upper=True)
    np.testing.assert_allclose(N(got), np.linalg.solve(np.triu(a), b), rtol=1e-12)
    got = LA.solve_triangular(A(a), A(b.T), upper=False, left=False, unitriangular=True)
    want = b.T @ np.linalg.inv(np.tril(a, -1) + np.eye(3))
    np.testing.assert_allclose(N(got), want, rtol=1e-12)
    with pytest.raises(TypeError):
        LA.solve_triangular(A(a), A(b))   # upper is required, as in torch


def test_triangular_solve_promotes_and_checks():
    x = LA.triangular_solve(A(np.eye(2, dtype=np.int32) * 2), A(np.ones((2, 1), np.float32)),
                            left_side=True)
    assert x.dtype == np.float32
    np.testing.assert_array_equal(N(x), 0.5)
    x = LA.triangular_solve(A(np.eye(2, dtype=np.float16) * 4),
                            A(np.ones((2, 1), np.float16)), left_side=True)
    assert x.dtype == np.float16 and float(N(x)[0, 0]) == 0.25
    with pytest.raises(ValueError, match=r"triangular_solve: b of shape \(3,\) does not match a "
                                         r"of shape \(3, 3\).*b\[\.\.\., None\]"):
        LA.triangular_solve(A(np.eye(3)), A(np.ones(3)), left_side=True)
    with pytest.raises(ValueError, match=r"triangular_solve: b of shape \(2, 3\) does not match"):
        LA.triangular_solve(A(np.eye(3)), A(np.ones((2, 3))), left_side=True)
    with pytest.raises(ValueError, match=r"solve_triangular: expected a stack of square"):
        LA.solve_triangular(A(np.ones((3, 2))), A(np.ones((3, 1))), upper=True)
    with pytest.raises(ValueError, match=r"triangular_solve: .*broadcast"):
        LA.triangular_solve(A(np.ones((2, 3, 3))), A(np.ones((4, 3, 1))), left_side=True)
    with pytest.raises(TypeError, match=r"triangular_solve: check_errors must be a bool"):
        LA.triangular_solve(A(np.eye(3)), A(np.ones((3, 1))), check_errors="yes")


@pytest.mark.parametrize("shape_a,shape_b", [((0, 3, 3), (0, 3, 2)), ((0, 0), (0, 4)),
                                             ((2, 0, 0), (2, 0, 1)), ((3, 3), (3, 0)),
                                             ((1, 1), (1, 1)), ((1, 1, 1), (5, 1, 2))])
def test_triangular_solve_empty_and_size_one(shape_a, shape_b):
    a, b = well(shape_a) if shape_a[-1] else np.zeros(shape_a), rnd(shape_b)
    got = LA.solve_triangular(A(a), A(b), upper=False)
    want_shape = np.broadcast_shapes(shape_a[:-2], shape_b[:-2]) + shape_b[-2:]
    assert got.shape == want_shape
    if got.size:
        np.testing.assert_allclose(N(got), np.linalg.solve(np.tril(a), b), rtol=1e-12)


# ---- cholesky_solve ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_matches_cho_solve(dtype, upper):
    s = spd((2, 4, 4), dtype, 5)
    c = np.linalg.cholesky(s)
    c = np.conj(np.swapaxes(c, -1, -2)) if upper else c
    b = rnd((2, 4, 3), dtype, 6)
    got = LA.cholesky_solve(A(b), A(c), upper=upper)
    want = loop(lambda c, b: sl.cho_solve((c, not upper), b), c, b)
    assert got.dtype == dtype
    close(got, want, dtype)
    close(got, np.linalg.solve(s, b), dtype)


def test_cholesky_solve_broadcasts_and_reads_one_triangle():
    s = spd((3, 3), seed=7)
    low = np.linalg.cholesky(s)
    low[0, 2] = 50.0      # not read
    b = rnd((2, 3, 1), seed=8)
    np.testing.assert_allclose(N(LA.cholesky_solve(A(b), A(low))), np.linalg.solve(s, b),
                               rtol=1e-12)


# ---- lu / lu_factor / lu_solve -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 3, 5), (1, 1), (2, 1, 3, 3)])
def test_lu_matches_scipy(dtype, shape):
    a = rnd(shape, dtype, 9)
    p, lo, up = LA.lu(A(a))
    assert p.dtype == lo.dtype == up.dtype == dtype
    rp, rl, ru = sl.lu(a)
    np.testing.assert_array_equal(N(p), rp)
    close(lo, rl, dtype)
    close(up, ru, dtype)
    packed, piv = LA.lu_factor(A(a))
    assert piv.dtype == np.int32 and piv.shape == shape[:-1][:-1] + (min(shape[-2:]),)
    for i in np.ndindex(shape[:-2]):
        if shape[-1] == shape[-2]:
            rlu, rpiv = sl.lu_factor(a[i])
            close(N(packed)[i], rlu, dtype)
            np.testing.assert_array_equal(N(piv)[i], rpiv + 1)   # torch / LAPACK: 1-based


@pytest.mark.parametrize("shape", [(0, 3, 3), (0, 0), (3, 0), (0, 2), (2, 0, 4)])
def test_lu_empty(shape):
    p, lo, up = LA.lu(A(np.zeros(shape)))
    m, n = shape[-2:]
    k = min(m, n)
    assert p.shape == shape[:-2] + (m, m) and lo.shape == shape[:-2] + (m, k) \
        and up.shape == shape[:-2] + (k, n)
    if p.size:
        np.testing.assert_array_equal(N(p), np.broadcast_to(np.eye(m), p.shape))
    packed, piv, info = LA.lu_factor_ex(A(np.zeros(shape)))
    assert packed.shape == shape and piv.shape == shape[:-2] + (k,) and info.shape == shape[:-2]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left,adjoint", list(itertools.product([True, False], repeat=2)))
def test_lu_solve_matches_scipy(dtype, left, adjoint):
    a = rnd((2, 4, 4), dtype, 10)
    b = rnd((2, 4, 3) if left else (2, 3, 4), dtype, 11)
    packed, piv = LA.lu_factor(A(a))
    got = LA.lu_solve(packed, piv, A(b), left=left, adjoint=adjoint)
    if left:
        want = loop(lambda a, b: sl.lu_solve(sl.lu_factor(a), b, trans=2 if adjoint else 0),
                    a, b)
    else:   # X A = B  <=>  A^T X^T = B^T;  X A^H = B  <=>  conj(A) X^T = B^T
        want = np.swapaxes(loop(lambda a, b: sl.lu_solve(sl.lu_factor(np.conj(a)), b)
                                if adjoint else sl.lu_solve(sl.lu_factor(a), b, trans=1),
                                a, np.swapaxes(b, -1, -2)), -1, -2)
    close(got, want, dtype)


def test_lu_solve_broadcasts_and_checks():
    a, b = rnd((3, 3), seed=12), rnd((2, 3, 2), seed=13)
    packed, piv = LA.lu_factor(A(a))
    np.testing.assert_allclose(N(LA.lu_solve(packed, piv, A(b))), np.linalg.solve(a, b),
                               rtol=1e-12)
    with pytest.raises(ValueError, match=r"lu_solve: B of shape \(4, 1\) does not match LU"):
        LA.lu_solve(packed, piv, A(np.ones((4, 1))))
    with pytest.raises(ValueError, match=r"lu_solve: pivots must be integers of shape \(3,\)"):
        LA.lu_solve(packed, A(np.ones(3)), A(b))
    with pytest.raises(ValueError, match=r"lu_solve: pivots must be LAPACK's 1-based.*\[1, 3\]"):
        LA.lu_solve(packed, A(np.array([0, 2, 3], np.int32)), A(b))


def test_lu_without_pivoting():
    a = well((2, 3, 3), seed=14)
    packed, piv = LA.lu_factor(A(a), pivot=False)
    np.testing.assert_array_equal(N(piv), [[1, 2, 3]] * 2)
    lo = np.tril(N(packed), -1) + np.eye(3)
    np.testing.assert_allclose(lo @ np.triu(N(packed)), a, rtol=1e-12)
    # a zero leading pivot: no LU without row exchanges; NaN, info, or LinAlgError
    z = np.array([[[0.0, 1.0], [1.0, 0.0]], [[2.0, 1.0], [1.0, 2.0]]])
    packed, piv, info = LA.lu_factor_ex(A(z), pivot=False)
    np.testing.assert_array_equal(N(info), [1, 0])
    assert np.isnan(N(packed)[0]).all() and np.isfinite(N(packed)[1]).all()
    with pytest.raises(LA.LinAlgError, match=r"lu_factor: matrix \(0,\) .*zero pivot U\[0, 0\].*"
                                             r"pivot=True"):
        LA.lu_factor(A(z), pivot=False, check_errors=True)


# ---- singular, nearly singular, non-PD, non-finite input ---------------------------------------

def singular_stack():
    a = rnd((3, 3, 3), seed=15)
    a[1, :, 2] = a[1, :, 0] + a[1, :, 1]   # exactly singular? not in floats: use a zero column
    a[1, :, 1] = 0.0
    return a


def test_zero_pivot_lu_keeps_exact_factors_and_reports_info():
    a = singular_stack()
    packed, piv, info = LA.lu_factor_ex(A(a))
    np.testing.assert_array_equal(N(info), [0, 2, 0])      # getrf: U[1, 1] == 0
    rlu, rpiv = sl.lu_factor(a[1])
    np.testing.assert_allclose(N(packed)[1], rlu, rtol=1e-12)
    p, lo, up = LA.lu(A(a))
    np.testing.assert_allclose(N(p @ lo @ up), a, atol=1e-12)
    with pytest.raises(LA.LinAlgError, match=r"lu: matrix \(1,\) of the stack of shape "
                                             r"\(3, 3, 3\) is singular.*U\[1, 1\]"):
        LA.lu(A(a), check_errors=True)


def _first_nan_others_ok(got, want, bad):
    got = N(got)
    assert np.isnan(got[bad]).all()
    ok = [i for i in range(got.shape[0]) if i != bad]
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-9)


@pytest.mark.parametrize("jit", [False, True])
def test_singular_matrix_gives_nan_and_keeps_the_others(jit):
    a = singular_stack()
    b = rnd((3, 3, 2), seed=16)
    good = a.copy()
    good[1] = np.eye(3)
    wrap = starling.jit if jit else (lambda f: f)
    _first_nan_others_ok(wrap(LA.inv)(A(a)), np.linalg.inv(good), 1)
    _first_nan_others_ok(wrap(LA.solve)(A(a), A(b)), np.linalg.solve(good, b), 1)
    packed, piv = LA.lu_factor(A(a))
    _first_nan_others_ok(wrap(LA.lu_solve)(packed, piv, A(b)), np.linalg.solve(good, b), 1)
    t = np.triu(well((3, 3, 3), seed=17))
    t[1, 2, 2] = 0.0
    tg = t.copy()
    tg[1] = np.eye(3)
    f = wrap(lambda t, b: LA.solve_triangular(t, b, upper=True))
    _first_nan_others_ok(f(A(t), A(b)), np.linalg.solve(tg, b), 1)
    low = np.conj(np.swapaxes(t, -1, -2))
    lg = np.conj(np.swapaxes(tg, -1, -2))
    _first_nan_others_ok(wrap(LA.cholesky_solve)(A(b), A(low)),
                         np.linalg.solve(lg @ np.swapaxes(lg, -1, -2), b), 1)
    s = spd((3, 3, 3), seed=18)
    s[2] = -np.eye(3)
    sg = s.copy()
    sg[2] = np.eye(3)
    _first_nan_others_ok(wrap(LA.cholesky)(A(s)), np.linalg.cholesky(sg), 2)


@pytest.mark.parametrize("jit", [False, True])
def test_check_errors_raises_naming_op_shape_and_index(jit):
    wrap = starling.jit if jit else (lambda f: f)
    a = singular_stack()
    b = A(rnd((3, 3, 1), seed=19))
    cases = [
        (lambda: wrap(lambda x: LA.inv(x, check_errors=True))(A(a)),
         r"inv: matrix \(1,\) of the stack of shape \(3, 3, 3\) is singular.*getrf.*U\[1, 1\]"),
        (lambda: wrap(lambda x, y: LA.solve(x, y, check_errors=True))(A(a), b),
         r"solve: matrix \(1,\) .*singular"),
        (lambda: wrap(lambda x: LA.inv_ex(x, check_errors=True))(A(a)), r"inv_ex: matrix \(1,\)"),
        (lambda: wrap(lambda x: LA.lu_factor(x, check_errors=True))(A(a)),
         r"lu_factor: matrix \(1,\) .*getrf"),
        (lambda: wrap(lambda x: LA.solve_triangular(x, b, upper=True, check_errors=True))(
            A(np.triu(a))), r"solve_triangular: matrix \(1,\) .*diagonal entry \[1, 1\].*trtrs"),
        (lambda: wrap(lambda x: LA.cholesky_solve(b, x, check_errors=True))(A(np.tril(a))),
         r"cholesky_solve: matrix \(1,\) .*diagonal entry \[1, 1\]"),
        (lambda: wrap(lambda x: LA.cholesky(x, check_errors=True))(
            A(np.stack([np.eye(2), np.eye(2), -np.eye(2)]).reshape(3, 1, 2, 2))),
         r"cholesky: matrix \(2, 0\) of the stack of shape \(3, 1, 2, 2\) is not positive "
         r"definite: its leading minor of order 1"),
    ]
    packed, piv = LA.lu_factor(A(a))
    cases.append((lambda: wrap(lambda x: LA.lu_solve(x, piv, b, check_errors=True))(packed),
                  r"lu_solve: matrix \(1,\) .*singular"))
    for run, match in cases:
        with pytest.raises(LA.LinAlgError, match=match):
            run()
    # two failures: the count is reported
    two = np.zeros((2, 2, 2))
    with pytest.raises(LA.LinAlgError, match=r"matrix \(0,\) .*\(2 of 2 matrices failed\)"):
        wrap(lambda x: LA.inv(x, check_errors=True))(A(two))


def test_nan_default_is_the_same_in_eager_and_compiled_code():
    a = singular_stack()
    b = rnd((3, 3, 2), seed=20)
    packed, piv = LA.lu_factor(A(a))
    fns = [lambda a, b: LA.inv(a), LA.solve, lambda a, b: LA.lu_solve(packed, piv, b),
           lambda a, b: LA.solve_triangular(a, b, upper=True),
           lambda a, b: LA.cholesky(a @ snp.matrix_transpose(a))]
    for f in fns:
        np.testing.assert_array_equal(N(f(A(a), A(b))), N(starling.jit(f)(A(a), A(b))))


def test_ex_functions_return_lapack_info():
    a = singular_stack()
    inv, info = LA.inv_ex(A(a))
    assert info.dtype == np.int32 and info.shape == (3,)
    np.testing.assert_array_equal(N(info), [0, 2, 0])
    x, info = LA.solve_ex(A(a), A(np.ones(3)))
    np.testing.assert_array_equal(N(info), [0, 2, 0])
    assert np.isnan(N(x)[1]).all() and x.shape == (3, 3)
    s = spd((4, 3, 3), seed=21)
    s[1, 2, 2] = -50.0        # leading minor of order 3 fails
    s[3, 0, 0] = 0.0          # order 1
    for upper in (False, True):
        m = np.conj(np.swapaxes(s, -1, -2)) if upper else s
        low, info = LA.cholesky_ex(A(m), upper=upper)
        want = [sl.lapack.dpotrf(x, lower=1)[1] for x in s]
        np.testing.assert_array_equal(N(info), want)
        np.testing.assert_array_equal(N(info), [0, 3, 0, 1])
        assert np.isnan(N(low)[[1, 3]]).all() and np.isfinite(N(low)[[0, 2]]).all()
    # info under jit and vmap
    np.testing.assert_array_equal(N(starling.jit(lambda x: LA.inv_ex(x)[1])(A(a))), [0, 2, 0])
    np.testing.assert_array_equal(N(starling.vmap(lambda x: LA.cholesky_ex(x)[1])(A(s))),
                                  [0, 3, 0, 1])


def test_nearly_singular_input_is_solved_not_flagged():
    eps = 1e-13
    a = np.array([[1.0, 1.0], [1.0, 1.0 + eps]])
    b = np.array([[2.0], [2.0 + eps]])
    x, info = LA.solve_ex(A(a), A(b))
    assert int(N(info)) == 0
    np.testing.assert_allclose(N(x), np.linalg.solve(a, b), rtol=1e-12)
    packed, piv, info = LA.lu_factor_ex(A(a))
    assert int(N(info)) == 0
    np.testing.assert_allclose(N(LA.lu_solve(packed, piv, A(b))), [[1.0], [1.0]], rtol=1e-2)
    t = np.array([[1e-300, 0.0], [1.0, 1.0]])
    np.testing.assert_allclose(N(LA.solve_triangular(A(t), A([[1e-300], [2.0]]), upper=False)),
                               [[1.0], [1.0]])


def test_non_finite_input():
    nan = np.full((2, 2), np.nan)
    inv, info = LA.inv_ex(A(nan))
    assert np.isnan(N(inv)).all() and int(N(info)) == 0       # getrf does not fail on NaN
    low, info = LA.cholesky_ex(A(nan))
    # reference LAPACK's potrf flags a NaN pivot (info 1, all-NaN factor), OpenBLAS's does not
    # (info 0, NaN propagated through the lower triangle): NaN either way
    assert np.isnan(N(low)[np.tril_indices(2)]).all() and int(N(info)) in (0, 1)
    packed, piv, info = LA.lu_factor_ex(A(np.array([[np.inf, 1.0], [1.0, 1.0]])))
    assert int(N(info)) == 0 and N(piv).tolist() == [1, 2]
    x = LA.solve_triangular(A(np.array([[1.0, 0.0], [np.nan, 1.0]])), A(np.ones((2, 1))),
                            upper=False)
    np.testing.assert_array_equal(np.isnan(N(x)).ravel(), [False, True])
    x = LA.solve_triangular(A(np.array([[np.inf, 0.0], [1.0, 1.0]])), A(np.ones((2, 1))),
                            upper=False)
    np.testing.assert_array_equal(N(x).ravel(), [0.0, 1.0])


# ---- vmap vs loop ------------------------------------------------------------------------------

def _vmap_vs_loop(fn, args, in_axes):
    got = starling.vmap(fn, in_axes=in_axes)(*[A(a) for a in args])
    size = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = []
    for i in range(size):
        sl_args = [A(np.take(a, i, axis=ax)) if ax is not None else A(a)
                   for a, ax in zip(args, in_axes)]
        outs.append(fn(*sl_args))
    got = got if isinstance(got, tuple) else (got,)
    outs = [o if isinstance(o, tuple) else (o,) for o in outs]
    for j, g in enumerate(got):
        np.testing.assert_allclose(N(g), np.stack([N(o[j]) for o in outs]), rtol=1e-10,
                                   atol=1e-12)


VMAP_CASES = {
    "triangular_left": (lambda a, b: LA.triangular_solve(a, b, left_side=True, lower=True),
                        lambda: (well((3, 2, 4, 4), seed=22), rnd((3, 2, 4, 2), seed=23))),
    "triangular_right": (lambda a, b: LA.triangular_solve(a, b, transpose_a=True,
                                                          conjugate_a=True),
                         lambda: (well((3, 2, 4, 4), np.complex128, 24),
                                  rnd((3, 2, 5, 4), np.complex128, 25))),
    "cholesky_solve": (LA.cholesky_solve,
                       lambda: (rnd((3, 4, 2), seed=26),
                                np.linalg.cholesky(spd((3, 4, 4), seed=27)))),
    "lu_factor": (lambda a: tuple(LA.lu_factor(a)), lambda: (rnd((3, 2, 4, 3), seed=28),)),
    "lu": (lambda a: tuple(LA.lu(a)), lambda: (rnd((3, 3, 5), seed=29),)),
    "lu_factor_ex": (lambda a: tuple(LA.lu_factor_ex(a)), lambda: (singular_stack(),)),
    "inv_ex": (LA.inv_ex, lambda: (singular_stack(),)),
    "solve_ex": (LA.solve_ex, lambda: (singular_stack(), rnd((3, 3, 2), seed=30))),
    "cholesky_ex": (LA.cholesky_ex, lambda: (spd((3, 3, 3), seed=31) - 5 * np.eye(3),)),
}


@pytest.mark.parametrize("name", sorted(VMAP_CASES))
def test_vmap_matches_loop_over_each_argument(name):
    fn, make = VMAP_CASES[name]
    args = make()
    for mapped in range(len(args)):
        in_axes = [None] * len(args)
        in_axes[mapped] = 0
        fixed = [a if i == mapped else a[0] for i, a in enumerate(args)]
        _vmap_vs_loop(fn, fixed, in_axes)
    if len(args) > 1:
        _vmap_vs_loop(fn, args, [0] * len(args))
    # a batch axis that is not the first one
    moved = [np.moveaxis(a, 0, -1) for a in args]
    _vmap_vs_loop(fn, moved, [a.ndim - 1 for a in moved])


def test_vmap_of_lu_solve_over_each_argument():
    a, b = rnd((3, 4, 4), seed=32), rnd((3, 4, 2), seed=33)
    packed, piv = (N(x) for x in LA.lu_factor(A(a)))
    for left, adjoint in itertools.product([True, False], repeat=2):
        bb = b if left else np.swapaxes(b, -1, -2)

        def f(lu, p, x, left=left, adjoint=adjoint):
            return LA.lu_solve(lu, p, x, left=left, adjoint=adjoint)
        for axes in [(0, 0, None), (None, None, 0), (0, 0, 0)]:
            args = [x if ax is not None else x[0] for x, ax in zip((packed, piv, bb), axes)]
            _vmap_vs_loop(f, args, list(axes))


# ---- derivatives -------------------------------------------------------------------------------

@pytest.mark.parametrize("left,lower,trans,conj,unit", [
    (True, True, False, False, False), (False, False, True, False, True),
    pytest.param(True, False, True, True, False, marks=pytest.mark.slow),
    (False, True, False, True, False)])
def test_triangular_solve_grads(left, lower, trans, conj, unit):
    dtype = np.complex128 if conj else np.float64
    a = well((2, 3, 3), dtype, 34)
    b = rnd((2, 3, 2) if left else (2, 2, 3), dtype, 35)

    def f(a, b):
        return LA.triangular_solve(a, b, left_side=left, lower=lower, transpose_a=trans,
                                   conjugate_a=conj, unit_diagonal=unit)
    check_grads(f, (A(a), A(b)), order=2)


def test_triangular_solve_grad_is_zero_outside_the_read_triangle():
    a, b = well((3, 3), seed=36), rnd((3, 2), seed=37)
    g = starling.grad(lambda a: snp.sum(LA.solve_triangular(a, A(b), upper=True,
                                                            unitriangular=True)))(A(a))
    assert np.all(np.tril(N(g)) == 0) and np.any(np.triu(N(g), 1) != 0)


@pytest.mark.parametrize("dtype", [np.float64, pytest.param(np.complex128,
                                                             marks=pytest.mark.slow)])
def test_cholesky_solve_grads(dtype):
    low = np.linalg.cholesky(spd((3, 3), dtype, 38))
    b = rnd((3, 2), dtype, 39)
    check_grads(LA.cholesky_solve, (A(b), A(low)), order=2)
    check_grads(lambda b, u: LA.cholesky_solve(b, u, upper=True),
                (A(b), A(np.conj(low.T))), order=2)


@pytest.mark.parametrize("dtype,shape", [
    (np.float64, (3, 3)), (np.complex128, (4, 2)), (np.float64, (2, 4)),
    pytest.param(np.complex128, (3, 3), marks=pytest.mark.slow),
    pytest.param(np.float64, (4, 2), marks=pytest.mark.slow),
    pytest.param(np.complex128, (2, 4), marks=pytest.mark.slow),
    pytest.param(np.float64, (2, 3, 3), marks=pytest.mark.slow)])
def test_lu_grads(dtype, shape):
    a = rnd(shape, dtype, 40) + 2 * np.eye(*shape[-2:])
    check_grads(lambda a: LA.lu_factor(a).LU, (A(a),), order=2)
    check_grads(lambda a: tuple(LA.lu(a))[1:], (A(a),), order=2)


def test_lu_grads_without_pivoting():
    check_grads(lambda a: LA.lu_factor(a, pivot=False).LU, (A(well((3, 3), seed=41)),), order=2)


@pytest.mark.parametrize("left,adjoint", [
    (True, False), (False, True), pytest.param(True, True, marks=pytest.mark.slow),
    pytest.param(False, False, marks=pytest.mark.slow)])
def test_lu_solve_grads(left, adjoint):
    a, b = rnd((3, 3), np.complex128, 42), rnd((3, 2), np.complex128, 43)
    packed, piv = LA.lu_factor(A(a))
    check_grads(lambda lu, b: LA.lu_solve(lu, piv, b, left=left, adjoint=adjoint),
                (packed, A(b if left else b.T)), order=2)


def test_solve_through_lu_has_solves_gradient():
    a, b = rnd((3, 3), seed=44), rnd((3, 1), seed=45)

    def via_lu(a):
        return snp.sum(LA.lu_solve(*LA.lu_factor(a), A(b)) ** 2)

    def direct(a):
        return snp.sum(LA.solve(a, A(b)) ** 2)
    np.testing.assert_allclose(N(starling.grad(via_lu)(A(a))), N(starling.grad(direct)(A(a))),
                               rtol=1e-10)


def test_gradients_at_degenerate_points_are_nan_not_errors():
    # Documented: the derivative through a singular factor is NaN (the failed matrix only).
    t = np.triu(well((2, 3, 3), seed=46))
    t[0, 1, 1] = 0.0
    g = starling.grad(lambda t: snp.sum(LA.solve_triangular(t, A(np.ones((2, 3, 1))),
                                                            upper=True)))(A(t))
    assert np.isnan(N(g)[0]).all() and np.isfinite(N(g)[1]).all()
    a = singular_stack()
    g = starling.grad(lambda a: snp.sum(LA.lu(a).U))(A(a))
    assert np.isnan(N(g)[1]).any() and np.isfinite(N(g)[[0, 2]]).all()


# ---- hypothesis over shapes --------------------------------------------------------------------

shapes = st.tuples(st.lists(st.integers(0, 3), max_size=2), st.integers(0, 5), st.integers(0, 3))


@given(shapes, st.booleans(), st.booleans())
def test_hypothesis_triangular_and_lu_solve(spec, left, lower):
    batch, n, k = tuple(spec[0]), spec[1], spec[2]
    a = well(batch + (n, n), seed=n + k) if n else np.zeros(batch + (0, 0))
    b = rnd(batch + ((n, k) if left else (k, n)), seed=n * k + 1)
    x = LA.triangular_solve(A(a), A(b), left_side=left, lower=lower)
    assert x.shape == b.shape
    t = np.tril(a) if lower else np.triu(a)
    if x.size:
        got = t @ N(x) if left else N(x) @ t
        np.testing.assert_allclose(got, b, atol=1e-10)
    packed, piv = LA.lu_factor(A(a))
    y = LA.lu_solve(packed, piv, A(b), left=left)
    assert y.shape == b.shape
    if y.size:
        got = a @ N(y) if left else N(y) @ a
        np.testing.assert_allclose(got, b, atol=1e-10)


@given(st.lists(st.integers(0, 3), max_size=2), st.integers(0, 5), st.integers(0, 5))
def test_hypothesis_lu_reconstructs(batch, m, n):
    a = rnd(tuple(batch) + (m, n), seed=m * 7 + n)
    p, lo, up = LA.lu(A(a))
    if a.size:
        np.testing.assert_allclose(N(p) @ N(lo) @ N(up), a, atol=1e-12)
        assert np.all(np.abs(np.tril(N(lo), -1)) <= 1.0 + 1e-15)    # partial pivoting
