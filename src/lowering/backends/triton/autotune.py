"""Choosing launch configurations of Triton kernels by timing them, winners cached on disk.

``choose(kernel, device, time_config)`` returns the configuration (constexpr block / tile sizes
and launch options: ``num_warps``, ``num_stages``) of ``candidates(kernel)`` that ``time_config``
(``config -> seconds``, e.g. CUDA events around a few launches) finds fastest. The winner is kept
in the kernel cache directory (lowering/cache.py) under ``triton/autotune/``, one small JSON file
per key, written atomically (a temporary file renamed over the name), so concurrent processes
and a process killed mid-write never leave a torn entry; an unreadable entry is timed again.
The key is the device name and a hash of the kernel's source, which holds its shapes and
dtypes (static in the generated code): the same kernel on the same device is timed once per
machine.

The interpreter runs kernels with fixed sizes (codegen.INTERPRETER_BLOCK, matmul's
INTERPRETER_TILES): there, configurations change only the interpreter's own cost.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os

from ... import cache

logger = logging.getLogger("starling.lowering")

# Candidates: elementwise kernels vary the block (elements per program) and warps; reductions
# the block each program reduces at a time; matmuls their tiles and pipeline depth.
ELEMENTWISE = [{"BLOCK": b, "num_warps": w} for b in (512, 1024, 2048, 4096) for w in (4, 8)]
REDUCTION = [{"BLOCK": b, "num_warps": w} for b in (256, 1024, 4096) for w in (4, 8)]
MATMUL = [
    {"BM": 128, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 3},
    {"BM": 128, "BN": 256, "BK": 64, "num_warps": 8, "num_stages": 3},
    {"BM": 128, "BN": 256, "BK": 64, "num_warps": 8, "num_stages": 4},
    {"BM": 256, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 3},
    {"BM": 128, "BN": 128, "BK": 128, "num_warps": 8, "num_stages": 3},   # float8: k32 steps
    {"BM": 128, "BN": 128, "BK": 64, "num_warps": 4, "num_stages": 4},
    {"BM": 128, "BN": 128, "BK": 32, "num_warps": 4, "num_stages": 4},
    {"BM": 64, "BN": 128, "BK": 64, "num_warps": 4, "num_stages": 4},
    {"BM": 128, "BN": 64, "BK": 64, "num_warps": 4, "num_stages": 4},
]


def candidates(kernel):
    """The configurations tried for ``kernel`` (a codegen.Kernel)."""
    if kernel.tiles is not None:
        return [dict(c) for c in MATMUL]
    return [dict(c) for c in (REDUCTION if kernel.reduced is not None else ELEMENTWISE)]


def _path(device, kernel):
    key = hashlib.sha256(f"{device}\n{kernel.source}".encode()).hexdigest()[:32]
    return os.path.join(cache.cache_dir(), "triton", "autotune", f"{key}.json")


def cached(kernel, device):
    """The cached winner for ``kernel`` on ``device``, or None (absent or unreadable)."""
    try:
        with open(_path(device, kernel)) as f:
            entry = json.load(f)
        if entry.get("device") == device and isinstance(entry.get("config"), dict):
            return entry["config"]
    except (OSError, ValueError):
        pass
    return None


def choose(kernel, device, time_config, configs=None):
    """The fastest of ``configs`` (default ``candidates(kernel)``) by ``time_config(config) ->
    seconds``, from the disk cache when ``kernel`` was tuned on ``device`` before. A config that
    fails to compile or run (``time_config`` raises, e.g. out of shared memory) is skipped.

    Raises:
        RuntimeError: every configuration failed (the last error is chained).
    """
    hit = cached(kernel, device)
    if hit is not None:
        return hit
    best, best_t, last = None, float("inf"), None
    for config in configs or candidates(kernel):
        try:
            t = float(time_config(dict(config)))
        except Exception as e:  # noqa: BLE001  (a config the device cannot run: next one)
            last = e
            continue
        if t < best_t:
            best, best_t = dict(config), t
    if best is None:
        raise RuntimeError(f"autotune: no configuration of {kernel.name} ran on {device}") \
            from last
    path = _path(device, kernel)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        cache._atomic_write(path, json.dumps({"device": device, "kernel": kernel.name,
                                              "config": best, "seconds": best_t}).encode())
    except OSError as e:   # a full or read-only disk: the choice stands, it is not remembered
        logger.warning("starling: could not cache the tuned configuration of %s (%s)",
                       kernel.name, e)
    return best
