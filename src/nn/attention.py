"""MultiheadAttention (Vaswani et al. 2017, "Attention is all you need"), PyTorch's layer."""
from __future__ import annotations

import math

from .. import numpy as snp
from .. import random
from . import functional as F
from . import init
from .layers import Linear
from .module import Module

__all__ = ["MultiheadAttention"]


def _float_mask(mask, dtype):
    """PyTorch's MHA masks: bool True = NOT allowed (-> -inf); float masks are added."""
    if mask is None:
        return None
    mask = snp.asarray(mask)
    if mask.dtype == snp.bool_:
        return snp.where(mask, -math.inf, 0.0).astype(dtype)
    return mask.astype(dtype)


def _pad_last(mask, value=0.0):
    if mask is None:
        return None
    widths = ((0, 0),) * (mask.ndim - 1) + ((0, 1),)
    return snp.pad(mask, widths, constant_values=value)


class MultiheadAttention(Module):
    """Multi-head attention: ``softmax(q_h k_h^T / sqrt(d) + mask) v_h`` per head, concatenated
    and projected.

    Args:
        embed_dim: ``E``; num_heads: ``H`` (``E`` divisible by ``H``, head dim ``d = E / H``).
        dropout: dropout on the attention weights in training mode (needs ``dropout_key``).
        bias: biases on the input / output projections.
        add_bias_kv: learned ``bias_k`` / ``bias_v`` ``(1, 1, E)`` appended to the key / value
            sequences. add_zero_attn: a zero key / value appended after projection.
        kdim, vdim: key / value feature sizes (default ``E``).
        batch_first: inputs are ``(N, L, E)`` instead of ``(L, N, E)``.
        key: PRNG key or int seed for the initial parameters.

    Parameters (PyTorch's initialisation): ``in_proj_weight`` ``(3E, E)`` xavier_uniform (or
    ``q_proj_weight`` ``(E, E)``, ``k_proj_weight`` ``(E, kdim)``, ``v_proj_weight``
    ``(E, vdim)`` when kdim / vdim differ), ``in_proj_bias`` ``(3E,)`` zeros, ``out_proj`` a
    Linear(E, E) with a zero bias, ``bias_k`` / ``bias_v`` xavier_normal.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, *, key=None, dtype=snp.float32):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be a positive "
                             f"multiple of num_heads ({num_heads})")
        keys = random.split(init.as_key(key, "MultiheadAttention"), 6)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.dropout, self.batch_first = dropout, batch_first
        self.add_zero_attn = add_zero_attn
        same = self.kdim == embed_dim and self.vdim == embed_dim
        self._qkv_same_embed_dim = same
        E = embed_dim
        if same:
            self.in_proj_weight = init.xavier_uniform(keys[0], (3 * E, E), dtype=dtype)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.in_proj_weight = None
            self.q_proj_weight = init.xavier_uniform(keys[0], (E, E), dtype=dtype)
            self.k_proj_weight = init.xavier_uniform(keys[1], (E, self.kdim), dtype=dtype)
            self.v_proj_weight = init.xavier_uniform(keys[2], (E, self.vdim), dtype=dtype)
        self.in_proj_bias = init.zeros((3 * E,), dtype) if bias else None
        self.out_proj = Linear(E, E, bias=bias, key=keys[3], dtype=dtype)
        if bias:
            self.out_proj.bias = init.zeros((E,), dtype)
        if add_bias_kv:
            self.bias_k = init.xavier_normal(keys[4], (1, 1, E), dtype=dtype)
            self.bias_v = init.xavier_normal(keys[5], (1, 1, E), dtype=dtype)
        else:
            self.bias_k = self.bias_v = None

    def _project(self, query, key, value):
        E = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:E], w[E:2 * E], w[2 * E:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False, *,
                dropout_key=None):
        """Attention of ``query`` over ``key`` / ``value``.

        Shapes (``batch_first=False``): query ``(L, N, E)``, key ``(S, N, kdim)``, value
        ``(S, N, vdim)``; ``(N, L, E)`` etc. with ``batch_first``; unbatched ``(L, E)``.
        ``key_padding_mask`` ``(N, S)`` and ``attn_mask`` ``(L, S)`` or ``(N * H, L, S)``:
        bool (True = NOT allowed, PyTorch's MHA convention) or float (added). ``is_causal``
        with no ``attn_mask`` applies the causal mask (PyTorch requires the mask as well).
        ``dropout_key``: PRNG key for attention dropout in training mode.

        Returns:
            ``(output, weights)``: output like ``query`` but with ``E`` features; weights
            ``(N, L, S)`` (averaged over heads) or ``(N, H, L, S)``, or None when not
            ``need_weights``. A query that may attend to nothing gives NaN.
        """
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query[:, None], key[:, None], value[:, None]
            if key_padding_mask is not None:
                key_padding_mask = snp.asarray(key_padding_mask)[None]
        elif self.batch_first:
            query, key, value = (snp.swapaxes(t, 0, 1) for t in (query, key, value))
        # (L, N, E) layout from here, as PyTorch's reference algorithm.
        L, N, E = query.shape
        H, D = self.num_heads, self.head_dim
        if E != self.embed_dim:
            raise ValueError(f"MultiheadAttention: query has {E} features, expected "
                             f"embed_dim={self.embed_dim}")
        q, k, v = self._project(query, key, value)
        dt = q.dtype
        attn_mask = _float_mask(attn_mask, dt)
        kpm = _float_mask(key_padding_mask, dt)
        if attn_mask is None and is_causal:
            S0 = k.shape[0]
            attn_mask = snp.where(snp.tril(snp.ones((L, S0), dtype=snp.bool_)), 0.0,
                                  -math.inf).astype(dt)
        if self.bias_k is not None:
            k = snp.concatenate([k, snp.broadcast_to(self.bias_k, (1, N, E))], axis=0)
            v = snp.concatenate([v, snp.broadcast_to(self.bias_v, (1, N, E))], axis=0)
            attn_mask, kpm = _pad_last(attn_mask), _pad_last(kpm)
        S = k.shape[0]
        q = snp.permute_dims(snp.reshape(q, (L, N, H, D)), (1, 2, 0, 3))
        k = snp.permute_dims(snp.reshape(k, (S, N, H, D)), (1, 2, 0, 3))
        v = snp.permute_dims(snp.reshape(v, (S, N, H, D)), (1, 2, 0, 3))
        if self.add_zero_attn:
            k = snp.concatenate([k, snp.zeros((N, H, 1, D), dtype=dt)], axis=2)
            v = snp.concatenate([v, snp.zeros((N, H, 1, D), dtype=dt)], axis=2)
            attn_mask, kpm = _pad_last(attn_mask), _pad_last(kpm)
            S += 1
        scores = snp.matmul(q, snp.matrix_transpose(k)) * (1.0 / math.sqrt(D))
        if attn_mask is not None:
            if attn_mask.ndim == 3:
                attn_mask = snp.reshape(attn_mask, (N, H, L, S))
            scores = scores + attn_mask
        if kpm is not None:
            scores = scores + snp.reshape(kpm, (N, 1, 1, S))
        w = F.softmax(scores, dim=-1)
        if self.training and self.dropout > 0.0:
            w = F.dropout(w, self.dropout, True, key=dropout_key)
        out = snp.matmul(w, v)  # (N, H, L, D)
        out = snp.reshape(snp.permute_dims(out, (2, 0, 1, 3)), (L, N, E))
        out = self.out_proj(out)
        if unbatched:
            out = out[:, 0]
        elif self.batch_first:
            out = snp.swapaxes(out, 0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            w = snp.mean(w, axis=1)
        return out, (w[0] if unbatched else w)

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, batch_first={self.batch_first}")
