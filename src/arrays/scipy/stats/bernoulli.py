"""``starling.scipy.stats.bernoulli``: the Bernoulli distribution on ``{loc, loc + 1}`` with
``P(1) = p`` (SciPy's ``scipy.stats.bernoulli``, JAX's ``jax.scipy.stats.bernoulli``)."""
from __future__ import annotations

from ... import numpy as snp
from ..special import xlog1py, xlogy
from ._common import NEG_INF, document, invalid_to_nan, promote, safe

__all__ = ["logpmf", "pmf", "cdf", "sf", "ppf"]

_ARGS = ("k", "p", "loc")


def _prepare(op, k, p, loc):
    k, p, loc = promote(op, k, p, loc)
    return k - loc, p, (p < 0) | (p > 1)


@document(_ARGS)
def logpmf(k, p, loc=0.0):
    """Log of the Bernoulli probability mass: ``log(p)`` at ``k == 1``, ``log1p(-p)`` at
    ``k == 0``, ``-inf`` elsewhere.

    Method: ``xlogy(k, p) + xlog1py(1 - k, -p)`` (so ``p == 0`` or ``1`` give 0 and ``-inf``, never
    NaN); derivative in ``p``: ``1 / p`` or ``-1 / (1 - p)``.
    """
    k, p, bad = _prepare("bernoulli.logpmf", k, p, loc)
    inside = (k == 0) | (k == 1)
    ks = safe(k, inside, 0.0)
    lp = xlogy(ks, p) + xlog1py(1.0 - ks, -p)
    return invalid_to_nan(snp.where(inside, lp, NEG_INF), bad, k)


@document(_ARGS)
def pmf(k, p, loc=0.0):
    """Bernoulli probability mass ``exp(logpmf(k, p, loc))``."""
    return snp.exp(logpmf(k, p, loc))


@document(_ARGS)
def cdf(k, p, loc=0.0):
    """Bernoulli cumulative distribution function: 0 for ``k < 0``, ``1 - p`` for ``0 <= k < 1``, 1
    for ``k >= 1``.

    Differentiable in ``p``; piecewise constant in ``k``.
    """
    k, p, bad = _prepare("bernoulli.cdf", k, p, loc)
    return invalid_to_nan(snp.where(k < 0, 0.0, snp.where(k < 1, 1.0 - p, 1.0)), bad, k)


@document(_ARGS)
def sf(k, p, loc=0.0):
    """Bernoulli survival function ``1 - cdf``: 1, ``p`` or 0.

    Differentiable in ``p``; piecewise constant in ``k``.
    """
    k, p, bad = _prepare("bernoulli.sf", k, p, loc)
    return invalid_to_nan(snp.where(k < 0, 1.0, snp.where(k < 1, p, 0.0)), bad, k)


@document(("q", "p", "loc"))
def ppf(q, p, loc=0.0):
    """Bernoulli quantile function: the least ``k`` with ``cdf(k) >= q``, i.e. ``loc - 1`` at
    ``q == 0`` (SciPy's convention), ``loc`` for ``0 < q <= 1 - p``, ``loc + 1`` above (and at
    ``q == 1``).

    Piecewise constant: zero derivatives.
    """
    q, p, loc = promote("bernoulli.ppf", q, p, loc)
    k = snp.where(q == 0, -1.0, snp.where((q < 1) & (q <= 1.0 - p), 0.0, 1.0))
    return invalid_to_nan(k + loc, (p < 0) | (p > 1) | (q < 0) | (q > 1), q)
