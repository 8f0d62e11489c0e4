"""Structural ``lax`` ops with JAX's argument conventions, over the shape primitives of
src/arrays/ops/shape_lax.py: ``pad`` (scalar padding values, negative and interior padding),
``broadcast_in_dim``, ``broadcast``, ``squeeze`` / ``expand_dims`` (negative dims),
``rev``, ``reshape`` (with ``dimensions``), ``transpose``, ``concatenate``, ``iota`` and
``broadcasted_iota``. Operands may be any array-like; the primitives' own rules (linear
transposes, batching, sharding) apply unchanged.
"""
from __future__ import annotations

from ...core import dtypes
from ..convert import operand as _operand
from ..ops import shape_lax as SL
from ._util import dims_list, is_python_scalar, scalar_like, shape_str, static_int, static_ints

__all__ = ["pad", "broadcast_in_dim", "broadcast", "squeeze", "expand_dims", "rev", "reshape",
           "transpose", "concatenate", "iota", "broadcasted_iota"]


def pad(operand, padding_value, padding_config):
    """Pads ``operand`` with ``padding_value``: per dim ``(lo, hi, interior)``.

    Args:
        operand: array of shape ``(d0, ..., dn-1)``.
        padding_value: 0-d array of the operand's dtype, or a Python scalar (taking it).
        padding_config: one ``(lo, hi, interior)`` of static ints per dim; ``lo`` / ``hi`` may be
            negative (they crop that edge), ``interior >= 0`` elements go between neighbours.
    Returns:
        Array of shape ``(lo + hi + d + max(d - 1, 0) * interior, ...)``. Linear in
        ``(operand, padding_value)``.
    Raises:
        TypeError: a padding value of another dtype or not 0-d. ValueError: a bad config.
    """
    x = _operand(operand, "lax.pad")
    if is_python_scalar(padding_value):
        v = scalar_like("pad", padding_value, x.dtype, weak=x.weak_type)
    else:
        v = _operand(padding_value, "lax.pad")
    if v.shape != () or v.dtype != x.dtype:
        raise TypeError(f"lax.pad: padding_value must be 0-d with the operand's dtype {x.dtype}, "
                        f"got {v.dtype}{list(v.shape)}")
    config = tuple(static_ints("pad", "padding_config entry", c, 3) for c in padding_config)
    return SL.pad(x, v, config)


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """Broadcasts ``operand`` to ``shape``: operand dim i becomes output dim
    ``broadcast_dimensions[i]`` (strictly increasing; its size 1 or the target size).

    Raises:
        ValueError: dims out of range, not increasing, or sizes that do not broadcast.
    """
    x = _operand(operand, "lax.broadcast_in_dim")
    shape = static_ints("broadcast_in_dim", "shape", shape)
    dims = static_ints("broadcast_in_dim", "broadcast_dimensions", broadcast_dimensions, x.ndim)
    SL._bid_check(tuple(x.shape), shape, dims)
    return SL.broadcast_in_dim(x, shape, dims)


def broadcast(operand, sizes):
    """Adds leading dims: the result has shape ``(*sizes, *operand.shape)``."""
    x = _operand(operand, "lax.broadcast")
    sizes = static_ints("broadcast", "sizes", sizes)
    n = len(sizes)
    return SL.broadcast_in_dim(x, sizes + tuple(x.shape), tuple(range(n, n + x.ndim)))


def squeeze(array, dimensions):
    """Removes the size-1 dims ``dimensions`` (negative counted from the end).

    Raises:
        ValueError: a dim out of range or of size other than 1.
    """
    x = _operand(array, "lax.squeeze")
    dims = dims_list("squeeze", "dimensions", dimensions, x.ndim, allow_negative=True)
    for d in dims:
        if x.shape[d] != 1:
            raise ValueError(f"lax.squeeze: dimension {d} of shape {shape_str(x.shape)} has size "
                             f"{x.shape[d]}, not 1")
    return SL.squeeze(x, tuple(sorted(dims)))


def expand_dims(array, dimensions):
    """Inserts size-1 dims at positions ``dimensions`` of the result (negative counted from the
    end of the result)."""
    x = _operand(array, "lax.expand_dims")
    dims = dims_list("expand_dims", "dimensions", dimensions, x.ndim + len(dimensions),
                     allow_negative=True)
    return SL.expand_dims(x, dims)


def rev(operand, dimensions):
    """Reverses ``operand`` along ``dimensions`` (distinct, in ``0..ndim-1``)."""
    x = _operand(operand, "lax.rev")
    return SL.rev(x, dims_list("rev", "dimensions", dimensions, x.ndim))


def reshape(operand, new_sizes, dimensions=None):
    """Row-major reshape to ``new_sizes``; ``dimensions`` (a permutation) transposes the operand
    first, as in JAX."""
    x = _operand(operand, "lax.reshape")
    if dimensions is not None:
        x = transpose(x, dimensions)
    return SL.reshape(x, static_ints("reshape", "new_sizes", new_sizes))


def transpose(operand, permutation):
    """Permutes the dims: output dim i is operand dim ``permutation[i]``."""
    x = _operand(operand, "lax.transpose")
    perm = dims_list("transpose", "permutation", permutation, x.ndim)
    if len(perm) != x.ndim:
        raise ValueError(f"lax.transpose: permutation {perm} must list each of the {x.ndim} "
                         "dims once")
    return SL.transpose(x, perm)


def concatenate(operands, dimension):
    """Joins arrays of one dtype and rank along ``dimension`` (a static int)."""
    xs = [_operand(o, "lax.concatenate") for o in operands]
    if not xs:
        raise ValueError("lax.concatenate: needs at least one operand")
    return SL.concatenate(xs, static_int("concatenate", "dimension", dimension))


def iota(dtype, size):
    """``[0, 1, ..., size - 1]`` of ``dtype``."""
    return SL.iota(dtypes.canonicalize(dtype), (static_int("iota", "size", size),), 0)


def broadcasted_iota(dtype, shape, dimension):
    """An array of ``shape`` whose value is the index along ``dimension``."""
    shape = static_ints("broadcasted_iota", "shape", shape)
    d = dims_list("broadcasted_iota", "dimension", (dimension,), len(shape))[0]
    return SL.iota(dtypes.canonicalize(dtype), shape, d)
