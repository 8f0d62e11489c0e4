// The recycled-buffer pool (see buffers.h).
#include "buffers.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace starling {
namespace buffers {
namespace {

struct Slot {
  size_t size;
  void* ptr;
};

std::mutex g_mutex;
Slot g_slots[kSlots];
int g_n = 0;          // slots in use, oldest first
size_t g_bytes = 0;   // bytes held

}  // namespace

void* get(size_t bytes) {
  if (bytes >= kMinBytes) {
    std::lock_guard<std::mutex> lk(g_mutex);
    for (int i = g_n - 1; i >= 0; --i) {   // the most recently freed first: warmest in cache
      if (g_slots[i].size == bytes) {
        void* p = g_slots[i].ptr;
        std::memmove(&g_slots[i], &g_slots[i + 1], sizeof(Slot) * (g_n - i - 1));
        --g_n;
        g_bytes -= bytes;
        return p;
      }
    }
  }
  const size_t align = bytes >= (size_t(4) << 20) ? (size_t(2) << 20) : 64;
  void* p = nullptr;
  if (posix_memalign(&p, align, bytes > 0 ? bytes : 1) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
  if (bytes >= (size_t(4) << 20)) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

// STARLING_KEEP_FREED_MEMORY=0 (read once) keeps nothing: a freed block goes back to the
// system at once, as the variable does for glibc's own thresholds (lowering/runtime/malloc.py).
bool keeping() {
  static const bool keep = [] {
    const char* env = std::getenv("STARLING_KEEP_FREED_MEMORY");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return keep;
}

void put(void* p, size_t bytes) {
  if (!p) return;
  if (bytes < kMinBytes || bytes > kMaxBytes / 2 || !keeping()) {
    std::free(p);
    return;
  }
  void* evicted[kSlots];
  int nev = 0;
  {
    std::lock_guard<std::mutex> lk(g_mutex);
    while (g_n > 0 && (g_n == kSlots || g_bytes + bytes > kMaxBytes)) {
      evicted[nev++] = g_slots[0].ptr;
      g_bytes -= g_slots[0].size;
      std::memmove(&g_slots[0], &g_slots[1], sizeof(Slot) * (g_n - 1));
      --g_n;
    }
    g_slots[g_n++] = Slot{bytes, p};
    g_bytes += bytes;
  }
  for (int i = 0; i < nev; ++i) std::free(evicted[i]);   // unmapping outside the lock
}

size_t held_bytes() {
  std::lock_guard<std::mutex> lk(g_mutex);
  return g_bytes;
}

}  // namespace buffers
}  // namespace starling

extern "C" void* st_buffer_get(size_t bytes) { return starling::buffers::get(bytes); }

extern "C" void st_buffer_put(void* p, size_t bytes) { starling::buffers::put(p, bytes); }
