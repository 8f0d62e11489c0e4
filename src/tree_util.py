"""``starling.tree_util``: JAX's ``jax.tree_util`` names over ``starling.tree``.

``tree_flatten`` is ``tree.flatten``, ``tree_map`` is ``tree.map``, and so on; code written
against ``jax.tree_util`` runs with the import changed. Both modules share the one pytree
registry (the "starling" namespace of optree).
"""
from .tree import (  # noqa: F401
    PyTreeSpec, keystr, register_dataclass,
)
from .tree import all as tree_all  # noqa: F401
from .tree import flatten as tree_flatten  # noqa: F401
from .tree import flatten_with_path as tree_flatten_with_path  # noqa: F401
from .tree import leaves as tree_leaves  # noqa: F401
from .tree import leaves_with_path as tree_leaves_with_path  # noqa: F401
from .tree import map as tree_map  # noqa: F401
from .tree import map_with_path as tree_map_with_path  # noqa: F401
from .tree import reduce as tree_reduce  # noqa: F401
from .tree import register_node as register_pytree_node  # noqa: F401
from .tree import structure as tree_structure  # noqa: F401
from .tree import transpose as tree_transpose  # noqa: F401
from .tree import unflatten as tree_unflatten  # noqa: F401

PyTreeDef = PyTreeSpec

__all__ = [
    "PyTreeDef", "PyTreeSpec", "keystr", "register_dataclass", "register_pytree_node",
    "tree_all", "tree_flatten", "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path",
    "tree_map", "tree_map_with_path", "tree_reduce", "tree_structure", "tree_transpose",
    "tree_unflatten",
]
