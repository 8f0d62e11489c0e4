"""The Array type: immutability, conversion, repr, DLPack, devices."""
import pickle

import ml_dtypes
import numpy as np
import pytest

import starling
import starling.numpy as snp


def test_item_assignment_points_to_at():
    x = snp.asarray([1.0, 2.0])
    with pytest.raises(TypeError, match=r"\.at\["):
        x[0] = 3.0


def test_numpy_input_is_copied():
    a = np.arange(3.0)
    x = snp.asarray(a)
    a[0] = 100.0
    assert x.tolist() == [0.0, 1.0, 2.0]


def test_array_view_is_read_only():
    x = snp.asarray([1.0, 2.0])
    v = np.asarray(x)
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0] = 5
    assert x.tolist() == [1.0, 2.0]
    c = np.array(x)  # an explicit copy is the user's own
    c[0] = 5
    assert x.tolist() == [1.0, 2.0]


def test_dlpack_export_is_read_only_or_copy():
    x = snp.asarray(np.arange(4, dtype=np.float32))
    y = np.from_dlpack(x)
    np.testing.assert_array_equal(y, [0, 1, 2, 3])
    if y.flags.writeable:  # a consumer without read-only support got a copy
        y[0] = 9
    assert x.tolist() == [0, 1, 2, 3]
    assert x.__dlpack_device__() == (1, 0)


def test_properties():
    x = snp.asarray(np.zeros((2, 3), np.int16))
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6 and x.dtype == np.int16
    assert x.device == starling.devices()[0]
    assert len(x) == 2
    assert not x.weak_type
    assert not snp.asarray(1.0).weak_type and snp.multiply(1.0, 1.0).weak_type


def test_item_tolist():
    assert snp.asarray(3).item() == 3
    assert snp.asarray([[1, 2]]).tolist() == [[1, 2]]
    with pytest.raises(ValueError, match="size 1"):
        snp.asarray([1, 2]).item()
    assert float(snp.asarray([2.5])) == 2.5
    assert int(snp.asarray(7)) == 7


def test_bool_of_multi_element_is_ambiguous():
    with pytest.raises(ValueError, match="ambiguous"):
        bool(snp.asarray([1, 2]))
    assert bool(snp.asarray(1))


def test_index_requires_integer():
    assert [10, 20, 30][snp.asarray(1)] == 20
    with pytest.raises(TypeError, match="integer"):
        [10, 20][snp.asarray(1.0)]


def test_repr_looks_like_numpy():
    assert repr(snp.asarray([1.0, 2.0])) == "Array([1., 2.])"
    assert repr(snp.asarray(np.array([1, 2], np.int8))) == "Array([1, 2], dtype=int8)"
    assert repr(snp.asarray(1.5)) == "Array(1.5)"
    assert repr(snp.multiply(1.5, 1.0)) == "Array(1.5, weak_type=True)"
    assert "bfloat16" in repr(snp.asarray(np.ones(2, ml_dtypes.bfloat16)))
    assert str(snp.asarray([1, 2])) == "[1 2]"


def test_pickle_round_trip():
    x = snp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype == x.dtype and y.tolist() == x.tolist()


def test_unhashable_and_no_direct_construction():
    with pytest.raises(TypeError):
        hash(snp.asarray(1.0))
    with pytest.raises(TypeError, match="asarray"):
        starling.Array(3)


def test_asarray_rejects_non_numbers():
    for bad in ("abc", None, {"a": 1}, [1, "a"]):
        with pytest.raises(TypeError, match="asarray"):
            snp.asarray(bad)
    with pytest.raises(ValueError, match="ragged"):
        snp.asarray([[1, 2], [3]])


def test_asarray_dtype_inference():
    assert snp.asarray([1.0, 2.0]).dtype == np.float32
    assert snp.asarray([1, 2]).dtype == np.int64
    assert snp.asarray([True]).dtype == np.bool_
    assert snp.asarray([1j]).dtype == np.complex64
    assert snp.asarray(np.ones(2)).dtype == np.float64
    assert snp.asarray(2, dtype=np.float64).dtype == np.float64


def test_devices():
    devs = starling.devices()
    assert devs and devs[0].platform == "cpu"
    with pytest.raises(ValueError, match="platform"):
        starling.devices("tpu")


def test_read_only_views_cannot_be_made_writable():
    x = snp.asarray(np.arange(3))
    a = np.asarray(x)
    with pytest.raises(ValueError):
        a.setflags(write=True)
    assert x.tolist() == [0, 1, 2]
    t = np.asarray(snp.asarray(np.ones((3, 2))).T)
    assert not t.flags.writeable


def test_round_and_delete_message():
    assert float(round(snp.asarray(2.6))) == 3.0
    with pytest.raises(TypeError, match="immutable"):
        del snp.asarray([1, 2])[0]
