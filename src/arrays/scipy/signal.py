"""``starling.scipy.signal``: N-dimensional convolution and cross-correlation (SciPy's
``scipy.signal.convolve`` / ``correlate`` / ``fftconvolve``, JAX's ``jax.scipy.signal``).

Two methods. Direct: the zero-padded first operand is gathered once into a window array
``(*out, *kernel)`` (one ``take`` with a static index array) and contracted with the flipped
kernel (one ``tensordot``): O(prod(out) * prod(kernel)) work and memory, exact for integers,
differentiable in both operands (the gather transposes to a scatter-add) and vmappable.
(``starling.numpy.convolve`` does the same in 1-D with NumPy's modes; SciPy's ``same`` mode
differs from NumPy's when the second operand is longer, so the N-d version is its own.) FFT:
products of ``rfftn`` / ``fftn`` spectra at a 5-smooth length (``starling.numpy.fft``),
O(N log N), in floating point only.
"""
from __future__ import annotations

import math

import numpy as np

from ...core import dtypes
from .. import numpy as snp
from ..convert import operand
from ..ops.axes import normalize_axis
from ..ops.elementwise_family import promote_operands

__all__ = ["convolve", "correlate", "fftconvolve"]

_MODES = ("full", "same", "valid")
_METHODS = ("auto", "direct", "fft")
# "auto" takes the direct method up to this many multiply-adds (and always for integers)
_DIRECT_MAX_WORK = 1 << 20


def _operands(op, in1, in2, mode, domain="numeric"):
    if mode not in _MODES:
        raise ValueError(f"{op}: mode must be one of {_MODES}, got {mode!r}")
    in1, in2 = promote_operands(op, [operand(in1, op), operand(in2, op)], domain)
    if in1.ndim != in2.ndim:
        raise ValueError(f"{op}: in1 and in2 must have the same number of dimensions, got "
                         f"shapes {tuple(in1.shape)} and {tuple(in2.shape)}")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"{op}: empty operands are not supported, got shapes "
                         f"{tuple(in1.shape)} and {tuple(in2.shape)}")
    return in1, in2


def _swap_for_valid(op, in1, in2, axes):
    """SciPy's rule for "valid": one operand must be at least as large as the other along every
    convolved axis; the larger one goes first (convolution commutes)."""
    s1 = [in1.shape[a] for a in axes]
    s2 = [in2.shape[a] for a in axes]
    if all(a >= b for a, b in zip(s1, s2)):
        return in1, in2
    if all(b >= a for a, b in zip(s1, s2)):
        return in2, in1
    raise ValueError(f"{op}: for mode='valid' one operand must be at least as large as the "
                     f"other in every convolved dimension, got shapes {tuple(in1.shape)} and "
                     f"{tuple(in2.shape)}")


def _span(mode, n1, n2):
    """(start, length) of ``mode`` within the full result ``n1 + n2 - 1`` along one axis
    (SciPy: "same" is centred, of ``in1``'s length)."""
    if mode == "full":
        return 0, n1 + n2 - 1
    if mode == "same":
        return (n2 - 1) // 2, n1
    return n2 - 1, n1 - n2 + 1


def _direct(in1, in2, mode):
    nd = in1.ndim
    spans = [_span(mode, a, b) for a, b in zip(in1.shape, in2.shape)]
    padded = snp.pad(in1, [(k - 1, k - 1) for k in in2.shape])
    strides = np.cumprod((padded.shape[1:] + (1,))[::-1])[::-1]
    idx = np.zeros([n for _, n in spans] + list(in2.shape), np.int64)
    for d, ((start, length), k) in enumerate(zip(spans, in2.shape)):
        pos = np.full(2 * nd, 1)
        out_i = np.arange(start, start + length).reshape(np.where(np.arange(2 * nd) == d, -1, pos))
        win_j = np.arange(k).reshape(np.where(np.arange(2 * nd) == nd + d, -1, pos))
        idx = idx + (out_i + win_j) * int(strides[d])
    windows = snp.take(snp.ravel(padded), snp.asarray(idx))
    return snp.tensordot(windows, snp.flip(in2), axes=nd)


def _fast_len(n):
    """The least 5-smooth integer ``>= n`` (transform lengths with small prime factors)."""
    best = 1 << max(n - 1, 0).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def _fft_axes(op, in1, in2, axes):
    if axes is None:
        return list(range(in1.ndim))
    axes = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    axes = sorted({normalize_axis(op, a, in1.ndim, name="axes") for a in axes})
    for d in range(in1.ndim):
        if d not in axes and in1.shape[d] != in2.shape[d] and 1 not in (in1.shape[d],
                                                                        in2.shape[d]):
            raise ValueError(f"{op}: dimension {d} is not convolved, so in1 and in2 must "
                             f"match there or one be 1; got shapes {tuple(in1.shape)} and "
                             f"{tuple(in2.shape)}")
    return axes


def _crop(x, axes, spans):
    index = [slice(None)] * x.ndim
    for a, (start, length) in zip(axes, spans):
        index[a] = slice(start, start + length)
    return x[tuple(index)]


def _fft_full_then_mode(in1, in2, mode, axes):
    fft = snp.fft
    full = [in1.shape[a] + in2.shape[a] - 1 for a in axes]
    sizes = [_fast_len(n) for n in full]
    if dtypes.is_complex(in1.dtype):
        out = fft.ifftn(fft.fftn(in1, sizes, axes) * fft.fftn(in2, sizes, axes), sizes, axes)
    else:
        out = fft.irfftn(fft.rfftn(in1, sizes, axes) * fft.rfftn(in2, sizes, axes), sizes, axes)
        out = out.astype(in1.dtype)
    spans = [_span(mode, in1.shape[a], in2.shape[a]) for a in axes]
    return _crop(out, axes, [(0, n) for n in full]) if mode == "full" else _crop(out, axes, spans)


def fftconvolve(in1, in2, mode="full", axes=None):
    """N-dimensional convolution by FFT (``scipy.signal.fftconvolve``).

    Args:
        in1: array ``(*dims1)``, numeric (integers / bool become float32, as JAX).
        in2: array ``(*dims2)`` with ``in1``'s number of dimensions; dtypes promote.
        mode: "full" (``n1 + n2 - 1`` along each convolved axis), "same" (``in1``'s length,
            centred on the full result) or "valid" (``n1 - n2 + 1``: only complete overlaps;
            one operand must be at least as large as the other along every convolved axis).
        axes: None (all) or the axes to convolve over; along the others the operands must
            match or one be 1, and are broadcast (elementwise product).
    Returns:
        Array of the promoted floating (or complex) dtype.
    Raises:
        ValueError: bad ``mode``, different numbers of dimensions, empty operands, shapes that
            do not fit the mode or the non-convolved axes. TypeError: bool-only promotion
            failures.

    Method: the spectra of both operands at a 5-smooth length ``>= n1 + n2 - 1`` per axis
    (``rfftn`` for real input, ``fftn`` for complex), multiplied, transformed back and cropped;
    differentiable (the FFT's rules), vmappable. Absolute error about ``eps * sum|in1| *
    max|in2|``: small outputs next to large ones lose relative accuracy (use the direct
    method there).
    """
    op = "fftconvolve"
    in1, in2 = _operands(op, in1, in2, mode, "inexact")
    axes = _fft_axes(op, in1, in2, axes)
    if mode == "valid":
        in1, in2 = _swap_for_valid(op, in1, in2, axes)
    return _fft_full_then_mode(in1, in2, mode, axes)


def _choose(method, in1, in2, mode):
    if method not in _METHODS:
        raise ValueError(f"convolve: method must be one of {_METHODS}, got {method!r}")
    if method != "auto":
        return method
    if not dtypes.is_inexact(in1.dtype):
        return "direct"
    out = math.prod(_span(mode, a, b)[1] for a, b in zip(in1.shape, in2.shape))
    return "direct" if out * in2.size <= _DIRECT_MAX_WORK else "fft"


def _convolve(op, in1, in2, mode, method):
    in1, in2 = _operands(op, in1, in2, mode)
    if mode == "valid":
        in1, in2 = _swap_for_valid(op, in1, in2, range(in1.ndim))
    if _choose(method, in1, in2, mode) == "direct":
        return _direct(in1, in2, mode)
    dt = in1.dtype
    out = fftconvolve(in1, in2, mode)
    if dtypes.is_inexact(dt):
        return out
    return snp.round(out).astype(dt)   # SciPy: integer results are rounded back


def convolve(in1, in2, mode="full", method="auto"):
    """N-dimensional discrete linear convolution ``out[n] = sum_k in1[n - k] in2[k]``
    (``scipy.signal.convolve``).

    Args:
        in1: array ``(*dims1)``, any numeric dtype (integers stay integers with the direct
            method, as SciPy).
        in2: array ``(*dims2)`` with ``in1``'s number of dimensions; dtypes promote.
        mode: "full", "same" (``in1``'s shape, centred on the full result) or "valid" (only
            complete overlaps; SciPy's rule: one operand at least as large as the other in
            every dimension, which may be either).
        method: "direct" (a gather and one ``tensordot``: exact sums, O(out * kernel)
            memory), "fft" (``fftconvolve``; integer results rounded back) or "auto": direct
            for integers and up to ``2**20`` multiply-adds, else fft (a size rule, where SciPy
            times both).
    Returns:
        Array of the promoted dtype.
    Raises:
        ValueError: bad ``mode`` / ``method``, different numbers of dimensions, empty
            operands, shapes that do not fit "valid". TypeError: dtypes that do not promote.

    Differentiable in both operands (float dtypes), vmappable, compiles.
    """
    return _convolve("convolve", in1, in2, mode, method)


def correlate(in1, in2, mode="full", method="auto"):
    """N-dimensional cross-correlation ``out[n] = sum_k in1[n + k] conj(in2[k])`` with lags
    running from ``-(n2 - 1)`` in "full" mode (``scipy.signal.correlate``).

    Args:
        in1, in2: arrays with the same number of dimensions, as ``convolve``.
        mode: "full", "same" or "valid", with ``convolve``'s output shapes.
        method: "auto", "direct" or "fft", as ``convolve``.
    Returns:
        Array of the promoted dtype.
    Raises:
        ValueError, TypeError: as ``convolve``.

    Method: ``convolve(in1, flip(conj(in2)), mode, method)``.
    """
    in1, in2 = _operands("correlate", in1, in2, mode)
    rev = snp.flip(snp.conj(in2) if dtypes.is_complex(in2.dtype) else in2)
    return _convolve("correlate", in1, rev, mode, method)
