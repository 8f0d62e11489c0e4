"""Linear algebra on CPU: Starling (eager; stacks of small matrices on the native batched Jacobi
kernels, starling.linalg.jacobi) vs NumPy (LAPACK), jax.jit and PyTorch.

Cases (float32, the issue's shapes; time per call):
  eigh8      eigh of 20000 x (8 x 8)            target: >= 2x the fastest peer
  eigh32     eigh of 2000 x (32 x 32)           target: >= 2x the fastest peer
  svd8       svd (reduced) of 20000 x (8 x 8)   target: >= 2x the fastest peer
  svd32      svd (reduced) of 2000 x (32 x 32)  target: >= 2x the fastest peer
  cholsolve  cholesky + solve of 1000 x (64 x 64) SPD systems, 1 right-hand side
  eigh2048   eigh of one 2048 x 2048            target: within 1.1x of NumPy
  svd2048    svd (reduced) of one 2048 x 2048   target: within 1.1x of NumPy

Every library runs in its own process (``--worker LIB CASE``, driven over a pipe), rounds of all
processes interleaved so background load hits them alike; per contender the median and best
round and the ratio to Starling (>1: Starling faster). Each worker checks its first result (the
sum of the eigen- / singular values, or the solution) against float64 NumPy first. Peers not
importable here run under ``$STARLING_PEER_PYTHON`` (default /work/venvs/perf/bin/python) when
they are importable there, else are skipped.
Run: ``python benchmarks/linalg.py [--quick] [--cases eigh8,svd32,...]``.
"""
from __future__ import annotations

import argparse
import json
import select
import os
import statistics
import subprocess
import sys
import time

import numpy as np

CASES = {"eigh8": (20000, 8), "eigh32": (2000, 32), "svd8": (20000, 8), "svd32": (2000, 32),
         "cholsolve": (1000, 64), "eigh2048": (1, 2048), "svd2048": (1, 2048)}
LIBS = ["starling", "numpy", "jax", "torch"]
PEER_PYTHON = os.environ.get("STARLING_PEER_PYTHON", "/work/venvs/perf/bin/python")


def data(case):
    b, n = CASES[case]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((b, n, n)).astype(np.float32)
    if case.startswith("eigh"):
        a = (a + np.swapaxes(a, 1, 2)) / 2
    if case == "cholsolve":
        a = a @ np.swapaxes(a, 1, 2) / n + np.eye(n, dtype=np.float32)
        return a[0] if b == 1 else a, rng.standard_normal((b, n, 1)).astype(np.float32)
    return (a[0] if b == 1 else a), None


def reference(case):
    a, rhs = data(case)
    a = a.astype(np.float64)
    if case.startswith("eigh"):
        return np.linalg.eigvalsh(a).sum()
    if case.startswith("svd"):
        return np.linalg.svd(a, compute_uv=False).sum()
    return np.linalg.solve(a, rhs.astype(np.float64)).sum()


def make(lib, case):
    """(run, value): run() computes the case once (results ready); value(out) -> a float."""
    a, rhs = data(case)
    kind = case.rstrip("0123456789")
    if lib == "starling":
        import starling.numpy as snp
        x, r = snp.asarray(a), (snp.asarray(rhs) if rhs is not None else None)
        la = snp.linalg
        fns = {"eigh": lambda: la.eigh(x), "svd": lambda: la.svd(x, full_matrices=False),
               "cholsolve": lambda: (la.cholesky(x), la.solve(x, r))}
        run = fns[kind]
        return run, lambda out: float(np.asarray(out[1 if kind == "svd" else 0 if kind == "eigh"
                                                    else 1]).astype(np.float64).sum())
    if lib == "numpy":
        fns = {"eigh": lambda: np.linalg.eigh(a), "svd": lambda: np.linalg.svd(a, False),
               "cholsolve": lambda: (np.linalg.cholesky(a), np.linalg.solve(a, rhs))}
    elif lib == "jax":
        import jax
        import jax.numpy as jnp
        x, r = jnp.asarray(a), (jnp.asarray(rhs) if rhs is not None else None)
        f = jax.jit({"eigh": jnp.linalg.eigh,
                     "svd": lambda m: jnp.linalg.svd(m, full_matrices=False),
                     "cholsolve": lambda m, v: (jnp.linalg.cholesky(m), jnp.linalg.solve(m, v))
                     }[kind])
        fns = {kind: (lambda: jax.block_until_ready(f(x, r) if r is not None else f(x)))}
    elif lib == "torch":
        import torch
        x, r = torch.from_numpy(a), (torch.from_numpy(rhs) if rhs is not None else None)
        fns = {"eigh": lambda: torch.linalg.eigh(x),
               "svd": lambda: torch.linalg.svd(x, full_matrices=False),
               "cholsolve": lambda: (torch.linalg.cholesky(x), torch.linalg.solve(x, r))}
    else:
        raise SystemExit(f"unknown library {lib}")
    run = fns[kind]
    pick = {"eigh": 0, "svd": 1, "cholsolve": 1}[kind]
    return run, lambda out: float(np.asarray(out[pick]).astype(np.float64).sum())


def worker(lib, case):
    run, value = make(lib, case)
    got, want = value(run()), reference(case)
    if not abs(got - want) <= 1e-3 * abs(want) + 1e-3:
        raise SystemExit(f"{lib}/{case}: {got} differs from the float64 reference {want}")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        k = int(line)
        t0 = time.perf_counter()
        for _ in range(k):
            run()
        print(json.dumps({"seconds": (time.perf_counter() - t0) / k}), flush=True)


def interpreter(lib):
    """The Python that can import lib: this one, else the peers' venv, else None."""
    mod = {"jax": "jax", "torch": "torch"}.get(lib)
    if mod is None:
        return sys.executable
    for py in (sys.executable, PEER_PYTHON):
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", f"import {mod}"], capture_output=True).returncode == 0:
            return py
    return None


class Worker:
    def __init__(self, py, lib, case):
        env = dict(os.environ)
        if py != sys.executable:   # the peer venv lacks starling: nothing of ours to import
            env.pop("PYTHONPATH", None)
        self.p = subprocess.Popen([py, os.path.abspath(__file__), "--worker", lib, case],
                                  text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env)
        try:
            ready = self._answer(300.0)   # warm-up and check against the reference
        except TimeoutError as e:
            raise RuntimeError(f"worker {lib}/{case}: {e}: killed") from None
        if not ready:
            self.p.wait()
            raise RuntimeError(f"worker {lib}/{case} failed")
        self.reps = 1

    def _answer(self, limit):
        """The worker's next line; TimeoutError (worker killed) when none comes within
        ``limit`` seconds: a peer hanging (jax.jit's cholesky + solve was seen to) must not
        stop the whole benchmark."""
        ready, _, _ = select.select([self.p.stdout], [], [], limit)
        if not ready:
            self.p.kill()
            self.p.wait()
            raise TimeoutError(f"no answer within {limit:.0f} s")
        return self.p.stdout.readline()

    def time(self, k, limit=120.0):
        """Seconds per run of ``k`` runs (TimeoutError: see ``_answer``)."""
        self.p.stdin.write(f"{k}\n")
        self.p.stdin.flush()
        return json.loads(self._answer(limit))["seconds"]

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def run_case(case, rounds, round_time):
    workers = {}
    for lib in LIBS:
        py = interpreter(lib)
        if py is None:
            print(f"  ({lib} not installed: skipped)")
            continue
        try:
            workers[lib] = w = Worker(py, lib, case)
        except RuntimeError as e:
            print(f"  ({e}: skipped)")
            continue
        try:
            w.reps = max(1, int(round_time / max(w.time(1), 1e-7)))
        except TimeoutError as e:
            print(f"  ({lib}/{case}: {e}: killed, skipped)")
            del workers[lib]
    times = {lib: [] for lib in workers}
    try:
        for _ in range(rounds):
            for lib, w in list(workers.items()):
                try:
                    times[lib].append(w.time(w.reps))
                except TimeoutError as e:
                    print(f"  ({lib}/{case}: {e}: killed, skipped)")
                    del workers[lib], times[lib]
    finally:
        for w in workers.values():
            w.close()
    b, n = CASES[case]
    print(f"\n{case}: {b} x ({n} x {n}) float32")
    base = times.get("starling")
    for lib, ts in times.items():
        med, best = statistics.median(ts), min(ts)
        ratio = ""
        if base and lib != "starling":
            ratio = (f"  starling {med / statistics.median(base):5.2f}x "
                     f"(best {best / min(base):5.2f}x)")
        print(f"  {lib:9s} median {med * 1e3:9.2f} ms  best {best * 1e3:9.2f} ms{ratio}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", nargs=2, metavar=("LIB", "CASE"))
    ap.add_argument("--quick", action="store_true", help="3 short rounds, no 2048 cases")
    ap.add_argument("--cases", default=None, help="comma-separated subset of " + ",".join(CASES))
    args = ap.parse_args()
    if args.worker:
        return worker(*args.worker)
    cases = args.cases.split(",") if args.cases else [
        c for c in CASES if not (args.quick and c.endswith("2048"))]
    rounds, round_time = (3, 0.3) if args.quick else (7, 1.0)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for case in cases:
        run_case(case, rounds, round_time)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
