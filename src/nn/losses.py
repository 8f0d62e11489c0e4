"""Losses (re-exported by ``starling.nn.functional``), with PyTorch's conventions.

Batched input puts the class dim at 1: logits ``(N, C)`` or ``(N, C, d1, ..., dk)``, integer
targets ``(N)`` or ``(N, d1, ..., dk)``; unbatched ``(C,)`` logits take a 0-d target.
``reduction`` is ``"mean"`` (default), ``"sum"`` or ``"none"``.
"""
from __future__ import annotations

import math

from .. import numpy as snp
from ..arrays.array import Array

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"]


def _reduce(op, loss, reduction):
    if reduction == "mean":
        return snp.mean(loss)
    if reduction == "sum":
        return snp.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def safe_mean(total, count):
    """``total / count``: NaN when ``count == 0`` (every target ignored: PyTorch's value), with
    derivative 0 there instead of ``0 * inf = NaN``, so one all-padding batch cannot turn every
    parameter into NaN."""
    some = count > 0
    return snp.where(some, total / snp.where(some, count, 1), math.nan)


def _check_reduction(op, reduction, allowed=("mean", "sum", "none")):
    if reduction not in allowed:
        raise ValueError(f"{op}: reduction must be one of {allowed}, got {reduction!r}")


def _class_last(x):
    """``(N, C, *d)`` -> ``(N, *d, C)``; ``(C,)`` unchanged."""
    return x if x.ndim == 1 else snp.moveaxis(x, 1, -1)


def _check_targets(op, target, n_classes, ignore_index):
    # Eager only: inside transformations the values are unknown (out-of-range indices then
    # read a clamped class, as gathers do).
    if type(target) is Array and target.size:
        import numpy as np
        t = np.asarray(target)
        bad = t[(t != ignore_index) & ((t < 0) | (t >= n_classes))]
        if bad.size:
            raise IndexError(f"{op}: target {int(bad.flat[0])} is out of bounds for {n_classes} "
                             f"classes (valid: 0..{n_classes - 1}, or ignore_index "
                             f"{ignore_index})")


def _picked_nll(op, logp, target, weight, ignore_index):
    """Per-element ``-w[t] * logp[t]`` (0 where ignored) and the per-element weight ``w[t]``
    (0 where ignored), for class-last ``logp`` ``(*, C)`` and integer ``target`` ``(*)``."""
    n_classes = logp.shape[-1]
    if tuple(target.shape) != tuple(logp.shape[:-1]):
        raise ValueError(f"{op}: target shape {tuple(target.shape)} does not match the input "
                         f"without its class dim {tuple(logp.shape[:-1])}")
    _check_targets(op, target, n_classes, ignore_index)
    keep = target != ignore_index
    safe = snp.where(keep, target, 0)
    picked = snp.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
    w = snp.where(keep, 1.0, 0.0).astype(logp.dtype)
    if weight is not None:
        w = w * snp.take(snp.asarray(weight), safe, axis=0)
    return -picked * w, w


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):  # noqa: A002
    """Negative log-likelihood of log-probabilities ``input`` ``(N, C, *d)`` at integer
    ``target`` ``(N, *d)``: ``-weight[t] * input[t]``.

    ``"mean"`` divides by the summed weights of the non-ignored targets (NaN when all are
    ignored, as PyTorch).

    Raises:
        ValueError: shapes or reduction. IndexError: (eager) a target out of range.
    """
    _check_reduction("nll_loss", reduction)
    input, target = snp.asarray(input), snp.asarray(target)
    loss, w = _picked_nll("nll_loss", _class_last(input), target, weight, ignore_index)
    if reduction == "mean":
        return safe_mean(snp.sum(loss), snp.sum(w))
    return _reduce("nll_loss", loss, reduction)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",  # noqa: A002
                  label_smoothing=0.0):
    """Cross entropy between logits and integer class targets or class probabilities.

    Args:
        input: logits ``(N, C, *d)`` or ``(C,)``.
        target: integer classes ``(N, *d)`` (or 0-d), or probabilities with ``input``'s shape
            (a floating target).
        weight: per-class weights ``(C,)``.
        ignore_index: class-index targets equal to it contribute nothing (index targets only).
        reduction: "mean" | "sum" | "none".
        label_smoothing: ``eps`` in [0, 1]: the target becomes ``(1 - eps) * onehot + eps / C``.
    Returns:
        Scalar, or the per-element loss ``(N, *d)`` for "none".

    PyTorch's formulas: with index targets,
    ``loss_i = (1 - eps) * w[t_i] * (-logp_i[t_i]) + eps / C * sum_c w_c * (-logp_ic)`` (0 for
    ignored ``i``) and "mean" divides by ``sum_i w[t_i]`` over non-ignored ``i`` (NaN when all
    are ignored). With probability targets ``loss_i = -sum_c w_c * q_ic * logp_ic`` and "mean"
    divides by the number of elements ``N * prod(d)``.

    Raises:
        ValueError: shapes, reduction or label_smoothing out of range. IndexError: (eager)
            a class index out of range.
    """
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got "
                         f"{label_smoothing}")
    input, target = snp.asarray(input), snp.asarray(target)
    if input.ndim == 0:
        raise ValueError("cross_entropy: input must have a class dim, got a 0-d array")
    from .functional import log_softmax
    logp = log_softmax(_class_last(input), -1)
    n_classes = logp.shape[-1]
    w_c = None if weight is None else snp.asarray(weight).astype(logp.dtype)
    if snp.isdtype(target.dtype, ("real floating", "complex floating")):
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(f"cross_entropy: probability targets must have the input's shape "
                             f"{tuple(input.shape)}, got {tuple(target.shape)}")
        q = _class_last(target).astype(logp.dtype)
        if label_smoothing:
            q = q * (1.0 - label_smoothing) + label_smoothing / n_classes
        term = q * logp if w_c is None else q * logp * w_c
        loss = -snp.sum(term, axis=-1)
        return _reduce("cross_entropy", loss, reduction)
    if not snp.isdtype(target.dtype, "integral"):
        raise TypeError(f"cross_entropy: target must be integer class indices or floating "
                        f"probabilities, got {target.dtype}")
    nll, w = _picked_nll("cross_entropy", logp, target, w_c, ignore_index)
    if reduction == "mean":
        denom = snp.sum(w)
        out = safe_mean(snp.sum(nll), denom)
    else:
        out = _reduce("cross_entropy", nll, reduction)
    if not label_smoothing:
        return out
    smooth = -snp.sum(logp if w_c is None else logp * w_c, axis=-1)
    smooth = snp.where(target != ignore_index, smooth, 0.0)
    if reduction == "mean":
        smooth = safe_mean(snp.sum(smooth), denom)
    else:
        smooth = _reduce("cross_entropy", smooth, reduction)
    return out * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


def _pair(op, input, target):
    input, target = snp.asarray(input), snp.asarray(target)
    try:
        snp.broadcast_shapes(input.shape, target.shape)
    except ValueError:
        raise ValueError(f"{op}: input shape {tuple(input.shape)} and target shape "
                         f"{tuple(target.shape)} do not broadcast") from None
    return input, target


def mse_loss(input, target, reduction="mean"):  # noqa: A002
    """``(input - target)^2``, reduced."""
    _check_reduction("mse_loss", reduction)
    input, target = _pair("mse_loss", input, target)
    d = input - target
    return _reduce("mse_loss", d * d, reduction)


def l1_loss(input, target, reduction="mean"):  # noqa: A002
    """``|input - target|``, reduced."""
    _check_reduction("l1_loss", reduction)
    input, target = _pair("l1_loss", input, target)
    return _reduce("l1_loss", snp.abs(input - target), reduction)


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):  # noqa: A002
    """``0.5 d^2 / beta`` where ``|d| < beta`` else ``|d| - 0.5 beta`` (``d = input -
    target``); ``beta = 0`` is the L1 loss (Girshick 2015, PyTorch)."""
    _check_reduction("smooth_l1_loss", reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    input, target = _pair("smooth_l1_loss", input, target)
    a = snp.abs(input - target)
    if beta == 0:
        return _reduce("smooth_l1_loss", a, reduction)
    loss = snp.where(a < beta, a * a * (0.5 / beta), a - 0.5 * beta)
    return _reduce("smooth_l1_loss", loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):  # noqa: A002
    """``0.5 d^2`` where ``|d| <= delta`` else ``delta (|d| - 0.5 delta)`` (Huber 1964)."""
    _check_reduction("huber_loss", reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    input, target = _pair("huber_loss", input, target)
    a = snp.abs(input - target)
    loss = snp.where(a <= delta, a * a * 0.5, (a - 0.5 * delta) * delta)
    return _reduce("huber_loss", loss, reduction)


def binary_cross_entropy(input, target, weight=None, reduction="mean"):  # noqa: A002
    """``-w (y log p + (1 - y) log(1 - p))`` for probabilities ``p``; each log is clamped at
    -100 (PyTorch), so ``p`` in {0, 1} gives finite losses."""
    _check_reduction("binary_cross_entropy", reduction)
    input, target = _pair("binary_cross_entropy", input, target)
    # Each log is clamped at -100 (PyTorch's convention); the inner where keeps the derivative
    # finite (zero) where p is exactly 0 or 1 instead of 0 * inf = NaN.
    pos, below_one = input > 0, input < 1
    logp = snp.where(pos, snp.clip(snp.log(snp.where(pos, input, 1.0)), -100.0, None), -100.0)
    log1mp = snp.where(below_one, snp.clip(snp.log1p(-snp.where(below_one, input, 0.0)),
                                           -100.0, None), -100.0)
    loss = -(target * logp + (1.0 - target) * log1mp)
    if weight is not None:
        loss = loss * weight
    return _reduce("binary_cross_entropy", loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",  # noqa: A002
                                     pos_weight=None):
    """Sigmoid + binary cross entropy in one stable expression:
    ``(1 - y) * softplus(x) + pw * y * softplus(-x)`` (times ``weight``), which equals
    PyTorch's ``(1 - y) x + (1 + (pw - 1) y) * softplus(-x)`` but has no cancellation, with
    ``softplus(z) = log(1 + exp(z))`` computed without overflow.

    ``pos_weight`` ``(C,)`` broadcasts over the last dim (weights positive examples).
    """
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    input, target = _pair("binary_cross_entropy_with_logits", input, target)
    pos = target * snp.logaddexp(-input, 0.0)
    if pos_weight is not None:
        pos = pos * snp.asarray(pos_weight)
    loss = (1.0 - target) * snp.logaddexp(input, 0.0) + pos
    if weight is not None:
        loss = loss * weight
    return _reduce("binary_cross_entropy_with_logits", loss, reduction)


def kl_div(input, target, reduction="mean", log_target=False):  # noqa: A002
    """Kullback-Leibler divergence ``KL(target || exp(input))`` pointwise, with ``input``
    log-probabilities: ``target * (log target - input)`` (0 where ``target == 0``), or
    ``exp(t) * (t - input)`` with ``log_target``.

    ``reduction``: "mean" (over all elements, PyTorch's default), "batchmean" (sum / N, the
    true KL per example), "sum", "none".
    """
    _check_reduction("kl_div", reduction, ("mean", "batchmean", "sum", "none"))
    input, target = _pair("kl_div", input, target)
    if log_target:
        loss = snp.exp(target) * (target - input)
    else:
        pos = target > 0
        safe = snp.where(pos, target, 1.0)
        loss = snp.where(pos, target * (snp.log(safe) - input), 0.0)
    if reduction == "batchmean":
        n = input.shape[0] if input.ndim else 1
        return snp.sum(loss) / n
    return _reduce("kl_div", loss, reduction)
