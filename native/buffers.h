// Recycled large buffers for arrays Starling allocates (kernel outputs, GEMM results).
//
// glibc maps every block above its mmap threshold afresh and unmaps it on free, so a result of
// a few MiB allocated on every call of a loop pays a fresh mapping and a page fault per 4 KiB
// each time (an eager MLP step spent ~15% of its time there; a compiled transformer block step
// frees ~40 blocks of 1-4 MiB, and with 16 slots it faulted 16 huge pages back in per step, 3 ms
// of CPU). Blocks of kMinBytes and more are kept here when freed (at most kSlots of them,
// kMaxBytes in all, the oldest evicted first) and handed out again for a request of the same
// size. Thread-safe.
#pragma once
#include <cstddef>

namespace starling {
namespace buffers {

constexpr size_t kMinBytes = size_t(1) << 20;
constexpr int kSlots = 64;
constexpr size_t kMaxBytes = size_t(1) << 30;

// `bytes` bytes, 64-byte aligned (2 MiB aligned and eligible for huge pages from 4 MiB), or
// nullptr when out of memory. Any size is accepted; only blocks >= kMinBytes are recycled.
void* get(size_t bytes);
// Returns a block from get() of that size (kept for reuse unless STARLING_KEEP_FREED_MEMORY=0).
void put(void* p, size_t bytes);
// Bytes of the freed blocks kept now.
size_t held_bytes();

}  // namespace buffers
}  // namespace starling

// The same for generated code (handed over as addresses, see runtime_symbols in module.cpp).
extern "C" {
void* st_buffer_get(size_t bytes);
void st_buffer_put(void* p, size_t bytes);
}
