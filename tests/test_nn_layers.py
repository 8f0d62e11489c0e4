"""nn layers against NumPy reference implementations written here, gradients against finite
differences, and (when installed) against PyTorch with the same weights."""
from __future__ import annotations

import math

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import nn, random
from starling.nn import functional as F
from starling.test_util import check_grads


def A(x):
    return np.asarray(x)


def _torch():
    return pytest.importorskip("torch")


def _load_into_torch(torch, tmod, mod):
    sd = {k: torch.from_numpy(np.array(v)) for k, v in mod.state_dict().items()}
    tmod.load_state_dict(sd)
    return tmod


# ---- NumPy references ----------------------------------------------------------------------------

def np_conv(x, w, b, stride, pad, dil, groups):
    """Direct-loop cross-correlation (N, C, *sp) x (O, C/g, *k); ``pad`` a list of (lo, hi)."""
    nd = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + list(pad))
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [(x.shape[2 + i] - dil[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    y = np.zeros((n, o) + tuple(outs), np.float64)
    og = o // groups
    for idx in np.ndindex(*outs):
        for oc in range(o):
            g = oc // og
            acc = np.zeros(n)
            for kidx in np.ndindex(*ks):
                pos = tuple(idx[i] * stride[i] + kidx[i] * dil[i] for i in range(nd))
                patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + pos]  # (n, cg)
                acc += patch @ w[(oc, slice(None)) + kidx]
            y[(slice(None), oc) + idx] = acc + (0 if b is None else b[oc])
    return y


def np_pool(x, k, s, p, mode, ceil_mode=False, count_include_pad=True, dil=(1, 1)):
    h, w = x.shape[-2:]
    outs = []
    for L, kk, ss, pp, dd in zip((h, w), k, s, p, dil):
        span = L + 2 * pp - dd * (kk - 1) - 1
        o = (-(-span // ss) if ceil_mode else span // ss) + 1
        if ceil_mode and (o - 1) * ss >= L + pp:
            o -= 1
        outs.append(o)
    y = np.zeros(x.shape[:-2] + tuple(outs))
    for i, j in np.ndindex(*outs):
        rows = [i * s[0] - p[0] + a * dil[0] for a in range(k[0])]
        cols = [j * s[1] - p[1] + a * dil[1] for a in range(k[1])]
        if mode == "max":
            vals = [x[..., r, c] for r in rows for c in cols if 0 <= r < h and 0 <= c < w]
            y[..., i, j] = np.max(np.stack(vals, -1), -1)
        else:
            vals = [x[..., r, c] for r in rows for c in cols if 0 <= r < h and 0 <= c < w]
            tot = np.sum(np.stack(vals, -1), -1)
            if count_include_pad:
                r0, c0 = i * s[0] - p[0], j * s[1] - p[1]
                cnt = ((min(r0 + k[0], h + p[0]) - r0) * (min(c0 + k[1], w + p[1]) - c0))
            else:
                cnt = len(vals)
            y[..., i, j] = tot / cnt
    return y


# ---- Linear / Bilinear / Embedding ---------------------------------------------------------------

def test_linear_matches_numpy_and_init_bounds(rng):
    m = nn.Linear(5, 7, key=random.key(1))
    assert m.weight.shape == (7, 5) and m.bias.shape == (7,)
    bound = 1 / math.sqrt(5)
    assert np.all(np.abs(A(m.weight)) <= bound) and np.all(np.abs(A(m.bias)) <= bound)
    assert np.std(A(nn.Linear(400, 300, key=0).weight)) == pytest.approx(1 / math.sqrt(3 * 400),
                                                                         rel=0.05)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(A(m(snp.asarray(x))), x @ A(m.weight).T + A(m.bias), rtol=1e-5,
                               atol=1e-6)
    assert nn.Linear(5, 7, bias=False, key=0).bias is None
    # same key, same weights; different key, different weights
    assert np.array_equal(A(nn.Linear(5, 7, key=3).weight), A(nn.Linear(5, 7, key=3).weight))
    assert not np.array_equal(A(nn.Linear(5, 7, key=3).weight), A(nn.Linear(5, 7, key=4).weight))
    with pytest.raises(TypeError, match="explicit PRNG key"):
        nn.Linear(5, 7)


def test_linear_grads_finite_differences(rng):
    x = rng.standard_normal((3, 4))
    w = rng.standard_normal((2, 4))
    b = rng.standard_normal(2)
    check_grads(lambda x, w, b: F.linear(x, w, b), (x, w, b), order=1)


def test_bilinear(rng):
    m = nn.Bilinear(3, 4, 2, key=0)
    x1 = rng.standard_normal((5, 3)).astype(np.float32)
    x2 = rng.standard_normal((5, 4)).astype(np.float32)
    ref = np.einsum("ni,oij,nj->no", x1, A(m.weight), x2) + A(m.bias)
    np.testing.assert_allclose(A(m(snp.asarray(x1), snp.asarray(x2))), ref, rtol=1e-5, atol=1e-5)
    assert np.all(np.abs(A(m.weight)) <= 1 / math.sqrt(3))


def test_embedding_and_padding_idx_gradient(rng):
    m = nn.Embedding(6, 3, padding_idx=2, key=0)
    w = A(m.weight)
    assert np.all(w[2] == 0)
    idx = np.array([[0, 2, 5], [2, 2, 1]])
    np.testing.assert_array_equal(A(m(snp.asarray(idx))), w[idx])
    g = nn.grad(lambda mm: snp.sum(mm(snp.asarray(idx)) ** 2 + mm(snp.asarray(idx))))(m)
    gw = A(g["weight"])
    assert np.all(gw[2] == 0)  # the padding row gets no gradient
    ref = np.zeros_like(w)
    np.add.at(ref, idx, 2 * w[idx] + 1)
    ref[2] = 0
    np.testing.assert_allclose(gw, ref, rtol=1e-6)
    with pytest.raises(TypeError, match="integers"):
        m(snp.asarray([0.5]))
    e = nn.Embedding.from_pretrained(np.eye(3, dtype=np.float32))
    assert nn.trainable_parameters(e) == {}


# ---- convolution and pooling ---------------------------------------------------------------------

CONV_CASES = [
    dict(stride=1, padding=0, dilation=1, groups=1),
    dict(stride=2, padding=1, dilation=1, groups=1),
    dict(stride=(1, 2), padding=(2, 0), dilation=(2, 1), groups=1),
    dict(stride=1, padding="same", dilation=2, groups=2),
    dict(stride=1, padding="valid", dilation=1, groups=4),
]


@pytest.mark.parametrize("cfg", CONV_CASES)
def test_conv2d_matches_numpy(cfg, rng):
    m = nn.Conv2d(4, 6 if cfg["groups"] != 4 else 8, (3, 2), key=0, **cfg)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    nd = 2
    k = m.kernel_size
    dil = m.dilation
    if cfg["padding"] == "same":
        pad = [(d * (kk - 1) // 2, d * (kk - 1) - d * (kk - 1) // 2) for kk, d in zip(k, dil)]
    elif cfg["padding"] == "valid":
        pad = [(0, 0)] * nd
    else:
        pad = [(p, p) for p in m.padding]
    ref = np_conv(x.astype(np.float64), A(m.weight).astype(np.float64), A(m.bias), m.stride,
                  pad, dil, m.groups)
    out = A(m(snp.asarray(x)))
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    if cfg["padding"] == "same":
        assert out.shape[2:] == x.shape[2:]


def test_conv1d_and_unbatched(rng):
    m = nn.Conv1d(3, 5, 4, stride=2, padding=1, key=1)
    x = rng.standard_normal((2, 3, 11)).astype(np.float32)
    ref = np_conv(x, A(m.weight), A(m.bias), (2,), [(1, 1)], (1,), 1)
    np.testing.assert_allclose(A(m(snp.asarray(x))), ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(m(snp.asarray(x[0]))), ref[0], rtol=1e-4, atol=1e-5)
    bound = 1 / math.sqrt(3 * 4)
    assert np.all(np.abs(A(m.weight)) <= bound) and np.all(np.abs(A(m.bias)) <= bound)


def test_conv_grads_and_vmap(rng):
    x = rng.standard_normal((1, 2, 5, 4))
    w = rng.standard_normal((4, 1, 2, 3))
    b = rng.standard_normal(4)
    check_grads(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2),
                (x, w, b), order=1)
    xs = snp.asarray(rng.standard_normal((3, 2, 5, 4)))
    out = starling.vmap(lambda xi: F.conv2d(xi, snp.asarray(w), None, groups=2))(xs)
    np.testing.assert_allclose(A(out), A(F.conv2d(xs, snp.asarray(w), None, groups=2)),
                               rtol=1e-12)


def test_conv_errors():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2, key=0)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(2, 2, 3, stride=2, padding="same", key=0)
    m = nn.Conv2d(2, 2, 3, key=0)
    with pytest.raises(ValueError, match="does not match|do not match"):
        m(snp.ones((1, 3, 5, 5)))
    with pytest.raises(ValueError, match="larger than"):
        m(snp.ones((1, 2, 2, 2)))


def test_conv_padding_modes(rng):
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    for mode, npmode in (("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")):
        m = nn.Conv2d(2, 3, 3, padding=1, padding_mode=mode, key=0)
        xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], mode=npmode)
        ref = np_conv(xp, A(m.weight), A(m.bias), (1, 1), [(0, 0), (0, 0)], (1, 1), 1)
        np.testing.assert_allclose(A(m(snp.asarray(x))), ref, rtol=1e-4, atol=1e-5)


POOL_CASES = [
    dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(2, 1), ceil_mode=True), dict(kernel_size=3, stride=2,
                                                                  ceil_mode=True, padding=1),
]


@pytest.mark.parametrize("cfg", POOL_CASES)
def test_pools_match_numpy(cfg, rng):
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    k = cfg["kernel_size"]
    k = (k, k) if isinstance(k, int) else k
    s = cfg.get("stride", k)
    s = (s, s) if isinstance(s, int) else s
    p = cfg.get("padding", 0)
    p = (p, p) if isinstance(p, int) else p
    cm = cfg.get("ceil_mode", False)
    np.testing.assert_allclose(A(nn.MaxPool2d(**cfg)(snp.asarray(x))),
                               np_pool(x, k, s, p, "max", cm), rtol=1e-6)
    np.testing.assert_allclose(A(nn.AvgPool2d(**cfg)(snp.asarray(x))),
                               np_pool(x, k, s, p, "avg", cm), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(A(nn.AvgPool2d(**cfg, count_include_pad=False)(snp.asarray(x))),
                               np_pool(x, k, s, p, "avg", cm, False), rtol=1e-5, atol=1e-6)


def test_maxpool_dilation_1d_and_grad(rng):
    x = rng.standard_normal((1, 2, 8, 8)).astype(np.float32)
    out = A(F.max_pool2d(snp.asarray(x), 2, 2, dilation=2))
    np.testing.assert_allclose(out, np_pool(x, (2, 2), (2, 2), (0, 0), "max", dil=(2, 2)))
    x1 = rng.standard_normal((2, 9))
    np.testing.assert_allclose(A(F.max_pool1d(snp.asarray(x1), 3)),
                               x1.reshape(2, 3, 3).max(-1))
    np.testing.assert_allclose(A(F.avg_pool1d(snp.asarray(x1), 3)),
                               x1.reshape(2, 3, 3).mean(-1))
    check_grads(lambda x: F.avg_pool2d(x, 2, 1, padding=1), (rng.standard_normal((1, 5, 5)),),
                order=1)
    g = A(starling.grad(lambda x: snp.sum(F.max_pool2d(x, 2)))(snp.asarray(x)))
    ref = (x.reshape(1, 2, 4, 2, 4, 2).max((3, 5), keepdims=True) ==
           x.reshape(1, 2, 4, 2, 4, 2)).reshape(x.shape)
    np.testing.assert_array_equal(g, ref.astype(np.float32))


# ---- normalisation -------------------------------------------------------------------------------

def test_layernorm_rmsnorm_groupnorm(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    ln = nn.LayerNorm((3, 4))
    ln.weight = snp.asarray(rng.standard_normal((3, 4)).astype(np.float32))
    ln.bias = snp.asarray(rng.standard_normal((3, 4)).astype(np.float32))
    mu = x.mean((1, 2), keepdims=True)
    var = x.var((1, 2), keepdims=True)
    ref = (x - mu) / np.sqrt(var + 1e-5) * A(ln.weight) + A(ln.bias)
    np.testing.assert_allclose(A(ln(snp.asarray(x))), ref, rtol=1e-4, atol=1e-5)
    rms = nn.RMSNorm(4)
    ref = x / np.sqrt((x * x).mean(-1, keepdims=True) + np.finfo(np.float32).eps)
    np.testing.assert_allclose(A(rms(snp.asarray(x))), ref, rtol=1e-5, atol=1e-6)
    gn = nn.GroupNorm(1, 3)
    xg = x.reshape(2, 3, 4)
    ref = (xg - xg.mean((1, 2), keepdims=True)) / np.sqrt(xg.var((1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(A(gn(snp.asarray(xg))), ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="normalized_shape"):
        ln(snp.ones((2, 4, 3)))
    check_grads(lambda x, w, b: F.layer_norm(x, 3, w, b), (rng.standard_normal((2, 3)),
                rng.standard_normal(3), rng.standard_normal(3)), order=1)


def test_batchnorm_train_eval_and_running_stats(rng):
    bn = nn.BatchNorm2d(3, momentum=0.2)
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32) * 2 + 1
    y = A(bn(snp.asarray(x)))  # eager training call: running stats rebound in place
    mu = x.mean((0, 2, 3))
    var = x.var((0, 2, 3))
    ref = (x - mu[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    n = x.size / 3
    np.testing.assert_allclose(A(bn.running_mean), 0.2 * mu, rtol=1e-5)
    np.testing.assert_allclose(A(bn.running_var), 0.8 + 0.2 * var * n / (n - 1), rtol=1e-5)
    assert int(bn.num_batches_tracked) == 1
    bn.eval()
    y2 = A(bn(snp.asarray(x)))
    ref2 = (x - A(bn.running_mean)[None, :, None, None]) / np.sqrt(
        A(bn.running_var)[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(y2, ref2, rtol=1e-4, atol=1e-5)
    # cumulative average with momentum=None
    bn1 = nn.BatchNorm1d(2, momentum=None)
    xs = [rng.standard_normal((5, 2)).astype(np.float32) for _ in range(3)]
    for xb in xs:
        bn1(snp.asarray(xb))
    np.testing.assert_allclose(A(bn1.running_mean), np.mean([xb.mean(0) for xb in xs], 0),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="more than 1 value"):
        nn.BatchNorm1d(2)(snp.ones((1, 2)))
    with pytest.raises(ValueError, match="expected"):
        nn.BatchNorm2d(2)(snp.ones((3, 2)))


def test_batchnorm_threaded_under_compile_and_grad(rng):
    bn = nn.BatchNorm1d(3)
    x = snp.asarray(rng.standard_normal((6, 3, 4)).astype(np.float32))
    with pytest.raises(nn.ModuleMutationError, match="stateful_call"):
        starling.grad(lambda m: snp.sum(m(x)), allow_int=True)(bn)
    out, bn2 = starling.compile(nn.stateful_call)(bn, x)
    assert int(bn.num_batches_tracked) == 0 and int(bn2.num_batches_tracked) == 1
    ref_out, bn_e = nn.stateful_call(bn, x)
    # independent reference: the batch statistics in float64 (the compiled kernel accumulates
    # in double, eager NumPy in float32: outputs near 0 differ relatively by ~1e-5)
    xd = A(x).astype(np.float64)
    mean, var = xd.mean(axis=(0, 2), keepdims=True), xd.var(axis=(0, 2), keepdims=True)
    exact = (xd - mean) / np.sqrt(var + bn.eps)
    for got in (out, ref_out):
        np.testing.assert_allclose(A(got), exact, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(A(bn2.running_var), A(bn_e.running_var), rtol=1e-6)

    def loss(m, x):
        return snp.mean(m(x) ** 2 * snp.arange(4.0))
    step = starling.compile(nn.value_and_grad(loss, return_module=True))
    value, grads, bn3 = step(bn, x)
    assert set(grads) == {"weight", "bias"}
    np.testing.assert_allclose(A(bn3.running_mean), A(bn2.running_mean), rtol=1e-6)
    with pytest.raises(nn.ModuleMutationError, match="return_module"):
        starling.compile(nn.value_and_grad(loss))(bn, x)
    # eagerly, nn.value_and_grad writes the statistics back like PyTorch's forward
    nn.value_and_grad(loss)(bn, x)
    assert int(bn.num_batches_tracked) == 1


def test_dropout_explicit_key(rng):
    d = nn.Dropout(0.25)
    x = snp.ones((200, 50))
    k = random.key(0)
    y = A(d(x, key=k))
    assert set(np.unique(y).tolist()) <= {0.0, float(np.float32(1 / 0.75))}
    assert abs((y == 0).mean() - 0.25) < 0.02
    np.testing.assert_array_equal(y, A(d(x, key=k)))
    assert not np.array_equal(y, A(d(x, key=random.key(1))))
    with pytest.raises(TypeError, match="PRNG key"):
        d(x)
    np.testing.assert_array_equal(A(d.eval()(x)), A(x))
    assert np.all(A(F.dropout(x, 1.0, key=k)) == 0)
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


def np_mha(q, k, v, m, kpm=None, mask=None):
    """Reference MHA on (L, N, E) inputs with PyTorch's parameter layout."""
    E, H = m.embed_dim, m.num_heads
    D = E // H
    W, b = A(m.in_proj_weight), A(m.in_proj_bias)
    qp, kp, vp = q @ W[:E].T + b[:E], k @ W[E:2 * E].T + b[E:2 * E], v @ W[2 * E:].T + b[2 * E:]
    L, N, _ = q.shape
    S = k.shape[0]

    def heads(t, n):
        return t.reshape(n, N, H, D).transpose(1, 2, 0, 3)
    s = heads(qp, L) @ heads(kp, S).transpose(0, 1, 3, 2) / np.sqrt(D)
    if mask is not None:
        s = np.where(mask, -np.inf, s)
    if kpm is not None:
        s = np.where(kpm[:, None, None, :], -np.inf, s)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    o = (w @ heads(vp, S)).transpose(2, 0, 1, 3).reshape(L, N, E)
    return o @ A(m.out_proj.weight).T + A(m.out_proj.bias), w.mean(1)


def test_multihead_attention_matches_numpy(rng):
    m = nn.MultiheadAttention(8, 2, key=0)
    q = rng.standard_normal((4, 3, 8)).astype(np.float32)
    kv = rng.standard_normal((5, 3, 8)).astype(np.float32)
    kpm = np.zeros((3, 5), bool)
    kpm[1, 3:] = True
    mask = np.triu(np.ones((4, 5), bool), 2)
    out, w = m(snp.asarray(q), snp.asarray(kv), snp.asarray(kv), key_padding_mask=kpm,
               attn_mask=mask)
    ref_o, ref_w = np_mha(q, kv, kv, m, kpm, mask)
    np.testing.assert_allclose(A(out), ref_o, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(w), ref_w, rtol=1e-4, atol=1e-6)
    mb = nn.MultiheadAttention(8, 2, batch_first=True, key=0)
    out_b, _ = mb(snp.asarray(q.transpose(1, 0, 2)), snp.asarray(kv.transpose(1, 0, 2)),
                  snp.asarray(kv.transpose(1, 0, 2)))
    ref_o, _ = np_mha(q, kv, kv, m)
    np.testing.assert_allclose(A(out_b), ref_o.transpose(1, 0, 2), rtol=1e-4, atol=1e-5)
    out_u, _ = m(snp.asarray(q[:, 0]), snp.asarray(kv[:, 0]), snp.asarray(kv[:, 0]))
    np.testing.assert_allclose(A(out_u), ref_o[:, 0], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="multiple"):
        nn.MultiheadAttention(6, 4, key=0)


# ---- against PyTorch -----------------------------------------------------------------------------

def test_layers_match_torch(rng):
    torch = _torch()
    tnn = torch.nn
    x2 = rng.standard_normal((3, 4, 9, 8)).astype(np.float32)
    cases = [
        (nn.Linear(8, 5, key=0), tnn.Linear(8, 5), x2),
        (nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=1, groups=2, key=1),
         tnn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), x2),
        (nn.Conv2d(4, 4, (3, 2), padding="same", dilation=(1, 2), key=2),
         tnn.Conv2d(4, 4, (3, 2), padding="same", dilation=(1, 2)), x2),
        (nn.Conv1d(4, 3, 3, padding=2, padding_mode="circular", key=3),
         tnn.Conv1d(4, 3, 3, padding=2, padding_mode="circular"), x2[:, :, 0]),
        (nn.MaxPool2d(3, 2, 1, ceil_mode=True), tnn.MaxPool2d(3, 2, 1, ceil_mode=True), x2),
        (nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
         tnn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), x2),
        (nn.LayerNorm(8), tnn.LayerNorm(8), x2),
        (nn.RMSNorm([9, 8]), tnn.RMSNorm([9, 8]), x2),
        (nn.GroupNorm(2, 4), tnn.GroupNorm(2, 4), x2),
        (nn.BatchNorm2d(4), tnn.BatchNorm2d(4), x2),
        (nn.Embedding(10, 3, padding_idx=1, key=4), tnn.Embedding(10, 3, padding_idx=1),
         rng.integers(0, 10, (4, 5))),
    ]
    for ours, theirs, x in cases:
        if ours.state_dict():
            _load_into_torch(torch, theirs, ours)
        got = A(ours(snp.asarray(x)))
        want = theirs(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=repr(ours))
        for k, v in ours.state_dict().items():  # running statistics follow torch's updates
            np.testing.assert_allclose(A(v), theirs.state_dict()[k].numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=k)


def test_conv_and_layernorm_gradients_match_torch(rng):
    torch = _torch()
    ours = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, key=0), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.LayerNorm(12), nn.Linear(12, 4, key=1))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.ReLU(),
                                 torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                 torch.nn.LayerNorm(12), torch.nn.Linear(12, 4))
    _load_into_torch(torch, theirs, ours)
    x = rng.standard_normal((5, 2, 4, 4)).astype(np.float32)
    y = rng.integers(0, 4, 5)
    loss, grads = nn.value_and_grad(lambda m: F.cross_entropy(m(snp.asarray(x)),
                                                              snp.asarray(y)))(ours)
    tl = torch.nn.functional.cross_entropy(theirs(torch.from_numpy(x)), torch.from_numpy(y))
    tl.backward()
    assert float(loss) == pytest.approx(tl.item(), rel=1e-5)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(A(grads[name]), p.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_multihead_attention_matches_torch(rng):
    torch = _torch()
    for kw in (dict(), dict(add_bias_kv=True, add_zero_attn=True), dict(kdim=6, vdim=5),
               dict(batch_first=True, bias=False)):
        ours = nn.MultiheadAttention(8, 4, key=0, **kw)
        theirs = torch.nn.MultiheadAttention(8, 4, **kw)
        _load_into_torch(torch, theirs, ours)
        theirs.eval()
        bf = kw.get("batch_first", False)
        shape = (2, 5) if bf else (5, 2)
        q = rng.standard_normal(shape + (8,)).astype(np.float32)
        k = rng.standard_normal((2, 6) if bf else (6, 2)).astype(np.float32)
        k = rng.standard_normal(k.shape + (kw.get("kdim", 8),)).astype(np.float32)
        v = rng.standard_normal(k.shape[:2] + (kw.get("vdim", 8),)).astype(np.float32)
        mask = rng.standard_normal((5, 6)).astype(np.float32)
        kpm = np.zeros((2, 6), np.float32)
        kpm[0, -2:] = -np.inf
        for aw in (True, False):
            o, w = ours(snp.asarray(q), snp.asarray(k), snp.asarray(v), key_padding_mask=kpm,
                        attn_mask=mask, average_attn_weights=aw)
            to, tw = theirs(*(torch.from_numpy(t) for t in (q, k, v)),
                            key_padding_mask=torch.from_numpy(kpm),
                            attn_mask=torch.from_numpy(mask), average_attn_weights=aw)
            np.testing.assert_allclose(A(o), to.detach().numpy(), rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(A(w), tw.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_batchnorm_applied_twice_updates_running_stats_twice():
    from starling import nn as _nn
    import starling.numpy as _snp

    class Siamese(_nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = _nn.BatchNorm1d(3)

        def forward(self, a, b):
            return self.bn(a) + self.bn(b)

    rng = np.random.default_rng(0)
    a = _snp.asarray(rng.normal(size=(4, 3)).astype(np.float32))
    b = _snp.asarray(rng.normal(size=(4, 3)).astype(np.float32))
    collected = _nn.value_and_grad(lambda m: _snp.sum(m(a, b)), return_module=True)(Siamese())[-1]
    eager = Siamese()
    eager(a, b)
    assert int(collected.bn.num_batches_tracked) == 2
    np.testing.assert_array_equal(np.asarray(collected.bn.running_mean),
                                  np.asarray(eager.bn.running_mean))
