"""Pytrees: the ONLY module that imports optree. Starling's registry namespace is "starling".

A pytree is a nested structure of containers (tuple, list, dict, namedtuple, None, and any type
registered here) whose leaves are arrays or scalars. Transformations flatten their inputs and
outputs with these functions.
"""
from __future__ import annotations

import builtins

import numpy as np
import optree

NAMESPACE = "starling"

PyTreeSpec = optree.PyTreeSpec


def flatten(tree, is_leaf=None):
    """Returns ``(leaves, treedef)``; ``None`` is an empty subtree (no leaf), as in JAX."""
    return optree.tree_flatten(tree, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def paths_leaves_treedef(tree, is_leaf=None):
    """Returns ``(paths, leaves, treedef)`` as three parallel lists (what Starling's own code
    reads); ``flatten_with_path`` is the JAX-shaped form."""
    return optree.tree_flatten_with_path(tree, is_leaf=is_leaf, none_is_leaf=False,
                                         namespace=NAMESPACE)


def flatten_with_path(tree, is_leaf=None):
    """Returns ``([(path, leaf), ...], treedef)`` as JAX's ``tree.flatten_with_path``. A path is
    a tuple of the keys / indices / attribute names leading to the leaf (``keystr`` prints
    it)."""
    paths, flat, treedef = paths_leaves_treedef(tree, is_leaf)
    return list(zip(paths, flat)), treedef


def leaves_with_path(tree, is_leaf=None):
    """``[(path, leaf), ...]`` in flatten order (JAX's ``tree.leaves_with_path``)."""
    return flatten_with_path(tree, is_leaf)[0]


def unflatten(treedef, leaves):
    """Inverse of ``flatten``. Raises ValueError when the leaf count does not match."""
    return optree.tree_unflatten(treedef, leaves)


def leaves(tree, is_leaf=None):
    """The leaves of ``tree`` in flatten order."""
    return optree.tree_leaves(tree, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def structure(tree, is_leaf=None):
    """The treedef of ``tree`` (its structure without the leaves)."""
    return optree.tree_structure(tree, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def map(fn, tree, *rest, is_leaf=None):  # noqa: A001  (the field's name: tree.map)
    """Applies ``fn`` leafwise over one or more trees of the same structure."""
    return optree.tree_map(fn, tree, *rest, is_leaf=is_leaf, none_is_leaf=False,
                           namespace=NAMESPACE)


def map_with_path(fn, tree, *rest, is_leaf=None):
    """Like ``map`` with ``fn(path, leaf, *rest_leaves)``."""
    return optree.tree_map_with_path(fn, tree, *rest, is_leaf=is_leaf, none_is_leaf=False,
                                     namespace=NAMESPACE)


_NO_INITIAL = object()


def reduce(fn, tree, initializer=_NO_INITIAL, is_leaf=None):  # noqa: A001  (JAX's name)
    """``functools.reduce(fn, leaves(tree)[, initializer])``.

    Raises:
        TypeError: an empty tree and no ``initializer`` (as ``functools.reduce``).
    """
    import functools
    flat = leaves(tree, is_leaf)
    if initializer is _NO_INITIAL:
        return functools.reduce(fn, flat)
    return functools.reduce(fn, flat, initializer)


def all(tree, is_leaf=None):  # noqa: A001  (JAX's name)
    """True when every leaf is truthy (``bool(leaf)``; a multi-element array raises as in
    Python); True for an empty tree."""
    return builtins.all(leaves(tree, is_leaf))


def transpose(outer_treedef, inner_treedef, tree):
    """Turns a tree of structure ``outer(inner(leaves))`` into ``inner(outer(leaves))``, e.g.
    a list of dicts into a dict of lists (JAX's ``tree.transpose``).

    Raises:
        ValueError: ``tree`` does not have the structure ``outer_treedef`` of
            ``inner_treedef``s.
    """
    return optree.tree_transpose(outer_treedef, inner_treedef, tree)


def register_node(cls, flatten_fn, unflatten_fn):
    """Registers ``cls`` as a pytree node in the "starling" namespace.

    ``flatten_fn(obj) -> (children, aux_data)``; ``unflatten_fn(aux_data, children) -> obj``.
    """
    optree.register_pytree_node(cls, flatten_fn, unflatten_fn, namespace=NAMESPACE)
    return cls


def register_dataclass(cls, data_fields, meta_fields):
    """Registers a dataclass: ``data_fields`` are children, ``meta_fields`` static aux data."""
    def flatten_fn(obj):
        return [getattr(obj, f) for f in data_fields], tuple(getattr(obj, f) for f in meta_fields)

    def unflatten_fn(aux, children):
        obj = object.__new__(cls)
        for f, v in zip(data_fields, children):
            object.__setattr__(obj, f, v)
        for f, v in zip(meta_fields, aux):
            object.__setattr__(obj, f, v)
        return obj
    return register_node(cls, flatten_fn, unflatten_fn)


def path_str(path) -> str:
    """Human-readable form of a key path, e.g. ``['params'][0]`` (``<root>`` when empty)."""
    return "".join(f"[{k!r}]" for k in path) or "<root>"


def keystr(path) -> str:
    """A key path as text, ``['params'][0]`` (JAX's ``tree_util.keystr``); ``''`` for the
    root."""
    return "".join(f"[{k!r}]" for k in path)


class _NoneAxis:
    """Stands for ``None`` inside a prefix tree (where None would otherwise be an empty subtree)."""

    def __repr__(self):
        return "None"


_NONE_AXIS = _NoneAxis()


def broadcast_prefix(prefix, full):
    """One prefix value per leaf of ``full`` (flat list), where ``prefix`` is a pytree prefix of
    ``full`` whose leaves (including ``None``, which here means a value, not an empty subtree)
    apply to whole subtrees. Raises ValueError when ``prefix`` is not a prefix of ``full``."""
    marked = optree.tree_map(lambda x: _NONE_AXIS if x is None else x, prefix, none_is_leaf=True,
                             namespace=NAMESPACE)
    try:
        flat = optree.broadcast_prefix(marked, full, none_is_leaf=False, namespace=NAMESPACE)
    except ValueError:
        # again, for optree's message, which shows the mismatched subtree: arrays in it as
        # dtype[shape], never their data
        optree.broadcast_prefix(marked, _described(full), none_is_leaf=False,
                                namespace=NAMESPACE)
        raise
    return [None if x is _NONE_AXIS else x for x in flat]


def _described(tree):
    """``tree`` with its arrays replaced by their dtype[shape]. Only Python's own containers are
    rebuilt: a registered node's unflatten may have side effects (nn modules rebind)."""
    if type(tree) in (tuple, list):
        return type(tree)(_described(x) for x in tree)
    if type(tree) is dict:
        return {k: _described(v) for k, v in tree.items()}
    return _Described(tree) if hasattr(tree, "shape") and hasattr(tree, "dtype") else tree


class _Described:
    """A leaf shown as dtype[shape] in error messages."""

    __slots__ = ("text",)

    def __init__(self, x):
        shape = x.shape if hasattr(x, "shape") else np.shape(x)
        dtype = getattr(x, "dtype", None)
        name = np.dtype(dtype).name if dtype is not None else type(x).__name__
        self.text = f"{name}{list(shape)}"

    def __repr__(self):
        return self.text
