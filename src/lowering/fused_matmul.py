"""``fused_matmul``: a matrix product and the elementwise work that consumes it, as one kernel.

The epilogue pass (src/lowering/passes/epilogue.py) rewrites ``d = dot_general(a, b)`` followed
by a ``fused_kernel`` reading ``d`` into one ``fused_matmul`` equation, and a ``dot_general``
that feeds no group into a ``fused_matmul`` without epilogue. Param ``program`` holds the whole
computation as a sub-Program: invars ``(a, b, *epilogue inputs)``, where ``a`` and ``b`` are the
buffers the operands are *views* of; its equations are first the view chains from ``a`` / ``b``
to the operands (transpose, reshape, squeeze, broadcast_in_dim, slice: the backend reads the
buffers through strides instead of materialising the views; and exact widenings of
low-precision operands, ``is_operand_cast``, for backends that load them narrow), then the
``dot_general`` producing ``d``, then the epilogue (the former fused group: bias add,
activation, scale, casts, row reductions ...); outvars are ``d`` itself when it is needed
outside (then always first) followed by the group's outputs. Param ``name`` is a display name.

The reference implementation evaluates the sub-Program, and the JVP / batching rules are those
of ``fused_kernel`` (they transform the sub-Program), so a Program holding ``fused_matmul`` still
runs on numpy_ref and under every transformation. The cpp backend renders it as a strided GEMM
on Starling's native library with the epilogue applied to each block of rows while it is in
cache (src/lowering/backends/cpp/gemm.py).
"""
from __future__ import annotations

from ..core import dtypes
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


# Views a fused_matmul reads its operands through (the backend folds them into strides).
OPERAND_VIEWS = frozenset({"transpose", "reshape", "squeeze", "broadcast_in_dim", "slice"})


def is_operand_cast(eqn) -> bool:
    """True for an exact widening a fused_matmul may read an operand through: a
    ``convert_element_type`` from a low-precision float (float8 / float4 / bfloat16 / float16)
    to float32. A backend that can load the narrow buffer and widen it in registers (the Triton
    template: float8 products on the tensor cores) takes it; the others refuse the variant and
    the epilogue pass offers the product without it."""
    if eqn.primitive.name != "convert_element_type":
        return False
    src, dst = eqn.invars[0].aval.dtype, eqn.outvars[0].aval.dtype
    return dst == dtypes.float32 and (src in dtypes.LOW_PRECISION_FLOATS
                                      or src in (dtypes.bfloat16, dtypes.float16))


def _dot_index(program):
    for i, e in enumerate(program.eqns):
        if e.primitive.name == "dot_general":
            return i
    raise ValueError("fused_matmul: the sub-Program has no dot_general")


def split(program: Program):
    """``(dot equation, epilogue sub-Program, emit_dot)`` of a ``fused_matmul`` sub-Program.

    The epilogue sub-Program's invars are ``(d, *program.invars[2:])`` and its outvars are the
    outputs after ``d`` (``emit_dot`` says whether ``d`` is the first output of ``program``).
    """
    k = _dot_index(program)
    dot = program.eqns[k]
    d = dot.outvars[0]
    emit = bool(program.outvars) and program.outvars[0] is d
    outs = program.outvars[1:] if emit else program.outvars
    epi = Program(program.constvars, program.consts, [d] + list(program.invars[2:]),
                  program.eqns[k + 1:], outs)
    return dot, epi, emit


def operand_views(program: Program):
    """The view equations from invar 0 (resp. 1) of a ``fused_matmul`` sub-Program to the
    dot's lhs (resp. rhs), in order: ``(lhs chain, rhs chain)``."""
    k = _dot_index(program)
    dot = program.eqns[k]
    made = {e.outvars[0]: e for e in program.eqns[:k]}
    chains = []
    for side in (0, 1):
        chain, v = [], dot.invars[side]
        while v in made:
            chain.append(made[v])
            v = made[v].invars[0]
        if v is not program.invars[side]:
            raise ValueError("fused_matmul: an operand is not a view of its invar")
        chains.append(chain[::-1])
    return tuple(chains)


def _renamed_chain(chain, base):
    """``chain`` (view Equations from some Var to an operand) re-rooted at the fresh Var
    ``base`` with fresh intermediate Vars; returns (equations, the operand's new Var)."""
    out, v = [], base
    for e in chain:
        w = Var(e.outvars[0].aval)
        out.append(Equation(e.primitive, [v], [w], e.params))
        v = w
    return out, v


def make_program(dot, epilogue: Program | None, dot_index: int = 0, emit_dot: bool = True,
                 views=((), ())) -> Program:
    """The ``fused_matmul`` sub-Program of ``dot`` (a dot_general Equation) feeding invar
    ``dot_index`` of ``epilogue`` (a fused group's sub-Program; None: no epilogue, the product
    is the only output). ``views``: per operand, the view Equations from the buffer the
    sub-Program takes to the dot's operand (() when it takes the operand itself)."""
    if epilogue is None:
        d = dot.outvars[0]
        epilogue = Program([], [], [d], [], [])
        emit_dot = True
    d = epilogue.invars[dot_index]
    others = [v for i, v in enumerate(epilogue.invars) if i != dot_index]
    # Fresh operand Vars: the outer operands may repeat (x @ x.T) or also feed the epilogue.
    bases, eqns, operands = [], [], []
    for v, chain in zip(dot.invars, views):
        src = chain[0].invars[0] if chain else v
        base = Var(src.aval)
        renamed, operand = _renamed_chain(chain, base)
        bases.append(base)
        eqns += renamed
        operands.append(operand)
    eqn = Equation(dot.primitive, operands, [d], dot.params)
    return Program(epilogue.constvars, epilogue.consts, bases + others,
                   eqns + [eqn] + list(epilogue.eqns),
                   ([d] if emit_dot else []) + list(epilogue.outvars))
