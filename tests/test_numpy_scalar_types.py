"""The scalar types of ``starling.numpy`` (``snp.float32(3.0)``) and NumPy's dtype aliases and
abstract types: callable, and still a dtype everywhere one is taken."""
from __future__ import annotations

import pickle

import ml_dtypes
import numpy as np
import pytest

import starling
import starling.numpy as snp

_TYPES = ["bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e5m2",
          "float4_e2m1fn", "complex64", "complex128"]
_NP = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
       "float8_e5m2": ml_dtypes.float8_e5m2, "float4_e2m1fn": ml_dtypes.float4_e2m1fn}


def _np_dtype(name):
    return np.dtype(_NP.get(name, getattr(np, name, None)))


@pytest.mark.parametrize("name", _TYPES)
def test_scalar_type_is_a_dtype(name):
    t = getattr(snp, name)
    ref = _np_dtype(name)
    assert np.dtype(t) == ref and t.dtype == ref
    assert t == ref and ref == t and not (t != ref)
    assert hash(t) == hash(ref)
    assert {t: 1}[ref] == 1 and {ref: 1}[t] == 1 and t in {ref} and ref in {t}
    x = snp.zeros((2,), dtype=t)
    assert x.dtype == t and t == x.dtype and type(x.dtype) is type(ref)
    assert snp.astype(snp.ones(2), t).dtype == ref
    assert np.zeros(2, dtype=t).dtype == ref  # NumPy takes it too
    assert pickle.loads(pickle.dumps(t)) is t
    assert repr(t) == f"<class 'starling.numpy.{name}'>"
    assert snp.dtype(t) == ref


@pytest.mark.parametrize("name", _TYPES)
def test_scalar_type_is_callable(name):
    t = getattr(snp, name)
    v = t(1)
    assert isinstance(v, snp.Array) and v.shape == () and v.dtype == t
    assert not v.weak_type
    assert float(np.asarray(v).astype(np.float32)) == 1.0
    a = t(snp.asarray([0.0, 2.0]))  # arrays are cast
    assert a.dtype == t and a.shape == (2,)
    assert t().shape == () and float(np.asarray(t()).astype(np.float32)) == 0.0


def test_scalar_type_semantics():
    _eq = np.testing.assert_array_equal
    _eq(snp.int32(snp.asarray([1.9, -1.9, np.nan])), [1, -1, 0])  # XLA's cast semantics
    assert bool(snp.bool_(2)) and snp.bool is snp.bool_
    assert snp.complex64(1 + 2j).dtype == snp.complex64
    f = starling.compile(lambda x: snp.float16(x) * 2)  # traced input
    out = f(snp.asarray([1.0, 3.0]))
    assert out.dtype == snp.float16
    _eq(np.asarray(out), [2.0, 6.0])
    g = starling.grad(lambda x: snp.sum(snp.float64(x) ** 2))(snp.asarray([1.0, -2.0]))
    _eq(np.asarray(g), [2.0, -4.0])
    assert isinstance(np.float32(1.0), snp.float32) and not isinstance(1.0, snp.float32)
    assert snp.float32 != snp.float64 and snp.float32 == snp.float32
    assert snp.float32 != "float64" and snp.float32 == "float32"


def test_aliases_and_abstract_types():
    assert snp.double == snp.float64 and snp.single == snp.float32 and snp.half == snp.float16
    assert snp.float_ == snp.float64 and snp.complex_ == snp.complex128
    assert snp.csingle == snp.complex64 and snp.cdouble == snp.complex128
    assert snp.int_ == snp.int64 and snp.intp == snp.int64
    assert snp.uint == snp.uint64 and snp.uintp == snp.uint64
    assert snp.dtype is np.dtype
    floats = ["float16", "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e5m2",
              "float4_e2m1fn"]
    signed, unsigned = ["int8", "int16", "int32", "int64"], ["uint8", "uint16", "uint32", "uint64"]
    cases = {
        snp.floating: floats,
        snp.complexfloating: ["complex64", "complex128"],
        snp.inexact: floats + ["complex64", "complex128"],
        snp.signedinteger: signed,
        snp.unsignedinteger: unsigned,
        snp.integer: signed + unsigned,
        snp.number: [n for n in _TYPES if n != "bool_"],
        snp.generic: _TYPES,
    }
    for abstract, names in cases.items():
        for n in _TYPES:
            assert snp.issubdtype(getattr(snp, n), abstract) == (n in names), (n, abstract)
    assert snp.isdtype(snp.bfloat16, "real floating")
    assert snp.isdtype(snp.int8, ("integral", snp.float32))
    assert snp.result_type(snp.int8, snp.uint8) == snp.int16
    assert snp.can_cast(snp.float32, snp.complex64)
    assert snp.promote_types(snp.float16, snp.bfloat16) == snp.float32
    info = snp.__array_namespace_info__().dtypes(kind="real floating")
    assert info == {"float32": snp.float32, "float64": snp.float64}
