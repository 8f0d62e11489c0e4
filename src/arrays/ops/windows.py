"""Window functions for spectral analysis: bartlett, blackman, hamming, hanning, kaiser (NumPy's
definitions, symmetric windows of ``M`` points).

The cosine and triangular windows depend only on the static ``M``: they are computed on the
host in float64 and returned as constants of the default float dtype (float32; NumPy gives
float64). ``kaiser``'s ``beta`` may be traced: it is evaluated with ``starling.numpy.i0`` in
float64 and rounded once, so it differentiates in ``beta``.
"""
from __future__ import annotations

import math

import numpy as np

from ...core import dtypes
from ..array import wrap
from .differences import static_int
from .elementwise_family import promote_operands
from .reductions import _ns

__all__ = ["bartlett", "blackman", "hamming", "hanning", "kaiser"]


def _length(op, M):  # noqa: N803
    return static_int(op, "M", M)


def _symmetric(op, M, fn):  # noqa: N803
    """``fn(t)`` on the ``M`` points ``t = n / (M - 1)`` for ``n = 1 - M, 3 - M, ..., M - 1``
    (``t`` in [-1, 1]); ``M < 1`` gives an empty window, ``M == 1`` a single 1."""
    M = _length(op, M)  # noqa: N806
    if M < 1:
        out = np.zeros((0,))
    elif M == 1:
        out = np.ones((1,))
    else:
        out = fn(np.arange(1 - M, M, 2, dtype=np.float64) / (M - 1))
    return wrap(out.astype(dtypes.DEFAULT_FLOAT), False)


def bartlett(M):  # noqa: N803
    """Bartlett (triangular) window of ``M`` points (NumPy ``bartlett``): ``1 - |t|`` for
    ``t = n / (M - 1)``, ``n = 1 - M, 3 - M, ..., M - 1`` (Bartlett 1950)."""
    return _symmetric("bartlett", M, lambda t: 1.0 - np.abs(t))


def blackman(M):  # noqa: N803
    """Blackman window of ``M`` points (NumPy ``blackman``):
    ``0.42 + 0.5 cos(pi t) + 0.08 cos(2 pi t)`` for ``t = n / (M - 1)``,
    ``n = 1 - M, 3 - M, ..., M - 1`` (Blackman & Tukey 1958)."""
    return _symmetric("blackman", M, lambda t: 0.42 + 0.5 * np.cos(math.pi * t)
                      + 0.08 * np.cos(2.0 * math.pi * t))


def hamming(M):  # noqa: N803
    """Hamming window of ``M`` points (NumPy ``hamming``): ``0.54 + 0.46 cos(pi t)`` for
    ``t = n / (M - 1)``, ``n = 1 - M, 3 - M, ..., M - 1`` (Blackman & Tukey 1958)."""
    return _symmetric("hamming", M, lambda t: 0.54 + 0.46 * np.cos(math.pi * t))


def hanning(M):  # noqa: N803
    """Hann window of ``M`` points (NumPy ``hanning``): ``0.5 + 0.5 cos(pi t)`` for
    ``t = n / (M - 1)``, ``n = 1 - M, 3 - M, ..., M - 1`` (Blackman & Tukey 1958)."""
    return _symmetric("hanning", M, lambda t: 0.5 + 0.5 * np.cos(math.pi * t))


# The sections the four windows share, after each one's summary.
_WINDOW_SECTIONS = """

    Args:
        M: static int: the number of points; ``M < 1`` gives an empty array.
    Returns:
        1-D ``(max(M, 0),)`` of the default float dtype, maximum 1 (at the centre for odd
        ``M``).
    Raises:
        TypeError: non-integer ``M``.
    """
for _fn in (bartlett, blackman, hamming, hanning):
    _fn.__doc__ = (_fn.__doc__ or "") + _WINDOW_SECTIONS
del _fn


def kaiser(M, beta):  # noqa: N803
    """Kaiser window of ``M`` points (NumPy ``kaiser``; Kaiser 1966):
    ``I0(beta sqrt(1 - ((n - a) / a)**2)) / I0(beta)`` for ``n = 0..M-1``, ``a = (M - 1) / 2``.

    ``I0`` is ``starling.numpy.i0`` (Clenshaw's Chebyshev series, as Cephes), evaluated in
    float64, so ``beta`` up to about 700 stays finite (NumPy's range). Larger ``|beta|``
    overflows ``I0`` and gives NaN.

    Args:
        M: static int: the number of points; ``M < 1`` gives an empty array.
        beta: shape parameter (real scalar; may be traced, differentiable). 0 gives a
            rectangular window; about 8.6 resembles a Blackman window.
    Returns:
        1-D ``(max(M, 0),)``: the default float dtype, or ``beta``'s float dtype when wider.
    Raises:
        TypeError: non-integer ``M``, complex or non-scalar ``beta``.
    """
    snp = _ns()
    M = _length("kaiser", M)  # noqa: N806
    b, = promote_operands("kaiser", [beta], "real_inexact")
    if b.ndim != 0:
        raise TypeError(f"kaiser: beta must be a scalar, got shape {tuple(b.shape)}")
    dt = b.dtype
    if M < 1:
        return snp.zeros((0,), dtype=dt)
    if M == 1:
        return snp.ones((1,), dtype=dt)
    alpha = (M - 1) / 2.0
    r = np.sqrt(np.maximum(1.0 - ((np.arange(M) - alpha) / alpha) ** 2, 0.0))
    b64 = b.astype(dtypes.float64)
    out = snp.i0(b64 * snp.asarray(r)) / snp.i0(b64)
    return out.astype(dt)

