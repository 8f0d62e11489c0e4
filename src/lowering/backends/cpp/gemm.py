"""GEMM kernels of the cpp backend: ``fused_matmul`` rendered on Starling's native GEMM.

A ``fused_matmul`` (src/lowering/fused_matmul.py) is ``d = dot_general(a', b')``, where ``a'``
and ``b'`` are views (transpose, reshape, squeeze, broadcast, slice) of the kernel's buffers
``a`` and ``b``, optionally feeding an elementwise epilogue group. It becomes ONE C++ function:

1. the plan: the views are applied to strided accesses of ``a`` / ``b`` (codegen.apply_view)
   and the product becomes one descriptor of the native strided batched GEMM
   (src/arrays/ops/dot_layout.py, native/gemm.h): rows = the output's ``(*batch, *lhs_free)``
   dims flattened (``R``), ``N`` columns, contraction ``K``, operands read in place. So the
   transposes and slices around a product (attention heads, weight gradients ``x.T @ dy``) cost
   nothing, and a batched product is one call parallel over the batch;
2. without epilogue, the kernel is that call on the thread pool (native/gemm.cpp splits it into
   tiles; small products run on the calling thread);
3. with an epilogue (rendered by codegen from the group's sub-Program, restricted to a block
   of rows through ``RowBlock``): a product of up to ``BLOCKED_BYTES`` (env
   ``STARLING_GEMM_BLOCKED_BYTES``, default 4 MiB: it stays in this machine's L2 / L3) is
   computed on the pool into a thread-local scratch buffer (or straight into ``d`` when ``d`` is
   also needed outside), then the epilogue runs over it (on the pool too when its work is
   large). A larger product is split into blocks of rows run on the pool: each block's product
   is computed on its thread, then the block's epilogue while it is in cache, so the raw product
   never goes to memory unless it is itself an output.

Blocks: at most ``BLOCK_BYTES`` of the product each (env ``STARLING_GEMM_BLOCK_BYTES``,
default 1 MiB, this machine's L2), about 2 per pool thread (a helper that starts late finds them
taken, one the OS deschedules holds back one block), but ``MIN_ROWS`` rows at least: every
block's GEMM streams all of B, so thin blocks are bound by that traffic. Measured (one thread,
CPU time) on the MLP's 128 x 784 @ 784 x 512 with bias + ReLU: 16-row blocks 1.32 ms (78
GFLOPS), 64-row blocks 1.40 ms, the whole product then the epilogue 1.10 ms: below a few MiB,
fusing per block saves less than the lost reuse of B costs. An epilogue that reduces
over the rows (bias gradients: column sums) needs the whole product: then the product is one
call (parallel inside) into the scratch, and the epilogue one kernel (parallel on its own).

Products of other dtypes, symbolic shapes, empty products and layouts that do not fold into one
descriptor are not fused: they run through ``dot_general``'s implementation (which itself uses
the native GEMM when it can). ``STARLING_CPP_EPILOGUE=0`` turns the pass off.
"""
from __future__ import annotations

import logging
import math
import os

import numpy as np

from ....arrays.ops import dot_layout
from ...runtime import threads as _threads
from . import codegen as CG
from . import formulas as F
from .dims import static_shape

logger = logging.getLogger("starling.lowering")

BLOCKED_BYTES = int(os.environ.get("STARLING_GEMM_BLOCKED_BYTES", 4 << 20))
BLOCK_BYTES = int(os.environ.get("STARLING_GEMM_BLOCK_BYTES", 1 << 20))
PARALLEL_WORK = 1 << 21          # multiply-adds: below, one block (the GEMM decides its threads)
MIN_ROWS = 64                    # rows per block at least: each pass over B serves that many
_GEMM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def enabled() -> bool:
    """True unless ``STARLING_CPP_EPILOGUE`` is "0", "false", "False" or empty (read on every
    call, so tests can switch the epilogue-fusion pass off)."""
    return os.environ.get("STARLING_CPP_EPILOGUE", "1") not in ("0", "false", "False", "")


# ---- the product's layout ------------------------------------------------------------------------

class GemmPlan:
    """A ``dot_general`` as one native GEMM: ``desc`` (native/gemm.h), the element offsets of
    the operands in their buffers, ``R`` rows of ``N`` columns, contraction ``K``; ``nl`` leading
    output dims form the rows."""

    def __init__(self, dt, desc, offsets, R, N, K, nl, out_shape):
        self.dt, self.desc, self.offsets = dt, desc, offsets
        self.R, self.N, self.K, self.nl, self.out_shape = R, N, K, nl, out_shape


def plan(program) -> GemmPlan:
    """The GEMM of a ``fused_matmul`` sub-Program; raises NotFusible when it is not one native
    GEMM call on the buffers' own memory (other dtypes, symbolic or empty sizes, views or
    layouts that do not fold into strides)."""
    from ...fused_matmul import operand_views, split
    dot = split(program)[0]
    la, ra = dot.invars[0].aval, dot.invars[1].aval
    out = dot.outvars[0].aval
    dt = np.dtype(out.dtype)
    if dt not in _GEMM_DTYPES or np.dtype(la.dtype) != dt or np.dtype(ra.dtype) != dt:
        raise CG.NotFusible(f"product of {la.dtype} and {ra.dtype} -> {dt} is not a native GEMM")
    bases = program.invars[:2]
    if not all(static_shape(v.aval.shape) for v in (*bases, *dot.invars, *dot.outvars)):
        raise CG.NotFusible("symbolic product shape")
    accs = []
    for base, chain in zip(bases, operand_views(program)):
        shape = tuple(int(d) for d in base.aval.shape)
        acc = CG.Access(0, dt, shape, CG.c_strides(shape))
        for e in chain:
            acc = CG.apply_view(acc, e)
        accs.append(acc)
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    desc = dot_layout.gemm_desc(accs[0].shape, [int(s) for s in accs[0].strides],
                                accs[1].shape, [int(s) for s in accs[1].strides],
                                ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))))
    if desc is None:
        raise CG.NotFusible("operand layout does not fold into one strided GEMM")
    out_shape = tuple(int(d) for d in out.shape)
    nr = len(ra.shape) - len(rc) - len(rb)
    nl = len(out_shape) - nr
    R, N = math.prod(out_shape[:nl]), math.prod(out_shape[nl:])
    K = math.prod(int(la.shape[i]) for i in lc)
    if R == 0 or N == 0 or K == 0:
        raise CG.NotFusible("empty product")
    return GemmPlan(dt, desc, (int(accs[0].offset), int(accs[1].offset)), R, N, K, nl,
                    out_shape)


# ---- the epilogue over a block of rows (hook of codegen._emit) -------------------------------

class RowBlock:
    """Renders an epilogue over ``rows`` rows starting at the runtime row ``st_r0``.

    codegen calls ``restrict(loop, red_axes, accs)`` before merging dims: it checks that
    the loop is the product's shape and that the product (buffer ``dot_buf``) is read
    elementwise, then (when ``blocked``) replaces the leading ``nl`` row dims by one dim of
    ``rows`` and records each access's row stride; ``offset(acc)`` is the pointer offset for
    row ``st_r0`` (none for buffers in ``local``: the scratch block holds only the block).
    """

    param = ", int64_t st_r0"

    def __init__(self, out_shape, nl, rows, dot_buf, local, blocked):
        self.out_shape, self.nl, self.rows = tuple(out_shape), nl, rows
        self.dot_buf, self.local, self.blocked = dot_buf, set(local), blocked
        # A block runs inside a pool chunk already: its epilogue stays on that thread.
        self.parallel = not blocked
        self.strides = {}

    def restrict(self, loop, red_axes, accs):
        loop = tuple(loop)
        if loop != self.out_shape:
            raise CG.NotFusible(f"epilogue loop {loop} is not the product's shape "
                                f"{self.out_shape}")
        want = list(CG.broadcast_strides(CG.Access(0, np.float32, loop, CG.c_strides(loop)),
                                         loop))
        for a in accs:
            if a.buf == self.dot_buf and (a.shape != loop or a.offset or a.complex_base
                                          or list(a.loop_strides) != want):
                raise CG.NotFusible("the product is read through a view")
        if not self.blocked:
            return loop, red_axes
        nl = self.nl
        if set(red_axes) & set(range(nl)):
            raise CG.NotFusible("reduction over the rows of a blocked product")
        rows = [d for d in range(nl) if loop[d] != 1]
        for a in accs:
            s = list(a.loop_strides)
            for d0, d1 in zip(rows, rows[1:]):
                if s[d0] != s[d1] * loop[d1]:
                    raise CG.NotFusible("an epilogue operand is not evenly strided over rows")
            rs = s[rows[-1]] if rows else 0
            self.strides[id(a)] = 0 if a.buf in self.local else rs
            a.loop_strides = [rs] + s[nl:]
        return (self.rows,) + loop[nl:], {r - nl + 1 for r in red_axes}

    def offset(self, acc) -> str:
        s = self.strides.get(id(acc), 0)
        return f" + st_r0 * {s}" if s else ""


# ---- rendering -----------------------------------------------------------------------------------

def block_rows(p: GemmPlan, reduces_rows: bool) -> int:
    """Rows per epilogue block of plan ``p`` (``p.R``: one block). Blocks hold at most
    BLOCK_BYTES of the product and number about 2 per pool thread when the product is worth
    threads, but have at least MIN_ROWS rows (each block's GEMM streams all of B: fewer rows
    would make it bound by the memory traffic of B); a multiple of 8 rows (whole micro-tiles)."""
    if reduces_rows or p.R * p.N * p.K < PARALLEL_WORK or \
            p.R * p.N * p.dt.itemsize <= BLOCKED_BYTES:
        return p.R
    fit = BLOCK_BYTES // (p.N * p.dt.itemsize)
    want = -(-p.R // (2 * _threads.pool_size()))
    mb = max(MIN_ROWS, min(fit, want))
    if mb >= 8:
        mb = -(-mb // 8) * 8
    return min(mb, p.R)


def _reduces_rows(epi, nl):
    from ...passes.fusion import REDUCE_PRIMITIVES
    return any(e.primitive.name in REDUCE_PRIMITIVES
               and any(a < nl for a in e.params["axes"]) for e in epi.eqns)


def _desc(p):
    return f"  static const int64_t st_desc[] = {{{', '.join(str(int(x)) for x in p.desc)}}};"


def render(program, fname) -> CG.Kernel:
    """The C++ of a ``fused_matmul`` sub-Program as function ``fname``; raises NotFusible."""
    from ...fused_matmul import split
    dot, epi, emit = split(program)
    if epi.constvars:
        raise CG.NotFusible("epilogue with constants")
    p = plan(program)
    t = F.ctype(p.dt)
    oa, ob = p.offsets
    head = [f'extern "C" void {fname}(void* const* st_args) {{',
            f"  const {t}* st_a = (const {t}*)st_args[0]{f' + {oa}' if oa else ''};",
            f"  const {t}* st_b = (const {t}*)st_args[1]{f' + {ob}' if ob else ''};",
            _desc(p)]
    in_dtypes = [np.dtype(v.aval.dtype) for v in program.invars]
    out_avals = list(program.out_avals)
    work = 2 * p.R * p.N * p.K
    if not epi.eqns and emit and not epi.outvars:
        lines = head + [f"  {t}* st_d = ({t}*)st_args[2];",
                        f"  st_gemm(st_desc, st_a, st_b, st_d, {p.N}, 0, {p.R}, 1);", "}"]
        return CG.Kernel(fname, "\n".join(lines), in_dtypes, out_avals, work, True)
    mb = block_rows(p, _reduces_rows(epi, p.nl))
    blocked = mb < p.R
    local = () if emit else (0,)
    tail = p.R % mb
    parts = []
    for tag, rows in (("full", mb), ("tail", tail)):
        if rows:
            rb = RowBlock(p.out_shape, p.nl, rows, 0, local, blocked)
            k = CG.render_kernel(epi, f"{fname}_{tag}", row_block=rb)
            parts.append(k.source)
            work += k.work
    nin_e, nout_e = len(epi.invars), len(epi.outvars)
    nin = 2 + nin_e - 1                      # a, b, epilogue inputs but the product
    block_bytes = mb * p.N * p.dt.itemsize
    lines = list(head)
    if emit:
        lines.append(f"  {t}* st_d = ({t}*)st_args[{nin}];")
    args = [f"st_args[{i + 1}]" for i in range(1, nin_e)] + \
        [f"st_args[{nin + int(emit) + j}]" for j in range(nout_e)]
    if not blocked:
        if not emit:
            lines.append(f"  {t}* st_d = ({t}*)st_scratch(0, {block_bytes});")
        lines += [f"  st_gemm(st_desc, st_a, st_b, st_d, {p.N}, 0, {p.R}, 1);",
                  f"  void* st_e[{nin_e + nout_e}] = {{{', '.join(['st_d'] + args)}}};",
                  f"  {fname}_full(st_e, 0);", "}"]
    else:
        nblocks = -(-p.R // mb)
        c = f"st_d + st_r0 * {p.N}" if emit else f"({t}*)st_scratch(0, {block_bytes})"
        call = f"{fname}_full(st_e, st_r0);" if not tail else \
            f"if (st_rows == {mb}) {fname}_full(st_e, st_r0); else {fname}_tail(st_e, st_r0);"
        lines += [f"  st_par({nblocks}, 1, [&](int64_t st_lo, int64_t st_hi) {{",
                  "    for (int64_t st_blk = st_lo; st_blk < st_hi; ++st_blk) {",
                  f"      const int64_t st_r0 = st_blk * {mb};",
                  f"      const int64_t st_rows = {p.R} - st_r0 < {mb} ? {p.R} - st_r0 : {mb};",
                  f"      {t}* st_c = {c};",
                  "      st_gemm(st_desc, st_a, st_b, st_c, "
                  f"{p.N}, st_r0, st_r0 + st_rows, 0);",
                  f"      void* st_e[{nin_e + nout_e}] = "
                  f"{{{', '.join([('st_d' if emit else 'st_c')] + args)}}};",
                  f"      {call}", "    }", "  });", "}"]
    source = "\n\n".join(parts + ["\n".join(lines)])
    return CG.Kernel(fname, source, in_dtypes, out_avals, work, True)


def render_any(sub, fname) -> CG.Kernel:
    """The kernel of a ``fused_kernel`` or ``fused_matmul`` sub-Program (the cpp backend fuses
    no dot_general into a group, so a sub-Program holding one is a fused_matmul's)."""
    if any(e.primitive.name == "dot_general" for e in sub.eqns):
        return render(sub, fname)
    return CG.render_kernel(sub, fname)


def validator(policy):
    """The epilogue pass's check for the cpp backend: renders a ``fused_matmul`` sub-Program
    and keeps the kernel in ``policy.rendered`` (None: the pass is off)."""
    if not enabled():
        return None

    def validate(program):
        try:
            kernel = render(program, "__ST_KERNEL__")
        except CG.NotFusible as e:
            logger.debug("starling.lowering: matmul not fused: %s", e)
            return False
        policy.rendered[id(program)] = (program, kernel)
        return True
    return validate
