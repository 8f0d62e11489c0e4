"""OpInfos of src/arrays/ops/creation.py and creation_ranges.py against NumPy.

Creation samples pass ``dtype=`` explicitly (Starling's defaults differ from NumPy's: float32
for floats; they are checked in tests/test_creation.py). NumPy builds ml_dtypes arrays fine for
zeros / full / eye; ranges are computed in float64 and rounded once, as Starling does.
"""
import ml_dtypes
import numpy as np

from tests import exact_casts
from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import ALL, FLOATS, INTS, LOW, rand

EVERY = ALL + LOW
SOME = (np.bool_, np.int8, np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
        np.complex64, ml_dtypes.float8_e4m3fn)
REAL_NUM = INTS + FLOATS


def r(rng, shape, dt):
    return np.asarray(rand(rng, shape, dt))


def _native(dt):
    return np.dtype(dt).kind in "biufc"


SHAPES = [(), (0,), (1,), (3,), (2, 3), (0, 4), 4, [2, 1, 3]]


def shape_samples(rng, dt):
    return [Sample((s,), {"dtype": dt}, name=f"[{s}]") for s in SHAPES]


def full_samples(rng, dt):
    out = [Sample((s, 2), {"dtype": dt}, name=f"[{s}]") for s in SHAPES]
    out.append(Sample(((2, 3), r(rng, (), dt)), name="[0-d fill]"))
    out.append(Sample(((2, 3), r(rng, (3,), dt)), name="[1-d fill]"))
    return out


def like_samples(rng, dt):
    return [Sample((r(rng, s, dt),), name=f"[{s}]") for s in [(), (0,), (2, 3), (1, 4, 1)]] + [
        Sample((r(rng, (2, 3), dt),), {"shape": (4,)}, name="[shape=]"),
        Sample((r(rng, (2, 3), np.float32),), {"dtype": dt}, name="[dtype=]")]


def full_like_samples(rng, dt):
    return [Sample((r(rng, s, dt), 2), name=f"[{s}]") for s in [(), (0,), (2, 3)]] + [
        Sample((r(rng, (2, 3), dt), 1), {"shape": (3, 1)}, name="[shape=]"),
        Sample((r(rng, (2, 3), np.int32), r(rng, (), dt)), {"dtype": dt}, name="[array fill]")]


def eye_samples(rng, dt):
    cases = [(3,), (3, 4), (4, 3, 1), (4, 3, -2), (3, 3, 5), (3, 3, -5), (0,), (2, 0), (1,),
             (2, 5, 3), (5, 2, -4)]
    return [Sample(c, {"dtype": dt}, name=f"[{c}]") for c in cases]


def identity_samples(rng, dt):
    return [Sample((n,), {"dtype": dt}, name=f"[{n}]") for n in (0, 1, 4)]


def tril_samples(rng, dt):
    out = []
    for shape in [(3, 4), (4, 3), (2, 3, 4), (0, 3), (1, 1), (3, 0)]:
        for k in (0, 1, -1, 5, -5):
            out.append(Sample((r(rng, shape, dt),), {"k": k}, name=f"[{shape} k={k}]"))
    return out


def diag_samples(rng, dt):
    out = []
    for shape in [(3,), (0,), (1,), (3, 4), (4, 3), (0, 2), (1, 1)]:
        for k in (0, 2, -1, -4):
            out.append(Sample((r(rng, shape, dt),), {"k": k}, name=f"[{shape} k={k}]"))
    return out


def diagflat_samples(rng, dt):
    return [Sample((r(rng, s, dt),), {"k": k}, name=f"[{s} k={k}]")
            for s, k in [((2, 2), 0), ((3,), 1), ((), -1), ((0,), 2)]]


def meshgrid_samples(rng, dt):
    a, b, c = r(rng, (3,), dt), r(rng, (2,), dt), r(rng, (4,), dt)
    return [Sample((a, b), name="[xy]"), Sample((a, b), {"indexing": "ij"}, name="[ij]"),
            Sample((a, b, c), name="[3 xy]"), Sample((a, b, c), {"indexing": "ij"}, name="[3 ij]"),
            Sample((a, b), {"sparse": True}, name="[sparse]"),
            Sample((a, b, c), {"sparse": True, "indexing": "ij"}, name="[sparse ij]"),
            Sample((a,), name="[one]"), Sample((r(rng, (0,), dt), b), name="[empty]"),
            Sample((r(rng, (2, 2), dt), b), name="[2-d input]")]


def indices_samples(rng, dt):
    return [Sample((s,), {"dtype": dt}, name=f"[{s}]") for s in [(2, 3), (4,), (0, 2), (2, 1, 3)]] \
        + [Sample(((2, 3),), {"dtype": dt, "sparse": True}, name="[sparse]")]


def array_samples(rng, dt):
    return [Sample((r(rng, (2, 3), dt),), name="[copy]"),
            Sample((r(rng, (3,), dt),), {"ndmin": 3}, name="[ndmin]"),
            Sample((r(rng, (), dt),), {"ndmin": 1}, name="[0-d ndmin]")]


def _arange_ref(*args, dtype=None):
    if _native(dtype):
        return np.arange(*args, dtype=dtype)
    return np.arange(*args).astype(dtype)


def arange_samples(rng, dt):
    cases = [(5,), (0,), (-3,), (2, 10, 3), (10, 2, -2), (1, 2), (3, 17, 4), (-5, 5, 7)]
    if np.dtype(dt).kind not in "iu":
        cases += [(0.0, 1.0, 0.25), (0.5, 3, 0.7), (2.5,)]
    if np.dtype(dt).kind == "u":
        cases = [c for c in cases if min(c) >= 0]
    return [Sample(c, {"dtype": dt}, name=f"[{c}]") for c in cases]


def _linspace_ref(*args, dtype=None, **kw):
    """NumPy's float64 values, floored for integer dtypes, converted by Starling's rules
    (an integer dtype saturates: linspace(-2, 3, 1, dtype=uint8) is 0, not NumPy's 254)."""
    if dtype is None:
        return np.linspace(*args, **kw)
    y = np.linspace(*args, dtype=np.float64, **kw)
    if np.dtype(dtype).kind in "iu":
        y = np.floor(y)
    return y.astype(dtype) if np.dtype(dtype).kind == "c" else exact_casts.convert(y, dtype)


def linspace_samples(rng, dt):
    cases = [((0, 1, 5), {}), ((0, 1, 5), {"endpoint": False}), ((-2, 3, 1), {}),
             ((1, 1, 0), {}), ((0, 10, 4), {}), ((3, -3, 7), {}), ((0, 1), {}),
             ((0, 5, 1), {"endpoint": False})]
    out = [Sample(a, {"dtype": dt, **kw}, name=f"[{a} {kw}]") for a, kw in cases]
    if np.dtype(dt).kind in "fc":
        out += linspace_array_samples(rng, dt)
    return out


def linspace_array_samples(rng, dt):
    """Array bounds: computed with starling ops (eagerly as when staged) in the result dtype."""
    s, e = r(rng, (2,), dt), r(rng, (2,), dt)
    s, e = np.nan_to_num(s, posinf=1, neginf=-1), np.nan_to_num(e, posinf=1, neginf=-1)
    return [Sample((s, e, 4), name="[arrays]"), Sample((s, e, 4), {"axis": -1}, name="[axis=-1]"),
            Sample((s, e, 3), {"endpoint": False}, name="[no endpoint]"),
            Sample((s, 2.0, 1), name="[num=1]"), Sample((s, e, 0), name="[num=0]"),
            Sample((r(rng, (), dt) * 0 + 1, 4.0, 5), name="[0-d]")]


def _logspace_ref(*args, dtype=None, **kw):
    return np.logspace(*args, dtype=np.float64, **kw).astype(dtype)


def logspace_samples(rng, dt):
    cases = [((0, 2, 5), {}), ((0, 2, 4), {"endpoint": False}), ((-1, 1, 3), {"base": 2.0}),
             ((1, 1, 0), {})]
    return [Sample(a, {"dtype": dt, **kw}, name=f"[{a} {kw}]") for a, kw in cases]


def _geomspace_ref(*args, dtype=None, **kw):
    return np.geomspace(*args, dtype=np.float64, **kw).astype(dtype)


def geomspace_samples(rng, dt):
    cases = [((1, 1000, 4), {}), ((1, 16, 4), {"endpoint": False}), ((-1, -100, 3), {}),
             ((2, 2, 1), {})]
    return [Sample(a, {"dtype": dt, **kw}, name=f"[{a} {kw}]") for a, kw in cases]


register(
    OpInfo("zeros", np.zeros, EVERY, shape_samples),
    OpInfo("ones", np.ones, EVERY, shape_samples),
    OpInfo("empty", np.zeros, SOME, shape_samples),
    OpInfo("full", np.full, EVERY, full_samples),
    OpInfo("zeros_like", np.zeros_like, EVERY, like_samples),
    OpInfo("ones_like", np.ones_like, SOME, like_samples),
    OpInfo("empty_like", np.zeros_like, SOME, like_samples),
    OpInfo("full_like", np.full_like, EVERY, full_like_samples),
    OpInfo("eye", np.eye, EVERY, eye_samples),
    OpInfo("identity", np.identity, SOME, identity_samples),
    OpInfo("tri", np.tri, EVERY, eye_samples),
    OpInfo("tril", np.tril, EVERY, tril_samples),
    OpInfo("triu", np.triu, EVERY, tril_samples),
    OpInfo("diag", np.diag, EVERY, diag_samples),
    OpInfo("diagflat", np.diagflat, SOME, diagflat_samples),
    OpInfo("meshgrid", np.meshgrid, SOME, meshgrid_samples),
    OpInfo("indices", np.indices, INTS + (np.float32, np.float64), indices_samples),
    OpInfo("array", np.array, SOME, array_samples),
    OpInfo("arange", _arange_ref, REAL_NUM, arange_samples),
    OpInfo("linspace", _linspace_ref, REAL_NUM + (np.complex64, np.complex128), linspace_samples),
    OpInfo("logspace", _logspace_ref, (np.float32, np.float64, np.int64, np.complex64),
           logspace_samples),
    OpInfo("geomspace", _geomspace_ref, (np.float32, np.float64, ml_dtypes.bfloat16),
           geomspace_samples),
)
