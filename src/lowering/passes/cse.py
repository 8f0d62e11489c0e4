"""Common-subexpression elimination: an equation identical to an earlier one (same primitive,
same inputs, equal params) reuses the earlier outputs. Literals compare by value and dtype."""
from __future__ import annotations

import numpy as np

from ...core.ir import Equation, Literal, Program, is_effectful
from .util import map_subprograms, with_eqns


def _key_of_input(v, rename):
    if isinstance(v, Literal):
        arr = np.asarray(v.val)
        return ("lit", arr.dtype.str, arr.tobytes(), v.aval.weak_type)
    return ("var", id(rename.get(v, v)))


def _params_key(params):
    try:
        key = tuple(sorted((k, v) for k, v in params.items()))
        hash(key)
        return key
    except TypeError:
        return None


def cse(prog: Program) -> Program:
    """``prog`` with repeated equations merged (see module docstring)."""
    rename = {}
    seen = {}
    eqns = []
    for eqn in prog.eqns:
        eqn = map_subprograms(eqn, cse)
        invars = [v if isinstance(v, Literal) else rename.get(v, v) for v in eqn.invars]
        pkey = _params_key(eqn.params)
        if pkey is not None and not is_effectful(eqn):
            key = (eqn.primitive.name, tuple(_key_of_input(v, rename) for v in invars), pkey)
            prev = seen.get(key)
            if prev is not None:
                for old, new in zip(eqn.outvars, prev.outvars):
                    rename[old] = new
                continue
            new_eqn = Equation(eqn.primitive, invars, eqn.outvars, eqn.params)
            seen[key] = new_eqn
        else:
            new_eqn = Equation(eqn.primitive, invars, eqn.outvars, eqn.params)
        eqns.append(new_eqn)
    outvars = [v if isinstance(v, Literal) else rename.get(v, v) for v in prog.outvars]
    return with_eqns(prog, eqns, outvars)
