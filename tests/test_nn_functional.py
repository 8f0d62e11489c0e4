"""nn.functional: activations, erf, attention and losses against NumPy / SciPy formulas
written here, PyTorch's edge-case conventions, and torch itself when installed."""
from __future__ import annotations

import math

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import random
from starling.nn import functional as F
from starling.test_util import check_grads


def A(x):
    return np.asarray(x)


def _torch():
    return pytest.importorskip("torch")


X = np.array([-30.0, -5.0, -1.5, -0.5, -0.0, 0.0, 0.3, 1.0, 2.5, 6.0, 25.0], np.float32)


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


def np_softplus(x):
    return np.logaddexp(x.astype(np.float64), 0)


def np_erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


ACTIVATIONS = {
    "relu": (F.relu, lambda x: np.maximum(x, 0)),
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6)),
    "leaky_relu": (F.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x)),
    "elu": (F.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    "selu": (F.selu, lambda x: 1.0507009873554805 * np.where(x > 0, x,
                                                                1.6732632423543772 * np.expm1(x))),
    "celu": (lambda x: F.celu(x, 2.0), lambda x: np.where(x > 0, x, 2 * np.expm1(x / 2))),
    "gelu": (F.gelu, lambda x: x * 0.5 * (1 + np_erf(x / np.sqrt(2)))),
    "gelu_tanh": (lambda x: F.gelu(x, "tanh"), lambda x: 0.5 * x * (1 + np.tanh(
        np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    "silu": (F.silu, lambda x: x * np_sigmoid(x)),
    "mish": (F.mish, lambda x: x * np.tanh(np_softplus(x))),
    "softplus": (F.softplus, np_softplus),
    "softplus_beta": (lambda x: F.softplus(x, 2.0, 5.0),
                      lambda x: np.where(2 * x > 5, x, np_softplus(2 * x) / 2)),
    "sigmoid": (F.sigmoid, np_sigmoid),
    "logsigmoid": (F.logsigmoid, lambda x: -np_softplus(-x)),
    "tanh": (F.tanh, np.tanh),
    "hardtanh": (lambda x: F.hardtanh(x, -2, 1.5), lambda x: np.clip(x, -2, 1.5)),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x))),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_values_dtype_and_grad(name):
    ours, ref = ACTIVATIONS[name]
    y = ours(snp.asarray(X))
    assert y.dtype == snp.float32 and y.shape == X.shape
    want = ref(X.astype(np.float64))
    np.testing.assert_allclose(A(y), want, rtol=2e-6, atol=1e-7, err_msg=name)
    smooth = np.array([-2.3, -0.7, 0.4, 1.9])  # away from kinks
    check_grads(ours, (smooth,), order=1)


def test_activation_kinks_and_stability():
    g = starling.grad(lambda x: snp.sum(F.relu(x)))(snp.asarray([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(A(g), [0, 0, 1])  # PyTorch: relu'(0) = 0
    g = starling.grad(lambda x: snp.sum(F.hardtanh(x)))(snp.asarray([-1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(A(g), [0, 1, 0])
    g = starling.grad(lambda x: snp.sum(F.sigmoid(x)))(snp.asarray([-200.0, 0.0, 200.0]))
    np.testing.assert_allclose(A(g), [0, 0.25, 0], atol=1e-30)
    g = starling.grad(lambda x: snp.sum(F.elu(x)))(snp.asarray([100.0, -1.0]))
    assert np.all(np.isfinite(A(g)))
    assert A(F.sigmoid(snp.asarray(-100.0))) > 0  # no underflow to 0 in float32 at -100? e^-100
    assert np.isnan(A(F.relu(snp.asarray(np.nan))))
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(snp.ones(2), "fast")


def test_erf_primitive_accuracy_and_derivative():
    scipy_special = pytest.importorskip("scipy.special")
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, -0.0, np.inf, -np.inf]])
    np.testing.assert_allclose(A(F.erf(snp.asarray(x))), scipy_special.erf(x), rtol=1e-15,
                               atol=1e-300)
    np.testing.assert_allclose(A(F.erfc(snp.asarray(x))), scipy_special.erfc(x), rtol=1e-14)
    assert np.isnan(A(F.erf(snp.asarray(np.nan))))
    x32 = x.astype(np.float32)
    assert F.erf(snp.asarray(x32)).dtype == snp.float32
    np.testing.assert_allclose(A(F.erf(snp.asarray(x32))), scipy_special.erf(x32), rtol=1e-6,
                               atol=1e-7)
    check_grads(F.erf, (np.array([-2.0, -0.3, 0.1, 1.7]),), order=2)
    check_grads(F.erfc, (np.array([-2.0, -0.3, 0.1, 1.7]),), order=2)
    with pytest.raises(TypeError):
        F.erf(snp.asarray([1j]))


def test_softmax_log_softmax_glu(rng):
    x = rng.standard_normal((3, 5)) * 10
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(A(F.softmax(snp.asarray(x), dim=1)), e / e.sum(1, keepdims=True),
                               rtol=1e-12)
    # reference in extended precision, shifted by the max (the plain x - log(sum(exp(x))) in
    # float64 is less accurate than the function under test)
    xl = x.astype(np.longdouble)
    m = xl.max(0, keepdims=True)
    ref = (xl - m) - np.log(np.exp(xl - m).sum(0, keepdims=True))
    np.testing.assert_allclose(A(F.log_softmax(snp.asarray(x), 0)), ref.astype(np.float64),
                               rtol=1e-12)
    big = snp.asarray([[1000.0, 0.0, -np.inf]])
    np.testing.assert_allclose(A(F.softmax(big)), [[1, 0, 0]])
    assert np.all(np.isnan(A(F.softmax(snp.asarray([[-np.inf, -np.inf]])))))
    check_grads(lambda x: F.softmax(x, 0), (x[:, :2] / 10,), order=2)
    a, b = x[:, :2], x[:, 2:4]
    np.testing.assert_allclose(A(F.glu(snp.asarray(x[:, :4]))), a * np_sigmoid(b), rtol=1e-12)
    with pytest.raises(ValueError, match="even"):
        F.glu(snp.asarray(x))


def np_sdpa(q, k, v, mask=None, causal=False, scale=None):
    s = q @ np.swapaxes(k, -1, -2) * (scale or 1 / np.sqrt(q.shape[-1]))
    if causal:
        mask = np.tril(np.ones(s.shape[-2:], bool))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


def test_scaled_dot_product_attention(rng):
    q = rng.standard_normal((2, 3, 4, 8))
    k = rng.standard_normal((2, 3, 6, 8))
    v = rng.standard_normal((2, 3, 6, 5))
    bmask = rng.random((4, 6)) > 0.3
    bmask[:, 0] = True
    fmask = rng.standard_normal((4, 6))
    S = snp.asarray
    for kw, ref in [({}, np_sdpa(q, k, v)), ({"is_causal": True}, np_sdpa(q, k, v, causal=True)),
                    ({"attn_mask": bmask}, np_sdpa(q, k, v, bmask)),
                    ({"attn_mask": fmask, "scale": 0.5}, np_sdpa(q, k, v, fmask, scale=0.5))]:
        out = F.scaled_dot_product_attention(S(q), S(k), S(v), **kw)
        np.testing.assert_allclose(A(out), ref, rtol=1e-10, atol=1e-12, err_msg=str(kw.keys()))
    # grouped-query attention: 3 query heads share 1 key/value head
    out = F.scaled_dot_product_attention(S(q), S(k[:, :1]), S(v[:, :1]), enable_gqa=True)
    np.testing.assert_allclose(A(out), np_sdpa(q, np.repeat(k[:, :1], 3, 1),
                                               np.repeat(v[:, :1], 3, 1)), rtol=1e-10)
    # dropout: reproducible with a key, and the rows of kept weights are rescaled
    d1 = F.scaled_dot_product_attention(S(q), S(k), S(v), dropout_p=0.5,
                                        dropout_key=random.key(0))
    d2 = F.scaled_dot_product_attention(S(q), S(k), S(v), dropout_p=0.5,
                                        dropout_key=random.key(0))
    np.testing.assert_array_equal(A(d1), A(d2))
    with pytest.raises(ValueError, match="either"):
        F.scaled_dot_product_attention(S(q), S(k), S(v), attn_mask=bmask, is_causal=True)
    check_grads(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                (q[0, 0], k[0, 0, :4], v[0, 0, :4]), order=1)


# ---- losses --------------------------------------------------------------------------------------

def np_log_softmax(x, axis):
    return x - np.log(np.sum(np.exp(x - x.max(axis, keepdims=True)), axis, keepdims=True)) - \
        x.max(axis, keepdims=True)


def np_cross_entropy(logits, t, weight=None, ignore_index=-100, reduction="mean", ls=0.0):
    """PyTorch's documented formula, per element, for class-index targets; class dim 1."""
    lp = np_log_softmax(logits, 1)
    C = logits.shape[1]
    w = np.ones(C) if weight is None else weight
    lp = np.moveaxis(lp, 1, -1).reshape(-1, C)
    t = t.reshape(-1)
    keep = t != ignore_index
    ts = np.where(keep, t, 0)
    wt = np.where(keep, w[ts], 0.0)
    nll = -lp[np.arange(len(t)), ts] * wt
    smooth = np.where(keep, -(lp * w).sum(-1), 0.0)
    if reduction == "none":
        return ((1 - ls) * nll + ls / C * smooth).reshape(logits.shape[:1] + logits.shape[2:])
    if reduction == "sum":
        return (1 - ls) * nll.sum() + ls / C * smooth.sum()
    return ((1 - ls) * nll.sum() + ls / C * smooth.sum()) / wt.sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ls", [0.0, 0.2])
def test_cross_entropy_index_targets(reduction, ls, rng):
    logits = rng.standard_normal((6, 4, 3))
    t = rng.integers(0, 4, (6, 3))
    t[0, 1] = t[4, 2] = -100
    w = rng.random(4) + 0.5
    for weight in (None, w):
        got = F.cross_entropy(snp.asarray(logits), snp.asarray(t), None if weight is None
                              else snp.asarray(weight), reduction=reduction, label_smoothing=ls)
        np.testing.assert_allclose(A(got), np_cross_entropy(logits, t, weight, -100, reduction,
                                                            ls), rtol=1e-12)


def test_cross_entropy_probability_targets_and_edges(rng):
    logits = rng.standard_normal((5, 3))
    p = rng.random((5, 3))
    p /= p.sum(1, keepdims=True)
    lp = np_log_softmax(logits, 1)
    got = F.cross_entropy(snp.asarray(logits), snp.asarray(p), label_smoothing=0.1)
    q = p * 0.9 + 0.1 / 3
    np.testing.assert_allclose(A(got), -(q * lp).sum(1).mean(), rtol=1e-12)
    w = np.array([1.0, 2.0, 0.5])
    got = F.cross_entropy(snp.asarray(logits), snp.asarray(p), snp.asarray(w), reduction="sum")
    np.testing.assert_allclose(A(got), -(p * lp * w).sum(), rtol=1e-12)
    # unbatched logits (C,) with a 0-d target
    np.testing.assert_allclose(A(F.cross_entropy(snp.asarray(logits[0]), snp.asarray(2))),
                               -lp[0, 2], rtol=1e-12)
    # every target ignored: mean is 0/0 = NaN, as PyTorch; sum is 0
    t = snp.asarray([-100, -100])
    assert np.isnan(A(F.cross_entropy(snp.asarray(logits[:2]), t)))
    assert A(F.cross_entropy(snp.asarray(logits[:2]), t, reduction="sum")) == 0
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(snp.asarray(logits), snp.asarray([0, 1, 2, 3, 0]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(snp.asarray(logits), snp.asarray([0] * 5), reduction="avg")
    with pytest.raises(ValueError, match="shape"):
        F.cross_entropy(snp.asarray(logits), snp.asarray([0, 1]))
    # gradient of the mean loss: (softmax - onehot) / N
    g = starling.grad(lambda z: F.cross_entropy(z, snp.asarray([0, 1, 2, 0, 1])))(
        snp.asarray(logits))
    sm = np.exp(lp)
    np.testing.assert_allclose(A(g), (sm - np.eye(3)[[0, 1, 2, 0, 1]]) / 5, rtol=1e-10)


def test_regression_and_binary_losses(rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    S = snp.asarray
    d = a - b
    np.testing.assert_allclose(A(F.mse_loss(S(a), S(b))), (d ** 2).mean(), rtol=1e-12)
    np.testing.assert_allclose(A(F.l1_loss(S(a), S(b), "sum")), np.abs(d).sum(), rtol=1e-12)
    sl1 = np.where(np.abs(d) < 0.5, 0.5 * d ** 2 / 0.5, np.abs(d) - 0.25)
    np.testing.assert_allclose(A(F.smooth_l1_loss(S(a), S(b), "none", beta=0.5)), sl1,
                               rtol=1e-12)
    hub = np.where(np.abs(d) <= 0.5, 0.5 * d ** 2, 0.5 * (np.abs(d) - 0.25))
    np.testing.assert_allclose(A(F.huber_loss(S(a), S(b), "none", delta=0.5)), hub, rtol=1e-12)
    np.testing.assert_allclose(A(F.smooth_l1_loss(S(a), S(b), beta=0.0)), np.abs(d).mean())
    y = (rng.random((4, 3)) > 0.5).astype(np.float64)
    pw = np.array([1.0, 2.0, 3.0])
    x = a * 30  # large logits: the stable formula must not overflow
    ref = pw * y * np.logaddexp(0, -x) + (1 - y) * np.logaddexp(0, x)
    got = A(F.binary_cross_entropy_with_logits(S(x), S(y), reduction="none", pos_weight=S(pw)))
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    p = np_sigmoid(a)
    np.testing.assert_allclose(A(F.binary_cross_entropy(S(p), S(y))),
                               (-(y * np.log(p) + (1 - y) * np.log1p(-p))).mean(), rtol=1e-10)
    assert A(F.binary_cross_entropy(S(np.array([0.0])), S(np.array([1.0])))) == 100.0


def test_kl_div_and_nll(rng):
    S = snp.asarray
    lp = np_log_softmax(rng.standard_normal((3, 4)), 1)
    t = np.exp(np_log_softmax(rng.standard_normal((3, 4)), 1))
    t[0, 0] = 0.0
    pointwise = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1)) - lp), 0)
    np.testing.assert_allclose(A(F.kl_div(S(lp), S(t), reduction="batchmean")),
                               pointwise.sum() / 3, rtol=1e-12)
    np.testing.assert_allclose(A(F.kl_div(S(lp), S(t))), pointwise.mean(), rtol=1e-12)
    lt = np.log(t + 1e-3)
    np.testing.assert_allclose(A(F.kl_div(S(lp), S(lt), reduction="sum", log_target=True)),
                               (np.exp(lt) * (lt - lp)).sum(), rtol=1e-12)
    tgt = np.array([1, 3, 0])
    w = np.array([1.0, 0.5, 2.0, 1.5])
    np.testing.assert_allclose(A(F.nll_loss(S(lp), S(tgt), S(w))),
                               -(lp[np.arange(3), tgt] * w[tgt]).sum() / w[tgt].sum())


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's kl_div 'mean' notice
def test_losses_match_torch(rng):
    torch = _torch()
    tF = torch.nn.functional
    T = torch.from_numpy
    S = snp.asarray
    logits = rng.standard_normal((6, 5, 2))
    t = rng.integers(0, 5, (6, 2))
    t[1, 0] = 3
    t[2, 1] = 3
    w = rng.random(5) + 0.1
    for red in ("mean", "sum", "none"):
        for ls in (0.0, 0.3):
            got = F.cross_entropy(S(logits), S(t), S(w), ignore_index=3, reduction=red,
                                  label_smoothing=ls)
            want = tF.cross_entropy(T(logits), T(t), T(w), ignore_index=3, reduction=red,
                                    label_smoothing=ls)
            np.testing.assert_allclose(A(got), want.numpy(), rtol=1e-10, err_msg=f"{red} {ls}")
    allign = np.full((6, 2), 3)
    assert np.isnan(tF.cross_entropy(T(logits), T(allign), ignore_index=3).item())
    assert np.isnan(A(F.cross_entropy(S(logits), S(allign), ignore_index=3)))
    x, y = rng.standard_normal((4, 3)), rng.random((4, 3))
    pw = rng.random(3) + 0.5
    np.testing.assert_allclose(
        A(F.binary_cross_entropy_with_logits(S(x), S(y), S(y), pos_weight=S(pw))),
        tF.binary_cross_entropy_with_logits(T(x), T(y), T(y), pos_weight=T(pw)).numpy(),
        rtol=1e-10)
    for fn, kw in ((F.smooth_l1_loss, {"beta": 0.7}), (F.huber_loss, {"delta": 0.7}),
                   (F.mse_loss, {}), (F.l1_loss, {})):
        tfn = getattr(tF, fn.__name__)
        np.testing.assert_allclose(A(fn(S(x), S(y), **kw)), tfn(T(x), T(y), **kw).numpy(),
                                   rtol=1e-12)
    lp = torch.log_softmax(T(x), 1)
    for red in ("batchmean", "mean"):
        for lt in (False, True):
            tgt = np.log(y) if lt else y
            np.testing.assert_allclose(
                A(F.kl_div(S(lp.numpy()), S(tgt), reduction=red, log_target=lt)),
                tF.kl_div(lp, T(tgt), reduction=red, log_target=lt).numpy(), rtol=1e-10)
    xs = np.linspace(-8, 8, 101).astype(np.float32)
    for name, ours, theirs in (("gelu", F.gelu, tF.gelu), ("silu", F.silu, tF.silu),
                               ("mish", F.mish, tF.mish), ("softplus", F.softplus, tF.softplus),
                               ("sigmoid", F.sigmoid, torch.sigmoid),
                               ("hardswish", F.hardswish, tF.hardswish),
                               ("elu", F.elu, tF.elu), ("selu", F.selu, tF.selu),
                               ("logsigmoid", F.logsigmoid, tF.logsigmoid)):
        np.testing.assert_allclose(A(ours(S(xs))), theirs(T(xs)).numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    np.testing.assert_allclose(A(F.gelu(S(xs), approximate="tanh")),
                               tF.gelu(T(xs), approximate="tanh").numpy(), rtol=1e-5, atol=1e-6)
    q, k, v = (rng.standard_normal((2, 3, 4, 8)).astype(np.float32) for _ in range(3))
    np.testing.assert_allclose(
        A(F.scaled_dot_product_attention(S(q), S(k), S(v), is_causal=True)),
        tF.scaled_dot_product_attention(T(q), T(k), T(v), is_causal=True).numpy(), rtol=1e-5,
        atol=1e-6)


def test_kinks_and_saturated_probabilities_have_finite_gradients():
    import starling
    import starling.numpy as _snp
    from starling.nn import functional as _F
    assert float(starling.grad(_F.elu)(0.0)) == 1.0
    assert float(starling.grad(_F.celu)(0.0)) == 1.0
    f = lambda a: _F.binary_cross_entropy(_F.sigmoid(a), _snp.asarray([0.0, 1.0, 1.0]))  # noqa
    g = np.asarray(starling.grad(f)(_snp.asarray([20.0, -120.0, 3.0])))
    assert np.all(np.isfinite(g)) and g[0] == 0 and g[1] == 0
