"""Peak memory and time of a language-model head's loss + gradient: fused
``linear_cross_entropy`` vs ``cross_entropy(hidden @ weight.T, target)``, against JAX / PyTorch.

Case: ``loss, (grad_hidden, grad_weight) = value_and_grad(loss_fn)(hidden, weight, target)``
(targets an argument, as in a training step, not a constant folded into the program), hidden
``(T, H)``, weight ``(V, H)``, integer targets ``(T,)`` (about 1/8 of them ``ignore_index``),
float32, mean reduction, no bias. Default T = 4096, H = 1024, V = 32000 (the logits are 500 MiB);
``--quick``: T = 1024, H = 512, V = 8000.

Contenders (each in a fresh subprocess, so none inherits another's heap):
  starling:fused-eager      starling.nn.functional.linear_cross_entropy, eager
  starling:fused-compiled   the same under starling.compile (cpp backend)
  starling:unfused-eager    cross_entropy(hidden @ weight.T, target), eager
  starling:unfused-compiled the same under starling.compile (cpp backend)
  torch:unfused / torch:fused   torch.nn.functional.cross_entropy(linear(...)) / torch's
                            linear_cross_entropy with LinearCrossEntropyOptions() (chunked), when
                            torch is installed (and has it); autograd backward
  jax:unfused               jax.jit(jax.value_and_grad(...)) of optax-style cross entropy
Peers not importable here run under ``$STARLING_PEER_PYTHON`` (benchmarks/harness.py).

Method (``harness.measure_peak``, as benchmarks/compile_memory.py): the worker builds the
inputs, reads the resident set size (VmRSS) as the baseline, runs one warm-up call (compilation
included; only its loss is kept), resets the kernel's peak-RSS mark, times ``--calls`` calls
(results dropped after each) and reads the peak (VmHWM); ``--rounds`` repeats the whole table
with the contenders interleaved (a shared machine's load moves between rounds): a row shows the
best time and the largest peak over the rounds. "peak MiB" = peak RSS during the timed calls minus the
baseline: the memory a steady call needs beyond its inputs, outputs (the gradients, 1/8 of it
the weight's gradient) included. Times are the best single call in ms. Ratios are against
``starling:unfused-compiled`` (mem ratio = unfused / contender: > 1 means less memory; time
ratio = contender / unfused: < 1 means faster); a memory ratio is shown only when both peaks
exceed 1 MiB.

Run: ``python benchmarks/linear_cross_entropy.py [--quick] [--calls K] [--rounds R]
[--only NAME,...]``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import harness

SIZES = {"full": (4096, 1024, 32000), "quick": (1024, 512, 8000)}
IGNORE = -100


def _inputs(t, h, v):
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.normal(size=(t, h)).astype(np.float32)
    w = (rng.normal(size=(v, h)) / np.sqrt(h)).astype(np.float32)
    y = rng.integers(0, v, size=t)
    y[rng.random(t) < 0.125] = IGNORE
    return x, w, y


# ---- one contender in this process ------------------------------------------------------------

def _starling(variant, x, w, y):
    import starling as st
    import starling.numpy as snp
    from starling.nn import functional as F
    kind, _, mode = variant.partition("-")
    yt = snp.asarray(y.astype("int32"))
    if kind == "fused":
        def loss(h, wt, yt):
            return F.linear_cross_entropy(h, wt, yt, ignore_index=IGNORE)
    else:
        def loss(h, wt, yt):
            return F.cross_entropy(h @ wt.T, yt, ignore_index=IGNORE)
    f = st.value_and_grad(loss, argnums=(0, 1))
    if mode == "compiled":
        f = st.compile(f, backend="cpp")
    args = (snp.asarray(x), snp.asarray(w), yt)
    return lambda: f(*args)


def _torch(variant, x, w, y):
    import torch
    import torch.nn.functional as F
    xt = torch.from_numpy(x).requires_grad_()
    wt = torch.from_numpy(w).requires_grad_()
    yt = torch.from_numpy(y)
    if variant == "fused":
        opts = torch.nn.LinearCrossEntropyOptions()
        loss_fn = lambda: F.linear_cross_entropy(xt, wt, yt, ignore_index=IGNORE,  # noqa: E731
                                                 options=opts)
    else:
        loss_fn = lambda: F.cross_entropy(F.linear(xt, wt), yt, ignore_index=IGNORE)  # noqa: E731

    def step():
        xt.grad = wt.grad = None
        loss = loss_fn()
        loss.backward()
        return loss.detach(), xt.grad, wt.grad
    return step


def _jax(variant, x, w, y):
    import jax
    import jax.numpy as jnp

    def loss(h, wt, yt):
        logits = h @ wt.T
        keep = yt != IGNORE
        logp = jax.nn.log_softmax(logits, axis=-1)
        nll = -jnp.take_along_axis(logp, jnp.where(keep, yt, 0)[:, None], axis=-1)[:, 0]
        return jnp.sum(jnp.where(keep, nll, 0.0)) / jnp.sum(keep)
    f = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    args = (jnp.asarray(x), jnp.asarray(w), jnp.asarray(y))
    return lambda: jax.block_until_ready(f(*args))


def worker(name, size, calls):
    """Runs one contender; prints one JSON line {ms, peak_mib, method, loss}."""
    lib, _, variant = name.partition(":")
    x, w, y = _inputs(*size)
    step = {"starling": _starling, "torch": _torch, "jax": _jax}[lib](variant, x, w, y)
    r = harness.measure_peak(step, calls, keep=lambda out: float(out[0]))
    r["loss"] = r.pop("first")
    print(json.dumps(r))


# ---- driver -----------------------------------------------------------------------------------

def contenders():
    out = [(f"starling:{k}-{m}", sys.executable) for k in ("unfused", "fused")
           for m in ("compiled", "eager")]
    torch_py, jax_py = harness.interpreter("torch"), harness.interpreter("jax")
    if torch_py:
        out.append(("torch:unfused", torch_py))
        if subprocess.run([torch_py, "-c", "import torch; torch.nn.LinearCrossEntropyOptions"],
                          capture_output=True).returncode == 0:
            out.append(("torch:fused", torch_py))
    if jax_py:
        out.append(("jax:unfused", jax_py))
    return out


def run_one(name, python, size, calls):
    return harness.run_fresh(__file__, [name, "--size", *size, "--calls", calls], python)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="T, H, V = 1024, 512, 8000")
    ap.add_argument("--calls", type=int, default=None)
    ap.add_argument("--size", type=int, nargs=3, metavar=("T", "H", "V"), default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", default=None, help="comma-separated contender names")
    ap.add_argument("--worker", default=None)
    args = ap.parse_args()
    size = tuple(args.size or SIZES["quick" if args.quick else "full"])
    calls = args.calls or (3 if args.quick else 3)
    if args.worker:
        worker(args.worker, size, calls)
        return
    t, h, v = size
    print(f"T={t} H={h} V={v} float32 (logits {t * v * 4 / 2**20:.0f} MiB, weight "
          f"{v * h * 4 / 2**20:.0f} MiB), loss + grad(hidden, weight), {calls} timed calls, "
          f"{os.cpu_count()} cores; peak = RSS high-water mark above the inputs")
    chosen = [(n, py) for n, py in contenders()
              if not args.only or n in args.only.split(",")]
    best = {}
    for _ in range(args.rounds):
        for name, python in chosen:
            r = run_one(name, python, size, calls)
            old = best.get(name)
            if old is None or "error" in old:
                best[name] = r
            elif "error" not in r:
                best[name] = dict(r, ms=min(r["ms"], old["ms"]),
                                  peak_mib=max(r["peak_mib"], old["peak_mib"]))
    rows = [(name, best[name]) for name, _ in chosen]
    ref = dict(rows).get("starling:unfused-compiled", {})
    print(f"  {'contender':26s} {'ms':>9s} {'peak MiB':>9s} {'time/unfused':>13s} "
          f"{'unfused/peak':>13s} {'loss':>10s}")
    for name, r in rows:
        if "error" in r:
            print(f"  {name:26s} failed: {r['error']}")
            continue
        tr = f"{r['ms'] / ref['ms']:13.2f}" if "ms" in ref else f"{'-':>13s}"
        mr = f"{ref['peak_mib'] / r['peak_mib']:13.2f}" if min(
            ref.get("peak_mib", 0), r["peak_mib"]) >= 1 else f"{'-':>13s}"
        print(f"  {name:26s} {r['ms']:9.1f} {r['peak_mib']:9.1f} {tr} {mr} {r['loss']:10.6f}"
              + ("" if r["method"] == "VmHWM" else "  (ru_maxrss)"))


if __name__ == "__main__":
    main()
