"""linear_cross_entropy / LinearCrossEntropyLoss against a float64 NumPy reference and the
unfused ``cross_entropy(hidden @ weight.T + bias, target)``: values, gradients, tangents, second
derivatives, every option, chunkings that do not divide, transformations and errors."""
from __future__ import annotations

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import nn
from starling.nn import functional as F
from starling.test_util import check_grads

LCE = F.linear_cross_entropy
T, H, V = 7, 5, 11
CHUNKS = [None, 3, (2, 4), (1, 1), (3, 8)]   # (3, 8): one full vocabulary block + 3


def _np_loss(h, w, b, target, *, ignore_index=-100, reduction="mean", label_smoothing=0.0,
             z_loss=0.0):
    """Brute force in float64 from the definition (PyTorch's cross entropy + PaLM's z-loss)."""
    h, w = np.asarray(h, np.float64), np.asarray(w, np.float64)
    z = h @ w.T + (0.0 if b is None else np.asarray(b, np.float64))
    m = z.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(z - m).sum(-1, keepdims=True)))[..., 0]
    logp = z - lse[..., None]
    target = np.asarray(target)
    eps, n = label_smoothing, w.shape[0]
    if target.dtype.kind == "f":
        q = target * (1 - eps) + eps / n
        keep = np.ones(lse.shape, bool)
    else:
        keep = target != ignore_index
        q = np.eye(n)[np.where(keep, target, 0)] * (1 - eps) + eps / n
    loss = np.where(keep, -(q * logp).sum(-1) + z_loss * lse ** 2, 0.0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / keep.sum()


def _unfused(h, w, b, target, z_loss=0.0, **kw):
    z = h @ w.T if b is None else h @ w.T + b
    zc = snp.moveaxis(z, -1, 1) if z.ndim > 2 else z
    tc = snp.moveaxis(target, -1, 1) if target.ndim > 2 else target
    loss = F.cross_entropy(zc, tc, **kw)
    if not z_loss:
        return loss
    lse = snp.log(snp.sum(snp.exp(z), axis=-1))
    if snp.isdtype(target.dtype, "integral"):
        lse = snp.where(target != kw.get("ignore_index", -100), lse, 0.0)
    zl = z_loss * lse * lse
    red = kw.get("reduction", "mean")
    if red == "none":
        return loss + zl
    if red == "sum":
        return loss + snp.sum(zl)
    if snp.isdtype(target.dtype, "integral"):
        return loss + snp.sum(zl) / snp.sum(target != kw.get("ignore_index", -100))
    return loss + snp.mean(zl)


def _data(tokens=(T,), hid=H, voc=V, dtype=np.float32, seed=0, ignored=(1, 4), scale=1.0):
    rng = np.random.default_rng(seed)
    h = (rng.normal(size=tokens + (hid,)) * scale).astype(dtype)
    w = rng.normal(size=(voc, hid)).astype(dtype)
    b = rng.normal(size=(voc,)).astype(dtype)
    t = rng.integers(0, voc, size=tokens)
    flat = t.reshape(-1)
    for i in ignored:
        if i < flat.size:
            flat[i] = -100
    return snp.asarray(h), snp.asarray(w), snp.asarray(b), snp.asarray(t)


def _close(a, b, rtol=2e-5, atol=2e-6):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol,
                               atol=atol, equal_nan=True)


def _scalar(reduction):
    """The loss as a scalar (a fixed non-uniform cotangent for "none")."""
    if reduction != "none":
        return lambda x: x
    return lambda x: snp.sum(snp.sin(x) * (1.0 + snp.arange(x.size).reshape(x.shape) * 0.1))


OPTIONS = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(label_smoothing=0.2),
           dict(z_loss=1e-2), dict(reduction="none", label_smoothing=0.3, z_loss=0.05),
           dict(reduction="sum", label_smoothing=1.0, ignore_index=3)]


@pytest.mark.parametrize("opts", OPTIONS)
@pytest.mark.parametrize("chunk", CHUNKS)
def test_value_and_grad_match_reference(opts, chunk):
    h, w, b, t = _data()
    t = snp.where(t == -100, opts.get("ignore_index", -100), t)
    out = LCE(h, w, t, b, chunk_size=chunk, **opts)
    _close(out, _np_loss(h, w, b, t, **opts))
    red = _scalar(opts.get("reduction", "mean"))
    g = st.grad(lambda h, w, b: red(LCE(h, w, t, b, chunk_size=chunk, **opts)),
                argnums=(0, 1, 2))(h, w, b)
    g_ref = st.grad(lambda h, w, b: red(_unfused(h, w, b, t, **opts)), argnums=(0, 1, 2))(h, w, b)
    for x, y in zip(g, g_ref):
        _close(x, y)


@pytest.mark.parametrize("opts", OPTIONS[:3] + OPTIONS[5:6])
def test_jvp_matches_unfused(opts):
    # PyTorch's fused loss returns zero tangents in forward mode; ours must be the true one.
    h, w, b, t = _data(seed=1)
    dh, dw, db = _data(seed=2)[:3]
    f = lambda h, w, b: LCE(h, w, t, b, chunk_size=(3, 4), **opts)  # noqa: E731
    g = lambda h, w, b: _unfused(h, w, b, t, **opts)  # noqa: E731
    out, tan = st.jvp(f, (h, w, b), (dh, dw, db))
    out_r, tan_r = st.jvp(g, (h, w, b), (dh, dw, db))
    _close(out, out_r)
    _close(tan, tan_r)
    assert np.abs(np.asarray(tan)).max() > 1e-3


@pytest.mark.parametrize("opts,chunk", [(dict(), (3, 4)), (dict(reduction="none"), (2, 5)),
                                        (dict(label_smoothing=0.1, z_loss=0.1), None)])
def test_second_order(opts, chunk):
    h, w, b, t = _data(tokens=(4,), hid=3, voc=6, dtype=np.float64, ignored=(2,))
    red = _scalar(opts.get("reduction", "mean"))
    check_grads(lambda h, w, b: red(LCE(h, w, t, b, chunk_size=chunk, **opts)), (h, w, b),
                order=2, modes=("fwd", "rev"))
    hess = st.hessian(lambda w: red(LCE(h, w, t, b, chunk_size=chunk, **opts)))(w)
    hess_r = st.hessian(lambda w: red(_unfused(h, w, b, t, **opts)))(w)
    _close(hess, hess_r, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("opts", [dict(), dict(reduction="none"),
                                  dict(reduction="sum", label_smoothing=0.25, z_loss=0.1)])
@pytest.mark.parametrize("chunk", [None, (4, 4)])   # 6 tokens: the last chunk is padded
def test_probability_targets(opts, chunk):
    h, w, b, _ = _data(tokens=(2, 3))
    rng = np.random.default_rng(5)
    q = rng.random((2, 3, V)).astype(np.float32)
    q[0, 1] = 0.0                                     # an all-zero row
    q[1] /= q[1].sum(-1, keepdims=True)
    q = snp.asarray(q)
    _close(LCE(h, w, q, b, chunk_size=chunk, **opts), _np_loss(h, w, b, q, **opts))
    red = _scalar(opts.get("reduction", "mean"))
    g = st.grad(lambda h, w, b: red(LCE(h, w, q, b, chunk_size=chunk, **opts)),
                argnums=(0, 1, 2))(h, w, b)
    g_ref = st.grad(lambda h, w, b: red(_unfused(h, w, b, q, **opts)), argnums=(0, 1, 2))(h, w, b)
    for x, y in zip(g, g_ref):
        _close(x, y, atol=1e-5)   # both are ~3e-6 from float64 here (sums over V of O(1) terms)
    # the targets are differentiable too (their gradient is (tokens, V), as unfused)
    gq = st.grad(lambda q, h: red(LCE(h, w, q, b, chunk_size=chunk, **opts)), argnums=(0, 1))
    gq_ref = st.grad(lambda q, h: red(_unfused(h, w, b, q, **opts)), argnums=(0, 1))
    for x, y in zip(gq(q, h), gq_ref(q, h)):
        _close(x, y)
    dq = snp.asarray(rng.normal(size=q.shape).astype(np.float32))
    _close(st.jvp(lambda q: LCE(h, w, q, b, chunk_size=chunk, **opts), (q,), (dq,))[1],
           st.jvp(lambda q: _unfused(h, w, b, q, **opts), (q,), (dq,))[1])


def test_no_bias_multidim_tokens_and_module():
    h, w, _, t = _data(tokens=(2, 3, 2), ignored=(0, 7))
    mod = nn.LinearCrossEntropyLoss(reduction="none", chunk_size=5)
    out = mod(h, w, t)
    assert out.shape == (2, 3, 2)
    _close(out, _np_loss(h, w, None, t, reduction="none"))
    _close(nn.LinearCrossEntropyLoss()(h, w, t), _np_loss(h, w, None, t))
    assert "chunk_size=5" in repr(mod)


def test_all_ignored_and_empty_match_cross_entropy():
    h, w, b, t = _data(tokens=(4,), ignored=range(4))
    for red in ("mean", "sum", "none"):
        _close(LCE(h, w, t, b, reduction=red), _unfused(h, w, b, t, reduction=red))
    assert np.isnan(float(LCE(h, w, t, b)))
    g = st.grad(lambda h: LCE(h, w, t, b, reduction="sum"))(h)
    assert np.all(np.asarray(g) == 0)
    g, g_r = (st.grad(lambda h: fn(h, w, b, t))(h) for fn in
              (lambda h, w, b, t: LCE(h, w, t, b), _unfused))
    _close(g, g_r)                                    # both NaN (0 / 0), as cross_entropy
    for tokens in [(0,), (2, 0)]:
        h, w, b, t = _data(tokens=tokens)
        assert np.isnan(float(LCE(h, w, t, b)))
        assert float(LCE(h, w, t, b, reduction="sum")) == 0.0
        assert LCE(h, w, t, b, reduction="none").shape == tokens
        gh, gw, gb = st.grad(lambda h, w, b: LCE(h, w, t, b, reduction="sum"),
                             argnums=(0, 1, 2))(h, w, b)
        assert gh.shape == h.shape and np.all(np.asarray(gw) == 0) and gb.shape == (V,)


def test_hard_inputs():
    # confident rows (loss ~ 1e-30: log1p keeps it), ties across vocabulary blocks (duplicated
    # weight rows), huge logits (no overflow), and a NaN row that stays in its row
    h, w, b, t = _data(tokens=(6,), ignored=())
    w = snp.concatenate([w[:5], w[:5], w[10:]], axis=0)  # rows 0-4 == rows 5-9
    big = snp.asarray(np.float32(80.0)) * h
    for chunk in [None, (2, 3), (6, 5)]:
        for hh in (h, big):
            _close(LCE(hh, w, t, b, chunk_size=chunk, reduction="none"),
                   _np_loss(hh, w, b, t, reduction="none"), rtol=1e-5, atol=1e-5)
    conf = snp.zeros((1, 2), snp.float32)
    wc = snp.asarray(np.array([[70.0, 0], [0, 0]], np.float32))
    bc = snp.asarray(np.array([0.0, 0.0], np.float32))
    out = LCE(conf + 1.0, wc, snp.asarray([0]), bc, reduction="none", chunk_size=(1, 1))
    _close(out, [np.log1p(np.exp(-70.0))], rtol=1e-5, atol=0)
    hn = h.at[2, 0].set(np.nan)
    out = np.asarray(LCE(hn, w, t, b, reduction="none", chunk_size=(4, 3)))
    assert np.isnan(out[2]) and np.all(np.isfinite(np.delete(out, 2)))


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), ("bfloat16", 3e-2)])
def test_dtypes(dtype, rtol):
    h, w, b, t = _data(dtype=np.float32)
    cast = (lambda x: x.astype(snp.bfloat16)) if dtype == "bfloat16" else (
        lambda x: x.astype(snp.float64))
    hl, wl, bl = cast(h), cast(w), cast(b)
    out = LCE(hl, wl, t, bl, chunk_size=(3, 4), z_loss=0.01)
    assert out.dtype == hl.dtype
    _close(out, _np_loss(hl, wl, bl, t, z_loss=0.01), rtol=rtol, atol=rtol)
    g = st.grad(lambda h, w: LCE(h, w, t, bl, chunk_size=(3, 4)), argnums=(0, 1))(hl, wl)
    g_ref = st.grad(lambda h, w: _unfused(h, w, b, t), argnums=(0, 1))(
        h if dtype == "bfloat16" else hl, w if dtype == "bfloat16" else wl)
    for x, y in zip(g, g_ref):
        assert x.dtype == hl.dtype
        _close(x, y, rtol=rtol, atol=rtol * 0.1)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_vmap_matches_loop(reduction):
    h, w, b, t = _data(tokens=(3, 4), ignored=(2, 5))
    f = lambda h, w, t: LCE(h, w, t, b, chunk_size=(3, 4), reduction=reduction)  # noqa: E731
    out = st.vmap(f, in_axes=(0, None, 0))(h, w, t)
    _close(out, np.stack([np.asarray(f(h[i], w, t[i])) for i in range(3)]))
    red = _scalar(reduction)
    gw = st.grad(lambda w: snp.sum(st.vmap(lambda h, t: red(f(h, w, t)))(h, t)))(w)
    gw_loop = sum(np.asarray(st.grad(lambda w: red(f(h[i], w, t[i])))(w)) for i in range(3))
    _close(gw, gw_loop)
    # per-example gradients: vmap of grad
    pe = st.vmap(st.grad(lambda w, h, t: red(f(h, w, t))), in_axes=(None, 0, 0))(w, h, t)
    _close(snp.sum(pe, axis=0), gw_loop)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_compiled_equals_eager_and_checkpoint(reduction):
    h, w, b, t = _data(tokens=(9,), ignored=(3,))
    red = _scalar(reduction)
    f = lambda h, w, b: red(LCE(h, w, t, b, chunk_size=(4, 5), reduction=reduction,  # noqa
                                z_loss=0.01))
    vg = st.value_and_grad(f, argnums=(0, 1, 2))
    eager = vg(h, w, b)
    comp = st.compile(vg, backend="cpp")(h, w, b)
    remat = st.value_and_grad(st.checkpoint(f), argnums=(0, 1, 2))(h, w, b)
    for other in (comp, remat):
        for x, y in zip(st.tree.leaves(eager), st.tree.leaves(other)):
            _close(x, y)


def test_weight_tying():
    # one (V, H) array is both the embedding table and the output projection
    h, w, b, t = _data(ignored=())
    ids = snp.asarray(np.arange(T) % V)

    def model(loss):
        def f(w):
            x = F.embedding(ids, w) * 0.5 + h
            return loss(x, w)
        return f
    g = st.grad(model(lambda x, w: LCE(x, w, t, chunk_size=(2, 3))))(w)
    g_ref = st.grad(model(lambda x, w: _unfused(x, w, None, t)))(w)
    _close(g, g_ref)


def test_errors():
    h, w, b, t = _data()
    with pytest.raises(ValueError, match=r"linear_cross_entropy: hidden .*\(7, 4\)"):
        LCE(h[:, :4], w, t)
    with pytest.raises(ValueError, match=r"linear_cross_entropy: weight must be \(vocab, hidden\)"):
        LCE(h, w[0], t)
    with pytest.raises(ValueError, match=r"bias must have shape \(vocab,\) = \(11,\)"):
        LCE(h, w, t, b[:3])
    with pytest.raises(ValueError, match=r"token shape \(7,\).*got \(6,\)"):
        LCE(h, w, t[:6])
    with pytest.raises(ValueError, match=r"probability targets must have shape.*\(7, 11\)"):
        LCE(h, w, snp.zeros((7, 10), snp.float32))
    with pytest.raises(TypeError, match="linear_cross_entropy: hidden must be real floating"):
        LCE(h.astype(snp.int32), w, t)
    with pytest.raises(TypeError, match="integer class indices or floating"):
        LCE(h, w, t.astype(snp.bool_))
    with pytest.raises(IndexError, match="linear_cross_entropy: target 11 is out of bounds"):
        LCE(h, w, t.at[0].set(11))
    with pytest.raises(ValueError, match="reduction"):
        LCE(h, w, t, reduction="batchmean")
    with pytest.raises(ValueError, match="label_smoothing"):
        LCE(h, w, t, label_smoothing=1.5)
    with pytest.raises(ValueError, match="z_loss"):
        LCE(h, w, t, z_loss=-1.0)
    for bad in (0, (3, 0), (1, 2, 3), 2.5, True):
        with pytest.raises(ValueError, match="chunk_size"):
            LCE(h, w, t, chunk_size=bad)
    with pytest.raises(ValueError, match="chunk_size"):
        nn.LinearCrossEntropyLoss(chunk_size=-1)


def test_nothing_to_average_gives_nan_loss_and_zero_gradients():
    # every target ignored, or no tokens at all: "mean" is NaN (PyTorch's value), but the
    # gradients are 0, not 0 * inf = NaN, fused and unfused alike
    import starling
    import starling.numpy as snp
    from starling.nn import functional as F
    rng = np.random.default_rng(3)
    w = snp.asarray(rng.normal(size=(7, 4)))
    cases = [(snp.asarray(rng.normal(size=(5, 4))), snp.full((5,), -100)),
             (snp.zeros((0, 4)), snp.zeros((0,), dtype=snp.int64))]
    losses = {
        "fused": lambda h, w, t: F.linear_cross_entropy(h, w, t),
        "unfused": lambda h, w, t: F.cross_entropy(h @ w.T, t),
        "smoothed": lambda h, w, t: F.cross_entropy(h @ w.T, t, label_smoothing=0.1),
        "nll": lambda h, w, t: F.nll_loss(F.log_softmax(h @ w.T, dim=-1), t),
    }
    for h, t in cases:
        for name, f in losses.items():
            assert np.isnan(float(f(h, w, t))), name
            for g in starling.grad(f, argnums=(0, 1))(h, w, t):
                assert np.all(np.asarray(g) == 0), name
            gc = starling.compile(starling.grad(f, argnums=1))(h, w, t)
            assert np.all(np.asarray(gc) == 0), name


def _module():
    import importlib
    return importlib.import_module("starling.nn.linear_cross_entropy")


def test_automatic_chunk_sizes():
    """Whole vocabulary rows while a block holds enough tokens for an efficient weight-gradient
    product; else large token chunks and vocabulary blocks (a divisor of V near the budget when
    there is one); token chunks balanced."""
    M, f32 = _module(), snp.float32
    assert M._chunk_sizes(None, 4096, 32000, f32, grad_with_loss=True) == (128, 32000)
    assert M._chunk_sizes(None, 4096, 32000, f32) == (64, 32000)
    assert M._chunk_sizes(None, 4096, 50257, f32, True) == (4096, 512)   # prime-ish: remainder
    assert M._chunk_sizes(None, 4096, 128256, f32, True) == (4096, 501)  # 128256 = 256 * 501
    assert M._chunk_sizes(None, 5000, 32000, f32, True) == (129, 32000)  # 39 chunks of <= 129
    assert M._chunk_sizes(None, 20000, 256000, f32, True) == (6667, 256)
    assert M._chunk_sizes(None, 10, 5, f32, True) == (10, 5)
    assert M._chunk_sizes(None, 0, 5, f32, True) == (1, 5)
    assert M._chunk_sizes((3, None), 10, 5, f32, True) == (3, 5)


@pytest.mark.parametrize("voc", [12, 13, 4])          # blocks of 4: none left over, 1, one block
@pytest.mark.parametrize("opts", [dict(), dict(reduction="sum", label_smoothing=0.1,
                                               z_loss=0.01)])
def test_automatic_vocabulary_blocks_compiled(monkeypatch, voc, opts):
    """With blocks too small for whole vocabulary rows the automatic choice scans vocabulary
    blocks (statistics, then gradients written block by block); compiled value, gradients and
    tangent equal the unfused loss's."""
    M = _module()
    monkeypatch.setattr(M, "GRAD_BLOCK_BYTES", 64)
    monkeypatch.setattr(M, "BLOCK_BYTES", 16 * 4 * 4)     # 16 tokens x 4 classes x float32
    h, w, b, t = _data(tokens=(16,), voc=voc, seed=5)
    assert M._chunk_sizes(None, 16, voc, snp.float32, True) == (16, 4)
    fused = lambda h, w, b: LCE(h, w, t, b, **opts)  # noqa: E731
    unfused = lambda h, w, b: _unfused(h, w, b, t, **opts)  # noqa: E731
    got = st.compile(st.value_and_grad(fused, argnums=(0, 1, 2)))(h, w, b)
    want = st.value_and_grad(unfused, argnums=(0, 1, 2))(h, w, b)
    for x, y in zip([got[0], *got[1]], [want[0], *want[1]]):
        _close(x, y)
    tan = st.jvp(fused, (h, w, b), (h, w * 0.5, b))[1]
    _close(tan, st.jvp(unfused, (h, w, b), (h, w * 0.5, b))[1])



@pytest.mark.parametrize("chunk", [None, (3, 3), (1, 1), (5, 4)])
def test_infinite_and_tied_logits_across_vocabulary_blocks(chunk):
    """A row whose logits are +-inf in several vocabulary blocks: the blocks' equal infinite
    maxima merge without inf - inf (loss inf, as unfused, not NaN); exact ties between blocks
    (duplicated weight rows split across blocks) give the softmax gradient."""
    rng = np.random.default_rng(11)
    w = snp.asarray(rng.normal(size=(8, 4)).astype(np.float32))
    h = snp.asarray(np.array([[np.nan, 1, 2, 3], [1, 2, 3, 4], [np.inf, 0, 0, 0]], np.float32))
    t = snp.asarray([1, 2, 3])
    _close(LCE(h, w, t, reduction="none", chunk_size=chunk),
           _unfused(h, w, None, t, reduction="none"))
    w2 = snp.asarray(np.repeat(rng.normal(size=(3, 4)).astype(np.float32), 2, axis=0))
    h2 = snp.asarray(rng.normal(size=(5, 4)).astype(np.float32))
    t2 = snp.asarray([0, 1, 2, 3, 4])
    g = st.grad(lambda w: LCE(h2, w, t2, chunk_size=chunk))(w2)
    _close(g, st.grad(lambda w: _unfused(h2, w, None, t2))(w2))
