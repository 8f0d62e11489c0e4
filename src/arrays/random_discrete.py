"""Discrete counts of ``starling.random``: poisson, binomial, multinomial and geometric.

Poisson and binomial use sequential-search inversion for small means and W. Hörmann's
transformed rejection with squeeze for large ones:

* W. Hörmann, "The transformed rejection method for generating Poisson random variables",
  Insurance: Mathematics and Economics 12 (1993) 39-45 (PTRS), for ``lam >= 10``;
* W. Hörmann, "The generation of binomial random variates", Journal of Statistical
  Computation and Simulation 46 (1993) 101-110 (BTRS), for ``n min(p, 1-p) >= 10``.

Both rejection samplers run as vectorised ``while_loop`` rounds (random_rejection.py); the
inversions walk the CDF of every element at once, one term per loop iteration, from one uniform
per element. Everything is computed in float64 (``lgamma`` of counts near ``1e6`` needs it), so
draws agree eagerly, staged and under ``vmap`` (the C++ backend's float64 ``log`` may differ in
the last ulp from NumPy's, which can flip a rare borderline acceptance).
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from . import numpy as snp
from .ops.convert_element_type import convert_element_type
from .ops.elementwise_family import broadcast_shapes
from .ops.special_gamma import lgamma
from .random import _check_key, _shape, fold_in, split
from .random_distributions import _F32, _F64, _open_unit, _unit, real_params
from .random_rejection import rejection_loop

__all__ = ["poisson", "binomial", "multinomial", "geometric"]

# Largest count the inversions walk to: for means below 10, P(X > 200) < 1e-150.
_INVERSION_CAP = 200.0


def _int_dtype(dtype, op):
    dt = dtypes.canonicalize(dtype)
    if not dtypes.is_integer(dt):
        raise TypeError(f"{op}: dtype must be an integer dtype, got {dt}")
    return dt


def _to_count_dtype(x, dt):
    """float64 counts (-1 marks invalid parameters) -> ``dt``, saturating at its maximum."""
    if dtypes.is_integer(dt):
        x = snp.minimum(x, float(np.iinfo(dt).max))
    return convert_element_type(x, dt)


def _inversion(u, p0, ratio, cap, active):
    """Sequential-search inversion (Devroye, Non-Uniform Random Variate Generation, 1986,
    III.2): the smallest ``k`` with ``u <= P(X <= k)``, walking ``p_{k+1} = p_k ratio(k)`` from
    ``p_0``, for the elements where ``active``; stops at ``cap``. Returns float64 counts."""
    from ..transforms.control import while_loop

    def going(c):
        k, _, cdf = c
        return snp.logical_and(active, snp.logical_and(snp.greater(u, cdf), snp.less(k, cap)))

    def body(c):
        k, pk, cdf = c
        move = going(c)
        p_next = pk * ratio(k)
        return (snp.where(move, k + 1.0, k), snp.where(move, p_next, pk),
                snp.where(move, cdf + p_next, cdf))

    zero = snp.zeros_like(u)
    return while_loop(lambda c: snp.any(going(c)), body, (zero, p0, p0))[0]


def poisson(key, lam, shape=None, dtype=dtypes.int64):
    """Poisson(lam) counts.

    Method: ``lam < 10``: sequential-search inversion of one uniform (``p_0 = e**-lam``,
    ``p_{k+1} = p_k lam / (k + 1)``); ``lam >= 10``: Hörmann's PTRS transformed rejection
    (1993), as vectorised ``while_loop`` rounds. float64 throughout.

    Args:
        key: a key, uint32 ``(2,)``.
        lam: finite rate ``>= 0`` (scalar or array); ``lam == 0`` gives 0.
        shape: output shape; default ``lam``'s shape, which must broadcast to it.
        dtype: an integer dtype (default int64); counts saturate at its maximum.
    Returns:
        Array ``(*shape)`` of ``dtype``. Traced invalid ``lam`` (negative, NaN, inf) gives -1.
    Raises:
        TypeError: a bad key or a non-integer dtype. ValueError: invalid ``lam`` (Python
        scalars and concrete arrays) or ``lam`` not broadcasting to ``shape``.
    """
    k = _check_key(key, "poisson")
    dt = _int_dtype(dtype, "poisson")
    shape, (lam,) = real_params("poisson", shape, _F64, [
        ("lam", lam, lambda x: (x >= 0) & np.isfinite(x), "lam must be finite and >= 0")])
    valid = snp.logical_and(snp.isfinite(lam), snp.greater_equal(lam, 0.0))
    large = snp.logical_and(valid, snp.greater_equal(lam, 10.0))
    small = snp.logical_and(valid, snp.logical_not(large))
    k_inv, k_rej = split(k)
    lam_s = snp.where(small, lam, snp.zeros_like(lam))
    u = _open_unit(k_inv, shape, _F64)
    x_small = _inversion(u, snp.exp(-lam_s), lambda j: lam_s / (j + 1.0), _INVERSION_CAP, small)
    lam_l = snp.where(large, lam, snp.full_like(lam, 10.0))
    x_large = rejection_loop(k_rej, snp.zeros_like(lam), snp.logical_not(large),
                             _ptrs(lam_l, shape))
    out = snp.where(large, x_large, snp.where(small, x_small, -1.0))
    return _to_count_dtype(out, dt)


def _ptrs(lam, shape):
    """One round of PTRS (Hörmann 1993, steps 1-3) for ``lam >= 10``: (candidate, accept)."""
    slam = snp.sqrt(lam)
    log_lam = snp.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_inv_alpha = snp.log(1.1239 + 1.1328 / (b - 3.4))
    v_r = 0.9277 - 3.6224 / (b - 2.0)

    def propose(rk):
        ku, kv = split(rk)
        u = _open_unit(ku, shape, _F64) - 0.5
        v = _open_unit(kv, shape, _F64)
        us = 0.5 - snp.abs(u)
        cand = snp.floor((2.0 * a / us + b) * u + lam + 0.43)
        fast = snp.logical_and(snp.greater_equal(us, 0.07), snp.less_equal(v, v_r))
        lhs = snp.log(v) + log_inv_alpha - snp.log(a / (us * us) + b)
        rhs = -lam + cand * log_lam - lgamma(cand + 1.0)
        squeeze_out = snp.logical_and(snp.less(us, 0.013), snp.greater(v, us))
        slow = snp.logical_and(snp.logical_and(snp.greater_equal(cand, 0.0),
                                               snp.logical_not(squeeze_out)),
                               snp.less_equal(lhs, rhs))
        return cand, snp.logical_or(fast, slow)
    return propose


def binomial(key, n, p, shape=None, dtype=_F32):
    """Binomial(n, p) counts (as JAX, floats by default).

    Method: with ``q = min(p, 1 - p)`` (and ``n - X`` where ``p > 1/2``): ``n q < 10``:
    sequential-search inversion of one uniform (``p_0 = (1 - q)**n``, ``p_{k+1} = p_k (n - k)
    q / ((k + 1) (1 - q))``); otherwise Hörmann's BTRS transformed rejection (1993), as
    vectorised ``while_loop`` rounds. float64 throughout.

    Args:
        key: a key, uint32 ``(2,)``.
        n: finite number of trials ``>= 0`` (scalar or array; rounded down to an integer).
        p: success probability in [0, 1] (scalar or array).
        shape: output shape; default the broadcast shape of ``n`` and ``p``.
        dtype: a floating or integer dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype`` with values in ``[0, n]``: 0 for ``n == 0`` or
        ``p == 0``, ``n`` for ``p == 1``. Traced invalid parameters give -1.
    Raises:
        TypeError: a bad key or a complex / bool dtype. ValueError: invalid ``n`` or ``p``
        (Python scalars and concrete arrays), or parameters not broadcasting to ``shape``.
    """
    k = _check_key(key, "binomial")
    dt = dtypes.canonicalize(dtype)
    if not (dtypes.is_floating(dt) or dtypes.is_integer(dt)):
        raise TypeError(f"binomial: dtype must be a real floating or integer dtype, got {dt}")
    shape, (n, p) = real_params("binomial", shape, _F64, [
        ("n", n, lambda x: (x >= 0) & np.isfinite(x), "n must be finite and >= 0"),
        ("p", p, lambda x: (x >= 0) & (x <= 1), "p must be in [0, 1]")])
    n = snp.floor(n)
    valid = snp.logical_and(snp.logical_and(snp.isfinite(n), snp.greater_equal(n, 0.0)),
                            snp.logical_and(snp.greater_equal(p, 0.0), snp.less_equal(p, 1.0)))
    flip = snp.greater(p, 0.5)
    q = snp.where(flip, 1.0 - p, p)
    large = snp.logical_and(valid, snp.greater_equal(n * q, 10.0))
    small = snp.logical_and(valid, snp.logical_not(large))
    k_inv, k_rej = split(k)
    zero = snp.zeros_like(n)
    n_s, q_s = snp.where(small, n, zero), snp.where(small, q, zero)
    odds = q_s / (1.0 - q_s)
    u = _open_unit(k_inv, shape, _F64)
    p0 = snp.exp(n_s * snp.log1p(-q_s))
    x_small = _inversion(u, p0, lambda j: (n_s - j) / (j + 1.0) * odds,
                         snp.minimum(n_s, _INVERSION_CAP), small)
    n_l = snp.where(large, n, snp.full_like(n, 40.0))
    q_l = snp.where(large, q, snp.full_like(q, 0.5))
    x_large = rejection_loop(k_rej, zero, snp.logical_not(large), _btrs(n_l, q_l, shape))
    x = snp.where(large, x_large, x_small)
    x = snp.where(flip, n - x, x)
    out = snp.where(valid, x, -1.0)
    return _to_count_dtype(out, dt) if dtypes.is_integer(dt) else convert_element_type(out, dt)


def _btrs(n, q, shape):
    """One round of BTRS (Hörmann 1993, steps 1-3.4) for ``n q >= 10``, ``q <= 1/2``."""
    spq = snp.sqrt(n * q * (1.0 - q))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * q
    c = n * q + 0.5
    log_alpha = snp.log((2.83 + 5.1 / b) * spq)
    v_r = 0.92 - 4.2 / b
    m = snp.floor((n + 1.0) * q)
    h = lgamma(m + 1.0) + lgamma(n - m + 1.0)
    lpq = snp.log(q / (1.0 - q))

    def propose(rk):
        ku, kv = split(rk)
        u = _open_unit(ku, shape, _F64) - 0.5
        v = _open_unit(kv, shape, _F64)
        us = 0.5 - snp.abs(u)
        cand = snp.floor((2.0 * a / us + b) * u + c)
        in_range = snp.logical_and(snp.greater_equal(cand, 0.0), snp.less_equal(cand, n))
        fast = snp.logical_and(snp.greater_equal(us, 0.07), snp.less_equal(v, v_r))
        lhs = snp.log(v) + log_alpha - snp.log(a / (us * us) + b)
        safe = snp.clip(cand, 0.0, n)
        rhs = h - lgamma(safe + 1.0) - lgamma(n - safe + 1.0) + (safe - m) * lpq
        ok = snp.logical_and(in_range, snp.logical_or(fast, snp.less_equal(lhs, rhs)))
        return cand, ok
    return propose


def multinomial(key, n, p, shape=None, dtype=_F32):
    """Multinomial(n, p) counts over the last axis of ``p``.

    Method: conditional binomials (e.g. Devroye, Non-Uniform Random Variate Generation, 1986,
    XI.1.2): category ``i`` gets ``Binomial(n - (counts so far), p_i / (p_i + ... + p_last))``
    from ``fold_in(key, i)``, the last category the rest; the categories run as one ``scan``.

    Args:
        key: a key, uint32 ``(2,)``.
        n: finite number of trials ``>= 0`` (scalar or array; rounded down).
        p: non-negative weights ``(*pb, k)`` (normalised over the last axis here).
        shape: batch shape; default the broadcast of ``n``'s shape and ``pb``, which must
            broadcast to it.
        dtype: a floating or integer dtype (default float32, as JAX).
    Returns:
        Array ``(*shape, k)`` of ``dtype``; the counts sum to ``n`` over the last axis.
    Raises:
        TypeError: a bad key or dtype. ValueError: 0-d ``p``, negative weights or invalid
        ``n`` (concrete), or batch shapes not broadcasting to ``shape``.
    """
    from ..transforms.control import scan
    op = "multinomial"
    k = _check_key(key, op)
    dt = dtypes.canonicalize(dtype)
    if not (dtypes.is_floating(dt) or dtypes.is_integer(dt)):
        raise TypeError(f"{op}: dtype must be a real floating or integer dtype, got {dt}")
    if np.ndim(p) == 0:
        raise ValueError(f"{op}: p must have shape (..., k) with the categories last, got a "
                         "scalar")
    n_cat = np.shape(p)[-1]
    _, (n,) = real_params(op, None, _F64, [
        ("n", n, lambda x: (x >= 0) & np.isfinite(x), "n must be finite and >= 0")])
    _, (p,) = real_params(op, None, _F64, [("p", p, lambda x: x >= 0, "p must be >= 0")])
    batch = broadcast_shapes(op, tuple(n.shape), tuple(p.shape[:-1]))
    shape = batch if shape is None else _shape(shape, op)
    try:
        ok = broadcast_shapes(op, shape, batch) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{op}: batch shape {batch} (n {tuple(n.shape)}, p "
                         f"{tuple(p.shape)}) does not broadcast to shape {shape}")
    n = snp.broadcast_to(snp.floor(n), shape)
    p = snp.broadcast_to(p / snp.sum(p, axis=-1, keepdims=True), tuple(shape) + (n_cat,))
    if n_cat == 0:
        return snp.zeros(tuple(shape) + (0,), dt)
    tail = snp.flip(snp.cumsum(snp.flip(p, axis=-1), axis=-1), axis=-1)
    safe = snp.where(snp.greater(tail, 0.0), tail, snp.ones_like(tail))
    ratio = snp.clip(p / safe, 0.0, 1.0)
    ratio = snp.moveaxis(ratio, -1, 0)[:-1]

    def step(left, xs):
        r, i = xs
        x = binomial(fold_in(k, i), left, r, dtype=_F64)
        return left - x, x

    left, counts = scan(step, n, (ratio, snp.arange(n_cat - 1, dtype=dtypes.uint32)))
    out = snp.moveaxis(snp.concatenate([counts, left[None]], axis=0), 0, -1)
    return _to_count_dtype(out, dt) if dtypes.is_integer(dt) else convert_element_type(out, dt)


def geometric(key, p, shape=None, dtype=dtypes.int64):
    """Geometric(p) counts: the number of Bernoulli(p) trials up to and including the first
    success (support 1, 2, ...).

    Method: inversion, ``1 + floor(log1p(-u) / log1p(-p))`` with ``u`` uniform in [0, 1), in
    float64.

    Args:
        key: a key, uint32 ``(2,)``.
        p: success probability in (0, 1] (scalar or array); ``p == 1`` gives 1.
        shape: output shape; default ``p``'s shape.
        dtype: an integer dtype (default int64); counts saturate at its maximum.
    Returns:
        Array ``(*shape)`` of ``dtype``. Traced invalid ``p`` gives -1.
    Raises:
        TypeError: a bad key or a non-integer dtype. ValueError: ``p`` outside (0, 1]
        (Python scalars and concrete arrays) or not broadcasting to ``shape``.
    """
    k = _check_key(key, "geometric")
    dt = _int_dtype(dtype, "geometric")
    shape, (p,) = real_params("geometric", shape, _F64, [
        ("p", p, lambda x: (x > 0) & (x <= 1), "p must be in (0, 1]")])
    valid = snp.logical_and(snp.greater(p, 0.0), snp.less_equal(p, 1.0))
    safe = snp.where(valid, p, snp.full_like(p, 0.5))
    u = _unit(k, shape, _F64)
    x = 1.0 + snp.floor(snp.log1p(-u) / snp.log1p(-safe))
    return _to_count_dtype(snp.where(valid, x, -1.0), dt)
