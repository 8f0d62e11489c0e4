"""Derivatives of the regularized incomplete beta function ``I_x(a, b)`` in its shape
parameters: the primitives ``betainc_grad_a`` and ``betainc_grad_b`` (the JVP of ``betainc``).

Method (after R. J. Boik and J. F. Robison-Cox, "Derivatives of the incomplete beta function",
Journal of Statistical Software 3 (1998), who differentiate the continued fraction): with
``x < (a + 1) / (a + b + 2)``,
``I_x(a, b) = x**a (1-x)**b / (a B(a, b)) * K``, ``K = 1 / (1 + d_1 / (1 + d_2 / (1 + ...)))``,
``d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))``,
``d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m))`` (Abramowitz & Stegun 26.5.8), evaluated by
the modified Lentz method (Numerical Recipes, section 6.2) carrying the partial derivatives of
every Lentz quantity in ``a`` and ``b`` (forward-mode differentiation of the recurrence), so
``dI/da = I (log x - psi(a) + psi(a + b) - 1/a) + prefactor dK/da`` and
``dI/db = I (log(1 - x) - psi(b) + psi(a + b)) + prefactor dK/db``. Above that point the
symmetry ``I_x(a, b) = 1 - I_{1-x}(b, a)`` swaps the roles (so where ``I`` is close to 1 its
derivatives come from the small complement, without cancellation). The fraction takes
O(sqrt(max(a, b))) terms near ``x = a / (a + b)``; at most 20000 terms.
"""
from __future__ import annotations

import numpy as np
import scipy.special as _sc

__all__ = ["betainc_grads"]

_EPS = 2.0 ** -53
_TINY = 1e-300
_MAX_TERMS = 20000


def _step(st, idx, coef, dca, dcb):
    """One Lentz step ``d = 1 / (1 + coef d)``, ``c = 1 + coef / c``, ``h *= c d`` on the
    entries ``idx``, with the derivatives (index 1: in ``a``, index 2: in ``b``). Returns the
    factor ``c d`` and its derivatives."""
    c, d = st["c"][:, idx], st["d"][:, idx]
    dn = 1.0 + coef * d[0]
    ddn = (dca * d[0] + coef * d[1], dcb * d[0] + coef * d[2])
    dn = np.where(np.abs(dn) < _TINY, _TINY, dn)
    cn = 1.0 + coef / c[0]
    c2 = c[0] * c[0]
    dcn = ((dca * c[0] - coef * c[1]) / c2, (dcb * c[0] - coef * c[2]) / c2)
    cn = np.where(np.abs(cn) < _TINY, _TINY, cn)
    inv = 1.0 / dn
    dinv = (-ddn[0] * inv * inv, -ddn[1] * inv * inv)
    st["c"][:, idx] = np.stack([cn, dcn[0], dcn[1]])
    st["d"][:, idx] = np.stack([inv, dinv[0], dinv[1]])
    f = cn * inv
    df = (dcn[0] * inv + cn * dinv[0], dcn[1] * inv + cn * dinv[1])
    h = st["h"][:, idx]
    st["h"][:, idx] = np.stack([h[0] * f, h[1] * f + h[0] * df[0], h[2] * f + h[0] * df[1]])
    return f, df


def _fraction(a, b, x):
    """``K`` and ``dK/da``, ``dK/db`` (rows 0, 1, 2) for 1-d float64 ``a, b, x``."""
    n = a.size
    d1 = -(a + b) * x / (a + 1.0)
    dd1a = -x * ((a + 1.0) - (a + b)) / (a + 1.0) ** 2
    dd1b = -x / (a + 1.0)
    st = {"c": np.zeros((3, n)), "d": np.zeros((3, n)), "h": np.zeros((3, n))}
    st["c"][0] = 1.0
    st["d"][0] = 1.0
    st["h"][0] = 1.0
    # the first step: c = 1 + d1 / 1 would make h pick up (1 + d1) twice; NR starts from
    # d = 1 / (1 + d1), h = d, which is the step with c kept at 1
    inv = 1.0 / np.where(np.abs(1.0 + d1) < _TINY, _TINY, 1.0 + d1)
    st["d"] = np.stack([inv, -dd1a * inv * inv, -dd1b * inv * inv])
    st["h"] = st["d"].copy()
    active = np.arange(n)
    for m in range(1, _MAX_TERMS + 1):
        aa, bb, xx = a[active], b[active], x[active]
        den = (aa + 2 * m - 1.0) * (aa + 2 * m)
        num = m * (bb - m) * xx
        coef = num / den
        dca = -num * (2.0 * aa + 4 * m - 1.0) / (den * den)
        dcb = m * xx / den
        _step(st, active, coef, dca, dcb)
        den = (aa + 2 * m) * (aa + 2 * m + 1.0)
        p, q = aa + m, aa + bb + m
        coef = -p * q * xx / den
        dca = -xx * ((q + p) * den - p * q * (2.0 * aa + 4 * m + 1.0)) / (den * den)
        dcb = -xx * p / den
        f, df = _step(st, active, coef, dca, dcb)
        h = st["h"][:, active]
        done = ((np.abs(f - 1.0) <= _EPS)
                & (np.abs(h[0] * df[0]) <= _EPS * np.abs(h[1]) + _TINY)
                & (np.abs(h[0] * df[1]) <= _EPS * np.abs(h[2]) + _TINY))
        active = active[~done]
        if active.size == 0:
            break
    return st["h"]


def _direct(a, b, x):
    """``(I, dI/da, dI/db)`` from the fraction, for ``x < (a + 1) / (a + b + 2)``."""
    k = _fraction(a, b, x)
    log1mx = np.log1p(-x)
    pref = np.exp(a * np.log(x) + b * log1mx - _sc.betaln(a, b)) / a
    i = pref * k[0]
    sab = _sc.psi(a + b)
    da = i * (np.log(x) - _sc.psi(a) + sab - 1.0 / a) + pref * k[1]
    db = i * (log1mx - _sc.psi(b) + sab) + pref * k[2]
    return da, db


def betainc_grads(a, b, x):
    """``(dI/da, dI/db)`` of ``I_x(a, b)`` in float64 for broadcast ``a, b, x``: 0 at
    ``x == 0`` and ``x == 1``; NaN unless ``a > 0, b > 0, 0 <= x <= 1`` (all finite)."""
    a, b, x = np.broadcast_arrays(*[np.asarray(v, np.float64) for v in (a, b, x)])
    da = np.full(a.shape, np.nan)
    db = np.full(a.shape, np.nan)
    ok = (a > 0) & (b > 0) & (x >= 0) & (x <= 1) & np.isfinite(a) & np.isfinite(b)
    edge = ok & ((x == 0) | (x == 1))
    da[edge] = db[edge] = 0.0
    run = ok & ~edge
    direct = run & (x < (a + 1.0) / (a + b + 2.0))
    swap = run & ~direct
    if direct.any():
        da[direct], db[direct] = _direct(a[direct], b[direct], x[direct])
    if swap.any():
        # I_x(a, b) = 1 - I_{1-x}(b, a); 1 - x is exact for x >= 1/2 (Sterbenz) and within
        # half an ulp of itself (relative) below
        gb, ga = _direct(b[swap], a[swap], 1.0 - x[swap])
        da[swap], db[swap] = -ga, -gb
    return da, db
