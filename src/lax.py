"""``starling.lax``: JAX's ``lax`` names over Starling's primitives.

The collectives (psum, pmean, pmax, pmin, all_gather, psum_scatter, all_to_all, ppermute,
axis_index, axis_size, pvary) work inside shard_map and vmap(axis_name=); the structural ops are
the primitives' own wrappers.
"""
from .arrays.ops.shape_lax import (broadcast_in_dim, concatenate, expand_dims, iota, pad,  # noqa: F401
                                   reshape, rev, slice_in_dim, squeeze, transpose)
from .arrays.ops.shape_lax import static_slice as slice  # noqa: F401,A004
from .arrays.ops.linear import dot_general  # noqa: F401
from .arrays.ops.autodiff import stop_gradient  # noqa: F401
from .collectives.ops import *  # noqa: F401,F403
from .collectives.ops import __all__ as _coll
from .collectives.constraint import with_sharding_constraint  # noqa: F401
from .transforms.control import cond, fori_loop, map, scan, switch, while_loop  # noqa: F401,A004

__all__ = ["broadcast_in_dim", "concatenate", "expand_dims", "iota", "pad", "reshape", "rev",
           "slice", "slice_in_dim", "squeeze", "transpose", "dot_general", "stop_gradient",
           "with_sharding_constraint", "cond", "fori_loop", "map", "scan", "switch",
           "while_loop"] + list(_coll)
