"""The "cuda" platform (src/arrays/cuda.py) and programs launched on it (triton/gpu.py).

Without a GPU (CI) only the first tests run: the platform is listed empty, never raises, and
asking for a GPU is a clear error. The others need cupy and a CUDA GPU, and skip with the reason
otherwise; on a GPU each compares against the CPU's result for the same inputs.
"""
import re

import ml_dtypes
import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import lax
from starling.arrays import cuda

GPUS = cuda.cuda_devices()
needs_gpu = pytest.mark.skipif(not GPUS, reason=f"needs a CUDA GPU: {cuda.unavailable_reason()}")


# ---- without a GPU -----------------------------------------------------------------------------

def test_platform_lists_and_names_cuda():
    assert isinstance(st.devices("cuda"), list)
    assert st.local_devices("cuda") == st.devices("cuda")
    assert all(d.platform == "cpu" for d in st.devices())
    with pytest.raises(ValueError, match=r"available platforms: \['cpu', 'cuda'\]"):
        st.devices("tpu")


@pytest.mark.skipif(bool(GPUS), reason="checks the error where no GPU is usable")
def test_asking_for_a_gpu_without_one_says_why():
    why = cuda.unavailable_reason()
    assert why
    for target in ("cuda", "gpu", "cuda:0"):
        with pytest.raises(ValueError, match="no cuda device: " + re.escape(why)):
            st.device_put(np.ones(3), target)
    with pytest.raises(ValueError, match="no cuda device"):
        snp.ones(3, device="cuda")


def test_mixing_kinds_of_arrays_is_an_error_naming_devices():
    # a sharded operand and a GPU operand reach two dispatchers: the check is in the eval trace
    from starling.core.trace import EvalTrace

    class Other(st.Array):
        __slots__ = ()

        def devices(self):
            return {"elsewhere"}
    seen = []
    EvalTrace.register_dispatch(Other, lambda prim, args, params: seen.append(prim.name))
    try:
        n = len(st.devices())
        a = object.__new__(Other)
        b = snp.arange(float(n))
        a._buf, a._weak, a._device = b._buf, False, b._device
        snp.add(a, b)
        assert seen == ["add"]
        s = st.device_put(b, st.sharding.NamedSharding(
            st.sharding.make_mesh((n,), ("x",)), st.sharding.P("x")))
        with pytest.raises(ValueError, match=r"add: operands on different devices \(operand 0 "
                                             r"on \['elsewhere'\], operand 1 on"):
            snp.add(a, s)
    finally:
        del EvalTrace.dispatchers[Other]


# ---- on a GPU ---------------------------------------------------------------------------------

def _data(dt, shape=(5, 7), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    if np.dtype(dt).kind in "iu":
        return x.astype(np.int64).astype(dt)
    if np.dtype(dt).kind == "b":
        return x > 0
    return x.astype(np.float32).astype(dt)


@needs_gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.int32, np.uint8, np.bool_,
                                ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.complex64])
def test_round_trip_keeps_the_bits(dt):
    x = _data(dt) if np.dtype(dt).kind != "c" else (_data(np.float32) + 1j).astype(dt)
    g = st.device_put(x, "cuda")
    assert g.device == GPUS[0] and g.devices() == {GPUS[0]} and g.dtype == np.dtype(dt)
    assert g.shape == x.shape and g.nbytes == x.nbytes
    back = np.asarray(g)
    assert back.dtype == x.dtype
    np.testing.assert_array_equal(back.view(np.uint8), x.view(np.uint8))
    assert "device=CUDADevice(id=0)" in repr(g)
    c = g.to_device("cpu")
    assert c.device.platform == "cpu" and type(c) is st.Array
    np.testing.assert_array_equal(np.asarray(c).view(np.uint8), x.view(np.uint8))
    assert g.block_until_ready() is g


@needs_gpu
def test_creation_on_the_gpu_and_scalars():
    z = snp.zeros((3, 4), dtype=np.float32, device="cuda")
    assert z.device.platform == "cuda"
    np.testing.assert_array_equal(np.asarray(z), np.zeros((3, 4), np.float32))
    g = st.device_put(np.array([2.5], np.float32), GPUS[0])
    assert float(g[0]) == 2.5 and g.item() == 2.5 and bool(g > 2) and g.tolist() == [2.5]


@needs_gpu
@pytest.mark.parametrize("dt", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_eager_elementwise_chain_matches_the_cpu(dt):
    x, y = _data(dt, seed=1), _data(dt, seed=2)

    def f(x, y):
        return snp.tanh(x) * 0.5 + snp.exp(-x * x) * y - snp.maximum(x, y) ** 2

    got = f(st.device_put(x, "cuda"), st.device_put(y, "cuda"))
    assert got.device.platform == "cuda" and got.dtype == np.dtype(dt)
    want = np.asarray(f(snp.asarray(x), snp.asarray(y))).astype(np.float64)
    # libdevice's exp / tanh and the CPU's may differ in the last bit before rounding to dt
    tol = {np.dtype(np.float32): 1e-6}.get(np.dtype(dt), 1e-2)
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=tol,
                               atol=tol * np.abs(want).max())


@needs_gpu
def test_integer_and_bool_ops_are_exact():
    a = np.array([7, -7, 0, 2 ** 31 - 1, -2 ** 31, 5], np.int32)
    b = np.array([2, 2, 0, -1, -1, 0], np.int32)
    ga, gb = st.device_put(a, "cuda"), st.device_put(b, "cuda")
    for fn in (lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x << 3,
               lambda x, y: (x > y) & (x != 0)):
        np.testing.assert_array_equal(np.asarray(fn(ga, gb)),
                                      np.asarray(fn(snp.asarray(a), snp.asarray(b))))


@needs_gpu
def test_reductions_with_nan_ties_and_empty():
    x = np.array([[1.0, np.nan, 3.0], [2.0, 2.0, -1.0], [np.inf, -np.inf, 0.0]], np.float32)
    g = st.device_put(x, "cuda")
    for fn in (lambda v: snp.sum(v, axis=1), lambda v: snp.max(v, axis=0),
               lambda v: snp.argmax(v, axis=1), lambda v: snp.argmin(v, axis=0),
               lambda v: snp.min(v), lambda v: snp.prod(v, axis=1)):
        np.testing.assert_array_equal(np.asarray(fn(g)), np.asarray(fn(snp.asarray(x))))
    e = st.device_put(np.zeros((0, 3), np.float32), "cuda")
    np.testing.assert_array_equal(np.asarray(snp.sum(e, axis=0)), np.zeros(3, np.float32))


@needs_gpu
@pytest.mark.parametrize("dt, shape", [(np.float32, (33, 70, 19)), (ml_dtypes.bfloat16,
                                                                      (256, 512, 128)),
                                       (np.float64, (8, 16, 8))])
def test_matmul_and_epilogue_match_the_cpu(dt, shape):
    m, k, n = shape
    a, b = _data(dt, (m, k), 3), _data(dt, (k, n), 4)
    bias = _data(dt, (n,), 5)

    def f(a, b, c):
        return st.nn.functional.gelu(a @ b + c)
    got = np.asarray(f(*[st.device_put(v, "cuda") for v in (a, b, bias)])).astype(np.float64)
    want = np.asarray(f(*map(snp.asarray, (a, b, bias)))).astype(np.float64)
    tol = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}.get(np.dtype(dt), 2e-2)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@needs_gpu
def test_batched_transposed_matmul():
    q = _data(np.float32, (4, 16, 32), 6)
    k = _data(np.float32, (4, 24, 32), 7)
    got = np.asarray(st.device_put(q, "cuda") @ st.device_put(k, "cuda").transpose(0, 2, 1))
    np.testing.assert_allclose(got, q.astype(np.float64) @ k.transpose(0, 2, 1), rtol=1e-5,
                               atol=1e-4)


@needs_gpu
def test_ops_without_a_gpu_kernel_run_on_the_host_and_stay_on_the_gpu():
    x = _data(np.float32, (50,), 8)
    g = st.device_put(x, "cuda")
    s = snp.sort(g)
    assert s.device.platform == "cuda"
    np.testing.assert_array_equal(np.asarray(s), np.sort(x))
    np.testing.assert_array_equal(np.asarray(g[3:9:2]), x[3:9:2])
    np.testing.assert_array_equal(np.asarray(snp.concatenate([g, g])), np.concatenate([x, x]))


@needs_gpu
def test_committed_devices_do_not_mix_and_default_host_arrays_move():
    g = st.device_put(np.ones(3, np.float32), "cuda")
    other = st.device_put(np.ones(3, np.float32), st.devices()[1])   # a committed CPU device
    with pytest.raises(ValueError, match=r"add: operands on different devices: operand 0 "
                                         r"\(f32\[3\]\) is on CUDADevice\(id=0\), operand 1 "
                                         r"\(f32\[3\]\) on CpuDevice\(id=1\)"):
        g + other
    # arrays made without a device (JAX's uncommitted arrays) are copied to the GPU
    got = g + snp.arange(3.0, dtype=np.float32)
    assert got.device == GPUS[0]
    np.testing.assert_array_equal(np.asarray(got), [1, 2, 3])
    np.testing.assert_array_equal(np.asarray(g * 2), [2, 2, 2])
    with pytest.raises(ValueError, match="backend 'cpp' runs on the host"):
        st.compile(lambda v: v + 1, backend="cpp")(g)
    n = len(st.devices())
    sharded = st.device_put(snp.ones(n), st.sharding.NamedSharding(
        st.sharding.make_mesh((n,), ("x",)), st.sharding.P("x")))
    with pytest.raises(ValueError, match="another is sharded"):
        st.compile(lambda a, b: a.sum() + b.sum())(g, sharded)
    with pytest.raises(ValueError, match="no device 'cuda:-1'"):
        st.device_put(np.ones(2), "cuda:-1")
    assert st.device_put(np.ones(2), "gpu:0").device == GPUS[0]
    with pytest.raises(ValueError, match="copy"):
        np.asarray(g, copy=False)


@needs_gpu
def test_eager_transformations_indexing_and_loops_on_gpu_arrays():
    x = _data(np.float32, (4, 5), 14)
    g = st.device_put(x, "cuda")

    def f(v):
        return snp.sum(snp.tanh(v) ** 2)
    grad = st.grad(f)(g)
    assert grad.device == GPUS[0]
    np.testing.assert_allclose(np.asarray(grad), np.asarray(st.grad(f)(snp.asarray(x))),
                               rtol=1e-5, atol=1e-7)
    idx = np.array([3, 0, 0])
    np.testing.assert_array_equal(np.asarray(g[idx]), x[idx])
    np.testing.assert_array_equal(np.asarray(g[g > 0]), x[x > 0])
    np.testing.assert_array_equal(np.asarray(g.at[:, 0].add(10)),
                                  np.asarray(snp.asarray(x).at[:, 0].add(10)))
    np.testing.assert_array_equal(np.asarray(snp.unique(g)), np.unique(x))
    out = lax.fori_loop(0, 3, lambda i, v: v * 2 + i, g)
    assert out.device == GPUS[0]
    np.testing.assert_allclose(np.asarray(out), x * 8 + 4, rtol=1e-6)


@needs_gpu
def test_donated_gpu_arguments_are_invalidated():
    h = st.device_put(np.ones(4, np.float32), "cuda")
    out = st.compile(lambda v: v * 2, donate_argnums=0)(h)
    np.testing.assert_array_equal(np.asarray(out), [2, 2, 2, 2])
    with pytest.raises(RuntimeError, match="donated"):
        np.asarray(h)


@needs_gpu
def test_gpu_constants_make_a_compiled_function_run_there():
    c = st.device_put(np.arange(3, dtype=np.float32), "cuda")
    f = st.compile(lambda v: v + c)
    out = f(snp.ones(3, dtype=np.float32))
    assert out.device == GPUS[0]
    np.testing.assert_array_equal(np.asarray(out), [1, 2, 3])
    with pytest.raises(ValueError, match="reads an array on CUDADevice"):
        st.compile(lambda v: v + c, backend="cpp")(snp.ones(3, dtype=np.float32))


@needs_gpu
def test_compiled_training_step_on_the_gpu_matches_the_cpu():
    rng = np.random.default_rng(9)
    w1 = (rng.standard_normal((64, 128)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((128, 10)) * 0.1).astype(np.float32)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y = rng.integers(0, 10, 32)

    def loss(params, x, y):
        w1, w2 = params
        h = st.nn.functional.relu(x @ w1)
        logits = h @ w2
        return snp.mean(st.nn.functional.cross_entropy(logits, y))

    @st.compile
    def step(params, x, y):
        l, g = st.value_and_grad(loss)(params, x, y)
        return l, [p - 0.1 * d for p, d in zip(params, g)]

    lc, pc = step([snp.asarray(w1), snp.asarray(w2)], x, y)
    gpu = lambda v: st.device_put(v, "cuda")  # noqa: E731
    lg, pg = step([gpu(w1), gpu(w2)], gpu(x), gpu(y))
    assert lg.device.platform == "cuda" and all(p.device.platform == "cuda" for p in pg)
    np.testing.assert_allclose(float(lg), float(lc), rtol=1e-5)
    for a, b in zip(pg, pc):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


@needs_gpu
def test_control_flow_runs_its_bodies_on_the_gpu():
    x = _data(np.float32, (16,), 10)

    def f(x):
        y = lax.fori_loop(0, 5, lambda i, v: snp.tanh(v) * 1.5 + i, x)
        c, ys = lax.scan(lambda c, v: (c + v * v, c * 2), snp.zeros((), x.dtype), y)
        return lax.cond(c > 0, lambda v: v + 1, lambda v: v - 1, ys), c

    fc = st.compile(f)
    want = fc(x)
    got = fc(st.device_put(x, "cuda"))
    for g, w in zip(got, want):
        assert g.device.platform == "cuda"
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)


@needs_gpu
def test_random_bits_are_the_cpus():
    key = st.random.key(42)
    want = st.random.bits(key, (1000,))
    got = st.compile(lambda k: st.random.bits(k, (1000,)), backend="triton")(
        st.device_put(key, "cuda"))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@needs_gpu
def test_dlpack_both_ways_with_cupy_and_torch():
    import cupy
    x = _data(np.float32, (4, 5), 11)
    g = st.device_put(x, "cuda")
    c = cupy.from_dlpack(g)
    np.testing.assert_array_equal(c.get(), x)
    c[0, 0] = 99.0   # the export is a copy: the Array does not change
    assert np.asarray(g)[0, 0] == x[0, 0]
    back = snp.from_dlpack(cupy.asarray(x) * 2)
    assert back.device.platform == "cuda"
    np.testing.assert_array_equal(np.asarray(back), x * 2)
    with pytest.raises(BufferError, match="bfloat16"):
        st.device_put(x.astype(ml_dtypes.bfloat16), "cuda").__dlpack__()
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(g)
    assert t.is_cuda and np.array_equal(t.cpu().numpy(), x)
    u = snp.from_dlpack(torch.arange(6, device="cuda", dtype=torch.float32))
    assert u.device.platform == "cuda"
    np.testing.assert_array_equal(np.asarray(u), np.arange(6, dtype=np.float32))
    h = snp.from_dlpack(torch.arange(3, device="cuda", dtype=torch.float32), device="cpu")
    assert type(h) is st.Array


@needs_gpu
def test_arrays_on_the_gpu_captured_by_a_compiled_function():
    w = _data(np.float32, (8, 4), 12)
    x = _data(np.float32, (3, 8), 13)
    wg = st.device_put(w, "cuda")
    f = st.compile(lambda x: snp.tanh(x @ wg) + wg[0])
    np.testing.assert_allclose(np.asarray(f(st.device_put(x, "cuda"))),
                               np.tanh(x.astype(np.float64) @ w) + w[0], rtol=1e-5, atol=1e-6)


@needs_gpu
def test_grouped_products_on_the_gpu():
    # ragged_dot's kernel has tiles but no dot_general: it must not be offered to CUTLASS
    x = _data(np.float32, (12, 8), 15)
    w = _data(np.float32, (3, 8, 5), 16)
    sizes = np.array([4, 0, 8], np.int32)
    f = st.compile(lambda x, w, s: lax.ragged_dot(x, w, s))
    got = f(*[st.device_put(v, "cuda") for v in (x, w, sizes)])
    np.testing.assert_allclose(np.asarray(got), np.asarray(f(x, w, sizes)), rtol=1e-5,
                               atol=1e-5)


@needs_gpu
def test_while_scan_and_cond_keep_their_carry_on_the_gpu(caplog):
    import logging
    x = _data(np.float32, (64,), 17)

    def f(x):
        def body(c):
            i, v = c
            return i + 1, lax.cond(i % 2 == 0, lambda u: u * 0.5, lambda u: snp.tanh(u), v)
        v = lax.while_loop(lambda c: c[0] < 7, body, (0, x))[1]
        c, ys = lax.scan(lambda c, u: (c + u * u, c * 2), snp.zeros((), x.dtype), v,
                         reverse=True)
        return ys, c
    fc = st.compile(f)
    cuda._LOGGED_HOST.difference_update({"while", "switch", "scan"})   # logged once per process
    with caplog.at_level(logging.INFO, logger="starling"):
        got = fc(st.device_put(x, "cuda"))
    assert all(g.device == GPUS[0] for g in got)
    assert not any(f"{name} has no GPU kernel" in r.message for r in caplog.records
                   for name in ("while", "switch", "scan"))
    for g, w in zip(got, fc(x)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
