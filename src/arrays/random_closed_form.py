"""Closed-form transforms of uniform, exponential and normal draws in ``starling.random``:
pareto, weibull_min, rayleigh, lognormal, maxwell, double_sided_maxwell, triangular and wald.

Each is one formula of a basic draw (inverse CDFs, or a norm of normals), so each is
differentiable in its parameters by construction and identical eagerly, staged and under
``vmap``. Computation is in float32 (float64 for float64 output); float16 / bfloat16 are rounded
at the end. Python-scalar and concrete-array parameters are validated (ValueError naming the
function); traced parameters cannot be, and invalid ones give NaN or an unspecified value.
"""
from __future__ import annotations

import numpy as np

from . import numpy as snp
from .ops.convert_element_type import convert_element_type
from .random import _check_key, _shape, rademacher, split
from .random_distributions import (_F32, _check_concrete, _compute, _float_dtype, _open_unit,
                                   exponential, normal, real_params)

__all__ = ["pareto", "weibull_min", "rayleigh", "lognormal", "maxwell", "double_sided_maxwell",
           "triangular", "wald"]


def _positive(x):
    return x > 0


def _nonneg(x):
    return x >= 0


def _setup(op, key, dtype):
    return _check_key(key, op), _float_dtype(dtype, op)


def pareto(key, b, shape=None, dtype=_F32):
    """Pareto samples with shape ``b`` and scale 1 (density ``b / x**(b+1)`` on ``x >= 1``):
    ``exp(E / b)`` with ``E`` standard exponential.

    Args:
        key: a key, uint32 ``(2,)``.
        b: positive shape (scalar or array).
        shape: output shape; default ``b``'s shape, which must broadcast to it.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``, values ``>= 1``.
    Raises:
        TypeError: a bad key or dtype. ValueError: ``b <= 0`` (concrete) or a bad shape.
    """
    k, dt = _setup("pareto", key, dtype)
    cd = _compute(dt)
    shape, (b,) = real_params("pareto", shape, cd, [("b", b, _positive, "b must be > 0")])
    return convert_element_type(snp.exp(exponential(k, shape, cd) / b), dt)


def weibull_min(key, scale, concentration, shape=None, dtype=_F32):
    """Weibull samples (``scipy.stats.weibull_min(concentration, scale=scale)``):
    ``scale E**(1 / concentration)`` with ``E`` standard exponential (inverse CDF).

    Args:
        key: a key, uint32 ``(2,)``.
        scale, concentration: positive parameters (scalars or arrays).
        shape: output shape; default their broadcast shape.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``, values ``>= 0``.
    Raises:
        TypeError: a bad key or dtype. ValueError: a parameter ``<= 0`` (concrete) or a bad
        shape.
    """
    k, dt = _setup("weibull_min", key, dtype)
    cd = _compute(dt)
    shape, (scale, conc) = real_params("weibull_min", shape, cd, [
        ("scale", scale, _positive, "scale must be > 0"),
        ("concentration", concentration, _positive, "concentration must be > 0")])
    e = exponential(k, shape, cd)
    return convert_element_type(scale * e ** snp.reciprocal(conc), dt)


def rayleigh(key, scale, shape=None, dtype=_F32):
    """Rayleigh samples ``scale sqrt(2 E)`` (``E`` standard exponential; the norm of two
    independent N(0, scale**2) coordinates).

    Args:
        key: a key, uint32 ``(2,)``.
        scale: scale ``>= 0`` (scalar or array).
        shape: output shape; default ``scale``'s shape.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``.
    Raises:
        TypeError: a bad key or dtype. ValueError: ``scale < 0`` (concrete) or a bad shape.
    """
    k, dt = _setup("rayleigh", key, dtype)
    cd = _compute(dt)
    shape, (scale,) = real_params("rayleigh", shape, cd,
                                  [("scale", scale, _nonneg, "scale must be >= 0")])
    return convert_element_type(scale * snp.sqrt(exponential(k, shape, cd) * 2.0), dt)


def lognormal(key, sigma=1.0, shape=None, dtype=_F32):
    """Log-normal samples ``exp(sigma Z)``, ``Z`` standard normal
    (``scipy.stats.lognorm(sigma)``).

    Args:
        key: a key, uint32 ``(2,)``.
        sigma: standard deviation of the log, ``>= 0`` (scalar or array).
        shape: output shape; default ``sigma``'s shape.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``.
    Raises:
        TypeError: a bad key or dtype. ValueError: ``sigma < 0`` (concrete) or a bad shape.
    """
    k, dt = _setup("lognormal", key, dtype)
    cd = _compute(dt)
    shape, (sigma,) = real_params("lognormal", shape, cd,
                                  [("sigma", sigma, _nonneg, "sigma must be >= 0")])
    return convert_element_type(snp.exp(sigma * normal(k, shape, cd)), dt)


def maxwell(key, shape=(), dtype=_F32):
    """Maxwell (Maxwell-Boltzmann) samples: the Euclidean norm of 3 standard normals.

    Args:
        key: a key, uint32 ``(2,)``.
        shape: output shape ``(*shape)``.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``, values ``>= 0``.
    Raises:
        TypeError: a bad key or dtype. ValueError: a negative dim.
    """
    k, dt = _setup("maxwell", key, dtype)
    cd = _compute(dt)
    z = normal(k, _shape(shape, "maxwell") + (3,), cd)
    return convert_element_type(snp.sqrt(snp.sum(z * z, axis=-1)), dt)


def double_sided_maxwell(key, loc, scale, shape=(), dtype=_F32):
    """Double-sided Maxwell samples ``loc + scale S M``: ``M`` Maxwell, ``S`` a random sign
    (density ``~ (x - loc)**2 exp(-(x - loc)**2 / (2 scale**2))``).

    Args:
        key: a key, uint32 ``(2,)``.
        loc: location (scalar or array).
        scale: scale ``>= 0`` (scalar or array).
        shape: output shape ``(*shape)``; the parameters must broadcast to it.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``.
    Raises:
        TypeError: a bad key or dtype. ValueError: ``scale < 0`` (concrete) or a bad shape.
    """
    k, dt = _setup("double_sided_maxwell", key, dtype)
    cd = _compute(dt)
    shape, (loc, scale) = real_params("double_sided_maxwell", shape, cd, [
        ("loc", loc, lambda x: ~np.isnan(x), "loc must not be NaN"),
        ("scale", scale, _nonneg, "scale must be >= 0")])
    ks, km = split(k)
    m = maxwell(km, shape, cd)
    return convert_element_type(loc + scale * rademacher(ks, shape, cd) * m, dt)


def triangular(key, left, mode, right, shape=None, dtype=_F32):
    """Triangular samples on ``[left, right]`` with peak at ``mode``, by the inverse CDF: with
    ``u`` uniform and ``c = (mode - left) / (right - left)``, ``left + sqrt(u (right - left)
    (mode - left))`` for ``u < c``, else ``right - sqrt((1 - u) (right - left) (right -
    mode))``.

    Args:
        key: a key, uint32 ``(2,)``.
        left, mode, right: finite bounds with ``left <= mode <= right`` and ``left < right``
            (scalars or arrays).
        shape: output shape; default their broadcast shape.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype`` in ``[left, right]``.
    Raises:
        TypeError: a bad key or dtype. ValueError: bounds out of order (concrete) or a bad
        shape.
    """
    k, dt = _setup("triangular", key, dtype)
    cd = _compute(dt)
    shape, (lo, mo, hi) = real_params("triangular", shape, cd, [
        (name, v, np.isfinite, f"{name} must be finite")
        for name, v in (("left", left), ("mode", mode), ("right", right))])
    _check_concrete("triangular", lambda a, m, b: (a <= m) & (m <= b) & (a < b),
                    "needs left <= mode <= right and left < right", left, mode, right)
    u = _open_unit(k, shape, cd)
    width = hi - lo
    c = (mo - lo) / width
    low = lo + snp.sqrt(u * width * (mo - lo))
    high = hi - snp.sqrt((1.0 - u) * width * (hi - mo))
    out = snp.clip(snp.where(snp.less(u, c), low, high), lo, hi)
    return convert_element_type(out, dt)


def wald(key, mean, shape=None, dtype=_F32):
    """Wald (inverse Gaussian) samples with mean ``mean`` and shape parameter 1
    (``scipy.stats.invgauss(mean)``).

    Method: J. R. Michael, W. R. Schucany, R. W. Haas, "Generating random variates using
    transformations with multiple roots", The American Statistician 30 (1976) 88-90: with
    ``y = mean Z**2`` (``Z`` standard normal), the smaller root ``x = mean / (1 + y/2 +
    sqrt(y) sqrt(1 + y/4))`` (the usual ``mean + mean y / 2 - ...`` rationalised, free of
    cancellation), kept with probability ``mean / (mean + x)``, else ``mean**2 / x``.

    Args:
        key: a key, uint32 ``(2,)``.
        mean: positive mean (scalar or array).
        shape: output shape; default ``mean``'s shape.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``, values ``> 0``.
    Raises:
        TypeError: a bad key or dtype. ValueError: ``mean <= 0`` (concrete) or a bad shape.
    """
    k, dt = _setup("wald", key, dtype)
    cd = _compute(dt)
    shape, (mu,) = real_params("wald", shape, cd, [("mean", mean, _positive,
                                                     "mean must be > 0")])
    kz, ku = split(k)
    z = normal(kz, shape, cd)
    y = mu * z * z
    x = mu / (1.0 + y * 0.5 + snp.sqrt(y) * snp.sqrt(1.0 + y * 0.25))
    u = _open_unit(ku, shape, cd)
    keep = snp.less_equal(u * (mu + x), mu)
    return convert_element_type(snp.where(keep, x, mu * (mu / x)), dt)
