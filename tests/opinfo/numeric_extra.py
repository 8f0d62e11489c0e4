"""OpInfos of the numeric extras (differences.py, interpolation.py, set_ops.py, histograms.py,
convolution.py, covariance.py, polynomials.py) whose shapes are static, so the generated sweep
(NumPy reference, staged == eager, check_grads, vmap vs loop) applies. References are NumPy.
"""
import numpy as np

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import rand

INTS = (np.int8, np.int32, np.uint8, np.int64)
REALS = (np.int32, np.float32, np.float64)
NUM = (np.int32, np.float32, np.float64, np.complex64, np.complex128)
FLOAT_C = (np.float32, np.float64, np.complex128)


def _same_dtype(dt, sample):
    return dt


def _float_of(dt, sample):
    return np.dtype(dt) if np.dtype(dt).kind in "fc" else np.dtype(np.float32)


def diff_samples(rng, dt):
    out = [Sample((rand(rng, s, dt),), kw, name=f"[{s} {kw}]") for s, kw in [
        ((7,), {}), ((7,), {"n": 2}), ((3, 4), {"axis": 0}), ((3, 4), {"n": 3, "axis": -1}),
        ((1,), {}), ((0,), {}), ((2, 0), {"axis": 1}), ((4,), {"n": 0})]]
    x = rand(rng, (3, 4), dt)
    out.append(Sample((x,), {"prepend": rand(rng, (3, 1), dt), "append": rand(rng, (3, 2), dt)},
                      name="[pre/append]"))
    return out


def conv_samples(rng, dt):
    out = []
    for n, m in [(6, 3), (3, 6), (5, 5), (1, 4), (7, 1), (2, 2)]:
        for mode in ("full", "same", "valid"):
            # complex inf * 0 parts differ between summation orders: specials for reals only
            a = rand(rng, (n,), dt, special=np.dtype(dt).kind != "c")
            out.append(Sample((a, rand(rng, (m,), dt, special=False)),
                              {"mode": mode}, name=f"[{n},{m} {mode}]"))
    return out


def polyval_samples(rng, dt):
    return [Sample((rand(rng, (k,), dt, special=False), rand(rng, s, dt)), name=f"[{k} {s}]")
            for k, s in [(4, (5,)), (1, (3, 2)), (3, ()), (0, (4,)), (6, (0,))]]


def vander_samples(rng, dt):
    return [Sample((rand(rng, (n,), dt, special=False),), kw, name=f"[{n} {kw}]")
            for n, kw in [(4, {}), (3, {"N": 5}), (5, {"N": 2, "increasing": True}), (0, {}),
                          (1, {"N": 0})]]


def trapezoid_samples(rng, dt):
    y = rand(rng, (3, 5), dt)
    x = np.sort(rand(rng, (5,), np.float64, special=False)).astype(dt)
    return [Sample((y,), {}, name="[dx]"), Sample((y,), {"dx": 0.5, "axis": 0}, name="[axis0]"),
            Sample((y, x), {}, name="[x]"), Sample((rand(rng, (1,), dt),), {}, name="[1]"),
            Sample((rand(rng, (2, 0), dt),), {}, name="[empty]")]


def interp_samples(rng, dt):
    xp = np.sort(rand(rng, (6,), dt, special=False))
    xp[2] = xp[3]  # a repeated sample point
    fp = rand(rng, (6,), dt, special=False)
    x = np.concatenate([rand(rng, (6,), dt), xp[:3]]).astype(dt)
    return [Sample((x, xp, fp), name="[hard]"),
            Sample((rand(rng, (2, 3), dt), xp, fp), {"left": -9.0, "right": 9.0}, name="[lr]"),
            Sample((x, xp[:1], fp[:1]), name="[one point]")]


def isin_samples(rng, dt):
    t = np.array([0, 2, 2, 3, 1]).astype(dt)
    return [Sample((rand(rng, (3, 4), dt), t), name="[2d]"),
            Sample((rand(rng, (6,), dt), rand(rng, (7,), dt)), {"invert": True}, name="[inv]"),
            Sample((rand(rng, (4,), dt), np.zeros((0,), dt)), name="[empty test]")]


def digitize_samples(rng, dt):
    bins = np.sort(np.array([-2, 0, 0, 1, 3]).astype(dt))
    return [Sample((rand(rng, (3, 4), dt), bins), {"right": r}, name=f"[right={r}]")
            for r in (False, True)] + [Sample((rand(rng, (5,), dt), bins[:1]), name="[1 bin]")]


def unwrap_samples(rng, dt):
    p = np.cumsum(rng.uniform(-5, 5, size=(3, 8)), axis=1).astype(dt)
    return [Sample((p,), {}, name="[default]"), Sample((p,), {"axis": 0, "discont": 4.0},
                                                     name="[axis0]"),
            Sample((p,), {"period": 3.0}, name="[period]"), Sample((p[:, :1],), name="[1]")]


def cov_samples(rng, dt):
    x = rand(rng, (3, 6), dt, special=False)
    return [Sample((x,), name="[3x6]"), Sample((x,), {"ddof": 0}, name="[ddof0]"),
            Sample((x, rand(rng, (6,), dt, special=False)), name="[y]"),
            Sample((x[0],), name="[1 var]"), Sample((x.T,), {"rowvar": False}, name="[cols]")]


register(
    OpInfo("diff", np.diff, (np.bool_,) + INTS + FLOAT_C, diff_samples,
           expected_dtype=_same_dtype),
    OpInfo("convolve", np.convolve, NUM, conv_samples, nin=2, tols={"float32": (1e-5, 1e-5)}),
    OpInfo("correlate", np.correlate, NUM, conv_samples, nin=2, tols={"float32": (1e-5, 1e-5)}),
    OpInfo("polyval", np.polyval, NUM, polyval_samples, nin=2, tols={"float32": (1e-5, 1e-5)}),
    # integers keep their dtype (JAX); NumPy widens them to int64
    OpInfo("vander", np.vander, NUM, vander_samples, expected_dtype=_same_dtype),
    OpInfo("trapezoid", np.trapezoid, FLOAT_C, trapezoid_samples, expected_dtype=_float_of),
    OpInfo("interp", np.interp, (np.float32, np.float64), interp_samples, nin=3,
           sorted_args=(1,), expected_dtype=_same_dtype),
    OpInfo("isin", np.isin, REALS + (np.complex128,), isin_samples, nin=2,
           differentiable=False),
    OpInfo("digitize", np.digitize, REALS, digitize_samples, nin=2, differentiable=False,
           sorted_args=(1,)),
    OpInfo("unwrap", np.unwrap, (np.float32, np.float64), unwrap_samples,
           tols={"float32": (1e-5, 1e-5)}),
    OpInfo("cov", np.cov, (np.float64, np.complex128), cov_samples, nin=1),
)
