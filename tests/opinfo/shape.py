"""OpInfos of src/arrays/ops/shape.py and shape_join.py (data movement) against NumPy.

Data movement is exact, so the pure data-movement ops run on every dtype including bfloat16,
float8 and float4 (NumPy's functions move ml_dtypes elements fine). Samples cover size-0 and
size-1 dims, negative axes, -1 in reshape and pads longer than the padded axis.
"""
import numpy as np

from tests import exact_casts
from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import ALL, LOW, rand

import ml_dtypes

EVERY = ALL + LOW
# Compositions that reuse the primitives checked on EVERY dtype run on a representative subset.
SOME = (np.bool_, np.int8, np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
        np.complex64, ml_dtypes.float8_e4m3fn)


def r(rng, shape, dt):
    return np.asarray(rand(rng, shape, dt))


def one(rng, dt, cases, **fixed):
    """Samples ``op(x, *extra, **kw)`` for cases ``(shape, extra_args, kwargs)``."""
    out = []
    for shape, extra, kw in cases:
        kw = {**fixed, **kw}
        out.append(Sample((r(rng, shape, dt), *extra), kw, name=f"[{shape} {extra} {kw}]"))
    return out


def reshape_samples(rng, dt):
    return one(rng, dt, [((), ((1,),), {}), ((1,), ((),), {}), ((6,), ((2, 3),), {}),
                         ((2, 3), ((3, -1),), {}), ((2, 3), (-1,), {}), ((0, 3), ((3, 0),), {}),
                         ((0, 3), ((-1,),), {}), ((2, 1, 3), ((3, 2),), {}),
                         ((2, 3), ((3, 2),), {"order": "F"}), ((2, 3, 2), ((4, -1),),
                                                                {"order": "F"})])


def ravel_samples(rng, dt):
    return one(rng, dt, [((), (), {}), ((0, 3), (), {}), ((2, 1, 3), (), {}),
                         ((2, 3), (), {"order": "F"})])


def permute_samples(rng, dt):
    return one(rng, dt, [((), ((),), {}), ((3,), ((0,),), {}), ((2, 3), ((1, 0),), {}),
                         ((2, 1, 3), ((2, 0, 1),), {}), ((2, 0, 3), ((-1, 0, 1),), {})])


def transpose_samples(rng, dt):
    return one(rng, dt, [((2, 3), (), {}), ((2, 1, 3), (), {}), ((), (), {}),
                         ((2, 0, 3), ((1, -1, 0),), {})])


def matrix_transpose_samples(rng, dt):
    return one(rng, dt, [((2, 3), (), {}), ((4, 2, 3), (), {}), ((0, 3), (), {}),
                         ((1, 2, 0), (), {})])


def swapaxes_samples(rng, dt):
    return one(rng, dt, [((2, 3), (0, 1), {}), ((2, 1, 3), (-1, 0), {}), ((3,), (0, 0), {}),
                         ((0, 2), (1, -2), {})])


def moveaxis_samples(rng, dt):
    return one(rng, dt, [((2, 3, 4), (0, -1), {}), ((2, 3, 4), ([0, 1], [-1, -2]), {}),
                         ((2, 0, 4), (-1, 0), {}), ((3,), (0, 0), {})])


def squeeze_samples(rng, dt):
    return one(rng, dt, [((1, 3, 1), (), {}), ((1, 3, 1), (), {"axis": 0}),
                         ((1, 3, 1), (), {"axis": (0, -1)}), ((), (), {}), ((1,), (), {"axis": 0}),
                         ((0, 1), (), {"axis": 1}), ((2, 3), (), {})])


def expand_dims_samples(rng, dt):
    return one(rng, dt, [((), (0,), {}), ((3,), (-1,), {}), ((2, 3), ((0, 3),), {}),
                         ((2, 3), (1,), {}), ((0,), (0,), {}), ((2, 3), ((-1, 0),), {})])


def broadcast_to_samples(rng, dt):
    return one(rng, dt, [((), ((2, 3),), {}), ((3,), ((2, 3),), {}), ((2, 1), ((2, 4),), {}),
                         ((1,), ((0,),), {}), ((0, 3), ((2, 0, 3),), {}), ((2, 3), ((2, 3),), {})])


def broadcast_arrays_samples(rng, dt):
    pairs = [((3, 1), (1, 4)), ((), (2,)), ((0, 3), (1, 3)), ((2, 3), (2, 3))]
    out = [Sample((r(rng, a, dt), r(rng, b, dt)), name=f"[{a},{b}]") for a, b in pairs]
    out.append(Sample((r(rng, (2, 1), dt), r(rng, (3,), dt), r(rng, (), dt)), name="[3 args]"))
    return out


def atleast_samples(rng, dt):
    out = [Sample((r(rng, s, dt),), name=f"[{s}]") for s in [(), (3,), (2, 3), (2, 3, 4), (0,)]]
    out.append(Sample((r(rng, (), dt), r(rng, (3,), dt), r(rng, (2, 3), dt)), name="[multi]"))
    return out


def flip_samples(rng, dt):
    return one(rng, dt, [((5,), (), {}), ((3, 4), (), {"axis": 0}), ((3, 4), (), {"axis": (-1,)}),
                         ((2, 1, 3), (), {"axis": (0, 2)}), ((0, 3), (), {"axis": 1}),
                         ((), (), {})])


def flip2_samples(rng, dt):
    return one(rng, dt, [((3, 4), (), {}), ((2, 3, 4), (), {}), ((0, 2), (), {})])


def rot90_samples(rng, dt):
    return one(rng, dt, [((3, 4), (), {}), ((3, 4), (2,), {}), ((3, 4), (3,), {}),
                         ((3, 4), (-1,), {}), ((3, 4), (4,), {}),
                         ((2, 3, 4), (1,), {"axes": (1, 2)}), ((2, 3, 4), (1,), {"axes": (2, 0)})])


def roll_samples(rng, dt):
    return one(rng, dt, [((5,), (2,), {}), ((5,), (-7,), {}), ((3, 4), (1,), {"axis": 0}),
                         ((3, 4), ((1, 2),), {"axis": (0, 1)}), ((3, 4), (5,), {}),
                         ((0, 3), (1,), {"axis": 0}), ((), (1,), {}),
                         ((3, 4), ((1, 2),), {"axis": (1, 1)}), ((3, 4), (2,), {"axis": (0, 1)})])


def tile_samples(rng, dt):
    return one(rng, dt, [((3,), (2,), {}), ((2, 3), ((2, 1),), {}), ((2, 3), ((2, 1, 2),), {}),
                         ((), (3,), {}), ((0, 3), (2,), {}), ((2, 3), (0,), {}),
                         ((2, 1, 3), ((2,),), {})])


def repeat_samples(rng, dt):
    return one(rng, dt, [((5,), (2,), {}), ((2, 3), ([1, 2],), {"axis": 0}),
                         ((2, 3), (3,), {"axis": -1}), ((2, 3), ([0, 1, 2],), {"axis": 1}),
                         ((), (3,), {}), ((0, 3), (2,), {"axis": 1}), ((2, 3), (2,), {}),
                         ((3,), ([2],), {}), ((4,), ([1, 1, 3, 0],), {})]) + one(rng, dt, [
        # total_repeat_length (JAX): cut or extended with the last element; array counts are
        # traced when staged / vmapped (the gather path), static eagerly
        ((2, 3), (np.array([1, 2]),), {"axis": 0, "total_repeat_length": 4}),
        ((2, 3), ([1, 0, 2],), {"axis": 1, "total_repeat_length": 5}),
        ((5,), (2,), {"total_repeat_length": 7}),
        ((2, 3), (np.array([0, 3, 1]),), {"axis": -1, "total_repeat_length": 2}),
        ((2, 3), (np.array([2]),), {"total_repeat_length": 9}),
        ((2, 3), (np.array(1),), {"axis": 0, "total_repeat_length": 0}),
        ((2, 3), (np.array([3, 0]),), {"axis": 0, "total_repeat_length": 5})])


def _repeat_ref(x, repeats, axis=None, total_repeat_length=None):
    y = np.repeat(x, repeats, axis)
    if total_repeat_length is None:
        return y
    ax = 0 if axis is None else axis
    src = x.reshape(-1) if axis is None else x
    m = y.shape[ax]
    if m >= total_repeat_length:
        return np.take(y, np.arange(total_repeat_length), ax)
    last = np.take(src, [src.shape[ax] - 1], ax)
    return np.concatenate([y, np.repeat(last, total_repeat_length - m, ax)], ax)


def _pair_lists(rng, dt, cases):
    out = []
    for shapes, kw in cases:
        out.append(Sample(([r(rng, s, dt) for s in shapes],), kw, name=f"[{shapes} {kw}]"))
    return out


def concatenate_samples(rng, dt):
    return _pair_lists(rng, dt, [([(2, 3), (1, 3)], {"axis": 0}), ([(2, 3), (2, 0)], {"axis": -1}),
                                 ([(2, 3)], {"axis": 0}), ([(2, 3), (4,)], {"axis": None}),
                                 ([(0, 3), (2, 3), (1, 3)], {}), ([(), (2,)], {"axis": None})])


def concat_samples(rng, dt):
    return _pair_lists(rng, dt, [([(2, 3), (1, 3)], {"axis": 0}), ([(2, 3), (2, 2)], {"axis": -1}),
                                 ([(2, 3), (3,)], {"axis": None})])


def stack_samples(rng, dt):
    return _pair_lists(rng, dt, [([(2, 3)] * 3, {}), ([(2, 3)] * 2, {"axis": -1}),
                                 ([(2, 3)] * 2, {"axis": 1}), ([()] * 2, {}), ([(0,)] * 2, {}),
                                 ([(4,)], {"axis": -2})])


def hstack_samples(rng, dt):
    return _pair_lists(rng, dt, [([(3,), (2,)], {}), ([(2, 3), (2, 1)], {}), ([(), ()], {}),
                                 ([(2, 0), (2, 2)], {})])


def vstack_samples(rng, dt):
    return _pair_lists(rng, dt, [([(3,), (3,)], {}), ([(2, 3), (1, 3)], {}), ([(), ()], {}),
                                 ([(0, 3), (3,)], {})])


def dstack_samples(rng, dt):
    return _pair_lists(rng, dt, [([(3,), (3,)], {}), ([(2, 3), (2, 3)], {}),
                                 ([(2, 3, 1), (2, 3, 2)], {}), ([(), ()], {})])


def column_stack_samples(rng, dt):
    return _pair_lists(rng, dt, [([(3,), (3,)], {}), ([(3, 2), (3,)], {}), ([(), ()], {})])


def append_samples(rng, dt):
    return [Sample((r(rng, (2, 3), dt), r(rng, (1, 3), dt)), {"axis": 0}, name="[axis 0]"),
            Sample((r(rng, (3,), dt), r(rng, (2, 2), dt)), {}, name="[None]"),
            Sample((r(rng, (2, 3), dt), r(rng, (2, 1), dt)), {"axis": -1}, name="[axis -1]")]


def split_samples(rng, dt):
    return one(rng, dt, [((6,), (3,), {}), ((6,), ([1, 4],), {}), ((4, 6), (2,), {"axis": 1}),
                         ((7,), ([2, -1, 10],), {}), ((0, 3), (2,), {}), ((7,), ([5, 2],), {}),
                         ((2, 4), (1,), {"axis": -1})])


def array_split_samples(rng, dt):
    return one(rng, dt, [((7,), (3,), {}), ((3, 5), (4,), {"axis": -1}), ((2,), (5,), {}),
                         ((6,), ([2, 3],), {})])


def hsplit_samples(rng, dt):
    return one(rng, dt, [((6,), (2,), {}), ((2, 6), (3,), {}), ((2, 6), ([1, 4],), {})])


def vsplit_samples(rng, dt):
    return one(rng, dt, [((4, 2), (2,), {}), ((5, 2), ([1, 3],), {})])


def dsplit_samples(rng, dt):
    return one(rng, dt, [((2, 2, 4), (2,), {}), ((1, 2, 5), ([1, 3],), {})])


def unstack_samples(rng, dt):
    return one(rng, dt, [((3, 2), (), {}), ((3, 2), (), {"axis": -1}), ((2, 0, 3), (), {"axis": 1}),
                         ((0, 2), (), {}), ((1,), (), {})])


def _unstack_ref(x, axis=0):
    return tuple(np.moveaxis(x, axis, 0))


def pad_samples(rng, dt):
    cases = [((3,), (2,), {}), ((2, 3), (((1, 2), (0, 3)),), {}),
             ((2, 3), ((1, 2),), {"constant_values": 2}), ((0, 3), (1,), {}),
             ((2, 3), (((1, 2), (3, 1)),), {"constant_values": ((1, 2), (3, 4))}),
             ((), (0,), {}), ((2, 3), (0,), {})]
    for mode in ("edge", "reflect", "symmetric", "wrap"):
        cases += [((4,), ((2, 7),), {"mode": mode}), ((2, 3), (((1, 0), (5, 4)),), {"mode": mode}),
                  ((1, 3), (((2, 3), (1, 1)),), {"mode": mode}), ((0, 3), (((0, 0), (2, 2)),),
                                                                  {"mode": mode})]
    return one(rng, dt, cases) + pad_mode_samples(rng, dt)


def pad_mode_samples(rng, dt):
    """linear_ramp, the statistic modes and reflect_type="odd" (pads longer than the axis keep
    extrapolating, as NumPy's; corners read the array as padded along earlier axes)."""
    kind = np.dtype(dt).kind
    cases = []
    for mode in ("reflect", "symmetric"):
        cases += [((4,), ((2, 9),), {"mode": mode, "reflect_type": "odd"}),
                  ((2, 3), (((3, 1), (4, 7)),), {"mode": mode, "reflect_type": "odd"}),
                  ((1, 3), (((2, 1), (1, 0)),), {"mode": mode, "reflect_type": "odd"})]
    if dt in LOW:
        return one(rng, dt, cases)
    cases += [((4,), ((2, 3),), {"mode": "linear_ramp"}),
              ((2, 3), (((1, 2), (3, 0)),),
               {"mode": "linear_ramp", "end_values": ((1, 2), (3, 0))}),
              ((3,), (4,), {"mode": "linear_ramp", "end_values": 5})]
    out = []
    for mode in ("maximum", "minimum", "mean", "median"):
        if mode == "median" and kind == "c":
            continue
        stat = [((5,), ((2, 3),), {"mode": mode}),
                ((3, 4), (((1, 2), (2, 1)),), {"mode": mode, "stat_length": ((1, 2), (3, 1))}),
                ((2, 3), (1,), {"mode": mode, "stat_length": 2}),
                ((0, 3), (((0, 0), (1, 1)),), {"mode": mode})]
        if mode == "median" and kind not in "biufc":
            # NumPy's median of ml_dtypes (bfloat16) does not sort NaN last: no NaN inputs
            out += [Sample((np.asarray(rand(rng, sh, dt, special=False)), *ex), kw,
                           name=f"[{sh} {ex} {kw}]") for sh, ex, kw in stat]
        else:
            cases += stat
    return one(rng, dt, cases) + out


def _pad_ref(x, pad_width, mode="constant", **kw):
    """np.pad, except that the mean / median of an integer array reaches the integer dtype by
    Starling's conversion (out of range saturates; NumPy's C cast is undefined there). The
    axes are padded one after another, as NumPy does, the statistics computed in float64."""
    x = np.asarray(x)
    if mode not in ("mean", "median") or x.dtype.kind not in "iu" or x.size == 0:
        return np.pad(x, pad_width, mode=mode, **kw)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2)).tolist()
    out = x
    for ax in range(x.ndim):
        w = [(0, 0)] * x.ndim
        w[ax] = tuple(widths[ax])
        stats = np.round(np.pad(out.astype(np.float64), w, mode=mode, **kw))
        padded = np.pad(out, w)
        pad_area = np.ones(padded.shape, bool)
        pad_area[tuple(slice(b, padded.shape[i] - a) for i, (b, a) in enumerate(w))] = False
        padded[pad_area] = exact_casts.convert(stats[pad_area], x.dtype)
        out = padded
    return out


def pad_grad_samples(rng, dt):
    """Finite, tie-free inputs, one per mode family (check_grads uses the first few)."""
    out = []
    cases = [((2, 3), (((1, 2), (0, 3)),), {"constant_values": 2.0}),
             ((2, 3), (((1, 0), (5, 4)),), {"mode": "reflect"}),
             ((4,), ((2, 9),), {"mode": "symmetric", "reflect_type": "odd"}),
             ((2, 3), (((1, 2), (3, 0)),), {"mode": "linear_ramp", "end_values": 1.5}),
             ((3, 4), (((1, 2), (2, 1)),), {"mode": "mean", "stat_length": ((1, 2), (3, 1))}),
             ((5,), ((2, 3),), {"mode": "maximum", "stat_length": 3}),
             ((5,), ((2, 3),), {"mode": "median", "stat_length": (4, 3)})]
    for shape, extra, kw in cases:
        if kw.get("mode") == "median" and np.dtype(dt).kind == "c":
            continue
        x = rand(rng, shape, dt, special=False)
        out.append(Sample((np.asarray(x), *extra), kw, name=f"[{shape} {extra} {kw}]"))
    return out


def copy_samples(rng, dt):
    return one(rng, dt, [((2, 3), (), {}), ((), (), {}), ((0,), (), {})])


register(
    OpInfo("reshape", np.reshape, EVERY, reshape_samples),
    OpInfo("ravel", np.ravel, EVERY, ravel_samples),
    OpInfo("permute_dims", np.transpose, EVERY, permute_samples),
    OpInfo("transpose", np.transpose, SOME, transpose_samples),
    OpInfo("matrix_transpose", lambda x: np.swapaxes(x, -1, -2), SOME, matrix_transpose_samples),
    OpInfo("swapaxes", np.swapaxes, SOME, swapaxes_samples),
    OpInfo("moveaxis", np.moveaxis, SOME, moveaxis_samples),
    OpInfo("squeeze", np.squeeze, EVERY, squeeze_samples),
    OpInfo("expand_dims", np.expand_dims, EVERY, expand_dims_samples),
    OpInfo("broadcast_to", np.broadcast_to, EVERY, broadcast_to_samples),
    OpInfo("broadcast_arrays", np.broadcast_arrays, SOME, broadcast_arrays_samples),
    OpInfo("atleast_1d", np.atleast_1d, SOME, atleast_samples),
    OpInfo("atleast_2d", np.atleast_2d, SOME, atleast_samples),
    OpInfo("atleast_3d", np.atleast_3d, SOME, atleast_samples),
    OpInfo("flip", np.flip, EVERY, flip_samples),
    OpInfo("fliplr", np.fliplr, SOME, flip2_samples),
    OpInfo("flipud", np.flipud, SOME, flip2_samples),
    OpInfo("rot90", np.rot90, SOME, rot90_samples),
    OpInfo("roll", np.roll, EVERY, roll_samples),
    OpInfo("tile", np.tile, EVERY, tile_samples),
    OpInfo("repeat", _repeat_ref, EVERY, repeat_samples),
    OpInfo("concatenate", np.concatenate, EVERY, concatenate_samples),
    OpInfo("concat", np.concatenate, SOME, concat_samples),
    OpInfo("stack", np.stack, EVERY, stack_samples),
    OpInfo("hstack", np.hstack, SOME, hstack_samples),
    OpInfo("vstack", np.vstack, SOME, vstack_samples),
    OpInfo("dstack", np.dstack, SOME, dstack_samples),
    OpInfo("column_stack", np.column_stack, SOME, column_stack_samples),
    OpInfo("append", np.append, SOME, append_samples),
    OpInfo("split", np.split, EVERY, split_samples),
    OpInfo("array_split", np.array_split, SOME, array_split_samples),
    OpInfo("hsplit", np.hsplit, SOME, hsplit_samples),
    OpInfo("vsplit", np.vsplit, SOME, vsplit_samples),
    OpInfo("dsplit", np.dsplit, SOME, dsplit_samples),
    OpInfo("unstack", _unstack_ref, SOME, unstack_samples),
    OpInfo("pad", _pad_ref, EVERY, pad_samples, grad_samples=pad_grad_samples),
    OpInfo("copy", np.copy, SOME, copy_samples),
)
