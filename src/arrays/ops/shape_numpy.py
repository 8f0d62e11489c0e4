"""NumPy's remaining shape helpers: resize, rollaxis, block.

All are compositions of reshape / tile / slicing / transpose / concatenate, so they trace,
batch and differentiate like those ops.
"""
from __future__ import annotations

import math
import operator

from ..convert import operand
from .axes import AxisError, normalize_axis
from .reductions import _ns
from .shape_lax import _shape_tuple

__all__ = ["resize", "rollaxis", "block"]


def resize(a, new_shape):
    """``a`` flattened, repeated cyclically and cut to fill ``new_shape`` (NumPy ``resize``;
    unlike ``reshape`` the size may change).

    Args:
        a: array of any shape. new_shape: an int or a tuple of non-negative ints.
    Returns:
        Array of shape ``new_shape`` and ``a``'s dtype; zeros if ``a`` is empty (NumPy).
    Raises:
        ValueError: a negative dim. TypeError: a non-integer dim.
    """
    snp = _ns()
    x = operand(a, "resize")
    shape = _shape_tuple("resize", new_shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"resize: all dims of new_shape must be non-negative, got {shape}")
    total = math.prod(shape)
    flat = snp.ravel(x)
    n = flat.shape[0]
    if n == 0 or total == 0:
        return snp.zeros(shape, dtype=x.dtype)
    reps = -(-total // n)
    if reps > 1:
        flat = snp.tile(flat, reps)
    return snp.reshape(flat[:total], shape)


def rollaxis(a, axis, start=0):
    """Moves dim ``axis`` so that it comes before the dim now at position ``start`` (NumPy
    ``rollaxis``; ``moveaxis`` is the clearer spelling).

    Args:
        a: array of ndim n. axis: an int in ``-n..n-1``. start: an int in ``-n..n``.
    Returns:
        A transposed view of ``a``.
    Raises:
        AxisError: ``axis`` or ``start`` out of range.
    """
    snp = _ns()
    x = operand(a, "rollaxis")
    n = x.ndim
    axis = normalize_axis("rollaxis", axis, n)
    # start names a position between dims, 0..n (n: after the last dim).
    start = operator.index(start)
    if start < 0:
        start += n
    if not 0 <= start <= n:
        raise AxisError(f"rollaxis: start {start - n if start < 0 else start} is out of bounds "
                        f"for array of ndim {n} (valid: {-n}..{n})", axis=start, ndim=n,
                        op="rollaxis")
    if axis < start:
        start -= 1
    if axis == start:
        return x
    return snp.moveaxis(x, axis, start)


def _block_depth(arrays, path):
    if isinstance(arrays, tuple):
        raise TypeError(f"block: arrays{path} is a tuple; only lists nest blocks (a tuple would "
                        "be ambiguous with an array)")
    if not isinstance(arrays, list):
        return 0, operand(arrays, "block").ndim
    if not arrays:
        raise ValueError(f"block: arrays{path} is an empty list; lists must not be empty")
    results = [_block_depth(a, f"{path}[{i}]") for i, a in enumerate(arrays)]
    depths = {d for d, _ in results}
    if len(depths) != 1:
        raise ValueError(f"block: list depths are mismatched under arrays{path}: got depths "
                         f"{[d for d, _ in results]}; every entry of a list must nest equally")
    return 1 + results[0][0], max(nd for _, nd in results)


def _block_assemble(arrays, depth, ndim):
    snp = _ns()
    if not isinstance(arrays, list):
        x = operand(arrays, "block")
        return snp.reshape(x, (1,) * (ndim - x.ndim) + tuple(x.shape))
    parts = [_block_assemble(a, depth - 1, ndim) for a in arrays]
    return snp.concatenate(parts, axis=-depth)


def block(arrays):
    """An array assembled from nested lists of blocks (NumPy ``block``): the innermost lists
    are joined along the last axis, the next level along the second-to-last, and so on.

    Every block is first raised to ``ndim = max(list depth, largest block ndim)`` by leading
    size-1 dims. Dtypes promote as in ``concatenate``.

    Args:
        arrays: an array / scalar, or nested lists of them, all nested to the same depth.
    Returns:
        Array of ndim ``max(depth, largest block ndim)``.
    Raises:
        ValueError: an empty list, mismatched nesting depths, or block shapes that do not
            fit together. TypeError: a tuple in the nesting.
    """
    depth, nd = _block_depth(arrays, "")
    if depth == 0:
        return _ns().asarray(arrays)
    return _block_assemble(arrays, depth, max(depth, nd))
