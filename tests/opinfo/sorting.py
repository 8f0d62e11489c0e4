"""OpInfos of src/arrays/ops/sorting.py.

The sort / argsort / top_k references are written independently of NumPy's sort: a Python
stable sort with a key giving NumPy's documented order (real: NaN last; complex:
``[R + Rj, R + nanj, nan + Rj, nan + nanj]`` with the non-NaN parts ascending).
"""
import math

import ml_dtypes
import numpy as np

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import ALL, LOW, rand

LOW_SET = {np.dtype(t) for t in (np.float16, ml_dtypes.bfloat16) + LOW}


def _key(v):
    if isinstance(v, complex):
        re_nan, im_nan = math.isnan(v.real), math.isnan(v.imag)
        cls = (2 if re_nan else 0) + (1 if im_nan else 0)  # the four groups, in NumPy's order
        return (cls, 0.0 if re_nan else v.real, 0.0 if im_nan else v.imag)
    if isinstance(v, float) and math.isnan(v):
        return (1, 0.0)
    return (0, v)


def _lane_order(lane, descending):
    vals = [v.item() if not isinstance(v, np.generic) or v.dtype.kind != "c" else complex(v)
            for v in lane]
    # sorted(..., reverse=True) keeps equal keys in their original order: a stable descending sort
    return sorted(range(len(vals)), key=lambda i: _key(vals[i]), reverse=descending)


def ref_argsort(x, axis=-1, descending=False, **_):
    if axis is None:
        x, axis = x.reshape(-1), 0
    keys = x.astype(np.float32) if x.dtype in LOW_SET else x
    moved = np.moveaxis(keys, axis, -1)
    out = np.zeros(moved.shape, np.int64)
    for idx in np.ndindex(moved.shape[:-1]):
        out[idx] = _lane_order(list(moved[idx]), descending)
    return np.moveaxis(out, -1, axis)


def ref_sort(x, axis=-1, descending=False, **_):
    if axis is None:
        x, axis = x.reshape(-1), 0
    return np.take_along_axis(x, ref_argsort(x, axis, descending), axis)


def ref_top_k(x, k):
    idx = ref_argsort(x, -1, True)[..., :k]
    return np.take_along_axis(x, idx, -1), idx


def ref_searchsorted(a, v, side="left"):
    # NumPy's own searchsorted on the ml_dtypes floats misorders NaN / inf: compare in float32.
    if a.dtype in LOW_SET:
        a, v = a.astype(np.float32), v.astype(np.float32)
    return np.searchsorted(a, v, side=side)


def _ties(dt):
    return np.array([[2, 1, 2, 0, 1, 2], [0, 0, 3, 3, 0, 1]]).astype(dt)


def sort_samples(rng, dtype):
    dt = np.dtype(dtype)
    out = []
    for shape, axis in [((), None), ((1,), -1), ((0,), -1), ((7,), 0), ((3, 4), -1), ((3, 4), 0),
                        ((2, 1, 3), 1), ((2, 3, 2), None), ((0, 3), 0), ((3, 0), -1)]:
        for descending in (False, True):
            out.append(Sample((rand(rng, shape, dt),), {"axis": axis, "descending": descending},
                              name=f"[{shape} axis={axis} desc={descending}]"))
    out.append(Sample((_ties(dt),), {}, name="[ties]"))
    out.append(Sample((_ties(dt),), {"descending": True}, name="[ties desc]"))
    out.append(Sample((rand(rng, (4, 5), dt, special=False),), {"axis": 0}, name="[finite]"))
    if dt.kind == "f" or dt in LOW_SET:
        specials = np.array([0.0, -0.0, np.nan, 1.0, np.inf, np.nan, -np.inf, 0.0, 1.0],
                            np.float32).astype(dt)
        out.append(Sample((specials,), {}, name="[specials]"))
        out.append(Sample((specials,), {"descending": True}, name="[specials desc]"))
    if dt.kind == "c":
        nan = np.nan
        cs = np.array([complex(1, nan), complex(nan, 1), complex(nan, nan), complex(1, 2),
                       complex(nan, 0), complex(1, nan), complex(0, 5), complex(1, -1)], dt)
        out.append(Sample((cs,), {}, name="[complex nans]"))
        out.append(Sample((cs,), {"descending": True}, name="[complex nans desc]"))
    return out


def searchsorted_samples(rng, dtype):
    dt = np.dtype(dtype)
    hay = np.sort(rand(rng, (9,), dt).astype(np.float32) if dt in LOW_SET
                  else rand(rng, (9,), dt)).astype(dt)
    dups = np.sort(np.array([0, 1, 1, 1, 2, 3, 3]).astype(dt))
    out = []
    for side in ("left", "right"):
        for vshape in [(), (5,), (2, 3), (0,)]:
            out.append(Sample((hay, rand(rng, vshape, dt)), {"side": side},
                              name=f"[{vshape} {side}]"))
        out.append(Sample((dups, np.array([1, 0, 3, 2, 5]).astype(dt)), {"side": side},
                          name=f"[dups {side}]"))
        out.append(Sample((hay, hay.copy()), {"side": side}, name=f"[self {side}]"))
        out.append(Sample((np.zeros((0,), dt), rand(rng, (3,), dt)), {"side": side},
                          name=f"[empty {side}]"))
    return out


def top_k_samples(rng, dtype):
    dt = np.dtype(dtype)
    return [Sample((rand(rng, (7,), dt), 3), name="[7 k=3]"),
            Sample((rand(rng, (3, 4), dt), 4), name="[k=n]"),
            Sample((rand(rng, (2, 1, 5), dt), 1), name="[k=1]"),
            Sample((rand(rng, (3, 4), dt), 0), name="[k=0]"),
            Sample((rand(rng, (3, 0), dt), 0), name="[empty]"),
            Sample((_ties(dt), 4), name="[ties]")]



def _distinct(rng, shape, dtype):
    """Finite values without ties (sort / top_k are not differentiable at ties)."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    vals = (rng.permutation(n) - n / 2 + rng.uniform(0.1, 0.4, n)) * 0.7
    if dt.kind == "c":
        vals = vals + 1j * rng.uniform(-1, 1, n)
    return vals.reshape(shape).astype(dt)


def sort_grad_samples(rng, dtype):
    return [Sample((_distinct(rng, (7,), dtype),), {"axis": 0}, name="[7]"),
            Sample((_distinct(rng, (3, 4), dtype),), {"axis": 0, "descending": True},
                   name="[axis 0 desc]"),
            Sample((_distinct(rng, (2, 3, 2), dtype),), {"axis": None}, name="[flat]")]


def top_k_grad_samples(rng, dtype):
    return [Sample((_distinct(rng, (7,), dtype), 3), name="[7 k=3]"),
            Sample((_distinct(rng, (3, 4), dtype), 4), name="[k=n]"),
            Sample((_distinct(rng, (2, 1, 5), dtype), 2), name="[k=2]")]

def unique_samples(rng, dtype):
    dt = np.dtype(dtype)
    out = [Sample((rand(rng, s, dt),), name=f"[{s}]") for s in [(), (0,), (7,), (3, 4)]]
    out.append(Sample((_ties(dt),), name="[ties]"))
    if dt.kind in "fc" or dt in LOW_SET:
        nans = np.array([1, np.nan, 2, np.nan, 1], np.float32).astype(dt)
        out.append(Sample((nans,), name="[nans]"))
    return out


def unique_np_samples(rng, dtype):
    out = []
    for s in unique_samples(rng, dtype):
        out.append(s)
        out.append(Sample(s.args, {"return_index": True, "return_inverse": True,
                                   "return_counts": True}, name=s.name + "[all]"))
        out.append(Sample(s.args, {"return_counts": True, "equal_nan": False},
                          name=s.name + "[counts, nan distinct]"))
    ties = _ties(dtype)
    out.append(Sample((np.concatenate([ties, ties[:1]]),), {"axis": 0, "return_inverse": True},
                      name="[rows]"))
    return out


def _low32_unique(fn):
    def ref(x, **kw):
        if x.dtype not in LOW_SET:
            return fn(x, **kw)
        out = fn(x.astype(np.float32), **kw)
        if isinstance(out, tuple):
            return (out[0].astype(x.dtype),) + tuple(out[1:])
        return out.astype(x.dtype)
    return ref


def _ref_unique_values(x):
    return np.unique(x, equal_nan=False)


def _ref_unique_counts(x):
    return np.unique(x, return_counts=True, equal_nan=False)


def _ref_unique_inverse(x):
    v, inv = np.unique(x, return_inverse=True, equal_nan=False)
    return v, inv.reshape(x.shape)


def _ref_unique_all(x):
    v, i, inv, c = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                             equal_nan=False)
    return v, i, inv.reshape(x.shape), c


TYPES = ALL + LOW
register(
    OpInfo("sort", ref_sort, TYPES, sort_samples, grad_samples=sort_grad_samples),
    OpInfo("argsort", ref_argsort, TYPES, sort_samples, differentiable=False),
    OpInfo("searchsorted", ref_searchsorted, TYPES, searchsorted_samples, nin=2, sorted_args=(0,),
           differentiable=False),
    OpInfo("top_k", ref_top_k, TYPES, top_k_samples, grad_samples=top_k_grad_samples),
    OpInfo("unique", _low32_unique(np.unique), TYPES, unique_np_samples, eager_only=True,
           differentiable=False, vmap=False),
    OpInfo("unique_values", _low32_unique(_ref_unique_values), TYPES, unique_samples,
           eager_only=True, differentiable=False, vmap=False),
    OpInfo("unique_counts", _low32_unique(_ref_unique_counts), TYPES, unique_samples,
           eager_only=True, differentiable=False, vmap=False),
    OpInfo("unique_inverse", _low32_unique(_ref_unique_inverse), TYPES, unique_samples,
           eager_only=True, differentiable=False, vmap=False),
    OpInfo("unique_all", _low32_unique(_ref_unique_all), TYPES, unique_samples,
           eager_only=True, differentiable=False, vmap=False),
)
