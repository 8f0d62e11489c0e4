"""NumPy dtypes and reduce ops as MPI datatypes / ops (buffers passed without copies or pickle),
and the result buffers MPI writes.

Types MPI has no name for (bfloat16, float8, float4) travel as raw bytes of the same width for
data movement; reductions convert them to float32 first (src/distributed/mpi_comm.py).
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..collectives.runtime.inprocess import accumulation_dtype
from ..lowering.runtime.native import empty as pooled_empty
from . import runtime

_BY_KIND = {}


def _table():
    if not _BY_KIND:
        MPI = runtime.mpi()
        _BY_KIND.update({
            np.dtype(np.bool_): MPI.C_BOOL, np.dtype(np.int8): MPI.INT8_T,
            np.dtype(np.int16): MPI.INT16_T, np.dtype(np.int32): MPI.INT32_T,
            np.dtype(np.int64): MPI.INT64_T, np.dtype(np.uint8): MPI.UINT8_T,
            np.dtype(np.uint16): MPI.UINT16_T, np.dtype(np.uint32): MPI.UINT32_T,
            np.dtype(np.uint64): MPI.UINT64_T, np.dtype(np.float32): MPI.FLOAT,
            np.dtype(np.float64): MPI.DOUBLE, np.dtype(np.complex64): MPI.C_FLOAT_COMPLEX,
            np.dtype(np.complex128): MPI.C_DOUBLE_COMPLEX,
        })
    return _BY_KIND


_RAW = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
        8: np.dtype(np.uint64)}


def mpi_view(arr):
    """``[buffer, MPI datatype]`` for a C-contiguous NumPy array (unnamed types as bytes)."""
    table = _table()
    dt = arr.dtype
    if dt in table:
        return [arr, table[dt]]
    raw = _RAW[dt.itemsize]
    return [arr.view(raw), table[raw]]


def mpi_datatype(dtype):
    """The MPI datatype ``mpi_view`` passes an array of ``dtype`` as."""
    table = _table()
    got = table.get(dtype)
    return got if got is not None else table[_RAW[np.dtype(dtype).itemsize]]


_REDUCTIONS: dict = {}
# Open MPI 5.0's AVX reduction ops (op/avx) saturate sums of 8- and 16-bit integers (int8: 100 +
# 100 gave 127 from 64 elements on, -56 below) where NumPy and the in-process runtime wrap
# around: such sums are made in 32 bits and wrapped back by finish_reduce.
_WIDER_SUMS = {np.dtype(np.int8): np.dtype(np.int32), np.dtype(np.int16): np.dtype(np.int32),
               np.dtype(np.uint8): np.dtype(np.uint32), np.dtype(np.uint16): np.dtype(np.uint32)}


def mpi_reduction(op, dtype, what, predefined=False):
    """``(dtype the members' values are combined in, MPI op)`` of Starling reduce op ``op``
    ("sum", "avg", "max", "min", "prod") over values of ``dtype``, for the MPI collective
    ``what`` (named in errors). The dtype is ``accumulation_dtype``'s (low-precision floats in
    float32, averages of integers in 64 bits), with sums of 8- and 16-bit integers made in 32
    bits (see ``_WIDER_SUMS``); ``finish_reduce`` brings the result back to ``dtype``.

    ``predefined``: MPI's own ops only (``mpi_op``).

    Raises:
        TypeError: "max" / "min" of complex values (MPI defines no order of complex numbers).
    """
    got = _REDUCTIONS.get((op, dtype, predefined))
    if got is None:
        dt = np.dtype(dtype)
        if dt.kind == "c" and op in ("max", "min"):
            raise TypeError(f"{what}: reduce op {op!r} is not defined for {dt.name} across "
                            "processes (MPI orders no complex numbers); complex values take "
                            "'sum', 'avg' or 'prod'")
        acc = accumulation_dtype(dt, op)
        if op == "sum":
            acc = _WIDER_SUMS.get(acc, acc)
        got = _REDUCTIONS[(op, dtype, predefined)] = (
            acc, mpi_op("sum" if op == "avg" else op, acc, predefined))
    return got


def mpi_op(op, dtype, predefined=False):
    """The MPI op of a Starling reduce op for ``dtype`` (bool: sum / max are or, min / prod
    and, as NumPy's ufuncs compute on bool). Max / min of float32 / float64 values are NumPy's
    (a NaN anywhere gives NaN: ``nan_extremum_op``) unless ``predefined`` (MPI_MAX / MPI_MIN:
    one-sided accumulation takes no other ops)."""
    MPI = runtime.mpi()
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return {"sum": MPI.LOR, "max": MPI.LOR, "min": MPI.LAND, "prod": MPI.LAND}[op]
    if op in ("max", "min") and dt in (np.float32, np.float64) and not predefined:
        return nan_extremum_op(op, dt)
    return {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}[op]


_NAN_OPS: dict = {}


def nan_extremum_op(op, dtype):
    """The MPI op of NumPy's ``maximum`` (``op`` "max") / ``minimum`` of ``dtype`` (float32 or
    float64) values: NaN where any member's value is NaN, as the in-process runtime's
    reductions give (MPI_MAX / MPI_MIN compare with ``>`` / ``<`` and keep one of the values,
    so which member held the NaN decided the result). Native under Open MPI
    (native/mpi_calls.h), else an mpi4py op calling NumPy."""
    key = (op, np.dtype(dtype))
    got = _NAN_OPS.get(key)
    if got is None:
        from . import native_calls   # (it imports this module)
        from .. import _native
        MPI = runtime.mpi()
        handle = _native.mpi_nan_extremum_op(op == "max", key[1] == np.float64) \
            if native_calls.bound() else None
        got = _NAN_OPS[key] = MPI.Op.fromhandle(handle) if handle is not None else \
            python_nan_extremum_op(op, key[1])
    return got


def python_nan_extremum_op(op, dtype):
    """``nan_extremum_op`` as an mpi4py op over NumPy (for MPIs other than Open MPI)."""
    ufunc = np.maximum if op == "max" else np.minimum
    dt = np.dtype(dtype)

    def combine(inbuf, inoutbuf, datatype):
        ufunc(np.frombuffer(inbuf, dt), np.frombuffer(inoutbuf, dt),
              out=np.frombuffer(inoutbuf, dt))
    return runtime.mpi().Op.Create(combine, commute=True)


_POOLED = 1 << 20   # results from this size on come from the recycled buffer pool


def result_buffer(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous buffer of ``shape`` / ``dtype`` for MPI to write a result
    into.

    From 1 MiB on it comes from the buffer pool (warm pages, no page faults:
    src/lowering/runtime/native.py), 64 bytes into the pool's block: the pool hands out blocks
    of 4 MiB and more on a 2 MiB boundary, and Open MPI's shared-memory all-reduce into a
    page-aligned output ran 25-50% slower on two ranks (64 MiB: 60 vs 48 ms; 4 MiB: 1.40 vs
    0.94 ms) than into one 64 bytes further, whatever the input's offset. The cost: such a
    block is 64 bytes longer than the result, so one whose size is a whole number of 2 MiB
    huge pages touches one huge page more (a 4 MiB result: three), and the pool, which matches
    blocks by exact size, keeps them apart from kernel outputs of the same shape.
    """
    return result_allocator(shape, dtype)()


def result_allocator(shape, dtype):
    """A function making ``result_buffer(shape, dtype)`` (for calls repeated many times)."""
    dt = np.dtype(dtype)
    shape = tuple(shape)
    if math.prod(shape) * dt.itemsize < _POOLED:
        return partial(np.empty, shape, dt)
    return partial(pooled_empty, shape, dt, 64)
