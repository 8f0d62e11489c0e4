"""The ``fft`` primitive: discrete Fourier transforms over the trailing axes (lax-style).

``fft_p.bind(x, fft_type=..., fft_lengths=(n0, ..., nk-1))`` transforms the last ``k`` axes:

==========  =====================  ==============================  ==========================
fft_type    operand                trailing operand dims           trailing result dims
==========  =====================  ==============================  ==========================
"FFT"       complex                ``fft_lengths``                 ``fft_lengths``
"IFFT"      complex                ``fft_lengths``                 ``fft_lengths``
"RFFT"      float32 / float64      ``fft_lengths``                 ``(..., n_last // 2 + 1)``
"IRFFT"     complex                ``(..., n_last // 2 + 1)``      ``fft_lengths`` (real)
==========  =====================  ==============================  ==========================

The inverse transforms include the ``1/N`` factor (NumPy's "backward" normalization); the user
functions in ``starling.numpy.fft`` apply other normalizations, move the transformed axes to the
end with transposes and pad or crop to the requested lengths, so the primitive itself never does.
Implementation: NumPy's pocketfft (mixed-radix Cooley-Tukey with Bluestein's algorithm for large
prime factors), which keeps single precision for complex64 / float32.

Rules (end of file): the primitive is linear (JVP = the transform of the tangent), its
transposes are transforms again (derived there per ``fft_type``), and batching moves the batch
axis to the front.
"""
from __future__ import annotations

import math

import numpy as np

from ...core import dtypes
from ...core.ad_util import Zero, tangent_aval
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ..array import wrap
from . import rules_sharding as RS
from .rules import deflinear, move_axis

__all__ = []  # the user functions live in starling.numpy.fft

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")

fft_p = Primitive("fft", family="fft")


def _fft_out(op, shape, dt, fft_type, fft_lengths):
    """Checks operand shape/dtype against the params; returns (result shape, result dtype)."""
    k = len(fft_lengths)
    if fft_type not in FFT_TYPES:
        raise ValueError(f"{op}: fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    if k == 0 or k > len(shape):
        raise ValueError(f"{op}: fft_lengths {fft_lengths} must name 1..{len(shape)} trailing "
                         f"axes of the operand of shape {tuple(shape)}")
    if fft_type == "RFFT":
        if not dtypes.is_floating(dt) or dt not in (dtypes.float32, dtypes.float64):
            raise TypeError(f"{op}: RFFT needs a float32 or float64 operand, got {dt}")
    elif dt not in (dtypes.complex64, dtypes.complex128):
        raise TypeError(f"{op}: {fft_type} needs a complex64 or complex128 operand, got {dt}")
    lead, trail = tuple(shape[:-k]), tuple(shape[-k:])
    want = tuple(fft_lengths)
    if fft_type == "IRFFT":
        want = want[:-1] + (want[-1] // 2 + 1,)
    if trail != want:
        raise ValueError(f"{op}: {fft_type} with fft_lengths {tuple(fft_lengths)} needs trailing "
                         f"operand dims {want}, got shape {tuple(shape)}")
    if fft_type == "RFFT":
        return lead + want[:-1] + (want[-1] // 2 + 1,), dtypes.complex_dtype(dt)
    if fft_type == "IRFFT":
        return lead + tuple(fft_lengths), dtypes.real_dtype(dt)
    return tuple(shape), dt


def _fft_abstract(x, *, fft_type, fft_lengths):
    shape, dt = _fft_out("fft", x.shape, x.dtype, fft_type, fft_lengths)
    return ShapedArray(shape, dt)


_ONE_AXIS = {"FFT": np.fft.fft, "IFFT": np.fft.ifft, "RFFT": np.fft.rfft, "IRFFT": np.fft.irfft}
_N_AXES = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn,
           "IRFFT": np.fft.irfftn}


def _fft_impl(x, *, fft_type, fft_lengths):
    x = np.asarray(x)
    k = len(fft_lengths)
    if k == 1:
        out = _ONE_AXIS[fft_type](x, n=fft_lengths[0], axis=-1)
    else:
        out = _N_AXES[fft_type](x, s=fft_lengths, axes=tuple(range(x.ndim - k, x.ndim)))
    # pocketfft keeps single precision; the cast guards against a NumPy that would not.
    if fft_type == "RFFT":
        dt = dtypes.complex_dtype(x.dtype)
    elif fft_type == "IRFFT":
        dt = dtypes.real_dtype(x.dtype)
    else:
        dt = x.dtype
    return out if out.dtype == dt else out.astype(dt)


fft_p.impl = _fft_impl
fft_p.abstract_eval = _fft_abstract


def fft(x, fft_type, fft_lengths):
    """Binds the ``fft`` primitive on ``x`` (an Array/Tracer already of the right dtype and
    trailing shape; see the module docstring)."""
    fft_lengths = tuple(int(n) for n in fft_lengths)
    _fft_out("fft", x.shape, x.dtype, fft_type, fft_lengths)
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths)


# ---- transformation rules ----------------------------------------------------------------------
# Every transform is linear (the JVP applies it to the tangent) and acts on trailing axes (the
# batch rule moves the batch axis to the front). Transposes are the plain (non-conjugating)
# transposes of the real-linear maps, N = prod(fft_lengths), n = fft_lengths[-1]:
#   FFT / IFFT: the DFT matrices are symmetric, so each is its own transpose.
#   RFFT (real x -> half spectrum y = (F x)[:n//2+1]): ct_x = re(F^T [ct; 0]) = re(F [ct; 0]),
#     computed as N * irfftn(w * conj(ct)) where w = 1 at bin 0 (and n/2 for even n) and 1/2 at
#     the other bins: irfft doubles the bins it mirrors and ignores the imaginary part of
#     bins 0 and n/2, so the weights undo exactly that.
#   IRFFT (half spectrum x -> real y = re(B x), B_kj = c_j exp(2 pi i jk / n) / N with c = 1 at
#     bins 0 (and n/2), 2 elsewhere): ct_x = B^T ct = (c / N) * conj(rfftn(ct)).

def _bin_weights(n, like, mirrored):
    """Per-bin weights along the last axis of a half spectrum of an ``n``-point transform:
    ``mirrored`` for the bins irfft counts twice (1 <= j < n/2), 1 for bins 0 and n/2."""
    w = np.full(n // 2 + 1, mirrored)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return wrap(w.astype(dtypes.real_dtype(like.dtype)), False)


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if type(ct) is Zero:
        return [Zero(tangent_aval(x.aval))]
    if fft_type in ("FFT", "IFFT"):
        return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
    from .linear import snp
    size, n = float(math.prod(fft_lengths)), fft_lengths[-1]
    if fft_type == "RFFT":
        z = snp.conj(ct) * _bin_weights(n, ct, 0.5)
        return [fft_p.bind(z, fft_type="IRFFT", fft_lengths=fft_lengths) * size]
    spec = fft_p.bind(ct, fft_type="RFFT", fft_lengths=fft_lengths)
    return [snp.conj(spec) * (_bin_weights(n, spec, 2.0) * (1.0 / size))]


def _fft_batch(args, dims, *, fft_type, fft_lengths):
    (x,), (d,) = args, dims
    return fft_p.bind(move_axis(x, d, 0), fft_type=fft_type, fft_lengths=fft_lengths), 0


def _transformed(params, ndim):
    return range(ndim - len(params["fft_lengths"]), ndim)


deflinear(fft_p, _fft_transpose)
fft_p.batch = _fft_batch
# the dims not transformed may be split; every transform is linear (partial sums pass)
fft_p.sharding = RS.along(_transformed, ("sum",))
