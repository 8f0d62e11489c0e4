"""The subgradient table (elementwise_docs.SUBGRADIENTS), row by row, with hand-computed values.

Every row is checked in forward mode (jvp with a unit tangent per operand), reverse mode (grad
with respect to all operands), under vmap (all rows of a table batched at once, in both modes)
and through second derivatives.
"""
from __future__ import annotations

import numpy as np
import pytest

import starling
import starling.numpy as snp

NAN, INF = np.nan, np.inf


def _arr(v, dt=np.float64):
    return snp.asarray(np.asarray(v, dt))


def _fwd_partials(f, args):
    """d f / d args[i] by forward mode, one unit tangent at a time."""
    out = []
    for i in range(len(args)):
        tangents = tuple(snp.asarray(np.full(np.shape(a), float(i == j), np.asarray(a).dtype))
                         for j, a in enumerate(args))
        out.append(np.asarray(starling.jvp(f, tuple(args), tangents)[1]))
    return out


def _rev_partials(f, args):
    gs = starling.grad(f, argnums=tuple(range(len(args))))(*args)
    return [np.asarray(g) for g in gs]


def _check_table(f, rows, dt=np.float64):
    """rows: list of (args, expected partials); checks all modes and vmap over the rows."""
    for args, want in rows:
        xs = [_arr(a, dt) for a in args]
        for mode, got in (("jvp", _fwd_partials(f, xs)), ("grad", _rev_partials(f, xs))):
            for i, (g, w) in enumerate(zip(got, want)):
                assert g.dtype == np.dtype(dt), (mode, args, g.dtype)
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=0,
                                           err_msg=f"{mode} d/d(arg {i}) at {args}")
    # All rows at once under vmap, reverse and forward.
    cols = [_arr([r[0][i] for r in rows], dt) for i in range(len(rows[0][0]))]
    want = np.array([r[1] for r in rows], np.float64)
    n = len(cols)
    got_rev = starling.vmap(starling.grad(f, argnums=tuple(range(n))))(*cols)
    got_fwd = starling.vmap(lambda *a: tuple(_fwd_traced(f, a)))(*cols)
    for i in range(n):
        np.testing.assert_allclose(np.asarray(got_rev[i]), want[:, i], rtol=1e-6, atol=0,
                                   err_msg=f"vmap(grad) d/d(arg {i})")
        np.testing.assert_allclose(np.asarray(got_fwd[i]), want[:, i], rtol=1e-6, atol=0,
                                   err_msg=f"vmap(jvp) d/d(arg {i})")


def _fwd_traced(f, args):
    # Like _fwd_partials but traceable (used under vmap).
    out = []
    for i in range(len(args)):
        tangents = tuple(snp.ones_like(a) if i == j else snp.zeros_like(a)
                         for j, a in enumerate(args))
        out.append(starling.jvp(f, tuple(args), tangents)[1])
    return out


# ---- maximum / minimum / fmax / fmin -------------------------------------------------------------

MAXIMUM = [((2.0, 1.0), (1, 0)), ((1.0, 2.0), (0, 1)), ((1.0, 1.0), (0.5, 0.5)),
           ((-0.0, 0.0), (0.5, 0.5)), ((INF, INF), (0.5, 0.5)), ((NAN, 1.0), (1, 0)),
           ((1.0, NAN), (0, 1)), ((NAN, NAN), (0.5, 0.5)), ((NAN, INF), (1, 0))]
MINIMUM = [((2.0, 1.0), (0, 1)), ((1.0, 2.0), (1, 0)), ((1.0, 1.0), (0.5, 0.5)),
           ((-INF, -INF), (0.5, 0.5)), ((NAN, 1.0), (1, 0)), ((1.0, NAN), (0, 1)),
           ((NAN, NAN), (0.5, 0.5))]
FMAX = [((2.0, 1.0), (1, 0)), ((1.0, 2.0), (0, 1)), ((1.0, 1.0), (0.5, 0.5)),
        ((NAN, 1.0), (0, 1)), ((1.0, NAN), (1, 0)), ((NAN, -INF), (0, 1)),
        ((NAN, NAN), (0.5, 0.5))]
FMIN = [((2.0, 1.0), (0, 1)), ((1.0, 2.0), (1, 0)), ((3.0, 3.0), (0.5, 0.5)),
        ((NAN, 1.0), (0, 1)), ((1.0, NAN), (1, 0)), ((NAN, NAN), (0.5, 0.5))]


@pytest.mark.parametrize("name,rows", [("maximum", MAXIMUM), ("minimum", MINIMUM),
                                       ("fmax", FMAX), ("fmin", FMIN)])
@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_minmax_table(name, rows, dt):
    _check_table(getattr(snp, name), rows, dt)


def test_relu_via_maximum_splits_the_tie():
    # maximum(x, 0.0) is a two-operand max with a constant: the tie at 0 gives x half.
    assert float(starling.grad(lambda x: snp.maximum(x, 0.0))(_arr(0.0))) == 0.5


# ---- clip with static bounds ---------------------------------------------------------------------

def _static(lo, hi):
    return lambda x: snp.clip(x, lo, hi)


CLIP_STATIC = [((-1.0,), (0,)), ((0.0,), (0,)), ((-0.0,), (0,)), ((0.5,), (1,)), ((1.0,), (0,)),
               ((2.0,), (0,)), ((NAN,), (1,)), ((INF,), (0,))]


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.float16])
def test_clip_static_table(dt):
    _check_table(_static(0.0, 1.0), CLIP_STATIC, dt)


def test_clamp_min_max_static():
    _check_table(lambda x: snp.clamp_min(x, 0.0),
                 [((-1.0,), (0,)), ((0.0,), (0,)), ((1.0,), (1,)), ((NAN,), (1,))])
    _check_table(lambda x: snp.clamp_max(x, 1.0),
                 [((2.0,), (0,)), ((1.0,), (0,)), ((0.0,), (1,)), ((NAN,), (1,))])
    # relu / hardtanh written with static bounds: 0 at the kinks.
    _check_table(lambda x: snp.clip(x, -1.0, 1.0),
                 [((-1.0,), (0,)), ((1.0,), (0,)), ((0.0,), (1,))])


def test_clip_static_reversed_and_nan_bound():
    # lo > hi: the output is hi everywhere, constant in x.
    _check_table(_static(2.0, 1.0), [((1.5,), (0,)), ((0.0,), (0,)), ((3.0,), (0,))])
    # a NaN static bound produced the NaN output; x gets 0 (a NaN x still gets 1).
    _check_table(_static(NAN, 1.0), [((0.5,), (0,)), ((NAN,), (1,))])


def test_clip_integer_bounds_on_float_x():
    # Python int bounds are static too (promoted to x's float dtype).
    _check_table(_static(0, 1), [((0.0,), (0,)), ((0.25,), (1,)), ((1.0,), (0,))])


# ---- clip with array bounds ----------------------------------------------------------------------

def _clip3(x, lo, hi):
    return snp.clip(x, lo, hi)


CLIP_ARRAYS = [
    ((0.5, 0.0, 1.0), (1, 0, 0)),          # strictly inside
    ((-1.0, 0.0, 1.0), (0, 1, 0)),         # below: lo produced it
    ((2.0, 0.0, 1.0), (0, 0, 1)),          # above: hi
    ((0.0, 0.0, 1.0), (0.5, 0.5, 0)),      # x == lo < hi
    ((1.0, 0.0, 1.0), (0.5, 0, 0.5)),      # lo < hi == x
    ((1.0, 1.0, 1.0), (1, 0, 0)),          # x == lo == hi
    ((0.0, 1.0, 1.0), (0, 0, 1)),          # lo == hi != x (below)
    ((2.0, 1.0, 1.0), (0, 0, 1)),          # lo == hi != x (above)
    ((0.5, 1.0, 0.0), (0, 0, 1)),          # lo > hi
    ((1.0, 1.0, 0.0), (0, 0, 1)),          # lo > hi, x == lo
    ((0.0, 1.0, 0.0), (0, 0, 1)),          # lo > hi, x == hi
    ((-INF, -INF, 1.0), (0.5, 0.5, 0)),    # tie at an infinite bound
    ((NAN, 0.0, 1.0), (1, 0, 0)),          # NaN x: all to x
    ((0.5, NAN, 1.0), (0, 1, 0)),          # NaN bound produced the output
    ((0.5, 0.0, NAN), (0, 0, 1)),
    ((NAN, NAN, 1.0), (0.5, 0.5, 0)),      # NaNs split evenly among the NaN operands
    ((NAN, 0.0, NAN), (0.5, 0, 0.5)),
    ((NAN, NAN, NAN), (1 / 3, 1 / 3, 1 / 3)),
]


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_clip_array_bounds_table(dt):
    _check_table(_clip3, CLIP_ARRAYS, dt)


def test_clip_one_array_bound_is_maximum_or_minimum():
    _check_table(lambda x, lo: snp.clip(x, lo), [((0.0, 0.0), (0.5, 0.5)), ((1.0, 0.0), (1, 0)),
                                                  ((NAN, 0.0), (1, 0))])
    _check_table(lambda x, hi: snp.clip(x, None, hi), [((1.0, 1.0), (0.5, 0.5)),
                                                        ((2.0, 1.0), (0, 1))])


def test_clip_broadcast_bounds_sum_their_shares():
    x = _arr([0.0, 0.5, 1.0, -1.0, 2.0, 1.0])
    lo, hi = _arr(0.0), _arr(1.0)
    want_x = [0.5, 1, 0.5, 0, 0, 0.5]
    want_lo = 0.5 + 1.0                     # the tie at x == 0, and x == -1 below
    want_hi = 0.5 + 1.0 + 0.5               # ties at x == 1 (twice), and x == 2 above

    def f(x, lo, hi):
        return snp.sum(snp.clip(x, lo, hi))
    gx, glo, ghi = starling.grad(f, argnums=(0, 1, 2))(x, lo, hi)
    np.testing.assert_allclose(np.asarray(gx), want_x)
    assert float(glo) == want_lo and float(ghi) == want_hi
    assert glo.shape == () and ghi.shape == ()
    # Forward mode: a unit tangent on a 0-d bound moves every output where it has weight.
    t = starling.jvp(lambda lo: snp.clip(x, lo, hi), (lo,), (_arr(1.0),))[1]
    np.testing.assert_allclose(np.asarray(t), [0.5, 0, 0, 1, 0, 0])
    # A (1, n) bound against (m, n) x sums over the broadcast rows.
    xs = _arr([[0.0, 2.0], [0.0, 0.5]])
    lo2 = _arr([[0.0, 1.0]])
    g = starling.grad(lambda lo: snp.sum(snp.clip(xs, lo, 1.5)))(lo2)
    np.testing.assert_allclose(np.asarray(g), [[1.0, 1.0]])


def test_clip_scalar_and_array_bound_mix():
    # An array among the bounds makes every given bound an operand; a Python scalar bound
    # becomes a constant (its share is dropped), and ties with it still split.
    g = starling.grad(lambda x: snp.sum(snp.clip(x, _arr([0.0, 0.0]), 1.0)))(_arr([0.0, 1.0]))
    np.testing.assert_allclose(np.asarray(g), [0.5, 0.5])


# ---- abs, where ----------------------------------------------------------------------------------

def test_abs_at_zero():
    _check_table(snp.abs, [((0.0,), (0,)), ((-0.0,), (0,)), ((-2.0,), (-1,)), ((3.0,), (1,)),
                           ((-INF,), (-1,))])
    z = snp.asarray(np.zeros(3, np.complex128))
    assert np.all(np.asarray(starling.grad(lambda z: snp.sum(snp.abs(z)))(z)) == 0)
    t = starling.jvp(snp.abs, (z,), (snp.asarray(np.array([1, 1j, 1 + 1j])),))[1]
    assert t.dtype == np.float64 and np.all(np.asarray(t) == 0)


def test_relu_via_where_is_zero_at_zero():
    _check_table(lambda x: snp.where(x > 0, x, 0.0), [((0.0,), (0,)), ((1.0,), (1,)),
                                                       ((-1.0,), (0,))])


# ---- second derivatives ------------------------------------------------------------------------

def _d2(f, x):
    return float(starling.grad(starling.grad(f))(_arr(x)))


def test_second_derivative_clip_static_squared():
    f = lambda x: snp.clip(x, 0.0, 1.0) ** 2  # noqa: E731
    assert [_d2(f, v) for v in (0.0, 0.5, 1.0, 2.0, -1.0)] == [0.0, 2.0, 0.0, 0.0, 0.0]
    # forward-over-reverse agrees
    h = starling.jacfwd(starling.grad(f))
    assert [float(h(_arr(v))) for v in (0.0, 0.5, 1.0)] == [0.0, 2.0, 0.0]
    # and under vmap
    hv = starling.vmap(starling.grad(starling.grad(f)))(_arr([0.0, 0.5, 1.0]))
    np.testing.assert_array_equal(np.asarray(hv), [0.0, 2.0, 0.0])


def test_second_derivative_maximum_times_x():
    f = lambda x, y: snp.maximum(x, y) * x  # noqa: E731
    # x > y: f = x^2; x < y: f = y x; tie: d/dx = 0.5 x + max -> d2/dx2 = 0.5 + 0.5.
    gxx = starling.grad(starling.grad(f))
    assert float(gxx(_arr(2.0), _arr(1.0))) == 2.0
    assert float(gxx(_arr(1.0), _arr(2.0))) == 0.0
    assert float(gxx(_arr(1.0), _arr(1.0))) == 1.0
    # full Hessian at the tie: d2/dxdy = w_y = 0.5 from both orders, d2/dy2 = 0
    hess = starling.hessian(lambda v: snp.maximum(v[0], v[1]) * v[0])(_arr([1.0, 1.0]))
    np.testing.assert_array_equal(np.asarray(hess), [[1.0, 0.5], [0.5, 0.0]])
    hv = starling.vmap(gxx)(_arr([2.0, 1.0, 1.0]), _arr([1.0, 2.0, 1.0]))
    np.testing.assert_array_equal(np.asarray(hv), [2.0, 0.0, 1.0])


def test_second_derivative_clip_array_bounds():
    # f = clip(x, lo, hi) * x at the tie x == lo < hi: df/dx = 0.5 x + clip, d2f/dx2 = 1,
    # d2f/dx dlo = 0.5.
    def f(v):
        return snp.clip(v[0], v[1], v[2]) * v[0]
    hess = np.asarray(starling.hessian(f)(_arr([0.5, 0.5, 2.0])))
    np.testing.assert_array_equal(hess, [[1.0, 0.5, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])


def test_second_derivative_abs_and_fmax():
    assert _d2(lambda x: snp.abs(x) * x, 0.0) == 0.0   # d/dx = 2|x|, d2 = 2 sign(x)
    assert _d2(lambda x: snp.abs(x) * x, -3.0) == -2.0
    assert _d2(lambda x: snp.fmax(x, 2.0) ** 2, 3.0) == 2.0
    assert _d2(lambda x: snp.fmax(x, 2.0) ** 2, 2.0) == 0.5  # (2 * w * fmax)' = 2 w^2
