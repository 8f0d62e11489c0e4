"""Polynomials as coefficient arrays, highest power first (NumPy's ``poly*`` functions):
vander, polyval, polyadd, polysub, polymul, polyder, polyint, polyfit, roots.

All but ``roots(strip_zeros=True)`` are compositions that trace, vmap and differentiate;
polyfit goes through ``linalg.lstsq`` (SVD) and roots through ``linalg.eigvals``.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.trace import ConcretizationError
from ..convert import operand
from .differences import static_int
from .elementwise_family import promote_operands
from .reductions import _ns
from .set_ops import concrete_buffer

__all__ = ["vander", "polyval", "polyadd", "polysub", "polymul", "polyder", "polyint",
           "polyfit", "roots"]


def vander(x, N=None, increasing=False):  # noqa: N803  (NumPy's name)
    """Vandermonde matrix: the columns are powers of ``x`` (NumPy ``vander``).

    ``out[i, j] = x[i] ** (N - 1 - j)``, or ``x[i] ** j`` when ``increasing``. Built with a
    running product (``cumprod``), so ``x ** 0 == 1`` also at ``x == 0`` and the derivative
    there is the polynomial one.

    Args:
        x: 1-D ``(n,)``; bool promotes to int64.
        N: static number of columns (default ``n``).
        increasing: powers increase left to right.
    Returns:
        ``(n, N)`` of ``x``'s dtype (int64 for bool).
    Raises:
        ValueError: ``x`` not 1-D, negative ``N``. TypeError: non-int ``N``.
    """
    snp = _ns()
    x = operand(x, "vander")
    if x.ndim != 1:
        raise ValueError(f"vander: x must be 1-D, got shape {tuple(x.shape)}")
    n = x.shape[0]
    N = n if N is None else static_int("vander", "N", N)  # noqa: N806
    if N < 0:
        raise ValueError(f"vander: N must be non-negative, got {N}")
    if x.dtype == dtypes.bool_:
        x = x.astype(dtypes.int64)
    if N == 0:
        return snp.zeros((n, 0), dtype=x.dtype)
    cols = snp.concatenate([snp.ones((n, 1), dtype=x.dtype),
                            snp.broadcast_to(x[:, None], (n, N - 1))], axis=1)
    out = snp.cumprod(cols, axis=1, dtype=x.dtype)
    return out if increasing else snp.flip(out, axis=1)


def polyval(p, x):
    """Value of the polynomial ``p[0] x**(k-1) + ... + p[k-1]`` at ``x`` (NumPy ``polyval``).

    Method: Horner's scheme, ``y = y * x + p[i]`` (unrolled over the static ``k``).

    Args:
        p: coefficients ``(k, *pdims)``, highest power first (extra dims broadcast with
            ``x``, as NumPy).
        x: points, any shape ``(*dims)``.
    Returns:
        Array of the broadcast shape of ``(*pdims)`` and ``(*dims)`` and the promoted dtype
        (integers stay integers); zeros for ``k == 0``.
    Raises:
        ValueError: 0-d ``p``. TypeError: dtypes that do not promote.
    """
    snp = _ns()
    p, x = promote_operands("polyval", [operand(p, "polyval"), operand(x, "polyval")])
    if p.ndim == 0:
        raise ValueError("polyval: p must be at least 1-D (coefficients, highest power first)")
    y = snp.zeros_like(x)
    for i in range(p.shape[0]):
        y = y * x + p[i]
    return y


def _as_poly(op, *ps):
    snp = _ns()
    out = promote_operands(op, [operand(p, op) for p in ps])
    out = [snp.atleast_1d(p) for p in out]
    for p in out:
        if p.ndim != 1:
            raise ValueError(f"{op}: coefficient arrays must be 1-D, got shape {tuple(p.shape)}")
    return out


def _aligned(op, a1, a2):
    snp = _ns()
    a1, a2 = _as_poly(op, a1, a2)
    k = max(a1.shape[0], a2.shape[0])
    return snp.pad(a1, (k - a1.shape[0], 0)), snp.pad(a2, (k - a2.shape[0], 0))


def polyadd(a1, a2):
    """Sum of two polynomials (NumPy ``polyadd``): the shorter is padded with leading zeros.

    Args:
        a1, a2: 1-D coefficients (0-d counts as one), highest power first.
    Returns:
        1-D ``(max(k1, k2),)`` of the promoted dtype.
    Raises:
        ValueError: coefficients with more than one dim.
    """
    a1, a2 = _aligned("polyadd", a1, a2)
    return a1 + a2


def polysub(a1, a2):
    """Difference ``a1 - a2`` of two polynomials (NumPy ``polysub``); see ``polyadd``."""
    a1, a2 = _aligned("polysub", a1, a2)
    return a1 - a2


def polymul(a1, a2):
    """Product of two polynomials (NumPy ``polymul``): the full convolution of the
    coefficients, length ``k1 + k2 - 1``.

    Raises:
        ValueError: empty or more than 1-D coefficients.
    """
    a1, a2 = _as_poly("polymul", a1, a2)
    return _ns().convolve(a1, a2)


def polyder(p, m=1):
    """``m``-th derivative of a polynomial (NumPy ``polyder``).

    Args:
        p: 1-D coefficients ``(k,)``, highest power first.
        m: static order >= 0.
    Returns:
        1-D ``(max(k - m, 0),)`` of ``p``'s dtype (integers stay integers).
    Raises:
        ValueError: negative ``m``. TypeError: non-int ``m``.
    """
    snp = _ns()
    m = static_int("polyder", "m", m)
    if m < 0:
        raise ValueError(f"polyder: the order of the derivative must be >= 0, got {m}")
    p, = _as_poly("polyder", p)
    for _ in range(m):
        k = p.shape[0]
        if k == 0:
            break
        p = p[:-1] * snp.arange(k - 1, 0, -1).astype(p.dtype)
    return p


def polyint(p, m=1, k=None):
    """``m``-th antiderivative of a polynomial (NumPy ``polyint``).

    Args:
        p: 1-D coefficients ``(n,)``, highest power first.
        m: static order >= 0.
        k: integration constants: None (zeros), a scalar (used for every step) or ``m``
            values, the first for the first integration (the lowest power at the end).
    Returns:
        1-D ``(n + m,)`` of the promoted inexact dtype (default float for integers).
    Raises:
        ValueError: negative ``m``; ``k`` of a length other than 1 or ``m``.
    """
    snp = _ns()
    m = static_int("polyint", "m", m)
    if m < 0:
        raise ValueError(f"polyint: the order of the integral must be >= 0, got {m}")
    p, = _as_poly("polyint", p)
    ks = snp.atleast_1d(snp.zeros((m,)) if k is None else operand(k, "polyint"))
    if ks.ndim != 1 or ks.shape[0] not in (1, m) and m > 0:
        raise ValueError(f"polyint: k must be a scalar or hold m = {m} constants, got shape "
                         f"{tuple(ks.shape)}")
    p, ks = promote_operands("polyint", [p, ks], "inexact")
    for i in range(m):
        n = p.shape[0]
        c = ks[0] if ks.shape[0] == 1 else ks[i]
        p = snp.concatenate([p / snp.arange(n, 0, -1).astype(p.dtype), snp.reshape(c, (1,))])
    return p


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares polynomial fit of degree ``deg`` (NumPy ``polyfit``).

    Method: the Vandermonde system, optionally weighted by ``w`` (``w[i] * residual_i``), with
    its columns scaled to unit norm, solved by ``linalg.lstsq`` (SVD; differentiable where the
    rank is locally constant).

    Args:
        x: 1-D ``(n,)`` sample points, n >= 1.
        y: ``(n,)`` or ``(n, K)`` (K data sets sharing ``x``).
        deg: static degree >= 0.
        rcond: relative cutoff for small singular values (default ``n * eps``).
        full: also return the lstsq diagnostics.
        w: optional ``(n,)`` weights (use ``1 / sigma``, not ``1 / sigma**2``).
        cov: also return the covariance of the coefficients, scaled by
            ``residuals / (n - deg - 1)``; ``"unscaled"`` leaves that factor out.
    Returns:
        ``p``: ``(deg + 1,)`` or ``(deg + 1, K)``, highest power first, of the promoted
        inexact dtype. With ``full``: ``(p, residuals, rank, singular_values, rcond)``
        (``linalg.lstsq``'s conventions). With ``cov`` (and not ``full``): ``(p, V)``, ``V``
        ``(deg + 1, deg + 1)`` or ``(deg + 1, deg + 1, K)``.
    Raises:
        ValueError: negative ``deg``; ``cov`` scaling with ``n <= deg + 1``.
        TypeError: ``x`` not 1-D or empty, ``y`` not 1-D / 2-D or of another length, ``w``
        of the wrong shape.
    """
    snp = _ns()
    deg = static_int("polyfit", "deg", deg)
    if deg < 0:
        raise ValueError(f"polyfit: deg must be >= 0, got {deg}")
    x, y = promote_operands("polyfit", [operand(x, "polyfit"), operand(y, "polyfit")], "inexact")
    if x.ndim != 1 or x.shape[0] == 0:
        raise TypeError(f"polyfit: x must be a non-empty 1-D array, got shape {tuple(x.shape)}")
    if y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise TypeError(f"polyfit: y must be 1-D or 2-D with x's length {x.shape[0]} first, "
                        f"got shape {tuple(y.shape)}")
    n, order = x.shape[0], deg + 1
    real = dtypes.real_dtype(x.dtype)
    if rcond is None:
        rcond = n * float(dtypes.finfo(real).eps)
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = operand(w, "polyfit")
        if w.ndim != 1 or w.shape[0] != n:
            raise TypeError(f"polyfit: w must be 1-D of x's length {n}, got shape "
                            f"{tuple(w.shape)}")
        w = w.astype(x.dtype)
        lhs = lhs * w[:, None]
        rhs = rhs * (w if rhs.ndim == 1 else w[:, None])
    scale = snp.sqrt(snp.sum(snp.real(lhs * snp.conj(lhs)), axis=0))
    scale = snp.where(scale == 0, 1, scale)  # an all-zero column stays zero (x all zero)
    lhs = lhs / scale.astype(lhs.dtype)
    c, resids, rank, s = snp.linalg.lstsq(lhs, rhs, rcond=rcond)
    sc = scale.astype(c.dtype)
    c = c / (sc if c.ndim == 1 else sc[:, None])
    if full:
        return c, resids, rank, s, rcond
    if not cov:
        return c
    vbase = snp.linalg.inv(snp.matmul(snp.conj(snp.transpose(lhs)), lhs))
    vbase = vbase / (sc[:, None] * sc[None, :])
    if cov == "unscaled":
        fac = snp.ones((1,), dtype=real)
    else:
        if n <= order:
            raise ValueError(f"polyfit: the number of data points ({n}) must exceed the order "
                             f"({order}) to scale the covariance matrix")
        fac = resids / (n - order)
    if y.ndim == 1:
        return c, vbase * fac
    return c, vbase[:, :, None] * fac


def roots(p, *, strip_zeros=True):
    """Roots of the polynomial with coefficients ``p`` (NumPy ``roots``).

    Method: the eigenvalues (``linalg.eigvals``) of the companion matrix, whose first row is
    ``-p[1:] / p[0]`` and whose subdiagonal is ones (Edelman & Murakami 1995, "Polynomial
    roots from companion matrix eigenvalues").

    Args:
        p: 1-D ``(k,)`` coefficients, highest power first.
        strip_zeros: drop leading zeros and count trailing zeros as roots at 0 (NumPy); this
            needs concrete ``p`` (the number of roots depends on it). False (JAX) keeps the
            shape static for tracing: then ``k - 1`` roots come back, and a leading zero
            gives non-finite ones.
    Returns:
        1-D complex array (always complex, as JAX; NumPy returns real roots as a real
        array), in the order ``eigvals`` gives.
    Raises:
        ValueError: ``p`` with more than one dim. ConcretizationError: traced ``p`` with
        ``strip_zeros=True``.
    """
    snp = _ns()
    p = snp.atleast_1d(operand(p, "roots"))
    if p.ndim != 1:
        raise ValueError(f"roots: p must be 1-D, got shape {tuple(p.shape)}")
    p, = promote_operands("roots", [p], "inexact")
    cdt = dtypes.complex_dtype(p.dtype)
    trailing = 0
    if strip_zeros:
        buf = concrete_buffer(p)
        if buf is None:
            raise ConcretizationError(
                "roots: with strip_zeros=True the number of roots depends on the values of p, "
                "which is traced here (inside compile / vmap / grad); pass strip_zeros=False")
        nz = np.flatnonzero(buf)
        if nz.size == 0:
            return snp.zeros((0,), dtype=cdt)
        trailing = p.shape[0] - int(nz[-1]) - 1
        p = p[int(nz[0]):int(nz[-1]) + 1]
    k = p.shape[0]
    if k > 1:
        top = snp.reshape(-p[1:] / p[0], (1, k - 1))
        companion = snp.concatenate([top, snp.eye(k - 2, k - 1, dtype=p.dtype)], axis=0)
        r = snp.linalg.eigvals(companion).astype(cdt)
    else:
        r = snp.zeros((0,), dtype=cdt)
    if trailing:
        r = snp.concatenate([r, snp.zeros((trailing,), dtype=cdt)])
    return r
