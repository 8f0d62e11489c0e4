"""``starling.scipy.stats.entropy``: Shannon entropy and relative entropy (Kullback-Leibler
divergence) of discrete distributions (SciPy's / JAX's ``stats.entropy``)."""
from __future__ import annotations

import math

from ... import numpy as snp
from ...ops.axes import normalize_axis
from ..special import entr, xlogy
from ._common import promote, safe

__all__ = ["entropy"]


def _rel_entr(x, y):
    """SciPy's ``rel_entr``: ``x log(x / y)`` for ``x, y > 0``, 0 at ``x == 0 <= y``, ``inf``
    otherwise; the discarded branches see safe operands (finite gradients)."""
    both = (x > 0) & (y > 0)
    xs, ys = safe(x, both, 1.0), safe(y, both, 1.0)
    zero = (x == 0) & (y >= 0)
    return snp.where(both, xlogy(xs, xs / ys), snp.where(zero, 0.0, float("inf")))


def entropy(pk, qk=None, base=None, axis=0):
    """Shannon entropy ``-sum(p log p)`` of the distribution ``p = pk / sum(pk)``, or, given
    ``qk``, the relative entropy ``sum(p log(p / q))`` with ``q = qk / sum(qk)``
    (``scipy.stats.entropy``).

    Args:
        pk: array ``(*pre, m, *post)`` of non-negative weights along ``axis`` (normalised
            here); real dtype (bool / integers become float32).
        qk: None, or weights broadcasting with ``pk`` (normalised along ``axis`` too).
        base: None (natural log, nats) or the logarithm base (a positive Python number).
        axis: the axis holding the distribution (default 0, as SciPy).
    Returns:
        Array ``(*pre, *post)`` of the promoted floating dtype: ``inf`` where ``q`` is 0 and
        ``p`` is not; ``-inf`` for negative weights (``entr`` of a negative number), as SciPy.
    Raises:
        TypeError: complex operands. ValueError: shapes that do not broadcast.
        AxisError: ``axis`` out of range.

    Method: ``sum(entr(p))`` (``entr(0) == 0``) or ``sum(rel_entr(p, q))``; differentiable in
    ``pk`` and ``qk`` where the weights are positive.
    """
    if qk is None:
        (pk,) = promote("entropy", pk)
    else:
        pk, qk = promote("entropy", pk, qk)
        pk, qk = snp.broadcast_arrays(pk, qk)
    if pk.ndim == 0:
        raise ValueError("entropy: pk must be at least 1-D, got a 0-d array")
    axis = normalize_axis("entropy", axis, pk.ndim)
    pk = pk / snp.sum(pk, axis=axis, keepdims=True)
    if qk is None:
        total = snp.sum(entr(pk), axis=axis)
    else:
        qk = qk / snp.sum(qk, axis=axis, keepdims=True)
        total = snp.sum(_rel_entr(pk, qk), axis=axis)
    return total if base is None else total / math.log(base)
