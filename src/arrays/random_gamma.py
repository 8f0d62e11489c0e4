"""The gamma family of ``starling.random``: gamma, loggamma, beta, dirichlet, chisquare, t, f and
generalized_normal.

Every member is built on one sampler of Gamma(a, 1) in log space:

* ``a >= 1``: G. Marsaglia & W. W. Tsang, "A simple method for generating gamma variables",
  ACM TOMS 26 (2000) 363-372: with ``d = a - 1/3``, ``c = 1 / sqrt(9 d)``, ``x`` standard
  normal and ``v = (1 + c x)**3``, accept ``d v`` when ``v > 0`` and
  ``log u < x**2 / 2 + d - d v + d log v`` (acceptance above 95% for every ``a``).
* ``a < 1``: Marsaglia & Tsang's boost (section 6): ``Gamma(a) = Gamma(a + 1) U**(1/a)``,
  done as ``log Gamma(a + 1) + log(U) / a`` so that tiny ``a`` (whose samples underflow any
  float) keeps full precision in log space (``loggamma``).

The rejection runs as vectorised ``while_loop`` rounds (random_rejection.py), so draws are the
same eagerly, compiled and under ``vmap``. Samples are differentiable in ``a`` by implicit
reparameterisation (M. Figurnov, S. Mohamed, A. Mnih, "Implicit Reparameterization Gradients",
NeurIPS 2018): at a fixed quantile ``P(a, x)``, ``dx/da = random_gamma_grad(a, x)``, applied by a
``custom_jvp``; beta, dirichlet, chisquare, t and f are differentiable through it. Computation is
in float32 (float64 for float64 output); float16 / bfloat16 are rounded at the end.
"""
from __future__ import annotations

import functools

import numpy as np

from ..core import dtypes
from . import numpy as snp
from .ops.convert_element_type import convert_element_type
from .ops.special_gamma import digamma
from .ops.special_igamma import random_gamma_grad
from .random import _check_key, rademacher, split
from .random_distributions import (_F32, _compute, _float_dtype, _open_unit, normal,
                                   real_params)
from .random_rejection import rejection_loop

__all__ = ["gamma", "loggamma", "beta", "dirichlet", "chisquare", "t", "student_t", "f",
           "generalized_normal"]


def _nonneg(x):
    return x >= 0


def _positive(x):
    return x > 0


def _log_gamma_draw(key, a):
    """log of Gamma(a, 1) samples (Marsaglia & Tsang 2000, module docstring); ``a``: float
    ``(*s)`` of the compute dtype. ``a == 0`` gives -inf, ``a == inf`` inf, invalid ``a`` NaN."""
    cd = a.dtype
    shape = tuple(a.shape)
    k_rounds, k_boost = split(key)
    valid = snp.logical_and(snp.isfinite(a), snp.greater(a, 0.0))
    boost = snp.less(a, 1.0)
    safe = snp.where(valid, a, snp.ones_like(a))
    d = snp.subtract(snp.where(boost, snp.add(safe, 1.0), safe), 1.0 / 3.0)
    c = snp.reciprocal(snp.sqrt(snp.multiply(d, 9.0)))
    log_d = snp.log(d)

    def propose(k):
        kx, ku = split(k)
        x = normal(kx, shape, cd)
        v = snp.add(snp.multiply(c, x), 1.0)
        v3 = snp.multiply(snp.multiply(v, v), v)
        log_v3 = snp.log(v3)
        log_u = snp.log(_open_unit(ku, shape, cd))
        bound = snp.add(snp.multiply(snp.square(x), 0.5),
                        snp.multiply(d, snp.add(snp.subtract(1.0, v3), log_v3)))
        ok = snp.logical_and(snp.greater(v, 0.0), snp.less(log_u, bound))
        return snp.add(log_d, log_v3), ok

    # Degenerate and invalid shapes need no rounds: 0 -> log 0, inf -> inf, else NaN.
    fixed = snp.where(snp.equal(a, 0.0), -np.inf, snp.where(snp.equal(a, np.inf), np.inf, np.nan))
    fixed = convert_element_type(snp.broadcast_to(fixed, shape), cd)
    log_x = rejection_loop(k_rounds, fixed, snp.logical_not(valid), propose)
    log_u = snp.log(_open_unit(k_boost, shape, cd))
    boosted = snp.add(log_x, snp.divide(log_u, safe))
    return snp.where(snp.logical_and(valid, boost), boosted, log_x)


@functools.lru_cache(maxsize=None)
def _gamma_core():
    # Built on first use: custom_jvp lives in transforms/, which imports the arrays package.
    from ..transforms.custom import custom_jvp

    def sample(key, a, log_space):
        log_x = _log_gamma_draw(key, a)
        return log_x if log_space else snp.exp(log_x)

    core = custom_jvp(sample, nondiff_argnums=(2,))

    def sample_jvp(log_space, primals, tangents):
        key, a = primals
        ta = tangents[1]
        out = core(key, a, log_space)
        x = snp.exp(out) if log_space else out
        dx = random_gamma_grad(a, x)
        if log_space:
            # d log x / da = (dx/da) / x; where x is below eps (or underflowed), the series
            # P(a, x) = x**a / Gamma(a + 1) (1 + O(x)) gives (digamma(a + 1) - log x) / a.
            small = (digamma(snp.add(a, 1.0)) - out) / a
            tiny = snp.less(x, float(dtypes.finfo(a.dtype).eps))
            dx = snp.where(tiny, small, dx / snp.where(tiny, snp.ones_like(x), x))
        return out, snp.multiply(dx, ta)

    core.defjvp(sample_jvp)
    return core


def _gamma_log_or_linear(op, key, a, shape, dtype, log_space):
    k = _check_key(key, op)
    dt = _float_dtype(dtype, op)
    cd = _compute(dt)
    shape, (a,) = real_params(op, shape, cd, [("a", a, _nonneg, "a must be >= 0")])
    return convert_element_type(_gamma_core()(k, a, log_space), dt)


def gamma(key, a, shape=None, dtype=_F32):
    """Gamma(a, 1) samples (shape ``a``, scale 1; density ``x**(a-1) e**-x / Gamma(a)``).

    Method: Marsaglia & Tsang (2000) rejection with the ``U**(1/a)`` boost for ``a < 1``, as
    vectorised ``while_loop`` rounds (module docstring). Differentiable in ``a`` by implicit
    reparameterisation (Figurnov et al. 2018): ``dx/da = starling.lax.random_gamma_grad(a, x)``.

    Args:
        key: a key, uint32 ``(2,)``.
        a: shape parameter ``>= 0`` (scalar or array); ``a == 0`` gives 0.
        shape: output shape ``(*shape)``; default ``a``'s shape, which must broadcast to it.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``. For ``a`` below about 0.05 many samples underflow to 0
        (use ``loggamma``). Traced invalid ``a`` (negative, NaN) gives NaN.
    Raises:
        TypeError: a bad key, a non-floating dtype or complex ``a``. ValueError: ``a < 0`` or
        NaN (Python scalars and concrete arrays), or ``a`` not broadcasting to ``shape``.
    """
    return _gamma_log_or_linear("gamma", key, a, shape, dtype, False)


def loggamma(key, a, shape=None, dtype=_F32):
    """Logs of Gamma(a, 1) samples, accurate for tiny ``a`` (whose samples underflow).

    Same sampler and arguments as ``gamma`` (log space throughout: ``log Gamma(a + 1) +
    log(U) / a`` for ``a < 1``); ``a == 0`` gives -inf. Differentiable in ``a``:
    ``random_gamma_grad(a, x) / x``, and ``(digamma(a + 1) - log x) / a`` where ``x`` is below
    the dtype's eps (the small-``x`` series of the incomplete gamma function).

    Returns:
        Array ``(*shape)`` of ``dtype``. Raises as ``gamma``.
    """
    return _gamma_log_or_linear("loggamma", key, a, shape, dtype, True)


def beta(key, a, b, shape=None, dtype=_F32):
    """Beta(a, b) samples in [0, 1].

    Method: ``X / (X + Y)`` with ``X ~ Gamma(a)``, ``Y ~ Gamma(b)`` formed from their logs
    (``loggamma``; ``exp(lx - m) / (exp(lx - m) + exp(ly - m))`` with ``m = max(lx, ly)``), so
    ``a, b << 1`` give 0 or 1 rather than 0/0. Differentiable in ``a`` and ``b`` through
    ``loggamma``.

    Args:
        key: a key, uint32 ``(2,)``.
        a, b: positive shape parameters (scalars or arrays).
        shape: output shape; default the broadcast shape of ``a`` and ``b``.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``. Traced invalid parameters give NaN.
    Raises:
        TypeError: a bad key or dtype. ValueError: ``a <= 0`` or ``b <= 0`` (concrete), or
        parameters not broadcasting to ``shape``.
    """
    k = _check_key(key, "beta")
    dt = _float_dtype(dtype, "beta")
    cd = _compute(dt)
    shape, (a, b) = real_params("beta", shape, cd, [("a", a, _positive, "a must be > 0"),
                                                    ("b", b, _positive, "b must be > 0")])
    ka, kb = split(k)
    core = _gamma_core()
    lx, ly = core(ka, a, True), core(kb, b, True)
    m = snp.maximum(lx, ly)
    ex, ey = snp.exp(lx - m), snp.exp(ly - m)
    return convert_element_type(ex / (ex + ey), dt)


def dirichlet(key, alpha, shape=None, dtype=_F32):
    """Dirichlet(alpha) samples: points of the probability simplex.

    Method: normalised Gamma(alpha_i) samples, formed in log space (``softmax`` of
    ``loggamma``), so tiny ``alpha`` do not give 0/0. Differentiable in ``alpha``.

    Args:
        key: a key, uint32 ``(2,)``.
        alpha: positive concentrations ``(*batch, k)``.
        shape: batch shape of the output; default ``batch``, which must broadcast to it.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape, k)`` of ``dtype`` whose last axis sums to 1.
    Raises:
        TypeError: a bad key or dtype. ValueError: 0-d ``alpha``, ``alpha <= 0`` (concrete), or
        ``batch`` not broadcasting to ``shape``.
    """
    k = _check_key(key, "dirichlet")
    dt = _float_dtype(dtype, "dirichlet")
    cd = _compute(dt)
    if np.ndim(alpha) == 0:
        raise ValueError("dirichlet: alpha must have at least one dim (the categories), got a "
                         "scalar")
    n = np.shape(alpha)[-1]
    full = None if shape is None else tuple(shape) + (n,)
    full, (alpha,) = real_params("dirichlet", full, cd,
                                 [("alpha", alpha, _positive, "alpha must be > 0")])
    lg = _gamma_core()(k, alpha, True)
    lg = lg - snp.max(lg, axis=-1, keepdims=True)
    e = snp.exp(lg)
    return convert_element_type(e / snp.sum(e, axis=-1, keepdims=True), dt)


def chisquare(key, df, shape=None, dtype=_F32):
    """Chi-square samples with ``df`` degrees of freedom: ``2 Gamma(df / 2)``.

    Args:
        key: a key, uint32 ``(2,)``.
        df: positive degrees of freedom (scalar or array; need not be integral).
        shape: output shape; default ``df``'s shape.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``, differentiable in ``df``.
    Raises:
        TypeError: a bad key or dtype. ValueError: ``df <= 0`` (concrete) or a bad shape.
    """
    k = _check_key(key, "chisquare")
    dt = _float_dtype(dtype, "chisquare")
    cd = _compute(dt)
    shape, (df,) = real_params("chisquare", shape, cd, [("df", df, _positive, "df must be > 0")])
    return convert_element_type(_gamma_core()(k, df * 0.5, False) * 2.0, dt)


def t(key, df, shape=None, dtype=_F32):
    """Student's t samples with ``df`` degrees of freedom.

    Method: ``Z / sqrt(V / df)`` with ``Z`` standard normal and ``V / df = G / (df / 2)``,
    ``G ~ Gamma(df / 2)`` taken in log space (``loggamma``) so small ``df`` do not overflow.

    Args:
        key: a key, uint32 ``(2,)``.
        df: positive degrees of freedom (scalar or array).
        shape: output shape; default ``df``'s shape.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``, differentiable in ``df``.
    Raises:
        TypeError: a bad key or dtype. ValueError: ``df <= 0`` (concrete) or a bad shape.
    """
    k = _check_key(key, "t")
    dt = _float_dtype(dtype, "t")
    cd = _compute(dt)
    shape, (df,) = real_params("t", shape, cd, [("df", df, _positive, "df must be > 0")])
    kn, kg = split(k)
    half = df * 0.5
    lg = _gamma_core()(kg, half, True)
    z = normal(kn, shape, cd)
    return convert_element_type(z * snp.exp((snp.log(half) - lg) * 0.5), dt)


student_t = t


def f(key, dfnum, dfden, shape=None, dtype=_F32):
    """F(dfnum, dfden) samples: ``(V1 / dfnum) / (V2 / dfden)`` for chi-square ``V1``, ``V2``
    (from ``loggamma``, in log space).

    Args:
        key: a key, uint32 ``(2,)``.
        dfnum, dfden: positive degrees of freedom (scalars or arrays).
        shape: output shape; default their broadcast shape.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``, differentiable in both parameters.
    Raises:
        TypeError: a bad key or dtype. ValueError: a parameter ``<= 0`` (concrete) or a bad
        shape.
    """
    k = _check_key(key, "f")
    dt = _float_dtype(dtype, "f")
    cd = _compute(dt)
    shape, (dn, dd) = real_params("f", shape, cd, [
        ("dfnum", dfnum, _positive, "dfnum must be > 0"),
        ("dfden", dfden, _positive, "dfden must be > 0")])
    k1, k2 = split(k)
    core = _gamma_core()
    hn, hd = dn * 0.5, dd * 0.5
    log_ratio = (core(k1, hn, True) - snp.log(hn)) - (core(k2, hd, True) - snp.log(hd))
    return convert_element_type(snp.exp(log_ratio), dt)


def generalized_normal(key, p, shape=(), dtype=_F32):
    """Generalized normal samples: density ``p / (2 Gamma(1/p)) exp(-|x|**p)``.

    Method: ``|X|**p ~ Gamma(1/p)`` with an independent random sign, so ``X = s G**(1/p)``
    (``G`` from ``loggamma``). ``p = 2`` is N(0, 1/2), ``p = 1`` the Laplace distribution.

    Args:
        key: a key, uint32 ``(2,)``.
        p: positive power (scalar or array broadcasting to ``shape``).
        shape: output shape ``(*shape)``.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``.
    Raises:
        TypeError: a bad key or dtype. ValueError: ``p <= 0`` (concrete) or a bad shape.
    """
    k = _check_key(key, "generalized_normal")
    dt = _float_dtype(dtype, "generalized_normal")
    cd = _compute(dt)
    shape, (p,) = real_params("generalized_normal", shape, cd,
                              [("p", p, _positive, "p must be > 0")])
    ks, kg = split(k)
    lg = _gamma_core()(kg, snp.reciprocal(p), True)
    s = rademacher(ks, shape, cd)
    return convert_element_type(s * snp.exp(lg / p), dt)
