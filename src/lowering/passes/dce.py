"""Dead-code elimination: drops equations whose outputs nobody uses.

Effectful equations (``core.ir.is_effectful``: a collective, a host callback, or a body holding
one) are kept regardless. Sub-Programs are cleaned too (their outputs are all live: the
enclosing primitive's contract).
"""
from __future__ import annotations

from ...core.ir import Literal, Program, is_effectful
from .util import map_subprograms, with_eqns


def dce(prog: Program) -> Program:
    """``prog`` without equations whose outputs are unused (see module docstring)."""
    live = {v for v in prog.outvars if not isinstance(v, Literal)}
    kept = []
    for eqn in reversed(prog.eqns):
        if is_effectful(eqn) or any(v in live for v in eqn.outvars):
            eqn = map_subprograms(eqn, dce)
            kept.append(eqn)
            live.update(v for v in eqn.invars if not isinstance(v, Literal))
    kept.reverse()
    return with_eqns(prog, kept)
