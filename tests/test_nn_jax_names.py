"""``starling.nn``'s JAX spellings (``jax.nn`` names and keywords) and ``nn.initializers``,
against NumPy / SciPy formulas, finite differences, and their PyTorch-style twins."""
import math

import numpy as np
import pytest
import scipy.special as sps
import scipy.stats as stats

import starling as st
import starling.numpy as snp
from starling import nn
from starling.nn import functional as F
from starling.test_util import check_grads

RNG = np.random.default_rng(0)
X = np.array([-3.0, -1.0, -0.5, 0.0, 0.3, 1.0, 2.5, 40.0], np.float32)


@pytest.mark.parametrize("name, ref", [
    ("softplus", lambda x: np.logaddexp(x, 0)),
    ("sparse_plus", lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4))),
    ("sparse_sigmoid", lambda x: np.clip((x + 1) / 2, 0, 1)),
    ("squareplus", lambda x: (x + np.sqrt(x * x + 4)) / 2),
    ("soft_sign", lambda x: x / (1 + abs(x))),
    ("swish", lambda x: x * sps.expit(x)),
    ("log_sigmoid", lambda x: -np.logaddexp(0, -x)),
    ("hard_tanh", lambda x: np.clip(x, -1, 1)),
    ("hard_silu", lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    ("gelu", lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    ("identity", lambda x: x),
])
def test_activation_values(name, ref):
    got = np.asarray(getattr(nn, name)(X))
    np.testing.assert_allclose(got, ref(X.astype(np.float64)), rtol=2e-6, atol=1e-6)
    assert got.dtype == np.float32


def test_gelu_exact_is_the_functional_one_and_jax_default_is_tanh():
    np.testing.assert_array_equal(np.asarray(nn.gelu(X, approximate=False)),
                                  np.asarray(F.gelu(X)))
    np.testing.assert_array_equal(np.asarray(nn.gelu(X)), np.asarray(F.gelu(X, "tanh")))


def test_softplus_has_no_threshold_unlike_pytorch():
    x = np.array([25.0])
    assert float(nn.softplus(x)[0]) == pytest.approx(25.0 + math.exp(-25.0), rel=1e-15)
    assert float(F.softplus(x)[0]) == 25.0


def test_smooth_activations_gradients():
    x = snp.asarray(np.array([-1.7, -0.4, 0.6, 2.0]))
    for name in ("sparse_plus", "squareplus", "softplus", "swish"):
        check_grads(getattr(nn, name), (x,), order=2)
    check_grads(nn.log1mexp, (snp.asarray(np.array([0.05, 0.69, 0.7, 3.0])),), order=2)


def test_log1mexp_accuracy_both_branches():
    x = np.array([1e-20, 1e-8, 0.5, math.log(2), 0.7, 5.0, 40.0, 800.0])
    got = np.asarray(nn.log1mexp(x.astype(np.float64)))
    import mpmath
    with mpmath.workdps(60):
        want = np.array([float(mpmath.log(1 - mpmath.exp(-mpmath.mpf(v)))) for v in x])
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert float(nn.log1mexp(np.array(0.0))) == -math.inf
    assert np.isnan(float(nn.log1mexp(np.array(-1.0))))
    # the untaken branch leaks no NaN into the gradient at either end
    assert np.isfinite(float(st.grad(nn.log1mexp)(1e-3)))
    assert float(st.grad(nn.log1mexp)(800.0)) == pytest.approx(0.0, abs=1e-300)


def test_softmax_where_and_tuple_axis():
    x = RNG.normal(size=(3, 4, 5)).astype(np.float32)
    mask = RNG.random((3, 4, 5)) > 0.4
    mask[0, 1] = False                                  # a slice with nothing left
    got = np.asarray(nn.softmax(x, axis=-1, where=mask))
    e = np.where(mask, np.exp(x - x.max(-1, keepdims=True)), 0)
    s = e.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, np.where(s > 0, e / np.where(s > 0, s, 1), 0), rtol=1e-6)
    assert not np.isnan(got).any()
    lsm = np.asarray(nn.log_softmax(x, axis=-1, where=mask))
    np.testing.assert_allclose(np.exp(lsm), got, rtol=1e-5, atol=1e-7)
    assert (lsm[~mask] == -np.inf).all()
    # tuple axis = the softmax over the flattened axes
    want = sps.softmax(x, axis=(0, 2))
    np.testing.assert_allclose(np.asarray(nn.softmax(x, axis=(0, 2))), want, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(nn.log_softmax(x, axis=(2, 0))),
                               sps.log_softmax(x, axis=(0, 2)), rtol=1e-5, atol=1e-6)


def test_softmax_where_gradients_are_finite_and_zero_where_masked():
    x = snp.asarray(np.array([[1.0, np.inf, -2.0], [0.5, 0.1, 3.0]]))
    mask = snp.asarray(np.array([[True, False, True], [False, False, False]]))
    for fn in (lambda v: nn.softmax(v, where=mask), lambda v: nn.log_softmax(v, where=mask)):
        g = np.asarray(st.grad(lambda v: snp.sum(snp.where(mask, fn(v), 0) * 1.7))(x))
        assert np.isfinite(g).all() and (g[~np.asarray(mask)] == 0).all()
    xs = snp.asarray(np.array([[0.3, -1.2, 0.8], [0.5, 0.1, 2.0]]))
    m2 = snp.asarray(np.array([[True, False, True], [True, True, False]]))
    check_grads(lambda v: nn.softmax(v, where=m2), (xs,), order=2)
    check_grads(lambda v: snp.where(m2, nn.log_softmax(v, where=m2), 0), (xs,), order=2)


def test_logsumexp_where_and_logmeanexp():
    x = np.array([[1.0, np.inf, 3.0], [np.nan, 0.0, -1.0]])
    mask = np.array([[True, False, True], [False, True, True]])
    want = np.log(np.array([np.exp(1) + np.exp(3), 1 + np.exp(-1)]))
    np.testing.assert_allclose(np.asarray(nn.logsumexp(x, axis=1, where=mask)), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(nn.logmeanexp(x, axis=1, where=mask)),
                               want - np.log(2), rtol=1e-12)
    y = RNG.normal(size=(4, 3))
    np.testing.assert_allclose(np.asarray(nn.logmeanexp(y, axis=0, keepdims=True)),
                               sps.logsumexp(y, axis=0, keepdims=True) - np.log(4), rtol=1e-12)
    g = np.asarray(st.grad(lambda v: nn.logsumexp(v, where=mask))(snp.asarray(x)))
    assert (g[~mask] == 0).all() and np.isfinite(g).all()


def test_standardize_matches_layer_norm_and_where():
    x = RNG.normal(size=(3, 6)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(nn.standardize(x)),
                               np.asarray(F.layer_norm(x, 6)), rtol=1e-6)
    mask = np.arange(6) < 4
    got = np.asarray(nn.standardize(x, where=mask))
    xs = x[:, :4].astype(np.float64)
    want = (x - xs.mean(1, keepdims=True)) / np.sqrt(xs.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(nn.standardize(x, axis=0, mean=0.0, variance=4.0)),
                               x / np.sqrt(4 + 1e-5), rtol=1e-6)
    check_grads(lambda v: nn.standardize(v, axis=(0, 1)), (snp.asarray(x[:2, :3]),), order=2,
                atol=1e-3, rtol=1e-3)


def test_one_hot_jax_semantics():
    idx = np.array([[0, 2], [5, -1]], np.int32)
    got = np.asarray(nn.one_hot(idx, 3))
    want = (idx[..., None] == np.arange(3)).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(nn.one_hot(idx, 3, axis=0, dtype=snp.int8)),
                                  np.moveaxis(want, -1, 0).astype(np.int8))
    assert nn.one_hot(np.zeros((0,), np.int32), 4).shape == (0, 4)
    with pytest.raises(TypeError, match="one_hot"):
        nn.one_hot(np.array([0.5]), 3)
    with pytest.raises(ValueError, match="num_classes"):
        nn.one_hot(np.array([1]), -2)


def _attention_ref(q, k, v, keep, bias=None, scale=None):
    """(B, T, N, H) attention in float64 with zero rows where nothing may be attended."""
    B, T, N, H = q.shape
    K = k.shape[2]
    k = np.repeat(k, N // K, axis=2)
    v = np.repeat(v, N // K, axis=2)
    scale = 1 / np.sqrt(H) if scale is None else scale
    s = np.einsum("btnh,bsnh->bnts", q, k) * scale
    if bias is not None:
        s = s + bias
    keep = np.broadcast_to(keep, s.shape)
    s = np.where(keep, s, -np.inf)
    m = np.max(np.where(keep, s, -1e300), -1, keepdims=True)
    e = np.where(keep, np.exp(s - m), 0)
    tot = e.sum(-1, keepdims=True)
    w = np.where(tot > 0, e / np.where(tot > 0, tot, 1), 0)
    return np.einsum("bnts,bsnh->btnh", w, v)


def test_dot_product_attention_masks_gqa_windows_lengths():
    B, T, S, N, K, H = 2, 5, 6, 4, 2, 3
    q = RNG.normal(size=(B, T, N, H))
    k = RNG.normal(size=(B, S, K, H))
    v = RNG.normal(size=(B, S, K, H))
    bias = RNG.normal(size=(1, N, T, S))
    mask = RNG.random((B, 1, T, S)) > 0.3
    i, j = np.arange(T)[:, None], np.arange(S)[None, :]
    qlen, kvlen = np.array([5, 2]), np.array([0, 4])
    keep = (mask & (j <= i) & (j >= i - 1) & (j <= i + 2)
            & (i < qlen[:, None, None, None]) & (j < kvlen[:, None, None, None]))
    got = nn.dot_product_attention(q, k, v, bias, mask, is_causal=True, query_seq_lengths=qlen,
                                   key_value_seq_lengths=kvlen, local_window_size=(1, 2))
    np.testing.assert_allclose(np.asarray(got), _attention_ref(q, k, v, keep, bias), atol=1e-12)
    assert (np.asarray(got)[0] == 0).all()                # kv length 0: nothing to attend
    # unbatched, no mask: plain softmax attention; the same as the PyTorch-style function
    out = nn.dot_product_attention(q[0], k[0], v[0], scale=0.7)
    np.testing.assert_allclose(np.asarray(out), _attention_ref(q[:1], k[:1], v[:1], True,
                                                                scale=0.7)[0], atol=1e-12)
    torch_style = F.scaled_dot_product_attention(
        np.swapaxes(q, 1, 2), np.swapaxes(k, 1, 2), np.swapaxes(v, 1, 2), is_causal=True,
        enable_gqa=True)
    np.testing.assert_allclose(np.asarray(nn.dot_product_attention(q, k, v, is_causal=True)),
                               np.swapaxes(np.asarray(torch_style), 1, 2), atol=1e-12)


def test_dot_product_attention_gradients_with_empty_rows():
    q = snp.asarray(RNG.normal(size=(1, 3, 2, 2)))
    k = snp.asarray(RNG.normal(size=(1, 4, 1, 2)))
    v = snp.asarray(RNG.normal(size=(1, 4, 1, 2)))
    kvlen = snp.asarray(np.array([2]))
    mask = snp.asarray(np.array([True, True, False]))[:, None] & snp.asarray(np.ones(4, bool))

    def f(q, k, v):
        return nn.dot_product_attention(q, k, v, mask=mask, key_value_seq_lengths=kvlen)
    g = st.grad(lambda *a: snp.sum(f(*a) ** 2), argnums=(0, 1, 2))(q, k, v)
    assert all(np.isfinite(np.asarray(t)).all() for t in g)
    check_grads(f, (q, k, v), order=2)
    assert (np.asarray(st.compile(f)(q, k, v)) == np.asarray(f(q, k, v))).all()


def test_dot_product_attention_errors():
    q = np.zeros((1, 3, 3, 2))
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        nn.dot_product_attention(q, np.zeros((1, 4, 2, 2)), np.zeros((1, 4, 2, 2)))
    with pytest.raises(ValueError, match="head sizes"):
        nn.dot_product_attention(q, np.zeros((1, 4, 3, 5)), np.zeros((1, 4, 3, 5)))
    with pytest.raises(ValueError, match=r"\(B, T, N, H\)"):
        nn.dot_product_attention(q[0, 0], q[0, 0], q[0, 0])
    with pytest.raises(ValueError, match="implementation"):
        nn.dot_product_attention(q, q, q, implementation="cudnn")


def test_vmap_and_compile_agree_with_eager():
    x = snp.asarray(RNG.normal(size=(4, 5)).astype(np.float32))
    mask = snp.asarray(RNG.random((4, 5)) > 0.5)
    for fn in (lambda a, m: nn.softmax(a, where=m), lambda a, m: nn.standardize(a, where=m),
               lambda a, m: nn.logsumexp(a, where=m), lambda a, m: nn.sparse_plus(a) * m):
        eager = np.asarray(fn(x, mask))
        np.testing.assert_allclose(np.asarray(st.compile(fn)(x, mask)), eager, rtol=1e-6,
                                   atol=1e-7)
        np.testing.assert_allclose(np.asarray(st.vmap(fn)(x, mask)),
                                   np.stack([np.asarray(fn(x[i], mask[i])) for i in range(4)]),
                                   rtol=1e-6, atol=1e-7)


def test_numpy_integer_inputs_become_float32():
    xi = np.array([1, -2, 3], np.int32)
    for name in ("softplus", "squareplus", "sparse_plus", "log1mexp", "standardize", "softmax"):
        assert getattr(nn, name)(xi).dtype == np.float32, name


# ---- initializers --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, var, dist", [
    ("glorot_uniform", 2 / (300 + 200), "uniform"), ("glorot_normal", 2 / (300 + 200), "trunc"),
    ("lecun_uniform", 1 / 300, "uniform"), ("lecun_normal", 1 / 300, "trunc"),
    ("he_uniform", 2 / 300, "uniform"), ("he_normal", 2 / 300, "trunc"),
])
def test_variance_scaling_family(name, var, dist):
    w = getattr(nn.initializers, name)()(st.random.key(3), (300, 200))
    assert w.shape == (300, 200) and w.dtype == np.float32
    w = np.asarray(w, np.float64)
    sd = math.sqrt(var)
    if dist == "uniform":
        ref = stats.uniform(-sd * math.sqrt(3), 2 * sd * math.sqrt(3))
    else:
        s = sd / 0.87962566103423978
        ref = stats.truncnorm(-2, 2, scale=s)
    assert stats.kstest(w.ravel(), ref.cdf).pvalue > 1e-3
    assert np.var(w) == pytest.approx(var, rel=0.03)


def test_fans_follow_jax_axes_for_conv_kernels():
    # an HWIO kernel: fan_in = 3*3*16, fan_out = 3*3*32
    w = np.asarray(nn.initializers.variance_scaling(1.0, "fan_out", "normal")(
        st.random.key(0), (3, 3, 16, 32)))
    assert np.var(w) == pytest.approx(1 / (9 * 32), rel=0.05)
    w = np.asarray(nn.initializers.variance_scaling(1.0, "fan_in", "uniform", in_axis=0,
                                                    out_axis=1)(st.random.key(0), (64, 32, 5)))
    assert np.var(w) == pytest.approx(1 / (64 * 5), rel=0.05)


def test_simple_initializers():
    key = st.random.key(1)
    assert (np.asarray(nn.initializers.zeros(key, (2, 3))) == 0).all()
    assert (np.asarray(nn.initializers.ones(key, (2,), snp.float64)) == 1).all()
    assert (np.asarray(nn.initializers.constant(2.5)(key, (3,))) == 2.5).all()
    u = np.asarray(nn.initializers.uniform(0.5)(key, (4000,)))
    assert u.min() >= 0 and u.max() < 0.5
    t = np.asarray(nn.initializers.truncated_normal(0.1, lower=-1.0, upper=1.5)(key, (4000,)))
    assert t.min() >= -0.1 and t.max() <= 0.15
    assert np.std(np.asarray(nn.initializers.normal(0.3)(key, (20000,)))) == pytest.approx(0.3,
                                                                                         rel=0.03)


@pytest.mark.parametrize("shape, axis", [((5, 3), -1), ((3, 5), -1), ((4, 2, 6), 0), ((4, 4), 0)])
def test_orthogonal(shape, axis):
    w = np.asarray(nn.initializers.orthogonal(2.0, column_axis=axis)(st.random.key(7), shape),
                   np.float64)
    m = np.moveaxis(w, axis, -1).reshape(-1, shape[axis]) / 2.0
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, np.eye(min(m.shape)), atol=1e-5)


def test_delta_orthogonal_and_errors():
    w = np.asarray(nn.initializers.delta_orthogonal()(st.random.key(2), (3, 3, 4, 6)), np.float64)
    c = w[1, 1]
    np.testing.assert_allclose(c @ c.T, np.eye(4), atol=1e-5)
    w[1, 1] = 0
    assert (w == 0).all()
    with pytest.raises(ValueError, match="in <= out"):
        nn.initializers.delta_orthogonal()(st.random.key(2), (3, 6, 4))
    with pytest.raises(ValueError, match="mode"):
        nn.initializers.variance_scaling(1.0, "fan_x", "normal")
    with pytest.raises(ValueError, match="at least 2 dims"):
        nn.initializers.glorot_uniform()(st.random.key(0), (5,))
    with pytest.raises(TypeError, match="key"):
        nn.initializers.glorot_uniform()(None, (5, 5))
