"""Ranges: arange, linspace, logspace, geomspace (re-exported by creation.py).

With concrete bounds (Python numbers, NumPy values, concrete Arrays) the values are computed by
NumPy in float64 / complex128 and rounded once to the result dtype, so they match NumPy's to the
last bit before rounding. ``arange(n)`` (start 0, step 1) is the ``iota`` primitive, which stages
as one equation instead of a constant. ``linspace`` / ``logspace`` also accept traced bounds
(then computed with starling ops in the result dtype, float32 for low-precision floats).
"""
from __future__ import annotations

import numpy as np

from ...core import casting, dtypes
from ...core.avals import is_symbolic
from ...core.trace import EVAL_TRACE, ConcretizationError, Tracer, current_trace
from ..array import Array, wrap
from ..convert import operand
from ..device import check_device, places_result
from .convert_element_type import convert_element_type
from .shape_lax import _iota_impl, _static_ints, iota

__all__ = ["arange", "linspace", "logspace", "geomspace"]

_NATIVE_KINDS = "biufc"


def _number(op, name, v):
    """A Python number from a scalar-like bound; tracers raise ConcretizationError."""
    if isinstance(v, Tracer):
        try:
            v = v.to_concrete()
        except ConcretizationError:
            raise ConcretizationError(
                f"{op}: {name} must be a concrete number (its value sets the output shape), got "
                f"a traced {v.aval.str_short()}") from None
    if isinstance(v, (Array, np.ndarray, np.generic)):
        if np.ndim(v) != 0:
            raise TypeError(f"{op}: {name} must be a scalar, got an array of shape "
                            f"{tuple(np.shape(v))}")
        v = np.asarray(v).item()
    if isinstance(v, (bool, int, float)) or is_symbolic(v):
        return v
    if isinstance(v, complex):
        raise TypeError(f"{op}: {name} must be real, got {v!r}")
    raise TypeError(f"{op}: {name} must be a real number, got {type(v).__name__}")


@places_result
def arange(start, /, stop=None, step=None, dtype=None, *, device=None):
    """Evenly spaced values ``start, start + step, ...`` below ``stop`` (NumPy ``arange``).

    Args:
        start: first value, or the stop when ``stop`` is None (start 0).
        stop: end (exclusive). step: spacing (default 1; negative counts down).
        dtype: result dtype; default int64 when every bound is an integer, else float32.
    Returns:
        1-D Array of length ``max(0, ceil((stop - start) / step))``.
    Raises:
        ValueError: ``step`` is 0. TypeError: complex or non-numeric bounds.
        ConcretizationError: a traced bound (the length would depend on data).
    """
    if device is None and current_trace() is EVAL_TRACE:
        if type(start) is int and stop is None and step is None and dtype is None:
            return wrap(np.arange(start, dtype=dtypes.DEFAULT_INT), False)  # arange(n)
        out = _arange_eager(start, stop, step, dtype)
        if out is not None:
            return out
    check_device(device, "arange")
    if stop is None:
        start, stop = 0, start
    start = _number("arange", "start", start)
    stop = _number("arange", "stop", stop)
    step = 1 if step is None else _number("arange", "step", step)
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    is_float = any(isinstance(v, float) for v in (start, stop, step))
    if dtype is None:
        dt = dtypes.DEFAULT_FLOAT if is_float else dtypes.DEFAULT_INT
    else:
        dt = dtypes.canonicalize(dtype)
    if is_symbolic(start) or is_symbolic(stop) or is_symbolic(step):
        return _arange_symbolic(start, stop, step, dt)
    if (not is_float and start == 0 and step == 1 and not dtypes.is_bool(dt)):
        return iota(dt, (max(int(stop), 0),), 0)
    return wrap(_arange_numpy(start, stop, step, dtype, dt), False)


_REAL = (int, float)


def _arange_symbolic(start, stop, step, dt):
    """``arange`` with symbolic-dim bounds (dynamic shapes): integer ``start`` / ``stop`` and
    step 1 only, as ``iota + start`` of length ``stop - start`` (must be provably >= 0)."""
    if step != 1 or isinstance(start, float) or isinstance(stop, float) or dtypes.is_bool(dt):
        raise TypeError(f"arange: with symbolic-dim bounds only integer start/stop and step 1 "
                        f"are supported, got start={start}, stop={stop}, step={step}")
    n = stop - start
    if not n >= 0:
        raise ValueError(f"arange: the length {n} may be negative for some sizes in range")
    out = iota(dt, (n,), 0)
    return out if (type(start) is int and start == 0) else out + start


def _arange_eager(start, stop, step, dtype):
    """The eager fast path of ``arange`` for Python int / float bounds (None when not
    applicable, or when NumPy rejects the call: the checked path then raises our error)."""
    if type(start) not in _REAL or (stop is not None and type(stop) not in _REAL) or (
            step is not None and type(step) not in _REAL):
        return None
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    if step == 0:
        return None
    is_float = type(start) is float or type(stop) is float or type(step) is float
    if dtype is None:
        dt = dtypes.DEFAULT_FLOAT if is_float else dtypes.DEFAULT_INT
    else:
        dt = dtypes.canonicalize(dtype)
    if not is_float and start == 0 and step == 1 and not dtypes.is_bool(dt):
        return wrap(_iota_impl(dtype=dt, shape=(max(stop, 0),), dimension=0), False)
    try:
        return wrap(_arange_numpy(start, stop, step, dtype, dt), False)
    except (OverflowError, ValueError, TypeError):
        return None


def _arange_numpy(start, stop, step, dtype, dt):
    try:
        if dtype is not None and dt.kind in _NATIVE_KINDS:
            buf = np.arange(start, stop, step, dtype=dt)
        else:
            buf = casting.astype(np.arange(start, stop, step), dt)
    except (OverflowError, ValueError) as err:
        raise type(err)(f"arange: cannot make arange({start}, {stop}, {step}) with dtype {dt}: "
                        f"{err}") from None
    return buf


# ---- linspace family --------------------------------------------------------------------------

def _info(v):
    if type(v) in (bool, int, float, complex):
        return dtypes.dtype_of_scalar(v), not isinstance(v, bool)
    if isinstance(v, (Array, Tracer)):
        return v.dtype, v.weak_type
    return dtypes.canonicalize(np.asarray(v).dtype), False


def _result_dtype(op, bounds, dtype):
    """Result dtype: ``dtype``, else the promotion of the bounds with a (weak) float."""
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    infos = [_info(b) for b in bounds] + [(dtypes.DEFAULT_FLOAT, True)]
    return dtypes.result_type(*infos)[0]


def _num(op, num):
    n = _static_ints(op, "num", num)
    if isinstance(n, list):
        raise TypeError(f"{op}: num must be an int, got {num!r}")
    if n < 0:
        raise ValueError(f"{op}: num must be non-negative, got {n}")
    return n


def _is_traced(*vals):
    return any(isinstance(v, Tracer) for v in vals)


def _with_ops(*vals):
    # Array bounds go through starling ops eagerly too, so that a function gives the same bits
    # eagerly and staged; NumPy / Python bounds are constants computed by NumPy in float64.
    return any(isinstance(v, (Array, Tracer)) for v in vals)


def _compute_dtype(dt, bounds):
    """float64 / complex128 for the NumPy path."""
    if dtypes.is_complex(dt) or any(dtypes.is_complex(_info(b)[0]) for b in bounds):
        return np.dtype(np.complex128)
    return np.dtype(np.float64)


def _traced_dtype(dt, bounds):
    if dtypes.is_complex(dt) or any(dtypes.is_complex(_info(b)[0]) for b in bounds):
        return dt if dtypes.is_complex(dt) else dtypes.DEFAULT_COMPLEX
    if dt in (dtypes.float32, dtypes.float64):
        return dt
    return dtypes.float32


@places_result
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """``num`` evenly spaced samples from ``start`` to ``stop`` (NumPy / Array API ``linspace``).

    Args:
        start, stop: scalars or arrays (broadcast together; traced values allowed).
        num: number of samples (>= 0).
        endpoint: include ``stop`` (spacing ``(stop - start) / (num - 1)``) or not
            (``/ num``).
        retstep: also return the spacing.
        dtype: result dtype; default: the bounds' dtype promoted with float (float32 for
            Python numbers, complex64 for complex ones). Integer dtypes take the floor (NumPy).
        axis: where the samples axis goes in the result when the bounds are arrays.
    Returns:
        Array of shape ``(*bshape[:axis], num, *bshape[axis:])`` (``(num,)`` for scalars), and
        the step (an Array) when ``retstep``.
    Raises:
        ValueError: ``num`` < 0. AxisError: ``axis`` out of range.
    """
    check_device(device, "linspace")
    n = _num("linspace", num)
    dt = _result_dtype("linspace", (start, stop), dtype)
    if _with_ops(start, stop):
        y, step = _linspace_traced(start, stop, n, endpoint, dt, axis)
    else:
        ct = _compute_dtype(dt, (start, stop))
        s = np.asarray(np.asarray(start), dtype=ct)
        e = np.asarray(np.asarray(stop), dtype=ct)
        from .shape_lax import normalize_axis
        ax = normalize_axis("linspace", axis, np.broadcast(s, e).ndim + 1)
        y, step = np.linspace(s, e, n, endpoint=endpoint, retstep=True, axis=ax)
        if dtypes.is_integer(dt):
            y = np.floor(y)
        y = wrap(casting.astype(y, dt), False)
        step_dt = dt if dtypes.is_inexact(dt) else dtypes.DEFAULT_FLOAT
        if dtypes.is_complex(ct) and not dtypes.is_complex(step_dt):
            step_dt = dtypes.DEFAULT_COMPLEX
        step = wrap(casting.astype(step, step_dt), False)
    return (y, step) if retstep else y


def _as(v, dt, op):
    """``v`` as an operand of dtype ``dt``: Python scalars are built directly (no staged cast)."""
    if type(v) in (bool, int, float, complex):
        if isinstance(v, complex) and not dtypes.is_complex(dt):
            raise TypeError(f"{op}: complex bound {v!r} needs a complex dtype, got {dt}")
        return wrap(np.asarray(casting.scalar(v, dt)), False)
    return convert_element_type(operand(v, op), dt, False)


def _linspace_traced(start, stop, n, endpoint, dt, axis):
    from .. import numpy as snp  # arithmetic lives in other families: import lazily
    from .shape_lax import broadcast_in_dim, concatenate, normalize_axis, slice_in_dim
    ct = _traced_dtype(dt, (start, stop))
    s, e = _as(start, ct, "linspace"), _as(stop, ct, "linspace")
    bshape = snp.broadcast_shapes(s.shape, e.shape)
    ax = normalize_axis("linspace", axis, len(bshape) + 1)
    out_shape = bshape[:ax] + (n,) + bshape[ax:]
    dims = tuple(d for d in range(len(out_shape)) if d != ax)

    def spread(v):  # (*bshape) -> out_shape, constant along the samples axis
        return broadcast_in_dim(v, out_shape, dims[len(dims) - v.ndim:])

    div = n - 1 if endpoint else n
    if div > 0:
        step = snp.divide(snp.subtract(e, s), div)
        y = snp.add(spread(s), snp.multiply(iota(ct, out_shape, ax), spread(step)))
        if endpoint and n > 1:
            y = concatenate([slice_in_dim(y, 0, n - 1, 1, ax),
                             slice_in_dim(spread(e), n - 1, n, 1, ax)], ax)
    else:
        step = snp.full_like(snp.subtract(e, s), np.nan)
        y = spread(s)
    if dtypes.is_integer(dt):
        y = snp.floor(y)
    return convert_element_type(y, dt, False), step


@places_result
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0, *, device=None):
    """``base ** linspace(start, stop, num, endpoint)`` (NumPy ``logspace``); default dtype as
    ``linspace``. Integer dtypes truncate (NumPy). Traced bounds / base are allowed."""
    check_device(device, "logspace")
    n = _num("logspace", num)
    dt = _result_dtype("logspace", (start, stop, base), dtype)
    if _with_ops(start, stop, base):
        from .. import numpy as snp
        ct = _traced_dtype(dt, (start, stop, base))
        y = linspace(start, stop, n, endpoint, dtype=ct, axis=axis)
        b = _as(base, ct, "logspace")
        if b.ndim:
            from .shape import expand_dims
            b = expand_dims(b, axis)
        return convert_element_type(snp.pow(b, y), dt, False)
    ct = _compute_dtype(dt, (start, stop, base))
    y = np.logspace(np.asarray(np.asarray(start), ct), np.asarray(np.asarray(stop), ct), n,
                    endpoint=endpoint, base=np.asarray(np.asarray(base), ct), axis=axis)
    return wrap(casting.astype(y, dt), False)


@places_result
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0, *, device=None):
    """Geometric progression from ``start`` to ``stop`` (NumPy ``geomspace``); concrete bounds
    only.

    Raises:
        ValueError: a bound is 0. ConcretizationError: traced bounds.
    """
    check_device(device, "geomspace")
    n = _num("geomspace", num)
    if _is_traced(start, stop):
        raise ConcretizationError("geomspace: start and stop must be concrete values; for traced "
                                  "bounds use exp(linspace(log(start), log(stop), num))")
    dt = _result_dtype("geomspace", (start, stop), dtype)
    ct = _compute_dtype(dt, (start, stop))
    try:
        y = np.geomspace(np.asarray(np.asarray(start), ct), np.asarray(np.asarray(stop), ct), n,
                         endpoint=endpoint, axis=axis)
    except ValueError as err:
        raise ValueError(f"geomspace: {err}") from None
    return wrap(casting.astype(y, dt), False)
