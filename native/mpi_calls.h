// Blocking MPI collectives called from C++: the per-call bookkeeping of an eager collective
// (src/distributed/group.py) without Python objects.
//
// A 1 MiB all_gather on two ranks takes ~190 us inside MPI; the transfer empties the caches,
// and the Python bookkeeping around it (flight record, arrival board, agreement check) then cost
// 45-60 us, a quarter of the bandwidth. A Plan does that bookkeeping in one call:
//   1. publishes the arrival on the board (src/distributed/arrival.py: key, count, fingerprint;
//      MPI_Win_sync),
//   2. records the call in the native flight ring (flight_ring.h),
//   3. runs the agreement check (src/distributed/agreement.py: MPI_Allreduce with MPI_MAX of
//      [h, -h]; every member passed the same call iff the result is its own [h, -h]),
//   4. runs the collective itself (the GIL released while MPI runs).
// A mismatch or an MPI error returns to Python, which reports it as the Python path does.
//
// No libmpi at build time: the functions are looked up in the libmpi mpi4py has already loaded
// (dlopen of its path with RTLD_NOLOAD). Handles are Open MPI's (pointers; mpi4py's ``handle``);
// Python binds this only under Open MPI.
#pragma once
#include <cstdint>
#include <string>

namespace starling {
namespace mpi {

enum Kind : int { kAllreduce = 0, kAllgather = 1, kReduceScatterBlock = 2, kAlltoall = 3,
                  kBcast = 4 };

struct Plan {
  int kind;
  void* comm;
  void* dtype;
  void* op;           // reductions only
  int count;          // elements: per member for allgather / reduce_scatter / alltoall
  int root;           // bcast
  bool is_root;       // bcast: this process is the root (copies send into recv first)
  int64_t send_bytes;
  int64_t recv_bytes;
  int64_t check[2];   // [h, -h] of the call's description
  void* check_type;   // MPI_INT64_T
  void* check_op;     // MPI_MAX
  int64_t board_word; // index of this group's slot in the board's words, or -1
  int64_t key;        // the group's board key
  int64_t fingerprint;
};

// Binds the functions of the libmpi at ``path`` (already loaded). False, with *why, when a
// symbol is missing.
bool bind(const std::string& path, std::string* why);
bool bound();
// The board's words and window (MPI_Win), or nullptrs when arrival tracking is off / stopped.
void set_board(int64_t* words, void* win);

// MPI_Op handles of NumPy's maximum / minimum of float32 (f64 false) or float64 values: NaN
// when either value is NaN (MPI_MAX / MPI_MIN keep one of them, depending on the order MPI
// combines the members in). Made once (MPI_Op_create, commutative) and kept; nullptr when the
// library is not bound or MPI refused (*err: its error code).
void* nan_extremum_op(bool max, bool f64, int* err);

constexpr int kMismatch = -1;
// Steps 1, 3 and 4 above (the caller records the flight record around it, with the GIL).
// Returns 0, kMismatch (the members' calls differ; the collective did not start), or an MPI
// error code.
int run(const Plan& plan, const void* send, void* recv, int64_t seq);

}  // namespace mpi
}  // namespace starling
