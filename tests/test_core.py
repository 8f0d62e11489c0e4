"""Primitives, the trace context, the IR printer/checker and staging."""
import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling.core import ir
from starling.core.avals import ShapedArray, canonicalize_shape
from starling.core.primitive import MissingRuleError, Primitive
from starling.core.trace import EVAL_TRACE, LeakedTracerError, current_trace
from starling.transforms.stage import eval_shape, make_ir


def test_primitive_names_are_unique():
    with pytest.raises(ValueError, match="declared twice"):
        Primitive("add")


def test_missing_rule_names_primitive_and_rule():
    p = Primitive("test_no_impl_prim")
    with pytest.raises(MissingRuleError, match="test_no_impl_prim.*impl"):
        p.bind(snp.asarray(1.0))
    with pytest.raises(MissingRuleError, match="jvp"):
        p.rule("jvp")


def test_eval_trace_is_default():
    assert current_trace() is EVAL_TRACE


def test_make_ir_prints_readably():
    prog = make_ir(lambda a, b: snp.add(snp.add(a, b), 2.0))(np.ones(3, np.float32), np.float32(1))
    text = str(prog)
    assert text.splitlines()[0] == "{ lambda  ; a:f32[3] b:f32[] ."
    assert "c:f32[3] = add a b" in text
    assert "d:f32[3] = add c 2.0" in text
    assert text.strip().endswith("in (d) }")
    ir.check_program(prog)


def test_closed_over_arrays_become_constvars():
    c = snp.asarray(np.arange(3, dtype=np.float32))
    prog = make_ir(lambda a: snp.add(a, c))(np.ones(3, np.float32))
    assert len(prog.constvars) == 1 and prog.consts[0] is c
    out, = ir.eval_program(prog, prog.consts, snp.asarray(np.ones(3, np.float32)))
    np.testing.assert_array_equal(np.asarray(out), [1, 2, 3])


def test_check_program_catches_use_before_definition():
    a = ir.Var(ShapedArray((3,), np.dtype("float32")))
    b = ir.Var(ShapedArray((3,), np.dtype("float32")))
    c = ir.Var(ShapedArray((3,), np.dtype("float32")))
    add_p = Primitive.registry["add"]
    prog = ir.Program([], [], [a], [ir.Equation(add_p, [a, b], [c], {})], [c])
    with pytest.raises(ir.IRError, match="used before definition"):
        ir.check_program(prog)


def test_check_program_catches_wrong_types():
    a = ir.Var(ShapedArray((3,), np.dtype("float32")))
    c = ir.Var(ShapedArray((4,), np.dtype("float32")))
    add_p = Primitive.registry["add"]
    prog = ir.Program([], [], [a], [ir.Equation(add_p, [a, a], [c], {})], [c])
    with pytest.raises(ir.IRError, match="abstract eval"):
        ir.check_program(prog)


def test_leaked_tracer_is_caught():
    leaked = []

    def f(x):
        leaked.append(x)
        return x

    make_ir(f)(np.ones(2, np.float32))
    with pytest.raises(LeakedTracerError):
        snp.add(leaked[0], 1.0)


def test_tracer_cannot_be_concretized():
    def f(x):
        if x:
            return x
        return x
    with pytest.raises(TypeError, match="concrete"):
        make_ir(f)(np.ones((), np.float32))


def test_eval_shape():
    out = eval_shape(lambda a: {"y": snp.add(a, 1)}, np.ones((2, 3), np.int8))
    assert out["y"] == ShapedArray((2, 3), np.dtype("int8"))


def test_canonicalize_shape_errors():
    with pytest.raises(ValueError, match="non-negative"):
        canonicalize_shape((2, -1))
    with pytest.raises(TypeError, match="integers"):
        canonicalize_shape((2.5,))
    assert canonicalize_shape(3) == (3,)


def test_tree_namespace():
    leaves, treedef = starling.tree.flatten({"a": (1, 2), "b": None})
    assert leaves == [1, 2]
    assert starling.tree.unflatten(treedef, [3, 4]) == {"a": (3, 4), "b": None}
