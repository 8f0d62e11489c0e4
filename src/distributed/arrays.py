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
    """The global array laid out by ``sharding`` whose piece on this process's device is
    ``local_data`` (each process passes its own piece; replicated dims pass the whole extent).

    Args:
        sharding: a NamedSharding over a mesh holding one device of this process.
        local_data: this process's piece (array-like).
        global_shape: the global shape; default: split dims multiplied by their mesh axes'
            sizes (even pieces).
    Raises:
        ValueError: the piece's shape does not match the sharding / global_shape.
    """
    if not isinstance(sharding, NamedSharding):
        raise TypeError(f"make_array_from_process_local_data: expected a NamedSharding, got "
                        f"{sharding!r}")
    a = operand(local_data, "make_array_from_process_local_data")
    buf = np.asarray(a)
    mesh = sharding.mesh
    local = mesh.local_devices
    if len(local) != 1:
        raise ValueError(f"make_array_from_process_local_data: this process owns {len(local)} "
                         f"devices of the mesh; it needs exactly one")
    if global_shape is None:
        shape = list(buf.shape)
        for d, axes in sharding.sharded_dims().items():
            shape[d] *= math.prod(mesh.shape[x] for x in axes)
        global_shape = tuple(shape)
    global_shape = tuple(int(s) for s in global_shape)
    sharding.check_shape(global_shape, "make_array_from_process_local_data")
    want = sharding.local_shape(global_shape, local[0])
    if tuple(buf.shape) != tuple(want):
        raise ValueError(f"make_array_from_process_local_data: this process's piece has shape "
                         f"{buf.shape}; a {global_shape} array laid out by {sharding.spec} gives "
                         f"its device {local[0]} a piece of shape {want}")
    shards = [None] * mesh.size
    shards[mesh.device_position(local[0])] = np.array(buf)
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
