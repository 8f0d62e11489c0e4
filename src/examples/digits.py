"""The main job: train a handwritten-digit classifier on real data, two ways.

Data: scikit-learn's bundled digits set (1797 8x8 images, 10 classes; no download), split into
train / held-out test with a seeded shuffle.

    python -m starling.examples.digits                 # pure-function model (default)
    python -m starling.examples.digits --style module  # nn.Sequential + optim.Adam
    python -m starling.examples.digits --epochs 30 --seed 1

The default run trains a pure-function MLP with ``compile(value_and_grad(loss))`` and Adam
(``starling.optim.adam``, pure init/update); ``--style module`` trains the same MLP PyTorch
style (``nn.value_and_grad`` and ``optim.Adam(model).step`` in a training step compiled by
``nn.compile``, which writes the updated parameters and optimizer state back in place). Both
show a tqdm bar with the running loss, print the
test accuracy, then compute the per-example gradient norms of one batch with
``vmap(grad(loss))`` and takes one differentially private SGD step (per-example clipping plus
Gaussian noise, Abadi et al., "Deep Learning with Differential Privacy", CCS 2016).
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

import starling as st
import starling.numpy as snp
import starling.random as sr
from starling import nn, optim

HIDDEN = 128
CLASSES = 10


def load_digits(seed: int, test_fraction: float = 0.2):
    """(x_train, y_train, x_test, y_test): features float32 in [0, 1] ``(n, 64)``, labels int64."""
    from sklearn.datasets import load_digits as _load
    data = _load()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


# ---- the pure-function model -------------------------------------------------------------------

def init_params(key, sizes=(64, HIDDEN, CLASSES)):
    """He-initialised MLP parameters: a list of ``(w (in, out), b (out,))`` float32 pairs."""
    params = []
    for k, (m, n) in zip(sr.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append((sr.normal(k, (m, n)) * math.sqrt(2.0 / m), snp.zeros((n,))))
    return params


def logits_fn(params, x):
    """Logits ``(batch, 10)`` of the MLP for inputs ``x`` ``(batch, 64)``."""
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = nn.functional.relu(h)
    return h


def loss_fn(params, x, y):
    """Mean cross-entropy of integer labels ``y`` ``(batch,)``."""
    return nn.functional.cross_entropy(logits_fn(params, x), y)


def accuracy(params, x, y) -> float:
    """Fraction of the examples whose arg-max logit is the label.

    Args:
        params: the MLP parameters, ``[(w1, b1), (w2, b2)]``.
        x: images, shape ``(batch, 64)``, float.
        y: labels, shape ``(batch,)``, integers in ``[0, 10)``.
    Returns:
        The accuracy as a Python float in ``[0, 1]``.
    """
    pred = snp.argmax(logits_fn(params, snp.asarray(x)), axis=-1)
    return float(snp.mean(pred == snp.asarray(y)))


def batches(rng, n, batch_size):
    """Yields the index arrays of one epoch's minibatches: ``rng.permutation(n)`` cut into
    ``n // batch_size`` chunks of ``batch_size`` (the incomplete last chunk is dropped)."""
    order = rng.permutation(n)
    for start in range(0, n - batch_size + 1, batch_size):
        yield order[start:start + batch_size]


def train_function_style(data, epochs, seed, batch_size, lr, progress=True, params=None,
                         loss=None):
    """Trains a pure-function model with ``compile(value_and_grad(loss))`` and Adam; returns
    (params, losses per step). Default: this example's MLP (``init_params(key(seed))``,
    ``loss_fn``); other examples pass their own initial ``params`` and ``loss(params, x, y)``."""
    x_tr, y_tr, _, _ = data
    params = init_params(sr.key(seed)) if params is None else params
    loss = loss_fn if loss is None else loss
    opt = optim.adam(lr=lr)
    opt_state = opt.init(params)

    @st.compile
    def train_step(params, opt_state, x, y):
        value, grads = st.value_and_grad(loss)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, value

    rng = np.random.default_rng(seed)
    losses = []
    for epoch, bar in _epochs(epochs, len(x_tr) // batch_size, progress):
        for idx in batches(rng, len(x_tr), batch_size):
            params, opt_state, value = train_step(params, opt_state, snp.asarray(x_tr[idx]),
                                                  snp.asarray(y_tr[idx]))
            losses.append(float(value))
            _tick(bar, losses)
    return params, losses


# ---- the module-style model --------------------------------------------------------------------

def make_model(key):
    """``nn.Sequential(Linear(64, 128), ReLU(), Linear(128, 10))`` with PyTorch's default init."""
    k1, k2 = sr.split(key)
    return nn.Sequential(nn.Linear(64, HIDDEN, key=k1), nn.ReLU(), nn.Linear(HIDDEN, CLASSES, key=k2))


def train_module_style(data, epochs, seed, batch_size, lr, progress=True):
    """Trains an nn.Sequential with the stateful optim.Adam, the step compiled by
    ``nn.compile``; returns (model, losses)."""
    x_tr, y_tr, _, _ = data
    model = make_model(sr.key(seed))
    opt = optim.Adam(model, lr=lr)
    loss_and_grad = nn.value_and_grad(lambda m, x, y: nn.functional.cross_entropy(m(x), y))

    @nn.compile  # staged once; updates model and opt in place after each call, as eagerly
    def train_step(model, opt, x, y):
        loss, grads = loss_and_grad(model, x, y)
        opt.step(grads)
        return loss

    rng = np.random.default_rng(seed)
    losses = []
    for epoch, bar in _epochs(epochs, len(x_tr) // batch_size, progress):
        for idx in batches(rng, len(x_tr), batch_size):
            loss = train_step(model, opt, snp.asarray(x_tr[idx]), snp.asarray(y_tr[idx]))
            losses.append(float(loss))
            _tick(bar, losses)
    return model, losses


# ---- differentially private SGD on one batch ---------------------------------------------------

def per_example_grad_norms(params, x, y):
    """Per-example gradients via ``vmap(grad(loss))`` and their global L2 norms ``(batch,)``."""
    def one(params, xi, yi):
        return loss_fn(params, xi[None], yi[None])
    grads = st.vmap(st.grad(one), in_axes=(None, 0, 0))(params, x, y)
    sq = sum(snp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in st.tree.leaves(grads))
    return grads, snp.sqrt(sq)


def dp_sgd_step(params, x, y, key, clip=1.0, noise_multiplier=1.1, lr=0.1):
    """One DP-SGD step: clip each example's gradient to norm ``clip``, sum, add
    ``N(0, (noise_multiplier * clip)^2)`` noise, average, and take an SGD step."""
    grads, norms = per_example_grad_norms(params, x, y)
    scale = snp.minimum(1.0, clip / snp.maximum(norms, 1e-12))
    leaves, treedef = st.tree.flatten(grads)
    keys = sr.split(key, len(leaves))
    noisy = []
    for g, k in zip(leaves, keys):
        clipped = snp.sum(g * scale.reshape((-1,) + (1,) * (g.ndim - 1)), axis=0)
        noise = sr.normal(k, clipped.shape) * (noise_multiplier * clip)
        noisy.append((clipped + noise) / x.shape[0])
    mean_grad = st.tree.unflatten(treedef, noisy)
    new = st.tree.map(lambda p, g: p - lr * g, params, mean_grad)
    return new, norms


# ---- CLI ---------------------------------------------------------------------------------------

def _epochs(epochs, steps, progress):
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=epochs * steps, desc="train", unit="step", leave=True)
    try:
        for e in range(epochs):
            yield e, bar
    finally:
        if bar is not None:
            bar.close()


def _tick(bar, losses):
    if bar is not None:
        window = losses[-20:]
        bar.set_postfix(loss=f"{sum(window) / len(window):.4f}")
        bar.update(1)


def main(argv=None):
    """Command line of this example (see the module docstring): trains, prints the test accuracy,
    the per-example gradient norms of one batch and the effect of one DP-SGD step.

    Args:
        argv: the arguments (list of str); None reads ``sys.argv``.
    Returns:
        The test accuracy (float in ``[0, 1]``).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--style", choices=("function", "module"), default="function")
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1:
        parser.error("--epochs and --batch-size must be positive")
    if not (args.lr > 0 and args.lr < float("inf")):
        parser.error(f"--lr must be a positive finite number, got {args.lr}")

    data = load_digits(args.seed)
    x_tr, y_tr, x_te, y_te = data
    print(f"digits: {len(x_tr)} train / {len(x_te)} test images, {args.style} style")
    t0 = time.perf_counter()
    if args.style == "function":
        params, losses = train_function_style(data, args.epochs, args.seed, args.batch_size,
                                              args.lr, not args.no_progress)
    else:
        model, losses = train_module_style(data, args.epochs, args.seed, args.batch_size,
                                           args.lr, not args.no_progress)
        params = [(model[0].weight.T, model[0].bias), (model[2].weight.T, model[2].bias)]
    elapsed = time.perf_counter() - t0
    acc = accuracy(params, x_te, y_te)
    print(f"final train loss {losses[-1]:.4f}  ({len(losses)} steps in {elapsed:.1f} s)")
    print(f"test accuracy {acc * 100:.2f}%")

    xb, yb = snp.asarray(x_tr[:args.batch_size]), snp.asarray(y_tr[:args.batch_size])
    before = float(loss_fn(params, xb, yb))
    new_params, norms = dp_sgd_step(params, xb, yb, sr.key(args.seed + 1))
    n = np.asarray(norms)
    print(f"per-example gradient norms (vmap(grad)) of one batch: min {n.min():.3f}  "
          f"median {np.median(n):.3f}  max {n.max():.3f}")
    print(f"DP-SGD step (clip 1.0, noise x1.1): batch loss {before:.4f} -> "
          f"{float(loss_fn(new_params, xb, yb)):.4f}")
    return acc


if __name__ == "__main__":
    main()
