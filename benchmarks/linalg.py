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

Every library runs in its own process, rounds interleaved (benchmarks/harness.py); per
contender the median and best round and the ratio to Starling (>1: Starling faster). Each worker
checks its first result (the sum of the eigen- / singular values, or the solution) against
float64 NumPy first.
Run: ``python benchmarks/linalg.py [--quick] [--cases eigh8,svd32,...]``.
"""
from __future__ import annotations

import numpy as np

import harness

CASES = {"eigh8": (20000, 8), "eigh32": (2000, 32), "svd8": (20000, 8), "svd32": (2000, 32),
         "cholsolve": (1000, 64), "eigh2048": (1, 2048), "svd2048": (1, 2048)}
LIBS = {"starling": None, "numpy": "numpy", "jax": "jax", "torch": "torch"}


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
    harness.serve(run)


def run_case(case, rounds, round_time):
    times = harness.run_interleaved(__file__, case, LIBS, rounds, round_time, "starling")
    b, n = CASES[case]
    harness.report(f"{case}: {b} x ({n} x {n}) float32", times, "starling")


def main():
    harness.main(__doc__, CASES, run_case, worker,
                 quick_cases=[c for c in CASES if not c.endswith("2048")])


if __name__ == "__main__":
    main()
