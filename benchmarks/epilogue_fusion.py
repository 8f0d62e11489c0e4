"""Matmul epilogue fusion on the cpp backend: ``relu(x @ W + b)`` fused vs unfused, with peers.

Cases (M x K x N, float32; time per call): ``mlp`` 128 x 784 x 512 (an MLP layer's forward) and
``large`` 4096 x 1024 x 1024. Contenders:

* ``starling-fused``    compiled: one kernel, Starling's GEMM per row block and the bias + relu
                        applied to each block while it is in cache (src/lowering/backends/
                        cpp/gemm.py); ``STARLING_GEMM_BLOCK_BYTES`` sets the block size;
* ``starling-unfused``  the same with ``STARLING_CPP_EPILOGUE=0``: the GEMM, then a fused kernel;
* ``numpy``             ``np.matmul`` (its BLAS) + in-place add / maximum into one buffer;
* ``jax-jit``, ``torch-compile`` when installed (here or in ``$STARLING_PEER_PYTHON``).

Every contender runs in its own process, rounds interleaved (benchmarks/harness.py); per
contender the median and best round and the ratio to ``starling-fused`` (>1: fused is faster);
a contender whose checksum differs is not timed. Run: ``python benchmarks/epilogue_fusion.py
[--quick] [--cases mlp,large]``.
"""
from __future__ import annotations

import os

import numpy as np

import harness

CASES = {"mlp": (128, 784, 512), "large": (4096, 1024, 1024)}
CONTENDERS = ["starling-fused", "starling-unfused", "numpy", "jax-jit", "torch-compile"]
MODULES = {"numpy": "numpy", "jax-jit": "jax", "torch-compile": "torch"}


def data(case):
    M, K, N = CASES[case]
    rng = np.random.default_rng(0)
    return (rng.standard_normal((M, K), dtype=np.float32),
            (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32),
            rng.standard_normal(N, dtype=np.float32))


def make(name, case):
    """run() -> the layer's output as a NumPy array (computed, ready)."""
    xn, wn, bn = data(case)
    if name.startswith("starling"):
        # read when the function is compiled (first call), in this worker process only
        os.environ["STARLING_CPP_EPILOGUE"] = "1" if name == "starling-fused" else "0"
        import starling as st
        import starling.numpy as snp
        f = st.compile(lambda x, w, b: snp.maximum(x @ w + b, 0.0), backend="cpp")
        x, w, b = snp.asarray(xn), snp.asarray(wn), snp.asarray(bn)
        return lambda: np.asarray(f(x, w, b))
    if name == "numpy":
        tmp = np.empty((xn.shape[0], wn.shape[1]), np.float32)

        def run():
            np.matmul(xn, wn, out=tmp)
            np.add(tmp, bn, out=tmp)
            return np.maximum(tmp, 0, out=tmp)
        return run
    if name == "jax-jit":
        import jax
        import jax.numpy as jnp
        jx, jw, jb = jnp.asarray(xn), jnp.asarray(wn), jnp.asarray(bn)
        jf = jax.jit(lambda x, w, b: jnp.maximum(x @ w + b, 0.0))
        return lambda: np.asarray(jax.block_until_ready(jf(jx, jw, jb)))
    if name == "torch-compile":
        import torch
        tx, tw, tb = torch.from_numpy(xn), torch.from_numpy(wn), torch.from_numpy(bn)
        tf = torch.compile(lambda x, w, b: torch.relu(x @ w + b))
        return lambda: tf(tx, tw, tb).numpy()
    raise SystemExit(f"unknown contender {name}")


def worker(name, case):
    harness.serve(make(name, case), lambda out: float(np.asarray(out, np.float64).sum()))


def run_case(case, rounds, round_time):
    contenders = {n: MODULES.get(n) for n in CONTENDERS}
    times = harness.run_interleaved(__file__, case, contenders, rounds, round_time,
                                    "starling-fused")
    M, K, N = CASES[case]
    harness.report(f"{case}: relu(x @ W + b), float32, {M}x{K}x{N}", times, "starling-fused")


def main():
    harness.main(__doc__, CASES, run_case, worker)


if __name__ == "__main__":
    main()
