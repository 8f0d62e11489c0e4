"""Transformation rules of the reduction, cumulative and sorting primitives (and the composite
reductions built on them): closed forms, zeros in products, ties and NaN at max / min / cummax /
sort / top_k, the logsumexp and std traps, second derivatives, vmap with in_axes None / -1 and
compositions such as jvp(vmap(grad)).
"""
from __future__ import annotations

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap
from starling.test_util import check_grads


def _a(v, dt=np.float64):
    return snp.asarray(np.asarray(v, dt))


def _np(x):
    return np.asarray(x)


def _close(got, want, **kw):
    np.testing.assert_allclose(_np(got), np.asarray(want), rtol=kw.get("rtol", 1e-12),
                               atol=kw.get("atol", 1e-12))


# ---- reduce_sum ----------------------------------------------------------------------------------

def test_sum_grad_and_transpose_shapes():
    x = _a(np.arange(24.0).reshape(2, 3, 4))
    g = grad(lambda x: snp.sum(snp.sum(x, axis=(0, 2)) * _a([1.0, 2.0, 3.0])))(x)
    _close(g, np.broadcast_to(np.array([1.0, 2.0, 3.0])[None, :, None], (2, 3, 4)))
    _, f_vjp = vjp(lambda x: snp.sum(x, axis=1, keepdims=True), x)
    ct = _a(np.arange(8.0).reshape(2, 1, 4))
    _close(f_vjp(ct)[0], np.broadcast_to(np.arange(8.0).reshape(2, 1, 4), (2, 3, 4)))


def test_sum_empty_and_int_accumulation():
    g = grad(lambda x: snp.sum(x, axis=0).sum())(_a(np.zeros((0, 3))))
    assert _np(g).shape == (0, 3)
    # float16 tangents keep their dtype through the float32 accumulation
    t = jvp(lambda x: snp.sum(x), (_a([1, 2, 3], np.float16),), (_a([1, 1, 1], np.float16),))[1]
    assert _np(t).dtype == np.float16 and float(_np(t)) == 3.0


# ---- reduce_prod ---------------------------------------------------------------------------------

def _prod_others(x):
    n = x.size
    return np.array([np.prod(np.delete(x, i)) for i in range(n)])


@pytest.mark.parametrize("v", [[2.0, -1.5, 3.0, 0.5], [2.0, 0.0, 3.0, 0.5],
                               [0.0, 4.0, 0.0, 0.5], [0.0, 0.0, 0.0, 0.0], [7.0]])
def test_prod_grad_with_zeros(v):
    x = np.array(v)
    g = grad(lambda x: snp.prod(x))(_a(x))
    _close(g, _prod_others(x))
    assert np.all(np.isfinite(_np(g)))


def test_prod_hessian_with_one_zero():
    x = np.array([2.0, 0.0, 3.0, 0.5])
    h = hessian(lambda x: snp.prod(x))(_a(x))
    want = np.array([[0.0 if i == j else np.prod(np.delete(x, [i, j])) for j in range(4)]
                     for i in range(4)])
    _close(h, want)


def test_prod_check_grads_zeros_multi_axis():
    x = np.array([[[1.5, 0.0], [2.0, -1.0]], [[0.0, 0.7], [0.0, 1.2]]])
    check_grads(lambda x: snp.prod(x, axis=(0, 2)), [x], order=2)
    check_grads(lambda x: snp.prod(x, axis=1, keepdims=True), [x], order=2)


def test_prod_complex():
    z = np.array([1 + 2j, 0.5 - 1j, -2 + 0.3j])
    t = np.array([0.3 - 1j, 1 + 1j, 0.2j])
    got = jvp(lambda z: snp.prod(z), (_a(z, np.complex128),), (_a(t, np.complex128),))[1]
    _close(got, np.sum(t * _prod_others(z)))


# ---- reduce_max / reduce_min: subgradients ----------------------------------------------------

@pytest.mark.parametrize("op", ["max", "min"])
def test_extremum_ties_split_evenly(op):
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    if op == "min":
        x = -x
    f = getattr(snp, op)
    g = grad(lambda x: snp.sum(f(x, axis=1)))(_a(x))
    _close(g, [[0, 0.5, 0.5, 0], [0.25] * 4])
    t = np.array([[9.0, 1.0, 4.0, 7.0], [1.0, 2.0, 3.0, 6.0]])
    _close(jvp(lambda x: f(x, axis=1), (_a(x),), (_a(t),))[1], [2.5, 3.0])
    # forward and reverse agree: <grad, t> == jvp(t)
    gt = np.sum(_np(grad(lambda x: f(x, axis=1)[0])(_a(x))) * t)
    assert gt == pytest.approx(float(_np(jvp(lambda x: f(x, axis=1)[0], (_a(x),),
                                             (_a(t),))[1])))


def test_max_nan_gradient_goes_to_nans():
    x = np.array([[np.nan, 1.0, np.nan, 5.0], [1.0, 2.0, 0.5, -1.0]])
    g = grad(lambda x: snp.sum(snp.max(x, axis=1)))(_a(x))
    _close(g, [[0.5, 0, 0.5, 0], [0, 1, 0, 0]])
    t = np.array([[2.0, 100.0, 4.0, 100.0], [0.0, 7.0, 0.0, 0.0]])
    _close(jvp(lambda x: snp.max(x, axis=1), (_a(x),), (_a(t),))[1], [3.0, 7.0])


def test_max_second_derivative_and_multi_axis():
    x = np.array([[0.5, -2.0, 1.5], [1.0, 0.2, -0.3]])
    # f = max(x)^2: gradient 2 m e_k, hessian 2 e_k e_k^T
    h = hessian(lambda x: snp.max(x) ** 2)(_a(x))
    want = np.zeros((2, 3, 2, 3))
    want[0, 2, 0, 2] = 2.0
    _close(h, want)
    g = grad(lambda x: snp.sum(snp.max(x, axis=(0, 1), keepdims=True)))(_a(x))
    _close(g, [[0, 0, 1], [0, 0, 0]])


def test_max_with_initial_and_where():
    x = _a([1.0, 5.0, 3.0])
    g = grad(lambda x: snp.max(x, initial=4.0))(x)
    _close(g, [0, 1, 0])
    g = grad(lambda x: snp.max(x, initial=10.0))(x)
    _close(g, [0, 0, 0])
    g = grad(lambda x: snp.max(x, where=np.array([True, False, True]), initial=-1.0))(x)
    _close(g, [0, 0, 1])


def test_ptp_and_nanmax_gradients():
    x = np.array([1.0, np.nan, 4.0, -2.0])
    _close(grad(lambda x: snp.nanmax(x))(_a(x)), [0, 0, 1, 0])
    _close(grad(lambda x: snp.ptp(x))(_a([1.0, 4.0, -2.0])), [0, 1, -1])


def test_zero_jvp_for_index_and_bool_reductions():
    x = _a([[1.0, 3.0], [2.0, 0.0]])
    for f in (lambda x: snp.argmax(x, axis=1), lambda x: snp.argmin(x),
              lambda x: snp.any(x > 1.0, axis=0), lambda x: snp.all(x > 0.0),
              lambda x: snp.count_nonzero(x), lambda x: snp.argsort(x, axis=0),
              lambda x: snp.searchsorted(_a([0.0, 1.5, 2.5]), x)):
        out, t = jvp(f, (x,), (_a(np.ones((2, 2))),))
        assert np.asarray(t).dtype == starling.core.dtypes.float0
        assert np.asarray(t).shape == np.asarray(out).shape


# ---- composites: logsumexp, var / std, mean, median ---------------------------------------------

def test_logsumexp_neg_inf_entries_give_exact_zero_weights():
    a = np.array([0.0, -np.inf, 1.0, -np.inf])
    v, g = starling.value_and_grad(lambda a: snp.logsumexp(a))(_a(a))
    w = np.exp(np.array([0.0, 1.0]) - np.logaddexp(0.0, 1.0))
    _close(g, [w[0], 0.0, w[1], 0.0], rtol=1e-14)
    assert np.all(np.isfinite(_np(g)))
    assert float(_np(v)) == pytest.approx(np.logaddexp(0.0, 1.0))


def test_logsumexp_all_neg_inf_row():
    a = np.array([[-np.inf, -np.inf, -np.inf], [0.0, 1.0, -np.inf]])
    out = snp.logsumexp(_a(a), axis=1)
    assert float(_np(out)[0]) == -np.inf
    g = grad(lambda a: snp.sum(snp.logsumexp(a, axis=1)))(_a(a))
    w = np.exp(np.array([0.0, 1.0]) - np.logaddexp(0.0, 1.0))
    _close(g, [[0, 0, 0], [w[0], w[1], 0]], rtol=1e-14)
    # second derivative stays finite too
    h = hessian(lambda a: snp.logsumexp(a, axis=1)[0])(_a(a))
    assert np.all(_np(h) == 0)
    # forward mode: zero tangent for the all -inf row
    t = jvp(lambda a: snp.logsumexp(a, axis=1), (_a(a),), (_a(np.ones((2, 3))),))[1]
    _close(t, [0.0, 1.0])


def test_softmax_like_rows():
    # log-softmax composed from logsumexp; a row with a single finite entry, a row of -inf
    a = np.array([[2.0, -np.inf, -np.inf], [-np.inf, -np.inf, -np.inf], [0.3, 0.1, -0.4]])

    def f(a):
        lse = snp.logsumexp(a, axis=1, keepdims=True)
        return snp.sum(snp.exp(a - lse)[:, 0])  # softmax weight of the first column

    g = _np(grad(f)(_a(a)))
    assert not np.any(np.isnan(g[[0, 2]]))
    assert np.all(g[0] == 0)  # weight is constant 1 with one finite entry
    p = np.exp(a[2] - np.logaddexp.reduce(a[2]))
    _close(g[2], p[0] * (np.eye(3)[0] - p), rtol=1e-12)


def test_logsumexp_hessian_is_softmax_covariance():
    a = np.array([0.3, -1.2, 2.0, 0.0])
    p = np.exp(a - np.logaddexp.reduce(a))
    _close(hessian(lambda a: snp.logsumexp(a))(_a(a)), np.diag(p) - np.outer(p, p), rtol=1e-12)
    check_grads(lambda a, b: snp.logsumexp(a, b=b), [a, np.abs(a) + 0.5], order=2)


def test_var_std_closed_forms():
    x = np.array([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]])
    n = 3
    m = x.mean(axis=1, keepdims=True)
    _close(grad(lambda x: snp.sum(snp.var(x, axis=1)))(_a(x)), 2 * (x - m) / n)
    _close(grad(lambda x: snp.sum(snp.var(x, axis=1, ddof=1)))(_a(x)), 2 * (x - m) / (n - 1))
    s = x.std(axis=1, keepdims=True)
    _close(grad(lambda x: snp.sum(snp.std(x, axis=1)))(_a(x)), (x - m) / (n * s), rtol=1e-12)


def test_std_at_zero_variance_has_zero_gradient():
    # documented choice: 0 (JAX and PyTorch give NaN); values unchanged (0)
    x = _a([[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]])
    v, g = starling.value_and_grad(lambda x: snp.sum(snp.std(x, axis=1)))(x)
    gv = _np(g)
    assert np.all(gv[0] == 0) and np.all(np.isfinite(gv))
    assert float(_np(snp.std(x, axis=1))[0]) == 0.0
    assert np.all(_np(grad(lambda x: snp.std(x))(_a([5.0]))) == 0)
    assert np.all(_np(grad(lambda x: snp.nanstd(x))(_a([5.0, np.nan]))) == 0)
    h = hessian(lambda x: snp.std(x))(_a([1.0, 1.0]))
    assert np.all(np.isfinite(_np(h)))


def test_mean_and_median_gradients():
    x = np.array([[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]])
    _close(grad(lambda x: snp.sum(snp.mean(x, axis=0)))(_a(x)), np.full((2, 3), 0.5))
    # even count: the two middle values (1 and 2) share the gradient
    _close(grad(lambda x: snp.median(x))(_a(x)), np.where(np.isin(x, [1.0, 2.0]), 0.5, 0.0))
    _close(grad(lambda x: snp.sum(snp.median(x, axis=1)))(_a(x)), [[0, 0, 1], [1, 0, 0]])


# ---- cumulative --------------------------------------------------------------------------------

def test_cumsum_transpose_is_reverse_cumsum():
    x = _a(np.arange(1.0, 6.0))
    ct = np.array([1.0, 10.0, 100.0, 1000.0, 10000.0])
    _, f_vjp = vjp(lambda x: snp.cumsum(x), x)
    _close(f_vjp(_a(ct))[0], np.cumsum(ct[::-1])[::-1])
    _, f_vjp = vjp(lambda x: snp.cumulative_sum(x, include_initial=True), x)
    _close(f_vjp(_a(np.ones(6)))[0], [5, 4, 3, 2, 1])


def _cumprod_jac(x):
    n = x.size
    return np.array([[np.prod(np.delete(x[:i + 1], j)) if j <= i else 0.0 for j in range(n)]
                     for i in range(n)])


@pytest.mark.parametrize("v", [[2.0, -0.5, 3.0, 0.7, 1.1], [2.0, 0.0, 3.0, 0.5, 4.0],
                               [0.0, 2.0, 0.0, 3.0, 1.5], [0.0, 0.0, 0.0], [1.3]])
def test_cumprod_jacobian_with_zeros(v):
    x = np.array(v)
    want = _cumprod_jac(x)
    _close(jacfwd(lambda x: snp.cumprod(x))(_a(x)), want)
    _close(jacrev(lambda x: snp.cumprod(x))(_a(x)), want)


def test_cumprod_long_axis_and_reverse():
    rng = np.random.default_rng(1)
    x = rng.uniform(0.8, 1.2, (2, 37))
    x[0, 5] = 0.0
    x[1, 20] = x[1, 30] = 0.0
    check_grads(lambda x: snp.cumprod(x, axis=1), [x], order=2)
    # reverse direction through cumulative_prod of the flipped input
    y = np.array([1.5, 0.0, 2.0, -1.0])
    want = _cumprod_jac(y[::-1])[::-1, ::-1]
    got = jacrev(lambda y: snp.flip(snp.cumprod(snp.flip(y))))(_a(y))
    _close(got, want)


def test_cumprod_reverse_primitive_rule():
    from starling.arrays.ops.cumulative import cumprod_p
    y = np.array([1.5, 0.0, 2.0, -1.0, 0.3])
    want = _cumprod_jac(y[::-1])[::-1, ::-1]
    f = lambda y: cumprod_p.bind(y, axis=0, reverse=True)  # noqa: E731
    _close(jacfwd(f)(_a(y)), want)
    _close(jacrev(f)(_a(y)), want)


def test_cummax_ties_go_to_first_and_nan():
    x = np.array([1.0, 3.0, 3.0, 2.0, 5.0, np.nan, 7.0, np.nan])
    j = _np(jacrev(lambda x: snp.cummax(x))(_a(x)))
    src = [0, 1, 1, 1, 4, 5, 5, 5]
    _close(j, np.eye(8)[src])
    _close(jacfwd(lambda x: snp.cummax(x))(_a(x)), np.eye(8)[src])
    # reverse: "first" in scan order is the one nearest the end
    y = np.array([2.0, 4.0, 1.0, 4.0, 3.0])
    j = _np(jacfwd(lambda y: snp.cummax(y, reverse=True))(_a(y)))
    _close(j, np.eye(5)[[3, 3, 3, 3, 4]])
    j = _np(jacrev(lambda y: snp.cummin(y))(_a(y)))
    _close(j, np.eye(5)[[0, 0, 2, 2, 2]])


# ---- sort / top_k ------------------------------------------------------------------------------

def test_sort_tangent_is_shared_within_ties():
    # each run of tied sorted values shares the mean of its tangents (the minimum-norm
    # subgradient, as max over k ties gives 1/k each); untied entries follow the permutation
    x = np.array([2.0, 1.0, 2.0, 0.0, 1.0])
    t = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    _close(jvp(lambda x: snp.sort(x), (_a(x),), (_a(t),))[1], [40, 35, 35, 20, 20])
    _close(jvp(lambda x: snp.sort(x, descending=True), (_a(x),), (_a(t),))[1],
           [20, 20, 35, 35, 40])
    g = grad(lambda x: snp.sort(x)[-1])(_a(x))  # the tied maxima share the gradient
    _close(g, [0.5, 0, 0.5, 0, 0])
    g = grad(lambda x: snp.sort(x)[-1])(_a(np.array([2.0, 1.0, 3.0])))   # no tie: exact
    _close(g, [0, 0, 1])


def test_top_k_gradient_is_shared_within_ties():
    x = np.array([[1.0, 3.0, 3.0, 0.5], [4.0, -1.0, 2.0, 2.0]])
    g = grad(lambda x: snp.sum(snp.top_k(x, 2)[0] * _a([1.0, 10.0])))(_a(x))
    # row 0: both tied 3s are returned (weights 1 and 10 shared); row 1: the tie of 2s straddles
    # the k-th place, so the returned one's weight is shared with the one left out
    _close(g, [[0, 5.5, 5.5, 0], [1, 0, 5, 5]])
    h = hessian(lambda x: snp.sum(snp.top_k(x, 1)[0] ** 2))(_a(x[1]))
    want = np.zeros((4, 4))
    want[0, 0] = 2.0
    _close(h, want)


def test_quantile_gradient_interpolates():
    x = np.array([4.0, 1.0, 3.0, 2.0, 0.0])
    g = grad(lambda x: snp.quantile(x, 0.3))(_a(x))  # position 1.2 between 1.0 and 2.0
    _close(g, [0, 0.8, 0, 0.2, 0], rtol=1e-12, atol=1e-12)
    gq = grad(lambda q: snp.quantile(_a(x), q))(_a(0.3))
    assert float(_np(gq)) == pytest.approx(4.0)  # slope (2 - 1) * (n - 1)


# ---- vmap --------------------------------------------------------------------------------------

def _loop(f, xs, axis=0):
    return np.stack([_np(f(_a(np.take(xs, i, axis=axis)))) for i in range(xs.shape[axis])])


@pytest.mark.parametrize("name,f", [
    ("sum", lambda x: snp.sum(x, axis=0)),
    ("prod", lambda x: snp.prod(x, axis=(0, 1))),
    ("max", lambda x: snp.max(x, axis=-1, keepdims=True)),
    ("argmin", lambda x: snp.argmin(x, axis=1)),
    ("any", lambda x: snp.any(x > 0, axis=0)),
    ("cumsum", lambda x: snp.cumsum(x, axis=1)),
    ("cumprod", lambda x: snp.cumprod(x, axis=0)),
    ("cummax", lambda x: snp.cummax(x, axis=1, reverse=True)),
    ("sort", lambda x: snp.sort(x, axis=0, descending=True)),
    ("argsort", lambda x: snp.argsort(x, axis=-1)),
    ("top_k", lambda x: snp.top_k(x, 2)[0]),
    ("top_k_idx", lambda x: snp.top_k(x, 2)[1]),
    ("logsumexp", lambda x: snp.logsumexp(x, axis=1)),
    ("median", lambda x: snp.median(x, axis=0)),
])
@pytest.mark.parametrize("in_axis", [0, 1, -1])
def test_vmap_in_axes(name, f, in_axis):
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((3, 4, 5))
    got = vmap(f, in_axes=in_axis)(_a(xs))
    _close(got, _loop(f, xs, in_axis), rtol=1e-12, atol=1e-12)


def test_vmap_in_axes_none_and_grad():
    x = _a(np.array([[1.0, 0.0, 2.0], [3.0, -1.0, 0.5]]))
    ws = _a(np.array([[1.0, 2.0, 3.0], [0.5, 0.0, 1.0], [2.0, 2.0, 2.0], [1.0, -1.0, 1.0]]))
    f = lambda w, x: snp.sum(snp.max(x * w, axis=1))  # noqa: E731
    got = vmap(grad(f), in_axes=(0, None))(ws, x)
    want = np.stack([_np(grad(f)(ws[i], x)) for i in range(4)])
    _close(got, want)
    got = vmap(grad(f, argnums=1), in_axes=(0, None))(ws, x)
    want = np.stack([_np(grad(f, argnums=1)(ws[i], x)) for i in range(4)])
    _close(got, want)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("axes", [(0, 0), (1, None), (None, 0), (0, 1)])
def test_vmap_searchsorted_sorted_rows(side, axes):
    rng = np.random.default_rng(4)
    hay = np.sort(rng.integers(-3, 4, (4, 7)).astype(np.float64), axis=1)
    hay[2, -2:] = np.nan  # NaN sorts last
    vals = rng.integers(-4, 5, (4, 2, 3)).astype(np.float64)
    vals[1, 0, 0] = np.nan
    a = hay if axes[0] == 0 else (hay.T if axes[0] == 1 else hay[0])
    v = vals if axes[1] == 0 else (np.moveaxis(vals, 0, 1) if axes[1] == 1 else vals[0])
    got = vmap(lambda a, v: snp.searchsorted(a, v, side=side), in_axes=axes)(_a(a), _a(v))
    want = np.stack([np.searchsorted(hay[i] if axes[0] is not None else hay[0],
                                     vals[i] if axes[1] is not None else vals[0], side=side)
                     for i in range(4)])
    np.testing.assert_array_equal(_np(got), want)
    assert _np(got).dtype == np.int64


def test_jvp_of_vmap_of_grad():
    xs = np.array([[1.0, 0.0, 2.0, -1.0], [0.5, 0.5, 3.0, 0.2], [2.0, -2.0, 0.0, 1.0]])
    ts = np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, -1.0], [2.0, 0.0, 1.0, 1.0]])

    def f(x):
        return snp.prod(x) + snp.max(x) ** 2 + snp.sum(snp.cumprod(x)) + snp.logsumexp(x)

    _, got = jvp(vmap(grad(f)), (_a(xs),), (_a(ts),))
    want = np.stack([_np(hessian(f)(_a(xs[i]))) @ ts[i] for i in range(3)])
    _close(got, want, rtol=1e-10, atol=1e-10)


def test_grad_of_vmap_and_check_grads_composites():
    xs = np.array([[1.0, 0.0, 2.0], [0.5, 3.0, -1.0]])
    g = grad(lambda xs: snp.sum(vmap(lambda x: snp.prod(x) * snp.sum(x))(xs)))(_a(xs))
    want = np.stack([_prod_others(x) * x.sum() + x.prod() for x in xs])
    _close(g, want)
    check_grads(lambda x: snp.var(x, axis=0) + snp.sum(snp.sort(x, axis=1), axis=0),
                [np.array([[0.3, 1.7, -0.4], [2.2, -1.1, 0.9]])], order=2)


def test_nan_aware_reductions_give_zero_gradient_at_nans():
    x = np.array([1.0, np.nan, 3.0, 2.0])
    ok = ~np.isnan(x)
    y = x[ok]
    m = y.mean()
    cases = {
        "nanmean": np.full(3, 1 / 3), "nansum": np.ones(3), "nanprod": _prod_others(y),
        "nanvar": 2 * (y - m) / 3, "nanstd": (y - m) / (3 * y.std()),
        "nanmax": [0, 1, 0], "nanmin": [1, 0, 0],
    }
    for name, want in cases.items():
        g = _np(grad(getattr(snp, name))(_a(x)))
        assert g[1] == 0, name
        _close(g[ok], want, rtol=1e-12)
