"""Fusion: groups elementwise chains and their trailing reductions into ``fused_kernel``s.

A *group* is a set of equations run as one loop nest over a *loop shape* L:

* elementwise equations whose output has shape L (their operands may broadcast: scalars,
  Literals, bias rows, ...), including ``convert_element_type``, ``where`` and comparisons;
* reductions (``reduce_sum`` / ``max`` / ``min`` / ...) of L-shaped values over one set of axes
  (the same for every reduction of the group); their results leave the group (no elementwise
  work on reduced values inside the group: that starts a new group);
* *view* equations (``broadcast_in_dim``, ``reshape``, ``squeeze``, ``transpose``, ``real`` /
  ``imag`` of complex) applied to a group input: they become index arithmetic in the kernel
  (pulled into every group that reads them; the original is dropped when nothing else uses it).

Vertical fusion: an equation joins the group that computes one of its operands. Horizontal
fusion: an equation whose operands all come from outside joins a group with the same loop shape
that already reads one of those operands (one pass over the shared input). Joining is refused
when it would create a cycle between groups (tracked with transitive dependency sets), so the
grouped Program can always be scheduled.

Joining is also refused when it would *delay* a group past later work in a way that keeps big
buffers alive. A group runs once all of its inputs exist, so an equation that reads a value
produced by a group created after ``g`` (e.g. ``acc = acc + dot_k``, the next product of an
accumulation chain) would move all of ``g`` after that producer: ``g``'s inputs computed in
the program whose last reader (in program order) comes before that producer would otherwise
die there, and now stay alive through it. Such a chain fused into one kernel keeps every
product alive until the end. The join is refused when those inputs (bytes, counted once) exceed
what the join saves, i.e. the group's values the equation reads (which would otherwise be
materialised; nothing for horizontal fusion), by at least ``DELAY_MIN_BYTES``. Program inputs
and values read later anyway are not counted, so epilogue-style chains (``relu(x @ w + b)``,
one product read once) still fuse.

The pass is generic; a backend supplies a ``FusionPolicy`` saying which equations it can fuse
(the cpp backend asks its formula table) and validating finished groups.
"""
from __future__ import annotations

import heapq

from ...core.ir import Equation, Literal, Program, Var, inline_calls, is_effectful
from ..fused import fused_kernel_p
from .dce import dce
from .util import map_subprograms, nbytes, with_eqns

ELEMENTWISE, REDUCE, VIEW = "elementwise", "reduce", "view"
# An equation the backend runs as a kernel of its own (e.g. gather / scatter): one group, which
# no other equation joins.
SINGLE = "single"
VIEW_PRIMITIVES = frozenset({"broadcast_in_dim", "reshape", "squeeze", "transpose"})
# argmax / argmin: reductions whose result is the (int64) position of the max / min.
ARG_REDUCE_PRIMITIVES = frozenset({"argmax", "argmin"})
REDUCE_PRIMITIVES = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                               "reduce_and", "reduce_or"}) | ARG_REDUCE_PRIMITIVES
# A join that delays a group is refused only when it keeps at least this many more bytes alive
# than it saves (below that an extra kernel launch costs more than the memory).
DELAY_MIN_BYTES = 1 << 16
# Stand-in size of a value whose size is not a plain int (symbolic dims): treated as big.
_UNKNOWN_BYTES = 1 << 30


class FusionPolicy:
    """What a backend can fuse. Override ``kind``; ``validate`` may reject a finished group."""

    def kind(self, eqn):
        """ELEMENTWISE, REDUCE, VIEW, SINGLE or None (not fusible)."""
        name = eqn.primitive.name
        if name in VIEW_PRIMITIVES:
            return VIEW
        if name in REDUCE_PRIMITIVES:
            return REDUCE
        if eqn.primitive.family == "elementwise" and not eqn.primitive.multiple_results:
            return ELEMENTWISE
        return None

    def view_ok(self, base_aval, chain) -> bool:
        """Whether the view equations ``chain`` (in order) applied to a buffer of ``base_aval``
        can be read with index arithmetic."""
        return True

    def validate(self, program) -> bool:
        return True

    def horizontal_ok(self, group_shape) -> bool:
        return True


class _Group:
    __slots__ = ("id", "eqns", "fused", "shape", "axes", "full", "reduced", "deps", "direct",
                 "views", "inputs", "first")

    def __init__(self, gid, eqn, index, fused, shape=None, axes=None):
        self.id = gid
        self.eqns = [eqn]
        self.fused = fused
        self.shape = shape
        self.axes = axes
        self.full = set()       # L-shaped values computed in the group (usable in registers)
        self.reduced = set()    # reduction results (leave the group)
        self.deps = set()       # transitive: every group this one depends on
        self.direct = set()     # groups whose outputs this one reads
        self.views = {}         # view outvar -> view equation pulled into this group
        self.inputs = set()     # outside vars read (directly or as a view's base)
        self.first = index


def fusion(prog: Program, policy: FusionPolicy | None = None) -> Program:
    """Groups fusible equations of ``prog`` (and of its control-flow sub-Programs)."""
    policy = policy or FusionPolicy()
    prog = fold_transposes(inline_fused(prog))
    return _Fuser(prog, policy).run()


def make_fusion_pass(policy: FusionPolicy):
    """The pipeline pass (named "fusion") that runs ``fusion`` with ``policy``."""
    def fusion_pass(prog):
        return fusion(prog, policy)
    fusion_pass.__name__ = "fusion"
    return fusion_pass


class _Fuser:
    def __init__(self, prog, policy):
        self.prog = prog
        self.policy = policy
        self.groups = []
        self.prod = {}       # Var -> producing group
        self.view_src = {}   # Var -> (view eqn, operand Var): a view not computed in registers
        # Var -> index of the last equation reading it (program outputs: never die).
        self.last_use = {}
        for i, eqn in enumerate(prog.eqns):
            for v in eqn.invars:
                if isinstance(v, Var):
                    self.last_use[v] = i
        for v in prog.outvars:
            if isinstance(v, Var):
                self.last_use[v] = float("inf")

    # ---- grouping ------------------------------------------------------------------------------
    def run(self):
        for i, eqn in enumerate(self.prog.eqns):
            eqn = map_subprograms(eqn, lambda p: fusion(p, self.policy))
            kind = self.policy.kind(eqn)
            if kind in (ELEMENTWISE, REDUCE) and self._try_fuse(eqn, i, kind):
                continue
            self._opaque(eqn, i, kind)
            if kind == SINGLE:   # a kernel of its own: a fused group nothing joins (no shape)
                self.groups[-1].fused = True
                self.groups[-1].inputs = {v for v in eqn.invars if isinstance(v, Var)}
        return self._assemble()

    def _opaque(self, eqn, index, kind):
        g = _Group(len(self.groups), eqn, index, fused=False)
        self.groups.append(g)
        for v in eqn.invars:
            h = self.prod.get(v) if isinstance(v, Var) else None
            if h is not None:
                g.direct.add(h.id)
                g.deps |= h.deps | {h.id}
        for v in eqn.outvars:
            self.prod[v] = g
        if kind == VIEW and isinstance(eqn.invars[0], Var):
            self.view_src[eqn.outvars[0]] = (eqn, eqn.invars[0])

    def _view_chain(self, v):
        """(base Var, [view eqns in order]) when ``v`` is a view of a materialised value."""
        chain = []
        while v in self.view_src:
            eqn, src = self.view_src[v]
            chain.append(eqn)
            v = src
        chain.reverse()
        return v, chain

    def _loop_shape(self, eqn, kind):
        if kind == REDUCE:
            return tuple(eqn.invars[0].aval.shape), tuple(sorted(eqn.params["axes"]))
        return tuple(eqn.outvars[0].aval.shape), None

    def _plan(self, eqn, g, shape, axes):
        """How ``eqn`` would read its operands if it joined ``g`` (None: it cannot)."""
        if g.shape != shape:
            return None
        if axes is not None and g.axes is not None and g.axes != axes:
            return None
        if axes is not None and g.axes is None and g.reduced:
            return None
        reads = []   # (outside var, view chain or None)
        for v in eqn.invars:
            if isinstance(v, Literal):
                continue
            if v in g.full:
                continue
            if v in g.reduced:
                return None
            base, chain = self._view_chain(v)
            if chain:
                if self.prod.get(base) is g or not self.policy.view_ok(base.aval, chain):
                    chain = None
                    base = v
            else:
                chain = None
            h = self.prod.get(base)
            if h is g:
                return None
            if h is not None and g.id in h.deps:
                return None
            reads.append((base, v, chain))
        return reads

    def _try_fuse(self, eqn, index, kind):
        shape, axes = self._loop_shape(eqn, kind)
        if kind == ELEMENTWISE and len(eqn.outvars) != 1:
            return False
        candidates = []
        for v in eqn.invars:
            g = self.prod.get(v) if isinstance(v, Var) else None
            if g is not None and g.fused and v in g.full and g not in candidates:
                candidates.append(g)
        candidates.sort(key=lambda g: -g.id)
        for g in candidates:
            reads = self._plan(eqn, g, shape, axes)
            if reads is not None and not self._delays(g, eqn, reads):
                self._join(g, eqn, kind, axes, reads)
                return True
        # Horizontal: a group over the same loop shape that reads one of our operands.
        if self.policy.horizontal_ok(shape):
            ours = set()
            for v in eqn.invars:
                if isinstance(v, Var):
                    ours.add(self._view_chain(v)[0])
            for g in reversed(self.groups):
                if g.fused and g.inputs & ours:
                    reads = self._plan(eqn, g, shape, axes)
                    if reads is not None and not self._delays(g, eqn, reads):
                        self._join(g, eqn, kind, axes, reads)
                        return True
        g = _Group(len(self.groups), eqn, index, fused=True, shape=shape, axes=None)
        g.eqns = []
        reads = self._plan(eqn, g, shape, axes)
        if reads is None:
            return False
        self.groups.append(g)
        self._join(g, eqn, kind, axes, reads)
        return True

    def _delays(self, g, eqn, reads):
        """Whether joining ``eqn`` to ``g`` would move ``g`` past later work and so keep more
        bytes of ``g``'s inputs alive than it saves (see the module docstring)."""
        # The latest group, created after g, that eqn reads from: g would have to wait for it.
        until = None
        for base, _, _ in reads:
            h = self.prod.get(base)
            if h is not None and h.id > g.id and (until is None or h.first > until):
                until = h.first
        if until is None:
            return False
        # g's inputs computed in the program that would otherwise die before `until`.
        kept = sum(_nbytes(v) for v in g.inputs
                   if v in self.prod and self.last_use.get(v, -1) < until)
        if kept < DELAY_MIN_BYTES:
            return False
        saved = sum(_nbytes(v) for v in set(eqn.invars) if isinstance(v, Var) and v in g.full)
        return kept - saved >= DELAY_MIN_BYTES

    def _join(self, g, eqn, kind, axes, reads):
        g.eqns.append(eqn)
        new_deps = set()
        for base, v, chain in reads:
            if chain:
                for view in chain:
                    g.views.setdefault(view.outvars[0], view)
            g.inputs.add(base)
            h = self.prod.get(base)
            if h is not None and h is not g:
                g.direct.add(h.id)
                new_deps |= h.deps | {h.id}
        if kind == REDUCE:
            g.axes = axes
            g.reduced.update(eqn.outvars)
        else:
            g.full.update(eqn.outvars)
        for v in eqn.outvars:
            self.prod[v] = g
        added = new_deps - g.deps
        if added:
            g.deps |= added
            for other in self.groups:
                if g.id in other.deps:
                    other.deps |= added

    # ---- assembly ------------------------------------------------------------------------------
    def _group_inputs(self, g):
        """Outside Vars read by group ``g`` (its members and pulled-in views)."""
        produced = set()
        views = set(g.views)
        ins = []
        seen = set()
        members = list(g.views.values()) + g.eqns if g.fused else g.eqns
        for eqn in members:
            produced.update(eqn.outvars)
        for eqn in members:
            for v in eqn.invars:
                if isinstance(v, Var) and v not in produced and v not in views and v not in seen:
                    seen.add(v)
                    ins.append(v)
        return ins

    def _order(self):
        groups = self.groups
        indeg = {g.id: 0 for g in groups}
        users = {g.id: [] for g in groups}
        for g in groups:
            for d in g.direct:
                indeg[g.id] += 1
                users[d].append(g.id)
        heap = [(g.first, g.id) for g in groups if indeg[g.id] == 0]
        heapq.heapify(heap)
        order = []
        while heap:
            _, gid = heapq.heappop(heap)
            order.append(groups[gid])
            for u in users[gid]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    heapq.heappush(heap, (groups[u].first, u))
        assert len(order) == len(groups), "fusion: cyclic group graph"
        return order

    def _assemble(self):
        order = self._order()
        needed = {v for v in self.prog.outvars if isinstance(v, Var)}
        plans = []
        for g in reversed(order):
            ins = self._group_inputs(g)
            if not g.fused:
                eqn = g.eqns[0]
                if is_effectful(eqn) or any(v in needed for v in eqn.outvars):
                    needed.update(ins)
                    plans.append((g, eqn))
                continue
            produced = [v for e in g.eqns for v in e.outvars]
            outs = [v for v in produced if v in needed]
            if not outs:
                continue
            needed.update(ins)
            plans.append((g, (ins, outs)))
        plans.reverse()
        eqns = []
        for g, plan in plans:
            if not g.fused:
                eqns.append(plan)
                continue
            ins, outs = plan
            members = [g.views[v] for v in g.views] + g.eqns
            members = _topological(members, ins)
            sub = dce(Program([], [], ins, members, outs))
            if not self.policy.validate(sub):
                eqns.extend(sub.eqns)   # not renderable as one kernel: run unfused
                continue
            name = "fusion_" + "_".join(e.primitive.name for e in g.eqns[:3])
            eqns.append(Equation(fused_kernel_p, ins, outs, {"program": sub, "name": name}))
        return with_eqns(self.prog, eqns)


def _nbytes(v):
    n = nbytes(v.aval)
    return n if isinstance(n, int) else _UNKNOWN_BYTES


def _topological(eqns, ins):
    """``eqns`` ordered so that each runs after the equations producing its operands."""
    avail = set(ins)
    pending = list(eqns)
    out = []
    while pending:
        rest = []
        for e in pending:
            if all(not isinstance(v, Var) or v in avail for v in e.invars):
                out.append(e)
                avail.update(e.outvars)
            else:
                rest.append(e)
        if len(rest) == len(pending):
            raise AssertionError("fusion: a group reads a value it never receives")
        pending = rest
    return out


def fold_transposes(prog: Program) -> Program:
    """``transpose(dot_general(a, b))`` that swaps the two free-dim groups becomes
    ``dot_general(b, a)`` (when the product has no other use), so no strided copy is needed:
    gradients of matmuls produce this pattern for every weight."""
    uses = {}
    for eqn in prog.eqns:
        for v in eqn.invars:
            if isinstance(v, Var):
                uses[v] = uses.get(v, 0) + 1
    for v in prog.outvars:
        if isinstance(v, Var):
            uses[v] = uses.get(v, 0) + 2
    producer = {}
    for i, eqn in enumerate(prog.eqns):
        for v in eqn.outvars:
            producer[v] = i
    eqns = list(prog.eqns)
    changed = False
    for i, eqn in enumerate(prog.eqns):
        if eqn.primitive.name != "transpose" or not isinstance(eqn.invars[0], Var):
            continue
        src = eqn.invars[0]
        j = producer.get(src)
        if j is None or uses.get(src) != 1:
            continue
        dot = eqns[j]
        if dot is None or dot.primitive.name != "dot_general":
            continue
        (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
        lhs, rhs = dot.invars
        nb = len(lb)
        nlf = len(lhs.aval.shape) - len(lc) - nb
        nrf = len(rhs.aval.shape) - len(rc) - nb
        swap = tuple(range(nb)) + tuple(range(nb + nlf, nb + nlf + nrf)) + \
            tuple(range(nb, nb + nlf))
        if tuple(eqn.params["permutation"]) != swap:
            continue
        params = dict(dot.params, dimension_numbers=((rc, lc), (rb, lb)))
        eqns[j] = None
        eqns[i] = Equation(dot.primitive, [rhs, lhs], eqn.outvars, params)
        changed = True
    if not changed:
        return prog
    return with_eqns(prog, [e for e in eqns if e is not None])


def inline_fused(prog: Program) -> Program:
    """Replaces ``fused_kernel`` equations by the equations of their sub-Programs (so fusion
    can regroup programs that already contain fused kernels, e.g. after a transformation)."""
    return inline_calls(prog, lambda e: e.primitive is fused_kernel_p)
