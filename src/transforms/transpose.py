"""Transposition of linear Programs (the backward pass of reverse mode).

Given a Program that is linear in its invars (as linearize produces), ``backward_pass`` maps output
cotangents to input cotangents by walking the equations in reverse and applying each primitive's
``transpose`` rule. Equations with no linear input (e.g. residual computations) are evaluated
forward first. Every operation binds on the current trace, so the backward pass can itself be
differentiated, batched or staged.
"""
from __future__ import annotations

from ..arrays.array import wrap
from ..arrays.ops import rules as R
from ..core.ad_util import UndefinedPrimal, Zero, tangent_aval
from ..core.ir import Literal, Program
from ..core.primitive import MissingRuleError


def backward_pass(prog: Program, consts, cts_out):
    """Cotangents of ``prog``'s invars (list; Zero where none flows) for output cotangents."""
    known = {}
    for v, c in zip(prog.constvars, consts):
        known[v] = c
    linear = set(prog.invars)
    lin_eqns = []
    for eqn in prog.eqns:
        if any(not isinstance(v, Literal) and v in linear for v in eqn.invars):
            lin_eqns.append(eqn)
            linear.update(eqn.outvars)
        else:
            outs = eqn.primitive.bind(*[_read(known, v) for v in eqn.invars], **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            for v, o in zip(eqn.outvars, outs):
                known[v] = o

    ct_env = {}
    for v, ct in zip(prog.outvars, cts_out):
        if isinstance(v, Literal) or v not in linear:
            continue
        ct_env[v] = R.add_tangents(ct_env.get(v, Zero(tangent_aval(v.aval))), ct)

    for eqn in reversed(lin_eqns):
        cts = [ct_env.pop(v, None) for v in eqn.outvars]
        if all(c is None or type(c) is Zero for c in cts):
            continue
        cts = [Zero(tangent_aval(v.aval)) if c is None else c for v, c in zip(eqn.outvars, cts)]
        rule = eqn.primitive.transpose
        if rule is None:
            raise MissingRuleError(eqn.primitive, "transpose")
        args = [UndefinedPrimal(v.aval) if (not isinstance(v, Literal) and v in linear)
                else _read(known, v) for v in eqn.invars]
        cts_in = rule(cts if eqn.primitive.multiple_results else cts[0], *args, **eqn.params)
        for v, a, ct in zip(eqn.invars, args, cts_in):
            if type(a) is not UndefinedPrimal or ct is None or type(ct) is Zero:
                continue
            ct_env[v] = R.add_tangents(ct_env.get(v, Zero(tangent_aval(v.aval))), ct)

    return [ct_env.get(v, Zero(tangent_aval(v.aval))) for v in prog.invars]


def _read(known, v):
    if isinstance(v, Literal):
        return wrap(v.val, v.aval.weak_type)
    return known[v]
