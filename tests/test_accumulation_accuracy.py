"""Accumulations in low precision stay within a few ulps of the float64 result over 2^25
elements (float32 / bfloat16 / float16), eagerly and compiled: sum, mean, var, logsumexp,
cumsum, cumprod."""
import numpy as np
import pytest
import scipy.special as sps

import starling as st
import starling.numpy as snp

N = 2 ** 25
ULPS = 4


def _data(dtype):
    rng = np.random.default_rng(0)
    x = rng.random(N, dtype=np.float32)
    if dtype == np.float16:
        x = x * np.float32(1e-3)                 # the sums stay below float16's max (65504)
    return x.astype(dtype)


def _check(name, got, want, dtype):
    eps = float(snp.finfo(dtype).eps)
    got = np.asarray(got).astype(np.float64)
    err = np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-300))
    assert err <= ULPS * eps, f"{name} {np.dtype(dtype).name}: relative error {err:.3g} = " \
                              f"{err / eps:.1f} ulps"


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, snp.bfloat16, np.float16],
                         ids=["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_long_accumulations_are_accurate(dtype, compiled):
    x = _data(dtype)
    x64 = x.astype(np.float64)
    xs = snp.asarray(x)
    run = st.compile if compiled else (lambda f: f)
    picks = np.array([N // 3, N // 2, N - 1])
    _check("sum", run(snp.sum)(xs), x64.sum(), dtype)
    _check("mean", run(snp.mean)(xs), x64.mean(), dtype)
    # var of the data above would be subnormal in float16: a spread of +-1 instead
    v = (x64 * (1 / x64.max()) * 2 - 1).astype(dtype)
    _check("var", run(snp.var)(snp.asarray(v)), v.astype(np.float64).var(), dtype)
    _check("logsumexp", run(snp.logsumexp)(xs), sps.logsumexp(x64), dtype)
    _check("cumsum", np.asarray(run(snp.cumsum)(xs))[picks], np.cumsum(x64)[picks], dtype)
    # factors near 1 keep the running product in range
    f = (1 + (x64 - x64.mean()) * 1e-4).astype(dtype)
    _check("cumprod", np.asarray(run(snp.cumprod)(snp.asarray(f)))[picks],
           np.cumprod(f.astype(np.float64))[picks], dtype)
