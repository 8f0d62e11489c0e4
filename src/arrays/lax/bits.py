"""Bit-level primitives of ``starling.lax``: ``population_count``, ``bitcast_convert_type`` and
``reduce_precision``.

=====================  ===================================================================
primitive              semantics
=====================  ===================================================================
population_count       number of set bits of each integer (two's complement for signed),
                       in the operand's dtype; elementwise, with a C++ formula
bitcast_convert_type   the same bits read as another dtype; a wider source gains a
                       trailing dim of ``itemsize ratio`` entries (little-endian order), a
                       narrower one loses its last dim, which must equal the ratio
reduce_precision       each float rounded to ``exponent_bits`` / ``mantissa_bits``
                       (IEEE-like format: round to nearest even, overflow to +-inf, values
                       below the smallest normal flushed to +-0, NaN kept), returned in the
                       operand's dtype
=====================  ===================================================================

Derivatives: population_count is integer-valued (zero tangent). reduce_precision is treated as
linear (its tangent is the tangent rounded alike, and so is its transpose), as XLA-based
frameworks do, so gradients flow through mixed-precision emulation. bitcast_convert_type passes
a tangent only when the dtype does not change; otherwise the reinterpreted bits have no
meaningful derivative and the tangent is zero.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ...core import dtypes, scalar as S
from ...core.ad_util import Zero, tangent_aval
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ..ops import rules as R
from ..ops import rules_sharding as RS
from ..ops.elementwise_family import unary
from ._util import same_dtype, shape_str, static_int

__all__ = ["population_count", "bitcast_convert_type", "reduce_precision"]


# ---- population_count ---------------------------------------------------------------------------

def _popcount_impl(x):
    # NumPy counts the bits of |x| for signed integers: read the two's complement bits instead.
    x = np.asarray(x)
    bits = x.view(f"u{x.dtype.itemsize}") if x.dtype.kind == "i" else x
    return np.bitwise_count(bits).astype(x.dtype)


_population_count = unary("population_count", _popcount_impl,
                          formula=lambda x,
                          **_: S.popcount(x), domain="int_only")
population_count_p = _population_count.primitive
R.defjvp_zero(population_count_p)


def population_count(x):
    """Elementwise number of set bits.

    Args:
        x: integer array of shape ``(*shape)``; signed values count the bits of their two's
            complement (``population_count(int8(-1)) == 8``).
    Returns:
        Array of shape ``(*shape)`` and the dtype of ``x``.
    Raises:
        TypeError: a bool, floating or complex ``x``.
    """
    (x,) = same_dtype("population_count", x)
    return _population_count(x)


# ---- bitcast_convert_type -----------------------------------------------------------------------

bitcast_convert_type_p = Primitive("bitcast_convert_type", family="convert")
_NO_BITCAST = (dtypes.bool_, dtypes.float4_e2m1fn)   # no whole-byte bit pattern of their own


def _bitcast_shape(op, shape, old, new):
    a, b = old.itemsize, new.itemsize
    if a == b:
        return tuple(shape)
    if a > b:
        return tuple(shape) + (a // b,)
    if not shape or shape[-1] != b // a:
        raise ValueError(f"{op}: casting {old} to the wider {new} needs a last dim of size "
                         f"{b // a}, got shape {shape_str(shape)}")
    return tuple(shape[:-1])


def _bitcast_abstract(x, *, new_dtype):
    return ShapedArray(_bitcast_shape("lax.bitcast_convert_type", x.shape, x.dtype, new_dtype),
                       new_dtype, False)


def _bitcast_impl(x, *, new_dtype):
    x = np.ascontiguousarray(x)
    a, b = x.dtype.itemsize, new_dtype.itemsize
    if a >= b:
        out = x.reshape(x.shape + (1,)).view(new_dtype)
        return out.reshape(out.shape[:-1]) if a == b else out
    return x.view(new_dtype).reshape(x.shape[:-1])


def _bitcast_jvp(primals, tangents, *, new_dtype):
    (x,), (t,) = primals, tangents
    ans = bitcast_convert_type_p.bind(x, new_dtype=new_dtype)
    if type(t) is Zero or new_dtype != x.dtype:
        return ans, Zero(tangent_aval(ans.aval))
    return ans, t


def _bitcast_batch(args, dims, *, new_dtype):
    # Only the last dim can change: the batch axis goes first, out of its way.
    return bitcast_convert_type_p.bind(R.move_axis(args[0], dims[0], 0), new_dtype=new_dtype), 0


bitcast_convert_type_p.abstract_eval = _bitcast_abstract
bitcast_convert_type_p.impl = _bitcast_impl
bitcast_convert_type_p.weak_type = lambda w, *, new_dtype: False
bitcast_convert_type_p.jvp = _bitcast_jvp
bitcast_convert_type_p.batch = _bitcast_batch


def bitcast_convert_type(operand, new_dtype):
    """Reinterprets the bits of ``operand`` as ``new_dtype`` (no value conversion).

    Args:
        operand: array of shape ``(*shape)``; any dtype but bool and float4_e2m1fn.
        new_dtype: the dtype to read the bits as.
    Returns:
        Same itemsize: shape ``(*shape)``. A narrower ``new_dtype`` (ratio ``r`` of the
        itemsizes): shape ``(*shape, r)``, the pieces in little-endian order. A wider one:
        ``operand`` must have shape ``(*rest, r)`` and the result has shape ``(*rest)``.
    Raises:
        TypeError: bool / float4 dtypes. ValueError: the last dim does not match the ratio.
    """
    (x,) = same_dtype("bitcast_convert_type", operand)
    new_dtype = dtypes.canonicalize(new_dtype)
    for dt in (x.dtype, new_dtype):
        if dt in _NO_BITCAST:
            raise TypeError(f"lax.bitcast_convert_type: {dt} is not supported (from {x.dtype} "
                            f"to {new_dtype}); use an integer, floating or complex dtype")
    if new_dtype == x.dtype:
        return x
    _bitcast_shape("lax.bitcast_convert_type", tuple(x.shape), x.dtype, new_dtype)
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype)


# ---- reduce_precision ---------------------------------------------------------------------------

# (unsigned integer view, exponent bits, mantissa bits) of the dtypes rounded in their own bits;
# the other floats (bfloat16, float8) are exact in float32 and rounded there.
_NATIVE = {np.dtype(np.float16): (np.uint16, 5, 10), np.dtype(np.float32): (np.uint32, 8, 23),
           np.dtype(np.float64): (np.uint64, 11, 52)}


def _round_bits(x, exponent_bits, mantissa_bits):
    """``x`` (float16 / 32 / 64) rounded to the smaller format, on its integer view."""
    utype, ebits, mbits = _NATIVE[x.dtype]
    u = np.ascontiguousarray(x).view(utype).copy()
    one = utype(1)
    if mantissa_bits < mbits:
        shift = utype(mbits - mantissa_bits)
        # Round to nearest, ties to even: add half an ulp less one, plus the kept lowest bit.
        # A carry out of the mantissa moves into the exponent, which is the correct result.
        u = u + (((u >> shift) & one) + ((one << (shift - one)) - one))
        u = u & ~((one << shift) - one)
    if exponent_bits < ebits:
        sign = u & (one << utype(ebits + mbits))
        biased = ((u >> utype(mbits)) & ((one << utype(ebits)) - one)).astype(np.int64)
        e = biased - (2 ** (ebits - 1) - 1)
        emax = 2 ** (exponent_bits - 1) - 1
        inf = sign | (((one << utype(ebits)) - one) << utype(mbits))
        u = np.where(e > emax, inf, u)
        u = np.where(e < 1 - emax, sign, u)   # below the smallest normal: +-0
    out = u.view(x.dtype)
    return np.where(np.isnan(x), x, out)


def _reduce_precision_impl(x, *, exponent_bits, mantissa_bits):
    x = np.asarray(x)
    if x.dtype in _NATIVE:
        return _round_bits(x, exponent_bits, mantissa_bits)
    wide = _round_bits(x.astype(np.float32), exponent_bits, mantissa_bits)
    return wide.astype(x.dtype)


reduce_precision_p = Primitive("reduce_precision", family="elementwise")
reduce_precision_p.impl = _reduce_precision_impl
reduce_precision_p.abstract_eval = lambda x, **params: x
reduce_precision_p.weak_type = lambda w, **params: w
reduce_precision_p.meta.update(nin=1, out="same", numpy_impl=_reduce_precision_impl)
reduce_precision_p.sharding = RS.elementwise()
R.batch_unary_same_axis(reduce_precision_p)
R.deflinear(reduce_precision_p,
            lambda ct, x, **p: [Zero(x.aval) if type(ct) is Zero
                                else reduce_precision_p.bind(ct, **p)])


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """Rounds each element to a float format with ``exponent_bits`` / ``mantissa_bits``
    (emulating e.g. bfloat16 = (8, 7) or float16 = (5, 10) inside float32), keeping the dtype.

    Rounding is to nearest, ties to even; magnitudes above the format's largest finite value
    become +-inf; magnitudes below its smallest NORMAL value become +-0 (no subnormals, as
    XLA's ReducePrecision); NaN stays NaN, inf stays inf.

    Args:
        operand: floating array of shape ``(*shape)``.
        exponent_bits: static int >= 1.
        mantissa_bits: static int >= 0.
    Returns:
        Array of shape ``(*shape)`` and the dtype of ``operand``. Differentiable as a linear map
        (the tangent and cotangent are rounded alike).
    Raises:
        TypeError: a non-floating or complex operand. ValueError: bit counts out of range.
    """
    (x,) = same_dtype("reduce_precision", operand)
    e = static_int("reduce_precision", "exponent_bits", exponent_bits)
    m = static_int("reduce_precision", "mantissa_bits", mantissa_bits)
    if not dtypes.is_floating(x.dtype):
        raise TypeError(f"lax.reduce_precision: operand must have a real floating dtype, got "
                        f"{x.dtype}")
    if e < 1 or m < 0:
        raise ValueError(f"lax.reduce_precision: need exponent_bits >= 1 and mantissa_bits >= 0,"
                         f" got {e} and {m}")
    info = ml_dtypes.finfo(x.dtype)
    if e >= info.nexp and m >= info.nmant and x.dtype in _NATIVE:
        return x   # the format already fits: nothing to round
    return reduce_precision_p.bind(x, exponent_bits=e, mantissa_bits=m)
