"""Low-precision elementwise chains on CPU: Starling's cpp kernels vs NumPy / ml_dtypes, numpy_ref,
PyTorch (eager and torch.compile) and JAX (jax.jit), side by side.

Case: 16M-element ``tanh(x)*0.5 + x`` in bfloat16 and in float16 (ms per call), plus the
float8_e4m3fn chain against NumPy. Every contender rounds each operation to the format (NumPy's
float16 loops and ml_dtypes compute in float32 and round each result; PyTorch's eager CPU ops do
the same per op; torch.compile and XLA may keep the fused intermediate in float32, which is
cheaper and a different result). Peers that are not installed are skipped. Timings are the best
of several interleaved rounds. Run: ``python benchmarks/lowp_chain.py [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import sys

import ml_dtypes
import numpy as np

import starling as st
import starling.numpy as snp

N = 1 << 24

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_cpu import interleaved, jax, torch  # noqa: E402  (shared timing + peers)
jnp = None if jax is None else jax.numpy


def chain(x):
    return snp.tanh(x) * 0.5 + x


def bench(dtype, rounds):
    dt = np.dtype(dtype)
    xn = np.random.default_rng(0).normal(size=N).astype(dt)
    x = snp.asarray(xn)
    half = dt.type(0.5)
    cpp = st.compile(chain, backend="cpp")
    ref = st.compile(chain, backend="numpy_ref")
    got = np.asarray(cpp(x))
    want = np.add(np.multiply(np.tanh(xn), half), xn)
    d = np.abs(got.astype(np.float32) - want.astype(np.float32))
    tol = np.abs(want.astype(np.float32)) * float(ml_dtypes.finfo(dt).eps)
    assert (d <= tol).all(), "cpp result off by more than one ulp"
    contenders = {
        "starling cpp": lambda: cpp(x),
        "starling numpy_ref": lambda: ref(x),
        "numpy/ml_dtypes": lambda: np.add(np.multiply(np.tanh(xn), half), xn),
    }
    tdt = {np.dtype(np.float16): "float16", np.dtype(ml_dtypes.bfloat16): "bfloat16"}.get(dt)
    if torch is not None and tdt is not None:
        xt = torch.from_numpy(xn.view(np.int16)).view(getattr(torch, tdt))
        contenders["torch eager"] = lambda: torch.tanh(xt) * 0.5 + xt
        try:
            tc = torch.compile(lambda t: torch.tanh(t) * 0.5 + t)
            tc(xt)
            contenders["torch.compile"] = lambda: tc(xt)
        except Exception as e:  # noqa: BLE001  (no inductor toolchain: skip the peer)
            print(f"  torch.compile skipped: {type(e).__name__}")
    if jax is not None and tdt is not None:
        xj = jnp.asarray(xn)
        jf = jax.jit(lambda t: jnp.tanh(t) * 0.5 + t)
        jf(xj).block_until_ready()
        contenders["jax.jit"] = lambda: jf(xj).block_until_ready()
    best = interleaved(contenders, rounds=rounds)
    ours = best["starling cpp"]
    print(f"{dt.name}: tanh(x)*0.5 + x, {N} elements")
    for name, t in best.items():
        ratio = "" if name == "starling cpp" else f"   {t / ours:6.2f}x starling's time"
        print(f"  {name:20s} {t * 1e3:9.2f} ms{ratio}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    args = ap.parse_args()
    rounds = 2 if args.quick else 5
    for dtype in (ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3fn):
        bench(dtype, rounds)


if __name__ == "__main__":
    main()
