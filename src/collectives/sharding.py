"""Shardings: where each piece of an array lives.

Two spellings of one thing:

* JAX: ``NamedSharding(mesh, PartitionSpec("data", None))``: entry ``i`` of the spec names the
  mesh axes (None, one name, or a tuple of names, major to minor) that split array dim ``i``;
  mesh axes not named replicate.
* PyTorch DTensor: one ``Placement`` per mesh axis: ``[Shard(0), Replicate()]``. Several mesh
  axes sharding one dim split it in mesh-axis order. DTensor's ``Partial(op)`` (pending
  reductions) has no PartitionSpec spelling: ``NamedSharding(mesh, spec, partial={"model":
  "sum"})`` carries it.

``NamedSharding`` is the canonical form; ``from_placements`` / ``.placements`` convert. Shards
follow ``torch.chunk`` sizes (src/core/placements.py): uneven dims are allowed.
"""
from __future__ import annotations

import math

from ..core.placements import (REDUCE_OPS, Partial, Placement, Replicate, Shard,
                               chunk_bounds)
from ..arrays.device import SingleDeviceSharding
from .mesh import AbstractMesh, Mesh, current_mesh


class PartitionSpec(tuple):
    """One entry per array dim: None (not split), a mesh axis name, or a tuple of names (major
    to minor). Trailing dims may be left out (they are not split)."""

    def __new__(cls, *entries):
        for e in entries:
            if e is None or isinstance(e, str):
                continue
            if isinstance(e, (tuple, list)) and all(isinstance(n, str) for n in e):
                continue
            raise TypeError(f"PartitionSpec: entries must be None, a mesh axis name or a tuple "
                            f"of names, got {e!r}")
        return super().__new__(cls, (tuple(e) if isinstance(e, list) else e for e in entries))

    def __repr__(self):
        return "PartitionSpec(" + ", ".join(repr(e) for e in self) + ")"

    def __reduce__(self):   # a tuple subclass would be rebuilt as PartitionSpec(tuple(self))
        return PartitionSpec, tuple(self)

    def axes(self, i) -> tuple:
        """The mesh axes splitting dim ``i`` (a tuple, maybe empty)."""
        if i >= len(self):
            return ()
        e = self[i]
        return () if e is None else (e,) if isinstance(e, str) else tuple(e)


P = PartitionSpec


class NamedSharding:
    """An array's layout over a mesh: ``spec`` splits dims, ``partial`` marks pending reductions.

    Args:
        mesh: the Mesh.
        spec: a PartitionSpec (or tuple of its entries).
        partial: optional mapping mesh axis -> reduce op ("sum", "avg", "max", "min", "prod").
    Raises:
        ValueError: an unknown mesh axis (names the mesh's axes), an axis used twice, or a bad
            reduce op.
        TypeError: a malformed spec.
    """

    __slots__ = ("mesh", "spec", "partial", "_key", "given_spec")

    def __init__(self, mesh: Mesh, spec=PartitionSpec(), partial=None):
        if not isinstance(mesh, (Mesh, AbstractMesh)):
            raise TypeError(f"NamedSharding: mesh must be a starling Mesh, got {mesh!r}")
        spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)
        items = dict(partial or {})
        used = []
        for i in range(len(spec)):
            used += list(spec.axes(i))
        for a in list(used) + list(items):
            if a not in mesh.axis_names:
                raise ValueError(f"NamedSharding: {spec} names mesh axis {a!r}, but the mesh has "
                                 f"axes {dict(mesh.shape)}")
        both = used + list(items)
        if len(set(both)) != len(both):
            raise ValueError(f"NamedSharding: a mesh axis is used twice in {spec}"
                             f"{' with partial ' + str(items) if items else ''}")
        for a, op in items.items():
            if op not in REDUCE_OPS:
                raise ValueError(f"NamedSharding: partial reduce op for axis {a!r} must be one of "
                                 f"{REDUCE_OPS}, got {op!r}")
        # trailing unsplit dims do not change the layout: drop them from the canonical spec
        entries = [e[0] if isinstance(e, tuple) and len(e) == 1 else (e or None)
                   for e in spec]
        while entries and not spec.axes(len(entries) - 1):
            entries.pop()
        self.mesh = mesh
        self.spec = PartitionSpec(*entries)
        self.given_spec = spec   # as given: an array of lower rank than its length is an error
        self.partial = tuple(sorted(items.items(), key=lambda kv: mesh.axis_names.index(kv[0])))
        self._key = (mesh, tuple(self.spec.axes(i) for i in range(len(self.spec))), self.partial)

    # ---- the DTensor view ----------------------------------------------------------------------
    @property
    def placements(self) -> tuple:
        """One Placement per mesh axis (DTensor's ``placements``)."""
        out = []
        partial = dict(self.partial)
        for a in self.mesh.axis_names:
            dim = next((i for i in range(len(self.spec)) if a in self.spec.axes(i)), None)
            if dim is not None:
                out.append(Shard(dim))
            elif a in partial:
                out.append(Partial(partial[a]))
            else:
                out.append(Replicate())
        return tuple(out)

    @property
    def device_set(self) -> set:
        return set(self.mesh.flat_devices)

    @property
    def is_fully_replicated(self) -> bool:
        return not len(self.spec) and not self.partial

    @property
    def is_partial(self) -> bool:
        return bool(self.partial)

    def axes_of(self, dim) -> tuple:
        return self.spec.axes(dim)

    def sharded_dims(self) -> dict:
        """dim -> tuple of mesh axes splitting it."""
        return {i: self.spec.axes(i) for i in range(len(self.spec)) if self.spec.axes(i)}

    def check_shape(self, shape, op) -> None:
        """Raises ValueError when the spec (as given) has more entries than ``shape`` has dims."""
        spec = self.given_spec if len(self.given_spec) > len(self.spec) else self.spec
        if len(spec) > len(shape):
            raise ValueError(f"{op}: sharding {spec} has {len(spec)} entries but the array has "
                             f"shape {tuple(shape)} ({len(shape)} dims)")

    # ---- pieces --------------------------------------------------------------------------------
    def shard_bounds(self, shape, device) -> tuple:
        """``((start, stop), ...)`` per dim: the piece of a ``shape`` array that ``device`` holds."""
        coords = dict(zip(self.mesh.axis_names, self.mesh.coords(device)))
        out = []
        for i, n in enumerate(shape):
            start, size = 0, n
            for a in self.spec.axes(i):
                lo, hi = chunk_bounds(size, self.mesh.shape[a], coords[a])
                start, size = start + lo, hi - lo
            out.append((start, start + size))
        return tuple(out)

    def shard_index(self, shape, device) -> tuple:
        """The tuple of slices selecting ``device``'s piece of a ``shape`` array."""
        return tuple(slice(a, b) for a, b in self.shard_bounds(shape, device))

    def local_shape(self, shape, device) -> tuple:
        return tuple(b - a for a, b in self.shard_bounds(shape, device))

    def is_even(self, shape) -> bool:
        """True when every split dim divides evenly (all pieces have the same shape)."""
        for i, axes in self.sharded_dims().items():
            if i < len(shape) and shape[i] % math.prod(self.mesh.shape[a] for a in axes):
                return False
        return True

    def replace(self, spec=None, partial=None) -> "NamedSharding":
        return NamedSharding(self.mesh, self.spec if spec is None else spec,
                             dict(self.partial) if partial is None else partial)

    def __eq__(self, other):
        return isinstance(other, NamedSharding) and other._key == self._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        extra = f", partial={dict(self.partial)}" if self.partial else ""
        return f"NamedSharding(mesh={dict(self.mesh.shape)}, spec={self.spec}{extra})"


def from_placements(mesh: Mesh, placements, op="distribute") -> NamedSharding:
    """The NamedSharding of DTensor placements (one per mesh axis).

    Raises:
        ValueError: wrong number of placements for the mesh (names the mesh's axes).
        TypeError: an entry is not a Placement.
    """
    placements = tuple(placements)
    if len(placements) != mesh.ndim:
        raise ValueError(f"{op}: {len(placements)} placements {list(placements)} for a mesh with "
                         f"{mesh.ndim} axes {dict(mesh.shape)}; give one per mesh axis")
    dims: dict = {}
    partial = {}
    for a, p in zip(mesh.axis_names, placements):
        if not isinstance(p, Placement):
            raise TypeError(f"{op}: placements must be Shard(dim), Replicate() or Partial(op), "
                            f"got {p!r}")
        if p.is_shard():
            if p.dim < 0:
                raise ValueError(f"{op}: Shard(dim={p.dim}): give a non-negative dim (negative "
                                 "dims are normalised by distribute for a known rank)")
            dims.setdefault(p.dim, []).append(a)
        elif p.is_partial():
            partial[a] = p.reduce_op
    n = max(dims, default=-1) + 1
    spec = PartitionSpec(*[tuple(dims[i]) if i in dims else None for i in range(n)])
    return NamedSharding(mesh, spec, partial)


def normalize_placements(placements, ndim, op="distribute"):
    """Placements with negative Shard dims made non-negative for an array of rank ``ndim``.

    Raises:
        ValueError: a Shard dim out of range (names the dim and the rank).
    """
    out = []
    for p in placements:
        if isinstance(p, Shard):
            if not -ndim <= p.dim < ndim:
                raise ValueError(f"{op}: Shard(dim={p.dim}) is out of range for an array with "
                                 f"{ndim} dims")
            p = Shard(p.dim % ndim)
        out.append(p)
    return tuple(out)


def as_sharding(obj, op, ndim=None, mesh=None):
    """A NamedSharding / SingleDeviceSharding meant by ``obj`` (a sharding, a PartitionSpec with
    the current mesh, or a sequence of Placements with ``mesh`` or the current mesh), or None
    when ``obj`` is not sharding-like.

    Raises:
        ValueError: a PartitionSpec or placements with no mesh given and none current.
    """
    if isinstance(obj, (NamedSharding, SingleDeviceSharding)):
        return obj
    is_spec = isinstance(obj, PartitionSpec)
    is_pl = isinstance(obj, (tuple, list)) and obj and all(isinstance(p, Placement) for p in obj)
    if not (is_spec or is_pl):
        return None
    mesh = mesh or current_mesh()
    if mesh is None:
        raise ValueError(f"{op}: {obj!r} needs a mesh: pass NamedSharding(mesh, spec), or call "
                         "inside `with mesh:`")
    if is_spec:
        return NamedSharding(mesh, obj)
    if ndim is not None:
        obj = normalize_placements(obj, ndim, op)
    return from_placements(mesh, obj, op)


__all__ = ["PartitionSpec", "P", "NamedSharding", "SingleDeviceSharding", "from_placements",
           "normalize_placements", "as_sharding", "Shard", "Replicate", "Partial", "Placement"]
