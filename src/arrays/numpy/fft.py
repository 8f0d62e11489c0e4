"""``starling.numpy.fft``: discrete Fourier transforms (Array API fft extension + NumPy names).

Every transform is the ``fft`` primitive (src/arrays/ops/fft.py, acting on trailing axes) plus
shape ops: the transformed axes are moved last with a transpose, cropped (static slice) or
zero-padded (pad) to the requested lengths, transformed, scaled for ``norm`` and moved back.

Conventions (as NumPy): the forward transform is ``X[k] = sum_n x[n] exp(-2 pi i k n / N)``;
``norm`` is "backward" (default: no scaling forward, ``1/N`` on the inverse), "ortho"
(``1/sqrt(N)`` both ways) or "forward" (``1/N`` forward, none on the inverse).

Dtypes: complex64 stays complex64 and complex128 stays complex128; float32 (and float16,
bfloat16, bool, integers: promoted to the default float first) give complex64; float64 gives
complex128. The real-output transforms (irfft*, hfft) return the matching real dtype.
Unlike NumPy, a repeated axis in ``axes`` raises ValueError (NumPy transforms it twice).
"""
from __future__ import annotations

from ..ops.axes import normalize_axes

import math

import numpy as np

from ...core import dtypes
from ..array import Array, wrap
from ..convert import operand
from ..device import check_device
from ..ops import shape_lax
from ..ops.convert_element_type import convert_element_type
from ..ops.fft import fft as _fft_bind
from ..ops.linear import snp

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")
_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


# ---- the shared driver -------------------------------------------------------------------------

def _to_complex(op, x):
    dt = x.dtype
    if dtypes.is_complex(dt):
        return x
    target = dtypes.complex128 if dt == dtypes.float64 else dtypes.complex64
    return convert_element_type(x, target, False)


def _to_real(op, x):
    dt = x.dtype
    if dtypes.is_complex(dt):
        raise TypeError(f"{op}: expected a real input, got {dt} (use fft for complex input)")
    if dt in (dtypes.float32, dtypes.float64):
        return x
    return convert_element_type(x, dtypes.float32, False)


def _check_norm(op, norm):
    if norm not in _NORMS:
        raise ValueError(f"{op}: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")


def _norm_axes(op, axes, ndim, name="axes"):
    return normalize_axes(op, tuple(axes), ndim, name=name)


def _resize(x, axis, n):
    """Crops or zero-pads ``axis`` of ``x`` to length ``n`` (at the end, as NumPy)."""
    m = x.shape[axis]
    if n == m:
        return x
    if n < m:
        return shape_lax.slice_in_dim(x, 0, n, 1, axis)
    config = [(0, 0, 0)] * x.ndim
    config[axis] = (0, n - m, 0)
    return shape_lax.pad(x, wrap(np.zeros((), x.dtype), False), config)


def _transform(op, x, axes, lengths, fft_type, norm):
    """``axes``: normalized, unique; ``lengths``: the transform length per axis (ints >= 1)."""
    _check_norm(op, norm)
    for a, n in zip(axes, lengths):
        if n < 1:
            raise ValueError(f"{op}: invalid number of data points ({n}) for axis {a}; need >= 1")
    nd = x.ndim
    perm = tuple(i for i in range(nd) if i not in axes) + tuple(axes)
    x = shape_lax.transpose(x, perm)
    k = len(axes)
    for j, n in enumerate(lengths):
        target = n // 2 + 1 if (fft_type == "IRFFT" and j == k - 1) else n
        x = _resize(x, nd - k + j, target)
    out = _fft_bind(x, fft_type, lengths)
    size = math.prod(lengths)
    inverse = fft_type in ("IFFT", "IRFFT")
    if norm == "ortho":
        scale = math.sqrt(size) if inverse else 1.0 / math.sqrt(size)
    elif norm == "forward":
        scale = float(size) if inverse else 1.0 / size
    else:
        scale = 1.0
    if scale != 1.0:
        out = out * scale
    inv_perm = [0] * nd
    for i, p in enumerate(perm):
        inv_perm[p] = i
    return shape_lax.transpose(out, tuple(inv_perm))


def _one_axis(op, a, n, axis, norm, fft_type):
    x = operand(a, op)
    if x.ndim == 0:
        raise ValueError(f"{op}: input must be at least 1-d, got a 0-d array")
    (ax,) = _norm_axes(op, (axis,), x.ndim, name="axis")
    x = _to_real(op, x) if fft_type == "RFFT" else _to_complex(op, x)
    if n is None:
        n = 2 * (x.shape[ax] - 1) if fft_type == "IRFFT" else x.shape[ax]
    return _transform(op, x, (ax,), (_as_len(op, n),), fft_type, norm)


def _as_len(op, n):
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{op}: n must be an int, got {n!r}")
    return int(n)


def _many_axes(op, a, s, axes, norm, fft_type, default_axes=None):
    x = operand(a, op)
    x = _to_real(op, x) if fft_type == "RFFT" else _to_complex(op, x)
    nd = x.ndim
    if axes is None:
        if default_axes is not None:
            axes = default_axes
        elif s is not None:
            axes = tuple(range(nd - len(s), nd))
        else:
            axes = tuple(range(nd))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    axes = _norm_axes(op, tuple(axes), nd)
    if not axes:
        if fft_type in ("RFFT", "IRFFT"):
            raise ValueError(f"{op}: needs at least one axis")
        return x
    if s is None:
        lengths = [x.shape[a] for a in axes]
        if fft_type == "IRFFT":
            lengths[-1] = 2 * (x.shape[axes[-1]] - 1)
    else:
        s = (s,) if isinstance(s, (int, np.integer)) else tuple(s)
        if len(s) != len(axes):
            raise ValueError(f"{op}: s {s} and axes {tuple(axes)} must have the same length")
        lengths = []
        for j, (a, n) in enumerate(zip(axes, s)):
            n = _as_len(op, n)
            if n == -1:
                n = 2 * (x.shape[a] - 1) if (fft_type == "IRFFT" and j == len(axes) - 1) \
                    else x.shape[a]
            lengths.append(n)
    return _transform(op, x, axes, tuple(lengths), fft_type, norm)


# ---- one-dimensional transforms ----------------------------------------------------------------

_DOC_1D = """{what} along one axis (NumPy ``fft.{name}``).

Args:
    a: input array{input}.
    n: transform length: the axis is cropped or zero-padded (at the end) to {n_len}; default
        {n_default}.
    axis: the transformed axis (default -1).
    norm: "backward" (default), "ortho" or "forward" (see the module docstring).
Returns:
    {ret}
Raises:
    ValueError: ``n < 1``, bad axis or norm. {raises}
"""


def fft(a, n=None, axis=-1, norm=None):
    return _one_axis("fft", a, n, axis, norm, "FFT")


def ifft(a, n=None, axis=-1, norm=None):
    return _one_axis("ifft", a, n, axis, norm, "IFFT")


def rfft(a, n=None, axis=-1, norm=None):
    return _one_axis("rfft", a, n, axis, norm, "RFFT")


def irfft(a, n=None, axis=-1, norm=None):
    return _one_axis("irfft", a, n, axis, norm, "IRFFT")


def hfft(a, n=None, axis=-1, norm=None):
    x = snp.conj(_to_complex("hfft", operand(a, "hfft")))
    _check_norm("hfft", norm)
    return _one_axis("hfft", x, n, axis, _SWAP[norm], "IRFFT")


def ihfft(a, n=None, axis=-1, norm=None):
    _check_norm("ihfft", norm)
    return snp.conj(_one_axis("ihfft", a, n, axis, _SWAP[norm], "RFFT"))


_COMPLEX_RET = ("Complex array (complex64, or complex128 for float64/complex128 input) of the "
                "input's shape with ``axis`` of length ``n``.")
for _f, _what, _inp, _nlen, _ndef, _ret, _raises in [
    (fft, "Discrete Fourier transform", " (any numeric dtype)", "``n``", "the input length",
     _COMPLEX_RET, ""),
    (ifft, "Inverse discrete Fourier transform", " (any numeric dtype)", "``n``",
     "the input length", _COMPLEX_RET, ""),
    (rfft, "Discrete Fourier transform of real input (the non-negative frequencies only)",
     " (real)", "``n``", "the input length",
     "Complex array with ``axis`` of length ``n // 2 + 1``.", "TypeError: complex input."),
    (irfft, "Inverse of ``rfft``: real output from the non-negative frequencies",
     " (the ``n // 2 + 1`` non-negative frequencies)", "``n // 2 + 1``",
     "``2 * (m - 1)`` for an input axis of length ``m``",
     "Real array (float32, or float64 for complex128 input) with ``axis`` of length ``n``.",
     ""),
    (hfft, "Transform of a Hermitian-symmetric signal given by its first half (real output: "
     "``irfft(conj(a))`` with the forward/backward scaling swapped)", "", "``n // 2 + 1``",
     "``2 * (m - 1)``", "Real array with ``axis`` of length ``n``.", ""),
    (ihfft, "Inverse of ``hfft``: ``conj(rfft(a))`` with the scaling swapped", " (real)",
     "``n``", "the input length", "Complex array with ``axis`` of length ``n // 2 + 1``.",
     "TypeError: complex input."),
]:
    _f.__doc__ = _DOC_1D.format(what=_what, name=_f.__name__, input=_inp, n_len=_nlen,
                                n_default=_ndef, ret=_ret, raises=_raises)


# ---- n-dimensional transforms ------------------------------------------------------------------

_DOC_ND = """{what} (NumPy ``fft.{name}``).

Args:
    a: input array{input}.
    s: transform lengths, one per axis (crop / zero-pad at the end; -1 keeps the input length);
        default: the input lengths{s_extra}.
    axes: the transformed axes (default {axes_default}). With ``s`` and no ``axes``, the last
        ``len(s)`` axes.
    norm: "backward" (default), "ortho" or "forward".
Returns:
    {ret}
Raises:
    ValueError: ``len(s) != len(axes)``, repeated or out-of-range axes, lengths < 1, bad norm.
"""


def fftn(a, s=None, axes=None, norm=None):
    return _many_axes("fftn", a, s, axes, norm, "FFT")


def ifftn(a, s=None, axes=None, norm=None):
    return _many_axes("ifftn", a, s, axes, norm, "IFFT")


def rfftn(a, s=None, axes=None, norm=None):
    return _many_axes("rfftn", a, s, axes, norm, "RFFT")


def irfftn(a, s=None, axes=None, norm=None):
    return _many_axes("irfftn", a, s, axes, norm, "IRFFT")


def fft2(a, s=None, axes=(-2, -1), norm=None):
    return _many_axes("fft2", a, s, axes, norm, "FFT")


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    return _many_axes("ifft2", a, s, axes, norm, "IFFT")


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    return _many_axes("rfft2", a, s, axes, norm, "RFFT")


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    return _many_axes("irfft2", a, s, axes, norm, "IRFFT")


_ND_COMPLEX = "Complex array with the transformed axes of lengths ``s``."
for _f, _what, _inp, _sx, _axd, _ret in [
    (fftn, "N-dimensional discrete Fourier transform", "", "", "all", _ND_COMPLEX),
    (ifftn, "N-dimensional inverse discrete Fourier transform", "", "", "all", _ND_COMPLEX),
    (rfftn, "N-dimensional FFT of real input (the last axis keeps the non-negative "
     "frequencies)", " (real)", "", "all",
     "Complex array; the last transformed axis has length ``s[-1] // 2 + 1``."),
    (irfftn, "Inverse of ``rfftn`` (real output)", "", "; the last axis defaults to "
     "``2 * (m - 1)``", "all", "Real array with the transformed axes of lengths ``s``."),
    (fft2, "2-D discrete Fourier transform", "", "", "(-2, -1)", _ND_COMPLEX),
    (ifft2, "2-D inverse discrete Fourier transform", "", "", "(-2, -1)", _ND_COMPLEX),
    (rfft2, "2-D FFT of real input", " (real)", "", "(-2, -1)",
     "Complex array; the last transformed axis has length ``s[-1] // 2 + 1``."),
    (irfft2, "Inverse of ``rfft2`` (real output)", "", "; the last axis defaults to "
     "``2 * (m - 1)``", "(-2, -1)", "Real array with the transformed axes of lengths ``s``."),
]:
    _f.__doc__ = _DOC_ND.format(what=_what, name=_f.__name__, input=_inp, s_extra=_sx,
                                axes_default=_axd, ret=_ret)


# ---- helpers: frequencies and shifts -----------------------------------------------------------

def _freqs(op, values, n, d, dtype, device):
    check_device(device, op)
    dt = dtypes.DEFAULT_FLOAT if dtype is None else dtypes.canonicalize(dtype)
    if not dtypes.is_inexact(dt):
        raise TypeError(f"{op}: dtype must be a floating dtype, got {dt}")
    if isinstance(d, (Array,)) or not isinstance(d, (int, float, np.integer, np.floating)):
        base = wrap((values / n).astype(dt), False)
        return base / operand(d, op)
    return wrap((values / (n * float(d))).astype(dt), False)


def fftfreq(n, /, d=1.0, *, dtype=None, device=None):
    """Sample frequencies of an ``n``-point FFT: ``[0, 1, ..., (n-1)//2, -(n//2), ..., -1] /
    (n * d)`` (Array API / NumPy ``fftfreq``).

    Args:
        n: window length (int >= 1). d: sample spacing (a scalar or 0-d array).
        dtype: a floating result dtype (default float32). device: the target device.
    Returns:
        1-d array of length ``n``.
    """
    n = _as_len("fftfreq", n)
    if n < 1:
        raise ValueError(f"fftfreq: n must be >= 1, got {n}")
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return _freqs("fftfreq", k.astype(np.float64), n, d, dtype, device)


def rfftfreq(n, /, d=1.0, *, dtype=None, device=None):
    """Sample frequencies of ``rfft``: ``[0, 1, ..., n//2] / (n * d)`` (length ``n // 2 + 1``)."""
    n = _as_len("rfftfreq", n)
    if n < 1:
        raise ValueError(f"rfftfreq: n must be >= 1, got {n}")
    return _freqs("rfftfreq", np.arange(0, n // 2 + 1, dtype=np.float64), n, d, dtype, device)


def _roll(x, shift, axis):
    n = x.shape[axis]
    if n == 0:
        return x
    shift %= n
    if shift == 0:
        return x
    head = shape_lax.slice_in_dim(x, n - shift, n, 1, axis)
    tail = shape_lax.slice_in_dim(x, 0, n - shift, 1, axis)
    return shape_lax.concatenate([head, tail], axis)


def _shift(op, x, axes, sign):
    x = operand(x, op)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    for a in _norm_axes(op, tuple(axes), x.ndim):
        n = x.shape[a]
        x = _roll(x, n // 2 if sign > 0 else -(n // 2), a)
    return x


def fftshift(x, /, axes=None):
    """Moves the zero frequency to the centre: rolls each axis in ``axes`` (default all) by
    ``n // 2`` (Array API / NumPy ``fftshift``)."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, /, axes=None):
    """Inverse of ``fftshift``: rolls each axis in ``axes`` (default all) by ``-(n // 2)``."""
    return _shift("ifftshift", x, axes, -1)
