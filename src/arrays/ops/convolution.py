"""Discrete linear convolution and cross-correlation of 1-D sequences: convolve, correlate.

Method: direct summation. The zero-padded first operand is gathered into a window matrix
``(out, m)`` (one ``take`` with a static index matrix) and contracted with the (flipped /
conjugated) second operand: one matmul where no window reaches the padding, else a masked
product and sum (so inf / NaN stay where NumPy puts them). O(out * m) work and memory, exact
for integers, differentiable in both operands (gather transposes to scatter-add); it vmaps.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ..convert import operand
from .elementwise_family import promote_operands
from .reductions import _ns

__all__ = ["convolve", "correlate"]

_MODES = ("full", "same", "valid")


def _operands(op, a, v, mode):
    if mode not in _MODES:
        raise ValueError(f"{op}: mode must be one of {_MODES}, got {mode!r}")
    a, v = promote_operands(op, [operand(a, op), operand(v, op)])
    for name, x in (("a", a), ("v", v)):
        if x.ndim != 1:
            raise ValueError(f"{op}: {name} must be 1-D, got shape {tuple(x.shape)}")
        if x.shape[0] == 0:
            raise ValueError(f"{op}: {name} must not be empty")
    return a, v


def _windows_dot(a, k, start, length):
    """``out[i] = sum_j a_pad[start + i + j] * k[j]`` for ``i < length``, where ``a_pad`` is
    ``a`` with ``len(k) - 1`` zeros on both sides; products with the padding are left out
    (not added as ``0 * k[j]``), so an inf / NaN in ``k`` only reaches the outputs whose
    sums hold it, as in NumPy."""
    snp = _ns()
    n, m = a.shape[0], k.shape[0]
    a_pad = snp.pad(a, (m - 1, m - 1)) if m > 1 else a
    idx = (start + np.arange(length))[:, None] + np.arange(m)[None, :]
    windows = snp.take(a_pad, snp.asarray(idx.astype(np.int64)))
    inside = (idx >= m - 1) & (idx < n + m - 1)
    if a.dtype == dtypes.bool_:  # NumPy: a logical sum of products
        return snp.any(windows & k & snp.asarray(inside), axis=1)
    if inside.all() or not dtypes.is_inexact(a.dtype):
        return snp.matmul(windows, k)
    return snp.sum(snp.where(snp.asarray(inside), windows * k, 0), axis=1)


def _span(mode, n, m, same_start):
    """(start, length) of ``mode`` within the full result of length ``n + m - 1``."""
    short, long_ = min(n, m), max(n, m)
    if mode == "full":
        return 0, n + m - 1
    if mode == "same":
        return same_start, long_
    return short - 1, long_ - short + 1


def convolve(a, v, mode="full"):
    """Discrete linear convolution ``(a * v)[k] = sum_j a[j] v[k - j]`` (NumPy ``convolve``).

    Args:
        a: 1-D ``(n,)``, n >= 1, any dtype (bool: logical or of ands, as NumPy).
        v: 1-D ``(m,)``, m >= 1; dtypes promote with ``a``'s.
        mode: "full" (length ``n + m - 1``), "same" (length ``max(n, m)``, centred on the
            full result) or "valid" (length ``max(n, m) - min(n, m) + 1``: only where the
            sequences overlap completely).
    Returns:
        1-D array of the promoted dtype.
    Raises:
        ValueError: bad ``mode``; operands not 1-D or empty. TypeError: dtypes that do not
        promote.
    """
    snp = _ns()
    a, v = _operands("convolve", a, v, mode)
    n, m = a.shape[0], v.shape[0]
    if m > n:  # convolution commutes; the short operand makes the small window matrix
        a, v, n, m = v, a, m, n
    start, length = _span(mode, n, m, (m - 1) // 2)
    return _windows_dot(a, snp.flip(v), start, length)


def correlate(a, v, mode="valid"):
    """Cross-correlation ``c[k] = sum_j a[j + k] conj(v[j])`` of two 1-D sequences (NumPy
    ``correlate``; ``conj`` only for complex ``v``).

    Args:
        a: 1-D ``(n,)``, n >= 1.
        v: 1-D ``(m,)``, m >= 1; dtypes promote.
        mode: "valid" (default), "same" or "full", with the lengths of ``convolve``; ``k``
            runs from ``-(m - 1)`` in "full" mode. With ``n < m`` the "same" window is
            placed as NumPy places it.
    Returns:
        1-D array of the promoted dtype.
    Raises:
        ValueError: bad ``mode``; operands not 1-D or empty. TypeError: dtypes that do not
        promote.
    """
    snp = _ns()
    a, v = _operands("correlate", a, v, mode)
    n, m = a.shape[0], v.shape[0]
    if dtypes.is_complex(v.dtype):
        v = snp.conj(v)
    same_start = (m - 1) // 2 if n >= m else (n - 1) - (n - 1) // 2
    start, length = _span(mode, n, m, same_start)
    return _windows_dot(a, v, start, length)
