// starling._native: runtime helpers and hot CPU kernels exposed to Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

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

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "Starling native runtime: hot CPU kernels (C++).";
  m.def("philox4x32_10", &philox, py::arg("counters"), py::arg("keys"),
        "Philox4x32-10 block function. counters: uint32 (n, 4); keys: uint32 (n, 2) or (1, 2). "
        "Returns uint32 (n, 4). Raises ValueError on bad shapes.");
}
