"""check_grads on the differentiable elementwise ops over hypothesis-drawn shapes and dtypes
(float32 / float64 / complex128 inputs; check_grads itself differentiates in float64)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as hst

import starling.numpy as snp
from starling.core.primitive import Primitive
from starling.test_util import check_grads
from tests.opinfo import REGISTRY, resolve
import tests.opinfo.families  # noqa: F401

def _all_float_args(info):
    samples = info.samples(np.random.default_rng(0), np.dtype(np.float64))
    return bool(samples) and all(isinstance(a, np.ndarray) and a.dtype.kind == "f"
                                 for a in samples[0].args)


ELEMENTWISE = sorted({
    info.name for info in REGISTRY
    if info.differentiable and not info.eager_only and info.nin in (1, 2)
    and np.dtype(np.float64) in {np.dtype(d) for d in info.dtypes}
    and getattr(Primitive.registry.get(info.name), "family", None) == "elementwise"
    and _all_float_args(info)
})


def _domain_values(rng, shape, dtype):
    # (0.2, 0.8) is inside the domain of every elementwise op (log, arcsin, arctanh, ...)
    # except arccosh, which is shifted into (1.2, 1.8) below.
    v = rng.uniform(0.2, 0.8, size=shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.uniform(0.2, 0.8, size=shape)
    return v.astype(dtype)


@pytest.mark.parametrize("name", ELEMENTWISE)
@settings(max_examples=8, deadline=None)
@given(shape=hst.lists(hst.integers(1, 3), min_size=0, max_size=2).map(tuple),
       dtype=hst.sampled_from([np.float32, np.float64, np.complex128]),
       seed=hst.integers(0, 2 ** 16))
def test_check_grads_elementwise(name, shape, dtype, seed):
    info = next(i for i in REGISTRY if i.name == name)
    if np.dtype(dtype) not in {np.dtype(d) for d in info.dtypes}:
        return
    rng = np.random.default_rng(seed)
    op = resolve(name)
    args = [_domain_values(rng, shape, dtype) for _ in range(info.nin)]
    if name in ("arccosh", "acosh"):
        args = [a + 1.0 for a in args]
    out = np.asarray(op(*[snp.asarray(a) for a in args]))
    if not np.all(np.isfinite(out.astype(np.complex128))):
        return
    check_grads(op, args, order=2, atol=1e-4, rtol=1e-4)
