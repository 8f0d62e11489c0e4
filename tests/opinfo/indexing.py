"""OpInfos of src/arrays/ops/indexing.py (x[idx], take, take_along_axis, put, diagonal, trace,
nonzero / argwhere / flatnonzero, compress / extract, select, choose, unravel / ravel indices).

Index arguments given as NumPy arrays at the top level of ``Sample.args`` are traced by the
staging test (traced indices); indices inside tuples / lists stay concrete (static).
"""
import ml_dtypes
import numpy as np

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import ALL, NUMERIC, rand

LOW = {np.dtype(t) for t in (np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                             ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn)}
I = np.intp

# Static index expressions for an operand of shape (4, 5, 6), compared with NumPy.
STATIC_INDICES = [
    ("int", 0), ("neg int", -1), ("ints", (1, 2)), ("neg ints", (-1, -2, -3)),
    ("full ints", (3, 4, 5)), ("slice", slice(1, 3)), ("rev", slice(None, None, -1)),
    ("neg step", slice(-1, 0, -2)), ("oob slice", slice(-100, 100)),
    ("empty slice", slice(10, None)), ("step 3", slice(None, None, 3)),
    ("ellipsis int", (Ellipsis, 1)), ("none int", (None, 0)), ("mid none", (slice(None), None, 2)),
    ("trailing none", (Ellipsis, None)), ("empty tuple", ()),
    ("mixed", (slice(3, 0, -1), None, Ellipsis, slice(None, None, -2))),
    ("list", [0, 2, -1]), ("2d list", ([[0, 1], [2, 3]],)),
    ("separated", ([0, 1], slice(None), [1, 2])), ("adjacent", (slice(None), [0, 2], [1, 3])),
    ("int separated", (0, slice(None), [1, 2])), ("int adjacent", (slice(None), 1, [1, 2])),
    ("broadcast", ([[0], [1]], [0, 1, 2])),
    ("broadcast sep", ([[0], [3]], slice(1, 3), [0, 1, 2])),
    ("none between", ([0, 1], None, [0, 1])), ("ellipsis between", ([1], Ellipsis, [2])),
    ("mask", (np.array([True, False, True, False]),)),
    ("mask 2d", (np.ones((4, 5), bool) ^ np.eye(4, 5, dtype=bool), 0)),
    ("mask last", (Ellipsis, np.array([True, False, True, False, True, False]))),
    ("mask + array", (np.array([True, False, True, True]), slice(None), [0, 1, 5])),
    ("true", True), ("false", (False, 0)), ("true ellipsis", (Ellipsis, True)),
    ("true between", ([0, 1], True, [0, 1])), ("empty list", (slice(None), [])),
    ("zero-d array", (np.array(2), slice(None), [0, 1])),
    ("uint", (np.array([3, 0], np.uint8),)), ("neg array", (slice(None), np.array([-1, -5, 0]))),
]


def getitem_samples(rng, dtype):
    x = rand(rng, (4, 5, 6), dtype)
    out = [Sample((x, idx), name=f"[{name}]") for name, idx in STATIC_INDICES]
    out += [
        Sample((rand(rng, (), dtype), ()), name="[0-d ()]"),
        Sample((rand(rng, (), dtype), None), name="[0-d None]"),
        Sample((rand(rng, (), dtype), Ellipsis), name="[0-d ...]"),
        Sample((rand(rng, (), dtype), True), name="[0-d True]"),
        Sample((rand(rng, (0, 3), dtype), (slice(None), [0, 2])), name="[size-0 gather]"),
        Sample((rand(rng, (0, 3), dtype), (Ellipsis, 1)), name="[size-0 int]"),
        Sample((rand(rng, (3, 0), dtype), ([0, 2, 1],)), name="[size-0 window]"),
        Sample((rand(rng, (1,), dtype), 0), name="[size-1]"),
        # Top-level NumPy index arrays: traced by the staging test (clamped gather).
        Sample((x, np.array([3, 0, -1, 2])), name="[traced 1d]"),
        Sample((x, np.array([[0, 1], [-2, 3]])), name="[traced 2d]"),
        Sample((rand(rng, (5,), dtype), np.array(3)), name="[traced 0-d]"),
        Sample((x, np.array([], dtype=I)), name="[traced empty]"),
    ]
    return out


def _getitem_ref(x, idx):
    return x[idx]


# ---- take / take_along_axis / put --------------------------------------------------------------

def take_samples(rng, dtype):
    x = rand(rng, (4, 5), dtype)
    return [
        Sample((x, np.array([0, 3, -1])), name="[flat]"),
        Sample((x, np.array([[0, 2], [1, -4]])), {"axis": 1}, name="[axis 1 2d]"),
        Sample((x, np.array([3, 0])), {"axis": -2}, name="[axis -2]"),
        Sample((x, 2), {"axis": 0}, name="[int index]"),
        Sample((x, np.array([], dtype=I)), {"axis": 1}, name="[empty]"),
        Sample((x, np.array([7, -9, 2])), {"axis": 1, "mode": "wrap"}, name="[wrap]"),
        Sample((x, np.array([7, 9, 2])), {"axis": 1, "mode": "clip"}, name="[clip]"),
        Sample((rand(rng, (0, 3), dtype), np.array([1, 2])), {"axis": 1}, name="[size-0 operand]"),
        Sample((rand(rng, (), dtype), np.array([0, 0])), name="[0-d operand]"),
    ]


def take_along_axis_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    return [
        Sample((x, np.array([[0, 3], [1, 1], [-1, 2]])), {"axis": 1}, name="[axis 1]"),
        Sample((x, np.array([[2, 0, 1, 1]])), {"axis": 0}, name="[axis 0 broadcast]"),
        Sample((x, np.array([[1], [0], [3]])), {"axis": -1}, name="[one column]"),
        Sample((x, np.array([5, 0, -12])), {"axis": None}, name="[axis None]"),
        Sample((rand(rng, (2, 3, 4), dtype), np.zeros((2, 0, 4), I)), {"axis": 1}, name="[size-0]"),
        Sample((rand(rng, (2, 1, 4), dtype), np.ones((2, 3, 1), I)), {"axis": 2},
               name="[broadcast both]"),
    ]


def _put_along_axis_ref(arr, indices, values, axis):
    out = arr.copy()
    np.put_along_axis(out, indices, values, axis)
    return out


def put_along_axis_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    return [
        Sample((x, np.array([[0, 3], [1, 2], [-1, 0]]), rand(rng, (3, 2), dtype), 1),
               name="[axis 1]"),
        Sample((x, np.array([[2, 0, 1, 1]]), rand(rng, (), dtype), 0), name="[scalar values]"),
        Sample((x, np.array([5, 0, -12]), rand(rng, (3,), dtype), None), name="[axis None]"),
    ]


def _put_ref(a, ind, v):
    out = a.copy()
    np.put(out, ind, v)
    return out


def put_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    return [
        Sample((x, np.array([0, 5, -1]), rand(rng, (3,), dtype)), name="[1d]"),
        Sample((x, np.array([[1, 2], [3, 4]]), rand(rng, (2,), dtype)), name="[cyclic values]"),
        Sample((x, 7, rand(rng, (), dtype)), name="[int index]"),
    ]


# ---- diagonal / trace --------------------------------------------------------------------------

DIAG_CASES = [
    ((4, 4), {}), ((3, 5), {"offset": 2}), ((3, 5), {"offset": -1}), ((5, 3), {"offset": -4}),
    ((3, 5), {"offset": 7}), ((2, 3, 4), {"axis1": 1, "axis2": 2}),
    ((2, 3, 4), {"axis1": -1, "axis2": 0, "offset": 1}), ((2, 3, 4), {"axis1": 2, "axis2": 1}),
    ((0, 3), {}), ((2, 0, 3), {"axis1": 0, "axis2": 2}), ((1, 1), {}),
]


def diagonal_samples(rng, dtype):
    return [Sample((rand(rng, shape, dtype),), kw, name=f"[{shape} {kw}]")
            for shape, kw in DIAG_CASES]


def _trace_ref(a, **kw):
    if a.dtype in LOW:  # Starling sums low-precision floats in float32 and rounds once
        return np.asarray(np.trace(a.astype(np.float32), **kw)).astype(a.dtype)
    return np.trace(a, **kw)


def trace_samples(rng, dtype):
    out = [Sample((rand(rng, shape, dtype),), kw, name=f"[{shape} {kw}]")
           for shape, kw in DIAG_CASES]
    if np.dtype(dtype).kind in "iu":
        out.append(Sample((rand(rng, (3, 3), dtype),), {"dtype": np.int64}, name="[dtype]"))
    return out


# ---- nonzero family ----------------------------------------------------------------------------

def nonzero_samples(rng, dtype):
    shapes = [(1,), (0,), (7,), (3, 4), (2, 1, 3), (0, 3)]
    out = [Sample((rand(rng, s, dtype),), name=f"[{s}]") for s in shapes]
    z = np.zeros((3, 4), dtype)
    out.append(Sample((z,), name="[all zero]"))
    return out


def _padded(idx, size, fill):
    idx = np.asarray(idx)
    if idx.shape[0] >= size:
        return idx[:size]
    return np.concatenate([idx, np.full((size - idx.shape[0],) + idx.shape[1:], fill, idx.dtype)])


def _nonzero_sized_ref(a, size, fill_value=0):
    return tuple(_padded(i, size, fill_value) for i in np.nonzero(a))


def _argwhere_sized_ref(a, size, fill_value=0):
    return _padded(np.argwhere(a), size, fill_value)


def _flatnonzero_sized_ref(a, size, fill_value=0):
    return _padded(np.flatnonzero(a), size, fill_value)


def sized_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    return [Sample((x,), {"size": 20, "fill_value": -1}, name="[pad]"),
            Sample((x,), {"size": 3}, name="[truncate]"),
            Sample((np.zeros((2, 2), dtype),), {"size": 2, "fill_value": 7}, name="[all pad]"),
            Sample((x,), {"size": 0}, name="[size 0]")]


def argwhere_samples(rng, dtype):
    return nonzero_samples(rng, dtype) + [Sample((rand(rng, (), dtype),), name="[0-d]")]


def compress_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    return [
        Sample(([True, False, True], x), {"axis": 0}, name="[axis 0]"),
        Sample(([False, True, True, False], x), {"axis": 1}, name="[axis 1]"),
        Sample(([0, 1, 2], x), {"axis": -1}, name="[int condition, short]"),
        Sample(([True, False, False, True, True], x), name="[axis None]"),
        Sample(([False, False, False], x), {"axis": 0}, name="[none]"),
    ]


def _compress_sized_ref(condition, a, axis=None, size=None, fill_value=0):
    out = np.compress(condition, a, axis=axis)
    axis = 0 if axis is None else axis % a.ndim
    out = np.moveaxis(out, axis, 0)
    out = _padded(out, size, fill_value).astype(a.dtype)
    return np.moveaxis(out, 0, axis)


def compress_sized_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype, special=False)
    cond = np.array([True, False, True, True])
    return [Sample((cond, x), {"axis": 1, "size": 4, "fill_value": 0}, name="[traced pad]"),
            Sample((cond, x), {"axis": 1, "size": 2}, name="[traced truncate]")]


def extract_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    return [Sample((rng.random((3, 4)) < 0.5, x), name="[mask]"),
            Sample(([[1, 0, 0, 1]], x), name="[short condition]")]


# ---- select / choose ---------------------------------------------------------------------------

def select_samples(rng, dtype):
    a, b = rand(rng, (3, 4), dtype), rand(rng, (4,), dtype)
    c1, c2 = rng.random((3, 4)) < 0.4, rng.random((4,)) < 0.5
    return [
        Sample(([c1, c2], [a, b]), name="[two]"),
        Sample(([c1, c2], [a, b], rand(rng, (3, 1), dtype)), name="[array default]"),
        Sample(([c2], [b], rand(rng, (), dtype)), name="[scalar default]"),
        Sample(([np.zeros((0, 4), bool)], [a[:0]]), name="[size-0]"),
    ]


def choose_samples(rng, dtype):
    chs = [rand(rng, (3, 4), dtype), rand(rng, (4,), dtype), rand(rng, (3, 1), dtype)]
    return [
        Sample((np.array([[0, 1, 2, 1]] * 3), chs), name="[three]"),
        Sample((np.array([0, 1, 1, 0]), chs[:2]), name="[two]"),
        Sample((np.array([[5, -1, 2, 3]]), chs), {"mode": "clip"}, name="[clip]"),
        Sample((np.array([[5, -1, 2, 3]]), chs), {"mode": "wrap"}, name="[wrap]"),
    ]


# ---- unravel / ravel ---------------------------------------------------------------------------

def unravel_samples(rng, dtype):
    return [Sample((np.array([0, 5, 11, 7]), (3, 4)), name="[C]"),
            Sample((np.array([[0, 5], [11, 7]]), (3, 4)), {"order": "F"}, name="[F]"),
            Sample((np.array([4, 23]), (2, 3, 4)), name="[3d]"),
            Sample((np.array(9), (2, 5)), name="[0-d]")]


def ravel_samples(rng, dtype):
    return [Sample(((np.array([0, 2, 1]), np.array([3, 0, 1])), (3, 4)), name="[C]"),
            Sample(((np.array([0, 2, 1]), np.array([3, 0, 1])), (3, 4)), {"order": "F"},
                   name="[F]"),
            Sample(((np.array([0, 5, -1]), np.array([3, 0, 9])), (3, 4)), {"mode": "clip"},
                   name="[clip]"),
            Sample(((np.array([0, 5, -1]), np.array([3, 0, 9])), (3, 4)), {"mode": "wrap"},
                   name="[wrap]")]


# ---- grad samples -----------------------------------------------------------------------------
# rand() puts NaN / inf into most float samples, which leaves check_grads (finite differences)
# almost nothing to test: these redraw the float arguments finite and add duplicate indices.

def _finite_like(rng, a):
    if isinstance(a, np.ndarray) and a.dtype.kind in "fc":
        return rand(rng, a.shape, a.dtype, special=False)
    return a


def _finite(samples, keep=None, extra=()):
    """grad_samples: ``samples`` (those named in ``keep``, if given) plus ``extra(rng, dtype)``,
    with finite float arguments and no size-0 ones."""
    def fn(rng, dtype):
        out = []
        for s in list(samples(rng, dtype)) + [e for f in extra for e in f(rng, dtype)]:
            if keep is not None and s.name not in keep:
                continue
            args = tuple(_finite_like(rng, a) for a in s.args)
            if any(isinstance(a, np.ndarray) and a.size == 0 for a in args):
                continue
            out.append(Sample(args, s.kwargs, s.name))
        return out
    return fn


GETITEM_GRAD = {f"[{n}]" for n in ("int", "mixed", "list", "2d list", "separated", "adjacent",
                                   "int separated", "broadcast sep", "mask", "mask + array",
                                   "neg array", "true between", "traced 1d", "traced 2d",
                                   "size-1", "repeated")}


def _getitem_repeated(rng, dtype):
    x = rand(rng, (4, 5, 6), dtype)
    return [Sample((x, (np.array([[0, 3], [3, 3]]), slice(None), np.array([1, 1]))),
                   name="[repeated]")]


def _take_repeated(rng, dtype):
    x = rand(rng, (4, 5), dtype)
    return [Sample((x, np.array([[1, 1], [4, 1]])), {"axis": 1}, name="[repeated]"),
            Sample((x, np.array([7, -9, 7])), {"axis": 0, "mode": "clip"}, name="[clip dup]"),
            Sample((x, np.array([7, -9, 7])), {"axis": 1, "mode": "fill", "fill_value": 2.0},
                   name="[fill]")]


def _put_duplicates(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    return [Sample((x, np.array([0, 5, 0, -12]), rand(rng, (4,), dtype)), name="[duplicates]")]


def _put_along_axis_duplicates(rng, dtype):
    x = rand(rng, (3, 4), dtype)
    return [Sample((x, np.array([[0, 0], [3, 1], [2, 2]]), rand(rng, (3, 2), dtype), 1),
                   name="[duplicates]")]


INT_ONLY = (np.int64,)

register(
    OpInfo("_getitem", _getitem_ref, ALL, getitem_samples, nin=2,
           grad_samples=_finite(getitem_samples, GETITEM_GRAD, (_getitem_repeated,))),
    OpInfo("take", np.take, ALL, take_samples, nin=2,
           grad_samples=_finite(take_samples, extra=(_take_repeated,))),
    OpInfo("take_along_axis", np.take_along_axis, ALL, take_along_axis_samples, nin=2,
           grad_samples=_finite(take_along_axis_samples)),
    OpInfo("put_along_axis", _put_along_axis_ref, ALL, put_along_axis_samples, nin=3,
           grad_samples=_finite(put_along_axis_samples, extra=(_put_along_axis_duplicates,))),
    OpInfo("put", _put_ref, ALL, put_samples, nin=3,
           grad_samples=_finite(put_samples, extra=(_put_duplicates,))),
    OpInfo("diagonal", np.diagonal, ALL, diagonal_samples,
           grad_samples=_finite(diagonal_samples)),
    OpInfo("trace", _trace_ref, NUMERIC + (np.bool_,), trace_samples,
           grad_samples=_finite(trace_samples)),
    OpInfo("nonzero", np.nonzero, ALL, nonzero_samples, eager_only=True, differentiable=False,
           vmap=False),
    OpInfo("nonzero", _nonzero_sized_ref, ALL, sized_samples, differentiable=False),
    OpInfo("argwhere", np.argwhere, ALL, argwhere_samples, eager_only=True, differentiable=False,
           vmap=False),
    OpInfo("argwhere", _argwhere_sized_ref, ALL, sized_samples, differentiable=False),
    OpInfo("flatnonzero", np.flatnonzero, ALL, nonzero_samples, eager_only=True,
           differentiable=False, vmap=False),
    OpInfo("flatnonzero", _flatnonzero_sized_ref, ALL, sized_samples, differentiable=False),
    OpInfo("compress", np.compress, ALL, compress_samples, nin=2,
           grad_samples=_finite(compress_samples)),
    OpInfo("compress", _compress_sized_ref, ALL, compress_sized_samples, nin=2),
    OpInfo("extract", np.extract, ALL, extract_samples, nin=2, eager_only=True, vmap=False),
    OpInfo("select", np.select, ALL, select_samples, nin=3),
    OpInfo("choose", np.choose, ALL, choose_samples, nin=2),
    OpInfo("unravel_index", np.unravel_index, INT_ONLY, unravel_samples, differentiable=False),
    OpInfo("ravel_multi_index", np.ravel_multi_index, INT_ONLY, ravel_samples,
           differentiable=False),
)
