"""NumPy reference for SPMD tests: blocks of a global array, device groups and ranks, and a
runner that returns every device's output of a shard_map body.

The reference knows nothing of Starling's Mesh / NamedSharding code: it recomputes groups and
blocks from the mesh shape with ``np.unravel_index`` (row-major device order, the mesh's flat
order), so a mistake in mesh.py or sharding.py cannot cancel out.
"""
from __future__ import annotations

import math

import numpy as np

import starling
import starling.numpy as snp
from starling.sharding import P


def coords(shape, k):
    return tuple(int(c) for c in np.unravel_index(k, shape))


def rank(shape, names, axes, k):
    """Device ``k``'s linear index along ``axes`` (major to minor, in the order given)."""
    c = coords(shape, k)
    idx = [names.index(a) for a in axes]
    return int(np.ravel_multi_index([c[i] for i in idx], [shape[i] for i in idx])) if idx else 0


def group(shape, names, axes, k):
    """The flat indices of the devices sharing every coordinate of ``k`` but ``axes``, in rank
    order."""
    idx = {names.index(a) for a in axes}
    ck = coords(shape, k)
    members = [j for j in range(math.prod(shape))
               if all(coords(shape, j)[i] == ck[i] for i in range(len(shape)) if i not in idx)]
    return sorted(members, key=lambda j: rank(shape, names, axes, j))


def spec_axes(spec, d):
    if d >= len(spec) or spec[d] is None:
        return ()
    return (spec[d],) if isinstance(spec[d], str) else tuple(spec[d])


def block(x, shape, names, spec, k):
    """Device ``k``'s block of the global NumPy array ``x`` under PartitionSpec ``spec``."""
    x = np.asarray(x)
    index = []
    for d, n in enumerate(x.shape):
        axes = spec_axes(spec, d)
        parts = math.prod(shape[names.index(a)] for a in axes)
        r = rank(shape, names, axes, k)
        index.append(slice(r * n // parts, (r + 1) * n // parts))
    return x[tuple(index)]


def mesh_info(mesh):
    return tuple(mesh.devices_shape), tuple(mesh.axis_names)


def per_device(f, mesh, in_specs, *args, check_rep=True):
    """Every device's output of ``f`` on its blocks (a list in flat device order): ``f``'s result
    gets a leading dim split over all mesh axes, so the global result stacks the devices'."""
    every = P(tuple(mesh.axis_names))

    def body(*blocks):
        return starling.tree.map(lambda o: snp.expand_dims(o, 0), f(*blocks))

    out = starling.shard_map(body, mesh, in_specs=in_specs, out_specs=every,
                             check_rep=check_rep)(*args)
    return starling.tree.map(lambda o: list(np.asarray(o)), out)


def ref_blocks(x, mesh, spec):
    shape, names = mesh_info(mesh)
    return [block(x, shape, names, spec, k) for k in range(mesh.size)]
