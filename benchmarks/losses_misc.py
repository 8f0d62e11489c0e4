"""CTC loss and pairwise distances on CPU: Starling (compiled) vs PyTorch and SciPy.

Cases (float32; time per call):
  ctc        ctc_loss, T=200, N=32, C=50, targets of 20..40 labels (padded), mean reduction
  ctc_grad   the same loss and its gradient w.r.t. the log-probabilities (torch: backward())
  cdist_mm   cdist p=2 of 1000 x 64 and 1000 x 64 points, matmul mode (SciPy: exact)
  cdist_ex   cdist p=2, exact mode (sum of squared differences)
  cdist_p1   cdist p=1
  cdist_grad sum of cdist p=2 (matmul mode) and its gradient w.r.t. both inputs
  pdist      pdist p=2 of 2000 x 64 points

Each library runs in its own process, rounds interleaved (benchmarks/harness.py). Every worker
first reports a checksum of its result (float64 sum), and the driver refuses to time contenders
that disagree. Reported: the median and best seconds per call and the ratio to
Starling (> 1: Starling faster).
Run: ``python benchmarks/losses_misc.py [--quick] [--cases ctc,cdist_mm,...]``.
"""
from __future__ import annotations

import numpy as np

import harness

CASES = ["ctc", "ctc_grad", "cdist_mm", "cdist_ex", "cdist_p1", "cdist_grad", "pdist"]
LIBS = {"starling": None, "torch": "torch", "scipy": "scipy"}
MODES = {"cdist_mm": (2.0, "use_mm_for_euclid_dist"), "cdist_ex": (2.0,
         "donot_use_mm_for_euclid_dist"), "cdist_p1": (1.0, "donot_use_mm_for_euclid_dist"),
         "cdist_grad": (2.0, "use_mm_for_euclid_dist")}


def data(case):
    rng = np.random.default_rng(0)
    if case.startswith("ctc"):
        T, N, C, S = 200, 32, 50, 40
        x = rng.standard_normal((T, N, C)).astype(np.float32)
        lp = (x - np.log(np.exp(x).sum(-1, keepdims=True))).astype(np.float32)
        return (lp, rng.integers(1, C, (N, S)), np.full(N, T), rng.integers(S // 2, S + 1, N))
    if case == "pdist":
        return (rng.standard_normal((2000, 64)).astype(np.float32),)
    return tuple(rng.standard_normal((1000, 64)).astype(np.float32) for _ in range(2))


def make_starling(case, args):
    import starling
    import starling.numpy as snp
    from starling.nn import functional as F
    if case.startswith("ctc"):
        lp, tg, il, tl = args

        def loss(x):
            return F.ctc_loss(x, tg, il, tl)
        f = starling.compile(starling.value_and_grad(loss) if case == "ctc_grad" else loss)
        return lambda: f(lp)
    if case == "pdist":
        f = starling.compile(lambda x: F.pdist(x, 2.0))
        return lambda: f(args[0])
    p, mode = MODES[case]
    if case == "cdist_grad":
        f = starling.compile(starling.value_and_grad(
            lambda a, b: snp.sum(F.cdist(a, b, p, mode)), argnums=(0, 1)))
    else:
        f = starling.compile(lambda a, b: F.cdist(a, b, p, mode))
    return lambda: f(*args)


def make_torch(case, args):
    import torch
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in args]
    if case.startswith("ctc"):
        lp, tg, il, tl = t
        if case == "ctc":
            return lambda: torch.nn.functional.ctc_loss(lp, tg, il, tl)
        lpg = lp.clone().requires_grad_()

        def step():
            lpg.grad = None
            loss = torch.nn.functional.ctc_loss(lpg, tg, il, tl)
            loss.backward()
            return loss, lpg.grad
        return step
    if case == "pdist":
        return lambda: torch.pdist(t[0], 2.0)
    p, mode = MODES[case]
    if case == "cdist_grad":
        a, b = (x.clone().requires_grad_() for x in t)

        def step():
            a.grad = b.grad = None
            s = torch.cdist(a, b, p, compute_mode=mode).sum()
            s.backward()
            return s, a.grad, b.grad
        return step
    return lambda: torch.cdist(*t, p, compute_mode=mode)


def make_scipy(case, args):
    from scipy.spatial import distance as sd
    if case == "pdist":
        return lambda: sd.pdist(args[0], "euclidean")
    metric = "cityblock" if case == "cdist_p1" else "euclidean"
    return lambda: sd.cdist(*args, metric)


def checksum(out):
    first = out[0] if isinstance(out, (tuple, list)) else out
    if hasattr(first, "detach"):
        first = first.detach()
    return float(np.asarray(first, np.float64).sum())


def worker(lib, case):
    run = {"starling": make_starling, "torch": make_torch, "scipy": make_scipy}[lib](
        case, data(case))
    # results are read back on every call, as a user would
    harness.serve(lambda: checksum(run()), lambda total: total)


def run_case(case, rounds, round_time):
    libs = {lib: mod for lib, mod in LIBS.items()
            if not (lib == "scipy" and (case.startswith("ctc") or case == "cdist_grad"))}
    times = harness.run_interleaved(__file__, case, libs, rounds, round_time, "starling")
    harness.report(case, times, "starling")


def main():
    harness.main(__doc__, CASES, run_case, worker)


if __name__ == "__main__":
    main()
