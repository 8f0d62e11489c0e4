"""flex_attention / create_block_mask / BlockMask against a dense NumPy reference (the mask and
score_mod applied to the full score matrix), derivatives against finite differences, vmap
against a loop, compiled against eager, the native kernel against the composition."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.nn import functional as F
from starling.nn.functional import AuxRequest, BlockMask, create_block_mask, flex_attention

CO = {"BACKEND": "COMPOSITION"}
NATIVE = {"BACKEND": "NATIVE"}
AUX = AuxRequest(lse=True, max_scores=True)


def reference(q, k, v, mask=None, score_mod=None, scale=None):
    """Dense float64 attention: (out, lse, max) with zero / -inf on fully masked rows."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    G = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, G, 1), np.repeat(v, G, 1)
    k, v = (np.broadcast_to(x, (q.shape[0],) + x.shape[1:]) for x in (k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.einsum("bhle,bhse->bhls", q, k) * scale
    if score_mod is not None:
        b, h, i, j = np.ogrid[:s.shape[0], :s.shape[1], :s.shape[2], :s.shape[3]]
        s = score_mod(s, b, h, i, j)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    mx = s.max(-1)
    shift = np.where(np.isfinite(mx), mx, 0)
    e = np.exp(s - shift[..., None])
    tot = e.sum(-1)
    safe = np.where(tot > 0, tot, 1)
    out = np.einsum("bhls,bhse->bhle", e / safe[..., None], v)
    return out, np.where(tot > 0, shift + np.log(safe), -np.inf), mx


def dense(mask_mod, B, H, L, S):
    b, h, i, j = np.ogrid[:B, :H, :L, :S]
    return np.broadcast_to(mask_mod(b, h, i, j), (B, H, L, S))


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def causal(b, h, i, j):
    return i >= j


def window(b, h, i, j):
    return (i - j <= 5) & (j - i <= 2)


def alibi(s, b, h, i, j):
    return s - (h + 1) * 0.25 * abs(i - j)


def softcap(s, b, h, i, j):
    return 2.0 * snp.tanh(s / 2.0)


def softcap_np(s, b, h, i, j):
    return 2.0 * np.tanh(s / 2.0)


def close(got, want, tol=1e-10):
    got = np.asarray(got)
    assert got.shape == want.shape
    both_inf = np.isneginf(got) & np.isneginf(want)
    np.testing.assert_allclose(np.where(both_inf, 0, got), np.where(both_inf, 0, want),
                               rtol=tol, atol=tol)


CASES = [  # (B, H, Hk, L, S, E, mask_mod, B_mask, H_mask, block)
    (2, 2, 2, 37, 45, 8, causal, None, None, 16),
    (1, 2, 2, 33, 33, 4, window, None, None, (8, 4)),
    (2, 4, 2, 20, 19, 4, window, 2, None, 8),        # GQA, per-batch mask
    (1, 3, 1, 9, 12, 4, causal, None, 3, 4),          # multi-query, per-head mask
    (1, 1, 1, 1, 1, 1, causal, None, None, 128),      # size-1 dims
]


@pytest.mark.parametrize("backend", [CO, NATIVE])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mod", [None, "alibi", "softcap"])
def test_matches_dense_reference(case, backend, mod):
    B, H, Hk, L, S, E, mm, Bm, Hm, block = case
    q, k, v = rnd(B, H, L, E, seed=1), rnd(B, Hk, S, E, seed=2), rnd(B, Hk, S, E + 1, seed=3)
    bm = create_block_mask(mm, Bm, Hm, L, S, BLOCK_SIZE=block)
    sm, sm_np = {None: (None, None), "alibi": (alibi, alibi),
                 "softcap": (softcap, softcap_np)}[mod]
    out, aux = flex_attention(q, k, v, sm, bm, enable_gqa=H != Hk, kernel_options=backend,
                              return_aux=AUX)
    want = reference(q, k, v, dense(mm, Bm or 1, Hm or 1, L, S), sm_np)
    for got, w in zip((out, aux.lse, aux.max_scores), want):
        close(got, w)


# (document lengths, BLOCK_SIZE): lengths that are not a multiple of the block size too (the
# mask indexes an array of exactly L document ids: padded positions must never reach it)
@pytest.mark.parametrize("sizes, block", [((5, 17, 1, 9), 8), ((5, 17, 1, 10), 8),
                                          ((50, 50, 50, 50), (64, 32))])
def test_document_mask_captured_array_and_no_mask(sizes, block):
    doc = np.repeat(np.arange(4), sizes)
    docs = snp.asarray(doc)
    L = doc.size
    q, k, v = rnd(1, 2, L, 4, seed=1), rnd(1, 2, L, 4, seed=2), rnd(1, 2, L, 4, seed=3)
    bm = create_block_mask(lambda b, h, i, j: (docs[i] == docs[j]) & (i >= j), None, None,
                           L, L, BLOCK_SIZE=block)
    mask = (doc[:, None] == doc[None, :]) & np.tril(np.ones((L, L), bool))
    for opts in (CO, None):
        close(flex_attention(q, k, v, block_mask=bm, kernel_options=opts),
              reference(q, k, v, mask)[0])
        close(flex_attention(q, k, v, kernel_options=opts), reference(q, k, v)[0])


@pytest.mark.parametrize("backend", [CO, NATIVE])
def test_fully_masked_rows_zero_output_and_gradient(backend):
    L = 10

    def mm(b, h, i, j):
        return (j <= i) & (i != 3) & (i < 8)    # rows 3, 8, 9 see nothing
    q, k, v = rnd(1, 1, L, 4, seed=1), rnd(1, 1, L, 4, seed=2), rnd(1, 1, L, 4, seed=3)
    bm = create_block_mask(mm, None, None, L, L, BLOCK_SIZE=4)
    out, aux = flex_attention(q, k, v, block_mask=bm, kernel_options=backend, return_aux=AUX)
    out = np.asarray(out)
    assert np.all(out[0, 0, [3, 8, 9]] == 0)
    assert np.all(np.isneginf(np.asarray(aux.lse)[0, 0, [3, 8, 9]]))
    close(out, reference(q, k, v, dense(mm, 1, 1, L, L))[0])

    def loss(q, k, v):
        o, a = flex_attention(q, k, v, block_mask=bm, kernel_options=backend, return_aux=AUX)
        return snp.sum(o ** 2) + snp.sum(snp.where(snp.isfinite(a.lse), a.lse, 0.0))
    grads = st.grad(loss, argnums=(0, 1, 2))(q, k, v)
    assert all(np.isfinite(np.asarray(g)).all() for g in grads)
    assert np.all(np.asarray(grads[0])[0, 0, [3, 8, 9]] == 0)


def _loss_fn(bm, score_mod, backend):
    def loss(q, k, v):
        o, a = flex_attention(q, k, v, score_mod, bm, kernel_options=backend,
                              return_aux=AuxRequest(lse=True))
        return snp.sum(snp.sin(o)) + 0.5 * snp.sum(a.lse)
    return loss


@pytest.mark.parametrize("backend", [CO, NATIVE])
def test_grads_order_two(backend):
    L, S = 6, 7
    q, k, v = rnd(1, 2, L, 3, seed=1), rnd(1, 2, S, 3, seed=2), rnd(1, 2, S, 3, seed=3)
    bm = create_block_mask(lambda b, h, i, j: j <= i + 1, None, None, L, S, BLOCK_SIZE=4)
    st.test_util.check_grads(_loss_fn(bm, softcap, backend), (q, k, v), order=2)


def test_grad_and_jvp_native_equal_composition():
    L = 9
    q, k, v = rnd(2, 2, L, 4, seed=1), rnd(2, 2, L, 4, seed=2), rnd(2, 2, L, 4, seed=3)
    bm = create_block_mask(window, None, None, L, L, BLOCK_SIZE=4)
    fn, fc = _loss_fn(bm, alibi, NATIVE), _loss_fn(bm, alibi, CO)
    for a, b in zip(st.grad(fn, argnums=(0, 1, 2))(q, k, v),
                    st.grad(fc, argnums=(0, 1, 2))(q, k, v)):
        close(a, np.asarray(b))
    t = (rnd(*q.shape, seed=4), rnd(*k.shape, seed=5), rnd(*v.shape, seed=6))
    close(st.jvp(fn, (q, k, v), t)[1], np.asarray(st.jvp(fc, (q, k, v), t)[1]))


def test_vmap_checkpoint_compile():
    L = 11
    q, k, v = rnd(3, 1, 2, L, 4, seed=1), rnd(1, 2, L, 4, seed=2), rnd(1, 2, L, 4, seed=3)
    bm = create_block_mask(causal, None, None, L, L, BLOCK_SIZE=4)

    def f(q):
        return flex_attention(q, k, v, softcap, bm)
    loop = np.stack([np.asarray(f(x)) for x in q])
    close(st.vmap(f)(q), loop)
    close(st.compile(st.vmap(f))(q), loop)
    close(st.checkpoint(f)(q[0]), loop[0])
    g = st.grad(lambda x: snp.sum(st.checkpoint(f)(x) ** 2))(q[0])
    close(g, np.asarray(st.grad(lambda x: snp.sum(f(x) ** 2))(q[0])))
    # compiled, with the BlockMask an argument of the compiled function
    cf = st.compile(lambda q, m: flex_attention(q, k, v, block_mask=m))
    close(cf(q[0], bm), np.asarray(flex_attention(q[0], k, v, block_mask=bm)))
    close(st.compile(st.grad(lambda x: snp.sum(f(x) ** 2)))(q[0]), np.asarray(g))


def test_kv_batch_broadcast_and_float32():
    q = rnd(3, 2, 10, 4, seed=1).astype(np.float32)
    k, v = rnd(1, 2, 12, 4, seed=2).astype(np.float32), rnd(1, 2, 12, 4, seed=3).astype(np.float32)
    bm = create_block_mask(causal, None, None, 10, 12, BLOCK_SIZE=4)
    out = flex_attention(q, k, v, block_mask=bm)
    assert out.dtype == snp.float32
    close(out, reference(q, k, v, dense(causal, 1, 1, 10, 12))[0], tol=2e-6)
    close(out, np.asarray(flex_attention(q, k, v, block_mask=bm, kernel_options=CO)), tol=2e-6)


def test_block_mask_structure():
    bm = create_block_mask(causal, None, None, 40, 40, BLOCK_SIZE=16)
    assert bm.shape == (1, 1, 40, 40) and bm.BLOCK_SIZE == (16, 16)
    np.testing.assert_array_equal(np.asarray(bm.kv_num_blocks)[0, 0], [1, 1, 1])
    np.testing.assert_array_equal(np.asarray(bm.full_kv_num_blocks)[0, 0], [0, 1, 2])
    np.testing.assert_array_equal(np.asarray(bm.to_dense())[0, 0], np.tril(np.ones((3, 3))))
    assert abs(bm.sparsity() - 100 * 3 / 9) < 1e-9
    # from_kv_blocks: every block partial, mask_mod applied everywhere
    again = BlockMask.from_kv_blocks(bm.kv_num_blocks + bm.full_kv_num_blocks,
                                     snp.asarray([[[[0, 0, 0], [0, 1, 0], [0, 1, 2]]]]),
                                     BLOCK_SIZE=16, mask_mod=causal, seq_lengths=(40, 40))
    q, k, v = rnd(1, 1, 40, 4, seed=1), rnd(1, 1, 40, 4, seed=2), rnd(1, 1, 40, 4, seed=3)
    close(flex_attention(q, k, v, block_mask=again),
          np.asarray(flex_attention(q, k, v, block_mask=bm)))
    leaves, treedef = st.tree.flatten(bm)
    assert st.tree.unflatten(treedef, leaves).seq_lengths == (40, 40)


def test_combinators_and_create_mask():
    m = F.and_masks(causal, window)
    np.testing.assert_array_equal(np.asarray(F.create_mask(m, None, None, 7, 7)),
                                  dense(causal, 1, 1, 7, 7) & dense(window, 1, 1, 7, 7))
    o = F.or_masks(causal, window)
    np.testing.assert_array_equal(np.asarray(F.create_mask(o, 2, 1, 7, 5)),
                                  np.broadcast_to(dense(causal, 1, 1, 7, 5)
                                                  | dense(window, 1, 1, 7, 5), (2, 1, 7, 5)))


def test_fallback_for_array_score_mod_is_logged(caplog):
    bias = snp.asarray(rnd(2, 8, 8))

    def table(s, b, h, i, j):
        return s + bias[h, i, j]
    q, k, v = rnd(1, 2, 8, 4, seed=1), rnd(1, 2, 8, 4, seed=2), rnd(1, 2, 8, 4, seed=3)
    with caplog.at_level(logging.DEBUG, logger="starling.nn"):
        out = flex_attention(q, k, v, table)
    assert any("captures an array" in r.getMessage() for r in caplog.records)
    close(out, reference(q, k, v, None, lambda s, b, h, i, j: s + np.asarray(bias)[h, i, j])[0])
    with pytest.raises(ValueError, match="native kernel cannot run"):
        flex_attention(q, k, v, table, kernel_options=NATIVE)


def test_module_wrapper_and_bfloat16():
    q, k, v = (rnd(1, 2, 8, 4, seed=s).astype(np.float32) for s in (1, 2, 3))
    layer = st.nn.FlexAttention(softcap)
    close(layer(q, k, v), np.asarray(flex_attention(q, k, v, softcap)), tol=1e-6)
    out = flex_attention(*(snp.asarray(x).astype(snp.bfloat16) for x in (q, k, v)))
    assert out.dtype == snp.bfloat16
    close(np.asarray(out.astype(snp.float32)), reference(q, k, v)[0].astype(np.float32),
          tol=3e-2)


def test_errors():
    q, k = rnd(1, 2, 8, 4), rnd(1, 2, 8, 4)
    with pytest.raises(ValueError, match="flex_attention: query must be 4-d"):
        flex_attention(q[0], k, k)
    with pytest.raises(ValueError, match="differ in E"):
        flex_attention(q, rnd(1, 2, 8, 3), rnd(1, 2, 8, 3))
    with pytest.raises(ValueError, match="must agree"):
        flex_attention(q, k, rnd(1, 2, 7, 4))
    with pytest.raises(ValueError, match="heads"):
        flex_attention(rnd(1, 3, 8, 4), k, k, enable_gqa=True)
    with pytest.raises(ValueError, match="heads"):
        flex_attention(rnd(1, 4, 8, 4), k, k)
    with pytest.raises(ValueError, match="batch"):
        flex_attention(rnd(3, 2, 8, 4), rnd(2, 2, 8, 4), rnd(2, 2, 8, 4))
    with pytest.raises(ValueError, match="Q_LEN=16"):
        flex_attention(q, k, k, block_mask=create_block_mask(causal, None, None, 16, 8))
    with pytest.raises(ValueError, match="batch / heads"):
        flex_attention(q, k, k, block_mask=create_block_mask(causal, 2, None, 8, 8))
    with pytest.raises(TypeError, match="share a dtype"):
        flex_attention(q.astype(np.float32), k, k)
    with pytest.raises(TypeError, match="real floating"):
        flex_attention(q.astype(np.int32), k.astype(np.int32), k.astype(np.int32))
    with pytest.raises(TypeError, match="BlockMask"):
        flex_attention(q, k, k, block_mask=np.ones((8, 8), bool))
    with pytest.raises(TypeError, match="booleans"):
        create_block_mask(lambda b, h, i, j: i - j, None, None, 8, 8)
    with pytest.raises(ValueError, match="BLOCK_SIZE"):
        create_block_mask(causal, None, None, 8, 8, BLOCK_SIZE=0)
    with pytest.raises(ValueError, match="Q_LEN"):
        create_block_mask(causal, None, None, 0, 8)


def test_inconsistent_block_mask_and_determinism():
    bm = create_block_mask(causal, None, None, 16, 16, BLOCK_SIZE=8)
    bad = BlockMask(bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks,
                    bm.full_kv_indices, bm.partial_mask[..., :4, :], (16, 16), (8, 8), causal)
    q = rnd(1, 1, 16, 4)
    with pytest.raises(ValueError, match="partial_mask has shape"):
        flex_attention(q, q, q, block_mask=bad)
    g = st.compile(st.grad(lambda x: snp.sum(flex_attention(x, x, x, block_mask=bm) ** 2)))
    a, b = np.asarray(g(q)), np.asarray(g(q))
    assert np.array_equal(a, b)


def test_score_mod_scalar_captured_anew_each_call():
    q = rnd(1, 1, 6, 4)
    temp = [1.0]

    def mod(s, b, h, i, j):
        return s * temp[0]
    a = np.asarray(flex_attention(q, q, q, mod, kernel_options=NATIVE))
    temp[0] = 3.0
    b = np.asarray(flex_attention(q, q, q, mod, kernel_options=NATIVE))
    close(b, reference(q, q, q, None, lambda s, *_: s * 3.0)[0])
    assert not np.allclose(a, b)
