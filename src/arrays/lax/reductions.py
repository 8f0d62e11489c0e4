"""``lax`` reductions and small constructors: ``reduce`` (any monoid, pytrees of operands),
``reduce_sum`` / ``_prod`` / ``_max`` / ``_min`` / ``_and`` / ``_or`` / ``_xor``, ``argmax`` /
``argmin``, ``dot``, ``batch_matmul``, ``full``, ``full_like``, ``zeros_like_array``,
``collapse``.

The named reductions are the ``starling.numpy`` reduction primitives (with their JVP, batch,
sharding and C++ kernels) under JAX's signatures: ``axes`` is a tuple of dims, and the dtype
is kept (no accumulation-dtype promotion, as XLA). ``reduce`` recognises ``lax.add`` / ``mul``
/ ``max`` / ``min`` (and their NumPy / ``operator`` spellings) and uses those primitives; any
other associative ``computation`` is applied as a balanced tree of pairwise combines
(``ceil(log2 n)`` rounds per reduced dim), so its depth, not its length, grows with ``n``.
"""
from __future__ import annotations

import math

from ... import tree
from ...core import dtypes
from .. import numpy as snp
from ._util import same_dtype, static_int
from .windows import _MONOIDS

__all__ = ["reduce", "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
           "reduce_or", "reduce_xor", "argmax", "argmin", "dot", "batch_matmul", "full",
           "full_like", "zeros_like_array", "collapse"]


def _axes(op, x, axes):
    axes = tuple(static_int(op, "axes", a) for a in axes)
    nd = snp.ndim(x)
    if any(not -nd <= a < nd for a in axes) or len({a % max(nd, 1) for a in axes}) != len(axes):
        raise ValueError(f"lax.{op}: axes {axes} must be distinct dims of an operand of shape "
                         f"{tuple(snp.shape(x))}")
    return tuple(sorted(a % nd for a in axes))


def _named(op, fn, what, kinds=None):
    def reducer(operand, axes):
        (x,) = same_dtype(op, operand)
        if kinds and not kinds(x.dtype):
            raise TypeError(f"lax.{op}: operand dtype {x.dtype} is not valid (integer or bool)")
        return snp.astype(fn(x, axis=_axes(op, x, axes)), x.dtype)
    reducer.__name__ = reducer.__qualname__ = op
    reducer.__doc__ = (f"{what} of ``operand`` over the dims ``axes`` (a tuple),\n    "
                       "keeping the operand's dtype (JAX's ``lax." + op + "``).\n\n    "
                       "Raises:\n        ValueError: axes out of range or repeated.\n    ")
    return reducer


def _int_or_bool(dt):
    return dtypes.is_integer(dt) or dtypes.is_bool(dt)


def _xor_reduce(x, axis):
    """Parity of the set bits along ``axis`` (a tree of pairwise xors)."""
    return _tree_fold([x], axis, lambda a, b: [snp.bitwise_xor(a[0], b[0])],
                      [snp.zeros((), x.dtype)])[0]


reduce_sum = _named("reduce_sum", snp.sum, "Sum")
reduce_prod = _named("reduce_prod", snp.prod, "Product")
reduce_max = _named("reduce_max", snp.max, "Maximum")
reduce_min = _named("reduce_min", snp.min, "Minimum")
reduce_and = _named("reduce_and", lambda x, axis: _bitwise_all(x, axis, "and"),
                    "Bitwise / logical and", _int_or_bool)
reduce_or = _named("reduce_or", lambda x, axis: _bitwise_all(x, axis, "or"),
                   "Bitwise / logical or", _int_or_bool)
reduce_xor = _named("reduce_xor", _xor_reduce, "Bitwise / logical xor", _int_or_bool)


def _bitwise_all(x, axis, kind):
    if dtypes.is_bool(x.dtype):
        return (snp.all if kind == "and" else snp.any)(x, axis=axis)
    fn = snp.bitwise_and if kind == "and" else snp.bitwise_or
    ident = -1 if kind == "and" and dtypes.is_signed_int(x.dtype) else (
        (1 << (8 * x.dtype.itemsize)) - 1 if kind == "and" else 0)
    return _tree_fold([x], axis, lambda a, b: [fn(a[0], b[0])],
                      [snp.asarray(ident, dtype=x.dtype)])[0]


def _tree_fold(xs, axes, combine, fills):
    """``xs`` (a list of arrays of one shape) reduced over ``axes`` by pairwise ``combine``
    (list, list) -> list, halving each dim per round; an odd length is padded with ``fills``
    (identities). Reduced dims are removed."""
    for ax in sorted(axes, reverse=True):
        while xs[0].shape[ax] > 1:
            n = xs[0].shape[ax]
            if n % 2:
                xs = [snp.concatenate([x, snp.broadcast_to(
                    f, x.shape[:ax] + (1,) + x.shape[ax + 1:]).astype(x.dtype)], axis=ax)
                    for x, f in zip(xs, fills)]
                n += 1
            half = n // 2
            lo = [snp.take(x, snp.arange(half), axis=ax) for x in xs]
            hi = [snp.take(x, snp.arange(half, n), axis=ax) for x in xs]
            xs = combine(lo, hi)
        if xs[0].shape[ax] == 0:
            xs = [snp.broadcast_to(f, x.shape[:ax] + (1,) + x.shape[ax + 1:]).astype(x.dtype)
                  for x, f in zip(xs, fills)]
        xs = [snp.squeeze(x, axis=ax) for x in xs]
    return xs


def reduce(operands, init_values, computation, dimensions):  # noqa: A001  (JAX's name)
    """Reduces ``operands`` over ``dimensions`` with ``computation`` (XLA Reduce).

    Args:
        operands: an array or a pytree of arrays of one shape.
        init_values: a scalar (or a matching pytree of scalars): the computation's identity.
        computation: an associative binary function on (pytrees of) arrays; ``lax.add`` /
            ``lax.mul`` / ``lax.max`` / ``lax.min`` (or NumPy's / ``operator``'s) use the
            reduction primitives directly.
        dimensions: tuple of the dims to reduce.
    Returns:
        A pytree like ``operands``, each leaf without the reduced dims.
    Raises:
        ValueError: operands of different shapes, a structure mismatch, bad dimensions.
    """
    leaves, treedef = tree.flatten(operands)
    init_leaves, init_def = tree.flatten(init_values)
    if len(init_leaves) != len(leaves):
        raise ValueError(f"lax.reduce: {len(leaves)} operands but {len(init_leaves)} init values")
    leaves = [snp.asarray(x) for x in leaves]
    if len({tuple(x.shape) for x in leaves}) > 1:
        raise ValueError(f"lax.reduce: operands must share one shape, got "
                         f"{[tuple(x.shape) for x in leaves]}")
    axes = _axes("reduce", leaves[0], dimensions)
    inits = [snp.asarray(v, dtype=x.dtype) for v, x in zip(init_leaves, leaves)]
    kind = _MONOIDS.get(computation) if len(leaves) == 1 else None
    if kind is not None:
        fn = {"add": snp.sum, "mul": snp.prod, "max": snp.max, "min": snp.min}[kind]
        out = snp.astype(fn(leaves[0], axis=axes), leaves[0].dtype)
        merge = {"add": snp.add, "mul": snp.multiply, "max": snp.maximum,
                 "min": snp.minimum}[kind]
        return tree.unflatten(treedef, [snp.astype(merge(out, inits[0]), out.dtype)])

    def combine(a, b):
        out = tree.leaves(computation(tree.unflatten(treedef, a), tree.unflatten(treedef, b)))
        if len(out) != len(a):
            raise ValueError(f"lax.reduce: computation returned {len(out)} arrays for {len(a)} "
                             "operands")
        return [snp.asarray(o) for o in out]
    folded = _tree_fold(leaves, axes, combine, inits)
    # the init value enters once (it is the identity for a proper monoid)
    folded = combine(folded, [snp.broadcast_to(v, f.shape) for v, f in zip(inits, folded)])
    return tree.unflatten(treedef, folded)


def argmax(operand, axis, index_dtype):
    """Index of the first maximum along ``axis`` as ``index_dtype`` (NaN counts as the
    maximum, as in JAX)."""
    return snp.astype(snp.argmax(operand, axis=static_int("argmax", "axis", axis)), index_dtype)


def argmin(operand, axis, index_dtype):
    """Index of the first minimum along ``axis`` as ``index_dtype`` (NaN counts as the
    minimum, as in JAX)."""
    return snp.astype(snp.argmin(operand, axis=static_int("argmin", "axis", axis)), index_dtype)


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector / matrix product of 1-d or 2-d operands (JAX's ``lax.dot``): ``(n,)`` or
    ``(m, n)`` with ``(n,)`` or ``(n, k)``; ``preferred_element_type`` sets the result dtype.

    Raises:
        TypeError: operands above 2-d (use ``dot_general``).
    """
    if snp.ndim(lhs) > 2 or snp.ndim(rhs) > 2:
        raise TypeError(f"lax.dot: operands must be 1-d or 2-d, got shapes "
                        f"{tuple(snp.shape(lhs))} and {tuple(snp.shape(rhs))}; use dot_general")
    out = snp.matmul(lhs, rhs)
    return out if preferred_element_type is None else snp.astype(out, preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
    """Batched matrix product ``(*batch, m, n) @ (*batch, n, k)`` with equal batch dims (JAX's
    ``lax.batch_matmul``).

    Raises:
        ValueError: ranks below 2 or batch dims that differ.
    """
    ls, rs = tuple(snp.shape(lhs)), tuple(snp.shape(rhs))
    if len(ls) < 2 or len(ls) != len(rs) or ls[:-2] != rs[:-2]:
        raise ValueError(f"lax.batch_matmul: operands (*batch, m, n) and (*batch, n, k) with the "
                         f"same batch dims, got shapes {ls} and {rs}")
    return snp.matmul(lhs, rhs)


def full(shape, fill_value, dtype=None):
    """A new array of ``shape`` filled with ``fill_value`` (of ``dtype``, else its own)."""
    return snp.full(tuple(shape), fill_value, dtype=dtype)


def full_like(x, fill_value, dtype=None, shape=None):
    """An array like ``x`` (its shape and dtype unless given) filled with ``fill_value``."""
    return snp.full(tuple(snp.shape(x)) if shape is None else tuple(shape), fill_value,
                    dtype=snp.asarray(x).dtype if dtype is None else dtype)


def zeros_like_array(x):
    """Zeros of ``x``'s shape and dtype."""
    return snp.zeros_like(x)


def collapse(operand, start_dimension, stop_dimension=None):
    """``operand`` with dims ``start_dimension .. stop_dimension - 1`` merged into one (to the
    last dim when ``stop_dimension`` is None).

    Raises:
        ValueError: an empty or out-of-range dimension span.
    """
    shape = tuple(snp.shape(operand))
    nd = len(shape)
    lo = static_int("collapse", "start_dimension", start_dimension) % max(nd, 1)
    hi = nd if stop_dimension is None else static_int("collapse", "stop_dimension",
                                                      stop_dimension)
    hi = hi + nd if hi < 0 else hi
    if not 0 <= lo < hi <= nd:
        raise ValueError(f"lax.collapse: dims [{start_dimension}, {stop_dimension}) of shape "
                         f"{shape} are not a non-empty span")
    return snp.reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])
