"""The promotion lattice and weak types, against the documented table (JAX semantics)."""
import itertools

import ml_dtypes
import numpy as np
import pytest

from starling.core import dtypes as D

STRONG_CASES = [
    (D.int8, D.uint8, D.int16), (D.int32, D.uint32, D.int64),
    (D.int64, D.float16, D.float16), (D.bfloat16, D.float16, D.float32),
    (D.float32, D.float64, D.float64), (D.float32, D.complex64, D.complex64),
    (D.float64, D.complex64, D.complex128), (D.bool_, D.int8, D.int8),
    (D.bool_, D.float32, D.float32), (D.uint8, D.uint16, D.uint16), (D.int8, D.int8, D.int8),
]


@pytest.mark.parametrize("a,b,want", STRONG_CASES)
def test_strong_promotion(a, b, want):
    assert D.result_type((a, False), (b, False)) == (want, False)
    assert D.result_type((b, False), (a, False)) == (want, False)


@pytest.mark.parametrize("dt", [D.int8, D.uint8, D.int16, D.float16, D.bfloat16, D.float32,
                                D.float64, D.complex64, D.float8_e4m3fn])
def test_weak_float_scalar_keeps_float_dtype(dt):
    if D.is_integer(dt):
        assert D.result_type((dt, False), (D.float32, True)) == (D.float32, True)
    else:
        assert D.result_type((dt, False), (D.float32, True)) == (dt, False)


@pytest.mark.parametrize("dt", D.SIGNED_INTS + D.UNSIGNED_INTS + D.FLOATS + D.COMPLEXES)
def test_weak_int_scalar_keeps_dtype(dt):
    assert D.result_type((dt, False), (D.int64, True)) == (dt, False)


def test_uint64_with_int64_is_weak_default_float():
    # The join is the weak float node, so the result is weak float32 (JAX's rule).
    assert D.result_type((D.uint64, False), (D.int64, False)) == (D.float32, True)


def test_weak_weak():
    assert D.result_type((D.int64, True), (D.float32, True)) == (D.float32, True)
    assert D.result_type((D.float32, True), (D.complex64, True)) == (D.complex64, True)
    assert D.result_type((D.bool_, False), (D.int64, True)) == (D.int64, True)


def test_low_precision_floats_do_not_mix():
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        D.result_type((D.float8_e4m3fn, False), (D.float32, False))
    with pytest.raises(TypeError):
        D.result_type((D.float8_e4m3fn, False), (D.float8_e5m2, False))
    assert D.result_type((D.float8_e5m2, False), (D.float8_e5m2, False)) == (D.float8_e5m2, False)


def test_lattice_join_is_commutative_and_associative():
    nodes = [(dt, w) for dt in D.ALL_DTYPES for w in (False, True)
             if not (w and dt in D.LOW_PRECISION_FLOATS + (D.bool_,))]

    def join(*xs):
        try:
            return D.result_type(*xs)
        except TypeError:
            return "err"

    for a, b in itertools.product(nodes, repeat=2):
        assert join(a, b) == join(b, a), (a, b)
    for a, b, c in itertools.product(nodes[::3], repeat=3):
        ab = join(a, b)
        bc = join(b, c)
        if ab != "err" and bc != "err":
            assert join(ab, c) == join(a, bc), (a, b, c)


def test_canonicalize():
    assert D.canonicalize(float) == D.float32
    assert D.canonicalize(int) == D.int64
    assert D.canonicalize("bfloat16") == np.dtype(ml_dtypes.bfloat16)
    with pytest.raises(TypeError, match="not a dtype|not supported"):
        D.canonicalize("foo")
    with pytest.raises(TypeError, match="not supported"):
        D.canonicalize(np.dtype("U3"))


def test_finfo_iinfo():
    assert D.finfo(D.bfloat16).bits == 16
    assert D.finfo(D.complex64).dtype == D.float32
    assert D.iinfo(D.int8).max == 127
    with pytest.raises(TypeError):
        D.finfo(D.int32)
    with pytest.raises(TypeError):
        D.iinfo(D.float32)
