"""Helpers shared by the passes: rebuilding Programs, emitting equations, walking sub-Programs."""
from __future__ import annotations

import numpy as np

from ...core.avals import ShapedArray
from ...core.ir import Equation, Literal, Program, Var
from ...core.primitive import Primitive


def with_eqns(prog: Program, eqns, outvars=None) -> Program:
    """A copy of ``prog`` with new equations (and outvars)."""
    out = Program(prog.constvars, prog.consts, prog.invars, eqns,
                  prog.outvars if outvars is None else outvars, prog.effects)
    return out


def map_subprograms(eqn: Equation, fn) -> Equation:
    """Applies ``fn`` to every Program held in ``eqn``'s params (control flow bodies)."""
    changed = False
    params = {}
    for k, v in eqn.params.items():
        if isinstance(v, Program):
            v = fn(v)
            changed = True
        elif isinstance(v, tuple) and v and all(isinstance(p, Program) for p in v):
            v = tuple(fn(p) for p in v)
            changed = True
        params[k] = v
    if not changed:
        return eqn
    return Equation(eqn.primitive, eqn.invars, eqn.outvars, params)


def emit(eqns, name, ins, **params):
    """Appends the equation ``name(*ins, **params)`` to ``eqns`` and returns its result Var
    (aval from the primitive's abstract evaluation, strongly typed)."""
    prim = Primitive.registry[name]
    aval = prim.abstract_eval(*[v.aval for v in ins], **params)
    v = Var(ShapedArray(aval.shape, aval.dtype, False))
    eqns.append(Equation(prim, list(ins), [v], params))
    return v


def is_literal(v) -> bool:
    """True for a Literal operand (as opposed to a Var)."""
    return isinstance(v, Literal)


def nbytes(aval):
    """Size in bytes of a value of ``aval``: an int, a sympy expression for symbolic dims, or
    None (unknown dtype or dims)."""
    try:
        total = np.dtype(aval.dtype).itemsize
    except TypeError:
        return None
    for d in aval.shape:
        if isinstance(d, (int, np.integer)):
            total = total * int(d)
        elif hasattr(d, "expr"):
            total = total * d.expr
        else:
            return None
    return total
