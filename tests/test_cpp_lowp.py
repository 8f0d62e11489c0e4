"""float16 / bfloat16 / float8_e4m3fn / float8_e5m2 / float4_e2m1fn in the cpp backend's kernels.

Kernels hold these values in float, compute each primitive in float and round its result to the
format (src/lowering/backends/cpp/lowp.py). The references:

* conversions: Starling's own rules (src/core/casting.py), computed by an independent oracle in
  exact integer arithmetic (tests/exact_casts.py), never by the installed ml_dtypes (whose
  float64 / integer -> bfloat16 and float -> integer casts changed in 0.7): every stored bit
  pattern widened to every dtype; float32 and float64 values around every representable value
  (the value, the halfway points, one and two float ulps either side, subnormals, the overflow
  boundary), inf, NaN payloads, -0.0 and random bit patterns narrowed; integers around every
  representable integer and halfway point narrowed. Compiled, eager and numpy_ref results all
  equal the oracle, bit for bit, NaN bits included;
* arithmetic, comparisons, where, abs / negative, maximum / minimum with NaN, chains where every
  step rounds, literals: NumPy's float16 ufuncs and ml_dtypes', called directly: the same bits
  (the sign / payload of a NaN made by an operation is not compared: the compiler may swap the
  operands of ``+``);
* exp / tanh / sin / log / tanh chains: within one unit in the last place of the format (the
  vector math library and NumPy's scalar loops round float results differently);
* reductions: numpy_ref (float32 accumulation, one rounding; the kernels accumulate in double)
  bit for bit where the sum is exact, within one ulp otherwise.

Every program compiles into ONE shared object (module fixture), and each test also checks that
its program really ran as native kernels (no NumPy fallback).
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import starling.numpy as snp
from starling.arrays.ops.reductions import reduce_max_p, reduce_min_p
from starling.core.ir import eval_program
from starling.lowering import backends, cache
from starling.lowering.backends.cpp import backend as cpp_backend
from starling.lowering.fused import fused_kernel_p
from starling.lowering.pipeline import run_pipeline
from starling.transforms.stage import make_ir
from tests import exact_casts

pytestmark = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")

F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
F4 = np.dtype(ml_dtypes.float4_e2m1fn)
LOWP = (F16, BF16, E4M3, E5M2, F4)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
INTS = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32, np.uint64))
IDS = [d.name for d in LOWP]


def bits(a):
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def patterns(dt):
    """Every stored pattern (float4: every byte, the upper bits included)."""
    return np.arange(1 << (8 * dt.itemsize), dtype=bits(np.zeros(0, dt)).dtype).view(dt)


def values(dt):
    """The distinct valid values of ``dt`` (one pattern each; float4: the 16 nibbles)."""
    p = patterns(dt)[:16] if dt == F4 else patterns(dt)
    return p


def finite_sorted(dt):
    v = np.unique(values(dt).astype(np.float64))
    return v[np.isfinite(v)]


def f32_sample(dt, rng):
    """float32 values whose narrowing to ``dt`` is hard: every value, halfway point and the
    point past the largest value, one and two float32 ulps around each, both signs; float32
    subnormals, extremes, inf, NaN payloads; random bit patterns."""
    v = finite_sorted(dt)
    v = v[v >= 0]
    top = 2 * v[-1] - v[-2]
    nxt = np.append(v[1:], top)
    base = np.concatenate([v, (v + nxt) / 2, [top, 2 * top]])
    with np.errstate(over="ignore"):
        base = base.astype(np.float32)
    out = [base]
    for direction in (np.inf, -np.inf):
        b = base
        for _ in range(2):
            b = np.nextafter(b, np.float32(direction))
            out.append(b)
    specials = np.array([0x00000001, 0x007fffff, 0x00800000, 0x7f7fffff, 0x7f800000, 0x7f800001,
                         0x7fa00000, 0x7fc00000, 0x7fc00001, 0x7fffffff, 0x7f802000, 0x7f801fff],
                        np.uint32).view(np.float32)
    rand = rng.integers(0, 1 << 32, 100_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate(out + [specials])
    return np.concatenate([x, -x, rand])


def f64_sample(dt, rng):
    """float64 values: the float32 sample, one float64 ulp around each halfway point (a cast
    that rounds through float32 to nearest lands on the halfway point: double rounding), NaN
    payloads, random values."""
    v = finite_sorted(dt)
    v = v[v >= 0]
    top = 2 * v[-1] - v[-2]
    mids = (v + np.append(v[1:], top)) / 2
    out = [f32_sample(dt, rng).astype(np.float64), mids]
    for direction in (np.inf, -np.inf):
        out.append(np.nextafter(mids, direction))
        out.append(np.nextafter(v, direction))
    specials = np.array([0x7ff0000000000001, 0x7ff8000000000000, 0x7ff4000000000000,
                         0x7ff0040000000000, 0x7ff003ffffffffff, 0x0000000000000001,
                         0x7fefffffffffffff], np.uint64).view(np.float64)
    scale = np.abs(v[v > 0])
    lo, hi = np.log2(scale[0]) - 3, np.log2(v[-1]) + 2
    rand = 2.0 ** rng.uniform(lo, hi, 50_000) * rng.choice([-1.0, 1.0], 50_000)
    x = np.concatenate(out + [specials])
    return np.concatenate([x, -x, rand])


def int_sample(it, dt, rng):
    """Integers of dtype ``it`` around every integer value of ``dt`` and its halfway points."""
    info = np.iinfo(it)
    if info.bits <= 16:
        return np.arange(info.min, info.max + 1, dtype=np.int64).astype(it)
    v = finite_sorted(dt)
    v = np.concatenate([v, (v[:-1] + v[1:]) / 2, 2.0 ** np.arange(64)])
    v = v[(v == np.round(v)) & (np.abs(v) < 2.0 ** 63)]
    vals = set()
    for x in v.tolist():
        for d in (-2, -1, 0, 1, 2):
            for s in (1, -1):
                vals.add(s * int(x) + d)
    vals = [x for x in vals if info.min <= x <= info.max] + [info.min, info.max]
    rand = rng.integers(info.min, info.max, 20_000, dtype=it, endpoint=True)
    return np.concatenate([np.array(vals, dtype=it), rand])


# ---- the programs (all compiled together) --------------------------------------------------------

def _binary_operands(dt, rng):
    """(x, y): every pair of values for the 8-bit formats; for 16-bit ones every value against
    the special ones and random pairs."""
    v = values(dt)
    if dt.itemsize == 1:
        x, y = np.meshgrid(v, v, indexing="ij")
        return x.ravel(), y.ravel()
    f = v.astype(np.float32)
    special = v[np.isin(f, [0.0, 1.0, -1.0, 0.5, np.inf, -np.inf]) | np.isnan(f)][:40]
    x = np.concatenate([np.repeat(v, len(special)), v[rng.integers(0, len(v), 200_000)]])
    y = np.concatenate([np.tile(special, len(v)), v[rng.integers(0, len(v), 200_000)]])
    return x, y


def _arith(x, y):
    return (x + y, x - y, x * y, x / y, snp.maximum(x, y), snp.minimum(x, y), snp.fmax(x, y),
            snp.fmin(x, y), x < y, x == y, x >= y, x != y, snp.where(x < y, x, y), snp.abs(x),
            -x, snp.isnan(x), snp.isinf(x), snp.signbit(x), x * x, snp.sqrt(snp.abs(x)))


def _arith_ref(x, y):
    return (np.add(x, y), np.subtract(x, y), np.multiply(x, y), np.divide(x, y),
            np.maximum(x, y), np.minimum(x, y), np.fmax(x, y), np.fmin(x, y), np.less(x, y),
            np.equal(x, y), np.greater_equal(x, y), np.not_equal(x, y),
            np.where(np.less(x, y), x, y), np.abs(x), np.negative(x), np.isnan(x), np.isinf(x),
            np.signbit(x), np.multiply(x, x), np.sqrt(np.abs(x)))


_MORE = ("sign", "heaviside", "copysign", "floor", "ceil", "trunc", "rint", "floor_divide",
         "remainder", "fmod", "reciprocal", "ldexp", "round1", "nan_to_num", "isfinite")
_MORE_SELECT = {"sign", "heaviside", "copysign"}   # NaN bits compared too


def _more(x, y):
    return (snp.sign(x), snp.heaviside(x, y), snp.copysign(x, y), snp.floor(x), snp.ceil(x),
            snp.trunc(x), snp.rint(x), snp.floor_divide(x, y), snp.remainder(x, y),
            snp.fmod(x, y), snp.reciprocal(x), snp.ldexp(x, snp.asarray(np.int32(3))),
            snp.round(x, 1), snp.nan_to_num(x, posinf=1e10, neginf=-3.3), snp.isfinite(x))


def _more_ref(x, y, dt):
    t = dt.type
    # round: numpy_ref rounds ml_dtypes formats in float32, NumPy's float16 in float16 steps
    r1 = np.round(x, 1) if dt == F16 else np.round(x.astype(np.float32), 1).astype(dt)
    return (np.sign(x), np.heaviside(x, y), np.copysign(x, y), np.floor(x), np.ceil(x),
            np.trunc(x), np.rint(x), np.floor_divide(x, y), np.remainder(x, y), np.fmod(x, y),
            np.reciprocal(x), np.ldexp(x, np.int32(3)).astype(dt), r1,
            np.where(np.isnan(x), t(0), np.where(np.isinf(x), np.where(
                x > t(0), t(1e10), t(-3.3)), x)).astype(dt), np.isfinite(x))


def _chain(x, y):
    # each step rounds to the format: (x*y + x) / (y - 0.5), a literal, a float32 detour
    a = (x * y + x) / (y - 0.5)
    b = snp.where(snp.isnan(a), x, a * 0.1)
    c = (x.astype(np.float32) * 3.0 + 1.0).astype(x.dtype)
    return a, b, c, snp.clip(x, -1.3, 2.7)


def _chain_ref(x, y, dt):
    t = dt.type
    a = np.divide(np.add(np.multiply(x, y), x), np.subtract(y, t(0.5)))
    b = np.where(np.isnan(a), x, np.multiply(a, t(0.1)))
    c = (x.astype(np.float32) * np.float32(3) + np.float32(1)).astype(dt)
    return a, b, c, np.minimum(np.maximum(x, t(-1.3)), t(2.7))


_TRANSCENDENTAL = ("exp", "tanh", "sin", "log", "expm1", "arctan")


def _transcendental(x):
    return tuple(getattr(snp, n)(x) for n in _TRANSCENDENTAL) + (snp.tanh(x) * 0.5 + x,)


def _transcendental_ref(x, dt):
    return tuple(getattr(np, n)(x) for n in _TRANSCENDENTAL) + (
        np.add(np.multiply(np.tanh(x), dt.type(0.5)), x),)


def _red_exact(dt, rng, shape):
    """Values whose float32 sums are exact: small multiples of a power of two."""
    v = finite_sorted(dt)
    v = v[(np.abs(v) <= 4) & (np.abs(v) >= 2.0 ** -3)]
    return rng.choice(v, size=shape).astype(dt)


def _reductions(x):
    return (snp.sum(x, axis=0), snp.sum(x, axis=1), snp.sum(x), snp.max(x, axis=1),
            snp.min(x, axis=0), snp.max(x), snp.prod(x[:, :3], axis=1))


class _Case:
    def __init__(self, fn, args):
        self.fn, self.args = fn, [snp.asarray(a) for a in args]
        self.result = None
        self.exe = None


def _build_cases():
    rng = np.random.default_rng(0)
    cases = {}
    for dt in LOWP:
        p = patterns(dt)
        for target in LOWP + (F32, F64, np.dtype(np.bool_)) + INTS:
            if target != dt:
                cases[("widen", dt, target)] = _Case(lambda x, t=target: x.astype(t), [p])
        cases[("narrow", F32, dt)] = _Case(lambda x, t=dt: x.astype(t), [f32_sample(dt, rng)])
        cases[("narrow", F64, dt)] = _Case(lambda x, t=dt: x.astype(t), [f64_sample(dt, rng)])
        for it in INTS:
            cases[("narrow", it, dt)] = _Case(lambda x, t=dt: x.astype(t),
                                             [int_sample(it, dt, rng)])
        cases[("narrow", np.dtype(np.bool_), dt)] = _Case(lambda x, t=dt: x.astype(t),
                                                         [np.array([True, False, True])])
        x, y = _binary_operands(dt, rng)
        cases[("arith", dt)] = _Case(_arith, [x, y])
        cases[("chain", dt)] = _Case(_chain, [x, y])
        cases[("more", dt)] = _Case(_more, [x, y])
        cases[("transcendental", dt)] = _Case(_transcendental, [values(dt)])
        cases[("reduce_exact", dt)] = _Case(_reductions, [_red_exact(dt, rng, (37, 129))])
        # bfloat16 within 2**+-40: numpy_ref's float32 partial sums and products would
        # overflow / underflow where the kernels' double ones do not (documented difference)
        v = values(dt)
        a = np.abs(v.astype(np.float32))
        v = v[((a <= 2.0 ** 40) & (a >= 2.0 ** -40)) | (a == 0) | ~np.isfinite(a)]
        cases[("reduce", dt)] = _Case(_reductions, [v[rng.integers(0, len(v), (53, 67))]])
        # size 0 and 1; the empty max / min give -inf / inf, or the extreme finite values
        # of the formats without inf (float8_e4m3fn: -+448, float4: -+6)
        cases[("sizes", dt)] = _Case(lambda a, b: (
            a * b + a, snp.sum(a, axis=0), reduce_max_p.bind(a, axes=(0,)),
            reduce_min_p.bind(a, axes=(0,)), b * 2.0), [np.zeros((0, 3), dt), values(dt)[3:4]])
        cases[("broadcast", dt)] = _Case(lambda a, b: a * b - a,
                                         [values(dt)[:15].reshape(3, 5), values(dt)[-5:]])
    return cases


@pytest.fixture(scope="module")
def lowp(tmp_path_factory):
    old = {k: os.environ.get(k) for k in ("STARLING_CACHE_DIR", "STARLING_CPP_STRICT")}
    os.environ["STARLING_CACHE_DIR"] = str(tmp_path_factory.mktemp("lowp_kernels"))
    os.environ["STARLING_CPP_STRICT"] = "1"
    try:
        cases = _build_cases()
        progs = []
        for c in cases.values():
            c.prog = run_pipeline(make_ir(c.fn)(*c.args))
            progs.append(c.prog)
        exes = backends.get_backend("cpp").compile_many(progs)
        for c, exe in zip(cases.values(), exes):
            c.exe = exe
            c.result = [np.asarray(r) for r in exe(c.prog.consts, c.args)]
        yield cases
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _native(case):
    """True when every equation of the compiled program is a native kernel."""
    exe = case.exe
    return isinstance(exe, cpp_backend.CppExecutable) and all(
        e.primitive is fused_kernel_p for e in exe.program.eqns)


def assert_bits(got, want, what, nan_bits=True):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    gb, wb = bits(got), bits(want)
    if not nan_bits:
        gn = np.isnan(got.astype(np.float32))
        wn = np.isnan(want.astype(np.float32))
        np.testing.assert_array_equal(gn, wn, err_msg=f"{what}: NaN positions")
        gb, wb = gb[~wn], wb[~wn]
    bad = np.nonzero(gb != wb)[0]
    assert not len(bad), (f"{what}: {len(bad)} of {gb.size} differ, e.g. "
                          f"{[(hex(gb[i]), hex(wb[i])) for i in bad[:6]]}")


def ulp_distance(a, b):
    """|a - b| in units in the last place of their format (both of one low-precision dtype)."""
    n = 8 * a.dtype.itemsize
    sign = 1 << (n - 1) if a.dtype != F4 else 8
    ia, ib = bits(a).astype(np.int64), bits(b).astype(np.int64)
    oa = np.where(ia & sign, -(ia & (sign - 1)), ia)
    ob = np.where(ib & sign, -(ib & (sign - 1)), ib)
    return np.abs(oa - ob)


# ---- conversions ---------------------------------------------------------------------------------

def assert_cast(case, target, what):
    """The compiled, eager and numpy_ref results of the cast program ``case`` equal the exact
    oracle, bit for bit; the program ran as a native kernel."""
    x = np.asarray(case.args[0])
    want = exact_casts.convert_bits(x, target)
    eager = snp.asarray(x).astype(target)
    staged = eval_program(case.prog, case.prog.consts, *case.args)[0]
    for name, got in (("compiled", case.result[0]), ("eager", eager), ("numpy_ref", staged)):
        got = np.asarray(got)
        assert got.dtype == target, (what, name, got.dtype)
        got = got if target.kind in "biu" else bits(got)
        bad = np.nonzero(got != want)[0]
        assert not len(bad), (f"{what} ({name}): {len(bad)} of {got.size} differ, e.g. "
                              f"{[(x[i], hex(bits(x)[i]), got[i], want[i]) for i in bad[:6]]}")
    assert _native(case), f"{what} not native"


@pytest.mark.parametrize("dt", LOWP, ids=IDS)
def test_every_pattern_widens_exactly(lowp, dt):
    for target in LOWP + (F32, F64, np.dtype(np.bool_)) + INTS:
        if target != dt:
            assert_cast(lowp[("widen", dt, target)], target, f"{dt} -> {target}")


@pytest.mark.parametrize("dt", LOWP, ids=IDS)
def test_narrowing_float32_float64_ints_bool_rounds_once(lowp, dt):
    for src in (F32, F64, np.dtype(np.bool_)) + INTS:
        case = lowp[("narrow", src, dt)]
        assert np.asarray(case.args[0]).dtype == src
        assert_cast(case, dt, f"{src} -> {dt}")


def test_samples_reach_the_hard_cases():
    # the float32 sample holds exact halfway points, overflow boundaries and NaN payloads
    x = f32_sample(BF16, np.random.default_rng(0))
    assert np.isin(np.float32(1 + 2 ** -8), x) and np.isin(np.float32(65520), f32_sample(
        F16, np.random.default_rng(0))) and np.isin(np.float32(464), f32_sample(
            E4M3, np.random.default_rng(0)))
    assert (bits(x) == 0x7f800001).any() and (bits(x) == 0x80000000).any()


# ---- arithmetic ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", LOWP, ids=IDS)
def test_arithmetic_comparisons_where_bitwise(lowp, dt):
    case = lowp[("arith", dt)]
    x, y = (np.asarray(a) for a in case.args)
    names = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "fmax", "fmin",
             "less", "equal", "greater_equal", "not_equal", "where", "abs", "negative", "isnan",
             "isinf", "signbit", "square", "sqrt")
    # NaN bits are the reference's wherever the result only selects or flips an operand
    selects = {"maximum", "minimum", "fmax", "fmin", "where", "abs", "negative"}
    for name, got, want in zip(names, case.result, _arith_ref(x, y)):
        assert_bits(got, want, f"{name} {dt}", nan_bits=name in selects)
    assert _native(case)


@pytest.mark.parametrize("dt", LOWP, ids=IDS)
def test_rounding_division_sign_and_replacement_ops_bitwise(lowp, dt):
    case = lowp[("more", dt)]
    x, y = (np.asarray(a) for a in case.args)
    for name, got, want in zip(_MORE, case.result, _more_ref(x, y, dt)):
        assert_bits(got, np.asarray(want), f"{name} {dt}", nan_bits=name in _MORE_SELECT)
    assert _native(case)


@pytest.mark.parametrize("dt", LOWP, ids=IDS)
def test_chains_round_every_step(lowp, dt):
    case = lowp[("chain", dt)]
    x, y = (np.asarray(a) for a in case.args)
    for i, (got, want) in enumerate(zip(case.result, _chain_ref(x, y, dt))):
        assert_bits(got, want, f"chain output {i} {dt}", nan_bits=False)
    assert _native(case)
    # one kernel for the whole chain
    assert len(case.exe.program.eqns) == 1


@pytest.mark.parametrize("dt", LOWP, ids=IDS)
def test_transcendentals_within_one_ulp(lowp, dt):
    case = lowp[("transcendental", dt)]
    x = np.asarray(case.args[0])
    names = _TRANSCENDENTAL + ("tanh(x)*0.5+x",)
    for name, got, want in zip(names, case.result, _transcendental_ref(x, dt)):
        assert got.dtype == want.dtype == dt
        g32, w32 = got.astype(np.float32), want.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(g32), np.isnan(w32), err_msg=f"{name} {dt}")
        ok = ~np.isnan(w32)
        np.testing.assert_array_equal(np.isinf(g32[ok]), np.isinf(w32[ok]), err_msg=name)
        d = ulp_distance(got[ok], want[ok])
        assert d.max(initial=0) <= 1, (name, dt, x[ok][d > 1][:5], got[ok][d > 1][:5],
                                       want[ok][d > 1][:5])
    assert _native(case)


# ---- reductions, sizes ---------------------------------------------------------------------------

@pytest.mark.parametrize("dt", LOWP, ids=IDS)
def test_reductions_match_numpy_ref(lowp, dt):
    for key in (("reduce_exact", dt), ("reduce", dt)):
        case = lowp[key]
        want = eval_program(case.prog, case.prog.consts, *case.args)
        for i, (got, w) in enumerate(zip(case.result, want)):
            w = np.asarray(w)
            if key[0] == "reduce_exact" or i >= 3:   # exact sums, max / min: bit for bit
                assert_bits(got, w, f"{key} output {i}", nan_bits=False)
            else:
                assert got.dtype == w.dtype
                gn, wn = np.isnan(got.astype(np.float32)), np.isnan(w.astype(np.float32))
                np.testing.assert_array_equal(gn, wn)
                assert ulp_distance(got[~wn], w[~wn]).max(initial=0) <= 1, (key, i)
        assert all(e.primitive is fused_kernel_p or e.primitive.name in
                   ("slice", "reshape", "broadcast_in_dim", "squeeze")
                   for e in case.exe.program.eqns), key


@pytest.mark.parametrize("dt", LOWP, ids=IDS)
def test_size_zero_one_and_broadcast(lowp, dt):
    for key in (("sizes", dt), ("broadcast", dt)):
        case = lowp[key]
        want = eval_program(case.prog, case.prog.consts, *case.args)
        for got, w in zip(case.result, want):
            assert_bits(got, np.asarray(w), str(key), nan_bits=False)
    lo, hi = lowp[("sizes", dt)].result[2:4]
    assert lo.shape == (3,) and hi.shape == (3,)
    extreme = np.inf if dt not in (E4M3, F4) else float(ml_dtypes.finfo(dt).max)
    assert (lo.astype(np.float64) == -extreme).all() and (hi.astype(np.float64) == extreme).all()


def test_lowp_dtypes_are_fusible_not_numpy_fallbacks():
    # the policy accepts every format for elementwise work, reductions and casts
    from starling.lowering.backends.cpp import formulas as F
    for dt in LOWP:
        assert F.supported_dtype(dt)
        assert F.render("add", ["a", "b"], [dt, dt], dt, {}) is not None
        assert F.render("convert_element_type", ["a"], [dt], F32, {}) is not None
    policy = cpp_backend.CppPolicy()
    prog = make_ir(lambda x: snp.sum(snp.exp(x) * 2.0))(snp.asarray(np.ones(8, BF16)))
    kinds = [policy.kind(e) for e in prog.eqns]
    assert None not in kinds, [(e.primitive.name, k) for e, k in zip(prog.eqns, kinds)]
