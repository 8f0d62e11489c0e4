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


@document("Log of the normal density ``-(x - loc)**2 / (2 scale**2) - log(scale) - "
          "log(2 pi) / 2``.", _STD,
          notes="Derivatives in ``x``, ``loc`` and ``scale`` are those of the formula.")
def logpdf(x, loc=0.0, scale=1.0):
    z, scale = standardize("norm.logpdf", x, loc, scale)
    return invalid_to_nan(-0.5 * z * z - snp.log(scale) - 0.5 * LOG_2PI, scale <= 0)


@document("Normal density ``exp(logpdf(x, loc, scale))``.", _STD)
def pdf(x, loc=0.0, scale=1.0):
    return snp.exp(logpdf(x, loc, scale))


@document("Normal cumulative distribution function ``ndtr((x - loc) / scale)``.", _STD,
          notes="Method: ``starling.scipy.special.ndtr`` (Cody's erfc in float64): relative "
                "accuracy in the lower tail down to the smallest normal numbers.")
def cdf(x, loc=0.0, scale=1.0):
    z, bad = _z("norm.cdf", x, loc, scale)
    return invalid_to_nan(ndtr(z), bad)


@document("Log of the normal cdf, ``log_ndtr((x - loc) / scale)``.", _STD,
          notes="Method: ``starling.scipy.special.log_ndtr`` (an asymptotic series in the lower "
                "tail), so ``logcdf(-40) == -804.608...`` and the gradient there is ``~40``, "
                "not NaN.")
def logcdf(x, loc=0.0, scale=1.0):
    z, bad = _z("norm.logcdf", x, loc, scale)
    return invalid_to_nan(log_ndtr(z), bad)


@document("Normal survival function ``1 - cdf``, computed as ``ndtr(-(x - loc) / scale)`` "
          "(accurate in the upper tail).", _STD)
def sf(x, loc=0.0, scale=1.0):
    z, bad = _z("norm.sf", x, loc, scale)
    return invalid_to_nan(ndtr(-z), bad)


@document("Log of the normal survival function, ``log_ndtr(-(x - loc) / scale)``.", _STD)
def logsf(x, loc=0.0, scale=1.0):
    z, bad = _z("norm.logsf", x, loc, scale)
    return invalid_to_nan(log_ndtr(-z), bad)


@document("Normal quantile function (inverse cdf), ``loc + scale * ndtri(q)``.",
          ("q", "loc", "scale"),
          notes="``ppf(0) == -inf``, ``ppf(1) == inf``. Method: ``ndtri`` (Cephes' rational "
                "approximations, relative accuracy in both tails).")
def ppf(q, loc=0.0, scale=1.0):
    q, loc, scale = promote("norm.ppf", q, loc, scale)
    return invalid_to_nan(loc + scale * ndtri(q), scale <= 0)


@document("Normal inverse survival function, ``loc - scale * ndtri(q)`` (by symmetry, so "
          "small ``q`` keep their relative accuracy).", ("q", "loc", "scale"))
def isf(q, loc=0.0, scale=1.0):
    q, loc, scale = promote("norm.isf", q, loc, scale)
    return invalid_to_nan(loc - scale * ndtri(q), scale <= 0)
