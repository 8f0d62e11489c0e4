"""Sharding on one machine: 2 in-process devices vs 1, and collective bandwidth.

Cases (float32):
  (a) matmul    4096 x 4096 @ 4096 x 4096, rows of x split over 2 devices (w replicated), one
                thread per device (Starling's pool and BLAS), vs the same compiled matmul on 1 device with 1 BLAS
                thread (target: >= 1.6x)                                         (ms per call)
  (b) mlp       training step of the 784-512-512-10 MLP (batch 256, value_and_grad + SGD),
                data parallel over 2 devices vs 1 device                        (steps/s)
  (c) allreduce shard_map psum of 64 MiB per device over 2 devices, as a fraction of a memory
                copy of the same bytes (np.copyto) (target: >= 50%)              (GB/s)

Every configuration runs in its own process (the device count is fixed per process); the
driver interleaves the rounds of the processes so that background load hits them alike, and
prints the best round of each with ratios. Run: ``python benchmarks/sharding.py [--quick]``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

WORKER = textwrap.dedent('''
    import json, sys, time
    import numpy as np
    import starling as st, starling.numpy as snp
    from starling.sharding import NamedSharding, P, make_mesh, distribute
    from starling import lax

    case, ndev = sys.argv[1], int(sys.argv[2])

    def setup():
        rng = np.random.default_rng(0)
        if case == "matmul":
            n = 4096
            x = snp.asarray(rng.standard_normal((n, n), dtype=np.float32))
            w = snp.asarray(rng.standard_normal((n, n), dtype=np.float32))
            f = st.compile(lambda x, w: x @ w)
            if ndev > 1:
                mesh = make_mesh((ndev,), ("data",))
                x = distribute(x, NamedSharding(mesh, P("data", None)))
                w = distribute(w, NamedSharding(mesh, P()))
            return lambda: f(x, w).block_until_ready(), 2.0 * n ** 3
        if case == "mlp":
            sizes, batch = (784, 512, 512, 10), 256
            params = [(snp.asarray(rng.standard_normal((m, k), dtype=np.float32) * 0.05),
                       snp.zeros((k,))) for m, k in zip(sizes[:-1], sizes[1:])]
            x = snp.asarray(rng.standard_normal((batch, sizes[0]), dtype=np.float32))
            y = snp.asarray(rng.integers(0, 10, batch))
            def loss(params, x, y):
                h = x
                for i, (w, b) in enumerate(params):
                    h = h @ w + b
                    if i < len(params) - 1:
                        h = st.nn.functional.relu(h)
                return st.nn.functional.cross_entropy(h, y)
            def step(params, x, y):
                l, g = st.value_and_grad(loss)(params, x, y)
                return st.tree.map(lambda p, d: p - 0.01 * d, params, g), l
            if ndev > 1:
                mesh = make_mesh((ndev,), ("data",))
                rep = NamedSharding(mesh, P())
                psh = st.tree.map(lambda _: rep, params)
                x = distribute(x, NamedSharding(mesh, P("data", None)))
                y = distribute(y, NamedSharding(mesh, P("data")))
                params = st.device_put(params, psh)
                f = st.compile(step, out_shardings=(psh, None))
            else:
                f = st.compile(step)
            state = [params]
            def run():
                state[0], l = f(state[0], x, y)
                l.block_until_ready()
            return run, None
        if case == "allreduce":
            n = (64 << 20) // 4
            if ndev == 0:   # the memory copy baseline
                src = np.ones(n, np.float32)
                dst = np.empty_like(src)
                return lambda: np.copyto(dst, src), 2.0 * src.nbytes
            mesh = make_mesh((ndev,), ("i",))
            x = distribute(snp.ones((ndev * n,)), NamedSharding(mesh, P("i")))
            f = st.compile(st.shard_map(lambda b: lax.psum(b, "i"), mesh, in_specs=P("i"),
                                        out_specs=P("i")))
            # bytes each device reads and writes: its input and its result
            return lambda: f(x).block_until_ready(), 2.0 * n * 4
        raise SystemExit(f"unknown case {case}")

    run, work = setup()
    run(); run()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        k = int(line)
        t0 = time.perf_counter()
        for _ in range(k):
            run()
        print(json.dumps({"seconds": (time.perf_counter() - t0) / k, "work": work}), flush=True)
''')


def start(case, ndev, blas_threads=1):
    # one thread per device: Starling's pool (its GEMM and kernels; each device thread gets
    # pool size // devices) and BLAS alike, so 2 devices vs 1 measures the sharding
    env = dict(os.environ, STARLING_NUM_CPU_DEVICES=str(max(ndev, 1)),
               STARLING_NUM_THREADS=str(max(ndev, 1)),
               OPENBLAS_NUM_THREADS=str(blas_threads), OMP_NUM_THREADS=str(max(ndev, 1)))
    p = subprocess.Popen([sys.executable, "-c", WORKER, case, str(ndev)], env=env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = p.stdout.readline()
    if not line:
        raise RuntimeError(f"worker {case}/{ndev} failed to start")
    return p


def measure(procs, rounds, reps):
    best = {k: float("inf") for k in procs}
    work = {}
    for _ in range(rounds):
        for name, p in procs.items():
            p.stdin.write(f"{reps[name]}\n")
            p.stdin.flush()
            r = json.loads(p.stdout.readline())
            best[name] = min(best[name], r["seconds"])
            work[name] = r["work"]
    for p in procs.values():
        p.stdin.close()
        p.wait()
    return best, work


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds = 3 if args.quick else 7
    print("case         configuration                 time            ratio")
    # (a) matmul
    procs = {"1 device": start("matmul", 1), "2 devices": start("matmul", 2)}
    best, _ = measure(procs, rounds, {"1 device": 1, "2 devices": 1})
    sp = best["1 device"] / best["2 devices"]
    print(f"matmul 4096  1 device, 1 BLAS thread     {best['1 device'] * 1e3:8.1f} ms")
    print(f"             2 devices, 1 BLAS thread    {best['2 devices'] * 1e3:8.1f} ms    "
          f"{sp:.2f}x (target >= 1.6x)")
    # (b) mlp
    procs = {"1 device": start("mlp", 1), "2 devices": start("mlp", 2)}
    best, _ = measure(procs, rounds, {"1 device": 20, "2 devices": 20})
    print(f"mlp step     1 device                    {1 / best['1 device']:8.1f} steps/s")
    print(f"             2 devices (data parallel)   {1 / best['2 devices']:8.1f} steps/s  "
          f"{best['1 device'] / best['2 devices']:.2f}x")
    # (c) all-reduce bandwidth
    procs = {"memcpy": start("allreduce", 0), "psum": start("allreduce", 2)}
    best, work = measure(procs, rounds, {"memcpy": 5, "psum": 5})
    bw_copy = work["memcpy"] / best["memcpy"] / 1e9
    bw_psum = work["psum"] / best["psum"] / 1e9
    print(f"allreduce    np.copyto 64 MiB             {bw_copy:8.2f} GB/s")
    print(f"64 MiB       shard_map psum, 2 devices    {bw_psum:8.2f} GB/s    "
          f"{bw_psum / bw_copy * 100:.0f}% of memcpy (target >= 50%)")


if __name__ == "__main__":
    main()
