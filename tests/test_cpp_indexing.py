"""Native gather / scatter kernels of the cpp backend (src/lowering/backends/cpp/indexing.py):
bit-identical to the eager (NumPy) primitives for every mode, op, index dtype and hard case
(negative, out-of-bounds and huge unsigned indices, duplicates, broadcast index arrays, empty
axes, NaN, low-precision and complex dtypes), and they really run natively."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hs

import starling as st
import starling.numpy as snp
from starling import nn
from starling.arrays.ops import gather_scatter as GS
from starling.lowering import backends, cache
from starling.lowering.backends.cpp import backend as cpp_backend
from starling.lowering.pipeline import run_pipeline
from starling.transforms.stage import make_ir

pytestmark = [pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler"),
              pytest.mark.usefixtures("cpp_kernel_env")]

MODES = GS.GATHER_MODES
OPS = GS.SCATTER_OPS


def _bits(a):
    a = np.atleast_1d(np.asarray(a))
    return a.view(np.uint8) if a.size else a


def _check(cases, native=True):
    """Compiles every (function, args) case in ONE compiler run; each result must equal the
    eager result bit for bit (NaN payloads included) and, with ``native``, no gather / scatter
    may run through NumPy."""
    progs = [run_pipeline(make_ir(f)(*args)) for f, args in cases]
    exes = backends.get_backend("cpp").compile_many(progs)
    for (f, args), exe, prog in zip(cases, exes, progs):
        got = exe(prog.consts, list(args))
        want = st.tree.leaves(f(*args))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(_bits(g), _bits(w))
        if native:
            left = [e.primitive.name for e in exe.program.eqns
                    if e.primitive.name in ("gather", "scatter")]
            assert not left, exe.program


def gather(mode, fill=None):
    return lambda x, *idx: GS.gather(x, *idx, mode=mode, fill_value=fill)


def scatter(op, mode, unique=False):
    return lambda x, u, *idx: GS.scatter_p.bind(x, u, *idx, op=op, mode=mode,
                                                unique_indices=unique)


RNG = np.random.default_rng(0)
X = snp.asarray(RNG.standard_normal((7, 5)).astype(np.float32))
# negative (wrapped once), out of bounds both ways, duplicates
IDX = np.array([0, -1, 6, 9, -9, 3, 3, -7, 7])


@pytest.mark.parametrize("idx_dt", [np.int64, np.int32, np.int8, np.uint8, np.uint64])
def test_gather_every_mode_and_index_dtype(idx_dt):
    idx = IDX if np.dtype(idx_dt).kind == "i" else np.abs(IDX)
    i = snp.asarray(idx.astype(idx_dt))
    cases = [(gather(m), (X, i)) for m in MODES]
    cases += [(gather("fill", -2.5), (X, i)), (gather("drop", 7.0), (X, i))]
    if idx_dt == np.uint64:   # beyond int64: out of bounds, not negative
        huge = snp.asarray(np.array([2 ** 64 - 1, 2 ** 63, 1], np.uint64))
        cases += [(gather(m), (X, huge)) for m in MODES]
    _check(cases)


def test_gather_two_broadcast_index_arrays_and_rest_dims():
    x = snp.asarray(RNG.standard_normal((4, 6, 3, 2)).astype(np.float64))
    i = snp.asarray(np.array([[0], [3], [-1]]))            # (3, 1)
    j = snp.asarray(np.array([[5, 0, -6, 2, 9]]))           # (1, 5): broadcast to (3, 5)
    _check([(gather(m), (x, i, j)) for m in MODES]
           + [(gather(m), (x, snp.asarray(np.int32(2)))) for m in ("clip", "fill")])


@pytest.mark.parametrize("dt", [np.bool_, np.uint16, np.float16, ml_dtypes.bfloat16,
                                ml_dtypes.float8_e4m3fn, np.complex64, np.complex128],
                         ids=lambda d: np.dtype(d).name)
def test_gather_any_dtype_including_fill(dt):
    raw = RNG.standard_normal((5, 3)) * 4
    x = (raw + 1j * raw[::-1]).astype(dt) if np.dtype(dt).kind == "c" else raw.astype(dt)
    xs = snp.asarray(x)
    i = snp.asarray(np.array([4, -2, 8, 0]))
    _check([(gather(m), (xs, i)) for m in MODES])


def test_gather_in_parallel_chunks(monkeypatch):
    """A gather large enough for threads runs its points in chunks on the thread pool (forced
    here with tiny chunks): the same bits as eager."""
    from starling.lowering.backends.cpp import indexing as cpp_indexing
    monkeypatch.setattr(cpp_indexing, "PARALLEL_WORK", 0)
    monkeypatch.setattr(cpp_indexing, "CHUNK_WORK", 64)
    x = snp.asarray(RNG.standard_normal((50, 7)).astype(np.float32))
    i = snp.asarray(RNG.integers(-60, 60, 1000))
    _check([(gather(m), (x, i)) for m in MODES] + [(gather("fill", 1.5), (x, i))])


def test_gather_empty_axes_and_batches():
    e = snp.asarray(np.zeros((0, 3), np.float32))
    i = snp.asarray(np.array([0, 1, -1]))
    none = snp.asarray(np.zeros((0,), np.int64))
    _check([(gather(m), (e, i)) for m in MODES]
           + [(gather(m), (X, none)) for m in ("clip", "fill")]
           + [(gather("clip"), (snp.asarray(np.zeros((4, 0), np.float32)), i))])


def test_scatter_into_empty_trailing_dims():
    # found by the hypothesis test: the eager "set" reshaped its (0,) updates with -1
    x = snp.asarray(np.zeros((1, 0), np.float32))
    u = snp.asarray(np.zeros((0,), np.float32))
    i = snp.asarray(np.int32(0))
    for op in OPS:
        out = scatter(op, "clip")(x, u, i)
        assert out.shape == (1, 0) and out.dtype == np.float32
    _check([(scatter(op, m), (x, u, i)) for op in OPS for m in ("clip", "fill")])


@pytest.mark.parametrize("op", OPS)
def test_scatter_every_op_and_mode_with_duplicates(op):
    i = snp.asarray(IDX)
    u = snp.asarray(RNG.standard_normal((len(IDX), 5)).astype(np.float32))
    _check([(scatter(op, m), (X, u, i)) for m in MODES])


@pytest.mark.parametrize("dt", [np.int8, np.uint32, np.int64, np.bool_, np.float64, np.float16,
                                ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_scatter_dtypes_accumulate_in_numpy_order(dt):
    # many updates on few targets: the accumulation order shows in float16 / bfloat16 rounding
    # and integer wrap-around
    n = 400
    i = snp.asarray(RNG.integers(-3, 3, n))
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        vals = RNG.integers(max(info.min, -100), min(info.max, 100), (n, 2), endpoint=True)
        x, u = np.full((3, 2), info.max // 2, dt), vals.astype(dt)
    elif np.dtype(dt).kind == "b":
        x, u = np.zeros((3, 2), bool), RNG.random((n, 2)) > 0.6
    else:
        x = RNG.standard_normal((3, 2)).astype(dt)
        u = (RNG.standard_normal((n, 2)) * 3).astype(dt)
    xs, us = snp.asarray(x), snp.asarray(u)
    _check([(scatter(op, "clip"), (xs, us, i)) for op in OPS])


def test_scatter_nan_min_max_and_independent_reference():
    x = np.array([1.0, np.nan, 3.0, 4.0], np.float32)
    u = np.array([np.nan, 0.5, 2.0, -np.inf, 7.0], np.float32)
    idx = np.array([0, 1, 2, 2, 3])
    args = (snp.asarray(x), snp.asarray(u), snp.asarray(idx))
    _check([(scatter(op, "promise_in_bounds"), args) for op in OPS])
    # against NumPy's ufunc.at directly
    for op, uf in (("add", np.add), ("min", np.minimum), ("max", np.maximum)):
        want = x.copy()
        uf.at(want, idx, u)
        got = st.compile(scatter(op, "clip"), backend="cpp")(*args)
        np.testing.assert_array_equal(np.asarray(got), want)


def test_scatter_complex_set_is_native_and_complex_add_stays_right():
    z = snp.asarray((RNG.standard_normal((4, 2)) + 1j).astype(np.complex64))
    u = snp.asarray((RNG.standard_normal((3, 2)) * 1j).astype(np.complex64))
    i = snp.asarray(np.array([1, 1, -1]))
    _check([(scatter("set", "clip"), (z, u, i))])
    _check([(scatter("add", "clip"), (z, u, i))], native=False)   # no C formula: NumPy


def test_gather_output_never_overwrites_its_operand():
    # a dead operand of the output's size must not receive the output in place (the memory
    # plan treats gather as reading other positions than it writes)
    n = 1 << 15
    x = snp.asarray(RNG.standard_normal(n).astype(np.float32))
    perm = snp.asarray(np.arange(n)[::-1].copy())
    f = st.compile(lambda x, p: GS.gather(x * 2.0, p, mode="clip") + 1.0, backend="cpp")
    np.testing.assert_array_equal(np.asarray(f(x, perm)), np.asarray(x)[::-1] * 2 + 1)


def test_cross_entropy_and_embedding_training_steps_are_native():
    logits = snp.asarray(RNG.standard_normal((64, 10)).astype(np.float32))
    y = snp.asarray(RNG.integers(0, 10, 64))
    emb = nn.Embedding(50, 8, key=0)
    tokens = snp.asarray(RNG.integers(0, 50, (4, 6)))
    cases = [(st.value_and_grad(lambda z, y: nn.functional.cross_entropy(z, y)), (logits, y)),
             (lambda m, t: nn.value_and_grad(lambda m, t: snp.sum(m(t) ** 2))(m, t),
              (emb, tokens))]
    for f, args in cases:
        c = st.compile(f, backend="cpp")
        for g, w in zip(st.tree.leaves(c(*args)), st.tree.leaves(f(*args))):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-7)
        prog = c.lower(*args).executable.program
        assert not [e for e in prog.eqns if e.primitive.name in ("gather", "scatter")], prog


@given(hs.data())
def test_gather_scatter_match_eager_hypothesis(data):
    shape = tuple(data.draw(hs.lists(hs.integers(0, 4), min_size=1, max_size=3)))
    k = data.draw(hs.integers(1, len(shape)))
    batch = tuple(data.draw(hs.lists(hs.integers(1, 3), min_size=0, max_size=2)))
    n = int(np.prod(batch))
    idx = [snp.asarray(np.array(data.draw(hs.lists(hs.integers(-6, 6), min_size=n, max_size=n)),
                                np.int32).reshape(batch)) for _ in range(k)]
    x = snp.asarray(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) * 0.5 - 1)
    mode = data.draw(hs.sampled_from(MODES))
    op = data.draw(hs.sampled_from(OPS))
    u = snp.asarray(np.ones(batch + shape[k:], np.float32) * 1.5)
    _check([(gather(mode), (x, *idx)), (scatter(op, mode), (x, u, *idx))])


def test_indexing_fallbacks_are_gone_from_the_log(caplog, monkeypatch):
    import logging
    monkeypatch.setenv("STARLING_LOG_FALLBACKS", "1")
    for name in ("gather", "scatter"):
        cpp_backend._REPORTED.discard(name)
    with caplog.at_level(logging.DEBUG, logger="starling.lowering"):
        i = snp.asarray(np.array([2, 0]))
        st.compile(lambda x, i: x.at[i].add(1.0)[i], backend="cpp")(X, i)
    assert not [r for r in caplog.records if "through NumPy" in r.getMessage()]
