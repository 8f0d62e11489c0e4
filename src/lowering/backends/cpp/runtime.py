"""The per-call path of cpp kernels: a tiny CPython extension that launches a kernel.

Kernel ABI: every kernel is ``extern "C" void k(void* const* args)`` where ``args`` holds the
``nin`` input data pointers, then the ``nout`` output data pointers, then ONE trailing
``const int64_t*`` pointing at the kernel's size values (its size parameters, e.g. the values of
the shape variables a kernel compiled for dynamic shapes reads at entry; NULL for a kernel
without size parameters). Buffers are C-contiguous and aligned, of the kernel's dtypes.

Launcher API (the extension's ``Kernel`` type and ``CtypesKernel`` alike), built by
``make_kernel(lib, name, in_dtypes, out_avals, release_gil, size_exprs=())``:

* ``k(*inputs)`` -> tuple of newly allocated outputs (kernels without size parameters only;
  a kernel with size parameters raises TypeError). This is the hot path: the input checks
  (dtype, contiguity, alignment; converting only when needed), the output allocation and the
  call happen in C, releasing the GIL for large kernels.
* ``k.run(sizes, outs, *inputs)`` -> tuple of outputs. ``sizes``: a tuple of ``k.nsizes``
  non-negative ints (Python or NumPy), passed to the kernel as an int64 array. ``outs``: one
  entry per output: None (allocate; symbolic dims take their value from ``sizes``), a tuple
  of ints (allocate; must equal the output's shape for these sizes), or a NumPy array to write
  into, which must have the output's dtype (native byte order), that shape, and be
  C-contiguous, aligned and writeable. A wrong entry raises TypeError naming the kernel, the
  output index, what was wrong and what is expected. Writing into an array that aliases an
  input is only valid where the kernel reads each element before writing it at the same
  position (elementwise kernels); the caller decides that.
* Attributes: ``name``, ``nin``, ``nout``, ``nsizes``.

Large outputs come from Starling's pool of recycled buffers (warm pages, native/buffers.h). The
extension is compiled once per machine (Python / NumPy headers, same disk cache as the
kernels). When it
cannot be built (no Python headers) ``launcher()`` returns None and kernels are launched
through ctypes instead (``CtypesKernel``, same API, slower).
"""
from __future__ import annotations

import ctypes
import functools
import importlib.machinery
import importlib.util
import logging
import sys
import sysconfig

import numpy as np

from .... import _native
from ... import cache
from ...runtime.native import empty

logger = logging.getLogger("starling.lowering")

_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <structmember.h>
#include <numpy/arrayobject.h>
#include <string.h>
#include <stdlib.h>

typedef void (*st_kernel_fn)(void* const*);

/* Large outputs come from Starling's recycled-buffer pool (native/buffers.h: blocks of 1 MiB
   and more go back to it when their array dies, so a compiled function called in a loop reuses
   warm pages instead of a fresh mapping + page faults per call). Its entry points are handed
   over by set_buffers right after this module is loaded; until then (st_pool_min at its
   maximum) every output is NumPy's. */
typedef void* (*st_buf_get_t)(size_t);
typedef void (*st_buf_put_t)(void*, size_t);
static st_buf_get_t st_pool_get = NULL;
static st_buf_put_t st_pool_put = NULL;
static size_t st_pool_min = (size_t)-1;   /* smallest recycled block (buffers::kMinBytes) */

static void st_capsule_free(PyObject* cap) {
  void* p = PyCapsule_GetPointer(cap, "starling.kernel_buffer");
  size_t size = (size_t)(uintptr_t)PyCapsule_GetContext(cap);
  if (p) st_pool_put(p, size);
}

static PyObject* st_new_output(int nd, npy_intp* dims, int type) {
  PyArray_Descr* d = PyArray_DescrFromType(type);
  if (!d) return NULL;
  size_t n = (size_t)PyDataType_ELSIZE(d);
  for (int i = 0; i < nd; ++i) n *= (size_t)dims[i];
  if (n < st_pool_min) {
    Py_DECREF(d);
    return PyArray_SimpleNew(nd, dims, type);
  }
  void* data = st_pool_get(n);
  if (!data) { Py_DECREF(d); return PyErr_NoMemory(); }
  PyObject* arr = PyArray_NewFromDescr(&PyArray_Type, d, nd, dims, NULL, data,
                                       NPY_ARRAY_CARRAY, NULL);
  if (!arr) { st_pool_put(data, n); return NULL; }
  PyObject* cap = PyCapsule_New(data, "starling.kernel_buffer", st_capsule_free);
  if (!cap) { Py_DECREF(arr); st_pool_put(data, n); return NULL; }
  PyCapsule_SetContext(cap, (void*)(uintptr_t)n);
  if (PyArray_SetBaseObject((PyArrayObject*)arr, cap) < 0) { Py_DECREF(arr); return NULL; }
  return arr;
}
#define ST_MAX_ARGS 512
#define ST_MAX_ND 32
#define ST_MAX_SIZES 256

/* A kernel is `void fn(void* const* args)` with args = the nin input pointers, the nout output
   pointers, then one `const int64_t*` to the kernel's size values (NULL for static kernels). */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  st_kernel_fn fn;
  int nin, nout, nsizes, release;
  int in_types[ST_MAX_ARGS];
  int out_types[ST_MAX_ARGS];
  int out_nd[ST_MAX_ARGS];
  npy_intp* out_dims;   /* per output, its dims: >= 0 a static size, -1 - i the size sizes[i] */
  PyObject* name;
} KernelObject;

static void Kernel_dealloc(KernelObject* self) {
  PyMem_Free(self->out_dims);
  Py_XDECREF(self->name);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* Input data pointers into ptrs[0..nin); converted copies go to tmp (caller releases them). */
static int st_inputs(KernelObject* self, PyObject* const* in, void** ptrs, PyObject** tmp,
                     int* ntmp) {
  for (int i = 0; i < self->nin; ++i) {
    PyObject* o = in[i];
    PyArrayObject* a = (PyArrayObject*)o;
    if (!(PyArray_CheckExact(o) && PyArray_TYPE(a) == self->in_types[i] &&
          PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) && PyArray_ISNOTSWAPPED(a))) {
      PyArray_Descr* d = PyArray_DescrFromType(self->in_types[i]);
      a = (PyArrayObject*)PyArray_FromAny(o, d, 0, 0, NPY_ARRAY_CARRAY_RO | NPY_ARRAY_FORCECAST,
                                          NULL);
      if (!a) return -1;
      tmp[(*ntmp)++] = (PyObject*)a;
    }
    ptrs[i] = PyArray_DATA(a);
  }
  return 0;
}

static void st_launch(KernelObject* self, void** ptrs) {
  if (self->release) {
    Py_BEGIN_ALLOW_THREADS
    self->fn(ptrs);
    Py_END_ALLOW_THREADS
  } else {
    self->fn(ptrs);
  }
}

/* k(*inputs): vectorcall (no argument tuple), the hot path. */
static PyObject* Kernel_vcall(PyObject* obj, PyObject* const* args, size_t nargsf,
                              PyObject* kwnames) {
  KernelObject* self = (KernelObject*)obj;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if ((kwnames && PyTuple_GET_SIZE(kwnames)) || n != self->nin) {
    PyErr_Format(PyExc_TypeError, "starling kernel %U: expected %d inputs (positional), "
                 "got %zd", self->name, self->nin, n);
    return NULL;
  }
  if (self->nsizes) {
    PyErr_Format(PyExc_TypeError, "starling kernel %U takes %d runtime sizes; launch it with "
                 "k.run(sizes, outs, *inputs)", self->name, self->nsizes);
    return NULL;
  }
  void* ptrs[ST_MAX_ARGS + 1];
  PyObject* tmp[ST_MAX_ARGS];
  int ntmp = 0;
  PyObject* result = NULL;
  if (st_inputs(self, args, ptrs, tmp, &ntmp) < 0) goto done;
  result = PyTuple_New(self->nout);
  if (!result) goto done;
  {
    npy_intp* dims = self->out_dims;
    for (int j = 0; j < self->nout; ++j) {
      PyObject* out = st_new_output(self->out_nd[j], dims, self->out_types[j]);
      if (!out) { Py_CLEAR(result); goto done; }
      dims += self->out_nd[j];
      ptrs[self->nin + j] = PyArray_DATA((PyArrayObject*)out);
      PyTuple_SET_ITEM(result, j, out);
    }
  }
  ptrs[self->nin + self->nout] = NULL;
  st_launch(self, ptrs);
done:
  for (int t = 0; t < ntmp; ++t) Py_DECREF(tmp[t]);
  return result;
}

static PyObject* st_shape_str(int nd, const npy_intp* dims) {
  PyObject* t = PyTuple_New(nd);
  if (!t) return NULL;
  for (int i = 0; i < nd; ++i) PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(dims[i]));
  PyObject* s = PyObject_Repr(t);
  Py_DECREF(t);
  return s;
}

/* TypeError "starling kernel NAME: output J <what> (expected dtype D, shape S)". */
static void st_out_error(KernelObject* self, int j, const char* what, int nd,
                         const npy_intp* dims) {
  PyObject* shape = st_shape_str(nd, dims);
  PyArray_Descr* d = PyArray_DescrFromType(self->out_types[j]);
  if (shape && d)
    PyErr_Format(PyExc_TypeError, "starling kernel %U: output %d %s (expected a C-contiguous, "
                 "aligned, writeable %S array of shape %U, a shape tuple or None)", self->name,
                 j, what, (PyObject*)d, shape);
  Py_XDECREF(shape);
  Py_XDECREF(d);
}

/* The output array for entry `o` of outs: None / shape tuple (allocated) / ndarray (checked). */
static PyObject* st_run_output(KernelObject* self, int j, PyObject* o, const npy_intp* want) {
  int nd = self->out_nd[j];
  if (o == Py_None) return st_new_output(nd, (npy_intp*)want, self->out_types[j]);
  if (PyTuple_Check(o)) {
    int ok = PyTuple_GET_SIZE(o) == nd;
    for (int i = 0; ok && i < nd; ++i) {
      PyObject* x = PyTuple_GET_ITEM(o, i);
      Py_ssize_t v = PyLong_Check(x) ? PyLong_AsSsize_t(x) : -1;
      if (v == -1 && PyErr_Occurred()) PyErr_Clear();
      ok = (v == want[i]);
    }
    if (!ok) {
      PyObject* r = PyObject_Repr(o);
      if (!r) return NULL;
      char buf[256];
      snprintf(buf, sizeof buf, "was given the shape %s", PyUnicode_AsUTF8(r));
      Py_DECREF(r);
      st_out_error(self, j, buf, nd, want);
      return NULL;
    }
    return st_new_output(nd, (npy_intp*)want, self->out_types[j]);
  }
  if (!PyArray_Check(o)) {
    char buf[160];
    snprintf(buf, sizeof buf, "is a %.100s", Py_TYPE(o)->tp_name);
    st_out_error(self, j, buf, nd, want);
    return NULL;
  }
  PyArrayObject* a = (PyArrayObject*)o;
  const char* bad = NULL;
  if (PyArray_TYPE(a) != self->out_types[j] || !PyArray_ISNOTSWAPPED(a))
    bad = "has the wrong dtype";
  else if (PyArray_NDIM(a) != nd)
    bad = "has the wrong number of dims";
  else {
    for (int i = 0; i < nd; ++i)
      if (PyArray_DIMS(a)[i] != want[i]) { bad = "has the wrong shape"; break; }
  }
  if (!bad && !PyArray_IS_C_CONTIGUOUS(a)) bad = "is not C-contiguous";
  if (!bad && !PyArray_ISALIGNED(a)) bad = "is not aligned";
  if (!bad && !PyArray_ISWRITEABLE(a)) bad = "is not writeable";
  if (bad) {
    PyObject* got = st_shape_str(PyArray_NDIM(a), PyArray_DIMS(a));
    if (!got) return NULL;
    char buf[300];
    snprintf(buf, sizeof buf, "%s (got %s array of shape %s)", bad,
             PyArray_DESCR(a)->typeobj->tp_name, PyUnicode_AsUTF8(got));
    Py_DECREF(got);
    st_out_error(self, j, buf, nd, want);
    return NULL;
  }
  Py_INCREF(o);
  return o;
}

static PyObject* Kernel_run(KernelObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 + self->nin) {
    PyErr_Format(PyExc_TypeError, "starling kernel %U: run(sizes, outs, *inputs) takes %d "
                 "inputs, got %zd arguments", self->name, self->nin, nargs);
    return NULL;
  }
  PyObject *sizes = args[0], *outs = args[1];
  if (!(PyTuple_Check(sizes) || PyList_Check(sizes)) ||
      PySequence_Fast_GET_SIZE(sizes) != self->nsizes) {
    PyErr_Format(PyExc_TypeError, "starling kernel %U: sizes must be a tuple of %d ints, got "
                 "%R", self->name, self->nsizes, sizes);
    return NULL;
  }
  if (!(PyTuple_Check(outs) || PyList_Check(outs)) ||
      PySequence_Fast_GET_SIZE(outs) != self->nout) {
    PyErr_Format(PyExc_TypeError, "starling kernel %U: outs must be a tuple with one entry "
                 "(None, a shape tuple or an array) per output (%d), got %R", self->name,
                 self->nout, outs);
    return NULL;
  }
  int64_t sz[ST_MAX_SIZES + 1];
  for (int i = 0; i < self->nsizes; ++i) {
    PyObject* o = PySequence_Fast_GET_ITEM(sizes, i);
    long long v = -1;
    if (!PyBool_Check(o) && PyIndex_Check(o)) {
      PyObject* ix = PyNumber_Index(o);
      if (ix) { v = PyLong_AsLongLong(ix); Py_DECREF(ix); }
    }
    if (v < 0) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "starling kernel %U: size %d must be a non-negative int, "
                   "got %R", self->name, i, o);
      return NULL;
    }
    sz[i] = (int64_t)v;
  }
  void* ptrs[ST_MAX_ARGS + 1];
  PyObject* tmp[ST_MAX_ARGS];
  int ntmp = 0;
  PyObject* result = NULL;
  if (st_inputs(self, args + 2, ptrs, tmp, &ntmp) < 0) goto done;
  result = PyTuple_New(self->nout);
  if (!result) goto done;
  {
    const npy_intp* dims = self->out_dims;
    npy_intp want[ST_MAX_ND];
    for (int j = 0; j < self->nout; ++j) {
      for (int i = 0; i < self->out_nd[j]; ++i)
        want[i] = dims[i] >= 0 ? dims[i] : (npy_intp)sz[-1 - dims[i]];
      dims += self->out_nd[j];
      PyObject* out = st_run_output(self, j, PySequence_Fast_GET_ITEM(outs, j), want);
      if (!out) { Py_CLEAR(result); goto done; }
      ptrs[self->nin + j] = PyArray_DATA((PyArrayObject*)out);
      PyTuple_SET_ITEM(result, j, out);
    }
  }
  ptrs[self->nin + self->nout] = self->nsizes ? (void*)sz : NULL;
  st_launch(self, ptrs);
done:
  for (int t = 0; t < ntmp; ++t) Py_DECREF(tmp[t]);
  return result;
}

static PyMethodDef Kernel_methods[] = {
  {"run", (PyCFunction)(void (*)(void))Kernel_run, METH_FASTCALL,
   "run(sizes, outs, *inputs) -> tuple of outputs"},
  {NULL, NULL, 0, NULL}};

static PyMemberDef Kernel_members[] = {
  {"name", T_OBJECT, offsetof(KernelObject, name), READONLY, "kernel name"},
  {"nin", T_INT, offsetof(KernelObject, nin), READONLY, "number of inputs"},
  {"nout", T_INT, offsetof(KernelObject, nout), READONLY, "number of outputs"},
  {"nsizes", T_INT, offsetof(KernelObject, nsizes), READONLY, "number of runtime sizes"},
  {NULL, 0, 0, 0, NULL}};

static PyTypeObject KernelType = {PyVarObject_HEAD_INIT(NULL, 0)};

static PyObject* make_kernel(PyObject* self, PyObject* args) {
  unsigned long long addr;
  PyObject *in_types, *out_specs, *name;
  int release, nsizes;
  if (!PyArg_ParseTuple(args, "KO!O!pUi", &addr, &PyTuple_Type, &in_types, &PyTuple_Type,
                        &out_specs, &release, &name, &nsizes))
    return NULL;
  Py_ssize_t nin = PyTuple_GET_SIZE(in_types), nout = PyTuple_GET_SIZE(out_specs);
  if (nin + nout > ST_MAX_ARGS || nsizes < 0 || nsizes > ST_MAX_SIZES) {
    PyErr_SetString(PyExc_ValueError, "starling kernel: too many arguments or sizes");
    return NULL;
  }
  KernelObject* k = PyObject_New(KernelObject, &KernelType);
  if (!k) return NULL;
  k->vectorcall = Kernel_vcall;
  k->fn = (st_kernel_fn)(uintptr_t)addr;
  k->nin = (int)nin;
  k->nout = (int)nout;
  k->nsizes = nsizes;
  k->release = release;
  k->out_dims = NULL;
  Py_INCREF(name);
  k->name = name;
  Py_ssize_t total = 0;
  for (Py_ssize_t i = 0; i < nin; ++i)
    k->in_types[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(in_types, i));
  for (Py_ssize_t j = 0; j < nout; ++j) {
    PyObject* spec = PyTuple_GET_ITEM(out_specs, j);
    k->out_types[j] = (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    k->out_nd[j] = (int)PyTuple_GET_SIZE(PyTuple_GET_ITEM(spec, 1));
    if (k->out_nd[j] > ST_MAX_ND) {
      PyErr_SetString(PyExc_ValueError, "starling kernel: too many output dims");
      Py_DECREF(k);
      return NULL;
    }
    total += k->out_nd[j];
  }
  k->out_dims = (npy_intp*)PyMem_Malloc(sizeof(npy_intp) * (total + 1));
  npy_intp* d = k->out_dims;
  for (Py_ssize_t j = 0; j < nout; ++j) {
    PyObject* shape = PyTuple_GET_ITEM(PyTuple_GET_ITEM(out_specs, j), 1);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); ++i) {
      npy_intp v = (npy_intp)PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
      if (v < -nsizes) {
        PyErr_SetString(PyExc_ValueError, "starling kernel: output dim refers to a missing "
                        "size");
        Py_DECREF(k);
        return NULL;
      }
      *d++ = v;
    }
  }
  if (PyErr_Occurred()) { Py_DECREF(k); return NULL; }
  return (PyObject*)k;
}

/* set_buffers(get_addr, put_addr, min_bytes): the recycled-buffer pool's entry points and its
   smallest recycled block (native/buffers.h). */
static PyObject* st_set_buffers(PyObject* self, PyObject* args) {
  unsigned long long get, put, min_bytes;
  if (!PyArg_ParseTuple(args, "KKK", &get, &put, &min_bytes)) return NULL;
  st_pool_get = (st_buf_get_t)(uintptr_t)get;
  st_pool_put = (st_buf_put_t)(uintptr_t)put;
  st_pool_min = (size_t)min_bytes;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
  {"make_kernel", make_kernel, METH_VARARGS,
   "make_kernel(addr, in_types, out_specs, release, name, nsizes)"},
  {"set_buffers", st_set_buffers, METH_VARARGS, "set_buffers(get_addr, put_addr, min_bytes)"},
  {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_starling_launcher", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit__starling_launcher(void) {
  import_array();
  KernelType.tp_name = "_starling_launcher.Kernel";
  KernelType.tp_basicsize = sizeof(KernelObject);
  KernelType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  KernelType.tp_vectorcall_offset = offsetof(KernelObject, vectorcall);
  KernelType.tp_dealloc = (destructor)Kernel_dealloc;
  KernelType.tp_call = PyVectorcall_Call;
  KernelType.tp_methods = Kernel_methods;
  KernelType.tp_members = Kernel_members;
  if (PyType_Ready(&KernelType) < 0) return NULL;
  return PyModule_Create(&moddef);
}
"""


@functools.lru_cache(maxsize=None)
def launcher():
    """The compiled launcher module, or None when it cannot be built here."""
    compiler = cache.find_compiler()
    if compiler is None:
        return None
    inc = sysconfig.get_paths().get("include")
    try:
        source = _SOURCE + f"\n/* python {sys.version} numpy {np.__version__} */\n"
        _, path = cache.load(source, compiler=compiler, tag="launcher",
                             flags=("-O2", "-fPIC", "-shared", "-w", "-x", "c++"),
                             extra_args=(f"-I{inc}", f"-I{np.get_include()}"),
                             symbols=("PyInit__starling_launcher",))
        loader = importlib.machinery.ExtensionFileLoader("_starling_launcher", path)
        spec = importlib.util.spec_from_file_location("_starling_launcher", path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        sym = _native.runtime_symbols()
        module.set_buffers(sym["st_buffer_get"], sym["st_buffer_put"], _native.BUFFER_MIN_BYTES)
        return module
    except Exception as e:  # noqa: BLE001  (any failure: use the ctypes path)
        logger.info("starling.lowering: native kernel launcher unavailable (%s); using ctypes",
                    str(e).splitlines()[0] if str(e) else type(e).__name__)
        return None


class CtypesKernel:
    """Launches a kernel through ctypes (used when the launcher extension is unavailable);
    the same API as the extension's Kernel type (see the module docstring)."""

    def __init__(self, fn, in_dtypes, out_specs, name="kernel", nsizes=0):
        self.fn = fn
        self.in_dtypes = in_dtypes
        self.out_specs = out_specs      # (dtype, dims): dim >= 0 static, -1 - i is sizes[i]
        self.name = name
        self.nin, self.nout, self.nsizes = len(in_dtypes), len(out_specs), nsizes
        self.argv = ctypes.c_void_p * (len(in_dtypes) + len(out_specs) + 1)

    def _inputs(self, bufs):
        if len(bufs) != self.nin:
            raise TypeError(f"starling kernel {self.name}: expected {self.nin} inputs, got "
                            f"{len(bufs)}")
        return [np.ascontiguousarray(b, dtype=dt) for b, dt in zip(bufs, self.in_dtypes)]

    def __call__(self, *bufs):
        if self.nsizes:
            raise TypeError(f"starling kernel {self.name} takes {self.nsizes} runtime sizes; "
                            "launch it with k.run(sizes, outs, *inputs)")
        ins = self._inputs(bufs)
        outs = tuple(empty(shape, dt) for dt, shape in self.out_specs)
        ptrs = self.argv(*[a.ctypes.data for a in ins], *[o.ctypes.data for o in outs], None)
        self.fn(ptrs)
        return outs

    def run(self, sizes, outs, *bufs):
        """``run(sizes, outs, *inputs)`` -> tuple of outputs (see the module docstring)."""
        name = self.name
        if not isinstance(sizes, (tuple, list)) or len(sizes) != self.nsizes:
            raise TypeError(f"starling kernel {name}: sizes must be a tuple of {self.nsizes} "
                            f"ints, got {sizes!r}")
        for i, v in enumerate(sizes):
            if type(v) is bool or not isinstance(v, (int, np.integer)) or v < 0:
                raise TypeError(f"starling kernel {name}: size {i} must be a non-negative int, "
                                f"got {v!r}")
        if not isinstance(outs, (tuple, list)) or len(outs) != self.nout:
            raise TypeError(f"starling kernel {name}: outs must be a tuple with one entry (None, "
                            f"a shape tuple or an array) per output ({self.nout}), got {outs!r}")
        ins = self._inputs(bufs)
        arrays = []
        for j, ((dt, dims), o) in enumerate(zip(self.out_specs, outs)):
            want = tuple(d if d >= 0 else int(sizes[-1 - d]) for d in dims)
            arrays.append(_checked_output(name, j, o, dt, want))
        sz = np.array(sizes, dtype=np.int64) if self.nsizes else None
        ptrs = self.argv(*[a.ctypes.data for a in ins], *[o.ctypes.data for o in arrays],
                         None if sz is None else sz.ctypes.data)
        self.fn(ptrs)
        return tuple(arrays)


def _checked_output(name, j, o, dt, want):
    def bad(what):
        return TypeError(f"starling kernel {name}: output {j} {what} (expected a C-contiguous, "
                         f"aligned, writeable {dt} array of shape {want}, a shape tuple or None)")
    if o is None:
        return empty(want, dt)
    if type(o) is tuple:
        if o != want or not all(type(d) is int for d in o):
            raise bad(f"was given the shape {o!r}")
        return empty(want, dt)
    if not isinstance(o, np.ndarray):
        raise bad(f"is a {type(o).__name__}")
    problem = None
    if o.dtype != dt or not o.dtype.isnative:
        problem = "has the wrong dtype"
    elif o.ndim != len(want):
        problem = "has the wrong number of dims"
    elif o.shape != want:
        problem = "has the wrong shape"
    elif not o.flags.c_contiguous:
        problem = "is not C-contiguous"
    elif not o.flags.aligned:
        problem = "is not aligned"
    elif not o.flags.writeable:
        problem = "is not writeable"
    if problem:
        raise bad(f"{problem} (got {o.dtype} array of shape {o.shape})")
    return o


def _out_dims(shape, size_exprs):
    """Output dims for the launcher: ints, or ``-1 - i`` for the dim equal to size slot i."""
    out = []
    for d in shape:
        if isinstance(d, (int, np.integer)):
            out.append(int(d))
            continue
        e = getattr(d, "expr", d)
        try:
            out.append(-1 - size_exprs.index(e))
        except ValueError:
            raise ValueError(f"kernel output dim {d} is not one of the kernel's size "
                             f"parameters {list(size_exprs)}") from None
    return tuple(out)


def make_kernel(lib, name, in_dtypes, out_avals, release_gil, size_exprs=()):
    """A launcher running kernel ``name`` of ``lib`` (see the module docstring for its API).

    ``size_exprs``: the kernel's size parameters (sympy expressions or DimExprs, in the order of
    the sizes array); every symbolic dim of ``out_avals`` must be one of them.
    Raises ValueError for a symbolic output dim that is not a size parameter.
    """
    fn = getattr(lib, name)
    exprs = [getattr(e, "expr", e) for e in size_exprs]
    specs = [(np.dtype(a.dtype), _out_dims(a.shape, exprs)) for a in out_avals]
    mod = launcher()
    if mod is not None:
        addr = ctypes.cast(fn, ctypes.c_void_p).value
        return mod.make_kernel(addr, tuple(np.dtype(d).num for d in in_dtypes),
                               tuple((dt.num, dims) for dt, dims in specs), bool(release_gil),
                               name, len(exprs))
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p]
    return CtypesKernel(fn, [np.dtype(d) for d in in_dtypes], specs, name, len(exprs))
