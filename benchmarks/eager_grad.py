"""Eager training step: ``value_and_grad`` of an MLP run op by op, Starling vs PyTorch eager.

The MLP of benchmarks/compile_cpu.py (784-512-512-10, batch 128, float32, ReLU, softmax
cross-entropy, SGD lr 0.01), stepped WITHOUT compile:

- ``starling eager``: ``value_and_grad(loss)(params, x, y)`` then the SGD update, both eager; the
  eager transformation cache (src/transforms/eager_cache.py) reuses the derived gradient program
  from the third step on;
- ``starling re-tracing``: the same with the cache off (``STARLING_EAGER_CACHE=0``): every step
  runs the JVP, partial evaluation and transposition again, primitive by primitive;
- ``torch eager``: ``loss.backward()`` and an in-place SGD update under ``torch.no_grad``.

Each contender runs in its own process; the driver runs ``--rounds`` rounds, asking each process
in turn for a batch of steps of about 0.3 s, so background load hits all alike, and reports the
median steps/s over the rounds (and the best), per wall-clock second and per CPU second of the
process (on a busy machine the wall clock mostly measures the scheduler), with the machine's
load average before and after. ``--threads N`` sets OPENBLAS/OMP/MKL_NUM_THREADS, Starling's pool
(STARLING_NUM_THREADS) and torch's thread count in every process (default 1: on a busy machine a second BLAS thread mostly waits
for a core).

``--baseline NAME=DIR`` (repeatable) adds ``starling eager [NAME]``: the same step importing
``starling`` from ``DIR`` (a folder holding another checkout's package as ``DIR/starling``, for
before / after figures in one interleaved run).

Run: ``python benchmarks/eager_grad.py [--rounds 9] [--threads 1] [--baseline main=DIR]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

# the same MLP, data and step size as benchmarks/models.py's MLP case (this folder is on
# sys.path when a benchmark runs as a script)
from models import BATCH, LR, SIZES, mlp_data as _data  # noqa: E402,F401
import harness  # noqa: E402


def _starling():
    import starling as st
    import starling.numpy as snp
    pn, xn, yn = _data()
    state = [[(snp.asarray(w), snp.asarray(b)) for w, b in pn]]
    x, y = snp.asarray(xn), snp.asarray(yn)

    def loss(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = snp.maximum(h, 0.0)
        logp = h - snp.logsumexp(h, axis=-1, keepdims=True)
        return -snp.sum(logp * y) / x.shape[0]

    def step():
        value, g = st.value_and_grad(loss)(state[0], x, y)
        state[0] = [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(state[0], g)]
        return float(value)
    return step


def _torch():
    import torch
    pn, xn, yn = _data()
    params = [(torch.from_numpy(w.copy()).requires_grad_(),
               torch.from_numpy(b.copy()).requires_grad_()) for w, b in pn]
    x, y = torch.from_numpy(xn), torch.from_numpy(yn)

    def step():
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = torch.relu(h)
        logp = h - torch.logsumexp(h, dim=-1, keepdim=True)
        loss = -(logp * y).sum() / x.shape[0]
        loss.backward()
        with torch.no_grad():
            for w, b in params:
                w -= LR * w.grad
                b -= LR * b.grad
                w.grad = None
                b.grad = None
        return loss.item()
    return step


def worker(name):
    """Builds ``name``'s step, warms it up, then answers ``run K`` with seconds for K steps."""
    threads = os.environ.get("EAGER_GRAD_THREADS")
    try:
        if name.startswith("torch"):
            import torch
            if threads:
                torch.set_num_threads(int(threads))
            step = _torch()
        else:
            step = _starling()
        first = step()
        for _ in range(5):
            last = step()
    except ImportError as e:
        print(f"skip not installed ({e.name})", flush=True)
        return
    print(f"ready {first:.6f} {last:.6f}", flush=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        k = int(line.split()[1])
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(k):
            step()
        print(f"{time.perf_counter() - t0:.9f} {time.process_time() - c0:.9f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--round-seconds", type=float, default=0.3)
    ap.add_argument("--baseline", action="append", default=[], metavar="NAME=DIR")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    n = str(args.threads)
    base = dict(os.environ, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n,
                STARLING_NUM_THREADS=n, EAGER_GRAD_THREADS=n)
    envs = {"starling eager": dict(base, STARLING_EAGER_CACHE="1"),
            "starling re-tracing": dict(base, STARLING_EAGER_CACHE="0"),
            "torch eager": base}
    for spec in args.baseline:
        label, _, path = spec.partition("=")
        if not path:
            ap.error(f"--baseline expects NAME=DIR, got {spec!r}")
        envs[f"starling eager [{label}]"] = dict(base, STARLING_EAGER_CACHE="1",
                                                 PYTHONPATH=os.path.abspath(path))
    load0 = os.getloadavg()
    print(f"eager value_and_grad step, MLP {'-'.join(map(str, SIZES))} batch {BATCH} float32 "
          f"(cpu count {os.cpu_count()}, {args.threads} thread(s) per process, load average "
          f"{load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}); {args.rounds} interleaved rounds")
    procs = {}
    for name in envs:
        # torch from the peers' venv when this one lacks it (harness.interpreter)
        py = harness.interpreter("torch" if name.startswith("torch") else None) or sys.executable
        p = subprocess.Popen([py, os.path.abspath(__file__), "--worker",
                              "starling eager" if name.startswith("starling eager") else name],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=envs[name])
        status = p.stdout.readline().strip()
        if status.startswith("ready"):
            procs[name] = p
            print(f"  {name:22s} ready: loss {status.split()[1]} -> {status.split()[2]}")
        else:
            print(f"  {name:22s} skipped: {status or 'the worker died'}")
            p.wait()

    def run(p, k):
        p.stdin.write(f"run {k}\n")
        p.stdin.flush()
        return [float(t) for t in p.stdout.readline().split()]

    try:
        steps = {name: max(1, int(args.round_seconds / (run(p, 3)[0] / 3)))
                 for name, p in procs.items()}
        rates = {name: [] for name in procs}
        cpu_rates = {name: [] for name in procs}
        for _ in range(args.rounds):
            for name, p in procs.items():
                wall, cpu = run(p, steps[name])
                rates[name].append(steps[name] / wall)
                cpu_rates[name].append(steps[name] / cpu)
    finally:
        for p in procs.values():
            p.stdin.write("quit\n")
            p.stdin.flush()
            p.wait(timeout=60)
    load1 = os.getloadavg()
    print(f"load average after: {load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f}")
    for title, table in (("wall clock", rates), ("per CPU second of the process", cpu_rates)):
        print(f" steps/s, {title}:")
        ref = statistics.median(table["torch eager"]) if "torch eager" in table else None
        for name, r in table.items():
            med = statistics.median(r)
            ratio = f"   {med / ref:5.2f}x torch eager" if ref and name != "torch eager" else ""
            print(f"  {name:22s} median {med:8.1f}   best {max(r):8.1f}{ratio}")


if __name__ == "__main__":
    main()
