"""``starling.scipy.stats.t``: Student's t distribution with ``df`` degrees of freedom,
location ``loc`` and scale ``scale`` (SciPy's ``scipy.stats.t``; JAX has ``logpdf`` / ``pdf``).

``z = (x - loc) / scale`` enters only through ``s = |z| / sqrt(df)`` and ``1 / s``, never
``z**2``, so ``|z|`` up to the float maximum neither overflows nor loses the polynomial tail.
``df == inf`` is the normal distribution.
"""
from __future__ import annotations

from ... import numpy as snp
from ...ops.special import log_ndtr, ndtr
from ...ops.special_beta import betainc, betaln
from ...ops.special_beta_complement import betaincc
from ...ops.special_gamma import lgamma
from ._common import LOG_2, LOG_2PI, document, invalid_to_nan, safe, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]

_ARGS = ("x", "df", "loc", "scale")


def _prepare(op, x, df, loc, scale):
    """``(z, df with inf replaced by 1, is_normal, bad, scale)``, promoted."""
    z, scale, df = standardize(op, x, loc, scale, df)
    normal = snp.isinf(df) & (df > 0)
    bad = (scale <= 0) | (df <= 0)
    return z, safe(df, ~normal & (df > 0), 1.0), normal, bad, scale


def _log1p_sq(z, df):
    """``log1p(z**2 / df)`` without forming ``z**2``: ``log1p(s**2)`` for ``s = |z| / sqrt(df)
    <= 1``, else ``log1p(r**2) - 2 log(r)`` with ``r = 1 / s``."""
    root = snp.sqrt(df)
    big = snp.abs(z) > root
    s = snp.abs(z) / root
    r = root / safe(snp.abs(z), big, root)   # 1 where unused: a finite gradient
    return snp.where(big, snp.log1p(r * r) - 2.0 * snp.log(r), snp.log1p(s * s))


# log(Gamma(a + 1/2) / (Gamma(a) sqrt(a))) ~ sum_n (-1)**n (2**(1-n) - 2) B_n / (n (n-1) a**(n-1))
# (Stirling's series of the two log-gammas, B_n the Bernoulli numbers, even n from 2 to 16): the
# coefficients of 1/a, 1/a**3, ..., 1/a**15.
_RATIO_SERIES = (-1 / 8, 1 / 192, -1 / 640, 17 / 14336, -31 / 18432, 691 / 180224,
                 -5461 / 425984, 929569 / 15728640)
_SERIES_FROM = 10.0


def _log_gamma_ratio(a):
    """``log(Gamma(a + 1/2) / (Gamma(a) sqrt(a)))`` for ``a > 0``: the log-gammas below
    ``a = 10`` (they are small there, so their difference keeps ~1e-15 absolute accuracy),
    Stirling's series above (relative error below 3e-16 at ``a = 10``, the 16th-order term
    being the last), where the log-gammas (and SciPy's ``betaln``, which takes their difference
    up to ``a = 1e6``) would cancel to ``|lgamma(a)| * eps``."""
    big = a >= _SERIES_FROM
    ab = safe(a, big, _SERIES_FROM)
    u = 1.0 / (ab * ab)
    series = 0.0
    for c in reversed(_RATIO_SERIES):
        series = series * u + c
    series = series / ab
    asmall = safe(a, ~big, 1.0)
    direct = lgamma(asmall + 0.5) - lgamma(asmall) - 0.5 * snp.log(asmall)
    return snp.where(big, series, direct)


@document(_ARGS)
def logpdf(x, df, loc=0.0, scale=1.0):
    """Log of Student's t density
    ``Gamma((df+1)/2) / (sqrt(df pi) Gamma(df/2) scale) (1 + z**2/df)**(-(df+1)/2)``,
    ``z = (x - loc) / scale``.

    Method: ``R(df/2) - log(2 pi)/2 - (df+1)/2 log1p(z**2/df) - log(scale)`` with
    ``R(a) = log(Gamma(a + 1/2) / (Gamma(a) sqrt(a)))`` from Stirling's series for ``a >= 10`` (so
    large ``df`` keep full accuracy; SciPy loses ~1e-10 at ``df = 1e6``) and ``log1p(z**2/df)``
    formed without ``z**2`` (no overflow). Differentiable in every argument.
    """
    z, dfs, normal, bad, scale = _prepare("t.logpdf", x, df, loc, scale)
    student = _log_gamma_ratio(0.5 * dfs) - 0.5 * (dfs + 1.0) * _log1p_sq(z, dfs)
    gauss = -0.5 * z * z
    return invalid_to_nan(snp.where(normal, gauss, student) - snp.log(scale) - 0.5 * LOG_2PI,
                          bad)


@document(_ARGS)
def pdf(x, df, loc=0.0, scale=1.0):
    """Student's t density ``exp(logpdf(x, df, loc, scale))``."""
    return snp.exp(logpdf(x, df, loc, scale))


def _lower_tail(z, dfs, log=False):
    """``P(T <= -|z|)`` to full relative accuracy, as Boost's ``students_t`` cdf: with
    ``s**2 = z**2 / df``, ``betaincc(1/2, df/2, s**2 / (1 + s**2)) / 2`` for ``s**2 < 1/2``
    (a small, exactly formed argument: no ``1 - w`` rounding for large ``df``), else
    ``betainc(df/2, 1/2, w) / 2`` with ``w = 1 / (1 + s**2)`` formed from ``r = 1 / s`` (no
    overflow for huge ``|z|``). Where ``w < eps`` and that underflowed (``x = -1e300``,
    ``df = 0.1`` has tail ``4e-31``) the leading term ``w**a / (a B(a, 1/2))`` of the series of
    ``I_w(a, 1/2)`` (A&S 26.5.4; the next is ``O(w)`` relative) is summed in logs; with
    ``log=True`` the log of the tail is returned, that term staying in logs (no underflow:
    ``logcdf(-1e300, df=1000) = -6.87e5``)."""
    s = snp.abs(z) / snp.sqrt(dfs)
    near = s * s < 0.5
    sn = safe(s, near, 0.0)
    r = 1.0 / safe(s, ~near, 1.0)
    a = 0.5 * dfs
    close = 0.5 * betaincc(0.5, a, sn * sn / (1.0 + sn * sn))
    far = 0.5 * betainc(a, 0.5, r * r / (1.0 + r * r))
    tiny = (r * r < snp.finfo(r.dtype).eps) & (far == 0)   # only where betainc underflowed
    rt = safe(r, tiny, 1.0)
    log_w = 2.0 * snp.log(rt) - snp.log1p(rt * rt)
    log_series = a * log_w - snp.log(a) - betaln(a, 0.5) - LOG_2
    if log:
        return snp.where(tiny, log_series, snp.log(snp.where(near, close, far)))
    return snp.where(near, close, snp.where(tiny, snp.exp(log_series), far))


def _log_cdf_parts(op, x, df, loc, scale):
    z, dfs, normal, bad, _ = _prepare(op, x, df, loc, scale)
    return z, _lower_tail(z, dfs), normal, bad


_CDF_NOTES = ("Method: the regularized incomplete beta function or its complement (``betainc`` "
              "/ ``betaincc``: Boost's ``ibeta`` / ``ibetac`` in float64) of ``df / (df + z**2)`` "
              "or ``z**2 / (df + z**2)``, whichever is small (Boost's choice: relative accuracy "
              "in both tails for any ``df``); the normal cdf for ``df == inf``. "
              "Derivatives: in ``x`` / ``loc`` / ``scale`` the density, to any order; in ``df`` "
              "first order only (``betainc``'s derivative in its parameters).")


@document(_ARGS, notes=_CDF_NOTES)
def cdf(x, df, loc=0.0, scale=1.0):
    """Student's t cumulative distribution function ``P(T <= x)``."""
    z, tail, normal, bad = _log_cdf_parts("t.cdf", x, df, loc, scale)
    student = snp.where(z > 0, 1.0 - tail, tail)
    return invalid_to_nan(snp.where(normal, ndtr(z), student), bad)


@document(_ARGS, notes=_CDF_NOTES)
def sf(x, df, loc=0.0, scale=1.0):
    """Student's t survival function ``P(T > x) = cdf(-x)`` (by symmetry: accurate in the upper
    tail)."""
    z, tail, normal, bad = _log_cdf_parts("t.sf", x, df, loc, scale)
    student = snp.where(z < 0, 1.0 - tail, tail)
    return invalid_to_nan(snp.where(normal, ndtr(-z), student), bad)


def _log_side(z, dfs, z_pos):
    """``log P`` of the side whose probability is ``1 - tail`` where ``z_pos``, else ``tail``."""
    return snp.where(z_pos, snp.log1p(-_lower_tail(z, dfs)), _lower_tail(z, dfs, log=True))


@document(_ARGS, notes=_CDF_NOTES)
def logcdf(x, df, loc=0.0, scale=1.0):
    """Log of Student's t cdf: ``log(tail)`` below the median, ``log1p(-tail)`` above (so neither
    the far left tail nor values near 0 lose accuracy)."""
    z, dfs, normal, bad, _ = _prepare("t.logcdf", x, df, loc, scale)
    return invalid_to_nan(snp.where(normal, log_ndtr(z), _log_side(z, dfs, z > 0)), bad)


@document(_ARGS, notes=_CDF_NOTES)
def logsf(x, df, loc=0.0, scale=1.0):
    """Log of Student's t survival function, ``logcdf(-x)`` by symmetry."""
    z, dfs, normal, bad, _ = _prepare("t.logsf", x, df, loc, scale)
    return invalid_to_nan(snp.where(normal, log_ndtr(-z), _log_side(z, dfs, z < 0)), bad)
