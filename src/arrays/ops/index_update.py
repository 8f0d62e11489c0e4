"""Functional index updates: ``x.at[idx].set(v)`` / add / subtract / multiply / divide / power /
min / max / apply / get (JAX's API; Starling arrays are immutable).

``x.at[idx].op(v)`` returns a NEW array equal to ``x`` except at ``x[idx]``, where the elements
are combined with ``v`` (broadcast to the shape of ``x[idx]`` and cast to the dtype of ``x``,
NumPy ``astype`` semantics: a float into an int array truncates, complex into real keeps the
real part, as JAX does).

Duplicate indices: ``add`` / ``subtract`` / ``multiply`` / ``min`` / ``max`` combine EVERY
update (``np.add.at`` semantics: ``x.at[[0, 0]].add(1)`` adds 2); ``set`` keeps the LAST update
in C order of the indexed shape, deterministically; ``divide`` / ``power`` / ``apply`` read
``x[idx]`` once, combine, and set (so a duplicated index is combined once, with its last value).

Derivatives (rules in gather_scatter.py) follow these semantics: with duplicate indices ``set``
differentiates only through the update that is kept (the last one) and not through the
overwritten elements of ``x``; ``add`` sends the output cotangent at an element to ``x`` and to
every update written there; ``multiply`` uses the product rule over all duplicates (exact at zero
updates); ``min`` / ``max`` send it to the selected value, split equally between tied
contributors (``x`` and/or updates). Dropped out-of-bounds updates get a zero gradient.

Out-of-bounds indices follow ``mode`` (see gather_scatter.py): updates default to "drop" (the
update is ignored), ``get`` defaults to "clip"; "fill" with ``fill_value`` is available for
``get``. Negative indices wrap once first. Python int indices are treated like index arrays
here (JAX's behaviour), so ``x.at[5].set(1)`` on a length-3 ``x`` is a no-op, not an error.

Boolean masks: a concrete mask becomes its ``nonzero()`` indices. A *traced* mask covering the
leading dims (``x.at[mask]``, optionally followed by ``...`` / ``:``) is supported for the update
ops (not ``get``) through an elementwise select, since the result shape does not depend on the
mask; then ``v`` must broadcast against ``x`` (it cannot have one row per True element).
"""
from __future__ import annotations

import math

import numpy as np

from ...core import casting, dtypes
from ...core.trace import EVAL_TRACE, current_trace
from ..array import Array, wrap
from ..convert import operand
from . import shape_lax
from .convert_element_type import convert_element_type
from .elementwise_family import broadcast_shapes
from .gather_scatter import GATHER_MODES, choose_p, scatter
from .index_parse import _mask_message, as_operands, gather_form, numpy_index, parse

_UPDATE_MODES = (None, "drop", "fill", "clip", "wrap", "promise_in_bounds")


def _ns():
    from .. import numpy as snp  # the namespace imports this module: look it up lazily
    return snp


def cast_updates(op, x, v):
    """``v`` as an operand of x's dtype (strong): Python scalars are built at that dtype."""
    dt = x.dtype
    if type(v) in (bool, int, float, complex):
        if isinstance(v, int) and not isinstance(v, bool) and dtypes.is_integer(dt):
            info = np.iinfo(dt)
            if not info.min <= v <= info.max:
                raise OverflowError(f"{op}: Python int {v} is out of range for {dt} "
                                    f"[{info.min}, {info.max}]")
        if isinstance(v, complex) and not dtypes.is_complex(dt):
            v = v.real
        return wrap(np.asarray(casting.scalar(v, dt)), False)
    v = operand(v, op)
    return convert_element_type(v, dt, False) if v.dtype != dt or v.weak_type else v


def broadcast_updates(op, v, shape):
    """Broadcasts ``v`` to ``shape`` (NumPy assignment rules: extra leading 1s are dropped)."""
    vshape = tuple(v.shape)
    if vshape == tuple(shape):
        return v
    extra = len(vshape) - len(shape)
    if extra > 0:
        if any(d != 1 for d in vshape[:extra]):
            raise ValueError(f"{op}: cannot broadcast updates of shape {vshape} to the indexed "
                             f"shape {tuple(shape)}")
        v = shape_lax.reshape(v, vshape[extra:])
        vshape = vshape[extra:]
    lead = len(shape) - len(vshape)
    for d, s in zip(vshape, shape[lead:]):
        if d != 1 and d != s:
            raise ValueError(f"{op}: cannot broadcast updates of shape {vshape} to the indexed "
                             f"shape {tuple(shape)}")
    return shape_lax.broadcast_in_dim(v, tuple(shape), tuple(range(lead, len(shape))))


def _check_mode(op, mode, valid):
    if mode not in valid:
        raise ValueError(f"{op}: mode must be one of "
                         f"{', '.join(repr(m) for m in valid if m is not None)}, got {mode!r}")


def scatter_index(x, idx, v, *, op, mode, unique_indices, name, check_bounds=False):
    """``x`` with ``x[idx] <op>= v`` (op in set/add/multiply/min/max), functionally.

    ``check_bounds=True`` raises IndexError for static / concrete out-of-bounds indices (the
    NumPy-named ``put`` functions); otherwise ``mode`` handles them.
    """
    _check_mode(name, mode, _UPDATE_MODES)
    mode = mode or "drop"
    if type(x) is Array and current_trace() is EVAL_TRACE:
        np_idx = idx if op == "set" and _is_basic(idx) else (
            None if op == "set" else numpy_index(idx))
        if np_idx is not None:
            out = _eager_update(x, np_idx, v, op, name)
            if out is not None:
                return out
    masks = []
    entries = parse(name, x.shape, idx, check_bounds=check_bounds, masks=masks)
    v = cast_updates(name, x, v)
    if masks:
        return _masked_update(x, entries, v, op, name)
    indices, batch_shape, index_shape, window = gather_form(name, entries)
    out_shape = batch_shape + window
    v = broadcast_updates(name, v, out_shape)
    if math.prod(out_shape) == 0:
        return x
    if tuple(index_shape) != tuple(batch_shape):
        v = shape_lax.reshape(v, tuple(index_shape) + window)
    return scatter(x, v, *as_operands(indices), op=op, mode=mode,
                   unique_indices=unique_indices)


_BASIC_TYPES = (int, slice, type(None), type(Ellipsis))
_NP_UFUNCS = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


def _is_basic(idx):
    if type(idx) is tuple:
        return all(type(i) in _BASIC_TYPES for i in idx)
    return type(idx) in _BASIC_TYPES


def _eager_update(x, idx, v, op, name):
    # Concrete x and index: NumPy on a private copy. "set" comes here only for basic indices
    # (each element selected once); the accumulating ops use ufunc.at, whose duplicate handling
    # is ours. Anything NumPy rejects (out-of-bounds indices, bad shapes or types) returns None
    # and takes the general path, which applies the mode or raises Starling's message.
    v = cast_updates(name, x, v)
    if type(v) is not Array:
        return None
    out = np.array(x._buf, copy=True)
    try:
        if op == "set":
            out[idx] = v._buf
        else:
            _NP_UFUNCS[op].at(out, idx, v._buf)
    except (IndexError, ValueError, TypeError):
        return None
    return wrap(out, x._weak)


def _masked_update(x, entries, v, op, name):
    # Only `x.at[mask]` / `x.at[mask, ...]` with a traced mask over the leading dims: the result
    # has x's shape whatever the mask's values, so an elementwise select implements it.
    first = entries[0]
    rest = entries[1:]
    if first[0] != "mask" or any(e[0] != "sep" and (e[0] != "slice" or e[1] != slice(None))
                                 for e in rest):
        raise IndexError(_mask_message(name) + "; a traced mask is supported by .at[] only as "
                         "the sole index (x.at[mask] or x.at[mask, ...])")
    mask = first[1]
    shape = tuple(x.shape)
    try:
        if broadcast_shapes(name, tuple(v.shape), shape) != shape:
            raise ValueError
        vb = v  # the select below broadcasts it
    except ValueError:
        raise ValueError(f"{name}: with a traced boolean mask the updates must broadcast to the "
                         f"array's shape {shape}, got {tuple(v.shape)} (one value per True "
                         "element needs a concrete mask)") from None
    snp = _ns()
    if op == "set":
        new = vb
    elif op == "add":
        new = snp.add(x, vb)
    elif op == "multiply":
        new = snp.multiply(x, vb)
    elif op == "min":
        new = snp.minimum(x, vb)
    else:
        new = snp.maximum(x, vb)
    new = convert_element_type(new, x.dtype, x.weak_type)
    m = shape_lax.reshape(mask, tuple(mask.shape) + (1,) * (len(shape) - mask.ndim))
    return choose_p.bind(m, x, new, mode="clip")


class _IndexUpdateRef:
    """``x.at[idx]``: call one of its methods to get the updated array (see module docstring).

    Every method takes keyword-only ``mode=`` ("drop", "clip", "wrap", "fill",
    "promise_in_bounds"), ``indices_are_sorted=`` and ``unique_indices=`` (promises that let
    backends skip work; ``unique_indices=True`` with duplicates gives unspecified results).
    """

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def _update(self, v, op, mode, unique_indices, name):
        return scatter_index(self.array, self.index, v, op=op, mode=mode,
                             unique_indices=unique_indices, name=f"at[].{name}")

    def get(self, *, mode=None, fill_value=None, indices_are_sorted=False,
            unique_indices=False):
        """``x[idx]`` with out-of-bounds indices handled by ``mode`` (default "clip"; "fill"
        returns ``fill_value``: default NaN for inexact dtypes, the minimum of signed ints, the
        maximum of unsigned ints, True for bool)."""
        from .indexing import read_index
        _check_mode("at[].get", mode, (None,) + GATHER_MODES)
        if fill_value is not None:
            fill_value = _python_fill(fill_value)
        return read_index(self.array, self.index, mode or "clip", fill_value, "at[].get")

    def set(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x[idx] = values``; with duplicate indices the last update wins."""
        return self._update(values, "set", mode, unique_indices, "set")

    def add(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x[idx] += values``, accumulating duplicates (``np.add.at``)."""
        return self._update(values, "add", mode, unique_indices, "add")

    def subtract(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x[idx] -= values``, accumulating duplicates (``np.subtract.at``)."""
        neg = _ns().negative(cast_updates("at[].subtract", self.array, values))
        return self._update(neg, "add", mode, unique_indices, "subtract")

    def multiply(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x[idx] *= values``, accumulating duplicates (``np.multiply.at``)."""
        return self._update(values, "multiply", mode, unique_indices, "multiply")

    mul = multiply

    def min(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x[idx] = minimum(x[idx], values)`` over all duplicates (``np.minimum.at``; NaN
        propagates)."""
        return self._update(values, "min", mode, unique_indices, "min")

    def max(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x[idx] = maximum(x[idx], values)`` over all duplicates (``np.maximum.at``)."""
        return self._update(values, "max", mode, unique_indices, "max")

    def _read_modify_set(self, fn, mode, name):
        _check_mode(f"at[].{name}", mode, _UPDATE_MODES)
        read_mode = "clip" if mode in (None, "drop", "fill", "promise_in_bounds") else mode
        current = self.get(mode=read_mode)
        return self._update(fn(current), "set", mode, False, name)

    def divide(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x[idx] = x[idx] / values`` (true division; the result is cast back to x's dtype)."""
        return self._read_modify_set(lambda c: _ns().divide(c, values), mode, "divide")

    def power(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x[idx] = x[idx] ** values`` (cast back to x's dtype)."""
        return self._read_modify_set(lambda c: _ns().pow(c, values), mode, "power")

    def apply(self, func, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x[idx] = func(x[idx])`` for a unary elementwise ``func`` (applied once per indexed
        element, also for duplicated indices)."""
        return self._read_modify_set(func, mode, "apply")


def _python_fill(v):
    if isinstance(v, (np.generic, np.ndarray)) and np.ndim(v) == 0:
        return np.asarray(v).item()
    if type(v) in (bool, int, float, complex):
        return v
    raise TypeError(f"at[].get: fill_value must be a Python or NumPy scalar, got "
                    f"{type(v).__name__}")


class _IndexUpdateHelper:
    """The ``x.at`` property: ``x.at[idx]`` selects the elements a functional update acts on.

    Example: ``y = x.at[0, ::2].set(0.0)``; ``counts = counts.at[labels].add(1)``.
    """

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"
