"""x[idx] against NumPy (eager and staged, static and traced indices), error messages, and the
other indexing functions' special cases (modes, size=, errors)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import starling.numpy as snp
from starling.arrays.ops.index_parse import InvalidIndexError
from starling.core.ir import check_program, eval_program
from starling.core.trace import ConcretizationError
from starling.transforms.stage import make_ir

X = np.arange(120, dtype=np.float32).reshape(4, 5, 6)


def staged(f, *args):
    """Runs ``f`` staged (all args traced) and returns the outputs as NumPy arrays."""
    args = [snp.asarray(a) for a in args]
    prog = make_ir(f)(*args)
    check_program(prog)
    outs = eval_program(prog, prog.consts, *args)
    return [np.asarray(o) for o in outs], prog


def check_index(xn, idx):
    want = xn[idx]
    got = snp.asarray(xn)[idx]
    assert got.shape == want.shape and got.dtype == want.dtype, idx
    np.testing.assert_array_equal(np.asarray(got), want, err_msg=repr(idx))
    (out,), _ = staged(lambda a: a[idx], xn)
    assert out.shape == want.shape, (idx, out.shape, want.shape)
    np.testing.assert_array_equal(out, want, err_msg=f"staged {idx!r}")


# NumPy's rules for where the broadcast advanced dims go, the cases that are easy to get wrong.
TABLE = [
    0, -1, (3, -5, 5), slice(None, None, -1), slice(-2, None, -3), (slice(None), slice(4, 1, -2)),
    (Ellipsis, 0), (None, Ellipsis, None), (0, None, slice(None), None), (),
    [3, 0, -1], [[0, 1], [2, 3]], (slice(None), [4, 0]), (Ellipsis, [5, 0, 1]),
    ([0, 1], slice(None), [1, 2]),            # separated by a slice: advanced dims first
    (slice(None), [0, 2], [1, 3]),            # adjacent: advanced dims stay in place
    (slice(1, 3), 0, [1, 2]),                 # int + array adjacent: in place
    (0, slice(None), [1, 2]),                 # int + array separated: first
    ([0, 1], None, [0, 1]),                   # None separates
    ([1], Ellipsis, [2]),                     # an Ellipsis expanding to 0 dims separates
    ([0, 1, 2], True, [0, 1, 2]),             # a 0-d bool is an advanced index
    (slice(None), True, [0, 1]), (Ellipsis, False), True, False,
    ([[0], [3]], slice(1, 3), [[0, 1, 2]]),
    (np.array([True, False, True, True]),), (np.ones((4, 5), bool),), (0, np.eye(5, 6, dtype=bool)),
    (np.array([True, False, True, True]), slice(None), [0, 1, 5]),
    (slice(None), []), ([],), (np.array([], dtype=np.int8), 0),
    (np.array(2), slice(None), [0, 1]), (np.array([3, 0], np.uint16), np.array([4], np.int8)),
    (slice(-100, 100), slice(7, None)),
]


@pytest.mark.parametrize("idx", TABLE, ids=[repr(i)[:40] for i in TABLE])
def test_index_table(idx):
    check_index(X, idx)


@pytest.mark.parametrize("shape,idx", [
    ((), ()), ((), None), ((), Ellipsis), ((), True), ((), (None, False)),
    ((0, 3), (slice(None), [0, 2])), ((0, 3), (Ellipsis, -1)), ((3, 0), ([0, 2, 1],)),
    ((3, 0), ([0, 2], slice(None))), ((2, 0, 4), (slice(None), slice(None), [1, 3])),
    ((1,), 0), ((1, 1), (-1, [0, 0, 0])),
])
def test_index_edge_shapes(shape, idx):
    check_index(np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape), idx)


@st.composite
def index_cases(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(0, 5)) for _ in range(ndim))
    items = []
    arr_shapes = draw(st.sampled_from([(), (3,), (2, 1), (1, 4)]))
    for d in shape:
        kind = draw(st.sampled_from(["int", "slice", "array", "full"] if d else ["slice", "full"]))
        if kind == "int":
            items.append(draw(st.integers(-d, d - 1)))
        elif kind == "slice":
            bound = st.one_of(st.none(), st.integers(-d - 2, d + 2))
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
            items.append(slice(draw(bound), draw(bound), step))
        elif kind == "array":
            vals = draw(st.lists(st.integers(-d, d - 1), min_size=int(np.prod(arr_shapes)),
                                 max_size=int(np.prod(arr_shapes))))
            items.append(np.array(vals, dtype=np.int64).reshape(arr_shapes))
        else:
            items.append(slice(None))
    if draw(st.booleans()):
        # An Ellipsis stands for a run of dims (possibly none); later items keep their dims.
        p = draw(st.integers(0, len(items)))
        q = draw(st.integers(p, len(items)))
        items[p:q] = [Ellipsis]
    elif len(items) > 1 and draw(st.booleans()):
        items = items[:draw(st.integers(1, len(items)))]   # trailing dims implicit
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    return shape, tuple(items)


@given(index_cases())
def test_random_indices_match_numpy(case):
    shape, idx = case
    xn = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 7
    check_index(xn, idx)
    # The same index with its arrays traced (staged as Program inputs).
    arr_pos = [i for i, it in enumerate(idx) if isinstance(it, np.ndarray)]
    if arr_pos:
        def f(a, *arrs):
            items = list(idx)
            for p, v in zip(arr_pos, arrs):
                items[p] = v
            return a[tuple(items)]
        (out,), _ = staged(f, xn, *[idx[p] for p in arr_pos])
        np.testing.assert_array_equal(out, xn[idx])


def test_basic_index_stages_static_slicing_only():
    _, prog = staged(lambda a: a[1:, None, ::-2, 3], X)
    names = [e.primitive.name for e in prog.eqns]
    assert "gather" not in names and "slice" in names and "rev" in names
    _, prog = staged(lambda a, i: a[i], X, np.array([0, 2]))
    assert [e.primitive.name for e in prog.eqns] == ["gather"]
    assert prog.eqns[0].params["mode"] == "clip"


def test_traced_out_of_bounds_index_clamps():
    (out,), _ = staged(lambda a, i: a[i], np.arange(5.0), np.array([-1, 7, -9, 2]))
    np.testing.assert_array_equal(out, [4.0, 4.0, 0.0, 2.0])


def test_weak_type_and_dtype_preserved():
    s = snp.asarray(np.arange(4, dtype=np.uint8))
    assert s[1:].dtype == np.uint8 and s[[0, 1]].dtype == np.uint8 and not s[0].weak_type
    weak = snp.multiply(2.5, 1.0)  # an operation on Python floats: weak
    assert weak.weak_type and weak[()].weak_type and weak[None].weak_type
    (out,), prog = staged(lambda a: a[None][[0, 0]], np.float32(1.0))
    assert prog.outvars[0].aval.dtype == np.float32


def test_result_is_not_writable_into_source():
    x = snp.asarray(np.arange(6.0))
    view = np.asarray(x[1:3])
    assert not view.flags.writeable


def test_iteration_uses_getitem():
    x = snp.asarray(np.arange(6).reshape(3, 2))
    rows = [np.asarray(r) for r in x]
    np.testing.assert_array_equal(np.stack(rows), np.arange(6).reshape(3, 2))


# ---- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("idx,exc,match", [
    ((0, 0, 0), IndexError, "too many indices for array of ndim 2: got 3"),
    (3, IndexError, "index 3 is out of bounds for axis 0 with size 3"),
    ((0, -5), IndexError, "index -5 is out of bounds for axis 1 with size 4"),
    ([0, 3], IndexError, "index 3 is out of bounds for axis 0 with size 3"),
    ((slice(None), np.array([-5])), IndexError, "index -5 is out of bounds for axis 1"),
    (np.array([0.0, 1.0]), IndexError, "integer or boolean type, got dtype float64"),
    (([0, 1], [0, 1, 2]), IndexError, r"could not be broadcast together with shapes \(2,\) \(3,\)"),
    ("a", TypeError, "str 'a' is not a valid index"),
    ({0: 1}, TypeError, "dict .* is not a valid index"),
    (1.5, TypeError, "float 1.5 is not a valid index"),
    ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
    (np.array([True, False]), IndexError, "boolean index did not match indexed array along axis 0"),
    (slice(None, None, 0), ValueError, "slice step cannot be zero"),
    (slice(0.5, None), TypeError, "slice bounds must be integers"),
])
def test_index_errors(idx, exc, match):
    x = snp.asarray(np.zeros((3, 4)))
    with pytest.raises(exc, match=match):
        x[idx]
    # The same checks apply while staging (concrete indices are checked statically).
    with pytest.raises(exc, match=match):
        make_ir(lambda a: a[idx])(x)


def test_invalid_index_error_is_type_and_index_error():
    with pytest.raises(InvalidIndexError) as info:
        snp.asarray([1, 2])["x"]
    assert isinstance(info.value, TypeError) and isinstance(info.value, IndexError)
    assert "valid indices are integers, slices" in str(info.value)


def test_traced_mask_and_traced_slice_errors():
    x = snp.asarray(np.arange(4.0))
    with pytest.raises(IndexError, match="traced boolean mask.*where"):
        make_ir(lambda a: a[a > 1])(x)
    with pytest.raises(IndexError, match="traced boolean mask"):
        make_ir(lambda a, b: a[b])(x, snp.asarray(True))
    with pytest.raises(ConcretizationError, match="slice bounds must be static"):
        make_ir(lambda a, i: a[i:])(x, snp.asarray(1))
    with pytest.raises(TypeError, match="list of traced values"):
        make_ir(lambda a, i: a[[i, i]])(x, snp.asarray(1))


def test_item_assignment_is_rejected():
    x = snp.asarray(np.zeros(3))
    with pytest.raises(TypeError, match=r"x.at\[idx\].set"):
        x[0] = 1.0


# ---- take / take_along_axis / put ------------------------------------------------------------

@pytest.mark.parametrize("dtype,fill", [
    (np.float32, np.nan), (np.int8, -128), (np.uint16, 65535), (np.bool_, True),
    (np.complex64, complex(np.nan, np.nan)),
])
def test_take_fill_mode_defaults(dtype, fill):
    x = snp.asarray(np.ones(3, dtype))
    out = np.asarray(snp.take(x, np.array([0, 3, -4, -1]), mode="fill"))
    want = np.array([1, fill, fill, 1]).astype(dtype)
    np.testing.assert_array_equal(out, want)
    got = np.asarray(snp.take(x, np.array([5]), mode="fill", fill_value=7))
    np.testing.assert_array_equal(got, np.array([7]).astype(dtype))


def test_take_modes_and_errors():
    x = snp.asarray(np.arange(5))
    np.testing.assert_array_equal(np.asarray(snp.take(x, [7, -1], mode="clip")), [4, 4])
    np.testing.assert_array_equal(np.asarray(snp.take(x, [7, -6], mode="wrap")), [2, 4])
    with pytest.raises(IndexError, match="index 9 is out of bounds for axis 0 with size 5"):
        snp.take(x, [9])
    with pytest.raises(TypeError, match="integer dtype, got float"):
        snp.take(x, np.array([1.0]))
    with pytest.raises(ValueError, match="mode must be one of"):
        snp.take(x, [1], mode="bogus")
    # Traced indices: clamped (mode None), staged as one gather.
    (out,), prog = staged(lambda a, i: snp.take(a, i), np.arange(5), np.array([9, -1]))
    np.testing.assert_array_equal(out, [4, 4])


def test_take_along_axis_errors():
    x = snp.asarray(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="same number of dimensions"):
        snp.take_along_axis(x, np.array([0, 1]), axis=1)
    with pytest.raises(ValueError, match="do not broadcast"):
        snp.take_along_axis(x, np.zeros((2, 4), int), axis=1)
    with pytest.raises(IndexError, match="out of bounds"):
        snp.take_along_axis(x, np.full((3, 1), 4), axis=1)


def test_put_is_functional_and_checks_bounds():
    a = snp.asarray(np.zeros(5))
    b = snp.put(a, [0, 2], [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(a), np.zeros(5))
    np.testing.assert_array_equal(np.asarray(b), [1, 0, 2, 0, 0])
    with pytest.raises(IndexError, match="out of bounds"):
        snp.put(a, [5], 1.0)
    np.testing.assert_array_equal(np.asarray(snp.put(a, [5, 1], 3.0, mode="drop")),
                                  [0, 3, 0, 0, 0])


# ---- diagonal / trace ------------------------------------------------------------------------

def test_diagonal_errors():
    with pytest.raises(ValueError, match="ndim >= 2"):
        snp.diagonal(snp.asarray(np.zeros(3)))
    with pytest.raises(ValueError, match="cannot be the same"):
        snp.diagonal(snp.asarray(np.zeros((3, 3))), 0, 1, -1)
    with pytest.raises(IndexError, match="axis2 5 is out of bounds"):
        snp.diagonal(snp.asarray(np.zeros((3, 3))), 0, 0, 5)


def test_trace_staged():
    xn = np.arange(24.0).reshape(2, 3, 4)
    (out,), _ = staged(lambda a: snp.trace(a, 1, 2, 1), xn)
    np.testing.assert_allclose(out, np.trace(xn, 1, 2, 1))


# ---- nonzero family --------------------------------------------------------------------------

def test_nonzero_needs_size_under_tracing():
    x = snp.asarray(np.array([0.0, 1.0, 2.0]))
    with pytest.raises(ConcretizationError, match="pass a static size="):
        make_ir(snp.nonzero)(x)
    with pytest.raises(ConcretizationError, match="size="):
        make_ir(snp.argwhere)(x)
    (out,), _ = staged(lambda a: snp.nonzero(a, size=4, fill_value=-1)[0], np.array([0, 3, 0, 5]))
    np.testing.assert_array_equal(out, [1, 3, -1, -1])


def test_nonzero_errors():
    with pytest.raises(ValueError, match="0-d array"):
        snp.nonzero(snp.asarray(1.0))
    with pytest.raises(ValueError, match="size must be >= 0"):
        snp.nonzero(snp.asarray([1]), size=-1)
    with pytest.raises(TypeError, match="fill_value must be an int"):
        snp.nonzero(snp.asarray([1]), size=2, fill_value=0.5)
    out = snp.nonzero(snp.asarray([0, 2]))
    assert isinstance(out, tuple) and out[0].dtype == np.int64


def test_compress_errors():
    with pytest.raises(IndexError, match="condition is True at index 3"):
        snp.compress([0, 0, 0, 1], snp.asarray(np.zeros(3)))
    with pytest.raises(ValueError, match="condition must be 1-d"):
        snp.compress(np.ones((2, 2), bool), snp.asarray(np.zeros(3)))


# ---- select / choose -------------------------------------------------------------------------

def test_select_errors_and_promotion():
    with pytest.raises(ValueError, match="same length"):
        snp.select([np.array([True])], [])
    with pytest.raises(ValueError, match="must not be empty"):
        snp.select([], [])
    with pytest.raises(TypeError, match="entry 0 must be a boolean array"):
        snp.select([np.array([1])], [np.array([1])])
    out = snp.select([np.array([True, False])], [snp.asarray(np.array([1, 2], np.int8))], 0)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(out), [1, 0])
    out = snp.select([np.array([True, False])], [np.array([1, 2], np.int8)], 0.5)
    assert out.dtype == np.float32  # JAX promotion: int8 with a weak float -> default float


def test_choose_errors():
    with pytest.raises(ValueError, match="invalid entry"):
        snp.choose(np.array([0, 2]), [np.zeros(2), np.ones(2)])
    with pytest.raises(TypeError, match="integer dtype"):
        snp.choose(np.array([0.0]), [np.zeros(1)])
    with pytest.raises(ValueError, match="must not be empty"):
        snp.choose(np.array([0]), [])
    # Traced index: clamped.
    (out,), _ = staged(lambda i: snp.choose(i, [snp.asarray(np.zeros(2)), snp.asarray(np.ones(2))]),
                       np.array([5, -1]))
    np.testing.assert_array_equal(out, [1, 0])
    # An array of choices enumerates its first axis.
    out = snp.choose(np.array([1, 0]), np.array([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(np.asarray(out), [3, 2])


# ---- unravel_index / ravel_multi_index -------------------------------------------------------

def test_unravel_ravel_errors_and_traced():
    with pytest.raises(ValueError, match="index 12 is out of bounds"):
        snp.unravel_index(np.array([12]), (3, 4))
    with pytest.raises(ValueError, match="ravel_multi_index"):
        snp.ravel_multi_index((np.array([3]), np.array([0])), (3, 4))
    outs, _ = staged(lambda i: snp.unravel_index(i, (3, 4)), np.array([0, 7, 11]))
    for o, w in zip(outs, np.unravel_index([0, 7, 11], (3, 4))):
        np.testing.assert_array_equal(o, w)
    (out,), _ = staged(lambda i, j: snp.ravel_multi_index((i, j), (3, 4), mode="clip"),
                       np.array([0, 5, -1]), np.array([3, 0, 9]))
    np.testing.assert_array_equal(
        out, np.ravel_multi_index((np.array([0, 5, -1]), np.array([3, 0, 9])), (3, 4), mode="clip"))
