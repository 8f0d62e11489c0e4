"""Array API data type functions against the standard's promotion tables and JAX's weak rules."""
import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import starling.numpy as snp

b, i1, i2, i4, i8 = np.bool_, np.int8, np.int16, np.int32, np.int64
u1, u2, u4, u8 = np.uint8, np.uint16, np.uint32, np.uint64
f4, f8, c8, c16 = np.float32, np.float64, np.complex64, np.complex128

# The Array API standard's (2023.12) type promotion tables, written out from its
# "Type Promotion Rules" page: every pair for which the standard defines a result.
ARRAY_API_TABLE = {
    (b, b): b,
    (i1, i1): i1, (i1, i2): i2, (i1, i4): i4, (i1, i8): i8,
    (i2, i2): i2, (i2, i4): i4, (i2, i8): i8, (i4, i4): i4, (i4, i8): i8, (i8, i8): i8,
    (u1, u1): u1, (u1, u2): u2, (u1, u4): u4, (u1, u8): u8,
    (u2, u2): u2, (u2, u4): u4, (u2, u8): u8, (u4, u4): u4, (u4, u8): u8, (u8, u8): u8,
    (u1, i1): i2, (u1, i2): i2, (u1, i4): i4, (u1, i8): i8,
    (u2, i1): i4, (u2, i2): i4, (u2, i4): i4, (u2, i8): i8,
    (u4, i1): i8, (u4, i2): i8, (u4, i4): i8, (u4, i8): i8,
    (f4, f4): f4, (f4, f8): f8, (f8, f8): f8,
    (c8, c8): c8, (c8, c16): c16, (c16, c16): c16,
    (f4, c8): c8, (f4, c16): c16, (f8, c8): c16, (f8, c16): c16,
}


@pytest.mark.parametrize("pair", list(ARRAY_API_TABLE), ids=lambda p: f"{np.dtype(p[0])}+"
                         f"{np.dtype(p[1])}")
def test_array_api_promotion_table(pair):
    a, c = pair
    want = np.dtype(ARRAY_API_TABLE[pair])
    assert snp.result_type(a, c) == want
    assert snp.result_type(c, a) == want
    assert snp.promote_types(a, c) == want
    x, y = snp.zeros((1,), dtype=a), snp.zeros((2,), dtype=c)
    assert snp.result_type(x, y) == want
    assert snp.can_cast(a, want) and snp.can_cast(c, want)


# JAX's weak-type rules: Python scalars (and the types int / float / complex) adopt the dtype of
# the strong operand within their kind; across kinds they give the default of the higher kind.
WEAK_CASES = [
    ((i1, 1), i1), ((u1, 1), u1), ((u8, 1), u8), ((i1, 1.0), f4), ((u4, 2.5), f4),
    ((i8, 1.0), f4), ((ml_dtypes.bfloat16, 1.0), ml_dtypes.bfloat16),
    ((np.float16, 2.0), np.float16),
    ((f8, 1.0), f8), ((np.float16, 1j), c8), ((f8, 1j), c16), ((c8, 1.0), c8),
    ((b, 1), i8), ((b, 1.0), f4), ((b, True), b), ((1, 1.0), f4), ((1,), i8), ((1.0,), f4),
    ((1j,), c8), ((int,), i8), ((float,), f4), ((float, i1), f4),
    ((float, ml_dtypes.bfloat16), ml_dtypes.bfloat16), ((int, u2), u2),
    ((ml_dtypes.float8_e4m3fn, 1.0), ml_dtypes.float8_e4m3fn),
    ((ml_dtypes.float8_e5m2, 3), ml_dtypes.float8_e5m2),
]


@pytest.mark.parametrize("args,want", WEAK_CASES)
def test_weak_scalar_rules(args, want):
    assert snp.result_type(*args) == np.dtype(want)


def test_weak_arrays_and_strong_dtypes():
    weak = snp.multiply(1, 1)  # an operation on Python scalars is weakly typed
    assert weak.weak_type
    assert snp.result_type(weak, i1) == i1
    assert snp.result_type(snp.multiply(2.0, 1.0), ml_dtypes.bfloat16) == ml_dtypes.bfloat16
    # an array made from a Python scalar is strong (Array API)
    assert snp.result_type(snp.asarray(2.0), ml_dtypes.bfloat16) == np.float32
    # A dtype object is strong even when it equals the default of a Python type.
    assert snp.result_type(np.dtype(np.int64), i1) == i8
    assert snp.result_type(np.float32, np.float16) == np.float32


def test_lattice_outside_the_standard():
    assert snp.result_type(u8, i8) == f4          # JAX: no integer holds both
    assert snp.result_type(i8, np.float16) == np.float16
    assert snp.result_type(ml_dtypes.bfloat16, np.float16) == f4
    assert snp.result_type(i1, u1) == i2


def test_result_type_errors():
    with pytest.raises(TypeError, match="no implicit promotion"):
        snp.result_type(ml_dtypes.float8_e4m3fn, np.float32)
    with pytest.raises(ValueError, match="result_type: at least one"):
        snp.result_type()
    with pytest.raises(TypeError, match="result_type: expected a dtype or an array"):
        snp.result_type("not a dtype")


CAN_CAST = [
    (i1, i2, True), (i2, i1, False), (u1, i1, False), (i1, u1, False), (b, i1, True),
    (i1, b, False), (u8, i8, False), (i8, u8, False), (f4, np.float16, False), (f4, c8, True),
    (c8, f4, False), (f8, c8, False), (u1, i2, True), (i4, f8, True),
    (i8, f4, True),  # the lattice: int64 -> weak float -> float32 (documented)
    (ml_dtypes.float8_e4m3fn, f4, False), (ml_dtypes.bfloat16, f4, True),
    (ml_dtypes.bfloat16, np.float16, False),
]


@pytest.mark.parametrize("a,c,want", CAN_CAST)
def test_can_cast(a, c, want):
    assert snp.can_cast(a, c) is want
    assert snp.can_cast(snp.zeros(2, dtype=a), c) is want


def test_can_cast_casting_modes():
    assert snp.can_cast(f8, i1, casting="unsafe")
    assert snp.can_cast(i1, i1, casting="no") and not snp.can_cast(i1, i2, casting="no")
    with pytest.raises(ValueError, match="can_cast: casting must be one of"):
        snp.can_cast(i1, i2, casting="bogus")


DTS = [np.dtype(t) for t in (b, i1, i2, i4, i8, u1, u2, u4, u8, np.float16, ml_dtypes.bfloat16,
                             f4, f8, c8, c16)]


@given(st.sampled_from(DTS), st.sampled_from(DTS), st.sampled_from(DTS))
def test_promotion_is_a_join(a, c, d):
    """Commutative, associative, idempotent; both inputs can_cast to the result."""
    ac = snp.result_type(a, c)
    assert ac == snp.result_type(c, a)
    assert snp.result_type(a, a) == a
    assert snp.result_type(ac, d) == snp.result_type(a, snp.result_type(c, d))
    assert snp.can_cast(a, ac) and snp.can_cast(c, ac)


KINDS = {
    "bool": {b},
    "signed integer": {i1, i2, i4, i8},
    "unsigned integer": {u1, u2, u4, u8},
    "integral": {i1, i2, i4, i8, u1, u2, u4, u8},
    "real floating": {np.float16, ml_dtypes.bfloat16, f4, f8, ml_dtypes.float8_e4m3fn,
                      ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn},
    "complex floating": {c8, c16},
}


@pytest.mark.parametrize("kind", list(KINDS) + ["numeric"])
def test_isdtype_kinds(kind):
    members = {np.dtype(t) for t in KINDS.get(kind, ())}
    if kind == "numeric":
        members = {np.dtype(t) for k, ts in KINDS.items() if k != "bool" for t in ts}
    for name, dt in snp.__array_namespace_info__().dtypes().items():
        assert snp.isdtype(dt, kind) == (dt in members), (name, kind)


def test_isdtype_tuples_dtypes_and_errors():
    assert snp.isdtype(snp.int8, ("bool", "unsigned integer", snp.int8))
    assert not snp.isdtype(snp.float32, ("integral", snp.float64))
    assert snp.isdtype(snp.float32, snp.float32)
    with pytest.raises(ValueError, match="isdtype: unknown kind 'floating'"):
        snp.isdtype(snp.float32, "floating")
    with pytest.raises(TypeError, match="isdtype: expected a dtype, got an array"):
        snp.isdtype(snp.zeros(2), "numeric")


def test_issubdtype():
    assert snp.issubdtype(snp.bfloat16, np.floating)
    assert snp.issubdtype(snp.float8_e5m2, np.inexact)
    assert not snp.issubdtype(snp.bfloat16, np.integer)
    assert snp.issubdtype(snp.uint8, np.unsignedinteger)
    assert snp.issubdtype(snp.int8, snp.int8) and not snp.issubdtype(snp.int8, snp.int16)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
                                ml_dtypes.float8_e4m3fn])
def test_finfo(dt):
    fi = snp.finfo(dt)
    ref = ml_dtypes.finfo(dt)
    for attr in ("bits", "eps", "max", "min", "smallest_normal"):
        assert getattr(fi, attr) == getattr(ref, attr)
    assert fi.dtype == np.dtype(dt)
    assert snp.finfo(snp.zeros(2, dtype=dt)).eps == ref.eps


def test_finfo_complex_and_iinfo():
    assert snp.finfo(snp.complex64).dtype == np.float32
    assert snp.finfo(snp.complex128).bits == 64
    assert snp.iinfo(snp.int8).max == 127 and snp.iinfo(snp.uint16).min == 0
    assert snp.iinfo(snp.zeros(2, dtype=np.int32)).bits == 32
    assert snp.iinfo(int).dtype == np.int64
    with pytest.raises(TypeError, match="finfo: int64 is not a floating dtype"):
        snp.finfo(snp.int64)
    with pytest.raises(TypeError, match="iinfo: float32 is not an integer dtype"):
        snp.iinfo(snp.zeros(1))


def test_astype():
    w = snp.asarray(1.5)
    y = snp.astype(w, snp.float32)
    assert y.dtype == np.float32 and not y.weak_type
    assert snp.astype([1.7, -1.7], snp.int32).tolist() == [1, -1]
    assert snp.astype(snp.asarray(np.complex64(3 + 4j)), snp.float32).item() == 3.0
    assert snp.astype(snp.asarray([0.0, 2.0]), bool).tolist() == [False, True]
    x = snp.zeros(2, dtype=np.int8)
    assert snp.astype(x, np.int8, copy=False) is x
    assert snp.astype(x, np.int16, device="cpu").dtype == np.int16
    with pytest.raises(TypeError, match="dtype"):
        snp.astype(x, "not_a_dtype")


def test_namespace_info():
    info = snp.__array_namespace_info__()
    assert info.capabilities() == {"boolean indexing": True, "data-dependent shapes": True,
                                   "max dimensions": 64}
    assert info.default_device() in info.devices()
    assert info.default_dtypes() == {"real floating": snp.float32,
                                     "complex floating": snp.complex64,
                                     "integral": snp.int64, "indexing": snp.int64}
    all_dt = info.dtypes()
    # the Array API dtypes only; float16 / bfloat16 / float8 / float4 work but are not listed
    assert len(all_dt) == 13 and all_dt["float32"] == snp.float32 and "bfloat16" not in all_dt
    assert set(info.dtypes(kind="complex floating")) == {"complex64", "complex128"}
    assert set(info.dtypes(kind=("bool", "signed integer"))) == {
        "bool", "int8", "int16", "int32", "int64"}
    with pytest.raises(TypeError, match="device"):
        info.dtypes(device="tpu")


def test_namespace_version():
    assert snp.__array_api_version__ == "2024.12"
    assert all(callable(getattr(snp, n)) for n in (
        "astype", "can_cast", "result_type", "isdtype", "finfo", "iinfo"))
    for a, c in itertools.product(["int8", "float32"], repeat=2):
        assert snp.result_type(a, c) == np.result_type(a, c)
