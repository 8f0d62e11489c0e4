"""Global arrays from per-process pieces, and back.

``make_array_from_process_local_data(sharding, local_data)`` builds the global sharded array of
which this process holds ``local_data`` (JAX's function of the same name);
``process_allgather(x)`` gives every process the whole value (collective).
"""
from __future__ import annotations

import math

import numpy as np

from ..arrays.array import wrap
from ..arrays.convert import operand
from ..collectives.runtime.inprocess import run_spmd
from ..collectives.sharded_array import ShardedArray, make_sharded, gather_pieces
from ..collectives.sharding import NamedSharding
from ..core.avals import ShapedArray


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """The global array laid out by ``sharding`` of which this process holds ``local_data``
    (each process passes its own data; replicated dims pass the whole extent).

    With one device of this process in the mesh, ``local_data`` is that device's piece. With
    several (a hybrid mesh), it is the block of the global array their pieces cover together
    (JAX's convention: e.g. rows 0:4 of an 8-row array split over 4 devices, 2 of them here);
    each device keeps its part of it.

    Args:
        sharding: a NamedSharding over a mesh holding devices of this process.
        local_data: this process's data (array-like).
        global_shape: the global shape; default: split dims multiplied by their mesh axes'
            sizes over the number of this process's distinct pieces along them (even pieces).
    Raises:
        ValueError: the mesh holds no device of this process, its devices' pieces do not form
            one block, or the data's shape does not match the sharding / global_shape.
    """
    if not isinstance(sharding, NamedSharding):
        raise TypeError(f"make_array_from_process_local_data: expected a NamedSharding, got "
                        f"{sharding!r}")
    a = operand(local_data, "make_array_from_process_local_data")
    buf = np.asarray(a)
    mesh = sharding.mesh
    local = mesh.local_devices
    if not local:
        raise ValueError(f"make_array_from_process_local_data: the mesh {mesh} holds no device "
                         "of this process")
    if global_shape is None:
        shape = list(buf.shape)
        for d, axes in sharding.sharded_dims().items():
            if d < len(shape):
                here = len({mesh.rank_in(axes, dev) for dev in local})
                shape[d] = shape[d] // here * math.prod(mesh.shape[x] for x in axes)
        global_shape = tuple(shape)
    global_shape = tuple(int(s) for s in global_shape)
    sharding.check_shape(global_shape, "make_array_from_process_local_data")
    bounds = {dev: sharding.shard_bounds(global_shape, dev) for dev in local}
    lo = [min(b[i][0] for b in bounds.values()) for i in range(len(global_shape))]
    hi = [max(b[i][1] for b in bounds.values()) for i in range(len(global_shape))]
    covered = sum(math.prod(e - s for s, e in b) for b in set(bounds.values()))
    if covered != math.prod(e - s for s, e in zip(lo, hi)):
        raise ValueError(f"make_array_from_process_local_data: the pieces of this process's "
                         f"devices {list(local)} of a {global_shape} array laid out by "
                         f"{sharding.spec} do not form one block; build the array with "
                         "device_put from the global value instead")
    want = tuple(e - s for s, e in zip(lo, hi))
    if tuple(buf.shape) != want:
        what = "piece" if len(local) == 1 else "block"
        raise ValueError(f"make_array_from_process_local_data: this process's data has shape "
                         f"{buf.shape}; a {global_shape} array laid out by {sharding.spec} gives "
                         f"its devices {list(local)} a {what} of shape {want}")
    shards = [None] * mesh.size
    for dev, b in bounds.items():
        idx = tuple(slice(s - o, e - o) for (s, e), o in zip(b, lo))
        shards[mesh.device_position(dev)] = np.array(buf[idx])
    return make_sharded(ShapedArray(global_shape, buf.dtype, a.weak_type), sharding, shards)


def process_allgather(x):
    """The whole value of ``x`` (an array spread over processes) on every process; every
    process of the mesh must call it (a collective)."""
    if not isinstance(x, ShardedArray) or all(s is not None for s in x._shards):
        return operand(x, "process_allgather") if not isinstance(x, ShardedArray) \
            else x.full_array()
    s = x.sharding
    mesh = s.mesh
    all_axes = tuple(mesh.axis_names)

    def device(ctx):
        piece = x._shards[mesh.device_position(ctx.device)]
        parts = ctx.comm.all_gather(ctx, piece.reshape(-1), all_axes, 0, True)
        return parts

    flat = run_spmd(mesh, device)[0]
    shards, start = [], 0
    for dev in mesh.flat_devices:
        n = int(np.prod(s.local_shape(x.shape, dev), dtype=np.int64))
        shards.append(flat[start:start + n].reshape(s.local_shape(x.shape, dev)))
        start += n
    return wrap(gather_pieces(s, x.aval, tuple(shards)), x.weak_type)
