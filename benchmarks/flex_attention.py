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

Every contender runs in its own process (``--worker NAME CASE``, driven over a pipe), rounds
interleaved so background load hits them alike; per contender the median and best round and
the ratio to ``starling-flex`` (>1: flex faster). Each worker first checks a checksum of its
output against the others'. The BlockMask is built once, outside the timing (as in PyTorch).
Peers not importable here run under ``$STARLING_PEER_PYTHON`` (default
/work/venvs/perf/bin/python). Run: ``python benchmarks/flex_attention.py [--quick]
[--cases window,causal]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

CASES = {"window": dict(L=16384, H=1, window=256), "causal": dict(L=4096, H=4, window=None)}
CONTENDERS = {"window": ["starling-flex", "starling-sdpa", "torch-sdpa"],
              "causal": ["starling-flex", "starling-sdpa", "torch-sdpa", "jax-sdpa"]}
PEER_PYTHON = os.environ.get("STARLING_PEER_PYTHON", "/work/venvs/perf/bin/python")
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
    run = make(name, case)
    out = run()
    print(json.dumps({"ready": True, "checksum": float(np.abs(out).astype(np.float64).sum())}),
          flush=True)
    for line in sys.stdin:
        n = int(line)
        t0 = time.perf_counter()
        for _ in range(n):
            run()
        print(json.dumps({"seconds": (time.perf_counter() - t0) / n}), flush=True)


def interpreter(name):
    mod = {"torch-sdpa": "torch", "jax-sdpa": "jax"}.get(name)
    if mod is None:
        return sys.executable
    for py in (sys.executable, PEER_PYTHON):
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", f"import {mod}"], capture_output=True).returncode == 0:
            return py
    return None


class Worker:
    def __init__(self, py, name, case):
        env = dict(os.environ)
        if py != sys.executable:
            env.pop("PYTHONPATH", None)
        self.p = subprocess.Popen([py, os.path.abspath(__file__), "--worker", name, case],
                                  text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env)
        line = self.p.stdout.readline()
        if not line:
            self.p.wait()
            raise RuntimeError(f"worker {name}/{case} failed")
        self.checksum = json.loads(line)["checksum"]

    def time(self, n):
        self.p.stdin.write(f"{n}\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())["seconds"]

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def run_case(case, rounds):
    workers = {}
    for name in CONTENDERS[case]:
        py = interpreter(name)
        if py is None:
            print(f"  ({name}: library not installed, skipped)")
            continue
        try:
            workers[name] = Worker(py, name, case)
        except RuntimeError as e:
            print(f"  ({e}: skipped)")
    sums = {n: w.checksum for n, w in workers.items()}
    ref = sums.get("starling-flex")
    for n, s in sums.items():
        if ref is not None and abs(s - ref) > 1e-3 * abs(ref):
            print(f"  WARNING: {n} checksum {s} differs from starling-flex's {ref}")
    times = {n: [] for n in workers}
    try:
        for _ in range(rounds):
            for n, w in workers.items():
                times[n].append(w.time(1))
    finally:
        for w in workers.values():
            w.close()
    c = CASES[case]
    print(f"\n{case}: B=1, H={c['H']}, L=S={c['L']}, E={E}, float32"
          + (f", window {c['window']}" if c["window"] else ", causal"))
    base = times.get("starling-flex")
    for n, ts in times.items():
        med, best = statistics.median(ts), min(ts)
        ratio = ""
        if base and n != "starling-flex":
            ratio = (f"  flex {med / statistics.median(base):6.2f}x faster "
                     f"(best {best / min(base):6.2f}x)")
        print(f"  {n:14s} median {med * 1e3:9.2f} ms  best {best * 1e3:9.2f} ms{ratio}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", nargs=2, metavar=("NAME", "CASE"))
    ap.add_argument("--quick", action="store_true", help="3 rounds instead of 7")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    if args.worker:
        return worker(*args.worker)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for case in args.cases.split(","):
        run_case(case, 3 if args.quick else 7)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
