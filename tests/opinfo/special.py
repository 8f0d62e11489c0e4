"""OpInfos of starling.scipy.special (src/arrays/ops/special*.py, src/arrays/scipy/special.py).

References are SciPy in float64 rounded once to the input dtype (bool / integers promote to
float32 first, as in JAX), which is what Starling's implementations promise. Operands that
have no derivative (polygamma's order, zeta's exponent) are Python floats in the grad samples,
so check_grads holds them fixed; betainc is checked to first order (its second derivatives in
the shape parameters are not implemented).
"""
import numpy as np
import scipy.special as sc

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.arithmetic import PROMOTED, as_float, cast_values, float_out
from tests.opinfo.inputs import FLOATS, SHAPES, rand

IN = PROMOTED + FLOATS
_TOLS = {"float16": (1e-3, 1e-3), "bfloat16": (8e-3, 1e-2), "float32": (4e-7, 1e-30),
         "float64": (1e-15, 1e-300)}


def sref(fn):
    """``fn`` on float64 copies, rounded once to the (promoted) dtype of the first operand."""
    def ref(*args):
        args = [as_float(a) for a in args]
        dt = next(np.asarray(a).dtype for a in args if isinstance(a, np.ndarray))
        out = fn(*[np.asarray(a).astype(np.float64) for a in args])
        return np.asarray(out).astype(dt)
    ref.__name__ = getattr(fn, "__name__", "ref")
    return ref


def _samples(low, high, edges, n=1):
    def samples(rng, dtype):
        out = [Sample(tuple(rand(rng, s, dtype, low=low, high=high) for _ in range(n)),
                      name=f"[{s}]") for s in SHAPES]
        x = cast_values(edges, dtype)
        if x.size:
            out.append(Sample(tuple(x for _ in range(n)), name="[edge]"))
        return out
    return samples


def _smooth(*ranges, fixed=()):
    """check_grads samples: operand i uniform in ranges[i]; ``fixed`` = {position: value}."""
    def samples(rng, dtype):
        out = []
        for shape in [(3,), (2, 3)]:
            args = [rng.uniform(lo, hi, shape).astype(dtype) for lo, hi in ranges]
            for pos, v in dict(fixed).items():
                args.insert(pos, v)
            out.append(Sample(tuple(args), name=f"[{shape}]"))
        return out
    return samples


def _info(name, fn, samples, grad, nin=1, grad_order=2, f64_rtol=1e-15):
    tols = dict(_TOLS, float64=(f64_rtol, 1e-300))
    return OpInfo(f"scipy.special.{name}", sref(fn), IN, samples, nin=nin, tols=tols,
                  expected_dtype=float_out, grad_samples=grad, grad_order=grad_order)


_EDGE = [0.0, -0.0, 1.0, -1.0, 30.0, -30.0, np.inf, -np.inf, np.nan]
register(
    _info("erf", sc.erf, _samples(-4, 4, _EDGE), _smooth((-2, 2))),
    # erfc, ndtr: Starling's are within 1e-15 of mpmath; SciPy's lose ~x**2 ulps in the tail
    _info("erfc", sc.erfc, _samples(-4, 8, _EDGE), _smooth((-2, 4)), f64_rtol=1e-13),
    _info("erfinv", sc.erfinv, _samples(-1.2, 1.2, [-1.0, 1.0, 0.0, 0.999, np.nan]),
          _smooth((-0.9, 0.9))),
    _info("erfcx", sc.erfcx, _samples(-5, 50, _EDGE), _smooth((-2, 20))),
    _info("ndtr", sc.ndtr, _samples(-10, 10, _EDGE), _smooth((-5, 5)), f64_rtol=3e-13),
    _info("ndtri", sc.ndtri, _samples(-0.1, 1.1, [0.0, 1.0, 0.5, 1e-30, np.nan]),
          _smooth((0.05, 0.95)), f64_rtol=1e-14),   # Wichura's AS 241, not SciPy's
    _info("log_ndtr", sc.log_ndtr, _samples(-40, 10, _EDGE), _smooth((-20, 5))),
    _info("gammaln", sc.gammaln, _samples(-5, 30, _EDGE + [-2.0, 0.5]), _smooth((0.2, 10))),
    _info("digamma", sc.psi, _samples(-5, 30, _EDGE + [-2.0, 0.5]), _smooth((0.2, 10))),
    _info("i0e", sc.i0e, _samples(-30, 30, _EDGE), _smooth((0.1, 5))),
    _info("i1e", sc.i1e, _samples(-30, 30, _EDGE), _smooth((-5, 5))),
    _info("logit", sc.logit, _samples(-0.2, 1.2, [0.0, 1.0, 0.5, np.nan]),
          _smooth((0.05, 0.95))),
    _info("expit", sc.expit, _samples(-40, 40, _EDGE), _smooth((-5, 5))),
    _info("entr", sc.entr, _samples(-1, 5, [0.0, -0.0, 1.0, -1.0, np.inf, np.nan]),
          _smooth((0.1, 3))),
    _info("gammainc", sc.gammainc, _samples(0, 12, [0.0, 1.0, np.inf, np.nan], 2),
          _smooth((0.3, 5), (0.2, 6)), nin=2),
    _info("gammaincc", sc.gammaincc, _samples(0, 12, [0.0, 1.0, np.inf, np.nan], 2),
          _smooth((0.3, 5), (0.2, 6)), nin=2),
    _info("betaln", sc.betaln, _samples(0, 12, [0.0, 1.0, np.inf, np.nan], 2),
          _smooth((0.3, 5), (0.2, 6)), nin=2),
    _info("xlogy", sc.xlogy, _samples(-2, 3, [0.0, 1.0, -1.0, np.inf, np.nan], 2),
          _smooth((-2, 2), (0.2, 3)), nin=2),
    _info("xlog1py", sc.xlog1py, _samples(-2, 3, [0.0, 1.0, -1.0, np.inf, np.nan], 2),
          _smooth((-2, 2), (-0.5, 3)), nin=2),
    _info("betainc", sc.betainc, _samples(0, 1, [0.0, 1.0, 0.5, np.nan], 3),
          _smooth((0.3, 5), (0.3, 5), (0.1, 0.9)), nin=3, grad_order=1),
    _info("betaincc", sc.betaincc, _samples(0, 1, [0.0, 1.0, 0.5, np.nan], 3),
          _smooth((0.3, 5), (0.3, 5), (0.1, 0.9)), nin=3, grad_order=1),
    _info("polygamma", sc.polygamma,
          lambda rng, dt: [Sample((np.array([0, 1, 2, 3], dt), rand(rng, (4,), dt, low=0.2,
                                                                        high=9)), name="[n]")],
          _smooth((0.3, 6), fixed={0: 2.0}), nin=2),
    _info("zeta", sc.zeta, _samples(1, 8, [1.0, 2.0, np.inf, np.nan], 2),
          _smooth((0.3, 6), fixed={0: 3.0}), nin=2),
)
