"""``starling.tree_util``: JAX's ``jax.tree_util`` names over ``starling.tree``.

``tree_flatten`` is ``tree.flatten``, ``tree_map`` is ``tree.map``, and so on; code written
against ``jax.tree_util`` runs with the import changed. Both modules share the one pytree
registry (the "starling" namespace of optree).
"""
import functools

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


def register_pytree_node_class(cls):
    """Class decorator: registers ``cls`` with its own ``tree_flatten(self) -> (children,
    aux_data)`` method and ``tree_unflatten(aux_data, children)`` classmethod (JAX's
    ``register_pytree_node_class``); returns ``cls``."""
    return register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    """Registers ``nodetype`` from ``flatten_with_keys(x) -> ([(key, child)], aux_data)`` (JAX's
    ``register_pytree_with_keys``); ``flatten_func`` (children, aux) defaults to dropping the
    keys. Starling's paths name a registered node's children by position."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    return register_pytree_node(nodetype, flatten_func, unflatten_func)


class Partial(functools.partial):
    """``functools.partial`` that is a pytree (JAX's ``tree_util.Partial``): the bound arguments
    are its leaves, the function its static data, so a Partial can be passed through
    ``grad`` / ``vmap`` / ``compile`` as an argument."""


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]))

__all__ = [
    "Partial", "PyTreeDef", "PyTreeSpec", "keystr", "register_dataclass", "register_pytree_node",
    "register_pytree_node_class", "register_pytree_with_keys",
    "tree_all", "tree_flatten", "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path",
    "tree_map", "tree_map_with_path", "tree_reduce", "tree_structure", "tree_transpose",
    "tree_unflatten",
]
