// Strided, batched GEMM on Starling's thread pool (pool.h): C = A @ B for float32 / float64.
//
// One descriptor describes a whole dot_general on the operands' own memory (no copies): the
// product's rows are the flattened index r over (loop dims..., M), its N columns contiguous in C.
// The descriptor is an int64 array, the same for the eager binding (module.cpp) and generated
// kernels (src/lowering/backends/cpp_gemm.py renders it as a static array):
//
//   [0] M   [1] N   [2] K
//   [3] sam [4] sak     element strides of A along its rows and the contraction
//   [5] sbk [6] sbn     element strides of B along the contraction and its columns
//   [7] nloop (<= kMaxLoops), then per loop dim, outermost first: size, stride in A, stride in B
//
// Row r = ((l0 * size1 + l1) * ... ) * M + i of the product is written at c + (r - r0) * ldc,
// for the rows [r0, r1) a call computes (so a caller may compute a block of rows into a scratch
// buffer). Strides may be zero (broadcast operands) or negative; K == 0 writes zeros.
//
// Kernels: packed register-blocked micro-kernels (MR rows x NV vectors of C held in registers,
// rank-1 updates from broadcast A values and rows of B), compiled for AVX-512, AVX2+FMA and
// baseline x86-64, the best chosen at run time (env STARLING_GEMM_ISA caps it: "avx2",
// "generic"). Operands are read directly when their layout allows it (rows of B contiguous,
// A's rows or columns contiguous) and packed into thread-local panels otherwise, so a
// transposed operand costs a pass of packing, not a copy of the array. The last rows of a
// product (fewer than MR) run through a micro-kernel of that many rows, in place. Values of A
// are broadcast straight from memory (see splat in gemm_kernels.inc: 1024^3 float32 on two
// Zen cores runs at ~180 GFLOPS, OpenBLAS's speed).
// Blocking after Goto and van de Geijn, "Anatomy of high-performance matrix multiplication"
// (ACM TOMS 34(3), 2008) and the BLIS framework (Van Zee and van de Geijn, ACM TOMS 41(3), 2015).
//
// Parallel calls split the rows (and the columns when rows are few) into tiles run by the pool;
// small products run on the calling thread.
#pragma once
#include <cstdint>

namespace starling {
namespace gemm {

constexpr int kMaxLoops = 8;
constexpr int kDescFixed = 8;

template <class T>
void rows(const int64_t* desc, const T* a, const T* b, T* c, int64_t ldc, int64_t r0, int64_t r1,
          bool parallel);

// Rows of the product described by desc: prod(loop sizes) * M.
int64_t total_rows(const int64_t* desc);

// The instruction set the kernels use: "avx512", "avx2" or "generic".
const char* isa();

}  // namespace gemm
}  // namespace starling

extern "C" {
void st_sgemm(const int64_t* desc, const float* a, const float* b, float* c, int64_t ldc,
              int64_t r0, int64_t r1, int parallel);
void st_dgemm(const int64_t* desc, const double* a, const double* b, double* c, int64_t ldc,
              int64_t r0, int64_t r1, int parallel);
}
