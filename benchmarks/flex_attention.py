"""Flex attention on CPU (forward, float32): Starling's block-sparse native kernel vs dense
attention, and vs PyTorch's / JAX's fused SDPA.

Cases (time per call):
  window   sliding window of 256 keys (causal) over 16k tokens, B=1, H=1, E=64 (1.6% of the
           pairs): ``flex_attention`` with a BlockMask vs dense masked attention (Starling's
           ``scaled_dot_product_attention`` and torch's SDPA with a boolean (L, S) mask).
           Target: flex >= 10x faster than dense masked attention. (H=1: the dense
           contenders hold (H, L, S) scores, 1 GiB per head.)
  causal   full causal attention over 4096 tokens, B=1, H=4, E=64: flex_attention with a
           causal BlockMask vs torch SDPA (is_causal, its fused CPU kernel), jax.jit's
           ``dot_product_attention`` and Starling's SDPA. Target: within 1.5x of torch.

Every contender runs in its own process, rounds interleaved (benchmarks/harness.py); per
contender the median and best round and the ratio to ``starling-flex`` (>1: flex faster); a
contender whose output checksum differs from flex's is not timed. The BlockMask is built once,
outside the timing (as in PyTorch). Run: ``python benchmarks/flex_attention.py [--quick]
[--cases window,causal]``.
"""
from __future__ import annotations

import numpy as np

import harness

CASES = {"window": dict(L=16384, H=1, window=256), "causal": dict(L=4096, H=4, window=None)}
CONTENDERS = {"window": ["starling-flex", "starling-sdpa", "torch-sdpa"],
              "causal": ["starling-flex", "starling-sdpa", "torch-sdpa", "jax-sdpa"]}
MODULES = {"torch-sdpa": "torch", "jax-sdpa": "jax"}
E = 64


def data(case):
    c = CASES[case]
    rng = np.random.default_rng(0)
    return [rng.standard_normal((1, c["H"], c["L"], E)).astype(np.float32) for _ in range(3)]


def dense_mask(case):
    c = CASES[case]
    i = np.arange(c["L"])[:, None]
    j = np.arange(c["L"])[None, :]
    return (i >= j) & (i - j < c["window"])


def make(name, case):
    """run() -> the output as a NumPy array (computed, ready)."""
    q, k, v = data(case)
    window = CASES[case]["window"]
    if name.startswith("starling"):
        import starling.numpy as snp
        from starling.nn import functional as F
        q, k, v = (snp.asarray(x) for x in (q, k, v))
        if name == "starling-flex":
            L = q.shape[2]
            if window is None:
                def mod(b, h, i, j):
                    return i >= j
            else:
                def mod(b, h, i, j):
                    return (i >= j) & (i - j < window)
            bm = F.create_block_mask(mod, None, None, L, L)
            return lambda: np.asarray(F.flex_attention(q, k, v, block_mask=bm))
        if window is None:
            return lambda: np.asarray(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        m = snp.asarray(dense_mask(case))
        return lambda: np.asarray(F.scaled_dot_product_attention(q, k, v, attn_mask=m))
    if name == "torch-sdpa":
        import torch
        q, k, v = (torch.from_numpy(x) for x in (q, k, v))
        sdpa = torch.nn.functional.scaled_dot_product_attention
        if window is None:
            return lambda: sdpa(q, k, v, is_causal=True).numpy()
        m = torch.from_numpy(dense_mask(case))
        return lambda: sdpa(q, k, v, attn_mask=m).numpy()
    if name == "jax-sdpa":
        import jax
        import jax.numpy as jnp
        # jax's layout is (B, L, H, E)
        q, k, v = (jnp.asarray(np.swapaxes(x, 1, 2)) for x in (q, k, v))
        f = jax.jit(lambda a, b, c: jax.nn.dot_product_attention(a, b, c, is_causal=True))
        return lambda: np.swapaxes(np.asarray(jax.block_until_ready(f(q, k, v))), 1, 2)
    raise SystemExit(f"unknown contender {name}")


def worker(name, case):
    harness.serve(make(name, case), lambda out: np.abs(out).astype(np.float64).sum())


def run_case(case, rounds, round_time):
    contenders = {n: MODULES.get(n) for n in CONTENDERS[case]}
    times = harness.run_interleaved(__file__, case, contenders, rounds, round_time,
                                    "starling-flex")
    c = CASES[case]
    harness.report(f"{case}: B=1, H={c['H']}, L=S={c['L']}, E={E}, float32"
                   + (f", window {c['window']}" if c["window"] else ", causal"),
                   times, "starling-flex")


def main():
    harness.main(__doc__, CASES, run_case, worker, quick=(3, 0.0), full=(7, 0.0))


if __name__ == "__main__":
    main()
