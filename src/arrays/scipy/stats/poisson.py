"""``starling.scipy.stats.poisson``: the Poisson distribution with mean ``mu`` on the integers
``loc, loc + 1, ...`` (SciPy's ``scipy.stats.poisson``, JAX's ``jax.scipy.stats.poisson``)."""
from __future__ import annotations

from ... import numpy as snp
from ...ops.special_gamma import lgamma
from ...ops.special_igamma import igamma, igammac
from ..special import xlogy
from ._common import NEG_INF, document, invalid_to_nan, promote, safe

__all__ = ["logpmf", "pmf", "cdf", "sf"]

_ARGS = ("k", "mu", "loc")


def _prepare(op, k, mu, loc):
    k, mu, loc = promote(op, k, mu, loc)
    return k - loc, mu


@document(_ARGS)
def logpmf(k, mu, loc=0.0):
    """Log of the Poisson probability mass ``mu**k exp(-mu) / k!``; ``-inf`` for negative or
    non-integer ``k``.

    Method: ``xlogy(k, mu) - gammaln(k + 1) - mu`` (SciPy's formula; ``mu == 0`` gives 0 at
    ``k == 0``). Differentiable in ``mu`` (``k / mu - 1``); the derivative in ``k`` is that of the
    formula (the gamma-function interpolation), as in JAX.
    """
    k, mu = _prepare("poisson.logpmf", k, mu, loc)
    inside = (k >= 0) & (k == snp.floor(k))
    ks = safe(k, inside, 0.0)
    lp = xlogy(ks, mu) - lgamma(ks + 1.0) - mu
    return invalid_to_nan(snp.where(inside, lp, NEG_INF), mu < 0, k)


@document(_ARGS)
def pmf(k, mu, loc=0.0):
    """Poisson probability mass ``exp(logpmf(k, mu, loc))``."""
    return snp.exp(logpmf(k, mu, loc))


_CDF_NOTES = ("Method: ``P(K <= k) = Q(floor(k) + 1, mu)``, the regularized upper incomplete "
              "gamma function (``gammaincc``, each tail computed directly). Differentiable in "
              "``mu`` (``-pmf(floor(k), mu)``); piecewise constant in ``k``.")


def _floor_k(op, k, mu, loc):
    k, mu = _prepare(op, k, mu, loc)
    neg = k < 0
    return neg, safe(snp.floor(k), ~neg, 0.0) + 1.0, mu


@document(_ARGS, notes=_CDF_NOTES)
def cdf(k, mu, loc=0.0):
    """Poisson cumulative distribution function ``P(K <= k)`` (0 for ``k < 0``)."""
    neg, n, mu = _floor_k("poisson.cdf", k, mu, loc)
    return invalid_to_nan(snp.where(neg, 0.0, igammac(n, mu)), mu < 0, k)


@document(_ARGS, notes=_CDF_NOTES)
def sf(k, mu, loc=0.0):
    """Poisson survival function ``P(K > k) = P(floor(k) + 1, mu)`` (1 for ``k < 0``), computed
    directly (accurate in the upper tail)."""
    neg, n, mu = _floor_k("poisson.sf", k, mu, loc)
    return invalid_to_nan(snp.where(neg, 1.0, igamma(n, mu)), mu < 0, k)
