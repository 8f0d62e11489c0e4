#include "philox.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "pool.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace starling {

void philox4x32_10_batch(const uint32_t* counters, const uint32_t* keys, int64_t key_stride,
                         uint32_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    philox4x32_10(counters + 4 * i, keys + key_stride * i, out + 4 * i);
  }
}

namespace {

// Lanes per chunk: the rounds run over structure-of-arrays lanes so the compiler can vectorise
// the 32x32->64 multiplies across blocks (pmuludq / vpmuludq).
constexpr int kLanes = 16;

// Writes words [4 * first_block, 4 * first_block + n_words) of the stream of `key` and `tag`.
// Portable version (the compiler may vectorise the lane loop).
void stream_range(const uint32_t key[2], uint32_t tag, uint64_t first_block, uint32_t* out,
                  int64_t n_words) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  uint64_t block = first_block;
  while (n_words > 0) {
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t b = block + static_cast<uint64_t>(l);
      c0[l] = static_cast<uint32_t>(b);
      c1[l] = static_cast<uint32_t>(b >> 32);
      c2[l] = tag;
      c3[l] = 0u;
    }
    // Lanes outside, rounds inside (fully unrolled): the lane loop is what vectorises.
    for (int l = 0; l < kLanes; ++l) {
      uint32_t x0 = c0[l], x1 = c1[l], x2 = c2[l], x3 = c3[l];
      uint32_t k0 = key[0], k1 = key[1];
#pragma GCC unroll 10
      for (int round = 0; round < 10; ++round) {
        const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * x0;
        const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * x2;
        x0 = static_cast<uint32_t>(p1 >> 32) ^ x1 ^ k0;
        x2 = static_cast<uint32_t>(p0 >> 32) ^ x3 ^ k1;
        x1 = static_cast<uint32_t>(p1);
        x3 = static_cast<uint32_t>(p0);
        k0 += kPhiloxW0;
        k1 += kPhiloxW1;
      }
      c0[l] = x0; c1[l] = x1; c2[l] = x2; c3[l] = x3;
    }
    if (n_words >= 4 * kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        out[4 * l] = c0[l];
        out[4 * l + 1] = c1[l];
        out[4 * l + 2] = c2[l];
        out[4 * l + 3] = c3[l];
      }
      out += 4 * kLanes;
      n_words -= 4 * kLanes;
    } else {
      uint32_t tmp[4 * kLanes];
      for (int l = 0; l < kLanes; ++l) {
        tmp[4 * l] = c0[l];
        tmp[4 * l + 1] = c1[l];
        tmp[4 * l + 2] = c2[l];
        tmp[4 * l + 3] = c3[l];
      }
      std::memcpy(out, tmp, static_cast<size_t>(n_words) * sizeof(uint32_t));
      n_words = 0;
    }
    block += kLanes;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define STARLING_PHILOX_AVX2 1
// AVX2 version: 8 blocks per vector, kGroups independent vectors in flight (the multiply
// latency chain of one group would otherwise dominate). Bit-identical to stream_range.
constexpr int kGroups = 4;

__attribute__((target("avx2"))) inline void mulhilo_avx2(__m256i a, __m256i m, __m256i& hi,
                                                        __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);                        // lanes 0, 2, 4, 6
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);  // lanes 1, 3, 5, 7
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

__attribute__((target("avx2"))) void stream_range_avx2(const uint32_t key[2], uint32_t tag,
                                                       uint64_t first_block, uint32_t* out,
                                                       int64_t n_words) {
  constexpr int kBlocks = 8 * kGroups;
  const __m256i m0 = _mm256_set1_epi64x(kPhiloxM0), m1 = _mm256_set1_epi64x(kPhiloxM1);
  const __m256i w0 = _mm256_set1_epi32(static_cast<int>(kPhiloxW0));
  const __m256i w1 = _mm256_set1_epi32(static_cast<int>(kPhiloxW1));
  const __m256i key0 = _mm256_set1_epi32(static_cast<int>(key[0]));
  const __m256i key1 = _mm256_set1_epi32(static_cast<int>(key[1]));
  const __m256i tagv = _mm256_set1_epi32(static_cast<int>(tag));
  alignas(32) uint32_t lo_words[kBlocks], hi_words[kBlocks];
  alignas(32) uint32_t tmp[4 * kBlocks];
  uint64_t block = first_block;
  while (n_words > 0) {
    for (int l = 0; l < kBlocks; ++l) {
      const uint64_t b = block + static_cast<uint64_t>(l);
      lo_words[l] = static_cast<uint32_t>(b);
      hi_words[l] = static_cast<uint32_t>(b >> 32);
    }
    __m256i x0[kGroups], x1[kGroups], x2[kGroups], x3[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      x0[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo_words + 8 * g));
      x1[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi_words + 8 * g));
      x2[g] = tagv;
      x3[g] = _mm256_setzero_si256();
    }
    __m256i k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      for (int g = 0; g < kGroups; ++g) {
        __m256i hi0, lo0, hi1, lo1;
        mulhilo_avx2(x0[g], m0, hi0, lo0);
        mulhilo_avx2(x2[g], m1, hi1, lo1);
        x0[g] = _mm256_xor_si256(_mm256_xor_si256(hi1, x1[g]), k0);
        x2[g] = _mm256_xor_si256(_mm256_xor_si256(hi0, x3[g]), k1);
        x1[g] = lo1;
        x3[g] = lo0;
      }
      k0 = _mm256_add_epi32(k0, w0);
      k1 = _mm256_add_epi32(k1, w1);
    }
    const bool full = n_words >= 4 * kBlocks;
    uint32_t* dst = full ? out : tmp;
    for (int g = 0; g < kGroups; ++g) {
      // 4 x 8 transpose: block-major output (c0 c1 c2 c3 of block 0, then block 1, ...).
      const __m256i t0 = _mm256_unpacklo_epi32(x0[g], x1[g]);
      const __m256i t1 = _mm256_unpackhi_epi32(x0[g], x1[g]);
      const __m256i t2 = _mm256_unpacklo_epi32(x2[g], x3[g]);
      const __m256i t3 = _mm256_unpackhi_epi32(x2[g], x3[g]);
      const __m256i u0 = _mm256_unpacklo_epi64(t0, t2);  // blocks 0 | 4
      const __m256i u1 = _mm256_unpackhi_epi64(t0, t2);  // blocks 1 | 5
      const __m256i u2 = _mm256_unpacklo_epi64(t1, t3);  // blocks 2 | 6
      const __m256i u3 = _mm256_unpackhi_epi64(t1, t3);  // blocks 3 | 7
      __m256i* d = reinterpret_cast<__m256i*>(dst + 32 * g);
      _mm256_storeu_si256(d, _mm256_permute2x128_si256(u0, u1, 0x20));
      _mm256_storeu_si256(d + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
      _mm256_storeu_si256(d + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
      _mm256_storeu_si256(d + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
    }
    if (full) {
      out += 4 * kBlocks;
      n_words -= 4 * kBlocks;
    } else {
      std::memcpy(out, tmp, static_cast<size_t>(n_words) * sizeof(uint32_t));
      n_words = 0;
    }
    block += kBlocks;
  }
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

// Picks the fastest version for this CPU; all give the same words.
void stream_any(const uint32_t key[2], uint32_t tag, uint64_t first_block, uint32_t* out,
                int64_t n_words) {
#ifdef STARLING_PHILOX_AVX2
  if (cpu_has_avx2()) {
    stream_range_avx2(key, tag, first_block, out, n_words);
    return;
  }
#endif
  stream_range(key, tag, first_block, out, n_words);
}

}  // namespace

void philox4x32_10_stream(const uint32_t* keys, int64_t n_keys, uint32_t tag, uint32_t* out,
                          int64_t n_words, int n_threads) {
  if (n_keys <= 0 || n_words <= 0) return;
  const int64_t total = n_keys * n_words;
  // Threads split each key's stream at block boundaries (multiples of 4 * kLanes words), so the
  // result does not depend on the number of threads.
  const int64_t grain = int64_t{1} << 22;  // below ~8M words one thread is as fast (memory bound)
  int threads = n_threads;
  if (threads <= 1 || total < 2 * grain) threads = 1;
  if (threads == 1) {
    for (int64_t k = 0; k < n_keys; ++k) {
      stream_any(keys + 2 * k, tag, 0, out + k * n_words, n_words);
    }
    return;
  }
  // Work items: (key, chunk) pairs of whole 64-word chunks, run by the thread pool.
  const int64_t chunk = 4 * kLanes * std::max<int64_t>(1, (n_words / threads) / (4 * kLanes) + 1);
  const int64_t chunks_per_key = (n_words + chunk - 1) / chunk;
  const int64_t items = n_keys * chunks_per_key;
  pool::for_range(items, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t it = lo; it < hi; ++it) {
      const int64_t k = it / chunks_per_key, c = it % chunks_per_key;
      const int64_t start = c * chunk;
      const int64_t len = std::min(chunk, n_words - start);
      stream_any(keys + 2 * k, tag, static_cast<uint64_t>(start / 4), out + k * n_words + start,
                 len);
    }
  });
}

}  // namespace starling
