"""Per-example gradients: vmap(grad(loss)) of an MLP (784-512-512-10, batch 128, float32).

Measured side by side in one run (examples per second, best of ``--repeat`` timed calls after a
warm-up call, so compilation is never timed; the peers take turns, one call each per round, so a
busy machine slows them alike):

- Starling eager ``vmap(grad)``, ``compile(vmap(grad))`` on the ``cpp`` backend and on
  ``numpy_ref``, and a Python loop of ``grad`` over the examples;
- NumPy: hand-written per-example backprop (einsum outer products), the floor for eager code;
- JAX (when installed): ``jax.vmap(jax.grad)`` eager and under ``jax.jit``;
- PyTorch (when installed): ``torch.func.vmap(torch.func.grad)`` eager and under
  ``torch.compile`` (its compilation takes tens of seconds; ``--no-torch-compile`` skips it).

A peer that is not installed (or fails to build) is skipped with a note. Every compiled result
is checked against the NumPy float64 reference before it is timed. The issue's target is
``starling compile(cpp)`` >= ``torch.compile(torch.func)``; the ratio is printed last.

Run: ``python benchmarks/per_example_grads.py [--batch N] [--repeat N] [--quick]``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import starling as st
import starling.numpy as snp

SIZES = (784, 512, 512, 10)
BATCH = 128


def init(rng):
    params = []
    for m, n in zip(SIZES[:-1], SIZES[1:]):
        params.append(((rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32),
                       (rng.normal(size=n) * 0.1).astype(np.float32)))
    return params


def loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = snp.maximum(h, 0.0)
    logp = h - snp.logsumexp(h, axis=-1, keepdims=True)
    return -snp.sum(logp * y)


def per_example_fn():
    """``(params, x[batch, 784], y[batch, 10]) -> per-example grads`` (params' structure, each
    leaf with a leading batch dim): Starling's vmap(grad) of the single-example loss."""
    return st.vmap(st.grad(lambda p, xi, yi: loss(p, xi[None], yi[None])), in_axes=(None, 0, 0))


def measure(peers, repeat):
    """``{name: examples/s}`` for ``peers`` = [(name, fn, examples per call)]: each fn is called
    once to warm up, then ``repeat`` rounds of one timed call per peer; the best call counts."""
    for _, fn, _ in peers:
        fn()
    best = {name: float("inf") for name, _, _ in peers}
    for _ in range(repeat):
        for name, fn, _ in peers:
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return {name: n / best[name] for name, _, n in peers}


def numpy_per_example(params, x, y):
    """Per-example gradients by explicit batched backprop (einsum outer products); computed in
    the dtype of the inputs (float64 inputs give the reference)."""
    acts, h = [x], x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = np.maximum(h, 0)
        acts.append(h)
    z = acts[-1]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    delta = p * y.sum(axis=1, keepdims=True) - y
    grads = []
    for i in range(len(params) - 1, -1, -1):
        w, _ = params[i]
        grads.append((np.einsum("bi,bj->bij", acts[i], delta), delta))
        if i:
            delta = (delta @ w.T) * (acts[i] > 0)
    return grads[::-1]


def check(name, got, ref):
    """``got`` (a list of (w, b) per-example grads, any array type) against the float64 ref."""
    for (gw, gb), (rw, rb) in zip(got, ref):
        for g, r in ((gw, rw), (gb, rb)):
            g = np.asarray(g, dtype=np.float64)
            if g.shape != r.shape or not np.allclose(g, r, rtol=2e-3, atol=2e-4):
                raise AssertionError(f"{name}: per-example gradients differ from the float64 "
                                     f"reference (shape {g.shape} vs {r.shape}, max abs err "
                                     f"{np.max(np.abs(g - r)) if g.shape == r.shape else 'n/a'})")


def starling_peers(params_np, x_np, y_np, ref, peers, n_loop):
    params = [(snp.asarray(w), snp.asarray(b)) for w, b in params_np]
    x, y = snp.asarray(x_np), snp.asarray(y_np)
    batch = x_np.shape[0]
    per_ex = per_example_fn()
    for backend in ("cpp", "numpy_ref"):
        f = st.compile(per_ex, backend=backend)
        check(f"starling compile({backend})", f(params, x, y), ref)
        peers.append((f"starling compile({backend})", lambda f=f: f(params, x, y), batch))
    check("starling vmap(grad)", per_ex(params, x, y), ref)
    peers.append(("starling vmap(grad) eager", lambda: per_ex(params, x, y), batch))
    grad_one = st.grad(lambda p, xi, yi: loss(p, xi[None], yi[None]))
    peers.append(("starling python loop",
                  lambda: [grad_one(params, x[i], y[i]) for i in range(n_loop)], n_loop))
    peers.append(("numpy manual backprop", lambda: numpy_per_example(params_np, x_np, y_np),
                  batch))


def jax_peers(params_np, x_np, y_np, ref, peers, notes):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        notes.append("jax not installed: skipped")
        return

    def jloss(p, xi, yi):
        h = xi[None]
        for i, (w, b) in enumerate(p):
            h = h @ w + b
            if i < len(p) - 1:
                h = jnp.maximum(h, 0.0)
        return -jnp.sum((h - jax.scipy.special.logsumexp(h, axis=-1, keepdims=True)) * yi)
    jp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params_np]
    jx, jy = jnp.asarray(x_np), jnp.asarray(y_np)
    batch = x_np.shape[0]
    jf = jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0))
    jj = jax.jit(jf)
    check("jax.jit(vmap(grad))", jj(jp, jx, jy), ref)
    peers.append(("jax vmap(grad) eager", lambda: jax.block_until_ready(jf(jp, jx, jy)), batch))
    peers.append(("jax.jit(vmap(grad))", lambda: jax.block_until_ready(jj(jp, jx, jy)), batch))


def torch_peers(params_np, x_np, y_np, ref, peers, notes, with_compile):
    try:
        import torch
        from torch.func import grad, vmap
    except ImportError:
        notes.append("torch not installed: skipped")
        return
    tp = [(torch.from_numpy(w.copy()), torch.from_numpy(b.copy())) for w, b in params_np]

    def tloss(p, xi, yi):
        h = xi[None]
        for i, (w, b) in enumerate(p):
            h = h @ w + b
            if i < len(p) - 1:
                h = torch.clamp_min(h, 0.0)
        return -torch.sum(torch.log_softmax(h, -1) * yi)
    tf = vmap(grad(tloss), in_dims=(None, 0, 0))
    xt, yt = torch.from_numpy(x_np.copy()), torch.from_numpy(y_np.copy())
    batch = x_np.shape[0]
    peers.append(("torch.func vmap(grad) eager", lambda: tf(tp, xt, yt), batch))
    if not with_compile:
        notes.append("torch.compile: skipped (--no-torch-compile)")
        return
    try:
        tc = torch.compile(tf)
        t0 = time.perf_counter()
        out = tc(tp, xt, yt)          # compiles (tens of seconds); never timed
        notes.append(f"torch.compile warm-up (compilation) took {time.perf_counter() - t0:.1f} s")
        check("torch.compile(vmap(grad))", [(w.numpy(), b.numpy()) for w, b in out], ref)
    except Exception as e:  # noqa: BLE001 - a peer that cannot compile here is reported, not fatal
        notes.append(f"torch.compile failed ({type(e).__name__}: {str(e).splitlines()[0]}): "
                     "skipped")
        return
    peers.append(("torch.compile(vmap(grad))", lambda: tc(tp, xt, yt), batch))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--repeat", type=int, default=7, help="timed calls per peer (best is kept)")
    ap.add_argument("--quick", action="store_true", help="3 timed calls, no torch.compile")
    ap.add_argument("--no-torch-compile", action="store_true")
    args = ap.parse_args(argv)
    repeat = 3 if args.quick else args.repeat
    rng = np.random.default_rng(0)
    params_np = init(rng)
    batch = args.batch
    x_np = rng.normal(size=(batch, SIZES[0])).astype(np.float32)
    y_np = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], batch)]
    ref = numpy_per_example([(w.astype(np.float64), b.astype(np.float64)) for w, b in params_np],
                            x_np.astype(np.float64), y_np.astype(np.float64))
    peers, notes = [], []
    starling_peers(params_np, x_np, y_np, ref, peers, n_loop=min(16, batch))
    jax_peers(params_np, x_np, y_np, ref, peers, notes)
    torch_peers(params_np, x_np, y_np, ref, peers, notes,
                with_compile=not (args.quick or args.no_torch_compile))
    results = measure(peers, repeat)
    base = results["starling compile(cpp)"]
    print(f"per-example gradients vmap(grad), MLP {SIZES}, batch {batch}, float32 "
          f"(best of {repeat})")
    for name, eps in results.items():
        print(f"  {name:<30}{eps:>9.0f} examples/s  {1e3 * batch / eps:8.1f} ms/batch   "
              f"(starling compile(cpp) is {base / eps:.2f}x this)")
    for note in notes:
        print(f"  note: {note}")
    for peer in ("torch.compile(vmap(grad))", "jax.jit(vmap(grad))"):
        if peer in results:
            r = base / results[peer]
            print(f"target starling compile(cpp) >= {peer}: {r:.2f}x "
                  f"({'met' if r >= 1 else 'NOT met'})")


if __name__ == "__main__":
    main()
