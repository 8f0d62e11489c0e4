"""Primitives of ordinary use that the cpp backend runs natively instead of through NumPy:
erf / erfc (C's erf / erfc, vectorised by libmvec), argmax / argmin (a reduction kernel with
NumPy's semantics), reductions over non-adjacent axes; and the fallback log (DEBUG unless
STARLING_LOG_FALLBACKS=1). References: mpmath / scipy.special for erf, NumPy for argmax."""
from __future__ import annotations

import logging
import pathlib

import ml_dtypes
import mpmath
import numpy as np
import pytest
import scipy.special
from hypothesis import given
from hypothesis import strategies as hs

import starling as st
import starling.numpy as snp
from starling.lowering import backends, cache
from starling.lowering.backends.cpp import backend as cpp_backend
from starling.lowering.backends.cpp import codegen as cpp_codegen, formulas as cpp_formulas
from starling.lowering.fused import fused_kernel_p
from starling.lowering.fused_matmul import fused_matmul_p
from starling.lowering.pipeline import run_pipeline
from starling.nn.functional import erf, erfc, gelu
from starling.transforms.stage import make_ir

pytestmark = [pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler"),
              pytest.mark.usefixtures("cpp_kernel_env")]


def cpp(f):
    return st.compile(f, backend="cpp")


def _native(f, *args):
    """The compiled Program runs nothing through NumPy: its equations are kernels, or views
    and copies whose NumPy implementation is the native path."""
    prog = cpp(f).lower(*args).executable.program
    return all(e.primitive in (fused_kernel_p, fused_matmul_p)
               or e.primitive.name in cpp_backend._NATIVE_BY_DESIGN for e in prog.eqns)


# ---- erf / erfc ----------------------------------------------------------------------------------

def _hard_inputs(dt):
    fi = np.finfo(dt)
    special = [0.0, fi.tiny, fi.smallest_subnormal, 1e-30, 1e-8, 0.46875, 0.5, 1.0, 2.0, 3.65,
               4.0, 4.01, 6.0, 9.0, 9.5, 10.0, 10.05, 15.0, 26.0, 26.6, 27.2, 28.0, 1e10, fi.max]
    rng = np.random.default_rng(0)
    x = np.concatenate([special, rng.uniform(-6, 6, 400), rng.uniform(-30, 30, 200),
                        np.exp(rng.uniform(-60, 3, 200))])
    return np.concatenate([x, -x]).astype(dt)


def _mp(fn, x):
    mpmath.mp.prec = 120
    # |x| >= 1e3: erf is +-1 and erfc 0 or 2 in every float format
    return np.array([float(fn(mpmath.mpf(float(np.clip(v, -1e3, 1e3))))) for v in x])


def _ulps(got, want, dt):
    spacing = np.maximum(np.spacing(np.abs(want.astype(dt))).astype(np.float64),
                         np.finfo(dt).smallest_subnormal)
    return np.where(got.astype(np.float64) == want, 0.0,
                    np.abs(got.astype(np.float64) - want) / spacing)


# Measured with libmvec (glibc 2.36) against mpmath on these inputs: float32 erf 3.9 ulp (near
# |x| = 3.65, where the result rounds to +-1), erfc 1.3 ulp; float64 erf and erfc 2 ulp
# (also in erfc's subnormal range, where scipy.special.erfc underflows to 0 too early).
MAX_ULP = {("erf", np.float32): 5, ("erfc", np.float32): 2, ("erf", np.float64): 3,
           ("erfc", np.float64): 3}


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_erf_erfc_native_and_accurate(name, dt):
    fn, ref = {"erf": (erf, mpmath.erf), "erfc": (erfc, mpmath.erfc)}[name]
    x = _hard_inputs(dt)
    xs = snp.asarray(x)
    assert _native(fn, xs)
    got = np.asarray(cpp(fn)(xs))
    assert got.dtype == dt
    want = _mp(ref, x)
    assert _ulps(got, want, dt).max() <= MAX_ULP[(name, dt)]
    if dt == np.float32:   # float64 scipy.special is accurate far beyond float32's rounding
        assert _ulps(got, getattr(scipy.special, name)(x.astype(np.float64)), dt).max() <= \
            MAX_ULP[(name, dt)]
    # special values exactly as the eager (NumPy) result: signed zeros, limits, NaN
    sx = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dt)
    c, e = np.asarray(cpp(fn)(snp.asarray(sx))), np.asarray(fn(snp.asarray(sx)))
    np.testing.assert_array_equal(c, e)
    np.testing.assert_array_equal(np.signbit(c[:4]), np.signbit(e[:4]))


def test_erf_uses_the_vector_math_library():
    if not any(n == "erff" for n, _, _ in cpp_formulas.mvec_functions()):
        pytest.skip("no vector erf in this machine's libmvec")
    x = snp.asarray(np.linspace(-4, 4, 1 << 12, dtype=np.float32))
    low = cpp(lambda v: erf(v) * 0.5 + erfc(v)).lower(x)
    with open(low.executable.library_path, "rb") as f:
        binary = f.read()
    assert b"v_erff" in binary and b"v_erfcf" in binary


def test_exact_gelu_compiles_natively():
    x = snp.asarray(np.linspace(-8, 8, 2001, dtype=np.float32))
    assert _native(lambda v: gelu(v), x)
    xd = np.linspace(-8, 8, 2001)
    want = xd * 0.5 * scipy.special.erfc(-xd / np.sqrt(2))
    np.testing.assert_allclose(np.asarray(cpp(gelu)(x)), want, rtol=2e-6, atol=1e-7)
    g = cpp(st.grad(lambda v: snp.sum(gelu(v))))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(st.grad(lambda v: snp.sum(gelu(v)))(x)),
                               rtol=1e-5, atol=1e-6)


# ---- argmax / argmin -----------------------------------------------------------------------------

def _check_args(cases):
    """Compiles ``argmax`` / ``argmin`` for every (x, axis, keepdims, name) case in ONE
    compiler run and compares each with NumPy on the same values; every program must run
    natively."""
    progs, arrays = [], []
    for x, axis, keepdims, name in cases:
        fn = getattr(snp, name)
        xs = snp.asarray(x)
        progs.append(run_pipeline(make_ir(
            lambda v, fn=fn, axis=axis, kd=keepdims: fn(v, axis=axis, keepdims=kd))(xs)))
        arrays.append(xs)
    exes = backends.get_backend("cpp").compile_many(progs)
    for (x, axis, keepdims, name), exe, prog, xs in zip(cases, exes, progs, arrays):
        (got,) = exe(prog.consts, [xs])
        got = np.asarray(got)
        # low-precision floats compare as their float32 values (exact)
        ref = x.astype(np.float32) if x.dtype in (ml_dtypes.bfloat16, np.float16) else x
        want = getattr(np, name)(ref, axis=axis, keepdims=keepdims)
        assert got.dtype == np.int64 and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"{name} axis={axis} {x.dtype}")
        assert all(e.primitive in (fused_kernel_p, fused_matmul_p)
                   or e.primitive.name in cpp_backend._NATIVE_BY_DESIGN
                   for e in exe.program.eqns), exe.program


HARD = np.array([[1.0, 3.0, 3.0, -np.inf, np.nan, 3.0, np.nan],
                 [-np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf],
                 [np.inf, np.inf, 0.0, -0.0, 0.0, -1.0, np.inf],
                 [np.nan, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                 [0.0, -0.0, 0.0, -0.0, 0.0, 0.0, 0.0]])
NAMES = ("argmax", "argmin")


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16],
                         ids=["float32", "float64", "float16", "bfloat16"])
def test_argmax_argmin_hard_floats(dt):
    # NaN: the first NaN wins; ties (+-0 too): the first index; only -inf (argmax) / inf: 0
    arrays = [HARD.astype(dt), HARD.T.astype(dt), np.full((3, 4), -np.inf, dt),
              np.full((3, 4), np.inf, dt)]
    _check_args([(x, axis, kd, name) for x in arrays for axis in (None, 0, 1, -1)
                 for kd in (False, True) for name in NAMES])


@pytest.mark.parametrize("dt", [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.uint64])
def test_argmax_argmin_integers_and_bool(dt):
    rng = np.random.default_rng(1)
    if dt is np.bool_:
        x, low = rng.random((6, 9)) > 0.7, False
    else:
        info = np.iinfo(dt)
        x, low = rng.choice(np.array([info.min, info.max, 0, 1], dtype=dt), (6, 9)), info.min
    # all equal to the accumulator's initial value: index 0
    flat = np.full((2, 5), low, dt)
    _check_args([(a, axis, False, name) for a in (x, flat) for axis in (None, 0, 1)
                 for name in NAMES])


def test_argmax_argmin_size_one_axes_and_ranks():
    rng = np.random.default_rng(2)
    cases = []
    for shape, axis in [((1, 7), 0), ((7, 1), 1), ((1,), 0), ((), None), ((3, 1, 4), 1),
                        ((2, 3, 4, 5), 2), ((2, 3, 4, 5), 0), ((2, 3, 4, 5), None)]:
        x = rng.integers(0, 3, shape).astype(np.float32)   # many ties
        cases += [(x, axis, kd, name) for kd in (False, True) for name in NAMES]
    _check_args(cases)


def test_argmax_of_an_empty_axis_raises_like_eager():
    x = snp.asarray(np.zeros((3, 0), np.float32))
    with pytest.raises(ValueError, match="empty"):
        cpp(lambda v: snp.argmax(v, axis=1))(x)
    assert np.asarray(cpp(lambda v: snp.argmax(v, axis=0))(x)).shape == (0,)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_argmax_large_row_and_column_kernels(monkeypatch, parallel, axis):
    if parallel:   # force the OpenMP structures (over kept elements only)
        monkeypatch.setattr(cpp_codegen, "PARALLEL_WORK", 0)
    rng = np.random.default_rng(3)
    x = rng.integers(-50, 50, (301, 1037)).astype(np.float32)
    x[rng.integers(0, 301, 40), rng.integers(0, 1037, 40)] = np.nan
    _check_args([(x, axis, False, name) for name in NAMES])


def test_argmax_fuses_with_its_producer_and_in_a_matmul_epilogue():
    rng = np.random.default_rng(4)
    x = snp.asarray(rng.standard_normal((3000, 64)).astype(np.float32))
    w = snp.asarray(rng.standard_normal((64, 10)).astype(np.float32))
    b = snp.asarray(rng.standard_normal(10).astype(np.float32))

    def pred(x, w, b):
        return snp.argmax(x @ w + b, axis=-1)
    low = cpp(pred).lower(x, w, b)
    assert [e.primitive for e in low.executable.program.eqns] == [fused_matmul_p]
    logits = np.asarray(x) @ np.asarray(w) + np.asarray(b)
    np.testing.assert_array_equal(np.asarray(cpp(pred)(x, w, b)), np.argmax(logits, axis=-1))
    # over the rows of the product (a reduction across GEMM row blocks): still right
    rows = cpp(lambda x, w: snp.argmin(x @ w, axis=0))(x, w)
    np.testing.assert_array_equal(np.asarray(rows), np.argmin(np.asarray(x @ w), axis=0))
    # mean accuracy, as the notebooks compute it: one kernel after the product
    y = snp.asarray(rng.integers(0, 10, 3000))
    acc = cpp(lambda x, w, b, y: snp.mean(pred(x, w, b) == y))(x, w, b, y)
    assert float(acc) == pytest.approx(np.mean(np.argmax(logits, -1) == np.asarray(y)))


@given(hs.lists(hs.integers(1, 6), min_size=1, max_size=4), hs.data())
def test_argmax_argmin_match_numpy_hypothesis(shape, data):
    n = int(np.prod(shape))
    vals = data.draw(hs.lists(hs.sampled_from([0.0, 1.0, -1.0, 2.0, np.nan, np.inf, -np.inf]),
                              min_size=n, max_size=n))
    x = np.array(vals, np.float32).reshape(shape)
    axis = data.draw(hs.one_of(hs.none(), hs.integers(-len(shape), len(shape) - 1)))
    _check_args([(x, axis, data.draw(hs.booleans()), name) for name in NAMES])


# ---- reductions over non-adjacent axes ---------------------------------------------------------

@pytest.mark.parametrize("axes", [(0, 2, 3), (0, 2), (1, 3), (0, 3), (0, 1, 3)])
def test_reductions_over_non_adjacent_axes_are_one_kernel(axes):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 5, 6)).astype(np.float32)

    def f(v):   # the batch-norm statistics of NCHW: per channel over (N, H, W)
        return snp.sum(v * 2.0, axis=axes), snp.max(v, axis=axes), snp.mean(v * v, axis=axes)
    xs = snp.asarray(x)
    assert _native(f, xs)
    s, m, q = cpp(f)(xs)
    np.testing.assert_allclose(np.asarray(s), (x * 2).sum(axis=axes), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(m), x.max(axis=axes))
    np.testing.assert_allclose(np.asarray(q), (x * x).mean(axis=axes), rtol=1e-5)


# ---- the fallback log ----------------------------------------------------------------------------

def _spacing_fallback(caplog, level):
    # float16 spacing is defined on its bit patterns: it stays NumPy's
    cpp_backend._REPORTED.discard("spacing")
    x = snp.asarray(np.ones(4, np.float16))
    with caplog.at_level(level, logger="starling.lowering"):
        cpp(lambda v: snp.spacing(v) + 1)(x)
    return [r for r in caplog.records if "runs spacing through NumPy" in r.getMessage()]


def test_fallbacks_log_at_debug_by_default(caplog, monkeypatch):
    monkeypatch.delenv("STARLING_LOG_FALLBACKS", raising=False)
    recs = _spacing_fallback(caplog, logging.DEBUG)
    assert [r.levelno for r in recs] == [logging.DEBUG]
    caplog.clear()
    assert _spacing_fallback(caplog, logging.INFO) == []   # a notebook shows nothing


def test_fallbacks_visible_with_starling_log_fallbacks(caplog, monkeypatch):
    monkeypatch.setenv("STARLING_LOG_FALLBACKS", "1")
    assert [r.levelno for r in _spacing_fallback(caplog, logging.INFO)] == [logging.WARNING]
    monkeypatch.setenv("STARLING_LOG_FALLBACKS", "0")
    caplog.clear()
    assert _spacing_fallback(caplog, logging.INFO) == []


# ---- ordinary use logs no fallback: the digits example and the notebooks' code -----------------

_RUN_LOGGED = r"""
import json, logging, os, sys
os.environ.setdefault("MPLBACKEND", "Agg")
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="LOG %(levelname)s %(message)s")
for name in ("matplotlib", "PIL", "asyncio"):
    logging.getLogger(name).setLevel(logging.WARNING)
if sys.argv[1] == "digits":
    from starling.examples import digits
    digits.main(sys.argv[2:])
else:
    nb = json.load(open(sys.argv[2]))
    ns = {"__name__": "__main__"}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), sys.argv[2], "exec"), ns)
# the log is live: float16 spacing (defined on its bit patterns) does run through NumPy
import numpy as np, starling as st, starling.numpy as snp
st.compile(snp.spacing, backend="cpp")(snp.asarray(np.ones(3, np.float16)))
print("finished")
"""


def _fallbacks_logged(*argv):
    import os
    import subprocess
    import sys
    env = dict(os.environ, STARLING_LOG_FALLBACKS="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    env.pop("STARLING_CPP_STRICT", None)   # as a user runs it
    out = subprocess.run([sys.executable, "-c", _RUN_LOGGED, *argv], env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and "finished" in out.stdout, out.stderr[-3000:]
    found = [ln for ln in out.stderr.splitlines() if "through NumPy" in ln]
    assert found[-1:] == ["LOG WARNING starling.lowering: cpp backend runs spacing through NumPy"]
    return found[:-1]


@pytest.mark.parametrize("style", ["function", "module"])
def test_digits_example_logs_no_fallback(style):
    assert _fallbacks_logged("digits", "--style", style, "--epochs", "1", "--no-progress") == []


NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_code_logs_no_fallback(path):
    assert _fallbacks_logged("notebook", str(path)) == []
