"""Run-time ownership checks for writing into an existing buffer (buffer reuse and donation).

The memory plan (passes/buffer_reuse.py) decides *statically* which kernel outputs may be written
into a dead or donated buffer. Before a buffer is actually overwritten, the schedule (or
``compile`` for a donated argument) proves *at run time* that nothing else can see its memory:

* the object is an ``np.ndarray`` (not a NumPy scalar or subclass), C-contiguous, aligned and
  writeable, of the expected size in bytes;
* it owns its memory: ``base`` is None (NumPy allocated it), or ``base`` is the capsule of a
  recycled buffer (native/buffers.h: a PyCapsule named ``starling.kernel_buffer``, made by
  ``starling._native.empty`` or the cpp launcher), or ``base`` is an ndarray
  that itself satisfies this rule and is referenced by nothing but this view;
* nothing else references it: its reference count (``sys.getrefcount``) equals the count of an
  array held by exactly one name. Every NumPy view of an array holds a reference to the array
  that owns the memory (NumPy points ``base`` at the owner), a memoryview holds its exporter,
  and every Starling Array holds its buffer; so a live view, a second Array over the same
  buffer, a read-only view handed to a user (``np.asarray(x)``: frombuffer over a memoryview of
  a view of the buffer) or a constant captured by a compiled program all raise the count.

The expected counts are calibrated once at import with the very call shapes used later, so the
check does not depend on how a Python version counts references of locals and arguments.
Memory reached only through raw pointers (ctypes addresses, a C extension keeping a pointer
without a reference) is invisible to these checks; Starling never hands such pointers out.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

_ndarray = np.ndarray
# Counters (tests and benchmarks read them): buffers taken / refused by take(), donated
# buffers accepted / refused by donatable().
STATS = {"reused": 0, "reuse_refused": 0, "donated": 0, "donation_refused": 0}
_getrefcount = sys.getrefcount
_POOL_CAPSULE = b"starling.kernel_buffer"
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _capsule_type():
    # The PyCapsule type object, from a capsule made through the C API.
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return type(new(ctypes.c_void_p(1), None, None))


_CAPSULE_TYPE = _capsule_type()


def is_pool_capsule(obj) -> bool:
    """True when ``obj`` is the capsule owning a recycled buffer (native/buffers.h)."""
    return type(obj) is _CAPSULE_TYPE and bool(_capsule_is_valid(obj, _POOL_CAPSULE))


# ---- reference-count calibration ----------------------------------------------------------------
# _probe_* mirror the frames of take() / donatable(): a parameter plus getrefcount's argument.

def _probe_local(buf, dt=None, shape=None):
    return _getrefcount(buf)


def _probe_base(buf):
    base = buf.base
    return _getrefcount(base)


def _probe_slot(arr):
    buf = arr._buf
    return _getrefcount(buf)


def _probe_item(items, i):
    return _getrefcount(items[i])


class _Holder:
    __slots__ = ("_buf",)


def _calibrate():
    one_name = np.empty(8)                      # held by exactly one local of the caller
    sole_local = _probe_local(one_name)
    view = np.empty(8).reshape(2, 4)            # the owner is held only by view.base
    sole_base = _probe_base(view)
    h = _Holder()
    h._buf = np.empty(8)                        # held only by an Array-like slot
    sole_slot = _probe_slot(h)
    sole_item = _probe_item([np.empty(8)], 0)   # held only by one list element
    return sole_local, sole_base, sole_slot, sole_item


_SOLE_LOCAL, _SOLE_BASE, _SOLE_SLOT, _SOLE_ITEM = _calibrate()


def _owns_memory(buf) -> bool:
    base = buf.base
    if base is None or is_pool_capsule(base):
        return True
    if type(base) is not _ndarray:
        return False
    owner_base = base.base
    if not (owner_base is None or is_pool_capsule(owner_base)):
        return False
    del base           # a local reference would be counted below
    return _probe_base(buf) == _SOLE_BASE


def take(buf, dt, shape):
    """``buf``, or a view of its bytes as dtype ``dt`` with ``shape``, when its memory may be
    overwritten: the calling schedule holds the only reference to it, it owns its memory and is
    a C-contiguous, aligned, writeable ndarray of the same size in bytes; else None.

    Must be called as ``take(name, dt, shape)`` where ``name`` is a local variable of the
    caller (the calibrated reference count assumes exactly that call shape).
    """
    if (_getrefcount(buf) != _SOLE_LOCAL or type(buf) is not _ndarray
            or not _writable_here(buf, dt, shape) or not _owns_memory(buf)):
        STATS["reuse_refused"] += 1
        return None
    STATS["reused"] += 1
    return reinterpret(buf, dt, shape)


def _writable_here(buf, dt, shape):
    flags = buf.flags
    if not (flags.c_contiguous and flags.aligned and flags.writeable):
        return False
    return (buf.dtype == dt and buf.shape == shape) or buf.nbytes == dt.itemsize * _prod(shape)


def reinterpret(buf, dt, shape):
    """A C-contiguous view of the bytes of C-contiguous ``buf`` as ``dt`` with ``shape``;
    None for None (a donated buffer that could not be taken)."""
    if buf is None:
        return None
    if buf.dtype == dt:
        return buf if buf.shape == shape else buf.reshape(shape)
    return buf.reshape(-1).view(np.uint8).view(dt).reshape(shape)


def donatable(arr, arg_ids=()):
    """The buffer of Array ``arr`` if a compiled function may overwrite it; else None.

    Safe when the buffer is a non-empty ndarray that is C-contiguous, aligned, writeable, owns
    its memory (see the module docstring), is referenced only by ``arr`` (no NumPy view, no
    other Array, no constant of a compiled program holds it), and is not the buffer of another
    argument of the same call (``arg_ids``: ``id`` of every argument's buffer, ``arr``'s
    included; the same Array passed twice shares one buffer object without raising its count).
    The caller must not hold the buffer itself (only ``arr``), or the count check fails.
    """
    if _probe_slot(arr) != _SOLE_SLOT or not _donatable_buffer(arr, arg_ids):
        STATS["donation_refused"] += 1
        return None
    STATS["donated"] += 1
    return arr._buf


def donatable_item(items, i):
    """``items[i]`` (an ndarray a loop holds, such as a scan's carry) if a compiled body may
    overwrite it: the list holds the only reference to it, and it is a non-empty C-contiguous,
    aligned, writeable ndarray that owns its memory; else None."""
    if _probe_item(items, i) != _SOLE_ITEM:
        STATS["donation_refused"] += 1
        return None
    buf = items[i]
    flags = buf.flags
    if type(buf) is not _ndarray or buf.nbytes == 0 or not (
            flags.c_contiguous and flags.aligned and flags.writeable) or not _owns_memory(buf):
        STATS["donation_refused"] += 1
        return None
    STATS["donated"] += 1
    return buf


def _donatable_buffer(arr, arg_ids):
    buf = arr._buf
    if type(buf) is not _ndarray or buf.nbytes == 0:
        return False
    flags = buf.flags
    if not (flags.c_contiguous and flags.aligned and flags.writeable):
        return False
    if sum(1 for i in arg_ids if i == id(buf)) > 1:
        return False
    del buf            # _owns_memory counts references of the owner, not of buf
    return _owns_memory(arr._buf)


def _prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n
