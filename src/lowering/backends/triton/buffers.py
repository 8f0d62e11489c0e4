"""NumPy arrays as the tensors Triton's interpreter takes.

The interpreter (``TRITON_INTERPRET=1``; how kernels run without a GPU) reads its pointer
arguments through PyTorch's storage protocol: ``data_ptr()``, ``dtype`` (printed as
"torch.<name>"), ``untyped_storage()`` (with ``data_ptr``, ``cpu`` and ``copy_``),
``storage_offset``, ``size``, ``stride``, ``new_empty`` and ``set_``. ``NumpyBuffer`` gives them
over a NumPy array without copying, so Starling needs no torch: the interpreter loads and stores
through the array's memory directly (its host copy of a host buffer is the buffer itself).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

_TORCH_NAMES = {
    np.dtype(np.bool_): "bool", np.dtype(np.int8): "int8", np.dtype(np.int16): "int16",
    np.dtype(np.int32): "int32", np.dtype(np.int64): "int64", np.dtype(np.uint8): "uint8",
    np.dtype(np.uint16): "uint16", np.dtype(np.uint32): "uint32", np.dtype(np.uint64): "uint64",
    np.dtype(np.float16): "float16", np.dtype(ml_dtypes.bfloat16): "uint16",   # kernels: bits
    np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
    **{np.dtype(dt): "uint8" for dt in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                        ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu)},
}


class _Dtype:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"

    __repr__ = __str__


# One object per dtype for the life of the process: Triton's argument specialisation caches the
# type it derives from a tensor's dtype by the dtype object's address, so a dtype object that
# died and whose address was reused would be taken for another dtype.
_DTYPES = {dt: _Dtype(name) for dt, name in _TORCH_NAMES.items()}


class _Storage:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def data_ptr(self):
        return self.array.ctypes.data

    def cpu(self):
        return self

    def copy_(self, other):
        return self   # host memory: the interpreter wrote into it already


class NumpyBuffer:
    """``array`` (any strides; its elements at non-negative offsets from its first one) seen
    as a torch-like tensor by Triton's interpreter.

    Raises:
        TypeError: a dtype Triton cannot address (complex).
    """

    __slots__ = ("array", "dtype")

    def __init__(self, array):
        array = np.asarray(array)
        dtype = _DTYPES.get(array.dtype)
        if dtype is None:
            raise TypeError(f"NumpyBuffer: Triton kernels here take bool, integer and real "
                            f"floating arrays, got {array.dtype}")
        self.array = array
        self.dtype = dtype

    def data_ptr(self):
        return self.array.ctypes.data

    def untyped_storage(self):
        return _Storage(self.array)

    def storage_offset(self):
        return 0

    def size(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def new_empty(self, *args, **kwargs):
        return self

    def set_(self, *args, **kwargs):
        return self


def element_strides(a, shape):
    """Element strides of the array ``a`` (NumPy or cupy) as a kernel reads it: 0 along the
    dims broadcast to the loop shape ``shape`` (None: ``a``'s own strides)."""
    if shape is None:
        return [s // a.itemsize for s in a.strides]
    off = len(shape) - a.ndim
    return [0 if n == 1 and shape[off + d] != 1 else s // a.itemsize
            for d, (n, s) in enumerate(zip(a.shape, a.strides))]


class DevicePointer:
    """A GPU buffer as a pointer argument of a compiled Triton launch: Triton's launcher takes
    any object with ``data_ptr()`` and a ``dtype`` (named as torch names it), so GPU launches
    need no torch either. ``dtype`` is the elements' dtype (bfloat16 / float8 pass as their
    bits, as the kernels read them)."""

    __slots__ = ("ptr", "dtype")

    def __init__(self, ptr, dtype):
        self.ptr, self.dtype = int(ptr), _DTYPES[np.dtype(dtype)]

    def data_ptr(self):
        return self.ptr
