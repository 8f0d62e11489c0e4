"""The per-call path of cpp kernels: a tiny CPython extension that launches a kernel.

``Kernel(fn_address, in_typenums, out_specs, release_gil)`` is a callable taking the input
buffers (NumPy arrays or scalars) and returning a tuple of freshly allocated outputs. It checks
each input's dtype / contiguity in C (converting only when needed), allocates the outputs,
collects the data pointers and calls the kernel, releasing the GIL for large kernels: about a
tenth of what the same steps cost through ctypes.

The extension is compiled once per machine (Python / NumPy headers, same disk cache as the
kernels). When it cannot be built (no Python headers) ``launcher()`` returns None and the
backend launches kernels through ctypes instead (``CtypesKernel``).
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

from .. import cache

logger = logging.getLogger("starling.lowering")

_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>

typedef void (*st_kernel_fn)(void* const*);

/* A small pool of large output buffers. Outputs >= ST_POOL_MIN bytes are allocated here and
   returned to the pool when their array dies, so a compiled function called in a loop reuses
   warm pages instead of paying a fresh mmap + page faults per call (glibc maps blocks this
   large on every malloc). Protected by the GIL. */
#define ST_POOL_MIN ((size_t)1 << 20)
#define ST_POOL_SLOTS 16
#define ST_POOL_MAX_BYTES ((size_t)1 << 30)
static struct { size_t size; void* ptr; } st_pool[ST_POOL_SLOTS];
static int st_npool = 0;
static size_t st_pool_bytes = 0;

static void* st_pool_get(size_t size) {
  for (int i = st_npool - 1; i >= 0; --i) {
    if (st_pool[i].size == size) {
      void* p = st_pool[i].ptr;
      st_pool[i] = st_pool[--st_npool];
      st_pool_bytes -= size;
      return p;
    }
  }
  void* p = NULL;
  size_t align = size >= ((size_t)4 << 20) ? ((size_t)2 << 20) : 64;
  if (posix_memalign(&p, align, size) != 0) return NULL;
#ifdef MADV_HUGEPAGE
  if (size >= ((size_t)4 << 20)) madvise(p, size, MADV_HUGEPAGE);
#endif
  return p;
}

static void st_pool_put(void* p, size_t size) {
  if (st_pool_bytes + size > ST_POOL_MAX_BYTES || size > ST_POOL_MAX_BYTES / 2) {
    free(p);
    return;
  }
  if (st_npool == ST_POOL_SLOTS) {  /* evict the oldest entry */
    free(st_pool[0].ptr);
    st_pool_bytes -= st_pool[0].size;
    memmove(&st_pool[0], &st_pool[1], sizeof(st_pool[0]) * (ST_POOL_SLOTS - 1));
    --st_npool;
  }
  st_pool[st_npool].size = size;
  st_pool[st_npool].ptr = p;
  ++st_npool;
  st_pool_bytes += size;
}

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
  if (n < ST_POOL_MIN) {
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

typedef struct {
  PyObject_HEAD
  st_kernel_fn fn;
  int nin, nout, release;
  int in_types[ST_MAX_ARGS];
  int out_types[ST_MAX_ARGS];
  int out_nd[ST_MAX_ARGS];
  npy_intp* out_dims;
} KernelObject;

static void Kernel_dealloc(KernelObject* self) {
  PyMem_Free(self->out_dims);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* Kernel_call(KernelObject* self, PyObject* args, PyObject* kw) {
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n != self->nin) {
    PyErr_Format(PyExc_TypeError, "starling kernel: expected %d inputs, got %zd", self->nin, n);
    return NULL;
  }
  void* ptrs[ST_MAX_ARGS];
  PyObject* tmp[ST_MAX_ARGS];
  int ntmp = 0;
  PyObject* result = NULL;
  for (int i = 0; i < self->nin; ++i) {
    PyObject* o = PyTuple_GET_ITEM(args, i);
    PyArrayObject* a = (PyArrayObject*)o;
    if (!(PyArray_CheckExact(o) && PyArray_TYPE(a) == self->in_types[i] &&
          PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) && PyArray_ISNOTSWAPPED(a))) {
      PyArray_Descr* d = PyArray_DescrFromType(self->in_types[i]);
      a = (PyArrayObject*)PyArray_FromAny(o, d, 0, 0, NPY_ARRAY_CARRAY_RO | NPY_ARRAY_FORCECAST,
                                          NULL);
      if (!a) goto done;
      tmp[ntmp++] = (PyObject*)a;
    }
    ptrs[i] = PyArray_DATA(a);
  }
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
  if (self->release) {
    Py_BEGIN_ALLOW_THREADS
    self->fn(ptrs);
    Py_END_ALLOW_THREADS
  } else {
    self->fn(ptrs);
  }
done:
  for (int t = 0; t < ntmp; ++t) Py_DECREF(tmp[t]);
  return result;
}

static PyTypeObject KernelType = {PyVarObject_HEAD_INIT(NULL, 0)};

static PyObject* make_kernel(PyObject* self, PyObject* args) {
  unsigned long long addr;
  PyObject *in_types, *out_specs;
  int release;
  if (!PyArg_ParseTuple(args, "KO!O!p", &addr, &PyTuple_Type, &in_types, &PyTuple_Type,
                        &out_specs, &release))
    return NULL;
  Py_ssize_t nin = PyTuple_GET_SIZE(in_types), nout = PyTuple_GET_SIZE(out_specs);
  if (nin + nout > ST_MAX_ARGS) {
    PyErr_SetString(PyExc_ValueError, "starling kernel: too many arguments");
    return NULL;
  }
  KernelObject* k = PyObject_New(KernelObject, &KernelType);
  if (!k) return NULL;
  k->fn = (st_kernel_fn)(uintptr_t)addr;
  k->nin = (int)nin;
  k->nout = (int)nout;
  k->release = release;
  k->out_dims = NULL;
  Py_ssize_t total = 0;
  for (Py_ssize_t i = 0; i < nin; ++i)
    k->in_types[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(in_types, i));
  for (Py_ssize_t j = 0; j < nout; ++j) {
    PyObject* spec = PyTuple_GET_ITEM(out_specs, j);
    k->out_types[j] = (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    k->out_nd[j] = (int)PyTuple_GET_SIZE(PyTuple_GET_ITEM(spec, 1));
    total += k->out_nd[j];
  }
  k->out_dims = (npy_intp*)PyMem_Malloc(sizeof(npy_intp) * (total + 1));
  npy_intp* d = k->out_dims;
  for (Py_ssize_t j = 0; j < nout; ++j) {
    PyObject* shape = PyTuple_GET_ITEM(PyTuple_GET_ITEM(out_specs, j), 1);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); ++i)
      *d++ = (npy_intp)PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
  }
  if (PyErr_Occurred()) { Py_DECREF(k); return NULL; }
  return (PyObject*)k;
}

static PyMethodDef methods[] = {
  {"make_kernel", make_kernel, METH_VARARGS, "make_kernel(addr, in_types, out_specs, release)"},
  {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_starling_launcher", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit__starling_launcher(void) {
  import_array();
  KernelType.tp_name = "_starling_launcher.Kernel";
  KernelType.tp_basicsize = sizeof(KernelObject);
  KernelType.tp_flags = Py_TPFLAGS_DEFAULT;
  KernelType.tp_dealloc = (destructor)Kernel_dealloc;
  KernelType.tp_call = (ternaryfunc)Kernel_call;
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
        path = cache.build(source, compiler=compiler, tag="launcher",
                           flags=("-O2", "-fPIC", "-shared", "-w", "-x", "c++"),
                           extra_args=(f"-I{inc}", f"-I{np.get_include()}"))
        loader = importlib.machinery.ExtensionFileLoader("_starling_launcher", path)
        spec = importlib.util.spec_from_file_location("_starling_launcher", path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    except Exception as e:  # noqa: BLE001  (any failure: use the ctypes path)
        logger.info("starling.lowering: native kernel launcher unavailable (%s); using ctypes",
                    str(e).splitlines()[0] if str(e) else type(e).__name__)
        return None


class CtypesKernel:
    """Launches a kernel through ctypes (used when the launcher extension is unavailable)."""

    def __init__(self, fn, in_dtypes, out_specs):
        self.fn = fn
        self.in_dtypes = in_dtypes
        self.out_specs = out_specs
        self.argv = ctypes.c_void_p * (len(in_dtypes) + len(out_specs))

    def __call__(self, *bufs):
        ins = [np.ascontiguousarray(b, dtype=dt) for b, dt in zip(bufs, self.in_dtypes)]
        outs = tuple(np.empty(shape, dt) for dt, shape in self.out_specs)
        ptrs = self.argv(*[a.ctypes.data for a in ins], *[o.ctypes.data for o in outs])
        self.fn(ptrs)
        return outs


def make_kernel(lib, name, in_dtypes, out_avals, release_gil):
    """A callable running kernel ``name`` of ``lib`` on input buffers -> tuple of outputs."""
    fn = getattr(lib, name)
    mod = launcher()
    if mod is not None:
        addr = ctypes.cast(fn, ctypes.c_void_p).value
        specs = tuple((np.dtype(a.dtype).num, tuple(int(d) for d in a.shape)) for a in out_avals)
        return mod.make_kernel(addr, tuple(np.dtype(d).num for d in in_dtypes), specs,
                               bool(release_gil))
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p]
    return CtypesKernel(fn, [np.dtype(d) for d in in_dtypes],
                        [(np.dtype(a.dtype), tuple(a.shape)) for a in out_avals])
