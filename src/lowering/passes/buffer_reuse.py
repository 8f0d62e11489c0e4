"""buffer_reuse: the memory plan of a scheduled (fused) Program -- which kernel outputs are
written into a buffer that is dead (or donated) at that point instead of a fresh allocation.

Runs last in the cpp backend's passes (after fusion and DCE), on the Program in schedule order.
It changes no computation: every kernel equation (``fused_kernel``, ``fused_matmul``) that gets
a plan carries the param ``reuse``, a tuple with one entry per kernel output:

* ``None``: allocate a fresh output;
* ``("eqn", k, m)``: write into the buffer of output ``m`` of equation ``k`` of this Program;
* ``("in", i)``: write into the buffer of invar ``i``, donated by the caller
  (``compile(..., donate_argnums=)``; the schedule gets that buffer only after a run-time check,
  else it allocates: donation is a hint).

A buffer B (a value produced by a kernel, by a primitive known to allocate its result, or a
donated invar) may receive output j of kernel equation e when, for the *alias class* of B:

* no member of the class is read after e, nor is a program output, a non-donated invar or a
  constant. The class groups values that may share memory: any result of a primitive that is
  not known to allocate (views such as reshape / transpose / broadcast / real / imag / slices,
  a switch that may return an operand unchanged, anything unknown) may alias every one of its
  inputs, and its class is their union; a scan's or while loop's results, only the inputs
  ``loop_output_sources`` finds;
* either no member is read by e itself (the buffer died earlier: its deletion is deferred to e),
  or e reads only B itself, at input positions that are *in place* for output j: inside the
  kernel that input is read by no view (transpose, broadcast, real / imag) but the ones that
  keep its element order (reshape, squeeze), it is read at the output's shape (hence the
  kernel's loop shape: no broadcast) and has its item size (not complex), output j is an
  elementwise result (not a reduction) and depends on it. Every loop point of a kernel is
  visited once, loading each input once and storing after the loads it
  depends on, so each element is read before the same element is written. (The kernels
  declare their pointers ``__restrict``; an in-place launch relies on this load-before-store
  order of the generated loops and on fused_matmul computing its product into a scratch
  block: a code generator that reads an input twice or stores ahead of its loads must drop
  ``__restrict`` or tighten this rule.) A reduction in the
  same kernel (horizontal fusion) may read that input too: it uses the same load. In a
  ``fused_matmul`` the same holds for its epilogue: an epilogue input (e.g. the weight ``w`` of
  ``w - lr * (x.T @ g)``) may take an epilogue output, never a matrix operand;
* B's size in bytes equals output j's (the dtype may differ: the schedule reinterprets the
  bytes) and is at least ``min_bytes`` (env ``STARLING_REUSE_MIN_BYTES``, default 64 KiB;
  donated buffers have no minimum): below that, a fresh allocation costs less than the checks.

Each class gives its memory at most once. The plan is greedy in schedule order and prefers, for
each output: an input it overwrites in place that is a kernel output or donated ("pooled":
when such a buffer dies the launcher's pool or the caller keeps its memory anyway), then a dead
pooled buffer (the one that died first; a NumPy result only if it died at the previous
equation), then a NumPy result overwritten in place. A NumPy result's memory returns to malloc
when it dies, where NumPy's next allocation (the next sort, cumsum, matmul...) finds it; the
launcher's pool serves only kernel outputs. So taking a NumPy buffer while a pooled one sits
idle, or keeping a dead NumPy buffer alive for a later kernel, could raise the peak.

Inside control-flow bodies (while / switch / scan) the same plan runs on each body. Their
invars (scanned slices, operands) are never reused, except the carries of scan and while
bodies: they are planned as donated, and the loop passes its carry buffers as the donation,
each only after a run-time check that the loop holds the only reference
(``buffers.donatable_item``): the previous iteration's results, and at the first iteration the
initial carries the schedule handed over because nothing reads them after the loop
(backends/cpp/backend.py), so an accumulator ``acc = acc + x`` is updated in place instead of
holding two copies. A loop's results alias only what its body can pass through
(``loop_output_sources``): a scan's stacked outputs are new arrays, so later kernels may write
over a dead loop result. A donated buffer that a collective or a host callback read is never
written (a peer device may still read it after the collective returned on this one; the
run-time checks cannot see that). Set ``STARLING_BUFFER_REUSE=0`` to turn the pass off.

The plan is static; before overwriting an intermediate the schedule re-checks at run time that
nothing else references it (src/lowering/buffers.py: a live view, a second name, a user's
array all hold a reference), so an aliasing the classes missed costs an allocation, not data.
A donated buffer is checked by ``compile`` before the call (nothing outside the program sees
it); inside the program it relies on the classes above (views made from it by the program).
What no run-time check can see, and the rules above must get right, is how the kernel itself
reads the buffer it overwrites. Reuse is for kernel outputs only: NumPy-implemented primitives
(matmul, sort, ...) allocate their results themselves.
"""
from __future__ import annotations

import os
from collections import defaultdict, deque

import numpy as np

from ...core.ir import Equation, Program, Var, is_effectful
from ..fused import fused_kernel_p
from ..fused_matmul import fused_matmul_p, split
from .fusion import REDUCE_PRIMITIVES, VIEW_PRIMITIVES
from .util import nbytes as _nbytes

DEFAULT_MIN_BYTES = 1 << 16
# Native kernels, launched with ``k.run(sizes, outs, ...)``: their outputs can be planned.
KERNELS = (fused_kernel_p, fused_matmul_p)

# Primitives whose implementation always returns newly allocated arrays (never a view of, or
# the same object as, an input). Results of any other primitive are assumed to alias inputs.
ALLOCATING = frozenset({
    "dot_general", "sort", "argsort", "searchsorted", "top_k", "cumsum", "cumprod", "cummax",
    "cummin", "gather", "scatter", "concatenate", "pad", "iota", "argwhere", "choose",
})
# Views that keep the element order of a contiguous input.
_ORDER_KEEPING = frozenset({"reshape", "squeeze"})
# gather / scatter kernels read other positions than they write (cpp/indexing.py).
_NOT_ELEMENTWISE = frozenset(VIEW_PRIMITIVES) | {"real", "imag", "complex_pack", "gather",
                                                 "scatter"}


def buffer_reuse(prog: Program, donated=None, min_bytes=None) -> Program:
    """``prog`` with a ``reuse`` param on every kernel equation that has a plan.

    Args:
        prog: the scheduled Program (after fusion); sub-Programs of control flow are planned too.
        donated: None or one bool per invar of ``prog``: invars whose buffers the caller donates.
        min_bytes: smallest intermediate buffer worth reusing (default: env
            ``STARLING_REUSE_MIN_BYTES`` or 64 KiB).
    Returns:
        A Program with the same equations (same sub-Programs of kernels), some with ``reuse``.
    """
    if os.environ.get("STARLING_BUFFER_REUSE", "1") in ("0", "false", "False", "off"):
        return prog
    if min_bytes is None:
        min_bytes = int(os.environ.get("STARLING_REUSE_MIN_BYTES", DEFAULT_MIN_BYTES))
    if donated is not None and len(donated) != len(prog.invars):
        raise ValueError(f"buffer_reuse: donated has {len(donated)} entries for a Program with "
                         f"{len(prog.invars)} inputs")
    eqns = [_plan_bodies(e, min_bytes) for e in prog.eqns]
    planned = plan(Program(prog.constvars, prog.consts, prog.invars, eqns, prog.outvars),
                   donated, min_bytes)
    changed = any(a is not b for a, b in zip(eqns, prog.eqns))
    out = []
    for k, e in enumerate(eqns):
        if e.primitive in KERNELS and (k in planned or "reuse" in e.params):
            params = {n: p for n, p in e.params.items() if n != "reuse"}
            if k in planned:
                params["reuse"] = planned[k]
            e = Equation(e.primitive, e.invars, e.outvars, params)
            changed = True
        out.append(e)
    if not changed:
        return prog
    return Program(prog.constvars, prog.consts, prog.invars, out, prog.outvars, prog.effects)


def _plan_bodies(eqn, min_bytes):
    """``eqn`` with its control-flow sub-Programs planned (kernel bodies are left alone)."""
    if eqn.primitive in KERNELS:
        return eqn
    params, changed = {}, False
    for name, p in eqn.params.items():
        if isinstance(p, Program):
            q = buffer_reuse(p, _loop_carries(eqn, name, p), min_bytes)
        elif isinstance(p, tuple) and p and all(isinstance(x, Program) for x in p):
            q = tuple(buffer_reuse(x, None, min_bytes) for x in p)
            q = p if all(a is b for a, b in zip(p, q)) else q
        else:
            q = p
        changed |= q is not p
        params[name] = q
    return Equation(eqn.primitive, eqn.invars, eqn.outvars, params) if changed else eqn


def _loop_carries(eqn, name, body):
    """The invars of a loop body that the loop may donate to it: a scan's or while loop's
    carries, whose buffers, from the second iteration on, are the previous iteration's results,
    held by the loop alone (src/lowering/backends/cpp/backend.py checks that at run time and passes
    None otherwise, and at the first iteration, when they are the caller's)."""
    prim, prm = eqn.primitive.name, eqn.params
    if prim == "scan" and name == "body":
        first, count = prm["num_consts"], prm["num_carry"]
    elif prim == "while" and name == "body":
        first = prm["n_body"]
        count = len(body.invars) - first
    else:
        return None
    return [first <= i < first + count for i in range(len(body.invars))]


# ---- what a loop's results may share memory with -------------------------------------------------

def _body_sources(body):
    """For each outvar of a loop body: the indices of the body's invars whose memory it may be
    (its alias class, built as in ``plan``; a kernel output planned into a donated invar or
    into an earlier buffer shares that buffer's class)."""
    cls = _Classes()
    for e in body.eqns:
        reuse = e.params.get("reuse") if e.primitive in KERNELS else None
        if e.primitive in KERNELS or e.primitive.name in ALLOCATING:
            for o, ref in zip(e.outvars, reuse or ()):
                if ref is not None:
                    cls.union(o, body.invars[ref[1]] if ref[0] == "in"
                              else body.eqns[ref[1]].outvars[ref[2]])
            continue
        ins = [v for v in e.invars if isinstance(v, Var)]
        for o in e.outvars:
            for v in ins:
                cls.union(o, v)
            cls.union(o, e.outvars[0])
    roots = [cls.find(v) for v in body.invars]
    return [set() if not isinstance(o, Var) else
            {i for i, r in enumerate(roots) if r is cls.find(o)} for o in body.outvars]


def loop_output_sources(eqn):
    """For a ``scan`` / ``while`` equation, one set per output of the equation's input positions
    whose buffers that output may be (else None: any input). A scan's stacked outputs are new
    arrays; a carry is what the body returns for it (a new buffer, or a buffer passed in: a
    constant, a scanned slice, a carry, whose own source is followed through the iterations),
    or the initial carry itself when the loop runs no iteration."""
    name, p = eqn.primitive.name, eqn.params
    if name == "scan":
        body, first, n_carry = p["body"], p["num_consts"], p["num_carry"]

        def outer(i):        # body invars: consts, carries, scanned slices, as the eqn's
            return i
    elif name == "while":
        body, first = p["body"], p["n_body"]
        n_carry = len(body.invars) - first

        def outer(i):        # the eqn's invars start with the condition's constants
            return p["n_cond"] + i
    else:
        return None
    direct = _body_sources(body)[:n_carry]
    group = list(range(n_carry))          # carries that may hand their buffers to each other

    def find(k):
        while group[k] != k:
            k = group[k]
        return k
    for j, srcs in enumerate(direct):
        for i in srcs:
            if first <= i < first + n_carry:
                group[find(i - first)] = find(j)
    out = []
    for j in range(n_carry):
        members = [k for k in range(n_carry) if find(k) == find(j)]
        srcs = {outer(first + k) for k in members}
        srcs |= {outer(i) for k in members for i in direct[k]}
        out.append(srcs)
    return out + [set()] * (len(eqn.outvars) - n_carry)


# ---- the plan ---------------------------------------------------------------------------------

class _Classes:
    """Union-find over Vars: the may-alias classes."""

    def __init__(self):
        self.parent = {}

    def find(self, v):
        root = self.parent.setdefault(v, v)
        while self.parent[root] is not root:
            root = self.parent[root]
        while v is not root:                 # path compression
            self.parent[v], v = root, self.parent[v]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[rb] = ra


def plan(prog: Program, donated=None, min_bytes=DEFAULT_MIN_BYTES) -> dict:
    """``{equation index: reuse tuple}`` for the kernel equations of ``prog`` that can write
    an output into an existing buffer (see the module docstring for the rules)."""
    eqns = prog.eqns
    n = len(eqns)
    cls = _Classes()
    last = {}                        # Var -> index of the last equation reading it (n: output)
    born = {}                        # Var -> index of the producing equation (-1: inputs)
    cands = {}                       # Var -> reference of a buffer that may be reused
    pinned = set(prog.constvars)
    for v in prog.constvars:
        born[v] = -1
    for i, v in enumerate(prog.invars):
        born[v] = -1
        size = _nbytes(v.aval)
        if donated is not None and donated[i] and size is not None and size != 0:
            cands[v] = ("in", i)
        else:
            pinned.add(v)
    for k, e in enumerate(eqns):
        for v in e.invars:
            if isinstance(v, Var):
                last[v] = k
        alloc = e.primitive in KERNELS or e.primitive.name in ALLOCATING
        loop = None if alloc else loop_output_sources(e)
        for m, o in enumerate(e.outvars):
            born[o] = k
            if alloc or loop is not None:
                cands[o] = ("eqn", k, m)
        if loop is not None:
            for o, sources in zip(e.outvars, loop):
                for i in sources:
                    if isinstance(e.invars[i], Var):
                        cls.union(o, e.invars[i])
        elif not alloc:
            ins = [v for v in e.invars if isinstance(v, Var)]
            for o in e.outvars:
                for v in ins:
                    cls.union(o, v)
                cls.union(o, e.outvars[0])
    for v in prog.outvars:
        if isinstance(v, Var):
            last[v] = n
            pinned.add(v)
    members = defaultdict(list)
    for v in born:
        members[cls.find(v)].append(v)
    dead_at = defaultdict(list)      # equation index of the last use -> classes
    for r, ms in members.items():
        if any(v in pinned for v in ms) or not any(v in cands for v in ms):
            continue
        dead_at[max(last.get(v, born[v]) for v in ms)].append(r)

    # Kernel outputs and donated buffers are "pooled": when they die the launcher's pool (or
    # the caller) keeps their memory anyway, so writing into them costs nothing; the memory of
    # a NumPy result goes back to malloc when it dies, where NumPy's own next allocation finds
    # it, so keeping one alive for a later kernel can raise the peak.
    pooled = {v for v, ref in cands.items()
              if ref[0] == "in" or eqns[ref[1]].primitive in KERNELS}
    # A buffer a collective or a host callback read may still be read after that equation
    # returns (by a peer device still in the rendezvous, by a callback that kept it). Run-time
    # takes see those references; writes into donated buffers are not checked at run time, so
    # the plan never writes into a donated buffer such an equation read.
    shared = {cls.find(v) for e in eqns if is_effectful(e) for v in e.invars
              if isinstance(v, Var)}
    ctx = _Ctx(eqns, cls, members, cands, pooled, min_bytes, shared)
    out = {}
    ctx.release(dead_at[-1])                       # donated invars nobody reads
    for k, e in enumerate(eqns):
        if k > 0:
            ctx.release(dead_at[k - 1])
        if e.primitive not in KERNELS:
            continue
        entry = [None] * len(e.outvars)
        for j, o in enumerate(e.outvars):
            size = _nbytes(o.aval)
            if size is None or (isinstance(size, int) and size == 0):
                continue
            # Preference: overwrite a pooled input in place, then a pooled dead buffer (or a
            # NumPy one that died just before), then a NumPy result in place.
            entry[j] = (ctx.in_place(e, j, size, dead_at[k], pooled=True)
                        or ctx.dead_buffer(o, size)
                        or ctx.in_place(e, j, size, dead_at[k], pooled=False))
        for o, r in zip(e.outvars, entry):
            if r is not None and r[0] == "in":
                # the output lives in the donated buffer: a later kernel reusing it writes into
                # that buffer again (its liveness is this plan's), never through a run-time
                # take, which would see the donor's own reference and refuse
                cands[o] = r
        if any(r is not None for r in entry):
            out[k] = tuple(entry)
    return out


class _Ctx:
    """The state of the greedy plan: classes, candidates, dead buffers by size, classes already
    given away."""

    def __init__(self, eqns, cls, members, cands, pooled, min_bytes, shared=frozenset()):
        self.eqns, self.cls, self.members, self.cands = eqns, cls, members, cands
        self.pooled, self.min_bytes, self.shared = pooled, min_bytes, shared
        self.consumed = set()
        self.free = defaultdict(deque)   # size key -> (class, Var) of dead pooled buffers
        self.recent = {}                 # size key -> [(class, Var)]: NumPy results that died
        #                                  at the previous equation

    def _unwritable(self, root, v):
        """A donated buffer (class ``root``) that a collective or a callback read."""
        return self.cands[v][0] == "in" and root in self.shared

    def _big_enough(self, v, size):
        return self.cands[v][0] == "in" or not isinstance(size, int) or size >= self.min_bytes

    def release(self, roots):
        """The classes ``roots`` died at the previous equation: their buffers become free."""
        recent = defaultdict(list)
        for r in roots:
            for v in self.members[r]:
                size = _nbytes(v.aval)
                if v in self.cands and size is not None and self._big_enough(v, size) \
                        and not self._unwritable(r, v):
                    bucket = self.free if v in self.pooled else recent
                    bucket[_size_key(size)].append((r, v))
        self.recent = recent

    def in_place(self, e, j, size, dying, pooled):
        """A buffer read by kernel ``e`` for the last time that output ``j`` can overwrite."""
        ok = _in_place_ok if e.primitive is fused_kernel_p else _gemm_in_place_ok
        sub = e.params["program"]
        for r in dying:
            if r in self.consumed:
                continue
            read = {v for v in e.invars if isinstance(v, Var) and self.cls.find(v) is r}
            if len(read) != 1:
                continue         # not read here (died with this equation's outputs) / 2 aliases
            u = read.pop()
            if u not in self.cands or (u in self.pooled) != pooled or self._unwritable(r, u) \
                    or not _same_size(_nbytes(u.aval), size) or not self._big_enough(u, size):
                continue
            positions = [i for i, v in enumerate(e.invars) if v is u]
            if all(ok(sub, i, j) for i in positions):
                self.consumed.add(r)
                return self.cands[u]
        return None

    def dead_buffer(self, o, size):
        """The buffer of a class that died before this equation with ``size`` bytes (the same
        dtype and shape as ``o`` preferred, among the first few): pooled buffers first, in the
        order they died, then NumPy results that died at the previous equation."""
        key = _size_key(size)
        dt = np.dtype(o.aval.dtype)
        for bucket in (self.free.get(key), self.recent.get(key)):
            if not bucket:
                continue
            if isinstance(bucket, deque):
                while bucket and bucket[0][0] in self.consumed:
                    bucket.popleft()
            best = None
            for n, (r, v) in enumerate(bucket):
                if n >= 8:
                    break
                if r in self.consumed:
                    continue
                exact = np.dtype(v.aval.dtype) == dt and _same_shape(v.aval.shape, o.aval.shape)
                if best is None or exact:
                    best = (r, v)
                if exact:
                    break
            if best is not None:
                self.consumed.add(best[0])
                return self.cands[best[1]]
        return None


def _gemm_in_place_ok(sub, i, j):
    """In-place test for a ``fused_matmul``: the GEMM computes each block of rows of the product
    into a scratch block, or into the product's own output when that is an output, then runs the
    epilogue over the block (src/lowering/backends/cpp/gemm.py). So an epilogue input may be
    overwritten by an epilogue output under the elementwise rule; the matrix operands (invars 0
    and 1, read across rows and columns) and the product output never take part."""
    dot, epi, emit = split(sub)
    j_epi = j - 1 if emit else j
    if i < 2 or j_epi < 0:
        return False
    return _in_place_ok(epi, i - 1, j_epi)


def _in_place_ok(sub, i, j):
    """Does kernel ``sub`` read its input ``i`` only at the index where it writes output ``j``,
    before writing it? (See the module docstring.) A reshape or squeeze of the input keeps its
    element order (kernel inputs are contiguous), so reading the input through such views at
    the output's shape counts as reading it at the output's index."""
    x, o = sub.invars[i], sub.outvars[j]
    if not isinstance(o, Var) or o in sub.invars:
        return False
    dx, do = np.dtype(x.aval.dtype), np.dtype(o.aval.dtype)
    if dx.kind == "c" or do.kind == "c" or dx.itemsize != do.itemsize:
        return False
    if not _same_size(_nbytes(x.aval), _nbytes(o.aval)):    # item sizes are equal
        return False
    seen = {x}                       # x and its order-keeping views
    for e in sub.eqns:
        name = e.primitive.name
        reads = [v for v in e.invars if isinstance(v, Var) and v in seen]
        if name in _ORDER_KEEPING and reads:
            seen.add(e.outvars[0])
            continue
        if reads and (name in _NOT_ELEMENTWISE or
                      not all(_same_shape(v.aval.shape, o.aval.shape) for v in reads)):
            return False
        if any(v is o for v in e.outvars) and (name in _NOT_ELEMENTWISE
                                               or name in REDUCE_PRIMITIVES):
            return False
    if o in seen:
        return False
    needed = {o}
    for e in reversed(sub.eqns):
        if any(v in needed for v in e.outvars):
            needed.update(v for v in e.invars if isinstance(v, Var))
    return bool(seen & needed)



# ---- sizes (static ints or symbolic dims) --------------------------------------------------------

def _size_key(size):
    """A dict key equal for equal sizes: the int, or the expanded symbolic expression."""
    if isinstance(size, int):
        return size
    import sympy
    return sympy.srepr(sympy.expand(sympy.sympify(size)))


def _same_size(a, b):
    if a is None or b is None:
        return False
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    import sympy
    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


def _same_shape(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, (int, np.integer)) and isinstance(y, (int, np.integer)):
            if int(x) != int(y):
                return False
        elif not _same_size(_dim(x), _dim(y)):
            return False
    return True


def _dim(d):
    if isinstance(d, (int, np.integer)):
        return int(d)
    return getattr(d, "expr", None)

