"""Array creation: default dtypes and weak types, errors, devices, staging, traced ranges."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import starling
import starling.numpy as snp
from starling.core.trace import ConcretizationError
from starling.transforms.stage import make_ir


def prims(prog):
    return [e.primitive.name for e in prog.eqns]


# ---- defaults ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [snp.zeros, snp.ones, snp.empty])
def test_default_float32_strong(fn):
    x = fn((2, 3))
    assert x.dtype == np.float32 and not x.weak_type and x.shape == (2, 3)
    assert fn(4).shape == (4,)


def test_empty_is_zeros():
    np.testing.assert_array_equal(snp.empty((3,), dtype=np.int8), np.zeros(3, np.int8))


@pytest.mark.parametrize("fill,dtype", [(1.0, np.float32), (1, np.int64), (True, np.bool_),
                                        (1j, np.complex64)])
def test_full_dtype_from_python_fill_is_strong(fill, dtype):
    # Array API: arrays made from Python scalars promote as arrays (not weakly typed).
    x = snp.full((2,), fill)
    assert x.dtype == dtype and not x.weak_type
    np.testing.assert_array_equal(x, np.full((2,), fill))


def test_full_promotes_as_an_array():
    y = snp.full((2,), 1.0) + snp.ones((2,), dtype=snp.bfloat16)
    assert y.dtype == snp.float32
    assert (snp.ones((2,), dtype=snp.bfloat16) + 1.0).dtype == snp.bfloat16


def test_full_explicit_dtype_and_array_fill():
    assert snp.full((2,), 1.0, dtype=np.float16).dtype == np.float16
    assert not snp.full((2,), 1.0, dtype=np.float16).weak_type
    f = snp.asarray(np.int16(7))
    x = snp.full((2, 2), f)
    assert x.dtype == np.int16 and np.all(np.asarray(x) == 7)
    np.testing.assert_array_equal(snp.full((2, 3), snp.asarray([1, 2, 3])),
                                  np.full((2, 3), [1, 2, 3]))


def test_like_keeps_weak_type_and_overrides():
    w = snp.multiply(3.0, 1.0)  # a weakly typed value (an operation on Python scalars)
    assert w.weak_type and snp.zeros_like(w).weak_type and snp.ones_like(w).dtype == np.float32
    assert not snp.zeros_like(w, dtype=np.float32).weak_type
    x = snp.asarray(np.zeros((2, 3), np.int8))
    assert snp.full_like(x, 2.7).dtype == np.int8
    np.testing.assert_array_equal(snp.full_like(x, 2.7), np.full_like(np.zeros((2, 3), np.int8),
                                                                      2.7))
    assert snp.ones_like(x, shape=(4,)).shape == (4,)
    assert snp.zeros_like([1.0, 2.0]).dtype == np.float32
    assert snp.zeros_like(np.zeros(2, np.float64)).dtype == np.float64


def test_full_like_complex_fill_into_real_drops_imaginary():
    np.testing.assert_array_equal(snp.full_like(snp.zeros(2), 1 + 2j), [1.0, 1.0])


def test_arange_defaults_and_values():
    assert snp.arange(5).dtype == np.int64
    assert snp.arange(0.0, 1.0, 0.1).dtype == np.float32
    np.testing.assert_array_equal(snp.arange(0.0, 1.0, 0.1),
                                  np.arange(0.0, 1.0, 0.1).astype(np.float32))
    np.testing.assert_array_equal(snp.arange(10, 0, -3), np.arange(10, 0, -3))
    assert snp.arange(5, 2).shape == (0,)
    assert snp.arange(np.int32(4)).dtype == np.int64
    assert snp.arange(snp.asarray(3)).tolist() == [0, 1, 2]
    assert snp.arange(3, dtype=snp.bfloat16).dtype == snp.bfloat16


@given(st.integers(-20, 20), st.integers(-20, 20), st.integers(-5, 5).filter(lambda s: s != 0))
def test_arange_length_rule(start, stop, step):
    got = snp.arange(start, stop, step)
    assert got.shape == (max(0, -(-(stop - start) // step)),)
    np.testing.assert_array_equal(got, np.arange(start, stop, step))


def test_arange_errors():
    with pytest.raises(ValueError, match="arange: step must be nonzero"):
        snp.arange(0, 5, 0)
    with pytest.raises(TypeError, match="arange: stop must be real"):
        snp.arange(1j)
    with pytest.raises(ConcretizationError, match="arange: stop must be a concrete number"):
        make_ir(lambda n: snp.arange(n))(snp.asarray(3))
    with pytest.raises(TypeError, match="arange: stop must be a scalar"):
        snp.arange(snp.zeros(2))


def test_arange_n_is_iota_when_staged():
    prog = make_ir(lambda x: x + snp.arange(3))(snp.zeros(3, dtype=np.int64))
    assert "iota" in prims(prog)


def test_linspace_defaults():
    x = snp.linspace(0, 1, 5)
    assert x.dtype == np.float32
    np.testing.assert_array_equal(x, np.linspace(0, 1, 5).astype(np.float32))
    assert snp.linspace(0, 1).shape == (50,)
    assert snp.linspace(0, 1j, 3).dtype == np.complex64
    assert snp.linspace(snp.asarray(np.float64(0)), 1, 3).dtype == np.float64
    y, step = snp.linspace(0, 1, 5, retstep=True)
    assert float(step) == 0.25
    with pytest.raises(ValueError, match="linspace: num must be non-negative"):
        snp.linspace(0, 1, -1)


def test_linspace_traced_matches_eager_and_numpy():
    def f(a, b):
        return snp.linspace(a, b, 7, axis=-1)
    a, b = snp.asarray(np.float32([0, 1])), snp.asarray(np.float32([1, -3]))
    prog = make_ir(f)(a, b)
    assert "iota" in prims(prog)
    from starling.core.ir import eval_program
    staged = eval_program(prog, prog.consts, a, b)[0]
    np.testing.assert_array_equal(staged, f(a, b))
    np.testing.assert_allclose(staged, np.linspace([0, 1], [1, -3], 7, axis=-1), rtol=1e-6,
                               atol=1e-6)


def test_logspace_geomspace():
    np.testing.assert_allclose(snp.logspace(0, 3, 4), [1, 10, 100, 1000], rtol=1e-6)
    assert snp.logspace(0, 3, 4).dtype == np.float32
    np.testing.assert_allclose(snp.geomspace(1, 1000, 4), [1, 10, 100, 1000], rtol=1e-6)
    with pytest.raises(ValueError, match="geomspace"):
        snp.geomspace(0, 10, 3)
    base = snp.asarray(np.float32(2))
    np.testing.assert_allclose(snp.logspace(0, 3, 4, base=base), [1, 2, 4, 8])


def test_eye_tri_defaults_and_errors():
    assert snp.eye(3).dtype == np.float32 and snp.identity(2).shape == (2, 2)
    assert snp.tri(3).dtype == np.float32
    with pytest.raises(ValueError, match="eye: N and M must be non-negative"):
        snp.eye(-1)
    with pytest.raises(ValueError, match="tri: N and M must be non-negative"):
        snp.tri(2, -1)
    with pytest.raises(ValueError, match=r"tril: expected an array of ndim >= 2"):
        snp.tril(snp.zeros(3))
    with pytest.raises(ValueError, match="diag: input must be 1-D or 2-D"):
        snp.diag(snp.zeros((2, 2, 2)))


@given(st.integers(0, 6), st.integers(0, 6), st.integers(-8, 8))
def test_eye_tri_diag_match_numpy(n, m, k):
    np.testing.assert_array_equal(snp.eye(n, m, k, dtype=np.int8), np.eye(n, m, k, dtype=np.int8))
    np.testing.assert_array_equal(snp.tri(n, m, k, dtype=bool), np.tri(n, m, k, dtype=bool))
    x = np.arange(n * m).reshape(n, m)
    np.testing.assert_array_equal(snp.diag(snp.asarray(x), k), np.diag(x, k))
    np.testing.assert_array_equal(snp.tril(snp.asarray(x), k), np.tril(x, k))
    np.testing.assert_array_equal(snp.triu(snp.asarray(x), k), np.triu(x, k))
    v = np.arange(n) + 1.5
    np.testing.assert_array_equal(snp.diag(snp.asarray(v), k), np.diag(v, k))


@given(st.integers(0, 5), st.integers(0, 5), st.integers(-6, 6))
def test_staged_eye_tri_match_numpy(n, m, k):
    """Staged, eye and tri are data movement (pad / skewed reshape), not NumPy calls."""
    from starling.core.ir import eval_program
    for fn, ref in ((snp.eye, np.eye), (snp.tri, np.tri)):
        for dt in (np.float32, np.bool_, ml_dtypes.bfloat16):
            prog = make_ir(lambda x: fn(n, m, k, dtype=dt))(snp.zeros(()))
            got = eval_program(prog, prog.consts, snp.zeros(()))[0]
            np.testing.assert_array_equal(np.asarray(got).astype(np.float32),
                                          ref(n, m, k).astype(np.float32))
            assert got.dtype == np.dtype(dt)


def test_eye_stages_without_constants():
    prog = make_ir(lambda x: x + snp.eye(3))(snp.zeros((3, 3)))
    assert not prog.consts
    assert "pad" in prims(prog)


def test_tril_keeps_nan_and_weak_type():
    x = snp.asarray(np.array([[np.nan, np.inf], [1.0, np.nan]], np.float32))
    np.testing.assert_array_equal(snp.tril(x), np.tril(np.asarray(x)))
    assert snp.tril(snp.broadcast_to(snp.multiply(1.0, 1.0), (2, 2))).weak_type


def test_meshgrid_and_indices():
    with pytest.raises(ValueError, match="meshgrid: indexing must be 'xy' or 'ij'"):
        snp.meshgrid(snp.zeros(2), indexing="yx")
    assert snp.meshgrid() == []
    a = snp.indices((2, 3))
    assert a.dtype == np.int64 and a.shape == (2, 2, 3)
    np.testing.assert_array_equal(a, np.indices((2, 3)))
    assert snp.indices(()).shape == (0,)


def test_device_keyword():
    dev = starling.devices()[0]
    for fn in (lambda d: snp.zeros(2, device=d), lambda d: snp.arange(3, device=d),
               lambda d: snp.full(2, 1.0, device=d), lambda d: snp.eye(2, device=d),
               lambda d: snp.linspace(0, 1, 3, device=d), lambda d: snp.zeros_like(
                   snp.zeros(2), device=d)):
        assert fn(dev).device == dev and fn("cpu").shape
        with pytest.raises(TypeError, match="device must be"):
            fn("tpu:0")
        with pytest.raises(ValueError, match="no cuda device|no device 'gpu:7'"):
            fn("gpu:7")   # a GPU name, but no such GPU


def test_full_overflow_errors():
    with pytest.raises(OverflowError, match="full: fill value 300 is out of range for int8"):
        snp.full((2,), 300, dtype=np.int8)
    with pytest.raises(OverflowError, match="full_like"):
        snp.full_like(snp.zeros(2, dtype=np.uint8), -1)


def test_shape_errors():
    with pytest.raises(ValueError, match="zeros: shape entries must be non-negative"):
        snp.zeros((2, -1))
    with pytest.raises(TypeError, match="ones: shape entries must be integers"):
        snp.ones((2.0,))
    with pytest.raises(TypeError, match="full: shape must be an int or a sequence"):
        snp.full(None, 1.0)


def test_float0_zeros():
    z = snp.zeros((2,), dtype=starling.numpy.float0)
    assert z.dtype == starling.numpy.float0 and z.shape == (2,)


def test_array_and_from_dlpack():
    x = np.arange(6, dtype=np.int16).reshape(2, 3)
    a = snp.array(x, ndmin=4)
    assert a.shape == (1, 1, 2, 3) and a.dtype == np.int16
    b = snp.from_dlpack(x)
    np.testing.assert_array_equal(b, x)
    x[0, 0] = 99  # the Array owns a copy
    assert np.asarray(b)[0, 0] == 0
    assert snp.from_dlpack(b) is b
    with pytest.raises(TypeError, match="from_dlpack: list does not implement __dlpack__"):
        snp.from_dlpack([1, 2])
    bf = np.zeros(3, ml_dtypes.bfloat16)
    assert snp.array(bf).dtype == snp.bfloat16


def test_constants_are_immutable_views():
    z = snp.zeros((3, 3))
    buf = np.asarray(z)
    assert not buf.flags.writeable


def test_indices_bool_dtype_error_names_indices():
    with pytest.raises(TypeError, match="indices: dtype must be numeric"):
        snp.indices((2, 3), dtype=bool)
    with pytest.raises(TypeError, match="indices: dtype must be numeric"):
        snp.indices((2,), dtype=bool, sparse=True)
