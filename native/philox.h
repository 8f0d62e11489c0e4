// Philox4x32-10 counter-based generator (Salmon, Moraes, Dror, Shaw: "Parallel random numbers:
// as easy as 1, 2, 3", SC'11). Header shared by the extension and generated kernels.
#pragma once
#include <cstdint>

namespace starling {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

inline void philox4x32_10(const uint32_t ctr_in[4], const uint32_t key_in[2], uint32_t out[4]) {
  uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
  uint32_t k0 = key_in[0], k1 = key_in[1];
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

// counters: (n, 4), keys: (n, 2) (or (1, 2) broadcast when key_stride == 0), out: (n, 4).
void philox4x32_10_batch(const uint32_t* counters, const uint32_t* keys, int64_t key_stride,
                         uint32_t* out, int64_t n);

// The counter-mode stream of each key: out[k, j] is word j % 4 of
// philox4x32_10(counter = (b mod 2^32, b >> 32, tag, 0), key = keys[k]) with b = j / 4.
// keys: (n_keys, 2); out: (n_keys, n_words). Uses up to n_threads threads for large outputs;
// the result does not depend on n_threads.
void philox4x32_10_stream(const uint32_t* keys, int64_t n_keys, uint32_t tag, uint32_t* out,
                          int64_t n_words, int n_threads);

}  // namespace starling
