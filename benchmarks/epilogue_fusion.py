"""Matmul epilogue fusion on the cpp backend: ``relu(x @ W + b)`` fused vs unfused, with peers.

For each size (M x K x N, float32) it times, interleaved round by round (best of the rounds):

* ``starling fused``    the cpp backend with epilogue fusion: one kernel, BLAS per row block and
                        the bias + relu applied to each block while it is in cache;
* ``starling unfused``  the same with ``STARLING_CPP_EPILOGUE=0``: np.matmul then a fused kernel;
* ``starling fused, <bytes> blocks`` other block sizes (``cpp_gemm.BLOCK_BYTES``), with
  ``--blocks``;
* ``numpy`` (``np.matmul`` + in-place add / maximum), ``jax.jit`` and ``torch.compile`` when
  installed.

Prints ms per call and ratios against ``starling fused`` (>1: fused is faster).
Run: ``python benchmarks/epilogue_fusion.py [--quick] [--blocks]``.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import starling as st
import starling.numpy as snp
from starling.lowering.backends import cpp_gemm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_cpu import interleaved, jax, jnp, table, torch, _torch_compile  # noqa: E402

SIZES = ((128, 784, 512), (4096, 1024, 1024))


def layer(x, w, b):
    return snp.maximum(x @ w + b, 0.0)


def _compiled(fused, block_bytes=None):
    os.environ["STARLING_CPP_EPILOGUE"] = "1" if fused else "0"
    old = cpp_gemm.BLOCK_BYTES
    if block_bytes:
        cpp_gemm.BLOCK_BYTES = block_bytes
    try:
        f = st.compile(layer, backend="cpp")
        return f
    finally:
        cpp_gemm.BLOCK_BYTES = old
        os.environ.pop("STARLING_CPP_EPILOGUE", None)


def bench(M, K, N, rounds, blocks):
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((M, K), dtype=np.float32)
    wn = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
    bn = rng.standard_normal(N, dtype=np.float32)
    x, w, b = snp.asarray(xn), snp.asarray(wn), snp.asarray(bn)
    want = np.maximum(xn.astype(np.float64) @ wn + bn, 0)
    res = {}
    variants = {"starling fused": _compiled(True), "starling unfused": _compiled(False)}
    if blocks:
        for nb in (1 << 20, 4 << 20):
            variants[f"starling fused, {nb >> 10} KiB blocks"] = _compiled(True, nb)
    for name, f in variants.items():
        f(x, w, b)   # compile now, with this variant's settings
        np.testing.assert_allclose(np.asarray(f(x, w, b)), want, rtol=1e-3, atol=1e-3)
        res[name] = (lambda f=f: f(x, w, b))
    tmp = np.empty((M, N), np.float32)

    def numpy_layer():
        np.matmul(xn, wn, out=tmp)
        np.add(tmp, bn, out=tmp)
        return np.maximum(tmp, 0, out=tmp)
    res["numpy (in place)"] = numpy_layer
    if jax is not None:
        jx, jw, jb = jnp.asarray(xn), jnp.asarray(wn), jnp.asarray(bn)
        jf = jax.jit(lambda x, w, b: jnp.maximum(x @ w + b, 0.0))
        res["jax.jit"] = lambda: jf(jx, jw, jb).block_until_ready()
    if torch is not None:
        tx, tw, tb = torch.from_numpy(xn), torch.from_numpy(wn), torch.from_numpy(bn)
        tf = _torch_compile(lambda x, w, b: torch.relu(x @ w + b), tx, tw, tb)
        if tf is not None:
            res["torch.compile"] = lambda: tf(tx, tw, tb)
    return interleaved(res, rounds, min_time=0.3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--blocks", action="store_true", help="also time other block sizes")
    args = ap.parse_args()
    rounds = 3 if args.quick else 7
    lib = cpp_gemm.blas()
    print(f"matmul epilogue fusion (cpu count {os.cpu_count()}; BLAS "
          f"{lib.symbol if lib else 'none'}; block {cpp_gemm.BLOCK_BYTES >> 10} KiB)")
    for M, K, N in SIZES:
        r = bench(M, K, N, rounds, args.blocks)
        table(f"relu(x @ W + b), float32, {M}x{K}x{N}", r, "ms", 1e3)


if __name__ == "__main__":
    main()
