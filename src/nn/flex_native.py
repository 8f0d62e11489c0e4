"""The native flex-attention forward: a C++ kernel generated per (dtype, score_mod), compiled
with the cpp backend's toolchain and disk cache (src/lowering/cache.py), and the
``flex_attention`` primitive whose implementation it is.

This is the one file of ``starling.nn`` below the public API: like ``starling.linalg``'s native
kernels it declares a primitive (impl = the kernel, abstract eval; JVP and batch rules = those
of the composition in flex_compose.py, so every transformation sees the same function).

Kernel (one work item per (batch, head, query block), spread over Starling's thread pool; rows
reduced in a fixed order, no atomics, so results do not depend on the thread count):

1. for each listed key / value block (partial ones, then full ones): the ``Q_BLOCK x KV_BLOCK``
   scores from the native GEMM (native/gemm.h), times ``scale``, through ``score_mod``,
   masked by the stored partial-block mask and by ``KV_LEN``;
2. online softmax (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018):
   running row maximum ``m`` and sum ``l``; the accumulator is rescaled by ``exp(m_old - m)``
   and receives ``P V`` (GEMM), as FlashAttention (Dao et al., NeurIPS 2022);
3. ``out = acc / l``, ``lse = m + log(l)``; rows with nothing visible: 0, ``-inf``.

``score_mod`` is traced on scalars (``starling.make_ir``); a trace of elementwise primitives
with scalar constants is rendered with each primitive's C++ scalar formula
(src/lowering/backends/cpp/formulas.py) into ``st_flex_score``. Other score_mods (capturing
arrays, reductions, ...) make ``kernel_for`` say why, and flex_attention uses the composition.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib

import numpy as np

from .. import jvp as jvp_transform
from .. import make_ir, vmap
from .. import numpy as snp
from ..core.ad_util import Zero
from ..core.avals import ShapedArray
from ..core.ir import Literal
from ..core.primitive import Primitive
from .flex_compose import attend

__all__ = ["flex_attention_p", "kernel_for"]

_SOURCE = r"""
typedef %(T)s T;

static inline T st_flex_score(T s, int32_t b, int32_t h, int32_t q_idx, int32_t kv_idx) {
%(body)s
}

// ptrs: q, k, v, num, idx, fnum, fidx, pm, out, lse, mx (C-contiguous; layouts in flex_compose)
// sz: B, Hq, L, E, Bk, Hk, S, Ev, Bm, Hm, P, F, QB, KB
extern "C" void st_flex_fwd(void* const* ptrs, const int64_t* sz, double scale_d) {
  const T* q = (const T*)ptrs[0];
  const T* k = (const T*)ptrs[1];
  const T* v = (const T*)ptrs[2];
  const int32_t* num = (const int32_t*)ptrs[3];
  const int32_t* idx = (const int32_t*)ptrs[4];
  const int32_t* fnum = (const int32_t*)ptrs[5];
  const int32_t* fidx = (const int32_t*)ptrs[6];
  const uint8_t* pm = (const uint8_t*)ptrs[7];
  T* out = (T*)ptrs[8];
  T* lse = (T*)ptrs[9];
  T* mx = (T*)ptrs[10];
  const int64_t B = sz[0], Hq = sz[1], L = sz[2], E = sz[3], Bk = sz[4], Hk = sz[5], S = sz[6],
                Ev = sz[7], Bm = sz[8], Hm = sz[9], P = sz[10], F = sz[11], QB = sz[12],
                KB = sz[13];
  const int64_t nqb = (L + QB - 1) / QB, nkb = (S + KB - 1) / KB, G = Hq / Hk;
  const T scale = (T)scale_d, ninf = -st_inf(T(0));
  // K transposed once per (batch, kv head), (E, S) row-major: the scores' GEMM then packs its
  // key panels from contiguous rows instead of transposing K again for every query block.
  // Without the memory it reads K in place (same results: the products are the same sums).
  T* kt = (T*)malloc(sizeof(T) * (__SIZE_TYPE__)(Bk * Hk * S * E > 0 ? Bk * Hk * S * E : 1));
  if (kt) {
    st_par(Bk * Hk * ((S + 63) / 64), 1, [&](int64_t lo, int64_t hi) {
      for (int64_t w = lo; w < hi; ++w) {
        const int64_t bh = w / ((S + 63) / 64), s0 = (w %% ((S + 63) / 64)) * 64;
        const int64_t s1 = s0 + 64 < S ? s0 + 64 : S;
        const T* src = k + bh * S * E;
        T* dst = kt + bh * E * S;
        for (int64_t e0 = 0; e0 < E; e0 += 16) {
          const int64_t e1 = e0 + 16 < E ? e0 + 16 : E;
          for (int64_t s = s0; s < s1; ++s)
            for (int64_t e = e0; e < e1; ++e) dst[e * S + s] = src[s * E + e];
        }
      }
    });
  }
  st_par(B * Hq * nqb, 1, [&](int64_t lo, int64_t hi) {
    T* st = (T*)st_scratch(0, (int64_t)sizeof(T) * (QB * KB + 2 * QB * Ev + 2 * QB));
    T* pv = st + QB * KB;
    T* acc = pv + QB * Ev;
    T* m = acc + QB * Ev;
    T* l = m + QB;
    for (int64_t w = lo; w < hi; ++w) {
      const int64_t i = w %% nqb, h = (w / nqb) %% Hq, b = w / (nqb * Hq);
      const int64_t q0 = i * QB, rows = QB < L - q0 ? QB : L - q0;
      const int64_t bk = Bk == 1 ? 0 : b, hk = h / G, bm = Bm == 1 ? 0 : b, hm = Hm == 1 ? 0 : h;
      const T* qp = q + ((b * Hq + h) * L + q0) * E;
      const T* kbase = k + (bk * Hk + hk) * S * E;
      const T* vbase = v + (bk * Hk + hk) * S * Ev;
      const int64_t mrow = (bm * Hm + hm) * nqb + i;
      for (int64_t r = 0; r < rows; ++r) { m[r] = ninf; l[r] = 0; }
      for (int64_t j = 0; j < rows * Ev; ++j) acc[j] = 0;
      int64_t np_ = num[mrow], nf = fnum[mrow];
      np_ = np_ < 0 ? 0 : (np_ > P ? P : np_);
      nf = nf < 0 ? 0 : (nf > F ? F : nf);
      for (int64_t t = 0; t < np_ + nf; ++t) {
        const bool partial = t < np_;
        const int64_t kbi = partial ? idx[mrow * P + t] : fidx[mrow * F + (t - np_)];
        if (kbi < 0 || kbi >= nkb) continue;
        const int64_t kv0 = kbi * KB, cols = KB < S - kv0 ? KB : S - kv0;
        const uint8_t* tile = partial ? pm + (mrow * P + t) * QB * KB : 0;
        if (kt) {
          const int64_t d1[8] = {rows, cols, E, E, 1, S, 1, 0};
          st_gemm(d1, qp, kt + (bk * Hk + hk) * E * S + kv0, st, KB, 0, rows, 0);
        } else {
          const int64_t d1[8] = {rows, cols, E, E, 1, 1, E, 0};
          st_gemm(d1, qp, kbase + kv0 * E, st, KB, 0, rows, 0);
        }
        for (int64_t r = 0; r < rows; ++r) {
          T* sr = st + r * KB;
          const int32_t qi = (int32_t)(q0 + r), bb = (int32_t)b, hh = (int32_t)h;
          const int32_t k0 = (int32_t)kv0;
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c)
            sr[c] = st_flex_score(sr[c] * scale, bb, hh, qi, k0 + (int32_t)c);
          if (tile) {
            const uint8_t* tr = tile + r * KB;
#pragma omp simd
            for (int64_t c = 0; c < cols; ++c) sr[c] = tr[c] ? sr[c] : ninf;
          }
          T rmax = ninf;
#pragma omp simd reduction(max : rmax)
          for (int64_t c = 0; c < cols; ++c) rmax = sr[c] > rmax ? sr[c] : rmax;
          const T mnew = rmax > m[r] ? rmax : m[r];
          if (mnew == ninf) {
            for (int64_t c = 0; c < cols; ++c) sr[c] = 0;
            continue;
          }
          const T alpha = st_exp(m[r] - mnew);
          T sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < cols; ++c) {
            const T p = st_exp(sr[c] - mnew);
            sr[c] = p;
            sum += p;
          }
          l[r] = l[r] * alpha + sum;
          m[r] = mnew;
          if (alpha != T(1)) {
            T* ar = acc + r * Ev;
            for (int64_t e = 0; e < Ev; ++e) ar[e] *= alpha;
          }
        }
        const int64_t d2[8] = {rows, Ev, cols, KB, 1, Ev, 1, 0};
        st_gemm(d2, st, vbase + kv0 * Ev, pv, Ev, 0, rows, 0);
        for (int64_t j = 0; j < rows * Ev; ++j) acc[j] += pv[j];
      }
      const int64_t o = (b * Hq + h) * L + q0;
      for (int64_t r = 0; r < rows; ++r) {
        const bool live = l[r] > 0;
        const T inv = live ? T(1) / l[r] : T(0);
        T* orow = out + (o + r) * Ev;
        for (int64_t e = 0; e < Ev; ++e) orow[e] = acc[r * Ev + e] * inv;
        lse[o + r] = live ? m[r] + st_log(l[r]) : ninf;
        mx[o + r] = m[r];
      }
    }
  });
  free(kt);
}
"""


class Kernel:
    """A rendered kernel: hashable by its source (a primitive parameter), loaded on first use."""

    def __init__(self, dtype, body):
        self.dtype = np.dtype(dtype)
        T = "float" if self.dtype == np.float32 else "double"
        self.source = _SOURCE % {"T": T, "body": body}
        self.key = hashlib.sha256(self.source.encode()).hexdigest()[:12]

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, Kernel) and other.source == self.source

    def __repr__(self):
        return f"flex_kernel<{self.dtype.name}:{self.key}>"

    def __call__(self, arrays, sizes, scale):
        fn = _load(self.source)
        ptrs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        sz = np.asarray(sizes, dtype=np.int64)
        fn(ptrs, sz.ctypes.data, float(scale))


@functools.lru_cache(maxsize=None)
def _load(source):
    from ..lowering import cache
    from ..lowering.backends.cpp import formulas as F
    from ..lowering.runtime import native as runtime
    full = F.prelude() + "\nST_INLINE float st_log(float a) { return logf(a); }\n" \
        "ST_INLINE double st_log(double a) { return log(a); }\n" + source
    libs = (f"-l:{F.mvec_soname()}", "-lm") if F.mvec_functions() else ("-lm",)
    lib, _ = cache.load(full, compiler=cache.find_compiler(), libs=libs,
                        symbols=("st_flex_fwd",))
    runtime.init_library(lib)
    fn = lib.st_flex_fwd
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]
    return fn


# ---- rendering score_mod -------------------------------------------------------------------

_ALIASES = ("broadcast_in_dim", "reshape", "squeeze", "expand_dims")


def _render_body(score_mod, dtype):
    """C++ statements computing ``score_mod`` on scalars, or raise ValueError saying why not."""
    from ..lowering.backends.cpp import formulas as F
    if score_mod is None:
        return "  return s;"
    z, i = np.zeros((), dtype), np.zeros((), np.int32)
    try:
        prog = make_ir(lambda s, b, h, qi, ki: snp.asarray(score_mod(s, b, h, qi, ki)))(
            z, i, i, i, i)
    except Exception as e:  # noqa: BLE001  (any failure to trace: the composition runs)
        raise ValueError(f"score_mod could not be traced on scalars ({e})") from None
    names = {}
    for var, arg in zip(prog.invars, ("s", "b", "h", "q_idx", "kv_idx")):
        names[var] = arg
    lines = []
    for var, val in zip(prog.constvars, prog.consts):
        if var.aval.shape != () or not isinstance(val, (np.ndarray, np.generic)):
            raise ValueError("score_mod captures an array (not a scalar constant)")
        names[var] = F.literal(np.asarray(val).item(), var.aval.dtype)

    def arg(a):
        if isinstance(a, Literal):
            return F.literal(np.asarray(a.val).item(), a.aval.dtype)
        return names[a]

    for n, eqn in enumerate(prog.eqns):
        out = eqn.outvars[0]
        if len(eqn.outvars) != 1 or out.aval.shape != ():
            raise ValueError(f"score_mod uses {eqn.primitive.name} (not elementwise)")
        if eqn.primitive.name in _ALIASES:
            names[out] = arg(eqn.invars[0])
            continue
        in_dts = [a.aval.dtype for a in eqn.invars]
        expr = None
        if eqn.primitive.scalar_formula is not None:
            expr = F.render(eqn.primitive, [arg(a) for a in eqn.invars], in_dts,
                            out.aval.dtype, eqn.params)
        if expr is None:
            raise ValueError(f"score_mod uses {eqn.primitive.name}, which has no C++ formula "
                             f"for {[str(d) for d in in_dts]}")
        names[out] = f"t{n}"
        lines.append(f"  const {F.ctype(out.aval.dtype)} t{n} = {expr};")
    res = prog.outvars[0]
    lines.append(f"  return (T)({arg(res)});")
    return "\n".join(lines)


_NO_MOD = {}


def kernel_for(dtype, score_mod):
    """``(Kernel, None)`` when the native kernel can run ``score_mod`` for ``dtype``, else
    ``(None, reason)``. ``score_mod`` is traced again on every call (about 1 ms): the scalars
    it captures may have changed; the compiled kernel is cached by its source."""
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        return None, f"dtype {dtype} (the kernel takes float32 / float64)"
    from ..lowering import cache
    if cache.find_compiler() is None:
        return None, "no C++ compiler"
    if score_mod is None and dtype in _NO_MOD:
        return _NO_MOD[dtype]
    try:
        result = Kernel(dtype, _render_body(score_mod, dtype)), None
    except ValueError as e:
        result = None, str(e)
    if score_mod is None:
        _NO_MOD[dtype] = result
    return result


# ---- the primitive -------------------------------------------------------------------------

flex_attention_p = Primitive("flex_attention", multiple_results=True, family="nn")
flex_attention_p.meta["native_impl"] = True


def _abstract(q, k, v, *masks, kernel, scale, score_mod, block, dense):
    B, H, L, _ = q.shape
    return [ShapedArray((B, H, L, v.shape[3]), q.dtype), ShapedArray((B, H, L), q.dtype),
            ShapedArray((B, H, L), q.dtype)]


def _impl(q, k, v, num, idx, fnum, fidx, pm, *, kernel, scale, score_mod, block, dense):
    dt = kernel.dtype
    q, k, v = (np.ascontiguousarray(x, dtype=dt) for x in (q, k, v))
    ints = [np.ascontiguousarray(x, dtype=np.int32) for x in (num, idx, fnum, fidx)]
    pm = np.ascontiguousarray(pm, dtype=np.bool_).view(np.uint8)
    B, H, L, E = q.shape
    Bk, Hk, S, Ev = v.shape
    out = np.empty((B, H, L, Ev), dt)
    lse, mx = np.empty((B, H, L), dt), np.empty((B, H, L), dt)
    if out.size:
        sizes = (B, H, L, E, Bk, Hk, S, Ev, num.shape[0], num.shape[1], idx.shape[-1],
                 fidx.shape[-1], block[0], block[1])
        kernel([q, k, v, *ints, pm, out, lse, mx], sizes, scale)
    return [out, lse, mx]


def _composition(params):
    p = dict(params)
    p.pop("kernel")
    return lambda *a: list(attend(*a, **p))


def _jvp(primals, tangents, **params):
    f = _composition(params)
    floats = list(primals[:3])
    ts = [snp.zeros(p.shape, p.dtype) if type(t) is Zero else t
          for p, t in zip(floats, tangents[:3])]
    return jvp_transform(lambda q, k, v: f(q, k, v, *primals[3:]), floats, ts)


def _batch(args, dims, **params):
    return vmap(_composition(params), in_axes=list(dims))(*args), [0, 0, 0]


flex_attention_p.abstract_eval = _abstract
flex_attention_p.impl = _impl
flex_attention_p.jvp = _jvp
flex_attention_p.batch = _batch
