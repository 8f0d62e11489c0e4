"""Placements: how an array is laid out along ONE mesh dimension (PyTorch DTensor's vocabulary).

* ``Shard(dim)``: the array's dim ``dim`` is split into contiguous chunks, one per position along
  the mesh dimension. Chunks follow ``torch.chunk``: every chunk has ``ceil(n / k)`` elements
  except the trailing ones, which are smaller or empty (a dim of 5 over 4 devices: 2, 2, 1, 0).
* ``Replicate()``: every position holds the whole array.
* ``Partial(op)``: every position holds a partial value; the array is their reduction with
  ``op`` ("sum", "avg", "max", "min", "prod").

These are the vocabulary of each primitive's ``sharding`` rule (single-mesh-dim strategies, see
src/arrays/ops/rules_sharding.py), so they live in core. Placements are immutable and hashable.
"""
from __future__ import annotations

REDUCE_OPS = ("sum", "avg", "max", "min", "prod")


class Placement:
    """Base class of Shard, Replicate and Partial."""

    __slots__ = ()

    def is_shard(self, dim=None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self) -> bool:
        return False

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")


class Shard(Placement):
    """The array's dimension ``dim`` is split into contiguous chunks along the mesh dimension.

    Raises:
        TypeError: ``dim`` is not an int.
    """

    __slots__ = ("dim",)

    def __init__(self, dim: int):
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"Shard: dim must be an int, got {dim!r}")
        object.__setattr__(self, "dim", int(dim))

    def is_shard(self, dim=None) -> bool:
        return dim is None or self.dim == dim

    def __eq__(self, other):
        return type(other) is Shard and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    def __reduce__(self):   # pickle / copy rebuild through __init__ (attributes are read-only)
        return Shard, (self.dim,)


class Replicate(Placement):
    """Every position along the mesh dimension holds the whole array."""

    __slots__ = ()

    def is_replicate(self) -> bool:
        return True

    def __eq__(self, other):
        return type(other) is Replicate

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"

    def __reduce__(self):
        return Replicate, ()


class Partial(Placement):
    """Every position holds a partial value; the array is their reduction with ``reduce_op``.

    Args:
        reduce_op: one of "sum" (default), "avg", "max", "min", "prod".
    Raises:
        ValueError: an unknown reduce_op.
    """

    __slots__ = ("reduce_op",)

    def __init__(self, reduce_op: str = "sum"):
        if reduce_op not in REDUCE_OPS:
            raise ValueError(f"Partial: reduce_op must be one of {REDUCE_OPS}, got {reduce_op!r}")
        object.__setattr__(self, "reduce_op", reduce_op)

    def is_partial(self) -> bool:
        return True

    def __eq__(self, other):
        return type(other) is Partial and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("Partial", self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"

    def __reduce__(self):
        return Partial, (self.reduce_op,)


REPLICATE = Replicate()


def partial_fill(op: str, dtype):
    """What positions other than the first hold when a whole value is laid out as
    ``Partial(op)``: the identity of ``op``, so that reducing gives the value back exactly.
    For sums of floating / complex dtypes that is -0.0 (``x + -0.0 == x`` for every ``x``; +0.0
    would turn -0.0 into +0.0), 0 otherwise; 1 for products; None for max / min / avg (every
    position keeps the value)."""
    from . import dtypes
    if op == "sum":
        # dtypes.is_inexact, not NumPy's kind: ml_dtypes' bfloat16 / float8 have kind 'V'
        return -0.0 if dtypes.is_inexact(dtypes.canonicalize(dtype)) else 0
    return 1 if op == "prod" else None


def chunk_bounds(n: int, k: int, i: int) -> tuple[int, int]:
    """``[start, stop)`` of chunk ``i`` of ``k`` of a dim of size ``n`` (``torch.chunk`` sizes:
    ``ceil(n / k)`` each, the trailing chunks smaller or empty)."""
    c = -(-n // k) if k else 0
    lo = min(i * c, n)
    return lo, min(lo + c, n)


def chunk_sizes(n: int, k: int) -> list[int]:
    """Sizes of the ``k`` chunks of a dim of size ``n`` (see ``chunk_bounds``)."""
    return [b - a for a, b in (chunk_bounds(n, k, i) for i in range(k))]
