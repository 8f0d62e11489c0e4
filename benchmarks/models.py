"""Real models on CPU: Starling's compiled programs vs jax.jit, torch.compile and torch eager.

Cases (float32, the issue's shapes):
  transformer  pre-LN transformer block (batch 8, seq 128, d 256, 4 heads, causal softmax
               attention, GELU MLP 1024): loss and gradients w.r.t. every parameter   (ms/step)
               target: >= 1.2x the faster of jax.jit and torch.compile
  mlp          training step of the 784-512-512-10 MLP, batch 128 (value_and_grad + SGD)
               target: >= 1.2x jax.jit                                                (steps/s)
  rnn          gradient of a tanh RNN unrolled by ``scan`` (seq 200, hidden 256, batch 32)
               target: >= 1.2x jax.jit                                                (ms/step)
  bmm          1000 batched 16x16 @ 16x16 matmuls, compiled and eager
               target: <= torch.bmm's time                                            (us/call)
  load         the MLP step on a quiet machine, then with one busy-looping process per core
               (started and stopped here, each ends itself after ``--load-seconds``):
               target: Starling keeps at least the fraction of its quiet speed that jax.jit
               keeps of its own.

Every library runs in its own process, rounds interleaved (benchmarks/harness.py: peers not
importable here run under ``$STARLING_PEER_PYTHON``); per contender the median and the best
round, the CPU time per call (all threads), and ratios (>1: Starling better). Each worker checks
its first result against a float64 NumPy reference of the same model (transformer: the loss;
the others: loss / product values) before it is timed. Peers that are not installed are
skipped. Run: ``python benchmarks/models.py [--quick] [--cases transformer,mlp,...]``.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import harness

# transformer block
B, T, D, H, FF = 8, 128, 256, 4, 1024
# MLP
SIZES, BATCH, LR = (784, 512, 512, 10), 128, 0.01
# RNN
SEQ, HID, RB = 200, 256, 32
# bmm
NB, MB = 1000, 16


# ---- data (identical in every process) ---------------------------------------------------------

def transformer_data():
    rng = np.random.default_rng(0)

    def w(m, n):
        return (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32)
    params = {"ln1_g": np.ones(D, np.float32), "ln1_b": np.zeros(D, np.float32),
              "wqkv": w(D, 3 * D), "wo": w(D, D),
              "ln2_g": np.ones(D, np.float32), "ln2_b": np.zeros(D, np.float32),
              "w1": w(D, FF), "b1": np.zeros(FF, np.float32),
              "w2": w(FF, D), "b2": np.zeros(D, np.float32)}
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    return params, x


def mlp_data():
    rng = np.random.default_rng(0)
    params = [((rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32),
               np.zeros(n, np.float32)) for m, n in zip(SIZES[:-1], SIZES[1:])]
    x = rng.normal(size=(BATCH, SIZES[0])).astype(np.float32)
    y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    return params, x, y


def rnn_data():
    rng = np.random.default_rng(0)
    params = {"wx": (rng.standard_normal((HID, HID)) / np.sqrt(HID)).astype(np.float32),
              "wh": (rng.standard_normal((HID, HID)) / np.sqrt(HID) * 0.5).astype(np.float32),
              "b": np.zeros(HID, np.float32)}
    xs = rng.standard_normal((SEQ, RB, HID)).astype(np.float32)
    return params, xs


def bmm_data():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((NB, MB, MB)).astype(np.float32),
            rng.standard_normal((NB, MB, MB)).astype(np.float32))


# ---- references (float64 NumPy, forward values only) -------------------------------------------

def _np_ln(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


def _np_gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def transformer_ref():
    p, x = transformer_data()
    p = {k: v.astype(np.float64) for k, v in p.items()}
    x = x.astype(np.float64)
    h = _np_ln(x, p["ln1_g"], p["ln1_b"])
    q, k, v = np.split(h @ p["wqkv"], 3, axis=-1)

    def heads(t):
        return t.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)
    q, k, v = heads(q), heads(k), heads(v)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D // H)
    s = np.where(np.tril(np.ones((T, T), bool)), s, -1e9)
    s = np.exp(s - s.max(-1, keepdims=True))
    a = (s / s.sum(-1, keepdims=True)) @ v
    x = x + a.transpose(0, 2, 1, 3).reshape(B, T, D) @ p["wo"]
    h = _np_ln(x, p["ln2_g"], p["ln2_b"])
    x = x + _np_gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return float(np.mean(x * x))


def mlp_ref():
    params, x, y = mlp_data()
    h = x.astype(np.float64)
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = np.maximum(h, 0)
    m = h.max(-1, keepdims=True)
    logp = h - (m + np.log(np.exp(h - m).sum(-1, keepdims=True)))
    return float(-np.sum(logp * y) / x.shape[0])


def rnn_ref():
    p, xs = rnn_data()
    h = np.zeros((RB, HID))
    total = 0.0
    for t in range(SEQ):
        h = np.tanh(xs[t] @ p["wx"] + h @ p["wh"] + p["b"])
        total += float(np.sum(h * h))
    return total / (SEQ * RB)


def bmm_ref():
    a, b = bmm_data()
    return a.astype(np.float64) @ b.astype(np.float64)


# ---- Starling ----------------------------------------------------------------------------------

def starling_case(case, eager=False):
    import starling as st
    import starling.numpy as snp
    import starling.nn.functional as F

    def ln(x, g, b):
        mu = snp.mean(x, axis=-1, keepdims=True)
        var = snp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / snp.sqrt(var + 1e-5) * g + b

    if case == "transformer":
        pn, xn = transformer_data()
        mask = snp.asarray(np.tril(np.ones((T, T), bool)))

        def loss(p, x):
            h = ln(x, p["ln1_g"], p["ln1_b"])
            qkv = h @ p["wqkv"]
            q, k, v = qkv[..., :D], qkv[..., D:2 * D], qkv[..., 2 * D:]

            def heads(t):
                return snp.transpose(snp.reshape(t, (B, T, H, D // H)), (0, 2, 1, 3))
            q, k, v = heads(q), heads(k), heads(v)
            s = q @ snp.swapaxes(k, -1, -2) / math.sqrt(D // H)
            s = snp.where(mask, s, -1e9)
            a = F.softmax(s, dim=-1) @ v
            x = x + snp.reshape(snp.transpose(a, (0, 2, 1, 3)), (B, T, D)) @ p["wo"]
            h = ln(x, p["ln2_g"], p["ln2_b"])
            x = x + F.gelu(h @ p["w1"] + p["b1"], approximate="tanh") @ p["w2"] + p["b2"]
            return snp.mean(x * x)
        f = st.value_and_grad(loss)
        if not eager:
            f = st.compile(f)
        p = {k: snp.asarray(v) for k, v in pn.items()}
        x = snp.asarray(xn)
        return (lambda: st.tree.map(lambda a: a.block_until_ready(), f(p, x)),
                lambda out: float(out[0]))
    if case == "mlp":
        pn, xn, yn = mlp_data()

        def loss(params, x, y):
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = snp.maximum(h, 0.0)
            logp = h - snp.logsumexp(h, axis=-1, keepdims=True)
            return -snp.sum(logp * y) / x.shape[0]

        def step(params, x, y):
            l, g = st.value_and_grad(loss)(params, x, y)
            return l, [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, g)]
        f = step if eager else st.compile(step)
        params = [(snp.asarray(w), snp.asarray(b)) for w, b in pn]
        x, y = snp.asarray(xn), snp.asarray(yn)
        return (lambda: st.tree.map(lambda a: a.block_until_ready(), f(params, x, y)),
                lambda out: float(out[0]))
    if case == "rnn":
        pn, xsn = rnn_data()

        def loss(p, xs):
            def cell(h, x):
                h = snp.tanh(x @ p["wx"] + h @ p["wh"] + p["b"])
                return h, snp.sum(h * h)
            _, ys = st.scan(cell, snp.zeros((RB, HID)), xs)
            return snp.sum(ys) / (SEQ * RB)
        f = st.value_and_grad(loss)
        if not eager:
            f = st.compile(f)
        p = {k: snp.asarray(v) for k, v in pn.items()}
        xs = snp.asarray(xsn)
        return (lambda: st.tree.map(lambda a: a.block_until_ready(), f(p, xs)),
                lambda out: float(out[0]))
    if case == "bmm":
        an, bn = bmm_data()
        a, b = snp.asarray(an), snp.asarray(bn)
        f = snp.matmul if eager else st.compile(snp.matmul)
        return lambda: f(a, b).block_until_ready(), lambda out: np.asarray(out)
    raise SystemExit(f"unknown case {case}")


# ---- JAX ---------------------------------------------------------------------------------------

def jax_case(case):
    import jax
    import jax.numpy as jnp

    def ln(x, g, b):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * g + b

    if case == "transformer":
        pn, xn = transformer_data()
        mask = jnp.asarray(np.tril(np.ones((T, T), bool)))

        def loss(p, x):
            h = ln(x, p["ln1_g"], p["ln1_b"])
            qkv = h @ p["wqkv"]
            q, k, v = qkv[..., :D], qkv[..., D:2 * D], qkv[..., 2 * D:]

            def heads(t):
                return jnp.transpose(jnp.reshape(t, (B, T, H, D // H)), (0, 2, 1, 3))
            q, k, v = heads(q), heads(k), heads(v)
            s = q @ jnp.swapaxes(k, -1, -2) / math.sqrt(D // H)
            s = jnp.where(mask, s, -1e9)
            a = jax.nn.softmax(s, axis=-1) @ v
            x = x + jnp.reshape(jnp.transpose(a, (0, 2, 1, 3)), (B, T, D)) @ p["wo"]
            h = ln(x, p["ln2_g"], p["ln2_b"])
            x = x + jax.nn.gelu(h @ p["w1"] + p["b1"], approximate=True) @ p["w2"] + p["b2"]
            return jnp.mean(x * x)
        f = jax.jit(jax.value_and_grad(loss))
        p = jax.device_put(pn)
        x = jnp.asarray(xn)
        return lambda: jax.block_until_ready(f(p, x)), lambda out: float(out[0])
    if case == "mlp":
        pn, xn, yn = mlp_data()

        def loss(params, x, y):
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = jnp.maximum(h, 0.0)
            logp = h - jax.nn.logsumexp(h, axis=-1, keepdims=True)
            return -jnp.sum(logp * y) / x.shape[0]

        @jax.jit
        def step(params, x, y):
            l, g = jax.value_and_grad(loss)(params, x, y)
            return l, [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, g)]
        params = jax.device_put(pn)
        x, y = jnp.asarray(xn), jnp.asarray(yn)
        return lambda: jax.block_until_ready(step(params, x, y)), lambda out: float(out[0])
    if case == "rnn":
        pn, xsn = rnn_data()

        def loss(p, xs):
            def cell(h, x):
                h = jnp.tanh(x @ p["wx"] + h @ p["wh"] + p["b"])
                return h, jnp.sum(h * h)
            _, ys = jax.lax.scan(cell, jnp.zeros((RB, HID)), xs)
            return jnp.sum(ys) / (SEQ * RB)
        f = jax.jit(jax.value_and_grad(loss))
        p = jax.device_put(pn)
        xs = jnp.asarray(xsn)
        return lambda: jax.block_until_ready(f(p, xs)), lambda out: float(out[0])
    if case == "bmm":
        an, bn = bmm_data()
        a, b = jnp.asarray(an), jnp.asarray(bn)
        f = jax.jit(jnp.matmul)
        return lambda: f(a, b).block_until_ready(), lambda out: np.asarray(out)
    raise SystemExit(f"unknown case {case}")


# ---- PyTorch -----------------------------------------------------------------------------------

def torch_case(case, compiled):
    import torch
    import torch.nn.functional as TF

    def ln(x, g, b):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-5) * g + b

    def maybe_compile(fn):
        return torch.compile(fn) if compiled else fn

    if case == "transformer":
        pn, xn = transformer_data()
        mask = torch.from_numpy(np.tril(np.ones((T, T), bool)))

        def loss(p, x):
            h = ln(x, p["ln1_g"], p["ln1_b"])
            q, k, v = (h @ p["wqkv"]).split(D, dim=-1)

            def heads(t):
                return t.reshape(B, T, H, D // H).permute(0, 2, 1, 3)
            q, k, v = heads(q), heads(k), heads(v)
            s = q @ k.transpose(-1, -2) / math.sqrt(D // H)
            s = torch.where(mask, s, -1e9)
            a = torch.softmax(s, dim=-1) @ v
            x = x + a.permute(0, 2, 1, 3).reshape(B, T, D) @ p["wo"]
            h = ln(x, p["ln2_g"], p["ln2_b"])
            x = x + TF.gelu(h @ p["w1"] + p["b1"], approximate="tanh") @ p["w2"] + p["b2"]
            return (x * x).mean()
        f = maybe_compile(torch.func.grad_and_value(loss))
        p = {k: torch.from_numpy(v.copy()) for k, v in pn.items()}
        x = torch.from_numpy(xn)
        return lambda: f(p, x), lambda out: float(out[1])
    if case == "mlp":
        pn, xn, yn = mlp_data()

        def loss(params, x, y):
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = torch.relu(h)
            logp = h - torch.logsumexp(h, dim=-1, keepdim=True)
            return -(logp * y).sum() / x.shape[0]

        def step(params, x, y):
            g, l = torch.func.grad_and_value(loss)(params, x, y)
            return l, [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, g)]
        f = maybe_compile(step)
        params = [(torch.from_numpy(w.copy()), torch.from_numpy(b.copy())) for w, b in pn]
        x, y = torch.from_numpy(xn), torch.from_numpy(yn)
        return lambda: f(params, x, y), lambda out: float(out[0])
    if case == "rnn":
        pn, xsn = rnn_data()

        def loss(p, xs):
            h = torch.zeros(RB, HID)
            total = 0.0
            for t in range(SEQ):
                h = torch.tanh(xs[t] @ p["wx"] + h @ p["wh"] + p["b"])
                total = total + (h * h).sum()
            return total / (SEQ * RB)
        f = maybe_compile(torch.func.grad_and_value(loss))
        p = {k: torch.from_numpy(v.copy()) for k, v in pn.items()}
        xs = torch.from_numpy(xsn)
        return lambda: f(p, xs), lambda out: float(out[1])
    if case == "bmm":
        an, bn = bmm_data()
        a, b = torch.from_numpy(an), torch.from_numpy(bn)
        f = maybe_compile(torch.bmm)
        return lambda: f(a, b), lambda out: out.numpy()
    raise SystemExit(f"unknown case {case}")


def check(case, value):
    """Raises when a worker's first result disagrees with the float64 reference."""
    if case == "bmm":
        np.testing.assert_allclose(value, bmm_ref(), rtol=1e-4, atol=1e-4)
        return
    want = {"transformer": transformer_ref, "mlp": mlp_ref, "rnn": rnn_ref}[case]()
    if not abs(value - want) <= 1e-3 * abs(want) + 1e-5:
        raise AssertionError(f"{case}: loss {value} differs from the float64 reference {want}")


def worker(lib, case):
    if lib == "starling":
        run, value = starling_case(case)
    elif lib == "starling-eager":
        run, value = starling_case(case, eager=True)
    elif lib == "jax":
        run, value = jax_case(case)
    elif lib in ("torch", "torch-compile"):
        run, value = torch_case(case, lib == "torch-compile")
    else:
        raise SystemExit(f"unknown library {lib}")
    check(case, value(run()))
    harness.serve(run)


# ---- driver ------------------------------------------------------------------------------------

LABELS = {"starling": "starling compile", "starling-eager": "starling eager",
          "jax": "jax.jit", "torch-compile": "torch.compile", "torch": "torch eager"}
MODULES = {"starling": None, "starling-eager": None, "jax": "jax", "torch": "torch",
           "torch-compile": "torch"}


def start(libs, case, round_time):
    return harness.start(__file__, case, {lib: MODULES[lib] for lib in libs}, round_time)


def measure(workers, rounds):
    return harness.measure(workers, rounds)


def busy_loop(seconds):
    """One process per CPU spinning for at most ``seconds`` (they end themselves)."""
    code = f"import time\nt = time.monotonic() + {seconds}\nwhile time.monotonic() < t: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)]


def run_case(case, rounds, round_time):
    libs = {"transformer": ["starling", "jax", "torch-compile", "torch"],
            "mlp": ["starling", "jax", "torch-compile", "torch"],
            "rnn": ["starling", "jax", "torch"],
            "bmm": ["starling", "starling-eager", "jax", "torch"]}[case]
    workers = start(libs, case, round_time)
    try:
        times = measure(workers, rounds)
    finally:
        harness.close(workers)
    cpu = {lib: w.cpu for lib, w in workers.items()}
    title, unit, target = {
        "transformer": ("transformer block fwd+bwd (B 8, T 128, d 256, 4 heads, MLP 1024)",
                        "ms", ">= 1.2x the faster of jax.jit and torch.compile"),
        "mlp": ("MLP 784-512-512-10 training step, batch 128", "ms", ">= 1.2x jax.jit"),
        "rnn": ("scan RNN grad (seq 200, hidden 256, batch 32)", "ms", ">= 1.2x jax.jit"),
        "bmm": ("bmm 1000 x (16x16 @ 16x16)", "us", "<= torch.bmm (torch eager)"),
    }[case]
    harness.report(title, times, "starling", unit=unit, labels=LABELS, cpu=cpu,
                   target=target)


def run_load(rounds, round_time, load_seconds):
    workers = start(["starling", "jax"], "mlp", round_time)
    try:
        quiet = measure(workers, rounds)
        procs = busy_loop(load_seconds)
        try:
            time.sleep(0.5)
            loaded = measure(workers, rounds)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    finally:
        harness.close(workers)
    print(f"\nMLP step under load ({os.cpu_count()} busy-looping processes, one per CPU)")
    frac = {}
    for lib in workers:
        q, lo = statistics.median(quiet[lib]), statistics.median(loaded[lib])
        frac[lib] = q / lo
        print(f"  {LABELS[lib]:18s} quiet {1 / q:8.1f} steps/s  loaded {1 / lo:8.1f} steps/s "
              f"(best {1 / min(loaded[lib]):8.1f})  keeps {frac[lib] * 100:5.1f}%")
    if "jax" in frac:
        print(f"  target: starling keeps >= jax.jit's fraction "
              f"({frac['starling'] * 100:.1f}% vs {frac['jax'] * 100:.1f}%)")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], sys.argv[3])
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer and shorter rounds")
    ap.add_argument("--cases", default="transformer,mlp,rnn,bmm,load")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--load-seconds", type=float, default=120.0,
                    help="upper bound on the life of the busy-looping processes")
    args = ap.parse_args()
    rounds = args.rounds or (5 if args.quick else 11)
    round_time = 0.15 if args.quick else 0.3
    print(f"Starling models benchmark (cpu count {os.cpu_count()}; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())})")
    for case in args.cases.split(","):
        if case == "load":
            run_load(rounds, round_time, args.load_seconds)
        else:
            run_case(case, rounds, round_time)
    print(f"\nload average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
