"""Bit packing and counting: packbits, unpackbits, bitwise_count.

Compositions of integer shifts, masks and sums, so they stage, compile and batch like any
elementwise / reduction op (they have no derivative: their values are integers).

``bitwise_count`` is the SWAR population count (Warren, "Hacker's Delight", 2nd ed., section
5-1): bit pairs, nibbles and bytes are summed in place with masks, then one multiplication by
0x0101... adds the byte counts into the top byte (unsigned arithmetic wraps, which the method
relies on).
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ..convert import operand
from .axes import normalize_axis
from .reductions import _ns

__all__ = ["packbits", "unpackbits", "bitwise_count"]

_U8 = np.dtype(np.uint8)
_UNSIGNED_OF = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
                8: np.dtype(np.uint64)}


def _bitorder(op, bitorder):
    if bitorder not in ("big", "little"):
        raise ValueError(f"{op}: bitorder must be 'big' or 'little', got {bitorder!r}")
    shifts = np.arange(7, -1, -1) if bitorder == "big" else np.arange(8)
    return np.asarray(shifts, dtype=_U8)


def _to_last(op, x, axis):
    snp = _ns()
    if axis is None:
        return snp.ravel(x), 0, True
    axis = normalize_axis(op, axis, x.ndim)
    return snp.moveaxis(x, axis, -1), axis, False


def packbits(a, /, axis=None, bitorder="big"):
    """Packs the truth values of ``a`` into the bits of uint8 bytes (NumPy ``packbits``).

    Along ``axis`` every 8 elements become one byte (the first element is the most significant
    bit for ``bitorder="big"``, the least for "little"); a length that is not a multiple of 8 is
    padded with zeros.

    Args:
        a: bool or integer array (any nonzero value is a 1 bit).
        axis: the axis to pack along, or None for the flattened array.
        bitorder: "big" (default) or "little".
    Returns:
        uint8 array; ``axis`` has length ``ceil(n / 8)``.
    Raises:
        TypeError: a floating or complex ``a``. ValueError: bad ``bitorder``; a 0-d ``a``
        with an axis. AxisError: axis out of range.
    """
    snp = _ns()
    x = operand(a, "packbits")
    if not (dtypes.is_bool(x.dtype) or dtypes.is_integer(x.dtype)):
        raise TypeError(f"packbits: expected a bool or integer array, got dtype {x.dtype}")
    shifts = _bitorder("packbits", bitorder)
    if x.ndim == 0 and axis is not None:
        raise ValueError("packbits: a 0-d array has no axis to pack along; pass axis=None")
    x, axis, flat = _to_last("packbits", x, axis)
    n = x.shape[-1]
    bits = snp.astype(snp.not_equal(x, 0), _U8)
    pad = -n % 8
    if pad:
        bits = snp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, pad)])
    bits = snp.reshape(bits, tuple(bits.shape[:-1]) + ((n + pad) // 8, 8))
    packed = snp.sum(snp.bitwise_left_shift(bits, shifts), axis=-1, dtype=_U8)
    return packed if flat else snp.moveaxis(packed, -1, axis)


def unpackbits(a, /, axis=None, count=None, bitorder="big"):
    """Unpacks the bits of uint8 bytes into a 0 / 1 uint8 array (NumPy ``unpackbits``).

    Args:
        a: uint8 array.
        axis: the axis to unpack along (its length grows 8 times), or None for the flattened
            array.
        count: None (all ``8 * n`` bits), a non-negative int (that many bits: cut, or padded
            with zeros), or a negative int (drop that many bits from the end).
        bitorder: "big" (default: the most significant bit first) or "little".
    Returns:
        uint8 array of zeros and ones.
    Raises:
        TypeError: ``a`` is not uint8, or ``count`` is not an int. ValueError: bad
        ``bitorder``; ``count`` below ``-8 * n``; a 0-d ``a`` with an axis. AxisError: axis
        out of range.
    """
    snp = _ns()
    x = operand(a, "unpackbits")
    if x.dtype != _U8:
        raise TypeError(f"unpackbits: expected a uint8 array, got dtype {x.dtype}")
    shifts = _bitorder("unpackbits", bitorder)
    if x.ndim == 0 and axis is not None:
        raise ValueError("unpackbits: a 0-d array has no axis to unpack along; pass axis=None")
    x, axis, flat = _to_last("unpackbits", x, axis)
    n = x.shape[-1]
    bits = snp.bitwise_and(snp.bitwise_right_shift(snp.expand_dims(x, -1), shifts), 1)
    bits = snp.reshape(bits, tuple(x.shape[:-1]) + (8 * n,))
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
            raise TypeError(f"unpackbits: count must be an int or None, got {count!r}")
        count = int(count)
        keep = 8 * n + count if count < 0 else count
        if keep < 0:
            raise ValueError(f"unpackbits: count {count} removes more than the {8 * n} bits "
                             f"along the axis")
        if keep <= 8 * n:
            bits = bits[..., :keep]
        else:
            bits = snp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - 8 * n)])
    return bits if flat else snp.moveaxis(bits, -1, axis)


_SWAR = {  # width in bits -> the masks 0x55.., 0x33.., 0x0f.., 0x0101.. of that width
    w: tuple(int(m[: w // 4], 16) for m in ("5" * 16, "3" * 16, "0f" * 8, "01" * 8))
    for w in (8, 16, 32, 64)
}


def bitwise_count(x, /):
    """The number of 1 bits in the absolute value of each element (NumPy ``bitwise_count``,
    a population count; ``bitwise_count(-1) == 1``).

    Args:
        x: bool or integer array of shape ``(*shape)``.
    Returns:
        uint8 array of shape ``(*shape)``.
    Raises:
        TypeError: a floating or complex ``x``.
    """
    snp = _ns()
    x = operand(x, "bitwise_count")
    if dtypes.is_bool(x.dtype):
        return snp.astype(x, _U8)
    if not dtypes.is_integer(x.dtype):
        raise TypeError(f"bitwise_count: expected a bool or integer array, got dtype {x.dtype}")
    if dtypes.is_signed_int(x.dtype):
        x = snp.where(snp.less(x, 0), snp.negative(x), x)  # -INT_MIN wraps to the right bits
    ut = _UNSIGNED_OF[x.dtype.itemsize]
    v = snp.astype(x, ut)
    w = 8 * ut.itemsize
    m1, m2, m4, h01 = (snp.asarray(m, dtype=ut) for m in _SWAR[w])
    v = snp.subtract(v, snp.bitwise_and(snp.bitwise_right_shift(v, 1), m1))
    v = snp.add(snp.bitwise_and(v, m2), snp.bitwise_and(snp.bitwise_right_shift(v, 2), m2))
    v = snp.bitwise_and(snp.add(v, snp.bitwise_right_shift(v, 4)), m4)
    if w > 8:
        v = snp.bitwise_right_shift(snp.multiply(v, h01), w - 8)
    return snp.astype(v, _U8)
