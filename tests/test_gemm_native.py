"""The native strided batched GEMM (native/gemm.cpp), its layout folding (arrays/ops/
dot_layout.py), eager dot_general on it, and the thread pool (native/pool.cpp).

References are independent: float64 ``np.einsum`` of the same operands (the GEMM never calls
NumPy's BLAS), on hard shapes (size-0 and size-1 dims, odd sizes not multiple of the vector
width, strided, sliced, reversed and transposed operands, broadcast batch dims).
"""
from __future__ import annotations

import multiprocessing
import os
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as hs

import starling as st
import starling.numpy as snp
from starling import _native, lax
from starling.arrays.ops import dot_layout, linear
from starling.core.trace import reference_mode
from starling.lowering.runtime import threads

RNG = np.random.default_rng(0)


def _ref(a, b, dn):
    """float64 dot_general through einsum (an independent reference)."""
    (lc, rc), (lb, rb) = dn
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    la = [None] * a.ndim
    ra = [None] * b.ndim
    for i, j in zip(lb, rb):
        la[i] = ra[j] = next(letters)
    for i, j in zip(lc, rc):
        la[i] = ra[j] = next(letters)
    lf = [i for i in range(a.ndim) if la[i] is None]
    rf = [j for j in range(b.ndim) if ra[j] is None]
    for i in lf:
        la[i] = next(letters)
    for j in rf:
        ra[j] = next(letters)
    out = [la[i] for i in lb] + [la[i] for i in lf] + [ra[j] for j in rf]
    spec = f"{''.join(la)},{''.join(ra)}->{''.join(out)}"
    return np.einsum(spec, a.astype(np.float64), b.astype(np.float64))


def _close(got, want, dt, k):
    tol = (1e-5 if dt == np.float32 else 1e-13) * max(1, k) ** 0.5
    scale = np.abs(want).max() if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(scale, 1.0))


def _native_product(a, b, dn):
    out = linear._native_dot(a, b, dn, _out_shape(a, b, dn))
    assert out is not None, "layout should fold into one descriptor"
    return out


def _out_shape(a, b, dn):
    (lc, rc), (lb, rb) = dn
    return (tuple(a.shape[i] for i in lb)
            + tuple(a.shape[i] for i in range(a.ndim) if i not in lc and i not in lb)
            + tuple(b.shape[j] for j in range(b.ndim) if j not in rc and j not in rb))


# ---- layout folding ------------------------------------------------------------------------------

def test_desc_plain_and_transposed():
    dn = (((1,), (0,)), ((), ()))
    assert dot_layout.gemm_desc((5, 7), (7, 1), (7, 3), (3, 1), dn) == (5, 3, 7, 7, 1, 3, 1, 0)
    # a.T @ b with a (7, 5): rows stride 1, contraction stride 5
    assert dot_layout.gemm_desc((5, 7), (1, 5), (7, 3), (3, 1), dn) == (5, 3, 7, 1, 5, 3, 1, 0)
    # batched (2, 5, 7) @ (2, 7, 3): one loop over the batch
    dnb = (((2,), (1,)), ((0,), (0,)))
    assert dot_layout.gemm_desc((2, 5, 7), (35, 7, 1), (2, 7, 3), (21, 3, 1), dnb) == \
        (5, 3, 7, 7, 1, 3, 1, 1, 2, 35, 21)


def test_desc_folds_dims():
    # rows (b, t) of x (b, t, d) merge; contraction over (b, t) merges (weight gradient)
    dn = (((2,), (0,)), ((), ()))
    assert dot_layout.gemm_desc((4, 6, 8), (48, 8, 1), (8, 3), (3, 1), dn)[:8] == \
        (24, 3, 8, 8, 1, 3, 1, 0)
    dn = (((0, 1), (0, 1)), ((), ()))
    assert dot_layout.gemm_desc((4, 6, 8), (48, 8, 1), (4, 6, 5), (30, 5, 1), dn)[:8] == \
        (8, 5, 24, 1, 8, 5, 1, 0)
    # contracting pairs in either order (a sum): here only (h, d) chains in both operands
    dn = (((1, 2), (1, 0)), ((), ()))
    assert dot_layout.gemm_desc((6, 4, 3), (12, 1, 4), (3, 4, 5), (20, 5, 1), dn) == \
        (6, 5, 12, 12, 1, 5, 1, 0)


def test_desc_refuses_what_needs_a_copy():
    # rhs free dims that do not chain (a transposed pair of column dims)
    dn = (((0,), (0,)), ((), ()))
    assert dot_layout.gemm_desc((3, 2), (2, 1), (3, 4, 5), (20, 1, 4), dn) is None
    # contracting pairs chaining in neither order
    dn = (((1, 2), (1, 0)), ((), ()))
    assert dot_layout.gemm_desc((6, 4, 3), (12, 3, 1), (3, 4, 5), (20, 5, 1), dn) is None
    # more row loops than the descriptor holds
    shape = (2,) * 10 + (3,)
    strides = tuple(3 * 4 ** (9 - i) for i in range(10)) + (1,)   # no two dims chain
    dn = (((10,), (0,)), ((), ()))
    assert dot_layout.gemm_desc(shape, strides, (3, 2), (2, 1), dn) is None


# ---- the native GEMM through eager dot_general -----------------------------------------------------

def _operand(shape, dt, transform):
    """An array of ``shape`` as a view: ``transform`` in plain / transposed / strided / reversed
    (the view shares memory with a larger buffer, as slices and transposes do)."""
    if transform == "transposed" and len(shape) >= 2:
        base = RNG.standard_normal(shape[:-2] + (shape[-1], shape[-2])).astype(dt)
        return np.swapaxes(base, -1, -2)
    if transform == "strided":
        base = RNG.standard_normal(shape[:-1] + (2 * shape[-1] + 1,)).astype(dt)
        return base[..., 1::2]
    if transform == "reversed":
        return RNG.standard_normal(shape).astype(dt)[::-1]
    return RNG.standard_normal(shape).astype(dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(1, 1, 2), (2, 1, 1), (1, 3, 2), (7, 13, 5), (16, 16, 16),
                                 (9, 47, 49), (33, 65, 300), (8, 48, 24), (100, 1, 3),
                                 (130, 97, 70), (0, 4, 5), (3, 0, 4), (3, 4, 0)])
@pytest.mark.parametrize("ta", ["plain", "transposed", "strided", "reversed"])
@pytest.mark.parametrize("tb", ["plain", "transposed", "strided"])
def test_matmul_layouts(dt, mkn, ta, tb):
    m, n, k = mkn
    a = _operand((m, k), dt, ta)
    b = _operand((k, n), dt, tb)
    dn = (((1,), (0,)), ((), ()))
    got = linear._dot_general_impl(a, b, dimension_numbers=dn, preferred_element_type=None)
    assert got.shape == (m, n) and got.dtype == dt
    _close(got, _ref(a, b, dn), dt, k)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(64, 16, 8), (130, 97, 300), (70, 24, 9), (65, 7, 17),
                                 (128, 784, 512), (16, 16, 16), (9, 48, 200), (16, 32, 5),
                                 (3, 8, 1)])
def test_transposed_b_gives_the_bits_of_its_contiguous_copy(dt, mkn):
    # a transposed B is packed into the micro-panels a contiguous one gives (8 x 8 blocks
    # transposed in registers, scalar copies at the edges): the same products in the same order;
    # small products with a contiguous B (whole vectors wide) skip the blocking and call the
    # micro-tiles at once: the bits of the blocked path too
    m, n, k = mkn
    a = _operand((m, k), dt, "plain")
    b = _operand((k, n), dt, "transposed")
    dn = (((1,), (0,)), ((), ()))
    got = linear._dot_general_impl(a, b, dimension_numbers=dn, preferred_element_type=None)
    want = linear._dot_general_impl(a, np.ascontiguousarray(b), dimension_numbers=dn,
                                    preferred_element_type=None)
    np.testing.assert_array_equal(got, want)
    _close(got, _ref(a, b, dn), dt, k)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("batch", [(1,), (3,), (2, 3), (0,), (1000,)])
@pytest.mark.parametrize("mkn", [(16, 16, 16), (5, 7, 3), (1, 9, 4), (33, 8, 17)])
def test_batched(dt, batch, mkn):
    if batch == (1000,) and mkn != (16, 16, 16):
        return
    m, k, n = mkn
    a = RNG.standard_normal(batch + (m, k)).astype(dt)
    b = np.swapaxes(RNG.standard_normal(batch + (n, k)).astype(dt), -1, -2)
    nb = len(batch)
    dn = (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
    got = _native_product(a, b, dn)
    _close(got, _ref(a, b, dn), dt, k)


def test_broadcast_operand_stride_zero():
    # a batch dim of stride 0 (one matrix broadcast over the batch) and a broadcast row
    a = np.broadcast_to(RNG.standard_normal((1, 6, 5)).astype(np.float32), (4, 6, 5))
    b = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    dn = (((2,), (1,)), ((0,), (0,)))
    _close(_native_product(a, b, dn), _ref(a, b, dn), np.float32, 5)
    row = np.broadcast_to(RNG.standard_normal(5).astype(np.float32), (7, 5))
    dn = (((1,), (0,)), ((), ()))
    _close(_native_product(row, b[0], dn), _ref(row, b[0], dn), np.float32, 5)


@settings(max_examples=60, deadline=None)
@given(hs.data())
def test_random_dimension_numbers(data):
    """Random dot_generals (batch, contracting and free dims anywhere, up to 5-d operands) on
    randomly transposed operands: the native GEMM (or np.matmul where the layout needs a copy)
    against einsum."""
    dt = data.draw(hs.sampled_from([np.float32, np.float64]))
    nb = data.draw(hs.integers(0, 2))
    nc = data.draw(hs.integers(1, 2))
    nlf = data.draw(hs.integers(0, 2))
    nrf = data.draw(hs.integers(0, 2))
    size = hs.integers(0, 6) if data.draw(hs.booleans()) else hs.integers(1, 19)
    bs = [data.draw(size) for _ in range(nb)]
    cs = [data.draw(size) for _ in range(nc)]
    lfs = [data.draw(size) for _ in range(nlf)]
    rfs = [data.draw(size) for _ in range(nrf)]
    lperm = data.draw(hs.permutations(range(nb + nc + nlf)))
    rperm = data.draw(hs.permutations(range(nb + nc + nrf)))
    # logical dims of lhs in order (batch, contracting, free), placed by lperm
    lroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + \
        [("f", i) for i in range(nlf)]
    rroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + \
        [("f", i) for i in range(nrf)]
    sizes = {"b": bs, "c": cs}
    lpos = {lroles[p]: i for i, p in enumerate(lperm)}
    rpos = {rroles[p]: i for i, p in enumerate(rperm)}
    lshape = [0] * len(lroles)
    for role, i in lpos.items():
        lshape[i] = (lfs if role[0] == "f" else sizes[role[0]])[role[1]]
    rshape = [0] * len(rroles)
    for role, i in rpos.items():
        rshape[i] = (rfs if role[0] == "f" else sizes[role[0]])[role[1]]
    dn = ((tuple(lpos[("c", i)] for i in range(nc)), tuple(rpos[("c", i)] for i in range(nc))),
          (tuple(lpos[("b", i)] for i in range(nb)), tuple(rpos[("b", i)] for i in range(nb))))
    # each operand is itself a transposed view of a contiguous buffer
    a = _view(lshape, dt, data)
    b = _view(rshape, dt, data)
    got = linear._dot_general_impl(a, b, dimension_numbers=dn, preferred_element_type=None)
    want = _ref(a, b, dn)
    assert got.shape == want.shape and got.dtype == dt
    _close(got, want, dt, int(np.prod(cs)))


def _view(shape, dt, data):
    perm = data.draw(hs.permutations(range(len(shape))))
    inv = np.argsort(perm)
    base = RNG.standard_normal([shape[p] for p in perm]).astype(dt)
    return base.transpose(inv)


def test_nan_inf_propagate():
    a = RNG.standard_normal((9, 20)).astype(np.float32)
    a[2, 3], a[5, 0] = np.nan, np.inf
    b = RNG.standard_normal((20, 17)).astype(np.float32)
    b[:, 4] = 0.0
    dn = (((1,), (0,)), ((), ()))
    got = _native_product(a, b, dn)
    want = _ref(a, b, dn)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-4, atol=1e-4)


def test_eager_user_level_matches_reference_mode():
    """Eager matmul / einsum on Starling arrays use the native GEMM; under reference_mode (the
    numpy_ref oracle) np.matmul; both agree with float64 einsum."""
    x = snp.asarray(RNG.standard_normal((4, 3, 10, 8)).astype(np.float32))
    y = snp.asarray(RNG.standard_normal((4, 3, 8, 6)).astype(np.float32))
    fast = np.asarray(x @ y)
    with reference_mode():
        slow = np.asarray(x @ y)
    want = np.asarray(x).astype(np.float64) @ np.asarray(y).astype(np.float64)
    _close(fast, want, np.float32, 8)
    _close(slow, want, np.float32, 8)


def test_reference_mode_never_calls_the_native_gemm(monkeypatch):
    class Boom:
        def empty(self, shape, dtype):
            return np.empty(shape, dtype)

        def gemm(self, *a):
            raise AssertionError("native GEMM called under reference_mode")
    monkeypatch.setattr(linear, "_native", Boom())
    x = snp.asarray(RNG.standard_normal((5, 6)).astype(np.float32))
    with reference_mode():
        np.asarray(x @ x.T)
    f = st.compile(lambda x: x @ x.T, backend="numpy_ref")
    np.asarray(f(x))
    with pytest.raises(AssertionError, match="native GEMM called"):
        x @ x.T


def test_low_precision_and_integers_keep_numpy_semantics():
    x16 = snp.asarray(RNG.standard_normal((5, 7)).astype(np.float16))
    got = lax.dot_general(x16, x16.T, (((1,), (0,)), ((), ())))
    want = (np.asarray(x16).astype(np.float32) @ np.asarray(x16).astype(np.float32).T)
    np.testing.assert_allclose(np.asarray(got).astype(np.float32), want, rtol=2e-3, atol=2e-3)
    xi = snp.asarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    np.testing.assert_array_equal(np.asarray(xi @ xi.T), np.arange(12).reshape(3, 4) @
                                  np.arange(12).reshape(3, 4).T)


# ---- the binding's checks ----------------------------------------------------------------------

def test_binding_rejects_bad_input():
    a = np.ones((4, 5), np.float32)
    b = np.ones((5, 3), np.float32)
    out = np.empty((4, 3), np.float32)
    good = np.array([4, 3, 5, 5, 1, 3, 1, 0], np.int64)
    _native.gemm(a, b, out, good)
    np.testing.assert_array_equal(out, np.full((4, 3), 5.0))
    with pytest.raises(TypeError, match="one dtype"):
        _native.gemm(a.astype(np.float64), b, out, good)
    with pytest.raises(TypeError, match="float32 and float64"):
        _native.gemm(a.astype(np.int32), b.astype(np.int32), out.astype(np.int32), good)
    with pytest.raises(ValueError, match="malformed"):
        _native.gemm(a, b, out, good[:7])
    with pytest.raises(ValueError, match="outside an operand"):
        _native.gemm(a, b, out, np.array([4, 3, 6, 5, 1, 3, 1, 0], np.int64))   # K too big
    with pytest.raises(ValueError, match="outside an operand"):
        _native.gemm(a, b, out, np.array([4, 3, 5, 50, 1, 3, 1, 0], np.int64))  # row stride
    with pytest.raises(ValueError, match="rows x N"):
        _native.gemm(a, b, np.empty((4, 4), np.float32), good)
    with pytest.raises(ValueError, match="negative"):
        _native.gemm(a, b, out, np.array([-4, 3, 5, 5, 1, 3, 1, 0], np.int64))


# ---- the thread pool ---------------------------------------------------------------------------

def test_pool_configuration():
    assert threads.available_cpus() >= 1
    assert threads.pool_size() >= 1
    old = threads.pool_size()
    try:
        threads.set_pool_size(3)
        assert threads.pool_size() == 3 and threads.thread_share() == 3
        threads.set_thread_share(2)
        assert threads.thread_share() == 2
        threads.set_thread_share(0)
        assert threads.thread_share() == 3
    finally:
        threads.set_pool_size(old)
        threads.set_thread_share(0)
    with pytest.raises(ValueError, match="positive int"):
        threads.set_pool_size(0)
    with pytest.raises(ValueError, match="non-negative int"):
        threads.set_thread_share(-1)


@pytest.mark.parametrize("mkn", [(300, 257, 190), (128, 784, 512), (64, 520, 1000)])
def test_results_do_not_depend_on_threads(mkn):
    """The GEMM sums every element in one order whatever the tiling: bit-identical results on
    1, 2 and 4 threads (4 > CPUs here: the pool runs more threads than cores). Column tiles
    end on whole vectors, mid-panel (512 = 256 | 256 with 48-wide panels), and contraction
    blocks are of equal depth (784 = 4 x 196)."""
    m, k, n = mkn
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    dn = (((1,), (0,)), ((), ()))
    old = threads.pool_size()
    outs = []
    try:
        for n in (1, 2, 4):
            threads.set_pool_size(n)
            outs.append(_native_product(a, b, dn))
    finally:
        threads.set_pool_size(old)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    _close(outs[0], _ref(a, b, dn), np.float32, k)


@pytest.mark.parametrize("size", [2, 3, 5, 20])
def test_every_chunk_runs_whatever_the_threads(size):
    """The pool cuts a call's chunks into one part per thread, each thread taking its own part
    first and then the others' from their ends (native/pool.cpp). With more threads than cores,
    and with more threads than parts (20 > 16: the later helpers only take from others' parts),
    every chunk still runs: each element of a fused kernel, each row sum and each product of a
    batch of small GEMMs is right, and bit-identical to the one-thread run."""
    x = RNG.standard_normal((1537, 1031)).astype(np.float32)
    a = RNG.standard_normal((1000, 16, 16)).astype(np.float32)
    b = RNG.standard_normal((1000, 16, 16)).astype(np.float32)
    f = st.compile(lambda x, a, b: (x * 3.0 + 1.0, snp.sum(x, axis=1), snp.matmul(a, b)))
    old = threads.pool_size()
    try:
        threads.set_pool_size(1)
        one = [np.asarray(o) for o in f(x, a, b)]
        threads.set_pool_size(size)
        for _ in range(3):
            got = [np.asarray(o) for o in f(x, a, b)]
            assert all(np.array_equal(g, o) for g, o in zip(got, one))
    finally:
        threads.set_pool_size(old)
    np.testing.assert_allclose(one[0], x.astype(np.float64) * 3 + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(one[1], x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(one[2], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


def test_concurrent_callers_share_the_pool():
    a = RNG.standard_normal((200, 150)).astype(np.float64)
    b = RNG.standard_normal((150, 120)).astype(np.float64)
    dn = (((1,), (0,)), ((), ()))
    want = _native_product(a, b, dn)
    errors = []

    def work(share):
        threads.set_thread_share(share)
        for _ in range(20):
            if not np.array_equal(_native_product(a, b, dn), want):
                errors.append(share)
    ts = [threading.Thread(target=work, args=(s,)) for s in (0, 1, 2, 0)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def _child_product(q):
    a = np.ones((256, 128), np.float32)
    q.put(float(_native_product(a, a.T, (((1,), (0,)), ((), ()))).sum()))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_pool_after_fork():
    """A forked child (whose pool threads did not survive the fork) starts a pool of its own."""
    a = np.ones((256, 128), np.float32)
    _native_product(a, a.T, (((1,), (0,)), ((), ())))   # the parent's pool is running
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_product, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert q.get(timeout=5) == 256 * 256 * 128.0


def test_device_threads_get_their_share():
    from starling.collectives.runtime import inprocess
    shares = []
    old = threads.pool_size()
    try:
        threads.set_pool_size(4)
        mesh = st.sharding.make_mesh((2,), ("i",), devices=st.devices()[:2])
        inprocess.run_spmd(mesh, lambda ctx: shares.append(threads.thread_share()))
    finally:
        threads.set_pool_size(old)
    assert len(shares) == 2
    n = st.local_device_count()
    assert all(s == max(1, 4 // n) for s in shares), (shares, n)


# ---- hard inputs: sizes around the kernels' blocking, any strides, integers, every ISA ----------

# Around the micro-tile rows (4 / 6 / 8), vector widths and micro-tile columns (4 .. 48), the
# row block (64 .. 128), the packing thresholds (64 rows, 96 columns) and the contraction block
# (256).
EDGES = [0, 1, 2, 5, 7, 8, 9, 15, 16, 17, 23, 24, 25, 47, 48, 49, 63, 64, 65, 95, 96, 97, 129]
K_EDGES = [0, 1, 3, 8, 255, 256, 257]
STEPS = [1, 2, -1, -3]


def _strided(shape, dt, steps, perm, ints=False):
    """An array of ``shape`` whose axis i reads every ``steps[i]``-th element (negative:
    backwards) of a buffer stored with its axes in the order ``perm``."""
    full = [abs(s) * n for s, n in zip(steps, shape)]
    stored = [full[p] for p in perm]
    vals = RNG.integers(-4, 5, stored) if ints else RNG.standard_normal(stored)
    base = vals.astype(dt).transpose(np.argsort(perm))
    view = base[tuple(slice(None, None, s) for s in steps)]
    return view[tuple(slice(0, n) for n in shape)]


def _check_product(a, b, dn, dt, ints):
    got = _native_product(a, b, dn)
    want = _ref(a, b, dn)
    assert got.shape == want.shape and got.dtype == dt
    if ints:
        # integer entries of magnitude <= 4, K <= 257: every partial sum is exact in float32
        np.testing.assert_array_equal(got, want)
    else:
        _close(got, want, dt, a.shape[dn[0][0][0]])


@settings(max_examples=120, deadline=None)
@given(hs.data())
def test_hard_shapes_and_strides(data):
    """Sizes around every blocking boundary, operands read through positive, negative and
    non-unit strides in any storage order, with and without a batch dim: against float64 einsum
    (exactly, for small-integer operands)."""
    dt = data.draw(hs.sampled_from([np.float32, np.float64]))
    ints = data.draw(hs.booleans())
    m, n = data.draw(hs.sampled_from(EDGES)), data.draw(hs.sampled_from(EDGES + [513]))
    k = data.draw(hs.sampled_from(K_EDGES))
    batch = data.draw(hs.sampled_from([(), (1,), (3,)]))
    nb = len(batch)
    ashape, bshape = batch + (m, k), batch + (k, n)
    a = _strided(ashape, dt, data.draw(hs.lists(hs.sampled_from(STEPS), min_size=nb + 2,
                                                max_size=nb + 2)),
                 data.draw(hs.permutations(range(nb + 2))), ints)
    b = _strided(bshape, dt, data.draw(hs.lists(hs.sampled_from(STEPS), min_size=nb + 2,
                                                max_size=nb + 2)),
                 data.draw(hs.permutations(range(nb + 2))), ints)
    dn = (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
    _check_product(a, b, dn, dt, ints)


@settings(max_examples=12, deadline=None)
@given(hs.data())
def test_thread_count_never_changes_a_bit(data):
    """Products large enough to be split into tiles (by rows, columns, and rows starting inside
    a batch entry) are bit-identical on 1, 2 and 3 pool threads."""
    dt = data.draw(hs.sampled_from([np.float32, np.float64]))
    m = data.draw(hs.sampled_from([33, 65, 130, 300]))
    n = data.draw(hs.sampled_from([47, 97, 513, 1100]))
    k = data.draw(hs.sampled_from([64, 257, 300]))
    batch = data.draw(hs.sampled_from([(), (3,), (2, 2)]))
    nb = len(batch)
    a = _strided(batch + (m, k), dt, [1] * nb + data.draw(hs.sampled_from([[1, 1], [2, -1]])),
                 data.draw(hs.permutations(range(nb + 2))))
    b = _strided(batch + (k, n), dt, [1] * (nb + 2), data.draw(hs.permutations(range(nb + 2))))
    dn = (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
    old = threads.pool_size()
    outs = []
    try:
        for t in (1, 2, 3):
            threads.set_pool_size(t)
            outs.append(_native_product(a, b, dn))
    finally:
        threads.set_pool_size(old)
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    _close(outs[0], a.astype(np.float64) @ b.astype(np.float64), dt, k)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(9, 20, 17), (65, 300, 97)])
def test_nonfinite_entries_follow_ieee(dt, mkn):
    """inf * 0 and inf - inf give NaN, inf + finite stays inf with its sign, whatever row or
    column the non-finite entry lands in (edges of micro-tiles included)."""
    m, k, n = mkn
    a = RNG.standard_normal((m, k)).astype(dt)
    b = RNG.standard_normal((k, n)).astype(dt)
    a[0, 0], a[m - 1, k - 1], a[m // 2, 3] = np.inf, -np.inf, np.nan
    a[2, 0] = a[2, 1] = np.inf
    a[1, :] = 0.0
    b[0, n - 1] = 0.0                       # inf * 0 in (0, n - 1)
    b[k - 1, :] = np.abs(b[k - 1, :]) + 1   # -inf * positive: row m - 1 is -inf
    b[0, 5], b[1, 5] = 1.0, -1.0            # inf - inf in (2, 5)
    b[3, 7] = np.inf                        # 0 * inf in (1, 7)
    dn = (((1,), (0,)), ((), ()))
    got = _native_product(a, b, dn)
    want = _ref(a, b, dn)
    for mask in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(mask(got), mask(want))
    assert np.isnan(got[0, n - 1]) and np.isnan(got[2, 5]) and np.isnan(got[1, 7])
    assert np.isneginf(got[m - 1, 0])
    fin = np.isfinite(want)
    _close(got[fin], want[fin], dt, k)


_ISA_SWEEP = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import test_gemm_native as t
from starling import _native
from starling.lowering.runtime import threads
fails = []
for dt in (np.float32, np.float64):
    for m, n, k in [(1, 1, 1), (5, 23, 3), (7, 49, 257), (65, 97, 256), (129, 513, 9), (0, 4, 3),
                    (3, 0, 2), (4, 5, 0), (8, 48, 255)]:
        for steps in ([1, 1], [2, -1], [-1, -3]):
            for perm in ([0, 1], [1, 0]):
                for ints in (False, True):
                    a = t._strided((m, k), dt, steps, perm, ints)
                    b = t._strided((k, n), dt, steps[::-1], perm[::-1], ints)
                    try:
                        t._check_product(a, b, (((1,), (0,)), ((), ())), dt, ints)
                    except AssertionError as e:
                        fails.append(f"{dt.__name__} {m}x{k}@{k}x{n} {steps} {perm} {ints}: {e}")
a = t._strided((3, 130, 300), np.float32, [1, 2, -1], [2, 0, 1])
b = t._strided((3, 300, 600), np.float32, [1, 1, 1], [0, 1, 2])
outs = []
for n in (1, 2, 3):
    threads.set_pool_size(n)
    outs.append(t._native_product(a, b, (((2,), (1,)), ((0,), (0,)))))
if not all(np.array_equal(o, outs[0]) for o in outs):
    fails.append("results depend on the thread count")
print(json.dumps({"isa": _native.gemm_isa(), "fails": fails[:5]}))
"""


@pytest.mark.parametrize("isa", ["avx2", "generic"])
def test_every_instruction_set(isa):
    """The AVX2 and baseline kernels (which this machine would not pick if it has AVX-512),
    selected with STARLING_GEMM_ISA in a fresh process, on hard shapes and strides."""
    import json
    import subprocess
    import sys
    if isa == "avx2" and _native.gemm_isa() == "generic":
        pytest.skip("CPU without AVX2")
    env = dict(os.environ, STARLING_GEMM_ISA=isa)
    r = subprocess.run([sys.executable, "-c", _ISA_SWEEP, os.path.dirname(__file__)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["isa"] == isa and not out["fails"], out
