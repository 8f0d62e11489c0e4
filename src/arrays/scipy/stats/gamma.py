"""``starling.scipy.stats.gamma``: the gamma distribution with shape ``a`` (SciPy's
``scipy.stats.gamma``, JAX's ``jax.scipy.stats.gamma``), shifted by ``loc`` and scaled by
``scale``."""
from __future__ import annotations

from ... import numpy as snp
from ...ops.special_gamma import lgamma
from ...ops.special_igamma import igamma, igammac
from ..special import xlogy
from ._common import NEG_INF, document, invalid_to_nan, log_of, safe, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]

_ARGS = ("x", "a", "loc", "scale")


def _prepare(op, x, a, loc, scale):
    y, scale, a = standardize(op, x, loc, scale, a)
    return y, a, scale, (a <= 0) | (scale <= 0)


@document(_ARGS)
def logpdf(x, a, loc=0.0, scale=1.0):
    """Log of the gamma density ``y**(a-1) exp(-y) / (Gamma(a) scale)``, ``y = (x - loc) / scale``;
    ``-inf`` for ``y < 0`` and ``y == inf``.

    Method: ``xlogy(a-1, y) - y - gammaln(a) - log(scale)`` (at ``y == 0``: ``+inf`` for ``a < 1``,
    ``-log(scale)`` for ``a == 1``, ``-inf`` for ``a > 1``, as SciPy). Differentiable in every
    argument inside the support.
    """
    y, a, scale, bad = _prepare("gamma.logpdf", x, a, loc, scale)
    inside = (y >= 0) & (y < float("inf"))
    ys = safe(y, inside, 1.0)
    lp = xlogy(a - 1.0, ys) - ys - lgamma(a) - snp.log(scale)
    return invalid_to_nan(snp.where(inside, lp, NEG_INF), bad, y)


@document(_ARGS)
def pdf(x, a, loc=0.0, scale=1.0):
    """Gamma density ``exp(logpdf(x, a, loc, scale))``."""
    return snp.exp(logpdf(x, a, loc, scale))


_CDF_NOTES = ("Method: the regularized incomplete gamma functions ``gammainc`` / ``gammaincc`` "
              "of ``max(y, 0)`` (SciPy's / Boost's in float64: each tail directly, never "
              "``1 - P``); the logs take ``log1p`` of the smaller side. Derivatives: in ``x`` / "
              "``loc`` / ``scale`` the density; in ``a`` up to second order (``gammainc``'s "
              "parameter derivatives).")


def _y_clipped(op, x, a, loc, scale):
    y, a, scale, bad = _prepare(op, x, a, loc, scale)
    return snp.maximum(y, 0.0), a, bad


@document(_ARGS, notes=_CDF_NOTES)
def cdf(x, a, loc=0.0, scale=1.0):
    """Gamma cumulative distribution function ``P(a, y)`` (0 for ``y <= 0``)."""
    y, a, bad = _y_clipped("gamma.cdf", x, a, loc, scale)
    return invalid_to_nan(igamma(a, y), bad)


@document(_ARGS, notes=_CDF_NOTES)
def sf(x, a, loc=0.0, scale=1.0):
    """Gamma survival function ``Q(a, y) = 1 - P(a, y)``, computed directly."""
    y, a, bad = _y_clipped("gamma.sf", x, a, loc, scale)
    return invalid_to_nan(igammac(a, y), bad)


@document(_ARGS, notes=_CDF_NOTES)
def logcdf(x, a, loc=0.0, scale=1.0):
    """Log of the gamma cdf."""
    y, a, bad = _y_clipped("gamma.logcdf", x, a, loc, scale)
    return invalid_to_nan(log_of(igamma(a, y), igammac(a, y)), bad)


@document(_ARGS, notes=_CDF_NOTES)
def logsf(x, a, loc=0.0, scale=1.0):
    """Log of the gamma survival function."""
    y, a, bad = _y_clipped("gamma.logsf", x, a, loc, scale)
    return invalid_to_nan(log_of(igammac(a, y), igamma(a, y)), bad)
