// starling._native: runtime helpers and hot CPU kernels exposed to Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "buffers.h"
#include "flight_ring.h"
#include "gemm.h"
#include "jacobi.h"
#include "mpi_calls.h"
#include "philox.h"
#include "pool.h"

namespace py = pybind11;

namespace {

using U32Array = py::array_t<uint32_t, py::array::c_style | py::array::forcecast>;

// Validates shapes here (never in an assert) so bad input is a Python ValueError, not a crash.
py::array_t<uint32_t> philox(U32Array counters, U32Array keys) {
  if (counters.ndim() != 2 || counters.shape(1) != 4) {
    throw py::value_error("philox4x32_10: counters must have shape (n, 4), got ndim=" +
                          std::to_string(counters.ndim()));
  }
  const int64_t n = counters.shape(0);
  if (keys.ndim() != 2 || keys.shape(1) != 2 || !(keys.shape(0) == n || keys.shape(0) == 1)) {
    throw py::value_error("philox4x32_10: keys must have shape (n, 2) or (1, 2) with n=" +
                          std::to_string(n));
  }
  const int64_t key_stride = (keys.shape(0) == 1 && n != 1) ? 0 : 2;
  py::array_t<uint32_t> out({n, static_cast<int64_t>(4)});
  {
    py::gil_scoped_release release;
    starling::philox4x32_10_batch(counters.data(), keys.data(), key_stride, out.mutable_data(), n);
  }
  return out;
}

// The counter-mode stream (see philox.h): keys (m, 2) -> words (m, n_words).
py::array_t<uint32_t> philox_stream(U32Array keys, int64_t n_words, int64_t tag, int threads) {
  if (keys.ndim() != 2 || keys.shape(1) != 2) {
    throw py::value_error("philox4x32_10_stream: keys must have shape (m, 2), got ndim=" +
                          std::to_string(keys.ndim()));
  }
  if (n_words < 0) {
    throw py::value_error("philox4x32_10_stream: n_words must be >= 0, got " +
                          std::to_string(n_words));
  }
  if (tag < 0 || tag > 0xFFFFFFFFll) {
    throw py::value_error("philox4x32_10_stream: tag must be in [0, 2**32), got " +
                          std::to_string(tag));
  }
  if (threads <= 0) threads = starling::pool::thread_share();
  const int64_t m = keys.shape(0);
  py::array_t<uint32_t> out({m, n_words});
  {
    py::gil_scoped_release release;
    starling::philox4x32_10_stream(keys.data(), m, static_cast<uint32_t>(tag), out.mutable_data(),
                                   n_words, threads);
  }
  return out;
}

// Lowest and highest element offsets an access with these sizes / strides reaches.
void extent(const std::vector<std::pair<int64_t, int64_t>>& dims, int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = 0;
  for (const auto& d : dims) {
    if (d.first <= 0) continue;
    const int64_t reach = (d.first - 1) * d.second;
    if (reach < 0) *lo += reach; else *hi += reach;
  }
}

// The GEMM of `desc` (gemm.h) on a and b into out (C-contiguous rows x N). Every element the
// descriptor reaches is checked to lie inside the arrays, so a wrong descriptor is a ValueError,
// never a stray read.
template <class T>
void gemm_typed(py::array a, py::array b, py::array out, const int64_t* desc, size_t ndesc) {
  using starling::gemm::kDescFixed;
  using starling::gemm::kMaxLoops;
  if (ndesc < static_cast<size_t>(kDescFixed) || desc[7] < 0 || desc[7] > kMaxLoops ||
      ndesc != static_cast<size_t>(kDescFixed + 3 * desc[7])) {
    throw py::value_error("gemm: malformed descriptor");
  }
  const int64_t M = desc[0], N = desc[1], K = desc[2], nloop = desc[7];
  if (M < 0 || N < 0 || K < 0) throw py::value_error("gemm: negative size in descriptor");
  int64_t rows = M;
  std::vector<std::pair<int64_t, int64_t>> da{{M, desc[3]}, {K, desc[4]}},
      db{{K, desc[5]}, {N, desc[6]}};
  for (int64_t l = 0; l < nloop; ++l) {
    const int64_t size = desc[kDescFixed + 3 * l];
    if (size < 0) throw py::value_error("gemm: negative loop size in descriptor");
    rows *= size;
    da.push_back({size, desc[kDescFixed + 3 * l + 1]});
    db.push_back({size, desc[kDescFixed + 3 * l + 2]});
  }
  if (!(out.flags() & py::array::c_style) || !out.writeable() || out.size() != rows * N) {
    throw py::value_error("gemm: out must be a writeable C-contiguous array of rows x N elements");
  }
  if (rows == 0 || N == 0) return;
  // the memory each operand's own shape and strides reach, in elements
  auto own = [](const py::array& x, int64_t* lo, int64_t* hi) {
    std::vector<std::pair<int64_t, int64_t>> dims;
    for (py::ssize_t i = 0; i < x.ndim(); ++i) {
      if (x.strides(i) % static_cast<py::ssize_t>(sizeof(T)) != 0) {
        throw py::value_error("gemm: operand strides are not multiples of the item size");
      }
      dims.push_back({x.shape(i), x.strides(i) / static_cast<py::ssize_t>(sizeof(T))});
    }
    extent(dims, lo, hi);
  };
  int64_t lo, hi, olo, ohi;
  if (K > 0) {
    for (int side = 0; side < 2; ++side) {
      const py::array& x = side ? b : a;
      if (x.size() == 0) throw py::value_error("gemm: empty operand for a non-empty product");
      extent(side ? db : da, &lo, &hi);
      own(x, &olo, &ohi);
      if (lo < olo || hi > ohi) throw py::value_error("gemm: descriptor reaches outside an operand");
    }
  }
  const T* pa = static_cast<const T*>(a.data());
  const T* pb = static_cast<const T*>(b.data());
  T* pc = static_cast<T*>(out.mutable_data());
  py::gil_scoped_release release;
  starling::gemm::rows<T>(desc, pa, pb, pc, N, 0, rows, true);
}

using DescArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

void gemm(py::array a, py::array b, py::array out, DescArray desc_array) {
  if (desc_array.ndim() != 1) throw py::value_error("gemm: desc must be 1-d");
  const int64_t* desc = desc_array.data();
  const size_t ndesc = static_cast<size_t>(desc_array.shape(0));
  const auto dt = out.dtype();
  if (!a.dtype().is(dt) || !b.dtype().is(dt)) {
    throw py::type_error("gemm: operands and out must have one dtype");
  }
  if (dt.is(py::dtype::of<float>())) return gemm_typed<float>(a, b, out, desc, ndesc);
  if (dt.is(py::dtype::of<double>())) return gemm_typed<double>(a, b, out, desc, ndesc);
  throw py::type_error("gemm: only float32 and float64 are supported");
}


// The dtype code of a Jacobi operand, or a TypeError naming the op and what is valid.
starling::jacobi::Dtype jacobi_dtype(const char* op, const py::array& a) {
  const auto dt = a.dtype();
  if (dt.is(py::dtype::of<float>())) return starling::jacobi::kF32;
  if (dt.is(py::dtype::of<double>())) return starling::jacobi::kF64;
  if (dt.is(py::dtype::of<std::complex<float>>())) return starling::jacobi::kC64;
  if (dt.is(py::dtype::of<std::complex<double>>())) return starling::jacobi::kC128;
  throw py::type_error(std::string(op) + ": dtype must be float32, float64, complex64 or "
                       "complex128, got " + std::string(py::str(dt)));
}

std::string shape_str(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

void jacobi_check_input(const char* op, const py::array& a) {
  if (a.ndim() != 3) {
    throw py::value_error(std::string(op) + ": a must have shape (batch, m, n), got " +
                          shape_str(a));
  }
  if (!(a.flags() & py::array::c_style)) {
    throw py::value_error(std::string(op) + ": a must be C-contiguous");
  }
}

py::dtype real_of(const py::array& a) {
  const auto dt = a.dtype();
  if (dt.is(py::dtype::of<std::complex<float>>())) return py::dtype::of<float>();
  if (dt.is(py::dtype::of<std::complex<double>>())) return py::dtype::of<double>();
  return dt;
}

py::tuple jacobi_eigh(py::array a, bool lower, bool compute_v) {
  const auto dt = jacobi_dtype("jacobi_eigh", a);
  jacobi_check_input("jacobi_eigh", a);
  const int64_t batch = a.shape(0), n = a.shape(1);
  if (a.shape(2) != n || n > starling::jacobi::kMaxN) {
    throw py::value_error("jacobi_eigh: a must hold square matrices of size n <= " +
                          std::to_string(starling::jacobi::kMaxN) + ", got shape " +
                          shape_str(a));
  }
  py::array w(real_of(a), std::vector<int64_t>{batch, n});
  py::object v = py::none();
  starling::jacobi::EighJob job{a.data(), w.mutable_data(), nullptr, batch, int(n), lower,
                                nullptr};
  if (compute_v) {
    py::array va(a.dtype(), std::vector<int64_t>{batch, n, n});
    job.v = va.mutable_data();
    v = va;
  }
  int sweeps;
  {
    py::gil_scoped_release release;
    sweeps = starling::jacobi::eigh(dt, job);
  }
  return py::make_tuple(w, v, sweeps);
}

py::tuple jacobi_svd(py::array a, bool full_matrices, bool compute_uv) {
  const auto dt = jacobi_dtype("jacobi_svd", a);
  jacobi_check_input("jacobi_svd", a);
  const int64_t batch = a.shape(0), m = a.shape(1), n = a.shape(2);
  const int64_t k = std::min(m, n), big = std::max(m, n);
  if (k > starling::jacobi::kMaxN || big > starling::jacobi::kMaxLong) {
    throw py::value_error("jacobi_svd: a must hold m x n matrices with min(m, n) <= " +
                          std::to_string(starling::jacobi::kMaxN) + " and max(m, n) <= " +
                          std::to_string(starling::jacobi::kMaxLong) + ", got shape " +
                          shape_str(a));
  }
  py::array s(real_of(a), std::vector<int64_t>{batch, k});
  py::object u = py::none(), vh = py::none();
  starling::jacobi::SvdJob job{a.data(), s.mutable_data(), nullptr, nullptr, batch, int(m),
                               int(n), full_matrices, nullptr};
  if (compute_uv) {
    py::array ua(a.dtype(), std::vector<int64_t>{batch, m, full_matrices ? m : k});
    py::array va(a.dtype(), std::vector<int64_t>{batch, full_matrices ? n : k, n});
    job.u = ua.mutable_data();
    job.vh = va.mutable_data();
    u = ua;
    vh = va;
  }
  int sweeps;
  {
    py::gil_scoped_release release;
    sweeps = starling::jacobi::svd(dt, job);
  }
  return py::make_tuple(u, s, vh, sweeps);
}

constexpr const char* kBufferCapsule = "starling.kernel_buffer";   // src/lowering/buffers.py

void release_buffer(PyObject* cap) {
  void* p = PyCapsule_GetPointer(cap, kBufferCapsule);
  if (p) starling::buffers::put(p, reinterpret_cast<uintptr_t>(PyCapsule_GetContext(cap)));
}

// An uninitialised C-contiguous array; one of buffers::kMinBytes or more takes a recycled block
// (buffers.h) that goes back to the pool when the array dies, and starts `offset` bytes into it
// (a multiple of 64: the pool's large blocks start on a page boundary, which some consumers,
// Open MPI's shared-memory reductions, write into more slowly).
py::array empty(const py::object& dims, const py::object& dtype, int64_t offset) {
  const py::dtype dt = py::dtype::from_args(dtype);   // anything numpy.dtype() takes
  if (dt.attr("hasobject").cast<bool>()) {
    throw py::type_error("empty: object dtypes need initialised memory; use numpy.empty");
  }
  const py::tuple seq = PyLong_Check(dims.ptr()) ? py::make_tuple(dims) : py::tuple(dims);
  std::vector<int64_t> shape;
  size_t n = static_cast<size_t>(dt.itemsize());
  for (const auto& item : seq) {
    if (!PyLong_Check(item.ptr()) && !PyIndex_Check(item.ptr())) {
      throw py::type_error("empty: shape must hold ints, got " +
                           std::string(py::str(py::type::of(item).attr("__name__"))));
    }
    const int64_t d = PyLong_AsLongLong(py::reinterpret_steal<py::object>(
        PyNumber_Index(item.ptr())).ptr());
    if (d == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      throw py::value_error("empty: a dimension does not fit in 64 bits");
    }
    if (d < 0) throw py::value_error("empty: negative dimension in shape");
    shape.push_back(d);
    if (__builtin_mul_overflow(n, static_cast<size_t>(d), &n) ||
        n > static_cast<size_t>(PTRDIFF_MAX)) {
      throw py::value_error("empty: array is too big (its byte size overflows)");
    }
  }
  if (offset < 0 || offset % 64 != 0 || offset > (int64_t(1) << 20)) {
    throw py::value_error("empty: offset must be a multiple of 64 in [0, 1 MiB], got " +
                          std::to_string(offset));
  }
  if (n < starling::buffers::kMinBytes) return py::array(dt, shape);
  const size_t total = n + static_cast<size_t>(offset);
  void* p = starling::buffers::get(total);
  if (!p) throw std::bad_alloc();
  PyObject* cap = PyCapsule_New(p, kBufferCapsule, release_buffer);
  if (!cap) {
    starling::buffers::put(p, total);
    throw py::error_already_set();
  }
  PyCapsule_SetContext(cap, reinterpret_cast<void*>(static_cast<uintptr_t>(total)));
  return py::array(dt, shape, static_cast<char*>(p) + offset,
                   py::reinterpret_steal<py::object>(cap));
}

// A blocking MPI collective with its bookkeeping (mpi_calls.h) and its flight record.
class MpiPlan {
 public:
  MpiPlan(int kind, uintptr_t comm, uintptr_t dtype, uintptr_t op, int64_t count, int root,
          bool is_root, int64_t send_bytes, int64_t recv_bytes, int64_t check, uintptr_t check_type,
          uintptr_t check_op, int64_t board_word, int64_t key, int64_t fingerprint, int64_t tmpl)
      : tmpl_(tmpl) {
    if (!starling::mpi::bound()) throw py::value_error("MpiPlan: mpi_bind() has not succeeded");
    if (kind < starling::mpi::kAllreduce || kind > starling::mpi::kBcast) {
      throw py::value_error("MpiPlan: unknown kind " + std::to_string(kind));
    }
    if (count < 0 || count > INT32_MAX || send_bytes < 0 || recv_bytes < 0) {
      throw py::value_error("MpiPlan: count must be in [0, 2**31), got " + std::to_string(count));
    }
    p_ = starling::mpi::Plan{kind, reinterpret_cast<void*>(comm), reinterpret_cast<void*>(dtype),
                             reinterpret_cast<void*>(op), static_cast<int>(count), root,
                             is_root, send_bytes, recv_bytes, {check, -check},
                             reinterpret_cast<void*>(check_type),
                             reinterpret_cast<void*>(check_op), board_word, key, fingerprint};
  }

  // 0, or (code, flight record index) when the call did not complete: code -1 (the members'
  // calls differ) or an MPI error code.
  py::object run(py::array send, py::array recv, int64_t seq) {
    constexpr int kC = py::array::c_style;
    if (send.nbytes() != p_.send_bytes || recv.nbytes() != p_.recv_bytes ||
        !(send.flags() & kC) || !(recv.flags() & kC)) {
      throw py::value_error("MpiPlan.run: buffers of " + std::to_string(send.nbytes()) + " and " +
                            std::to_string(recv.nbytes()) + " bytes (C-contiguous required), "
                            "the plan was made for " + std::to_string(p_.send_bytes) + " and " +
                            std::to_string(p_.recv_bytes));
    }
    const void* in = send.data();
    void* out = recv.mutable_data();
    const int64_t index = starling::flight::begin(tmpl_, seq);
    int rc;
    {
      py::gil_scoped_release release;
      rc = starling::mpi::run(p_, in, out, seq);
    }
    if (rc == 0) {
      starling::flight::complete(index);
      return py::int_(0);
    }
    return py::make_tuple(rc, index);
  }

 private:
  starling::mpi::Plan p_;
  int64_t tmpl_;
};

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "Starling native runtime: hot CPU kernels (C++).";
  m.def("philox4x32_10", &philox, py::arg("counters"), py::arg("keys"),
        "Philox4x32-10 block function. counters: uint32 (n, 4); keys: uint32 (n, 2) or (1, 2). "
        "Returns uint32 (n, 4). Raises ValueError on bad shapes.");
  m.def("philox4x32_10_stream", &philox_stream, py::arg("keys"), py::arg("n_words"),
        py::arg("tag") = 0, py::arg("threads") = 0,
        "Counter-mode Philox4x32-10 stream. keys: uint32 (m, 2). Returns uint32 (m, n_words): "
        "row k, word j is word j % 4 of philox4x32_10((b & 0xffffffff, b >> 32, tag, 0), keys[k]) "
        "with b = j // 4. threads <= 0 uses all hardware threads; the result does not depend on "
        "it. Raises ValueError on bad shapes, n_words < 0 or tag outside [0, 2**32).");
  m.def("gemm", &gemm, py::arg("a"), py::arg("b"), py::arg("out"), py::arg("desc"),
        "Strided batched GEMM on the thread pool: out (rows x N, C-contiguous) = the product "
        "described by desc (an int64 array, native/gemm.h) of a and b, float32 or float64, read in "
        "place through "
        "the descriptor's element strides from each array's data pointer. Raises TypeError on "
        "dtypes, ValueError on a malformed descriptor or one that reaches outside an operand.");
  m.def("jacobi_eigh", &jacobi_eigh, py::arg("a"), py::arg("lower") = true,
        py::arg("compute_v") = true,
        "Batched cyclic Jacobi eigensolver (native/jacobi.h) on the thread pool. a: (batch, n, n) "
        "C-contiguous float32 / float64 / complex64 / complex128, n <= 64, Hermitian: only the "
        "lower (lower=True) or upper triangle is read. Returns (w, v, sweeps): eigenvalues "
        "(batch, n) ascending in the real dtype, eigenvectors (batch, n, n) as columns (None "
        "without compute_v), and the most sweeps a chunk took. A matrix with NaN / inf gives "
        "NaN. Raises TypeError on the dtype, ValueError on the shape or a non-contiguous a.");
  m.def("jacobi_svd", &jacobi_svd, py::arg("a"), py::arg("full_matrices") = true,
        py::arg("compute_uv") = true,
        "Batched one-sided Jacobi SVD (native/jacobi.h) on the thread pool. a: (batch, m, n) "
        "C-contiguous float32 / float64 / complex64 / complex128, min(m, n) <= 64, max(m, n) <= "
        "4096. Returns (u, s, vh, sweeps) shaped as numpy.linalg.svd (u, vh None without "
        "compute_uv); s descending. A matrix with NaN / inf gives NaN. Raises TypeError on the "
        "dtype, ValueError on the shape or a non-contiguous a.");
  m.def("jacobi_lanes", [](py::dtype dt) {
          py::array probe(dt, std::vector<int64_t>{0});
          return starling::jacobi::lanes(jacobi_dtype("jacobi_lanes", probe));
        }, py::arg("dtype"), "Matrices per SIMD chunk of the Jacobi kernels for a dtype.");
  m.attr("BUFFER_MIN_BYTES") = starling::buffers::kMinBytes;
  m.def("empty", &empty, py::arg("shape"), py::arg("dtype"), py::arg("offset") = 0,
        "empty(shape, dtype, offset=0): an uninitialised C-contiguous array; blocks of 1 MiB and "
        "more are recycled (native/buffers.h), so a large result allocated on every call of a "
        "loop reuses warm pages instead of faulting fresh ones in; such an array starts "
        "`offset` bytes (a multiple of 64, at most 1 MiB) into its block. Raises TypeError for "
        "object dtypes or non-int dims, ValueError for negative dims, overflowing sizes or a "
        "bad offset.");
  m.def("buffers_held_bytes", &starling::buffers::held_bytes,
        "Bytes of freed blocks the recycled-buffer pool keeps now (at most 1 GiB; none with "
        "STARLING_KEEP_FREED_MEMORY=0).");
  m.def("gemm_isa", &starling::gemm::isa, "Instruction set of the GEMM kernels in use.");
  m.def("available_cpus", &starling::pool::available_cpus,
        "CPUs this process may use: the affinity mask, capped by a cgroup CPU quota.");
  m.def("pool_size", &starling::pool::size, "Threads of the pool (the calling thread included).");
  m.def("set_pool_size", &starling::pool::set_size, py::arg("n"),
        "Sets the pool size (>= 1; the CPUs this process may use).");
  m.def("set_thread_share", &starling::pool::set_thread_share, py::arg("n"),
        "Threads a parallel call from the calling thread may use (0: the pool size).");
  m.def("set_thread_divisor", &starling::pool::set_thread_divisor, py::arg("d"),
        "Without a share set, the calling thread may use pool_size() // d threads (>= 1).");
  m.def("thread_share", &starling::pool::thread_share,
        "Threads a parallel call from the calling thread may use.");
  m.def("runtime_symbols", [] {
    py::dict d;
    d["st_parallel_for"] = reinterpret_cast<uintptr_t>(&st_parallel_for);
    d["st_scratch"] = reinterpret_cast<uintptr_t>(&st_scratch);
    d["st_sgemm"] = reinterpret_cast<uintptr_t>(&st_sgemm);
    d["st_dgemm"] = reinterpret_cast<uintptr_t>(&st_dgemm);
    d["st_buffer_get"] = reinterpret_cast<uintptr_t>(&st_buffer_get);
    d["st_buffer_put"] = reinterpret_cast<uintptr_t>(&st_buffer_put);
    return d;
  }, "Addresses of the C entry points handed to generated kernel libraries.");
  m.def("mpi_bind", [](const std::string& path) {
    std::string why;
    return starling::mpi::bind(path, &why) ? std::string() : why;
  }, py::arg("path"),
        "Looks up the MPI functions of native/mpi_calls.h in the libmpi at `path` (already "
        "loaded by mpi4py; Open MPI handles). Returns '' on success, else why not.");
  m.attr("MPI_MISMATCH") = starling::mpi::kMismatch;
  m.def("mpi_nan_extremum_op", [](bool max, bool f64) -> py::object {
    int err = 0;
    void* op = starling::mpi::nan_extremum_op(max, f64, &err);
    if (op == nullptr) {
      if (err != 0) throw py::value_error("MPI_Op_create failed with code " + std::to_string(err));
      return py::none();
    }
    return py::int_(reinterpret_cast<uintptr_t>(op));
  }, py::arg("max"), py::arg("f64"),
        "The MPI_Op handle of NumPy's maximum (max) / minimum of float32 or float64 (f64) "
        "values, NaN-propagating (native/mpi_calls.h); None before mpi_bind() succeeded.");
  m.def("mpi_set_board", [](uintptr_t words, uintptr_t win) {
    starling::mpi::set_board(reinterpret_cast<int64_t*>(words), reinterpret_cast<void*>(win));
  }, py::arg("words"), py::arg("win"),
        "The arrival board's int64 words and MPI_Win handle (0, 0: none; src/distributed/"
        "arrival.py).");
  py::class_<MpiPlan>(m, "MpiPlan",
                      "A blocking MPI collective with its bookkeeping (native/mpi_calls.h).")
      .def(py::init<int, uintptr_t, uintptr_t, uintptr_t, int64_t, int, bool, int64_t, int64_t,
                    int64_t, uintptr_t, uintptr_t, int64_t, int64_t, int64_t, int64_t>())
      .def("run", &MpiPlan::run,
           "run(send, recv, seq): 0, or (code, flight record index): code -1 when the members' "
           "calls differ, else the MPI error code. Raises ValueError on buffers of other sizes.");
  m.def("fr_configure", &starling::flight::configure, py::arg("capacity"),
        "Sets the native flight ring's capacity (native/flight_ring.h) and empties it.");
  m.def("fr_next", &starling::flight::next_index, "The next flight record index.");
  m.def("fr_take", [](int64_t index) -> py::object {
    double start;
    if (!starling::flight::take(index, &start)) return py::none();
    return py::float_(start);
  }, py::arg("index"), "Removes native record `index`; its start time, or None if gone.");
  m.def("fr_snapshot", [] {
    py::list out;
    for (const auto& r : starling::flight::snapshot()) {
      out.append(py::make_tuple(r.index, r.tmpl, r.seq, r.state, r.start,
                                r.state == starling::flight::kStarted ? py::object(py::none())
                                                                      : py::float_(r.end)));
    }
    return out;
  }, "The native records: (index, template, seq, state 0 started / 1 completed, start, end).");
  m.def("fr_clear", &starling::flight::clear, "Empties the native flight ring.");
}
