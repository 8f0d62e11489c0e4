"""OpInfos of starling.lax names (resolved as ``lax.<name>``; src/arrays/lax/).

References are independent of Starling: a bit count per element through Python's ``bin``,
repeated multiplication in float64 / wrapped integer arithmetic, and NumPy's
``logaddexp.accumulate``. Wider coverage (gather / scatter, windows, convolutions) is in
tests/test_lax_surface.py and tests/test_lax_windows.py against loop references.
"""
import numpy as np

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import INTS, rand


def _popcount_ref(x):
    bits = x.view(f"u{x.dtype.itemsize}").reshape(-1)
    return np.array([bin(int(v)).count("1") for v in bits], x.dtype).reshape(x.shape)


def _samples(shapes, **kw):
    def make(rng, dt):
        return [Sample((np.asarray(rand(rng, s, dt)),), dict(kw), name=f"[{s}]") for s in shapes]
    return make


def _pow_ref(x, y):
    out = np.ones_like(x)
    for _ in range(abs(y)):
        out = out * x
    return 1 / out if y < 0 else out


def _pow_samples(rng, dt):
    out = []
    for y in (0, 1, 2, 3, 6) + ((-2,) if np.dtype(dt).kind == "f" else ()):
        x = np.asarray(rand(rng, (3, 4), dt, low=-2, high=2, special=False))
        out.append(Sample((x, y), name=f"[y={y}]"))
    out.append(Sample((np.asarray(rand(rng, (0, 3), dt)), 3), name="[empty]"))
    return out


def _cumlse_samples(rng, dt):
    out = [Sample((np.asarray(rand(rng, s, dt)),), {"axis": a}, name=f"[{s} axis={a}]")
           for s, a in (((5,), 0), ((3, 4), 1), ((3, 4), -2), ((1,), 0), ((0, 2), 0))]
    out.append(Sample((np.array([-np.inf, 0.0, 700.0, 700.0, -np.inf], dt),), {"axis": 0},
                      name="[-inf, large]"))
    return out


def _cumlse_ref(x, axis=0):
    return np.logaddexp.accumulate(x, axis=axis)


def _finite(rng, dt):
    return [s for s in _cumlse_samples(rng, dt)[:-1]
            if np.all(np.isfinite(s.args[0]))] + [
        Sample((rng.normal(size=(3, 4)).astype(dt),), {"axis": 1}, name="[normal]")]


register(
    OpInfo("lax.population_count", _popcount_ref, INTS,
           _samples([(), (1,), (0,), (5,), (3, 4)]), differentiable=False),
    OpInfo("lax.integer_pow", _pow_ref, (np.int32, np.int64, np.uint8, np.float32, np.float64),
           _pow_samples, rtol=1e-6, atol=1e-6),
    OpInfo("lax.cumlogsumexp", _cumlse_ref, (np.float32, np.float64), _cumlse_samples,
           rtol=1e-6, atol=1e-6, grad_samples=_finite),
)
