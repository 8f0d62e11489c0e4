"""Indexing: ``x[idx]``, ``x.at[idx]`` updates, take / take_along_axis / put, diagonal / trace,
nonzero / argwhere / flatnonzero, compress / extract, select / choose, unravel / ravel indices.

Everything lowers (statically, in Python) to static slicing (``shape_lax``) and the primitives of
gather_scatter.py (``gather``, ``scatter``, ``argwhere``, ``choose``); index parsing lives in
index_parse.py, ``.at`` in index_update.py.

Out-of-bounds indices (documented choice):

* ``x[idx]``: a static int or a *concrete* index array out of bounds raises IndexError naming the
  axis and its size (NumPy's behaviour), eagerly and while tracing. A *traced* index array cannot
  be checked: its out-of-bounds entries are clamped (gather mode "clip", JAX's default).
* ``x.at[idx].get()`` clamps (mode "clip") unless ``mode=`` says otherwise; ``.set/.add/...``
  drop out-of-bounds updates (mode "drop"). Negative indices wrap once (``i + d``) everywhere.
* ``take`` / ``take_along_axis`` / ``put`` / ``put_along_axis`` / ``choose``: ``mode=None``
  behaves like ``x[idx]`` (concrete indices checked, traced ones clamped for reads and dropped
  for writes); "clip", "wrap", "fill" (reads, with ``fill_value``) and "drop" are available.
"""
from __future__ import annotations

import math

import numpy as np

from ...core import dtypes
from ...core.trace import EVAL_TRACE, ConcretizationError, Tracer, current_trace
from ..array import Array, wrap
from ..convert import operand
from . import shape_lax
from .axes import normalize_axis
from .elementwise_family import broadcast_shapes, promote_operands
from .gather_scatter import argwhere_p, choose_p, gather, scatter  # noqa: F401
from .index_parse import (as_operands, basic_index, gather_form, has_arrays, ints_in_bounds,
                          normalized_ints, numpy_index, parse)
from .index_update import _IndexUpdateHelper, scatter_index  # noqa: F401

__all__ = [
    "_getitem", "_IndexUpdateHelper", "take", "take_along_axis", "put", "put_along_axis",
    "diagonal", "trace", "nonzero", "argwhere", "flatnonzero", "compress", "extract", "select",
    "choose", "unravel_index", "ravel_multi_index",
]

_READ_MODES = (None, "raise", "clip", "wrap", "fill", "drop", "promise_in_bounds")


def _ns():
    from .. import numpy as snp  # the namespace imports this module: look it up lazily
    return snp


# ---- x[idx] ------------------------------------------------------------------------------------

def _getitem(x, idx):
    """``x[idx]`` with NumPy's indexing semantics (basic and advanced, boolean masks).

    Args:
        x: Array or Tracer of shape ``(*dims)``.
        idx: an int, slice, None, Ellipsis, integer array (Array, Tracer, NumPy array or nested
            list), boolean array, or a tuple of those.
    Returns:
        A new Array with NumPy's result shape, the dtype and weak type of ``x``.
    Raises:
        IndexError: too many indices, static / concrete out-of-bounds indices ("index 5 is out
            of bounds for axis 0 with size 3"), non-broadcastable index arrays, float index
            arrays, a boolean mask of the wrong shape, a traced boolean mask (its result shape
            depends on values: use ``where`` or ``.at[mask]``).
        InvalidIndexError: (TypeError and IndexError) index items of invalid types (str, float).
    Out-of-bounds entries of a traced index array are clamped (see the module docstring).
    """
    if type(x) is Array and current_trace() is EVAL_TRACE:
        t = type(idx)
        if t is int or t is slice:
            try:
                return wrap(x._buf[idx], x._weak)
            except (IndexError, TypeError, ValueError):
                pass  # the general path raises Starling's message
        else:
            np_idx = numpy_index(idx)
            if np_idx is not None:
                try:
                    out = x._buf[np_idx]
                except (IndexError, TypeError, ValueError):
                    pass
                else:
                    return wrap(out, x._weak)
    if type(x) is not Array and not isinstance(x, Tracer):
        x = operand(x, "index")
    return read_index(x, idx, None, None, "index")


def read_index(x, idx, mode, fill_value, op):
    """``x[idx]`` under gather ``mode``; None / "raise": static and concrete indices are
    bounds-checked (IndexError) and traced ones clamped."""
    checked = mode in (None, "raise")
    entries = parse(op, x.shape, idx, check_bounds=checked)
    if not has_arrays(entries) and (checked or ints_in_bounds(entries)):
        return basic_index(x, normalized_ints(entries))
    indices, batch_shape, index_shape, window = gather_form(op, entries)
    out_shape = batch_shape + window
    if math.prod(out_shape) == 0:
        return wrap(np.zeros(out_shape, x.dtype), x.weak_type)
    if checked:
        traced = any(not isinstance(i, np.ndarray) and type(i) is not Array for i in indices)
        mode = "clip" if traced else "promise_in_bounds"
    y = gather(x, *as_operands(indices), mode=mode, fill_value=fill_value) if indices else x
    if tuple(index_shape) != tuple(batch_shape):
        y = shape_lax.reshape(y, out_shape)
    return y


def _eager(x):
    return type(x) is Array and current_trace() is EVAL_TRACE


def _concrete(x):
    """NumPy value of an index argument if it is concrete (not traced), else None."""
    if type(x) is Array:
        return np.asarray(x._buf)
    if isinstance(x, Tracer):
        return None
    if isinstance(x, np.ndarray):
        return x
    return np.asarray(x)


def _index_arg(op, indices):
    """An index argument as an int, a NumPy int array or an integer Array/Tracer."""
    if type(indices) is int:
        return indices
    if type(indices) is Array or isinstance(indices, Tracer):
        if not dtypes.is_integer(indices.dtype):
            raise TypeError(f"{op}: indices must have an integer dtype, got {indices.dtype}")
        return indices
    if isinstance(indices, (bool, np.bool_, float, complex, str)):
        raise TypeError(f"{op}: indices must be integers, got {type(indices).__name__}")
    arr = np.asarray(indices)
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.intp)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must have an integer dtype, got {arr.dtype}")
    return int(arr) if arr.ndim == 0 else arr


def _check_mode(op, mode, valid=_READ_MODES):
    if mode not in valid:
        raise ValueError(f"{op}: mode must be one of "
                         f"{', '.join(repr(m) for m in valid if m is not None)} or None, "
                         f"got {mode!r}")


def _python_scalar(op, v, name="fill_value"):
    if v is None or type(v) in (bool, int, float, complex):
        return v
    if isinstance(v, (np.generic, np.ndarray, Array)) and np.ndim(v) == 0:
        return np.asarray(v).item()
    raise TypeError(f"{op}: {name} must be a Python scalar, got {type(v).__name__}")


def _flatten(a):
    return shape_lax.reshape(a, (math.prod(a.shape),))


# ---- take / put --------------------------------------------------------------------------------

def take(a, indices, /, axis=None, *, mode=None, fill_value=None, unique_indices=False,
         indices_are_sorted=False):
    """Elements of ``a`` at ``indices`` along ``axis`` (``a[(:,) * axis + (indices,)]``).

    Args:
        a: array of shape ``(*pre, n, *post)`` (flattened first when ``axis`` is None).
        indices: an int or an integer array of shape ``(*idx)``.
        axis: the axis to take along (negative counts from the end); None flattens ``a``.
        mode: None / "raise" (concrete out-of-bounds indices raise IndexError, traced ones are
            clamped), "clip" (clamp), "wrap" (modulo n), "fill" (``fill_value``). Unlike NumPy,
            "clip" wraps negative indices once before clamping (as JAX does).
        fill_value: the value of out-of-bounds reads for mode "fill" (default NaN / the int
            minimum / True, see ``x.at[].get``).
        unique_indices, indices_are_sorted: accepted for JAX compatibility (hints).
    Returns:
        Array of shape ``(*pre, *idx, *post)`` and the dtype of ``a``.
    Raises:
        IndexError: out-of-bounds concrete indices (mode None). TypeError: non-integer indices.
        AxisError: ``axis`` out of range. ValueError: an unknown ``mode``.
    """
    a = operand(a, "take")
    _check_mode("take", mode)
    idx = _index_arg("take", indices)
    if axis is None:
        a = _flatten(a)
        axis = 0
    else:
        axis = normalize_axis("take", axis, a.ndim)
    if mode in (None, "raise") and _eager(a) and not isinstance(idx, Tracer):
        try:
            np_idx = idx._buf if type(idx) is Array else idx
            return wrap(np.take(a._buf, np_idx, axis=axis), a._weak)
        except IndexError:
            pass  # read_index raises Starling's message
    return read_index(a, (slice(None),) * axis + (idx,), mode,
                      _python_scalar("take", fill_value), "take")


def _along_axis_index(op, arr, indices, axis):
    """(arr, index tuple) selecting ``arr[..., indices[...], ...]`` along ``axis`` (NumPy's
    take_along_axis convention: other dims broadcast between ``arr`` and ``indices``)."""
    arr = operand(arr, op)
    idx = _index_arg(op, indices)
    if type(idx) is int:
        raise ValueError(f"{op}: indices must be an array with the ndim of arr, got an int")
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(f"{op}: with axis=None, indices must be 1-d, got ndim {idx.ndim}")
        arr = _flatten(arr)
        axis = 0
    else:
        axis = normalize_axis(op, axis, arr.ndim)
    if idx.ndim != arr.ndim:
        raise ValueError(f"{op}: indices (ndim {idx.ndim}) and arr (ndim {arr.ndim}) must have "
                         "the same number of dimensions")
    full = []
    for d in range(arr.ndim):
        if d == axis:
            full.append(idx)
            continue
        n, m = arr.shape[d], idx.shape[d]
        if n != m and n != 1 and m != 1:
            raise ValueError(f"{op}: indices of shape {tuple(idx.shape)} do not broadcast "
                             f"against arr of shape {tuple(arr.shape)} outside axis {axis}")
        shape = [1] * arr.ndim
        shape[d] = n
        if type(n) is int:
            full.append(np.arange(n, dtype=np.intp).reshape(shape))
        else:  # a symbolic dim (dynamic shapes): a staged iota instead of a NumPy constant
            full.append(shape_lax.iota(np.dtype(np.intp), tuple(shape), d))
    return arr, tuple(full), axis


def take_along_axis(arr, indices, axis=-1, *, mode=None, fill_value=None):
    """``out[..., i, ...] = arr[..., indices[..., i, ...], ...]`` along ``axis`` (NumPy).

    Args:
        arr: array of shape ``(*pre, n, *post)``.
        indices: integer array of the same ndim, shape ``(*pre', k, *post')`` where the other
            dims broadcast against arr's.
        axis: the axis (default -1); None flattens ``arr`` (then ``indices`` is 1-d).
        mode, fill_value: out-of-bounds handling as in ``take``.
    Returns:
        Array of shape ``broadcast(*pre, *pre') + (k,) + broadcast(*post, *post')``.
    Raises:
        ValueError: ndim mismatch or non-broadcastable dims. IndexError: concrete out-of-bounds
        indices with mode None. TypeError: non-integer indices.
    """
    _check_mode("take_along_axis", mode)
    arr, full, axis = _along_axis_index("take_along_axis", arr, indices, axis)
    idx = full[axis]
    if mode in (None, "raise") and _eager(arr) and not isinstance(idx, Tracer):
        try:
            np_idx = idx._buf if type(idx) is Array else idx
            return wrap(np.take_along_axis(arr._buf, np_idx, axis=axis), arr._weak)
        except (IndexError, ValueError):
            pass
    return read_index(arr, full, mode, _python_scalar("take_along_axis", fill_value),
                      "take_along_axis")


def put_along_axis(arr, indices, values, axis, *, mode=None):
    """Functional ``np.put_along_axis``: a copy of ``arr`` with ``values`` written at
    ``indices`` along ``axis`` (``arr`` itself is unchanged; Starling arrays are immutable).

    Args:
        arr: array of shape ``(*pre, n, *post)``.
        indices: integer array of the same ndim (other dims broadcast, as in take_along_axis).
        values: broadcast to the shape of ``take_along_axis(arr, indices, axis)``; cast to
            arr's dtype.
        axis: the axis; None flattens ``arr``.
        mode: None / "raise" (concrete out-of-bounds indices raise IndexError; traced ones are
            dropped), "drop", "clip", "wrap".
    Returns:
        Array of arr's shape and dtype.
    Duplicate indices: the last value wins.
    """
    _check_mode("put_along_axis", mode, (None, "raise", "drop", "clip", "wrap"))
    shape = tuple(operand(arr, "put_along_axis").shape)
    arr, full, _ = _along_axis_index("put_along_axis", arr, indices, axis)
    checked = mode in (None, "raise")
    out = scatter_index(arr, full, values, op="set", mode=None if checked else mode,
                        unique_indices=False, name="put_along_axis", check_bounds=checked)
    return shape_lax.reshape(out, shape)


def put(a, ind, v, mode=None):
    """Functional ``np.put``: a copy of ``a`` with ``a.flat[ind] = v`` (``a`` is unchanged).

    Args:
        a: array of any shape.
        ind: integer indices into the flattened ``a``.
        v: values; repeated cyclically when shorter than ``ind`` (NumPy), cast to a's dtype.
        mode: None / "raise" (concrete out-of-bounds indices raise IndexError; traced ones are
            dropped), "drop", "clip", "wrap" (JAX-style: negatives wrap once before clipping).
    Returns:
        Array of a's shape and dtype. Duplicate indices: the last value wins.
    """
    _check_mode("put", mode, (None, "raise", "drop", "clip", "wrap"))
    a = operand(a, "put")
    idx = _index_arg("put", ind)
    flat = _flatten(a)
    from .index_update import cast_updates
    vals = _flatten(cast_updates("put", a, v))
    n = 1 if type(idx) is int else math.prod(idx.shape)
    if vals.shape[0] == 0 or n == 0:
        return a
    if vals.shape[0] != n:
        cyc = np.arange(n, dtype=np.intp) % vals.shape[0]
        vals = gather(vals, wrap(cyc), mode="promise_in_bounds")
    vals = shape_lax.reshape(vals, () if type(idx) is int else tuple(idx.shape))
    checked = mode in (None, "raise")
    out = scatter_index(flat, (idx,), vals, op="set", mode=None if checked else mode,
                        unique_indices=False, name="put", check_bounds=checked)
    return shape_lax.reshape(out, tuple(a.shape))


# ---- diagonal / trace --------------------------------------------------------------------------

def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal ``a[..., i, ..., i + offset, ...]`` of the ``(axis1, axis2)`` planes, as the
    LAST axis of the result (NumPy's convention; ``linalg.diagonal`` is the Array API one).

    Args:
        a: array of ndim >= 2, shape ``(..., n1 (axis1), ..., n2 (axis2), ...)``.
        offset: the diagonal (> 0 above, < 0 below the main one).
        axis1, axis2: the two distinct axes of the planes (negative allowed).
    Returns:
        Array of shape ``(*other_dims, L)`` with ``L = max(0, min(n1, n2 - offset))`` for
        ``offset >= 0`` and ``max(0, min(n1 + offset, n2))`` otherwise.
    Raises:
        ValueError: ndim < 2 or axis1 == axis2. AxisError: axes out of range.
    """
    a = operand(a, "diagonal")
    if a.ndim < 2:
        raise ValueError(f"diagonal: requires an array of ndim >= 2, got ndim {a.ndim}")
    ax1 = normalize_axis("diagonal", axis1, a.ndim, name="axis1")
    ax2 = normalize_axis("diagonal", axis2, a.ndim, name="axis2")
    if ax1 == ax2:
        raise ValueError(f"diagonal: axis1 and axis2 cannot be the same axis ({ax1})")
    offset = int(_python_scalar("diagonal", offset, "offset"))
    if _eager(a):
        return wrap(np.diagonal(a._buf, offset, ax1, ax2), a._weak)
    n1, n2 = a.shape[ax1], a.shape[ax2]
    if offset >= 0:
        length, i0, j0 = max(0, min(n1, n2 - offset)), 0, offset
    else:
        length, i0, j0 = max(0, min(n1 + offset, n2)), -offset, 0
    others = [d for d in range(a.ndim) if d not in (ax1, ax2)]
    other_shape = tuple(a.shape[d] for d in others)
    if length == 0 or 0 in other_shape:
        return wrap(np.zeros(other_shape + (length,), a.dtype), a.weak_type)
    y = shape_lax.transpose(a, (ax1, ax2, *others))
    i = wrap(np.arange(i0, i0 + length, dtype=np.intp))
    j = wrap(np.arange(j0, j0 + length, dtype=np.intp))
    g = gather(y, i, j, mode="promise_in_bounds")
    return shape_lax.transpose(g, (*range(1, len(others) + 1), 0))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along a diagonal: ``sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)``.

    Args:
        a: array of ndim >= 2; offset / axis1 / axis2 as in ``diagonal``.
        dtype: accumulation / result dtype (default: ``sum``'s rule: small ints widen to the
            default int).
        out: must be None (arrays are immutable).
    Returns:
        Array of shape ``(*other_dims)``.
    """
    if out is not None:
        raise TypeError("trace: out= is not supported (Starling arrays are immutable)")
    return _ns().sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


# ---- nonzero / argwhere / compress -------------------------------------------------------------

def _static_size(op, size):
    if size is None:
        return None
    try:
        size = int(size.__index__())
    except (AttributeError, TypeError):
        raise TypeError(f"{op}: size must be a static Python int or None, got "
                        f"{type(size).__name__}") from None
    if size < 0:
        raise ValueError(f"{op}: size must be >= 0, got {size}")
    return size


def _argwhere(op, a, size, fill_value):
    """(N, ndim) int64 coordinates of the nonzero elements of ``a`` (N = size when given)."""
    if size is None and isinstance(a, Tracer):
        try:
            a = a.to_concrete()
        except ConcretizationError:
            raise ConcretizationError(
                f"{op}: the number of nonzero elements of the traced array "
                f"{a.aval.str_short()} depends on its values, so the result shape is unknown "
                "while tracing; pass a static size= (and fill_value=) for a fixed-size result, "
                "or use starling.numpy.where(cond, x, y)") from None
    fill = _python_scalar(op, fill_value)
    fill = 0 if fill is None else fill
    if type(fill) is not int:
        raise TypeError(f"{op}: fill_value must be an int, got {type(fill).__name__}")
    if size is None:  # concrete: the shape is known only now, so no primitive can be staged
        return wrap(np.argwhere(np.asarray(a._buf)).astype(np.int64, copy=False), False)
    return argwhere_p.bind(a, size=size, fill_value=fill)


def nonzero(a, /, *, size=None, fill_value=None):
    """Indices of the nonzero (True, non-0, NaN) elements of ``a``, one int64 array per dim.

    The result length depends on values, so under tracing (``compile``, ``make_ir``, ``vmap``)
    pass ``size=``: the first ``size`` indices are returned, padded with ``fill_value``
    (default 0). This is also the one-argument form of ``where``.

    Args:
        a: array of ndim >= 1, shape ``(*dims)``.
        size: None, or a static int: the length of every output array.
        fill_value: int used to pad when fewer than ``size`` elements are nonzero.
    Returns:
        Tuple of ``a.ndim`` int64 arrays of shape ``(N,)`` (``N = size`` when given).
    Raises:
        ValueError: ``a`` is 0-d (as in NumPy 2). ConcretizationError (a TypeError): traced
        input without ``size``.
    """
    a = operand(a, "nonzero")
    if a.ndim == 0:
        raise ValueError("nonzero: calling nonzero on a 0-d array is not allowed; use "
                         "nonzero(atleast_1d(x)) instead")
    size = _static_size("nonzero", size)
    if size is None and type(a) is Array:  # concrete (also inside a trace): NumPy directly
        return tuple(wrap(i.astype(np.int64, copy=False), False) for i in np.nonzero(a._buf))
    coords = _argwhere("nonzero", a, size, fill_value)
    n = coords.shape[0]
    return tuple(shape_lax.reshape(shape_lax.static_slice(coords, (0, j), (n, j + 1)), (n,))
                 for j in range(a.ndim))


def argwhere(a, /, *, size=None, fill_value=None):
    """Coordinates of the nonzero elements of ``a``, one row each (``np.argwhere``).

    Args:
        a: array of shape ``(*dims)``.
        size, fill_value: as in ``nonzero`` (needed under tracing).
    Returns:
        int64 array of shape ``(N, a.ndim)``.
    """
    a = operand(a, "argwhere")
    size = _static_size("argwhere", size)
    return _argwhere("argwhere", a, size, fill_value)


def flatnonzero(a, /, *, size=None, fill_value=None):
    """Indices of the nonzero elements of ``ravel(a)``: int64 array of shape ``(N,)``.

    ``size`` / ``fill_value`` as in ``nonzero``.
    """
    a = operand(a, "flatnonzero")
    return nonzero(_flatten(a), size=size, fill_value=fill_value)[0]


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of ``a`` along ``axis`` where ``condition`` is nonzero (``np.compress``).

    Args:
        condition: 1-d array; entries beyond ``a.shape[axis]`` must be False (else IndexError).
        a: array of shape ``(*pre, n, *post)``; flattened when ``axis`` is None.
        axis: the axis to select along.
        size: None, or a static int (needed for a traced ``condition``): the result length
            along ``axis``; missing entries are ``fill_value``.
        fill_value: Python scalar padding (only with ``size``).
        out: must be None.
    Returns:
        Array of shape ``(*pre, N, *post)``, the dtype of ``a``.
    """
    if out is not None:
        raise TypeError("compress: out= is not supported (Starling arrays are immutable)")
    a = operand(a, "compress")
    cond = condition if isinstance(condition, (Array, Tracer)) else operand(condition, "compress")
    if cond.ndim != 1:
        raise ValueError(f"compress: condition must be 1-d, got shape {tuple(cond.shape)}")
    if axis is None:
        a = _flatten(a)
        axis = 0
    else:
        axis = normalize_axis("compress", axis, a.ndim)
    size = _static_size("compress", size)
    pre = (slice(None),) * axis
    if size is None:
        idx = _argwhere("compress", cond, None, None)._buf[:, 0]
        if idx.shape[0] and int(idx[-1]) >= a.shape[axis]:
            raise IndexError(f"compress: condition is True at index {int(idx[-1])} but axis "
                             f"{axis} of the array has size {a.shape[axis]}")
        return read_index(a, pre + (idx,), None, None, "compress")
    coords = _argwhere("compress", cond, size, a.shape[axis])
    idx = shape_lax.reshape(coords, (size,))
    return read_index(a, pre + (idx,), "fill", _python_scalar("compress", fill_value),
                      "compress")


def extract(condition, arr, *, size=None, fill_value=0):
    """``ravel(arr)`` at the positions where ``ravel(condition)`` is nonzero (``np.extract``).

    ``size`` / ``fill_value`` as in ``compress``. Returns a 1-d array of arr's dtype.
    """
    cond = operand(condition, "extract")
    arr = operand(arr, "extract")
    return compress(_flatten(cond), _flatten(arr), size=size, fill_value=fill_value)


# ---- select / choose ---------------------------------------------------------------------------

def select(condlist, choicelist, default=0):
    """Elementwise: the entry of the first choice whose condition holds, else ``default``.

    Args:
        condlist: sequence of boolean arrays.
        choicelist: sequence of arrays, one per condition.
        default: array or scalar used where no condition holds.
    Returns:
        Array of the broadcast shape of all conditions, choices and ``default``; the choices and
        ``default`` promote to one dtype (JAX rules; Python scalars are weak).
    Raises:
        ValueError: the lists differ in length or are empty. TypeError: a non-boolean condition.
    """
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist and choicelist must have the same length, got "
                         f"{len(condlist)} and {len(choicelist)}")
    if not condlist:
        raise ValueError("select: condlist must not be empty")
    conds = [operand(c, "select") for c in condlist]
    for i, c in enumerate(conds):
        if not dtypes.is_bool(c.dtype):
            raise TypeError(f"select: condlist entry {i} must be a boolean array, got dtype "
                            f"{c.dtype}")
    vals = promote_operands("select", [*choicelist, default], "data")
    shapes = [tuple(c.shape) for c in conds] + [tuple(v.shape) for v in vals]
    broadcast_shapes("select", *shapes)
    result = vals[-1]
    for c, v in zip(reversed(conds), reversed(vals[:-1])):
        result = choose_p.bind(c, result, v, mode="clip")
    return result


def choose(a, choices, mode="raise"):
    """``out[i] = choices[a[i]][i]`` elementwise with broadcasting (``np.choose``).

    Args:
        a: integer array of indices into ``choices``.
        choices: a sequence of n arrays (or an array whose first axis enumerates them); they
            promote to one dtype.
        mode: "raise" / None (concrete entries outside ``0..n-1`` raise ValueError; traced ones
            are clamped), "clip" (clamp, negatives to 0), "wrap" (modulo n).
    Returns:
        Array of the broadcast shape of ``a`` and all choices.
    Raises:
        ValueError: empty choices, invalid entries (mode "raise"), bad mode.
        TypeError: non-integer ``a``.
    """
    _check_mode("choose", mode, (None, "raise", "clip", "wrap"))
    a = operand(a, "choose")
    if not dtypes.is_integer(a.dtype):
        raise TypeError(f"choose: the index array must have an integer dtype, got {a.dtype}")
    if isinstance(choices, (Array, Tracer, np.ndarray)):
        choices = operand(choices, "choose")
        choices = [_getitem(choices, i) for i in range(choices.shape[0])]
    choices = list(choices)
    if not choices:
        raise ValueError("choose: choices must not be empty")
    vals = promote_operands("choose", choices, "data")
    n = len(vals)
    if mode in (None, "raise"):
        val = _concrete(a)
        if val is not None and val.size and (val.min() < 0 or val.max() >= n):
            raise ValueError(f"choose: invalid entry in the index array: values must be in "
                             f"0..{n - 1} for {n} choices, got {int(val.min())}..{int(val.max())}")
        mode = "clip"
    return choose_p.bind(a, *vals, mode=mode)


# ---- unravel_index / ravel_multi_index ---------------------------------------------------------

def _shape_arg(op, shape):
    from ...core.avals import canonicalize_shape
    return canonicalize_shape(shape, op)


def unravel_index(indices, shape, order="C"):
    """Converts flat indices into a tuple of coordinate arrays for ``shape`` (``np.unravel_index``).

    Args:
        indices: integer array (or int) of flat indices, shape ``(*idx)``.
        shape: the array shape the flat indices refer to.
        order: "C" (row-major) or "F".
    Returns:
        Tuple of ``len(shape)`` int64 arrays of shape ``(*idx)``.
    Raises:
        ValueError: a concrete index is out of range (``-size..size-1`` are not accepted either,
            as in NumPy: negative indices raise). For traced indices there is no check: an
            out-of-range index gives coordinates modulo each dim.
    """
    shape = _shape_arg("unravel_index", shape)
    if order not in ("C", "F"):
        raise ValueError(f"unravel_index: order must be 'C' or 'F', got {order!r}")
    idx = _index_arg("unravel_index", indices)
    val = None if isinstance(idx, Tracer) else np.asarray(_concrete(idx))
    if val is not None:
        size = math.prod(shape)
        if val.size and (val.min() < 0 or val.max() >= size):
            bad = int(val.min()) if val.min() < 0 else int(val.max())
            raise ValueError(f"unravel_index: index {bad} is out of bounds for an array of "
                             f"shape {shape} (size {size})")
        return tuple(wrap(np.asarray(c, dtype=np.int64), False)
                     for c in np.unravel_index(val, shape, order=order))
    snp = _ns()
    from .convert_element_type import convert_element_type
    r = convert_element_type(idx, dtypes.int64, False)
    dims = list(enumerate(shape))
    out = [None] * len(shape)
    for j, d in (reversed(dims) if order == "C" else dims):
        out[j] = snp.remainder(r, d) if d else r
        r = snp.floor_divide(r, d) if d else r
    return tuple(out)


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """Flat indices of coordinate arrays into an array of shape ``dims`` (NumPy's function).

    Args:
        multi_index: sequence of ``len(dims)`` integer arrays (broadcasting together).
        dims: the array shape.
        mode: "raise" (concrete out-of-range coordinates raise ValueError; traced ones are
            clipped), "wrap", "clip"; or a sequence of those, one per dim.
        order: "C" or "F".
    Returns:
        int64 array of the broadcast shape of the coordinates.
    """
    dims = _shape_arg("ravel_multi_index", dims)
    multi_index = list(multi_index)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} coordinate arrays for "
                         f"{len(dims)} dims {dims}")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    modes = list(mode) if isinstance(mode, (list, tuple)) else [mode] * len(dims)
    for m in modes:
        _check_mode("ravel_multi_index", m, ("raise", "wrap", "clip"))
    coords = [_index_arg("ravel_multi_index", c) for c in multi_index]
    vals = [None if isinstance(c, Tracer) else _concrete(c) for c in coords]
    if all(v is not None for v in vals):
        try:
            flat = np.ravel_multi_index(tuple(np.asarray(v) for v in vals), dims,
                                        mode=tuple(modes), order=order)
        except ValueError as e:
            raise ValueError(f"ravel_multi_index: {e}") from None
        return wrap(np.asarray(flat, dtype=np.int64), False)
    snp = _ns()
    from .convert_element_type import convert_element_type
    strides = [1] * len(dims)
    order_dims = range(len(dims) - 2, -1, -1) if order == "C" else range(1, len(dims))
    for j in order_dims:
        nb = j + 1 if order == "C" else j - 1
        strides[j] = strides[nb] * dims[nb]
    total = None
    for c, d, m, st in zip(coords, dims, modes, strides):
        c = convert_element_type(operand(c, "ravel_multi_index"), dtypes.int64, False)
        c = snp.remainder(c, d) if m == "wrap" else snp.clip(c, 0, max(d - 1, 0))
        term = snp.multiply(c, st)
        total = term if total is None else snp.add(total, term)
    return total
