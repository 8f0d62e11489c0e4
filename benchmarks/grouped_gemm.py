"""Grouped and scaled GEMMs on CPU: Starling vs jax.lax.ragged_dot, PyTorch and NumPy.

Cases (float32 unless said; time per call):
  ragged       one mixture-of-experts layer: 4096 tokens sorted by expert, d 256 -> 512,
               8 experts with uneven group sizes: ``lax.ragged_dot`` compiled (jax: jit;
               torch and numpy: a loop of one matmul per expert)
  ragged_grad  value and gradients w.r.t. the tokens and the experts' weights of
               sum(ragged_dot(x, w, sizes) ** 2) (torch: backward through the loop)
  scaled       float8 e4m3 GEMM 1024 x 1024 x 1024 with per-row / per-column scales to bfloat16:
               ``lax.scaled_matmul`` compiled vs ``torch._scaled_mm`` (where the CPU build has
               it) and NumPy's float32 product of the widened operands

Each library runs in its own process, rounds interleaved (benchmarks/harness.py); every worker
first reports a checksum (float64 sum of its result), and contenders that disagree are not timed.
Reported: median and best seconds per call and the ratio to Starling (> 1: Starling faster).
Run: ``python benchmarks/grouped_gemm.py [--quick] [--cases ragged,ragged_grad,scaled]``.
"""
from __future__ import annotations

import numpy as np

import harness

CASES = ["ragged", "ragged_grad", "scaled"]
LIBS = {"starling": None, "jax": "jax", "torch": "torch", "numpy": "numpy"}
T, D, F, E = 4096, 256, 512, 8
N = 1024


def data(case):
    rng = np.random.default_rng(0)
    if case == "scaled":
        import ml_dtypes
        a = (rng.standard_normal((N, N)) * 4).astype(ml_dtypes.float8_e4m3fn)
        b = (rng.standard_normal((N, N)) * 4).astype(ml_dtypes.float8_e4m3fn)
        return a, b, rng.uniform(0.5, 2, (N, 1)).astype(np.float32), \
            rng.uniform(0.5, 2, (1, N)).astype(np.float32)
    sizes = rng.multinomial(T, rng.dirichlet(np.ones(E) * 2)).astype(np.int32)
    x = rng.standard_normal((T, D)).astype(np.float32)
    w = (rng.standard_normal((E, D, F)) / 16).astype(np.float32)
    return x, w, sizes


def make_starling(case, args):
    import ml_dtypes
    import starling
    import starling.numpy as snp
    from starling import lax
    if case == "scaled":
        f = starling.compile(lambda a, b, sa, sb: lax.scaled_matmul(a, b, sa, sb,
                                                                    ml_dtypes.bfloat16))
        ins = [snp.asarray(v) for v in args]
        return lambda: f(*ins)
    x, w, sizes = (snp.asarray(v) for v in args)
    if case == "ragged":
        f = starling.compile(lambda x, w, s: lax.ragged_dot(x, w, s))
        return lambda: f(x, w, sizes)
    f = starling.compile(starling.value_and_grad(
        lambda x, w, s: snp.sum(lax.ragged_dot(x, w, s) ** 2), argnums=(0, 1)))
    return lambda: f(x, w, sizes)


def make_jax(case, args):
    import jax
    import jax.numpy as jnp
    x, w, sizes = (jnp.asarray(v) for v in args)
    if case == "ragged":
        f = jax.jit(lambda x, w, s: jax.lax.ragged_dot(x, w, s))
    else:
        f = jax.jit(jax.value_and_grad(lambda x, w, s: jnp.sum(jax.lax.ragged_dot(x, w, s) ** 2),
                                       argnums=(0, 1)))
    return lambda: jax.block_until_ready(f(x, w, sizes))


def _loop(mm, x, w, sizes):
    outs, start = [], 0
    for i, n in enumerate(sizes):
        outs.append(mm(x[start:start + n], w[i]))
        start += n
    return outs


def make_torch(case, args):
    import torch
    if case == "scaled":
        a, b, sa, sb = args
        ta = torch.from_numpy(a.view(np.uint8)).view(torch.float8_e4m3fn)
        tb = torch.from_numpy(np.ascontiguousarray(b.T).view(np.uint8)).view(
            torch.float8_e4m3fn).t()
        tsa, tsb = torch.from_numpy(sa), torch.from_numpy(sb)
        torch._scaled_mm(ta, tb, scale_a=tsa, scale_b=tsb, out_dtype=torch.bfloat16)
        return lambda: torch._scaled_mm(ta, tb, scale_a=tsa, scale_b=tsb,
                                        out_dtype=torch.bfloat16).float()
    x, w = (torch.from_numpy(v) for v in args[:2])
    sizes = [int(s) for s in args[2]]
    if case == "ragged":
        return lambda: torch.cat(_loop(torch.matmul, x, w, sizes))
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()

    def step():
        xg.grad = wg.grad = None
        loss = (torch.cat(_loop(torch.matmul, xg, wg, sizes)) ** 2).sum()
        loss.backward()
        return loss.detach(), xg.grad, wg.grad
    return step


def make_numpy(case, args):
    if case == "scaled":
        a, b, sa, sb = args
        import ml_dtypes
        return lambda: ((a.astype(np.float32) @ b.astype(np.float32)) * sa * sb).astype(
            ml_dtypes.bfloat16)
    x, w, sizes = args
    return lambda: np.concatenate(_loop(np.matmul, x, w, sizes))


def checksum(out):
    first = out[0] if isinstance(out, (tuple, list)) else out
    if hasattr(first, "detach"):
        first = first.detach().float()
    return float(np.asarray(first).astype(np.float64).sum())


def worker(lib, case):
    run = {"starling": make_starling, "jax": make_jax, "torch": make_torch,
           "numpy": make_numpy}[lib](case, data(case))
    # results are read back on every call, as a user would
    harness.serve(lambda: checksum(run()), lambda total: total)


def run_case(case, rounds, round_time):
    skip = {"scaled": ("jax",), "ragged_grad": ("numpy",)}.get(case, ())
    libs = {lib: mod for lib, mod in LIBS.items() if lib not in skip}
    times = harness.run_interleaved(__file__, case, libs, rounds, round_time, "starling",
                                    rtol=1e-2, atol=1.0)
    harness.report(case, times, "starling")


def main():
    harness.main(__doc__, CASES, run_case, worker)


if __name__ == "__main__":
    main()
