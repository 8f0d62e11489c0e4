"""``starling.nn.functional``: activations, attention, dropout, normalisation, convolution,
pooling and losses as pure functions (PyTorch's names and argument conventions: ``dim`` is the
axis, the class / channel dim of batched input is 1).

All functions are compositions of ``starling.numpy`` operations (plus the ``erf`` primitive),
so they work under grad, vmap and compile. Randomness (dropout) comes from an explicit key.
"""
from __future__ import annotations

import math

from .. import numpy as snp
from .. import random
from ..arrays.ops.special import erf, erfc  # noqa: F401  (re-exported)
from ..transforms.custom import custom_jvp
from .ctc_loss import ctc_loss  # noqa: F401
from .distances import cdist, pdist  # noqa: F401
from .functional_conv import (  # noqa: F401
    avg_pool1d, avg_pool2d, conv1d, conv2d, max_pool1d, max_pool2d,
)
from .losses import (  # noqa: F401
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div,
    l1_loss, mse_loss, nll_loss, smooth_l1_loss,
)
from .linear_cross_entropy import linear_cross_entropy  # noqa: F401

__all__ = [
    "relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish", "softplus",
    "sigmoid", "logsigmoid", "tanh", "softmax", "log_softmax", "softmin", "glu", "hardtanh",
    "hardsigmoid", "hardswish", "softsign", "erf", "erfc",
    "dropout", "linear", "bilinear", "embedding", "one_hot", "normalize",
    "layer_norm", "rms_norm", "batch_norm", "scaled_dot_product_attention",
    "conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "ctc_loss", "cdist", "pdist", "linear_cross_entropy",
]


# ---- activations ---------------------------------------------------------------------------------
# Kinks follow PyTorch's subgradients: relu / relu6 / hardtanh have derivative 0 at their corners
# (clip with static bounds), leaky_relu has the negative slope at 0.

def relu(x):
    """``max(x, 0)`` elementwise; derivative 0 at 0, NaN propagates. Shape and dtype kept
    (integers stay integers)."""
    return snp.clip(x, 0, None)


def relu6(x):
    """``min(max(x, 0), 6)``; shape and dtype kept."""
    return snp.clip(x, 0, 6)


def hardtanh(x, min_val=-1.0, max_val=1.0):
    """``clip(x, min_val, max_val)``; derivative 1 strictly inside, 0 elsewhere (PyTorch).
    Shape and dtype kept: for integer ``x`` the bounds must be whole numbers.

    Raises:
        ValueError: ``min_val > max_val``, or fractional bounds for integer ``x``.
    """
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must not exceed max_val ({max_val})")
    if snp.isdtype(snp.asarray(x).dtype, "integral"):
        if min_val != int(min_val) or max_val != int(max_val):
            raise ValueError(f"hardtanh: integer input needs whole-number bounds, got "
                             f"{min_val}, {max_val}")
        min_val, max_val = int(min_val), int(max_val)
    return snp.clip(x, min_val, max_val)


def leaky_relu(x, negative_slope=0.01):
    """``x`` where ``x > 0`` else ``negative_slope * x``."""
    return snp.where(x > 0, x, x * negative_slope)


def elu(x, alpha=1.0):
    """``x`` where ``x > 0`` else ``alpha * (exp(x) - 1)`` (Clevert et al. 2016)."""
    return snp.where(x > 0, x, snp.expm1(snp.where(x > 0, 0.0, x)) * alpha)


def celu(x, alpha=1.0):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (Barron 2017)."""
    return snp.where(x > 0, x, snp.expm1(snp.where(x > 0, 0.0, x) / alpha) * alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """``scale * elu(x, alpha)`` with Klambauer et al. (2017)'s constants."""
    return elu(x, _SELU_ALPHA) * _SELU_SCALE


def gelu(x, approximate="none"):
    """Gaussian error linear unit (Hendrycks & Gimpel 2016).

    ``approximate="none"``: ``x * Phi(x) = x/2 * erfc(-x / sqrt(2))`` (erfc keeps full relative
    accuracy for very negative x); ``"tanh"``: ``x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3)))``.

    Raises:
        ValueError: another ``approximate`` value.
    """
    if approximate == "none":
        return x * erfc(x * -0.7071067811865476) * 0.5
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * (snp.tanh(inner) + 1.0) * 0.5
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


@custom_jvp
def _sigmoid(x):
    t = snp.exp(-snp.abs(x))  # never overflows
    return snp.where(x >= 0, 1.0 / (1.0 + t), t / (1.0 + t))


@_sigmoid.defjvp
def _sigmoid_jvp(primals, tangents):
    s = _sigmoid(primals[0])
    return s, tangents[0] * s * (1.0 - s)


def sigmoid(x):
    """``1 / (1 + exp(-x))``, computed without overflow; derivative ``s (1 - s)``."""
    return _sigmoid(_float_input(x, complex_ok=False))


def _float_input(x, complex_ok=True):
    """``x`` as an array; integers and bools become float32 (Starling's default float)."""
    x = snp.asarray(x)
    kinds = ("real floating", "complex floating") if complex_ok else ("real floating",)
    return x if snp.isdtype(x.dtype, kinds) else snp.astype(x, snp.float32)


def logsigmoid(x):
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``."""
    return -snp.logaddexp(-x, 0.0)


def tanh(x):
    """Elementwise hyperbolic tangent (``starling.numpy.tanh``; PyTorch ``F.tanh``)."""
    return snp.tanh(x)


def silu(x):
    """``x * sigmoid(x)`` (a.k.a. swish; Elfwing et al. 2018)."""
    return x * sigmoid(x)


def softplus(x, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, and ``x`` where ``beta x > threshold`` (PyTorch)."""
    bx = x * beta if beta != 1.0 else x
    soft = snp.logaddexp(bx, 0.0)
    if beta != 1.0:
        soft = soft / beta
    return snp.where(bx > threshold, x, soft)


def mish(x):
    """``x * tanh(softplus(x))`` (Misra 2019)."""
    return x * snp.tanh(softplus(x))


def softsign(x):
    """``x / (1 + |x|)``."""
    return x / (snp.abs(x) + 1.0)


def hardsigmoid(x):
    """``relu6(x + 3) / 6``."""
    return snp.clip(x / 6.0 + 0.5, 0.0, 1.0)


def hardswish(x):
    """``x * relu6(x + 3) / 6`` (Howard et al. 2019)."""
    return x * hardsigmoid(x)


def softmax(x, dim=-1):
    """``exp(x) / sum(exp(x), dim)`` with the max subtracted first (no overflow).

    A slice that is all ``-inf`` gives NaN, as in PyTorch.
    """
    return _softmax(x, dim)


def _softmax(x, axis=-1, where=None):
    """Softmax over ``axis`` counting only the entries where ``where`` is True.

    The one implementation behind ``nn.functional.softmax`` (PyTorch's ``dim=``) and
    ``nn.softmax`` (JAX's ``axis=, where=``). Masked-out entries are 0 and get no gradient; a
    slice with no entry left is all 0 (no NaN, in values or derivatives). Without ``where`` a
    slice of only ``-inf`` gives NaN, as in PyTorch and JAX.

    Args:
        x: ``(*dims)`` floating array.
        axis: int or tuple of ints.
        where: None, or a bool array broadcastable to ``x``.
    """
    if where is None:
        m = snp.max(x, axis=axis, keepdims=True)
        e = snp.exp(x - _stop(m))
        return e / snp.sum(e, axis=axis, keepdims=True)
    x, keep = _masked_input(x, where)
    m = snp.max(x, axis=axis, keepdims=True)
    e = snp.where(keep, snp.exp(x - _stop(snp.where(snp.isfinite(m), m, 0))), 0)
    s = snp.sum(e, axis=axis, keepdims=True)
    return e / snp.where(s > 0, s, 1)


def _masked_input(x, where):
    """``x`` with the entries ``where`` leaves out set to ``-inf``, and the broadcast mask."""
    x = snp.asarray(x)
    keep = snp.broadcast_to(snp.asarray(where, dtype=snp.bool_), x.shape)
    return snp.where(keep, x, -math.inf), keep


def log_softmax(x, dim=-1):
    """``x - logsumexp(x, dim)``; see ``_log_softmax`` for the method."""
    return _log_softmax(x, dim)


def _log_softmax(x, axis=-1, where=None):
    """``x - logsumexp(x, axis)`` over the entries where ``where`` is True, computed as ``(x - m) - log1p(r)`` with ``m = x_k`` the max of
    the slice and ``r`` the sum of ``exp(x_j - m)`` over the other entries: subtracting a large
    logsumexp from a large ``x`` would lose the small difference (``[1e30, 1e30, -1e30, 0]``
    gives ``log(1/2)`` for the first two; float32 logits near 1000 keep their last bits), and
    ``log1p`` keeps the log-probability of a confident prediction (``-1e-8`` in float32, where
    ``log(1 + 1e-8)`` is 0). ``m`` is read with argmax, so the derivative is exact (no stop
    gradient). A slice with ``+inf`` or only ``-inf`` gives NaN entries, as in PyTorch and JAX.

    The one implementation behind ``nn.functional.log_softmax`` (``dim=``) and
    ``nn.log_softmax`` (JAX's ``axis=, where=``): masked-out entries are ``-inf`` and get no
    gradient; a slice with no entry left is all ``-inf`` (no NaN). A tuple ``axis`` is moved
    last and flattened into one axis.
    """
    x = _float_input(x)
    if isinstance(axis, (tuple, list)):
        return _over_axes(lambda y, w: _log_softmax(y, -1, w), x, axis, where)
    if where is not None:
        xm, keep = _masked_input(x, where)
        some = snp.any(keep, axis=axis, keepdims=True)
        out = _log_softmax(snp.where(some, xm, 0), axis)
        return snp.where(keep, out, -math.inf)
    if x.ndim == 0:
        return x - x
    k = snp.argmax(x, axis=axis, keepdims=True)
    m = snp.take_along_axis(x, k, axis=axis)
    finite = snp.isfinite(m)
    shifted = x - snp.where(finite, m, 0)
    e = snp.exp(shifted)
    at_k = snp.arange(x.shape[axis]).reshape(
        (-1,) + (1,) * (x.ndim - 1 - (axis % x.ndim))) == k
    rest = snp.sum(snp.where(at_k, 0, e), axis=axis, keepdims=True)
    e_k = snp.sum(snp.where(at_k, e, 0), axis=axis, keepdims=True)
    # a non-finite max: the plain formula (its NaN / -inf entries are the standard ones)
    lse = snp.where(finite, snp.log1p(rest), snp.log(rest + e_k))
    return shifted - lse


def _over_axes(fn, x, axes, where):
    """``fn(y, w)`` applied with ``axes`` of ``x`` (and of the mask ``where``) moved last and
    flattened into one, then put back."""
    axes = tuple(a % x.ndim for a in axes)
    rest = tuple(a for a in range(x.ndim) if a not in axes)
    order = rest + axes
    moved_shape = tuple(x.shape[a] for a in order)
    flat = (-1,) if not rest else (*moved_shape[:len(rest)], -1)

    def to_flat(a):
        return snp.reshape(snp.permute_dims(a, order), flat) if rest or len(axes) != 1 else a
    w = None if where is None else to_flat(snp.broadcast_to(snp.asarray(where), x.shape))
    y = snp.reshape(fn(to_flat(x), w), moved_shape)
    return snp.permute_dims(y, tuple(order.index(a) for a in range(x.ndim)))


def softmin(x, dim=-1):
    """``softmax(-x, dim)`` (PyTorch ``F.softmin``): weights favouring the smallest entries."""
    return softmax(-x, dim)


def glu(x, dim=-1):
    """Gated linear unit (Dauphin et al. 2017): ``a * sigmoid(b)`` where ``a, b`` are the two
    halves of ``x`` along ``dim``. Shape ``(..., 2n, ...) -> (..., n, ...)``.

    Raises:
        ValueError: the size of ``dim`` is odd.
    """
    n = x.shape[dim]
    if n % 2:
        raise ValueError(f"glu: dim {dim} must have an even size, got {n} (shape {x.shape})")
    a, b = snp.split(x, 2, axis=dim)
    return a * sigmoid(b)


def _stop(x):
    from .. import stop_gradient
    return stop_gradient(x)


# ---- dropout, linear, embedding ------------------------------------------------------------------

def dropout(x, p=0.5, training=True, *, key=None):
    """Zeroes each element with probability ``p`` and scales the rest by ``1 / (1 - p)``
    (Srivastava et al. 2014). Identity when not ``training`` or ``p == 0``.

    Args:
        key: PRNG key (required when active).
    Raises:
        ValueError: ``p`` outside [0, 1]. TypeError: active without a key.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if key is None:
        raise TypeError("dropout: in training mode dropout needs an explicit PRNG key: pass "
                        "key=starling.random.key(...) (or call model.eval())")
    if p == 1.0:
        return snp.zeros_like(x)
    keep = random.bernoulli(key, 1.0 - p, tuple(x.shape))
    return snp.where(keep, x / (1.0 - p), 0.0)


def linear(x, weight, bias=None):
    """``x @ weight.T + bias``: ``(*, in) x (out, in) -> (*, out)``."""
    y = snp.matmul(x, snp.matrix_transpose(weight))
    return y if bias is None else y + bias


def bilinear(x1, x2, weight, bias=None):
    """``y_o = x1^T A_o x2 + b_o``: ``(*, in1), (*, in2), (out, in1, in2) -> (*, out)``."""
    y = snp.einsum("...i,oij,...j->...o", x1, weight, x2)
    return y if bias is None else y + bias


def embedding(indices, weight, padding_idx=None):
    """Rows of ``weight`` ``(num, dim)`` at integer ``indices`` ``(*)`` -> ``(*, dim)``.

    Rows looked up at ``padding_idx`` get no gradient (PyTorch).
    """
    if not snp.isdtype(snp.asarray(indices).dtype, "integral"):
        raise TypeError(f"embedding: indices must be integers, got {snp.asarray(indices).dtype}")
    out = snp.take(weight, indices, axis=0)
    if padding_idx is not None:
        pad = (indices == padding_idx)[..., None]
        out = snp.where(pad, _stop(out), out)
    return out


def one_hot(indices, num_classes=-1):
    """int64 ``(*, num_classes)`` one-hot of integer ``indices`` ``(*)``; ``num_classes=-1``
    uses ``max + 1`` (needs concrete indices). An index outside ``[0, num_classes)`` gives a
    row of zeros."""
    if num_classes < 0:
        num_classes = int(snp.max(indices)) + 1
    return _one_hot(indices, num_classes, snp.int64, -1)


def _one_hot(indices, num_classes, dtype, axis):
    """``indices == arange(num_classes)`` as ``dtype``, the class axis inserted at ``axis``:
    the one implementation of PyTorch's ``one_hot`` and JAX's ``nn.one_hot``."""
    indices = snp.asarray(indices)
    axis = axis % (indices.ndim + 1)
    classes = snp.reshape(snp.arange(num_classes), (-1,) + (1,) * (indices.ndim - axis))
    return snp.astype(snp.expand_dims(indices, axis) == classes, dtype)


def normalize(x, p=2.0, dim=1, eps=1e-12):
    """``x / max(||x||_p, eps)`` along ``dim``."""
    norm = snp.sum(snp.abs(x) ** p, axis=dim, keepdims=True) ** (1.0 / p)
    return x / snp.maximum(norm, eps)


# ---- normalisation -------------------------------------------------------------------------------

def _norm_axes(op, x, normalized_shape):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if tuple(x.shape[x.ndim - k:]) != shape or x.ndim < k:
        raise ValueError(f"{op}: input shape {tuple(x.shape)} does not end with normalized_shape "
                         f"{shape}")
    return tuple(range(x.ndim - k, x.ndim))


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Ba et al. (2016): ``(x - mean) / sqrt(var + eps) * weight + bias`` over the trailing
    ``normalized_shape`` dims (biased variance)."""
    y = _standardize(x, _norm_axes("layer_norm", x, normalized_shape), eps)
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


def _standardize(x, axes, eps, mean=None, variance=None, where=None):
    """``(x - mean) / sqrt(variance + eps)`` over ``axes``, the statistics (biased variance,
    two-pass) taken over the entries ``where`` keeps unless given; the one implementation of
    ``layer_norm`` and JAX's ``nn.standardize``."""
    if mean is None:
        mean = snp.mean(x, axis=axes, keepdims=True, where=where)
    xc = x - mean
    if variance is None:
        variance = snp.mean(xc * xc, axis=axes, keepdims=True, where=where)
    return xc * snp.rsqrt(variance + eps)


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """Zhang & Sennrich (2019): ``x / sqrt(mean(x^2) + eps) * weight`` over the trailing
    ``normalized_shape`` dims; ``eps=None`` is the dtype's machine epsilon (PyTorch)."""
    axes = _norm_axes("rms_norm", x, normalized_shape)
    if eps is None:
        eps = float(snp.finfo(x.dtype).eps)
    y = x * snp.rsqrt(snp.mean(x * x, axis=axes, keepdims=True) + eps)
    return y if weight is None else y * weight


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Ioffe & Szegedy (2015) over ``(N, C, *)`` input, per channel ``C``.

    ``training``: normalise with the batch's mean and biased variance; otherwise with
    ``running_mean`` / ``running_var``. Pure: the running statistics are NOT updated here (the
    BatchNorm modules do that, see ``nn.BatchNorm1d``); ``momentum`` is accepted for
    PyTorch's signature.
    """
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected input (N, C, *), got shape {tuple(x.shape)}")
    axes = (0,) + tuple(range(2, x.ndim))
    cs = _channel_shape(x)
    if training or running_mean is None:
        mean = snp.mean(x, axis=axes, keepdims=True)
        xc = x - mean
        var = snp.mean(xc * xc, axis=axes, keepdims=True)
    else:
        xc = x - snp.reshape(running_mean, cs)
        var = snp.reshape(running_var, cs)
    y = xc * snp.rsqrt(var + eps)
    if weight is not None:
        y = y * snp.reshape(weight, cs)
    return y if bias is None else y + snp.reshape(bias, cs)


# ---- attention -----------------------------------------------------------------------------------

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False, *,
                                 dropout_key=None):
    """``softmax(q k^T * scale + mask) v`` (Vaswani et al. 2017), PyTorch's conventions.

    Args:
        query: ``(*batch, Hq, L, E)`` (or any ``(*, L, E)``).
        key: ``(*batch, Hk, S, E)``; value: ``(*batch, Hk, S, Ev)``.
        attn_mask: broadcastable to ``(*, L, S)``: bool (True = may attend) or float (added
            to the scores).
        dropout_p: dropout probability on the attention weights (needs ``dropout_key``).
        is_causal: attend only to positions ``j <= i`` (lower-triangular ``(L, S)`` mask).
        scale: default ``1 / sqrt(E)``.
        enable_gqa: grouped-query attention: key / value heads (dim -3) are repeated to
            ``Hq`` (``Hq`` a multiple of ``Hk``).
    Returns:
        ``(*batch, Hq, L, Ev)``. A query row that may attend to nothing gives NaN (PyTorch).
    Raises:
        ValueError: both ``attn_mask`` and ``is_causal``; bad head counts for gqa.
    """
    if attn_mask is not None and is_causal:
        raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal")
    e = query.shape[-1]
    scale = 1.0 / math.sqrt(e) if scale is None else scale
    if enable_gqa:
        key, value = _repeat_kv_heads("scaled_dot_product_attention", query, key, value)
    scores = snp.matmul(query, snp.matrix_transpose(key)) * scale
    L, S = query.shape[-2], key.shape[-2]
    if is_causal:
        attn_mask = snp.tril(snp.ones((L, S), dtype=snp.bool_))
    if attn_mask is not None:
        attn_mask = snp.asarray(attn_mask)
        if attn_mask.dtype == snp.bool_:
            scores = snp.where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
    w = softmax(scores, dim=-1)
    if dropout_p > 0.0:
        w = dropout(w, dropout_p, True, key=dropout_key)
    return snp.matmul(w, value)


def _repeat_kv_heads(op, query, key, value):
    """Grouped-query attention (Ainslie et al. 2023): key / value heads (dim -3) repeated so
    each of the ``Hq`` query heads has its own; ``Hq`` must be a multiple of ``Hk``."""
    hq, hk = query.shape[-3], key.shape[-3]
    if hq == hk:
        return key, value
    if hk == 0 or hq % hk:
        raise ValueError(f"{op}: query heads ({hq}) must be a multiple of key/value heads "
                         f"({hk}) for grouped-query attention")
    return snp.repeat(key, hq // hk, axis=-3), snp.repeat(value, hq // hk, axis=-3)


# ---- NumPy inputs --------------------------------------------------------------------------------
# NumPy arrays passed to these functions become Starling arrays first, so NumPy's own promotion
# (int32 / 6.0 -> float64) never leaks in: results follow Starling's rules, eagerly and compiled
# alike. Python scalars are left to the functions (they are weak).

def _starling_inputs(fn):
    import functools

    import numpy as _np

    from ..arrays.convert import operand

    def conv(v):
        return operand(v, fn.__name__) if isinstance(v, (_np.ndarray, _np.generic)) else v

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        return fn(*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()})
    return wrapped


for _name in __all__:
    globals()[_name] = _starling_inputs(globals()[_name])
del _name

# Flex attention (its own files; added after the NumPy-input wrapping above, which it does
# itself: BlockMask is a class, not a function to wrap).
from .block_mask import (  # noqa: E402
    BlockMask, and_masks, create_block_mask, create_mask, noop_mask, or_masks,
)
from .flex_attention import AuxOutput, AuxRequest, flex_attention  # noqa: E402

__all__ += ["flex_attention", "create_block_mask", "create_mask", "BlockMask", "AuxRequest",
            "AuxOutput", "and_masks", "or_masks", "noop_mask"]
