"""Shape manipulation: reshape, transposes, squeeze / expand_dims, broadcasting, flips, rolls,
tile / repeat (joining and splitting live in shape_join.py, re-exported here).

Every function is a composition of the primitives of shape_lax.py (reshape, broadcast_in_dim,
transpose, squeeze, rev, concatenate, pad, slice, iota), so it works on tracers as on arrays.
Shapes, axes, shifts and repeat counts are static (Python ints); the data-movement ops keep the
dtype and weak type of their input.

Module-level helpers for other families (not in the user namespace): ``static_slice``,
``slice_in_dim``, ``rev``, ``broadcast_in_dim``, ``lax_reshape``, ``lax_squeeze``,
``lax_expand_dims``, ``lax_transpose``, ``lax_concatenate``, ``lax_pad``, ``iota``.
"""
from __future__ import annotations

import math

import numpy as np

from ...core.trace import EVAL_TRACE, ConcretizationError, Tracer, current_trace
from ..array import Array, wrap
from ..convert import operand
from ..device import check_device, places_result
from .elementwise_family import broadcast_shapes as _broadcast_shapes
from .shape_lax import (  # noqa: F401  (module-level helpers for other families)
    AxisError, _shape_tuple, _static_ints, broadcast_buf, broadcast_in_dim, iota, normalize_axes,
    normalize_axis, rev, slice_in_dim, static_slice,
)
from .shape_lax import concatenate as lax_concatenate  # noqa: F401
from .shape_lax import expand_dims as lax_expand_dims  # noqa: F401
from .shape_lax import pad as lax_pad  # noqa: F401
from .shape_lax import reshape as lax_reshape
from .shape_lax import reshape_p
from .shape_lax import squeeze as lax_squeeze
from .shape_lax import transpose as lax_transpose

__all__ = [
    "reshape", "ravel", "permute_dims", "transpose", "matrix_transpose", "swapaxes", "moveaxis",
    "squeeze", "expand_dims", "broadcast_to", "broadcast_arrays", "broadcast_shapes",
    "atleast_1d", "atleast_2d", "atleast_3d", "flip", "fliplr", "flipud", "rot90", "roll",
    "tile", "repeat", "copy", "_T", "_mT",
]


# Eager fast paths: for a concrete Array under the eval trace, the common calls hand their
# arguments straight to NumPy (whose C checks accept exactly the same valid inputs: ints, NumPy
# integers, -1 in reshape, negative axes; never bools) and wrap the result. Anything NumPy
# rejects falls through to the checked path, which raises the error that names the op.


# ---- reshape / ravel -------------------------------------------------------------------------

def _infer_shape(op, in_shape, shape):
    size = math.prod(in_shape)
    if -1 in shape:
        if shape.count(-1) > 1:
            raise ValueError(f"{op}: can only specify one unknown dimension (-1), got {shape}")
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or size % known:
            raise ValueError(f"{op}: cannot reshape array of shape {tuple(in_shape)} (size {size}) "
                             f"into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    elif math.prod(shape) != size:
        raise ValueError(f"{op}: cannot reshape array of shape {tuple(in_shape)} (size {size}) "
                         f"into shape {shape}")
    return shape


def reshape(x, /, shape, order="C", *, copy=None):
    """Gives ``x`` a new shape with the same elements (Array API / NumPy ``reshape``).

    Args:
        x: array of shape ``(*dims)``.
        shape: int or tuple of ints with product ``prod(dims)``; one entry may be -1 (inferred).
        order: "C" (row-major, default) or "F" (column-major: implemented with transposes);
            "A" is "C" (Starling arrays have no memory layout of their own).
        copy: accepted for the Array API; buffers are immutable, so it never matters.
    Returns:
        Array of shape ``shape``, same dtype and weak type; ``x`` itself if the shape is unchanged.
    Raises:
        ValueError: the sizes differ ("reshape: cannot reshape array of shape (2, 3) (size 6)
            into shape (4,)"), more than one -1, other negative entries, or a bad ``order``.
        TypeError: non-integer shape entries.
    """
    if type(x) is Array and (order == "C" or order == "A") and current_trace() is EVAL_TRACE:
        t = type(shape)
        if t is tuple or t is int:
            buf = x._buf
            try:
                out = buf.reshape(shape)
                # NumPy reads any negative entry as the unknown dim; only -1 is valid here
                if t is int:
                    ok = shape >= -1
                elif out.shape == shape:
                    ok = True
                else:
                    ok = shape[0] >= -1 if len(shape) == 1 else min(shape) >= -1
            except Exception:  # noqa: BLE001  (the checked path below raises our error)
                ok = False
            if ok:
                return x if out.shape == buf.shape else wrap(out, x._weak)
    if type(x) is not Array and not isinstance(x, Tracer):
        x = operand(x, "reshape")
    new = _shape_tuple("reshape", shape, allow_minus_one=True)
    in_shape = x.shape
    if new != in_shape:
        new = _infer_shape("reshape", in_shape, new)
    if order == "C" or order == "A":
        if new == in_shape:
            return x
        if type(x) is Array and current_trace() is EVAL_TRACE:
            return wrap(x._buf.reshape(new), x._weak)
        return reshape_p.bind(x, new_sizes=new)
    if order == "F":
        rev_in = tuple(range(len(in_shape)))[::-1]
        y = lax_reshape(lax_transpose(x, rev_in), new[::-1])
        return lax_transpose(y, tuple(range(len(new)))[::-1])
    raise ValueError(f"reshape: order must be 'C', 'F' or 'A', got {order!r}")


def ravel(x, /, order="C"):
    """The elements of ``x`` as a 1-D array of shape ``(size,)`` (``order`` "C", "F", "A", "K";
    "A" and "K" read as "C")."""
    if order == "K":
        order = "C"
    if type(x) is Array and (order == "C" or order == "A") and current_trace() is EVAL_TRACE:
        buf = x._buf
        out = buf.reshape(-1)
        return x if out.shape == buf.shape else wrap(out, x._weak)
    if type(x) is not Array and not isinstance(x, Tracer):
        x = operand(x, "ravel")
    return reshape(x, (-1,), order)


# ---- transposes ----------------------------------------------------------------------------

def permute_dims(x, /, axes):
    """Permutes the dims of ``x`` (Array API ``permute_dims``).

    Args:
        x: array of shape ``(d0, ..., dn-1)``.
        axes: a permutation of ``0..n-1`` (negative entries allowed); output dim i is input
            dim ``axes[i]``.
    Returns:
        Array of shape ``(d[axes[0]], ..., d[axes[n-1]])``.
    Raises:
        ValueError: ``axes`` is not a permutation of the dims (wrong length, repeats).
        AxisError: an entry is out of range.
    """
    if type(x) is Array and type(axes) is tuple and current_trace() is EVAL_TRACE:
        out = _eager_transpose(x, axes)
        if out is not None:
            return out
    return _permute("permute_dims", operand(x, "permute_dims"), axes)


def _permute(op, x, axes):
    ndim = len(x.shape)
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    axes = tuple(axes)
    if sorted(axes) == list(range(ndim)) and all(type(a) is int for a in axes):
        return lax_transpose(x, axes)  # already a normalized permutation
    if len(axes) != ndim:
        raise ValueError(f"{op}: axes {axes} is not a permutation of the {ndim} dims of "
                         f"an array of shape {tuple(x.shape)}")
    perm = normalize_axes(op, axes, ndim)
    return lax_transpose(x, perm)


def _eager_transpose(x, axes):
    """NumPy's transpose of a concrete Array's buffer, or None if NumPy rejects ``axes``."""
    buf = x._buf
    if len(axes) != buf.ndim:
        return None
    try:
        out = buf.transpose(axes)
    except Exception:  # noqa: BLE001
        return None
    # Same shape and strides: an identity permutation (up to equal size-1 dims): x itself.
    if out.strides == buf.strides and out.shape == buf.shape:
        return x
    return wrap(out, x._weak)


def _T(x):
    """``x.T``: the dims reversed (a 0-d or 1-d array is returned as is)."""
    if type(x) is Array and current_trace() is EVAL_TRACE:
        buf = x._buf
        return x if buf.ndim < 2 else wrap(buf.T, x._weak)
    x = operand(x, "T")
    return lax_transpose(x, tuple(range(x.ndim))[::-1])


def _mT(x):
    """``x.mT``: ``matrix_transpose(x)``."""
    if type(x) is Array and current_trace() is EVAL_TRACE and x._buf.ndim >= 2:
        return wrap(x._buf.swapaxes(-1, -2), x._weak)
    return matrix_transpose(x)


def transpose(a, axes=None):
    """NumPy ``transpose``: reverses the dims (``axes=None``) or permutes them like
    ``permute_dims``. Shape ``(d0, ..., dn-1) -> (dn-1, ..., d0)`` by default."""
    if type(a) is Array and current_trace() is EVAL_TRACE:
        if axes is None:
            buf = a._buf
            return a if buf.ndim < 2 else wrap(buf.T, a._weak)
        if type(axes) is tuple:
            out = _eager_transpose(a, axes)
            if out is not None:
                return out
    a = operand(a, "transpose")
    if axes is None:
        return lax_transpose(a, tuple(range(a.ndim))[::-1])
    return _permute("transpose", a, axes)


def matrix_transpose(x, /):
    """Swaps the last two dims: ``(*batch, m, n) -> (*batch, n, m)`` (Array API; ``x.mT``).

    Raises:
        ValueError: ``x`` has fewer than 2 dims.
    """
    if type(x) is Array and current_trace() is EVAL_TRACE and x._buf.ndim >= 2:
        return wrap(x._buf.swapaxes(-1, -2), x._weak)
    x = operand(x, "matrix_transpose")
    n = x.ndim
    if n < 2:
        raise ValueError(f"matrix_transpose: expected an array of ndim >= 2 (shape "
                         f"(*batch, m, n)), got shape {tuple(x.shape)}")
    return lax_transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def swapaxes(x, /, axis1, axis2):
    """Exchanges dims ``axis1`` and ``axis2`` (negative allowed) of ``x``.

    Raises:
        AxisError: an axis is out of range.
    """
    x = operand(x, "swapaxes")
    n = x.ndim
    a1 = normalize_axis("swapaxes", axis1, n, name="axis1")
    a2 = normalize_axis("swapaxes", axis2, n, name="axis2")
    perm = list(range(n))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    return lax_transpose(x, tuple(perm))


def moveaxis(x, /, source, destination):
    """Moves dims ``source`` (int or ints) to positions ``destination``; the others keep order.

    Raises:
        ValueError: ``source`` and ``destination`` differ in length or repeat an axis.
        AxisError: an axis is out of range.
    """
    x = operand(x, "moveaxis")
    n = x.ndim
    src = normalize_axes("moveaxis", source, n, name="source")
    dst = normalize_axes("moveaxis", destination, n, name="destination")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must have "
                         "the same number of elements")
    order = [i for i in range(n) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax_transpose(x, tuple(order))


# ---- squeeze / expand_dims -----------------------------------------------------------------

def squeeze(x, /, axis=None):
    """Removes size-1 dims: all of them (``axis=None``) or the given ones.

    Args:
        x: array of shape ``(*dims)``.
        axis: None, an int or a tuple of ints (negative allowed) naming size-1 dims.
    Returns:
        Array without those dims (same dtype).
    Raises:
        ValueError: a named dim does not have size 1. AxisError: an axis is out of range.
    """
    if type(x) is Array and (axis is None or type(axis) is int) and \
            current_trace() is EVAL_TRACE:
        buf = x._buf
        try:
            out = buf.squeeze(axis)
        except Exception:  # noqa: BLE001  (the checked path raises our error)
            pass
        else:
            return x if out.ndim == buf.ndim else wrap(out, x._weak)
    x = operand(x, "squeeze")
    shape = x.shape
    if axis is None:
        dims = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        dims = normalize_axes("squeeze", axis, len(shape))
        for d in dims:
            if shape[d] != 1:
                raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size "
                                 f"not equal to one: axis {d} of shape {tuple(shape)} has size "
                                 f"{shape[d]}")
    return lax_squeeze(x, dims)


def expand_dims(x, /, axis=0):
    """Inserts size-1 dims at positions ``axis`` of the result (int or tuple of ints).

    The output has ``ndim + len(axis)`` dims; negative axes count from the end of the output.
    Raises:
        AxisError: an axis is outside ``-(ndim+k)..ndim+k-1``. ValueError: repeated axes.
    """
    if type(x) is Array and type(axis) is int and current_trace() is EVAL_TRACE:
        buf = x._buf
        n = buf.ndim + 1
        if -n <= axis < n:
            a = axis % n
            shape = buf.shape
            return wrap(buf.reshape(shape[:a] + (1,) + shape[a:]), x._weak)
    x = operand(x, "expand_dims")
    k = len(axis) if isinstance(axis, (tuple, list)) else 1
    dims = normalize_axes("expand_dims", axis, x.ndim + k)
    return lax_expand_dims(x, dims)


# ---- broadcasting --------------------------------------------------------------------------

def broadcast_shapes(*shapes):
    """The NumPy broadcast of shapes (ints or tuples of ints), as a tuple.

    Raises:
        ValueError: the shapes do not broadcast (all are listed in the message).
    """
    shapes = [_shape_tuple("broadcast_shapes", s) for s in shapes]
    return _broadcast_shapes("broadcast_shapes", *shapes)


def broadcast_to(x, /, shape):
    """Broadcasts ``x`` to ``shape`` with NumPy rules (align trailing dims; size-1 dims stretch).

    Args:
        x: array of shape ``(*dims)``, ``len(dims) <= len(shape)``.
        shape: the target shape.
    Returns:
        Array of shape ``shape``, same dtype and weak type.
    Raises:
        ValueError: ``x`` does not broadcast to ``shape`` (both named), or a negative entry.
    """
    if type(x) is Array and type(shape) is tuple and current_trace() is EVAL_TRACE:
        buf = x._buf
        if shape == buf.shape and all(type(d) is int for d in shape):
            return x
        out = broadcast_buf(buf, shape)
        if out is not None:
            return wrap(out, x._weak)
    x = operand(x, "broadcast_to")
    shape = _shape_tuple("broadcast_to", shape)
    xs = x.shape
    lead = len(shape) - len(xs)
    if lead < 0 or any(d != 1 and d != shape[lead + i] for i, d in enumerate(xs)):
        raise ValueError(f"broadcast_to: cannot broadcast an array of shape {tuple(xs)} to shape "
                         f"{shape} (trailing dims must match or be 1)")
    return broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def broadcast_arrays(*arrays):
    """Broadcasts the arrays against each other; returns a list (Array API) of arrays of the
    common shape, each keeping its dtype.

    Raises:
        ValueError: the shapes do not broadcast.
    """
    arrays = [operand(a, "broadcast_arrays") for a in arrays]
    shape = _broadcast_shapes("broadcast_arrays", *[a.shape for a in arrays])
    return [broadcast_in_dim(a, shape, tuple(range(len(shape) - a.ndim, len(shape))))
            for a in arrays]


def _atleast(op, n, arys):
    out = []
    for a in arys:
        a = operand(a, op)
        s = a.shape
        if len(s) < n:
            if n == 3 and len(s) == 1:
                new = (1, s[0], 1)      # NumPy: (N,) -> (1, N, 1)
            elif n == 3 and len(s) == 2:
                new = s + (1,)          # (M, N) -> (M, N, 1)
            else:
                new = (1,) * (n - len(s)) + tuple(s)
            a = lax_reshape(a, new)
        out.append(a)
    return out[0] if len(out) == 1 else tuple(out)


def atleast_1d(*arys):
    """Each input with at least 1 dim (0-d -> (1,)). One input gives an array, several a tuple."""
    return _atleast("atleast_1d", 1, arys)


def atleast_2d(*arys):
    """Each input with at least 2 dims: () -> (1, 1), (N,) -> (1, N)."""
    return _atleast("atleast_2d", 2, arys)


def atleast_3d(*arys):
    """Each input with at least 3 dims: () -> (1, 1, 1), (N,) -> (1, N, 1), (M, N) -> (M, N, 1)."""
    return _atleast("atleast_3d", 3, arys)


# ---- flips, rotations, rolls ------------------------------------------------------------

def flip(x, /, axis=None):
    """Reverses the order of elements along ``axis`` (None: all axes; int or tuple of ints).

    Raises:
        AxisError: an axis is out of range.
    """
    x = operand(x, "flip")
    return rev(x, normalize_axes("flip", axis, x.ndim))


def fliplr(m, /):
    """Reverses dim 1 (left/right). Raises ValueError for arrays of fewer than 2 dims."""
    m = operand(m, "fliplr")
    if m.ndim < 2:
        raise ValueError(f"fliplr: expected an array of ndim >= 2, got shape {tuple(m.shape)}")
    return rev(m, (1,))


def flipud(m, /):
    """Reverses dim 0 (up/down). Raises ValueError for 0-d arrays."""
    m = operand(m, "flipud")
    if m.ndim < 1:
        raise ValueError("flipud: expected an array of ndim >= 1, got a 0-d array")
    return rev(m, (0,))


def rot90(m, /, k=1, axes=(0, 1)):
    """Rotates by 90 degrees ``k`` times in the plane ``axes`` (from the first axis towards the
    second), as NumPy's ``rot90``.

    Raises:
        ValueError: ``axes`` does not name two different axes. AxisError: out of range.
    """
    m = operand(m, "rot90")
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError(f"rot90: axes must name exactly 2 axes, got {axes}")
    a0, a1 = normalize_axes("rot90", axes, m.ndim)
    k = k % 4
    if k == 0:
        return m
    if k == 2:
        return rev(m, tuple(sorted((a0, a1))))
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return lax_transpose(rev(m, (a1,)), tuple(perm))
    return rev(lax_transpose(m, tuple(perm)), (a1,))


def _roll_axis(x, shift, axis):
    n = x.shape[axis]
    if n == 0:
        return x
    s = shift % n
    if s == 0:
        return x
    return lax_concatenate([slice_in_dim(x, n - s, n, 1, axis),
                            slice_in_dim(x, 0, n - s, 1, axis)], axis)


def roll(x, /, shift, axis=None):
    """Rolls elements along axes: element ``i`` moves to ``(i + shift) % n``.

    Args:
        x: array of shape ``(*dims)``.
        shift: int or tuple of ints (static); with a tuple, ``axis`` must be a tuple of the same
            length (or ``shift`` broadcasts against ``axis``).
        axis: None (roll the flattened array, then restore the shape), an int or a tuple.
    Raises:
        ValueError: ``shift`` and ``axis`` lengths differ. AxisError: axis out of range.
        ConcretizationError: ``shift`` is a traced value.
    """
    x = operand(x, "roll")
    shift = _static_ints("roll", "shift", shift)
    if axis is None:
        if isinstance(shift, list):
            if len(shift) != 1:
                raise ValueError(f"roll: with axis=None, shift must be one int, got {shift}")
            shift = shift[0]
        flat = reshape(x, (-1,))
        return reshape(_roll_axis(flat, shift, 0), x.shape)
    axes = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    shifts = shift if isinstance(shift, list) else [shift]
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    if len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift {shift} and axis {axis} must have the same length")
    totals = {}
    for s, a in zip(shifts, axes):
        a = normalize_axis("roll", a, x.ndim)
        totals[a] = totals.get(a, 0) + s
    for a, s in totals.items():
        x = _roll_axis(x, s, a)
    return x


# ---- tile / repeat -----------------------------------------------------------------------

def tile(x, /, reps):
    """Repeats the whole of ``x`` ``reps[i]`` times along dim i (NumPy ``tile``).

    ``reps`` shorter than ``x.ndim`` is padded with leading 1s; longer prepends size-1 dims to
    ``x``. Output shape ``(d0 * r0, d1 * r1, ...)``.
    Raises:
        ValueError: a negative repetition count.
    """
    x = operand(x, "tile")
    reps = _static_ints("tile", "reps", reps)
    reps = tuple(reps) if isinstance(reps, list) else (reps,)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repetition counts must be non-negative, got {reps}")
    n = max(len(reps), x.ndim)
    reps = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - x.ndim) + tuple(x.shape)
    if all(r == 1 for r in reps):
        return lax_reshape(x, shape)
    inter = []
    for r, d in zip(reps, shape):
        inter += [r, d]
    # x's dim j is shape dim n - k + j: the size-d (odd) slot of that (r, d) pair.
    k = x.ndim
    y = broadcast_in_dim(x, tuple(inter), tuple(2 * (n - k + j) + 1 for j in range(k)))
    return lax_reshape(y, tuple(r * d for r, d in zip(reps, shape)))


def repeat(x, /, repeats, axis=None, *, total_repeat_length=None):
    """Repeats each element of ``x`` (NumPy / Array API ``repeat``, JAX's
    ``total_repeat_length``).

    Args:
        x: array; flattened first when ``axis`` is None.
        repeats: an int (every element the same number of times) or a sequence / concrete
            integer array with one count per element along ``axis`` (broadcast from length 1).
            With ``total_repeat_length`` it may also be a traced integer array.
        axis: the axis to repeat along, or None.
        total_repeat_length: a static int fixing the output length along ``axis`` (as JAX):
            the repeated sequence is cut to that length, or extended by repeating the last
            element of ``x`` along ``axis``. The output shape then no longer depends on the
            counts, so ``repeats`` can be traced (under ``compile`` / ``vmap`` / ``grad``);
            negative traced counts are not checked and give unspecified results.
    Returns:
        Array whose ``axis`` has size ``sum(repeats)`` (or ``n * repeats``), or
        ``total_repeat_length``.
    Raises:
        ValueError: negative counts or total length, a count sequence of the wrong length, or a
            positive ``total_repeat_length`` for an empty axis.
        TypeError: traced ``repeats`` of a non-integer dtype.
        ConcretizationError: ``repeats`` is a traced array and ``total_repeat_length`` is None
            (the output shape would depend on data; pass Python ints).
    """
    x = operand(x, "repeat")
    if total_repeat_length is not None:
        return _repeat_total(x, repeats, axis, total_repeat_length)
    repeats = _static_ints("repeat", "repeats", repeats)
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    else:
        axis = normalize_axis("repeat", axis, x.ndim)
    n = x.shape[axis]
    if isinstance(repeats, list):
        if any(isinstance(r, list) for r in repeats):
            raise ValueError(f"repeat: repeats must be an int or a 1-D sequence, got {repeats}")
        if len(repeats) == 1:
            repeats = repeats[0]
        elif len(repeats) != n:
            raise ValueError(f"repeat: got {len(repeats)} repeat counts for axis {axis} of size "
                             f"{n}; need 1 or {n}")
    if isinstance(repeats, list):
        if any(r < 0 for r in repeats):
            raise ValueError(f"repeat: repeat counts must be non-negative, got {repeats}")
        if len(set(repeats)) > 1:
            return _repeat_uneven(x, repeats, axis)
        repeats = repeats[0] if repeats else 0
    if repeats < 0:
        raise ValueError(f"repeat: repeat count must be non-negative, got {repeats}")
    shape = tuple(x.shape)
    inter = shape[:axis + 1] + (repeats,) + shape[axis + 1:]
    dims = tuple(range(axis + 1)) + tuple(range(axis + 2, len(inter)))
    y = broadcast_in_dim(x, inter, dims)
    return lax_reshape(y, shape[:axis] + (n * repeats,) + shape[axis + 1:])


def _concrete_repeats(repeats):
    """``repeats`` as static ints, or None when it is a traced (abstract) value."""
    if isinstance(repeats, Tracer):
        try:
            repeats = repeats.to_concrete()
        except ConcretizationError:
            return None
    return _static_ints("repeat", "repeats", repeats)


def _repeat_total(x, repeats, axis, total):
    total = _static_ints("repeat", "total_repeat_length", total)
    if isinstance(total, list) or total < 0:
        raise ValueError(f"repeat: total_repeat_length must be a non-negative int, got {total}")
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    else:
        axis = normalize_axis("repeat", axis, x.ndim)
    n = x.shape[axis]
    if total == 0:
        return slice_in_dim(x, 0, 0, 1, axis)
    if n == 0:
        raise ValueError(f"repeat: total_repeat_length={total} needs at least one element along "
                         f"axis {axis}, got shape {tuple(x.shape)}")
    static = _concrete_repeats(repeats)
    if static is not None:
        y = repeat(x, static, axis=axis)
        m = y.shape[axis]
        if m >= total:
            return slice_in_dim(y, 0, total, 1, axis)
        last = slice_in_dim(x, n - 1, n, 1, axis)
        shape = list(x.shape)
        shape[axis] = total - m
        fill = broadcast_in_dim(last, tuple(shape), tuple(range(x.ndim)))
        return lax_concatenate([y, fill], axis)
    return _repeat_traced(x, repeats, axis, n, total)


def _repeat_traced(x, repeats, axis, n, total):
    # Output position j reads the element whose block of repeats covers j: the number of
    # inclusive cumulative counts <= j (clipped to the last element, which fills any excess).
    from .. import numpy as snp  # cumsum / searchsorted / take live in other families
    r = operand(repeats, "repeat")
    if not (r.dtype.kind in "iu"):
        raise TypeError(f"repeat: repeats must be integers, got dtype {r.dtype}")
    if r.ndim > 1 or (r.ndim == 1 and r.shape[0] not in (1, n)):
        raise ValueError(f"repeat: repeats of shape {tuple(r.shape)} do not match axis {axis} "
                         f"of size {n}; need a scalar or shape (1,) or ({n},)")
    if tuple(r.shape) != (n,):
        r = broadcast_in_dim(r, (n,), () if r.ndim == 0 else (0,))
    ends = snp.cumsum(r)
    pos = iota(ends.dtype, (total,), 0)
    idx = snp.minimum(snp.searchsorted(ends, pos, side="right"), n - 1)
    return snp.take(x, idx, axis=axis, indices_are_sorted=True)


_MAX_RUNS = 16


def _repeat_uneven(x, repeats, axis):
    # Runs of equal counts are repeated together: one slice + broadcast + reshape per run. With
    # many runs, a gather with the (static) source indices is cheaper than that many pieces.
    n = len(repeats)
    runs = 1 + sum(1 for a, b in zip(repeats, repeats[1:]) if a != b)
    if runs > _MAX_RUNS:
        from . import indexing
        take = getattr(indexing, "take", None)
        if take is not None:
            idx = np.repeat(np.arange(n, dtype=np.int64), repeats)  # static indices only
            return take(x, wrap(idx, False), axis=axis, indices_are_sorted=True,
                        unique_indices=False)
    pieces = []
    i = 0
    while i < n:
        j = i
        while j + 1 < n and repeats[j + 1] == repeats[i]:
            j += 1
        if repeats[i]:
            part = slice_in_dim(x, i, j + 1, 1, axis)
            pieces.append(repeat(part, repeats[i], axis=axis))
        i = j + 1
    if not pieces:
        return slice_in_dim(x, 0, 0, 1, axis)
    return lax_concatenate(pieces, axis)


# ---- copy ---------------------------------------------------------------------------------------

@places_result
def copy(x, /, *, device=None):
    """A copy of ``x`` (NumPy ``copy``). Arrays are immutable, so this only matters for identity:
    eagerly it returns a new Array owning a fresh contiguous buffer; under a transformation it
    returns ``x`` (a copy is never observable there)."""
    check_device(device, "copy")
    x = operand(x, "copy")
    if type(x) is Array:
        return wrap(np.array(x._buf, copy=True), x._weak)
    return x


from .shape_join import *  # noqa: E402,F401,F403
from .shape_join import __all__ as _join_all  # noqa: E402

__all__ += _join_all
