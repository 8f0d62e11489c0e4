"""``fused_matmul``: a matrix product and the elementwise work that consumes it, as one kernel.

The epilogue pass (src/lowering/passes/epilogue.py) rewrites ``d = dot_general(a, b)`` followed
by a ``fused_kernel`` reading ``d`` into one ``fused_matmul`` equation. Param ``program`` holds
the whole computation as a sub-Program: invars ``(a, b, *epilogue inputs)``; its first equation
is the ``dot_general`` producing ``d``; the remaining equations are the epilogue (the former
fused group: bias add, activation, scale, casts, row reductions ...); outvars are ``d`` itself
when it is needed outside (then always first) followed by the group's outputs. Param ``name``
is a display name.

The reference implementation evaluates the sub-Program, and the JVP / batching rules are those
of ``fused_kernel`` (they transform the sub-Program), so a Program holding ``fused_matmul`` still
runs on numpy_ref and under every transformation. The cpp backend renders it as a blocked GEMM
through BLAS with the epilogue applied to each block of rows while it is in cache
(src/lowering/backends/cpp_gemm.py).
"""
from __future__ import annotations

from ..core.ir import Equation, Program, Var
from ..core.primitive import Primitive
from . import fused as _fused

fused_matmul_p = Primitive("fused_matmul", multiple_results=True, family="lowering")

# The sub-Program is evaluated / transformed exactly like a fused group's.
fused_matmul_p.impl = _fused._impl
fused_matmul_p.abstract_eval = _fused._abstract_eval
fused_matmul_p.weak_type = _fused._weak
fused_matmul_p.jvp = _fused._jvp
# Batching yields a plain fused_kernel holding the batched product and epilogue; the fusion pass
# inlines it again, and the epilogue pass may re-form a (batched) fused_matmul where it applies.
fused_matmul_p.batch = _fused._batch


def split(program: Program):
    """``(dot equation, epilogue sub-Program, emit_dot)`` of a ``fused_matmul`` sub-Program.

    The epilogue sub-Program's invars are ``(d, *program.invars[2:])`` and its outvars are the
    outputs after ``d`` (``emit_dot`` says whether ``d`` is the first output of ``program``).
    """
    dot = program.eqns[0]
    d = dot.outvars[0]
    emit = bool(program.outvars) and program.outvars[0] is d
    outs = program.outvars[1:] if emit else program.outvars
    epi = Program(program.constvars, program.consts, [d] + list(program.invars[2:]),
                  program.eqns[1:], outs)
    return dot, epi, emit


def make_program(dot, epilogue: Program, dot_index: int, emit_dot: bool) -> Program:
    """The ``fused_matmul`` sub-Program of ``dot`` (a dot_general Equation) feeding invar
    ``dot_index`` of ``epilogue`` (a fused group's sub-Program)."""
    d = epilogue.invars[dot_index]
    others = [v for i, v in enumerate(epilogue.invars) if i != dot_index]
    # Fresh operand Vars: the outer operands may repeat (x @ x.T) or also feed the epilogue.
    operands = [Var(v.aval) for v in dot.invars]
    eqn = Equation(dot.primitive, operands, [d], dot.params)
    return Program(epilogue.constvars, epilogue.consts, operands + others,
                   [eqn] + list(epilogue.eqns), ([d] if emit_dot else []) + list(epilogue.outvars))
