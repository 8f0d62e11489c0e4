"""OpInfos of src/arrays/ops/reductions.py, reductions_stats.py and cumulative.py.

References are NumPy (and scipy.special.logsumexp). float16 / bfloat16 / float8 / float4
references run in float32 and round back once, which is Starling's documented accumulation.
"""
import ml_dtypes
import numpy as np
import scipy.special

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import ALL, COMPLEX, FLOATS, INTS, LOW, NUMERIC, rand

LOW_SET = {np.dtype(t) for t in (np.float16, ml_dtypes.bfloat16) + LOW}
REAL = (np.bool_,) + INTS + FLOATS + LOW
INEXACT = FLOATS + COMPLEX
F32 = np.dtype(np.float32)

# (shape, axis) cases shared by the reductions: None / int / negative / tuple / () axes, size-0
# and size-1 dims.
AXIS_CASES = [
    ((), None), ((), ()), ((1,), 0), ((5,), 0), ((5,), -1), ((0,), None),
    ((3, 4), None), ((3, 4), 0), ((3, 4), -1), ((3, 4), (0, 1)), ((3, 4), (-1, 0)), ((3, 4), ()),
    ((2, 1, 3), (0, 2)), ((2, 1, 3), 1), ((2, 1, 3), (-1, -3)),
    ((0, 3), 0), ((0, 3), 1), ((0, 3), None), ((3, 0), (0,)),
]
KEEPDIMS_CASES = [((3, 4), 1), ((2, 1, 3), None), ((2, 1, 3), (0, 2)), ((0, 3), 1)]


def _axes(shape, axis):
    if axis is None:
        return tuple(range(len(shape)))
    return tuple(a % len(shape) for a in ((axis,) if isinstance(axis, int) else axis))


def _empty(shape, axis):
    return any(shape[a] == 0 for a in _axes(shape, axis))


def low32(fn):
    """Runs ``fn`` on float32 copies of low-precision float inputs, rounding results back."""
    def ref(*args, **kwargs):
        dt = next((a.dtype for a in args if isinstance(a, np.ndarray)), None)
        if dt not in LOW_SET:
            return fn(*args, **kwargs)
        args = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == dt else a
                for a in args]
        out = fn(*args, **kwargs)

        def back(o):
            o = np.asarray(o)
            return o.astype(dt) if o.dtype == F32 else o
        return tuple(back(o) for o in out) if isinstance(out, tuple) else back(out)
    return ref


def reduction_samples(rng, dtype, *, empty=True, special=True, extra=()):
    out = []
    for shape, axis in AXIS_CASES:
        if not empty and _empty(shape, axis):
            continue
        out.append(Sample((rand(rng, shape, dtype, special=special),), {"axis": axis},
                          name=f"[{shape} axis={axis}]"))
    for shape, axis in KEEPDIMS_CASES:
        if not empty and _empty(shape, axis):
            continue
        out.append(Sample((rand(rng, shape, dtype, special=special),),
                          {"axis": axis, "keepdims": True}, name=f"[{shape} axis={axis} keep]"))
    # The same data without NaN / inf so that finite values are compared too.
    out.append(Sample((rand(rng, (4, 5), dtype, special=False),), {"axis": 1}, name="[finite]"))
    out.extend(extra)
    return out


def _mask(rng, shape):
    return rng.random(shape) < 0.6


def sum_samples(rng, dtype):
    dt = np.dtype(dtype)
    extra = [Sample((rand(rng, (3, 4), dt),), {"axis": 0, "where": _mask(rng, (3, 4))},
                    name="[where]"),
             Sample((rand(rng, (3, 4), dt),), {"axis": 1, "where": _mask(rng, (4,))},
                    name="[where bcast]")]
    if dt.kind in "iu":
        # overflow wraps (accumulating in the input dtype, and in int64 / uint64)
        full = np.full((4,), np.iinfo(dt).max, dt)
        extra += [Sample((full,), {"dtype": dt}, name="[overflow]"),
                  Sample((full,), {}, name="[wide]")]
    if dt.kind in "biuf" and dt not in LOW_SET:
        extra.append(Sample((rand(rng, (2, 3), dt),), {"axis": 1, "dtype": np.float64},
                            name="[dtype=f64]"))
    if dt.kind != "b" and dt not in LOW_SET:  # (low precision: initial= rounds twice)
        extra.append(Sample((rand(rng, (2, 3), dt),), {"axis": 0, "initial": 1},
                            name="[initial]"))
    return reduction_samples(rng, dt, extra=extra)


def extremum_samples(rng, dtype):
    dt = np.dtype(dtype)
    ties = np.array([[1, 3, 3, 0], [2, 2, 0, 2]]).astype(dt)
    extra = [Sample((ties,), {"axis": 1}, name="[ties]")]
    if dt.kind != "c":
        init = True if dt.kind == "b" else 1
        extra += [
            Sample((rand(rng, (0, 3), dt),), {"axis": 0, "initial": init}, name="[empty init]"),
            Sample((rand(rng, (3, 4), dt),), {"axis": 1, "initial": init,
                                              "where": _mask(rng, (3, 4))}, name="[where]"),
        ]
    return reduction_samples(rng, dt, empty=False, extra=extra)


def arg_samples(rng, dtype):
    dt = np.dtype(dtype)
    out = []
    for shape, axis in [((), None), ((1,), 0), ((5,), None), ((5,), -1), ((3, 4), None),
                        ((3, 4), 0), ((3, 4), -1), ((2, 1, 3), 1), ((2, 1, 3), None),
                        ((0, 3), 1)]:
        out.append(Sample((rand(rng, shape, dt),), {"axis": axis},
                          name=f"[{shape} axis={axis}]"))
    out.append(Sample((rand(rng, (3, 4), dt),), {"axis": 1, "keepdims": True}, name="[keep]"))
    out.append(Sample((rand(rng, (3, 4), dt),), {"axis": None, "keepdims": True},
                      name="[keep None]"))
    # ties: the first occurrence wins; several NaNs: the first NaN
    out.append(Sample((np.array([[1, 3, 3, 0], [2, 0, 2, 0]]).astype(dt),), {"axis": 1},
                      name="[ties]"))
    if dt.kind in "fc" or dt in LOW_SET:
        out.append(Sample((np.array([1, np.nan, 5, np.nan, 5], np.float32).astype(dt),),
                          {"axis": 0}, name="[nans]"))
    return out


def logical_samples(rng, dtype):
    dt = np.dtype(dtype)
    zeros = np.zeros((2, 3), dt)
    extra = [Sample((zeros,), {"axis": 1}, name="[zeros]"),
             Sample((rand(rng, (3, 4), dt),), {"axis": 0, "where": _mask(rng, (3, 4))},
                    name="[where]")]
    if dt.kind == "c":
        extra.append(Sample((np.array([0j, 1j, 0j], dt),), {}, name="[imag only]"))
    return reduction_samples(rng, dt, extra=extra)


def mean_samples(rng, dtype):
    dt = np.dtype(dtype)
    extra = [Sample((rand(rng, (3, 4), dt),), {"axis": 1, "where": _mask(rng, (3, 4))},
                    name="[where]")]
    return reduction_samples(rng, dt, extra=extra)


def var_samples(rng, dtype):
    dt = np.dtype(dtype)
    extra = [
        Sample((rand(rng, (3, 4), dt, special=False),), {"axis": 1, "ddof": 1}, name="[ddof]"),
        Sample((rand(rng, (3, 4), dt, special=False),), {"axis": 0, "ddof": 5}, name="[ddof>n]"),
        Sample((rand(rng, (3, 4), dt, special=False),), {"axis": 1, "where": _mask(rng, (3, 4))},
               name="[where]"),
    ]
    return reduction_samples(rng, dt, extra=extra)


def _float_result(dt, sample):
    dt = np.dtype(dt)
    return dt if dt.kind in "fc" or dt in LOW_SET else F32


def _real_float_result(dt, sample):
    dt = _float_result(dt, sample)
    return {np.dtype(np.complex64): F32, np.dtype(np.complex128): np.dtype(np.float64)}.get(dt, dt)


def _ref_var(fn):
    def ref(x, **kw):
        if "correction" in kw:
            kw["ddof"] = kw.pop("correction")
        out = fn(x, **kw)
        # Array API: N - correction <= 0 gives NaN (NumPy gives inf or NaN)
        axis = kw.get("axis")
        axes = range(np.ndim(x)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
        n = int(np.prod([np.shape(x)[a] for a in axes]))
        if n - kw.get("ddof", 0) <= 0:
            out = np.full_like(out, np.nan)
        return out
    return low32(ref)


def nan_samples(rng, dtype, *, empty=True):
    dt = np.dtype(dtype)
    extra = []
    if dt.kind in "fc" or dt in LOW_SET:
        allnan = np.array([[np.nan, np.nan, 1.0], [np.nan, 2.0, np.nan]], np.float32).astype(dt)
        extra += [Sample((allnan,), {"axis": 0}, name="[all-nan col]"),
                  Sample((allnan,), {"axis": 1}, name="[nan rows]")]
    return reduction_samples(rng, dt, empty=empty, extra=extra)


def logsumexp_samples(rng, dtype):
    dt = np.dtype(dtype)
    # (SciPy returns shape (1,) for a 0-d input with axis=(): not a case to copy)
    # (SciPy fails on size-0 input with axis=None)
    out = [s for s in reduction_samples(rng, dt) if (s.args[0].ndim or s.kwargs["axis"] != ())
           and (s.args[0].size or s.kwargs["axis"] is not None)]
    neg_inf = np.full((2, 3), -np.inf, np.float32)
    neg_inf[1, 0] = 0.5
    if dt.kind == "f" or dt in LOW_SET:
        out += [
            Sample((neg_inf.astype(dt),), {"axis": 1}, name="[all -inf row]"),
            Sample((np.array([[np.inf, 1.0], [np.nan, 0.0]], np.float32).astype(dt),),
                   {"axis": 1}, name="[inf nan]"),
            Sample((np.array([1000.0, 1000.0, -1000.0], np.float32).astype(dt),), {},
                   name="[large]"),
        ]
    a = rand(rng, (3, 4), dt, special=False)
    b = rand(rng, (3, 4), dt, special=False)
    if dt.kind != "u" and dt.kind != "b":
        out += [Sample((a, 1, np.abs(b)), {}, name="[b]"),
                Sample((a, None, np.abs(b[0])), {"keepdims": True}, name="[b bcast keep]")]
    if dt.kind in "if" or dt in LOW_SET:  # (complex: the sign has another dtype than the log)
        out.append(Sample((a, -1, b), {"return_sign": True}, name="[b sign]"))
    return out


def average_samples(rng, dtype):
    dt = np.dtype(dtype)
    a = rand(rng, (3, 4), dt, special=False)
    w_full = np.abs(rand(rng, (3, 4), dt, special=False)) + np.ones((), dt)
    w_row = np.arange(1, 5).astype(dt)
    w_cube = np.arange(1, 7).reshape(2, 3).astype(dt)
    cube = rand(rng, (2, 4, 3), dt, special=False)
    return [
        Sample((a,), {}, name="[plain]"),
        Sample((a, 0), {"returned": True}, name="[returned]"),
        Sample((a, None, w_full), {}, name="[w full]"),
        Sample((a, 1, w_row), {"returned": True}, name="[w along axis]"),
        Sample((a, -1, w_row), {"keepdims": True}, name="[w keepdims]"),
        Sample((cube, (0, 2), w_cube), {}, name="[w 2 axes]"),
        Sample((cube, (2, 0), w_cube.T.copy()), {}, name="[w 2 axes reversed]"),
    ]


def _ref_average(a, axis=None, weights=None, returned=False, keepdims=False):
    if isinstance(axis, tuple) and weights is not None and weights.shape != a.shape:
        # NumPy pairs the weight dims with the given axes in order.
        order = np.argsort(axis)
        weights = np.transpose(weights, order)
        shape = [1] * a.ndim
        for ax in sorted(axis):
            shape[ax] = a.shape[ax]
        weights = np.broadcast_to(weights.reshape(shape), a.shape)
    return np.average(a, axis=axis, weights=weights, returned=returned, keepdims=keepdims)


def close_samples(rng, dtype):
    dt = np.dtype(dtype)
    a = rand(rng, (3, 4), dt, special=False)
    out = [Sample((a, a.copy()), {}, name="[same]"),
           Sample((a, np.flip(a)), {}, name="[different]"),
           Sample((rand(rng, (0, 3), dt), rand(rng, (3,), dt)), {}, name="[empty]"),
           Sample((a, a[0].copy()), {}, name="[broadcast]")]
    if dt.kind in "fc":
        b = a.copy()
        b.reshape(-1)[0] = b.reshape(-1)[0] * (1 + 1e-9)
        nan = a.copy()
        nan.reshape(-1)[1] = np.nan
        inf = a.copy()
        inf.reshape(-1)[2] = np.inf
        out += [Sample((a, b), {}, name="[tiny diff]"),
                Sample((nan, nan.copy()), {}, name="[nan]"),
                Sample((nan, nan.copy()), {"equal_nan": True}, name="[nan equal]"),
                Sample((inf, inf.copy()), {}, name="[inf]"),
                Sample((inf, np.where(np.isinf(inf), -np.inf, inf).astype(dt)), {},
                       name="[inf -inf]"),
                Sample((a, a + np.asarray(1e-3, dt)), {"rtol": 0.0, "atol": 1e-2},
                       name="[atol]")]
    return out


def equal_samples(rng, dtype):
    dt = np.dtype(dtype)
    a = rand(rng, (3, 4), dt)
    out = [Sample((a, a.copy()), {}, name="[same]"),
           Sample((a, np.flip(a)), {}, name="[different]"),
           Sample((a, a[0].copy()), {}, name="[other shape]"),
           Sample((rand(rng, (0,), dt), rand(rng, (0,), dt)), {}, name="[empty]")]
    if dt.kind in "fc":
        out.append(Sample((a, a.copy()), {"equal_nan": True}, name="[nan equal]"))
    return out


def cumulative_samples(rng, dtype, *, array_api=False, with_dtype=True):
    dt = np.dtype(dtype)
    cases = [((5,), None), ((5,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 1, 3), 2), ((0, 3), 0),
             ((0, 3), 1), ((1,), -1)]
    if not array_api:
        cases += [((), None), ((3, 4), None)]
    out = [Sample((rand(rng, s, dt),), {"axis": a}, name=f"[{s} axis={a}]") for s, a in cases]
    out.append(Sample((rand(rng, (4, 5), dt, special=False),), {"axis": 1}, name="[finite]"))
    if array_api:
        out += [Sample((rand(rng, (3, 4), dt),), {"axis": 1, "include_initial": True},
                       name="[initial]"),
                Sample((rand(rng, (0, 2), dt),), {"axis": 0, "include_initial": True},
                       name="[initial empty]"),
                Sample((rand(rng, (), dt),), {}, name="[0-d]")]
    if with_dtype and dt.kind in "iu":
        full = np.full((4,), np.iinfo(dt).max, dt)
        out.append(Sample((full,), {"axis": 0, "dtype": dt}, name="[overflow]"))
    return out


def _ref_cumulative(ufunc, reverse_ok=True):
    def ref(x, axis=None, reverse=False):
        if axis is None:
            x, axis = x.reshape(-1), 0
        if reverse:
            return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis), axis)
        return ufunc.accumulate(x, axis=axis)
    return low32(ref)


def cummax_samples(rng, dtype):
    out = cumulative_samples(rng, dtype, with_dtype=False)
    out.append(Sample((rand(rng, (3, 4), dtype),), {"axis": 1, "reverse": True},
                      name="[reverse]"))
    return out


def quantile_samples(rng, dtype, *, scale=1.0):
    dt = np.dtype(dtype)
    x = rand(rng, (3, 4, 5), dt, special=False)
    nan = rand(rng, (3, 4), dt, special=False)
    if dt.kind == "f" or dt in LOW_SET:
        nan[1, 2] = np.nan
    qs = np.array([[0.0, 0.25], [0.5, 1.0]]) * scale
    out = [Sample((x, 0.3 * scale), {}, name="[all]"),
           Sample((x, qs), {"axis": 1}, name="[q 2-d]"),
           Sample((x, [0.1 * scale, 0.9 * scale]), {"axis": (0, 2), "keepdims": True},
                  name="[keep]"),
           Sample((x, 0.5 * scale), {"axis": (-1, 0)}, name="[tuple axis]"),
           Sample((nan, 0.5 * scale), {"axis": 1}, name="[nan row]"),
           Sample((rand(rng, (1,), dt), 0.7 * scale), {}, name="[size 1]")]
    for method in ("lower", "higher", "nearest", "midpoint"):
        out.append(Sample((x, qs), {"axis": -1, "method": method}, name=f"[{method}]"))
    return out


def median_samples(rng, dtype):
    dt = np.dtype(dtype)
    nan = rand(rng, (3, 4), dt, special=False)
    if dt.kind == "f" or dt in LOW_SET:
        nan[1, 2] = np.nan
    return [Sample((rand(rng, (3, 4, 5), dt, special=False),), {}, name="[all]"),
            Sample((rand(rng, (3, 4), dt, special=False),), {"axis": 1}, name="[even]"),
            Sample((rand(rng, (3, 5), dt, special=False),), {"axis": -1, "keepdims": True},
                   name="[odd keep]"),
            Sample((rand(rng, (2, 3, 4), dt, special=False),), {"axis": (0, 2)}, name="[tuple]"),
            Sample((nan,), {"axis": 1}, name="[nan]"),
            Sample((rand(rng, (0, 3), dt),), {"axis": 0}, name="[empty]")]


# ---- grad_samples: smooth points (no ties at max / min / sort, q away from kinks) -------------

def _distinct(rng, shape, dtype):
    """Finite values without ties (distinct by construction, also for complex)."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    vals = (rng.permutation(n) - n / 2 + rng.uniform(0.1, 0.4, n)) * 0.7
    if dt.kind == "c":
        vals = vals + 1j * rng.uniform(-1, 1, n)
    return vals.reshape(shape).astype(dt)


def _smooth(rng, shape, dtype):
    dt = np.dtype(dtype)
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    if dt.kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return x.astype(dt)


def axes_grad_samples(rng, dtype, make=_smooth):
    return [Sample((make(rng, (3, 4), dtype),), {"axis": 1}, name="[axis 1]"),
            Sample((make(rng, (2, 3, 4), dtype),), {"axis": (0, 2)}, name="[axes 0,2]"),
            Sample((make(rng, (2, 3, 4), dtype),), {"axis": -2, "keepdims": True},
                   name="[keep]"),
            Sample((make(rng, (5,), dtype),), {}, name="[all]")]


def prod_grad_samples(rng, dtype):
    one_zero = _smooth(rng, (3, 4), dtype)
    one_zero[1, 2] = 0
    two_zeros = _smooth(rng, (3, 4), dtype)
    two_zeros[0, 1] = two_zeros[0, 3] = 0
    return axes_grad_samples(rng, dtype)[:3] + [
        Sample((one_zero,), {"axis": 1}, name="[one zero]"),
        Sample((two_zeros,), {"axis": 1}, name="[two zeros]"),
        Sample((two_zeros,), {"axis": None}, name="[two zeros all]")]


def extremum_grad_samples(rng, dtype):
    return axes_grad_samples(rng, dtype, _distinct)


def cumprod_grad_samples(rng, dtype):
    zeros = _smooth(rng, (3, 6), dtype)
    zeros[0, 2] = 0
    zeros[1, 1] = zeros[1, 4] = 0
    return [Sample((_smooth(rng, (3, 5), dtype),), {"axis": 1}, name="[axis 1]"),
            Sample((_smooth(rng, (9,), dtype),), {"axis": 0}, name="[9, 4 steps]"),
            Sample((zeros,), {"axis": 1}, name="[zeros]"),
            Sample((zeros,), {"axis": 0}, name="[zeros axis 0]")]


def cumulative_grad_samples(rng, dtype, array_api=False):
    out = [Sample((_smooth(rng, (3, 5), dtype),), {"axis": 1}, name="[axis 1]"),
           Sample((_smooth(rng, (4, 3), dtype),), {"axis": 0}, name="[axis 0]")]
    if array_api:
        out.append(Sample((_smooth(rng, (3, 4), dtype),), {"axis": 1, "include_initial": True},
                          name="[initial]"))
    return out


def cummax_grad_samples(rng, dtype):
    return [Sample((_distinct(rng, (3, 6), dtype),), {"axis": 1}, name="[axis 1]"),
            Sample((_distinct(rng, (5, 2), dtype),), {"axis": 0}, name="[axis 0]"),
            Sample((_distinct(rng, (3, 6), dtype),), {"axis": 1, "reverse": True},
                   name="[reverse]")]


def var_grad_samples(rng, dtype):
    return axes_grad_samples(rng, dtype)[:3] + [
        Sample((_smooth(rng, (3, 4), dtype),), {"axis": 1, "ddof": 1}, name="[ddof]"),
        Sample((_smooth(rng, (3, 1), dtype),), {"axis": 1}, name="[size 1: zero variance]")]


def logsumexp_grad_samples(rng, dtype):
    a = _smooth(rng, (3, 4), dtype)
    b = np.abs(_smooth(rng, (3, 4), dtype))
    out = axes_grad_samples(rng, dtype)[:3] + [Sample((a, 1, b), {}, name="[b]")]
    if np.dtype(dtype).kind == "f":
        out.append(Sample((a, -1, _smooth(rng, (3, 4), dtype)), {"return_sign": True},
                          name="[b sign]"))
    return out


def quantile_grad_samples(rng, dtype, *, scale=1.0):
    x = _distinct(rng, (3, 4, 5), dtype)
    # q * (n - 1) stays away from integers (the kinks of linear interpolation in q)
    qs = np.array([[0.1, 0.3], [0.55, 0.9]]) * scale
    return [Sample((x, np.float64(0.3) * scale), {}, name="[all]"),
            Sample((x, qs), {"axis": 1}, name="[q 2-d]"),
            Sample((x, np.array([0.15, 0.8]) * scale), {"axis": (0, 2), "keepdims": True},
                   name="[keep]"),
            Sample((x, qs), {"axis": -1, "method": "midpoint"}, name="[midpoint]"),
            Sample((x, qs), {"axis": -1, "method": "lower"}, name="[lower]")]


def median_grad_samples(rng, dtype):
    return [Sample((_distinct(rng, (3, 4), dtype),), {"axis": 1}, name="[even]"),
            Sample((_distinct(rng, (3, 5), dtype),), {"axis": -1, "keepdims": True},
                   name="[odd keep]"),
            Sample((_distinct(rng, (2, 3, 4), dtype),), {"axis": (0, 2)}, name="[tuple]")]


NOT_BOOL = NUMERIC + LOW
REAL_NUM = INTS + FLOATS + LOW
register(
    OpInfo("quantile", low32(np.quantile), REAL_NUM, quantile_samples,
           expected_dtype=_float_result,
           grad_samples=quantile_grad_samples),
    OpInfo("percentile", low32(np.percentile), (np.float32, np.float64, np.int32),
           lambda r, d: quantile_samples(r, d, scale=100.0), expected_dtype=_float_result,
           grad_samples=lambda r, d: quantile_grad_samples(r, d, scale=100.0)),
    OpInfo("median", low32(np.median), REAL_NUM, median_samples, expected_dtype=_float_result,
           grad_samples=median_grad_samples),
    OpInfo("sum", low32(np.sum), ALL + LOW, sum_samples, hypothesis_shapes=True,
           grad_samples=axes_grad_samples),
    OpInfo("prod", low32(np.prod), ALL + LOW, sum_samples,
           grad_samples=prod_grad_samples),
    OpInfo("max", low32(np.max), ALL + LOW, extremum_samples,
           grad_samples=extremum_grad_samples),
    OpInfo("min", low32(np.min), ALL + LOW, extremum_samples,
           grad_samples=extremum_grad_samples),
    OpInfo("amax", low32(np.max), (np.float32, np.int8), extremum_samples,
           grad_samples=extremum_grad_samples),
    OpInfo("amin", low32(np.min), (np.float32, np.int8), extremum_samples,
           grad_samples=extremum_grad_samples),
    OpInfo("ptp", low32(np.ptp), NOT_BOOL, lambda r, d: reduction_samples(r, d, empty=False),
           grad_samples=extremum_grad_samples),
    OpInfo("argmax", low32(np.argmax), ALL + LOW, arg_samples, differentiable=False),
    OpInfo("argmin", low32(np.argmin), ALL + LOW, arg_samples, differentiable=False),
    OpInfo("all", low32(np.all), ALL + LOW, logical_samples, differentiable=False),
    OpInfo("any", low32(np.any), ALL + LOW, logical_samples, differentiable=False),
    OpInfo("count_nonzero", low32(np.count_nonzero), ALL + LOW, reduction_samples,
           differentiable=False),
    OpInfo("mean", low32(np.mean), ALL + LOW, mean_samples, expected_dtype=_float_result),
    OpInfo("var", _ref_var(np.var), ALL + LOW, var_samples, expected_dtype=_real_float_result,
           tols={"float32": (1e-4, 1e-5), "complex64": (1e-4, 1e-5)},
           grad_samples=var_grad_samples),
    OpInfo("std", _ref_var(np.std), ALL + LOW, var_samples, expected_dtype=_real_float_result,
           tols={"float32": (1e-4, 1e-5), "complex64": (1e-4, 1e-5)},
           grad_samples=var_grad_samples),
    OpInfo("nansum", low32(np.nansum), NUMERIC + LOW, nan_samples),
    OpInfo("nanprod", low32(np.nanprod), NUMERIC + LOW, nan_samples,
           grad_samples=prod_grad_samples),
    OpInfo("nanmean", low32(np.nanmean), NUMERIC + LOW, nan_samples,
           expected_dtype=_float_result),
    OpInfo("nanvar", low32(np.nanvar), NUMERIC + LOW, nan_samples,
           expected_dtype=_real_float_result, tols={"float32": (1e-4, 1e-5)},
           grad_samples=var_grad_samples),
    OpInfo("nanstd", low32(np.nanstd), NUMERIC + LOW, nan_samples,
           expected_dtype=_real_float_result, tols={"float32": (1e-4, 1e-5)},
           grad_samples=var_grad_samples),
    OpInfo("nanmax", low32(np.nanmax), REAL + COMPLEX,
           lambda r, d: nan_samples(r, d, empty=False),
           grad_samples=extremum_grad_samples),
    OpInfo("nanmin", low32(np.nanmin), REAL + COMPLEX,
           lambda r, d: nan_samples(r, d, empty=False),
           grad_samples=extremum_grad_samples),
    OpInfo("logsumexp", low32(scipy.special.logsumexp), INTS + FLOATS + LOW + COMPLEX,
           logsumexp_samples, expected_dtype=lambda dt, s: (
               _real_float_result(dt, s) if s.kwargs.get("return_sign") else
               _float_result(dt, s)),
           tols={"float32": (1e-5, 1e-5), "complex64": (1e-5, 1e-5)},
           grad_samples=logsumexp_grad_samples),
    OpInfo("average", low32(_ref_average), NUMERIC + LOW, average_samples,
           expected_dtype=_float_result),
    OpInfo("allclose", np.allclose, ALL, close_samples, differentiable=False),
    OpInfo("array_equal", np.array_equal, ALL, equal_samples, differentiable=False),
    OpInfo("cumsum", low32(np.cumsum), ALL + LOW, cumulative_samples,
           grad_samples=cumulative_grad_samples),
    OpInfo("cumprod", low32(np.cumprod), ALL + LOW, cumulative_samples,
           grad_samples=cumprod_grad_samples),
    OpInfo("cumulative_sum", low32(np.cumulative_sum), ALL + LOW,
           lambda r, d: cumulative_samples(r, d, array_api=True),
           grad_samples=lambda r, d: cumulative_grad_samples(r, d, array_api=True)),
    OpInfo("cumulative_prod", low32(np.cumulative_prod), ALL + LOW,
           lambda r, d: cumulative_samples(r, d, array_api=True),
           grad_samples=lambda r, d: (cumprod_grad_samples(r, d)[:3]
                                      + cumulative_grad_samples(r, d, True)[2:])),
    OpInfo("cummax", _ref_cumulative(np.maximum), ALL + LOW, cummax_samples,
           grad_samples=cummax_grad_samples),
    OpInfo("cummin", _ref_cumulative(np.minimum), ALL + LOW, cummax_samples,
           grad_samples=cummax_grad_samples),
)
