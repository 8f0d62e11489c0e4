"""Flex attention as a composition of ``starling.numpy`` operations: the differentiable
definition every transformation (grad, jvp, vmap, checkpoint, compile, higher orders) goes
through, and the reference the native kernel (flex_native.py) is tested against.

Block sparsity without a native kernel: for each query block the key / value blocks its
BlockMask lists (partial ones, then full ones, padded to the busiest row) are gathered, the
scores of ``(Q_BLOCK, n_slots * KV_BLOCK)`` come from one batched product, and blocks a row does
not list are never computed. The softmax is *safe*: a row with nothing to attend to gives a zero
output, ``lse = -inf`` and zero (never NaN) gradients.
"""
from __future__ import annotations

import math

from .. import numpy as snp
from .. import stop_gradient

__all__ = ["attend"]


def _pad_axis(x, axis, size):
    n = x.shape[axis]
    if n == size:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, size - n)
    return snp.pad(x, widths)


def softmax_parts(s, valid):
    """Safe softmax over the last axis of scores ``s`` (``valid``: where a pair may attend, or
    None): ``(weights, lse, max_score)``. Fully masked rows: zero weights, ``lse = -inf``,
    ``max_score = -inf``. The shift is held constant (stop_gradient): the softmax does not
    depend on it, so derivatives of every order are exact and free of the max's ties."""
    if valid is not None:
        s = snp.where(valid, s, -math.inf)
    mx = snp.max(s, axis=-1)
    live = mx > -math.inf
    shift = stop_gradient(snp.where(live, mx, 0.0))
    e = snp.exp(s - shift[..., None])
    total = snp.sum(e, axis=-1)
    ok = total > 0
    safe = snp.where(ok, total, 1.0)
    lse = snp.where(ok, shift + snp.log(safe), -math.inf)
    return e / safe[..., None], lse, mx


def _index(n, axis, ndim):
    shape = [1] * ndim
    shape[axis] = n
    return snp.reshape(snp.arange(n, dtype=snp.int32), tuple(shape))


def _dense(q, k, v, scale, score_mod):
    """Every key visible (no BlockMask): plain ``(B, H, L, S)`` scores."""
    B, H, L, _ = q.shape
    S = k.shape[2]
    s = snp.matmul(q, snp.matrix_transpose(k)) * scale
    if score_mod is not None:
        s = score_mod(s, _index(B, 0, 4), _index(H, 1, 4), _index(L, 2, 4), _index(S, 3, 4))
    w, lse, mx = softmax_parts(snp.asarray(s).astype(q.dtype), None)
    return snp.matmul(w, v), lse, mx


def _slots(num, idx, fnum, fidx, nkb):
    """Block index and "used" flag of every slot ``(Bm, Hm, NQB, P + F)``; unused slots and
    out-of-range indices are not used (and gather block 0)."""
    cols = [(snp.arange(idx.shape[-1], dtype=snp.int32) < num[..., None], idx),
            (snp.arange(fidx.shape[-1], dtype=snp.int32) < fnum[..., None], fidx)]
    used = snp.concatenate([c[0] for c in cols], axis=-1)
    ids = snp.concatenate([c[1] for c in cols], axis=-1)
    used = used & (ids >= 0) & (ids < nkb)
    return snp.where(used, ids, 0), used


def _blocked(q, k, v, num, idx, fnum, fidx, pm, scale, score_mod, block):
    B, H, L, E = q.shape
    S, Ev = k.shape[2], v.shape[3]
    qb, kb = block
    nqb, nkb = -(-L // qb), -(-S // kb)
    Bm, Hm = num.shape[:2]
    P = idx.shape[-1]
    ids, used = _slots(num, idx, fnum, fidx, nkb)
    ns = ids.shape[-1]
    qp = snp.reshape(_pad_axis(q, 2, nqb * qb), (B, H, nqb, qb, E))
    kp = snp.reshape(_pad_axis(k, 2, nkb * kb), k.shape[:2] + (nkb, kb, E))
    vp = snp.reshape(_pad_axis(v, 2, nkb * kb), v.shape[:2] + (nkb, kb, Ev))
    bi = _index(B, 0, 4) if k.shape[0] == B else snp.zeros((1, 1, 1, 1), dtype=snp.int32)
    hi = _index(H, 1, 4) // (H // k.shape[1])
    kg = kp[bi, hi, ids]
    kg = snp.reshape(kg, kg.shape[:3] + (ns * kb, E))
    vg = vp[bi, hi, ids]
    vg = snp.reshape(vg, vg.shape[:3] + (ns * kb, Ev))
    s = snp.matmul(qp, snp.matrix_transpose(kg)) * scale          # (B, H, NQB, QB, ns * KB)
    kv = snp.reshape(ids[..., None] * kb + snp.arange(kb, dtype=snp.int32),
                     (Bm, Hm, nqb, 1, ns * kb))
    if score_mod is not None:
        qi = snp.reshape(snp.arange(nqb * qb, dtype=snp.int32), (1, 1, nqb, qb, 1))
        s = score_mod(s, _index(B, 0, 5), _index(H, 1, 5), qi, kv)
        s = snp.asarray(s).astype(q.dtype)
    inside = snp.permute_dims(pm, (0, 1, 2, 4, 3, 5))
    inside = snp.reshape(inside, (Bm, Hm, nqb, qb, P * kb))
    full = snp.ones((Bm, Hm, nqb, qb, (ns - P) * kb), dtype=snp.bool_)
    valid = snp.concatenate([inside, full], axis=-1)
    valid = valid & snp.reshape(snp.repeat(used, kb, axis=-1), (Bm, Hm, nqb, 1, ns * kb))
    valid = valid & (kv < S)
    w, lse, mx = softmax_parts(s, valid)
    out = snp.reshape(snp.matmul(w, vg), (B, H, nqb * qb, Ev))
    return (out[:, :, :L], snp.reshape(lse, (B, H, nqb * qb))[:, :, :L],
            snp.reshape(mx, (B, H, nqb * qb))[:, :, :L])


def attend(q, k, v, num, idx, fnum, fidx, pm, *, scale, score_mod, block, dense):
    """Flex attention of checked operands (flex_attention.py): ``q (B, H, L, E)``,
    ``k (Bk, Hk, S, E)``, ``v (Bk, Hk, S, Ev)`` with ``Bk`` in ``{1, B}``, ``H % Hk == 0``; the
    BlockMask's arrays ``num``, ``idx``, ``fnum``, ``fidx``, ``pm`` (block_mask.py layout);
    ``dense``: ignore them, every key visible. Returns ``(out (B, H, L, Ev), lse (B, H, L),
    max_score (B, H, L))``."""
    if dense:
        G = q.shape[1] // k.shape[1]
        if G > 1:
            k, v = snp.repeat(k, G, axis=1), snp.repeat(v, G, axis=1)
        return _dense(q, k, v, scale, score_mod)
    return _blocked(q, k, v, num, idx, fnum, fidx, pm, scale, score_mod, block)
