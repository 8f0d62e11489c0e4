"""nn.functional.cdist / pdist and nn.CDist / nn.PDist against SciPy and a NumPy brute force,
the derivative conventions at coincident points and ties, check_grads to order 2 in both
modes, vmap against a loop, compile and checkpoint against eager."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial import distance as sd

import starling
import starling.numpy as snp
from starling import nn
from starling.nn import functional as F
from starling.test_util import check_grads

PS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf]
MM, EXACT, AUTO = ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist",
                   "use_mm_for_euclid_dist_if_necessary")


def A(x):
    return np.asarray(x)


def scipy_cdist(x, y, p):
    if p == 0:
        return sd.cdist(x, y, "hamming") * x.shape[1]
    if p == math.inf:
        return sd.cdist(x, y, "chebyshev")
    return sd.cdist(x, y, "minkowski", p=p)


def scipy_pdist(x, p):
    if p == 0:
        return sd.pdist(x, "hamming") * x.shape[1]
    if p == math.inf:
        return sd.pdist(x, "chebyshev")
    return sd.pdist(x, "minkowski", p=p)


def brute(x, y, p):
    """NumPy broadcast formula for (*b, P, M), (*b, R, M) (plain powers: no scaling)."""
    d = np.abs(x[..., :, None, :] - y[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(d.dtype)
    if p == math.inf:
        return d.max(-1)
    return (d ** p).sum(-1) ** (1 / p)


def points(seed, *shape):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    x[..., 0, :2] = 0.5            # shared coordinates: zero differences along some columns
    return x


@pytest.mark.parametrize("p", PS)
def test_values_vs_scipy(p):
    x, y = points(0, 6, 3), points(1, 30, 3)
    y[4] = x[2]                                             # a coincident pair
    for mode in (EXACT, MM, AUTO):
        np.testing.assert_allclose(A(F.cdist(x, y, p, mode)), scipy_cdist(x, y, p),
                                   rtol=1e-13, atol=1e-7 if mode != EXACT and p == 2 else 0)
        assert A(F.cdist(x, y, p, mode))[2, 4] == 0
    np.testing.assert_allclose(A(F.pdist(y, p)), scipy_pdist(y, p), rtol=1e-13)
    assert F.pdist(y, p).shape == (30 * 29 // 2,)


def test_batch_dims_broadcast():
    x, y = points(2, 2, 1, 3, 4), points(3, 5, 2, 4)
    for p in PS:
        got = F.cdist(x, y, p, EXACT)
        assert got.shape == (2, 5, 3, 2)
        want = brute(x, y, p)
        np.testing.assert_allclose(A(got), want, rtol=1e-13)
    got = F.pdist(points(4, 3, 5, 2), 1.5)
    for b in range(3):
        np.testing.assert_allclose(A(got[b]), scipy_pdist(points(4, 3, 5, 2)[b], 1.5),
                                   rtol=1e-13)


def test_default_mode_follows_torch_threshold():
    x = points(5, 26, 3)
    np.testing.assert_array_equal(A(F.cdist(x, x[:3])), A(F.cdist(x, x[:3], 2, MM)))
    np.testing.assert_array_equal(A(F.cdist(x[:25], x[:3])), A(F.cdist(x[:25], x[:3], 2, EXACT)))


@pytest.mark.parametrize("mode", [EXACT, MM])
@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.0, math.inf])
def test_coincident_points_zero_derivative(p, mode):
    x = np.tile(points(6, 1, 3), (4, 1))
    ones = np.ones_like(x)
    for f in (lambda a, b: F.cdist(a, b, p, mode), lambda a, b: F.pdist(a, p)):
        def total(a, b):
            return snp.sum(f(a, b))
        # every pair coincides: distance 0, first and second derivatives 0, both modes
        assert not A(f(x, x)).any()
        for g in starling.grad(total, argnums=(0, 1))(x, x):
            assert not A(g).any()
        assert not A(starling.jvp(lambda a: total(a, x), (x,), (ones,))[1]).any()
        hvp = starling.jvp(lambda a: starling.grad(total)(a, x), (x,), (ones,))[1]
        assert not A(hvp).any()
        hvp = starling.grad(lambda a: snp.sum(starling.grad(total)(a, x) * ones))(x)
        assert not A(hvp).any()
    # one coincident pair among others: its term contributes nothing
    x = points(6, 4, 3)
    y = points(7, 3, 3)
    y[1] = x[2]
    g = A(starling.grad(lambda a: snp.sum(F.cdist(a, y, p, mode)))(x))
    want = np.array(starling.grad(lambda a: snp.sum(F.cdist(a, y, p, EXACT)))(x))
    want[2] = A(starling.grad(lambda a: snp.sum(F.cdist(a, y[[0, 2]], p, EXACT)))(x[2:3]))[0]
    np.testing.assert_allclose(g, want, rtol=1e-7, atol=1e-12)


def test_zero_difference_coordinates_fractional_p():
    # 0 < p < 1: an infinite slope along a zero-difference coordinate becomes 0
    x, y = np.array([[1.0, 2.0, 3.0]]), np.array([[1.0, 0.0, 1.0]])
    g = A(starling.grad(lambda a: F.cdist(a, y, 0.5)[0, 0])(x))
    # n = s^2 with s = sum |d_k|^(1/2): dn/dd_k = 2 s * |d_k|^(-1/2) / 2 = 2 for d = (0, 2, 2)
    np.testing.assert_allclose(g, [[0.0, 2.0, 2.0]], rtol=1e-14)
    assert np.isfinite(A(starling.hessian(lambda a: F.cdist(a, y, 0.5)[0, 0])(x))).all()


def test_inf_norm_ties_split_like_max():
    x1, x2 = np.array([[1.0, -1.0, 0.5]]), np.zeros((1, 3))
    g = A(starling.grad(lambda a: F.cdist(a, x2, math.inf)[0, 0])(x1))
    np.testing.assert_array_equal(g, [[0.5, -0.5, 0.0]])
    t = starling.jvp(lambda a: F.cdist(a, x2, math.inf)[0, 0], (x1,), (np.ones((1, 3)),))[1]
    assert float(t) == 0.0                       # mean of (+1, -1)


def test_p0_counts_with_zero_gradient():
    x, y = points(8, 3, 4), points(9, 2, 4)
    y[0, :3] = x[1, :3]
    assert A(F.cdist(x, y, 0))[1, 0] == 1
    assert not A(starling.grad(lambda a: snp.sum(F.cdist(a, y, 0)))(x)).any()


def test_nonfinite_inputs():
    x1 = np.array([[np.nan, 0.0], [np.inf, 0.0], [1.0, 2.0]])
    x2 = np.array([[0.0, 0.0], [1.0, 1.0]])
    for p in [0.5, 1.0, 2.0, 3.0, math.inf]:
        got = A(F.cdist(x1, x2, p, EXACT))
        assert np.isnan(got[0]).all() and (got[1] == np.inf).all()
        np.testing.assert_allclose(got[2], scipy_cdist(x1[2:], x2, p)[0], rtol=1e-14)
        got = A(F.pdist(x1, p))
        assert np.isnan(got[:2]).all() and got[2] == np.inf
    got = A(F.cdist(x1, x2, 2, MM))        # inf - inf: NaN, as PyTorch's matmul path
    assert np.isnan(got[:2]).all() and np.isfinite(got[2]).all()
    assert (A(F.cdist(x1, x2, 0)) == [[1, 2], [1, 2], [2, 1]]).all()


def test_scaling_avoids_overflow_and_underflow():
    for s, dtype in ((1e200, np.float64), (1e-200, np.float64), (1e30, np.float32),
                     (1e-30, np.float32)):
        x = np.zeros((1, 2), dtype)
        y = np.array([[3, 4]], dtype) * dtype(s)
        for p, want in ((2.0, 5.0), (1.0, 7.0), (3.0, 91 ** (1 / 3)), (0.5, 13.928203230275509),
                        (math.inf, 4.0)):
            got = F.cdist(x, y, p, EXACT)
            assert got.dtype == dtype
            np.testing.assert_allclose(float(got[0, 0]), want * s, rtol=1e-6)


def test_size_one_and_empty_dims():
    x, y = np.array([[2.0]]), np.array([[-1.0]])
    for p in PS:
        np.testing.assert_allclose(float(F.cdist(x, y, p)[0, 0]), 1.0 if p == 0 else 3.0,
                                   rtol=1e-15)
    assert F.cdist(np.zeros((0, 3)), np.ones((2, 3))).shape == (0, 2)
    assert F.cdist(np.zeros((2, 0, 3)), np.ones((0, 3)), 3).shape == (2, 0, 0)
    assert F.cdist(np.zeros((4, 3)), np.ones((0, 3)), 2, MM).shape == (4, 0)
    assert not A(F.cdist(np.zeros((2, 0)), np.zeros((3, 0)), math.inf)).any()
    assert F.pdist(np.ones((1, 3))).shape == (0,)
    assert not A(F.pdist(np.ones((3, 0)))).any()


def test_dtypes():
    x32, y32 = points(10, 3, 2).astype(np.float32), points(11, 2, 2).astype(np.float32)
    assert F.cdist(x32, y32).dtype == snp.float32
    assert F.cdist(x32, y32.astype(np.float64)).dtype == snp.float64
    assert F.pdist(x32, 3).dtype == snp.float32


@pytest.mark.parametrize("p", [0.5, 1.0, 1.5, 2.0, 3.0, math.inf])
def test_check_grads_order_2(p):
    rng = np.random.default_rng(12)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    modes = (EXACT, MM) if p == 2 else (EXACT,)
    for mode in modes:
        check_grads(lambda a, b: F.cdist(a, b, p, mode), (x, y), order=2, atol=1e-6, rtol=1e-6)
    z = np.random.default_rng(14).standard_normal((4, 3))
    check_grads(lambda a: F.pdist(a, p), (z,), order=2, atol=1e-6, rtol=1e-6)
    if 1 < p < math.inf:
        # a tiny coordinate sends p > 1 down the scaled branch
        x[0, 0] = 1e-200
        check_grads(lambda a, b: F.cdist(a, b, p, EXACT), (x, y), order=2, atol=1e-6,
                    rtol=1e-6)


def test_vmap_matches_loop():
    xs, y = points(15, 3, 30, 2), points(16, 4, 2)
    xs[1, 5] = y[2]
    for p, mode in ((2.0, MM), (2.0, EXACT), (1.5, AUTO), (math.inf, AUTO)):
        got = A(starling.vmap(lambda a: F.cdist(a, y, p, mode))(xs))
        for b in range(3):
            np.testing.assert_array_equal(got[b], A(F.cdist(xs[b], y, p, mode)))
        gv = A(starling.vmap(starling.grad(lambda a: snp.sum(F.cdist(a, y, p, mode))))(xs))
        for b in range(3):
            want = A(starling.grad(lambda a: snp.sum(F.cdist(a, y, p, mode)))(xs[b]))
            np.testing.assert_allclose(gv[b], want, rtol=1e-13, atol=1e-15)
        got = A(starling.vmap(lambda a: F.pdist(a, p))(xs))
        for b in range(3):
            np.testing.assert_allclose(got[b], A(F.pdist(xs[b], p)), rtol=1e-15)


def test_compile_and_checkpoint_match_eager():
    x, y = points(17, 30, 3).astype(np.float32), points(18, 5, 3).astype(np.float32)
    y[1] = x[3]
    cases = ((2.0, MM), (2.0, EXACT), (0.5, AUTO), (1.0, AUTO), (0.0, AUTO), (math.inf, AUTO))

    def losses(a, b):       # one program for every case keeps the compile count low
        return [snp.sum(F.cdist(a, b, p, mode) ** 2) + snp.sum(F.pdist(a, p))
                for p, mode in cases]

    def total(a, b):
        return sum(losses(a, b))

    ref = starling.compile(losses, backend="numpy_ref")(x, y)       # the unfused interpreter
    for c, e, r in zip(starling.compile(losses)(x, y), losses(x, y), ref):
        np.testing.assert_allclose(A(c), A(e), rtol=1e-5)
        np.testing.assert_allclose(A(r), A(e), rtol=1e-5)
    ge = starling.grad(total, argnums=(0, 1))(x, y)
    gc = starling.compile(starling.grad(total, argnums=(0, 1)))(x, y)
    gk = starling.grad(starling.checkpoint(total), argnums=(0, 1))(x, y)
    for e, c, k in zip(ge, gc, gk):
        assert np.isfinite(A(e)).all()
        np.testing.assert_allclose(A(c), A(e), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(A(k), A(e), rtol=1e-6, atol=1e-6)


def test_modules():
    x, y = points(19, 4, 3), points(20, 2, 3)
    m = nn.CDist(p=1, compute_mode=EXACT)
    assert "p=1.0" in repr(m) and not list(m.parameters())
    np.testing.assert_array_equal(A(m(x, y)), A(F.cdist(x, y, 1.0, EXACT)))
    np.testing.assert_array_equal(A(nn.PDist(3)(x)), A(F.pdist(x, 3)))
    with pytest.raises(ValueError, match="CDist: p must be >= 0"):
        nn.CDist(-1)
    with pytest.raises(ValueError, match="CDist: compute_mode"):
        nn.CDist(2, "mm")
    with pytest.raises(ValueError, match="PDist: p must be >= 0"):
        nn.PDist(math.nan)


def test_errors():
    x, y = points(21, 4, 3), points(22, 2, 3)
    with pytest.raises(TypeError, match="cdist: inputs must be real floating, got int64"):
        F.cdist(x.astype(np.int64), y)
    with pytest.raises(TypeError, match="complex"):
        F.cdist(x, y.astype(np.complex128))
    with pytest.raises(TypeError, match="pdist: inputs must be real floating, got bool"):
        F.pdist(x > 0)
    with pytest.raises(ValueError, match="cdist: p must be >= 0"):
        F.cdist(x, y, -0.5)
    with pytest.raises(TypeError, match="p must be a real number"):
        F.cdist(x, y, "two")
    with pytest.raises(ValueError, match="compute_mode"):
        F.cdist(x, y, 2, "fast")
    with pytest.raises(ValueError, match=r"cdist: inputs must be \(\*batch, P, M\)"):
        F.cdist(x[0], y)
    with pytest.raises(ValueError, match=r"x1 \(4, 3\) and x2 \(2, 2\).*same number of columns"):
        F.cdist(x, y[:, :2])
    with pytest.raises(ValueError, match="do not broadcast"):
        F.cdist(np.zeros((2, 4, 3)), np.zeros((3, 2, 3)))
    with pytest.raises(ValueError, match=r"pdist: input must be \(N, M\)"):
        F.pdist(x[0])


def test_vs_torch():
    torch = pytest.importorskip("torch")
    x, y = points(23, 2, 30, 3), points(24, 4, 3)
    y[2] = x[1, 4]
    for p in PS:
        for mode in (EXACT, MM, AUTO):
            tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
            want = torch.cdist(tx, ty, p, compute_mode=mode)
            want.sum().backward()
            got = F.cdist(x, y, p, mode)
            np.testing.assert_allclose(A(got), want.detach().numpy(), rtol=1e-12, atol=1e-7)
            if p == 2 and mode != EXACT:
                continue       # torch's matmul path at a coincident pair: noise, not 0
            gx, gy = starling.grad(lambda a, b: snp.sum(F.cdist(a, b, p, mode)),
                                   argnums=(0, 1))(x, y)
            np.testing.assert_allclose(A(gx), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(A(gy), ty.grad.numpy(), rtol=1e-10, atol=1e-12)
        z = torch.tensor(x[0], requires_grad=True)
        want = torch.pdist(z, p)
        want.sum().backward()
        np.testing.assert_allclose(A(F.pdist(x[0], p)), want.detach().numpy(), rtol=1e-12)
        g = starling.grad(lambda a: snp.sum(F.pdist(a, p)))(x[0])
        np.testing.assert_allclose(A(g), z.grad.numpy(), rtol=1e-10, atol=1e-12)
