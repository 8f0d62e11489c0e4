"""Array creation: asarray / array / from_dlpack, zeros / ones / full (and ``*_like``), eye,
identity, tri / tril / triu, diag / diagflat, meshgrid, indices; ranges live in creation_ranges.py
(arange, linspace, logspace, geomspace), re-exported here.

Dtype defaults (JAX / PyTorch style): float32 for ``zeros``/``ones``/``empty``/``eye``/``tri``;
``full`` takes the dtype of its fill value, and a Python-scalar fill with ``dtype=None`` gives a
weak-typed result (as ``jax.numpy.full``): ``full((2,), 1.0)`` is float32 and behaves like the
scalar ``1.0`` in promotion. The ``*_like`` functions keep the weak type of their template when
``dtype`` is None. Every function takes ``device=`` (checked with ``device.check_device``).

Constant arrays are ``broadcast_in_dim`` of a 0-d value: a staged program stays small, and eager
results share one element (buffers are immutable, so nothing can observe the sharing).
"""
from __future__ import annotations

import numpy as np

from ...core import casting, dtypes
from ...core.trace import EVAL_TRACE, Tracer, current_trace
from ..array import Array, wrap
from ..convert import from_array_like, operand
from ..device import check_device, keeps_layout, places_result
from .convert_element_type import convert_element_type
from .shape_lax import _shape_tuple, _static_ints, broadcast_in_dim, iota, pad, static_slice
from .shape_lax import reshape as lax_reshape

__all__ = [
    "asarray", "array", "from_dlpack", "zeros", "ones", "empty", "full", "zeros_like",
    "ones_like", "empty_like", "full_like", "eye", "identity", "tri", "tril", "triu", "diag",
    "diagflat", "meshgrid", "indices",
]


@places_result
def asarray(obj, /, dtype=None, order=None, *, device=None, copy=None):
    """Converts ``obj`` to an Array (Array API ``asarray``).

    Args:
        obj: an Array, a Python scalar, a nested sequence, a NumPy array, a buffer-protocol
            object (memoryview, bytearray) or any DLPack / ``__array__`` producer. Python floats
            and nested lists of them give float32 (the default float), ints int64. The result
            is never weakly typed (only bare Python scalars in operations are).
        dtype: the result dtype (a cast, NumPy ``astype`` semantics) or None to infer; may be
            passed positionally, as in NumPy (``asarray(x, float32)``).
        order: accepted for NumPy compatibility ("C", "F", "A", "K" or None): buffers are
            immutable, so the memory layout cannot be observed.
        device: target Device (default: the default device).
        copy: True always copies (buffers are immutable, so Starling never needs to);
            False raises ValueError if a copy is unavoidable (any non-Array input); None copies
            only when needed.
    Returns:
        Array with the shape of ``obj``.
    Raises:
        TypeError: ``obj`` is not array-like or ``dtype`` is not a Starling dtype.
        ValueError: ragged nested sequences; ``copy=False`` when a copy is needed.
        OverflowError: a Python int out of range for ``dtype`` (or for int64 without one).
    """
    check_device(device, "asarray")
    if order not in (None, "C", "F", "A", "K"):
        raise ValueError(f"asarray: order must be one of 'C', 'F', 'A', 'K' or None, got "
                         f"{order!r}")
    dt = None if dtype is None else dtypes.canonicalize(dtype)
    if isinstance(obj, (Array, Tracer)):
        if dt is None or obj.dtype == dt:
            return obj
        if copy is False:
            raise ValueError(f"asarray: copy=False but converting {obj.dtype} to {dt} needs a "
                             "copy")
        return convert_element_type(obj, dt, False)
    if copy is False:
        raise ValueError(f"asarray: copy=False but a {type(obj).__name__} must be copied into a "
                         "Starling buffer")
    if type(obj) in (bool, int, float, complex):
        # An array made from a Python scalar is an ordinary (strong) array, as the Array API
        # asks: only bare Python scalars inside operations are weakly typed.
        if dt is None:
            x = operand(obj, "asarray")
            return wrap(x._buf, False)
        if isinstance(obj, complex) and not dtypes.is_complex(dt):
            obj = obj.real
        try:
            return wrap(np.asarray(casting.scalar(obj, dt)), False)
        except OverflowError:
            raise OverflowError(f"asarray: Python int {obj} is out of range for {dt}") from None
    if isinstance(obj, (list, tuple)) and _contains_traced(obj):
        out = _stack_nested(obj)
        return out if dt is None else convert_element_type(out, dt, False)
    return from_array_like(obj, "asarray", dtype=dt)


def _stack_nested(obj):
    """A nested sequence holding traced values, built by stacking (JAX's ``jnp.array([x, y])``).
    Python scalars inside adopt the dtype of the traced values (weak promotion)."""
    from .shape import stack
    if isinstance(obj, (list, tuple)):
        if not obj:
            raise ValueError("asarray: empty nested sequence next to traced values")
        return stack([_stack_nested(item) for item in obj])
    return operand(obj, "asarray")


def _contains_traced(seq):
    for item in seq:
        if isinstance(item, Tracer):
            return True
        if isinstance(item, (list, tuple)) and _contains_traced(item):
            return True
    return False


@places_result
def array(object, dtype=None, *, copy=True, ndmin=0, device=None):  # noqa: A002
    """NumPy ``array``: like ``asarray`` (``copy`` is accepted; buffers are immutable, so a copy
    is never observable), with ``ndmin`` leading size-1 dims added as needed."""
    x = asarray(object, dtype=dtype, device=device)
    if x.ndim < ndmin:
        x = lax_reshape(x, (1,) * (ndmin - x.ndim) + tuple(x.shape))
    return x


@places_result
def from_dlpack(x, /, *, device=None, copy=None):
    """An Array from a DLPack producer (Array API ``from_dlpack``); the data are copied into a
    Starling buffer (an Array is returned as is): host memory into a CPU Array, a CUDA
    producer's memory (torch, cupy) into an Array on that GPU.

    Raises:
        ValueError: ``copy=False`` for a foreign buffer (Starling owns its buffers); a CUDA
            producer where no GPU is usable.
        TypeError: ``x`` has no ``__dlpack__``.
    """
    check_device(device, "from_dlpack")
    if isinstance(x, (Array, Tracer)):
        return x
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(x).__name__} does not implement __dlpack__")
    if copy is False:
        raise ValueError("from_dlpack: copy=False, but Starling copies foreign buffers")
    if hasattr(x, "__dlpack_device__") and x.__dlpack_device__()[0] == 2:   # kDLCUDA
        from .. import cuda
        cuda.device_of(f"cuda:{x.__dlpack_device__()[1]}", "from_dlpack")
        return cuda.from_dlpack(x)   # (places_result moves it to ``device``)
    return from_array_like(np.from_dlpack(x), "from_dlpack")


# ---- constants ------------------------------------------------------------------------------

def _shape(op, shape):
    return _shape_tuple(op, shape)


def _dtype(dtype, default=dtypes.DEFAULT_FLOAT):
    return default if dtype is None else dtypes.canonicalize(dtype)


def _const(op, value, dt, weak=False):
    """A 0-d Array holding the Python scalar ``value`` at ``dt`` (Starling's conversion rules,
    ``core/casting.py``; a complex value for a real dtype is a TypeError)."""
    try:
        if isinstance(value, complex) and not dtypes.is_complex(dt):
            raise TypeError("complex value for a real dtype")
        return wrap(np.asarray(casting.scalar(value, dt)), weak)
    except OverflowError:
        raise OverflowError(f"{op}: fill value {value!r} is out of range for {dt}") from None
    except (TypeError, ValueError):
        raise TypeError(f"{op}: fill value {value!r} cannot be converted to {dt}") from None


def _filled(op, shape, dt, value, weak=False):
    if dt == dtypes.float0:
        return wrap(np.zeros(shape, dt), False)
    if current_trace() is EVAL_TRACE:
        # Eagerly a real buffer (NumPy's zeros / full are faster than a broadcast view);
        # staged, a broadcast of a literal keeps the Program small.
        if value == 0:
            return wrap(np.zeros(shape, dt), weak)
        out = np.empty(shape, dt)
        out.fill(_const(op, value, dt)._buf)
        return wrap(out, weak)
    return broadcast_in_dim(_const(op, value, dt, weak), shape, ())


def _eager_filled(shape, dtype, value):
    """The eager fast path of zeros / ones / empty: NumPy validates the shape (it accepts the
    same ints and NumPy integers as ``_shape_tuple``, and rejects bools and negatives, which
    then take the checked path and its error); None when not applicable."""
    if (type(shape) is tuple or type(shape) is int) and current_trace() is EVAL_TRACE:
        dt = dtypes.DEFAULT_FLOAT if dtype is None else dtypes.canonicalize(dtype)
        try:
            if value == 0 or dt == dtypes.float0:
                return wrap(np.zeros(shape, dt), False)
            out = np.empty(shape, dt)
        except Exception:  # noqa: BLE001
            return None
        out.fill(value)  # cheaper than np.full's Python wrapper
        return wrap(out, False)
    return None


def _constant_array(op, shape, dtype, device, value):
    """zeros / ones / empty: the eager fast path, else the checked, traceable path."""
    if device is None:
        out = _eager_filled(shape, dtype, value)
        if out is not None:
            return out
    check_device(device, op)
    return _filled(op, _shape(op, shape), _dtype(dtype), value)


@places_result
def zeros(shape, dtype=None, *, device=None):
    """Array of zeros of shape ``shape`` (int or tuple) and ``dtype`` (default float32).

    Raises:
        ValueError: a negative dim. TypeError: a non-integer dim or an unknown dtype.
    """
    return _constant_array("zeros", shape, dtype, device, 0)


@places_result
def ones(shape, dtype=None, *, device=None):
    """Array of ones of shape ``shape`` and ``dtype`` (default float32)."""
    return _constant_array("ones", shape, dtype, device, 1)


@places_result
def empty(shape, dtype=None, *, device=None):
    """Same as ``zeros``: Starling has no uninitialised memory (documented choice)."""
    return _constant_array("empty", shape, dtype, device, 0)


_PY_SCALARS = (bool, int, float, complex)


def _fill_operand(op, fill_value, dt):
    """The fill value as an operand of dtype ``dt`` (None: its own dtype; strong)."""
    if type(fill_value) in (bool, int, float, complex):
        if dt is None:
            return _const(op, fill_value, dtypes.dtype_of_scalar(fill_value), False)
        return _const(op, fill_value, dt)
    fill = operand(fill_value, op)
    if dt is not None and (fill.dtype != dt or fill.weak_type):
        fill = convert_element_type(fill, dt, False)
    return fill


def _broadcast_fill(op, fill, shape):
    if fill.ndim == 0:
        if type(fill) is Array and current_trace() is EVAL_TRACE:
            buf = fill._buf
            out = np.empty(shape, buf.dtype)
            out.fill(buf)
            return wrap(out, fill._weak)
        return broadcast_in_dim(fill, shape, ())
    from .shape import broadcast_to
    if len(fill.shape) > len(shape):
        raise ValueError(f"{op}: fill value of shape {tuple(fill.shape)} does not broadcast to "
                         f"shape {shape}")
    return broadcast_to(fill, shape)


@places_result
def full(shape, fill_value, dtype=None, *, device=None):
    """Array of shape ``shape`` filled with ``fill_value``.

    Args:
        shape: int or tuple of ints.
        fill_value: a Python scalar, or an array broadcasting to ``shape``.
        dtype: result dtype; None takes the fill value's: bool, int64, float32, complex64 for
            Python scalars, the array's dtype otherwise. The result is a strong (not weakly
            typed) array, as the Array API requires.
    Raises:
        OverflowError: a Python int out of range for ``dtype``. ValueError: negative dims or a
            fill value that does not broadcast.
    """
    if device is None and type(fill_value) in _PY_SCALARS and (
            type(shape) is tuple or type(shape) is int) and current_trace() is EVAL_TRACE:
        # Eager fast path; anything NumPy rejects takes the checked path below (its errors).
        if dtype is None:
            dt, weak = dtypes.dtype_of_scalar(fill_value), False
        else:
            dt, weak = dtypes.canonicalize(dtype), False
        try:
            if type(fill_value) is complex and not dtypes.is_complex(dt):
                raise TypeError  # the checked path says why
            value = casting.scalar(fill_value, dt)
            out = np.empty(shape, dt)
        except Exception:  # noqa: BLE001
            pass
        else:
            out.fill(value)
            return wrap(out, weak)
    check_device(device, "full")
    shape = _shape("full", shape)
    dt = None if dtype is None else dtypes.canonicalize(dtype)
    return _broadcast_fill("full", _fill_operand("full", fill_value, dt), shape)


def _like(op, x, dtype, shape):
    if isinstance(x, (Array, Tracer)):
        xs, xdt, weak = tuple(x.shape), x.dtype, x.weak_type
    elif isinstance(x, (np.ndarray, np.generic)):
        xs, xdt, weak = x.shape, dtypes.canonicalize(x.dtype), False
    else:
        x = operand(x, op)
        xs, xdt, weak = tuple(x.shape), x.dtype, x.weak_type
    if shape is not None:
        xs = _shape(op, shape)
    if dtype is not None:
        xdt, weak = dtypes.canonicalize(dtype), False
    return xs, xdt, weak


def _filled_like(op, x, value, dtype, shape, device):
    check_device(device, op)
    xs, dt, weak = _like(op, x, dtype, shape)
    return _filled(op, xs, dt, value, weak)


@keeps_layout
@places_result
def zeros_like(x, /, dtype=None, *, shape=None, device=None):
    """Zeros with the shape and dtype of ``x`` (overridden by ``shape`` / ``dtype``); keeps the
    weak type of ``x`` when ``dtype`` is None."""
    return _filled_like("zeros_like", x, 0, dtype, shape, device)


@keeps_layout
@places_result
def ones_like(x, /, dtype=None, *, shape=None, device=None):
    """Ones with the shape and dtype of ``x`` (overridden by ``shape`` / ``dtype``)."""
    return _filled_like("ones_like", x, 1, dtype, shape, device)


@keeps_layout
@places_result
def empty_like(x, /, dtype=None, *, shape=None, device=None):
    """Same as ``zeros_like`` (no uninitialised memory)."""
    return _filled_like("empty_like", x, 0, dtype, shape, device)


@keeps_layout
@places_result
def full_like(x, /, fill_value, dtype=None, *, shape=None, device=None):
    """``fill_value`` (cast to the dtype of ``x`` or ``dtype``) in the shape of ``x`` (or
    ``shape``); keeps the weak type of ``x`` when ``dtype`` is None.

    Raises:
        OverflowError: a Python int fill out of range for the dtype.
    """
    check_device(device, "full_like")
    xs, dt, weak = _like("full_like", x, dtype, shape)
    if type(fill_value) in (bool, int, float, complex):
        if isinstance(fill_value, complex) and not dtypes.is_complex(dt):
            fill_value = fill_value.real  # NumPy drops the imaginary part in unsafe casts
        fill = _const("full_like", fill_value, dt, weak)
    else:
        fill = operand(fill_value, "full_like")
        fill = convert_element_type(fill, dt, weak)
    return _broadcast_fill("full_like", fill, xs)


# ---- eye / tri / diag ------------------------------------------------------------------------

def _count(op, name, v):
    v = _static_ints(op, name, v)
    if isinstance(v, list):
        raise TypeError(f"{op}: {name} must be an int, got {v!r}")
    return v


@places_result
def eye(N, M=None, k=0, dtype=None, *, device=None):
    """``(N, M)`` array with ones on diagonal ``k`` (0 main, > 0 above, < 0 below), zeros
    elsewhere; ``M`` defaults to ``N``, ``dtype`` to float32.

    Built without any comparison: ones interior-padded with ``M`` zeros land exactly ``M + 1``
    flat positions apart, which is the diagonal of a row-major ``(N, M)`` matrix.
    Raises:
        ValueError: negative ``N`` or ``M``.
    """
    check_device(device, "eye")
    N = _count("eye", "N", N)
    M = N if M is None else _count("eye", "M", M)
    k = _count("eye", "k", k)
    if N < 0 or M < 0:
        raise ValueError(f"eye: N and M must be non-negative, got N={N}, M={M}")
    dt = _dtype(dtype)
    if current_trace() is EVAL_TRACE and dt != dtypes.float0:
        return wrap(np.eye(N, M, k, dtype=dt), False)  # same values, one NumPy call
    if k >= 0:
        length, start = max(0, min(N, M - k)), k
    else:
        length, start = max(0, min(N + k, M)), -k * M
    if length == 0:
        return _filled("eye", (N, M), dt, 0)
    ones_ = broadcast_in_dim(_const("eye", 1, dt), (length,), ())
    span = length + (length - 1) * M
    flat = pad(ones_, _const("eye", 0, dt), [(start, N * M - start - span, M)])
    return lax_reshape(flat, (N, M))


@places_result
def identity(n, dtype=None, *, device=None):
    """The ``(n, n)`` identity matrix (default float32)."""
    return eye(n, dtype=dtype, device=device)


@places_result
def tri(N, M=None, k=0, dtype=None, *, device=None):
    """``(N, M)`` array with ones at and below diagonal ``k`` (``j <= i + k``), zeros above;
    default dtype float32.

    Built by data movement only (so every dtype works and it stages as a constant pattern):
    a step vector ``w`` (``w[t] = 1`` iff ``t - (N - 1) <= k``) tiled ``N`` times and re-read
    with rows one element shorter shifts each row one place right: row i, column j reads
    ``w[j - i + N - 1]``.
    Raises:
        ValueError: negative ``N`` or ``M``.
    """
    check_device(device, "tri")
    N = _count("tri", "N", N)
    M = N if M is None else _count("tri", "M", M)
    k = _count("tri", "k", k)
    if N < 0 or M < 0:
        raise ValueError(f"tri: N and M must be non-negative, got N={N}, M={M}")
    dt = _dtype(dtype)
    if current_trace() is EVAL_TRACE and dt != dtypes.float0:
        return wrap(np.tri(N, M, k, dtype=dt), False)
    return _tri(N, M, k, dt)


def _tri(N, M, k, dt):
    if N == 0 or M == 0:
        return _filled("tri", (N, M), dt, 0)
    L = N + M
    a = min(max(N + k, 0), L)
    ones_ = broadcast_in_dim(_const("tri", 1, dt), (a,), ())
    w = pad(ones_, _const("tri", 0, dt), [(0, L - a, 0)])
    rows = lax_reshape(broadcast_in_dim(w, (N, L), (1,)), (N * L,))
    skewed = lax_reshape(static_slice(rows, (0,), (N * (L - 1),)), (N, L - 1))
    return static_slice(skewed, (0, N - 1), (N, N - 1 + M))


def _tri_select(op, x, k, lower):
    x = operand(x, op)
    k = _count(op, "k", k)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an array of ndim >= 2 (shape (*batch, m, n)), got "
                         f"shape {tuple(x.shape)}")
    from .math_select import where
    n, m = x.shape[-2:]
    mask = _tri(n, m, k if lower else k - 1, dtypes.bool_)
    mask = broadcast_in_dim(mask, tuple(x.shape), (x.ndim - 2, x.ndim - 1))
    zero = _const(op, 0, x.dtype, x.weak_type)
    return where(mask, x, zero) if lower else where(mask, zero, x)


def tril(x, /, k=0):
    """Lower triangle of the last two dims: ``x[..., i, j]`` where ``j <= i + k``, 0 elsewhere.

    Args:
        x: array of shape ``(*batch, m, n)``. k: diagonal offset (0 main, > 0 above).
    Raises:
        ValueError: ``x`` has fewer than 2 dims.
    """
    return _tri_select("tril", x, k, True)


def triu(x, /, k=0):
    """Upper triangle of the last two dims: ``x[..., i, j]`` where ``j >= i + k``, 0 elsewhere.

    Raises:
        ValueError: ``x`` has fewer than 2 dims.
    """
    return _tri_select("triu", x, k, False)


def diag(v, k=0):
    """NumPy ``diag``: a 1-D ``v`` of length n gives the ``(n + |k|, n + |k|)`` matrix with ``v``
    on diagonal ``k``; a 2-D ``v`` gives its diagonal ``k`` as a 1-D array.

    Both are data movement: interior padding places the elements ``m + 1`` flat positions
    apart (1-D), a strided slice of the flattened matrix reads them back (2-D).
    Raises:
        ValueError: ``v`` is not 1-D or 2-D.
    """
    v = operand(v, "diag")
    k = _count("diag", "k", k)
    if v.ndim == 1:
        n = v.shape[0]
        m = n + abs(k)
        zero = _const("diag", 0, v.dtype, v.weak_type)
        if n == 0:
            return broadcast_in_dim(zero, (m, m), ())
        start = max(-k, 0) * m + max(k, 0)
        span = n + (n - 1) * m
        return lax_reshape(pad(v, zero, [(start, m * m - start - span, m)]), (m, m))
    if v.ndim == 2:
        r, c = v.shape
        if k >= 0:
            length, start = max(0, min(r, c - k)), k
        else:
            length, start = max(0, min(r + k, c)), -k * c
        flat = lax_reshape(v, (r * c,))
        if length == 0:
            return static_slice(flat, (0,), (0,))
        return static_slice(flat, (start,), (start + (length - 1) * (c + 1) + 1,), (c + 1,))
    raise ValueError(f"diag: input must be 1-D or 2-D, got shape {tuple(v.shape)}")


def diagflat(v, k=0):
    """The 2-D array with the flattened ``v`` on diagonal ``k`` (``diag(ravel(v), k)``)."""
    v = operand(v, "diagflat")
    return diag(lax_reshape(v, (v.size,)), k)


# ---- grids ----------------------------------------------------------------------------------

def meshgrid(*arrays, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-D coordinate vectors (inputs are flattened).

    Args:
        *arrays: k arrays of sizes ``n0, ..., nk-1`` (each keeps its dtype).
        sparse: return arrays with size-1 dims instead of full broadcasts.
        indexing: "xy" (Cartesian: output shape ``(n1, n0, n2, ...)``) or "ij" (matrix:
            ``(n0, n1, ...)``).
    Returns:
        A list of k arrays.
    Raises:
        ValueError: ``indexing`` is not "xy" or "ij".
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    flat = []
    for a in arrays:
        a = operand(a, "meshgrid")
        flat.append(lax_reshape(a, (a.size,)))
    k = len(flat)
    dims = list(range(k))
    if indexing == "xy" and k >= 2:
        dims[0], dims[1] = 1, 0
    shape = [0] * k
    for a, d in zip(flat, dims):
        shape[d] = a.shape[0]
    shape = tuple(shape)
    out = []
    for a, d in zip(flat, dims):
        if sparse:
            s = [1] * k
            s[d] = a.shape[0]
            out.append(lax_reshape(a, tuple(s)))
        else:
            out.append(broadcast_in_dim(a, shape, (d,)))
    return out


def indices(dimensions, dtype=None, sparse=False):
    """Grid indices: an array of shape ``(k, *dimensions)`` whose slice i holds the index along
    dim i (``sparse=True``: a tuple of k arrays with size-1 dims elsewhere). dtype default int64.

    Raises:
        TypeError: a bool dtype (NumPy allows it only for dims of size <= 2; indices are
            numbers) or a non-integer dimension. ValueError: a negative dimension.
    """
    dims = _shape_tuple("indices", dimensions)
    dt = _dtype(dtype, dtypes.DEFAULT_INT)
    if dtypes.is_bool(dt) or dt == dtypes.float0:
        raise TypeError(f"indices: dtype must be numeric (integer, floating or complex), got "
                        f"{dt}")
    k = len(dims)
    if sparse:
        out = []
        for i, d in enumerate(dims):
            s = [1] * k
            s[i] = d
            out.append(iota(dt, tuple(s), i))
        return tuple(out)
    if k == 0:
        return _filled("indices", (0,), dt, 0)
    parts = [lax_reshape(iota(dt, dims, i), (1,) + dims) for i in range(k)]
    from .shape_lax import concatenate
    return concatenate(parts, 0)


from .creation_ranges import *  # noqa: E402,F401,F403
from .creation_ranges import __all__ as _ranges_all  # noqa: E402

__all__ += _ranges_all
