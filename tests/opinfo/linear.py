"""OpInfos of src/arrays/ops/linear.py: matmul, dot, vdot, inner, outer, tensordot, einsum,
vecdot, kron, cross; and lax.ragged_dot (src/arrays/ops/ragged_dot.py).

References are NumPy. Low-precision floats accumulate in float32 in Starling (documented), so
their references run in float32 and round back once. Complex samples are finite: how complex
infinities propagate through a sum of products differs between BLAS and NumPy's loops.
"""
import ml_dtypes
import numpy as np

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import rand

LOW_SET = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}
F32 = np.dtype(np.float32)
FLOAT_C = (np.float32, np.float64, np.complex64, np.complex128)
DTYPES = FLOAT_C + (np.float16, ml_dtypes.bfloat16, np.int8, np.int32, np.int64, np.uint8,
                    np.bool_)
NO_BOOL = DTYPES[:-1]
TOLS = {"float32": (2e-5, 1e-4), "complex64": (2e-5, 1e-4), "float16": (4e-3, 4e-3),
        "bfloat16": (2e-2, 2e-2)}


def low32(fn):
    """Runs ``fn`` on float32 copies of float16/bfloat16 inputs and rounds the result back."""
    def ref(*args, **kwargs):
        dt = next((a.dtype for a in args if isinstance(a, np.ndarray)), None)
        if dt not in LOW_SET:
            return fn(*args, **kwargs)
        args = [a.astype(F32) if isinstance(a, np.ndarray) else a for a in args]
        return np.asarray(fn(*args, **kwargs)).astype(dt)
    return ref


def arr(rng, shape, dt):
    dt = np.dtype(dt)
    return rand(rng, shape, dt, special=dt.kind not in "c")


def _pairs(pairs, **kwargs):
    def samples(rng, dt):
        return [Sample((arr(rng, a, dt), arr(rng, b, dt)), dict(kwargs), name=f"[{a},{b}]")
                for a, b in pairs]
    return samples


MATMUL_PAIRS = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((1, 1), (1, 1)),
    ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 5)),
    ((0, 3), (3, 4)), ((3, 0), (0, 4)), ((2, 0, 3, 4), (4, 5)), ((4,), (2, 4, 5)),
    ((2, 3, 4), (4,)), ((0, 2, 3), (1, 3, 2)), ((6, 7), (7, 6)),
]


def dot_samples(rng, dt):
    out = _pairs([((3, 4), (4,)), ((2, 3, 4), (5, 4, 2)), ((4,), (4,)), ((0,), (0,)),
                  ((3, 4), (4, 5)), ((4,), (4, 3)), ((2, 0), (0, 3))])(rng, dt)
    out.append(Sample((arr(rng, (), dt), arr(rng, (3, 4), dt)), name="[0-d]"))
    out.append(Sample((arr(rng, (2, 3), dt), arr(rng, (), dt)), name="[0-d rhs]"))
    return out


def vdot_samples(rng, dt):
    return _pairs([((3, 4), (12,)), ((5,), (5,)), ((0,), (0,)), ((2, 2), (2, 2)), ((1,), (1,)),
                   ((7,), (7,))])(rng, dt)


def inner_samples(rng, dt):
    out = _pairs([((2, 3), (4, 3)), ((3,), (3,)), ((2, 0), (4, 0)), ((2, 1, 3), (3,))])(rng, dt)
    out.append(Sample((arr(rng, (), dt), arr(rng, (2, 3), dt)), name="[0-d]"))
    return out


def outer_samples(rng, dt):
    return _pairs([((3,), (4,)), ((2, 2), (3,)), ((0,), (3,)), ((1,), (1,)), ((), (2,))])(rng, dt)


def tensordot_samples(rng, dt):
    cases = [((2, 3, 4), (3, 4, 5), 2), ((3, 4), (4, 5), 1), ((2, 3), (4,), 0),
             ((3, 2, 4), (2, 3, 5), ([1, 0], [0, 1])), ((3, 4), (4, 2), ((-1,), (0,))),
             ((0, 3), (3, 2), 1), ((3,), (3,), 1), ((2, 3), (2, 3), ((0, 1), (0, 1))),
             ((2, 3), (3, 4), (1, 0))]
    return [Sample((arr(rng, a, dt), arr(rng, b, dt)), {"axes": ax}, name=f"[{a},{b},{ax}]")
            for a, b, ax in cases]


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("ii->i", [(4, 4)]),
    ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), ("...ii->...i", [(2, 3, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]), ("i,i", [(1,), (3,)]), ("ij,j->i", [(2, 1), (3,)]),
    ("iij->ji", [(2, 2, 3)]), ("ij,jk->ik", [(0, 3), (3, 4)]), ("ij,jk->ik", [(2, 0), (0, 4)]),
    ("i...->...", [(2, 3)]), ("Ba,aB", [(2, 3), (3, 2)]), (",i->i", [(), (3,)]),
    ("iii->i", [(3, 3, 3)]), ("ijk,ikj->i", [(2, 3, 3), (2, 3, 3)]),
    ("a,b,c,d->", [(2,), (3,), (4,), (5,)]), ("ij,kl->", [(2, 3), (4, 5)]),
    ("i->", [(0,)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
]


def einsum_samples(rng, dt):
    return [Sample((subs,) + tuple(arr(rng, s, dt) for s in shapes), name=f"[{subs}]")
            for subs, shapes in EINSUM_CASES]


def vecdot_samples(rng, dt):
    out = _pairs([((3, 4), (4,)), ((4,), (3, 4)), ((2, 1, 4), (3, 4)), ((5,), (5,)),
                  ((0, 4), (4,)), ((2, 0), (2, 0))])(rng, dt)
    out.append(Sample((arr(rng, (4, 3), dt), arr(rng, (4, 3), dt)), {"axis": 0}, name="[axis0]"))
    out.append(Sample((arr(rng, (2, 4, 3), dt), arr(rng, (4, 1), dt)), {"axis": -2},
                      name="[axis-2]"))
    return out


def kron_samples(rng, dt):
    return _pairs([((2, 3), (4, 5)), ((2,), (3, 3)), ((2, 2), (3,)), ((0, 2), (2, 3)),
                   ((1,), (1,)), ((2, 1, 2), (2, 2))])(rng, dt)


def cross_samples(rng, dt):
    out = _pairs([((3,), (3,)), ((4, 3), (3,)), ((2, 1, 3), (5, 3)), ((0, 3), (3,))])(rng, dt)
    out.append(Sample((arr(rng, (3, 2), dt), arr(rng, (3, 2), dt)), {"axis": 0}, name="[ax0]"))
    out.append(Sample((arr(rng, (2, 3, 4), dt), arr(rng, (3, 4), dt)), {"axis": -2},
                      name="[ax-2]"))
    return out


def _np_cross(a, b, axis=-1):
    return np.cross(a, b, axis=axis)


def _np_vecdot(a, b, axis=-1):
    return np.vecdot(a, b, axis=axis)


def _np_tensordot(a, b, axes=2):
    return np.tensordot(a, b, axes=axes)


def _np_einsum(subs, *ops):
    return np.einsum(subs, *ops)


def _np_ragged_dot(lhs, rhs, group_sizes):
    """Row by row: row r of group i is lhs[r] @ rhs[i]; rows past the groups are zero."""
    if lhs.dtype in LOW_SET:
        return _np_ragged_dot(lhs.astype(F32), rhs.astype(F32), group_sizes).astype(lhs.dtype)
    out = np.zeros(lhs.shape[:-1] + rhs.shape[-1:], np.result_type(lhs, rhs))
    for idx in np.ndindex(*group_sizes.shape[:-1]):
        group = np.repeat(np.arange(group_sizes.shape[-1]), group_sizes[idx])
        for r, i in enumerate(group):
            out[idx][r] = np.matmul(lhs[idx][r:r + 1], rhs[idx][i])[0]
    return out


def ragged_dot_samples(rng, dt):
    """(m, k), (g, k, n) and sizes: empty groups, rows past the last group, one group, no rows,
    k = 0, and a leading batch dim with different sizes per batch entry."""
    cases = [((7, 3), (3, 3, 4), [2, 0, 4]), ((5, 2), (2, 2, 3), [2, 3]), ((4, 3), (1, 3, 2), [4]),
             ((6, 2), (4, 2, 2), [0, 3, 0, 1]), ((0, 3), (2, 3, 2), [0, 0]),
             ((3, 0), (2, 0, 2), [1, 2]), ((2, 5, 2), (2, 3, 2, 3), [[1, 2, 2], [0, 5, 0]])]
    return [Sample((arr(rng, a, dt), arr(rng, b, dt), np.array(gs, np.int32)),
                   name=f"[{a},{b},{gs}]") for a, b, gs in cases]


register(
    OpInfo("lax.ragged_dot", _np_ragged_dot, NO_BOOL, ragged_dot_samples, tols=TOLS),
    OpInfo("matmul", low32(np.matmul), DTYPES, _pairs(MATMUL_PAIRS), tols=TOLS, nin=2),
    OpInfo("dot", low32(np.dot), DTYPES, dot_samples, tols=TOLS, nin=2),
    OpInfo("vdot", low32(np.vdot), DTYPES, vdot_samples, tols=TOLS, nin=2),
    OpInfo("inner", low32(np.inner), DTYPES, inner_samples, tols=TOLS, nin=2),
    OpInfo("outer", np.outer, DTYPES, outer_samples, tols=TOLS, nin=2),
    OpInfo("tensordot", low32(_np_tensordot), DTYPES, tensordot_samples, tols=TOLS, nin=2),
    OpInfo("einsum", low32(_np_einsum), DTYPES, einsum_samples, tols=TOLS),
    OpInfo("vecdot", low32(_np_vecdot), NO_BOOL, vecdot_samples, tols=TOLS, nin=2),
    OpInfo("kron", np.kron, DTYPES, kron_samples, tols=TOLS, nin=2),
    OpInfo("cross", low32(_np_cross), NO_BOOL, cross_samples, tols=TOLS, nin=2),
    OpInfo("linalg.matmul", low32(np.matmul), FLOAT_C, _pairs(MATMUL_PAIRS[:6]), tols=TOLS, nin=2),
    OpInfo("linalg.tensordot", _np_tensordot, FLOAT_C, tensordot_samples, tols=TOLS, nin=2),
    OpInfo("linalg.vecdot", _np_vecdot, FLOAT_C, vecdot_samples, tols=TOLS, nin=2),
    OpInfo("linalg.cross", _np_cross, FLOAT_C, cross_samples, tols=TOLS, nin=2),
)
