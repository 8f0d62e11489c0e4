"""The kernel launcher API (cpp/runtime.py): ``k(*inputs)`` and ``k.run(sizes, outs, *inputs)``
on the C extension Kernel type and on the ctypes fallback, against NumPy on hand-written kernels.

The test kernels follow the ABI of generated kernels: ``void k(void* const* args)`` with the
input pointers, the output pointers, then the int64 sizes pointer (NULL without sizes).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from starling import ShapeVar
from starling.core.avals import ShapedArray
from starling.lowering import cache
from starling.lowering.backends.cpp import runtime as cpp_runtime

pytestmark = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")

_SOURCE = r"""
#include <stdint.h>
#include <stddef.h>
/* out0[i] = 2 * x[i] (float32, shape (3,)); out1 = sum(x) (float64, shape ()). Checks that a
   static kernel gets a NULL sizes pointer: out1 is NaN otherwise. */
extern "C" void st_static(void* const* a) {
  const float* x = (const float*)a[0];
  float* o = (float*)a[1];
  double* s = (double*)a[2];
  double acc = 0;
  for (int i = 0; i < 3; ++i) { o[i] = 2 * x[i]; acc += x[i]; }
  s[0] = a[3] == NULL ? acc : 0.0 / 0.0;
}
/* sizes = (n, 2n): x, y float64 (n,) -> out0 = x + y (n,), out1 = [x, y] (2n,) (int64 as
   float64 cast), both read n from the sizes array. */
extern "C" void st_dynamic(void* const* a) {
  const int64_t* sz = (const int64_t*)a[4];
  const int64_t n = sz[0];
  const double* x = (const double*)a[0];
  const double* y = (const double*)a[1];
  double* o = (double*)a[2];
  int64_t* cat = (int64_t*)a[3];
  for (int64_t i = 0; i < n; ++i) { o[i] = x[i] + y[i]; cat[i] = (int64_t)x[i];
                                    cat[n + i] = (int64_t)y[i] + sz[1]; }
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    old = os.environ.get("STARLING_CACHE_DIR")
    os.environ["STARLING_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernels"))
    try:
        yield cache.load(_SOURCE, compiler=cache.find_compiler())[0]
    finally:
        if old is None:
            os.environ.pop("STARLING_CACHE_DIR", None)
        else:
            os.environ["STARLING_CACHE_DIR"] = old


@pytest.fixture(params=["extension", "ctypes"])
def mode(request, monkeypatch):
    if request.param == "extension":
        if cpp_runtime.launcher() is None:
            pytest.skip("launcher extension unavailable")
    else:
        monkeypatch.setattr(cpp_runtime, "launcher", lambda: None)
    return request.param


def _static(lib):
    return cpp_runtime.make_kernel(lib, "st_static", [np.float32],
                                   [ShapedArray((3,), np.float32), ShapedArray((), np.float64)],
                                   False)


def _dynamic(lib):
    n = ShapeVar("n", min=1)
    return cpp_runtime.make_kernel(lib, "st_dynamic", [np.float64, np.float64],
                                   [ShapedArray((n,), np.float64),
                                    ShapedArray((n * 2,), np.int64)], True, (n, n * 2))


def test_static_call_and_run_agree(lib, mode):
    k = _static(lib)
    assert (k.nin, k.nout, k.nsizes, k.name) == (1, 2, 0, "st_static")
    x = np.array([1.5, -2.0, 3.25], np.float32)
    for out in (k(x), k.run((), (None, None), x), k.run((), ((3,), ()), x)):
        np.testing.assert_array_equal(out[0], 2 * x)
        assert out[0].dtype == np.float32 and out[0].shape == (3,)
        assert out[1].shape == () and float(out[1]) == float(x.sum())
    # inputs of another dtype / strided inputs are converted, as in k(*inputs)
    xs = np.arange(6, dtype=np.float64)[::2]
    np.testing.assert_array_equal(k.run((), (None, None), xs)[0], 2 * xs.astype(np.float32))


def test_run_writes_into_given_arrays(lib, mode):
    k = _static(lib)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    o0, o1 = np.full(3, np.nan, np.float32), np.zeros((), np.float64)
    before = sys.getrefcount(o0)
    for _ in range(3):
        r0, r1 = k.run((), [o0, o1], x)
        assert r0 is o0 and r1 is o1
    del r0, r1
    assert sys.getrefcount(o0) == before
    np.testing.assert_array_equal(o0, 2 * x)
    assert float(o1) == 6.0
    # in place: the output aliases the input (elementwise: each element is read, then written)
    y = np.array([1.0, -1.0, 0.5], np.float32)
    k.run((), (y, None), y)
    np.testing.assert_array_equal(y, [2.0, -2.0, 1.0])


def test_dynamic_kernel_reads_sizes(lib, mode):
    k = _dynamic(lib)
    assert k.nsizes == 2
    rng = np.random.default_rng(0)
    for n in (0, 1, 5, 17):
        x = np.round(rng.standard_normal(n) * 10)
        y = np.round(rng.standard_normal(n) * 10)
        s, cat = k.run((n, 2 * n), (None, None), x, y)
        np.testing.assert_array_equal(s, x + y)
        assert cat.dtype == np.int64 and cat.shape == (2 * n,)
        np.testing.assert_array_equal(cat, np.concatenate([x, y + 2 * n]).astype(np.int64))
        pre = np.empty(n)
        s2, _ = k.run((np.int64(n), 2 * n), (pre, (2 * n,)), x, y)
        assert s2 is pre
        np.testing.assert_array_equal(pre, x + y)
    with pytest.raises(TypeError, match="st_dynamic takes 2 runtime sizes"):
        k(np.zeros(2), np.zeros(2))


@pytest.mark.parametrize("sizes, match", [
    ((), "sizes must be a tuple of 2 ints"),
    ((3,), "sizes must be a tuple of 2 ints"),
    ((3, 6, 1), "sizes must be a tuple of 2 ints"),
    ((-1, 6), "size 0 must be a non-negative int"),
    ((3, 6.0), "size 1 must be a non-negative int"),
    ((True, 2), "size 0 must be a non-negative int"),
    (np.array([3, 6]), "sizes must be a tuple"),
])
def test_bad_sizes(lib, mode, sizes, match):
    k = _dynamic(lib)
    with pytest.raises(TypeError, match=f"st_dynamic: {match}"):
        k.run(sizes, (None, None), np.zeros(3), np.zeros(3))


def _bad_outs():
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    unaligned = np.zeros(13, np.uint8)[1:].view(np.float32)
    return [
        ((np.zeros(3, np.float64), None), 0, "has the wrong dtype"),
        ((np.zeros(3, ">f4"), None), 0, "has the wrong dtype"),
        ((np.zeros(4, np.float32), None), 0, "has the wrong shape"),
        ((np.zeros((3, 1), np.float32), None), 0, "has the wrong number of dims"),
        ((np.zeros(6, np.float32)[::2], None), 0, "is not C-contiguous"),
        ((unaligned, None), 0, "is not aligned"),
        ((ro, None), 0, "is not writeable"),
        ((None, [0.0]), 1, "is a list"),
        ((None, (1,)), 1, "was given the shape"),
        (((4,), None), 0, "was given the shape"),
        (((3.0,), None), 0, "was given the shape"),
        ((None, 0.0), 1, "is a float"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_outs())))
def test_bad_outs_are_type_errors(lib, mode, case):
    outs, j, what = _bad_outs()[case]
    k = _static(lib)
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match=f"st_static: output {j} {what}.*expected") as info:
        k.run((), outs, x)
    msg = str(info.value)
    assert ("float32" if j == 0 else "float64") in msg
    assert ("(3,)" if j == 0 else "()") in msg


def test_bad_out_shape_for_dynamic_sizes(lib, mode):
    k = _dynamic(lib)
    x = np.zeros(4)
    with pytest.raises(TypeError, match=r"st_dynamic: output 1 has the wrong shape.*\(8,\)"):
        k.run((4, 8), (None, np.zeros(7, np.int64)), x, x)
    with pytest.raises(TypeError, match=r"st_dynamic: output 0 was given the shape \(5,\)"):
        k.run((4, 8), ((5,), None), x, x)


def test_bad_argument_counts(lib, mode):
    k = _static(lib)
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="st_static: outs must be a tuple with one entry"):
        k.run((), (None,), x)
    with pytest.raises(TypeError, match="st_static: outs must be a tuple"):
        k.run((), None, x)
    with pytest.raises(TypeError, match="st_static"):
        k.run((), (None, None))
    with pytest.raises(TypeError, match="st_static"):
        k.run((), (None, None), x, x)
    with pytest.raises(TypeError, match="st_static: expected 1 inputs"):
        k(x, x)


def test_symbolic_output_dim_must_be_a_size_parameter(lib):
    n = ShapeVar("n")
    with pytest.raises(ValueError, match="not one of the kernel's size parameters"):
        cpp_runtime.make_kernel(lib, "st_dynamic", [np.float64, np.float64],
                                [ShapedArray((n,), np.float64),
                                 ShapedArray((n * 2,), np.int64)], False, (n,))


def test_call_rejects_keywords(lib, mode):
    k = _static(lib)
    with pytest.raises(TypeError):
        k(x=np.ones(3, np.float32))
