"""The recycled-buffer pool (native/buffers.h) behind ``starling._native.empty``: arrays of any
dtype and shape, large blocks handed out again after their array dies, clear errors; compiled
kernels' outputs and eager products use it."""
from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import _native
from starling.lowering.buffers import is_pool_capsule

MIB = 1 << 20


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.bool_, np.complex128,
                                   ml_dtypes.bfloat16, ">f4"])
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (5,), (7, 3), (1024, 300)])
def test_empty_is_a_writeable_c_contiguous_array(dtype, shape):
    a = _native.empty(list(shape), np.dtype(dtype))
    assert a.shape == shape and a.dtype == np.dtype(dtype)
    assert a.flags.c_contiguous and a.flags.writeable and a.flags.aligned
    a[...] = 1
    assert np.all(a == 1)
    # large blocks come from the pool, small ones are ordinary NumPy memory
    assert is_pool_capsule(a.base) == (a.nbytes >= MIB)


def test_large_blocks_are_recycled_with_their_contents_replaced():
    a = _native.empty((MIB,), np.dtype(np.float32))
    a[:] = 7
    addr = a.ctypes.data
    del a
    gc.collect()
    b = _native.empty((1024, 1024), np.dtype(np.int32))   # same byte size, other dtype / shape
    assert b.ctypes.data == addr
    b[:] = 3
    c = _native.empty((MIB,), np.dtype(np.float32))      # b is alive: a different block
    assert c.ctypes.data != b.ctypes.data
    c[:] = 5
    assert np.all(b == 3) and np.all(c == 5)


def test_an_offset_array_starts_inside_its_recycled_block():
    # MPI results start 64 bytes into a block (src/distributed/mpi_types.py: result_buffer)
    a = _native.empty((4 * MIB // 4,), np.dtype(np.float32), 64)
    assert is_pool_capsule(a.base) and a.flags.c_contiguous and a.flags.writeable
    assert a.ctypes.data % 4096 == 64   # blocks of 4 MiB and more start on a 2 MiB boundary
    a[:] = 2
    addr = a.ctypes.data
    del a
    gc.collect()
    b = _native.empty((4 * MIB // 4,), np.dtype(np.float32), 64)   # the same block again
    assert b.ctypes.data == addr
    c = _native.empty((4 * MIB // 4,), np.dtype(np.float32))   # another size of block
    assert c.ctypes.data % (2 * MIB) == 0 and c.ctypes.data != addr - 64
    b[:], c[:] = 1, 3
    assert np.all(b == 1) and np.all(c == 3)
    small = _native.empty((5,), np.dtype(np.float32), 128)   # small: NumPy memory, no offset
    assert small.base is None and small.shape == (5,)
    for bad in (-64, 10, 2 * MIB):
        with pytest.raises(ValueError, match="offset must be a multiple of 64"):
            _native.empty((MIB,), np.dtype(np.float32), bad)


def test_many_live_and_freed_blocks_stay_distinct():
    # more blocks than the pool keeps (64): evictions free the oldest, live arrays never share
    live = [_native.empty((MIB // 4 + i,), np.dtype(np.float32)) for i in range(160)]
    for i, a in enumerate(live):
        a[:] = i
    del live[::2]
    more = [_native.empty((MIB // 4 + i,), np.dtype(np.float32)) for i in range(160)]
    for i, a in enumerate(more):
        a[:] = -i
    addrs = [a.ctypes.data for a in live + more]
    assert len(set(addrs)) == len(addrs)
    assert all(np.all(a == 2 * i + 1) for i, a in enumerate(live))
    assert all(np.all(a == -i) for i, a in enumerate(more))


def test_shape_and_dtype_like_numpy_empty():
    assert _native.empty(5, np.float32).shape == (5,)
    assert _native.empty((np.int64(2), 3), "float64").dtype == np.float64
    assert _native.empty([], None).dtype == np.float64


@pytest.mark.parametrize("shape, dtype, err, match", [
    ((2.5,), np.float32, TypeError, "shape must hold ints"),
    (("a",), np.float32, TypeError, "shape must hold ints"),
    ((2 ** 64,), np.float32, ValueError, "64 bits"),
    ((-1, 3), np.float32, ValueError, "negative dimension"),
    ((2 ** 62, 8), np.float32, ValueError, "too big"),
    ((2 ** 40, 2 ** 40), np.uint8, ValueError, "too big"),
    ((3,), object, TypeError, "object dtypes"),
])
def test_bad_requests_raise(shape, dtype, err, match):
    with pytest.raises(err, match=match):
        _native.empty(list(shape), np.dtype(dtype))


def test_eager_products_and_compiled_outputs_use_the_pool():
    from starling.arrays.ops import linear
    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 300)).astype(np.float32)
    w = rng.standard_normal((300, 512)).astype(np.float32)
    want = x.astype(np.float64) @ w
    out = linear._native_dot(x, w, (((1,), (0,)), ((), ())), (600, 512))   # the eager product
    assert is_pool_capsule(out.base)
    eager = np.asarray(snp.asarray(x) @ snp.asarray(w))
    compiled = np.asarray(st.compile(lambda a, b: a @ b)(x, w))
    for got in (out, eager, compiled):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_compiled_kernel_outputs_come_from_the_same_pool():
    f = st.compile(lambda a: snp.sin(a) * 2)
    x = np.linspace(-3, 3, 512 * 1024, dtype=np.float32).reshape(512, 1024)
    first = f(x)
    assert is_pool_capsule(first._buf.base)
    addr = first._buf.ctypes.data
    want = np.sin(x.astype(np.float64)) * 2
    np.testing.assert_allclose(np.asarray(first), want, rtol=1e-6, atol=1e-6)
    del first
    gc.collect()
    again = f(x)   # the freed block is handed out again, its contents rewritten
    assert again._buf.ctypes.data == addr
    np.testing.assert_allclose(np.asarray(again), want, rtol=1e-6, atol=1e-6)


_KEEP_OFF = """
import gc, numpy as np
from starling import _native
a = _native.empty((4 << 20,), np.dtype(np.uint8))
a[:] = 1
del a
gc.collect()
print(_native.buffers_held_bytes())
"""


@pytest.mark.parametrize("keep, held", [("1", 4 << 20), ("0", 0)])
def test_freed_blocks_are_kept_unless_keep_freed_memory_is_off(keep, held):
    # STARLING_KEEP_FREED_MEMORY=0 returns freed blocks to the system at once (README)
    import os
    import subprocess
    import sys
    env = dict(os.environ, STARLING_KEEP_FREED_MEMORY=keep)
    r = subprocess.run([sys.executable, "-c", _KEEP_OFF], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) == held
