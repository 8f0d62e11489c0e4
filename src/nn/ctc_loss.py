"""Connectionist temporal classification loss (Graves et al. 2006): ``ctc_loss`` and the
``CTCLoss`` module, with PyTorch's argument conventions.

The loss is the negative log of the total probability of every frame-level alignment that
collapses (merge repeats, then drop blanks) to the target. It is computed with the log-domain
forward (alpha) recursion over the blank-extended target, as a ``starling.scan`` over time:
composed of public ops only, so ``grad`` (whose reverse pass through the scan is the
forward-backward / beta recursion of the paper), ``jvp``, ``vmap``, ``compile`` and
``checkpoint`` all apply unchanged, to any order.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import Array, scan, stop_gradient
from .. import numpy as snp
from .module import Module

__all__ = ["ctc_loss", "CTCLoss"]

_REDUCTIONS = ("mean", "sum", "none")


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """CTC loss of per-frame log-probabilities against label sequences (Graves et al., 2006,
    "Connectionist temporal classification: labelling unsegmented sequence data with recurrent
    neural networks", ICML; PyTorch's ``F.ctc_loss`` conventions).

    For each sequence ``n`` the loss is ``-log sum_pi prod_t p_t(pi_t)`` over the alignments
    ``pi`` of its first ``input_lengths[n]`` frames that collapse to its first
    ``target_lengths[n]`` labels, computed by the log-domain alpha recursion (every log-sum-exp
    guarded, so impossible states stay exactly ``-inf`` with zero, never NaN, derivatives).

    Args:
        log_probs: ``(T, N, C)`` log-probabilities (time, batch, classes), e.g. a
            ``log_softmax`` over ``C``; or unbatched ``(T, C)``. Real floating dtype; the loss
            has this dtype.
        targets: integer labels, padded ``(N, S)`` (entries past a sequence's target length are
            ignored), or all sequences concatenated ``(sum(target_lengths),)``; unbatched
            ``(S,)``. Labels lie in ``[0, C)`` and differ from ``blank``.
        input_lengths: ``(N,)`` integers (array, tuple or list) in ``[0, T]``; unbatched a
            scalar. Frames ``t >= input_lengths[n]`` do not count.
        target_lengths: ``(N,)`` integers in ``[0, S]``; unbatched a scalar.
        blank: the blank class, in ``[0, C)``.
        reduction: ``"none"``: the per-sequence losses ``(N,)`` (unbatched: a scalar);
            ``"sum"``: their sum; ``"mean"``: each loss divided by its target length (at least
            1), then averaged over the batch.
        zero_infinity: infinite losses (a target no alignment reaches, e.g. an input shorter
            than the target plus its repeated neighbours) become 0, with 0 gradient.

    Returns:
        The loss, ``log_probs.dtype``: ``(N,)`` for "none" (a scalar when unbatched), else a
        scalar. An infeasible target gives ``inf`` (0 with ``zero_infinity``); its gradient is
        0, not NaN (PyTorch returns NaN there). A sequence with ``input_lengths = 0`` and
        ``target_lengths = 0`` has loss 0.

    The derivative is that of this function of ``log_probs``: ``-gamma_t(k)``, minus the
    posterior occupancy of class ``k`` at frame ``t``. (PyTorch's hand-written backward adds
    ``exp(log_probs)``, which is only right after the ``log_softmax`` it assumes; through a
    ``log_softmax`` both give the same gradient with respect to the logits.)

    Raises:
        TypeError: non-floating ``log_probs``; non-integer targets, lengths or ``blank``.
        ValueError: bad ranks or shapes, ``blank`` outside ``[0, C)``, an unknown
            ``reduction``; with concrete (non-traced) values, lengths out of range, target
            lengths that do not sum to the length of concatenated targets, or a label outside
            ``[0, C)`` or equal to ``blank``. Inside a transformation values are not checked:
            out-of-range labels read a clamped class.
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"ctc_loss: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    log_probs = snp.asarray(log_probs)
    if not snp.isdtype(log_probs.dtype, "real floating"):
        raise TypeError(f"ctc_loss: log_probs must be real floating, got {log_probs.dtype}")
    unbatched = log_probs.ndim == 2
    if log_probs.ndim not in (2, 3):
        raise ValueError(f"ctc_loss: log_probs must be (T, N, C) or unbatched (T, C), got shape "
                         f"{tuple(log_probs.shape)}")
    targets, input_lengths, target_lengths = (
        _int_array("ctc_loss", name, v) for name, v in
        (("targets", targets), ("input_lengths", input_lengths),
         ("target_lengths", target_lengths)))
    if unbatched:
        log_probs, targets, input_lengths, target_lengths = _add_batch(
            log_probs, targets, input_lengths, target_lengths)
    T, N, C = (int(d) for d in log_probs.shape)
    blank = _class_index("ctc_loss", blank)
    if not 0 <= blank < C:
        raise ValueError(f"ctc_loss: blank must be in [0, {C}) for {C} classes, got {blank}")
    for name, v in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if tuple(v.shape) != (N,):
            raise ValueError(f"ctc_loss: {name} must have shape ({N},) for log_probs "
                             f"{tuple(log_probs.shape)}, got {tuple(v.shape)}")
    _check_range("input_lengths", input_lengths, 0, T)
    labels = _padded_targets(targets, target_lengths, N)
    _check_labels(labels, target_lengths, C, blank)

    loss = _ctc_nll(log_probs, labels, input_lengths, target_lengths, blank)
    if zero_infinity:
        loss = snp.where(loss == math.inf, snp.zeros_like(loss), loss)
    if reduction == "none":
        return loss[0] if unbatched else loss
    if reduction == "sum":
        return snp.sum(loss)
    per_label = snp.maximum(target_lengths, 1).astype(loss.dtype)
    return snp.mean(loss / per_label)


class CTCLoss(Module):
    """Module form of :func:`ctc_loss` (PyTorch's ``nn.CTCLoss``):
    ``CTCLoss(blank, reduction, zero_infinity)(log_probs, targets, input_lengths,
    target_lengths)``. No parameters.

    Raises:
        ValueError: an unknown ``reduction`` or a negative ``blank`` (at construction); the
            rest as :func:`ctc_loss` (at the call).
    """

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"CTCLoss: reduction must be one of {_REDUCTIONS}, got "
                             f"{reduction!r}")
        blank = _class_index("CTCLoss", blank)
        if blank < 0:
            raise ValueError(f"CTCLoss: blank must be a non-negative class index, got {blank}")
        self.blank = blank
        self.reduction = reduction
        self.zero_infinity = bool(zero_infinity)

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                        self.reduction, self.zero_infinity)

    def extra_repr(self):
        return (f"blank={self.blank}, reduction={self.reduction!r}, "
                f"zero_infinity={self.zero_infinity}")


# ---- argument handling ---------------------------------------------------------------------------

def _int_array(op, name, v):
    v = snp.asarray(v)
    if not snp.isdtype(v.dtype, "integral"):
        raise TypeError(f"{op}: {name} must be integers, got {v.dtype}")
    return v


def _class_index(op, blank):
    try:
        return operator.index(blank)
    except TypeError:
        raise TypeError(f"{op}: blank must be an integer class index, got {blank!r}") from None


def _concrete(v):
    # Values can be checked only outside transformations (a tracer's value is unknown).
    return type(v) is Array


def _add_batch(log_probs, targets, input_lengths, target_lengths):
    if targets.ndim != 1:
        raise ValueError(f"ctc_loss: unbatched log_probs {tuple(log_probs.shape)} need 1-D "
                         f"targets (S,), got shape {tuple(targets.shape)}")
    for name, v in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if v.size != 1:
            raise ValueError(f"ctc_loss: unbatched log_probs {tuple(log_probs.shape)} need a "
                             f"scalar {name}, got shape {tuple(v.shape)}")
    return (log_probs[:, None, :], targets[None, :], snp.reshape(input_lengths, (1,)),
            snp.reshape(target_lengths, (1,)))


def _check_range(name, v, lo, hi):
    if _concrete(v) and v.size:
        a = np.asarray(v)
        bad = a[(a < lo) | (a > hi)]
        if bad.size:
            raise ValueError(f"ctc_loss: {name} must lie in [{lo}, {hi}], got {int(bad[0])}")


def _padded_targets(targets, target_lengths, N):
    """``(N, S)`` labels from padded or concatenated targets."""
    if targets.ndim == 2:
        if int(targets.shape[0]) != N:
            raise ValueError(f"ctc_loss: padded targets must be (N={N}, S), got shape "
                             f"{tuple(targets.shape)}")
        _check_range("target_lengths", target_lengths, 0, int(targets.shape[1]))
        return targets
    if targets.ndim != 1:
        raise ValueError(f"ctc_loss: targets must be padded (N, S) or concatenated 1-D, got "
                         f"shape {tuple(targets.shape)}")
    total = int(targets.shape[0])
    _check_range("target_lengths", target_lengths, 0, total)
    if _concrete(target_lengths):
        lengths = np.asarray(target_lengths)
        if int(lengths.sum()) != total:
            raise ValueError(f"ctc_loss: concatenated targets have {total} labels but "
                             f"target_lengths {lengths.tolist()} sum to {int(lengths.sum())}")
        # the longest sequence bounds the padded width; traced lengths fall back to `total`
        width = int(lengths.max(initial=0))
    else:
        width = total
    if width == 0 or total == 0:
        return snp.zeros((N, 0), targets.dtype)
    starts = snp.cumsum(target_lengths) - target_lengths
    idx = starts[:, None] + snp.arange(width)[None, :]
    return snp.take(targets, snp.clip(idx, 0, total - 1), axis=0)


def _check_labels(labels, target_lengths, C, blank):
    if not (_concrete(labels) and _concrete(target_lengths)) or labels.size == 0:
        return
    a = np.asarray(labels)
    valid = np.arange(a.shape[1])[None, :] < np.asarray(target_lengths)[:, None]
    used = a[valid]
    bad = used[(used < 0) | (used >= C)]
    if bad.size:
        raise ValueError(f"ctc_loss: target label {int(bad[0])} is out of range for {C} classes "
                         f"(valid: [0, {C}) except blank={blank})")
    if np.any(used == blank):
        raise ValueError(f"ctc_loss: targets must not contain the blank label {blank}")


# ---- the forward recursion -----------------------------------------------------------------------

def _ctc_nll(log_probs, labels, input_lengths, target_lengths, blank):
    """Per-sequence ``-log p(target | input)`` ``(N,)`` for ``(T, N, C)`` log-probabilities and
    ``(N, S)`` padded labels."""
    T, N, C = (int(d) for d in log_probs.shape)
    S = int(labels.shape[1])
    L = 2 * S + 1
    dtype = log_probs.dtype
    # Labels past a sequence's length (padding) read the blank: those states come after the
    # ones read at the end, so they never feed the result.
    in_target = snp.arange(S)[None, :] < target_lengths[:, None]
    labels = snp.where(in_target, snp.clip(labels, 0, C - 1), blank).astype(snp.int32)
    # the blank-extended target l': blank, l1, blank, l2, ..., lS, blank   (N, L)
    blanks = snp.full((N, S), blank, snp.int32)
    ext = snp.concatenate([snp.reshape(snp.stack([blanks, labels], axis=-1), (N, 2 * S)),
                           snp.full((N, 1), blank, snp.int32)], axis=1)
    # a state may be entered from two back (skipping a blank) when it is a label that differs
    # from the label before it (blank states compare equal to the blank two back)
    skip = snp.concatenate([snp.zeros((N, min(2, L)), snp.bool_), ext[:, 2:] != ext[:, :-2]],
                           axis=1)
    emit = snp.take_along_axis(log_probs, snp.broadcast_to(ext[None], (T, N, L)), axis=2)
    active = snp.arange(T)[:, None] < input_lengths[None, :]              # (T, N)

    neg_inf = snp.full((N, L), -math.inf, dtype)

    def step(alpha, xs):
        emit_t, active_t = xs
        from_skip = snp.where(skip, _shift(alpha, 2, neg_inf), neg_inf)
        new = _logsumexp3(alpha, _shift(alpha, 1, neg_inf), from_skip) + emit_t
        return snp.where(active_t[:, None], new, alpha), None

    # alpha before the first frame: all mass on a virtual state feeding states 0 and 1, i.e.
    # log 1 at state 0 with the first frame's emission not yet added (states 0/1 are then
    # reached exactly as the paper's initialisation says).
    init = snp.where(snp.arange(L)[None, :] == 0, snp.zeros((N, L), dtype), neg_inf)
    if T:
        alpha, _ = scan(step, init, (emit, active))
    else:
        alpha = init
    last = 2 * target_lengths[:, None]
    end_blank = snp.take_along_axis(alpha, last, axis=1)[:, 0]
    end_label = snp.take_along_axis(alpha, snp.maximum(last - 1, 0), axis=1)[:, 0]
    end_label = snp.where(target_lengths > 0, end_label, -math.inf)
    return -_logsumexp3(end_blank, end_label, snp.full_like(end_blank, -math.inf))


def _shift(a, k, fill):
    """``a`` moved ``k`` states to the right along axis 1, ``fill`` entering on the left."""
    L = int(a.shape[1])
    k = min(k, L)
    return snp.concatenate([fill[:, :k], a[:, :L - k]], axis=1)


def _logsumexp3(a, b, c):
    """``log(exp(a) + exp(b) + exp(c))`` elementwise, exact ``-inf`` (with zero derivatives of
    every order) where all three are ``-inf``; NaN propagates."""
    # The max only shifts the exponents (the sum is invariant to it), so it carries no
    # derivative; a non-finite max is replaced by 0 to keep the exponents NaN-free.
    m = stop_gradient(snp.maximum(snp.maximum(a, b), c))
    m = snp.where(snp.isfinite(m), m, snp.zeros_like(m))
    s = snp.exp(a - m) + snp.exp(b - m) + snp.exp(c - m)
    live = s != 0                                   # NaN stays live and propagates
    return snp.where(live, snp.log(snp.where(live, s, snp.ones_like(s))) + m, -math.inf)
