// The one thread pool of Starling's native code (fused kernels, GEMM tiles, random streams).
//
// parallel_for(n, grain, fn, ctx) runs fn(ctx, lo, hi) over the chunks [c * grain, (c + 1) *
// grain) of [0, n) (the last one shorter). The calling thread takes part; pool threads join while
// chunks are left. Chunks are claimed one at a time (each thread first from its own contiguous
// part of them, then from the others' ends: pool.cpp), so a thread the OS has descheduled
// delays the call only by the chunk it is running: a helper that wakes late finds nothing left
// and is not waited for (an OpenMP team barrier waits for every member).
// Chunk boundaries depend on n and grain only, never on the number of threads, so a reduction
// that keeps one partial per chunk and combines them in order gives the same bits whatever the
// threads.
//
// Threads: the pool has size() - 1 helper threads (size() = the CPUs this process may use, set
// from Python: src/lowering/runtime/threads.py). Each calling thread has a share (the threads one
// of its calls may use, itself included; default size()): in-process device threads get
// size() / devices each, so N devices share the one pool instead of each starting its own.
// A parallel_for from inside a chunk (nested) runs on the calling thread.
//
// Placement: the pool sets no affinity of its own (on a shared machine the scheduler knows
// better), except that a helper joining a job on the very CPU its caller runs on moves off it
// at once (pool.cpp: leave_callers_cpu); and the caller spins a while before sleeping on its
// helpers, since a sleeping caller is woken onto its helper's CPU.
#pragma once
#include <cstdint>

namespace starling {
namespace pool {

using RangeFn = void (*)(void* ctx, int64_t lo, int64_t hi);

void parallel_for(int64_t n, int64_t grain, RangeFn fn, void* ctx);

// CPUs this process may use: the affinity mask, capped by a cgroup CPU quota (rounded).
int available_cpus();
// Threads a call may use (pool size, the calling thread included); default available_cpus(),
// or $STARLING_NUM_THREADS.
int size();
// Sets the pool size (>= 1); helper threads start lazily at the first parallel call.
void set_size(int n);
// The calling thread's share (<= size()); 0 restores the default (size()).
void set_thread_share(int n);
// Without a share set: the calling thread gets size() / d threads (at least 1), following
// later changes of the pool size (device threads: d = the local devices). 0 or 1: all.
void set_thread_divisor(int d);
int thread_share();
// True inside a chunk run by parallel_for (nested calls run inline there).
bool in_task();

// A per-thread scratch buffer of at least `bytes` bytes, 64-byte aligned, kept between calls
// (grown when needed). Valid until the next scratch() call of the same thread and `slot`.
void* scratch(int slot, int64_t bytes);

// Typed convenience over parallel_for for C++ callers: f(lo, hi).
template <class F>
void for_range(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n <= grain) {
    f(int64_t{0}, n);
    return;
  }
  parallel_for(
      n, grain, [](void* c, int64_t lo, int64_t hi) { (*static_cast<const F*>(c))(lo, hi); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

}  // namespace pool
}  // namespace starling

// The C ABI handed to generated kernel libraries (src/lowering/backends/cpp_runtime.py).
extern "C" {
void st_parallel_for(int64_t n, int64_t grain, void (*fn)(void*, int64_t, int64_t), void* ctx);
void* st_scratch(int slot, int64_t bytes);
}
