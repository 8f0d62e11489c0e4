#include "philox.h"

namespace starling {

void philox4x32_10_batch(const uint32_t* counters, const uint32_t* keys, int64_t key_stride,
                         uint32_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    philox4x32_10(counters + 4 * i, keys + key_stride * i, out + 4 * i);
  }
}

}  // namespace starling
