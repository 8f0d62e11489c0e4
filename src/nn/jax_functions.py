"""JAX's ``jax.nn`` function names and keywords, on ``starling.nn``.

``starling.nn.functional`` speaks PyTorch (``softmax(x, dim=-1)``, ``gelu(x,
approximate="none")``); ``starling.nn`` also speaks JAX (``softmax(x, axis=-1, where=None)``,
``gelu(x, approximate=True)``). Each JAX name is a thin adapter over the same implementation as
its PyTorch twin, so values, derivatives and edge cases agree between the two spellings; where
JAX's behaviour differs (its ``gelu`` defaults to the tanh form, ``softplus`` has no threshold,
``one_hot`` returns floats and zero rows for out-of-range indices) the adapter says so.

Shapes are kept (``(*dims) -> (*dims)``) unless a docstring says otherwise; floating inputs keep
their dtype, integer inputs of the smooth functions compute in float32 (Starling's default).
"""
from __future__ import annotations

import math

from .. import numpy as snp
from . import functional as F

__all__ = [
    "relu", "relu6", "sigmoid", "softplus", "sparse_plus", "sparse_sigmoid", "soft_sign", "silu",
    "swish", "log_sigmoid", "leaky_relu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
    "elu", "celu", "selu", "gelu", "glu", "squareplus", "mish", "identity", "softmax",
    "log_softmax", "logsumexp", "logmeanexp", "log1mexp", "standardize", "one_hot",
    "dot_product_attention",
]

relu = F.relu
relu6 = F.relu6
sigmoid = F.sigmoid
soft_sign = F.softsign
silu = swish = F.silu
log_sigmoid = F.logsigmoid
leaky_relu = F.leaky_relu
hard_sigmoid = F.hardsigmoid
hard_silu = hard_swish = F.hardswish
selu = F.selu
mish = F.mish
elu = F.elu
celu = F.celu


def hard_tanh(x):
    """``clip(x, -1, 1)``; derivative 1 strictly inside, 0 elsewhere (JAX ``nn.hard_tanh``)."""
    return F.hardtanh(x)


def softplus(x):
    """``log(1 + exp(x))`` for every ``x`` (JAX: no threshold switching to ``x``), computed as
    ``logaddexp(x, 0)`` so it never overflows."""
    return F.softplus(x, 1.0, math.inf)


def sparse_plus(x):
    """Sparse plus (Martins & Astudillo 2016's sparsemax applied to ``[x, 0]``): ``0`` for
    ``x <= -1``, ``(x + 1)^2 / 4`` for ``-1 < x < 1``, ``x`` for ``x >= 1``; continuously
    differentiable, derivative ``sparse_sigmoid``."""
    x = F._float_input(x)
    return snp.where(x <= -1.0, 0.0, snp.where(x >= 1.0, x, (x + 1.0) ** 2 * 0.25))


def sparse_sigmoid(x):
    """``clip((x + 1) / 2, 0, 1)``: the derivative of ``sparse_plus`` (derivative 0 at the
    corners, as ``clip`` everywhere in Starling)."""
    return snp.clip((F._float_input(x) + 1.0) * 0.5, 0.0, 1.0)


def squareplus(x, b=4):
    """``(x + sqrt(x^2 + b)) / 2`` (Barron 2021), a smooth ReLU with only algebraic operations.

    Raises:
        ValueError: ``b < 0``.
    """
    if b < 0:
        raise ValueError(f"squareplus: b must be >= 0, got {b}")
    x = F._float_input(x)
    return (x + snp.sqrt(x * x + b)) * 0.5


def identity(x):
    """``x`` itself (as an array): JAX's ``nn.identity`` activation."""
    return snp.asarray(x)


def gelu(x, approximate=True):
    """Gaussian error linear unit (Hendrycks & Gimpel 2016), JAX's default: the tanh form when
    ``approximate`` is True, the exact ``x * Phi(x)`` otherwise (``nn.functional.gelu``)."""
    return F.gelu(x, "tanh" if approximate else "none")


def glu(x, axis=-1):
    """Gated linear unit ``a * sigmoid(b)`` of the halves of ``x`` along ``axis``.

    Raises:
        ValueError: the size of ``axis`` is odd.
    """
    return F.glu(x, dim=axis)


def softmax(x, axis=-1, where=None):
    """``exp(x) / sum(exp(x))`` over ``axis`` (int or tuple), the max subtracted first.

    ``where``: a bool mask broadcastable to ``x``; left-out entries are 0, take no part in the
    sum and get no gradient; a slice with nothing left is all 0 (no NaN). Without ``where`` a
    slice of only ``-inf`` gives NaN, as in JAX.
    """
    return F._softmax(F._float_input(x), axis, where)


def log_softmax(x, axis=-1, where=None):
    """``x - logsumexp(x, axis)``, accurate for huge and confident logits (see
    ``nn.functional.log_softmax``). ``where``: left-out entries are ``-inf`` with no gradient;
    a slice with nothing left is all ``-inf`` (no NaN)."""
    return F._log_softmax(x, axis, where)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """``log(sum(b * exp(a)))`` over ``axis`` (``starling.numpy.logsumexp``, SciPy's
    semantics), counting only the entries ``where`` keeps: a left-out entry is absent (weight 0),
    so it contributes nothing to the value or to the gradients, even if it is infinite."""
    if where is not None:
        keep = snp.asarray(where, dtype=snp.bool_)
        b = snp.where(keep, 1.0 if b is None else b, 0.0)
    return snp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """``log(mean(exp(x)))`` over ``axis``: ``logsumexp`` minus the log of the number of
    entries counted (those ``where`` keeps). A slice with nothing counted gives NaN (the mean
    of nothing)."""
    x = F._float_input(x)
    lse = logsumexp(x, axis=axis, keepdims=keepdims, where=where)
    ones = snp.ones(x.shape, x.dtype) if where is None else \
        snp.astype(snp.broadcast_to(snp.asarray(where, dtype=snp.bool_), x.shape), x.dtype)
    return lse - snp.log(snp.sum(ones, axis=axis, keepdims=keepdims))


def log1mexp(x):
    """``log(1 - exp(-x))`` for ``x >= 0``, accurate everywhere (Mächler 2012, "Accurately
    computing log(1 - exp(-|a|))"): ``log(-expm1(-x))`` for ``x <= log 2``, ``log1p(-exp(-x))``
    above. ``x = 0`` gives ``-inf``, ``x < 0`` NaN (1 - exp(-x) is negative)."""
    x = F._float_input(x)
    small = x <= math.log(2.0)
    # each branch sees an input where it is finite, so the untaken one leaks no NaN gradient
    lo = snp.log(-snp.expm1(-snp.where(small, x, 1.0)))
    hi = snp.log1p(-snp.exp(-snp.where(small, 1.0, x)))
    return snp.where(small, lo, hi)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axis`` (int or tuple): JAX's
    ``nn.standardize``, the same code as ``nn.functional.layer_norm`` without the affine part.

    ``mean`` / ``variance`` default to the (biased, two-pass) statistics of the entries
    ``where`` keeps; given ones must broadcast against ``x`` with ``axis`` kept as size 1.
    """
    x = F._float_input(x)
    return F._standardize(x, axis, epsilon, mean, variance, where)


def one_hot(x, num_classes, *, dtype=snp.float32, axis=-1):
    """One-hot encoding: ``x (*dims)`` integer -> ``(*dims, num_classes)`` of ``dtype``
    (default float32), the class axis placed at ``axis``. An index outside ``[0,
    num_classes)`` gives all zeros (JAX; ``nn.functional.one_hot`` does the same).

    Raises:
        TypeError: non-integer ``x``; ValueError: ``num_classes < 0``.
    """
    x = snp.asarray(x)
    if not snp.isdtype(x.dtype, "integral"):
        raise TypeError(f"one_hot: x must hold integer class indices, got dtype {x.dtype}")
    if int(num_classes) < 0:
        raise ValueError(f"one_hot: num_classes must be >= 0, got {num_classes}")
    return F._one_hot(x, int(num_classes), dtype, axis)


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None):
    """Scaled dot-product attention in JAX's layout (Vaswani et al. 2017).

    Args:
        query: ``(B, T, N, H)`` or unbatched ``(T, N, H)``.
        key, value: ``(B, S, K, H)`` (value may have its own last dim); ``N`` a multiple of
            ``K`` (grouped-query attention: each key / value head serves ``N / K`` query heads).
        bias: optional float array broadcastable to ``(B, N, T, S)``, added to the logits.
        mask: optional bool array broadcastable to ``(B, N, T, S)``; True = may attend.
        scale: logit scale, default ``1 / sqrt(H)``.
        is_causal: query ``i`` attends to keys ``j <= i``.
        query_seq_lengths, key_value_seq_lengths: optional int ``(B,)``: positions at or past a
            sequence's length are padding (masked; a padded query row gives zeros).
        local_window_size: int ``w`` or ``(left, right)``: query ``i`` attends to keys
            ``i - left <= j <= i + right`` (an int is ``(w, w)``).
        implementation: None or ``"xla"`` (accepted for JAX code; one implementation here).
    Returns:
        ``(B, T, N, Hv)`` (unbatched in, unbatched out). A query that may attend to nothing
        gives a zero row (and zero gradients), never NaN.
    Raises:
        ValueError: ranks, head counts or head sizes that do not fit; an unknown
            ``implementation``.
    """
    op = "dot_product_attention"
    if implementation not in (None, "xla"):
        raise ValueError(f"{op}: implementation must be None or 'xla' on this backend, got "
                         f"{implementation!r}")
    q, k, v = (snp.asarray(a) for a in (query, key, value))
    unbatched = q.ndim == 3
    if unbatched:
        q, k, v = q[None], k[None], v[None]
    if not q.ndim == k.ndim == v.ndim == 4:
        raise ValueError(f"{op}: query, key, value must all be (B, T, N, H) or (T, N, H), got "
                         f"shapes {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if q.shape[-1] != k.shape[-1] or k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
        raise ValueError(f"{op}: query / key head sizes and key / value lengths and heads must "
                         f"match, got shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    # to (B, heads, length, H), the layout the shared attention code works in
    q, k, v = (snp.permute_dims(a, (0, 2, 1, 3)) for a in (q, k, v))
    k, v = F._repeat_kv_heads(op, q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = snp.matmul(q, snp.matrix_transpose(k)) * scale
    if bias is not None:
        logits = logits + bias
    keep = _attention_mask(q.shape[-2], k.shape[-2], mask, is_causal, query_seq_lengths,
                           key_value_seq_lengths, local_window_size)
    out = snp.matmul(F._softmax(logits, -1, keep), v)
    out = snp.permute_dims(out, (0, 2, 1, 3))
    return out[0] if unbatched else out


def _attention_mask(T, S, mask, is_causal, q_lengths, kv_lengths, window):
    """The bool mask ``(B or 1, N or 1, T, S)`` (True = may attend) combining every way of
    masking ``dot_product_attention`` accepts, or None when nothing is masked."""
    i = snp.arange(T)[:, None]
    j = snp.arange(S)[None, :]
    parts = [] if mask is None else [snp.asarray(mask, dtype=snp.bool_)]
    if is_causal:
        parts.append(j <= i)
    if window is not None:
        left, right = (window, window) if isinstance(window, int) else tuple(window)
        parts.append((j >= i - left) & (j <= i + right))
    if q_lengths is not None:
        parts.append(i < snp.asarray(q_lengths)[:, None, None, None])
    if kv_lengths is not None:
        parts.append(j < snp.asarray(kv_lengths)[:, None, None, None])
    if not parts:
        return None
    keep = parts[0]
    for p in parts[1:]:
        keep = keep & p
    return keep


for _name in __all__:
    if globals()[_name].__module__ == __name__:  # the adapters above; F's are wrapped there
        globals()[_name] = F._starling_inputs(globals()[_name])
del _name
