"""``starling.tree`` / ``starling.tree_util``: JAX's pytree functions on the "starling" registry."""
import operator
from collections import namedtuple

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import tree, tree_util

Point = namedtuple("Point", "x y")
TREE = {"b": [1, (2, None)], "a": Point(3, {"z": 4})}


def test_flatten_with_path_is_jax_shaped():
    pairs, treedef = tree.flatten_with_path(TREE)
    assert pairs == [(("a", 0), 3), (("a", 1, "z"), 4), (("b", 0), 1), (("b", 1, 0), 2)]
    assert tree.unflatten(treedef, [p[1] for p in pairs]) == TREE
    assert tree.leaves_with_path(TREE) == pairs
    assert [tree_util.keystr(p) for p, _ in pairs] == [
        "['a'][0]", "['a'][1]['z']", "['b'][0]", "['b'][1][0]"]
    assert tree_util.keystr(()) == ""
    assert tree.flatten_with_path(5) == ([((), 5)], tree.structure(5))


def test_reduce_all_and_empty_trees():
    assert tree.reduce(operator.add, TREE) == 10
    assert tree.reduce(operator.add, TREE, 100) == 110
    assert tree.reduce(operator.add, [], 7) == 7
    with pytest.raises(TypeError):
        tree.reduce(operator.add, [None, ()])
    assert tree.all({"a": True, "b": [1, 2]}) and tree.all([]) and not tree.all([1, (0,)])
    assert tree.all([snp.asarray(True), np.bool_(True)])


def test_transpose_list_of_dicts_to_dict_of_lists():
    outer = tree.structure([0, 0, 0])
    inner = tree.structure({"w": 0, "b": 0})
    data = [{"w": i, "b": -i} for i in range(3)]
    assert tree.transpose(outer, inner, data) == {"w": [0, 1, 2], "b": [0, -1, -2]}
    with pytest.raises((ValueError, TypeError)):
        tree.transpose(outer, inner, data[:2])


def test_tree_util_aliases_and_registration():
    assert tree_util.tree_leaves(TREE) == tree.leaves(TREE)
    assert tree_util.tree_map(lambda v: v * 2, TREE)["a"].y["z"] == 8
    got = tree_util.tree_map_with_path(lambda p, v: tree_util.keystr(p), [1, {"k": 2}])
    assert got == ["[0]", {"k": "[1]['k']"}]
    assert tree_util.tree_reduce(max, TREE) == 4 and tree_util.tree_all(TREE)

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b
    tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
                                   lambda aux, ch: Pair(*ch))
    out = st.grad(lambda p: p.a * p.b)(Pair(2.0, 5.0))
    assert (float(out.a), float(out.b)) == (5.0, 2.0)
    leaves, treedef = tree_util.tree_flatten(Pair(1, [2, 3]))
    assert leaves == [1, 2, 3] and isinstance(treedef, tree_util.PyTreeDef)
    assert tree_util.tree_unflatten(treedef, [4, 5, 6]).b == [5, 6]
    assert tree_util.tree_structure(Pair(7, [8, 9])) == treedef


def test_partial_and_class_registration_helpers():
    p = tree_util.Partial(lambda a, x: a * x, snp.asarray(3.0))
    assert tree_util.tree_leaves(p) == [p.args[0]]
    assert float(st.compile(lambda p, x: p(x))(p, 2.0)) == 6.0
    assert float(st.grad(lambda p, x: p(x))(p, 2.0).args[0]) == 2.0

    @tree_util.register_pytree_node_class
    class Box:
        def __init__(self, a, tag="t"):
            self.a, self.tag = a, tag

        def tree_flatten(self):
            return (self.a,), self.tag

        @classmethod
        def tree_unflatten(cls, tag, children):
            return cls(*children, tag=tag)
    g = st.grad(lambda b: b.a ** 2)(Box(3.0, "x"))
    assert float(g.a) == 6.0 and g.tag == "x"

    class Pair:
        def __init__(self, x, y):
            self.x, self.y = x, y
    tree_util.register_pytree_with_keys(
        Pair, lambda p: ([("x", p.x), ("y", p.y)], None), lambda aux, ch: Pair(*ch))
    assert tree_util.tree_leaves(Pair(1, 2)) == [1, 2]
    assert isinstance(snp.ones(2), snp.ndarray)
