"""The native runtime that generated kernel libraries call: Starling's thread pool and GEMM.

Both live once in ``starling._native`` (native/pool.cpp, native/gemm.cpp). A kernel library
never links them: ``PRELUDE`` declares function pointers that ``init_library(lib)`` fills with
the extension's entry points right after the library is loaded, so the shared objects cached on
disk do not depend on where Starling is installed.

C++ helpers the prelude gives generated code:

* ``st_par(n, grain, f)``: runs ``f(lo, hi)`` over the chunks ``[c * grain, (c + 1) * grain)``
  of ``[0, n)`` on the pool (native/pool.h); chunk boundaries do not depend on the number of
  threads, so per-chunk partial reductions combined in order give the same bits on any machine.
  Before ``init_library`` (or without the pool) the chunks run in order on the calling thread.
* ``st_gemm(desc, a, b, c, ldc, r0, r1, parallel)``: rows ``[r0, r1)`` of the strided batched
  product described by ``desc`` (native/gemm.h), float or double.
* ``st_scratch(slot, bytes)``: a per-thread buffer kept between calls (slot 0 is the kernels';
  the GEMM uses slots 1 and 2; slot 3 holds the partials of split column reductions).

A library whose runtime was never set still runs correctly: serially, its products through
plain loops (``st_gemm_loops``).
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from ... import _native

PRELUDE = r"""
// Starling's native runtime (src/lowering/runtime/native.py): the thread pool and the GEMM of
// starling._native, reached through pointers set by st_runtime_init when the library is loaded.
extern "C" {
void* malloc(__SIZE_TYPE__) noexcept;
void free(void*) noexcept;
void abort(void) noexcept;
}
typedef void (*st_range_fn)(void*, int64_t, int64_t);
typedef void (*st_pool_for_t)(int64_t, int64_t, st_range_fn, void*);
typedef void* (*st_scratch_t)(int, int64_t);
typedef void (*st_sgemm_t)(const int64_t*, const float*, const float*, float*, int64_t, int64_t,
                           int64_t, int);
typedef void (*st_dgemm_t)(const int64_t*, const double*, const double*, double*, int64_t,
                           int64_t, int64_t, int);
static st_pool_for_t st_rt_pool_for = 0;
static st_scratch_t st_rt_scratch = 0;
static st_sgemm_t st_rt_sgemm = 0;
static st_dgemm_t st_rt_dgemm = 0;

extern "C" void st_runtime_init(void* pool_for, void* scratch, void* sgemm, void* dgemm) {
  st_rt_pool_for = (st_pool_for_t)pool_for;
  st_rt_scratch = (st_scratch_t)scratch;
  st_rt_sgemm = (st_sgemm_t)sgemm;
  st_rt_dgemm = (st_dgemm_t)dgemm;
}

template <class F>
static void st_range_tramp(void* c, int64_t lo, int64_t hi) { (*(const F*)c)(lo, hi); }

template <class F>
static inline void st_par(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n > grain && st_rt_pool_for) {
    st_rt_pool_for(n, grain, &st_range_tramp<F>, (void*)&f);
    return;
  }
  for (int64_t lo = 0; lo < n; lo += grain) f(lo, lo + grain < n ? lo + grain : n);
}

// Plain loops over the descriptor, for a library whose runtime was never set (never hot:
// compiled at -O1, only in libraries that hold products).
template <class T>
__attribute__((noinline, optimize("O1"))) static void st_gemm_loops(
    const int64_t* d, const T* a, const T* b, T* c, int64_t ldc, int64_t r0, int64_t r1) {
  const int64_t M = d[0], N = d[1], K = d[2], nloop = d[7];
  for (int64_t r = r0; r < r1; ++r) {
    int64_t q = r / M, oa = (r % M) * d[3], ob = 0;
    for (int64_t l = nloop - 1; l >= 0; --l) {
      const int64_t x = q % d[8 + 3 * l];
      q /= d[8 + 3 * l];
      oa += x * d[9 + 3 * l];
      ob += x * d[10 + 3 * l];
    }
    for (int64_t j = 0; j < N; ++j) {
      T acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += a[oa + k * d[4]] * b[ob + k * d[5] + j * d[6]];
      c[(r - r0) * ldc + j] = acc;
    }
  }
}

static inline void* st_scratch(int slot, int64_t bytes) {
  if (st_rt_scratch) return st_rt_scratch(slot, bytes);
  static __thread void* buf[4];   // no runtime: a per-thread buffer of our own (never freed)
  static __thread int64_t cap[4];
  if (cap[slot] < bytes) {
    free(buf[slot]);
    buf[slot] = malloc(bytes > 64 ? bytes : 64);
    cap[slot] = buf[slot] ? bytes : 0;
    if (!buf[slot]) abort();
  }
  return buf[slot];
}

static inline void st_gemm(const int64_t* d, const float* a, const float* b, float* c,
                           int64_t ldc, int64_t r0, int64_t r1, int parallel) {
  if (st_rt_sgemm) st_rt_sgemm(d, a, b, c, ldc, r0, r1, parallel);
  else st_gemm_loops(d, a, b, c, ldc, r0, r1);
}

static inline void st_gemm(const int64_t* d, const double* a, const double* b, double* c,
                           int64_t ldc, int64_t r0, int64_t r1, int parallel) {
  if (st_rt_dgemm) st_rt_dgemm(d, a, b, c, ldc, r0, r1, parallel);
  else st_gemm_loops(d, a, b, c, ldc, r0, r1);
}
"""


@functools.lru_cache(maxsize=None)
def _symbols():
    return _native.runtime_symbols()


def init_library(lib) -> None:
    """Hands the runtime's entry points to a loaded kernel library (``ctypes.CDLL``)."""
    try:
        init = lib.st_runtime_init
    except AttributeError:
        return
    s = _symbols()
    init.restype = None
    init.argtypes = [ctypes.c_void_p] * 4
    init(s["st_parallel_for"], s["st_scratch"], s["st_sgemm"], s["st_dgemm"])


def empty(shape, dtype, offset=0) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` / ``dtype``: ``starling._native.empty``,
    whose blocks of 1 MiB and more are recycled (native/buffers.h), so a result allocated anew
    on every call of a loop reuses warm pages (``np.empty`` maps such blocks afresh and faults
    them in page by page). Object dtypes come from ``np.empty``.

    Args:
        offset: bytes (a multiple of 64, at most 1 MiB) between the start of a recycled block
            and the array's data (the pool's blocks of 4 MiB and more start on a 2 MiB
            boundary); ignored below 1 MiB.
    Raises:
        ValueError: a negative dimension or a bad ``offset``.
    """
    dt = np.dtype(dtype)
    if dt.hasobject:
        return np.empty(shape, dt)
    return _native.empty(shape, dt, offset)
