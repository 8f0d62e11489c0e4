"""x.at[idx] functional updates against NumPy (ufunc.at / assignment) and a loop oracle for every
mode, with duplicate, negative and out-of-bounds indices; staging with traced values and indices."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import starling.numpy as snp
from starling.core.ir import check_program, eval_program
from starling.transforms.stage import make_ir

UFUNC = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum,
         "subtract": np.subtract}


def staged(f, *args):
    args = [snp.asarray(a) for a in args]
    prog = make_ir(f)(*args)
    check_program(prog)
    return [np.asarray(o) for o in eval_program(prog, prog.consts, *args)], prog


def update(x, idx, op, v, **kw):
    return getattr(snp.asarray(x).at[idx], op)(v, **kw)


# ---- every op against NumPy, duplicates included ----------------------------------------------

IDX_CASES = [
    ("dup 1d", np.array([0, 2, 0, 0, -1])),
    ("dup rows", (np.array([1, 1, 0]), slice(None))),
    ("dup 2d", (np.array([[0, 2], [0, 2]]), np.array([1, 1]))),
    ("sep", (np.array([0, 0]), slice(1, 3), np.array([2, 2]))),
]


# (NumPy orders complex numbers lexicographically for min/max; those pairs are left out.)
OP_DTYPES = [(op, dt) for op in ["add", "multiply", "min", "max", "subtract"]
             for dt in [np.float64, np.int32, np.uint8, np.complex64, np.float16]
             if not (dt == np.complex64 and op in ("min", "max"))]


@pytest.mark.parametrize("op,dtype", OP_DTYPES,
                         ids=[f"{o}-{np.dtype(d).name}" for o, d in OP_DTYPES])
@pytest.mark.parametrize("name,idx", IDX_CASES, ids=[c[0] for c in IDX_CASES])
def test_accumulating_ops_match_ufunc_at(op, dtype, name, idx):
    rng = np.random.default_rng(0)
    x = (rng.integers(1, 4, size=(3, 4, 3))).astype(dtype)
    shape = x[idx].shape
    v = rng.integers(1, 4, size=shape).astype(dtype)
    want = x.copy()
    UFUNC[op].at(want, idx, v)
    got = update(x, idx, op, v)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(got), want)
    # Staged with traced values, updates and (array) indices.
    arrs = [i for i in (idx if isinstance(idx, tuple) else (idx,)) if isinstance(i, np.ndarray)]

    def f(a, u, *ii):
        it = iter(ii)
        full = tuple(next(it) if isinstance(i, np.ndarray) else i
                     for i in (idx if isinstance(idx, tuple) else (idx,)))
        return getattr(a.at[full], op)(u)
    (out,), prog = staged(f, x, v, *arrs)
    np.testing.assert_array_equal(out, want)
    assert [e.primitive.name for e in prog.eqns][-1] == "scatter"


def _set_oracle(x, idx, v):
    # Last update wins: apply the updates one by one in C order.
    out = x.copy()
    idx = idx if isinstance(idx, tuple) else (idx,)
    v = np.broadcast_to(v, x[idx].shape)
    probe = np.arange(x.size).reshape(x.shape)[idx]   # flat position of every indexed element
    for pos, val in zip(probe.reshape(-1), v.reshape(-1)):
        out.reshape(-1)[pos] = val
    return out


@pytest.mark.parametrize("name,idx", IDX_CASES, ids=[c[0] for c in IDX_CASES])
def test_set_last_duplicate_wins(name, idx):
    x = np.zeros((3, 4, 3))
    v = np.arange(x[idx].size, dtype=np.float64).reshape(x[idx].shape) + 1
    np.testing.assert_array_equal(np.asarray(update(x, idx, "set", v)), _set_oracle(x, idx, v))


@pytest.mark.parametrize("idx", [
    0, -1, (1, 2), slice(1, 3), slice(None, None, -2), (Ellipsis, 1), (None, 0), (0, None, 1),
    (slice(None), [2, 0]), ([0, 1], slice(None), [1, 2]), (np.array([True, False, True]),),
    (slice(2, 0, -1), np.array([True, False, False, True])), (Ellipsis,), (), True, (False, 0),
    ([[0], [2]], slice(1, 4), [[0, 1, 2]]), (slice(None), []),
])
def test_set_and_add_match_numpy_assignment(idx):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 3))
    v = rng.standard_normal(x[idx].shape)
    want = x.copy()
    want[idx] = v
    np.testing.assert_array_equal(np.asarray(update(x, idx, "set", v)), want)
    want = x.copy()
    np.add.at(want, idx, v)
    np.testing.assert_allclose(np.asarray(update(x, idx, "add", v)), want)
    # A scalar broadcasts; the source array is unchanged.
    xs = snp.asarray(x)
    want = x.copy()
    want[idx] = 2.0
    np.testing.assert_array_equal(np.asarray(xs.at[idx].set(2.0)), want)
    np.testing.assert_array_equal(np.asarray(xs), x)
    (out,), _ = staged(lambda a, u: a.at[idx].set(u), x, v)
    want = x.copy()
    want[idx] = v
    np.testing.assert_array_equal(out, want)


def test_divide_power_apply_get():
    x = np.arange(1.0, 7.0)
    idx = np.array([0, 3, 3])
    a = snp.asarray(x)
    want = x.copy()
    want[[0, 3]] /= 2
    np.testing.assert_allclose(np.asarray(a.at[idx].divide(2.0)), want)
    want = x.copy()
    want[[0, 3]] **= 2
    np.testing.assert_allclose(np.asarray(a.at[idx].power(2)), want)
    want = x.copy()
    want[[0, 3]] = -want[[0, 3]]
    np.testing.assert_allclose(np.asarray(a.at[idx].apply(snp.negative)), want)
    np.testing.assert_array_equal(np.asarray(a.at[idx].get()), x[idx])
    # Integer x: division result cast back (truncation), as documented.
    xi = snp.asarray(np.array([7, 9]))
    np.testing.assert_array_equal(np.asarray(xi.at[0].divide(2)), [3, 9])


# ---- modes -----------------------------------------------------------------------------------

def _oracle_1d(x, idx, v, op, mode):
    out = x.copy()
    n = len(x)
    for i, u in zip(np.broadcast_to(idx, v.shape), v):
        i = int(i)
        if mode == "wrap":
            i = i % n
        else:
            i = i + n if i < 0 else i
            if not 0 <= i < n:
                if mode == "clip":
                    i = min(max(i, 0), n - 1)
                else:
                    continue
        out[i] = u if op == "set" else UFUNC[op](out[i], u)
    return out


@pytest.mark.parametrize("mode", [None, "drop", "fill", "clip", "wrap"])
@pytest.mark.parametrize("op", ["set", "add", "min"])
def test_update_modes(mode, op):
    x = np.arange(5.0)
    idx = np.array([-1, 5, -6, 2, 12, -7, 2])
    v = np.arange(10.0, 17.0)
    got = update(x, idx, op, v, mode=mode)
    np.testing.assert_array_equal(np.asarray(got), _oracle_1d(x, idx, v, op, mode or "drop"))
    (out,), _ = staged(lambda a, i, u: getattr(a.at[i], op)(u, mode=mode), x, idx, v)
    np.testing.assert_array_equal(out, np.asarray(got))


def test_promise_in_bounds_never_crashes_and_keeps_in_bounds_updates():
    x = np.zeros(4)
    got = np.asarray(update(x, np.array([1, 100, -100]), "add", 1.0, mode="promise_in_bounds"))
    assert got.shape == (4,) and got[1] == 1.0
    g = np.asarray(snp.asarray(x).at[np.array([2, 1000])].get(mode="promise_in_bounds"))
    assert g.shape == (2,) and g[0] == 0.0


@pytest.mark.parametrize("mode,want", [
    (None, [4.0, 0.0, 4.0, 3.0]), ("clip", [4.0, 0.0, 4.0, 3.0]),
    ("fill", [np.nan, np.nan, 4.0, 3.0]), ("drop", [np.nan, np.nan, 4.0, 3.0]),
    ("wrap", [0.0, 4.0, 4.0, 3.0]),
])
def test_get_modes(mode, want):
    x = snp.asarray(np.arange(5.0))
    idx = np.array([10, -6, -1, 3])
    np.testing.assert_array_equal(np.asarray(x.at[idx].get(mode=mode)), want)
    (out,), _ = staged(lambda a, i: a.at[i].get(mode=mode), np.arange(5.0), idx)
    np.testing.assert_array_equal(out, want)


def test_get_fill_value_and_python_int_index():
    x = snp.asarray(np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(x.at[2].get(mode="fill", fill_value=-1)), [-1] * 3)
    np.testing.assert_array_equal(np.asarray(x.at[5].get()), [3, 4, 5])   # clip
    np.testing.assert_array_equal(np.asarray(x.at[1, -1].get()), 5)
    # Python-int updates out of bounds are dropped (JAX's behaviour), not errors.
    np.testing.assert_array_equal(np.asarray(x.at[2].set(9)), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(x.at[-3, 0].add(9)), np.arange(6).reshape(2, 3))


@given(st.data())
def test_random_scatter_add_matches_oracle(data):
    n, m = data.draw(st.integers(1, 5)), data.draw(st.integers(0, 3))
    k = data.draw(st.integers(0, 6))
    idx = np.array(data.draw(st.lists(st.integers(-2 * n, 2 * n), min_size=k, max_size=k)),
                   dtype=np.int64)
    mode = data.draw(st.sampled_from(["drop", "clip", "wrap"]))
    op = data.draw(st.sampled_from(["add", "set", "max"]))
    x = np.arange(n * m, dtype=np.float64).reshape(n, m)
    v = np.arange(k * m, dtype=np.float64).reshape(k, m) + 100
    want = np.stack([_oracle_1d(x[:, j], idx, v[:, j], op, mode) for j in range(m)], axis=1) \
        if m else x
    got = update(x, idx, op, v, mode=mode)
    np.testing.assert_array_equal(np.asarray(got), want.reshape(n, m))
    (out,), _ = staged(lambda a, i, u: getattr(a.at[i], op)(u, mode=mode), x, idx, v)
    np.testing.assert_array_equal(out, want.reshape(n, m))


# ---- dtypes, masks, errors -------------------------------------------------------------------

def test_update_dtype_casting_and_weak_type():
    xi = snp.asarray(np.zeros(3, np.int32))
    out = xi.at[0].set(2.7)
    assert out.dtype == np.int32 and int(out[0]) == 2           # truncated, as astype
    out = xi.at[1].add(snp.asarray(np.array(1.9, np.float64)))
    assert out.dtype == np.int32 and int(out[1]) == 1
    with pytest.raises(OverflowError, match="out of range for int8"):
        snp.asarray(np.zeros(2, np.int8)).at[0].set(300)
    xf = snp.asarray(np.zeros(2, np.float32))
    assert xf.at[0].set(complex(1, 2)).dtype == np.float32
    w = snp.multiply(1.5, 1.0)                                  # weak 0-d
    assert w.at[()].set(2.0).weak_type


def test_traced_mask_update_uses_select():
    xn = np.arange(12.0).reshape(3, 4)
    m = xn % 3 == 0
    for op, fn in [("set", lambda a: np.where(m, -1.0, a)),
                   ("add", lambda a: np.where(m, a + 2, a)),
                   ("multiply", lambda a: np.where(m, a * 2, a)),
                   ("min", lambda a: np.where(m, np.minimum(a, 4), a)),
                   ("max", lambda a: np.where(m, np.maximum(a, 4), a))]:
        val = -1.0 if op == "set" else (4.0 if op in ("min", "max") else 2.0)
        (out,), prog = staged(lambda a, mm: getattr(a.at[mm], op)(val), xn, m)
        np.testing.assert_array_equal(out, fn(xn), err_msg=op)
        assert "scatter" not in [e.primitive.name for e in prog.eqns]
    # Leading-dims mask with row updates that broadcast over the True rows.
    rows = np.array([True, False, True])
    (out,), _ = staged(lambda a, mm: a.at[mm, ...].set(snp.asarray(np.array([9.0, 8, 7, 6]))),
                       xn, rows)
    want = xn.copy()
    want[rows] = [9.0, 8, 7, 6]
    np.testing.assert_array_equal(out, want)


def test_traced_mask_errors():
    x = snp.asarray(np.zeros((3, 4)))
    m = snp.asarray(np.ones((3, 4), bool))
    with pytest.raises(IndexError, match="traced boolean mask"):
        make_ir(lambda a, mm: a.at[mm].get())(x, m)
    with pytest.raises(IndexError, match="sole index"):
        make_ir(lambda a, mm: a.at[0, mm[0]].set(1.0))(x, m)
    with pytest.raises(ValueError, match="must broadcast to the array's shape"):
        make_ir(lambda a, mm: a.at[mm].set(snp.asarray(np.ones(5))))(x, m)


def test_update_errors():
    x = snp.asarray(np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"cannot broadcast updates of shape \(3,\) to the indexed "
                                         r"shape \(2, 4\)"):
        x.at[:2].set(np.ones(3))
    with pytest.raises(ValueError, match="mode must be one of"):
        x.at[0].set(1.0, mode="bogus")
    with pytest.raises(IndexError, match="too many indices"):
        x.at[0, 0, 0].set(1.0)
    with pytest.raises(TypeError, match="not a valid index"):
        x.at["a"].set(1.0)
    # Extra leading size-1 dims of the updates are dropped, as in NumPy assignment.
    np.testing.assert_array_equal(np.asarray(x.at[0].set(np.ones((1, 1, 4)))[0]), np.ones(4))


def test_unique_indices_hint_keeps_results():
    x = snp.asarray(np.zeros(5))
    out = x.at[np.array([4, 1])].set(np.array([1.0, 2.0]), unique_indices=True,
                                     indices_are_sorted=False)
    np.testing.assert_array_equal(np.asarray(out), [0, 2, 0, 0, 1])


def test_at_repr_and_helper_is_reusable():
    x = snp.asarray(np.zeros(3))
    helper = x.at
    assert "_IndexUpdateHelper" in repr(helper) and "_IndexUpdateRef" in repr(helper[0])
    a, b = helper[0].set(1.0), helper[1].set(2.0)
    np.testing.assert_array_equal(np.asarray(a), [1, 0, 0])
    np.testing.assert_array_equal(np.asarray(b), [0, 2, 0])


def test_traced_scalar_index_with_slices():
    xn = np.arange(12.0).reshape(3, 4)
    (out,), prog = staged(lambda a, i, u: a.at[i, 1:3].set(u), xn, np.array(-1), np.array([7.0, 8]))
    want = xn.copy()
    want[-1, 1:3] = [7, 8]
    np.testing.assert_array_equal(out, want)
    (out,), _ = staged(lambda a, i: a.at[i, ::-2].get(), xn, np.array(1))
    np.testing.assert_array_equal(out, xn[1, ::-2])
