"""Scaled low-precision formats: MX block scaling and scaled float8 matrix products.

MX (OCP "Microscaling Formats (MX) Specification" v1.0, 2023): a block of ``block_size``
(32) consecutive elements along one axis shares one power-of-two scale, stored as
``float8_e8m0fnu`` (the byte ``e`` means ``2**(e - 127)``; 0xff is NaN). MXFP8 elements are
float8_e4m3fn or float8_e5m2, MXFP4 elements float4_e2m1fn. Quantization follows the spec's
conversion (section 6.3): the block's shared exponent is
``floor(log2(max|x|)) - emax_elem`` (``emax_elem`` = 8 for e4m3, 15 for e5m2, 2 for e2m1,
the exponent of the element format's largest normal), clamped to the scale's range
``[-127, 127]``; each element ``x / scale`` is rounded to nearest, ties to even, and saturated
to the element format's largest finite value. A block holding NaN or inf gets the NaN scale
(the spec: every element of such a block reads as NaN). An all-zero block gets the smallest
scale, ``2**-127``.

Everything here is a composition of Starling's array operations (frexp, ldexp, max, clip,
casts, bit casts and matmul): it runs eagerly, under ``compile`` on every backend, and under
``vmap``; derivatives flow to the float operands (a quantized scale has none).

``scaled_matmul`` is the float8 GEMM of training recipes (PyTorch ``torch._scaled_mm``):
``(a * scale_a) @ (b * scale_b)`` with per-tensor or per-row / per-column float32 scales, or
MX block scales. On CPU backends it runs as float32 GEMMs (float8 and float4 values are exact
in float32); no GPU kernel for float8 or MX operands exists yet (see the README's GPU section).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ...core import dtypes
from ..convert import operand
from ..lax.bits import bitcast_convert_type
from .linear import snp

__all__ = ["quantize_mx", "dequantize_mx", "scaled_matmul"]

# element format -> emax_elem: the exponent of its largest normal value (OCP MX v1.0, table 1)
MX_ELEMENTS = {dt: int(ml_dtypes.finfo(dt).maxexp) - 1
               for dt in (dtypes.float8_e4m3fn, dtypes.float8_e5m2, dtypes.float4_e2m1fn)}
FLOAT8 = (dtypes.float8_e4m3fn, dtypes.float8_e5m2)
E8M0_BIAS = 127
_OUT_DTYPES = (dtypes.float32, dtypes.bfloat16, dtypes.float16)
_COMPUTE_INPUTS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def _names(dts):
    return ", ".join(dt.name for dt in dts)


def _block_size(op, block_size):
    if isinstance(block_size, (bool, np.bool_)) or not isinstance(block_size, (int, np.integer)) \
            or block_size < 1:
        raise ValueError(f"{op}: block_size must be a positive int (MX: 32), got {block_size!r}")
    return int(block_size)


def _axis(op, axis, ndim):
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis!r} is out of range for an array of rank {ndim}")
    return int(axis) % ndim


def _blocks(x, axis, block_size):
    """``x`` with ``axis`` moved last, zero-padded to whole blocks and split:
    ``(*rest, n_blocks, block_size)``."""
    x = snp.moveaxis(x, axis, -1)
    n = x.shape[-1]
    pad = -n % block_size
    if pad:
        x = snp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)])
    return snp.reshape(x, x.shape[:-1] + ((n + pad) // block_size, block_size))


def _unblocks(blocks, n, axis):
    """The inverse of ``_blocks`` for an axis of length ``n``."""
    x = snp.reshape(blocks, blocks.shape[:-2] + (blocks.shape[-2] * blocks.shape[-1],))
    return snp.moveaxis(x[..., :n], -1, axis)


def n_blocks(n, block_size=32):
    """Number of MX blocks along an axis of length ``n``: ``ceil(n / block_size)``."""
    return -(-n // block_size)


def quantize_mx(x, dtype=dtypes.float8_e4m3fn, *, block_size=32, axis=-1):
    """Quantizes ``x`` to an MX format: elements of ``dtype`` and one power-of-two scale per
    block of ``block_size`` consecutive entries along ``axis`` (OCP MX v1.0; the algorithm is
    in this module's docstring).

    Args:
        x: ``(*dims)`` real floating array (float16, bfloat16, float32, float64; float64 is
            scaled in float64, the others in float32).
        dtype: element format: float8_e4m3fn (MXFP8, the default), float8_e5m2 (MXFP8) or
            float4_e2m1fn (MXFP4).
        block_size: entries per block (the spec's 32). A last partial block is allowed.
        axis: the blocked axis.
    Returns:
        ``(elements, scales)``: ``elements`` has ``x``'s shape and dtype ``dtype``; ``scales``
        has dtype float8_e8m0fnu and ``x``'s shape with ``axis`` of length
        ``ceil(n / block_size)``. ``dequantize_mx(elements, scales, ...)`` gives ``x`` back up
        to the element format's rounding (and saturation at ``2**127`` times its maximum).
    Raises:
        TypeError: ``x`` not real floating; ``dtype`` not an MX element format.
        ValueError: ``block_size`` not a positive int; ``axis`` out of range.
    """
    op = "quantize_mx"
    x = operand(x, op)
    elem = dtypes.canonicalize(dtype)
    if elem not in MX_ELEMENTS:
        raise TypeError(f"{op}: element dtype must be one of {_names(MX_ELEMENTS)}, got {elem}")
    if x.dtype not in _COMPUTE_INPUTS:
        raise TypeError(f"{op}: x must be float16, bfloat16, float32 or float64, got {x.dtype}")
    bs = _block_size(op, block_size)
    ax = _axis(op, axis, x.ndim)
    work = dtypes.float64 if x.dtype == dtypes.float64 else dtypes.float32
    n = x.shape[ax]
    blocks = _blocks(x.astype(work), ax, bs)
    amax = snp.max(snp.abs(blocks), axis=-1)          # NaN propagates
    _, exponent = snp.frexp(amax)                     # amax = f * 2**exponent, f in [0.5, 1)
    shared = snp.clip(exponent - 1 - MX_ELEMENTS[elem], -E8M0_BIAS, E8M0_BIAS)
    shared = snp.where(amax == 0, -E8M0_BIAS, shared)
    bits = snp.where(snp.isfinite(amax), shared + E8M0_BIAS, 255).astype(np.uint8)
    scales = bitcast_convert_type(snp.moveaxis(bits, -1, ax), dtypes.float8_e8m0fnu)
    # x / scale: a multiply by an exact power of two (2**127 at most, finite in float32)
    inverse = snp.ldexp(snp.ones((), work), -shared)
    big = float(ml_dtypes.finfo(elem).max)
    elements = snp.clip(blocks * inverse[..., None], -big, big)
    return _unblocks(elements, n, ax).astype(elem), scales


def _check_scales(op, elements, scales, axis, block_size, name=("elements", "scales")):
    if elements.dtype not in MX_ELEMENTS:
        raise TypeError(f"{op}: {name[0]} must have an MX element dtype ({_names(MX_ELEMENTS)}), "
                        f"got {elements.dtype}")
    if scales.dtype != dtypes.float8_e8m0fnu:
        raise TypeError(f"{op}: {name[1]} must have dtype float8_e8m0fnu, got {scales.dtype}")
    want = list(elements.shape)
    want[axis] = n_blocks(want[axis], block_size)
    if tuple(scales.shape) != tuple(want):
        raise ValueError(f"{op}: {name[1]} of shape {tuple(scales.shape)} do not fit "
                         f"{name[0]} of shape {tuple(elements.shape)}: blocks of {block_size} "
                         f"along axis {axis} need {name[1]} of shape {tuple(want)}")


def dequantize_mx(elements, scales, *, block_size=32, axis=-1, dtype=dtypes.float32):
    """The values of an MX array: each element times its block's scale (OCP MX v1.0).

    Args:
        elements: ``(*dims)`` array of float8_e4m3fn, float8_e5m2 or float4_e2m1fn.
        scales: float8_e8m0fnu array of ``elements``' shape with ``axis`` of length
            ``ceil(n / block_size)`` (as ``quantize_mx`` returns).
        block_size, axis: as given to ``quantize_mx``.
        dtype: result dtype (float32 default; float64, float16, bfloat16). The product is
            exact in float32 (float64 for a float64 result) and rounded once.
    Returns:
        ``(*dims)`` array of ``dtype``; a block with a NaN scale is all NaN.
    Raises:
        TypeError: wrong element / scale / result dtypes. ValueError: shapes that do not fit,
            ``block_size`` not a positive int, ``axis`` out of range.
    """
    op = "dequantize_mx"
    elements, scales = operand(elements, op), operand(scales, op)
    out = dtypes.canonicalize(dtype)
    if out not in _COMPUTE_INPUTS:
        raise TypeError(f"{op}: dtype must be float32, float64, float16 or bfloat16, got {out}")
    bs = _block_size(op, block_size)
    ax = _axis(op, axis, elements.ndim)
    _check_scales(op, elements, scales, ax, bs)
    work = dtypes.float64 if out == dtypes.float64 else dtypes.float32
    blocks = _blocks(elements.astype(work), ax, bs)
    scale = snp.moveaxis(scales, ax, -1).astype(work)
    return _unblocks(blocks * scale[..., None], elements.shape[ax], ax).astype(out)


def _tensor_or_row_scale(op, name, scale, size, row):
    """float32 scale of one operand: per tensor (one entry) or per row (``(m, 1)``) / per
    column (``(1, n)``); returned broadcastable against the ``(m, n)`` product."""
    if scale.dtype != dtypes.float32:
        raise TypeError(f"{op}: {name} must be float32 (or float8_e8m0fnu block scales), got "
                        f"{scale.dtype}")
    shape = tuple(scale.shape)
    per_row = (size, 1) if row else (1, size)
    if shape in ((), (1,), (1, 1)):
        return snp.reshape(scale, (1, 1))
    if shape == per_row:
        return scale
    raise ValueError(f"{op}: {name} of shape {shape}: expected one entry (per tensor: (), (1,) "
                     f"or (1, 1)) or {per_row} (per {'row' if row else 'column'})")


def scaled_matmul(a, b, scale_a, scale_b, out_dtype=dtypes.float32, *, bias=None,
                  block_size=32):
    """Scaled low-precision matrix product ``(a * scale_a) @ (b * scale_b) (+ bias)``
    (PyTorch ``torch._scaled_mm``; MX block scaling as in JAX ``jax.nn.scaled_matmul``).

    Two kinds of scales:

    * float32 ``scale_a`` / ``scale_b``, per tensor (one entry) or per row of ``a``
      (``(m, 1)``) / per column of ``b`` (``(1, n)``); ``a`` and ``b`` are float8_e4m3fn or
      float8_e5m2 (any mix). The float32 product is scaled: ``(acc * scale_a) * scale_b``.
    * float8_e8m0fnu MX block scales (``quantize_mx``): ``scale_a`` ``(m, ceil(k / bs))`` for
      blocks of ``a`` along k, ``scale_b`` ``(ceil(k / bs), n)`` for blocks of ``b`` along k;
      elements float8_e4m3fn, float8_e5m2 or float4_e2m1fn.

    The sum over k runs in float32 (each product of two float8 values is exact there); the
    result is rounded once to ``out_dtype``.

    Args:
        a: ``(m, k)`` low-precision array. b: ``(k, n)``.
        scale_a, scale_b: as above.
        out_dtype: float32 (default), bfloat16 or float16.
        bias: optional ``(n,)`` array (any float dtype), added in float32 before the rounding.
        block_size: entries per MX block (32); only for MX scales.
    Returns:
        ``(m, n)`` array of ``out_dtype``.
    Raises:
        TypeError: operand, scale, bias or result dtypes outside the above.
        ValueError: shapes that do not fit (the message names them).
    """
    op = "scaled_matmul"
    a, b = operand(a, op), operand(b, op)
    scale_a, scale_b = operand(scale_a, op), operand(scale_b, op)
    out = dtypes.canonicalize(out_dtype)
    if out not in _OUT_DTYPES:
        raise TypeError(f"{op}: out_dtype must be one of {_names(_OUT_DTYPES)}, got {out}")
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"{op}: expected a (m, k) and b (k, n), got a {tuple(a.shape)} and b "
                         f"{tuple(b.shape)}")
    m, n = a.shape[0], b.shape[1]
    f32 = dtypes.float32
    block = scale_a.dtype == dtypes.float8_e8m0fnu or scale_b.dtype == dtypes.float8_e8m0fnu
    if block:
        bs = _block_size(op, block_size)
        _check_scales(op, a, scale_a, 1, bs, ("a", "scale_a"))
        _check_scales(op, b, scale_b, 0, bs, ("b", "scale_b"))
        acc = snp.matmul(dequantize_mx(a, scale_a, block_size=bs, axis=1),
                         dequantize_mx(b, scale_b, block_size=bs, axis=0))
    else:
        for name, x in (("a", a), ("b", b)):
            if x.dtype not in FLOAT8:
                raise TypeError(f"{op}: {name} must be {_names(FLOAT8)} (or an MX element dtype "
                                f"with float8_e8m0fnu scales), got {x.dtype}")
        sa = _tensor_or_row_scale(op, "scale_a", scale_a, m, True)
        sb = _tensor_or_row_scale(op, "scale_b", scale_b, n, False)
        acc = snp.matmul(a.astype(f32), b.astype(f32)) * sa * sb
    if bias is not None:
        bias = operand(bias, op)
        if not dtypes.is_floating(bias.dtype):
            raise TypeError(f"{op}: bias must have a floating dtype, got {bias.dtype}")
        if tuple(bias.shape) != (n,):
            raise ValueError(f"{op}: bias must have shape (n,) = ({n},), got "
                             f"{tuple(bias.shape)}")
        acc = acc + bias.astype(f32)
    return acc.astype(out)
