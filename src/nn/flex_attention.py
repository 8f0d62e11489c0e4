"""``flex_attention``: scaled dot-product attention with a user score modification and a
block-sparse mask (PyTorch's ``torch.nn.attention.flex_attention`` API and semantics).

Two implementations give the same results:

* the composition of ``starling.numpy`` operations (flex_compose.py): the differentiable
  definition, used by every transformation's rules and whenever the native kernel cannot run;
* a native fused kernel (flex_native.py): tiled online-softmax forward (FlashAttention, Dao et
  al. 2022; online softmax, Milakov & Gimelshein 2018) visiting only the BlockMask's blocks,
  with ``score_mod`` rendered into it as C++ from its trace. It runs eagerly and under
  ``starling.compile``; derivatives and batching of it are those of the composition.
"""
from __future__ import annotations

import logging
import math
from typing import NamedTuple

from .. import Array
from .. import numpy as snp
from . import block_mask as BM
from .flex_compose import attend
from .module import Module

__all__ = ["flex_attention", "AuxRequest", "AuxOutput", "FlexAttention"]

logger = logging.getLogger("starling.nn")
_LOGGED = set()


class AuxRequest(NamedTuple):
    """Which auxiliary outputs :func:`flex_attention` returns (``return_aux=``)."""
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """Auxiliary outputs: ``lse (B, Hq, L)`` the natural log-sum-exp of each row's modified,
    masked scores; ``max_scores (B, Hq, L)`` their maximum (both ``-inf`` on fully masked
    rows), or None where not requested."""
    lse: object = None
    max_scores: object = None


def _log_once(key, msg, *args):
    if key not in _LOGGED:
        _LOGGED.add(key)
        logger.debug(msg, *args)


def _check(q, k, v, block_mask, enable_gqa):
    op = "flex_attention"
    for name, x in (("query", q), ("key", k), ("value", v)):
        if x.ndim != 4:
            raise ValueError(f"{op}: {name} must be 4-d (B, H, L, E), got shape {x.shape}")
        if not snp.isdtype(x.dtype, "real floating"):
            raise TypeError(f"{op}: {name} must be a real floating array, got {x.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"{op}: query, key and value must share a dtype, got {q.dtype}, "
                        f"{k.dtype}, {v.dtype}")
    B, Hq, L, E = q.shape
    Bk, Hk, S, Ek = k.shape
    if Ek != E:
        raise ValueError(f"{op}: query {q.shape} and key {k.shape} differ in E")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"{op}: key {k.shape} and value {v.shape} must agree in (B, H, S)")
    if Bk not in (1, B):
        raise ValueError(f"{op}: key / value batch {Bk} must be 1 (broadcast) or the query's "
                         f"{B}; query {q.shape}, key {k.shape}")
    if Hk != Hq and not (enable_gqa and Hk > 0 and Hq % Hk == 0):
        raise ValueError(f"{op}: query heads {Hq} and key / value heads {Hk} differ; with "
                         f"enable_gqa=True query heads must be a multiple of them "
                         f"(query {q.shape}, key {k.shape}, enable_gqa={enable_gqa})")
    if block_mask is None:
        return
    if not isinstance(block_mask, BM.BlockMask):
        raise TypeError(f"{op}: block_mask must be a BlockMask, got {type(block_mask).__name__}")
    Bm, Hm, Lm, Sm = block_mask.shape
    _check_layout(block_mask)
    if (Lm, Sm) != (L, S):
        raise ValueError(f"{op}: block_mask was made for Q_LEN={Lm}, KV_LEN={Sm} but query "
                         f"{q.shape} and key {k.shape} have L={L}, S={S}")
    if Bm not in (1, B) or Hm not in (1, Hq):
        raise ValueError(f"{op}: block_mask batch / heads ({Bm}, {Hm}) must be 1 or the "
                         f"query's ({B}, {Hq}); query {q.shape}")


def _check_layout(m):
    """The BlockMask's arrays agree with each other (the native kernel relies on it)."""
    (qb, kb), (nqb, _) = m.BLOCK_SIZE, m.num_blocks()
    Bm, Hm = m.kv_num_blocks.shape[:2]
    want = {"kv_num_blocks": (Bm, Hm, nqb), "kv_indices": (Bm, Hm, nqb, m.kv_indices.shape[-1])}
    if m.full_kv_num_blocks is not None:
        want["full_kv_num_blocks"] = (Bm, Hm, nqb)
        want["full_kv_indices"] = (Bm, Hm, nqb, m.full_kv_indices.shape[-1])
    if m.partial_mask is not None:
        want["partial_mask"] = (Bm, Hm, nqb, m.kv_indices.shape[-1], qb, kb)
    for name, shape in want.items():
        got = tuple(getattr(m, name).shape)
        if got != shape:
            raise ValueError(f"flex_attention: block_mask.{name} has shape {got}, expected "
                             f"{shape} for seq_lengths {m.seq_lengths} and BLOCK_SIZE "
                             f"{m.BLOCK_SIZE}")


def _mask_arrays(block_mask):
    """``(num, idx, fnum, fidx, partial_mask)`` of a BlockMask (no full list: an empty one);
    the partial blocks' mask_mod values are kept on a concrete BlockMask for the next call."""
    m = block_mask
    if m.partial_mask is None:
        m2 = m.with_partial_mask()
        if isinstance(m2.partial_mask, Array):
            m.partial_mask = m2.partial_mask
        pm = m2.partial_mask
    else:
        pm = m.partial_mask
    fnum, fidx = m.full_kv_num_blocks, m.full_kv_indices
    if fnum is None:
        fnum = snp.zeros_like(m.kv_num_blocks)
        fidx = snp.zeros(m.kv_indices.shape[:3] + (0,), dtype=snp.int32)
    return m.kv_num_blocks, m.kv_indices, fnum, fidx, pm


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None, *, return_aux=None):
    """Attention ``softmax(score_mod(q k^T * scale) masked by block_mask) v``.

    Args:
        query: ``(B, Hq, L, E)``; key: ``(Bk, Hkv, S, E)``; value: ``(Bk, Hkv, S, Ev)``; one
            real floating dtype (float16 / bfloat16 are computed in float32 and rounded back).
            ``Bk`` is ``B`` or 1 (keys / values shared by the batch, e.g. a paged KV cache).
        score_mod: ``score_mod(score, b, h, q_idx, kv_idx) -> score``, written with
            ``starling.numpy`` operations; called with the scaled scores and broadcastable
            int32 index arrays (so it must act elementwise, e.g. ``score + bias[h, q_idx,
            kv_idx]``, ``where(q_idx >= kv_idx, score, -inf)``, ``c * tanh(score / c)``).
        block_mask: a :class:`BlockMask` for ``(L, S)`` (its batch / heads 1 or ``B`` /
            ``Hq``); None: every key visible. Blocks it does not list are skipped.
        scale: multiplies ``q k^T``; default ``1 / sqrt(E)``.
        enable_gqa: grouped-query attention: ``Hq`` a multiple of ``Hkv``, query head ``h``
            uses key / value head ``h // (Hq / Hkv)``.
        return_lse: also return ``lse`` (PyTorch's older flag).
        kernel_options: optional dict; ``{"BACKEND": "COMPOSITION"}`` forces the composition,
            ``"NATIVE"`` requires the native kernel (ValueError when it cannot run), ``"AUTO"``
            (default) takes the kernel when it can.
        return_aux: an :class:`AuxRequest`: return ``(out, AuxOutput)``.
    Returns:
        ``out (B, Hq, L, Ev)`` in the dtype of ``query``; with ``return_lse``, ``(out, lse)``;
        with ``return_aux``, ``(out, AuxOutput(lse, max_scores))``. A row with nothing to
        attend to gives zeros, ``lse = -inf``, ``max_scores = -inf`` and zero gradients.
    Raises:
        ValueError: ranks other than 4, mismatched E / S / batch / heads, a BlockMask made for
            other lengths or batch / heads.
        TypeError: non-floating or differing dtypes, a block_mask that is not a BlockMask.

    Derivatives of every order, ``vmap``, ``checkpoint`` and ``compile`` work (through the
    composition, itself block-sparse); backward is deterministic (no atomics). The native
    kernel covers float32 / float64 with a ``score_mod`` made of elementwise operations on
    its arguments and scalar constants; other score_mods use the composition (logged once at
    DEBUG on the ``starling.nn`` logger).
    """
    q, k, v = snp.asarray(query), snp.asarray(key), snp.asarray(value)
    _check(q, k, v, block_mask, enable_gqa)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    backend = str((kernel_options or {}).get("BACKEND", "AUTO")).upper()
    if backend not in ("AUTO", "NATIVE", "COMPOSITION"):
        raise ValueError(f"flex_attention: kernel_options BACKEND must be AUTO, NATIVE or "
                         f"COMPOSITION, got {backend!r}")
    dtype = q.dtype
    if snp.finfo(dtype).bits < 32:
        q, k, v = q.astype(snp.float32), k.astype(snp.float32), v.astype(snp.float32)
    L, S = q.shape[2], k.shape[2]
    dense = block_mask is None
    if dense:
        block = (128, 128)
        arrays = _mask_arrays(BM.dense_block_mask(L, S, block))
    else:
        block = block_mask.BLOCK_SIZE
        arrays = _mask_arrays(block_mask)
    params = dict(scale=scale, score_mod=score_mod, block=block, dense=dense)
    out = None
    if backend != "COMPOSITION":
        from . import flex_native
        kernel, why = flex_native.kernel_for(q.dtype, score_mod)
        if kernel is not None:
            out = flex_native.flex_attention_p.bind(q, k, v, *arrays, kernel=kernel, **params)
        elif backend == "NATIVE":
            raise ValueError(f"flex_attention: the native kernel cannot run: {why}")
        else:
            _log_once(why, "flex_attention: composition instead of the native kernel: %s", why)
    if out is None:
        out = attend(q, k, v, *arrays, **params)
    o, lse, mx = out
    o = o.astype(dtype)
    if return_aux is not None:
        return o, AuxOutput(lse if return_aux.lse else None,
                            mx if return_aux.max_scores else None)
    return (o, lse) if return_lse else o


class FlexAttention(Module):
    """A parameter-free layer applying :func:`flex_attention` with a fixed ``score_mod`` and
    options: ``FlexAttention(score_mod)(q, k, v, block_mask)`` (shapes and errors of
    :func:`flex_attention`)."""

    def __init__(self, score_mod=None, scale=None, enable_gqa=False, kernel_options=None):
        super().__init__()
        self.score_mod, self.scale, self.enable_gqa = score_mod, scale, enable_gqa
        self.kernel_options = kernel_options

    def forward(self, query, key, value, block_mask=None):
        """``flex_attention(query, key, value, score_mod, block_mask, ...)``."""
        return flex_attention(query, key, value, self.score_mod, block_mask, self.scale,
                              self.enable_gqa, kernel_options=self.kernel_options)
