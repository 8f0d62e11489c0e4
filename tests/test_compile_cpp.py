"""The cpp backend: compiled (fused C++ kernels) equals eager / numpy_ref.

Generated from the OpInfo registry (one regular and the edge-value samples per op and dtype,
compiled as one shared object per dtype), plus programs from
grad / vmap / switch / while_loop / scan, complex programs, NaN / inf / -0.0 and integer edge
cases, fallbacks (unsupported dtypes, no compiler). Kernels go to a temporary cache directory.
"""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import tree
from starling.lowering import backends, cache
from starling.lowering.backends.cpp import backend as cpp_backend
from starling.lowering.fused import fused_kernel_p
from starling.core.ir import eval_program
from starling.lowering.pipeline import run_pipeline
from starling.transforms.stage import make_ir
from tests import exact_casts
from tests.opinfo import REGISTRY, resolve
import tests.opinfo.families  # noqa: F401

pytestmark = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(cpp_kernel_env):
    yield


def cpp(f, **kw):
    return st.compile(f, backend="cpp", **kw)


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    got_l, want_l = tree.leaves(got), tree.leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            kind = np.complex128 if g.dtype.kind == "c" else np.float64
            np.testing.assert_allclose(g.astype(kind), w.astype(kind), rtol=rtol, atol=atol,
                                       equal_nan=True)


# ---- generated: every OpInfo ---------------------------------------------------------------------

DTYPES = {"float32", "float64", "int32", "int64", "int8", "uint8", "bool", "complex64",
          "complex128", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"}
LOWP_DTYPES = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn")


def _pick_samples(samples):
    """The largest regular sample and the edge-value ones (NaN / inf / -0.0 / extremes)."""
    is_edge = [("edge" in s.name or "nan" in s.name.lower()) for s in samples]
    regular = [s for s, e in zip(samples, is_edge) if not e]
    edges = [s for s, e in zip(samples, is_edge) if e]
    size = lambda s: sum(np.size(a) for a in s.args if isinstance(a, np.ndarray))  # noqa: E731
    out = sorted(regular, key=size)[-1:] + edges[:2]
    empty = [s for s in regular if 0 < len(s.args) and size(s) == 0]
    return out + empty[:1]


def _cases():
    rng = np.random.default_rng(0)
    cases = []
    for info in REGISTRY:
        if info.eager_only:
            continue
        for dt in info.dtypes:
            dt = np.dtype(dt)
            if dt.name not in DTYPES:
                continue
            try:
                samples = info.samples(rng, dt)
            except Exception:  # noqa: BLE001  (sample builders of other families)
                continue
            for s in _pick_samples(samples):
                if any(isinstance(a, np.ndarray) for a in s.args):
                    cases.append((info, dt, s))
    return cases


CASES = _cases()

# The sweep is one test class per dtype, each compiling its kernels as one shared object (the
# whole sweep is about 40 s of g++ on one core). pytest-xdist runs with --dist loadscope
# (pyproject.toml), which sends each class to one worker: every kernel is compiled once and the
# workers share the classes (with --dist load, each worker compiled the whole sweep).
SWEEP_DTYPES = sorted({dt.name for _, dt, _ in CASES})


def _staged(info, sample):
    op = resolve(info.name)
    pos = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]

    def f(*arrays):
        args = list(sample.args)
        for i, a in zip(pos, arrays):
            args[i] = a
        return op(*args, **sample.kwargs)
    arrays = [snp.asarray(sample.args[i]) for i in pos]
    return f, arrays


def _compile_cases(indices):
    """index -> (numpy_ref result, compiled result or exception, executable), or None where the
    op rejects the sample; one compiler run for all ``indices``. The reference is the same
    optimised Program run by numpy_ref (eager vs staged is test_ops_generated's business)."""
    progs, meta = [], {}
    for index in indices:
        info, dt, sample = CASES[index]
        f, arrays = _staged(info, sample)
        try:
            f(*arrays)
            prog = run_pipeline(make_ir(f)(*arrays))
            eager = eval_program(prog, prog.consts, *arrays)
        except Exception:  # noqa: BLE001  (the op rejects this sample: nothing to compare)
            meta[index] = None
            continue
        progs.append(prog)
        meta[index] = (eager, prog, arrays)
    exes = backends.get_backend("cpp").compile_many(progs)
    by_prog = {id(p): e for p, e in zip(progs, exes)}
    results = {}
    for index, m in meta.items():
        if m is None:
            results[index] = None
            continue
        eager, prog, arrays = m
        exe = by_prog[id(prog)]
        try:
            got = exe(prog.consts, arrays)
        except Exception as e:  # noqa: BLE001  (reported by the test)
            got = e
        results[index] = (eager, got, exe)
    return results


def _indices(dtype_name):
    return [i for i, (_, dt, _) in enumerate(CASES) if dt.name == dtype_name]


def pytest_generate_tests(metafunc):
    if metafunc.cls is not None and issubclass(metafunc.cls, _Sweep) \
            and "index" in metafunc.fixturenames:
        indices = _indices(metafunc.cls.DTYPE)
        metafunc.parametrize("index", indices, ids=[
            f"{CASES[i][0].name}-{CASES[i][1].name}-{CASES[i][2].name}" for i in indices])


@pytest.fixture(scope="class")
def compiled(request, _cache_dir):
    """``_compile_cases`` of the sweep class's dtype: one compiler run per class."""
    return _compile_cases(_indices(request.cls.DTYPE))


@pytest.mark.slow
class _Sweep:
    """The generated sweep over the cases of one dtype ``DTYPE``."""
    DTYPE = None

    def test_opinfo_compiled_matches_numpy_ref(self, index, compiled):
        info, dt, sample = CASES[index]
        res = compiled[index]
        if res is None:
            pytest.skip("the op rejects this sample")
        eager, got, exe = res
        if isinstance(got, Exception):
            raise got
        rtol, atol = info.tol(dt)
        if dt.kind in "fc" and dt.itemsize <= 8 and dt != np.float64:
            rtol = max(rtol, 2e-5)   # vector math (libmvec) is within 4 ulp
        eager_l = tree.leaves(eager)
        assert len(got) == len(eager_l)
        for g, e in zip(got, eager_l):
            assert g.shape == e.shape and g.dtype == e.dtype, (info.name, sample.name)
            g, e = np.asarray(g), np.asarray(e)
            if g.dtype.kind in "biu":
                np.testing.assert_array_equal(g, e, err_msg=f"{info.name}{sample.name}")
            else:
                kind = np.complex128 if g.dtype.kind == "c" else np.float64
                np.testing.assert_allclose(g.astype(kind), e.astype(kind), rtol=rtol, atol=atol,
                                           equal_nan=True, err_msg=f"{info.name}{sample.name}")

    def test_generated_sweep_really_runs_native_kernels(self, compiled):
        native = [r for r in compiled.values() if r is not None
                  and not isinstance(r[1], Exception)
                  and isinstance(r[2], cpp_backend.CppExecutable)
                  and any(e.primitive is fused_kernel_p for e in r[2].program.eqns)]
        assert len(native) > len(compiled) // 3


class _LowpSweep(_Sweep):
    """The sweep of a low-precision float dtype: also checks that its ops really are fused."""

    def test_generated_sweep_fuses_low_precision_floats(self, compiled):
        # float16 / bfloat16 / float8 / float4 run in the kernels (cpp/lowp.py): the policy
        # turns down only the ops defined on the formats' bit patterns (spacing, nextafter)
        policy = cpp_backend.CppPolicy()
        refused, native, total = set(), 0, 0
        for r in compiled.values():
            if r is None or isinstance(r[1], Exception):
                continue
            total += 1
            eqns = r[2].program.eqns
            native += any(e.primitive is fused_kernel_p for e in eqns)
            for e in eqns:
                if (e.primitive.scalar_formula is not None and policy.kind(e) is None
                        and any(np.dtype(v.aval.dtype).name in LOWP_DTYPES for v in e.invars)):
                    refused.add(e.primitive.name)
        assert refused <= {"spacing", "nextafter"}, refused
        assert native > total // 2, (native, total)


for _name in SWEEP_DTYPES:
    _base = _LowpSweep if _name in LOWP_DTYPES else _Sweep
    globals()[f"TestSweep_{_name}"] = type(f"TestSweep_{_name}", (_base,), {"DTYPE": _name})


# ---- programs from transformations ---------------------------------------------------------------

def _mlp_loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = snp.maximum(h, 0.0)
    logp = h - snp.logsumexp(h, axis=-1, keepdims=True)
    return -snp.sum(logp * y) / x.shape[0]


def _mlp_data(sizes=(12, 16, 16, 4), batch=8):
    rng = np.random.default_rng(0)
    params = [(snp.asarray((rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32)),
               snp.asarray(rng.normal(size=n).astype(np.float32) * 0.1))
              for m, n in zip(sizes[:-1], sizes[1:])]
    x = snp.asarray(rng.normal(size=(batch, sizes[0])).astype(np.float32))
    y = snp.asarray(np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)])
    return params, x, y


def test_mlp_training_step_matches_numpy_ref():
    params, x, y = _mlp_data()

    def step(params, x, y):
        loss, g = st.value_and_grad(_mlp_loss)(params, x, y)
        return loss, [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, g)]
    assert_close(cpp(step)(params, x, y), st.compile(step, backend="numpy_ref")(params, x, y))


def test_vmap_grad_per_example():
    params, x, y = _mlp_data()
    f = st.vmap(st.grad(lambda p, xi, yi: _mlp_loss(p, xi[None], yi[None])),
                in_axes=(None, 0, 0))
    assert_close(cpp(f)(params, x, y), f(params, x, y))


def test_switch_while_scan_and_cond():
    x = snp.asarray(np.linspace(-1, 1, 7, dtype=np.float32))

    def f(x, i):
        a = st.switch(i, [lambda v: snp.sin(v) * 2.0, lambda v: snp.exp(v) - 1.0,
                          lambda v: v * v], x)
        n, b = st.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, snp.tanh(c[1]) + 0.5),
                             (0, a))
        c, ys = st.scan(lambda c, xi: (c + xi * 2.0, snp.sqrt(snp.abs(c))), 0.0, b)
        d = st.cond(c > 0, lambda v: v + 1.0, lambda v: v - 1.0, b)
        return n, b, c, ys, d
    for i in (0, 1, 2, 7):
        assert_close(cpp(f)(x, i), f(x, i))


def test_grad_through_while_and_scan():
    x = snp.asarray(np.linspace(0.1, 1, 5, dtype=np.float32))

    def loss(x):
        c, ys = st.scan(lambda c, xi: (c * 0.9 + snp.sin(xi), c * xi), 0.0, x)
        return c + snp.sum(ys * ys)
    g = st.grad(loss)
    assert_close(cpp(g)(x), g(x))


# ---- semantics at the edges ----------------------------------------------------------------------

SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 3e38, -1e-40],
                   dtype=np.float32)


def test_nan_inf_and_signed_zero_through_fused_chains():
    x = snp.asarray(SPECIAL)

    def f(x):
        return (snp.maximum(x, 0.0), snp.minimum(x * 2.0, -x), snp.fmax(x, 1.0),
                snp.where(snp.isnan(x), -1.0, x), snp.exp(x) - snp.log(snp.abs(x)),
                snp.sign(x), snp.floor_divide(x, 0.5), snp.remainder(x, -1.5),
                snp.clip(x, -1.0, 1.0), snp.isinf(x) | snp.signbit(x), snp.nan_to_num(x),
                snp.tanh(x), snp.copysign(1.0, x), x / 0.0)
    assert_close(cpp(f)(x), f(x))


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_reductions_with_nan_and_empty(op, axis):
    fn = getattr(snp, op)
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 4
    a[1, 2] = np.nan
    for arr in (a, np.zeros((0, 4), np.float32), np.arange(6, dtype=np.int32).reshape(2, 3)):
        x = snp.asarray(arr)
        if op in ("max", "min") and arr.size == 0:
            continue
        f = lambda x: fn(x * 1, axis=axis)  # noqa: E731
        assert_close(cpp(f)(x), f(x))


def test_large_reductions_are_accurate_and_parallel():
    rng = np.random.default_rng(1)
    arr = rng.normal(size=(300, 1000)).astype(np.float32)
    x = snp.asarray(arr)
    for f in (lambda x: snp.sum(x * 2.0), lambda x: snp.sum(x, axis=0),
              lambda x: snp.max(snp.abs(x), axis=1), lambda x: snp.mean(x * x, axis=1)):
        assert_close(cpp(f)(x), f(x), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("shape,axes", [((1024, 1024), (0,)), ((8, 128, 256), (0, 1)),
                                        ((3, 4000, 40), (1,)), ((2, 517, 3, 70), (1, 2)),
                                        ((700, 5), (0,))])
def test_column_reductions_split_along_the_rows(shape, axes):
    """Column reductions with few column blocks are split into chunks of rows, each with its
    own partials combined in chunk order (columns.COL_CHUNK): every kind and dtype against
    NumPy (float sums against float64), NaN / inf / -0.0, and the same bits on 1, 2 and 5
    threads (the chunks follow from the sizes alone)."""
    from starling.lowering.runtime import threads
    rng = np.random.default_rng(7)
    a = rng.standard_normal(shape).astype(np.float32)
    flat = a.reshape(-1)
    flat[rng.integers(0, flat.size, 5)] = np.nan
    flat[rng.integers(0, flat.size, 5)] = np.inf
    flat[rng.integers(0, flat.size, 5)] = -0.0
    i = rng.integers(-3, 4, shape).astype(np.int32)
    b = a > 0.5

    def f(a, i, b):
        return (snp.sum(a * 2.0, axis=axes), snp.max(a, axis=axes), snp.min(a + 0.0, axis=axes),
                snp.sum(i * 3, axis=axes), snp.max(i, axis=axes), snp.any(b, axis=axes),
                snp.all(b | (a < 1.5), axis=axes), a * 2.0,
                snp.sum(snp.nan_to_num(a * 1.0, posinf=0.0), axis=axes))
    g = cpp(f)
    args = [snp.asarray(v) for v in (a, i, b)]
    old = threads.pool_size()
    try:
        runs = []
        for n in (1, 2, 5):
            threads.set_pool_size(n)
            runs.append([np.asarray(o) for o in g(*args)])
    finally:
        threads.set_pool_size(old)
    for other in runs[1:]:
        for x, y in zip(runs[0], other):
            assert np.array_equal(x.view(np.uint8), y.view(np.uint8))
    got = runs[0]
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(got[0], (a64 * 2).sum(axis=axes), rtol=1e-6)
    np.testing.assert_array_equal(got[1], a.max(axis=axes))
    np.testing.assert_array_equal(got[2], a.min(axis=axes))
    np.testing.assert_array_equal(got[3], (i * 3).sum(axis=axes))
    np.testing.assert_array_equal(got[4], i.max(axis=axes))
    np.testing.assert_array_equal(got[5], b.any(axis=axes))
    np.testing.assert_array_equal(got[6], (b | (a < 1.5)).all(axis=axes))
    np.testing.assert_array_equal(got[7], a * 2)
    fin = np.nan_to_num(a64, posinf=0.0)
    np.testing.assert_allclose(got[8], fin.sum(axis=axes), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dt", ["int8", "int32", "int64", "uint8"])
def test_integer_wraparound_division_by_zero_and_shifts(dt):
    info = np.iinfo(dt)
    a = np.array([info.min, info.max, -7 if info.min < 0 else 7, 0, 5, 1], dt)
    b = np.array([-1 if info.min < 0 else 1, 2, 0, 3, -2 if info.min < 0 else 2, 40], dt)
    x, y = snp.asarray(a), snp.asarray(b)

    def f(x, y):
        out = [x + y, x * y, x - y, snp.floor_divide(x, y), snp.remainder(x, y),
               snp.fmod(x, y), snp.maximum(x, y), x & y, x ^ y, x == y, snp.abs(x)]
        sh = snp.clip(y, 0, 60) if dt != "uint8" else y
        out += [snp.left_shift(x, sh), snp.right_shift(x, sh)]
        return out
    assert_close(cpp(f)(x, y), f(x, y))


@pytest.mark.parametrize("src", ["float32", "float64"])
def test_mixed_dtype_conversions(src):
    # includes out-of-range and NaN values: truncation, saturation, NaN -> 0 (Starling's rule)
    x = np.array([-1.7, 0.5, 2.9, 300.2, -0.0, np.nan, 1e10, -1e10, 70000.5], src)
    a = snp.asarray(x)
    ints = (snp.int8, snp.int16, snp.int32, snp.int64, snp.uint8, snp.uint16, snp.uint32,
            snp.uint64, snp.bool)

    def f(a):
        return [snp.astype(a, dt) for dt in ints] + [
            snp.astype(a > 0, snp.float64), snp.astype(snp.astype(a, snp.int64), snp.float32)]
    got, eager = cpp(f)(a), f(a)
    assert_close(got, eager)
    for g, dt in zip(got, ints):
        np.testing.assert_array_equal(np.asarray(g), exact_casts.convert(x, dt))
    assert np.asarray(got[4]).tolist() == [0, 0, 2, 255, 0, 0, 255, 0, 255]


def test_complex_programs_are_decomposed_and_match():
    rng = np.random.default_rng(0)
    za = (rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))).astype(np.complex64)
    zb = (rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))).astype(np.complex64)
    za[0, 0] = 0
    zb[0, 1] = 0
    a, b = snp.asarray(za), snp.asarray(zb)

    def f(a, b):
        c = a * b + a / b - snp.conj(a) * 2.0
        return c, snp.abs(c), snp.real(c) + snp.imag(b), snp.exp(a), a == b, snp.sum(c, axis=1)
    fn = cpp(f)
    assert_close(fn(a, b), f(a, b), rtol=1e-5, atol=1e-5)
    prog = fn.lower(a, b).executable.program
    # the arithmetic runs in fused real kernels, not as complex NumPy ufuncs
    assert not [e for e in prog.eqns if e.primitive.name in ("multiply", "divide", "add")]
    assert any(e.primitive is fused_kernel_p for e in prog.eqns)


def test_complex128_and_matmul_stay_correct():
    rng = np.random.default_rng(2)
    z = snp.asarray((rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))))

    def f(z):
        return (z @ z) * 0.5 + snp.conj(z)
    assert_close(cpp(f)(z), f(z), rtol=1e-12, atol=1e-12)


# ---- structure, fallbacks ------------------------------------------------------------------------

def test_chain_is_one_vectorised_kernel():
    x = snp.asarray(np.ones(100000, np.float32))
    low = cpp(lambda x: snp.tanh(x) * 0.5 + snp.exp(-x * x) * x - snp.sin(x) ** 2).lower(x)
    prog = low.executable.program
    assert [e.primitive for e in prog.eqns] == [fused_kernel_p]
    assert low.source.count('extern "C" void st_k') == 1
    # one vectorised loop, its chunks run on the thread pool (100000 x (cost) is parallel work)
    assert "#pragma omp simd" in low.source and "st_par(100000," in low.source
    assert "tanhf(" in low.source and "expf(" in low.source


def test_unsupported_dtype_logs_fallback_once(caplog, monkeypatch):
    # float16 runs in kernels except the ops defined on its bit patterns (spacing, nextafter)
    monkeypatch.setenv("STARLING_LOG_FALLBACKS", "1")
    cpp_backend._REPORTED.discard("spacing")
    x = snp.asarray(np.ones(4, np.float16))
    with caplog.at_level(logging.INFO, logger="starling.lowering"):
        f = cpp(lambda x: snp.spacing(x) + 1)
        assert_close(f(x), snp.spacing(x) + 1)
        assert_close(cpp(lambda x: snp.spacing(x) * 2)(x), snp.spacing(x) * 2)
    msgs = [r.getMessage() for r in caplog.records
            if "runs spacing through NumPy" in r.getMessage()]
    assert msgs == ["starling.lowering: cpp backend runs spacing through NumPy"]


def test_no_compiler_warns_once_and_runs_numpy_ref(monkeypatch):
    monkeypatch.setattr(cache, "find_compiler", lambda: None)
    monkeypatch.setattr(cpp_backend, "_WARNED_NO_COMPILER", [])
    x = snp.asarray(np.linspace(-1, 1, 5, dtype=np.float32))
    with pytest.warns(RuntimeWarning, match="no C\\+\\+ compiler"):
        out = cpp(lambda x: snp.exp(x) * 2.0)(x)
    assert_close(out, snp.exp(x) * 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = cpp(lambda x: snp.sin(x) * 2.0)(x)
    assert_close(out, snp.sin(x) * 2.0)


def test_outputs_that_alias_inputs_and_literals():
    x = snp.asarray(np.arange(3, dtype=np.float32))
    f = cpp(lambda x: (x, 2.0, x + 1.0))
    out = f(x)
    assert_close(out, (x, snp.asarray(2.0), x + 1.0))


def test_non_contiguous_and_scalar_buffers():
    base = snp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    xt = snp.transpose(base)           # an eager transpose is a strided NumPy view
    f = cpp(lambda x: snp.exp(x) + 1.0)
    assert_close(f(xt), snp.exp(xt) + 1.0)
    s = snp.sum(base)                  # a 0-d result (NumPy scalar buffer)
    assert_close(cpp(lambda s: s * 2.0 + 1.0)(s), s * 2.0 + 1.0)


def test_vector_math_library_is_used():
    from starling.lowering.backends.cpp import formulas as cpp_formulas
    if not any(name == "expf" for name, _, _ in cpp_formulas.mvec_functions()):
        pytest.skip("no libmvec on this machine")
    x = snp.asarray(np.ones(1 << 12, np.float32))
    low = cpp(lambda x: snp.exp(x) + snp.sin(x) * snp.tanh(x)).lower(x)
    with open(low.executable.library_path, "rb") as f:
        binary = f.read()
    # the loop calls glibc's vector variants (8 floats per call with AVX2, 4 with SSE)
    assert b"_ZGV" in binary and b"v_expf" in binary and b"v_sinf" in binary


@pytest.mark.parametrize("dt, lo, hi", [(np.float32, -104.0, 89.0), (np.float64, -746.0, 710.0)])
def test_exp_of_arguments_past_the_range_is_exact_and_leaves_other_lanes_alone(dt, lo, hi):
    # st_expv (formulas.py) passes lanes whose exp is 0 or inf around the vector library's
    # scalar fallback (a masked softmax's -1e9 / -inf scores): those lanes are exactly 0 / inf,
    # NaN stays NaN, and every other lane has the bits it has in a kernel without such lanes
    rng = np.random.default_rng(7)
    near = np.concatenate([rng.uniform(lo, hi, 509), [lo, hi, -0.0, 0.0, 1.0, lo + 0.5,
                                                        hi - 0.5]]).astype(dt)
    far = np.array([-1e9, -np.inf, lo - 1, np.nextafter(dt(lo), dt(-np.inf)), hi + 1,
                    np.nextafter(dt(hi), dt(np.inf)), 1e30, np.inf, np.nan], dt)
    x = near.copy()
    pos = rng.choice(len(near), len(far), replace=False)
    x[pos] = far
    f = cpp(lambda v: snp.exp(v))
    got, alone = np.asarray(f(snp.asarray(x))), np.asarray(f(snp.asarray(near)))
    with np.errstate(over="ignore"):
        want_far = np.exp(far.astype(np.float64)).astype(dt)
    np.testing.assert_array_equal(got[pos], want_far)   # 0, inf, NaN exactly
    keep = np.setdiff1d(np.arange(len(near)), pos)
    np.testing.assert_array_equal(got[keep], alone[keep])
    with np.errstate(over="ignore"):
        want = np.exp(near.astype(np.float64)).astype(dt)
    np.testing.assert_array_max_ulp(alone, want, 4)   # libmvec: within 4 ulps
    # a masked softmax (the case this is for) against NumPy
    s = rng.standard_normal((4, 33, 33)).astype(np.float32)
    mask = np.tril(np.ones((33, 33), bool))
    sm = cpp(lambda s: st.nn.softmax(snp.where(mask, s, -np.inf), axis=-1))
    ref = np.where(mask, np.exp(s - np.where(mask, s, -np.inf).max(-1, keepdims=True)), 0)
    assert_close(sm(snp.asarray(s)), (ref / ref.sum(-1, keepdims=True)).astype(np.float32))


def test_fast_call_path_keeps_semantics():
    x = snp.asarray(np.arange(4, dtype=np.float32))
    f = cpp(lambda x, y=2.0: x * y)
    assert_close(f(x), x * 2.0)
    assert_close(f(x), x * 2.0)                    # second call: fast path
    assert_close(f(x, y=3.0), x * 3.0)             # keyword: full path
    assert_close(f(snp.asarray(np.arange(6, dtype=np.float64))),
                 snp.asarray(np.arange(6, dtype=np.float64)) * 2.0)   # new signature
    w = snp.asarray(np.float32(1.5))
    assert f(x, w).dtype == snp.float32
    g = st.compile(lambda x: [x + 1.0, (x * 2.0, x)])
    from starling.lowering import backends
    previous = backends.default_backend_name()
    try:
        st.set_default_backend("cpp")
        out1 = g(x)
        out2 = g(x)
        st.set_default_backend("numpy_ref")
        out3 = g(x)                                # the default backend is part of the key
    finally:
        # the default is process-wide: later test modules must find the one they started with
        st.set_default_backend(previous)
    for out in (out1, out2, out3):
        assert_close(out, [x + 1.0, (x * 2.0, x)])
    weak = cpp(lambda x: x + 1)(snp.asarray(2.0))
    assert weak.weak_type == snp.asarray(2.0).weak_type


def test_debug_mode_records_kernels():
    x = snp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    f = cpp(lambda x: snp.sum(snp.exp(x) * 2.0, axis=1) @ snp.ones(2))
    ref = f(x)
    with st.debug_mode(checksums=True) as dm:
        out = f(x)
    assert_close(out, ref)
    names = [r["primitive"] for r in dm.records]
    assert "fused_kernel" in names and "fused_matmul" in names
    assert all(r["source"] == "compiled:cpp" for r in dm.records)


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_complex_special_values_match_numpy(dt):
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.0]
    zs = np.array([complex(a, b) for a in vals for b in vals], dt)
    a, b = snp.asarray(np.repeat(zs, len(zs))), snp.asarray(np.tile(zs, len(zs)))
    z = snp.asarray(zs)

    def binary(a, b):
        return a * b, a / b, a + b, a - b, a == b, a != b

    def unary(z):
        return (snp.exp(z), snp.abs(z), snp.reciprocal(z), snp.square(z), snp.isnan(z),
                snp.isinf(z), snp.isfinite(z), snp.conj(z), -z, snp.real(z), snp.imag(z))
    for f, args in ((binary, (a, b)), (unary, (z,))):
        got, want = cpp(f)(*args), f(*args)
        for i, (g, w) in enumerate(zip(got, want)):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype
            for part in ((np.real, np.imag) if w.dtype.kind == "c" else (lambda x: x,)):
                pg, pw = part(g), part(w)
                if f is unary and i == 0:
                    # exp runs the vector math library (libmvec: within 4 ulps); special
                    # values (NaN, inf, signed zeros) exactly
                    np.testing.assert_array_max_ulp(np.nan_to_num(pg), np.nan_to_num(pw), 4)
                    pg, pw = np.where(np.isfinite(pw) & (pw != 0), 1, pg), \
                        np.where(np.isfinite(pw) & (pw != 0), 1, pw)
                    num = ~np.isnan(pw)
                    np.testing.assert_array_equal(np.signbit(pg[num]), np.signbit(pw[num]))
                np.testing.assert_array_equal(pg, pw)
