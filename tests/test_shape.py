"""Shape manipulation: error messages, weak types, methods, staging, lax-level helpers, and
hypothesis property tests against NumPy."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import starling.numpy as snp
from starling.arrays.array import wrap
from starling.arrays.ops import shape as shape_ops
from starling.core.trace import ConcretizationError
from starling.transforms.stage import make_ir


def arr(shape, dtype=np.float32):
    return snp.asarray(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape))


def prims(prog):
    return [e.primitive.name for e in prog.eqns]


# ---- error messages ---------------------------------------------------------------------------

def test_reshape_size_mismatch_message():
    with pytest.raises(ValueError, match=r"reshape: cannot reshape array of shape \(2, 3\) "
                                         r"\(size 6\) into shape \(4,\)"):
        snp.reshape(arr((2, 3)), (4,))


@pytest.mark.parametrize("shape,match", [
    ((-1, -1), "only specify one unknown dimension"),
    ((2, -2), "non-negative or -1"),
    ((4, -1), r"into shape \(4, -1\)"),
    ((0, -1), r"cannot reshape array of shape \(2, 3\)"),
])
def test_reshape_bad_shapes(shape, match):
    with pytest.raises(ValueError, match=match):
        snp.reshape(arr((2, 3)), shape)


def test_reshape_bad_order_and_type():
    with pytest.raises(ValueError, match="reshape: order must be"):
        snp.reshape(arr((2, 3)), (3, 2), order="Z")
    with pytest.raises(TypeError, match="reshape: shape entries must be integers"):
        snp.reshape(arr((2, 3)), (3.0, 2))


def test_reshape_size0_infer_matches_numpy_error():
    with pytest.raises(ValueError):
        np.zeros((0, 3)).reshape(0, -1)
    with pytest.raises(ValueError, match="reshape"):
        snp.reshape(snp.zeros((0, 3)), (0, -1))


def test_permute_dims_errors():
    with pytest.raises(ValueError, match=r"permute_dims: axes \(0,\) is not a permutation"):
        snp.permute_dims(arr((2, 3)), (0,))
    with pytest.raises(ValueError, match="permute_dims: duplicate axis"):
        snp.permute_dims(arr((2, 3)), (1, 1))
    with pytest.raises(IndexError, match="permute_dims: axis 2 is out of bounds"):
        snp.permute_dims(arr((2, 3)), (0, 2))


def test_axis_errors_are_value_and_index_errors():
    for exc in (ValueError, IndexError):
        with pytest.raises(exc, match=r"swapaxes: axis2 3 is out of bounds for array of ndim 2 "
                                      r"\(valid: -2..1\)"):
            snp.swapaxes(arr((2, 3)), 0, 3)
    with pytest.raises(ValueError, match="flip: axis -3 is out of bounds"):
        snp.flip(arr((2, 3)), axis=-3)
    with pytest.raises(ValueError, match="expand_dims: axis 3 is out of bounds for array of "
                                         "ndim 3"):
        snp.expand_dims(arr((2, 3)), 3)


def test_squeeze_non_unit_axis():
    with pytest.raises(ValueError, match=r"squeeze: .* axis 1 of shape \(1, 3\) has size 3"):
        snp.squeeze(arr((1, 3)), axis=1)


def test_concatenate_errors_list_shapes():
    with pytest.raises(ValueError, match=r"concatenate: all input arrays must have the same "
                                         r"number of dimensions, got shapes \(2, 3\), \(3,\)"):
        snp.concatenate([arr((2, 3)), arr((3,))])
    with pytest.raises(ValueError, match=r"except for the concatenation axis 0 must match, got "
                                         r"shapes \(2, 3\), \(2, 4\)"):
        snp.concatenate([arr((2, 3)), arr((2, 4))])
    with pytest.raises(ValueError, match="zero-dimensional arrays cannot be concatenated"):
        snp.concatenate([arr(()), arr(())])
    with pytest.raises(ValueError, match="concatenate: need at least one array"):
        snp.concatenate([])
    with pytest.raises(IndexError, match="concatenate: axis 2 is out of bounds"):
        snp.concatenate([arr((2, 3)), arr((2, 3))], axis=2)


def test_concatenate_low_precision_mix_raises():
    a = snp.zeros((2,), snp.float8_e4m3fn)
    with pytest.raises(TypeError, match="concatenate"):
        snp.concatenate([a, snp.zeros((2,), snp.float32)])


def test_stack_shape_mismatch():
    with pytest.raises(ValueError, match=r"stack: all input arrays must have the same shape, "
                                         r"got shapes \(2,\), \(3,\)"):
        snp.stack([arr((2,)), arr((3,))])


def test_split_errors():
    with pytest.raises(ValueError, match="split: array split does not result in an equal "
                                         "division: axis 0 of size 7 into 3 sections"):
        snp.split(arr((7,)), 3)
    with pytest.raises(ValueError, match="number of sections must be larger than 0"):
        snp.array_split(arr((7,)), 0)
    with pytest.raises(ValueError, match="vsplit: only works on arrays of 2 or more"):
        snp.vsplit(arr((4,)), 2)
    with pytest.raises(ValueError, match="split: cannot split a 0-d array"):
        snp.split(arr(()), 1)


def test_broadcast_errors():
    with pytest.raises(ValueError, match=r"broadcast_to: cannot broadcast an array of shape "
                                         r"\(3,\) to shape \(2, 4\)"):
        snp.broadcast_to(arr((3,)), (2, 4))
    with pytest.raises(ValueError, match=r"broadcast_to: cannot broadcast an array of shape "
                                         r"\(2, 3\) to shape \(3,\)"):
        snp.broadcast_to(arr((2, 3)), (3,))
    with pytest.raises(ValueError, match="broadcast_to: shape entries must be non-negative"):
        snp.broadcast_to(arr((3,)), (-1, 3))
    with pytest.raises(ValueError, match=r"broadcast_arrays: .*\(2,\), \(3,\)"):
        snp.broadcast_arrays(arr((2,)), arr((3,)))
    assert snp.broadcast_shapes((2, 1), (3,), ()) == (2, 3)
    assert snp.broadcast_shapes(5, (1,)) == (5,)
    with pytest.raises(ValueError, match="broadcast_shapes"):
        snp.broadcast_shapes((2,), (3,))


def test_misc_errors():
    with pytest.raises(ValueError, match="moveaxis: source"):
        snp.moveaxis(arr((2, 3, 4)), (0, 1), (0,))
    with pytest.raises(ValueError, match=r"repeat: got 3 repeat counts for axis 0 of size 2"):
        snp.repeat(arr((2, 3)), [1, 2, 3], axis=0)
    with pytest.raises(ValueError, match="repeat: repeat count must be non-negative"):
        snp.repeat(arr((2,)), -1)
    with pytest.raises(ValueError, match="tile: repetition counts must be non-negative"):
        snp.tile(arr((2,)), (-1,))
    with pytest.raises(ValueError, match="roll: shift"):
        snp.roll(arr((2, 3)), (1, 2, 3), axis=(0, 1))
    with pytest.raises(ValueError, match=r"matrix_transpose: expected an array of ndim >= 2"):
        snp.matrix_transpose(arr((3,)))
    with pytest.raises(ValueError, match="fliplr: expected an array of ndim >= 2"):
        snp.fliplr(arr((3,)))
    with pytest.raises(ValueError, match="unstack: expected an array of ndim >= 1"):
        snp.unstack(arr(()))
    with pytest.raises(ValueError, match="rot90: axes must name exactly 2 axes"):
        snp.rot90(arr((2, 2)), axes=(0,))


def test_pad_errors():
    with pytest.raises(ValueError, match="pad: pad widths must be non-negative"):
        snp.pad(arr((3,)), -1)
    with pytest.raises(ValueError, match="pad: unknown mode 'bogus'"):
        snp.pad(arr((3,)), 1, mode="bogus")
    with pytest.raises(TypeError, match="pad: callable modes are not supported"):
        snp.pad(arr((3,)), 1, mode=lambda v, w, i, k: None)
    with pytest.raises(ValueError, match="pad: reflect_type must be 'even' or 'odd'"):
        snp.pad(arr((3,)), 1, mode="reflect", reflect_type="up")
    with pytest.raises(ValueError, match="pad: stat_length of 0 yields no value"):
        snp.pad(arr((3,)), 1, mode="maximum", stat_length=0)
    with pytest.raises(ValueError, match="pad: stat_length must be non-negative"):
        snp.pad(arr((3,)), 1, mode="mean", stat_length=(1, -1))
    with pytest.raises(ValueError, match=r"pad: unsupported keyword\(s\) \['stat_length'\]"):
        snp.pad(arr((3,)), 1, mode="linear_ramp", stat_length=1)
    with pytest.raises(TypeError, match="pad: mode 'median' needs an ordered dtype"):
        snp.pad(arr((3,), np.complex64), 1, mode="median")
    with pytest.raises(ValueError, match="pad: can't extend empty axis 1"):
        snp.pad(snp.zeros((2, 0)), ((0, 0), (1, 0)), mode="mean")
    with pytest.raises(ValueError, match="pad: can't extend empty axis 0"):
        snp.pad(snp.zeros((0, 2)), 1, mode="edge")
    with pytest.raises(ValueError, match="pad: pad_width .* cannot be broadcast"):
        snp.pad(arr((2, 3)), ((1, 2, 3),))
    with pytest.raises(ValueError, match="pad: unsupported keyword"):
        snp.pad(arr((3,)), 1, mode="edge", constant_values=3)
    with pytest.raises(OverflowError, match="pad: constant value 300 is out of range for int8"):
        snp.pad(arr((3,), np.int8), 1, constant_values=300)


def test_traced_static_arguments_raise_concretization_error():
    x = arr((3,))
    with pytest.raises(ConcretizationError, match="repeat: repeats must be concrete"):
        make_ir(lambda x, r: snp.repeat(x, r))(x, snp.asarray([1, 2, 0]))
    with pytest.raises(ConcretizationError, match="roll: shift must be concrete"):
        make_ir(lambda x, s: snp.roll(x, s))(x, snp.asarray(1))


def test_repeat_total_repeat_length():
    x = arr((3, 2))
    got = snp.repeat(x, [2, 0, 1], axis=0, total_repeat_length=5)  # extended by the last row
    np.testing.assert_array_equal(np.asarray(got), np.asarray(x)[[0, 0, 2, 2, 2]])
    got = snp.repeat(x, 3, total_repeat_length=4)  # cut
    np.testing.assert_array_equal(np.asarray(got), [0, 0, 0, 1])
    # traced counts work once the output length is static (one gather), also under vmap
    f = lambda x, r: snp.repeat(x, r, axis=0, total_repeat_length=4)
    prog = make_ir(f)(x, snp.asarray([1, 2, 1]))
    assert {"cumsum", "searchsorted", "gather"} <= set(prims(prog))
    r = snp.asarray(np.array([[1, 2, 1], [0, 0, 4], [3, 3, 3]]))
    import starling
    got = starling.vmap(f, in_axes=(None, 0))(x, r)
    for k in range(3):
        want = snp.repeat(x, np.asarray(r)[k], axis=0, total_repeat_length=4)
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want))


def test_repeat_total_repeat_length_errors():
    x = arr((3,))
    with pytest.raises(ValueError, match="repeat: total_repeat_length must be a non-negative"):
        snp.repeat(x, 2, total_repeat_length=-1)
    with pytest.raises(ValueError, match=r"repeat: total_repeat_length=2 needs at least one"):
        snp.repeat(snp.zeros((0,)), 2, total_repeat_length=2)
    with pytest.raises(TypeError, match="repeat: repeats must be integers"):
        make_ir(lambda x, r: snp.repeat(x, r, total_repeat_length=4))(x, snp.asarray([1.0, 2.0,
                                                                                      0.0]))
    with pytest.raises(ValueError, match=r"repeat: repeats of shape \(2,\) do not match"):
        make_ir(lambda x, r: snp.repeat(x, r, total_repeat_length=4))(x, snp.asarray([1, 2]))
    assert snp.repeat(snp.zeros((0, 2)), 2, axis=0, total_repeat_length=0).shape == (0, 2)


def test_pad_modes_corners_and_long_pads_match_numpy():
    x = np.arange(12, dtype=np.float64).reshape(3, 4) ** 1.5
    for kw in [dict(mode="reflect", reflect_type="odd"), dict(mode="symmetric",
                                                              reflect_type="odd"),
               dict(mode="linear_ramp", end_values=((-1, 2), (3.5, 0))),
               dict(mode="mean", stat_length=((1, 2), (3, 1))), dict(mode="median"),
               dict(mode="maximum", stat_length=2), dict(mode="minimum")]:
        want = np.pad(x, ((5, 9), (7, 2)), **kw)
        got = snp.pad(snp.asarray(x), ((5, 9), (7, 2)), **kw)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, err_msg=str(kw))


def test_pad_integer_rounding_and_wraparound_match_numpy():
    x = np.array([1, 2, 200, 254], np.uint8)
    for kw in [dict(mode="reflect", reflect_type="odd"), dict(mode="mean", stat_length=2),
               dict(mode="median", stat_length=(2, 3)), dict(mode="linear_ramp", end_values=7)]:
        np.testing.assert_array_equal(np.asarray(snp.pad(snp.asarray(x), (3, 6), **kw)),
                                      np.pad(x, (3, 6), **kw), err_msg=str(kw))
    # half-to-even: mean(1, 2) = 1.5 -> 2, mean(2, 3) = 2.5 -> 2
    y = np.array([1, 2, 2, 3], np.int32)
    np.testing.assert_array_equal(np.asarray(snp.pad(snp.asarray(y), 1, mode="mean",
                                                     stat_length=2)), [2, 1, 2, 2, 3, 2])


def test_pad_modes_trace_and_vmap():
    import starling
    xs = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    for kw in [dict(mode="reflect", reflect_type="odd"), dict(mode="linear_ramp", end_values=2),
               dict(mode="median", stat_length=3), dict(mode="mean"), dict(mode="maximum")]:
        f = lambda x, kw=kw: snp.pad(x, ((1, 2), (3, 1)), **kw)
        got = starling.vmap(f, in_axes=-1)(snp.asarray(xs))
        want = np.stack([np.pad(xs[..., k], ((1, 2), (3, 1)), **kw) for k in range(5)])
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6, err_msg=str(kw))
        prog = make_ir(f)(snp.asarray(xs[..., 0]))
        assert "pad" in prims(prog) or "concatenate" in prims(prog)


def test_pad_traced_end_value_and_grad():
    import starling
    x = snp.asarray(np.array([1.0, 4.0]))
    g = starling.grad(lambda e: snp.sum(snp.pad(x, (2, 0), mode="linear_ramp", end_values=e)))
    # ramp [e, e + (1 - e) / 2]: d/de = 1 + 1/2
    np.testing.assert_allclose(float(g(snp.asarray(3.0))), 1.5)


# ---- semantics --------------------------------------------------------------------------------

def test_weak_type_is_kept_by_data_movement():
    w = snp.multiply(2.0, 1.0)  # an operation on Python scalars is weakly typed
    assert w.weak_type
    for y in (snp.reshape(w, (1, 1)), snp.broadcast_to(w, (3,)), snp.expand_dims(w, 0),
              snp.tile(w, 3), snp.pad(snp.reshape(w, (1,)), 1)):
        assert y.weak_type and y.dtype == np.float32
    assert not snp.concatenate([snp.reshape(w, (1,)), arr((2,), np.float16)]).weak_type


def test_concatenate_promotes_dtypes():
    out = snp.concatenate([arr((2,), np.int8), arr((3,), np.uint8)])
    assert out.dtype == np.int16
    out = snp.stack([arr((2,), np.int64), arr((2,), np.float16)], dtype=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(snp.concatenate([[1, 2], [3]]), [1, 2, 3])


def test_concatenate_result_is_c_ordered_for_transposed_inputs():
    # NumPy follows its inputs' memory order; kernels reading the result would copy it first
    from starling.arrays.ops.shape_lax import concatenate_p
    base = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 4, 3)
    parts = [np.transpose(base, (0, 2, 1)), np.transpose(base + 100, (0, 2, 1))]
    out = concatenate_p.impl(*parts, dimension=1)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, np.concatenate(parts, axis=1))
    got = snp.concatenate([snp.asarray(p) for p in parts], axis=2)
    np.testing.assert_array_equal(got, np.concatenate(parts, axis=2))


def test_pad_constant_cast_like_numpy():
    x = np.arange(3, dtype=np.int32)
    np.testing.assert_array_equal(snp.pad(snp.asarray(x), 1, constant_values=1.7),
                                  np.pad(x, 1, constant_values=1.7))
    cv = snp.asarray(np.float32(2.5))
    np.testing.assert_array_equal(snp.pad(snp.asarray(x), (1, 0), constant_values=cv),
                                  np.pad(x, (1, 0), constant_values=2))


def test_concatenate_accepts_array_as_sequence():
    x = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(snp.concatenate(snp.asarray(x)), np.concatenate(x))


def test_methods():
    x = arr((2, 3))
    assert x.reshape(3, 2).shape == (3, 2)
    assert x.reshape((3, -1)).shape == (3, 2)
    assert x.reshape(6, order="F").tolist() == np.arange(6).reshape(2, 3).ravel("F").tolist()
    assert x.T.shape == (3, 2) and arr((4, 2, 3)).T.shape == (3, 2, 4)
    assert arr((4, 2, 3)).mT.shape == (4, 3, 2)
    assert x.transpose().shape == (3, 2)
    assert arr((2, 3, 4)).transpose(1, 0, 2).shape == (3, 2, 4)
    assert arr((2, 3, 4)).transpose((2, 0, 1)).shape == (4, 2, 3)
    assert x.ravel().shape == (6,) and x.flatten().shape == (6,)
    assert arr((1, 3, 1)).squeeze().shape == (3,) and arr((1, 3, 1)).squeeze(0).shape == (3, 1)
    assert x.swapaxes(0, 1).shape == (3, 2)
    np.testing.assert_array_equal(x.repeat(2, axis=0), np.repeat(np.arange(6.).reshape(2, 3), 2, 0))
    assert x.astype(np.int8).dtype == np.int8
    c = x.copy()
    assert c is not x and np.array_equal(c, x)


def test_repeat_with_many_distinct_counts():
    x = np.arange(60.).reshape(30, 2)
    counts = [i % 4 for i in range(30)]
    np.testing.assert_array_equal(snp.repeat(snp.asarray(x), counts, axis=0),
                                  np.repeat(x, counts, axis=0))
    np.testing.assert_array_equal(snp.repeat(snp.asarray(x), np.array(counts), axis=0),
                                  np.repeat(x, counts, axis=0))
    np.testing.assert_array_equal(snp.repeat(snp.asarray(x.T), [0] * 30, axis=1),
                                  np.zeros((2, 0)))


def test_copy_under_tracing_is_identity():
    prog = make_ir(snp.copy)(arr((2,)))
    assert prims(prog) == []


def test_noops_return_input():
    x = arr((2, 3))
    assert snp.reshape(x, (2, 3)) is x
    assert snp.permute_dims(x, (0, 1)) is x
    assert snp.broadcast_to(x, (2, 3)) is x
    assert snp.squeeze(x) is x
    assert snp.flip(x, axis=()) is x


def test_staged_programs_use_the_small_primitive_set():
    x = arr((2, 3))
    assert prims(make_ir(lambda x: snp.reshape(x, (3, 2)))(x)) == ["reshape"]
    assert prims(make_ir(lambda x: x.T)(x)) == ["transpose"]
    assert prims(make_ir(lambda x: snp.tile(x, (2, 2)))(x)) == ["broadcast_in_dim", "reshape"]
    assert prims(make_ir(lambda x: snp.repeat(x, 2, axis=1))(x)) == ["broadcast_in_dim",
                                                                     "reshape"]
    assert set(prims(make_ir(lambda x: snp.roll(x, 1, axis=1))(x))) == {"slice", "concatenate"}
    assert prims(make_ir(lambda x: snp.pad(x, 1))(x)) == ["pad"]
    assert set(prims(make_ir(lambda x: snp.pad(x, 2, mode="reflect"))(x))) <= {
        "slice", "rev", "concatenate"}


def test_static_slice_and_rev_helpers():
    x = np.arange(24.).reshape(2, 3, 4)
    a = snp.asarray(x)
    np.testing.assert_array_equal(shape_ops.static_slice(a, (0, 1, 0), (2, 3, 4), (1, 1, 3)),
                                  x[0:2, 1:3, 0:4:3])
    assert shape_ops.static_slice(a, (0, 0, 0), (2, 3, 4)) is a
    np.testing.assert_array_equal(shape_ops.slice_in_dim(a, 1, 4, 2, axis=2), x[:, :, 1:4:2])
    np.testing.assert_array_equal(shape_ops.rev(a, (0, 2)), x[::-1, :, ::-1])
    np.testing.assert_array_equal(shape_ops.lax_squeeze(snp.asarray(x[:1]), (0,)), x[0])
    np.testing.assert_array_equal(shape_ops.lax_expand_dims(a, (0, 4)), x[None, ..., None])
    np.testing.assert_array_equal(shape_ops.broadcast_in_dim(snp.asarray(x[0, :, 0]), (3, 5),
                                                             (0,)),
                                  np.broadcast_to(x[0, :, :1], (3, 5)))
    np.testing.assert_array_equal(shape_ops.iota(np.int32, (2, 3), 1),
                                  np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3)))
    with pytest.raises(ValueError, match="slice: need 0 <= start <= limit <= dim"):
        shape_ops.static_slice(a, (0, 0, 0), (2, 3, 5))


def _lax_pad_ref(x, value, config):
    """Reference for lax-style pad: interior padding, then negative lo/hi crop."""
    for ax, (lo, hi, interior) in enumerate(config):
        n = x.shape[ax]
        if n and interior:
            shape = list(x.shape)
            shape[ax] = n + (n - 1) * interior
            y = np.full(shape, value, x.dtype)
            idx = [slice(None)] * x.ndim
            idx[ax] = slice(None, None, interior + 1)
            y[tuple(idx)] = x
            x = y
        widths = [(0, 0)] * x.ndim
        widths[ax] = (max(lo, 0), max(hi, 0))
        x = np.pad(x, widths, constant_values=value)
        idx = [slice(None)] * x.ndim
        idx[ax] = slice(max(-lo, 0), x.shape[ax] - max(-hi, 0))
        x = x[tuple(idx)]
    return x


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(-3, 3), st.integers(-3, 3),
                          st.integers(0, 2)), min_size=1, max_size=3))
def test_lax_pad_negative_and_interior(spec):
    shape = tuple(s[0] for s in spec)
    config = [(lo, hi, i) for _, lo, hi, i in spec]
    if any(n + lo + hi + max(n - 1, 0) * i < 0 for n, lo, hi, i in spec):
        with pytest.raises(ValueError, match="pad"):
            shape_ops.lax_pad(snp.zeros(shape), snp.asarray(np.float32(-1)), config)
        return
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    got = shape_ops.lax_pad(snp.asarray(x), snp.asarray(np.float32(-1)), config)
    np.testing.assert_array_equal(got, _lax_pad_ref(x, np.float32(-1), config))
    prog = make_ir(lambda a: shape_ops.lax_pad(a, snp.asarray(np.float32(-1)), config))(x)
    assert prog.out_avals[0].shape == got.shape


# ---- property tests ---------------------------------------------------------------------------

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@given(shapes, st.data())
def test_reshape_roundtrip_and_permutation(shape, data):
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    np.testing.assert_array_equal(snp.permute_dims(snp.asarray(x), perm), np.transpose(x, perm))
    flat = snp.reshape(snp.asarray(x), (-1,))
    np.testing.assert_array_equal(snp.reshape(flat, shape), x)


@given(st.integers(0, 9), st.lists(st.integers(-2, 11), max_size=4), st.integers(1, 4))
def test_split_matches_numpy_and_concatenates_back(n, idx, sections):
    x = np.arange(n * 2).reshape(n, 2)
    got = snp.split(snp.asarray(x), idx)
    want = np.split(x, idx)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    pieces = snp.array_split(snp.asarray(x), sections)
    for g, w in zip(pieces, np.array_split(x, sections)):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(snp.concatenate(pieces), x)


@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), st.data())
def test_pad_modes_match_numpy(shape, data):
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap"]))
    widths = tuple((data.draw(st.integers(0, 9)), data.draw(st.integers(0, 9))) for _ in shape)
    x = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    np.testing.assert_array_equal(snp.pad(snp.asarray(x), widths, mode=mode),
                                  np.pad(x, widths, mode=mode))


@given(shapes.filter(lambda s: len(s) >= 1), st.data())
def test_roll_tile_repeat_match_numpy(shape, data):
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    a = snp.asarray(x)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    shift = data.draw(st.integers(-10, 10))
    np.testing.assert_array_equal(snp.roll(a, shift, axis=axis), np.roll(x, shift, axis=axis))
    np.testing.assert_array_equal(snp.roll(a, shift), np.roll(x, shift))
    reps = tuple(data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=4)))
    np.testing.assert_array_equal(snp.tile(a, reps), np.tile(x, reps))
    counts = data.draw(st.lists(st.integers(0, 3), min_size=shape[axis], max_size=shape[axis]))
    np.testing.assert_array_equal(snp.repeat(a, counts, axis=axis),
                                  np.repeat(x, counts, axis=axis))


@given(shapes, st.data())
def test_moveaxis_expand_squeeze_match_numpy(shape, data):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    a = snp.asarray(x)
    nd = len(shape)
    if nd:
        src = data.draw(st.lists(st.integers(-nd, nd - 1), unique_by=lambda v: v % nd,
                                 max_size=nd))
        dst = data.draw(st.lists(st.integers(-nd, nd - 1), unique_by=lambda v: v % nd,
                                 min_size=len(src), max_size=len(src)))
        np.testing.assert_array_equal(snp.moveaxis(a, src, dst), np.moveaxis(x, src, dst))
    ax = data.draw(st.integers(-nd - 1, nd))
    e = snp.expand_dims(a, ax)
    np.testing.assert_array_equal(e, np.expand_dims(x, ax))
    np.testing.assert_array_equal(snp.squeeze(e, axis=ax), x)


# ---- eager fast paths agree with the checked (traced) path -----------------------------------

def _staged_value(f, *args):
    from starling.core.ir import eval_program
    prog = make_ir(f)(*args)
    out = eval_program(prog, prog.consts, *args)
    return out[0] if isinstance(out, (list, tuple)) else out, prog.outvars[0].aval


FAST_OK = [
    ("reshape -1", lambda x: snp.reshape(x, (3, -1)), (2, 6)),
    ("reshape int", lambda x: snp.reshape(x, -1), (2, 3)),
    ("reshape np.int64", lambda x: snp.reshape(x, (np.int64(6),)), (2, 3)),
    ("reshape same", lambda x: snp.reshape(x, (2, 3)), (2, 3)),
    ("method reshape", lambda x: x.reshape(-1), (2, 3)),
    ("ravel", lambda x: snp.ravel(x), (2, 3)),
    ("T", lambda x: x.T, (2, 3, 4)),
    ("mT", lambda x: x.mT, (2, 3, 4)),
    ("transpose", lambda x: snp.transpose(x), (2, 3)),
    ("transpose neg", lambda x: snp.transpose(x, (-1, 0, 1)), (2, 3, 4)),
    ("permute identity", lambda x: snp.permute_dims(x, (0, 1)), (2, 3)),
    ("squeeze", lambda x: snp.squeeze(x), (1, 3, 1)),
    ("squeeze axis", lambda x: snp.squeeze(x, -1), (1, 3, 1)),
    ("expand_dims", lambda x: snp.expand_dims(x, -1), (2, 3)),
    ("broadcast_to", lambda x: snp.broadcast_to(x, (4, 2, 3)), (2, 1)),
    ("broadcast_to 0", lambda x: snp.broadcast_to(x, (0, 3)), (3,)),
    ("broadcast strided", lambda x: snp.broadcast_to(x[:, ::2], (3, 2, 2)), (2, 3)),
    ("flip", lambda x: snp.flip(x, (0, 2)), (2, 3, 4)),
    ("concatenate", lambda x: snp.concatenate([x, x[:1]], axis=0), (2, 3)),
    ("concatenate None", lambda x: snp.concatenate([x, x], axis=None), (2, 3)),
]


@pytest.mark.parametrize("name,f,shape", FAST_OK, ids=[c[0] for c in FAST_OK])
@pytest.mark.parametrize("weak", [False, True])
def test_fast_paths_match_checked_path(name, f, shape, weak):
    x = arr(shape)
    if weak:  # a weak-typed operand keeps its weak type through data movement
        x = wrap(np.asarray(x), True)
    eager = f(x)
    staged, aval = _staged_value(f, x)
    assert eager.shape == aval.shape and eager.dtype == aval.dtype
    assert eager.weak_type == aval.weak_type
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(staged))


FAST_BAD = [
    ("reshape -2", lambda x: snp.reshape(x, (2, -2)), (2, 3)),
    ("reshape bool", lambda x: snp.reshape(x, (True, 6)), (2, 3)),
    ("reshape size", lambda x: snp.reshape(x, (4,)), (2, 3)),
    ("squeeze non-1", lambda x: snp.squeeze(x, 0), (2, 3)),
    ("squeeze range", lambda x: snp.squeeze(x, 5), (1, 3)),
    ("permute_dims dup", lambda x: snp.permute_dims(x, (0, 0)), (2, 3)),
    ("permute_dims bool", lambda x: snp.permute_dims(x, (True, False)), (2, 3)),
    ("transpose range", lambda x: snp.transpose(x, (0, 2)), (2, 3)),
    ("broadcast_to bad", lambda x: snp.broadcast_to(x, (3, 3)), (2, 3)),
    ("broadcast_to neg", lambda x: snp.broadcast_to(x, (-1, 3)), (1, 3)),
    ("broadcast_to bool", lambda x: snp.broadcast_to(x, (True, 3)), (1, 3)),
    ("expand_dims range", lambda x: snp.expand_dims(x, 5), (2,)),
    ("concatenate rank", lambda x: snp.concatenate([x, x[0]]), (2, 3)),
    ("concatenate axis", lambda x: snp.concatenate([x, x], axis=2), (2, 3)),
    ("concatenate shapes", lambda x: snp.concatenate([x, x.T], axis=0), (2, 3)),
]


@pytest.mark.parametrize("name,f,shape", FAST_BAD, ids=[c[0] for c in FAST_BAD])
def test_fast_paths_raise_the_checked_errors(name, f, shape):
    x = arr(shape)
    with pytest.raises(Exception) as eager:
        f(x)
    with pytest.raises(Exception) as staged:
        make_ir(f)(x)
    assert type(eager.value) is type(staged.value)
    assert str(eager.value) == str(staged.value)
    assert str(eager.value).startswith(name.split()[0] + ":")


@pytest.mark.parametrize("f", [
    lambda: snp.zeros((2, 3)), lambda: snp.ones(4, dtype=np.int8), lambda: snp.empty((0, 2)),
    lambda: snp.full((2, 2), 1.5), lambda: snp.full(3, True), lambda: snp.full((2,), 7, np.uint8),
    lambda: snp.arange(5), lambda: snp.arange(2, 9, 3), lambda: snp.arange(0.0, 1.0, 0.25),
    lambda: snp.arange(4, dtype=np.float32),
])
def test_creation_fast_paths_match_staged(f):
    eager = f()
    staged, aval = _staged_value(f)
    assert eager.shape == aval.shape and eager.dtype == aval.dtype
    assert eager.weak_type == aval.weak_type
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(staged))
