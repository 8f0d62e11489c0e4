"""``starling.lax`` sorting: ``sort`` (one or several operands, lexicographic over
``num_keys`` keys), ``sort_key_val`` and ``top_k``.

Order: NumPy's (= JAX's): NaN after +inf, -0.0 equal to 0.0, complex by (real, imag). Sorts
are stable, with one exception: a single operand goes through the values-only ``sort``
primitive, which does not promise the relative order of -0.0 and 0.0 (JAX keeps their input
order); pass ``(x, iota)`` to make it observable and stable. One operand with one key is the ``sort`` primitive (ties share the derivative
equally); several operands are gathered along the permutation of a stable argsort of the keys
(least significant key first, each pass stable: LSD radix order), so every operand is
differentiable through the gather while the keys' order itself has no derivative.
"""
from __future__ import annotations

from ...core import dtypes
from .. import numpy as snp
from ..convert import operand as _operand
from ..ops import sorting as SO
from ..ops.convert_element_type import convert_element_type
from ._util import axis as _axis, shape_str, static_int

__all__ = ["sort", "sort_key_val", "top_k"]


def _permutation(keys, ax):
    perm = SO.argsort_p.bind(keys[-1], axis=ax, descending=False)
    for k in reversed(keys[:-1]):
        step = SO.argsort_p.bind(snp.take_along_axis(k, perm, axis=ax), axis=ax,
                                 descending=False)
        perm = snp.take_along_axis(perm, step, axis=ax)
    return perm


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sorts along ``dimension``; with several operands, sorts them all by the first
    ``num_keys`` (lexicographically) and permutes the rest alike.

    Args:
        operand: an array, or a sequence of arrays of one shape.
        dimension: static int (default -1).
        is_stable: accepted; sorts are stable (see the module docstring for -0.0 / 0.0).
        num_keys: how many leading operands are keys, ``1 <= num_keys <= len(operand)``.
    Returns:
        The sorted array, or a tuple of the permuted arrays for a sequence.
    Raises:
        ValueError: shapes differ, bad ``num_keys``, a 0-d operand.
    """
    single = not isinstance(operand, (tuple, list))
    ops = [_operand(o, "lax.sort") for o in ([operand] if single else operand)]
    if not ops:
        raise ValueError("lax.sort: needs at least one operand")
    shape = tuple(ops[0].shape)
    if any(tuple(o.shape) != shape for o in ops):
        raise ValueError("lax.sort: operands must have one shape, got "
                         f"{', '.join(shape_str(o.shape) for o in ops)}")
    if not shape:
        raise ValueError("lax.sort: operands must have at least one dimension")
    nk = static_int("sort", "num_keys", num_keys)
    if not 1 <= nk <= len(ops):
        raise ValueError(f"lax.sort: num_keys must be in 1..{len(ops)}, got {nk}")
    ax = _axis("sort", dimension, len(shape))
    if len(ops) == 1:
        out = SO.sort(ops[0], axis=ax)
        return out if single else (out,)
    perm = _permutation(ops[:nk], ax)
    return tuple(snp.take_along_axis(o, perm, axis=ax) for o in ops)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """``sort((keys, values), dimension, num_keys=1)``: returns ``(sorted keys, values in the
    keys' order)``."""
    return sort((keys, values), dimension, is_stable, 1)


def top_k(operand, k):
    """The ``k`` largest entries along the last axis, descending, and their int32 indices.

    Args:
        operand: array of shape ``(*batch, n)``, ``n >= k``; NaN counts as the largest value.
        k: static int, ``0 <= k <= n``.
    Returns:
        ``(values, indices)`` of shape ``(*batch, k)``; ties keep the lower index first. The
        values are differentiable (tied entries share the derivative); indices are int32.
    Raises:
        ValueError: 0-d operand or ``k`` out of range.
    """
    x = _operand(operand, "lax.top_k")
    values, indices = SO.top_k(x, static_int("top_k", "k", k))
    return values, convert_element_type(indices, dtypes.int32, False)
