#include "mpi_calls.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

namespace starling {
namespace mpi {
namespace {

// MPI's C signatures with Open MPI's handle types (all pointers).
using AllreduceFn = int (*)(const void*, void*, int, void*, void*, void*);
using AllgatherFn = int (*)(const void*, int, void*, void*, int, void*, void*);
using ReduceScatterBlockFn = int (*)(const void*, void*, int, void*, void*, void*);
using AlltoallFn = int (*)(const void*, int, void*, void*, int, void*, void*);
using BcastFn = int (*)(void*, int, void*, int, void*);
using WinSyncFn = int (*)(void*);
using UserFn = void (*)(void*, void*, int*, void**);
using OpCreateFn = int (*)(UserFn, int, void**);

struct Api {
  AllreduceFn allreduce = nullptr;
  AllgatherFn allgather = nullptr;
  ReduceScatterBlockFn reduce_scatter_block = nullptr;
  AlltoallFn alltoall = nullptr;
  BcastFn bcast = nullptr;
  WinSyncFn win_sync = nullptr;
  OpCreateFn op_create = nullptr;
};

Api g_api;
bool g_bound = false;
std::atomic<int64_t*> g_words{nullptr};
std::atomic<void*> g_win{nullptr};

template <typename F>
bool lookup(void* lib, const char* name, F* out, std::string* why) {
  void* p = dlsym(lib, name);
  if (p == nullptr) {
    *why = std::string("libmpi has no ") + name;
    return false;
  }
  *out = reinterpret_cast<F>(p);
  return true;
}

}  // namespace

bool bind(const std::string& path, std::string* why) {
  void* lib = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) {
    const char* e = dlerror();
    *why = std::string("libmpi is not loaded: ") + (e ? e : path);
    return false;
  }
  Api api;
  const bool ok = lookup(lib, "MPI_Allreduce", &api.allreduce, why) &&
                  lookup(lib, "MPI_Allgather", &api.allgather, why) &&
                  lookup(lib, "MPI_Reduce_scatter_block", &api.reduce_scatter_block, why) &&
                  lookup(lib, "MPI_Alltoall", &api.alltoall, why) &&
                  lookup(lib, "MPI_Bcast", &api.bcast, why) &&
                  lookup(lib, "MPI_Win_sync", &api.win_sync, why) &&
                  lookup(lib, "MPI_Op_create", &api.op_create, why);
  // the library stays loaded: mpi4py holds it, and so does this handle (never closed)
  if (!ok) return false;
  g_api = api;
  g_bound = true;
  return true;
}

bool bound() { return g_bound; }

namespace {

template <class T, bool kMax>
void nan_extremum(void* in, void* inout, int* len, void** /*datatype: one op per type*/) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  const int n = *len;
  for (int i = 0; i < n; ++i) {
    const T x = a[i], y = b[i];
    // x + y is a NaN when either is
    b[i] = (x != x || y != y) ? x + y : (kMax ? (x > y ? x : y) : (x < y ? x : y));
  }
}

}  // namespace

void* nan_extremum_op(bool max, bool f64, int* err) {
  static std::atomic<void*> ops[4] = {};
  *err = 0;
  if (!g_bound) return nullptr;
  const int i = (max ? 2 : 0) + (f64 ? 1 : 0);
  void* op = ops[i].load();
  if (op != nullptr) return op;
  static const UserFn fns[4] = {&nan_extremum<float, false>, &nan_extremum<double, false>,
                                &nan_extremum<float, true>, &nan_extremum<double, true>};
  *err = g_api.op_create(fns[i], 1, &op);
  if (*err != 0) return nullptr;
  ops[i].store(op);   // callers hold the GIL: no two make the same op
  return op;
}

void set_board(int64_t* words, void* win) {
  g_win.store(win);
  g_words.store(words);
}

int run(const Plan& p, const void* send, void* recv, int64_t seq) {
  int64_t* words = g_words.load();
  if (words != nullptr && p.board_word >= 0) {
    int64_t* w = words + p.board_word;
    w[0] = p.key;
    w[2] = p.fingerprint;   // before the count: a reader seeing the count sees this too
    if (seq >= w[1]) w[1] = seq + 1;
    void* win = g_win.load();
    if (win != nullptr) g_api.win_sync(win);
  }
  int64_t got[2];
  int rc = g_api.allreduce(p.check, got, 2, p.check_type, p.check_op, p.comm);
  if (rc != 0) return rc;
  if (got[0] != p.check[0] || got[1] != p.check[1]) return kMismatch;
  switch (p.kind) {
    case kAllreduce:
      return g_api.allreduce(send, recv, p.count, p.dtype, p.op, p.comm);
    case kAllgather:
      return g_api.allgather(send, p.count, p.dtype, recv, p.count, p.dtype, p.comm);
    case kReduceScatterBlock:
      return g_api.reduce_scatter_block(send, recv, p.count, p.dtype, p.op, p.comm);
    case kAlltoall:
      return g_api.alltoall(send, p.count, p.dtype, recv, p.count, p.dtype, p.comm);
    case kBcast:
      // the source's result starts as its input; the others' is overwritten
      if (p.is_root && send != recv) std::memcpy(recv, send, static_cast<size_t>(p.recv_bytes));
      return g_api.bcast(recv, p.count, p.dtype, p.root, p.comm);
    default:
      return kMismatch;
  }
}

}  // namespace mpi
}  // namespace starling
