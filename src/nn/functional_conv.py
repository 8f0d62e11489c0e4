"""Convolution and pooling (``nn.functional.conv1d/2d``, ``max_pool1d/2d``, ``avg_pool1d/2d``).

Method: im2col. Each kernel offset is a strided static slice of the zero-padded input; the
``K = prod(kernel)`` slices are stacked into columns ``(N, C, K, *out)`` and contracted with the
weight reshaped to ``(O, C*K)`` by one batched matmul (grouped convolutions: one matmul per
group, batched). Only slicing, padding, stacking, reshapes and matmul are used, so the result
is differentiable (the transpose of a strided slice scatters back: the gradient of a
convolution is the transposed convolution) and vmappable, with every backend's matmul.
Cross-correlation, as in PyTorch (the kernel is not flipped).

Output length per spatial dim (PyTorch): ``floor((L + lo + hi - d (k - 1) - 1) / s) + 1``.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .. import numpy as snp

__all__ = ["conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d"]


def _tuple(op, name, v, nd):
    if isinstance(v, (int, np.integer)):
        return (int(v),) * nd
    t = tuple(int(a) for a in v)
    if len(t) != nd:
        raise ValueError(f"{op}: {name} must be an int or a tuple of {nd} ints, got {v!r}")
    return t


def _out_size(op, L, k, s, d, lo, hi, ceil_mode=False):
    span = L + lo + hi - d * (k - 1) - 1
    if span < 0:
        raise ValueError(f"{op}: the (dilated) kernel size {d * (k - 1) + 1} is larger than the "
                         f"padded input size {L + lo + hi}")
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= L + lo:  # the last window must start inside input / pad
        out -= 1
    return out


def _windows(xp, nd, ks, strides, dils, outs, axis):
    """Stack of the ``prod(ks)`` strided views of the last ``nd`` dims, stacked at ``axis``."""
    lead = (slice(None),) * (xp.ndim - nd)
    views = []
    for offs in itertools.product(*[range(k) for k in ks]):
        idx = lead + tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                           for o, d, s, n in zip(offs, dils, strides, outs))
        views.append(xp[idx])
    return snp.stack(views, axis=axis)


def _conv(op, nd, x, weight, bias, stride, padding, dilation, groups):
    x, weight = snp.asarray(x), snp.asarray(weight)
    unbatched = x.ndim == nd + 1
    if unbatched:
        x = x[None]
    if x.ndim != nd + 2 or weight.ndim != nd + 2:
        raise ValueError(f"{op}: expected input (N, C, {nd} spatial dims) or (C, ...) and weight "
                         f"(O, C/groups, {nd} kernel dims), got shapes {tuple(x.shape)} and "
                         f"{tuple(weight.shape)}")
    n, c = x.shape[:2]
    o, cg = weight.shape[:2]
    ks = tuple(weight.shape[2:])
    if groups < 1 or c % groups or o % groups or cg * groups != c:
        raise ValueError(f"{op}: input channels {c} and weight {tuple(weight.shape)} do not "
                         f"match groups={groups} (need C == weight.shape[1] * groups and "
                         "O divisible by groups)")
    strides = _tuple(op, "stride", stride, nd)
    dils = _tuple(op, "dilation", dilation, nd)
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * nd
        elif padding == "same":
            if any(s != 1 for s in strides):
                raise ValueError(f"{op}: padding='same' is not supported for strided "
                                 "convolutions")
            pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(ks, dils)]
        else:
            raise ValueError(f"{op}: padding must be 'same', 'valid', an int or a tuple, got "
                             f"{padding!r}")
    else:
        pads = [(p, p) for p in _tuple(op, "padding", padding, nd)]
    outs = tuple(_out_size(op, L, k, s, d, lo, hi)
                 for L, k, s, d, (lo, hi) in zip(x.shape[2:], ks, strides, dils, pads))
    if any(p != (0, 0) for p in pads):
        x = snp.pad(x, ((0, 0), (0, 0)) + tuple(pads))
    K = math.prod(ks)
    P = math.prod(outs)
    cols = _windows(x, nd, ks, strides, dils, outs, axis=2)  # (N, C, K, *out)
    if groups == 1:
        cols = snp.reshape(cols, (n, c * K, P))
        y = snp.matmul(snp.reshape(weight, (o, c * K)), cols)  # (N, O, P)
    else:
        cols = snp.reshape(cols, (n, groups, cg * K, P))
        w = snp.reshape(weight, (groups, o // groups, cg * K))
        y = snp.matmul(w, cols)  # (N, G, O/G, P)
    y = snp.reshape(y, (n, o) + outs)
    if bias is not None:
        y = y + snp.reshape(bias, (1, o) + (1,) * nd)
    return y[0] if unbatched else y


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """1-d cross-correlation: ``(N, C, L)`` (or ``(C, L)``) with weight ``(O, C/groups, k)``
    -> ``(N, O, L_out)``.

    Args:
        padding: int, 1-tuple, ``"valid"`` (0) or ``"same"`` (output length = input length;
            stride 1 only; an odd total padding puts the extra element on the right, as
            PyTorch).
    Raises:
        ValueError: mismatched shapes / groups, bad padding, a kernel larger than the input.
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """2-d cross-correlation: ``(N, C, H, W)`` (or ``(C, H, W)``) with weight
    ``(O, C/groups, kh, kw)`` -> ``(N, O, H_out, W_out)``. ``stride`` / ``padding`` /
    ``dilation`` are ints or pairs; ``padding`` may be ``"same"`` / ``"valid"`` (see conv1d)."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


# ---- pooling -------------------------------------------------------------------------------------

def _pool_setup(op, nd, x, kernel_size, stride, padding, dilation, ceil_mode):
    x = snp.asarray(x)
    if x.ndim < nd + 1:
        raise ValueError(f"{op}: expected input (N, C, {nd} spatial dims) or (C, ...), got shape "
                         f"{tuple(x.shape)}")
    ks = _tuple(op, "kernel_size", kernel_size, nd)
    strides = ks if stride is None or stride == () else _tuple(op, "stride", stride, nd)
    pads = _tuple(op, "padding", padding, nd)
    dils = _tuple(op, "dilation", dilation, nd)
    for k, p in zip(ks, pads):
        if p > k // 2:
            raise ValueError(f"{op}: padding ({p}) should be at most half the kernel size ({k})")
    spatial = tuple(x.shape[-nd:])
    outs = tuple(_out_size(op, L, k, s, d, p, p, ceil_mode)
                 for L, k, s, d, p in zip(spatial, ks, strides, dils, pads))
    # Extra right padding so that the last (ceil_mode) window fits.
    extra = tuple(max(0, (n - 1) * s + d * (k - 1) + 1 - (L + 2 * p))
                  for n, s, d, k, L, p in zip(outs, strides, dils, ks, spatial, pads))
    return x, ks, strides, pads, dils, outs, extra, spatial


def _pad_last(x, nd, pads, extra, value):
    widths = ((0, 0),) * (x.ndim - nd) + tuple((p, p + e) for p, e in zip(pads, extra))
    if all(w == (0, 0) for w in widths):
        return x
    return snp.pad(x, widths, constant_values=value)


def _max_pool(op, nd, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    if return_indices:
        raise NotImplementedError(f"{op}: return_indices=True is not supported; only "
                                  "return_indices=False (the pooled values)")
    x, ks, strides, pads, dils, outs, extra, _ = _pool_setup(op, nd, x, kernel_size, stride,
                                                            padding, dilation, ceil_mode)
    low = -np.inf if snp.isdtype(x.dtype, "real floating") else snp.iinfo(x.dtype).min
    xp = _pad_last(x, nd, pads, extra, low)
    return snp.max(_windows(xp, nd, ks, strides, dils, outs, axis=-1), axis=-1)


def _avg_counts(L, k, s, p, n, include_pad):
    # PyTorch's divisor per window: the window clipped to [-p, L + p) (count_include_pad) or
    # to [0, L) (not).
    starts = np.arange(n) * s - p
    ends = np.minimum(starts + k, L + p)
    if not include_pad:
        return np.minimum(ends, L) - np.maximum(starts, 0)
    return ends - starts


def _avg_pool(op, nd, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    x, ks, strides, pads, dils, outs, extra, spatial = _pool_setup(
        op, nd, x, kernel_size, stride, padding, 1, ceil_mode)
    xp = _pad_last(x, nd, pads, extra, 0)
    total = snp.sum(_windows(xp, nd, ks, strides, dils, outs, axis=-1), axis=-1)
    if divisor_override is not None:
        return total / divisor_override
    counts = np.ones((), np.float64)
    for L, k, s, p, n in zip(spatial, ks, strides, pads, outs):
        counts = np.multiply.outer(counts, _avg_counts(L, k, s, p, n, count_include_pad))
    return total / snp.asarray(counts.astype(np.dtype(x.dtype) if snp.isdtype(
        x.dtype, "real floating") else np.float32))


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode=False, return_indices=False):
    """Max over sliding windows of the last dim: ``(*, L) -> (*, L_out)``; padding is -inf.
    Ties share the gradient equally (PyTorch gives it to one element).

    Raises:
        ValueError: bad sizes.
        NotImplementedError: ``return_indices=True`` (PyTorch's argmax indices are not
            computed; only the pooled values are returned).
    """
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode=False, return_indices=False):
    """Max over sliding windows of the last two dims: ``(*, H, W) -> (*, H_out, W_out)``;
    ``stride`` defaults to ``kernel_size``; padding (at most half the kernel) is -inf;
    ``ceil_mode`` rounds the output size up (PyTorch's rule). Ties share the gradient.

    Raises:
        ValueError: bad sizes.
        NotImplementedError: ``return_indices=True`` (PyTorch's argmax indices are not
            computed; only the pooled values are returned).
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    """Mean over sliding windows of the last dim (see avg_pool2d)."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """Mean over sliding windows of the last two dims: ``(*, H, W) -> (*, H_out, W_out)``.

    Zero padding; the divisor is PyTorch's: the window size clipped to the padded input
    (``count_include_pad``) or to the real input (not), or ``divisor_override``.
    """
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)
