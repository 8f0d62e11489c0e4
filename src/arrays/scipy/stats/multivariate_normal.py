"""``starling.scipy.stats.multivariate_normal``: the multivariate normal distribution
``N(mean, cov)`` over the last axis (SciPy's ``scipy.stats.multivariate_normal``, JAX's
``jax.scipy.stats.multivariate_normal``), with SciPy's degenerate case (``allow_singular``)."""
from __future__ import annotations

import inspect

from .... import linalg as _la
from ... import numpy as snp
from ...ops.elementwise_docs import entry, fill
from ._common import LOG_2PI, NAN, NEG_INF, promote, safe

__all__ = ["logpdf", "pdf"]


def _operands(x, mean, cov):
    """``(x, mean, cov, n)``: promoted, ``mean`` broadcast to the last axis ``n``; ``n is None``
    for the univariate elementwise case (scalar mean and cov)."""
    op = "multivariate_normal.logpdf"
    x, mean, cov = promote(op, x, 0.0 if mean is None else mean, cov)
    if mean.ndim >= 1:
        n = mean.shape[-1]
    elif cov.ndim >= 1:
        n = cov.shape[-1]
    else:
        return x, mean, cov, None
    if cov.ndim == 1 and cov.shape[0] != n or cov.ndim >= 2 and cov.shape[-2:] != (n, n):
        raise ValueError(f"{op}: cov must be a scalar, ({n},) (a diagonal) or (*batch, {n}, "
                         f"{n}) for a mean of dimension {n}, got shapes mean "
                         f"{tuple(mean.shape)} and cov {tuple(cov.shape)}")
    if n == 1 and (x.ndim == 0 or x.shape[-1] != 1):
        x = x[..., None]   # SciPy: in one dimension, each entry of x is a point
    if x.shape[-1] != n:
        raise ValueError(f"{op}: x must have a last axis of length {n} (the dimension of mean "
                         f"and cov), got shape {tuple(x.shape)}")
    return x, snp.broadcast_to(mean, mean.shape[:-1] + (n,)) if mean.ndim else mean, cov, n


def _cholesky_terms(dev, cov):
    """``(log det cov, Mahalanobis distance**2)`` from the Cholesky factor (NaN where ``cov`` is
    not positive definite)."""
    chol = _la.cholesky(cov)
    y = _la.solve_triangular(chol, dev[..., None], upper=False)[..., 0]
    diag = snp.diagonal(chol, axis1=-2, axis2=-1)
    return 2.0 * snp.sum(snp.log(diag), axis=-1), snp.sum(y * y, axis=-1)


def _degenerate_terms(w, coords):
    """``(rank, log pseudo-det, Mahalanobis**2 with the pseudo-inverse, outside-support mask,
    negative-eigenvalue mask)`` from the eigenvalues ``w`` of ``cov`` and the coordinates of
    ``x - mean`` in its eigenbasis, with SciPy's cut-off: eigenvalues up to
    ``c * eps * max|w|`` count as zero (``c = 1e6`` in float64, ``1e3`` in float32) and a point
    whose component in the null space has norm ``>= 1e3`` times that cut-off is outside the
    support."""
    factor = 1e6 if w.dtype == snp.float64 else 1e3
    cut = (factor * snp.finfo(w.dtype).eps) * snp.max(snp.abs(w), axis=-1, keepdims=True)
    keep = w > cut
    w_safe = safe(w, keep, 1.0)
    rank = snp.sum(keep.astype(w.dtype), axis=-1)
    log_pdet = snp.sum(snp.where(keep, snp.log(w_safe), 0.0), axis=-1)
    maha = snp.sum(snp.where(keep, coords * coords / w_safe, 0.0), axis=-1)
    null2 = snp.sum(snp.where(keep, 0.0, coords * coords), axis=-1)
    limit = 1e3 * cut[..., 0]
    return rank, log_pdet, maha, null2 >= limit * limit, snp.any(w < -cut, axis=-1)


def _log_density(rank, log_det, maha):
    return -0.5 * (rank * LOG_2PI + log_det + maha)


def logpdf(x, mean=None, cov=1.0, allow_singular=False):
    """Log density of the multivariate normal distribution ``N(mean, cov)`` at each point of
    ``x`` (the last axis)."""
    x, mean, cov, n = _operands(x, mean, cov)
    dev = x - mean
    if n is None:   # scalar mean and variance: elementwise, as JAX
        return _log_density(1.0, snp.log(cov), dev * dev / cov)
    if cov.ndim >= 2 and not allow_singular:
        log_det, maha = _cholesky_terms(dev, cov)
        return _log_density(n, log_det, maha)
    if cov.ndim >= 2:
        w, v = _la.eigh(cov)
        coords = snp.matmul(dev[..., None, :], v)[..., 0, :]  # x - mean in the eigenbasis
    else:   # cov * I, or a diagonal: the eigenbasis is the identity
        w, coords = snp.broadcast_to(cov, (n,)), dev
        if not allow_singular:
            bad = snp.any(w <= 0)
            ws = safe(w, ~bad, 1.0)
            out = _log_density(n, snp.sum(snp.log(ws)), snp.sum(dev * dev / ws, axis=-1))
            return snp.where(bad, NAN, out)
    rank, log_pdet, maha, off, negative = _degenerate_terms(w, coords)
    out = snp.where(off, NEG_INF, _log_density(rank, log_pdet, maha))
    return snp.where(negative, NAN, out)


def pdf(x, mean=None, cov=1.0, allow_singular=False):
    """Density of the multivariate normal distribution, ``exp(logpdf(...))``."""
    return snp.exp(logpdf(x, mean, cov, allow_singular))


_DOC_ARGS = [
    ("x: ", "``(*batch_x, n)`` points (in one dimension also ``(*batch_x)``: each entry a "
            "point, as SciPy)."),
    ("mean: ", "``(*batch_m, n)``, a scalar broadcast to ``(n,)``, or None (zeros)."),
    ("cov: ", "``(*batch_c, n, n)`` symmetric positive (semi)definite matrices (only the lower "
              "triangle is read), ``(n,)`` a diagonal, or a scalar ``c`` for ``c I``; with a "
              "scalar mean and a scalar cov the function is the elementwise univariate density "
              "(JAX's convention)."),
    ("allow_singular: ", "False (default): ``cov`` is factored by Cholesky; a matrix that is "
                         "not positive definite gives NaN (SciPy raises). True: SciPy's "
                         "degenerate normal: an eigendecomposition, the pseudo-determinant and "
                         "pseudo-inverse over eigenvalues above ``c eps max|w|`` (``c = 1e6`` "
                         "in float64, ``1e3`` in float32), ``-inf`` for points off the "
                         "support (the affine subspace through ``mean``), NaN for a ``cov`` "
                         "with a clearly negative eigenvalue (SciPy raises)."),
]


def _doc(f, returns):
    """``f``'s docstring (its summary) completed with the Args / Returns / Raises sections and
    the method shared by ``logpdf`` and ``pdf``."""
    summary = inspect.cleandoc(f.__doc__ or "").replace("\n", " ")
    text = fill(summary) + "\n\nArgs:\n" + "".join(entry(h, t) for h, t in _DOC_ARGS)
    text += "Returns:\n" + entry("", returns)
    text += "Raises:\n" + entry("ValueError: ", "``x``, ``mean`` and ``cov`` of mismatched "
                                                "last dimensions (the message names the "
                                                "shapes), or batch dims that do not broadcast.")
    text += entry("TypeError: ", "complex operands.")
    text += "\n" + fill(
        "Method: ``-(n log(2 pi) + log det(cov) + (x - mean)^T cov^-1 (x - mean)) / 2`` with "
        "``log det`` and the quadratic form from the Cholesky factor ``L`` (one triangular "
        "solve, ``2 sum log diag(L)``), or from ``eigh`` when ``allow_singular``. "
        "Differentiable in ``x``, ``mean`` and ``cov`` (the gradient in ``cov`` is symmetric); "
        "with ``allow_singular`` the derivative in ``cov`` is exact only while no eigenvalue "
        "crosses the cut-off.") + "\n"
    return text


logpdf.__doc__ = _doc(logpdf, "Array ``(*batch)``, the broadcast of ``batch_x``, ``batch_m`` "
                              "and ``batch_c``; the promoted floating dtype.")
pdf.__doc__ = _doc(pdf, "Array ``(*batch)`` as ``logpdf``.")
