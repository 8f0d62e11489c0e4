"""Covariance and correlation matrices: cov, corrcoef (NumPy's definitions).

Compositions of reductions and one matmul, so they differentiate (in the data and in
``aweights``), vmap and compile. Integer data promotes to the default float (JAX; NumPy gives
float64).
"""
from __future__ import annotations

from ...core import dtypes
from ..convert import operand
from .elementwise_family import promote_operands
from .reductions import _ns
from .set_ops import concrete_buffer

__all__ = ["cov", "corrcoef"]


def _variables(op, x, rowvar):
    """``x`` as ``(variables, observations)``."""
    snp = _ns()
    if x.ndim > 2:
        raise ValueError(f"{op}: the data must be 1-D or 2-D, got shape {tuple(x.shape)}")
    x = snp.atleast_2d(x)
    return x if rowvar or x.shape[0] == 1 else snp.transpose(x)


def _check_weights(op, name, w, n, integer):
    w = operand(w, op)
    if integer and not (dtypes.is_integer(w.dtype) or w.dtype == dtypes.bool_):
        raise TypeError(f"{op}: {name} must be integers, got dtype {w.dtype}")
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(f"{op}: {name} must be 1-D with one entry per observation ({n}), got "
                         f"shape {tuple(w.shape)}")
    buf = concrete_buffer(w)
    if buf is not None and (buf < 0).any():
        raise ValueError(f"{op}: {name} cannot be negative")
    return w


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """Covariance matrix of variables observed together (NumPy ``cov``).

    ``C = (X - avg) W (X - avg)^H / fact`` with ``avg`` the (weighted) mean of each variable,
    ``W`` the diagonal of the weights ``fweights * aweights`` and ``fact`` the normalisation
    ``sum(w) - ddof * sum(w * aweights) / sum(w)`` (NumPy's unbiased weighted formula;
    ``n - ddof`` without weights). ``fact <= 0`` gives inf / NaN entries (NumPy also warns).

    Args:
        m: ``(variables, observations)`` (``(observations, variables)`` when ``rowvar`` is
            False) or a 1-D ``(observations,)`` single variable; real or complex.
        y: optional further variables of the same layout, stacked after ``m``'s.
        rowvar: whether rows are variables.
        bias: normalise by ``N`` (``ddof = 0``) instead of ``N - 1``; overridden by ``ddof``.
        ddof: integer delta degrees of freedom.
        fweights: optional int ``(observations,)`` frequency weights, >= 0.
        aweights: optional ``(observations,)`` observation weights, >= 0 (differentiable).
        dtype: the computation / result dtype (default: the promoted inexact dtype).
    Returns:
        ``(variables, variables)``, or a 0-d array for one variable.
    Raises:
        ValueError: data with more than 2 dims; non-integer ``ddof``; weights of a wrong shape
            or (eager) negative. TypeError: non-integer ``fweights``.
    """
    snp = _ns()
    if ddof is not None and ddof != int(ddof):
        raise ValueError(f"cov: ddof must be an integer, got {ddof!r}")
    x = _variables("cov", operand(m, "cov"), rowvar)
    parts = [x]
    if y is not None:
        parts.append(_variables("cov", operand(y, "cov"), rowvar))
    parts = promote_operands("cov", parts, "inexact")
    if dtype is not None:
        parts = [p.astype(dtype) for p in parts]
    x = snp.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    if x.shape[0] == 0:
        return snp.zeros((0, 0), dtype=x.dtype)
    n = x.shape[1]
    ddof = (0 if bias else 1) if ddof is None else int(ddof)
    real = dtypes.real_dtype(x.dtype)
    w = None
    if fweights is not None:
        w = _check_weights("cov", "fweights", fweights, n, True).astype(real)
    if aweights is not None:
        aw = _check_weights("cov", "aweights", aweights, n, False).astype(real)
        w = aw if w is None else w * aw
    if w is None:
        avg = snp.mean(x, axis=1, keepdims=True)
        fact = float(n - ddof)
    else:
        w_sum = snp.sum(w)
        avg = snp.sum(x * w, axis=1, keepdims=True) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * snp.sum(w * aw) / w_sum
    fact = snp.maximum(snp.asarray(fact, dtype=real), 0)
    xc = x - avg
    xw = xc if w is None else xc * w
    c = snp.matmul(xc, snp.conj(snp.transpose(xw))) / fact.astype(x.dtype)
    return snp.squeeze(c)


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """Pearson correlation coefficients (NumPy ``corrcoef``): ``cov`` normalised by the
    standard deviations, ``R_ij = C_ij / sqrt(C_ii C_jj)``, real parts (and imaginary parts
    for complex data) clipped to ``[-1, 1]``.

    Args:
        x, y, rowvar, dtype: as in ``cov``.
    Returns:
        ``(variables, variables)``, or a 0-d array (``C / C``: 1, or NaN for constant data)
        for one variable. A constant variable gives NaN entries.
    Raises:
        As ``cov``.
    """
    snp = _ns()
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = snp.sqrt(snp.real(snp.diagonal(c)))
    c = c / d[:, None].astype(c.dtype)
    c = c / d[None, :].astype(c.dtype)
    if dtypes.is_complex(c.dtype):
        return (snp.clip(snp.real(c), -1, 1).astype(c.dtype)
                + 1j * snp.clip(snp.imag(c), -1, 1).astype(c.dtype))
    return snp.clip(c, -1, 1)
