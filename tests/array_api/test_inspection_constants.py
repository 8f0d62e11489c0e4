"""Inspection (``__array_namespace_info__``), constants, and the namespace's required names
(Array API 2023.12)."""
from __future__ import annotations

import math

import pytest

import starling.numpy as xp
from tests.array_api import (
    ALL_DTYPES, COMPLEX_FLOATS, DEFAULT_COMPLEX, DEFAULT_FLOAT, DEFAULT_INDEX, DEFAULT_INT, INTS,
    NUMERIC, REAL_FLOATS, SIGNED_INTS, UNSIGNED_INTS, dname,
)

# ---- required names ----------------------------------------------------------------------------
REQUIRED = """
__array_api_version__ __array_namespace_info__
e inf nan newaxis pi
bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64 complex128
arange asarray empty empty_like eye from_dlpack full full_like linspace meshgrid ones ones_like
tril triu zeros zeros_like
astype can_cast finfo iinfo isdtype result_type
abs acos acosh add asin asinh atan atan2 atanh bitwise_and bitwise_left_shift bitwise_invert
bitwise_or bitwise_right_shift bitwise_xor ceil clip conj copysign cos cosh divide equal exp expm1
floor floor_divide greater greater_equal hypot imag isfinite isinf isnan less less_equal log log1p
log2 log10 logaddexp logical_and logical_not logical_or logical_xor maximum minimum multiply
negative not_equal positive pow real remainder round sign signbit sin sinh square sqrt subtract
tan tanh trunc
take
matmul matrix_transpose tensordot vecdot
broadcast_arrays broadcast_to concat expand_dims flip moveaxis permute_dims repeat reshape roll
squeeze stack tile unstack
argmax argmin nonzero searchsorted where
unique_all unique_counts unique_inverse unique_values
argsort sort
cumulative_sum max mean min prod std sum var
all any
""".split()

LINALG = """cholesky cross det diagonal eigh eigvalsh inv matmul matrix_norm matrix_power
matrix_rank matrix_transpose outer pinv qr slogdet solve svd svdvals tensordot trace vecdot
vector_norm""".split()

FFT = """fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft fftfreq rfftfreq fftshift
ifftshift""".split()


@pytest.mark.parametrize("name", REQUIRED)
def test_namespace_has(name):
    assert hasattr(xp, name), name
    if name[0].islower() and name not in ("e", "inf", "nan", "newaxis", "pi") and \
            not hasattr(getattr(xp, name), "itemsize"):
        assert callable(getattr(xp, name)), name


@pytest.mark.parametrize("name", LINALG)
def test_linalg_extension_has(name):
    assert callable(getattr(xp.linalg, name, None)), name


@pytest.mark.parametrize("name", FFT)
def test_fft_extension_has(name):
    assert callable(getattr(xp.fft, name, None)), name


def test_main_namespace_and_linalg_share_functions():
    # matmul, matrix_transpose, tensordot and vecdot live in both namespaces with one meaning.
    import numpy as np
    a = xp.asarray(np.arange(6.0).reshape(2, 3))
    for name in ("matrix_transpose",):
        np.testing.assert_array_equal(np.asarray(getattr(xp, name)(a)),
                                      np.asarray(getattr(xp.linalg, name)(a)))
    np.testing.assert_array_equal(np.asarray(xp.matmul(a, a.mT)),
                                  np.asarray(xp.linalg.matmul(a, a.mT)))


# ---- constants ---------------------------------------------------------------------------------

def test_constants():
    assert isinstance(xp.e, float) and xp.e == math.e
    assert isinstance(xp.pi, float) and xp.pi == math.pi
    assert isinstance(xp.inf, float) and xp.inf == math.inf
    assert isinstance(xp.nan, float) and math.isnan(xp.nan)
    assert xp.newaxis is None


# ---- __array_namespace_info__ ------------------------------------------------------------------

def test_info_capabilities():
    info = xp.__array_namespace_info__()
    caps = info.capabilities()
    assert isinstance(caps, dict)
    assert isinstance(caps["boolean indexing"], bool)
    assert isinstance(caps["data-dependent shapes"], bool)


def test_info_devices():
    info = xp.__array_namespace_info__()
    devs = info.devices()
    assert isinstance(devs, list) and devs
    assert info.default_device() in devs
    for d in devs:  # each device must be usable as a device= keyword
        assert xp.zeros((1,), device=d).device == d


def test_info_default_dtypes():
    info = xp.__array_namespace_info__()
    for dev in (None, info.default_device()):
        dd = info.default_dtypes(device=dev)
        assert dd["real floating"] == DEFAULT_FLOAT
        assert dd["complex floating"] == DEFAULT_COMPLEX
        assert dd["integral"] == DEFAULT_INT
        assert dd["indexing"] == DEFAULT_INDEX
    # and they are the dtypes the library actually uses
    assert xp.asarray(1.0).dtype == dd["real floating"]
    assert xp.asarray(1j).dtype == dd["complex floating"]
    assert xp.asarray(1).dtype == dd["integral"]
    assert xp.argmax(xp.asarray([1, 2])).dtype == dd["indexing"]


_KINDS = {
    None: ALL_DTYPES,
    "bool": (xp.bool,),
    "signed integer": SIGNED_INTS,
    "unsigned integer": UNSIGNED_INTS,
    "integral": INTS,
    "real floating": REAL_FLOATS,
    "complex floating": COMPLEX_FLOATS,
    "numeric": NUMERIC,
    ("bool", "complex floating"): (xp.bool,) + COMPLEX_FLOATS,
}


@pytest.mark.parametrize("kind", list(_KINDS), ids=str)
def test_info_dtypes_contains_the_standard_dtypes(kind):
    info = xp.__array_namespace_info__()
    got = info.dtypes(kind=kind)
    assert isinstance(got, dict)
    for dt in _KINDS[kind]:
        assert got.get(dname(dt)) == dt, (kind, dname(dt))
    for name, dt in got.items():  # keys are canonical names
        assert name == dname(dt)
    assert info.dtypes(device=info.default_device(), kind=kind).keys() == got.keys()


@pytest.mark.parametrize("kind", list(_KINDS), ids=str)
def test_info_dtypes_lists_only_standard_dtypes(kind):
    # "data types which are not present in this specification should not be included in the
    # returned dictionary"
    got = xp.__array_namespace_info__().dtypes(kind=kind)
    assert sorted(got) == sorted(dname(dt) for dt in _KINDS[kind])
