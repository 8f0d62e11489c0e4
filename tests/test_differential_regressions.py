"""Wrong results found by an outside differential test (issue 14): one test per class, each
checking the reported example and the other members of its class against an independent
reference (closed forms, NumPy in float64, finite differences)."""
from __future__ import annotations

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.test_util import check_grads

F = st.nn.functional


# ---- order statistics with ties: the derivative is shared among tied values -------------------

@pytest.mark.parametrize("fn, want", [
    (snp.median, [0, .5, .5, 0]),
    (lambda x: snp.quantile(x, 0.4), [0, .5, .5, 0]),           # between two tied values
    (lambda x: snp.percentile(x, 50.0), [0, .5, .5, 0]),
    (lambda x: snp.quantile(x, 0.4, method="midpoint"), [0, .5, .5, 0]),
    (lambda x: snp.sort(x)[1], [0, .5, .5, 0]),
    (lambda x: snp.sort(x)[0], [1, 0, 0, 0]),                   # no tie: unchanged
])
def test_order_statistics_share_the_derivative_of_ties(fn, want):
    x = snp.asarray([1.0, 2.0, 2.0, 3.0])
    np.testing.assert_allclose(np.asarray(st.grad(fn)(x)), want)
    # forward mode agrees with reverse mode
    for i in range(4):
        e = np.zeros(4)
        e[i] = 1
        _, t = st.jvp(fn, (x,), (snp.asarray(e, dtype=x.dtype),))
        np.testing.assert_allclose(float(t), want[i])


def test_sort_tangents_are_exact_without_ties_and_averaged_within_ties():
    x = snp.asarray([[3.0, 1.0, 2.0, 1.0], [0.0, 0.0, 0.0, 5.0]])
    t = snp.asarray([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 6.0, 7.0]])
    _, got = st.jvp(lambda x: snp.sort(x, axis=-1), (x,), (t,))
    np.testing.assert_array_equal(np.asarray(got), [[3.0, 3.0, 3.0, 1.0], [3.0, 3.0, 3.0, 7.0]])
    # smooth symmetric functions of sorted values: grads against finite differences
    xs = snp.asarray(np.random.default_rng(0).standard_normal(7))
    check_grads(snp.median, (xs,), order=2)
    check_grads(lambda x: snp.quantile(x, snp.asarray([0.1, 0.5, 0.9])), (xs,), order=2)


# ---- functions differentiated as themselves, not through U, S, V -------------------------------

def test_pinv_derivative_at_repeated_singular_values():
    t = snp.asarray(np.arange(9.0).reshape(3, 3))
    _, dp = st.jvp(snp.linalg.pinv, (snp.eye(3, dtype=np.float64),), (t,))
    np.testing.assert_allclose(np.asarray(dp), -np.asarray(t))   # pinv = inv there
    g = st.grad(lambda a: snp.linalg.pinv(a).sum())(snp.eye(3, dtype=np.float64) * 2)
    assert np.all(np.isfinite(np.asarray(g)))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_pinv_gradients_match_finite_differences(shape):
    a = snp.asarray(np.random.default_rng(1).standard_normal(shape))
    check_grads(snp.linalg.pinv, (a,), order=2)
    np.testing.assert_allclose(np.asarray(snp.linalg.pinv(a)), np.linalg.pinv(np.asarray(a)),
                               rtol=1e-10, atol=1e-12)


def test_pinv_hermitian_takes_hermitian_tangents():
    a = np.random.default_rng(2).standard_normal((4, 4))
    s = snp.asarray(a @ a.T)
    check_grads(lambda m: snp.linalg.pinv((m + m.T) / 2, hermitian=True), (s,), order=2)
    batched = st.vmap(snp.linalg.pinv)(snp.stack([s, 2 * s]))
    np.testing.assert_allclose(np.asarray(batched[1]), np.linalg.pinv(2 * a @ a.T), rtol=1e-9)


# ---- numerically stable softmax paths ------------------------------------------------------------

def test_log_softmax_subtracts_the_max_first():
    out = np.asarray(F.log_softmax(snp.asarray([1e30, 1e30, -1e30, 0.0])))
    np.testing.assert_allclose(out[:2], np.log(0.5), rtol=1e-6)
    assert out[2] == np.float32(-2e30) and out[3] == np.float32(-1e30)
    x = np.float32([1000.0, 1000.25, 999.0, 1000.5])
    x64 = x.astype(np.float64)
    ref = x64 - (x64.max() + np.log(np.exp(x64 - x64.max()).sum()))
    got = np.asarray(F.log_softmax(snp.asarray(x))).astype(np.float64)
    ulps = np.abs(got - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 4, ulps   # (x - m) is exact; the log and the subtraction round (was ~440)
    # all -inf / +inf slices: NaN, as PyTorch and JAX
    assert np.isnan(np.asarray(F.log_softmax(snp.asarray([-np.inf, -np.inf])))).all()


def test_other_softmax_paths_at_extremes():
    big = snp.asarray([[1e30, 1e30, -1e30, 0.0]])
    np.testing.assert_allclose(float(F.cross_entropy(big, snp.asarray([0]))), np.log(2), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(F.softmax(big))[0], [.5, .5, 0, 0])
    x = snp.asarray([-1e4, -50.0, 0.0, 50.0, 1e4])
    np.testing.assert_allclose(np.asarray(F.logsigmoid(x)), [-1e4, -50.0, -np.log(2), 0, 0],
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(F.softplus(x)), [0, 0, np.log(2), 50.0, 1e4],
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(float(snp.logsumexp(snp.asarray([1e30, 1e30]))), 1e30, rtol=1e-6)
    # gradients stay the softmax weights
    g = st.grad(lambda v: F.log_softmax(v)[0])(snp.asarray([1000.0, 1000.0]))
    np.testing.assert_allclose(np.asarray(g), [0.5, -0.5])


# ---- compile where eager works: views of the zero imaginary part --------------------------------

@pytest.mark.parametrize("fn", [
    lambda a: snp.fft.hfft(a, axis=0),
    lambda a: snp.fft.hfft(a, axis=1),
    lambda a: snp.fft.ihfft(a, axis=0),
    lambda a: (a.astype(snp.complex64).T * 2j).real,
    lambda a: snp.conj(a.astype(snp.complex64)).T.imag,
])
def test_compiled_complex_views_match_eager(fn):
    a = snp.asarray(np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32))
    np.testing.assert_allclose(np.asarray(st.compile(fn)(a)), np.asarray(fn(a)), rtol=1e-5,
                               atol=1e-5)


# ---- higher-order derivatives through control flow ------------------------------------------

@pytest.mark.parametrize("branch, x, want", [
    (lambda u: snp.where(u > 0, u, 2 * u), 1.0, 0.0),
    (lambda u: snp.clip(u, -1.0, 2.0) * u, 0.5, 2.0),
    (lambda u: snp.where(u > 1, u ** 3, u), 2.0, 12.0),
    (lambda u: snp.maximum(u, 0.0) ** 2, 1.5, 2.0),
])
def test_second_derivatives_through_cond_and_switch(branch, x, want):
    f = lambda s: st.cond(True, branch, lambda u: u, s)   # noqa: E731
    assert float(st.grad(st.grad(f))(x)) == pytest.approx(want)
    assert float(st.jacfwd(st.grad(f))(x)) == pytest.approx(want)
    k = lambda s: st.switch(1, [lambda u: u, branch], s)   # noqa: E731
    assert float(st.grad(st.grad(k))(x)) == pytest.approx(want)
    got = st.vmap(st.grad(st.grad(k)))(snp.asarray([x, x]))
    np.testing.assert_allclose(np.asarray(got), [want, want])


# ---- NumPy inputs follow Starling's promotion, eagerly and compiled --------------------------

ACTIVATIONS = ["relu", "relu6", "hardtanh", "hardsigmoid", "hardswish", "gelu", "silu", "elu",
               "selu", "celu", "leaky_relu", "softplus", "softsign", "sigmoid", "logsigmoid",
               "mish", "tanh", "softmax", "log_softmax"]


@pytest.mark.parametrize("name", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.float32])
def test_numpy_inputs_give_starling_dtypes(name, dtype):
    fn = getattr(F, name)
    a = np.arange(-4, 5).astype(dtype)
    eager = fn(a)
    compiled = st.compile(fn)(a)
    from_starling = fn(snp.asarray(a))
    assert eager.dtype == compiled.dtype == from_starling.dtype, (eager.dtype, compiled.dtype)
    if name in ("relu", "relu6", "hardtanh"):
        assert eager.dtype == np.dtype(dtype)   # shape and dtype kept
    np.testing.assert_allclose(np.asarray(eager, np.float64), np.asarray(compiled, np.float64),
                               rtol=1e-6, atol=1e-6)


# ---- integer rounding to tens, hundreds, ...: exact, wrapping like integer arithmetic -------

@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                np.uint32, np.uint64])
def test_integer_round_negative_decimals_is_exact_and_wraps(dt):
    info = np.iinfo(dt)
    rng = np.random.default_rng(4)
    edge = np.array([info.min, info.max, 0, 5, 15, 25, 45, info.max - 5, info.min + 5],
                    dtype=object).astype(dt)
    x = np.concatenate([rng.integers(info.min, info.max, 100, dtype=dt, endpoint=True), edge])
    for d in (-1, -2, -3, -9, -18, -19, -20):
        p = 10 ** -d
        want = []
        for v in x.tolist():
            q, r = divmod(v, p)
            q += 2 * r > p or (2 * r == p and q % 2)
            want.append((q * p - int(info.min)) % 2 ** info.bits + int(info.min))
        want = np.array(want, dtype=object).astype(dt)
        got = np.asarray(snp.round(snp.asarray(x), decimals=d))
        np.testing.assert_array_equal(got, want, err_msg=f"{dt} decimals={d}")
        compiled = st.compile(lambda v: snp.round(v, decimals=d))(x)
        np.testing.assert_array_equal(np.asarray(compiled), want)
