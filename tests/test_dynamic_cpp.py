"""Dynamic shapes on the cpp backend: one native artifact serves every size in range.

Programs are staged once with symbolic dims and compiled together (ONE compiler run for the
module's cases, cpp ``compile_many``); each is run for several sizes, including size 1 of a
symbolic dim, sizes that are not multiples of the vector width and sizes whose work crosses the
parallel threshold (lowered for these kernels so both the serial and the OpenMP variants run),
and compared with eager NumPy (the numpy_ref reference). End-to-end tests count compiler runs,
check range errors and export.
"""
from __future__ import annotations


import numpy as np
import pytest
import sympy

import starling
import starling.numpy as snp
from starling import ShapesSpec, ShapeVar, tree
from starling.arrays.convert import operand
from starling.core.avals import ShapedArray
from starling.lowering import backends, cache
from starling.lowering.backends.cpp import codegen as CG
from starling.lowering.backends.cpp import dynamic as cpp_dynamic, runtime as cpp_runtime
from starling.lowering.fused import fused_kernel_p
from starling.transforms.dynamic_spec import ShapeBinder

pytestmark = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(cpp_kernel_env):
    yield


def _r(rng, *shape, dtype=np.float32):
    return snp.asarray(rng.standard_normal(shape).astype(dtype))


def _close(got, want, tol=2e-5):
    got_l, want_l = tree.leaves(got), tree.leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)


N = ShapeVar("n", min=1, max=1 << 20)
M = ShapeVar("m", min=1, max=1 << 20)
E = ShapeVar("e", min=2, max=64)   # even sizes only (assumption below)
CASES = {}


def case(name, dims, sizes, assumptions=(), fused=True, tol=2e-5):
    """Registers ``f(rng, size) -> args`` / the function under test for ``sizes``."""
    def deco(pair):
        make_args, f = pair
        CASES[name] = (f, ShapesSpec(dims, assumptions), make_args, sizes, fused, tol)
        return pair
    return deco


def _transc(x):
    return snp.tanh(x) * 0.5 + snp.exp(-x * x) * x - snp.sin(x) ** 2


case("chain_2d", {"x": {0: N}}, (1, 2, 3, 33, 1000))(
    (lambda rng, n: (_r(rng, n, 7),), _transc))
case("chain_flat_large", {"x": {0: N}}, (1, 7, 13, 20001))(
    (lambda rng, n: (_r(rng, n),), _transc))
case("bias_rows", {"x": {0: N, 1: M}, "b": {0: M}}, (1, 3, 9, 31, 2048))(
    (lambda rng, n: (_r(rng, max(n // 512, 1), n), _r(rng, n)),
     lambda x, b: snp.exp(x * 0.5) + b))
case("columns_b1", {"x": {0: N, 1: M}, "c": {0: N}}, (1, 2, 5, 100))(
    (lambda rng, n: (_r(rng, n, n % 4 + 1), _r(rng, n, 1)), lambda x, c: x * c - c))
case("both_symbolic_broadcast", {"x": {0: N}, "y": {1: M}}, (1, 2, 6))(
    (lambda rng, n: (_r(rng, n, 1), _r(rng, 1, n + 2)), lambda x, y: x + y * 2.0))
case("reduce_axes", {"x": {0: N, 1: M}}, (1, 2, 9, 100, 1500))(
    (lambda rng, n: (_r(rng, n, (7 * n) % 13 + 1),),
     lambda x: (snp.sum(x, axis=0), snp.sum(x * x, axis=1), snp.sum(x),
                snp.max(x, axis=1, keepdims=True), snp.mean(x, axis=0), snp.min(x))))
case("reduce_large_rows", {"x": {0: N, 1: M}}, (1, 2, 40))(
    (lambda rng, n: (_r(rng, n, 3001 if n < 16 else 700),),
     lambda x: (snp.sum(snp.exp(x), axis=1), snp.sum(snp.exp(x), axis=0), snp.max(x))))
case("reduce_middle_3d", {"x": {0: N, 2: M}}, (1, 2, 9))(
    (lambda rng, n: (_r(rng, n, 4, n + 1),),
     lambda x: (snp.sum(x, axis=1), snp.prod(x * 0.5 + 1.0, axis=(1, 2)),
                snp.sum(x, axis=(0, 1)))))
case("views", {"x": {0: N}}, (1, 2, 7))(
    (lambda rng, n: (_r(rng, n, 6),),
     lambda x: (snp.transpose(snp.reshape(x, (x.shape[0], 2, 3)), (1, 0, 2)) + 1.0,
                x.T * 2.0, snp.reshape(x, (-1,)) - 1.0, snp.sum(x.T * 3.0, axis=0))))
case("derived_dims", {"x": {0: N}, "y": {0: N * 2}}, (1, 2, 7))(
    (lambda rng, n: (_r(rng, n), _r(rng, 2 * n)),
     lambda x, y: (snp.reshape(y, (x.shape[0], 2)) + x[:, None],
                   snp.concatenate([x, y]) * 3.0, x * x.shape[0])))
case("floor_div_dims", {"x": {0: E}}, (2, 4, 10), assumptions=[E % 2 == 0])(
    (lambda rng, n: (_r(rng, n, 3),),
     lambda x: (snp.sum(x.reshape(x.shape[0] // 2, 2, 3) * 2.0, axis=1),
                snp.tanh(x.reshape(-1, 6)))))
case("slices_may_be_empty", {"x": {0: N}}, (1, 2, 7))(
    (lambda rng, n: (_r(rng, n),), lambda x: (x[1:] - x[:-1], snp.sum(x[1:] * 2.0))))
case("ints_and_bools", {"x": {0: N}}, (1, 5, 19))(
    (lambda rng, n: (snp.asarray(rng.integers(-50, 50, n).astype(np.int32)),),
     lambda x: (x * 3 + 1, (x > 2) & (x < 30), snp.sum(x), snp.max(x))))
case("special_values", {"x": {0: N}}, (1, 4, 9))(
    (lambda rng, n: (snp.asarray(np.resize(np.array([np.nan, np.inf, -np.inf, -0.0, 1.5],
                                                    np.float32), n)),),
     lambda x: (x * 2.0 + 1.0, snp.max(x), snp.sum(snp.where(x == x, x, 0.0)))))
case("complex", {"x": {0: N}}, (1, 3))(
    (lambda rng, n: (snp.asarray((rng.standard_normal(n) + 1j * rng.standard_normal(n))
                                 .astype(np.complex64)),),
     lambda x: (x * x + 1.0, snp.abs(x) * 2.0)))
case("mlp", {"x": {0: N}}, (1, 2, 17))(
    (lambda rng, n: (_r(rng, n, 5), _r(rng, 5, 8), _r(rng, 8), _r(rng, 8, 3)),
     lambda x, w1, b1, w2: (lambda y: (y - snp.max(y, axis=1, keepdims=True), snp.mean(y)))(
         snp.tanh(x @ w1 + b1) @ w2)))
case("grad", {"x": {0: N}}, (1, 2, 17), tol=1e-4)(
    (lambda rng, n: (_r(rng, n, 5), _r(rng, 5, 3)),
     lambda x, w: starling.grad(lambda w: snp.mean(snp.tanh(x @ w) ** 2))(w)))
case("vmap", {"x": {0: N}}, (1, 3, 10))(
    (lambda rng, n: (_r(rng, n, 4),),
     lambda x: starling.vmap(lambda r: r * snp.sum(r) + 1.0)(x)))
case("scan_body", {"x": {0: N}}, (1, 2, 6))(
    (lambda rng, n: (_r(rng, n, 3),),
     lambda x: starling.scan(lambda c, r: (c * 0.5 + r, snp.tanh(c * r)), snp.zeros(3), x)))
case("scan_symbolic_carry", {"x": {1: N}}, (1, 2, 6))(
    (lambda rng, n: (_r(rng, 4, n),),
     lambda x: starling.scan(lambda c, r: (c + r * 2.0, snp.sum(c)), snp.zeros_like(x[0]), x)))
case("while_body", {"x": {0: N}}, (1, 3, 8))(
    (lambda rng, n: (_r(rng, n, 2),),
     lambda x: starling.fori_loop(0, 3, lambda i, c: snp.tanh(c) * 0.5 + 1.0, x)))
case("while_data_dependent", {"x": {0: N}}, (1, 3, 8))(
    (lambda rng, n: (snp.asarray(np.abs(rng.standard_normal((n, 2))).astype(np.float32) + .1),),
     lambda x: starling.while_loop(lambda c: snp.sum(c) < 100.0, lambda c: c * 2.0 + 0.5, x)))
case("cond", {"x": {0: N}}, (1, 3, 8))(
    (lambda rng, n: (_r(rng, n, 2),),
     lambda x: starling.cond(snp.sum(x) > 0, lambda y: snp.exp(y) * 2.0, lambda y: -y, x)))


def _stage(f, spec, args):
    """The optimised symbolic Program, the output tree and a ShapeBinder for ``f``."""
    low = starling.compile(f, dynamic_shapes=spec, backend="numpy_ref").lower(*args)
    prog = low.ir
    binder = ShapeBinder("test", prog.in_avals, [f"arg {i}" for i in range(len(prog.invars))],
                         spec.relationals)
    return prog, low.out_tree, binder


@pytest.fixture(scope="module")
def compiled():
    """name -> (executable, out tree, binder); all kernels in one compiler run, with a low
    parallel threshold so that mid-size runs take the OpenMP variants."""
    rng = np.random.default_rng(0)
    staged = {}
    for name, (f, spec, make_args, sizes, _, _) in CASES.items():
        staged[name] = _stage(f, spec, make_args(rng, sizes[-1]))
    old = CG.PARALLEL_WORK
    CG.PARALLEL_WORK = 1 << 12
    try:
        cpp_runtime.launcher()
        before = cache.STATS["compiles"]
        exes = backends.get_backend("cpp").compile_many([s[0] for s in staged.values()])
        assert cache.STATS["compiles"] - before <= 1
    finally:
        CG.PARALLEL_WORK = old
    return {name: (exe, s[1], s[2]) for (name, s), exe in zip(staged.items(), exes)}


def _kernels(prog, found):
    for eqn in prog.eqns:
        if eqn.primitive is fused_kernel_p:
            found.append(eqn)
        for p in eqn.params.values():
            for q in (p if isinstance(p, tuple) else (p,)):
                if hasattr(q, "eqns") and hasattr(q, "invars"):
                    _kernels(q, found)
    return found


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_with_dynamic_shapes_matches_reference(compiled, name):
    f, spec, make_args, sizes, fused, tol = CASES[name]
    exe, out_tree, binder = compiled[name]
    assert isinstance(exe, cpp_dynamic.CppDynamicExecutable)
    if fused:   # the symbolic program has native kernels that read their sizes at run time
        assert _kernels(exe.program, []) and "st_sz" in exe.source
    rng = np.random.default_rng(1)
    for n in sizes:
        args = make_args(rng, n)
        ops = [operand(x, "test") for x in tree.leaves(args)]
        env = binder.env_for(ops)
        got = tree.unflatten(out_tree, exe(None, ops, shape_env=env))
        _close(got, f(*args), tol)
    assert len(exe._by_env) == len(set(sizes))


def test_schedules_are_cached_per_size_and_bounded(compiled, monkeypatch):
    exe, _, binder = compiled["chain_flat_large"]
    rng = np.random.default_rng(2)
    x = _r(rng, 5)
    env = binder.env_for([x])
    first = exe.for_env(env)
    assert exe.for_env(env) is first
    monkeypatch.setattr(cpp_dynamic, "MAX_SCHEDULES", 3)
    for n in range(20, 30):
        xs = _r(rng, n)
        _close(exe(None, [xs], shape_env=binder.env_for([xs]))[0], _transc(xs))
    assert len(exe._by_env) <= 3
    with pytest.raises(TypeError, match="needs shape_env"):
        exe(None, [x])


def test_one_compiler_run_for_every_size(tmp_path, monkeypatch):
    monkeypatch.setenv("STARLING_CACHE_DIR", str(tmp_path))
    cpp_runtime.launcher()   # built once per process (not a kernel compilation)
    before = cache.STATS["compiles"]
    b = ShapeVar("batch", min=1, max=4096)

    def f(x, w, bias):
        h = snp.tanh(x @ w + bias)
        return snp.sum(h * h, axis=1), snp.mean(h, axis=0)

    g = starling.compile(f, dynamic_shapes=ShapesSpec({"x": {0: b}}), backend="cpp")
    rng = np.random.default_rng(3)
    w, bias = _r(rng, 6, 5), _r(rng, 5)
    for n in (1, 2, 7, 64, 1000, 7, 1):
        x = _r(rng, n, 6)
        _close(g(x, w, bias), f(x, w, bias), 1e-4)
    assert cache.STATS["compiles"] - before == 1
    assert g.num_compiles == 1
    src = g.lower(_r(rng, 3, 6), w, bias).source
    assert "st_sz" in src
    with pytest.raises(ValueError, match=r"argument 'x' dim 0 \(size 5000.*1 <= batch <= 4096"):
        g(_r(rng, 5000, 6), w, bias)
    assert cache.STATS["compiles"] - before == 1 and g.num_compiles == 1


def test_assumption_violation_is_a_value_error():
    e = ShapeVar("e", min=2, max=64)
    g = starling.compile(lambda x: snp.sum(x.reshape(-1, 2), axis=1) * 2.0, backend="cpp",
                         dynamic_shapes=ShapesSpec({"x": {0: e}}, assumptions=[e % 2 == 0]))
    _close(g(snp.ones(6)), np.full(3, 4.0, np.float32))
    with pytest.raises(ValueError, match="violates the assumption"):
        g(snp.ones(7))
    assert g.num_compiles == 1


def test_debug_mode_records_dynamic_cpp_runs():
    n = ShapeVar("n")
    g = starling.compile(lambda x: snp.exp(x) * 2.0 + 1.0, backend="cpp",
                         dynamic_shapes=ShapesSpec({"x": {0: n}}))
    x = snp.ones(5)
    with starling.debug_mode() as dm:
        _close(g(x), np.full(5, np.exp(1.0) * 2 + 1, np.float32), 1e-5)
    assert "fused_kernel" in dm.primitives()


def test_exported_dynamic_program_runs_on_cpp(rng):
    """A deserialized symbolic Program (floor-divided dims from an assumption) compiles once on
    cpp and runs for every size."""
    b = ShapeVar("b", min=2, max=32)
    spec = ShapesSpec({"x": {0: b}}, assumptions=[b % 2 == 0])

    def f(x):
        return snp.mean(x.reshape(-1, 2, 3), axis=1) * 2.0, snp.tanh(x) + 1.0

    exp = starling.export(f, ShapedArray((b, 3), np.float32), dynamic_shapes=spec)
    back = starling.deserialize(exp.serialize())
    exe = backends.get_backend("cpp").compile(back.program)
    assert isinstance(exe, cpp_dynamic.CppDynamicExecutable) and "st_dim_fdiv" in exe.source
    binder = ShapeBinder("exported f", back.in_avals, back.in_labels, back.relationals)
    for n in (2, 8, 30):
        x = _r(rng, n, 3)
        outs = exe(None, [x], shape_env=binder.env_for([x]))
        _close(outs, f(x))
        _close(back(x), f(x))


def test_dynamic_fast_path_serves_cached_sizes(rng):
    n = ShapeVar("n", max=100)
    g = starling.compile(lambda x, y: x * y + 1.0, backend="cpp",
                         dynamic_shapes=ShapesSpec({"x": {0: n}, "y": {0: n}}))
    xs = [(_r(rng, k), _r(rng, k)) for k in (3, 4, 3, 4)]
    for x, y in xs:
        _close(g(x, y), np.asarray(x) * np.asarray(y) + 1.0)
    with pytest.raises(ValueError, match="n <= 100"):
        g(_r(rng, 101), _r(rng, 101))
    with pytest.raises(ValueError):
        g(_r(rng, 3), _r(rng, 4))
    assert g.num_compiles == 1


# ---- the C printer of dims ---------------------------------------------------------------------

def test_dim_printer_is_exact():
    """Every dim form the printer handles, evaluated in C for many sizes, equals sympy's value
    (floor division and Mod with Python semantics, also for negative intermediates)."""
    a, b = ShapeVar("a", min=1, max=50), ShapeVar("b", min=1, max=9)
    exprs = [a * 3 + 1, a * b, a // 2, (a + 1) // 2, a % 4, a // b, a % b, (a * 3) // 2 * b,
             -(-a // 3), a - 5, (a - 7) // 3, (a - 7) % 3, a ** 2 - b, (b - 9) // 4]
    exprs = [e.expr for e in exprs] + [sympy.Max(a.expr, 3 * b.expr), sympy.Min(a.expr, b.expr)]
    names = {a.expr: "sz0", b.expr: "sz1"}
    body = [f"  o[{i}] = {CG.c_dim(e, names)};" for i, e in enumerate(exprs)]
    src = ("#include <stdint.h>\n" + CG.DIM_HELPERS + 'extern "C" void dims(void* const* args) {\n'
           "  int64_t* o = (int64_t*)args[0];\n"
           "  const int64_t* st_sz = (const int64_t*)args[1];\n"
           "  const int64_t sz0 = st_sz[0], sz1 = st_sz[1];\n" + "\n".join(body) + "\n}\n")
    lib, _ = cache.load(src, compiler=cache.find_compiler())
    k = cpp_runtime.make_kernel(lib, "dims", [], [ShapedArray((len(exprs),), np.int64)], False,
                                (a, b))
    for av in (1, 2, 3, 7, 8, 13, 50):
        for bv in (1, 2, 3, 9):
            got = k.run((av, bv), (None,))[0]
            want = [int(e.xreplace({a.expr: av, b.expr: bv})) for e in exprs]
            assert got.tolist() == want, (av, bv)


def test_merging_uses_only_identities_that_hold_for_every_size():
    n = ShapeVar("n")
    assert CG.same_dim(n * 2, n + n) and not CG.same_dim(n, 1) and not CG.same_dim(n, n * 1 + 1)
    # (n, 1) columns against (n, 3): the column's stride (1) is not 0 * 3, no merge
    x = CG.Access(0, np.float32, (n, 1), CG.c_strides((n, 1)))
    y = CG.Access(1, np.float32, (n, 3), CG.c_strides((n, 3)))
    for acc in (x, y):
        acc.loop_strides = CG.broadcast_strides(acc, (n, 3))
    dims = CG._merge_dims((n, 3), set(), [x, y])
    assert len(dims) == 2
    # contiguous (n, 3) and (n, 3): one flat loop of 3 * n
    z = CG.Access(2, np.float32, (n, 3), CG.c_strides((n, 3)))
    z.loop_strides = CG.broadcast_strides(z, (n, 3))
    dims = CG._merge_dims((n, 3), set(), [y, z])
    assert len(dims) == 1 and CG.same_dim(dims[0][0], n * 3)
    # a symbolic dim is never dropped (it may be 1 at run time) but a static 1 is
    dims = CG._merge_dims((1, n), set(), [z])
    assert len(dims) == 1
