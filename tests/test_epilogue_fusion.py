"""Matmul epilogue fusion on the cpp backend (passes/epilogue.py, fused_matmul.py, cpp/gemm.py).

Every case is compiled twice, each time as ONE shared object for all cases: with the default
GEMM block size, and with tiny blocks (a few rows, so every product runs as many blocks plus a
partial tail block, on the thread pool). Each compiled result is compared with the same
optimised Program run by the NumPy reference interpreter (numpy_ref, whose products are
np.matmul: it shares no code with the native GEMM), and the test checks how many products
became ``fused_matmul`` kernels (every float product the GEMM can run does, with or without
an epilogue; the views feeding a product are read through strides).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import threading

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import tree
from starling.core.ir import Program, eval_program
from starling.lowering import backends, cache
from starling.lowering.backends.cpp import gemm as cpp_gemm
from starling.lowering.runtime import native as runtime_native
from starling.lowering.fused import fused_kernel_p
from starling.lowering.fused_matmul import fused_matmul_p
from starling.lowering.passes.epilogue import epilogue_fusion
from starling.lowering.pipeline import run_pipeline
from starling.nn import functional as Fn
from starling.transforms.stage import make_ir

pytestmark = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    keys = ("STARLING_CACHE_DIR", "STARLING_CPP_STRICT", "STARLING_CPP_EPILOGUE")
    old = {k: os.environ.get(k) for k in keys}
    os.environ["STARLING_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernels"))
    os.environ["STARLING_CPP_STRICT"] = "1"
    os.environ.pop("STARLING_CPP_EPILOGUE", None)
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


RNG = np.random.default_rng(0)


def rand(*shape, dt=np.float32):
    return RNG.standard_normal(shape).astype(dt)


def mlp_loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = snp.maximum(h, 0.0)
    logp = h - snp.log(snp.sum(snp.exp(h - snp.max(h, axis=-1, keepdims=True)), axis=-1,
                                keepdims=True)) - snp.max(h, axis=-1, keepdims=True)
    return -snp.sum(logp * y) / x.shape[0]


def _mlp_grad(w1, b1, w2, b2, x, y):
    return st.grad(mlp_loss)([(w1, b1), (w2, b2)], x, y)


def _softmax(x, w, b):
    h = x @ w + b
    e = snp.exp(h - snp.max(h, axis=-1, keepdims=True))
    return e / snp.sum(e, axis=-1, keepdims=True)


def _attention(qkv, wo):
    """Heads sliced out of a fused projection, QK^T and PV batched over (batch, head), then
    the heads merged for the output projection: every view is read through strides."""
    b, t, d3 = qkv.shape
    d, h = d3 // 3, 2

    def heads(z):
        return snp.transpose(snp.reshape(z, (b, t, h, d // h)), (0, 2, 1, 3))
    q, k, v = heads(qkv[..., :d]), heads(qkv[..., d:2 * d]), heads(qkv[..., 2 * d:])
    s = q @ snp.swapaxes(k, -1, -2) * 0.5
    p = snp.exp(s - snp.max(s, axis=-1, keepdims=True))
    a = (p / snp.sum(p, axis=-1, keepdims=True)) @ v
    return snp.reshape(snp.transpose(a, (0, 2, 1, 3)), (b, t, d)) @ wo


def _scan_body(w, xs):
    def body(c, x):
        return snp.tanh(c @ w + x), snp.sum(c)
    return st.scan(body, xs[0], xs)


NAN_X = rand(33, 20)
NAN_X[3, 4], NAN_X[7, 0], NAN_X[10, 10] = np.nan, np.inf, -np.inf

# name: (function, inputs, number of fused_matmul equations expected; None: any number)
CASES = {
    "bias_relu": (lambda x, w, b: snp.maximum(x @ w + b, 0.0), [rand(37, 50), rand(50, 70),
                                                                rand(70)], 1),
    "tanh": (lambda x, w: snp.tanh(x @ w), [rand(40, 30), rand(30, 64)], 1),
    "gelu_erf": (lambda x, w, b: Fn.gelu(x @ w + b), [rand(41, 16), rand(16, 48), rand(48)], 1),
    "gelu_tanh": (lambda x, w: Fn.gelu(x @ w, approximate="tanh"), [rand(41, 16), rand(16, 48)],
                  1),
    "silu": (lambda x, w: Fn.silu(x @ w), [rand(20, 16), rand(16, 24)], 1),
    "scale": (lambda x, w: (x @ w) * 0.125 + 1.0, [rand(29, 31), rand(31, 33)], 1),
    "lhs_t": (lambda a, w, b: snp.maximum(a.T @ w + b, 0.0), [rand(50, 37), rand(50, 70),
                                                              rand(70)], 1),
    "rhs_t": (lambda x, w, b: snp.maximum(x @ w.T + b, 0.0), [rand(37, 50), rand(70, 50),
                                                              rand(70)], 1),
    "both_t": (lambda a, w: snp.tanh(a.T @ w.T), [rand(50, 37), rand(70, 50)], 1),
    "perm3d": (lambda x, w: snp.tanh(snp.transpose(x, (1, 0, 2)) @ w),
               [rand(4, 3, 12), rand(12, 10)], 1),
    "contract_t3d": (lambda x, w: snp.tanh(snp.einsum("kbt,kn->btn", x, w)),
                     [rand(12, 3, 4), rand(12, 10)], 1),
    "float64": (lambda x, w, b: snp.maximum(x @ w + b, 0.0),
                [rand(37, 50, dt=np.float64), rand(50, 70, dt=np.float64),
                 rand(70, dt=np.float64)], 1),
    "float64_lhs_t": (lambda a, w: snp.exp(a.T @ w * 0.1),
                      [rand(19, 23, dt=np.float64), rand(19, 45, dt=np.float64)], 1),
    "softmax": (_softmax, [rand(45, 20), rand(20, 30), rand(30)], None),
    "row_sum": (lambda x, w: snp.sum(snp.maximum(x @ w, 0.0), axis=-1),
                [rand(50, 9), rand(9, 40)], 1),
    "emit_dot": (lambda x, w, b: (snp.maximum(x @ w + b, 0.0), x @ w),
                 [rand(37, 50), rand(50, 70), rand(70)], 1),
    "emit_dot_used_later": (lambda x, w: (lambda d: (snp.tanh(d) * 2.0, d.T @ x))(x @ w),
                            [rand(36, 12), rand(12, 36)], None),
    # another reader of the product comes before the group: the fused equation takes the
    # product's place
    "emit_dot_used_before": (lambda x, w, b: (snp.sort(x @ w, axis=-1),
                                              snp.maximum(x @ w + b, 0.0)),
                             [rand(21, 8), rand(8, 19), rand(19)], 1),
    "cast_bool": (lambda x, w: ((x @ w) > 0.0).astype(snp.float32) + (x @ w > 1.0),
                  [rand(21, 8), rand(8, 19)], 1),
    "cast_f64": (lambda x, w: (x @ w).astype(snp.float64) * 3.0, [rand(21, 8), rand(8, 19)], 1),
    "residual": (lambda x, w, b: snp.maximum(x @ w + b, 0.0) + x, [rand(40, 40), rand(40, 40),
                                                                   rand(40)], 1),
    "same_operand": (lambda x: x @ x.T + 1.0, [rand(30, 17)], 1),
    # the first product takes the group; the second is a GEMM kernel of its own
    "two_products": (lambda x, w1, y, w2: snp.tanh(x @ w1 + y @ w2),
                     [rand(22, 13), rand(13, 18), rand(22, 7), rand(7, 18)], 2),
    "batch_rows": (lambda x, w, b: snp.maximum(x @ w + b, 0.0), [rand(3, 17, 12), rand(12, 20),
                                                                 rand(20)], 1),
    "vec_mat": (lambda v, w: snp.tanh(v @ w), [rand(12), rand(12, 33)], 1),
    "mat_vec": (lambda w, v: snp.tanh(w @ v), [rand(33, 12), rand(12)], 1),
    "m1": (lambda x, w, b: snp.maximum(x @ w + b, 0.0), [rand(1, 50), rand(50, 70), rand(70)], 1),
    "m257": (lambda x, w, b: snp.maximum(x @ w + b, 0.0), [rand(257, 5), rand(5, 70), rand(70)],
             1),
    "n1": (lambda x, w, b: snp.maximum(x @ w + b, 0.0), [rand(37, 50), rand(50, 1), rand(1)], 1),
    # K = 1 may become an outer product (simplify) before the backend sees it
    "k1": (lambda x, w, b: snp.maximum(x @ w + b, 0.0), [rand(37, 1), rand(1, 70), rand(70)],
           None),
    "m0": (lambda x, w, b: snp.maximum(x @ w + b, 0.0), [rand(0, 5), rand(5, 7), rand(7)], 0),
    "n0": (lambda x, w: snp.tanh(x @ w), [rand(4, 5), rand(5, 0)], 0),
    "k0": (lambda x, w, b: snp.maximum(x @ w + b, 0.0), [rand(4, 0), rand(0, 7), rand(7)], 0),
    "nan_inf": (lambda x, w, b: snp.maximum(x @ w + b, 0.0) * 2.0, [NAN_X, rand(20, 24),
                                                                    rand(24)], 1),
    # The epilogue must NOT fuse: the product is read transposed (as well as directly): the
    # product is a kernel of its own. Integer products stay np.matmul.
    "transposed_read": (lambda x, w, c: (lambda d: snp.maximum(d.T * 2.0 + d + c, 0.0))(x @ w),
                        [rand(24, 10), rand(10, 24), rand(24, 24)], 1),
    "int_product": (lambda x, w: (x @ w) * 2, [np.arange(12, dtype=np.int32).reshape(3, 4),
                                                np.arange(20, dtype=np.int32).reshape(4, 5)], 0),
    # Column reductions fuse only when the product is one block (see test_column_reduction).
    "column_sum": (lambda x, w, b: snp.sum(snp.maximum(x @ w + b, 0.0), axis=0),
                   [rand(64, 9), rand(9, 40), rand(40)], None),
    "mlp_grad": (_mlp_grad, [rand(16, 24) * 0.3, rand(24) * 0.1, rand(24, 10) * 0.3,
                             rand(10) * 0.1, rand(32, 16), np.eye(10, dtype=np.float32)[
                                 RNG.integers(0, 10, 32)]], None),
    "scan": (_scan_body, [rand(6, 6) * 0.5, rand(5, 4, 6)], None),
    "vmap": (lambda x, w: st.vmap(lambda r: snp.tanh(r @ w))(x), [rand(11, 9), rand(9, 14)], 1),
    # batched and N-d products, alone or with an epilogue
    "bmm": (lambda a, b: a @ b, [rand(7, 5, 9), rand(7, 9, 6)], 1),
    "bmm_epilogue": (lambda a, b, c: snp.tanh(a @ b + c), [rand(4, 33, 17), rand(4, 17, 21),
                                                           rand(21)], 1),
    "bmm_t": (lambda a, b: snp.swapaxes(a, -1, -2) @ snp.swapaxes(b, -1, -2),
              [rand(3, 2, 9, 5), rand(3, 2, 6, 9)], 1),
    "bmm_broadcast": (lambda a, b: a @ b, [rand(3, 1, 4, 5), rand(1, 6, 5, 7)], None),
    "tiny_bmm": (lambda a, b: a @ b, [rand(300, 16, 16), rand(300, 16, 16)], 1),
    # weight gradients: contraction over the leading (batch, time) dims, one GEMM
    "weight_grad": (lambda x, g: snp.einsum("btd,btf->df", x, g), [rand(3, 11, 7), rand(3, 11, 13)],
                    1),
    "weight_grad_f64": (lambda x, g: snp.einsum("btd,btf->fd", x, g),
                        [rand(2, 9, 5, dt=np.float64), rand(2, 9, 4, dt=np.float64)], 1),
    # several contracting dims, folded in memory order
    "contract2": (lambda x, w: snp.einsum("bhd,hdn->bn", x, w), [rand(6, 3, 4), rand(3, 4, 5)],
                  1),
    # ... unless the pairs' strides chain in neither order (each operand wants the other order):
    # that contraction needs a copy; it stays dot_general (np.matmul)
    "contract2_swapped": (lambda x, w: snp.einsum("bdh,hdn->bn", x, w),
                          [rand(6, 4, 3), rand(3, 4, 5)], 0),
    # ... and the same pairs on a transposed view whose strides chain when taken (h, d)
    "contract2_transposed": (lambda x, w: snp.einsum("bdh,hdn->bn", snp.swapaxes(x, 1, 2), w),
                             [rand(6, 3, 4), rand(3, 4, 5)], 1),
    "sliced_operand": (lambda x, w: x[:, 3:11] @ w[::2], [rand(20, 14), rand(16, 9)], 1),
    "attention": (_attention, [rand(2, 10, 12), rand(4, 5)], None),
    "vmap_bmm_epilogue": (lambda a, b: st.vmap(lambda p, q: snp.maximum(p @ q, 0.0))(a, b),
                          [rand(5, 12, 8), rand(5, 8, 10)], 1),
}


def _count(prog, prim=fused_matmul_p):
    n = 0
    for e in prog.eqns:
        n += e.primitive is prim
        for p in e.params.values():
            if isinstance(p, Program) and e.primitive is not fused_matmul_p:
                n += _count(p, prim)
            elif isinstance(p, tuple) and p and all(isinstance(q, Program) for q in p):
                n += sum(_count(q, prim) for q in p)
    return n


def _compile_all():
    progs, refs, args = [], [], []
    for f, arrays in ((f, a) for f, a, _ in CASES.values()):
        xs = [snp.asarray(a) for a in arrays]
        prog = run_pipeline(make_ir(f)(*xs))
        progs.append(prog)
        refs.append(eval_program(prog, prog.consts, *xs))
        args.append(xs)
    exes = backends.get_backend("cpp").compile_many(progs)
    return {name: (exe, ref, xs) for name, exe, ref, xs in zip(CASES, exes, refs, args)}


@pytest.fixture(scope="module")
def compiled(_cache_dir):
    return _compile_all()


@contextlib.contextmanager
def tiny_blocks():
    """Blocks of ~2 KiB (a few rows each), whatever the size of the product."""
    names = ("BLOCKED_BYTES", "BLOCK_BYTES", "MIN_ROWS", "PARALLEL_WORK")
    old = [getattr(cpp_gemm, n) for n in names]
    for n, v in zip(names, (0, 2048, 1, 0)):
        setattr(cpp_gemm, n, v)
    try:
        yield
    finally:
        for n, v in zip(names, old):
            setattr(cpp_gemm, n, v)


@pytest.fixture(scope="module")
def compiled_tiny(_cache_dir):
    """Everything compiled with tiny blocks."""
    with tiny_blocks():
        return _compile_all()


def assert_close(got, want):
    got_l, want_l = tree.leaves(got), tree.leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
            continue
        # The GEMM sums in another order than np.matmul: float32 ulps of the products.
        tol = 1e-12 if g.dtype == np.float64 else 2e-5
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                                   atol=tol, equal_nan=True)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("blocks", ["default", "tiny"])
def test_fused_matches_numpy_ref(name, blocks, request):
    exe, ref, xs = request.getfixturevalue("compiled" if blocks == "default" else
                                           "compiled_tiny")[name]
    assert_close(exe(None, xs), ref)
    want = CASES[name][2]
    if want is not None:
        assert _count(exe.program) == want, exe.program


def test_expected_fusions_fire(compiled, compiled_tiny):
    # the cases marked "any number" still fuse something where they should
    for name in ("softmax", "emit_dot_used_later", "mlp_grad", "scan", "attention",
                 "bmm_broadcast"):
        assert _count(compiled[name][0].program) >= 1, name
    # a scan body's product + tanh are fused inside the body
    assert _count(compiled["scan"][0].program) == 1


def test_column_reduction(compiled, compiled_tiny):
    # the column sum needs every row: the product is one block (computed on the pool), then
    # the epilogue with the column sum, whatever the block size
    for c in (compiled, compiled_tiny):
        assert _count(c["column_sum"][0].program) == 1
    with tiny_blocks():
        (src,) = _kernel_sources(compiled_tiny["column_sum"][0])
    assert "st_par(" not in src.split('extern "C" void k(')[1]


def test_mlp_grad_all_products_fused(compiled):
    # every product is a GEMM kernel: those feeding a group with it, the weight gradients
    # returned as they are on their own
    prog = compiled["mlp_grad"][0].program
    assert not any(e.primitive.name == "dot_general" for e in prog.eqns), prog
    assert _count(prog) == 5, prog


def test_emit_dot_is_written(compiled_tiny):
    exe, ref, xs = compiled_tiny["emit_dot"]
    eq = [e for e in exe.program.eqns if e.primitive is fused_matmul_p]
    assert len(eq) == 1 and len(eq[0].outvars) == 2
    x, w, b = (np.asarray(a._buf) for a in xs)
    relu, d = exe(None, xs)
    np.testing.assert_allclose(np.asarray(d), x @ w, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(relu), np.maximum(x @ w + b, 0), rtol=2e-5,
                               atol=2e-5)


def _kernel_sources(exe):
    """The C++ of each fused_matmul of an executable (its library holds every case's)."""
    return [cpp_gemm.render(e.params["program"], "k").source for e in exe.program.eqns
            if e.primitive is fused_matmul_p]


def _descs(exe):
    import re
    return [tuple(int(v) for v in m.split(",")) for src in _kernel_sources(exe) for m in
            re.findall(r"st_desc\[\] = \{([^}]*)\}", src)]


def test_views_become_strides(compiled):
    """Transposes (also ones reordering free dims), slices and reshapes feeding a product are
    read in place through the GEMM descriptor: nothing but the kernel is left."""
    for name in ("lhs_t", "rhs_t", "both_t", "perm3d", "contract_t3d", "bmm_t",
                 "sliced_operand", "contract2_transposed", "weight_grad"):
        prog = compiled[name][0].program
        assert [e.primitive for e in prog.eqns] == [fused_matmul_p], (name, prog)
    # a.T @ w with a (50, 37): rows of A are its columns (stride 1), the contraction its rows
    (desc,) = _descs(compiled["lhs_t"][0])
    assert desc[:8] == (37, 70, 50, 1, 37, 70, 1, 0), desc
    # x @ w.T with w (70, 50): B's columns are w's rows
    (desc,) = _descs(compiled["rhs_t"][0])
    assert desc[:8] == (37, 70, 50, 50, 1, 1, 50, 0), desc
    # x[:, 3:11] @ w[::2]: an offset of 3 elements into x, every other row of w
    (src,) = _kernel_sources(compiled["sliced_operand"][0])
    (desc,) = _descs(compiled["sliced_operand"][0])
    assert desc[:8] == (20, 9, 8, 14, 1, 18, 1, 0) and "st_args[0] + 3;" in src, desc
    # the weight gradient sums over (batch, time) folded into one contraction of 33
    (desc,) = _descs(compiled["weight_grad"][0])
    assert desc[:8] == (7, 13, 33, 1, 7, 13, 1, 0), desc
    # the attention heads: no transpose, reshape or slice is materialised for a product
    prog = compiled["attention"][0].program
    for e in prog.eqns:
        if e.primitive.name in ("transpose", "slice"):
            assert all(u.primitive is not fused_matmul_p for u in prog.eqns
                       if e.outvars[0] in u.invars), prog


def test_batched_products_are_one_call(compiled):
    # (7, 5, 9) @ (7, 9, 6): one descriptor with a loop of 7 over the batch
    (desc,) = _descs(compiled["bmm"][0])
    assert desc == (5, 6, 9, 9, 1, 6, 1, 1, 7, 45, 54), desc
    exe, _, xs = compiled["tiny_bmm"]
    a, b = (np.asarray(x._buf).astype(np.float64) for x in xs)
    np.testing.assert_allclose(np.asarray(exe(None, xs)[0]), a @ b, rtol=1e-5, atol=1e-5)


def test_independent_reference_bias_relu(compiled):
    exe, _, xs = compiled["lhs_t"]
    a, w, b = (np.asarray(x._buf).astype(np.float64) for x in xs)
    got = np.asarray(exe(None, xs)[0])
    np.testing.assert_allclose(got, np.maximum(a.T @ w + b, 0), rtol=1e-4, atol=1e-4)


def test_source_runs_blocks_on_the_pool(compiled_tiny):
    with tiny_blocks():
        (src,) = _kernel_sources(compiled_tiny["bias_relu"][0])
    assert "st_runtime_init" in compiled_tiny["bias_relu"][0].source
    assert "st_gemm(st_desc" in src and "_tail(st_e, st_r0)" in src and "st_par(" in src
    assert "omp parallel" not in src


def test_loop_fallback_without_runtime(compiled_tiny):
    """A library whose runtime entry points were never set runs serially, its products
    through plain loops, with the same results."""
    for name in ("lhs_t", "bmm_epilogue", "weight_grad_f64"):
        exe, ref, xs = compiled_tiny[name]
        lib = ctypes.CDLL(exe.library_path)
        lib.st_runtime_init.argtypes = [ctypes.c_void_p] * 4
        lib.st_runtime_init(None, None, None, None)
        try:
            assert_close(exe(None, xs), ref)
        finally:
            runtime_native.init_library(lib)
        assert_close(exe(None, xs), ref)


def test_threads_share_a_kernel(monkeypatch):
    """Scratch blocks are per thread: concurrent calls (GIL released) stay correct."""
    monkeypatch.setattr(cpp_gemm, "BLOCK_BYTES", 64 << 10)   # 18 rows: 17 blocks per call
    monkeypatch.setattr(cpp_gemm, "MIN_ROWS", 1)
    monkeypatch.setattr(cpp_gemm, "PARALLEL_WORK", 0)
    monkeypatch.setattr(cpp_gemm, "BLOCKED_BYTES", 0)
    x, w, b = rand(300, 64), rand(64, 900), rand(900)
    st_f = st.compile(lambda x, w, b: snp.maximum(x @ w + b, 0.0), backend="cpp")
    args = [snp.asarray(a) for a in (x, w, b)]
    want = np.maximum(x.astype(np.float64) @ w + b, 0)
    assert _count(st_f.lower(*args).executable.program) == 1
    errors = []

    def work():
        for _ in range(5):
            got = np.asarray(st_f(*args))
            if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                errors.append(float(np.abs(got - want).max()))
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_disabled_by_env(monkeypatch):
    f = lambda x, w, b: snp.maximum(x @ w + b, 0.0)  # noqa: E731
    xs = [snp.asarray(a) for a in (rand(9, 5), rand(5, 6), rand(6))]
    prog = run_pipeline(make_ir(f)(*xs))
    ref = eval_program(prog, prog.consts, *xs)
    monkeypatch.setenv("STARLING_CPP_EPILOGUE", "0")
    exe = backends.get_backend("cpp").compile(prog)
    assert _count(exe.program) == 0 and _count(exe.program, fused_kernel_p) == 1
    assert_close(exe(None, xs), ref)


def test_fused_program_runs_on_numpy_ref_and_transforms(compiled):
    """fused_matmul's impl / JVP / batching rules (those of fused_kernel on its sub-Program)."""
    exe, ref, xs = compiled["bias_relu"]
    prog = exe.program
    assert_close(eval_program(prog, prog.consts, *xs), ref)

    def f(x):
        return snp.sum(eval_program(prog, prog.consts, x, *xs[1:])[0])

    def g(x):
        return snp.sum(snp.maximum(x @ xs[1] + xs[2], 0.0))
    np.testing.assert_allclose(np.asarray(st.grad(f)(xs[0])), np.asarray(st.grad(g)(xs[0])),
                               rtol=1e-5, atol=1e-5)
    batch = snp.stack([xs[0], xs[0] * 2.0])
    got = st.vmap(lambda x: eval_program(prog, prog.consts, x, *xs[1:])[0])(batch)
    want = st.vmap(lambda x: snp.maximum(x @ xs[1] + xs[2], 0.0))(batch)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_pass_placement_and_refusal():
    """The pass keeps dependency order and leaves the Program alone when validate refuses."""
    f = lambda x, w, b: (lambda d: (snp.maximum(d + b, 0.0), snp.sum(d)))(x @ w)  # noqa: E731
    xs = [snp.asarray(a) for a in (rand(9, 5), rand(5, 6), rand(6))]
    from starling.lowering.backends.cpp import CppPolicy, cpp_passes
    policy = CppPolicy()
    passes = [p for p in cpp_passes(policy) if p[0] in ("complex_decompose", "fusion")]
    prog = run_pipeline(run_pipeline(make_ir(f)(*xs)), passes=passes)
    assert epilogue_fusion(prog, lambda p: False) is prog
    assert epilogue_fusion(prog, None) is prog
    fused = epilogue_fusion(prog, lambda p: True)
    assert _count(fused) == 1
    from starling.core.ir import check_program
    check_program(fused)
    assert_close(eval_program(fused, fused.consts, *xs), eval_program(prog, prog.consts, *xs))


def test_block_rows(monkeypatch):
    """Blocks hold at most BLOCK_BYTES, number about 2 per pool thread when the product is
    worth threads, have MIN_ROWS rows at least and are whole micro-tiles (multiples of 8 rows);
    an epilogue reducing over rows, or a small product, gets one block."""
    monkeypatch.setattr(cpp_gemm, "BLOCK_BYTES", 4096 * 4)
    monkeypatch.setattr(cpp_gemm, "BLOCKED_BYTES", 0)
    monkeypatch.setattr(cpp_gemm, "PARALLEL_WORK", 1 << 10)
    monkeypatch.setattr(cpp_gemm, "MIN_ROWS", 8)
    monkeypatch.setattr(cpp_gemm._threads, "pool_size", lambda: 2)

    def plan(R, N, K=64, dt=np.float32):
        return cpp_gemm.GemmPlan(np.dtype(dt), (), (0, 0), R, N, K, 1, (R, N))
    assert cpp_gemm.block_rows(plan(16, 256), True) == 16            # reduces rows: one block
    assert cpp_gemm.block_rows(plan(4, 4, 4), False) == 4            # too small for threads
    assert cpp_gemm.block_rows(plan(512, 256), False) == 16          # 16 KiB blocks
    assert cpp_gemm.block_rows(plan(256, 16), False) == 64           # 4 blocks (2 x 2 threads)
    assert cpp_gemm.block_rows(plan(100, 16), False) == 32           # 25 -> a multiple of 8
    assert cpp_gemm.block_rows(plan(100, 128, dt=np.float64), False) == 16
    assert cpp_gemm.block_rows(plan(100, 4096), False) == 8          # at least MIN_ROWS
    monkeypatch.setattr(cpp_gemm, "MIN_ROWS", 64)
    assert cpp_gemm.block_rows(plan(100, 4096), False) == 64
    assert cpp_gemm.block_rows(plan(60, 4096), False) == 60          # one block
    monkeypatch.setattr(cpp_gemm, "BLOCKED_BYTES", 1 << 20)
    assert cpp_gemm.block_rows(plan(256, 1024), False) == 256        # 1 MiB: one block
    assert cpp_gemm.block_rows(plan(257, 1024), False) == 64


def test_epilogue_threads_only_with_one_block(monkeypatch):
    """The epilogue uses the pool itself when the product is one block (and the work is large);
    with several blocks the pool runs the blocks and each epilogue stays on its thread."""
    from starling.lowering.backends.cpp import codegen as cpp_codegen
    from starling.lowering.backends.cpp import CppPolicy, cpp_passes
    f = lambda x, w, b: snp.tanh(x @ w + b)  # noqa: E731
    xs = [snp.asarray(a) for a in (rand(300, 64), rand(64, 900), rand(900))]
    passes = [p for p in cpp_passes(CppPolicy()) if p[0] in ("fusion", "epilogue")]
    prog = run_pipeline(run_pipeline(make_ir(f)(*xs)), passes=passes)
    (eqn,) = [e for e in prog.eqns if e.primitive is fused_matmul_p]
    monkeypatch.setattr(cpp_codegen, "PARALLEL_WORK", 1)
    monkeypatch.setattr(cpp_gemm, "PARALLEL_WORK", 1 << 40)
    one = cpp_gemm.render(eqn.params["program"], "k").source
    epilogue, driver = one.split('extern "C" void k(')
    assert "st_par(" in epilogue and "_tail" not in one and "st_par(" not in driver
    monkeypatch.setattr(cpp_gemm, "PARALLEL_WORK", 0)
    monkeypatch.setattr(cpp_gemm, "BLOCKED_BYTES", 0)
    monkeypatch.setattr(cpp_gemm, "BLOCK_BYTES", 64 << 10)
    several = cpp_gemm.render(eqn.params["program"], "k").source
    epilogue, driver = several.split('extern "C" void k(')
    assert "st_par(" not in epilogue and "st_par(" in driver and "k_tail(st_e, st_r0)" in driver


def test_refused_fused_matmul_is_inlined(compiled):
    """A fused_matmul the backend cannot render (re-validated by the pass) becomes its plain
    product and epilogue equations again."""
    exe, ref, xs = compiled["emit_dot"]
    prog = exe.program
    assert _count(prog) == 1
    plain = epilogue_fusion(prog, lambda p: False)
    assert _count(plain) == 0
    assert [e.primitive.name for e in plain.eqns][0] == "dot_general"
    from starling.core.ir import check_program
    check_program(plain)
    assert_close(eval_program(plain, plain.consts, *xs), ref)
    assert epilogue_fusion(prog, lambda p: True) is prog


def test_results_do_not_depend_on_the_thread_count(monkeypatch):
    """A compiled step with blocked products and epilogues (forward), column sums of a product
    (bias gradient), a weight-gradient contraction over (batch, time) and a full sum, each
    compiled afresh and run with 1, 2 and 3 pool threads (the blocks, GEMM tiles and reduction
    chunks then differ; small thresholds make every part parallel): bit-identical results,
    close to float64 NumPy."""
    from starling.lowering.backends.cpp import codegen as cpp_codegen
    from starling.lowering.runtime import threads as _threads
    for name, value in (("BLOCKED_BYTES", 0), ("BLOCK_BYTES", 16 << 10), ("PARALLEL_WORK", 0),
                        ("MIN_ROWS", 8)):
        monkeypatch.setattr(cpp_gemm, name, value)
    monkeypatch.setattr(cpp_codegen, "PARALLEL_WORK", 0)
    monkeypatch.setattr(cpp_codegen, "CHUNK_WORK", 1 << 10)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 96, 200)).astype(np.float32)
    w = (rng.standard_normal((200, 300)) * 0.1).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)

    def step(x, w, b):
        h = snp.tanh(x @ w + b)                        # (4, 96, 300)
        gb = h.sum(axis=(0, 1))                        # column sums
        gw = snp.einsum("btd,bth->dh", x, h)           # contraction over (b, t)
        return h, gb, gw, (h * h).sum()

    args = [snp.asarray(a) for a in (x, w, b)]
    old = _threads.pool_size()
    outs = []
    try:
        for n in (1, 2, 3):
            _threads.set_pool_size(n)
            f = st.compile(lambda x, w, b: step(x, w, b), backend="cpp")
            outs.append([np.asarray(o) for o in f(*args)])
    finally:
        _threads.set_pool_size(old)
    for o in outs[1:]:
        for got, want in zip(o, outs[0]):
            np.testing.assert_array_equal(got, want)
    h = np.tanh(x.astype(np.float64) @ w + b)
    ref = [h, h.sum(axis=(0, 1)), np.einsum("btd,bth->dh", x.astype(np.float64), h),
           (h * h).sum()]
    for got, want in zip(outs[0], ref):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())
