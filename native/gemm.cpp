// Strided batched GEMM: kernels per instruction set, and the parallel driver (see gemm.h).
#include "gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "pool.h"  // (before the kernels: they take their packing buffers from pool::scratch)

// ---- kernels, one copy per instruction set ------------------------------------------------------

#if defined(__x86_64__) && defined(__GNUC__)
#define ST_GEMM_X86 1

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi2")
#define ST_GEMM_NS gemm_avx512
#define ST_GEMM_VBYTES 64
#define ST_GEMM_MR 8
#define ST_GEMM_NVMAX 3
#include "gemm_kernels.inc"
#undef ST_GEMM_NS
#undef ST_GEMM_VBYTES
#undef ST_GEMM_MR
#undef ST_GEMM_NVMAX
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define ST_GEMM_NS gemm_avx2
#define ST_GEMM_VBYTES 32
#define ST_GEMM_MR 6
#define ST_GEMM_NVMAX 2
#include "gemm_kernels.inc"
#undef ST_GEMM_NS
#undef ST_GEMM_VBYTES
#undef ST_GEMM_MR
#undef ST_GEMM_NVMAX
#pragma GCC pop_options
#endif

// Baseline (SSE2 on x86-64; the compiler's default vectors elsewhere).
#define ST_GEMM_NS gemm_base
#define ST_GEMM_VBYTES 16
#define ST_GEMM_MR 4
#define ST_GEMM_NVMAX 3
#include "gemm_kernels.inc"
#undef ST_GEMM_NS
#undef ST_GEMM_VBYTES
#undef ST_GEMM_MR
#undef ST_GEMM_NVMAX

namespace starling {
namespace gemm {
namespace {

template <class T>
using TileFn = void (*)(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*, int64_t,
                        int64_t, T*, int64_t);

struct Isa {
  const char* name;
  TileFn<float> f32;
  TileFn<double> f64;
  int mr;           // rows of the micro-tile
  int vbytes;       // bytes per vector register
  int nvmax;        // vectors per micro-tile row
};

// The best set the CPU supports, at most the one named by STARLING_GEMM_ISA ("avx512", "avx2",
// "generic"; another value is ignored): the tests run every kernel set on one machine, and a
// user can rule out a set (e.g. to compare results with a machine that lacks it).
Isa pick_isa() {
#ifdef ST_GEMM_X86
  const char* env = std::getenv("STARLING_GEMM_ISA");
  const std::string cap = env ? env : "";
  if (cap == "generic") return {"generic", gemm_base::tile_f32, gemm_base::tile_f64, 4, 16, 3};
  __builtin_cpu_init();
  if (cap != "avx2" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
    return {"avx512", gemm_avx512::tile_f32, gemm_avx512::tile_f64, 8, 64, 3};
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {"avx2", gemm_avx2::tile_f32, gemm_avx2::tile_f64, 6, 32, 2};
  }
#endif
  return {"generic", gemm_base::tile_f32, gemm_base::tile_f64, 4, 16, 3};
}

const Isa& isa_info() {
  static const Isa isa = pick_isa();
  return isa;
}

template <class T>
TileFn<T> tile_fn();
template <>
TileFn<float> tile_fn<float>() {
  return isa_info().f32;
}
template <>
TileFn<double> tile_fn<double>() {
  return isa_info().f64;
}

struct Desc {
  int64_t M, N, K, sam, sak, sbk, sbn;
  int nloop;
  int64_t size[kMaxLoops], sa[kMaxLoops], sb[kMaxLoops];
};

Desc parse(const int64_t* d) {
  Desc x;
  x.M = d[0];
  x.N = d[1];
  x.K = d[2];
  x.sam = d[3];
  x.sak = d[4];
  x.sbk = d[5];
  x.sbn = d[6];
  x.nloop = static_cast<int>(std::min<int64_t>(std::max<int64_t>(d[7], 0), kMaxLoops));
  for (int l = 0; l < x.nloop; ++l) {
    x.size[l] = d[kDescFixed + 3 * l];
    x.sa[l] = d[kDescFixed + 3 * l + 1];
    x.sb[l] = d[kDescFixed + 3 * l + 2];
  }
  return x;
}

// Rows [r0, r1) x columns [c0, c1) of the product on this thread; row r at c + (r - cr) * ldc.
// The batch entries are walked with an odometer over the loop dims (no division per entry: a
// batch of tiny products spends most of its time outside the kernels otherwise).
template <class T>
void serial(const Desc& d, const T* a, const T* b, T* c, int64_t ldc, int64_t cr, int64_t r0,
            int64_t r1, int64_t c0, int64_t c1) {
  const TileFn<T> tile = tile_fn<T>();
  int64_t batch = r0 / d.M, i0 = r0 % d.M;
  int64_t idx[kMaxLoops];
  int64_t oa = 0, ob = 0, q = batch;
  for (int l = d.nloop - 1; l >= 0; --l) {
    idx[l] = q % d.size[l];
    q /= d.size[l];
    oa += idx[l] * d.sa[l];
    ob += idx[l] * d.sb[l];
  }
  const T* bc = b + c0 * d.sbn;
  int64_t r = r0;
  while (r < r1) {
    const int64_t i1 = std::min(d.M, i0 + (r1 - r));
    tile(i1 - i0, c1 - c0, d.K, a + oa + i0 * d.sam, d.sam, d.sak, bc + ob, d.sbk, d.sbn,
         c + (r - cr) * ldc + c0, ldc);
    r += i1 - i0;
    i0 = 0;
    for (int l = d.nloop - 1; l >= 0; --l) {   // next batch entry
      oa += d.sa[l];
      ob += d.sb[l];
      if (++idx[l] < d.size[l]) break;
      oa -= d.size[l] * d.sa[l];
      ob -= d.size[l] * d.sb[l];
      idx[l] = 0;
    }
  }
}

// Multiply-adds per pool task at least: below ~2x this a product runs on the calling thread
// (waking a helper costs microseconds; 2^20 multiply-adds take about 20 us at 50 G/s).
constexpr double kTaskWork = double(1 << 20);
// Tiles: columns per tile at most (the tile's panel of B, kKC x this, stays in L2) and rows per
// tile at least (each packed or loaded panel of B serves that many rows).
constexpr int64_t kTileCols = 512;
constexpr int64_t kTileRows = 32;

}  // namespace

int64_t total_rows(const int64_t* desc) {
  const Desc d = parse(desc);
  int64_t rows = d.M;
  for (int l = 0; l < d.nloop; ++l) rows *= d.size[l];
  return rows;
}

const char* isa() { return isa_info().name; }

template <class T>
void rows(const int64_t* desc, const T* a, const T* b, T* c, int64_t ldc, int64_t r0, int64_t r1,
          bool parallel) {
  const Desc d = parse(desc);
  if (r1 <= r0 || d.N <= 0 || d.M <= 0) return;
  const int64_t R = r1 - r0;
  const double work = double(R) * double(d.N) * double(std::max<int64_t>(d.K, 1));
  const int threads = parallel ? pool::thread_share() : 1;
  if (threads <= 1 || pool::in_task() || work < 2 * kTaskWork) {
    serial(d, a, b, c, ldc, r0, r0, r1, 0, d.N);
    return;
  }
  // Tiles: one per thread, each at least kTaskWork and as large as that allows: rows are split
  // while tiles have more rows than columns, columns otherwise (B has to be packed: columns
  // first, each column panel of B is then packed once); tiles wider than kTileCols are split
  // first. Every tile packs its own panels of B (and of a transposed A), so each tile more
  // packs them again: with 2 tiles per thread, the weight gradients x^T @ dy of a transformer
  // ((256 x 1024)^T @ 1024 x 1024 and the like, two threads) ran 10-18% slower than with one,
  // and on a machine busy with one spinning process per CPU the MLP step kept the same speed
  // either way (251 vs 253 steps/s): the finer split bought no balance worth its packing.
  const Isa& isa = isa_info();
  const int64_t mr = isa.mr;
  const int64_t nr = int64_t(isa.vbytes / sizeof(T)) * isa.nvmax;
  // A batch of small products is split finer: its tasks pack nothing twice (each product is
  // its own tile call anyway), and more tasks even out a helper that joins late (1000 products
  // of 16 x 16 x 16 on two threads: 110 -> 95 us; finer tiles of one large product cost more
  // packing than they save).
  const bool small_batch = d.nloop > 0 && double(d.M) * double(d.N) * double(d.K) < kTaskWork;
  const int64_t want = std::max<int64_t>(
      1, std::min<int64_t>(int64_t(threads) * (small_batch ? 8 : 1),
                           int64_t(work / (small_batch ? kTaskWork / 4 : kTaskWork))));
  int64_t rt = 1, ct = std::max<int64_t>(1, (d.N + kTileCols - 1) / kTileCols);
  while (rt * ct < want) {
    const bool can_r = R / (rt + 1) >= kTileRows;
    const bool can_c = d.N / (ct + 1) >= 2 * nr;
    if (!can_r && !can_c) break;
    const bool rows_first = d.sbn == 1 ? R / rt >= d.N / ct : !can_c;
    if (can_r && (rows_first || !can_c)) {
      ++rt;
    } else {
      ++ct;
    }
  }
  if (rt * ct <= 1) {
    serial(d, a, b, c, ldc, r0, r0, r1, 0, d.N);
    return;
  }
  const int64_t rchunk = ((R + rt - 1) / rt + mr - 1) / mr * mr;
  // Column tiles end on whole vectors, not whole micro-panels: 512 columns on two threads split
  // 256 | 256 (five 48-wide panels and a 16-wide one each, which costs about a third of a wide
  // one), where 288 | 224 left the first thread a sixth wide panel: the MLP's
  // 128 x 784 @ 784 x 512 waited on it.
  const int64_t vw = int64_t(isa.vbytes / sizeof(T));
  const int64_t cchunk = ((d.N + ct - 1) / ct + vw - 1) / vw * vw;
  rt = (R + rchunk - 1) / rchunk;
  ct = (d.N + cchunk - 1) / cchunk;
  pool::for_range(rt * ct, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t i = t / ct, j = t % ct;
      const int64_t ra = r0 + i * rchunk, ca = j * cchunk;
      serial(d, a, b, c, ldc, r0, ra, std::min(r1, ra + rchunk), ca,
             std::min(d.N, ca + cchunk));
    }
  });
}

template void rows<float>(const int64_t*, const float*, const float*, float*, int64_t, int64_t,
                          int64_t, bool);
template void rows<double>(const int64_t*, const double*, const double*, double*, int64_t,
                           int64_t, int64_t, bool);

}  // namespace gemm
}  // namespace starling

extern "C" void st_sgemm(const int64_t* desc, const float* a, const float* b, float* c,
                         int64_t ldc, int64_t r0, int64_t r1, int parallel) {
  starling::gemm::rows<float>(desc, a, b, c, ldc, r0, r1, parallel != 0);
}

extern "C" void st_dgemm(const int64_t* desc, const double* a, const double* b, double* c,
                         int64_t ldc, int64_t r0, int64_t r1, int parallel) {
  starling::gemm::rows<double>(desc, a, b, c, ldc, r0, r1, parallel != 0);
}
