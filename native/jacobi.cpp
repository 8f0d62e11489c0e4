// Batched Jacobi eigh / SVD: kernels per instruction set and the parallel driver (see jacobi.h).
#include "jacobi.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "gemm.h"
#include "pool.h"

// Products contract to FMAs. (sqrt over the lanes vectorises only without errno: setup.py
// passes -fno-math-errno, as this pragma's no-math-errno does not reach template instances.)
#pragma GCC optimize("fp-contract=fast")
// 64-byte vector values pass between inline functions only: no ABI is crossed.
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__) && defined(__GNUC__)
#define ST_JAC_X86 1

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")
#define ST_JAC_NS jacobi_avx512
#include "jacobi_kernels.inc"
#undef ST_JAC_NS
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define ST_JAC_NS jacobi_avx2
#include "jacobi_kernels.inc"
#undef ST_JAC_NS
#pragma GCC pop_options
#endif

#define ST_JAC_NS jacobi_base
#include "jacobi_kernels.inc"
#undef ST_JAC_NS

namespace starling {
namespace jacobi {
namespace {

using EighFn = void (*)(const EighJob&, int64_t, int64_t);
using SvdFn = void (*)(const SvdJob&, int64_t, int64_t);

void note_sweeps(std::atomic<int>* most, int sweeps) {
  int cur = most->load(std::memory_order_relaxed);
  while (sweeps > cur && !most->compare_exchange_weak(cur, sweeps)) {
  }
}

// Chunks [c0, c1) of one job on the calling thread, in its own scratch (slot 3: the GEMM and
// generated kernels use 0-2).
#define ST_JAC_RANGES(NS)                                                                      \
  template <class R, bool C>                                                                   \
  void eigh_range_##NS(const EighJob& job, int64_t c0, int64_t c1) {                           \
    R* buf = static_cast<R*>(pool::scratch(3, NS::eigh_scratch<R, C>(job.n) * sizeof(R)));     \
    int most = 0;                                                                              \
    for (int64_t c = c0; c < c1; ++c) {                                                        \
      most = std::max(most, NS::eigh_chunk<R, C>(job, c * NS::kL<R>, buf));                    \
    }                                                                                          \
    note_sweeps(job.sweeps, most);                                                             \
  }                                                                                            \
  template <class R, bool C>                                                                   \
  void svd_range_##NS(const SvdJob& job, int64_t c0, int64_t c1) {                             \
    using E = NS::Elem<R, C>;                                                                  \
    R* buf = static_cast<R*>(pool::scratch(3, NS::svd_scratch<R, C>(job.m, job.n) * sizeof(R))); \
    const int M = std::max(job.m, job.n);                                                      \
    std::vector<R> res(M);                                                                     \
    std::vector<E> tmp(M);                                                                     \
    int most = 0;                                                                              \
    for (int64_t c = c0; c < c1; ++c) {                                                        \
      most = std::max(most, NS::svd_chunk<R, C>(job, c * NS::kL<R>, buf, res.data(),           \
                                                tmp.data()));                                  \
    }                                                                                          \
    note_sweeps(job.sweeps, most);                                                             \
  }

#ifdef ST_JAC_X86
ST_JAC_RANGES(jacobi_avx512)
ST_JAC_RANGES(jacobi_avx2)
#endif
ST_JAC_RANGES(jacobi_base)

struct Kernels {
  EighFn eigh[4];
  SvdFn svd[4];
};

#define ST_JAC_TABLE(NS)                                                                       \
  Kernels {                                                                                    \
    {eigh_range_##NS<float, false>, eigh_range_##NS<double, false>,                            \
     eigh_range_##NS<float, true>, eigh_range_##NS<double, true>},                             \
    {svd_range_##NS<float, false>, svd_range_##NS<double, false>, svd_range_##NS<float, true>, \
     svd_range_##NS<double, true>},                                                            \
  }

const Kernels& kernels() {
  static const Kernels k = [] {
#ifdef ST_JAC_X86
    const std::string name = gemm::isa();
    if (name == "avx512") return ST_JAC_TABLE(jacobi_avx512);
    if (name == "avx2") return ST_JAC_TABLE(jacobi_avx2);
#endif
    return ST_JAC_TABLE(jacobi_base);
  }();
  return k;
}

// Chunks per task: about 2^20 multiply-adds of sweeps each, so small matrices are not handed
// out one chunk at a time.
int64_t grain(int64_t work_per_chunk) {
  return std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(1, work_per_chunk));
}

}  // namespace

int lanes(Dtype dtype) {
  return kLaneBytes / ((dtype == kF32 || dtype == kC64) ? 4 : 8);
}

const char* isa() {
#ifdef ST_JAC_X86
  return gemm::isa();
#else
  return "generic";
#endif
}

int eigh(Dtype dtype, EighJob job) {
  std::atomic<int> sweeps{0};
  job.sweeps = &sweeps;
  if (job.batch <= 0 || job.n <= 0) return 0;
  const int L = lanes(dtype);
  const int64_t chunks = (job.batch + L - 1) / L, n = job.n;
  const EighFn fn = kernels().eigh[dtype];
  pool::for_range(chunks, grain(8 * n * n * n * L), [&](int64_t lo, int64_t hi) {
    fn(job, lo, hi);
  });
  return sweeps.load();
}

int svd(Dtype dtype, SvdJob job) {
  std::atomic<int> sweeps{0};
  job.sweeps = &sweeps;
  if (job.batch <= 0 || job.m <= 0 || job.n <= 0) return 0;
  const int L = lanes(dtype);
  const int64_t chunks = (job.batch + L - 1) / L;
  const int64_t big = std::max(job.m, job.n), small = std::min(job.m, job.n);
  const SvdFn fn = kernels().svd[dtype];
  pool::for_range(chunks, grain(8 * big * small * small * L), [&](int64_t lo, int64_t hi) {
    fn(job, lo, hi);
  });
  return sweeps.load();
}

}  // namespace jacobi
}  // namespace starling
