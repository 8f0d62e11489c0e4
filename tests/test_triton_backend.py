"""The triton backend: fused elementwise kernels rendered from the scalar formula language, run
under Triton's interpreter over NumPy buffers (no GPU), and compiled ahead of time for sm_90a.
Values are checked against the NumPy implementations (eager / numpy_ref)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import tree
from starling.core.ir import eval_program
from starling.lowering import backends
from starling.lowering.fused import fused_kernel_p
from starling.lowering.pipeline import run_pipeline
from starling.transforms.stage import make_ir

triton = pytest.importorskip("triton", reason="the triton package is not installed "
                                              "(pip install -e '.[gpu]'; Linux only)")
from starling.lowering.backends.triton import aot, autotune  # noqa: E402
from starling.lowering.backends.triton import codegen as triton_codegen  # noqa: E402
from starling.lowering.backends.triton import backend as triton_backend  # noqa: E402
from starling.lowering.backends.triton.buffers import NumpyBuffer  # noqa: E402

from tests.test_scalar_formula import _CASES, _HARD  # noqa: E402


def tcompile(f):
    return st.compile(f, backend="triton")


def _exe(f, *args):
    prog = run_pipeline(make_ir(f)(*[snp.asarray(a) for a in args]))
    return backends.get_backend("triton").compile(prog)


def _close(got, want, ulps=0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(all="ignore"):
        unit = np.abs(np.nextafter(want, np.array(np.inf, want.dtype)).astype(np.float64) - w)
    ok = (g == w) | (np.isnan(g) & np.isnan(w)) | (np.abs(g - w) <= ulps * unit)
    ok &= (np.signbit(g) == np.signbit(w)) | np.isnan(w) | (ulps > 0)
    assert ok.all(), (g[~ok][:5], w[~ok][:5])


def test_a_fused_chain_is_one_triton_kernel_reading_broadcast_operands():
    def f(x, y, b):
        return snp.tanh(x) * 0.5 + snp.exp(-x * y) * b - snp.maximum(x, y) ** 2
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((37, 50)).astype(np.float32) for _ in range(2))
    b = rng.standard_normal(50).astype(np.float32)
    exe = _exe(f, x, y, b)
    kernels = [e for e in exe.program.eqns if e.primitive is fused_kernel_p]
    assert len(kernels) == 1 and len(exe.kernels) == 1
    assert "tl.load" in exe.source and "M.tanh" in exe.source
    assert "(v7 * v7)" in exe.source or "* v" in exe.source   # pow(x, 2) squares
    _close(tcompile(f)(x, y, b), f(snp.asarray(x), snp.asarray(y), snp.asarray(b)), ulps=1)


@pytest.mark.parametrize("shape", [(), (1,), (7, 13), (0, 5), (3, 1, 17)])
def test_many_programs_masks_and_degenerate_shapes(shape, monkeypatch):
    monkeypatch.setattr(triton_codegen, "INTERPRETER_BLOCK", 16)   # several programs, a ragged one
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float64)
    y = rng.integers(-5, 5, shape).astype(np.int32)

    def f(x, y):
        return [snp.where(y > 0, x * 2.0, -x), (y * 3) // 2, snp.isnan(x / 0.0)]
    with np.errstate(all="ignore"):
        for g, w in zip(tcompile(f)(x, y), f(snp.asarray(x), snp.asarray(y))):
            _close(g, w)


def test_views_are_read_in_place_through_strides():
    x = np.arange(48, dtype=np.float32).reshape(6, 8)

    def f(x):
        return x.T * 2.0 + x[::-1].T - snp.broadcast_to(x[:, :1], (6, 8)).T
    exe = _exe(f, x)
    assert exe.kernels   # the transposes / reversal / broadcast stay views the kernel reads
    _close(tcompile(f)(x), f(snp.asarray(x)))


@pytest.mark.parametrize("case", list(_CASES))
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_hard_values_match_numpy(case, dt):
    fn, ulps = _CASES[case]
    a, b = np.meshgrid(_HARD, _HARD)
    a, b = a.ravel().astype(dt), b.ravel().astype(dt)
    with np.errstate(all="ignore"):
        want = fn(snp.asarray(a), snp.asarray(b))
        got = tcompile(fn)(a, b)
    _close(got, want, ulps)


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64])
def test_integer_formulas_wrap_and_divide_like_numpy(dt):
    info = np.iinfo(dt)
    v = np.array([0, 1, 2, 7, info.max, info.max - 1, info.min, info.min + 1, 63, 64], dt)
    if info.min:
        v = np.concatenate([v, np.array([-1, -2, -7, -64], dt)])
    a, b = (m.ravel() for m in np.meshgrid(v, v))

    def f(a, b):
        return [a + b * a, -a, snp.abs(a), snp.floor_divide(a, b), snp.remainder(a, b),
                snp.fmod(a, b), snp.bitwise_left_shift(a, b), snp.bitwise_right_shift(a, b),
                snp.maximum(a, b), snp.sign(a), ~a ^ b, a.astype(np.float32),
                (a.astype(np.float64) * 1e30).astype(dt)]
    with np.errstate(all="ignore"):
        for g, w in zip(tcompile(f)(a, b), f(snp.asarray(a), snp.asarray(b))):
            _close(g, w)


def _softmax_and_friends(x):
    m = snp.max(x, axis=-1, keepdims=True)
    e = snp.exp(x - m)
    return [e / snp.sum(e, axis=-1, keepdims=True), snp.min(x, axis=0), snp.sum(x * x),
            snp.any(x > 1, axis=-1), snp.all(x < 3, axis=0), snp.max(x, axis=(0, 2))]


@pytest.mark.parametrize("dt", [np.float32, np.float64, ml_dtypes.bfloat16, np.float16])
def test_reductions_run_in_kernels(dt, monkeypatch):
    monkeypatch.setattr(triton_codegen, "INTERPRETER_BLOCK", 8)   # loops of several blocks
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 19)).astype(dt)
    x[1, 2, 5] = np.nan          # max / min propagate NaN (NumPy), also across lanes
    x[2, 0, 0] = -np.inf
    exe = _exe(_softmax_and_friends, x)
    assert sum(k.reduced is not None for k in exe.kernels.values()) >= 4
    assert not [e for e in exe.program.eqns if e.primitive.name.startswith("reduce_")]
    got = tcompile(_softmax_and_friends)(x)
    want = _softmax_and_friends(snp.asarray(x))
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        tol = {np.float32: 1e-6, np.float64: 1e-13}.get(dt, 1e-2)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                                   atol=tol, equal_nan=True)


def test_reductions_of_inputs_constant_along_the_reduced_dims():
    # a bias beside a reduction over the other dim, a reduction over no dims, a bias's grad
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.linspace(-1, 1, 4).astype(np.float32)
    a = np.linspace(0, 2, 3).astype(np.float32)

    def f(x, b, a):
        return [(x - b).sum(axis=0), snp.sum(x * 2, axis=()), (x.T - a).max(axis=0),
                snp.sum(x[:1] * b, axis=0)]
    for g, w in zip(tcompile(f)(x, b, a), f(snp.asarray(x), snp.asarray(b), snp.asarray(a))):
        _close(g, w, ulps=1)
    loss = st.grad(lambda b, x: snp.tanh(x + b).sum())
    _close(tcompile(loss)(b, x), loss(snp.asarray(b), snp.asarray(x)), ulps=4)


@pytest.mark.parametrize("block", [64, 1 << 14])
def test_many_short_reductions_share_a_program(block, monkeypatch):
    # columns of a (7, 301) array: rows of 8 lanes, several kept positions per program, the
    # last program ragged
    monkeypatch.setattr(triton_codegen, "INTERPRETER_BLOCK", block)
    x = np.random.default_rng(4).standard_normal((7, 301)).astype(np.float32)
    x[3, 17] = np.nan

    def f(x):
        return [(x * 2).sum(axis=0), x.max(axis=0), snp.any(x > 2, axis=0), x.min()]
    (k, *_), = [list(_exe(f, x).kernels.values())]
    assert k.kept == 301 and k.reduced == 7
    grid, constants, _ = k.launch_config(interpret=True)
    assert constants["RB"] == 8 and grid == -(-301 // (constants["BLOCK"] // 8))
    for g, w in zip(tcompile(f)(x), f(snp.asarray(x))):   # sums in another order
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_launches_from_many_threads_and_on_sharded_arrays():
    from concurrent.futures import ThreadPoolExecutor
    f = tcompile(lambda x: snp.tanh(x) * 2 + snp.sum(x, axis=1, keepdims=True))
    xs = [np.full((16, 8), i / 10, np.float32) for i in range(12)]
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(f, xs))
    for x, o in zip(xs, outs):
        _close(o, np.tanh(x) * 2 + x.sum(axis=1, keepdims=True), ulps=2)
    from starling.sharding import Shard, distribute, make_mesh
    x = np.arange(64 * 8, dtype=np.float32).reshape(64, 8) / 100
    sx = distribute(snp.asarray(x), make_mesh((4,), ("d",), devices=st.devices()[:4]), [Shard(0)])
    _close(np.asarray(f(sx)), np.tanh(x) * 2 + x.sum(axis=1, keepdims=True), ulps=2)


def test_integer_bool_and_empty_reductions():
    n = np.array([[100, 100, 100], [-128, -1, 127]], np.int8)
    z = np.zeros((4, 0), np.float32)

    def f(n, z):
        return [snp.sum(n, axis=1, dtype=np.int8), snp.max(n, axis=0), snp.min(n),
                snp.sum(z, axis=1), snp.any(z > 0, axis=1), snp.all(z > 0, axis=1)]
    for g, w in zip(tcompile(f)(n, z), f(snp.asarray(n), snp.asarray(z))):
        _close(g, w)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_matmul_with_fused_epilogue_is_one_kernel(dt):
    # 37 x 50 @ 50 x 45: ragged tiles in M, N and K; the weight read transposed in place
    def f(x, w, b):
        d = x @ w.T
        return [d, snp.maximum(d + b, 0.0) * 2.0, snp.tanh(d) - b]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((37, 50)).astype(dt)
    w = rng.standard_normal((45, 50)).astype(dt)
    b = rng.standard_normal(45).astype(dt)
    exe = _exe(f, x, w, b)
    assert [e.primitive.name for e in exe.program.eqns] == ["fused_matmul"]
    assert "tl.dot" in exe.source
    got = tcompile(f)(x, w, b)
    want = f(snp.asarray(x), snp.asarray(w), snp.asarray(b))
    tol = {np.float32: 2e-5, np.float64: 1e-12}.get(dt, 2e-2)
    for g, w_ in zip(got, want):
        g, w_ = np.asarray(g), np.asarray(w_)
        assert g.dtype == w_.dtype and g.shape == w_.shape
        np.testing.assert_allclose(g.astype(np.float64), w_.astype(np.float64), rtol=tol,
                                   atol=tol * 10)


@pytest.mark.parametrize("dt", [np.float32, np.float64, ml_dtypes.bfloat16])
def test_batched_products_with_transposed_operands(dt):
    # attention scores: one program per tile of each batch element, k read transposed in place
    def f(q, k, v):
        s = q @ k.transpose(0, 2, 1)
        return [snp.tanh(s * 0.125) + 1.0, s @ v]
    rng = np.random.default_rng(7)
    q, k = (rng.standard_normal((3, 37, 20)).astype(dt) for _ in range(2))
    v = rng.standard_normal((3, 37, 9)).astype(dt)
    exe = _exe(f, q, k, v)
    assert [e.primitive.name for e in exe.program.eqns] == ["fused_matmul", "fused_matmul"]
    tol = {np.float32: 2e-5, np.float64: 1e-12}.get(dt, 2e-2)
    for g, w in zip(tcompile(f)(q, k, v), f(snp.asarray(q), snp.asarray(k), snp.asarray(v))):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=tol, atol=tol * 10)


def test_products_triton_does_not_tile_run_on_the_host():
    # integer products and two contracting dims: right values, no matmul kernel
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((4, 5, 2))
    n = rng.integers(-3, 3, (4, 5)).astype(np.int32)

    def f(a, b, n):
        return [snp.tanh(snp.tensordot(a, b, axes=2)), n @ n.T]
    exe = _exe(f, a, b, n)
    assert not [e for e in exe.program.eqns if e.primitive.name == "fused_matmul"]
    for g, w in zip(tcompile(f)(a, b, n), f(snp.asarray(a), snp.asarray(b), snp.asarray(n))):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


@pytest.mark.parametrize("dt", [np.float64, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_products_with_several_batch_dims_are_kernels(dt):
    """Attention-shaped products (batch, heads, ...): a program per tile of one batch element,
    the batch indices unravelled in C order; transposed operands and an epilogue reading a
    broadcast operand."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 3, 40, 16)).astype(dt)
    k = rng.standard_normal((2, 3, 40, 16)).astype(dt)
    v = rng.standard_normal((3, 2, 2, 16, 5)).astype(dt)
    bias = rng.standard_normal(40).astype(dt)

    def f(q, k, v, bias):
        s = snp.maximum(q @ snp.swapaxes(k, -1, -2) * 0.25 + bias, 0)
        return [s, snp.swapaxes(v, 0, 2) @ snp.swapaxes(v, 0, 2).transpose(0, 1, 2, 4, 3)]
    exe = _exe(f, q, k, v, bias)
    assert len([e for e in exe.program.eqns if e.primitive.name == "fused_matmul"]) == 2
    for g, w in zip(tcompile(f)(q, k, v, bias), f(*[snp.asarray(x) for x in (q, k, v, bias)])):
        g, w = np.asarray(g).astype(np.float64), np.asarray(w).astype(np.float64)
        tol = 1e-12 if np.dtype(dt) == np.float64 else 2e-2
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * np.abs(w).max())


def test_float_to_int_conversion_saturates():
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 2.9, -2.9, 127.5, -128.7, 255.9],
                 np.float32)

    def f(x):
        return [x.astype(t) for t in (np.int8, np.uint8, np.int32, np.int64, np.uint32, bool)]
    for g, w in zip(tcompile(f)(x), f(snp.asarray(x))):
        _close(g, w)


def test_what_triton_does_not_compute_runs_on_the_host():
    # complex numbers are decomposed; integer powers and float64 -> float8 casts (two roundings)
    # are not rendered: right values
    z = (np.arange(6) + 1j).astype(np.complex64)
    x8 = np.linspace(-2, 2, 6).astype(np.float64)
    n = np.arange(6, dtype=np.int32)

    def f(z, x8, n):
        return [snp.exp(z) * 2, (x8 * x8).astype(ml_dtypes.float8_e4m3fn), n ** n]
    for g, w in zip(tree.leaves(tcompile(f)(z, x8, n)),
                    tree.leaves(f(snp.asarray(z), snp.asarray(x8), snp.asarray(n)))):
        np.testing.assert_allclose(np.asarray(g).astype(np.complex128),
                                   np.asarray(w).astype(np.complex128), rtol=1e-6)


_BIT_FORMATS = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu]


@pytest.mark.parametrize("dt", _BIT_FORMATS, ids=lambda d: np.dtype(d).name)
def test_formats_held_as_bits_convert_by_the_rules(dt):
    """Every stored pattern widens, and float32 values at every rounding boundary narrow, to
    the bits the exact oracle (tests/exact_casts.py) gives, inside one Triton kernel each."""
    from tests.exact_casts import bits_of, convert_bits
    from tests.test_block_scaled import _hard_values
    dt = np.dtype(dt)
    n = {1: 256, 2: 65536}[dt.itemsize] if dt != ml_dtypes.float4_e2m1fn else 16
    x = np.arange(n, dtype=f"uint{8 * dt.itemsize}").view(dt)
    one = np.ones((), np.float32)
    assert _exe(lambda a: a.astype(np.float32) * one, x).kernels
    got = tcompile(lambda a: a.astype(np.float32) * one)(x)
    np.testing.assert_array_equal(bits_of(got), convert_bits(x, np.float32))
    grid = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    with np.errstate(all="ignore"):
        h = np.concatenate([_hard_values(np.dtype(np.float32)),
                            np.linspace(-700, 700, 4001, dtype=np.float32),
                            np.nextafter(grid, np.float32(np.inf)), grid * np.float32(1.5)])
    got = tcompile(lambda a: (a * one).astype(dt))(h)
    np.testing.assert_array_equal(bits_of(got), convert_bits(h, dt))


@pytest.mark.parametrize("dt", _BIT_FORMATS[1:4], ids=lambda d: np.dtype(d).name)
def test_float8_and_float4_chains_and_reductions_in_kernels(dt):
    """Each operation rounds to the format, as in eager mode; sums accumulate in float32."""
    x = np.linspace(-3, 3, 64).astype(dt)
    y = np.linspace(2, -1, 64).astype(dt)

    def f(x, y):
        return [snp.sin(x) * y + x, snp.maximum(x, y), snp.sum(x.reshape(8, 8), axis=1),
                snp.max(y.reshape(8, 8), axis=0), (x > y).astype(dt), x.astype(np.float16)]
    assert _exe(f, x, y).kernels
    for g, w in zip(tcompile(f)(x, y), f(snp.asarray(x), snp.asarray(y))):
        _close(g, w)


def test_float8_kernels_compile_for_sm90a():
    x = np.linspace(-3, 3, 64).astype(ml_dtypes.float8_e4m3fn)
    exe = _exe(lambda a, s: (a.astype(np.float32) * s).astype(ml_dtypes.float8_e5m2)
               .astype(ml_dtypes.float4_e2m1fn), x, np.float32(0.5))
    for k in exe.kernels.values():
        assert ".target sm_90a" in aot.compile_kernel(k, arch=90).asm["ptx"]


@pytest.mark.parametrize("dt", [np.float32, np.float64, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_grouped_products_and_their_weight_gradients_are_kernels(dt):
    """ragged_dot's two modes as Triton kernels reading the group sizes at run time: empty
    groups, a group across tile borders, rows past the last group, sizes clamped as the
    primitive says (negative -> 0, cut at m), a vmapped batch dim, k = 0 and m = 0."""
    from starling import lax
    rng = np.random.default_rng(0)

    def case(m, k, n, sizes, batch=()):
        x = rng.standard_normal(batch + (m, k)).astype(dt)
        w = rng.standard_normal(batch + (len(sizes[0] if batch else sizes), k, n)).astype(dt)
        c = rng.standard_normal(batch + (m, n)).astype(dt)
        return x, w, c, np.array(sizes, np.int32)

    def f(x, w, c, s):
        y = lax.ragged_dot(x, w, s)
        return [y, st.grad(lambda w: snp.sum(lax.ragged_dot(x, w, s) * c))(w)]
    for x, w, c, s in [case(70, 40, 50, [20, 0, 45]), case(33, 5, 3, [-4, 40, 2]),
                       case(6, 0, 4, [2, 3]), case(0, 3, 4, [0, 0]),
                       case(40, 8, 17, [[10, 30], [0, 33]], batch=(2,))]:
        exe = _exe(f, x, w, c, s)
        assert sum(k.name.startswith("st_grouped") for k in exe.kernels.values()) >= 2 or \
            0 in x.shape
        got = tcompile(f)(x, w, c, s)
        want = st.compile(f, backend="numpy_ref")(x, w, c, s)   # traced sizes: clamped
        for g, h in zip(got, want):
            g, h = np.asarray(g).astype(np.float64), np.asarray(h).astype(np.float64)
            tol = 1e-12 if np.dtype(dt) == np.float64 else (1e-5 if np.dtype(dt) == np.float32
                                                             else 2e-2)
            scale = max(1.0, float(np.abs(h).max())) if h.size else 1.0
            np.testing.assert_allclose(g, h, rtol=tol, atol=tol * scale)


def test_grouped_kernel_keeps_an_inf_in_its_group():
    """Found by review: the rows of a tile outside a group are zeros in that group's product,
    and 0 * inf must not reach them (nor rows past the last group); sizes near 2**63 clamp."""
    from starling import lax
    x = np.ones((4, 2), np.float32)
    w = np.ones((2, 2, 3), np.float32)
    w[0, 0, 0] = np.inf
    f = tcompile(lambda a, b, s: lax.ragged_dot(a, b, s))
    np.testing.assert_array_equal(np.asarray(f(x, w, np.array([1, 2], np.int32)))[:, 0],
                                  [np.inf, 2, 2, 0])
    huge = np.array([2 ** 63 - 1, 2], np.int64)
    np.testing.assert_array_equal(np.asarray(f(x, w, huge))[:, 1], [2, 2, 2, 2])


def test_grouped_kernels_compile_for_sm90a():
    from starling import lax
    x = np.ones((256, 64), ml_dtypes.bfloat16)
    w = np.ones((4, 64, 128), ml_dtypes.bfloat16)
    exe = _exe(lambda x, w, s: lax.ragged_dot(x, w, s), x, w, np.array([64, 0, 100, 92]))
    (k,) = exe.kernels.values()
    ptx = aot.compile_kernel(k, arch=90).asm["ptx"]
    assert ".target sm_90a" in ptx and "wgmma.mma_async" in ptx


@pytest.mark.parametrize("da, db", [(ml_dtypes.float8_e4m3fn,) * 2, (ml_dtypes.float8_e5m2,) * 2,
                                    (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2),
                                    (ml_dtypes.bfloat16,) * 2])
def test_scaled_matmul_is_one_kernel_reading_narrow_operands(da, db):
    """The operands' widening casts join the product's kernel (the buffers are loaded narrow),
    with the scales, bias and output cast as its epilogue; two float8 operands of one format
    multiply on the tensor cores (float8 wgmma in the sm_90a PTX)."""
    from starling import lax
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((64, 96)) * 3).astype(da)
    b = (rng.standard_normal((96, 48)) * 3).astype(db)
    sa = rng.uniform(0.5, 2, (64, 1)).astype(np.float32)
    bias = rng.standard_normal(48).astype(np.float32)
    if np.dtype(da) == np.dtype(ml_dtypes.bfloat16):
        def f(a, b, sa, bias):
            return (a.astype(np.float32) @ b.astype(np.float32)) * sa + bias
    else:
        def f(a, b, sa, bias):
            return lax.scaled_matmul(a, b, sa, np.float32(0.25), ml_dtypes.bfloat16, bias=bias)
    exe = _exe(f, a, b, sa, bias)
    (k,) = exe.kernels.values()
    got = np.asarray(tcompile(f)(a, b, sa, bias))
    want = np.asarray(f(*[snp.asarray(x) for x in (a, b, sa, bias)]))
    assert got.dtype == want.dtype   # the same sums in another order: float32 / bfloat16 ulps
    tol = 1e-5 if want.dtype == np.float32 else 1e-2
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol * np.abs(want.astype(np.float64)).max())
    ptx = aot.compile_kernel(k, arch=90).asm["ptx"]
    fmt = {np.dtype(ml_dtypes.float8_e4m3fn): "e4m3", np.dtype(ml_dtypes.float8_e5m2): "e5m2"}
    if np.dtype(da) == np.dtype(db) and np.dtype(da) in fmt:
        assert f".f32.{fmt[np.dtype(da)]}.{fmt[np.dtype(da)]}" in ptx


def test_argmax_argmin_and_products_run_in_kernels():
    """NumPy's rules in one row of lanes: the first NaN wins, ties go to the first index, a row
    of -inf (argmax's identity) gives 0; integer products wrap; low-precision values are
    compared and multiplied in float32."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 300)).astype(np.float32)
    x[2, 50] = x[2, 10] = np.nan
    x[3] = -np.inf
    x[4, ::2] = 5
    x[5] = 0.0
    xi = rng.integers(-5, 5, (7, 300)).astype(np.int8)
    xb = x.astype(ml_dtypes.bfloat16)

    def f(x, xi, xb):
        return [snp.argmax(x, axis=1), snp.argmin(x, axis=1), snp.argmax(x, axis=0),
                snp.argmax(xi, axis=1), snp.argmin(xi, axis=0), snp.argmax(xb, axis=1),
                snp.argmin(-x), snp.prod(x[:, :20] * 0.5 + 1, axis=1),
                snp.prod(xi[:, :40], axis=1), snp.prod(xb[:, :6], axis=1)]
    exe = _exe(f, x, xi, xb)
    assert all(k.name.startswith("st_kernel") for k in exe.kernels.values())
    assert not any(e.primitive.name in ("argmax", "argmin", "reduce_prod")
                   for e in exe.program.eqns)
    for g, w in zip(tcompile(f)(x, xi, xb), f(snp.asarray(x), snp.asarray(xi), snp.asarray(xb))):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype
        if g.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-5)


def test_random_bits_are_philox_kernels_with_the_cpus_bits():
    """random_bits (every draw's source) runs as a Philox4x32-10 kernel: the same bits as the
    NumPy reference for every unsigned dtype, batches of keys, tags and odd sizes; the
    distributions built on them follow."""
    from starling import random
    from starling.arrays.random import TAG_SPLIT, random_bits_numpy, random_bits_p
    keys = np.random.default_rng(0).integers(0, 2 ** 32, (3, 2, 2), dtype=np.uint64)
    keys = keys.astype(np.uint32)
    for shape, dt, tag in [((5, 7), np.uint32, 0), ((3,), np.uint8, 0), ((9,), np.uint64, 0),
                           ((1001,), np.uint16, TAG_SPLIT), ((), np.uint32, 0)]:
        def f(k, shape=shape, dt=dt, tag=tag):
            return random_bits_p.bind(k, shape=shape, dtype=np.dtype(dt), tag=tag)
        assert next(iter(_exe(f, keys).kernels.values())).name.startswith("st_random")
        got = np.asarray(tcompile(f)(keys))
        want = random_bits_numpy(keys, shape=shape, dtype=np.dtype(dt), tag=tag)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    k = random.key(7)
    draws = tcompile(lambda k: [random.normal(k, (64,)), random.randint(k, (9,), 0, 10)])(k)
    for g, w in zip(draws, [random.normal(k, (64,)), random.randint(k, (9,), 0, 10)]):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    (kern,) = _exe(lambda k: random.bits(k, (4096,), np.uint32), k).kernels.values()
    assert ".target sm_90a" in aot.compile_kernel(kern, arch=90).asm["ptx"]


def test_grad_of_a_program_runs_through_triton():
    def loss(w, x):
        return snp.sum(snp.tanh(x * w) ** 2 + snp.logaddexp(x, w))
    x = np.linspace(-3, 3, 40).astype(np.float32)
    w = np.float32(0.7) * np.ones(40, np.float32)
    g = st.compile(st.grad(loss), backend="triton")(w, x)
    _close(g, st.grad(loss)(snp.asarray(w), snp.asarray(x)), ulps=4)


def test_numpy_buffer_speaks_the_interpreters_protocol():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    b = NumpyBuffer(a)
    assert str(b.dtype) == "torch.float32" and b.stride() == (4, 2) and b.size() == (3, 2)
    assert b.data_ptr() == b.untyped_storage().data_ptr() == a.ctypes.data
    with pytest.raises(TypeError, match="complex64"):
        NumpyBuffer(np.zeros(2, np.complex64))


def test_missing_triton_is_a_clear_error(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_triton(name, *args, **kwargs):
        if name == "triton" or name.startswith("triton."):
            raise ImportError("no triton")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_triton)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[gpu\]'"):
        backends.get_backend("triton").compile(make_ir(lambda x: x + 1)(snp.ones(3)))


def test_kernels_compile_for_sm90a_without_a_gpu():
    # every kernel of a small MLP step, plus integer / bool / bfloat16 ones, reaches PTX and a
    # cubin for the H200 (sm_90a)
    def step(w, x, n, h):
        y = snp.maximum(x @ w, 0.0)
        return [snp.sum(snp.exp(-y * y) + snp.log1p(y)), (n << 2) % 7, n > 3,
                (h * h).astype(ml_dtypes.bfloat16) + h, snp.max(y, axis=0),
                snp.any(y > 1, axis=1)]
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((8, 8)).astype(np.float32), rng.standard_normal((4, 8))
    x = x.astype(np.float32)
    n = np.arange(8, dtype=np.int64)
    h = rng.standard_normal(8).astype(ml_dtypes.bfloat16)
    exe = _exe(step, w, x, n, h)
    assert len(exe.kernels) >= 3
    for k in exe.kernels.values():
        compiled = aot.compile_kernel(k, arch=90)
        ptx = compiled.asm["ptx"]
        assert ".target sm_90a" in ptx and compiled.asm["cubin"], k.name


def test_bfloat16_matmul_compiles_to_hopper_tensor_core_instructions():
    x = np.ones((256, 64), ml_dtypes.bfloat16)
    exe = _exe(lambda x, w, b: snp.maximum(x @ w + b, 0), x, x.T.copy(), np.ones(256, x.dtype))
    (k,) = exe.kernels.values()
    ptx = aot.compile_kernel(k, arch=90).asm["ptx"]
    assert "wgmma.mma_async" in ptx and ".target sm_90a" in ptx
    q = np.ones((4, 256, 64), ml_dtypes.bfloat16)
    (k,) = _exe(lambda q, k: q @ k.transpose(0, 2, 1), q, q).kernels.values()
    assert "wgmma.mma_async" in aot.compile_kernel(k, arch=90).asm["ptx"]


@pytest.mark.parametrize("dt", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_products_take_both_tiles_from_shared_memory_and_overlap(dt):
    """As the JIT compiles a launch on contiguous operands (unit strides constant, the others
    divisible by 16), the low-precision operands held as bits reach wgmma from shared memory,
    so each step waits only for the step before the last (``wgmma.wait_group 1`` in the loop),
    not for its own product: a bitcast after the load once routed A through registers and made
    every step wait (0.46x of cuBLAS on the H200)."""
    from starling import lax
    z = np.zeros((256, 256), dt)
    if np.dtype(dt) == np.dtype(ml_dtypes.bfloat16):
        exe = _exe(lambda a, b: a @ b, z, z)
    else:
        one = np.ones((1, 1), np.float32)
        exe = _exe(lambda a, b, sa, sb: lax.scaled_matmul(a, b, sa, sb, ml_dtypes.bfloat16),
                   z, z, one, one)
    (k,) = exe.kernels.values()
    # float8 wgmma takes B K-major only (as torch._scaled_mm asks): a column-major B
    b_strides = (256, 1) if np.dtype(dt) == np.dtype(ml_dtypes.bfloat16) else (1, 256)
    values = {"n": 256 * 256, "s0_0": 256, "s0_1": 1, "s1_0": b_strides[0],
              "s1_1": b_strides[1]}
    for name in k.signature():
        if name.startswith("s") and name not in values:
            values[name] = 1   # the scales' broadcast strides
    ptx = aot.compile_kernel(k, arch=90, config={"BM": 128, "BN": 128, "BK": 64,
                                                 "num_warps": 8, "num_stages": 3},
                             values=values).asm["ptx"]
    loop = ptx[ptx.index("Inner Loop"):]
    loop = loop[:loop.index("bra")]
    assert "wgmma.mma_async" in loop and "wgmma.wait_group.sync.aligned 1;" in loop
    assert "cp.async" in loop and "ld.global" not in loop


def test_no_contraction_into_fma_on_the_gpu():
    # x * y + z rounds twice, as NumPy and the C++ kernels compute it
    x = np.ones(8, np.float32)
    ptx = aot.compile_kernel(next(iter(_exe(lambda x, y, z: x * y + z, x, x, x)
                                       .kernels.values()))).asm["ptx"]
    assert "mul.rn.f32" in ptx and "add.rn.f32" in ptx and "fma" not in ptx


# ---- the elementwise OpInfos, on the triton backend (the cpp sweep's cases) -------------------

def _sweep_cases():
    from tests.test_compile_cpp import CASES
    ok = {"float32", "float64", "int32", "int64", "int8", "uint8", "bool", "float16",
          "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"}
    return [c for c in CASES if c[1].name in ok]


@pytest.mark.slow
def test_opinfo_sweep_matches_numpy_ref():
    from tests.test_compile_cpp import _staged
    failures, fused = [], 0
    for info, dt, sample in _sweep_cases():
        f, arrays = _staged(info, sample)
        try:
            f(*arrays)
            prog = run_pipeline(make_ir(f)(*arrays))
        except Exception:  # noqa: BLE001  (the op rejects this sample: nothing to compare)
            continue
        want = eval_program(prog, prog.consts, *arrays)
        exe = backends.get_backend("triton").compile(prog)
        fused += bool(exe.kernels)
        with np.errstate(all="ignore"):
            got = exe(prog.consts, arrays)
        rtol, atol = info.tol(dt)
        for g, w in zip(got, tree.leaves(want)):
            g, w = np.asarray(g), np.asarray(w)
            try:
                assert g.shape == w.shape and g.dtype == w.dtype
                if g.dtype.kind in "biu":
                    np.testing.assert_array_equal(g, w)
                else:
                    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                               rtol=max(rtol, 2e-5), atol=atol, equal_nan=True)
            except AssertionError as e:
                failures.append(f"{info.name}[{dt}] {sample.name}: {str(e)[:300]}")
    assert not failures, "\n".join(failures[:20])
    assert fused > 100


# ---- autotuning ---------------------------------------------------------------------------------

def test_autotune_picks_the_fastest_and_remembers_it_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("STARLING_CACHE_DIR", str(tmp_path))
    x = np.ones((300, 40), np.float32)
    (k,) = _exe(lambda x: snp.exp(x) + 1, x).kernels.values()
    calls = []

    def seconds(config):   # a stand-in timing: the 1024-element, 8-warp config is fastest
        calls.append(config)
        return abs(config["BLOCK"] - 1024) + (0 if config["num_warps"] == 8 else 0.5) + 1
    best = autotune.choose(k, "H200", seconds)
    assert best == {"BLOCK": 1024, "num_warps": 8} and len(calls) == len(autotune.ELEMENTWISE)
    calls.clear()
    assert autotune.choose(k, "H200", seconds) == best and not calls   # from the disk cache
    assert autotune.choose(k, "H100", seconds) == best and calls       # per device
    # the chosen configuration runs (the interpreter takes any block size)
    got = triton_backend.launch(k, [x], config=best)
    np.testing.assert_allclose(got[0], np.exp(x) + 1, rtol=1e-6)


def test_autotune_survives_failing_configs_and_a_torn_cache_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("STARLING_CACHE_DIR", str(tmp_path))
    (k,) = _exe(lambda x: x * 2, np.ones(8, np.float32)).kernels.values()
    path = autotune._path("dev", k)
    import os
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write('{"device": "dev", "conf')          # a process killed mid-write
    assert autotune.cached(k, "dev") is None

    def seconds(config):
        if config["BLOCK"] > 1024:
            raise RuntimeError("out of resources: shared memory")
        return config["BLOCK"]
    assert autotune.choose(k, "dev", seconds)["BLOCK"] == 512
    assert autotune.cached(k, "dev")["BLOCK"] == 512
    with pytest.raises(RuntimeError, match="no configuration"):
        autotune.choose(k, "other", lambda c: 1 / 0)


def test_every_matmul_candidate_compiles_for_sm90a():
    x = np.ones((512, 512), ml_dtypes.bfloat16)
    (k,) = _exe(lambda a, b: a @ b, x, x).kernels.values()
    for config in autotune.candidates(k):
        ptx = aot.compile_kernel(k, arch=90, config=config).asm["ptx"]
        assert "wgmma.mma_async" in ptx, config


@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16,
                                ml_dtypes.float8_e4m3fn])
def test_square_is_a_product_for_every_float_format(dt):
    # x ** 2 is x * x (NumPy squares: the same value), also where the literal 2 is a
    # low-precision operand widened to float32; libdevice's pow costs ~50 instructions an element
    x = np.array([-3, -0.5, 0, 1.5, np.inf, np.nan], np.float32).astype(dt)
    (k,) = _exe(lambda x: x ** 2, x).kernels.values()
    assert "M.pow" not in k.source
    got = np.asarray(tcompile(lambda x: x ** 2)(x))
    want = np.asarray(snp.asarray(x) ** 2)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
