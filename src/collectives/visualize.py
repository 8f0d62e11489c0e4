"""``visualize_sharding``: a text picture of which devices hold which block of an array."""
from __future__ import annotations

from .sharded_array import ShardedArray


def _bounds_str(b):
    return ", ".join(f"{lo}:{hi}" for lo, hi in b) or "()"


def visualize_sharding(x, *, file=None) -> None:
    """Prints the device grid of ``x``: for each block of the global array, its index range and
    the devices holding it (replicas listed together; Partial layouts say so). A 1-d or 2-d
    array is drawn as a grid of blocks; higher ranks are listed block by block. Prints to
    ``file`` (default stdout) and returns None, as JAX does (a notebook cell ending with it
    shows the grid once).

    Raises:
        TypeError: ``x`` is not an array.
    """
    if not hasattr(x, "shape"):
        raise TypeError(f"visualize_sharding: expected an array, got {type(x).__name__}")
    shape = tuple(x.shape)
    if not isinstance(x, ShardedArray):
        print(f"{shape} on {x.device} (not sharded)", file=file)
        return None
    s = x.sharding
    blocks = {}
    for dev in s.mesh.flat_devices:
        blocks.setdefault(s.shard_bounds(shape, dev), []).append(dev.id)
    head = (f"{x.aval.str_short()} over mesh {dict(s.mesh.shape)}, placements "
            f"{list(s.placements)}")
    if s.partial:
        head += f"\n(pending reductions: {dict(s.partial)}; each device holds a partial value)"
    lines = [head]
    if len(shape) in (1, 2) and blocks:
        rows = sorted({b[0] for b in blocks})
        cols = sorted({b[1] for b in blocks}) if len(shape) == 2 else [None]
        cells = []
        for r in rows:
            row = []
            for c in cols:
                key = (r,) if c is None else (r, c)
                devs = blocks.get(key)
                label = "" if devs is None else "dev " + ",".join(map(str, devs))
                row.append(f"[{_bounds_str(key)}] {label}")
            cells.append(row)
        width = max(len(c) for row in cells for c in row)
        sep = "+" + "+".join("-" * (width + 2) for _ in cols) + "+"
        lines.append(sep)
        for row in cells:
            lines.append("| " + " | ".join(c.ljust(width) for c in row) + " |")
            lines.append(sep)
    else:
        for b, devs in sorted(blocks.items()):
            lines.append(f"  [{_bounds_str(b)}] on devices {devs}")
    print("\n".join(lines), file=file)
