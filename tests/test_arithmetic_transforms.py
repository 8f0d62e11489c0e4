"""Transformation rules of the arithmetic / selection primitives: closed forms, zero bases,
broadcasting, integer and complex inputs, where / nan_to_num, and compositions
(jvp(vmap(grad)), vmap with in_axes None / -1, perturbation confusion).

The subgradient table (max / min / clip / abs at kinks, ties and NaN) is in test_subgradients.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap
from starling.core import dtypes
from starling.test_util import check_grads


def _a(v, dt=np.float64):
    return snp.asarray(np.asarray(v, dt))


def _f(x):
    return float(np.asarray(x))


# ---- closed forms --------------------------------------------------------------------------------

@pytest.mark.parametrize("x", [-2.0, 0.0, 0.5, 3.0])
def test_cube(x):
    assert _f(grad(lambda x: x ** 3)(_a(x))) == pytest.approx(3 * x * x)
    assert _f(grad(grad(lambda x: x ** 3))(_a(x))) == pytest.approx(6 * x)
    assert _f(jacfwd(jacrev(lambda x: x ** 3))(_a(x))) == pytest.approx(6 * x)
    assert _f(grad(grad(grad(lambda x: x ** 3)))(_a(x))) == pytest.approx(6.0)


def test_pow_exponent_derivative():
    y = 1.7
    assert _f(grad(lambda y: _a(2.0) ** y)(_a(y))) == pytest.approx(np.log(2) * 2 ** y)
    g = grad(lambda x, y: x ** y, argnums=(0, 1))(_a(1.5), _a(y))
    assert _f(g[0]) == pytest.approx(y * 1.5 ** (y - 1))
    assert _f(g[1]) == pytest.approx(np.log(1.5) * 1.5 ** y)


def test_pow_at_zero_base_is_finite():
    zero = _a(0.0)
    assert _f(grad(lambda x: x ** 2)(zero)) == 0.0
    assert _f(grad(lambda x: x ** 1)(zero)) == 1.0
    assert _f(grad(grad(lambda x: x ** 2))(zero)) == 2.0
    assert _f(grad(grad(lambda x: x ** 3))(zero)) == 0.0
    # x ** 0 with an array exponent: d/dx is 0 at x == 0 (not 0 * inf)
    assert _f(grad(lambda x: x ** _a(0.0))(zero)) == 0.0
    # d/dy 0 ** y is 0 for y > 0 and for y < 0 (no nan from log(0) * 0 or * inf)
    for y in (2.0, 0.5, 0.0, -1.0):
        assert _f(grad(lambda y: zero ** y)(_a(y))) == 0.0
    # the full Hessian at (0, 2) has no NaN
    h = np.asarray(hessian(lambda v: v[0] ** v[1])(_a([0.0, 2.0])))
    np.testing.assert_array_equal(h, [[2.0, 0.0], [0.0, 0.0]])
    # a genuinely infinite derivative stays inf
    assert _f(grad(lambda x: x ** 0.5)(zero)) == np.inf


def test_pow_complex_holomorphic():
    z = _a(1 + 2j, np.complex128)
    g = grad(lambda z: z ** 3, holomorphic=True)(z)
    assert complex(np.asarray(g)) == pytest.approx(3 * (1 + 2j) ** 2)


@pytest.mark.parametrize("x", [-1.5, 0.25, 2.0])
def test_reciprocal_square_negative(x):
    assert _f(grad(snp.reciprocal)(_a(x))) == pytest.approx(-1 / x ** 2)
    assert _f(grad(grad(snp.reciprocal))(_a(x))) == pytest.approx(2 / x ** 3)
    assert _f(grad(snp.square)(_a(x))) == pytest.approx(2 * x)
    assert _f(grad(snp.negative)(_a(x))) == -1.0
    assert _f(grad(lambda x: snp.divide(1.0, x))(_a(x))) == pytest.approx(-1 / x ** 2)


def test_divide_both_operands():
    gx, gy = grad(lambda x, y: x / y, argnums=(0, 1))(_a(3.0), _a(2.0))
    assert (_f(gx), _f(gy)) == (0.5, -0.75)
    h = np.asarray(hessian(lambda v: v[0] / v[1])(_a([3.0, 2.0])))
    np.testing.assert_allclose(h, [[0.0, -0.25], [-0.25, 0.75]])


@pytest.mark.parametrize("x,y,dy_rem,dy_fmod", [(7.5, 2.0, -3.0, -3.0), (-7.5, 2.0, 4.0, 3.0),
                                                (7.5, -2.0, 4.0, 3.0), (0.3, 1.0, 0.0, 0.0)])
def test_remainder_fmod(x, y, dy_rem, dy_fmod):
    for op, dy in ((snp.remainder, dy_rem), (snp.fmod, dy_fmod)):
        gx, gy = grad(op, argnums=(0, 1))(_a(x), _a(y))
        assert (_f(gx), _f(gy)) == (1.0, dy), op.__name__
        assert _f(grad(grad(op, argnums=1), argnums=1)(_a(x), _a(y))) == 0.0


def test_piecewise_constant_ops_have_zero_derivative():
    x = _a([0.5, -1.5, 2.0])
    for f in (lambda x: snp.floor_divide(x, 0.75), snp.sign,
              lambda x: snp.where(x > 0, 1.0, -1.0)):
        np.testing.assert_array_equal(np.asarray(grad(lambda x: snp.sum(f(x)))(x)), 0.0)
    # comparisons / logical ops give float0 tangents
    _, t = jvp(lambda x: snp.logical_and(x > 0, x < 1), (x,), (snp.ones_like(x),))
    assert t.dtype == dtypes.float0 and t.shape == (3,)


def test_perturbation_confusion():
    # d/dx [x * d/dy (x * y)] = d/dx x^2 = 2x (the inner x is a constant for the inner grad).
    f = lambda x: x * grad(lambda y: x * y)(x)  # noqa: E731
    assert _f(grad(f)(_a(3.0))) == 6.0
    assert _f(jacfwd(f)(_a(3.0))) == 6.0


# ---- broadcasting ------------------------------------------------------------------------------

def test_broadcast_tangents_and_cotangents():
    x, y = _a([1.0, 2.0, 3.0]), _a([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    one = snp.ones_like
    # a tangent of only the broadcast operand is broadcast to the output shape
    for op in (snp.add, snp.subtract, snp.multiply, snp.divide, snp.maximum):
        _, t = jvp(op, (x, y), (one(x), snp.zeros_like(y)))
        assert t.shape == (2, 3), op.__name__
        _, t = jvp(lambda y: op(x, y), (y,), (one(y),))
        assert t.shape == (2, 3), op.__name__
    _, t = jvp(lambda x: snp.subtract(y, x), (x,), (one(x),))
    np.testing.assert_array_equal(np.asarray(t), -np.ones((2, 3)))
    # cotangents are summed back over the broadcast dims
    gx, gy = grad(lambda x, y: snp.sum(x * y), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(np.asarray(gx), [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(np.asarray(gy), [[1.0, 2.0, 3.0]] * 2)
    gx = grad(lambda x: snp.sum(y / x))(x)
    np.testing.assert_allclose(np.asarray(gx), -3.0 / np.array([1.0, 4.0, 9.0]))
    gs = grad(lambda s: snp.sum(x - s))(_a(0.0))
    assert _f(gs) == -3.0 and gs.shape == ()


def test_where_rules():
    c = _a([True, False, True], np.bool_)
    x, y = _a([1.0, 2.0, 3.0]), _a(5.0)
    gx, gy = grad(lambda x, y: snp.sum(snp.where(c, x, y)), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(np.asarray(gx), [1.0, 0.0, 1.0])
    assert _f(gy) == 1.0 and gy.shape == ()
    _, t = jvp(lambda y: snp.where(c, x, y), (y,), (_a(2.0),))
    np.testing.assert_array_equal(np.asarray(t), [0.0, 2.0, 0.0])
    _, t = jvp(lambda x: snp.where(c, x, 0.0), (x,), (_a([1.0, 1.0, 1.0]),))
    np.testing.assert_array_equal(np.asarray(t), [1.0, 0.0, 1.0])


def test_double_where_gives_finite_gradient():
    def f(x):
        return snp.where(x > 0, snp.sqrt(snp.where(x > 0, x, 1.0)), 0.0)
    assert _f(grad(f)(_a(0.0))) == 0.0
    assert _f(grad(f)(_a(4.0))) == 0.25
    assert _f(grad(grad(f))(_a(0.0))) == 0.0
    np.testing.assert_array_equal(np.asarray(vmap(grad(f))(_a([0.0, 4.0, -1.0]))),
                                  [0.0, 0.25, 0.0])


def test_nan_to_num_derivative():
    x = _a([1.0, np.nan, np.inf, -np.inf, -2.0])
    g = grad(lambda x: snp.sum(snp.nan_to_num(x) * 3.0))(x)
    np.testing.assert_array_equal(np.asarray(g), [3.0, 0.0, 0.0, 0.0, 3.0])
    z = _a([complex(np.nan, 2.0), complex(1.0, np.inf), 1 + 1j], np.complex128)
    _, t = jvp(snp.nan_to_num, (z,), (_a([1 + 1j] * 3, np.complex128),))
    np.testing.assert_array_equal(np.asarray(t), [1j, 1.0, 1 + 1j])


# ---- integer and complex inputs ------------------------------------------------------------------

def test_integer_inputs():
    xi = _a([1, 2, 3], np.int32)
    with pytest.raises(TypeError):
        grad(lambda x: snp.sum(x * 2))(xi)
    out, f_vjp = vjp(lambda x, y: snp.sum(x * y), xi, _a([1.0, 2.0, 3.0]))
    ct_x, ct_y = f_vjp(_a(1.0))
    assert ct_x.dtype == dtypes.float0 and ct_x.shape == (3,)
    np.testing.assert_array_equal(np.asarray(ct_y), [1.0, 2.0, 3.0])
    # an int operand promoted to float carries no tangent
    g = grad(lambda y: snp.sum(y * xi + xi // 2))(_a([1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 2.0, 3.0])


def test_complex_abs_squared_jax_convention():
    z = _a(3 + 4j, np.complex128)
    assert complex(np.asarray(grad(lambda z: snp.abs(z) ** 2)(z))) == pytest.approx(6 - 8j)
    assert complex(np.asarray(grad(snp.abs)(z))) == pytest.approx((3 - 4j) / 5)
    # holomorphic square / multiply / divide
    assert complex(np.asarray(grad(snp.square, holomorphic=True)(z))) == pytest.approx(6 + 8j)
    g = grad(lambda z: z / (1 + 1j), holomorphic=True)(z)
    assert complex(np.asarray(g)) == pytest.approx(1 / (1 + 1j))


@pytest.mark.parametrize("dt", [np.float32, np.float16, dtypes.bfloat16])
def test_low_precision_dtypes_are_kept(dt):
    x = snp.asarray(np.array([0.5, 1.5], dt))
    for f in (lambda x: x * 2.0 + 1.0, lambda x: x ** 2, lambda x: snp.maximum(x, 1.0),
              lambda x: snp.clip(x, 0.0, 1.0), snp.abs, lambda x: x / 3.0):
        g = grad(lambda x: snp.sum(f(x)))(x)
        assert g.dtype == np.dtype(dt)
    g = grad(lambda x: snp.sum(snp.maximum(x, 1.5)))(x)
    np.testing.assert_array_equal(np.asarray(g, np.float32), [0.0, 0.5])


# ---- compositions --------------------------------------------------------------------------------

def test_vmap_grad_in_axes_none_and_last():
    f = lambda x, y: snp.sum(x ** 2 * y + snp.maximum(x, y))  # noqa: E731
    xs_np = np.array([[0.5, 1.0], [2.0, -1.0], [3.0, 3.0]])   # batch on the last axis
    xs, y = _a(xs_np), _a([1.0, 2.0, 3.0])
    got = vmap(grad(f), in_axes=(-1, None))(xs, y)
    assert got.shape == (2, 3)
    for k in range(2):
        x = xs_np[:, k]
        want = 2 * x * np.array([1.0, 2.0, 3.0]) + np.where(x > [1.0, 2.0, 3.0], 1.0,
                                                            np.where(x == [1, 2, 3], 0.5, 0.0))
        np.testing.assert_allclose(np.asarray(got[k]), want)
    got = vmap(grad(f, argnums=1), in_axes=(-1, None))(xs, y)
    for k in range(2):
        np.testing.assert_allclose(np.asarray(got[k]),
                                   np.asarray(grad(f, argnums=1)(_a(xs_np[:, k]), y)))


def test_jvp_of_vmap_of_grad():
    f = lambda x: snp.sum(snp.clip(x, -1.0, 1.0) * x ** 3 / (1.0 + x * x))  # noqa: E731
    xs = _a([[0.5, -0.3], [2.0, 0.1]])
    ts = _a([[1.0, 0.0], [0.5, -1.0]])
    _, t = jvp(vmap(grad(f)), (xs,), (ts,))
    # reference: per-row Hessian-vector products by forward-over-reverse
    for k in range(2):
        _, want = jvp(grad(f), (xs[k],), (ts[k],))
        np.testing.assert_allclose(np.asarray(t[k]), np.asarray(want), rtol=1e-12)
    # closed form on the interior entry (0, 0): g(x) = x^4 / (1 + x^2),
    # g''(x) = (12 x^2 + 6 x^4 + 2 x^6) / (1 + x^2)^3; the tangent there is 1.
    x = 0.5
    want = (12 * x ** 2 + 6 * x ** 4 + 2 * x ** 6) / (1 + x * x) ** 3
    assert _f(t[0, 0]) == pytest.approx(want)
    # entry (1, 0): x = 2 is clipped to 1, g = x^3 / (1 + x^2), tangent 0.5
    x = 2.0
    # g' = (3 x^2 + x^4) / (1 + x^2)^2
    g2 = (6 * x + 4 * x ** 3) / (1 + x * x) ** 2 - 4 * x * (3 * x ** 2 + x ** 4) / (1 + x * x) ** 3
    assert _f(t[1, 0]) == pytest.approx(0.5 * g2)


def test_grad_of_vmap():
    f = lambda x, y: snp.remainder(x, y) * snp.minimum(x, y)  # noqa: E731
    xs, ys = _a([0.5, 2.5, 3.0]), _a([2.0, 2.0, 3.0])
    g = grad(lambda xs: snp.sum(vmap(f)(xs, ys)))(xs)
    # x < y: x * x -> 2x; x > y: (x - y) * y -> y; x == y: rem 0, d rem/dx = 1 -> 0 * 0.5 + min
    np.testing.assert_allclose(np.asarray(g), [1.0, 2.0, 3.0])


def test_staged_rules_compile_into_programs():
    # The linearized tangent program is built only from primitives with transpose rules.
    f = lambda x, y: snp.sum(snp.clip(x, y, 2.0) * snp.where(x > 1, x, y) / y)  # noqa: E731
    x, y = _a([0.5, 1.5, 3.0]), _a([1.0, 1.0, 1.0])
    gx, gy = grad(f, argnums=(0, 1))(x, y)
    gx2, gy2 = jacrev(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(gx), np.asarray(gx2))
    np.testing.assert_allclose(np.asarray(gy), np.asarray(gy2))
    # fd check of the smooth coordinates
    check_grads(lambda x: f(x, y), [_a([0.5, 1.5, 1.8])], order=2)
