"""NumPy's index helpers: tril_indices / triu_indices / diag_indices (and ``*_from``),
fill_diagonal (functional), ix_, and the index objects mgrid, ogrid, r_, c_, s_, index_exp.

The ``*_indices`` functions depend only on static sizes, so they are computed once in NumPy and
become int64 constants (in a staged program too). ``fill_diagonal`` is a scatter into the
flattened array: it returns a new array (Starling arrays are immutable) and is differentiable in
both the array and the values. ``mgrid`` / ``ogrid`` / ``r_`` / ``c_`` build their results from
``arange`` / ``linspace`` / ``concatenate``, so array items may be traced.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ...core import dtypes
from ...core.trace import Tracer
from ..array import Array, wrap
from ..convert import operand
from .reductions import _ns

__all__ = ["tril_indices", "triu_indices", "tril_indices_from", "triu_indices_from",
           "diag_indices", "diag_indices_from", "fill_diagonal", "ix_", "mgrid", "ogrid", "r_",
           "c_", "s_", "index_exp"]

_I64 = np.dtype(np.int64)


def _int(op, name, v, allow_none=False):
    if v is None and allow_none:
        return None
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be an int, got a bool")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {type(v).__name__}") from None


def _const_index(idx):
    return wrap(np.asarray(idx, dtype=_I64), False)


def _index_arrays(arrays):
    return tuple(_const_index(a) for a in arrays)


def tril_indices(n, k=0, m=None):
    """Row and column indices of the lower triangle (``j <= i + k``) of an ``(n, m)`` matrix.

    Args:
        n: number of rows (int >= 0). k: diagonal offset (0 main, > 0 above, < 0 below).
        m: number of columns (default ``n``).
    Returns:
        ``(rows, cols)``: two int64 arrays of shape ``(count,)`` in row-major order.
    Raises:
        TypeError: a non-integer argument. ValueError: negative ``n`` or ``m``.
    """
    return _tri_indices("tril_indices", n, k, m, np.tril_indices)


def triu_indices(n, k=0, m=None):
    """Row and column indices of the upper triangle (``j >= i + k``) of an ``(n, m)`` matrix.

    Same arguments, result and errors as ``tril_indices``.
    """
    return _tri_indices("triu_indices", n, k, m, np.triu_indices)


def _tri_indices(op, n, k, m, fn):
    n, k, m = _int(op, "n", n), _int(op, "k", k), _int(op, "m", m, allow_none=True)
    if n < 0 or (m is not None and m < 0):
        raise ValueError(f"{op}: n and m must be non-negative, got n={n}, m={m}")
    return _index_arrays(fn(n, k, m))


def _matrix_shape(op, arr):
    shape = tuple(operand(arr, op).shape)
    if len(shape) != 2:
        raise ValueError(f"{op}: expected a 2-D array, got shape {shape}")
    return shape


def tril_indices_from(arr, k=0):
    """``tril_indices(n, k, m)`` for the shape ``(n, m)`` of the 2-D array ``arr``.

    Raises:
        ValueError: ``arr`` is not 2-D.
    """
    n, m = _matrix_shape("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    """``triu_indices(n, k, m)`` for the shape ``(n, m)`` of the 2-D array ``arr``.

    Raises:
        ValueError: ``arr`` is not 2-D.
    """
    n, m = _matrix_shape("triu_indices_from", arr)
    return triu_indices(n, k, m)


def diag_indices(n, ndim=2):
    """Indices of the main diagonal of an ``(n,) * ndim`` array: ``ndim`` copies of
    ``arange(n)`` (int64, shape ``(n,)``).

    Raises:
        TypeError: a non-integer argument. ValueError: negative ``n`` or ``ndim``.
    """
    n, ndim = _int("diag_indices", "n", n), _int("diag_indices", "ndim", ndim)
    if n < 0 or ndim < 0:
        raise ValueError(f"diag_indices: n and ndim must be non-negative, got n={n}, "
                         f"ndim={ndim}")
    return _index_arrays([np.arange(n)] * ndim)


def diag_indices_from(arr):
    """``diag_indices(n, arr.ndim)`` for an array whose dims all equal ``n``.

    Raises:
        ValueError: ``arr`` has fewer than 2 dims or dims of different lengths.
    """
    shape = tuple(operand(arr, "diag_indices_from").shape)
    if len(shape) < 2:
        raise ValueError(f"diag_indices_from: input must be at least 2-D, got shape {shape}")
    if len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: all dims of the input must have equal length, "
                         f"got shape {shape}")
    return diag_indices(shape[0], len(shape))


def _diagonal_flat_indices(shape, wrap_):
    if len(shape) == 2:
        rows, cols = shape
        step = cols + 1
        end = None if wrap_ else cols * cols  # past `end`, a tall matrix would wrap around
        return np.arange(0, rows * cols if end is None else min(end, rows * cols), step)
    step = 1 + int(np.cumprod(shape[:-1]).sum())
    return np.arange(0, math.prod(shape), step)


def fill_diagonal(a, val, wrap=False, *, inplace=False):
    """``a`` with its main diagonal set to ``val`` (NumPy ``fill_diagonal``, functional).

    The diagonal is the positions ``a[i, i, ..., i]``. For a tall 2-D matrix with
    ``wrap=True`` the diagonal restarts every ``m + 1`` rows (NumPy's flat-index rule).
    ``val`` is flattened and repeated cyclically to the diagonal's length.

    Args:
        a: array of shape ``(n, m)``, or ``(n,) * ndim`` with ndim > 2.
        val: scalar or array of values, cast to ``a``'s dtype.
        wrap: continue the diagonal below row ``m`` of a tall matrix (NumPy).
        inplace: must be False: arrays are immutable, the filled array is returned.
    Returns:
        Array of ``a``'s shape and dtype. Differentiable in ``a`` (zero gradient on the
        diagonal) and ``val``.
    Raises:
        ValueError: ``inplace=True``; ``a`` has fewer than 2 dims; an nd array (ndim > 2)
            whose dims differ; an empty ``val`` for a non-empty diagonal.
    """
    if inplace:
        raise ValueError("fill_diagonal: Starling arrays are immutable; call "
                         "a = fill_diagonal(a, val, inplace=False) to get the filled array")
    snp = _ns()
    a = operand(a, "fill_diagonal")
    shape = tuple(a.shape)
    if len(shape) < 2:
        raise ValueError(f"fill_diagonal: array must be at least 2-D, got shape {shape}")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ValueError(f"fill_diagonal: all dims of an array with ndim > 2 must have equal "
                         f"length, got shape {shape}")
    idx = _diagonal_flat_indices(shape, bool(wrap))
    v = snp.ravel(snp.astype(operand(val, "fill_diagonal"), a.dtype))
    if idx.size == 0:
        return a
    if v.shape[0] == 0:
        raise ValueError("fill_diagonal: val is empty but the diagonal is not")
    if v.shape[0] != idx.size:
        v = snp.take(v, _const_index(np.arange(idx.size) % v.shape[0]))
    flat = snp.ravel(a).at[_const_index(idx)].set(v)
    return snp.reshape(flat, shape)


def ix_(*args):
    """Open mesh from 1-D index sequences: the k-th output has shape ``(1, ..., n_k, ..., 1)``
    so that ``x[ix_(rows, cols)]`` selects the cross product (NumPy ``ix_``).

    Args:
        *args: 1-D integer arrays / sequences, or 1-D bool masks (replaced by their nonzero
            indices, so they must be concrete).
    Returns:
        Tuple of ``len(args)`` arrays; integer inputs keep their dtype, empty lists are int64.
    Raises:
        ValueError: an argument is not 1-D. TypeError: a non-integer, non-bool argument.
    """
    snp = _ns()
    k = len(args)
    out = []
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)) and len(a) == 0:
            a = wrap(np.zeros((0,), _I64), False)
        a = operand(a, "ix_")
        if a.ndim != 1:
            raise ValueError(f"ix_: argument {i} must be 1-D, got shape {tuple(a.shape)}")
        if dtypes.is_bool(a.dtype):
            a = snp.nonzero(a)[0]
        elif not dtypes.is_integer(a.dtype):
            raise TypeError(f"ix_: arguments must be integer or bool sequences, argument {i} "
                            f"has dtype {a.dtype}")
        out.append(snp.reshape(a, (1,) * i + (a.shape[0],) + (1,) * (k - i - 1)))
    return tuple(out)


# ---- index objects ------------------------------------------------------------------------------

def _is_float(v):
    return isinstance(v, (float, np.floating)) or (
        isinstance(v, (Array, Tracer, np.ndarray)) and dtypes.is_inexact(np.dtype(v.dtype)))


def _slice_range(op, s):
    """The 1-D array a slice item stands for: arange(start, stop, step), or linspace(start,
    stop, n) inclusive when the step is imaginary ``n * 1j`` (NumPy's convention)."""
    snp = _ns()
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if s.stop is None:
        raise ValueError(f"{op}: a slice needs a stop value, got {s}")
    if isinstance(step, (complex, np.complexfloating)):
        n = int(abs(step))
        return snp.linspace(start, s.stop, n)
    floating = any(_is_float(v) for v in (start, s.stop, step))
    if floating:
        return snp.arange(float(start), float(s.stop), float(step))
    return snp.arange(start, s.stop, step)


class _Grid:
    """``mgrid`` / ``ogrid``: ``mgrid[0:3, 0:4]`` is the dense ``(2, 3, 4)`` coordinate array,
    ``ogrid[0:3, 0:4]`` the open pair of shapes ``(3, 1)`` and ``(1, 4)``. Each slice is
    ``arange(start, stop, step)``, or ``linspace(start, stop, n)`` (stop included) for an
    imaginary step ``n * 1j``; float endpoints or steps give float32, otherwise int64; all
    coordinates share the promoted dtype."""

    def __init__(self, sparse, name):
        self._sparse = sparse
        self._name = name

    def __getitem__(self, key):
        snp = _ns()
        op = self._name
        if isinstance(key, slice):
            return _slice_range(op, key)
        if not isinstance(key, tuple) or not all(isinstance(s, slice) for s in key):
            raise TypeError(f"{op}: index with slices, e.g. {op}[0:3, 0:4:0.5] or "
                            f"{op}[0:1:5j], got {key!r}")
        ranges = [_slice_range(op, s) for s in key]
        if not ranges:
            return [] if self._sparse else snp.zeros((0,), dtype=snp.int64)
        dt = snp.result_type(*ranges)
        ranges = [snp.astype(r, dt) for r in ranges]
        grids = snp.meshgrid(*ranges, indexing="ij", sparse=self._sparse)
        return list(grids) if self._sparse else snp.stack(grids, axis=0)

    def __repr__(self):
        return f"starling.numpy.{self._name}"


mgrid = _Grid(False, "mgrid")
ogrid = _Grid(True, "ogrid")


class _Concatenator:
    """``r_`` / ``c_``: concatenation by index syntax (NumPy's ``r_`` / ``c_``).

    Items are arrays (or nested sequences), Python / NumPy scalars, and slices (a range as in
    ``mgrid``). A first item that is a string ``"axis[,ndmin[,trans1d]]"`` sets the axis to join
    along, the minimum ndim every item is raised to, and where an item's own dims go when it is
    raised (``trans1d``; -1: at the end). ``r_`` defaults to ``"0,1,-1"``, ``c_`` to ``"-1,2,0"``
    (1-D items become columns). The matrix directives "r" / "c" are not supported (Starling has
    no matrix class).
    """

    def __init__(self, name, axis, ndmin, trans1d):
        self._name, self._axis, self._ndmin, self._trans1d = name, axis, ndmin, trans1d

    def _directive(self, s):
        op = self._name
        if s in ("r", "c"):
            raise ValueError(f"{op}: the matrix directives 'r' / 'c' are not supported (Starling "
                             "has no matrix class); reshape the result instead")
        try:
            parts = [int(p) for p in s.split(",")]
        except ValueError:
            raise ValueError(f"{op}: the directive must be 'axis[,ndmin[,trans1d]]' with ints, "
                             f"got {s!r}") from None
        if not 1 <= len(parts) <= 3:
            raise ValueError(f"{op}: the directive has at most 3 ints, got {s!r}")
        axis, ndmin, trans1d = parts + [self._ndmin, self._trans1d][len(parts) - 1:]
        return axis, ndmin, trans1d

    def _raise_ndim(self, x, ndmin, trans1d):
        snp = _ns()
        nd = x.ndim
        if nd >= ndmin:
            return x
        x = snp.reshape(x, (1,) * (ndmin - nd) + tuple(x.shape))
        if trans1d == -1:
            return x
        # The item's own dims (now last) move to start at position trans1d.
        k2 = ndmin - nd
        k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
        axes = list(range(ndmin))
        return snp.permute_dims(x, tuple(axes[:k1] + axes[k2:] + axes[k1:k2]))

    def __getitem__(self, key):
        snp = _ns()
        items = list(key) if isinstance(key, tuple) else [key]
        axis, ndmin, trans1d = self._axis, self._ndmin, self._trans1d
        if items and isinstance(items[0], str):
            axis, ndmin, trans1d = self._directive(items.pop(0))
        parts = []
        for item in items:
            if isinstance(item, str):
                raise ValueError(f"{self._name}: a string directive may only come first, got "
                                 f"{item!r}")
            if isinstance(item, slice):
                x = _slice_range(self._name, item)
                x = self._raise_ndim(x, ndmin, trans1d)
            else:
                x = operand(item, self._name)
                scalar = x.ndim == 0
                x = snp.reshape(x, (1,) * (ndmin - x.ndim) + tuple(x.shape)) if scalar \
                    else self._raise_ndim(x, ndmin, trans1d)
            parts.append(x)
        if not parts:
            raise ValueError(f"{self._name}: nothing to concatenate")
        return snp.concatenate(parts, axis=axis)

    def __len__(self):
        return 0

    def __repr__(self):
        return f"starling.numpy.{self._name}"


r_ = _Concatenator("r_", 0, 1, -1)
c_ = _Concatenator("c_", -1, 2, 0)

# s_ / index_exp only return the index expression (Python slices / tuples), exactly NumPy's.
s_ = np.s_
index_exp = np.index_exp
