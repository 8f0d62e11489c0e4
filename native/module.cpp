// starling._native: runtime helpers and hot CPU kernels exposed to Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include "philox.h"

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
  if (threads <= 0) {
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  const int64_t m = keys.shape(0);
  py::array_t<uint32_t> out({m, n_words});
  {
    py::gil_scoped_release release;
    starling::philox4x32_10_stream(keys.data(), m, static_cast<uint32_t>(tag), out.mutable_data(),
                                   n_words, threads);
  }
  return out;
}

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
}
