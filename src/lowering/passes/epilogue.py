"""Matmul epilogue fusion: ``dot_general`` + the fused group consuming it -> ``fused_matmul``.

Runs after fusion (which formed the ``fused_kernel`` groups). For each ``fused_kernel`` equation
G that reads the result ``d`` of a ``dot_general`` D, the pass asks the backend's ``validate``
whether the pair can run as one kernel (the cpp backend renders it: src/lowering/backends/
cpp_gemm.py decides the BLAS layout, the loop shape, and how ``d`` is read) and, if so, replaces
G by one ``fused_matmul`` equation (src/lowering/fused_matmul.py) and drops D. ``d`` stays an
output of the new equation when anything else (another equation, a Program output) reads it.

Placement keeps the Program in dependency order: the new equation goes where G was when every
other reader of ``d`` comes after G, else where D was when every other input of G is available
there; otherwise the pair is left alone. A dot feeds at most one group and a group absorbs at
most one dot (``x @ W1 + y @ W2`` fuses the first product; the second stays an input).

Control-flow bodies are processed too. ``fused_matmul`` equations already in the Program are
re-validated (so the backend renders them) and inlined back to plain equations if they fail.
"""
from __future__ import annotations

from ...core.ir import Equation, Literal, Program, Var
from ..fused import fused_kernel_p
from ..fused_matmul import fused_matmul_p, make_program
from .util import map_subprograms, with_eqns


def epilogue_fusion(prog: Program, validate=None) -> Program:
    """``prog`` with matmul epilogues fused (see module docstring). ``validate(program) -> bool``
    is the backend's check of a ``fused_matmul`` sub-Program; None turns the pass off."""
    if validate is None:
        return prog
    eqns = []
    changed = False
    for eqn in prog.eqns:
        if eqn.primitive is fused_matmul_p:
            if validate(eqn.params["program"]):
                eqns.append(eqn)
            else:
                eqns.extend(_inline(eqn))
                changed = True
            continue
        if eqn.primitive is not fused_kernel_p:
            new = map_subprograms(eqn, lambda p: epilogue_fusion(p, validate))
            changed |= any(new.params[k] is not v for k, v in eqn.params.items())
            eqn = new
        eqns.append(eqn)
    out = _fuse(eqns, prog.outvars, validate)
    if out is None:
        return with_eqns(prog, eqns) if changed else prog
    return with_eqns(prog, out)


def _fuse(eqns, outvars, validate):
    """The rewritten equation list, or None when nothing was fused."""
    producer, uses = {}, {}
    for i, eqn in enumerate(eqns):
        for v in eqn.outvars:
            producer[v] = i
        for v in eqn.invars:
            if isinstance(v, Var):
                uses.setdefault(v, []).append(i)
    outset = {v for v in outvars if isinstance(v, Var)}
    eqns = list(eqns)
    done = False
    for gi in range(len(eqns)):
        g = eqns[gi]
        if g is None or g.primitive is not fused_kernel_p:
            continue
        sub = g.params["program"]
        if sub.constvars:
            continue
        for j, v in enumerate(g.invars):
            di = producer.get(v) if isinstance(v, Var) else None
            if di is None or eqns[di] is None or eqns[di].primitive.name != "dot_general":
                continue
            dot = eqns[di]
            others = [k for k in uses.get(v, ()) if k != gi]
            emit = bool(others) or v in outset
            if all(k > gi for k in others):
                pos = gi
            elif all(producer.get(u, -1) < di for k, u in enumerate(g.invars)
                     if k != j and isinstance(u, Var)):
                pos = di
            else:
                continue
            dot = _fold_operand_transposes(dot, eqns, producer)
            program = make_program(dot, sub, j, emit)
            if not validate(program):
                continue
            outs = ([v] if emit else []) + list(g.outvars)
            ins = list(dot.invars) + [u for k, u in enumerate(g.invars) if k != j]
            new = Equation(fused_matmul_p, ins, outs,
                           {"program": program, "name": "matmul_" + g.params["name"]})
            eqns[di] = eqns[gi] = None
            eqns[pos] = new
            for u in outs:
                producer[u] = pos
            for u in ins:
                if isinstance(u, Var):
                    uses[u] = sorted({pos if k in (gi, di) else k for k in uses.get(u, ())}
                                     | {pos})
            done = True
            break
    return [e for e in eqns if e is not None] if done else None


def _fold_operand_transposes(dot, eqns, producer):
    """``dot`` reading ``transpose(a)`` reads ``a`` instead, with its dimension numbers mapped
    through the permutation (the backend then passes a BLAS trans flag instead of copying the
    strided view). Kept when the permutation would reorder the operand's free dims (the output
    layout would change)."""
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    dims = [[lc, lb], [rc, rb]]
    invars = list(dot.invars)
    changed = False
    for side, v in enumerate(dot.invars):
        k = producer.get(v) if isinstance(v, Var) else None
        t = eqns[k] if k is not None else None
        if t is None or t.primitive.name != "transpose" or not isinstance(t.invars[0], Var):
            continue
        perm = tuple(t.params["permutation"])
        c, b = dims[side]
        free = [i for i in range(len(perm)) if i not in c and i not in b]
        mapped = [perm[i] for i in free]
        if mapped != sorted(mapped):
            continue
        dims[side] = [tuple(perm[i] for i in c), tuple(perm[i] for i in b)]
        invars[side] = t.invars[0]
        changed = True
    if not changed:
        return dot
    dn = ((dims[0][0], dims[1][0]), (dims[0][1], dims[1][1]))
    return Equation(dot.primitive, invars, dot.outvars, dict(dot.params, dimension_numbers=dn))


def _inline(eqn):
    """The equations of a ``fused_matmul``'s sub-Program, renamed into the enclosing Program
    (its sub-Programs never hold constants: the pass builds them from fused groups)."""
    sub = eqn.params["program"]
    env = dict(zip(sub.invars, eqn.invars))
    final = dict(zip(sub.outvars, eqn.outvars))
    out = []
    for se in sub.eqns:
        outs = [final.get(v) or Var(v.aval) for v in se.outvars]
        env.update(zip(se.outvars, outs))
        out.append(Equation(se.primitive, [v if isinstance(v, Literal) else env[v]
                                           for v in se.invars], outs, se.params))
    return out
