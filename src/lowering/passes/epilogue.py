"""Matmul epilogue fusion: ``dot_general`` + the fused group consuming it -> ``fused_matmul``.

Runs after fusion (which formed the ``fused_kernel`` groups). For each ``fused_kernel`` equation
G that reads the result ``d`` of a ``dot_general`` D, the pass asks the backend's ``validate``
whether the pair can run as one kernel (the cpp backend renders it: src/lowering/backends/
cpp/gemm.py decides the GEMM layout, the loop shape, and how ``d`` is read) and, if so, replaces
G by one ``fused_matmul`` equation (src/lowering/fused_matmul.py) and drops D. ``d`` stays an
output of the new equation when anything else (another equation, a Program output) reads it.
A ``dot_general`` left without a group becomes a ``fused_matmul`` of its own (no epilogue) when
the backend accepts it, so every product the backend can run natively is one kernel.

Producer side: the chain of views (transpose, reshape, squeeze, broadcast_in_dim, slice) that
makes each operand of D from a buffer is taken into the ``fused_matmul``: the kernel reads the
buffer through strides (a transposed operand becomes a GEMM transpose flag, a slice an offset),
so the views are never materialised; they stay in the Program only if something else reads them
(DCE drops the rest). An exact widening of a low-precision operand (``is_operand_cast``:
float8 / bfloat16 -> float32, a lone cast or a fused group of one cast) joins the chain too,
for backends that load the narrow buffer (Triton: float8 products on the tensor cores); a
backend that refuses it is offered the views after the cast.

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
from ..fused_matmul import OPERAND_VIEWS, fused_matmul_p, is_operand_cast, make_program
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
            found = _validated(validate, dot, eqns, producer,
                               lambda views: make_program(dot, sub, j, emit, views))
            if found is None:
                continue
            bases, program = found
            outs = ([v] if emit else []) + list(g.outvars)
            ins = bases + [u for k, u in enumerate(g.invars) if k != j]
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
    for di, dot in enumerate(eqns):   # the products left alone: kernels of their own
        if dot is None or dot.primitive.name != "dot_general" \
                or not all(isinstance(u, Var) for u in dot.invars):
            continue
        found = _validated(validate, dot, eqns, producer,
                           lambda views: make_program(dot, None, views=views))
        if found is not None:
            eqns[di] = Equation(fused_matmul_p, found[0], list(dot.outvars),
                                {"program": found[1], "name": "matmul"})
            done = True
    return [e for e in eqns if e is not None] if done else None


def _validated(validate, dot, eqns, producer, make):
    """``(operand buffers, sub-Program)`` of the first variant the backend accepts: reading the
    operands through their view chains (widening casts included), else through the views after
    the last cast of each chain, else the operands themselves; None if none."""
    bases, views = _operand_views(dot, eqns, producer)
    variants = [(bases, views)]
    if any(is_operand_cast(e) for chain in views for e in chain):
        cut = [max([i + 1 for i, e in enumerate(chain) if is_operand_cast(e)], default=0)
               for chain in views]
        variants.append(([chain[c - 1].outvars[0] if c else b
                          for b, chain, c in zip(bases, views, cut)],
                         tuple(chain[c:] for chain, c in zip(views, cut))))
    if any(views):
        variants.append((list(dot.invars), ((), ())))
    for ins, vs in variants:
        program = make(vs)
        if validate(program):
            return ins, program
    return None


def _operand_views(dot, eqns, producer):
    """``(bases, views)``: for each operand of ``dot``, the buffer it is a view of and the chain
    of view equations (in order) from that buffer to the operand ((): the operand itself)."""
    bases, views = [], []
    for v in dot.invars:
        chain = []
        while isinstance(v, Var):
            k = producer.get(v)
            e = _lone_cast(eqns[k]) if k is not None and eqns[k] is not None else None
            if e is None or not (e.primitive.name in OPERAND_VIEWS or is_operand_cast(e)) \
                    or len(e.invars) != 1 or not isinstance(e.invars[0], Var):
                break
            chain.append(e)
            v = e.invars[0]
        bases.append(v)
        views.append(tuple(chain[::-1]))
    return bases, tuple(views)


def _lone_cast(eqn):
    """``eqn``; for a fused group that is one operand cast (fusion groups a lone
    ``convert_element_type`` too), that cast as an equation on the group's own Vars."""
    if eqn.primitive is not fused_kernel_p:
        return eqn
    sub = eqn.params["program"]
    if len(sub.eqns) != 1 or sub.constvars or len(sub.invars) != 1 or \
            sub.eqns[0].invars != sub.invars or sub.eqns[0].outvars != sub.outvars:
        return eqn
    inner = sub.eqns[0]
    return Equation(inner.primitive, list(eqn.invars), list(eqn.outvars), inner.params)


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
