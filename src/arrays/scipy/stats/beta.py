"""``starling.scipy.stats.beta``: the beta distribution ``Beta(a, b)`` on ``[loc, loc + scale]``
(SciPy's ``scipy.stats.beta``, JAX's ``jax.scipy.stats.beta``)."""
from __future__ import annotations

from ... import numpy as snp
from ...ops.special_beta import betainc, betaln
from ...ops.special_beta_complement import betaincc
from ..special import xlog1py, xlogy
from ._common import NEG_INF, document, invalid_to_nan, log_of, safe, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]

_ARGS = ("x", "a", "b", "loc", "scale")


def _prepare(op, x, a, b, loc, scale):
    y, scale, a, b = standardize(op, x, loc, scale, a, b)
    return y, a, b, scale, (a <= 0) | (b <= 0) | (scale <= 0)


@document(_ARGS)
def logpdf(x, a, b, loc=0.0, scale=1.0):
    """Log of the beta density ``y**(a-1) (1-y)**(b-1) / (B(a, b) scale)``,
    ``y = (x - loc) / scale``; ``-inf`` outside ``[0, 1]``.

    Method: ``xlogy(a-1, y) + xlog1py(b-1, -y) - betaln(a, b) - log(scale)`` (at the end points:
    ``+inf`` for a shape parameter below 1, finite for 1, ``-inf`` above, as SciPy). Differentiable
    in every argument inside the support.
    """
    y, a, b, scale, bad = _prepare("beta.logpdf", x, a, b, loc, scale)
    inside = (y >= 0) & (y <= 1)
    ys = safe(y, inside, 0.5)
    lp = xlogy(a - 1.0, ys) + xlog1py(b - 1.0, -ys) - betaln(a, b) - snp.log(scale)
    return invalid_to_nan(snp.where(inside, lp, NEG_INF), bad, y)


@document(_ARGS)
def pdf(x, a, b, loc=0.0, scale=1.0):
    """Beta density ``exp(logpdf(x, a, b, loc, scale))``."""
    return snp.exp(logpdf(x, a, b, loc, scale))


_CDF_NOTES = ("Method: the regularized incomplete beta function ``betainc`` (Boost's ``ibeta``, "
              "DiDonato & Morris's Algorithm 708, in float64) and its complement ``betaincc`` "
              "(Boost's ``ibetac``: no ``1 - I`` cancellation, no rounding of ``1 - y``); the "
              "logs take ``log1p`` of the smaller side. Derivatives: in ``x`` / ``loc`` / "
              "``scale`` the density; in ``a`` / ``b`` first order (``betainc``'s parameter "
              "derivatives).")


def _sides(op, x, a, b, loc, scale):
    y, a, b, scale, bad = _prepare(op, x, a, b, loc, scale)
    yc = snp.clip(y, 0.0, 1.0)
    return betainc(a, b, yc), betaincc(a, b, yc), bad


@document(_ARGS, notes=_CDF_NOTES)
def cdf(x, a, b, loc=0.0, scale=1.0):
    """Beta cumulative distribution function ``I_y(a, b)`` (0 below, 1 above the support)."""
    y, a, b, scale, bad = _prepare("beta.cdf", x, a, b, loc, scale)
    return invalid_to_nan(betainc(a, b, snp.clip(y, 0.0, 1.0)), bad)


@document(_ARGS, notes=_CDF_NOTES)
def sf(x, a, b, loc=0.0, scale=1.0):
    """Beta survival function ``1 - cdf``, summed directly (``betaincc``)."""
    y, a, b, scale, bad = _prepare("beta.sf", x, a, b, loc, scale)
    return invalid_to_nan(betaincc(a, b, snp.clip(y, 0.0, 1.0)), bad)


@document(_ARGS, notes=_CDF_NOTES)
def logcdf(x, a, b, loc=0.0, scale=1.0):
    """Log of the beta cdf."""
    lower, upper, bad = _sides("beta.logcdf", x, a, b, loc, scale)
    return invalid_to_nan(log_of(lower, upper), bad)


@document(_ARGS, notes=_CDF_NOTES)
def logsf(x, a, b, loc=0.0, scale=1.0):
    """Log of the beta survival function."""
    lower, upper, bad = _sides("beta.logsf", x, a, b, loc, scale)
    return invalid_to_nan(log_of(upper, lower), bad)
