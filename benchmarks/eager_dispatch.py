"""Per-call overhead of tiny eager ops: Starling next to NumPy (and JAX / PyTorch when installed).

Target (issue: foundation): Starling within 3x of NumPy's per-call overhead on a tiny
elementwise op. Run: ``python benchmarks/eager_dispatch.py``.
"""
from __future__ import annotations

import timeit

import numpy as np

import starling.numpy as snp


def per_call_us(fn, number=200_000, repeat=5):
    """Best-of-``repeat`` mean time per call in microseconds."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main():
    xn = np.ones(8, np.float32)
    yn = np.ones(8, np.float32)
    xs, ys = snp.asarray(xn), snp.asarray(yn)
    cases = {
        "x + y": (lambda: xn + yn, lambda: xs + ys),
        "sin(x)": (lambda: np.sin(xn), lambda: snp.sin(xs)),
        "x * 2.0": (lambda: xn * 2.0, lambda: xs * 2.0),
        "sum(x)": (lambda: np.sum(xn), lambda: snp.sum(xs)),
    }
    peers = {}
    try:
        import jax.numpy as jnp
        xj, yj = jnp.asarray(xn), jnp.asarray(yn)
        peers["jax"] = {"x + y": lambda: (xj + yj), "sin(x)": lambda: jnp.sin(xj),
                        "x * 2.0": lambda: xj * 2.0, "sum(x)": lambda: jnp.sum(xj)}
    except ImportError:
        pass
    try:
        import torch
        xt, yt = torch.from_numpy(xn.copy()), torch.from_numpy(yn.copy())
        peers["torch"] = {"x + y": lambda: xt + yt, "sin(x)": lambda: torch.sin(xt),
                          "x * 2.0": lambda: xt * 2.0, "sum(x)": lambda: torch.sum(xt)}
    except ImportError:
        pass
    header = f"{'op':<10}{'numpy us':>10}{'starling us':>13}{'ratio':>8}"
    for name in peers:
        header += f"{name + ' us':>12}"
    print(header)
    for name, (np_fn, st_fn) in cases.items():
        t_np, t_st = per_call_us(np_fn), per_call_us(st_fn)
        line = f"{name:<10}{t_np:>10.2f}{t_st:>13.2f}{t_st / t_np:>7.2f}x"
        for peer in peers.values():
            line += f"{per_call_us(peer[name], number=20_000):>12.2f}"
        print(line)
    print("target: starling / numpy <= 3.0x on the elementwise ops")


if __name__ == "__main__":
    main()
