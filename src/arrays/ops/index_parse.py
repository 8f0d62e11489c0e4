"""Static normalisation of NumPy index expressions (used by ``x[idx]`` and ``x.at[idx]``).

An index (an int, slice, None, Ellipsis, integer or boolean array, or a tuple of those) is parsed
into a list of *entries*, one per index item after Ellipsis expansion:

    ("int", i, d)         a static integer on a dim of size d (consumes one dim)
    ("slice", s, d)       a slice object on a dim of size d (consumes one dim)
    ("none",)             ``None``: a new dim of size 1
    ("sep",)              an Ellipsis that expanded to no dims (it still separates advanced
                          indices, as in NumPy)
    ("array", a, n)       an integer index array (NumPy array or Array/Tracer) consuming n dims:
                          n = 1, or n = 0 for the fake axis of a 0-d boolean index

A concrete k-d boolean mask becomes its k ``nonzero()`` integer arrays (NumPy's definition), so
its result shape is known; a traced mask has a value-dependent shape and is rejected here.

Lowering (all static, in Python):

* no arrays: ``basic_index`` -> ``static_slice`` (+ ``rev`` for negative steps) + ``reshape``.
* with arrays: ``gather_form`` turns the whole index into k index arrays over the LEADING k dims
  of x (slices that are not part of the trailing run of full slices become ``arange`` arrays
  placed on their own output dim), arranged so that one ``gather``/``scatter`` directly yields
  NumPy's result layout: the broadcast advanced dims sit where the first advanced index was when
  the advanced indices are adjacent, else in front.
"""
from __future__ import annotations

import operator

import numpy as np

from ...core import dtypes
from ...core.avals import is_symbolic
from ...core.trace import ConcretizationError, Tracer
from ..array import Array, wrap
from . import shape_lax

_VALID = ("integers, slices (`:`), ellipsis (`...`), None (`newaxis`) and integer or boolean "
          "arrays")


class InvalidIndexError(TypeError, IndexError):
    """An index of a type that cannot index an array (str, float, dict, ...).

    Subclasses both TypeError and IndexError (NumPy raises IndexError, JAX TypeError).
    """


def _mask_message(op):
    return (f"{op}: a traced boolean mask has a value-dependent number of True elements, so "
            "the result shape is unknown while tracing. Use starling.numpy.where(mask, x, 0), "
            "x.at[mask].set(v) (masked update), or starling.numpy.nonzero(mask, size=n)")


def _check_index_dtype(op, dt):
    if not (dtypes.is_integer(dt) or dtypes.is_bool(dt)):
        raise IndexError(f"{op}: arrays used as indices must be of integer or boolean type, "
                         f"got dtype {dt}")


def _classify(op, item):
    """One raw index item -> a provisional entry (before Ellipsis expansion)."""
    t = type(item)
    if t is int:
        return ("int", item)
    if t is slice:
        return ("slice", item)
    if item is None:
        return ("none",)
    if item is Ellipsis:
        return ("ellipsis",)
    if t is bool or t is np.bool_:
        return ("bool", np.asarray(bool(item)))
    if isinstance(item, np.integer):
        return ("int", int(item))
    if t is Array or isinstance(item, Tracer):
        dt = item.dtype
        _check_index_dtype(op, dt)
        if dtypes.is_bool(dt):
            return ("bool", item)
        if t is Array and item.ndim == 0:
            return ("int", int(item._buf))   # a concrete 0-d index is static
        return ("array", item)
    if isinstance(item, np.ndarray):
        _check_index_dtype(op, item.dtype)
        if item.dtype == np.bool_:
            return ("bool", item)
        return ("int", int(item)) if item.ndim == 0 else ("array", item)
    if isinstance(item, (list, tuple)):
        return _classify_sequence(op, item)
    if isinstance(item, (float, complex, str, bytes, dict, set, np.floating,
                         np.complexfloating)):
        raise InvalidIndexError(f"{op}: {type(item).__name__} {item!r} is not a valid index; "
                                f"valid indices are {_VALID}")
    if hasattr(item, "__array__") or hasattr(item, "__dlpack__"):
        # Foreign arrays (checked before __index__: theirs raises for more than one element).
        arr = np.asarray(item) if hasattr(item, "__array__") else np.from_dlpack(item)
        _check_index_dtype(op, arr.dtype)
        if arr.dtype == np.bool_:
            return ("bool", arr)
        return ("int", int(arr)) if arr.ndim == 0 else ("array", arr)
    if hasattr(item, "__index__"):
        return ("int", operator.index(item))
    raise InvalidIndexError(f"{op}: {type(item).__name__} is not a valid index; valid indices "
                            f"are {_VALID}")


def _classify_sequence(op, seq):
    if _contains_tracer(seq):
        raise InvalidIndexError(f"{op}: a list of traced values cannot be an index; build the "
                                "index array with starling.numpy.stack")
    try:
        arr = np.asarray(seq)
    except ValueError:
        raise IndexError(f"{op}: the nested sequence {seq!r} is ragged") from None
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.intp)  # NumPy's reading of an empty list index
    if arr.dtype == object or arr.dtype.kind not in "biu":
        raise IndexError(f"{op}: arrays used as indices must be of integer or boolean type, "
                         f"got the sequence {seq!r} (NumPy dtype {arr.dtype})")
    return ("bool", arr) if arr.dtype == np.bool_ else ("array", arr)


def _contains_tracer(seq):
    for v in seq:
        if isinstance(v, Tracer) or isinstance(v, (list, tuple)) and _contains_tracer(v):
            return True
    return False


def _static_slice_part(op, v):
    if v is None or type(v) is int:
        return v
    if isinstance(v, Tracer):
        raise ConcretizationError(
            f"{op}: slice bounds must be static, got a traced value {v.aval.str_short()}; "
            "index with an integer array (x[start + snp.arange(n)]) or take() instead")
    try:
        return operator.index(v)
    except TypeError:
        raise InvalidIndexError(f"{op}: slice bounds must be integers or None, got "
                                f"{type(v).__name__} {v!r}") from None


def _concrete(x):
    """The NumPy value of a concrete index array, or None for a traced one."""
    if type(x) is Array:
        return np.asarray(x._buf)
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x.to_concrete()._buf)
    except ConcretizationError:
        return None


def parse(op, shape, idx, *, check_bounds=True, masks=None):
    """Parses ``idx`` for an array of ``shape`` into entries (module docstring).

    Args:
        op: name for error messages ("index", "at[].set", ...).
        shape: the indexed array's shape.
        idx: the raw index.
        check_bounds: raise IndexError for out-of-bounds static ints and concrete arrays
            (``x[idx]``); when False (``.at[]``) they are kept for the update's ``mode``.
        masks: if a list, traced boolean masks are appended to it instead of raising (used by
            the masked-update path of ``.at``); their entries are ("mask", m).
    Returns:
        The list of entries. Ints are normalised (negative wrapped once) when ``check_bounds``.
    Raises:
        IndexError: too many indices, two Ellipses, out-of-bounds, mask shape mismatch, float
            index arrays. InvalidIndexError (TypeError and IndexError): items of invalid types.
    """
    items = idx if type(idx) is tuple else (idx,)
    raw = [_classify(op, item) for item in items]
    ndim = len(shape)
    consumed = 0
    n_ellipsis = 0
    for e in raw:
        kind = e[0]
        if kind in ("int", "slice", "array"):
            consumed += 1
        elif kind == "bool":
            consumed += e[1].ndim
        elif kind == "ellipsis":
            n_ellipsis += 1
    if n_ellipsis > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise IndexError(f"{op}: too many indices for array of ndim {ndim}: got {consumed}")
    entries = []
    dim = 0
    for e in raw:
        kind = e[0]
        if kind == "ellipsis":
            n = ndim - consumed
            if n == 0:
                entries.append(("sep",))
            for _ in range(n):
                entries.append(("slice", slice(None), shape[dim]))
                dim += 1
        elif kind == "none":
            entries.append(e)
        elif kind == "int":
            entries.append(_int_entry(op, e[1], dim, shape[dim], check_bounds))
            dim += 1
        elif kind == "slice":
            s = e[1]
            if not (type(s.start) in (int, type(None)) and type(s.stop) in (int, type(None))
                    and type(s.step) in (int, type(None))):
                s = slice(_static_slice_part(op, s.start), _static_slice_part(op, s.stop),
                          _static_slice_part(op, s.step))
            if s.step == 0:
                raise ValueError(f"{op}: slice step cannot be zero")
            entries.append(("slice", s, shape[dim]))
            dim += 1
        elif kind == "array":
            arr = e[1]
            if check_bounds:
                _check_array_bounds(op, arr, dim, shape[dim])
            entries.append(("array", arr, 1))
            dim += 1
        else:  # bool
            dim = _bool_entries(op, e[1], dim, shape, entries, masks)
    while dim < ndim:
        entries.append(("slice", slice(None), shape[dim]))
        dim += 1
    return entries


def _int_entry(op, i, dim, size, check_bounds):
    if check_bounds:
        if not -size <= i < size:
            raise IndexError(f"{op}: index {i} is out of bounds for axis {dim} with size {size}")
        return ("int", i + size if i < 0 else i, size)
    return ("int", i, size)


def _check_array_bounds(op, arr, dim, size):
    val = _concrete(arr)
    if val is None or val.size == 0:
        return
    lo, hi = int(val.min()), int(val.max())
    if lo < -size:
        raise IndexError(f"{op}: index {lo} is out of bounds for axis {dim} with size {size}")
    if hi >= size:
        raise IndexError(f"{op}: index {hi} is out of bounds for axis {dim} with size {size}")


def _bool_entries(op, mask, dim, shape, entries, masks):
    if mask.ndim == 0:
        val = _concrete(mask)
        if val is None:
            raise IndexError(_mask_message(op))
        entries.append(("array", np.zeros(int(bool(val)), np.intp), 0))
        return dim
    want = tuple(shape[dim:dim + mask.ndim])
    for j, (a, b) in enumerate(zip(mask.shape, want)):
        if a != b:
            raise IndexError(f"{op}: boolean index did not match indexed array along axis "
                             f"{dim + j}; size of axis is {b} but size of corresponding boolean "
                             f"axis is {a}")
    val = _concrete(mask)
    if val is None:
        if masks is None:
            raise IndexError(_mask_message(op))
        masks.append(mask)
        entries.append(("mask", mask))
        return dim + mask.ndim
    for nz in np.nonzero(val):
        entries.append(("array", nz, 1))
    return dim + mask.ndim


def has_arrays(entries):
    """True when a parsed index contains an advanced (integer array) entry."""
    for e in entries:
        if e[0] == "array":
            return True
    return False


def ints_in_bounds(entries):
    """True when every static int entry lies in ``-d..d-1``."""
    for e in entries:
        if e[0] == "int" and not -e[2] <= e[1] < e[2]:
            return False
    return True


def normalized_ints(entries):
    """Entries with negative (in-bounds) static ints wrapped once to ``i + d``."""
    return [("int", e[1] + e[2], e[2]) if e[0] == "int" and e[1] < 0 else e for e in entries]


# ---- lowering: basic indexing ------------------------------------------------------------------

def basic_index(x, entries):
    """``x[idx]`` for entries without arrays: static_slice + rev + reshape."""
    starts, limits, strides, flip = [], [], [], []
    out_shape = []
    changed = False
    for e in entries:
        kind = e[0]
        if kind == "none":
            out_shape.append(1)
            changed = True
        elif kind == "int":
            i = e[1]
            starts.append(i)
            limits.append(i + 1)
            strides.append(1)
            changed = True
        elif kind == "slice":
            d = e[2]
            if type(d) is int:
                start, stop, step = e[1].indices(d)
                n = len(range(start, stop, step))
            else:
                start, stop, step, n = symbolic_slice_indices(e[1], d)
            out_shape.append(n)
            if n == 0:
                starts.append(0)
                limits.append(0)
                strides.append(1)
            elif step > 0:
                starts.append(start)
                limits.append(start + (n - 1) * step + 1)
                strides.append(step)
            else:
                last = start + (n - 1) * step
                starts.append(last)
                limits.append(start + 1)
                strides.append(-step)
                if type(n) is not int or n > 1:  # rev of a size-1 dim is a no-op anyway
                    flip.append(len(starts) - 1)
    if not changed and not flip and tuple(limits) == tuple(x.shape) \
            and all(s == 0 for s in starts) \
            and all(s == 1 for s in strides):
        return x
    y = shape_lax.static_slice(x, starts, limits, strides)
    y = shape_lax.rev(y, flip)
    return shape_lax.reshape(y, tuple(out_shape))


# ---- lowering: gather form ---------------------------------------------------------------------

def _is_full(e):
    if e[0] != "slice":
        return False
    s = e[1]
    if type(e[2]) is not int:
        return s.start in (None, 0) and s.stop is None and s.step in (None, 1)
    return s.indices(e[2]) == (0, e[2], 1)


def _smin(a, b):
    return a if a <= b else b  # bool() of an undecidable symbolic comparison raises


def _smax(a, b):
    return a if a >= b else b


def symbolic_slice_indices(s, d):
    """``slice.indices`` plus the length for a symbolic dim ``d`` (dynamic shapes); the slice
    bounds are static ints. Comparisons the dims' ranges cannot decide raise
    InconclusiveDimensionError (e.g. ``x[:5]`` for a dim that may be smaller or larger)."""
    step = 1 if s.step is None else operator.index(s.step)
    if step == 0:
        raise ValueError("slice step cannot be zero")

    def bound(v, default, lo, hi):
        if v is None:
            return default
        v = operator.index(v) if not is_symbolic(v) else v
        if v < 0:
            return _smax(d + v, lo)
        return _smin(v, hi)

    if step > 0:
        start = bound(s.start, 0, 0, d)
        stop = bound(s.stop, d, 0, d)
        n = _smax((stop - start + step - 1) // step, 0)
    else:
        start = bound(s.start, d - 1, -1, d - 1)
        stop = bound(s.stop, -1, -1, d - 1)
        n = _smax((start - stop - step - 1) // (-step), 0)
    return start, stop, step, n


def gather_form(op, entries):
    """Lowers entries (with arrays; ints are treated as 0-d arrays) to the gather convention.

    Returns:
        (indices, batch_shape, index_shape, window): ``indices`` are k index arrays (NumPy arrays
        or Arrays/Tracers) over the leading k dims of x, broadcasting to ``index_shape``;
        ``batch_shape`` is NumPy's result shape without the trailing window dims
        (``window = x.shape[k:]``). The two shapes differ only by size-1 dims no index spans
        (None, a True 0-d mask), or when a False 0-d mask makes the result empty.
    """
    w = len(entries)
    while w > 0 and _is_full(entries[w - 1]):
        w -= 1
    head = entries[:w]
    window = tuple(e[2] for e in entries[w:])
    adv_pos = [i for i, e in enumerate(head) if e[0] in ("array", "int")]
    adv_shapes = []
    for i in adv_pos:
        e = head[i]
        adv_shapes.append(() if e[0] == "int" else tuple(e[1].shape))
    try:
        bshape = _broadcast(adv_shapes)
    except ValueError:
        raise IndexError(f"{op}: shape mismatch: indexing arrays could not be broadcast together "
                         f"with shapes {' '.join(str(s) for s in adv_shapes)}") from None
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos))) if adv_pos else True
    # Output layout of the head: (kind, payload) per output dim group, in NumPy's order.
    layout = []
    if not adjacent:
        layout.append(("B",))
    for i, e in enumerate(head):
        kind = e[0]
        if kind == "slice":
            layout.append(("S", i))
        elif kind == "none":
            layout.append(("N",))
        elif adjacent and adv_pos and i == adv_pos[0]:
            layout.append(("B",))
    batch_shape = []
    position = {}
    for item in layout:
        if item[0] == "B":
            position["B"] = len(batch_shape)
            batch_shape.extend(bshape)
        elif item[0] == "N":
            batch_shape.append(1)
        else:
            e = head[item[1]]
            position[item[1]] = len(batch_shape)
            batch_shape.append(len(range(*e[1].indices(e[2]))))
    nb = len(batch_shape)
    indices = []
    for i, e in enumerate(head):
        kind = e[0]
        if kind == "slice":
            q = position[i]
            ar = np.arange(*e[1].indices(e[2]), dtype=np.intp)
            indices.append(ar.reshape((len(ar),) + (1,) * (nb - q - 1)))
        elif kind == "int":
            trail = nb - position["B"] - len(bshape)
            indices.append(np.full((1,) * trail, e[1], dtype=np.intp) if trail else
                           np.asarray(e[1], dtype=np.intp))
        elif kind == "array" and e[2] == 1:
            arr = e[1]
            trail = nb - position["B"] - len(bshape)
            if trail:
                new = tuple(arr.shape) + (1,) * trail
                arr = arr.reshape(new) if isinstance(arr, np.ndarray) else \
                    shape_lax.reshape(arr, new)
            indices.append(arr)
    index_shape = _broadcast([tuple(np.shape(a)) if isinstance(a, np.ndarray)
                              else tuple(a.shape) for a in indices])
    return indices, tuple(batch_shape), tuple(index_shape), window


def _broadcast(shapes):
    if all(type(d) is int for s in shapes for d in s):
        return np.broadcast_shapes(*shapes)
    from .elementwise_family import broadcast_shapes  # symbolic dims (dynamic shapes)
    return broadcast_shapes("index", *shapes)


def as_operands(indices):
    """NumPy index arrays become (constant) Arrays; Arrays and Tracers pass through."""
    return [wrap(a, False) if isinstance(a, np.ndarray) else a for a in indices]


def numpy_index(idx):
    """The index with Arrays replaced by their buffers (for the eager NumPy path), or None if it
    holds anything traced."""
    if type(idx) is tuple:
        out = []
        for item in idx:
            t = type(item)
            if t is Array:
                out.append(item._buf)
            elif isinstance(item, Tracer):
                return None
            elif t is list or t is tuple:
                if _contains_tracer(item) or _contains_array(item):
                    return None
                out.append(item)
            else:
                out.append(item)
        return tuple(out)
    if type(idx) is Array:
        return idx._buf
    if isinstance(idx, Tracer):
        return None
    if type(idx) is list and (_contains_tracer(idx) or _contains_array(idx)):
        return None
    return idx


def _contains_array(seq):
    for v in seq:
        if type(v) is Array or isinstance(v, (list, tuple)) and _contains_array(v):
            return True
    return False

