"""A mixture-of-experts classifier on the digits: top-1 routing and grouped GEMMs.

    python -m starling.examples.moe                 # 4 experts, 20 epochs
    python -m starling.examples.moe --experts 8 --epochs 30 --seed 1

The hidden layer is ``E`` expert MLPs (64 -> 64 -> 10) and a router (64 -> E). Each image goes to
the expert its router scores highest (top-1 routing, as the Switch Transformer: Fedus, Zoph and
Shazeer, "Switch Transformers", JMLR 2022) and the expert's logits are scaled by the router's
probability, so the router learns from the loss; an auxiliary load-balancing loss
(``E * sum_i f_i * P_i``, the same paper) keeps the experts busy. The images are sorted by
expert so that every expert layer is ONE grouped matrix product, ``lax.ragged_dot``, for the
whole batch, forward and backward (its weight gradient is the same grouped product), compiled
with ``value_and_grad`` and Adam.

After training it prints the test accuracy, the experts' shares of the test images, and the
accuracy with the expert weights stored in MXFP8 (``lax.quantize_mx``: float8_e4m3fn elements,
one power-of-two scale per 32 weights) and multiplied by ``lax.scaled_matmul``.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

import starling.numpy as snp
import starling.random as sr
from starling import lax, nn

from .digits import load_digits, train_function_style

HIDDEN = 64
CLASSES = 10


def init_params(key, experts):
    """Router ``(64, E)`` and per-expert layers: ``w1 (E, 64, H)``, ``b1 (E, H)``,
    ``w2 (E, H, 10)``, ``b2 (E, 10)`` (He initialisation), float32."""
    k = sr.split(key, 3)
    return {"router": sr.normal(k[0], (64, experts)) * 0.5,
            "w1": sr.normal(k[1], (experts, 64, HIDDEN)) * math.sqrt(2.0 / 64),
            "b1": snp.zeros((experts, HIDDEN)),
            "w2": sr.normal(k[2], (experts, HIDDEN, CLASSES)) * math.sqrt(2.0 / HIDDEN),
            "b2": snp.zeros((experts, CLASSES))}


def route(params, x):
    """(expert of each image ``(batch,)`` int32, its router probability ``(batch,)``, router
    probabilities ``(batch, E)``)."""
    probs = nn.functional.softmax(x @ params["router"], dim=-1)
    expert = snp.argmax(probs, axis=-1).astype(snp.int32)
    return expert, snp.take_along_axis(probs, expert[:, None], axis=1)[:, 0], probs


def experts_forward(params, x, expert, matmul=lax.ragged_dot):
    """Logits ``(batch, 10)``: each image through its expert's MLP, the batch sorted by expert
    so that each layer is one grouped product ``matmul(rows, weights, group_sizes)``."""
    e = params["w1"].shape[0]
    order = snp.argsort(expert, stable=True)
    sizes = snp.sum(nn.functional.one_hot(expert, e), axis=0).astype(snp.int32)
    xs, es = x[order], expert[order]
    h = nn.functional.relu(matmul(xs, params["w1"], sizes) + params["b1"][es])
    out = matmul(h, params["w2"], sizes) + params["b2"][es]
    return snp.zeros_like(out).at[order].set(out)   # back to the batch's order


def logits_fn(params, x):
    """Logits ``(batch, 10)`` of images ``x`` ``(batch, 64)``: each image's expert output
    (``experts_forward``) scaled by its router probability (top-1 routing)."""
    expert, gate, _ = route(params, x)
    return experts_forward(params, x, expert) * gate[:, None]


def loss_fn(params, x, y, balance=0.3):
    """Cross-entropy plus ``balance`` times the Switch Transformer load-balancing loss."""
    expert, gate, probs = route(params, x)
    logits = experts_forward(params, x, expert) * gate[:, None]
    e = probs.shape[1]
    share = snp.mean(nn.functional.one_hot(expert, e), axis=0)     # f_i: images sent to i
    mean_prob = snp.mean(probs, axis=0)                              # P_i
    return nn.functional.cross_entropy(logits, y) + balance * e * snp.sum(share * mean_prob)


def train(data, experts, epochs, seed, batch_size, lr):
    """Trains the mixture (the digits example's compiled Adam loop); returns (params, losses
    per step)."""
    return train_function_style(data, epochs, seed, batch_size, lr, progress=False,
                                params=init_params(sr.key(seed), experts), loss=loss_fn)


def mxfp8_matmul(quantized):
    """A grouped product over MXFP8 expert weights: ``quantized[id(w)]`` holds each weight's
    (elements, scales), blocks of 32 along its input dim; each expert's rows are multiplied by
    ``scaled_matmul`` on their own (the rows quantized on the fly the same way)."""
    def matmul(rows, w, sizes):
        q, s = quantized[id(w)]
        outs, start = [], 0
        for i, n in enumerate(np.asarray(sizes).tolist()):
            xq, xs = lax.quantize_mx(rows[start:start + n], axis=1)
            outs.append(lax.scaled_matmul(xq, q[i], xs, s[i]))
            start += n
        return snp.concatenate(outs, axis=0)
    return matmul


def accuracy(params, x, y, matmul=lax.ragged_dot) -> float:
    """Fraction of ``x`` ``(batch, 64)`` classified as ``y`` ``(batch,)``."""
    x = snp.asarray(x)
    expert, gate, _ = route(params, x)
    logits = experts_forward(params, x, expert, matmul) * gate[:, None]
    return float(snp.mean(snp.argmax(logits, axis=-1) == snp.asarray(y)))


def main(argv=None):
    """Command line (see the module docstring). Returns (test accuracy, MXFP8 accuracy)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experts", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args(argv)
    if args.experts < 1 or args.epochs < 1 or args.batch_size < 1:
        parser.error("--experts, --epochs and --batch-size must be positive")
    if not 0 < args.lr < float("inf"):
        parser.error(f"--lr must be a positive finite number, got {args.lr}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    data = load_digits(args.seed)
    x_tr, _, x_te, y_te = data
    if args.batch_size > len(x_tr):
        parser.error(f"--batch-size must be at most the {len(x_tr)} training images, got "
                     f"{args.batch_size}")
    print(f"digits: {len(x_tr)} train / {len(x_te)} test images, {args.experts} experts")
    t0 = time.perf_counter()
    params, losses = train(data, args.experts, args.epochs, args.seed, args.batch_size, args.lr)
    print(f"final train loss {losses[-1]:.4f}  ({len(losses)} steps in "
          f"{time.perf_counter() - t0:.1f} s)")
    acc = accuracy(params, x_te, y_te)
    print(f"test accuracy {acc * 100:.2f}%")
    expert, _, _ = route(params, snp.asarray(x_te))
    shares = np.bincount(np.asarray(expert), minlength=args.experts) / len(x_te)
    busy = " ".join(f"{s:.2f}" for s in shares[:16]) + (" ..." if len(shares) > 16 else "")
    print(f"experts' shares of the test images: {busy}")
    quantized = {id(params[k]): lax.quantize_mx(params[k], axis=1) for k in ("w1", "w2")}
    acc8 = accuracy(params, x_te, y_te, mxfp8_matmul(quantized))
    print(f"test accuracy with MXFP8 expert weights {acc8 * 100:.2f}%")
    return acc, acc8


if __name__ == "__main__":
    main()
