"""Rematerialisation of cheap kernel outputs: a reader recomputes a value instead of loading it.

A backward pass reads many values its forward kernels stored only for it (residuals): the GELU
of a transformer's MLP stores ``u``, ``u * u``, ``1 - tanh(g(u))**2`` and ``tanh(g(u)) + 1``,
four buffers of the MLP's width, and the backward kernel loads all four. Each is an elementwise
function of ``u``, which the backward kernel loads anyway. This pass runs after fusion and
epilogue fusion (on ``fused_kernel`` / ``fused_matmul`` equations) and rewrites such an output
``o`` of a kernel P so that every kernel C reading it computes it from its *bases* instead:

* the recipe of ``o``: the equations of P's sub-Program from which ``o`` follows, stopping at
  P's other outputs of ``o``'s shape and at P's inputs (its small inputs, like a bias, read
  through the views P reads them with). Every equation of it is elementwise of ``o``'s shape
  (or a view of an input); ``o`` does not depend on the product of a ``fused_matmul``.
* it is cheap: at most ``BUDGET`` cost units (1 per arithmetic equation, 2 per division; no
  ``tanh``, ``exp``, ...: a recomputed one could differ in its last bit, see BUDGET).
* every reader of ``o`` is a kernel that reads ``o`` at its loop index only (each equation
  reading it is elementwise of ``o``'s shape; for a ``fused_matmul``, ``o`` is an epilogue
  input, not an operand), ``o`` is no output of the Program, and the bases a reader does not
  read yet are no larger, together, than ``o``.
* the backend accepts every rewritten kernel (``validate``);
* its size is static (under dynamic shapes the pass leaves values alone).

Then each reader takes the recipe into its sub-Program (after the product, for a
``fused_matmul``; repeated work merged by CSE), and P no longer writes ``o``: one buffer fewer
written and read, and alive. The pass repeats until nothing changes, so outputs computed from
each other (``u * u`` feeding the tanh) fold back to their first base. Recomputation runs the
same formulas on the same inputs as P did, so values keep their bits: the cpp kernels are compiled
without multiply-add contraction (src/lowering/cache.py), and how a kernel splits a long sum
follows from its sizes, not from the work the pass moves (cpp/reductions.py: RED_CHUNK). The
order in which an operation's two NaN operands are read may change, and with it which NaN
payload propagates. ``STARLING_REMAT=0`` turns it off.

Reference: rematerialisation of cheap fusible ops in backward passes as in XLA's rematerialization
and PyTorch's min-cut partitioner (functorch ``min_cut_rematerialization_partition``); here it is
a local rule on fused kernels rather than a global min cut.
"""
from __future__ import annotations

import os

from ...core.ir import Equation, Literal, Program, Var
from ..fused import fused_kernel_p
from ..fused_matmul import fused_matmul_p
from .cse import cse
from .dce import dce
from .fusion import ELEMENTWISE, REDUCE_PRIMITIVES, VIEW
from .util import map_subprograms, nbytes, with_eqns

# Cost units a recipe may take: 1 per arithmetic equation, 2 per division. Recipes with a
# function call (tanh, exp, log, pow, ...) are never rematerialised, whatever they cost: a
# kernel computes such a function with the vector math library in the body of its SIMD loops
# and with the C library in their scalar remainders, which round differently, so the same
# element recomputed by a kernel with other loop bounds could differ in its last bit.
# (Cost, measured on the machines here, AVX-512, 2 threads, 1M float32, 512-bit vectors: one
# more 4 MiB input read ~0.1 ms, a multiply ~2 us, a tanh ~40 us; with 256-bit vectors, before
# cache.FLAGS asked for 512, a tanh cost 0.3 ms.)
BUDGET = 8
_ARITHMETIC = frozenset({"add", "subtract", "multiply", "negative", "square", "abs", "max",
                         "min", "maximum", "minimum", "select_n", "where", "sign",
                         "convert_element_type", "copy", "eq", "ne", "lt", "le", "gt", "ge",
                         "and", "or", "not"})
_DIVISION = frozenset({"divide", "reciprocal"})
_KERNELS = (fused_kernel_p, fused_matmul_p)


def enabled() -> bool:
    """False when the environment sets ``STARLING_REMAT`` to "0": ``remat`` then returns
    Programs unchanged. Read at each compilation."""
    return os.environ.get("STARLING_REMAT", "1") != "0"


def remat(prog: Program, kind, validate_kernel, validate_matmul) -> Program:
    """``prog`` with cheap kernel outputs recomputed by their readers (see module docstring).

    ``kind(eqn)``: the backend's fusion kind of an equation (FusionPolicy.kind);
    ``validate_kernel(sub)`` / ``validate_matmul(sub)``: whether the backend can run a
    ``fused_kernel`` / ``fused_matmul`` sub-Program (None: that kind is never rewritten)."""
    if not enabled():
        return prog
    eqns = []
    changed = False
    for eqn in prog.eqns:
        if eqn.primitive not in _KERNELS:
            new = map_subprograms(
                eqn, lambda p: remat(p, kind, validate_kernel, validate_matmul))
            changed |= new is not eqn
            eqn = new
        eqns.append(eqn)
    ctx = _Context(kind, validate_kernel, validate_matmul,
                   {v for v in prog.outvars if isinstance(v, Var)})
    readers = _readers(eqns)
    # A rewrite changes kernel P and its readers, which come after it: the kernels before P
    # have been tried already, so the scan goes on from P.
    pi = 0
    while pi < len(eqns):
        step = ctx.rewrite_at(eqns, pi, readers)
        if step is None:
            pi += 1
            continue
        for i, (old, new) in enumerate(zip(eqns, step)):
            if old is not new:
                for v in old.invars:
                    if isinstance(v, Var):
                        readers[v].discard(i)
                for v in new.invars:
                    if isinstance(v, Var):
                        readers.setdefault(v, set()).add(i)
        eqns = step
        changed = True
    return with_eqns(prog, eqns) if changed else prog


def _readers(eqns):
    """Var -> indices of the equations reading it."""
    readers = {}
    for i, e in enumerate(eqns):
        for v in e.invars:
            if isinstance(v, Var):
                readers.setdefault(v, set()).add(i)
    return readers


class _Context:
    def __init__(self, kind, validate_kernel, validate_matmul, outset):
        self.kind = kind
        self.validate = {fused_kernel_p: validate_kernel, fused_matmul_p: validate_matmul}
        self.outset = outset
        # (id of producer sub-Program, output index) found not rewritable -> that sub-Program,
        # held so that its id is not reused by a new one while the pass runs
        self.refused = {}

    def rewrite_at(self, eqns, pi, readers):
        """The equation list after one output of kernel ``eqns[pi]`` is rematerialised, or
        None."""
        p = eqns[pi]
        if p.primitive not in _KERNELS or self.validate[p.primitive] is None:
            return None
        sub = p.params["program"]
        # later outputs first: they are the ones computed from earlier ones
        for j in reversed(range(len(p.outvars))):
            key = (id(sub), j)
            if key in self.refused:
                continue
            out = self._rewrite(eqns, pi, j, readers)
            if out is None:
                self.refused[key] = sub
                continue
            return out
        return None

    def _rewrite(self, eqns, pi, j, readers):
        p = eqns[pi]
        outer = p.outvars[j]
        if outer in self.outset or outer not in readers:
            return None
        sub = p.params["program"]
        recipe = _recipe(sub, j, self.kind, 2 if p.primitive is fused_matmul_p else 0)
        if recipe is None:
            return None
        eqs, bases = recipe
        size = nbytes(outer.aval)
        if not isinstance(size, int):
            return None
        # outer Var of each base: P's outvar or P's input
        base_outer = {}
        for b in bases:
            if b in sub.outvars:
                base_outer[b] = p.outvars[sub.outvars.index(b)]
            else:
                base_outer[b] = p.invars[sub.invars.index(b)]
        new = {}
        for ci in sorted(readers[outer]):
            c = eqns[ci]
            if c.primitive not in _KERNELS or self.validate[c.primitive] is None:
                return None
            made = _with_recipe(c, outer, eqs, bases, base_outer, size)
            if made is None or not self.validate[c.primitive](made[0]):
                return None
            csub, added = made
            invars = [v for v in c.invars if v is not outer] + added
            new[ci] = Equation(c.primitive, invars, c.outvars, {**c.params, "program": csub})
        # P stops writing o
        keep = [k for k in range(len(p.outvars)) if k != j]
        psub = dce(Program(sub.constvars, sub.consts, sub.invars, sub.eqns,
                           [sub.outvars[k] for k in keep]))
        if p.primitive is fused_matmul_p and not any(
                e.primitive.name == "dot_general" for e in psub.eqns):
            return None
        if not self.validate[p.primitive](psub):
            return None
        out = list(eqns)
        out[pi] = Equation(p.primitive, p.invars, [p.outvars[k] for k in keep],
                           {**p.params, "program": psub})
        for ci, e in new.items():
            out[ci] = e
        return out


def _cost(eqn):
    name = eqn.primitive.name
    return 1 if name in _ARITHMETIC else 2 if name in _DIVISION else BUDGET + 1


def _recipe(sub, j, kind, first):
    """(equations computing outvar ``j`` of ``sub`` from its bases, in order; the bases), or
    None when the output is not cheap elementwise work on other outputs and inputs."""
    o = sub.outvars[j]
    if not isinstance(o, Var) or o in sub.invars:
        return None
    shape = tuple(o.aval.shape)
    made = {v: e for e in sub.eqns for v in e.outvars}
    others = {v for k, v in enumerate(sub.outvars) if k != j and isinstance(v, Var)
              and tuple(v.aval.shape) == shape and v not in sub.invars}
    inputs = set(sub.invars[first:])   # a fused_matmul's operands feed only its product
    need, bases, cost = set(), set(), 0
    stack = [o]
    while stack:
        v = stack.pop()
        if v in need or v in bases:
            continue
        if v is not o and v in others:
            bases.add(v)
            continue
        if v in inputs:
            # an input read at o's loop index or broadcast from a smaller shape
            if nbytes(v.aval) is None:
                return None
            bases.add(v)
            continue
        e = made.get(v)
        if e is None:
            return None
        k = kind(e)
        if k == VIEW:
            # views only of inputs (index arithmetic on a buffer the reader will take)
            src = e.invars[0]
            if src not in inputs and (src not in made or kind(made[src]) != VIEW):
                return None
        elif k == ELEMENTWISE:
            if tuple(e.outvars[0].aval.shape) != shape:
                return None
            cost += _cost(e)
            if cost > BUDGET:
                return None
        else:
            return None
        need.add(v)
        stack.extend(x for x in e.invars if isinstance(x, Var))
    eqs = [e for e in sub.eqns if any(v in need for v in e.outvars)]
    # in a fixed order (the reader's new inputs follow it): P's outputs, then its inputs
    order = {v: k for k, v in enumerate(list(sub.outvars) + list(sub.invars))
             if isinstance(v, Var)}
    return eqs, sorted(bases, key=lambda b: order[b])


def _reads_at_index(csub, v, shape):
    """Whether every equation of ``csub`` reading ``v`` is elementwise of ``shape`` (so ``v``
    is read at the kernel's loop index) and ``v`` is no output of ``csub``."""
    if v in csub.outvars:
        return False
    for e in csub.eqns:
        if any(x is v for x in e.invars):
            if e.primitive.name in REDUCE_PRIMITIVES:
                if tuple(e.invars[0].aval.shape) != shape:
                    return False
            elif e.primitive.name == "dot_general" or len(e.outvars) != 1 or \
                    tuple(e.outvars[0].aval.shape) != shape or \
                    e.primitive.family != "elementwise":
                return False
    return True


def _with_recipe(c, outer, eqs, bases, base_outer, size):
    """(reader ``c``'s sub-Program computing ``outer`` from the recipe instead of reading it,
    the outer Vars of its new inputs), or None when it cannot."""
    csub = c.params["program"]
    shape = tuple(outer.aval.shape)
    first = 2 if c.primitive is fused_matmul_p else 0   # a fused_matmul's operands stay
    pos = [k for k, v in enumerate(c.invars) if v is outer]
    if any(k < first for k in pos):
        return None
    inner = [csub.invars[k] for k in pos]
    if not all(_reads_at_index(csub, v, shape) for v in inner):
        return None
    # bases: an input the reader already takes, or a new one
    by_outer = {}
    for k, v in enumerate(c.invars):
        if k >= first and v is not outer:
            by_outer.setdefault(v, csub.invars[k])
    rename, added, extra = {}, [], 0
    for b in bases:
        ob = base_outer[b]
        if ob in by_outer:
            rename[b] = by_outer[ob]
            continue
        nb = nbytes(ob.aval)
        if not isinstance(nb, int):
            return None
        extra += nb
        w = Var(b.aval)
        rename[b] = w
        added.append((ob, w))
    if extra > size:
        return None
    body = []
    for e in eqs:
        outs = []
        for v in e.outvars:
            w = Var(v.aval)
            rename[v] = w
            outs.append(w)
        ins = [x if isinstance(x, Literal) else rename[x] for x in e.invars]
        body.append(Equation(e.primitive, ins, outs, e.params))
    if not eqs:
        return None
    # the recipe's last equation computes o (the others are its ancestors, in program order)
    value = rename[eqs[-1].outvars[0]]
    subst = {v: value for v in inner}
    k_dot = next((i for i, e in enumerate(csub.eqns) if e.primitive.name == "dot_general"), -1)
    at = k_dot + 1
    rest = [Equation(e.primitive, [subst.get(x, x) if isinstance(x, Var) else x
                                   for x in e.invars], e.outvars, e.params)
            for e in csub.eqns]
    invars = [v for k, v in enumerate(csub.invars) if k not in pos] + [w for _, w in added]
    out = Program(csub.constvars, csub.consts, invars, rest[:at] + body + rest[at:],
                  [subst.get(v, v) if isinstance(v, Var) else v for v in csub.outvars])
    return _tidy(out, first), [ob for ob, _ in added]


def _tidy(sub, first):
    """CSE over the epilogue (repeated recipe work) keeping the product's equations in place."""
    return cse(sub) if first == 0 else _cse_after_dot(sub)


def _cse_after_dot(sub):
    k = next(i for i, e in enumerate(sub.eqns) if e.primitive.name == "dot_general")
    head = sub.eqns[:k + 1]
    tail = Program([], [], [], sub.eqns[k + 1:], sub.outvars)
    tail = cse(tail)
    return Program(sub.constvars, sub.consts, sub.invars, head + tail.eqns, tail.outvars)
