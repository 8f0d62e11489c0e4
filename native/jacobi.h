// Batched Jacobi eigensolver and SVD for many small matrices (n <= 64), vectorised across the
// batch: a chunk of kLaneBytes / sizeof(real) matrices (16 float32, 8 float64) is stored
// element-interleaved, so the batch index is the innermost (SIMD lane) dimension and each
// rotation is applied to every matrix of the chunk by the same vector instructions. Chunks run on
// Starling's thread pool (pool.h), within the calling thread's share.
//
// eigh: cyclic two-sided Jacobi on the lower triangle (Golub & Van Loan, Matrix Computations, 4th
// ed., sec. 8.5.2-8.5.3; Rutishauser's rotation formulas, Handbook for Automatic Computation II,
// 1971), complex Hermitian input by the phase-then-real-rotation form; a pair (p, q) is rotated
// while |a_pq| > eps * sqrt(|a_pp a_qq|) (Demmel & Veselic, SIAM J. Matrix Anal. Appl. 13(4),
// 1992), so the eigenvalues of graded positive definite matrices keep their relative accuracy.
//
// svd: one-sided Jacobi (Hestenes 1958; Demmel & Veselic 1992; Drmac & Veselic, SIAM J. Matrix
// Anal. Appl. 29(4), 2008) on the columns of the tall orientation (A, or A^H when m < n); a pair
// is rotated while |u_p^H u_q| > sqrt(M) eps ||u_p|| ||u_q|| (LAPACK's dgesvj criterion). U's
// columns for (numerically) zero singular values and the extra columns of full_matrices are
// completed to an orthonormal basis by Gram-Schmidt (twice) against the best unit vectors.
//
// Both scale each matrix by a power of two near 1 / max|a_ij| first (exact; huge and tiny input
// neither overflow nor underflow) and unscale the values after. A matrix with a NaN or inf in the
// part that is read gives NaN everywhere in its results. A lane that has converged keeps
// "rotating" by the identity while others finish; a cap of kMaxSweeps sweeps bounds the work.
#pragma once
#include <atomic>
#include <cstdint>

namespace starling {
namespace jacobi {

constexpr int kMaxN = 64;        // largest n (eigh) / min(m, n) (svd)
constexpr int kMaxLong = 4096;   // largest max(m, n) for svd (bounds a chunk's scratch memory)
constexpr int kMaxSweeps = 60;
constexpr int kLaneBytes = 64;   // one AVX-512 register per matrix element

enum Dtype { kF32 = 0, kF64 = 1, kC64 = 2, kC128 = 3 };

// a: (batch, n, n) C-contiguous; w: (batch, n) real; v: (batch, n, n) or null (no vectors).
struct EighJob {
  const void* a;
  void* w;
  void* v;
  int64_t batch;
  int n;
  bool lower;
  std::atomic<int>* sweeps;   // the most sweeps any chunk took (for tests and tuning)
};

// a: (batch, m, n) C-contiguous; s: (batch, k) real, k = min(m, n); u: (batch, m, full ? m : k),
// vh: (batch, full ? n : k, n), both null when only the singular values are wanted.
struct SvdJob {
  const void* a;
  void* s;
  void* u;
  void* vh;
  int64_t batch;
  int m, n;
  bool full;
  std::atomic<int>* sweeps;
};

// Run on the pool (within the calling thread's share); return the most sweeps any chunk took.
int eigh(Dtype dtype, EighJob job);
int svd(Dtype dtype, SvdJob job);

// Matrices per chunk for a dtype (the SIMD lanes).
int lanes(Dtype dtype);

// The instruction set of the kernels in use: "avx512", "avx2" or "generic" (the GEMM's choice,
// capped by STARLING_GEMM_ISA; gemm.cpp).
const char* isa();

}  // namespace jacobi
}  // namespace starling
