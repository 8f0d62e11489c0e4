"""Complex elementary functions decomposed into real formulas (complex_math.py) and run by the
cpp backend's fused C++ kernels, against numpy_ref (eager), NumPy itself and mpmath.

Inputs: a grid of hard values in each part (0, -0, +-1, +-inf, nan, 1e+-300 / 1e+-38, 710,
points next to 1), random points in hard regions (whole exponent range, near the unit circle,
near the branch points +-1 and +-i, near the axes, large real parts) and a hypothesis sweep.
Every function of a dtype is compiled in one program, and all programs as one shared object.

Tolerances, per part (the real and imaginary parts are compared separately):

* special values: exactly the class of the reference: NaN, +inf, -inf, +0.0, -0.0, finite;
* ``log``, ``sqrt``, ``sin``, ..., ``arctanh``, ``exp``, ``exp2``, ``log2``, ``log10``: 10 ulps
  of the part (NumPy calls glibc's ``clog`` ...; the kernels use other formulas and the vector
  math library: both are within 5 ulps of the exact value, see the mpmath test);
* ``log1p``, ``expm1`` (NumPy's own formulas, which cancel): 10 ulps of the terms' magnitude
  (``max(|part|, 1)`` for ``Re log1p``; ``|expm1(x) cos y| + 2 sin^2(y/2)`` for ``Re expm1``);
* ``pow``: 10 ulps of ``max(|part|, |result| * (1 + |b| (|log|a|| + pi)))``: the rounding of
  ``b log a`` is amplified by that much in ``exp(b log a)``;
* ``sign``: 2 ulps (``z / hypot``: glibc's ``hypot`` is within 0.51 ulp, the kernels' correctly
  rounded); ``rint``, ``round``, ``nan_to_num``: exact.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hs

import starling as st
import starling.numpy as snp
from starling.lowering import backends, cache
from starling.lowering.backends.cpp import backend as cpp_backend
from starling.lowering.fused import fused_kernel_p
from starling.lowering.passes.complex_decompose import complex_decompose
from starling.lowering.pipeline import run_pipeline
from starling.transforms.stage import make_ir

pytestmark = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")

ANNEX_G = ("log", "log2", "log10", "sqrt", "exp", "exp2", "sin", "cos", "tan", "sinh", "cosh",
           "tanh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh")
FUNCS = ANNEX_G + ("log1p", "expm1", "sign", "rint")
DTYPES = (np.complex64, np.complex128)
ULPS = 10
N_HYP = 16


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(cpp_kernel_env):
    yield


# ---- inputs --------------------------------------------------------------------------------------

def _real(dt):
    return np.float64 if np.dtype(dt) == np.complex128 else np.float32


def _grid(dt):
    big, tiny = (1e300, 1e-300) if np.dtype(dt) == np.complex128 else (1e38, 1e-38)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -2.0, np.inf, -np.inf, np.nan, big, -big, tiny, -tiny,
            3.0, 1e-8, 0.999999, 1.0000001, 710.0, -710.0, 90.0, 30.0]
    return np.array([complex(a, b) for a in vals for b in vals], dt)


def _hard(dt, n=300, seed=0):
    rng = np.random.default_rng(seed)
    emax = 300 if np.dtype(dt) == np.complex128 else 37

    def sgn():
        return rng.choice([-1.0, 1.0], n)

    def mag(lo, hi):
        return sgn() * 10 ** rng.uniform(lo, hi, n)
    theta = rng.uniform(0, 2 * np.pi, n)
    r = 1 + mag(-16, -1)
    parts = [mag(-emax, emax) + 1j * mag(-emax, emax),           # whole exponent range
             rng.normal(size=n) * 3 + 1j * rng.normal(size=n) * 3,
             r * np.cos(theta) + 1j * r * np.sin(theta),           # near |z| = 1
             mag(-3, 3) + 1j * mag(-emax, -5),                     # near the real axis
             mag(-emax, -5) + 1j * mag(-3, 3),                     # near the imaginary axis
             sgn() * rng.uniform(0, 800 if emax == 300 else 100, n) + 1j * mag(-3, 3)]
    for c in (1, -1, 1j, -1j):                                     # near the branch points
        parts.append(c + mag(-12, 0) + 1j * mag(-12, 0))
    return np.concatenate(parts).astype(dt)


def _points(dt):
    return np.concatenate([_grid(dt), _hard(dt)])


def _pow_inputs(dt, n=2000, seed=1):
    vals = [0.0, -0.0, 1.0, -1.0, 2.0, -3.0, 0.5, np.inf, -np.inf, np.nan, 4.0, -5.0]
    bases = np.array([complex(a, b) for a in vals for b in vals], dt)
    exps = np.array([complex(a, b) for a in vals + [7.0, -7.0, 99.0, -99.0, 100.0, 2.5, -1.5]
                     for b in (0.0, -0.0, 1.0, np.nan, np.inf)], dt)
    rng = np.random.default_rng(seed)
    a = (rng.normal(size=n) * 2 + 1j * rng.normal(size=n) * 2).astype(dt)
    b = (rng.normal(size=n) * 2 + 1j * rng.normal(size=n) * 2).astype(dt)
    b[::3] = b[::3].real                                 # real exponents
    b[1::3] = np.round(b[1::3].real * 10)                # integer exponents (repeated squaring)
    return (np.concatenate([np.repeat(bases, len(exps)), a]),
            np.concatenate([np.tile(exps, len(bases)), b]))


# ---- the programs, compiled once -----------------------------------------------------------------

def _unary(z):
    return [getattr(snp, n)(z) for n in FUNCS]


def _power(a, b):
    return a ** b


def _parts(z):
    return (snp.round(z, 1), snp.round(z, -1), snp.round(z), snp.rint(z * 2.5),
            snp.nan_to_num(z), snp.nan_to_num(z, nan=1.5, posinf=2.0, neginf=-3.0))


def _grad_loss(z):
    w = (snp.log(z) * snp.sin(z) + snp.sqrt(z) * z ** 2.5 + snp.arctanh(z * 0.3)
         + snp.tanh(z) + snp.expm1(z) * snp.log1p(z))
    return snp.sum(snp.real(w * snp.conj(w))) + snp.sum(snp.imag(snp.arccos(z)))


def _mixed(a, b, empty, one):
    """Broadcasting, literal operands, size-0 and size-1 arrays, control-flow bodies."""
    c = st.switch(0, [lambda v: snp.sqrt(v) * snp.log(v), lambda v: v], a * b)
    _, d = st.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, snp.tanh(s[1]) + 0.5j),
                         (0, one))
    return (a ** b, (1.5 - 0.5j) ** b, snp.log(empty), snp.arcsin(one),
            snp.sum(snp.log(snp.transpose(a * b)), axis=1), c, d)


def _mixed_inputs(dt):
    rng = np.random.default_rng(4)
    return ((rng.normal(size=(3, 1)) + 1j * rng.normal(size=(3, 1))).astype(dt),
            (rng.normal(size=(1, 5)) + 1j * rng.normal(size=(1, 5))).astype(dt),
            np.zeros((0, 3), dt), np.full((1, 1), 0.3 + 0.2j, dt))


def _grad_inputs(dt):
    rng = np.random.default_rng(3)
    return ((rng.normal(size=7) + 1j * rng.normal(size=7)).astype(dt),)


def _specs():
    out = {}
    for dt in DTYPES:
        d = np.dtype(dt).name
        out[("unary", d)] = (_unary, (_points(dt),))
        out[("pow", d)] = (_power, _pow_inputs(dt))
        out[("parts", d)] = (_parts, (_points(dt),))
    # one dtype each (the per-dtype formulas are covered above; this keeps the compile short)
    out[("grad", "complex128")] = (st.grad(_grad_loss), _grad_inputs(np.complex128))
    out[("mixed", "complex64")] = (_mixed, _mixed_inputs(np.complex64))
    return out


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def compiled(_cache_dir):
    """key -> (executable, staged Program), every program compiled in one compiler run;
    key "log" -> the messages of the ``starling.lowering`` logger meanwhile."""
    specs = _specs()
    progs = {k: run_pipeline(make_ir(f)(*[snp.asarray(x) for x in args]))
             for k, (f, args) in specs.items()}
    for name in FUNCS + ("pow", "round", "nan_to_num"):
        cpp_backend._REPORTED.discard(name)     # report a fallback again if there is one
    logger = logging.getLogger("starling.lowering")
    records, level = _Records(), logger.level
    logger.addHandler(records)
    logger.setLevel(logging.DEBUG)   # fallbacks log at DEBUG unless STARLING_LOG_FALLBACKS
    try:
        exes = backends.get_backend("cpp").compile_many(list(progs.values()))
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    out = {k: (e, progs[k]) for k, e in zip(progs, exes)}
    out["log"] = records.messages
    return out


def _run(compiled, key, *arrays):
    exe, prog = compiled[key]
    return [np.asarray(o) for o in exe(prog.consts, [snp.asarray(a) for a in arrays])]


# ---- comparison ----------------------------------------------------------------------------------

def _classes(v, tiny):
    """0 NaN, 1 +inf, 2 -inf, 3 +0.0, 4 -0.0, 5 finite nonzero; values within ``tiny`` of 0
    count as signed zeros (a result at the underflow threshold may round to 0 on one side)."""
    zero = np.abs(v) <= tiny
    return np.select([np.isnan(v), np.isposinf(v), np.isneginf(v), zero & ~np.signbit(v), zero],
                     [0, 1, 2, 3, 4], 5)


def check(got, want, *, ulps=ULPS, scale=(None, None), inputs=(), what=""):
    """Per part: same class as ``want`` (NaN, +-inf, +-0, finite) and within ``ulps`` ulps of
    ``max(|want|, scale)`` (``ulps=0``: equal)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape,
                                                                  got.dtype, want.dtype)
    ft = np.float64 if got.dtype.itemsize == 16 else np.float32
    for part, sc, name in ((np.real, scale[0], "re"), (np.imag, scale[1], "im")):
        g, w = part(got).astype(np.float64), part(want).astype(np.float64)
        tiny = ulps * float(np.finfo(ft).smallest_subnormal)
        bad = _classes(g, tiny) != _classes(w, tiny)
        both = np.isfinite(g) & np.isfinite(w)
        mag = np.abs(w) if sc is None else np.maximum(np.abs(w), sc)
        with np.errstate(all="ignore"):
            unit = np.maximum(np.spacing(np.minimum(mag, np.finfo(ft).max).astype(ft)),
                              np.finfo(ft).smallest_subnormal).astype(np.float64)
            bad |= both & (np.abs(g - w) > ulps * unit)
        if bad.any():
            idx = np.flatnonzero(bad)[:8]
            rows = [f"  {tuple(np.asarray(x).ravel()[i] for x in inputs)}: got {got.ravel()[i]!r}"
                    f" want {want.ravel()[i]!r}" for i in idx]
            raise AssertionError(f"{what} ({name}): {bad.sum()} of {bad.size} differ\n"
                                 + "\n".join(rows))


def _ulps(name):
    return {"rint": 0, "sign": 2}.get(name, ULPS)


def _scales(name, z):
    """``scale`` for ``check`` (see the module docstring)."""
    x, y = z.real.astype(np.float64), z.imag.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "log1p":
            return 1.0, None
        if name == "expm1":
            return np.abs(np.expm1(x) * np.cos(y)) + 2 * np.sin(y / 2) ** 2, None
    return None, None


def _pow_scale(a, b, want):
    a, b, w = (np.asarray(v).astype(np.complex128) for v in (a, b, want))
    with np.errstate(all="ignore"):
        cond = 1 + np.abs(b) * (np.abs(np.log(np.abs(a))) + np.pi)
        s = np.where(np.isfinite(cond), np.abs(w) * cond, 0.0)
    return s, s


def _eager(fn, *arrays):
    out = fn(*[snp.asarray(a) for a in arrays])
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


# ---- the tests -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_functions_match_numpy_ref_on_hard_inputs(compiled, dt):
    z = _points(dt)
    got = _run(compiled, ("unary", np.dtype(dt).name), z)
    want = _eager(_unary, z)
    for name, g, w in zip(FUNCS, got, want):
        check(g, w, ulps=_ulps(name), scale=_scales(name, z), inputs=(z,),
              what=f"{name} {np.dtype(dt).name}")


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_functions_match_numpy_directly(compiled, dt):
    z = _points(dt)
    got = _run(compiled, ("unary", np.dtype(dt).name), z)
    finite = np.isfinite(z)
    for name, g in zip(FUNCS, got):
        with np.errstate(all="ignore"):
            w = getattr(np, name)(z)
        keep = finite if name == "expm1" else slice(None)   # see expm1's C99 rule in Starling
        check(g[keep], w[keep], ulps=_ulps(name),
              scale=tuple(s if s is None or np.ndim(s) == 0 else s[keep]
                          for s in _scales(name, z)), inputs=(z[keep],), what=name)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_power_matches_numpy_ref(compiled, dt):
    a, b = _pow_inputs(dt)
    (got,) = _run(compiled, ("pow", np.dtype(dt).name), a, b)
    (want,) = _eager(_power, a, b)
    check(got, want, scale=_pow_scale(a, b, want), inputs=(a, b), what="pow")
    with np.errstate(all="ignore"):
        check(got, np.power(a, b), scale=_pow_scale(a, b, want), inputs=(a, b), what="np.power")


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_partwise_functions_are_exact(compiled, dt):
    z = _points(dt)
    for g, w in zip(_run(compiled, ("parts", np.dtype(dt).name), z), _eager(_parts, z)):
        check(g, w, ulps=0, inputs=(z,), what="round / rint / nan_to_num")


def _component(dt):
    width = 64 if np.dtype(dt) == np.complex128 else 32
    special = hs.sampled_from([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan])
    return hs.one_of(hs.floats(width=width), hs.floats(-4, 4, width=width), special)


def _complexes(dt):
    c = _component(dt)
    return hs.lists(hs.builds(complex, c, c), min_size=N_HYP, max_size=N_HYP).map(
        lambda v: np.array(v, dt))


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_hypothesis_sweep(compiled, dt):
    # drawn values replace the first N_HYP inputs of the compiled programs (no recompilation)
    name = np.dtype(dt).name
    points, (pa, pb) = _points(dt), _pow_inputs(dt)

    @given(_complexes(dt), _complexes(dt))
    def sweep(z, w):
        zs = points.copy()
        zs[:N_HYP] = z
        got = _run(compiled, ("unary", name), zs)
        for fn, g, e in zip(FUNCS, got, _eager(_unary, z)):
            check(g[:N_HYP], e, ulps=_ulps(fn), scale=_scales(fn, z), inputs=(z,), what=fn)
        b = np.where(np.arange(N_HYP) % 2 == 0, np.round(w.real), w).astype(dt)  # integers too
        a_s, b_s = pa.copy(), pb.copy()
        a_s[:N_HYP], b_s[:N_HYP] = z, b
        g = _run(compiled, ("pow", name), a_s, b_s)[0][:N_HYP]
        (e,) = _eager(_power, z, b)
        # exp(b log a) with |b log a| huge: the angle is noise; only its finiteness is meaningful
        with np.errstate(all="ignore"):
            ok = (np.abs(b) * (np.abs(np.log(np.abs(z))) + np.pi) < 1e3) | ~np.isfinite(b * z)
        check(g[ok], e[ok], scale=tuple(s[ok] for s in _pow_scale(z, b, e)),
              inputs=(z[ok], b[ok]), what="pow")
    sweep()


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_arccosh_of_zero_plus_i_nan_ignores_the_nan_sign(compiled, dt):
    # found by the sweep: acosh(+-0 + i nan) = nan + i pi/2 (C library, NumPy), also when the
    # NaN has its sign bit set (the rule "sign of Im z" must not read a NaN's sign)
    name = np.dtype(dt).name
    zs = _points(dt).copy()
    zs[:4] = np.array([complex(0.0, np.nan), complex(0.0, -np.nan), complex(-0.0, -np.nan),
                       complex(-0.0, np.nan)], dt)
    assert np.signbit(zs[1].imag) and not np.signbit(zs[0].imag)
    got = _run(compiled, ("unary", name), zs)[FUNCS.index("arccosh")][:4]
    assert np.isnan(got.real).all()
    np.testing.assert_array_equal(got.imag, np.full(4, np.pi / 2, np.dtype(dt).type(0).real.dtype))


def test_accuracy_against_mpmath(compiled):
    mp = pytest.importorskip("mpmath")
    mp.mp.prec = 300
    ref = {"log": mp.log, "sqrt": mp.sqrt, "exp": mp.exp, "sin": mp.sin, "cos": mp.cos,
           "tan": mp.tan, "sinh": mp.sinh, "cosh": mp.cosh, "tanh": mp.tanh, "arcsin": mp.asin,
           "arccos": mp.acos, "arctan": mp.atan, "arcsinh": mp.asinh, "arccosh": mp.acosh,
           "arctanh": mp.atanh}
    z = _points(np.complex128)
    got = dict(zip(FUNCS, _run(compiled, ("unary", "complex128"), z)))
    # mpmath has no signed zeros (stay off the axes, where the branch cuts lie) and works to a
    # precision relative to |z| (keep both parts within a factor 1e15 of each other)
    ar, ai = np.abs(z.real), np.abs(z.imag)
    with np.errstate(all="ignore"):
        pick = np.flatnonzero(np.isfinite(z) & (ar > 0) & (ai > 0) & (np.abs(z) < 1e30)
                              & (np.abs(z) > 1e-30) & (ar / ai < 1e15) & (ai / ar < 1e15))[::5]
    for name, fn in ref.items():
        for i in pick:
            g = got[name][i]
            if not np.isfinite(g):
                continue
            exact = fn(mp.mpc(z[i].real, z[i].imag))
            for gp, ep in ((g.real, exact.real), (g.imag, exact.imag)):
                ep = float(ep)
                unit = max(np.spacing(abs(ep)), np.finfo(np.float64).smallest_subnormal)
                assert abs(gp - ep) <= 5 * unit, (name, z[i], g, complex(exact))


def test_the_pass_decomposes_every_function():
    zs = snp.asarray(np.array([1 + 2j, -1 - 0j, 3j], np.complex64))

    def f(z):
        return _unary(z) + [z ** z, z ** 2.5, z ** 3, snp.round(z, 2), snp.nan_to_num(z)]
    prog = complex_decompose(run_pipeline(make_ir(f)(zs)))
    left = [e.primitive.name for e in prog.eqns
            if e.primitive.name not in ("real", "imag", "complex_pack")
            and any(np.dtype(v.aval.dtype).kind == "c" for v in e.invars + e.outvars)]
    assert left == []


def test_no_numpy_fallback_is_logged(compiled):
    assert not [m for m in compiled["log"] if "through NumPy" in m]
    for key in compiled:
        if key[0] in ("unary", "pow", "parts", "grad"):
            exe = compiled[key][0]
            assert {e.primitive for e in exe.program.eqns} == {fused_kernel_p}, key
    # GCC merges sin(v) and cos(v) into a sincos call, which it cannot vectorise: the formulas
    # never take both of one value (complex_math.sin_beside_cos)
    with open(compiled[("unary", "complex128")][0].library_path, "rb") as f:
        assert b"sincos" not in f.read()


def test_reduce_prod_of_complex_runs_through_numpy(caplog):
    # documented limitation (complex_decompose.py): the running complex product is kept whole
    cpp_backend._REPORTED.discard("reduce_prod")
    z = snp.asarray(np.array([[1 + 2j, -1 - 0j, 3j], [0.5j, 2, np.inf + 1j]], np.complex64))
    with caplog.at_level(logging.DEBUG, logger="starling.lowering"):
        fn = st.compile(lambda z: snp.prod(snp.sqrt(z), axis=1), backend="cpp")
        check(np.asarray(fn(z)), np.asarray(snp.prod(snp.sqrt(z), axis=1)))
    assert any("runs reduce_prod through NumPy" in r.getMessage() for r in caplog.records)


def test_grad_of_complex_program_matches_numpy_ref(compiled):
    (z,) = _grad_inputs(np.complex128)
    (got,) = _run(compiled, ("grad", "complex128"), z)
    want = np.asarray(st.grad(_grad_loss)(snp.asarray(z)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.max(np.abs(want)))


def test_shapes_literals_and_control_flow(compiled):
    args = _mixed_inputs(np.complex64)
    got, want = _run(compiled, ("mixed", "complex64"), *args), _eager(_mixed, *args)
    ab = args[0] * args[1]
    for i, (g, w) in enumerate(zip(got, want)):
        # compositions: parts relative to the modulus; powers also to the conditioning of
        # exp(b log a); the sum of logs to the terms
        s = np.abs(w) * (50 if i < 2 else 1)
        if i == 4:
            s = np.sum(np.abs(np.log(ab)), axis=0)
        check(g, w, scale=(s, s), what=f"output {i}")


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_arccosh_of_infinity_with_negative_nan_imaginary_part(dt):
    # acos(inf -+ i nan) is nan +- i inf by the NaN's sign bit; acosh's real part must stay +inf
    # (the principal branch has Re >= 0), as NumPy / the C library give
    ft = np.float32 if dt == np.complex64 else np.float64
    nan = np.array(np.nan, ft)
    neg_nan = np.copysign(nan, -1.0)
    z = np.zeros(9, dt)
    z.real[:] = [np.inf, -np.inf, np.inf, -np.inf, 0.0, 2.0, 1.0, -0.5, np.nan]
    z.imag[:] = [neg_nan, neg_nan, nan, nan, neg_nan, -0.0, -0.0, -3.0, neg_nan]
    got = np.asarray(st.compile(snp.arccosh)(snp.asarray(z)))
    want = np.arccosh(z)
    np.testing.assert_array_equal(np.isnan(got.real), np.isnan(want.real))
    np.testing.assert_array_equal(np.isnan(got.imag), np.isnan(want.imag))
    ok = ~np.isnan(want.real)
    np.testing.assert_allclose(got.real[ok], want.real[ok], rtol=4 * np.finfo(ft).eps)
    assert (np.signbit(got.real[ok]) == np.signbit(want.real[ok])).all()
    ok = ~np.isnan(want.imag)
    np.testing.assert_allclose(got.imag[ok], want.imag[ok], rtol=4 * np.finfo(ft).eps)
    assert (np.signbit(got.imag[ok]) == np.signbit(want.imag[ok])).all()
