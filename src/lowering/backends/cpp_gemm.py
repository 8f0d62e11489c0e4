"""Blocked GEMM with a fused epilogue for the cpp backend (renders ``fused_matmul``).

A ``fused_matmul`` (src/lowering/fused_matmul.py) is ``d = dot_general(a, b)`` of shape
``(*m, *n)`` (``M = prod(m)`` rows, ``N = prod(n)`` columns, contraction ``K``) feeding an
elementwise epilogue group. It becomes ONE C++ function that, for each block of ``MB`` rows,

1. calls the optimised BLAS ``gemm`` (``C_block = op(A)[rows] @ op(B)``, row-major, the trans
   flags express ``a.T @ b`` / ``a @ b.T``) into a thread-local scratch block (or straight into
   the output ``d`` when ``d`` is also needed outside the group), and
2. runs the epilogue (rendered by cpp_codegen from the group's sub-Program, restricted to the
   block's rows through ``RowBlock``) on that block while it is still in cache.

So the raw product is never written to memory unless it is itself an output.

Block size: blocks of at most ``BLOCK_BYTES`` of the product (env ``STARLING_GEMM_BLOCK_BYTES``,
default 16 MiB: half this machine's shared L3), balanced (``M`` split into equal blocks). Each
block is one BLAS call, and that is what decides the size, not L2: BLAS packs ``op(B)`` (K x N)
again for every call, which costs about what the epilogue saves by reading its block from cache,
and every call is a fork / join of BLAS's threads. Measured on a 4096x1024x1024 float32
``relu(x @ W + b)``: single-threaded (thread CPU time, best of 15) blocks of 256 KiB / 1 MiB /
4 MiB took 117 / 107 / 99 ms against 98 ms unfused (16 MiB: within noise of unfused); with
two threads on the loaded 2-core machine, 16 blocks took ~1000 ms, 4 blocks ~450 ms, one block
~240 ms like the unfused product (each join waits for a descheduled thread). So on this CPU
a product up to 16 MiB is one block (one BLAS call) and larger ones are split into as few blocks
as fit; the fused kernel saves a dispatch and the intermediate's allocation (one spare scratch
block, at most ``BLOCK_BYTES``, is kept per library between calls) and, for products that stay
in cache (a training batch's layers), the intermediate's round trip through memory. A product
whose rows are so wide that fewer than ``MIN_ROWS`` (128) fit in a block is left unfused. With
one block the epilogue may also reduce over rows (bias gradients: column sums); with several,
only over the column dims (softmax-style rows).

Threading: blocks run in order and BLAS threads each block's product with its own pool. With
one block the epilogue follows cpp_codegen's PARALLEL_WORK rule like any fused kernel (OpenMP
when its work is large). With several blocks it runs on the calling thread: OpenMP regions
between BLAS calls make the two thread pools hand the cores back and forth per block; measured
on 8192x1024x1024 (2-core machine, best of 5, loaded): 4 MiB blocks with serial / OpenMP
epilogues 105-119 / 112-126 ms (relu), 288-327 / 332-341 ms (tanh-gelu) (``PARALLEL_BLOCKS``
switches it). OpenMP over blocks with single-threaded BLAS inside would leave a core idle for
products of one block (the common case) and repacks ``op(B)`` per block on every thread.

BLAS: found at run time, never linked: the CBLAS ``?gemm`` that NumPy itself uses, looked up
through NumPy's extension module handle (dlsym also searches its dependencies, e.g. the
OpenBLAS NumPy wheels bundle as ``scipy_cblas_sgemm64_``, ILP64). The addresses are handed to
each loaded kernel library through ``st_gemm_init`` (so the disk-cached shared object does not
depend on any BLAS path). Without a usable BLAS, or with ``STARLING_CPP_EPILOGUE=0``, the
epilogue pass does not run (logged once) and products stay ``np.matmul`` calls.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import math
import os

import numpy as np

from . import cpp_codegen as CG
from . import cpp_formulas as F

logger = logging.getLogger("starling.lowering")

BLOCK_BYTES = int(os.environ.get("STARLING_GEMM_BLOCK_BYTES", 16 << 20))
MIN_ROWS = 128
PARALLEL_BLOCKS = False      # OpenMP in the epilogues of a product of several blocks
_INT32_MAX = 2**31 - 1
_GEMM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

# (sgemm symbol, dgemm symbol, 64-bit integer arguments)
_CANDIDATES = (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", True),
               ("cblas_sgemm64_", "cblas_dgemm64_", True),
               ("cblas_sgemm", "cblas_dgemm", False))


class Blas:
    """Addresses of a CBLAS ``sgemm`` / ``dgemm`` pair and whether their ints are 64-bit."""

    def __init__(self, sgemm, dgemm, ilp64, symbol):
        self.sgemm, self.dgemm, self.ilp64, self.symbol = sgemm, dgemm, ilp64, symbol


def enabled() -> bool:
    return os.environ.get("STARLING_CPP_EPILOGUE", "1") not in ("0", "false", "False", "")


@functools.lru_cache(maxsize=None)
def blas():
    """The BLAS NumPy uses (a ``Blas``), or None when no CBLAS gemm can be found (logged)."""
    try:
        try:
            from numpy._core import _multiarray_umath as mod
        except ImportError:   # NumPy 1.x
            from numpy.core import _multiarray_umath as mod
        handle = ctypes.CDLL(mod.__file__)
    except (ImportError, OSError, AttributeError) as e:
        logger.info("starling.lowering: no BLAS handle for fused matmul epilogues (%s); "
                    "products run through np.matmul", e)
        return None
    for s_name, d_name, ilp64 in _CANDIDATES:
        try:
            s, d = getattr(handle, s_name), getattr(handle, d_name)
        except AttributeError:
            continue
        return Blas(ctypes.cast(s, ctypes.c_void_p).value, ctypes.cast(d, ctypes.c_void_p).value,
                    ilp64, s_name)
    logger.info("starling.lowering: NumPy's BLAS exports no CBLAS sgemm/dgemm; matmul "
                "epilogues are not fused (products run through np.matmul)")
    return None


# ---- the product's layout ------------------------------------------------------------------------

class GemmPlan:
    """A BLAS-able ``dot_general``: row-major ``C (M x N) = op(A) @ op(B)``."""

    def __init__(self, dt, M, N, K, ta, tb, nl, out_shape):
        self.dt, self.M, self.N, self.K, self.ta, self.tb = dt, M, N, K, ta, tb
        self.nl = nl                   # leading dims of the output that form the rows
        self.out_shape = out_shape
        self.lda = M if ta else K
        self.ldb = K if tb else N


def plan(dot) -> GemmPlan:
    """The GEMM of ``dot`` (a dot_general Equation); raises NotFusible when it is not one BLAS
    call on the operands' own memory (batch dims, interleaved contracting / free dims, other
    dtypes, symbolic or empty sizes)."""
    la, ra = dot.invars[0].aval, dot.invars[1].aval
    out = dot.outvars[0].aval
    dt = np.dtype(out.dtype)
    if dt not in _GEMM_DTYPES or np.dtype(la.dtype) != dt or np.dtype(ra.dtype) != dt:
        raise CG.NotFusible(f"product of {la.dtype} and {ra.dtype} -> {dt} is not a BLAS gemm")
    shapes = (tuple(la.shape), tuple(ra.shape), tuple(out.shape))
    if not all(type(d) is int or isinstance(d, np.integer) for s in shapes for d in s):
        raise CG.NotFusible("symbolic product shape")
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    if lb or rb:
        raise CG.NotFusible("batched product")
    lnd, rnd = len(la.shape), len(ra.shape)
    lf = tuple(i for i in range(lnd) if i not in lc)
    rf = tuple(i for i in range(rnd) if i not in rc)
    every_l, every_r = tuple(range(lnd)), tuple(range(rnd))
    if lf + tuple(lc) == every_l:
        ta = False
    elif tuple(lc) + lf == every_l:
        ta = True
    else:
        raise CG.NotFusible("lhs contracting dims interleave its free dims")
    if tuple(rc) + rf == every_r:
        tb = False
    elif rf + tuple(rc) == every_r:
        tb = True
    else:
        raise CG.NotFusible("rhs contracting dims interleave its free dims")
    M = math.prod(int(la.shape[i]) for i in lf)
    N = math.prod(int(ra.shape[i]) for i in rf)
    K = math.prod(int(la.shape[i]) for i in lc)
    if M == 0 or N == 0 or K == 0:
        raise CG.NotFusible("empty product (left to np.matmul)")
    b = blas()
    if b is not None and not b.ilp64 and max(M, N, K) > _INT32_MAX:
        raise CG.NotFusible("product too large for a 32-bit BLAS")
    return GemmPlan(dt, M, N, K, ta, tb, len(lf), tuple(int(d) for d in out.shape))


# ---- the epilogue over a block of rows (hook of cpp_codegen._emit) -------------------------------

class RowBlock:
    """Renders an epilogue over ``rows`` rows starting at the runtime row ``st_r0``.

    cpp_codegen calls ``restrict(loop, red_axes, accs)`` before merging dims: it checks that
    the loop is the product's shape and that the product (buffer ``dot_buf``) is read
    elementwise, then (when ``blocked``) replaces the leading ``nl`` row dims by one dim of
    ``rows`` and records each access's row stride; ``offset(acc)`` is the pointer offset for
    row ``st_r0`` (none for buffers in ``local``: the scratch block holds only the block).
    """

    param = ", int64_t st_r0"

    def __init__(self, out_shape, nl, rows, dot_buf, local, blocked):
        self.out_shape, self.nl, self.rows = tuple(out_shape), nl, rows
        self.dot_buf, self.local, self.blocked = dot_buf, set(local), blocked
        # May the epilogue use OpenMP (when its work passes PARALLEL_WORK)? Not between the
        # BLAS calls of several blocks (see the module docstring: Threading).
        self.parallel = PARALLEL_BLOCKS or not blocked
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
    """Rows per block for plan ``p`` (blocks of at most ``BLOCK_BYTES``, balanced so the last
    one is not a sliver); raises NotFusible when the epilogue reduces over rows but the product
    needs several blocks, or when fewer than ``MIN_ROWS`` rows fit in a block (BLAS would repack
    ``op(B)`` for every thin block: slower than the unfused product)."""
    fit = BLOCK_BYTES // (p.N * p.dt.itemsize)
    if p.M <= fit:
        return p.M
    if reduces_rows:
        raise CG.NotFusible("the epilogue reduces over the rows of a product larger than one "
                            "block")
    if fit < MIN_ROWS:
        raise CG.NotFusible(f"product rows of {p.N} columns are too wide to block")
    nb = -(-p.M // fit)
    return -(-p.M // nb)


def _reduces_rows(epi, nl):
    from ..passes.fusion import REDUCE_PRIMITIVES
    return any(e.primitive.name in REDUCE_PRIMITIVES
               and any(a < nl for a in e.params["axes"]) for e in epi.eqns)


def render(program, fname) -> CG.Kernel:
    """The C++ of a ``fused_matmul`` sub-Program as function ``fname``; raises NotFusible."""
    from ..fused_matmul import split
    dot, epi, emit = split(program)
    if epi.constvars:
        raise CG.NotFusible("epilogue with constants")
    p = plan(dot)
    mb = block_rows(p, _reduces_rows(epi, p.nl))
    blocked = mb < p.M
    local = () if emit else (0,)
    tail = p.M % mb
    parts = []
    for tag, rows in (("full", mb), ("tail", tail)):
        if rows:
            rb = RowBlock(p.out_shape, p.nl, rows, 0, local, blocked)
            k = CG.render_kernel(epi, f"{fname}_{tag}", row_block=rb)
            parts.append(k.source)
    t = F.ctype(p.dt)
    nin_e, nout_e = len(epi.invars), len(epi.outvars)
    nin = 2 + nin_e - 1                      # a, b, epilogue inputs but the product
    lines = [f'extern "C" void {fname}(void* const* st_args) {{',
             f"  const {t}* st_a = (const {t}*)st_args[0];",
             f"  const {t}* st_b = (const {t}*)st_args[1];"]
    if emit:
        lines.append(f"  {t}* st_d = ({t}*)st_args[{nin}];")
    else:
        lines.append(f"  st_block_t* st_s = st_gemm_take({mb * p.N * p.dt.itemsize}u);")
        lines.append(f"  {t}* st_d = ({t}*)st_s->p;")
    lines.append(f"  void* st_e[{nin_e + nout_e}];")
    lines.append("  st_e[0] = st_d;")
    for i in range(1, nin_e):
        lines.append(f"  st_e[{i}] = st_args[{i + 1}];")
    for j in range(nout_e):
        lines.append(f"  st_e[{nin_e + j}] = st_args[{nin + int(emit) + j}];")
    a_step = 1 if p.ta else p.K
    lines += [f"  for (int64_t r0 = 0; r0 < {p.M}; r0 += {mb}) {{",
              f"    const int64_t rows = {p.M} - r0 < {mb} ? {p.M} - r0 : {mb};",
              f"    {t}* st_c = st_d{' + r0 * ' + str(p.N) if emit else ''};",
              f"    st_gemm({int(p.ta)}, {int(p.tb)}, rows, {p.N}, {p.K}, st_a + r0 * {a_step}, "
              f"{p.lda}, st_b, {p.ldb}, st_c, {p.N});"]
    if tail:
        lines.append(f"    if (rows == {mb}) {fname}_full(st_e, r0); else {fname}_tail(st_e, r0);")
    else:
        lines.append(f"    {fname}_full(st_e, r0);")
    lines.append("  }")
    if not emit:
        lines.append("  st_gemm_give(st_s);")
    lines.append("}")
    source = "\n\n".join(parts + ["\n".join(lines)])
    in_dtypes = [p.dt, p.dt] + [np.dtype(v.aval.dtype) for v in epi.invars[1:]]
    out_avals = list(program.out_avals)
    work = 2 * p.M * p.N * p.K
    return CG.Kernel(fname, source, in_dtypes, out_avals, work, True)


def render_any(sub, fname) -> CG.Kernel:
    """The kernel of a ``fused_kernel`` or ``fused_matmul`` sub-Program (the cpp backend fuses
    no dot_general into a group, so a sub-Program starting with one is a fused_matmul's)."""
    if sub.eqns and sub.eqns[0].primitive.name == "dot_general":
        return render(sub, fname)
    return CG.render_kernel(sub, fname)


def validator(policy):
    """The epilogue pass's check for the cpp backend: renders a ``fused_matmul`` sub-Program
    and keeps the kernel in ``policy.rendered`` (None: fusion off or no BLAS)."""
    if not enabled() or blas() is None:
        return None

    def validate(program):
        try:
            kernel = render(program, "__ST_KERNEL__")
        except CG.NotFusible as e:
            logger.debug("starling.lowering: matmul epilogue not fused: %s", e)
            return False
        policy.rendered[id(program)] = (program, kernel)
        return True
    return validate


# ---- the shared object's GEMM support ----------------------------------------------------------

SUPPORT = r"""
// Blocked GEMM support (src/lowering/backends/cpp_gemm.py): the BLAS gemm addresses are set
// at load time by st_gemm_init (never linked); without them a plain loop computes the product.
extern "C" {
void* malloc(__SIZE_TYPE__) noexcept;
int posix_memalign(void**, __SIZE_TYPE__, __SIZE_TYPE__) noexcept;
void free(void*) noexcept;
void abort(void) noexcept;
long write(int, const void*, __SIZE_TYPE__);
}
typedef void (*st_sgemm64_t)(int, int, int, int64_t, int64_t, int64_t, float, const float*,
                             int64_t, const float*, int64_t, float, float*, int64_t);
typedef void (*st_dgemm64_t)(int, int, int, int64_t, int64_t, int64_t, double, const double*,
                             int64_t, const double*, int64_t, double, double*, int64_t);
typedef void (*st_sgemm32_t)(int, int, int, int, int, int, float, const float*, int,
                             const float*, int, float, float*, int);
typedef void (*st_dgemm32_t)(int, int, int, int, int, int, double, const double*, int,
                             const double*, int, double, double*, int);
static void* st_blas_s = 0;
static void* st_blas_d = 0;
static int st_blas_ilp64 = 1;

extern "C" void st_gemm_init(void* s, void* d, int ilp64) {
  st_blas_s = s;
  st_blas_d = d;
  st_blas_ilp64 = ilp64;
}

#define ST_NOINLINE __attribute__((noinline))

// The fallback is never hot: compiled at -O1 (the -O3 vectorised variants of these loops cost
// a quarter second of compile time per shared object).
template <class T>
__attribute__((noinline, optimize("O1"))) static void st_gemm_loops(
    bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
    int64_t ldb, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = 0;
    for (int64_t p = 0; p < k; ++p) {
      const T x = ta ? a[p * lda + i] : a[i * lda + p];
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] += x * (tb ? b[j * ldb + p] : b[p * ldb + j]);
    }
  }
}

// Out of line: called once per block, and inlining it into every driver slows the compiler.
ST_NOINLINE static void st_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                const float* a, int64_t lda, const float* b, int64_t ldb,
                                float* c, int64_t ldc) {
  const int A = ta ? 112 : 111, B = tb ? 112 : 111;   // CblasTrans / CblasNoTrans
  if (!st_blas_s) st_gemm_loops(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
  else if (st_blas_ilp64) ((st_sgemm64_t)st_blas_s)(101, A, B, m, n, k, 1.0f, a, lda, b, ldb,
                                                     0.0f, c, ldc);
  else ((st_sgemm32_t)st_blas_s)(101, A, B, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b,
                                 (int)ldb, 0.0f, c, (int)ldc);
}

ST_NOINLINE static void st_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                const double* a, int64_t lda, const double* b, int64_t ldb,
                                double* c, int64_t ldc) {
  const int A = ta ? 112 : 111, B = tb ? 112 : 111;
  if (!st_blas_d) st_gemm_loops(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
  else if (st_blas_ilp64) ((st_dgemm64_t)st_blas_d)(101, A, B, m, n, k, 1.0, a, lda, b, ldb,
                                                     0.0, c, ldc);
  else ((st_dgemm32_t)st_blas_d)(101, A, B, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b,
                                 (int)ldb, 0.0, c, (int)ldc);
}

// The scratch block: one spare kept per library between calls (a fresh multi-megabyte block
// per call costs page faults), taken and given back atomically: kernels run concurrently when
// the launcher drops the GIL, and a thread that finds no spare allocates its own.
struct st_block_t { void* p; __SIZE_TYPE__ cap; };
static st_block_t* st_spare = 0;

ST_NOINLINE static st_block_t* st_gemm_take(__SIZE_TYPE__ bytes) {
  st_block_t* b = __atomic_exchange_n(&st_spare, (st_block_t*)0, __ATOMIC_ACQ_REL);
  if (b && b->cap >= bytes) return b;
  if (b) { free(b->p); free(b); }
  // cache-line aligned, like NumPy's buffers (malloc gives 16 bytes)
  b = (st_block_t*)malloc(sizeof(st_block_t));
  if (b && posix_memalign(&b->p, 64, bytes) != 0) { free(b); b = 0; }
  if (!b) {
    static const char msg[] = "starling: out of memory for a GEMM scratch block\n";
    write(2, msg, sizeof(msg) - 1);
    abort();
  }
  b->cap = bytes;
  return b;
}

ST_NOINLINE static void st_gemm_give(st_block_t* b) {
  st_block_t* old = __atomic_exchange_n(&st_spare, b, __ATOMIC_ACQ_REL);
  if (old) { free(old->p); free(old); }
}
"""


def support(sources) -> str:
    """The GEMM support code when any of ``sources`` (kernel sources) calls it, else ""."""
    return SUPPORT if any("st_gemm(" in s for s in sources) else ""


def init_library(lib):
    """Hands the BLAS addresses to a loaded kernel library that has GEMM kernels."""
    try:
        init = lib.st_gemm_init
    except AttributeError:
        return
    b = blas()
    init.restype = None
    init.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    if b is None:
        init(None, None, 1)
    else:
        init(b.sgemm, b.dgemm, int(b.ilp64))
