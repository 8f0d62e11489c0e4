// The one thread pool (see pool.h for the contract).
//
// A job lives on the caller's stack and is listed in the pool while chunks may still be claimed.
// Helpers join a listed job (under the pool mutex, at most max_helpers of them), claim chunks,
// and leave (under the mutex, notifying the caller). The caller runs chunks too; when none is
// left it unlists the job, so no helper can join any more, and waits only for the helpers still
// inside, each of which holds at most the chunk it is running.
//
// Claiming: the chunks are cut into one contiguous part per participant (the caller: part 0,
// the k-th helper to join: part k). Each takes its own part's chunks from the front, then
// takes the others' from their back, one at a time. So calls of the same size give each thread
// the same chunks every time: consecutive kernels of a program read what the same core wrote
// into its own L2 (1000 products of 16 x 16 x 16 on two threads, 2 MiB of operands, fit the two
// L2s that way), while a helper the OS holds back still delays the call by one chunk at most.
//
// Idle helpers spin briefly (kSpinNs) before sleeping on a condition variable: a compiled program
// launches kernels back to back with a few microseconds of Python in between, and a futex wake-up
// costs about as much as a small kernel.
#include "pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ST_PAUSE() _mm_pause()
#else
#define ST_PAUSE() ((void)0)
#endif

namespace starling {
namespace pool {
namespace {

// Idle helpers spin this long before sleeping. Between the parallel kernels of a step run
// single-threaded kernels and Python (a scan's body: ~70 us a step); with 50 us, an RNN
// gradient step (seq 200) slept and woke its helper ~70 times, and on a machine busy with one
// spinning process per CPU the MLP step kept 222 steps/s instead of 280 with 200 us (1 ms: 266;
// the CPU time per step stays the same, 3.3-3.5 ms, quiet or busy).
constexpr int64_t kSpinNs = 200000;
// The caller, waiting for helpers still inside, spins this long before sleeping: a caller that
// sleeps is woken by the last helper onto that helper's CPU, and the two then share one core
// until the scheduler separates them (with 20 us, the first ~10 MLP training steps after a
// pause ran at one thread's speed; with 200 us, one step).
constexpr int64_t kCallerSpinNs = 200000;

// Parts a job's chunks are cut into at most; later helpers only take chunks from others' parts.
constexpr int kMaxParts = 16;

// The chunks [lo, hi) of a part not claimed yet, as (lo << 32) | hi: one word, so the front
// (its owner) and the back (the others) are claimed by compare-and-swap on it.
struct alignas(64) Part {
  std::atomic<uint64_t> left{0};
};

struct Job {
  RangeFn fn;
  int caller_cpu = -1;         // where the caller ran when it listed the job
  void* ctx;
  int64_t n, grain, nchunks;
  int parts = 1;
  Part part[kMaxParts];
  std::atomic<int64_t> next{0};  // the claim counter instead of parts when nchunks >= 2^32
  std::atomic<int> inside{0};  // helpers that joined and have not left (changed under the mutex)
  int joined = 0;              // helpers that ever joined (under the mutex)
  int max_helpers = 0;
};

struct State {
  std::mutex m;
  std::condition_variable work_cv, done_cv;
  std::vector<Job*> jobs;
  std::atomic<uint64_t> listed{0};  // jobs listed so far
  std::atomic<int> size{0};
  int started = 0;  // helper threads started (under the mutex)
  int idle = 0;     // helpers asleep on work_cv (under the mutex)
};

// A cgroup CPU quota in CPUs (v2 cpu.max, else v1 cfs files), or <= 0 when there is none.
double cgroup_quota() {
  if (FILE* f = std::fopen("/sys/fs/cgroup/cpu.max", "r")) {
    char q[32] = {0};
    long long period = 0;
    const int got = std::fscanf(f, "%31s %lld", q, &period);
    std::fclose(f);
    if (got == 2 && std::strcmp(q, "max") != 0 && period > 0) {
      return std::atof(q) / static_cast<double>(period);
    }
    return 0;
  }
  long long q = 0, period = 0;
  if (FILE* f = std::fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r")) {
    if (std::fscanf(f, "%lld", &q) != 1) q = 0;
    std::fclose(f);
  }
  if (FILE* f = std::fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r")) {
    if (std::fscanf(f, "%lld", &period) != 1) period = 0;
    std::fclose(f);
  }
  return (q > 0 && period > 0) ? static_cast<double>(q) / static_cast<double>(period) : 0;
}

int default_size() {
  if (const char* env = std::getenv("STARLING_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return n;
  }
  return available_cpus();
}

State* g_state = nullptr;
std::once_flag g_once;

// After fork() only the forking thread exists in the child: start over with a fresh state (the
// old mutex may be held by a thread that is gone; the old state is leaked on purpose).
void after_fork_child() {
  const int size = g_state ? g_state->size.load() : 0;
  g_state = new State();
  g_state->size.store(size > 0 ? size : default_size());
}

State* state() {
  std::call_once(g_once, [] {
    g_state = new State();
    g_state->size.store(default_size());
    pthread_atfork(nullptr, nullptr, after_fork_child);
  });
  return g_state;
}

thread_local bool tl_in_task = false;
thread_local int tl_share = 0;
thread_local int tl_divisor = 0;

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr int64_t kWordChunks = int64_t(1) << 32;

// Cuts the chunks into `parts` contiguous parts (at least one chunk each).
void split(Job* j, int parts) {
  if (j->nchunks >= kWordChunks) return;   // one shared counter (`next`) then
  j->parts = std::max(1, std::min<int>(parts, kMaxParts));
  for (int p = 0; p < j->parts; ++p) {
    const uint64_t lo = uint64_t(p * j->nchunks / j->parts);
    const uint64_t hi = uint64_t((p + 1) * j->nchunks / j->parts);
    j->part[p].left.store((lo << 32) | hi, std::memory_order_relaxed);
  }
}

// A chunk of the part, from its front or its back; -1 when none is left.
int64_t claim(Part& p, bool front) {
  uint64_t v = p.left.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t lo = v >> 32, hi = v & 0xffffffffu;
    if (lo >= hi) return -1;
    const uint64_t w = front ? v + (uint64_t(1) << 32) : v - 1;
    if (p.left.compare_exchange_weak(v, w, std::memory_order_relaxed)) {
      return static_cast<int64_t>(front ? lo : hi - 1);
    }
  }
}

bool chunks_left(Job* j) {
  if (j->nchunks >= kWordChunks) return j->next.load(std::memory_order_relaxed) < j->nchunks;
  for (int p = 0; p < j->parts; ++p) {
    const uint64_t v = j->part[p].left.load(std::memory_order_relaxed);
    if ((v >> 32) < (v & 0xffffffffu)) return true;
  }
  return false;
}

// Runs chunks of the job as participant `slot` (0: the caller) until none is left.
void run_chunks(Job* j, int slot) {
  const bool wide = j->nchunks >= kWordChunks;
  for (;;) {
    int64_t c;
    if (wide) {
      c = j->next.fetch_add(1, std::memory_order_relaxed);
      if (c >= j->nchunks) return;
    } else {
      c = slot < j->parts ? claim(j->part[slot], true) : -1;
      for (int k = 1; c < 0 && k <= j->parts; ++k) {
        c = claim(j->part[(slot + k) % j->parts], false);
      }
      if (c < 0) return;
    }
    const int64_t lo = c * j->grain;
    j->fn(j->ctx, lo, std::min(j->n, lo + j->grain));
  }
}

// A listed job a helper of this index may join, or null (under the mutex).
Job* pick(State* s, int index) {
  if (index >= s->size.load(std::memory_order_relaxed) - 1) return nullptr;
  for (Job* j : s->jobs) {
    if (j->joined < j->max_helpers && chunks_left(j)) {
      return j;
    }
  }
  return nullptr;
}

// A helper that joins a job on the CPU its caller runs on moves off it: the two would share
// one core while another one idles. The scheduler wakes a thread beside its waker, and on the
// VMs measured here its balancer took ~40 ms to separate them after every pause (after 0.25 s
// idle, the next ~10 MLP training steps ran at one thread's speed). Excluding the CPU from the
// thread's affinity migrates it at once; the old affinity is restored right away, so the
// scheduler stays free to place it later (a busy machine included).
void leave_callers_cpu(const Job* j) {
#ifdef __linux__
  if (j->caller_cpu < 0 || sched_getcpu() != j->caller_cpu) return;
  cpu_set_t all;
  if (sched_getaffinity(0, sizeof(all), &all) != 0) return;
  cpu_set_t other = all;
  CPU_CLR(j->caller_cpu, &other);
  if (CPU_COUNT(&other) == 0) return;
  if (sched_setaffinity(0, sizeof(other), &other) == 0) sched_setaffinity(0, sizeof(all), &all);
#else
  (void)j;
#endif
}

// The CPU the calling thread runs on, or -1 where that cannot be asked.
int current_cpu() {
#ifdef __linux__
  return sched_getcpu();
#else
  return -1;
#endif
}

void helper_main(State* s, int index) {
  tl_in_task = true;  // nested parallel_for calls from a chunk run inline
  std::unique_lock<std::mutex> lk(s->m, std::defer_lock);
  uint64_t seen = 0;   // jobs listed when this helper last looked for one
  for (;;) {
    // Spin until a job is listed that this helper has not looked at yet, or the time is up.
    // Only then sleep: a job still listed but with nothing left to claim (its caller running
    // its last chunk) is no reason to; a helper that slept there was woken for the next call
    // tens of microseconds late (1000 products of 16 x 16 x 16 on two threads: a third of the
    // calls switched context, a tenth took twice as long as the others).
    const int64_t until = now_ns() + kSpinNs;
    Job* j = nullptr;
    for (;;) {
      while (s->listed.load(std::memory_order_acquire) == seen && now_ns() < until) {
        for (int i = 0; i < 64; ++i) ST_PAUSE();
      }
      lk.lock();
      seen = s->listed.load(std::memory_order_relaxed);
      j = pick(s, index);
      if (j != nullptr || now_ns() >= until) break;
      lk.unlock();
    }
    while (j == nullptr) {
      ++s->idle;
      s->work_cv.wait(lk);
      --s->idle;
      seen = s->listed.load(std::memory_order_relaxed);
      j = pick(s, index);
    }
    const int slot = ++j->joined;
    j->inside.fetch_add(1, std::memory_order_relaxed);
    lk.unlock();
    leave_callers_cpu(j);
    run_chunks(j, slot);
    lk.lock();
    // The last touch of the job: after this the caller may return and free it.
    if (j->inside.fetch_sub(1, std::memory_order_acq_rel) == 1) s->done_cv.notify_all();
    lk.unlock();
  }
}

// Starts the helper threads the current size asks for (under the mutex).
void ensure_helpers(State* s) {
  const int want = s->size.load() - 1;
  while (s->started < want) {
    const int index = s->started;
    std::thread(helper_main, s, index).detach();
    ++s->started;
  }
}

}  // namespace

int available_cpus() {
  static const int n = [] {
    int cpus = 0;
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
#endif
    if (cpus <= 0) cpus = static_cast<int>(std::thread::hardware_concurrency());
    cpus = std::max(cpus, 1);
    const double quota = cgroup_quota();
    if (quota > 0) cpus = std::max(1, std::min(cpus, std::max(1, int(quota + 0.5))));
    return cpus;
  }();
  return n;
}

int size() { return state()->size.load(std::memory_order_relaxed); }

void set_size(int n) {
  State* s = state();
  std::lock_guard<std::mutex> lk(s->m);
  s->size.store(std::max(1, n));
  s->work_cv.notify_all();  // helpers above the new size stop taking jobs
}

void set_thread_share(int n) { tl_share = std::max(0, n); }

void set_thread_divisor(int d) { tl_divisor = std::max(0, d); }

int thread_share() {
  const int s = size();
  if (tl_share > 0) return std::min(tl_share, s);
  if (tl_divisor > 1) return std::max(1, s / tl_divisor);
  return s;
}

bool in_task() { return tl_in_task; }

void parallel_for(int64_t n, int64_t grain, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t nchunks = (n + grain - 1) / grain;
  const int share = thread_share();
  if (nchunks == 1 || share <= 1 || tl_in_task) {
    for (int64_t lo = 0; lo < n; lo += grain) fn(ctx, lo, std::min(n, lo + grain));
    return;
  }
  State* s = state();
  Job j;
  j.fn = fn;
  j.ctx = ctx;
  j.n = n;
  j.grain = grain;
  j.nchunks = nchunks;
  j.max_helpers = static_cast<int>(std::min<int64_t>(share - 1, nchunks - 1));
  split(&j, j.max_helpers + 1);
  j.caller_cpu = current_cpu();
  int wake;
  {
    std::lock_guard<std::mutex> lk(s->m);
    ensure_helpers(s);
    s->jobs.push_back(&j);
    s->listed.fetch_add(1, std::memory_order_release);
    wake = std::min(j.max_helpers, s->idle);
  }
  for (int i = 0; i < wake; ++i) s->work_cv.notify_one();
  tl_in_task = true;
  run_chunks(&j, 0);
  tl_in_task = false;
  {
    std::lock_guard<std::mutex> lk(s->m);
    s->jobs.erase(std::find(s->jobs.begin(), s->jobs.end(), &j));
  }
  // Only helpers still inside are waited for; each holds at most the chunk it is running.
  if (j.inside.load(std::memory_order_acquire) == 0) return;
  const int64_t until = now_ns() + kCallerSpinNs;
  while (j.inside.load(std::memory_order_acquire) != 0 && now_ns() < until) ST_PAUSE();
  if (j.inside.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lk(s->m);
  s->done_cv.wait(lk, [&] { return j.inside.load(std::memory_order_acquire) == 0; });
}

namespace {
struct Scratch {
  void* p[4] = {nullptr, nullptr, nullptr, nullptr};
  int64_t cap[4] = {0, 0, 0, 0};
  ~Scratch() {
    for (void* q : p) std::free(q);
  }
};
thread_local Scratch tl_scratch;
}  // namespace

void* scratch(int slot, int64_t bytes) {
  if (slot < 0 || slot > 3) std::abort();
  Scratch& s = tl_scratch;
  if (s.cap[slot] < bytes) {
    // grow geometrically: the kernels of a program ask for a few different sizes
    const int64_t want = std::max<int64_t>(bytes, s.cap[slot] * 2);
    std::free(s.p[slot]);
    s.p[slot] = nullptr;
    s.cap[slot] = 0;
    void* q = nullptr;
    if (posix_memalign(&q, 64, static_cast<size_t>(want)) != 0) {
      static const char msg[] = "starling: out of memory for a scratch buffer\n";
      fwrite(msg, 1, sizeof(msg) - 1, stderr);
      std::abort();
    }
    s.p[slot] = q;
    s.cap[slot] = want;
  }
  return s.p[slot];
}

}  // namespace pool
}  // namespace starling

extern "C" void st_parallel_for(int64_t n, int64_t grain, void (*fn)(void*, int64_t, int64_t),
                                void* ctx) {
  starling::pool::parallel_for(n, grain, fn, ctx);
}

extern "C" void* st_scratch(int slot, int64_t bytes) {
  return starling::pool::scratch(slot, bytes);
}
