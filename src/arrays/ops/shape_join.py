"""Joining, splitting and padding: concatenate / stack and friends, split family, unstack, pad.

Compositions of the shape_lax primitives (concatenate, slice, rev, pad, reshape,
broadcast_in_dim); re-exported by shape.py. Split points, pad widths and axes are static.
"""
from __future__ import annotations

import numpy as np

from ...core import casting, dtypes
from ...core.trace import EVAL_TRACE, Tracer, current_trace
from ..array import Array, wrap
from ..convert import operand
from .convert_element_type import convert_element_type
from .elementwise_family import promote_operands
from .shape_lax import (
    _static_ints, broadcast_in_dim, iota, normalize_axis, rev, slice_in_dim,
)
from .shape_lax import concatenate as lax_concatenate
from .shape_lax import pad as lax_pad
from .shape_lax import reshape as lax_reshape
from .shape_lax import squeeze as lax_squeeze

__all__ = [
    "concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack", "append",
    "split", "array_split", "hsplit", "vsplit", "dsplit", "unstack", "pad",
]


def _shapes_str(arrays):
    return ", ".join(str(tuple(a.shape)) for a in arrays)


def _as_list(op, arrays):
    if isinstance(arrays, (Array, Tracer)):
        # NumPy treats an array as the sequence of its sub-arrays along axis 0.
        if arrays.ndim == 0:
            raise TypeError(f"{op}: expected a sequence of arrays, got a 0-d array")
        return list(unstack(arrays))
    if isinstance(arrays, np.ndarray):
        return [operand(a, op) for a in arrays]
    try:
        arrays = list(arrays)
    except TypeError:
        raise TypeError(f"{op}: expected a sequence of arrays, got {type(arrays).__name__}") \
            from None
    if not arrays:
        raise ValueError(f"{op}: need at least one array to join")
    return arrays


def _promoted(op, arrays, dtype):
    first = arrays[0]
    if not (type(first) is Array and all(
            type(a) is Array and a._buf.dtype == first._buf.dtype and a._weak == first._weak
            for a in arrays)):
        arrays = promote_operands(op, arrays, "data")
    if dtype is not None:
        dt = dtypes.canonicalize(dtype)
        arrays = [convert_element_type(a, dt, False) for a in arrays]
    return arrays


def _join(op, arrays, axis):
    """Concatenates already-promoted arrays along ``axis`` with NumPy's checks."""
    first = arrays[0]
    rank = first.ndim
    if any(a.ndim == 0 for a in arrays):
        raise ValueError(f"{op}: zero-dimensional arrays cannot be concatenated, got shapes "
                         f"{_shapes_str(arrays)}")
    if any(a.ndim != rank for a in arrays):
        raise ValueError(f"{op}: all input arrays must have the same number of dimensions, got "
                         f"shapes {_shapes_str(arrays)}")
    ax = normalize_axis(op, axis, rank)
    for a in arrays:
        if any(d != e for i, (d, e) in enumerate(zip(a.shape, first.shape)) if i != ax):
            raise ValueError(f"{op}: all input array dimensions except for the concatenation "
                             f"axis {ax} must match, got shapes {_shapes_str(arrays)}")
    return lax_concatenate(arrays, ax)


def concatenate(arrays, axis=0, *, dtype=None):
    """Joins arrays along an existing axis (NumPy ``concatenate``).

    Args:
        arrays: a sequence of arrays of shapes ``(*pre, n_i, *post)`` (same rank, equal dims
            except on ``axis``); dtypes promote (JAX rules).
        axis: the axis to join along (negative allowed), or None to flatten every input first.
        dtype: cast the inputs to this dtype instead of promoting.
    Returns:
        Array of shape ``(*pre, sum(n_i), *post)``.
    Raises:
        ValueError: empty sequence, 0-d inputs, rank mismatch, dim mismatch off ``axis`` (the
            message lists every shape). AxisError: ``axis`` out of range. TypeError: dtypes that
            do not promote (float8 with float32, ...).
    """
    if dtype is None and (type(arrays) is list or type(arrays) is tuple) and len(arrays) > 1 \
            and (axis is None or type(axis) is int) and current_trace() is EVAL_TRACE:
        out = _eager_concatenate(arrays, axis)
        if out is not None:
            return out
    arrays = _promoted("concatenate", _as_list("concatenate", arrays), dtype)
    if axis is None:
        arrays = [lax_reshape(a, (a.size,)) for a in arrays]
        axis = 0
    return _join("concatenate", arrays, axis)


def _eager_concatenate(arrays, axis):
    """np.concatenate of concrete Arrays of one dtype and weak type (no promotion needed), or
    None: NumPy's checks accept exactly the valid calls; others take the checked path."""
    first = arrays[0]
    if type(first) is not Array:
        return None
    dt, weak = first._buf.dtype, first._weak
    bufs = []
    for a in arrays:
        if type(a) is not Array or a._weak != weak:
            return None
        b = a._buf
        if b.dtype != dt or b.ndim == 0:
            return None
        bufs.append(b)
    try:
        return wrap(np.concatenate(bufs, axis=axis), weak)
    except Exception:  # noqa: BLE001  (the checked path raises the error naming the op)
        return None


def concat(arrays, /, *, axis=0):
    """Array API name of ``concatenate`` (tuple or list of arrays; ``axis=None`` flattens)."""
    return concatenate(arrays, axis)


def stack(arrays, axis=0, *, dtype=None):
    """Joins arrays of one shape ``(*dims)`` along a new axis.

    Args:
        arrays: sequence of k arrays of identical shape; dtypes promote.
        axis: position of the new axis in the result (``-(ndim+1)..ndim``).
    Returns:
        Array of shape ``(*dims[:axis], k, *dims[axis:])``.
    Raises:
        ValueError: empty sequence or differing shapes. AxisError: ``axis`` out of range.
    """
    arrays = _promoted("stack", _as_list("stack", arrays), dtype)
    shape = tuple(arrays[0].shape)
    if any(tuple(a.shape) != shape for a in arrays):
        raise ValueError(f"stack: all input arrays must have the same shape, got shapes "
                         f"{_shapes_str(arrays)}")
    ax = normalize_axis("stack", axis, len(shape) + 1)
    new = shape[:ax] + (1,) + shape[ax:]
    return lax_concatenate([lax_reshape(a, new) for a in arrays], ax)


def _atleast(arrays, n):
    out = []
    for a in arrays:
        s = tuple(a.shape)
        if len(s) < n:
            if n == 3 and len(s) == 1:
                s = (1, s[0], 1)
            elif n == 3 and len(s) == 2:
                s = s + (1,)
            else:
                s = (1,) * (n - len(s)) + s
            a = lax_reshape(a, s)
        out.append(a)
    return out


def hstack(tup, *, dtype=None):
    """Joins along axis 1 (axis 0 for 1-D inputs); 0-d inputs count as shape (1,)."""
    arrays = _atleast(_promoted("hstack", _as_list("hstack", tup), dtype), 1)
    return _join("hstack", arrays, 0 if arrays[0].ndim == 1 else 1)


def vstack(tup, *, dtype=None):
    """Joins along axis 0 after making inputs at least 2-D ((N,) -> (1, N))."""
    arrays = _atleast(_promoted("vstack", _as_list("vstack", tup), dtype), 2)
    return _join("vstack", arrays, 0)


def dstack(tup, *, dtype=None):
    """Joins along axis 2 after making inputs at least 3-D: (N,) -> (1, N, 1),
    (M, N) -> (M, N, 1)."""
    arrays = _atleast(_promoted("dstack", _as_list("dstack", tup), dtype), 3)
    return _join("dstack", arrays, 2)


def column_stack(tup, /):
    """Joins 1-D arrays as columns ((N,) -> (N, 1)) and 2-D arrays along axis 1."""
    arrays = _promoted("column_stack", _as_list("column_stack", tup), None)
    cols = []
    for a in arrays:
        if a.ndim == 0:
            a = lax_reshape(a, (1, 1))
        elif a.ndim == 1:
            a = lax_reshape(a, (a.shape[0], 1))
        cols.append(a)
    return _join("column_stack", cols, 1)


def append(arr, values, axis=None):
    """``arr`` with ``values`` appended along ``axis`` (None: both flattened first)."""
    arr, values = promote_operands("append", [arr, values], "data")
    if axis is None:
        return lax_concatenate([lax_reshape(arr, (arr.size,)), lax_reshape(values, (values.size,))],
                               0)
    return _join("append", [arr, values], axis)


# ---- splitting ------------------------------------------------------------------------------

def _split_points(op, value):
    return _static_ints(op, "indices_or_sections", value)


def _pieces(x, bounds, axis):
    n = x.shape[axis]
    out = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        if type(n) is int:
            s, e, _ = slice(start, stop).indices(n)
        else:  # a symbolic dim (dynamic shapes)
            from .index_parse import symbolic_slice_indices
            s, e, _, _ = symbolic_slice_indices(slice(start, stop), n)
        out.append(slice_in_dim(x, s, max(s, e), 1, axis))
    return out


def _split(op, x, indices_or_sections, axis, equal):
    x = operand(x, op)
    if x.ndim == 0:
        raise ValueError(f"{op}: cannot split a 0-d array")
    axis = normalize_axis(op, axis, x.ndim)
    n = x.shape[axis]
    spec = _split_points(op, indices_or_sections)
    if isinstance(spec, list):
        return _pieces(x, [0] + list(spec) + [None], axis)
    if spec <= 0:
        raise ValueError(f"{op}: number of sections must be larger than 0, got {spec}")
    if equal and n % spec:
        raise ValueError(f"{op}: array split does not result in an equal division: axis {axis} "
                         f"of size {n} into {spec} sections (use array_split for uneven pieces)")
    each, extra = divmod(n, spec)
    bounds = [0]
    for i in range(spec):
        bounds.append(bounds[-1] + each + (1 if i < extra else 0))
    return _pieces(x, bounds, axis)


def split(x, indices_or_sections, axis=0):
    """Splits ``x`` into sub-arrays along ``axis`` (NumPy ``split``); returns a list.

    Args:
        x: array of ndim >= 1.
        indices_or_sections: an int k (k equal pieces) or a sorted sequence of split indices
            (pieces ``x[:i0], x[i0:i1], ..., x[ik:]`` with Python slice semantics).
        axis: the axis to split.
    Raises:
        ValueError: k does not divide the axis size, k <= 0, or a 0-d input.
        AxisError: ``axis`` out of range.
    """
    return _split("split", x, indices_or_sections, axis, True)


def array_split(x, indices_or_sections, axis=0):
    """Like ``split`` but k sections need not divide the axis: the first ``n % k`` pieces get one
    element more."""
    return _split("array_split", x, indices_or_sections, axis, False)


def hsplit(x, indices_or_sections):
    """``split`` along axis 1 (axis 0 for 1-D arrays)."""
    x = operand(x, "hsplit")
    if x.ndim == 0:
        raise ValueError("hsplit: only works on arrays of 1 or more dimensions")
    return _split("hsplit", x, indices_or_sections, 1 if x.ndim > 1 else 0, True)


def vsplit(x, indices_or_sections):
    """``split`` along axis 0 of an array of ndim >= 2."""
    x = operand(x, "vsplit")
    if x.ndim < 2:
        raise ValueError(f"vsplit: only works on arrays of 2 or more dimensions, got shape "
                         f"{tuple(x.shape)}")
    return _split("vsplit", x, indices_or_sections, 0, True)


def dsplit(x, indices_or_sections):
    """``split`` along axis 2 of an array of ndim >= 3."""
    x = operand(x, "dsplit")
    if x.ndim < 3:
        raise ValueError(f"dsplit: only works on arrays of 3 or more dimensions, got shape "
                         f"{tuple(x.shape)}")
    return _split("dsplit", x, indices_or_sections, 2, True)


def unstack(x, /, *, axis=0):
    """Splits ``x`` along ``axis`` into a tuple of ``x.shape[axis]`` arrays without that axis
    (Array API 2023.12).

    Raises:
        ValueError: ``x`` is 0-d. AxisError: ``axis`` out of range.
    """
    x = operand(x, "unstack")
    if x.ndim == 0:
        raise ValueError("unstack: expected an array of ndim >= 1, got a 0-d array")
    axis = normalize_axis("unstack", axis, x.ndim)
    return tuple(lax_squeeze(slice_in_dim(x, i, i + 1, 1, axis), (axis,))
                 for i in range(x.shape[axis]))


# ---- pad ------------------------------------------------------------------------------------

_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap", "empty", "linear_ramp",
              "maximum", "minimum", "mean", "median")
_PAD_KWARGS = {"constant": {"constant_values"}, "reflect": {"reflect_type"},
               "symmetric": {"reflect_type"}, "linear_ramp": {"end_values"},
               "maximum": {"stat_length"}, "minimum": {"stat_length"}, "mean": {"stat_length"},
               "median": {"stat_length"}}


def _snp():
    from .. import numpy as snp  # arithmetic and reductions live in other families
    return snp


def _pairs(op, name, value, ndim, kind):
    try:
        arr = np.asarray(value)
        if kind == "int":
            if arr.dtype.kind not in "iu":
                raise TypeError(f"{op}: {name} must be integers, got {value!r}")
        return np.broadcast_to(arr, (ndim, 2)).tolist()
    except ValueError:
        raise ValueError(f"{op}: {name} {value!r} cannot be broadcast to one (before, after) "
                         f"pair per axis of an array of ndim {ndim}") from None


def _stat_pairs(op, value, ndim):
    """``stat_length`` as one (before, after) pair per axis; None means the whole axis."""
    if value is None:
        return [[None, None]] * ndim
    pairs = _pairs(op, "stat_length", value, ndim, "int")
    if any(v < 0 for pair in pairs for v in pair):
        raise ValueError(f"{op}: stat_length must be non-negative, got {value!r}")
    return pairs
def _pad_scalar(op, value, x):
    """``value`` as a 0-d operand of x's dtype and weak type (NumPy casts the constant)."""
    dt = x.dtype
    if isinstance(value, (Array, Tracer)):
        if value.ndim != 0:
            raise ValueError(f"{op}: constant_values must be scalars, got shape {value.shape}")
        return convert_element_type(value, dt, x.weak_type)
    try:
        if isinstance(value, complex) and not dtypes.is_complex(dt):
            raise TypeError("complex value for a real array")
        buf = np.asarray(casting.scalar(value, dt))
    except OverflowError:
        raise OverflowError(f"{op}: constant value {value!r} is out of range for {dt}") from None
    except (TypeError, ValueError):
        raise TypeError(f"{op}: constant value {value!r} cannot be converted to {dt}") from None
    if buf.ndim != 0:
        raise ValueError(f"{op}: constant_values must be scalars, got {value!r}")
    return wrap(buf, x.weak_type)


def _gather_runs(x, idx, axis):
    """``take(x, idx, axis)`` for a static index list made of +1 / -1 / 0-step runs, as slices,
    reversals and broadcasts joined by one concatenate."""
    pieces = []
    i, m = 0, len(idx)
    while i < m:
        j, step = i, 0
        if i + 1 < m and idx[i + 1] - idx[i] in (-1, 0, 1):
            step = idx[i + 1] - idx[i]
            while j + 1 < m and idx[j + 1] - idx[j] == step:
                j += 1
        a, b = idx[i], idx[j]
        if step == 0:
            piece = slice_in_dim(x, a, a + 1, 1, axis)
            if j > i:
                shape = list(piece.shape)
                shape[axis] = j - i + 1
                piece = broadcast_in_dim(piece, tuple(shape), tuple(range(len(shape))))
        elif step == 1:
            piece = slice_in_dim(x, a, b + 1, 1, axis)
        else:
            piece = rev(slice_in_dim(x, b, a + 1, 1, axis), (axis,))
        pieces.append(piece)
        i = j + 1
    return lax_concatenate(pieces, axis)


def pad(array, pad_width, mode="constant", **kwargs):
    """Pads an array (NumPy ``pad``, all of NumPy's string modes).

    Axes are padded one after the other (axis 0 first), each mode reading the array as padded
    so far, so corners follow NumPy exactly.

    Args:
        array: array of shape ``(d0, ..., dn-1)``.
        pad_width: int, ``(before, after)``, or one ``(before_i, after_i)`` per axis
            (non-negative ints).
        mode: "constant" (``constant_values``, default 0: a scalar, a 0-d array, or per-axis
            pairs, cast to the array's dtype); "edge"; "reflect" / "symmetric" (mirror without /
            with the edge value; ``reflect_type="odd"`` mirrors ``2 * edge - x``); "wrap";
            "linear_ramp" (from ``end_values``, default 0, to the edge value, computed in
            float64 / complex128 as NumPy and floored for integer dtypes); "maximum",
            "minimum", "mean", "median" (the statistic of the ``stat_length`` values nearest
            each edge, default the whole axis; rounded half-to-even for integer dtypes); or
            "empty" (zeros here). Pads longer than the axis follow NumPy (repeated reflections).
        **kwargs: ``constant_values``, ``end_values``, ``stat_length``, ``reflect_type``
            ("even" or "odd"), each only with the modes above.
    Returns:
        Array of shape ``(d0 + before_0 + after_0, ...)``, same dtype.
    Raises:
        ValueError: negative widths or stat lengths, values that do not broadcast to
            ``(ndim, 2)``, an unknown mode, keyword or reflect_type, a non-constant mode
            extending an empty axis, or ``stat_length=0`` with "maximum" / "minimum".
        TypeError: a callable mode (NumPy's callables write into the array in place; Starling
            arrays are immutable), or "median" of a complex array (no order).
    """
    op = "pad"
    x = operand(array, op)
    ndim = x.ndim
    widths = _pairs(op, "pad_width", pad_width, ndim, "int")
    if any(v < 0 for pair in widths for v in pair):
        raise ValueError(f"{op}: pad widths must be non-negative, got {pad_width!r}")
    if callable(mode):
        raise TypeError(f"{op}: callable modes are not supported (NumPy's pad callables modify "
                        "the array in place, and Starling arrays are immutable); supported "
                        f"modes: {', '.join(_PAD_MODES)}")
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise ValueError(f"{op}: unknown mode {mode!r}; supported modes: {', '.join(_PAD_MODES)}")
    extra = set(kwargs) - _PAD_KWARGS.get(mode, set())
    if extra:
        raise ValueError(f"{op}: unsupported keyword(s) {sorted(extra)} for mode {mode!r}")
    if mode in ("constant", "empty"):
        return _pad_constant(x, widths, kwargs.get("constant_values", 0))
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"{op}: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    if mode == "median" and dtypes.is_complex(x.dtype):
        raise TypeError(f"{op}: mode 'median' needs an ordered dtype, got {x.dtype}")
    if x.size == 0:
        # NumPy: only constant / empty can extend an empty axis; other axes pad to size 0.
        for ax, (lo, hi) in enumerate(widths):
            if x.shape[ax] == 0 and (lo or hi):
                raise ValueError(f"{op}: can't extend empty axis {ax} of shape "
                                 f"{tuple(x.shape)} using modes other than 'constant' or 'empty'")
        return _pad_constant(x, widths, 0)
    if mode == "linear_ramp":
        ends = kwargs.get("end_values", 0)
        if not (isinstance(ends, (Array, Tracer)) and ends.ndim == 0):
            ends = _pairs(op, "end_values", ends, ndim, "any")
        for ax, (lo, hi) in enumerate(widths):
            pair = (ends, ends) if isinstance(ends, (Array, Tracer)) else ends[ax]
            x = _pad_ramp(x, ax, lo, hi, pair)
        return x
    if mode in ("maximum", "minimum", "mean", "median"):
        lengths = _stat_pairs(op, kwargs.get("stat_length"), ndim)
        for ax, (lo, hi) in enumerate(widths):
            x = _pad_stat(x, ax, lo, hi, lengths[ax], mode)
        return x
    for ax, (lo, hi) in enumerate(widths):
        if lo == 0 and hi == 0:
            continue
        n = x.shape[ax]
        if reflect_type == "odd" and mode in ("reflect", "symmetric") and n > 1:
            x = _pad_reflect_odd(x, ax, lo, hi, mode == "symmetric")
            continue
        idx = np.pad(np.arange(n), (lo, hi), mode=mode).tolist()  # static indices only
        x = _gather_runs(x, idx, ax)
    return x


def _join3(left, mid, right, ax):
    parts = [p for p in (left, mid, right) if p is not None]
    return lax_concatenate(parts, ax) if len(parts) > 1 else mid


def _edge_of(x, ax, first):
    n = x.shape[ax]
    return slice_in_dim(x, 0, 1, 1, ax) if first else slice_in_dim(x, n - 1, n, 1, ax)


def _odd_mirror(edge, chunk):
    """``2 * edge - chunk`` in the array's dtype (integers wrap as in NumPy; bool goes through
    int64 and back to ``!= 0``, as NumPy's assignment does)."""
    snp = _snp()
    dt = chunk.dtype
    if dt == dtypes.bool_:
        e = convert_element_type(edge, dtypes.int64, False)
        c = convert_element_type(chunk, dtypes.int64, False)
        return convert_element_type(snp.subtract(snp.multiply(e, 2), c), dt, False)
    return snp.subtract(snp.multiply(edge, 2), chunk)


def _pad_reflect_odd(x, ax, lo, hi, symmetric):
    # NumPy's algorithm: while pad remains, mirror a chunk of the values filled so far (at most
    # a whole number of periods of the original axis) on each side, negated about the current
    # edge. Longer pads therefore keep extrapolating, as NumPy's do.
    n = x.shape[ax]
    while lo > 0 or hi > 0:
        m = x.shape[ax]
        span = (m // n * n) if symmetric else ((m - 1) // (n - 1) * (n - 1))
        off = 0 if symmetric else 1
        left = right = None
        if lo > 0:
            c = min(span, lo)
            chunk = rev(slice_in_dim(x, off, off + c, 1, ax), (ax,))
            left = _odd_mirror(_edge_of(x, ax, True), chunk)
            lo -= c
        if hi > 0:
            c = min(span, hi)
            chunk = rev(slice_in_dim(x, m - off - c, m - off, 1, ax), (ax,))
            right = _odd_mirror(_edge_of(x, ax, False), chunk)
            hi -= c
        x = _join3(left, x, right, ax)
    return x


def _ramp_dtype(dt):
    return dtypes.complex128 if dtypes.is_complex(dt) else dtypes.float64


def _ramp(x, ax, width, end, edge, outward):
    """NumPy's ``linspace(end, edge, width, endpoint=False)`` along ``ax`` (reversed when
    ``outward``), in float64 / complex128, then floored (integer dtypes) and cast to x's dtype."""
    snp = _snp()
    dt = x.dtype
    cdt = _ramp_dtype(dt)
    edge = convert_element_type(edge, cdt, False)
    end = _pad_scalar("pad", end, wrap(np.zeros((), cdt), False))
    delta = snp.subtract(edge, end)
    step = snp.divide(delta, width)
    shape = [1] * x.ndim
    shape[ax] = width
    k = iota(cdt, tuple(shape), ax)
    # NumPy switches to (k / width) * delta when any step is exactly 0 (denormal handling);
    # both forms are computed and the same one is selected, so integer floors agree with it.
    y = snp.where(snp.any(snp.equal(step, 0)), snp.multiply(snp.divide(k, width), delta),
                  snp.multiply(k, step))
    y = snp.add(y, end)
    if outward:
        y = rev(y, (ax,))
    if dtypes.is_integer(dt):
        y = snp.floor(y)
    return convert_element_type(y, dt, x.weak_type)


def _pad_ramp(x, ax, lo, hi, ends):
    left = right = None
    if lo > 0:
        left = _ramp(x, ax, lo, ends[0], _edge_of(x, ax, True), False)
    if hi > 0:
        right = _ramp(x, ax, hi, ends[1], _edge_of(x, ax, False), True)
    return _join3(left, x, right, ax)


def _side_stat(x, ax, start, length, mode):
    snp = _snp()
    part = slice_in_dim(x, start, start + length, 1, ax)
    dt = x.dtype
    if mode == "maximum":
        return snp.max(part, axis=ax, keepdims=True)
    if mode == "minimum":
        return snp.min(part, axis=ax, keepdims=True)
    exact = dtypes.is_integer(dt) or dt == dtypes.bool_
    if exact:
        part = convert_element_type(part, dtypes.float64, False)
    if mode == "mean" or length == 0:
        r = snp.mean(part, axis=ax, keepdims=True)
    else:
        r = _median(part, ax)
    if dtypes.is_integer(dt):
        r = snp.round(r)
    return convert_element_type(r, dt, x.weak_type)


def _median(part, ax):
    """NumPy's median along ``ax`` (keepdims): the mean of the one or two middle values of the
    sorted slice (so ``median([inf, inf])`` is inf), NaN if the slice holds a NaN."""
    snp = _snp()
    n = part.shape[ax]
    s = snp.sort(part, axis=ax)  # NaNs sort last
    mid = slice_in_dim(s, (n - 1) // 2, n // 2 + 1, 1, ax)
    r = snp.mean(mid, axis=ax, keepdims=True) if n % 2 == 0 else mid
    if dtypes.is_inexact(part.dtype):
        last = slice_in_dim(s, n - 1, n, 1, ax)
        r = snp.where(snp.isnan(last), last, r)
    return r


def _pad_stat(x, ax, lo, hi, lengths, mode):
    n = x.shape[ax]
    ln, rn = (n if v is None else min(v, n) for v in lengths)
    if (ln == 0 or rn == 0) and mode in ("maximum", "minimum"):
        raise ValueError(f"pad: stat_length of 0 yields no value for padding (mode {mode!r}, "
                         f"axis {ax})")
    left = right = None
    if lo > 0:
        left = _side_stat(x, ax, 0, ln, mode)
    if hi > 0:
        right = left if (ln == rn == n and left is not None) else _side_stat(x, ax, n - rn, rn,
                                                                              mode)
    left = None if left is None else _widen(left, ax, lo)
    right = None if right is None else _widen(right, ax, hi)
    return _join3(left, x, right, ax)


def _widen(v, ax, width):
    shape = list(v.shape)
    shape[ax] = width
    return broadcast_in_dim(v, tuple(shape), tuple(range(len(shape))))


def _pad_constant(x, widths, constant_values):
    ndim = x.ndim
    if isinstance(constant_values, (Array, Tracer)) or np.ndim(constant_values) == 0:
        value = _pad_scalar("pad", constant_values, x)  # (arrays must be 0-d)
        return lax_pad(x, value, [(lo, hi, 0) for lo, hi in widths])
    values = _pairs("pad", "constant_values", constant_values, ndim, "any")
    for ax, ((lo, hi), (vlo, vhi)) in enumerate(zip(widths, values)):
        for config, v in (((lo, 0, 0), vlo), ((0, hi, 0), vhi)):
            if config != (0, 0, 0):
                cfg = [(0, 0, 0)] * ndim
                cfg[ax] = config
                x = lax_pad(x, _pad_scalar("pad", v, x), cfg)
    return x
