"""Per-example gradients: vmap(grad(loss)) of an MLP (784-512-512-10, batch 128, float32), eager.

Compared side by side in one run with: a Python loop of grad over the examples (Starling), NumPy
(hand-written per-example backprop, the floor for eager code), and JAX / torch.func when
installed. Prints examples/s and ratios. Run: ``python benchmarks/per_example_grads.py``.
"""
from __future__ import annotations

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
                       np.zeros(n, np.float32)))
    return params


def loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = snp.maximum(h, 0.0)
    logp = h - snp.logsumexp(h, axis=-1, keepdims=True)
    return -snp.sum(logp * y)


def timeit(fn, repeat=3):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def numpy_per_example(params, x, y):
    """Per-example gradients by explicit batched backprop (einsum outer products)."""
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


def main():
    rng = np.random.default_rng(0)
    params_np = init(rng)
    x_np = rng.normal(size=(BATCH, SIZES[0])).astype(np.float32)
    y_np = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    params = [(snp.asarray(w), snp.asarray(b)) for w, b in params_np]
    x, y = snp.asarray(x_np), snp.asarray(y_np)

    per_ex = st.vmap(st.grad(lambda p, xi, yi: loss(p, xi[None], yi[None])),
                     in_axes=(None, 0, 0))
    g = per_ex(params, x, y)
    ref = numpy_per_example(params_np, x_np, y_np)
    np.testing.assert_allclose(np.asarray(g[0][0]), ref[0][0], rtol=2e-3, atol=2e-4)

    grad_one = st.grad(lambda p, xi, yi: loss(p, xi[None], yi[None]))
    n_loop = 16
    results = {
        "starling vmap(grad)": BATCH / timeit(lambda: per_ex(params, x, y)),
        "starling python loop": n_loop / timeit(
            lambda: [grad_one(params, x[i], y[i]) for i in range(n_loop)], repeat=1),
        "numpy manual backprop": BATCH / timeit(lambda: numpy_per_example(params_np, x_np, y_np)),
    }
    try:
        import jax
        import jax.numpy as jnp

        def jloss(p, xi, yi):
            h = xi[None]
            for i, (w, b) in enumerate(p):
                h = h @ w + b
                if i < len(p) - 1:
                    h = jnp.maximum(h, 0.0)
            return -jnp.sum((h - jax.scipy.special.logsumexp(h, axis=-1, keepdims=True)) * yi)
        jp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params_np]
        jf = jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0))
        results["jax vmap(grad) eager"] = BATCH / timeit(
            lambda: jax.block_until_ready(jf(jp, x_np, y_np)))
    except ImportError:
        pass
    try:
        import torch
        from torch.func import grad, vmap

        tp = [(torch.from_numpy(w.copy()), torch.from_numpy(b.copy())) for w, b in params_np]

        def tloss(p, xi, yi):
            h = xi[None]
            for i, (w, b) in enumerate(p):
                h = h @ w + b
                if i < len(p) - 1:
                    h = torch.clamp_min(h, 0.0)
            return -torch.sum(torch.log_softmax(h, -1) * yi)
        tf = vmap(grad(tloss), in_dims=(None, 0, 0))
        xt, yt = torch.from_numpy(x_np), torch.from_numpy(y_np)
        results["torch.func vmap(grad)"] = BATCH / timeit(lambda: tf(tp, xt, yt))
    except ImportError:
        pass
    base = results["starling vmap(grad)"]
    print(f"per-example gradients, MLP {SIZES}, batch {BATCH}, float32, eager")
    for name, eps in results.items():
        print(f"  {name:<26}{eps:>10.0f} examples/s   ({eps / base:.2f}x starling vmap)")


if __name__ == "__main__":
    main()
