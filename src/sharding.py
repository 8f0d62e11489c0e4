"""``starling.sharding``: laying arrays out over meshes of devices.

JAX's spelling (``Mesh``, ``NamedSharding``, ``PartitionSpec``) and PyTorch DTensor's
(``Shard``, ``Replicate``, ``Partial``, ``distribute``, ``redistribute``) name the same
layouts; see src/collectives/.
"""
from .collectives import (AbstractMesh, ArrayShard, Mesh, NamedSharding, P, Partial, PartitionSpec,  # noqa: F401
                          Placement, Replicate, Shard, ShardedArray, SingleDeviceSharding,
                          current_mesh, distribute, make_mesh, redistribute,
                          visualize_sharding, with_sharding_constraint)

distribute_tensor = distribute

__all__ = ["Mesh", "AbstractMesh", "make_mesh", "current_mesh", "Shard", "Replicate", "Partial", "Placement",
           "NamedSharding", "PartitionSpec", "P", "SingleDeviceSharding", "ShardedArray",
           "ArrayShard", "distribute", "distribute_tensor", "redistribute",
           "with_sharding_constraint", "visualize_sharding"]
