"""Transformation rules of the elementwise math family (math_basic.py, math_misc.py): closed-form
derivatives, hard inputs (0, +-inf, ties), second derivatives, complex conventions, vmap with
unbatched / last-axis operands and jvp(vmap(grad(f))) against a Python loop."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special as sps
from hypothesis import given, strategies as st

import starling
import starling.numpy as snp
from starling.arrays.ops.math_misc import _i1
from starling.test_util import check_grads

INF = np.inf


def A(x, dt=np.float64):
    return snp.asarray(np.asarray(x, dt))


def close(got, want, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol)


def elementwise_grad(f, order=1):
    """The ``order``-th derivative of scalar ``f`` at every element of a 1-d array."""
    for _ in range(order):
        f = starling.grad(f)
    return starling.vmap(f)


X = np.array([-1.7, -0.4, 0.3, 1.1, 2.5])

# ---- closed forms ------------------------------------------------------------------------------
# (op, points, derivative from the textbook formula)
CLOSED = [
    ("exp", X, np.exp), ("exp2", X, lambda x: np.log(2) * 2.0 ** x),
    ("expm1", X, np.exp),
    ("log", abs(X), lambda x: 1 / x), ("log2", abs(X), lambda x: 1 / (x * np.log(2))),
    ("log10", abs(X), lambda x: 1 / (x * np.log(10))), ("log1p", abs(X), lambda x: 1 / (1 + x)),
    ("sqrt", abs(X), lambda x: 0.5 / np.sqrt(x)), ("cbrt", X, lambda x: np.cbrt(x) ** -2 / 3),
    ("sin", X, np.cos), ("cos", X, lambda x: -np.sin(x)), ("tan", X, lambda x: 1 / np.cos(x) ** 2),
    ("arcsin", X / 3, lambda x: 1 / np.sqrt(1 - x * x)),
    ("arccos", X / 3, lambda x: -1 / np.sqrt(1 - x * x)),
    ("arctan", X, lambda x: 1 / (1 + x * x)), ("sinh", X, np.cosh), ("cosh", X, np.sinh),
    ("tanh", X, lambda x: 1 - np.tanh(x) ** 2),
    ("arcsinh", X, lambda x: 1 / np.sqrt(x * x + 1)),
    ("arccosh", abs(X) + 1, lambda x: 1 / np.sqrt(x * x - 1)),
    ("arctanh", X / 3, lambda x: 1 / (1 - x * x)),
    ("i0", X, sps.i1), ("rsqrt", abs(X), lambda x: -0.5 * x ** -1.5),
    ("deg2rad", X, lambda x: np.full_like(x, np.pi / 180)),
    ("rad2deg", X, lambda x: np.full_like(x, 180 / np.pi)),
    ("fabs", X, np.sign), ("sinc", X, lambda x: (np.cos(np.pi * x) - np.sinc(x)) / x),
]


@pytest.mark.parametrize("name,x,deriv", CLOSED, ids=[c[0] for c in CLOSED])
def test_first_derivative_closed_form(name, x, deriv):
    close(elementwise_grad(getattr(snp, name))(A(x)), deriv(x), rtol=1e-10)


def test_tanh_derivative_is_one_minus_tanh_squared():
    t = np.tanh(X)
    close(elementwise_grad(snp.tanh)(A(X)), 1 - t * t)
    close(elementwise_grad(snp.tanh, 2)(A(X)), -2 * t * (1 - t * t))


def test_log1p_at_zero_and_exp_second_derivative():
    assert float(starling.grad(snp.log1p)(A(0.0))) == 1.0
    close(elementwise_grad(snp.exp, 2)(A(X)), np.exp(X))
    close(elementwise_grad(snp.exp, 3)(A(X)), np.exp(X))


def test_sinc_derivatives_at_zero():
    xn = np.array([1e-4, -2e-3, 4e-3, 0.5])
    c = np.pi ** 2 / 3
    # near 0 the polynomial branch is used: compare with the exact derivative
    close(elementwise_grad(snp.sinc)(A(xn)), (np.cos(np.pi * xn) - np.sinc(xn)) / xn, rtol=1e-7)
    close(elementwise_grad(snp.sinc)(A([0.0])), [0.0])
    close(elementwise_grad(snp.sinc, 2)(A([0.0])), [-c], rtol=1e-12)
    close(elementwise_grad(snp.sinc, 3)(A([0.0])), [0.0])
    close(elementwise_grad(snp.sinc, 4)(A([0.0])), [np.pi ** 4 / 5], rtol=1e-12)
    check_grads(snp.sinc, [A([0.0, 5e-3, 0.01, 0.3])], order=2)
    assert float(snp.sinc(A(0.0))) == 1.0 and np.isfinite(xn).all()


def test_hessian_of_sin():
    x = np.array([0.3, -1.2, 2.0])
    h = starling.hessian(lambda v: snp.sum(snp.sin(v)))(A(x))
    close(h, np.diag(-np.sin(x)))


def test_complex_derivatives_are_holomorphic():
    z = np.array([0.4 + 0.3j, -0.7 + 1.1j, 1.5 - 0.2j])
    table = [("exp", np.exp), ("log", lambda z: 1 / z), ("sqrt", lambda z: 0.5 / np.sqrt(z)),
             ("sin", np.cos), ("tanh", lambda z: 1 - np.tanh(z) ** 2),
             ("arcsin", lambda z: 1 / np.sqrt(1 - z * z)),
             ("arccosh", lambda z: 1 / (np.sqrt(z - 1) * np.sqrt(z + 1))),
             ("arctanh", lambda z: 1 / (1 - z * z)), ("exp2", lambda z: np.log(2) * 2 ** z)]
    t = np.array([1.0 + 0.5j, -0.3 + 2j, 0.7 - 1j])
    for name, d in table:
        _, tout = starling.jvp(getattr(snp, name), (A(z, np.complex128),),
                               (A(t, np.complex128),))
        close(tout, d(z) * t, rtol=1e-10, atol=1e-12)


# ---- hard inputs -------------------------------------------------------------------------------

def test_sqrt_at_zero_is_inf_and_double_where_is_finite():
    assert float(starling.grad(snp.sqrt)(A(0.0))) == INF

    def safe_sqrt(x):
        pos = x > 0
        return snp.where(pos, snp.sqrt(snp.where(pos, x, 1.0)), 0.0)

    assert float(starling.grad(safe_sqrt)(A(0.0))) == 0.0
    assert float(starling.grad(starling.grad(safe_sqrt))(A(0.0))) == 0.0
    close(starling.grad(safe_sqrt)(A(4.0)), 0.25)


@pytest.mark.parametrize("op,base", [(snp.logaddexp, math.e), (snp.logaddexp2, 2.0)])
def test_logaddexp_infinite_inputs_give_finite_gradients(op, base):
    cases = [((-INF, -INF), (0.5, 0.5)), ((INF, INF), (0.5, 0.5)), ((INF, 1.0), (1.0, 0.0)),
             ((-INF, 0.0), (0.0, 1.0)), ((INF, -INF), (1.0, 0.0)), ((-3.0, -3.0), (0.5, 0.5)),
             ((1000.0, 0.0), (1.0, 0.0))]
    for (x, y), want in cases:
        g = starling.grad(op, argnums=(0, 1))(A(x), A(y))
        close(g, want)
        # second derivatives are finite as well
        for i in (0, 1):
            for j in (0, 1):
                h = starling.grad(lambda a, b: starling.grad(op, argnums=i)(a, b),
                                  argnums=j)(A(x), A(y))
                assert np.isfinite(float(h)), ((x, y), i, j)
    # away from ties: the weights are base**x / (base**x + base**y)
    x, y = 0.3, -1.2
    close(starling.grad(op, argnums=(0, 1))(A(x), A(y)),
          (base ** x / (base ** x + base ** y), base ** y / (base ** x + base ** y)))


@given(st.floats(-30, 30), st.floats(-30, 30))
def test_logaddexp_weights_sum_to_one(x, y):
    gx, gy = starling.grad(snp.logaddexp, argnums=(0, 1))(A(x), A(y))
    assert 0 <= float(gx) <= 1 and 0 <= float(gy) <= 1
    assert abs(float(gx) + float(gy) - 1) < 1e-12


def test_logaddexp_second_derivative_at_a_tie():
    # d2/dx2 logaddexp(x, y) = w (1 - w) with w = 1/2 at x == y: the tie guard must not hide it.
    h = starling.grad(starling.grad(snp.logaddexp))(A(0.7), A(0.7))
    close(h, 0.25)


def test_hypot_and_arctan2():
    close(starling.grad(snp.hypot, argnums=(0, 1))(A(0.0), A(0.0)), (0.0, 0.0))
    close(starling.grad(snp.hypot, argnums=(0, 1))(A(3.0), A(-4.0)), (0.6, -0.8))
    y, x = 0.7, -1.3
    r2 = x * x + y * y
    close(starling.grad(snp.arctan2, argnums=(0, 1))(A(y), A(x)), (x / r2, -y / r2))


def test_copysign_heaviside_and_zero_derivative_ops():
    g = starling.vmap(starling.grad(snp.copysign, argnums=(0, 1)))
    gx, gy = g(A([2.0, -2.0, 2.0, -2.0, 0.0]), A([1.0, 1.0, -1.0, -1.0, -0.0]))
    close(gx, [1.0, -1.0, -1.0, 1.0, -1.0])
    close(gy, np.zeros(5))
    g = starling.vmap(starling.grad(snp.heaviside, argnums=(0, 1)))
    gx1, gx2 = g(A([-1.0, 0.0, 2.0]), A([0.5, 0.5, 0.5]))
    close(gx1, np.zeros(3))
    close(gx2, [0.0, 1.0, 0.0])
    # nextafter follows its first operand (one ulp away): derivative 1, 0 for the direction
    g = starling.vmap(starling.grad(snp.nextafter, argnums=(0, 1)))
    close(g(A(X), A([5.0, -5.0, 0.3, 0.0, 2.5])), (np.ones(5), np.zeros(5)))
    for op in (snp.floor, snp.ceil, snp.trunc, snp.rint, snp.spacing,
               lambda x: snp.round(x, 1)):
        _, t = starling.jvp(op, (A(X),), (A(np.ones(5)),))
        close(t, np.zeros(5))
        close(elementwise_grad(op)(A(X)), np.zeros(5))
    for op in (snp.isfinite, snp.isinf, snp.isnan, snp.signbit):
        out, t = starling.jvp(op, (A([1.0, INF, np.nan]),), (A(np.ones(3)),))
        assert np.asarray(out).dtype == np.bool_
        assert np.asarray(t).dtype == starling.core.dtypes.float0


def test_i0_i1_derivatives():
    x = np.array([-30.0, -3.0, -0.5, 0.0, 0.2, 2.0, 24.0, 26.0, 40.0])
    close(_i1(A(x)), sps.i1(x), rtol=1e-14)
    close(elementwise_grad(snp.i0)(A(x)), sps.i1(x), rtol=1e-14)
    # I0'' = I1' = I0 - I1 / x, with 1/2 at 0
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.where(x == 0, 0.5, sps.i0(x) - sps.i1(x) / x)
    close(elementwise_grad(snp.i0, 2)(A(x)), want, rtol=1e-12)
    check_grads(_i1, [A([-2.0, 0.0, 0.7, 3.0])], order=2)
    close(_i1(A([0.0, -0.0, INF, -INF])), [0.0, -0.0, INF, -INF])
    assert np.isnan(float(_i1(A(np.nan))))
    # float32 in, float32 out, computed in float64
    got = _i1(A(np.array([1.5, -9.0]), np.float32))
    assert np.asarray(got).dtype == np.float32
    close(got, sps.i1(np.array([1.5, -9.0])).astype(np.float32), rtol=1e-6)


def test_frexp_and_ldexp():
    x = np.array([3.0, 0.1, -20.0])
    e = np.frexp(x)[1]
    close(starling.vmap(starling.grad(lambda v: snp.frexp(v)[0]))(A(x)), 2.0 ** -e)
    g = starling.grad(lambda a: snp.sum(snp.ldexp(a, A(np.array([[1], [3]]), np.int32))))(
        A([1.0, 2.0, -1.0]))
    close(g, [10.0, 10.0, 10.0])
    check_grads(lambda a: snp.ldexp(a, A([[2, -1, 0]], np.int32)), [A([0.3, -1.5, 2.0])], order=2)
    check_grads(lambda v: snp.frexp(v)[0], [A([0.3, -1.5, 7.0])], order=2)


# ---- complex parts -----------------------------------------------------------------------------

def test_complex_parts_transposes():
    z = A([3.0 + 4.0j, -1.0 + 0.5j], np.complex128)
    ct = A([0.7, -1.3])
    _, f = starling.vjp(snp.real, z)
    close(f(ct)[0], np.array([0.7, -1.3]) + 0j)
    _, f = starling.vjp(snp.imag, z)
    close(f(ct)[0], -1j * np.array([0.7, -1.3]))
    _, f = starling.vjp(snp.conj, z)
    cct = A([0.7 + 2j, -1.3 - 1j], np.complex128)
    close(f(cct)[0], np.conj(np.asarray(cct)))
    # JAX's convention for real-valued functions of complex input: conj of df/dx + i df/dy
    grad_abs2 = starling.grad(lambda w: snp.square(snp.real(w)) + snp.square(snp.imag(w)))
    close(grad_abs2(A(3.0 + 4.0j, np.complex128)), 6.0 - 8.0j)
    close(starling.grad(snp.imag)(A(1.0 + 1.0j, np.complex128)), -1j)
    for op in (snp.real, snp.imag, snp.conj):
        check_grads(op, [z], order=2)
    # imag of real input is zeros: zero derivative
    close(elementwise_grad(snp.imag)(A(X)), np.zeros(5))


# ---- vmap --------------------------------------------------------------------------------------

def test_vmap_in_axes_none_and_last():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.5, 2, (3, 4)), rng.uniform(0.5, 2, (3,))
    for op in (snp.arctan2, snp.logaddexp, snp.hypot, snp.copysign, snp.heaviside):
        got = starling.vmap(op, in_axes=(-1, None))(A(a), A(b))
        close(got, np.stack([np.asarray(op(A(a[:, k]), A(b))) for k in range(4)]))
        got = starling.vmap(op, in_axes=(None, -1))(A(b), A(a))
        close(got, np.stack([np.asarray(op(A(b), A(a[:, k]))) for k in range(4)]))
    got = starling.vmap(lambda v: snp.round(v, 1), in_axes=-1)(A(a * 10))
    close(got, np.round(a * 10, 1).T)
    m, e = starling.vmap(snp.frexp, in_axes=-1)(A(a))
    close(m, np.frexp(a)[0].T)
    close(e, np.frexp(a)[1].T)
    ex = np.array([1, -2, 3], np.int32)
    got = starling.vmap(snp.ldexp, in_axes=(1, None))(A(a[:, :3].T.copy()), A(ex, np.int32))
    close(got, np.ldexp(a[:, :3], ex))
    got = starling.vmap(snp.ldexp, in_axes=(None, 0))(A(b), A(np.array([[1], [2]]), np.int32))
    close(got, np.stack([np.ldexp(b, 1), np.ldexp(b, 2)]))
    got = starling.vmap(_i1, in_axes=-1)(A(a))
    close(got, sps.i1(a).T, rtol=1e-14)


def _f(x, y):
    return snp.logaddexp(snp.tanh(x), snp.sin(y)) + snp.hypot(x, snp.exp(y)) + snp.i0(x)


def test_jvp_of_vmap_of_grad_matches_loop():
    rng = np.random.default_rng(1)
    xs, ys = rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4)
    tx, ty = rng.standard_normal(4), rng.standard_normal(4)
    g = starling.grad(_f, argnums=(0, 1))
    out, tout = starling.jvp(starling.vmap(g), (A(xs), A(ys)), (A(tx), A(ty)))
    for k in range(4):
        o, t = starling.jvp(g, (A(xs[k]), A(ys[k])), (A(tx[k]), A(ty[k])))
        for j in range(2):
            close(np.asarray(out[j])[k], np.asarray(o[j]))
            close(np.asarray(tout[j])[k], np.asarray(t[j]))
    # and against second derivatives by finite differences of the analytic gradient
    check_grads(lambda x, y: starling.vmap(g)(x, y), [A(xs), A(ys)], order=1)


def test_grad_of_vmap_and_vmap_of_hessian():
    x = np.array([0.2, -0.8, 1.4])
    gv = starling.grad(lambda v: snp.sum(starling.vmap(snp.arcsinh)(v)))(A(x))
    close(gv, 1 / np.sqrt(x * x + 1))
    hv = starling.vmap(starling.hessian(snp.sin))(A(x))
    close(hv, -np.sin(x))
