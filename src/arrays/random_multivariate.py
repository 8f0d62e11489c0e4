"""Vector- and matrix-valued draws of ``starling.random``: multivariate_normal, orthogonal and
ball.

All three are compositions of ``normal`` / ``generalized_normal`` / ``exponential`` draws with
linear algebra (``starling.linalg``, imported on first use: linalg builds on the arrays
package), so they are differentiable where their parameters are (mean and covariance of
``multivariate_normal``) and work under every transformation.
"""
from __future__ import annotations

import operator

import numpy as np

from ..core import dtypes
from . import numpy as snp
from .convert import operand
from .ops.convert_element_type import convert_element_type
from .ops.elementwise_family import broadcast_shapes
from .random import _check_key, _shape, split
from .random_distributions import _F32, _compute, _float_dtype, exponential, normal
from .random_gamma import generalized_normal

__all__ = ["multivariate_normal", "orthogonal", "ball"]

_MVN_METHODS = ("cholesky", "eigh", "svd")


def _mvn_dtype(dtype, mean, cov):
    if dtype is not None:
        return _float_dtype(dtype, "multivariate_normal")
    for x in (mean, cov):
        if dtypes.is_complex(x.dtype):
            raise TypeError(f"multivariate_normal: mean and cov must be real, got {x.dtype}")
    return dtypes.float64 if dtypes.float64 in (mean.dtype, cov.dtype) else _F32


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Multivariate normal samples ``mean + A z`` with ``A A^T = cov`` and ``z`` standard normal.

    Args:
        key: a key, uint32 ``(2,)``.
        mean: ``(*mb, n)`` means.
        cov: ``(*cb, n, n)`` symmetric positive (semi-)definite covariances.
        shape: batch shape of the output; default the broadcast of ``mb`` and ``cb``, which
            must broadcast to it.
        dtype: the output's real floating dtype; default float64 if ``mean`` or ``cov`` is
            float64, else float32.
        method: the factor ``A``: ``"cholesky"`` (lower Cholesky factor; needs ``cov``
            positive definite, else NaN), ``"eigh"`` (``V sqrt(max(w, 0))`` from the symmetric
            eigendecomposition: semidefinite ``cov`` works) or ``"svd"`` (``U sqrt(s)``).
    Returns:
        Array ``(*shape, n)`` of ``dtype``; differentiable in ``mean`` and ``cov``.
    Raises:
        TypeError: a bad key, dtype or complex parameters. ValueError: 0-d ``mean``, ``cov``
        that is not a stack of square ``(n, n)`` matrices matching ``mean``, an unknown
        ``method``, or batch shapes not broadcasting to ``shape``.
    """
    op = "multivariate_normal"
    k = _check_key(key, op)
    if method not in _MVN_METHODS:
        raise ValueError(f"{op}: method must be one of {_MVN_METHODS}, got {method!r}")
    mean, cov = operand(mean, op), operand(cov, op)
    dt = _mvn_dtype(dtype, mean, cov)
    if mean.ndim < 1:
        raise ValueError(f"{op}: mean must have shape (..., n), got a scalar")
    n = mean.shape[-1]
    if cov.ndim < 2 or cov.shape[-1] != cov.shape[-2] or cov.shape[-1] != n:
        raise ValueError(f"{op}: cov must have shape (..., {n}, {n}) to match mean of shape "
                         f"{tuple(mean.shape)}, got {tuple(cov.shape)}")
    batch = broadcast_shapes(op, tuple(mean.shape[:-1]), tuple(cov.shape[:-2]))
    shape = batch if shape is None else _shape(shape, op)
    try:
        ok = broadcast_shapes(op, shape, batch) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{op}: parameter batch shape {batch} (mean {tuple(mean.shape)}, cov "
                         f"{tuple(cov.shape)}) does not broadcast to shape {shape}")
    cd = _compute(dt)
    mean, cov = convert_element_type(mean, cd), convert_element_type(cov, cd)
    from .. import linalg
    if method == "cholesky":
        factor = linalg.cholesky(cov)
    elif method == "eigh":
        w, v = linalg.eigh(cov)
        factor = v * snp.sqrt(snp.maximum(w, 0.0))[..., None, :]
    else:
        u, s, _ = linalg.svd(cov)
        factor = u * snp.sqrt(s)[..., None, :]
    z = normal(k, tuple(shape) + (n,), cd)
    out = mean + snp.matmul(factor, z[..., None])[..., 0]
    return convert_element_type(out, dt)


def _dim(x, op, name):
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be an int, got bool")
    try:
        v = operator.index(x)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {type(x).__name__}") from None
    if v < 0:
        raise ValueError(f"{op}: {name} must be >= 0, got {v}")
    return v


def orthogonal(key, n, shape=(), dtype=_F32, m=None):
    """Haar-distributed (uniformly random) matrices with orthonormal columns or rows.

    Method: the QR decomposition of a standard normal ``(max(n, m), min(n, m))`` matrix with
    the signs of ``R``'s diagonal moved into ``Q`` (F. Mezzadri, "How to generate random
    matrices from the classical compact groups", Notices of the AMS 54 (2007) 592-604), which
    makes ``Q`` exactly Haar; transposed when ``n < m``.

    Args:
        key: a key, uint32 ``(2,)``.
        n: number of rows (int >= 0).
        shape: batch shape ``(*shape)``.
        dtype: a real floating dtype (default float32; QR runs in float32 / float64).
        m: number of columns (default ``n``: square orthogonal matrices).
    Returns:
        Array ``(*shape, n, m)`` of ``dtype`` with ``Q^T Q = I`` (``n >= m``) or ``Q Q^T = I``.
    Raises:
        TypeError: a bad key, dtype or non-int ``n`` / ``m``. ValueError: negative ``n``,
        ``m`` or dims in ``shape``.
    """
    k = _check_key(key, "orthogonal")
    dt = _float_dtype(dtype, "orthogonal")
    n = _dim(n, "orthogonal", "n")
    m = n if m is None else _dim(m, "orthogonal", "m")
    shape = _shape(shape, "orthogonal")
    cd = _compute(dt)
    big, small = max(n, m), min(n, m)
    if small == 0:
        return snp.zeros(tuple(shape) + (n, m), dt)
    from .. import linalg
    q, r = linalg.qr(normal(k, tuple(shape) + (big, small), cd))
    d = snp.diagonal(r, axis1=-2, axis2=-1)
    q = q * snp.where(snp.less(d, 0.0), -1.0, 1.0).astype(cd)[..., None, :]
    if n < m:
        q = snp.swapaxes(q, -1, -2)
    return convert_element_type(q, dt)


def ball(key, d, p=2, shape=(), dtype=_F32):
    """Points uniformly distributed in the unit ``p``-norm ball of ``R^d``.

    Method: F. Barthe, O. Guédon, S. Mendelson, A. Naor, "A probabilistic approach to the
    geometry of the l_p^n-ball", Annals of Probability 33 (2005) 480-513: with ``g`` of ``d``
    generalized normal coordinates (density ``~ exp(-|x|**p)``) and ``e`` standard
    exponential, ``g / (sum |g|**p + e)**(1/p)`` is uniform in the ball.

    Args:
        key: a key, uint32 ``(2,)``.
        d: the dimension (int >= 1).
        p: the norm's power, ``> 0`` (Python scalar).
        shape: batch shape ``(*shape)``.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape, d)`` of ``dtype`` with ``sum |x|**p < 1``.
    Raises:
        TypeError: a bad key, dtype or non-int ``d``. ValueError: ``d < 1`` or ``p <= 0``.
    """
    k = _check_key(key, "ball")
    dt = _float_dtype(dtype, "ball")
    d = _dim(d, "ball", "d")
    if d < 1:
        raise ValueError(f"ball: d must be >= 1, got {d}")
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer,
                                                              np.floating)):
        raise TypeError(f"ball: p must be a Python real scalar, got {type(p).__name__}")
    if not p > 0:
        raise ValueError(f"ball: p must be > 0, got {p}")
    shape = _shape(shape, "ball")
    cd = _compute(dt)
    kg, ke = split(k)
    g = generalized_normal(kg, float(p), tuple(shape) + (d,), cd)
    e = exponential(ke, shape, cd)
    norm_p = snp.sum(snp.abs(g) ** float(p), axis=-1) + e
    return convert_element_type(g / (norm_p ** (1.0 / float(p)))[..., None], dt)
