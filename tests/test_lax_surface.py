"""starling.lax: elementwise names, bit ops, structural ops, static / dynamic slicing, gather /
scatter with dimension numbers. References are NumPy or brute-force loops; gradients by
starling.test_util.check_grads (finite differences); vmap against a Python loop; compiled
(cpp backend, strict) against eager."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import lax
from starling.test_util import check_grads
from tests.lax_helpers import assert_same, check_compiled, check_vmap

A = snp.asarray
pytestmark = pytest.mark.usefixtures("cpp_kernel_env")


# ---- elementwise --------------------------------------------------------------------------------

def test_no_promotion_and_scalars_take_the_dtype():
    x = A(np.array([1, 2], np.int8))
    assert lax.add(x, 3).dtype == np.int8
    with pytest.raises(TypeError, match="lax.add: operands must have the same dtype"):
        lax.add(x, A(np.array([1, 2], np.int16)))
    with pytest.raises(OverflowError, match="add"):
        lax.add(x, 300)


def test_div_rem_truncate_toward_zero():
    a = np.array([-7, 7, -7, 7, 0, -1], np.int32)
    b = np.array([2, -2, -2, 2, 3, 5], np.int32)
    assert_same(lax.div(A(a), A(b)), A((np.trunc(a / b)).astype(np.int32)))
    assert_same(lax.rem(A(a), A(b)), A(np.fmod(a, b)))
    f = np.array([-7.5, 7.5], np.float32)
    assert_same(lax.div(A(f), 2.0), A(f / np.float32(2)))


def test_round_methods():
    x = np.array([0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, np.nan, -np.inf], np.float32)
    away = np.where(np.abs(x - np.trunc(x)) >= 0.5, np.trunc(x) + np.sign(x), np.trunc(x))
    assert_same(lax.round(A(x)), A(away.astype(np.float32)))
    assert_same(lax.round(A(x), 1), A(np.round(x)))


@pytest.mark.parametrize("y", [0, 1, 2, 3, 5, 8, -1, -3])
def test_integer_pow(y):
    x = np.array([0.5, -1.5, 2.0, 3.0])
    assert_same(lax.integer_pow(A(x), y), A(x ** float(y)), rtol=1e-15)
    if y >= 0:
        xi = np.array([-3, 0, 2, 7], np.int32)
        assert_same(lax.integer_pow(A(xi), y), A(xi ** y))
    check_grads(lambda v: lax.integer_pow(v, y), (A(x),), order=2)


def test_integer_pow_errors():
    with pytest.raises(TypeError, match="negative power"):
        lax.integer_pow(A(np.array([2], np.int32)), -1)
    with pytest.raises(TypeError, match="static int"):
        lax.integer_pow(A(np.array([2.0])), 2.5)


def test_clamp_values_grad_and_shapes():
    x = np.array([-2.0, 0.0, 0.3, 1.0, 5.0, np.nan])
    assert_same(lax.clamp(0.0, A(x), 1.0), A(np.minimum(np.maximum(x, 0.0), 1.0)))
    lo = np.array([-1.0, 0.5, 0.0, 0.0, 0.0, 0.0])
    assert_same(lax.clamp(A(lo), A(x), 1.0), A(np.minimum(np.maximum(x, lo), 1.0)))
    xs = np.array([-2.0, 0.3, 5.0])
    check_grads(lambda v: lax.clamp(0.0, v, 1.0), (A(xs),), order=2)
    with pytest.raises(ValueError, match="lax.clamp: min must be 0-d"):
        lax.clamp(A(np.zeros(2)), A(np.zeros(3)), 1.0)


def test_select_n(rng):
    cases = [rng.normal(size=(2, 3)) for _ in range(3)]
    which = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
    want = np.choose(which, cases)
    assert_same(lax.select_n(A(which), *map(A, cases)), A(want))
    p = which == 1
    assert_same(lax.select_n(A(p), A(cases[0]), A(cases[1])), A(np.where(p, cases[1], cases[0])))
    assert_same(lax.select_n(A(True), A(cases[0]), A(cases[1])), A(cases[1]))
    check_grads(lambda a, b, c: lax.select_n(A(which), a, b, c), tuple(map(A, cases)), order=2)
    check_vmap(lambda w, a, b, c: lax.select_n(w, a, b, c), (A(which), *map(A, cases)))
    with pytest.raises(ValueError, match="at most 2 cases"):
        lax.select_n(A(p), *map(A, cases))
    with pytest.raises(ValueError, match="one shape"):
        lax.select_n(A(which), A(cases[0]), A(np.zeros(3)))


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32,
                                np.uint64])
def test_population_count(dt):
    info = np.iinfo(dt)
    x = np.array([0, 1, 3, info.max, info.min, 77, info.max // 3], dt)
    bits = x.view(f"u{x.dtype.itemsize}")
    want = np.array([bin(int(v)).count("1") for v in bits], dt)
    assert_same(lax.population_count(A(x)), A(want))
    check_compiled(lambda v: lax.population_count(v) + v, A(x))
    with pytest.raises(TypeError):
        lax.population_count(A(np.array([1.0])))


def test_misc_elementwise():
    x = np.array([0.25, 4.0, 8.0, 2.0], np.float32)
    assert_same(lax.rsqrt(A(x)), A((1 / np.sqrt(x)).astype(np.float32)), rtol=1e-6)
    assert_same(lax.cbrt(A(-x)), A(np.cbrt(-x)), rtol=1e-6)
    assert_same(lax.nextafter(A(x), A(np.full(4, np.inf, np.float32))), A(np.nextafter(x, np.inf)))
    s = np.array([-8, 8, -1], np.int8)
    assert_same(lax.shift_right_logical(A(s), A(np.array([1, 1, 7], np.int8))),
                A((s.view(np.uint8) >> np.array([1, 1, 7], np.uint8)).view(np.int8)))
    assert_same(lax.shift_right_arithmetic(A(s), A(np.array([1, 1, 7], np.int8))),
                A(s >> np.array([1, 1, 7], np.int8)))


# ---- bits ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.float32, np.uint8),
                                     (np.uint8, np.float32), (np.float64, np.int16),
                                     (np.int16, ml_dtypes.bfloat16), (np.complex64, np.float32)])
def test_bitcast_convert_type(rng, src, dst):
    a, b = np.dtype(src).itemsize, np.dtype(dst).itemsize
    shape = (3, 2) + ((b // a,) if b > a else ())
    x = rng.integers(0, 255, size=shape + (a,), dtype=np.uint8).view(src)[..., 0]
    got = lax.bitcast_convert_type(A(x), dst)
    want = np.ascontiguousarray(x).view(dst)
    if a > b:
        want = want.reshape(shape + (a // b,))
    elif b > a:
        want = want.reshape(shape[:-1])
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8))
    back = lax.bitcast_convert_type(got, src)
    np.testing.assert_array_equal(np.asarray(back).view(np.uint8), x.view(np.uint8))
    check_vmap(lambda v: lax.bitcast_convert_type(v, dst), (A(x),), in_axes=-1 if a >= b else 0)


def test_bitcast_errors_and_zero_tangent():
    with pytest.raises(ValueError, match="last dim of size 4"):
        lax.bitcast_convert_type(A(np.zeros((2, 3), np.uint8)), np.float32)
    with pytest.raises(TypeError, match="bool"):
        lax.bitcast_convert_type(A(np.zeros(2, bool)), np.uint8)
    one = A(np.ones(2, np.float32))
    _, t = starling.jvp(lambda v: lax.bitcast_convert_type(v, np.int32), (one,), (one,))
    assert not np.any(np.asarray(t).astype(bool))


def _round_ref(x, fmt):
    """float32 rounded through ml_dtypes' format (round to nearest even), subnormals and
    overflow handled as reduce_precision defines them."""
    info = ml_dtypes.finfo(fmt)
    r = x.astype(fmt).astype(np.float32)
    r = np.where(np.abs(r) < np.float32(info.smallest_normal), np.copysign(0, x), r)
    return np.where(np.isnan(x), x, r).astype(np.float32)


@pytest.mark.parametrize("fmt,bits", [(np.float16, (5, 10)), (ml_dtypes.bfloat16, (8, 7)),
                                      (ml_dtypes.float8_e5m2, (5, 2))])
def test_reduce_precision_matches_formats(rng, fmt, bits):
    x = (rng.normal(size=200) * np.exp(rng.uniform(-20, 20, size=200))).astype(np.float32)
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65519.0, 65520.0,
                                     6.1e-5, 3e-5, -1e-9], np.float32)])
    got = lax.reduce_precision(A(x), *bits)
    assert_same(got, A(_round_ref(x, fmt)))
    np.testing.assert_array_equal(np.signbit(np.asarray(got)), np.signbit(_round_ref(x, fmt)))


def test_reduce_precision_linear_and_compiled(rng):
    x = A(rng.normal(size=5))
    check_grads(lambda v: lax.reduce_precision(v * v, 8, 7), (x,), order=2, atol=1e-2,
                rtol=1e-2, modes=("rev",))
    g = starling.grad(lambda v: snp.sum(lax.reduce_precision(v, 5, 10)))(x)
    assert_same(g, A(np.ones(5)))
    check_compiled(lambda v: lax.reduce_precision(v, 5, 10) * 2, x)
    with pytest.raises(TypeError, match="floating"):
        lax.reduce_precision(A(np.array([1], np.int32)), 5, 10)


# ---- structural and static slicing --------------------------------------------------------------

def test_pad_interior_negative_and_scalar_value(rng):
    x = rng.normal(size=(3, 2))
    got = lax.pad(A(x), -1.0, [(1, -1, 2), (-1, 2, 0)])
    full = np.full((1 + 3 + 2 * 2, 2 + 2), -1.0)
    full[1::3, :2] = x
    assert_same(got, A(full[:-1, 1:]))
    check_grads(lambda v, p: lax.pad(v, p, [(1, -1, 2), (-1, 2, 0)]), (A(x), A(0.5)), order=2)
    with pytest.raises(TypeError, match="padding_value must be 0-d"):
        lax.pad(A(x), A(np.zeros(2)), [(0, 0, 0)] * 2)


def test_shape_wrappers(rng):
    x = rng.normal(size=(1, 3, 1))
    assert lax.squeeze(A(x), (-1, 0)).shape == (3,)
    assert lax.expand_dims(A(x), (-1, 0)).shape == (1, 1, 3, 1, 1)
    assert_same(lax.rev(A(x), (1,)), A(x[:, ::-1]))
    assert_same(lax.broadcast(A(x), (2,)), A(np.broadcast_to(x, (2, 1, 3, 1))))
    assert_same(lax.reshape(A(x), (3, 1, 1), (2, 1, 0)), A(x.transpose(2, 1, 0).reshape(3, 1, 1)))
    assert_same(lax.broadcasted_iota(np.int32, (2, 3), 1),
                A(np.tile(np.arange(3, dtype=np.int32), (2, 1))))
    with pytest.raises(ValueError, match="has size 3, not 1"):
        lax.squeeze(A(x), (1,))


def test_static_slices(rng):
    x = rng.normal(size=(5, 4))
    assert_same(lax.slice(A(x), (1, 0), (5, 3), (2, 2)), A(x[1:5:2, 0:3:2]))
    assert_same(lax.slice_in_dim(A(x), None, -1, axis=-1), A(x[:, :-1]))
    assert_same(lax.slice_in_dim(A(x), -3, None, 2), A(x[-3::2]))
    assert_same(lax.index_in_dim(A(x), -1, 1, keepdims=False), A(x[:, -1]))
    with pytest.raises(IndexError, match="out of bounds"):
        lax.index_in_dim(A(x), 5)
    with pytest.raises(ValueError, match="lax.slice_in_dim"):
        lax.slice_in_dim(A(x), 3, 1)


# ---- dynamic slicing ----------------------------------------------------------------------------

def _clamp_start(s, d, n):
    s = s + d if s < 0 else s
    return min(max(s, 0), d - n)


STARTS = [(0, 0), (2, 1), (4, 3), (-1, -2), (9, -9), (-7, 2)]


@pytest.mark.parametrize("starts", STARTS)
def test_dynamic_slice_matches_clamped_reference(rng, starts):
    x = rng.normal(size=(5, 4, 2))
    sizes = (2, 3, 2)
    lo = [_clamp_start(s, d, n) for s, d, n in zip(starts + (0,), x.shape, sizes)]
    want = x[lo[0]:lo[0] + 2, lo[1]:lo[1] + 3]
    traced = [A(np.int32(s)) for s in starts] + [0]
    assert_same(lax.dynamic_slice(A(x), list(starts) + [0], sizes), A(want))
    f = starling.compile(lambda v, i, j: lax.dynamic_slice(v, (i, j, 0), sizes))
    assert_same(f(A(x), *traced[:2]), A(want))
    xs = A(rng.normal(size=(5, 4, 2)))
    upd = rng.normal(size=sizes)
    out = x.copy()
    out[lo[0]:lo[0] + 2, lo[1]:lo[1] + 3] = upd
    assert_same(lax.dynamic_update_slice(A(x), A(upd), traced), A(out))
    g = starling.compile(lambda v, u, i: lax.dynamic_update_slice(v, u, (i, traced[1], 0)))
    assert_same(g(A(x), A(upd), traced[0]), A(out))
    del xs


def test_dynamic_slice_grads_vmap(rng):
    x = A(rng.normal(size=(6, 3)))
    i = A(np.int32(4))
    check_grads(lambda v: lax.dynamic_slice(v, (i, 1), (3, 2)) ** 2, (x,), order=2)
    u = A(rng.normal(size=(2, 3)))
    check_grads(lambda v, w: lax.dynamic_update_slice(v, w * w, (i, 0)), (x, u), order=2)
    starts = A(np.array([0, 3, 5, -1, 7], np.int32))
    check_vmap(lambda s: lax.dynamic_slice_in_dim(x, s, 2), (starts,))
    check_vmap(lambda s, w: lax.dynamic_update_slice_in_dim(x, w, s, 0),
               (starts, A(rng.normal(size=(5, 2, 3)))))
    xb = A(rng.normal(size=(5, 6, 3)))
    check_vmap(lambda v, s: lax.dynamic_index_in_dim(v, s, 0, keepdims=False), (xb, starts))
    check_vmap(lambda v, w, s: lax.dynamic_update_index_in_dim(v, w, s, 1),
               (xb, A(rng.normal(size=(5, 6))), starts))


def test_dynamic_slice_edges():
    x = A(np.arange(6.0).reshape(2, 3))
    assert lax.dynamic_slice(x, (1, 1), (0, 3)).shape == (0, 3)
    assert_same(lax.dynamic_slice(x, (5, 5), (2, 3)), x)
    assert_same(lax.dynamic_update_slice(x, A(np.zeros((0, 3))), (1, 0)), x)
    assert_same(lax.dynamic_slice(A(np.zeros((0, 2))), (3, 1), (0, 1)), A(np.zeros((0, 1))))
    with pytest.raises(ValueError, match="slice_sizes"):
        lax.dynamic_slice(x, (0, 0), (3, 1))
    with pytest.raises(TypeError, match="update dtype"):
        lax.dynamic_update_slice(x, A(np.zeros((1, 1), np.float32)), (0, 0))
    with pytest.raises(TypeError, match="integer scalar"):
        lax.dynamic_slice(x, (A(0.5), 0), (1, 1))


# ---- gather / scatter ---------------------------------------------------------------------------

def _windows(dn_offsets, x_shape, dropped, sizes):
    return [d for d in range(len(x_shape)) if d not in dropped]


def ref_gather(x, idx, dn, sizes, mode, fill):
    """XLA Gather by loops over every output element."""
    B = idx.shape[:-1]
    ob, ib = dn.operand_batching_dims, dn.start_indices_batching_dims
    win = [d for d in range(x.ndim) if d not in dn.collapsed_slice_dims and d not in ob]
    out_rank = len(B) + len(win)
    batch_pos = [p for p in range(out_rank) if p not in dn.offset_dims]
    out_shape = [0] * out_rank
    for p, n in zip(batch_pos, B):
        out_shape[p] = n
    for p, d in zip(dn.offset_dims, win):
        out_shape[p] = sizes[d]
    out = np.empty(out_shape, x.dtype)
    for o in itertools.product(*[range(n) for n in out_shape]):
        b = tuple(o[p] for p in batch_pos)
        start = [0] * x.ndim
        ok = True
        for j, d in enumerate(dn.start_index_map):
            s = int(idx[b + (j,)])
            if mode == "clip":
                s = min(max(s, 0), x.shape[d] - sizes[d])
            elif not 0 <= s <= x.shape[d] - sizes[d]:
                ok = False
            start[d] = s
        for d, k in zip(ob, ib):
            start[d] = b[k]
        pos = list(start)
        for p, d in zip(dn.offset_dims, win):
            pos[d] += o[p]
        out[o] = x[tuple(pos)] if ok else fill
    return out


def ref_scatter(x, idx, u, dn, mode, combine):
    out = x.copy()
    ob, ib = dn.operand_batching_dims, dn.scatter_indices_batching_dims
    win = [d for d in range(x.ndim) if d not in dn.inserted_window_dims and d not in ob]
    upd_batch = [p for p in range(u.ndim) if p not in dn.update_window_dims]
    sizes = [1] * x.ndim
    for d, p in zip(win, dn.update_window_dims):
        sizes[d] = u.shape[p]
    for o in itertools.product(*[range(n) for n in u.shape]):
        b = tuple(o[p] for p in upd_batch)
        start = [0] * x.ndim
        ok = True
        for j, d in enumerate(dn.scatter_dims_to_operand_dims):
            s = int(idx[b + (j,)])
            if mode == "clip":
                s = min(max(s, 0), x.shape[d] - sizes[d])
            elif not 0 <= s <= x.shape[d] - sizes[d]:
                ok = False
            start[d] = s
        for d, k in zip(ob, ib):
            start[d] = b[k]
        if not ok:
            continue
        pos = list(start)
        for p, d in zip(dn.update_window_dims, win):
            pos[d] += o[p]
        out[tuple(pos)] = combine(out[tuple(pos)], u[o])
    return out


def _gather_cases(rng):
    G = lax.GatherDimensionNumbers
    yield (rng.normal(size=(5, 3)), np.array([[0], [4], [2], [7], [-1], [4]]),
           G((1,), (0,), (0,)), (1, 3))
    yield (rng.normal(size=(4, 5, 3)), rng.integers(-1, 5, size=(2, 3, 2)),
           G((0, 3), (1,), (1, 0)), (2, 1, 2))
    yield (rng.normal(size=(4, 5, 3)), rng.integers(-1, 5, size=(2, 3, 2)),
           G((2,), (0, 1), (0, 1)), (1, 1, 2))
    yield (rng.normal(size=(3, 6, 2)), rng.integers(0, 6, size=(3, 4, 1)),
           G((2,), (1,), (1,), (0,), (0,)), (1, 1, 2))
    yield (rng.normal(size=(3, 6, 2)), rng.integers(0, 6, size=(1, 2, 1)),
           G((1,), (0, 1), (1,)), (1, 1, 2))
    yield (rng.normal(size=(0, 3)), np.zeros((2, 1), np.int64), G((1, 2), (), (0,)), (0, 3))


def _scatter_dn(dn):
    return lax.ScatterDimensionNumbers(dn.offset_dims, dn.collapsed_slice_dims, dn.start_index_map,
                                       dn.operand_batching_dims, dn.start_indices_batching_dims)


@pytest.mark.parametrize("mode", ["clip", "fill"])
def test_gather_scatter_vs_loops(rng, mode):
    for x, idx, dn, sizes in _gather_cases(rng):
        got = lax.gather(A(x), A(idx), dn, sizes, mode=mode, fill_value=-5.0)
        want = ref_gather(x, idx, dn, sizes, mode, -5.0)
        assert_same(got, A(want), msg=f"gather {dn}")
        u = rng.normal(size=want.shape)
        sdn = _scatter_dn(dn)
        for name, comb in [("scatter_add", np.add), ("scatter_mul", np.multiply),
                           ("scatter_min", np.minimum), ("scatter_max", np.maximum)]:
            got = getattr(lax, name)(A(x), A(idx), A(u), sdn, mode=mode)
            assert_same(got, A(ref_scatter(x, idx, u, sdn, mode, comb)), atol=1e-12,
                        msg=f"{name} {dn}")
        got = lax.scatter_sub(A(x), A(idx), A(u), sdn, mode=mode)
        assert_same(got, A(ref_scatter(x, idx, u, sdn, mode, np.subtract)), atol=1e-12)


def test_gather_default_mode_fills_and_scatter_set_last_wins():
    x = A(np.arange(5.0))
    dn = lax.GatherDimensionNumbers((), (0,), (0,))
    got = lax.gather(x, A(np.array([[1], [5], [-1]])), dn, (1,))
    assert_same(got, A(np.array([1.0, np.nan, np.nan])))
    sdn = lax.ScatterDimensionNumbers((), (0,), (0,))
    got = lax.scatter(x, A(np.array([[1], [1], [9]])), A(np.array([7.0, 8.0, 9.0])), sdn)
    assert_same(got, A(np.array([0.0, 8.0, 2.0, 3.0, 4.0])))
    with pytest.raises(ValueError, match="lax.gather"):
        lax.gather(x, A(np.array([[1, 2]])), dn, (1,))
    with pytest.raises(TypeError, match="GatherDimensionNumbers"):
        lax.gather(x, A(np.array([[1]])), ((), (0,), (0,)), (1,))


def test_gather_scatter_transforms(rng):
    x = A(rng.normal(size=(4, 5, 3)))
    idx = A(rng.integers(-1, 5, size=(2, 3, 2)))
    dn = lax.GatherDimensionNumbers((0, 3), (1,), (1, 0))
    for mode in ("clip", "fill"):
        f = lambda v: lax.gather(v, idx, dn, (2, 1, 2), mode=mode, fill_value=0.0)  # noqa: E731
        check_grads(lambda v: f(v) ** 2, (x,), order=2)
        check_compiled(f, x)
        check_vmap(lambda i: lax.gather(x, i, dn, (2, 1, 2), mode=mode, fill_value=0.0),
                   (A(rng.integers(-1, 5, size=(3, 2, 3, 2))),))
        u = A(rng.normal(size=(2, 2, 3, 2)))
        sdn = _scatter_dn(dn)
        check_grads(lambda v, w: lax.scatter_add(v, idx, w * w, sdn, mode=mode), (x, u), order=2)
        check_grads(lambda v, w: lax.scatter_mul(v, idx, w, sdn, mode=mode), (x, u), order=1)
        check_compiled(lambda v, w: lax.scatter_max(v, idx, w, sdn, mode=mode), x, u)
        check_vmap(lambda v, i: lax.scatter_add(v, i, u, sdn, mode=mode),
                   (A(rng.normal(size=(3, 4, 5, 3))), A(rng.integers(-1, 5, size=(3, 2, 3, 2)))))


# ---- the rest of JAX's elementwise names, reductions and constructors -------------------------

RNG = np.random.default_rng(7)

@pytest.mark.parametrize("name, ref, lo, hi", [
    ("sinh", np.sinh, -3, 3), ("cosh", np.cosh, -3, 3), ("asin", np.arcsin, -0.9, 0.9),
    ("acos", np.arccos, -0.9, 0.9), ("atan", np.arctan, -5, 5), ("asinh", np.arcsinh, -5, 5),
    ("acosh", np.arccosh, 1.1, 5), ("atanh", np.arctanh, -0.9, 0.9),
    ("logistic", lambda v: 1 / (1 + np.exp(-v)), -30, 30),
])
def test_more_unary_elementwise(name, ref, lo, hi):
    x = np.linspace(lo, hi, 7)
    fn = getattr(lax, name)
    np.testing.assert_allclose(np.asarray(fn(x)), ref(x), rtol=1e-13)
    check_grads(fn, (snp.asarray(x[1:-1]),), order=2)
    assert fn(x.astype(np.float32)).dtype == np.float32


def test_logistic_extremes_complex_clz_not():
    assert np.asarray(lax.logistic(np.array([-1000.0, 1000.0]))).tolist() == [0.0, 1.0]
    with pytest.raises(TypeError, match="logistic"):
        lax.logistic(np.array([1, 2], np.int32))
    re, im = np.array([1.0, -2.0], np.float32), np.array([0.5, 3.0], np.float32)
    z = lax.complex(re, im)
    assert z.dtype == np.complex64 and np.asarray(z).tolist() == [1 + 0.5j, -2 + 3j]
    with pytest.raises(TypeError, match="complex"):
        lax.complex(re, im.astype(np.float64))
    v = np.array([0, 1, 255, -1, 2 ** 20, 2 ** 31 - 1], np.int32)
    want = [32, 31, 24, 0, 11, 1]
    assert np.asarray(lax.clz(v)).tolist() == want
    assert np.asarray(lax.clz(v.astype(np.int64))).tolist() == [w + 32 for w in want[:3]] + \
        [0, 43, 33]
    assert np.asarray(lax.clz(np.array([0, 1, 128], np.uint8))).tolist() == [8, 7, 0]
    assert np.asarray(lax.not_(np.array([True, False]))).tolist() == [False, True]


@pytest.mark.parametrize("name, ref", [("reduce_sum", np.sum), ("reduce_prod", np.prod),
                                       ("reduce_max", np.max), ("reduce_min", np.min)])
def test_named_reductions(name, ref):
    x = RNG.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    for axes in [(0,), (1, 2), (), (0, 1, 2), (-1,)]:
        got = getattr(lax, name)(x, axes)
        assert got.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), ref(x, axis=axes), rtol=1e-5)
    with pytest.raises(ValueError, match="distinct"):
        getattr(lax, name)(x, (0, 0))
    check_vmap(lambda v: getattr(lax, name)(v, (1,)), (x,))
    # a compiled reduction may add in another order: last-bit differences
    check_compiled(lambda v: getattr(lax, name)(v, (0, 2)), x, atol=1e-5)


def test_bitwise_reductions():
    x = RNG.integers(0, 256, (4, 7)).astype(np.uint8)
    xs = x.astype(np.int16) - 100
    for ax in [(0,), (1,), (0, 1)]:
        assert np.array_equal(np.asarray(lax.reduce_and(x, ax)), np.bitwise_and.reduce(x, ax))
        assert np.array_equal(np.asarray(lax.reduce_or(xs, ax)), np.bitwise_or.reduce(xs, ax))
        assert np.array_equal(np.asarray(lax.reduce_xor(xs, ax)), np.bitwise_xor.reduce(xs, ax))
        assert np.array_equal(np.asarray(lax.reduce_and(xs, ax)), np.bitwise_and.reduce(xs, ax))
    b = x > 100
    assert np.array_equal(np.asarray(lax.reduce_or(b, (1,))), b.any(1))
    assert np.array_equal(np.asarray(lax.reduce_and(b, (1,))), b.all(1))
    assert np.asarray(lax.reduce_xor(np.zeros((0, 3), np.int32), (0,))).tolist() == [0, 0, 0]
    with pytest.raises(TypeError, match="integer or bool"):
        lax.reduce_and(np.ones(3, np.float32), (0,))


def test_reduce_monoids_callables_and_pytrees():
    x = RNG.normal(size=(5, 6))
    np.testing.assert_allclose(np.asarray(lax.reduce(x, 0.0, lax.add, (0,))), x.sum(0))
    np.testing.assert_allclose(np.asarray(lax.reduce(x, -np.inf, lax.max, (0, 1))), x.max())
    # a callable the reduction does not recognise: a tree of pairwise combines
    got = lax.reduce(x, -np.inf, lambda a, b: snp.maximum(a, b), (1,))
    np.testing.assert_allclose(np.asarray(got), x.max(1))
    # argmax as a reduction over (value, index) pairs, as JAX users write it
    idx = np.broadcast_to(np.arange(6), (5, 6)).astype(np.int32)

    def pick(a, b):
        take_b = b[0] > a[0]
        return snp.where(take_b, b[0], a[0]), snp.where(take_b, b[1], a[1])
    vals, where = lax.reduce((x, idx), (-np.inf, 0), pick, (1,))
    np.testing.assert_array_equal(np.asarray(where), x.argmax(1))
    np.testing.assert_allclose(np.asarray(vals), x.max(1))
    g = starling.grad(lambda v: lax.reduce(v, 1.0, lambda a, b: a * b, (0,)))(
        snp.asarray(np.array([1.0, 2, 3, 4, 5])))
    np.testing.assert_allclose(np.asarray(g), 120 / np.array([1.0, 2, 3, 4, 5]))
    check_vmap(lambda v: lax.reduce(v, 0.0, lambda a, b: a + b, (0,)), (x,))
    with pytest.raises(ValueError, match="init values"):
        lax.reduce((x, x), 0.0, lax.add, (0,))


def test_argmax_dot_batch_matmul_full_collapse():
    x = np.array([[1.0, np.nan, 3.0], [2.0, 2.0, 1.0]])
    assert np.asarray(lax.argmax(x, 1, np.int32)).tolist() == [1, 0]
    assert lax.argmin(x, 0, np.int64).dtype == np.int64
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2))
    np.testing.assert_allclose(np.asarray(lax.dot(a, b)), a @ b)
    np.testing.assert_allclose(np.asarray(lax.dot(a[0], b[:, 0])), a[0] @ b[:, 0])
    assert lax.dot(a.astype(np.float32), b.astype(np.float32),
                   preferred_element_type=np.float64).dtype == np.float64
    with pytest.raises(TypeError, match="dot_general"):
        lax.dot(a[None], b)
    s, t = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 4, 5))
    np.testing.assert_allclose(np.asarray(lax.batch_matmul(s, t)), s @ t)
    with pytest.raises(ValueError, match="batch"):
        lax.batch_matmul(s, t[:1])
    assert np.asarray(lax.full((2, 2), 7, np.int8)).tolist() == [[7, 7], [7, 7]]
    f = lax.full_like(np.zeros((3,), np.float32), 2.5)
    assert f.dtype == np.float32 and f.shape == (3,)
    assert lax.full_like(f, 1, shape=(2, 1)).shape == (2, 1)
    assert np.asarray(lax.zeros_like_array(s)).sum() == 0
    assert lax.collapse(s, 1).shape == (2, 12) and lax.collapse(s, 0, 2).shape == (6, 4)
    with pytest.raises(ValueError, match="span"):
        lax.collapse(s, 2, 1)
