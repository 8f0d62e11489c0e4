"""Memory and time of compiled programs with buffer reuse and donation, vs NumPy / JAX / PyTorch.

Cases (float32, N = 16M elements = 64 MiB per array):
  (a) long   4 x [``cumsum``, then the elementwise group ``tanh(c*s)*0.5 + sin(c*s)*x`` (s =
             1/N keeps values O(1))]: each cumsum (a NumPy call) separates two fused groups.
             The memory plan writes the first group over the cumsum result it reads, the later
             ones over their ``x`` (the previous group's output, read at the same index), so a
             call needs 2 arrays beyond its input (cumsum's operand and result) instead of 3.
  (b) sgd    one SGD step ``w - 0.01 * g`` on a 16M parameter vector, looping ``w = step(w, g)``;
             with ``donate_argnums=0`` the update is written into ``w``'s own buffer.

Contenders: Starling cpp (memory plan on; off via ``STARLING_BUFFER_REUSE=0``; for sgd with and
without donation), NumPy (functional, and for sgd the hand-written in-place update), jax.jit
(with ``donate_argnums`` for sgd) and PyTorch eager (in-place ``add_`` for sgd, as
torch.optim does) when installed.

Method: every contender runs in a fresh subprocess (so one cannot inherit another's heap). It
builds the inputs, reads the resident set size (RSS, /proc/self/status VmRSS) as the baseline,
runs one warm-up call (compilation included), resets the kernel's peak-RSS mark (writing "5" to
/proc/self/clear_refs, Linux >= 4.0), then times ``--calls`` calls and reads the peak mark
(VmHWM). "peak MiB" = peak RSS during the timed calls minus the baseline: the memory a steady
run needs beyond its inputs, including whatever the contender retains between calls (the cpp
launcher's pool of recycled output buffers, allocator caches, compiled code); negative when a
contender gave back, during the calls, memory it held at the baseline. tracemalloc would
miss most of it (the kernel pool and XLA allocate outside Python's allocator). Where clear_refs
is unavailable, ru_maxrss (peak since process start, warm-up included) is used instead and the
table says so. Times are the best of ``--calls`` single calls, in ms, each contender in its own
process one after the other (not interleaved: on a loaded machine compare memory first and
rerun for times). Ratios: contender / first row (> 1 means the first row, Starling with its
memory plan, uses less memory / is faster); a memory ratio is shown only when both peaks
exceed 1 MiB.

Run: ``python benchmarks/compile_memory.py [--quick] [--calls K]``.
"""
from __future__ import annotations

import argparse
import functools
import json
import os

import harness

N = 1 << 24
LR = 0.01
ROUNDS = 4


# ---- the programs -----------------------------------------------------------------------------

def long_starling(snp):
    def f(x):
        for _ in range(ROUNDS):
            c = snp.cumsum(x) * (1.0 / x.shape[0])
            x = snp.tanh(c) * 0.5 + snp.sin(c) * x
        return x
    return f


def long_numpy(np):
    def f(x):
        for _ in range(ROUNDS):
            c = np.cumsum(x) * np.float32(1.0 / x.shape[0])
            x = np.tanh(c) * np.float32(0.5) + np.sin(c) * x
        return x
    return f


def long_jax(jnp):
    def f(x):
        for _ in range(ROUNDS):
            c = jnp.cumsum(x) * (1.0 / x.shape[0])
            x = jnp.tanh(c) * 0.5 + jnp.sin(c) * x
        return x
    return f


def long_torch(torch):
    def f(x):
        for _ in range(ROUNDS):
            c = torch.cumsum(x, 0) * (1.0 / x.shape[0])
            x = torch.tanh(c) * 0.5 + torch.sin(c) * x
        return x
    return f


# ---- one contender in this process ------------------------------------------------------------

def _contender(case, name, n):
    """(initial state, step): ``step(state)`` runs one call (long: state is the input, the
    result is dropped; sgd: the result is the next state)."""
    import numpy as np
    rng = np.random.default_rng(0)
    x0 = rng.normal(size=n).astype(np.float32)
    g0 = rng.normal(size=n).astype(np.float32)
    lib, _, variant = name.partition(":")
    if lib == "starling":
        import starling as st
        import starling.numpy as snp
        if case == "long":
            f = st.compile(long_starling(snp), backend="cpp")
            return snp.asarray(x0), f
        donate = (0,) if variant == "donate" else ()
        step = st.compile(lambda w, g: w - LR * g, donate_argnums=donate, backend="cpp")
        g = snp.asarray(g0)
        return snp.asarray(x0), lambda w: step(w, g)
    if lib == "numpy":
        if case == "long":
            return x0, long_numpy(np)
        g = g0
        if variant == "inplace":
            def step(w):
                w -= np.float32(LR) * g
                return w
            return x0, step
        return x0, lambda w: w - np.float32(LR) * g
    if lib == "jax":
        import jax
        import jax.numpy as jnp
        if case == "long":
            f = jax.jit(long_jax(jnp))
            return jnp.asarray(x0), lambda x: f(x).block_until_ready()
        step = jax.jit(lambda w, g: w - LR * g, donate_argnums=0)
        g = jnp.asarray(g0)
        return jnp.asarray(x0), lambda w: step(w, g).block_until_ready()
    if lib == "torch":
        import torch
        torch.set_grad_enabled(False)
        if case == "long":
            return torch.from_numpy(x0.copy()), long_torch(torch)
        g = torch.from_numpy(g0.copy())
        return torch.from_numpy(x0.copy()), lambda w: w.add_(g, alpha=-LR)
    raise ValueError(name)


def worker(case, name, n, calls):
    """Runs one contender; prints one JSON line {ms, peak_mib, method}."""
    state, step = _contender(case, name, n)
    if case == "long":
        run = functools.partial(step, state)   # the input stays alive; outputs are dropped
    else:
        box = [state]

        def run():                             # w = step(w): the previous w dies (or was
            box[0] = step(box[0])              # donated)
    r = harness.measure_peak(run, calls)
    print(json.dumps(r))


# ---- driver -----------------------------------------------------------------------------------

def _available(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def contenders(case):
    out = [("starling:reuse", {}), ("starling:no-reuse", {"STARLING_BUFFER_REUSE": "0"})]
    if case == "sgd":
        out = [("starling:donate", {}), ("starling:no-donate", {})]
    out.append(("numpy", {}))
    if case == "sgd":
        out.append(("numpy:inplace", {}))
    if _available("jax"):
        out.append(("jax:donate" if case == "sgd" else "jax", {}))
    if _available("torch"):
        out.append(("torch:add_" if case == "sgd" else "torch", {}))
    return out


def run_one(case, name, env, n, calls):
    return harness.run_fresh(__file__, [case, name, "--n", n, "--calls", calls], env=env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="N = 4M, 3 calls")
    ap.add_argument("--calls", type=int, default=None)
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--worker", nargs=2, metavar=("CASE", "NAME"))
    args = ap.parse_args()
    n = args.n or ((1 << 22) if args.quick else N)
    calls = args.calls or (3 if args.quick else 7)
    if args.worker:
        worker(args.worker[0], args.worker[1], n, calls)
        return
    print(f"N = {n} float32 ({n * 4 / 2**20:.0f} MiB per array), {calls} timed calls, "
          f"{os.cpu_count()} cores; peak = RSS high-water mark above inputs during the calls")
    for case in ("long", "sgd"):
        rows = [(name, run_one(case, name, env, n, calls)) for name, env in contenders(case)]
        ref = rows[0][1]
        print(f"\n({'a' if case == 'long' else 'b'}) {case}")
        print(f"  {'contender':22s} {'ms':>9s} {'peak MiB':>9s} {'time ratio':>11s} "
              f"{'mem ratio':>10s}")
        for name, r in rows:
            if "error" in r:
                print(f"  {name:22s} failed: {r['error']}")
                continue
            tr = f"{r['ms'] / ref['ms']:11.2f}" if "ms" in ref else f"{'-':>11s}"
            # A ratio of two peaks near zero means nothing: shown only above 1 MiB each.
            mr = f"{r['peak_mib'] / ref['peak_mib']:10.2f}" if min(
                ref.get("peak_mib", 0), r["peak_mib"]) >= 1 else f"{'-':>10s}"
            print(f"  {name:22s} {r['ms']:9.1f} {r['peak_mib']:9.1f} {tr} {mr}"
                  + ("" if r["method"] == "VmHWM" else "  (ru_maxrss)"))


if __name__ == "__main__":
    main()
