"""Cross entropy of a linear layer's logits without the logits: ``linear_cross_entropy`` and
``LinearCrossEntropyLoss``.

The loss of a language-model head, ``cross_entropy(hidden @ weight.T + bias, target)``, builds a
``(tokens, vocab)`` logits array (and in reverse mode its softmax and gradient): 500 MiB each at
4096 tokens and a 32000-word vocabulary in float32, far more than the head's parameters. Here the
tokens are cut into chunks of ``token_chunk`` rows and the vocabulary into blocks of
``vocab_chunk`` words; only one ``(token_chunk, vocab_chunk)`` block of logits exists at a time.

* Log-sum-exp over vocabulary blocks: the online softmax normaliser of Milakov & Gimelshein,
  "Online normalizer calculation for softmax" (2018): each row keeps its running max ``m`` and
  ``r = sum exp(z - m) - 1`` (the maxima's own terms counted, not summed, so a confident
  row's loss is ``log1p(r)`` without cancellation, as ``log_softmax`` computes it).
* Reverse mode for ``reduction="mean" | "sum"``: the gradient is computed during the forward
  pass, one token chunk at a time (``G = dloss/dlogits`` of the chunk, then ``grad_hidden = G @
  W``, ``grad_W += G.T @ h``, ``grad_b += sum G``), as in the Liger kernel (Hsu et al., "Liger
  Kernel: Efficient Triton Kernels for LLM Training", 2024); the loss is a ``custom_jvp`` whose
  tangent is ``<grad_h, dh> + <grad_W, dW> + <grad_b, db>``, so reverse mode keeps only
  parameter-sized residuals and does three products of the logits' size in all (the unfused
  loss does three too), forward mode gives the true tangent, and the rule itself is made of
  differentiable operations (second derivatives are exact). Cut Cross-Entropy (Wijmans et al.,
  "Cut Your Losses in Large-Vocabulary Language Models", 2024) is the blockwise prior art.
* ``reduction="none"`` has one cotangent per token, unknown in the forward pass: each token chunk
  is a ``checkpoint`` (its logits are recomputed in the backward pass: four products), in a
  Python loop. That bounds the memory, eagerly and compiled (gradient of a weighted sum of the
  per-token losses at T=4096, H=1024, V=32000 float32: 445 MiB eager, 709 MiB compiled, vs
  2650 MiB unfused compiled; compiled, the recomputation passes an optimization barrier and the
  weight gradient's sum follows each chunk's product: transforms/checkpoint.py,
  lowering/passes/fusion.py), at about 1.4x the unfused time ("mean" / "sum" do better).
* The z-loss of PaLM (Chowdhery et al., "PaLM: Scaling Language Modeling with Pathways", 2022,
  section 5) adds ``z_loss * lse**2`` per token, ``lse`` the log-sum-exp of the token's logits.

For "mean" / "sum" the token chunks are a ``scan`` (balanced chunks, the last padded with
ignored rows; the gradient accumulators are carries updated in place), so a compiled program
holds one chunk body, not one copy per chunk.
Within a chunk, a vocabulary of one block reuses that block's logits for the gradient (three
products in all, as the unfused loss). Several vocabulary blocks are two more scans: one merges
the blocks' statistics, the other recomputes each block's logits (four products in all) and
writes that block's rows of ``grad_W`` once as its stacked output while ``grad_hidden`` is the
carry, as in Cut Cross-Entropy. The automatic choice (``_chunk_sizes``) takes whole vocabulary
rows while a block of ``GRAD_BLOCK_BYTES`` holds enough tokens to make ``grad_W += G.T @ h``
an efficient product (at T=4096, H=1024, V=32000 float32: 128-token chunks, about the
unfused loss's time in 1/12 of its memory), else large token chunks and vocabulary blocks (V =
128256 float32: chunks of up to 8192 tokens, blocks of 501 classes; no accumulator streamed per
chunk, a third more products).
Every transformation (grad, jvp, vmap, compile, checkpoint) sees ordinary operations.

Memory in reverse mode (mean / sum): the gradients themselves and a few ``(token_chunk,
vocab_chunk)`` blocks.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

from .. import numpy as snp
from ..transforms.checkpoint import checkpoint
from ..transforms.control.scan import scan
from ..transforms.custom import custom_jvp
from .losses import _check_reduction, _check_targets, safe_mean
from .module import Module

__all__ = ["linear_cross_entropy", "LinearCrossEntropyLoss"]

OP = "linear_cross_entropy"
#: Bytes of one automatic logits block (in the accumulation dtype); a chunk's working set is a
#: few such blocks (logits, probabilities, their gradient).
BLOCK_BYTES = 8 << 20
#: The automatic choice keeps whole vocabulary rows while a block holds this many tokens ...
MIN_TOKEN_ROWS = 64
#: ... or, when the gradient is computed with the loss (mean / sum of index targets), while a
#: block of this many bytes holds this many tokens
GRAD_BLOCK_BYTES = 16 << 20
GEMM_TOKEN_ROWS = 128
#: Else, in that case, token chunks of at most this many rows and vocabulary blocks
MAX_TOKEN_ROWS = 8192


class _Config(NamedTuple):
    soft: bool          # probability targets
    n_classes: int
    smoothing: float
    z_loss: float
    token_chunk: int
    vocab_chunk: int
    acc: object         # the dtype logits are accumulated in (float32 for 16-bit inputs)


# ---- one block of logits ------------------------------------------------------------------------

def _ranges(n, step):
    return [(i, min(i + step, n)) for i in range(0, n, step)]


def _cols(q, v0, v1):
    return q if (v0, v1) == (0, q.shape[-1]) else q[:, v0:v1]


def _logits(h, w, b, cfg):
    """The logits block ``h @ w.T + b`` of the rows ``w`` (a vocabulary block), in ``cfg.acc``."""
    z = h @ snp.matrix_transpose(w)
    if z.dtype != cfg.acc:
        z = z.astype(cfg.acc)
    if b is not None:
        z = z + (b if b.dtype == cfg.acc else b.astype(cfg.acc))
    return z


def _block_stats(z, v0, t, q, cfg):
    """Per-row statistics of one logits block ``z`` ``(rows, block)`` starting at class ``v0``
    (an int, or a traced integer scalar inside the scan over vocabulary blocks): the max ``m``,
    ``r = sum exp(z - m) - 1``, the target's logit (index targets, 0 when it lies outside the
    block), the sum of the logits (label smoothing), ``sum q z`` and ``sum q``."""
    m = snp.max(z, axis=-1, keepdims=True)
    # The maxima's own terms (exactly 1 each) are counted, not summed: r = the others' sum +
    # (ties - 1). One kernel reads z for the mask, the exponentials and both sums (no (rows,
    # block) mask or exponentials stored); the max's tangent is the mean of the ties' (the
    # reduce_max rule), so d lse / d z is the softmax at ties too; all -inf rows give -inf.
    top = z == m
    e = snp.exp(z - m)
    ties = snp.sum(top.astype(z.dtype), axis=-1)
    s = {"m": m[..., 0], "r": snp.sum(snp.where(top, 0.0, e), axis=-1) + (ties - 1.0)}
    if cfg.soft:
        q = q.astype(cfg.acc)
        s["qz"] = snp.sum(q * z, axis=-1)
        s["qs"] = snp.sum(q, axis=-1)
    else:
        local = t - v0
        inside = (local >= 0) & (local < z.shape[-1])
        picked = snp.take_along_axis(z, snp.clip(local, 0, z.shape[-1] - 1)[..., None], axis=-1)
        s["zt"] = snp.where(inside, picked[..., 0], 0.0)
    if cfg.smoothing:
        s["zsum"] = snp.sum(z, axis=-1)
    return s


def _merge(acc, s):
    """Combines the statistics of two vocabulary blocks (online softmax)."""
    m, r, mc, rc = acc["m"], acc["r"], s["m"], s["r"]
    hi = mc > m
    # The exponent is chosen before exp, so neither branch overflows (no inf * 0 in reverse);
    # two blocks whose maximum is the same infinity scale each other by 1 (inf - inf is NaN)
    d = snp.where(hi, m - mc, mc - m)
    f = snp.exp(snp.where((m == mc) & snp.isinf(m), 0.0, d))
    out = {"m": snp.where(hi, mc, m), "r": snp.where(hi, (1.0 + r) * f + rc, r + (1.0 + rc) * f)}
    for key in s:
        if key not in out:
            out[key] = acc[key] + s[key]
    return out


def _row_loss(s, cfg):
    """Per-row loss and log-sum-exp from the merged statistics."""
    l1p = snp.log1p(s["r"])
    lse = s["m"] + l1p
    eps, n = cfg.smoothing, cfg.n_classes
    if cfg.soft:
        qs, qz = s["qs"], s["qz"]
        if eps:
            qs, qz = qs * (1.0 - eps) + eps, qz * (1.0 - eps) + s["zsum"] * (eps / n)
        loss = (qs * s["m"] - qz) + qs * l1p
    else:
        loss = (s["m"] - s["zt"]) + l1p
        if eps:
            loss = loss * (1.0 - eps) + ((s["m"] - s["zsum"] * (1.0 / n)) + l1p) * eps
    if cfg.z_loss:
        loss = loss + cfg.z_loss * (lse * lse)
    return loss, lse


def _row_scale(s, lse, cfg):
    """The per-row factor ``a`` of the softmax in ``d loss / d z = a * softmax(z) - target``:
    ``sum_c q'_c`` (1 for index targets) plus ``2 z_loss lse``."""
    a = 1.0
    if cfg.soft:
        eps = cfg.smoothing
        a = s["qs"] * (1.0 - eps) + eps if eps else s["qs"]
    if cfg.z_loss:
        a = a + (2.0 * cfg.z_loss) * lse
    return a


def _dlogits(z, v0, lse, a, t, q, keep, cfg):
    """``d loss_row / d z`` for one block starting at class ``v0`` (zero on ignored rows)."""
    eps, n = cfg.smoothing, cfg.n_classes
    g = snp.exp(z - lse[:, None])
    if not isinstance(a, float) or a != 1.0:
        g = g * a[:, None]
    if cfg.soft:
        q = q.astype(cfg.acc)
        g = g - (q * (1.0 - eps) + eps / n if eps else q)
    else:
        hit = (snp.arange(z.shape[-1]) + v0) == t[:, None]
        g = g - snp.where(hit, 1.0 - eps, 0.0) - eps / n if eps else snp.where(hit, g - 1.0, g)
    return snp.where(keep[:, None], g, 0.0)


# ---- the vocabulary blocks of one token chunk ---------------------------------------------------

def _blocks(cfg):
    """``(size, n, rem)``: ``n`` full vocabulary blocks of ``size`` classes, then ``rem`` more."""
    size = max(1, min(cfg.vocab_chunk, cfg.n_classes))
    return (size,) + divmod(cfg.n_classes, size)


def _one_block(cfg):
    size, n, rem = _blocks(cfg)
    return n + (rem > 0) <= 1


def _block(cfg, v0, v1, w, b, q, dq):
    """The per-class inputs of classes ``v0:v1``: ``(v0, w rows, b, q columns, dq columns)``."""
    whole = (v0, v1) == (0, cfg.n_classes)
    rows = (lambda x: x if x is None or whole else x[v0:v1])
    cols = (lambda x: None if x is None else _cols(x, v0, v1))
    return v0, rows(w), rows(b), cols(q), cols(dq)


def _stacked(cfg, lo, w, b, q, dq):
    """The full vocabulary blocks ``lo..n-1`` as the inputs of a scan: ``(v0, w, b, q, dq)``,
    each with a leading block axis (``w`` and ``b`` reshaped without a copy; the columns of
    ``q`` / ``dq`` moved in front, a copy the size of those operands)."""
    size, n, _ = _blocks(cfg)
    v0, v1 = lo * size, n * size

    def rows(x):
        if x is None:
            return None
        x = x if (v0, v1) == (0, x.shape[0]) else x[v0:v1]
        return x.reshape((n - lo, size) + tuple(x.shape[1:]))

    def cols(x):
        if x is None:
            return None
        x = _cols(x, v0, v1)
        return snp.moveaxis(x.reshape((x.shape[0], n - lo, size)), 1, 0)
    return snp.arange(lo, n) * size, rows(w), rows(b), cols(q), cols(dq)


def _chunk_stats(h, w, b, t, q, cfg):
    """(the logits when the vocabulary is one block else None, statistics merged over the
    vocabulary blocks: the first full block, a scan over the other full ones, the remainder)."""
    if _one_block(cfg):
        z = _logits(h, w, b, cfg)
        return z, _block_stats(z, 0, t, q, cfg)

    def stats(v0, wj, bj, qj):
        return _block_stats(_logits(h, wj, bj, cfg), v0, t, qj, cfg)
    size, n, rem = _blocks(cfg)
    s = stats(*_block(cfg, 0, size, w, b, q, None)[:4])
    if n > 1:
        s = scan(lambda s, x: (_merge(s, stats(*x)), ()), s,
                 _stacked(cfg, 1, w, b, q, None)[:4], length=n - 1)[0]
    if rem:
        s = _merge(s, stats(*_block(cfg, n * size, cfg.n_classes, w, b, q, None)[:4]))
    return None, s


def _masked(loss, keep):
    return loss if keep is None else snp.where(keep, loss, 0.0)


def _chunk_loss(cfg, h, w, b, t, q, keep):
    """Per-token loss ``(rows,)`` of one token chunk (0 on ignored rows)."""
    return _masked(_row_loss(_chunk_stats(h, w, b, t, q, cfg)[1], cfg)[0], keep)


def _plus(acc, x):
    return x if acc is None else acc + x


def _chunk_loss_and_grads(h, w, b, t, q, keep, dq, cfg, gw, gb):
    """Summed loss of one token chunk, its ``grad_hidden`` rows, the accumulators ``gw`` ``(V,
    H)`` / ``gb`` ``(V,)`` with the chunk's gradient added, and
    (with ``dq``) the chunk's tangent ``sum d loss / d q * dq``.

    One vocabulary block: its logits from the statistics pass are reused (three products) and
    ``gw + G.T @ h`` is one GEMM accumulating in place. Several: a second pass over the blocks
    recomputes each block's logits (four products), ``grad_hidden`` is the scan's carry and
    each block's rows of ``grad_W`` its stacked output, so they are written once, not
    accumulated."""
    z, s = _chunk_stats(h, w, b, t, q, cfg)
    loss, lse = _row_loss(s, cfg)
    a = _row_scale(s, lse, cfg)

    def block(gh, tq, v0, wj, bj, qj, dqj, zj=None):
        zj = _logits(h, wj, bj, cfg) if zj is None else zj
        if dqj is not None:
            # loss is linear in q: d loss_i / d q_ic = (1 - eps) (lse_i - z_ic)
            dqj = dqj.astype(cfg.acc)
            tq = _plus(tq, snp.sum(snp.where(keep[:, None], dqj * (lse[:, None] - zj), 0.0)))
        g = _dlogits(zj, v0, lse, a, t, qj, keep, cfg)
        gm = g if g.dtype == h.dtype else g.astype(h.dtype)
        ghj = gm @ wj
        gh = _plus(gh, ghj if ghj.dtype == cfg.acc else ghj.astype(cfg.acc))
        gwj = snp.matrix_transpose(gm) @ h
        return gh, tq, gwj if gwj.dtype == cfg.acc else gwj.astype(cfg.acc), \
            None if bj is None else snp.sum(g, axis=0)

    if _one_block(cfg):
        gh, tq, gwc, gbc = block(None, None, *_block(cfg, 0, cfg.n_classes, w, b, q, dq), z)
    else:
        size, n, rem = _blocks(cfg)

        def body(carry, x):
            gh, tq, gwj, gbj = block(*carry, *x)
            return (gh, tq), (gwj, gbj)
        # zeros: a compiled scan copies the broadcast into a buffer it owns and the blocks'
        # products add into it in place
        init = (snp.zeros(h.shape, cfg.acc), None if dq is None else snp.zeros((), cfg.acc))
        (gh, tq), (gwc, gbc) = scan(body, init, _stacked(cfg, 0, w, b, q, dq), length=n)
        gwc = gwc.reshape((n * size, w.shape[1]))
        gbc = None if gbc is None else gbc.reshape((n * size,))
        if rem:
            gh, tq, gwr, gbr = block(gh, tq, *_block(cfg, n * size, cfg.n_classes, w, b, q, dq))
            gwc = snp.concatenate([gwc, gwr], axis=0)
            gbc = None if gbc is None else snp.concatenate([gbc, gbr], axis=0)
    if tq is not None:
        tq = tq * (1.0 - cfg.smoothing)
    gh = gh if gh.dtype == h.dtype else gh.astype(h.dtype)
    return (snp.sum(_masked(loss, keep)), gh, _plus(gw, gwc),
            None if gbc is None else _plus(gb, gbc), tq)


# ---- the whole loss: a scan over token chunks ---------------------------------------------------

def _token_chunks(cfg, h, t, q, keep, dq=None):
    """``(h, t, q, keep, dq)`` cut into ``(n_chunks, token_chunk, ...)`` stacks (scanned inputs),
    the last chunk padded with ignored rows; ``keep`` is always an array then."""
    n_tok, c = h.shape[0], cfg.token_chunk
    n = -(-n_tok // c)
    pad = n * c - n_tok
    if keep is None:
        keep = snp.ones((n_tok,), bool)

    def cut(x):
        if x is None:
            return None
        if pad:
            x = snp.concatenate([x, snp.zeros((pad,) + tuple(x.shape[1:]), x.dtype)], axis=0)
        return x.reshape((n, c) + tuple(x.shape[1:]))
    return n, (cut(h), cut(t), cut(q), cut(keep), cut(dq))


def _loss_and_grads(cfg, h, w, b, t, q, keep, grads, dq=None):
    """Summed loss over all tokens (dtype of ``h``), and with ``grads`` the gradients of that sum
    with respect to ``h``, ``w`` and ``b`` (None without bias) and its tangent along the
    probability targets' tangent ``dq`` (0 without)."""
    n_tok, dtype = h.shape[0], h.dtype
    n, xs = _token_chunks(cfg, h, t, q, keep, dq)
    total = snp.zeros((), cfg.acc)
    if not grads:
        def body(total, x):
            return total + snp.sum(_chunk_loss(cfg, x[0], w, b, *x[1:4])), ()
        return scan(body, total, xs, length=n)[0].astype(dtype)
    # Zero accumulators: the compiled scan copies such a broadcast into a buffer it owns
    # (backends/cpp/backend.py, _adopt) and the chunks add into it in place; every chunk's
    # grad_hidden rows are the scan's stacked output, so nothing is joined afterwards
    init = (total, snp.zeros(w.shape, cfg.acc),
            None if b is None else snp.zeros(b.shape, cfg.acc), None if dq is None else total)

    def body(carry, x):
        total, gw, gb, tq = carry
        part, gh, gw, gb, tqc = _chunk_loss_and_grads(x[0], w, b, *x[1:], cfg, gw, gb)
        return (total + part, gw, gb, None if tq is None else tq + tqc), gh
    (total, gw, gb, tq), gh = scan(body, init, xs, length=n)
    gh = gh.reshape((n * cfg.token_chunk, h.shape[1]))[:n_tok]
    gw = gw if gw.dtype == w.dtype else gw.astype(w.dtype)
    if b is not None:
        gb = gb if gb.dtype == b.dtype else gb.astype(b.dtype)
    return total.astype(dtype), gh, gw, gb, None if tq is None else tq.astype(dtype)


def _cat(parts):
    return parts[0] if len(parts) == 1 else snp.concatenate(parts, axis=0)


@functools.partial(custom_jvp, nondiff_argnums=(0,))
def _summed(cfg, h, w, b, t, q, keep):
    return _loss_and_grads(cfg, h, w, b, t, q, keep, grads=False)


@_summed.defjvp
def _summed_jvp(cfg, primals, tangents):
    h, w, b, _, q, _ = primals
    dh, dw, db, _, dq, _ = tangents
    total, gh, gw, gb, tq = _loss_and_grads(cfg, *primals, grads=True, dq=dq)
    # sum(g * d), not vdot: its transpose ct * g reads g without a reshape, so a compiled
    # gradient can write it over g's buffer
    tan = snp.sum(gh * dh) + snp.sum(gw * dw)
    if b is not None:
        tan = tan + snp.sum(gb * db)
    if q is not None:
        tan = tan + tq
    return total, tan.astype(total.dtype)


def _per_token(cfg, h, w, b, t, q, keep):
    """Per-token losses ``(tokens,)``; each token chunk is a ``checkpoint`` (recomputed in
    reverse mode). A Python loop, not a scan: a checkpoint inside a staged scan body would be
    inlined (its chunk's logits then kept as residuals of the scan)."""
    chunk = checkpoint(functools.partial(_chunk_loss, cfg))
    parts = [chunk(h[r0:r1], w, b, None if t is None else t[r0:r1],
                   None if q is None else q[r0:r1], None if keep is None else keep[r0:r1])
             for r0, r1 in _ranges(h.shape[0], cfg.token_chunk)]
    out = _cat(parts) if parts else snp.zeros((0,), cfg.acc)
    return out if out.dtype == h.dtype else out.astype(h.dtype)


# ---- the public function ------------------------------------------------------------------------

def _chunk_sizes(chunk_size, n_tok, n_cls, acc, grad_with_loss=False):
    """``(token_chunk, vocab_chunk)``. Automatic: whole vocabulary rows in blocks of about
    ``BLOCK_BYTES`` while those hold ``MIN_TOKEN_ROWS`` tokens. When the gradient is computed
    with the loss (``grad_with_loss``: mean / sum of index targets), every chunk adds ``G.T @
    h`` into the whole ``(V, H)`` weight gradient, a product that streams that accumulator once
    per chunk and is efficient only over enough tokens: whole rows in blocks of about
    ``GRAD_BLOCK_BYTES`` while those hold ``GEMM_TOKEN_ROWS`` tokens. Else chunks of up to
    ``MAX_TOKEN_ROWS`` tokens (``MIN_TOKEN_ROWS`` without the gradient) and vocabulary blocks
    that fill ``BLOCK_BYTES`` (a divisor of V near that when there is one, so the scan over them
    covers the vocabulary without a remainder). Token chunks are balanced: the last one's
    padding is under one row per chunk."""
    if chunk_size is None:
        item = snp.finfo(acc).bits // 8

        def balanced(rows):
            rows = max(1, min(n_tok, rows))
            return -(-n_tok // -(-n_tok // rows)) if n_tok else rows
        budget = GRAD_BLOCK_BYTES if grad_with_loss else BLOCK_BYTES
        rows = budget // max(1, n_cls * item)
        if rows >= min(n_tok, GEMM_TOKEN_ROWS if grad_with_loss else MIN_TOKEN_ROWS):
            return balanced(rows), max(1, n_cls)
        rows = balanced(MAX_TOKEN_ROWS if grad_with_loss else MIN_TOKEN_ROWS)
        cols = max(1, min(n_cls, BLOCK_BYTES // (rows * item)))
        near = [c for c in range(cols, max(1, cols // 2) - 1, -1) if n_cls % c == 0]
        return rows, near[0] if near else cols
    pair = (chunk_size, None) if isinstance(chunk_size, int) else chunk_size
    if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not all(c is None or (isinstance(c, int) and not isinstance(c, bool)
                                               and c > 0) for c in pair):
        raise ValueError(f"{OP}: chunk_size must be None, a positive int (tokens per chunk) or "
                         f"a pair (tokens, vocabulary) of positive ints, got {chunk_size!r}")
    return pair[0], pair[1] or max(1, n_cls)


def _check_options(reduction, label_smoothing, z_loss, chunk_size):
    _check_reduction(OP, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{OP}: label_smoothing must be in [0, 1], got {label_smoothing}")
    if not (z_loss >= 0.0 and math.isfinite(z_loss)):
        raise ValueError(f"{OP}: z_loss must be a finite number >= 0, got {z_loss}")
    _chunk_sizes(chunk_size, 1, 1, snp.float32)


def _check_inputs(hidden, weight, bias, target):
    if weight.ndim != 2:
        raise ValueError(f"{OP}: weight must be (vocab, hidden), got shape {tuple(weight.shape)}")
    if hidden.ndim < 1 or hidden.shape[-1] != weight.shape[1]:
        raise ValueError(f"{OP}: hidden (*tokens, H) must end in weight's H = {weight.shape[1]} "
                         f"(weight {tuple(weight.shape)}), got hidden {tuple(hidden.shape)}")
    n_cls = weight.shape[0]
    if bias is not None and tuple(bias.shape) != (n_cls,):
        raise ValueError(f"{OP}: bias must have shape (vocab,) = ({n_cls},), got "
                         f"{tuple(bias.shape)}")
    arrays = [("hidden", hidden), ("weight", weight)] + ([("bias", bias)] if bias is not None
                                                         else [])
    for name, x in arrays:
        if not snp.isdtype(x.dtype, "real floating"):
            raise TypeError(f"{OP}: {name} must be real floating, got {x.dtype}")
    tokens = tuple(hidden.shape[:-1])
    if snp.isdtype(target.dtype, "real floating"):
        if tuple(target.shape) != tokens + (n_cls,):
            raise ValueError(f"{OP}: probability targets must have shape (*tokens, vocab) = "
                             f"{tokens + (n_cls,)} (hidden {tuple(hidden.shape)}, weight "
                             f"{tuple(weight.shape)}), got {tuple(target.shape)}")
        return True
    if not snp.isdtype(target.dtype, "integral"):
        raise TypeError(f"{OP}: target must be integer class indices or floating "
                        f"probabilities, got {target.dtype}")
    if tuple(target.shape) != tokens:
        raise ValueError(f"{OP}: class-index target must have hidden's token shape {tokens} "
                         f"(hidden {tuple(hidden.shape)}), got {tuple(target.shape)}")
    return False


def linear_cross_entropy(hidden, weight, target, bias=None, *, ignore_index=-100,
                         reduction="mean", label_smoothing=0.0, z_loss=0.0, chunk_size=None):
    """Cross entropy of the logits ``hidden @ weight.T + bias`` without forming them.

    Equal (to rounding) to ``cross_entropy(moveaxis(hidden @ weight.T + bias, -1, 1), target,
    ...)`` plus the z-loss, in value, gradient, forward-mode tangent and higher derivatives,
    while only ``(token_chunk, vocab_chunk)`` blocks of logits exist at any time (see the
    module docstring for the method: online softmax, gradient in the forward pass as the Liger
    kernel / Cut Cross-Entropy, PaLM's z-loss). Works eagerly and under ``grad``, ``jvp``,
    ``vmap``, ``compile`` and ``checkpoint``.

    Args:
        hidden: ``(*tokens, H)`` real floating (float16 / bfloat16 logits are accumulated in
            float32; the result has the promoted dtype of hidden, weight and bias).
        weight: ``(V, H)``, the output projection (for weight tying pass the embedding's
            ``(V, H)`` weight: its gradient is the sum of both uses, as for any shared array).
        target: integer class indices ``(*tokens,)`` in ``[0, V)`` or equal to
            ``ignore_index``, or class probabilities ``(*tokens, V)`` (floating; differentiable,
            though their gradient is itself ``(tokens, V)``).
        bias: ``(V,)`` or None.
        ignore_index: index targets equal to it contribute 0 and are left out of the mean.
        reduction: ``"mean"`` (over non-ignored tokens for index targets, NaN when all are
            ignored or there are no tokens; over all tokens for probabilities), ``"sum"`` or
            ``"none"``.
        label_smoothing: ``eps`` in [0, 1]: the target becomes ``(1 - eps) * target + eps / V``.
        z_loss: coefficient ``>= 0`` of ``lse**2`` added to each (non-ignored) token's loss,
            ``lse`` the log-sum-exp of its logits (PaLM).
        chunk_size: None (automatic, see ``_chunk_sizes``: logits blocks of 8-16 MiB, whole
            vocabulary rows while a block holds enough tokens), an int (tokens per chunk,
            whole vocabulary rows) or a pair ``(tokens, vocabulary)`` per block. Smaller blocks
            use less memory; a vocabulary split costs one more logits product in reverse mode.
    Returns:
        A scalar (``"mean"``, ``"sum"``) or the per-token loss ``(*tokens,)`` (``"none"``), in
        the promoted floating dtype.
    Raises:
        ValueError: shapes (named with the op and the shapes seen), reduction, label_smoothing
            outside [0, 1], negative z_loss, bad chunk_size.
        TypeError: non-floating hidden / weight / bias, or a target neither integer nor
            floating.
        IndexError: (eager) a class index outside ``[0, V)`` that is not ``ignore_index``.
    """
    _check_options(reduction, label_smoothing, z_loss, chunk_size)
    hidden, weight, target = snp.asarray(hidden), snp.asarray(weight), snp.asarray(target)
    bias = None if bias is None else snp.asarray(bias)
    soft = _check_inputs(hidden, weight, bias, target)
    dtype = snp.result_type(*[x for x in (hidden, weight, bias) if x is not None])
    hidden, weight = hidden.astype(dtype), weight.astype(dtype)
    bias = None if bias is None else bias.astype(dtype)
    tokens, n_cls = tuple(hidden.shape[:-1]), weight.shape[0]
    n_tok = math.prod(tokens)
    acc = snp.float32 if snp.finfo(dtype).bits < 32 else dtype
    tc, vc = _chunk_sizes(chunk_size, n_tok, n_cls, acc,
                          grad_with_loss=reduction != "none" and not soft)
    cfg = _Config(soft, n_cls, float(label_smoothing), float(z_loss), tc, vc, acc)
    h = hidden.reshape((n_tok, hidden.shape[-1]))
    if soft:
        t, keep = None, None
        q = target.reshape((n_tok, n_cls))
    else:
        _check_targets(OP, target, n_cls, ignore_index)
        t = target.reshape((n_tok,))
        keep = t != ignore_index
        t, q = snp.where(keep, t, 0), None
    if reduction == "none":
        return _per_token(cfg, h, weight, bias, t, q, keep).reshape(tokens)
    total = _summed(cfg, h, weight, bias, t, q, keep)
    if reduction == "sum":
        return total
    count = snp.asarray(n_tok, dtype) if keep is None else snp.sum(keep.astype(dtype))
    return safe_mean(total, count)


class LinearCrossEntropyLoss(Module):
    """Module form of :func:`linear_cross_entropy` (no parameters of its own: the projection
    is an argument, so a weight tied to an embedding is passed as ``embedding.weight``).

    ``loss_fn(hidden, weight, target, bias=None)`` with hidden ``(*tokens, H)``, weight
    ``(V, H)``, target ``(*tokens,)`` indices or ``(*tokens, V)`` probabilities, bias ``(V,)``.

    Args:
        ignore_index, reduction, label_smoothing, z_loss, chunk_size: as for
            :func:`linear_cross_entropy` (checked at construction).
    Raises:
        ValueError: as :func:`linear_cross_entropy`, for bad options.
    """

    def __init__(self, ignore_index=-100, reduction="mean", label_smoothing=0.0, z_loss=0.0,
                 chunk_size=None):
        super().__init__()
        _check_options(reduction, label_smoothing, z_loss, chunk_size)
        self.ignore_index, self.reduction = ignore_index, reduction
        self.label_smoothing, self.z_loss, self.chunk_size = label_smoothing, z_loss, chunk_size

    def forward(self, hidden, weight, target, bias=None):
        return linear_cross_entropy(hidden, weight, target, bias, ignore_index=self.ignore_index,
                                    reduction=self.reduction,
                                    label_smoothing=self.label_smoothing, z_loss=self.z_loss,
                                    chunk_size=self.chunk_size)

    def extra_repr(self):
        return (f"ignore_index={self.ignore_index}, reduction={self.reduction!r}, "
                f"label_smoothing={self.label_smoothing}, z_loss={self.z_loss}, "
                f"chunk_size={self.chunk_size}")
