"""Sharded arrays: one global array whose pieces live on the devices of a mesh.

A ``ShardedArray`` is an ``Array`` (``isinstance(x, starling.Array)`` holds, every array op
accepts it) whose data is a tuple of per-device pieces in the mesh's flat device order (None for
devices of other processes), laid out by a ``NamedSharding`` (src/collectives/sharding.py).
The DTensor view: ``x.placements``, ``x.mesh``, ``x.to_local()``, ``x.redistribute(...)``,
``x.full_tensor()`` / ``x.full_array()``; the JAX view: ``x.sharding``,
``x.addressable_shards``. Pieces are immutable like every Starling buffer; operations on sharded
arrays run piece by piece on their devices (src/collectives/eager.py) and give sharded arrays.
"""
from __future__ import annotations

import itertools

import numpy as np

from . import log as sharding_log
from .log import logger
from ..arrays.array import Array, wrap
from ..arrays.convert import operand
from ..core.avals import ShapedArray
from ..core.placements import Replicate, partial_fill
from .runtime.inprocess import accumulation_dtype, finish_reduce, reduce_ufunc
from .sharding import (NamedSharding, SingleDeviceSharding, as_sharding, from_placements,
                       normalize_placements)

_LOGGED_GATHER = []


class ArrayShard:
    """One addressable piece: ``device``, ``index`` (tuple of slices into the global array),
    ``data`` (an Array on that device), ``replica_id`` (0 for the first copy of a piece)."""

    __slots__ = ("device", "index", "data", "replica_id")

    def __init__(self, device, index, data, replica_id):
        self.device, self.index, self.data, self.replica_id = device, index, data, replica_id

    def __repr__(self):
        return f"ArrayShard(device={self.device}, index={self.index}, replica_id={self.replica_id})"


class ShardedArray(Array):
    """An Array laid out over a mesh (see module docstring). Immutable; build one with
    ``starling.sharding.distribute`` / ``device_put(x, sharding)`` or get one from an operation
    on sharded arrays."""

    __slots__ = ("_shards", "_sharding", "_aval", "_full")

    # ---- abstract value ------------------------------------------------------------------------
    @property
    def aval(self) -> ShapedArray:
        return self._aval

    @property
    def shape(self) -> tuple:
        return self._aval.shape

    @property
    def dtype(self):
        return self._aval.dtype

    @property
    def ndim(self) -> int:
        return len(self._aval.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._aval.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self._aval.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._aval.dtype.itemsize

    @property
    def weak_type(self) -> bool:
        return self._weak

    # ---- layout --------------------------------------------------------------------------------
    @property
    def sharding(self) -> NamedSharding:
        return self._sharding

    @property
    def placements(self) -> tuple:
        return self._sharding.placements

    @property
    def mesh(self):
        return self._sharding.mesh

    @property
    def device(self):
        return self._device

    def devices(self) -> set:
        return set(self._sharding.mesh.flat_devices)

    @property
    def is_fully_replicated(self) -> bool:
        return self._sharding.is_fully_replicated

    @property
    def addressable_shards(self) -> list:
        """The pieces held by this process, in mesh order (``ArrayShard`` objects, as JAX's ``Shard``)."""
        out, seen = [], {}
        s = self._sharding
        for dev, buf in zip(s.mesh.flat_devices, self._shards):
            if buf is None:
                continue
            idx = s.shard_index(self.shape, dev)
            key = tuple((sl.start, sl.stop) for sl in idx) if not s.partial else dev
            rid = seen.get(key, 0)
            seen[key] = rid + 1
            data = wrap(buf, self._weak)
            data._device = dev
            out.append(ArrayShard(dev, idx, data, rid))
        return out

    def local_shards(self) -> list:
        """The buffers of the local devices, as Arrays on their devices (flat mesh order)."""
        return [s.data for s in self.addressable_shards]

    def to_local(self):
        """The piece of the device running this code: in a device's computation (a device
        worker of ``run_spmd``) its own piece; in a process that owns one device of the mesh,
        that device's.

        A shard_map body is traced once for every device, so no device is running it: pass the
        array as an argument of the shard_map with the in_spec of its layout instead (the
        body then gets each device's piece), as in JAX.

        Raises:
            ValueError: called while a shard_map body over the mesh's axes is traced, or the
                process owns several devices of the mesh (ambiguous: use
                ``addressable_shards``).
        """
        from ..core.axis_env import axis_names_in_scope
        from .runtime.context import current_spmd
        ctx = current_spmd()
        mesh = self._sharding.mesh
        if ctx is not None and ctx.mesh == mesh:
            dev = ctx.device
        elif set(mesh.axis_names) & set(axis_names_in_scope()):
            raise ValueError(
                f"to_local: called inside a shard_map body over mesh axes "
                f"{list(mesh.axis_names)}, which is traced for all devices at once; pass this "
                f"{self.aval.str_short()} array (layout {list(self.placements)}) as an argument "
                "of the shard_map with the in_spec of its layout to get each device's piece")
        else:
            local = mesh.local_devices
            if len(local) != 1:
                raise ValueError(f"to_local: this process owns {len(local)} devices of the mesh; "
                                 "which piece is meant is ambiguous: use x.addressable_shards")
            dev = local[0]
        out = wrap(self._shards[mesh.device_position(dev)], self._weak)
        out._device = dev
        return out

    def redistribute(self, *args, **kwargs):
        """This array with another layout (see ``starling.sharding.redistribute``)."""
        from .redistribute import redistribute
        return redistribute(self, *args, **kwargs)

    def full_array(self) -> Array:
        """The whole value as an ordinary Array on the default device (pending Partial
        reductions applied)."""
        return wrap(self._gather(), self._weak)

    full_tensor = full_array

    # ---- data access (the whole value) ---------------------------------------------------------
    @property
    def _buf(self):
        full = self._full
        if full is None:
            if not _LOGGED_GATHER:
                _LOGGED_GATHER.append(True)
                sharding_log.enabled()
                logger.info("a sharded array was gathered into one buffer by code that is not "
                            "sharding-aware")
            full = self._gather()
        return full

    def _gather(self):
        full = self._full
        if full is None:
            full = self._full = gather_pieces(self._sharding, self._aval, self._shards)
            full.flags.writeable = False
        return full

    def __array__(self, dtype=None, copy=None):
        buf = self._gather()
        if dtype is not None and np.dtype(dtype) != buf.dtype:
            return buf.astype(dtype)
        return buf.copy() if copy else buf

    def item(self, *args):
        return self.full_array().item(*args)

    def tolist(self):
        return self._gather().tolist()

    def __reduce__(self):
        return (_rebuild_sharded, (self._gather(), self._weak, self._sharding))

    def __repr__(self):
        body = repr(self.full_array())[len("Array("):-1]
        return f"ShardedArray({body}, placements={list(self.placements)}, " \
               f"mesh={dict(self.mesh.shape)})"


def _rebuild_sharded(buf, weak, sharding):
    return distribute_sharding(wrap(np.array(buf), weak), sharding)


def make_sharded(aval, sharding, shards):
    """A ShardedArray from its pieces (tuple in mesh flat order; None for remote devices); no
    copies, no checks."""
    x = object.__new__(ShardedArray)
    x._shards = tuple(shards)
    x._sharding = sharding
    x._aval = aval
    x._weak = aval.weak_type
    x._full = None
    local = sharding.mesh.local_devices
    x._device = local[0] if local else sharding.mesh.flat_devices[0]
    return x


def gather_pieces(sharding, aval, shards):
    """The global NumPy value of pieces laid out by ``sharding`` (partial axes reduced in mesh
    order). Every piece must be present (single process; multi-process gathers through the
    runtime first)."""
    mesh = sharding.mesh
    if any(s is None for s in shards):
        local = _local_cover(sharding, aval, shards)
        if local is not None:   # this process's pieces already hold every block
            return local
        from .redistribute import gather_remote
        return gather_remote(sharding, aval, shards)
    partial = sharding.partial
    shape = tuple(aval.shape)
    pos = {d: i for i, d in enumerate(mesh.flat_devices)}
    if not partial:
        out = np.empty(shape, aval.dtype)
        for dev in mesh.flat_devices:
            out[sharding.shard_index(shape, dev)] = shards[pos[dev]]
        return out
    p_axes = [a for a, _ in partial]
    p_idx = [mesh.axis_index_of(a) for a in p_axes]
    ops = {op for _, op in partial}
    op = ops.pop() if len(ops) == 1 else None
    acc = None
    count = 0
    for combo in itertools.product(*[range(mesh.shape[a]) for a in p_axes]):
        part = np.empty(shape, aval.dtype)
        for dev in mesh.flat_devices:
            c = mesh.coords(dev)
            if all(c[i] == v for i, v in zip(p_idx, combo)):
                part[sharding.shard_index(shape, dev)] = shards[pos[dev]]
        count += 1
        if op is None:   # mixed reduce ops: reduce axis by axis (rare; nested loop below)
            acc = part if acc is None else acc
            continue
        if acc is None:
            acc = part.astype(accumulation_dtype(aval.dtype, op), copy=True)
        else:
            reduce_ufunc(op)(acc, part, out=acc)
    if op is None:
        return _gather_mixed(sharding, aval, shards)
    return np.asarray(finish_reduce(acc, op, count, aval.dtype))


def _local_cover(sharding, aval, shards):
    """The value from the pieces present here when they cover every block (no pending
    reductions), else None."""
    if sharding.partial:
        return None
    shape = tuple(aval.shape)
    blocks = {}
    for dev, piece in zip(sharding.mesh.flat_devices, shards):
        idx = sharding.shard_index(shape, dev)
        key = tuple((sl.start, sl.stop) for sl in idx)
        if piece is not None:
            blocks[key] = (idx, piece)
        else:
            blocks.setdefault(key, None)
    if any(v is None for v in blocks.values()):
        return None
    out = np.empty(shape, aval.dtype)
    for idx, piece in blocks.values():
        out[idx] = piece
    return out


def _gather_mixed(sharding, aval, shards):
    # Partial axes with different ops: reduce one axis at a time (innermost first), each step a
    # sharding with one partial axis fewer.
    mesh = sharding.mesh
    (axis, op), rest = sharding.partial[-1], dict(sharding.partial[:-1])
    i = mesh.axis_index_of(axis)
    pos = {d: k for k, d in enumerate(mesh.flat_devices)}
    new = []
    for dev in mesh.flat_devices:
        group = mesh.group((axis,), dev)
        acc = np.array(shards[pos[group[0]]], dtype=accumulation_dtype(aval.dtype, op))
        for g in group[1:]:
            reduce_ufunc(op)(acc, shards[pos[g]], out=acc)
        new.append(finish_reduce(acc, op, len(group), aval.dtype))
    del i
    return gather_pieces(sharding.replace(partial=rest), aval, tuple(new))


def split_pieces(value, sharding):
    """The pieces (mesh flat order; None for remote devices) of the NumPy ``value`` laid out by
    ``sharding``; Partial axes keep the value at coordinate 0 and the op's identity elsewhere
    (``partial_fill``: reducing them gives ``value`` back exactly, signed zeros included)."""
    shape = value.shape
    return tuple(partial_piece(np.array(value[sharding.shard_index(shape, dev)], copy=True),
                               sharding, dev) if dev.is_local else None
                 for dev in sharding.mesh.flat_devices)


def partial_piece(piece, sharding, device):
    """``device``'s piece of a value laid out by ``sharding``, given the value's block
    ``piece`` (a fresh NumPy array, changed in place): along Partial axes, devices at coordinate
    0 keep it and the others hold the op's identity (``partial_fill``), so that reducing them
    gives the value back exactly."""
    if sharding.partial:
        mesh = sharding.mesh
        c = dict(zip(mesh.axis_names, mesh.coords(device)))
        for a, op in sharding.partial:
            fill = partial_fill(op, piece.dtype)
            if c[a] != 0 and fill is not None:
                piece[...] = fill
    return piece


def distribute_sharding(x, sharding):
    """``x`` (Array or array-like, the global value) laid out by ``sharding``."""
    x = operand(x, "distribute")
    if isinstance(sharding, SingleDeviceSharding):
        from ..arrays.device import device_put
        return device_put(x, sharding.device)
    if isinstance(x, ShardedArray):
        from .redistribute import redistribute
        return redistribute(x, sharding)
    if not isinstance(x, Array):
        raise TypeError(f"distribute: cannot distribute a traced value {x!r} eagerly; inside "
                        "traced code use with_sharding_constraint")
    sharding.check_shape(x.shape, "distribute")
    value = np.asarray(x._buf)
    return make_sharded(x.aval, sharding, split_pieces(value, sharding))


def distribute(x, mesh=None, placements=None):
    """Lays the global value ``x`` out over ``mesh`` (DTensor's ``distribute_tensor``).

    Args:
        x: an Array or array-like (the whole value, present in this process).
        mesh: a Mesh (default: the current mesh of ``with mesh:``), or a NamedSharding.
        placements: one ``Shard(dim)`` / ``Replicate()`` / ``Partial(op)`` per mesh axis, or a
            PartitionSpec (default: replicate everywhere).
    Returns:
        A ShardedArray whose ``full_array()`` equals ``x``.
    Raises:
        ValueError: no mesh, wrong number of placements, a Shard dim out of range, an unknown
            mesh axis. TypeError: bad placements.
    """
    if isinstance(mesh, NamedSharding):
        if placements is not None:
            raise TypeError("distribute: pass either a NamedSharding or (mesh, placements)")
        return distribute_sharding(x, mesh)
    x = operand(x, "distribute")
    from .mesh import current_mesh
    mesh = mesh or current_mesh()
    if mesh is None:
        raise ValueError("distribute: no mesh given and no current mesh (use `with mesh:`)")
    if placements is None:
        placements = [Replicate()] * mesh.ndim
    sharding = as_sharding(placements if not isinstance(placements, list) else tuple(placements),
                           f"distribute({x.aval.str_short()})", ndim=x.ndim, mesh=mesh)
    if sharding is None:
        raise TypeError(f"distribute: placements must be Shard/Replicate/Partial entries or a "
                        f"PartitionSpec, got {placements!r}")
    return distribute_sharding(x, sharding)


def gather_to(x, device):
    """The whole value of the sharded array ``x`` as an Array on ``device``."""
    out = x.full_array()
    out._device = device
    return out


def sharding_of(x):
    """``x.sharding`` for Arrays (SingleDeviceSharding when unsharded) and sharded arrays."""
    if isinstance(x, ShardedArray):
        return x._sharding
    return SingleDeviceSharding(getattr(x, "_device", None))


__all__ = ["ShardedArray", "ArrayShard", "distribute", "distribute_sharding", "make_sharded",
           "from_placements", "normalize_placements"]
