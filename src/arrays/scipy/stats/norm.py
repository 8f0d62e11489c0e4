"""``starling.scipy.stats.norm``: the normal distribution ``N(loc, scale**2)`` (SciPy's
``scipy.stats.norm`` methods as functions, JAX's ``jax.scipy.stats.norm``).

The tails use ``log_ndtr`` / ``ndtr`` of ``starling.scipy.special`` (``logcdf(-40)`` is
``-804.6``, not ``-inf``; ``sf(40)`` is ``3.7e-350`` in float64 rather than ``1 - 1``).
"""
from __future__ import annotations

from ... import numpy as snp
from ...ops.special import log_ndtr, ndtr, ndtri
from ._common import LOG_2PI, document, invalid_to_nan, promote, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]

_STD = ("x", "loc", "scale")


def _z(op, x, loc, scale):
    z, scale = standardize(op, x, loc, scale)
    return z, scale <= 0


@document(_STD)
def logpdf(x, loc=0.0, scale=1.0):
    """Log of the normal density ``-(x - loc)**2 / (2 scale**2) - log(scale) - log(2 pi) / 2``.

    Derivatives in ``x``, ``loc`` and ``scale`` are those of the formula.
    """
    z, scale = standardize("norm.logpdf", x, loc, scale)
    return invalid_to_nan(-0.5 * z * z - snp.log(scale) - 0.5 * LOG_2PI, scale <= 0)


@document(_STD)
def pdf(x, loc=0.0, scale=1.0):
    """Normal density ``exp(logpdf(x, loc, scale))``."""
    return snp.exp(logpdf(x, loc, scale))


@document(_STD)
def cdf(x, loc=0.0, scale=1.0):
    """Normal cumulative distribution function ``ndtr((x - loc) / scale)``.

    Method: ``starling.scipy.special.ndtr`` (Cody's erfc in float64): relative accuracy in the
    lower tail down to the smallest normal numbers.
    """
    z, bad = _z("norm.cdf", x, loc, scale)
    return invalid_to_nan(ndtr(z), bad)


@document(_STD)
def logcdf(x, loc=0.0, scale=1.0):
    """Log of the normal cdf, ``log_ndtr((x - loc) / scale)``.

    Method: ``starling.scipy.special.log_ndtr`` (an asymptotic series in the lower tail), so
    ``logcdf(-40) == -804.608...`` and the gradient there is ``~40``, not NaN.
    """
    z, bad = _z("norm.logcdf", x, loc, scale)
    return invalid_to_nan(log_ndtr(z), bad)


@document(_STD)
def sf(x, loc=0.0, scale=1.0):
    """Normal survival function ``1 - cdf``, computed as ``ndtr(-(x - loc) / scale)`` (accurate in
    the upper tail)."""
    z, bad = _z("norm.sf", x, loc, scale)
    return invalid_to_nan(ndtr(-z), bad)


@document(_STD)
def logsf(x, loc=0.0, scale=1.0):
    """Log of the normal survival function, ``log_ndtr(-(x - loc) / scale)``."""
    z, bad = _z("norm.logsf", x, loc, scale)
    return invalid_to_nan(log_ndtr(-z), bad)


@document(("q", "loc", "scale"))
def ppf(q, loc=0.0, scale=1.0):
    """Normal quantile function (inverse cdf), ``loc + scale * ndtri(q)``.

    ``ppf(0) == -inf``, ``ppf(1) == inf``. Method: ``ndtri`` (Cephes' rational approximations,
    relative accuracy in both tails).
    """
    q, loc, scale = promote("norm.ppf", q, loc, scale)
    return invalid_to_nan(loc + scale * ndtri(q), scale <= 0)


@document(("q", "loc", "scale"))
def isf(q, loc=0.0, scale=1.0):
    """Normal inverse survival function, ``loc - scale * ndtri(q)`` (by symmetry, so small ``q``
    keep their relative accuracy)."""
    q, loc, scale = promote("norm.isf", q, loc, scale)
    return invalid_to_nan(loc - scale * ndtri(q), scale <= 0)
