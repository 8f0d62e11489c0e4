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
from ..ops.elementwise_docs import entry, fill
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

# Each wrapper's docstring is its summary; _document adds the sections its family shares, so
# the Args / Returns / Raises text is written once.

_METHOD = ("Computed by NumPy's pocketfft (mixed-radix Cooley-Tukey, Bluestein's algorithm for "
           "large prime factors) in the precision of the complex dtype.")
_HERMITIAN_IN = ("The input is taken as the first half of a Hermitian-symmetric spectrum: the "
                 "imaginary parts of the zero frequency (and, for an even length, of the Nyquist "
                 "frequency) are ignored, as in NumPy.")
_IN_ANY = ("any numeric dtype (float64 becomes complex128; bool, integers and the other real "
           "floats become complex64)")
_IN_REAL = ("bool, integer or real floating dtype (float64 stays float64, the others become "
            "float32)")
_IN_HALF = ("the ``{m}`` non-negative frequencies of a Hermitian-symmetric spectrum; any numeric "
            "dtype (converted to complex as for ``fft``)")
_NORM = ('"backward" (default: no scaling forward, ``1/{n}`` on the inverse), "ortho" '
         '(``1/sqrt({n})`` both ways) or "forward" (``1/{n}`` forward, none on the inverse); None '
         'means "backward".')


def _document(f, *, source, args, ret, raises):
    """Sets ``f.__doc__``: its summary, the standards followed and the method, then sections."""
    summary = " ".join(f.__doc__.split())
    f.__doc__ = (fill(summary) + "\n\n" + fill(f"{source} {_METHOD}") + "\n\nArgs:\n"
                 + "".join(entry(f"{k}: ", v) for k, v in args) + "Returns:\n" + entry("", ret)
                 + "Raises:\n" + "".join(entry(f"{k}: ", v) for k, v in raises))


def _document_1d(f, *, real_in=False, half_in=False):
    name = f.__name__
    args = [("a", "array of shape ``(*pre, m, *post)``, ``m`` on ``axis``; "
             + (_IN_HALF.format(m="n // 2 + 1") if half_in else _IN_REAL if real_in
                else _IN_ANY) + "."),
            ("n", "int, the transform length: the input axis is cropped, or zero-padded at the "
                  "end, to " + ("``n // 2 + 1``; default ``2 * (m - 1)``." if half_in
                                else "``n``; default ``m``.")),
            ("axis", "int, the transformed axis (default -1)."),
            ("norm", _NORM.format(n="n"))]
    if half_in:
        ret = ("Real array of shape ``(*pre, n, *post)``: float64 for complex128 / float64 "
               "input, else float32.")
    elif real_in:
        ret = ("Complex array of shape ``(*pre, n // 2 + 1, *post)``: the frequencies ``0 .. n "
               "// 2``; the others follow from Hermitian symmetry ``X[n - k] == conj(X[k])``. "
               "complex128 for float64 input, else complex64.")
    else:
        ret = ("Complex array of shape ``(*pre, n, *post)``: complex128 for float64 / complex128 "
               "input, else complex64.")
    raises = [("ValueError", "a 0-d input, ``n < 1``"
               + (" (so, with the default ``n``, ``m < 2``)" if half_in else "")
               + " or a ``norm`` not listed above."),
              ("AxisError", "``axis`` out of range (a subclass of ValueError and IndexError)."),
              ("TypeError", "``n`` is not an int" + ("; complex input." if real_in else "."))]
    _document(f, source=f"NumPy / Array API ``fft.{name}``."
              + (" " + _HERMITIAN_IN if half_in else ""), args=args, ret=ret, raises=raises)


def fft(a, n=None, axis=-1, norm=None):
    """Discrete Fourier transform along one axis: ``X[k] = sum_j x[j] exp(-2 pi i j k / n)``."""
    return _one_axis("fft", a, n, axis, norm, "FFT")


def ifft(a, n=None, axis=-1, norm=None):
    """Inverse discrete Fourier transform along one axis: with the default norm,
    ``x[j] = (1/n) sum_k X[k] exp(2 pi i j k / n)``."""
    return _one_axis("ifft", a, n, axis, norm, "IFFT")


def rfft(a, n=None, axis=-1, norm=None):
    """Discrete Fourier transform of real input along one axis, keeping only the non-negative
    frequencies."""
    return _one_axis("rfft", a, n, axis, norm, "RFFT")


def irfft(a, n=None, axis=-1, norm=None):
    """Inverse of ``rfft`` along one axis: the real signal of length ``n`` whose spectrum has the
    given non-negative frequencies."""
    return _one_axis("irfft", a, n, axis, norm, "IRFFT")


def hfft(a, n=None, axis=-1, norm=None):
    """Discrete Fourier transform of a Hermitian-symmetric signal given by its first half, with
    real output: ``irfft(conj(a), n)`` with the forward / inverse scaling swapped (so with the
    default norm it is not scaled by ``1/n``)."""
    x = snp.conj(_to_complex("hfft", operand(a, "hfft")))
    _check_norm("hfft", norm)
    return _one_axis("hfft", x, n, axis, _SWAP[norm], "IRFFT")


def ihfft(a, n=None, axis=-1, norm=None):
    """Inverse of ``hfft``: ``conj(rfft(a, n))`` with the forward / inverse scaling swapped (so
    with the default norm it is scaled by ``1/n``)."""
    _check_norm("ihfft", norm)
    return snp.conj(_one_axis("ihfft", a, n, axis, _SWAP[norm], "RFFT"))


for _f in (fft, ifft):
    _document_1d(_f)
for _f in (rfft, ihfft):
    _document_1d(_f, real_in=True)
for _f in (irfft, hfft):
    _document_1d(_f, half_in=True)


# ---- n-dimensional transforms ------------------------------------------------------------------

def _document_nd(f, one="", *, real_in=False, half_in=False, two=False):
    name = f.__name__
    if two:
        source = f"NumPy ``fft.{name}``."
        axes = "ints, the transformed axes (default ``(-2, -1)``; None means all axes)."
    else:
        source = f"NumPy / Array API ``fft.{name}``."
        axes = ("ints, the transformed axes (default: all; with ``s`` given, the last "
                "``len(s)``).")
    if half_in:
        method = "``ifft`` along all but the last axis in ``axes``, then ``irfft`` along the last"
        ins = ("along the last axis in ``axes``, the ``s[-1] // 2 + 1`` non-negative frequencies "
               "of a spectrum taken as Hermitian-symmetric; any numeric dtype (converted to "
               "complex as for ``fft``)")
    elif real_in:
        method = "``rfft`` along the last axis in ``axes``, then ``fft`` along the others"
        ins = _IN_REAL
    else:
        method = f"the 1-D ``{one}`` along each axis in ``axes``"
        ins = _IN_ANY
    source = f"Separable: {method}. {source}"
    args = [("a", "array of shape ``(*shape)``" + (" (at least 2-d by default)" if two else "")
             + "; " + ins + "."),
            ("s", "ints, the transform lengths, one per axis in ``axes``: each axis is cropped, "
                  "or zero-padded at the end, to its length (-1: its input length); default: the "
                  "input lengths" + (", except the last axis: ``2 * (m - 1)`` for an input "
                                     "length ``m``, and its input is cropped / zero-padded to "
                                     "``s[-1] // 2 + 1``." if half_in else ".")),
            ("axes", axes),
            ("norm", _NORM.format(n="N") + " ``N = prod(s)``.")]
    shape = "of shape ``(*shape)`` with each axis in ``axes`` of its length in ``s``"
    if half_in:
        ret = f"Real array {shape}: float64 for complex128 / float64 input, else float32."
    elif real_in:
        ret = (f"Complex array {shape}, except the last, of length ``s[-1] // 2 + 1`` (Hermitian "
               f"symmetry gives the rest); complex128 for float64 input, else complex64.")
    else:
        ret = (f"Complex array {shape}: complex128 for float64 / complex128 input, else "
               f"complex64. With no axes: ``a`` converted to complex.")
    raises = [("ValueError", "``len(s) != len(axes)``, a repeated axis (NumPy would transform "
                             "it twice), a length < 1"
               + (", no axes" if real_in or half_in else "")
               + " or a ``norm`` not listed above."),
              ("AxisError", "an axis out of range (a subclass of ValueError and IndexError)."),
              ("TypeError", "a length that is not an int" + ("; complex input." if real_in
                                                              else "."))]
    _document(f, source=source, args=args, ret=ret, raises=raises)


def fftn(a, s=None, axes=None, norm=None):
    """N-dimensional discrete Fourier transform."""
    return _many_axes("fftn", a, s, axes, norm, "FFT")


def ifftn(a, s=None, axes=None, norm=None):
    """N-dimensional inverse discrete Fourier transform."""
    return _many_axes("ifftn", a, s, axes, norm, "IFFT")


def rfftn(a, s=None, axes=None, norm=None):
    """N-dimensional discrete Fourier transform of real input; the last transformed axis keeps
    only the non-negative frequencies."""
    return _many_axes("rfftn", a, s, axes, norm, "RFFT")


def irfftn(a, s=None, axes=None, norm=None):
    """Inverse of ``rfftn``: the real N-dimensional signal whose spectrum, along the last
    transformed axis, has the given non-negative frequencies."""
    return _many_axes("irfftn", a, s, axes, norm, "IRFFT")


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """2-D discrete Fourier transform (``fftn`` over the last two axes by default)."""
    return _many_axes("fft2", a, s, axes, norm, "FFT")


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """2-D inverse discrete Fourier transform (``ifftn`` over the last two axes by default)."""
    return _many_axes("ifft2", a, s, axes, norm, "IFFT")


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """2-D discrete Fourier transform of real input (``rfftn`` over the last two axes by
    default)."""
    return _many_axes("rfft2", a, s, axes, norm, "RFFT")


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """Inverse of ``rfft2`` (``irfftn`` over the last two axes by default)."""
    return _many_axes("irfft2", a, s, axes, norm, "IRFFT")


for _f, _one in ((fftn, "fft"), (ifftn, "ifft"), (fft2, "fft"), (ifft2, "ifft")):
    _document_nd(_f, _one, two=_f.__name__.endswith("2"))
for _f in (rfftn, rfft2):
    _document_nd(_f, real_in=True, two=_f is rfft2)
for _f in (irfftn, irfft2):
    _document_nd(_f, half_in=True, two=_f is irfft2)
del _f, _one


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
