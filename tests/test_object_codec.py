"""The safe encoding of the object collectives (src/distributed/codec.py): round trips of every
supported type, refusals of the others, pickle only by explicit opt-in on both sides, and
hostile payloads (malicious pickles, corrupt lengths, deep nesting) refused with a ValueError."""
from __future__ import annotations

import collections
import fractions
import math
import pickle
import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import starling.numpy as snp
from starling.arrays.array import Array, wrap
from starling.core import dtypes
from starling.distributed import codec


def same(a, b):
    """Structural equality with types, NaN == NaN, arrays by dtype, shape and bytes."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                     math.copysign(1, b))
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, Array):
        return a.weak_type == b.weak_type and same(np.asarray(a), np.asarray(b))
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return a == b


scalars = (st.none() | st.booleans() | st.integers() | st.integers(-2**200, 2**200)
           | st.floats(allow_nan=True) | st.complex_numbers(allow_nan=True)
           | st.text() | st.binary())
keys = st.text(max_size=5) | st.integers() | st.floats(allow_nan=False)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.lists(inner, max_size=4).map(tuple)
                      | st.dictionaries(keys, inner, max_size=4), max_leaves=20)


@given(values)
def test_round_trip_of_python_values(v):
    assert same(codec.decode(codec.encode(v)), v)


@pytest.mark.parametrize("dt", dtypes.ALL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (2, 3), (3, 0, 2)])
def test_round_trip_of_arrays_of_every_dtype(dt, shape):
    rng = np.random.default_rng(0)
    a = np.asarray(rng.integers(0, 2, size=shape).astype(dt) if dt == np.bool_ else
                   (rng.standard_normal(shape) * 3).astype(dt))
    for v in (a, a[..., ::-1] if a.ndim else a, snp.asarray(a)):   # also a strided view
        back = codec.decode(codec.encode({"x": v}))["x"]
        assert same(back, v)
    scalar = a.reshape(-1)[0] if a.size else None
    if scalar is not None:
        assert same(codec.decode(codec.encode(scalar)), scalar)


def test_arrays_keep_weak_types_and_values_from_big_endian_sources():
    weak = wrap(np.asarray(2.5, np.float32), True)   # as made from a Python scalar
    for a in (weak, snp.asarray(2.5), snp.arange(3, dtype=snp.int16)):
        back = codec.decode(codec.encode(a))
        assert back.weak_type == a.weak_type and np.array_equal(np.asarray(back), np.asarray(a))
    be = np.arange(4, dtype=">f8")
    back = codec.decode(codec.encode(be))
    assert back.dtype == np.float64 and np.array_equal(back, np.arange(4.0))


@pytest.mark.parametrize("bad, name", [
    ({1, 2}, "builtins.set"), (object(), "builtins.object"),
    (collections.OrderedDict(a=1), "collections.OrderedDict"),
    (collections.namedtuple("Pt", "x y")(1, 2), "Pt"), (fractions.Fraction(1, 3), "Fraction"),
    (np.array([object()], dtype=object), "object"), (np.zeros(2, "U3"), "<U3"),
    (lambda: 0, "function"),
])
def test_unsupported_values_are_type_errors_pointing_to_allow_pickle(bad, name):
    with pytest.raises(TypeError) as info:
        codec.encode({"k": [bad]}, op="broadcast_object")
    msg = str(info.value)
    assert name in msg and "broadcast_object" in msg
    if not isinstance(bad, np.ndarray):
        assert "allow_pickle=True" in msg


def test_dict_keys_must_be_strings_or_numbers():
    with pytest.raises(TypeError, match="dict keys must be str, int, float or bool, got a key "
                                        "of type tuple"):
        codec.encode({(1, 2): 3})
    d = {True: 1, 2: "a", 1.5: None, "s": b"x"}
    back = codec.decode(codec.encode(d))
    assert same(back, d) and [type(k) for k in back] == [bool, int, float, str]


def test_cycles_and_deep_nesting_are_refused_both_ways():
    a = [1]
    a.append(a)
    with pytest.raises(ValueError, match="contains itself"):
        codec.encode(a)
    shared = [1]
    assert codec.decode(codec.encode([shared, shared])) == [[1], [1]]   # a DAG is fine
    deep = []
    for _ in range(codec.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(ValueError, match="nests deeper"):
        codec.encode(deep)
    # a crafted payload of 100000 nested lists: a ValueError, not a RecursionError
    crafted = codec.MAGIC + bytes([codec.VERSION]) + (b"l" + struct.pack("<Q", 1)) * 100000
    with pytest.raises(ValueError, match="nests deeper"):
        codec.decode(crafted)


class _Evil:
    """Unpickling this would create a file: the attack a pickle payload can carry."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickle_only_by_explicit_opt_in_on_both_sides(tmp_path):
    f = fractions.Fraction(2, 3)
    payload = codec.encode({"f": f, "n": 1}, allow_pickle=True)
    assert codec.decode(payload, allow_pickle=True) == {"f": f, "n": 1}
    with pytest.raises(ValueError, match="refusing to unpickle"):
        codec.decode(payload)
    # a malicious payload is refused without being unpickled
    target = tmp_path / "pwned"
    evil = codec.encode([1, _Evil(str(target))], allow_pickle=True)
    with pytest.raises(ValueError, match="refusing to unpickle"):
        codec.decode(evil)
    assert not target.exists()
    # a raw pickle (what mpi4py's lowercase methods send) is not a payload at all
    with pytest.raises(ValueError, match="not a Starling object payload"):
        codec.decode(pickle.dumps(_Evil(str(target))))
    assert not target.exists()
    # supported values never travel pickled, even with the opt-in
    plain = [1.5, "x", np.arange(3), {"k": (None, True)}]
    assert same(codec.decode(codec.encode(plain, allow_pickle=True)), plain)


def test_error_payloads_and_versions():
    with pytest.raises(TypeError, match="the sender could not encode its object: boom"):
        codec.decode(codec.error_payload("boom"), op="recv_object")
    with pytest.raises(ValueError, match="payload version 9"):
        codec.decode(codec.MAGIC + bytes([9]) + b"N")


@pytest.mark.parametrize("payload, what", [
    (codec.MAGIC + b"\x01" + b"s" + struct.pack("<Q", 2**62), "announced"),
    (codec.MAGIC + b"\x01" + b"l" + struct.pack("<Q", 2**40), "items announced"),
    (codec.MAGIC + b"\x01" + b"N" + b"x", "trailing"),
    (codec.MAGIC + b"\x01" + b"?", "unknown tag"),
    (codec.MAGIC + b"\x01" + b"A" + struct.pack("<Q", 6) + b"object" + struct.pack("<Q", 0),
     "dtype 'object'"),
    (codec.MAGIC + b"\x01" + b"A" + struct.pack("<Q", 7) + b"float32" + struct.pack("<Q", 1)
     + struct.pack("<Q", 2**40) + struct.pack("<Q", 8) + b"\0" * 8, "bytes for a float32"),
    (codec.MAGIC + b"\x01" + b"d" + struct.pack("<Q", 1) + b"N" + b"N", "dict key of type"),
])
def test_corrupt_payloads_are_value_errors(payload, what):
    with pytest.raises(ValueError, match=what):
        codec.decode(payload)


@given(st.data())
def test_damaged_payloads_never_crash_the_decoder(data):
    v = data.draw(values)
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    payload = bytearray(codec.encode([v, arr, {"b": ml_dtypes.bfloat16(1.5)}]))
    cut = data.draw(st.integers(0, len(payload)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(payload) - 1), st.integers(0, 255)),
                               max_size=3))
    damaged = bytearray(payload[:cut]) if data.draw(st.booleans()) else payload
    for i, b in flips:
        if i < len(damaged):
            damaged[i] = b
    try:
        codec.decode(bytes(damaged))
    except (ValueError, TypeError):
        pass


def test_bool_arrays_from_crafted_bytes_are_proper_bools():
    p = bytearray(codec.encode(np.array([True, False, True])))
    p[-3] = 7
    back = codec.decode(bytes(p))
    assert back.dtype == np.bool_ and back.view(np.uint8).tolist() == [1, 0, 1]
