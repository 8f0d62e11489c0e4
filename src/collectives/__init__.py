"""Sharded arrays and collectives: meshes, placements, propagation, shard_map, runtimes.

``starling.sharding`` (layouts), ``starling.shard_map`` and the collectives of
``starling.lax`` are built here; see src/collectives/*.py for each concept:
mesh.py, sharding.py (PartitionSpec / NamedSharding / placements), sharded_array.py,
primitives.py (the collective primitives and their rules), ops.py (psum & co.), vma.py
(replication typing), shard_map.py, redistribute.py, partition.py (propagation + per-device
programs), eager.py (operations on sharded arrays), constraint.py (with_sharding_constraint),
runtime/ (in-process devices; MPI in starling.distributed).
"""
from ..core.placements import Partial, Placement, Replicate, Shard  # noqa: F401
from .constraint import sharding_constraint_p, with_sharding_constraint  # noqa: F401
from .mesh import AbstractMesh, Mesh, current_mesh, make_mesh  # noqa: F401
from .ops import *  # noqa: F401,F403
from .ops import __all__ as _ops_all
from .partition import Partitioned, partition  # noqa: F401
from .redistribute import redistribute  # noqa: F401
from .runtime import CollectiveError, CollectiveMismatch, CollectiveTimeout  # noqa: F401
from .shard_map import shard_map, shard_map_p  # noqa: F401
from .sharded_array import ArrayShard, ShardedArray, distribute  # noqa: F401
from .sharding import NamedSharding, P, PartitionSpec, SingleDeviceSharding  # noqa: F401
from .visualize import visualize_sharding  # noqa: F401
from . import eager as _eager  # noqa: F401  (installs the eager dispatch for sharded operands)
from . import compile_sharded as _compile_sharded
from . import portable as _portable  # noqa: F401  (export of sharded programs)
from ..transforms import compile as _compile

_compile.SHARDED_BUILD[0] = _compile_sharded.build

__all__ = ["Mesh", "AbstractMesh", "make_mesh", "current_mesh", "Shard", "Replicate", "Partial", "Placement",
           "NamedSharding", "PartitionSpec", "P", "SingleDeviceSharding", "ShardedArray",
           "ArrayShard", "distribute", "redistribute", "with_sharding_constraint",
           "visualize_sharding", "shard_map", "partition", "CollectiveError",
           "CollectiveMismatch", "CollectiveTimeout"] + list(_ops_all)
