"""starling.save / starling.load (safetensors): pytree structure, every dtype bit-exactly
(bfloat16, float8 included), modules via state_dict, interop with the safetensors package."""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_h

import starling
import starling.numpy as snp
from starling import nn, optim

pytest.importorskip("safetensors")


def A(x):
    return np.asarray(x)


DTYPES = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
          ml_dtypes.float8_e5m2, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16,
          np.uint32, np.uint64, np.bool_, np.complex64]


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips_bit_exactly(dt, tmp_path, rng):
    raw = rng.standard_normal((3, 4)) * 10
    x = raw.astype(dt) if np.dtype(dt).kind != "b" else raw > 0
    if np.dtype(dt).kind in "iu":
        x = rng.integers(0, 100, (3, 4)).astype(dt)
    if np.dtype(dt).kind == "c":
        x = (raw + 1j * raw[::-1]).astype(dt)
    tree = {"x": snp.asarray(x), "scalar": snp.asarray(x[0, 0]), "empty": snp.asarray(x[:0])}
    path = tmp_path / "t.safetensors"
    starling.save(path, tree)
    back = starling.load(path)
    for k in tree:
        assert isinstance(back[k], starling.Array)
        assert back[k].dtype == np.dtype(dt) and back[k].shape == tree[k].shape
        assert A(back[k]).tobytes() == A(tree[k]).tobytes()


def test_tree_structure_round_trips(tmp_path):
    tree = {"params": {"w": snp.ones((2, 3)), "b": [snp.zeros(3), snp.arange(4)]},
            "step": 7, "lr": 0.5, "name": "run", "nothing": None,
            "pair": (snp.ones(1), {1: snp.zeros(2)}),
            "state": optim.adam(1e-3).init({"w": snp.ones(2)})}
    starling.save(tmp_path / "a.safetensors", tree)
    back = starling.load(tmp_path / "a.safetensors")
    assert back["step"] == 7 and back["lr"] == 0.5 and back["name"] == "run"
    assert back["nothing"] is None and isinstance(back["pair"], tuple)
    assert list(back["pair"][1]) == [1]
    assert type(back["state"]) is optim.AdamState  # NamedTuples are rebuilt by name
    assert back["state"].max_exp_avg_sq is None
    assert starling.tree.structure(back) == starling.tree.structure(tree)
    for a, b in zip(starling.tree.leaves(back), starling.tree.leaves(tree)):
        if isinstance(b, starling.Array):
            np.testing.assert_array_equal(A(a), A(b))
    # a single array at the root
    starling.save(tmp_path / "r.safetensors", snp.arange(3))
    np.testing.assert_array_equal(A(starling.load(tmp_path / "r.safetensors")), [0, 1, 2])


def test_module_state_dict_round_trip_and_torch_names(tmp_path, rng):
    net = nn.Sequential(nn.Conv2d(1, 2, 3, key=0), nn.BatchNorm2d(2), nn.Flatten(),
                        nn.Linear(8, 3, key=1))
    net(snp.asarray(rng.standard_normal((2, 1, 4, 4)).astype(np.float32)))  # update stats
    path = tmp_path / "net.safetensors"
    starling.save(path, net)
    sd = starling.load(path)
    assert list(sd) == list(net.state_dict())
    fresh = nn.Sequential(nn.Conv2d(1, 2, 3, key=5), nn.BatchNorm2d(2), nn.Flatten(),
                          nn.Linear(8, 3, key=6))
    fresh.load_state_dict(sd)
    for k, v in net.state_dict().items():
        assert A(fresh.state_dict()[k]).tobytes() == A(v).tobytes()
    assert int(fresh[1].num_batches_tracked) == 1
    # the file is a standard safetensors file: header readable, names as PyTorch's
    raw = path.read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    assert header["1.num_batches_tracked"]["dtype"] == "I64"
    assert header["1.num_batches_tracked"]["shape"] == []
    assert header["0.weight"]["dtype"] == "F32" and header["0.weight"]["shape"] == [2, 1, 3, 3]


def test_interop_with_safetensors_package(tmp_path):
    from safetensors.numpy import load_file, save_file
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    save_file({"a": x, "b.c": np.array([1, 2], np.int16)}, str(tmp_path / "ext.safetensors"))
    back = starling.load(tmp_path / "ext.safetensors")  # no tree metadata: a flat dict
    assert set(back) == {"a", "b.c"}
    np.testing.assert_array_equal(A(back["a"]), x)
    starling.save(tmp_path / "ours.safetensors", {"w": snp.asarray(x), "i": snp.arange(3)})
    loaded = load_file(str(tmp_path / "ours.safetensors"))
    np.testing.assert_array_equal(loaded["w"], x)


def test_bfloat16_and_float8_readable_by_torch(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file
    x = np.array([1.5, -2.25, 3e3], np.float32)
    starling.save(tmp_path / "lp.safetensors", {"bf": snp.asarray(x.astype(ml_dtypes.bfloat16)),
                                                "f8": snp.asarray(x.astype(
                                                    ml_dtypes.float8_e4m3fn))})
    t = load_file(str(tmp_path / "lp.safetensors"))
    assert t["bf"].dtype == torch.bfloat16 and t["f8"].dtype == torch.float8_e4m3fn
    np.testing.assert_array_equal(t["bf"].float().numpy(),
                                  x.astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(t["f8"].float().numpy(),
                                  x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32))


def test_errors(tmp_path):
    with pytest.raises(TypeError, match="cannot save"):
        starling.save(tmp_path / "x.safetensors", {"f": object()})
    with pytest.raises(ValueError, match="unique"):
        starling.save(tmp_path / "x.safetensors", {"a.b": snp.ones(1), "a": {"b": snp.ones(1)}})
    with pytest.raises(TypeError, match="float4"):
        starling.save(tmp_path / "x.safetensors",
                      {"f4": snp.asarray(np.zeros(2, ml_dtypes.float4_e2m1fn))})
    with pytest.raises(TypeError, match="traced"):
        starling.grad(lambda x: (starling.save(tmp_path / "x.safetensors", x), snp.sum(x))[1])(
            snp.ones(2))
    (tmp_path / "bad.safetensors").write_bytes(b"\x05\x00")
    with pytest.raises(nn.SerializationError, match="not a valid safetensors file"):
        starling.load(tmp_path / "bad.safetensors")
    # optimizer state through save / load
    opt = optim.Adam(nn.Linear(2, 2, key=0), lr=0.1, compiled=False)
    starling.save(tmp_path / "opt.safetensors", opt.state_dict())
    opt.load_state_dict(starling.load(tmp_path / "opt.safetensors"))
    assert int(opt.state.count) == 0


def test_load_never_calls_what_the_file_names(tmp_path):
    import json
    import os
    from safetensors.numpy import save_file
    marker = tmp_path / "pwned.txt"
    tree = {"t": "namedtuple", "class": "os:system",
            "c": [{"t": "scalar", "v": f"echo PWNED > {marker}"}]}
    path = str(tmp_path / "evil.safetensors")
    save_file({"x": np.zeros(1, np.float32)}, path, metadata={"starling.tree": json.dumps(tree)})
    out = starling.load(path)
    assert not os.path.exists(marker)
    assert out == (f"echo PWNED > {marker}",)   # rebuilt as a plain tuple


# ---- truncated and corrupted files: SerializationError naming the file and the problem ---------

def _raw(header, data=b"", length=None):
    """The bytes of a safetensors file with ``header`` (a dict, or raw bytes) and ``data``."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    n = len(h) if length is None else length
    return n.to_bytes(8, "little") + h + data


def _f32(name_offsets):
    return {name: {"dtype": "F32", "shape": [4], "data_offsets": list(off)}
            for name, off in name_offsets.items()}


CORRUPT = {
    "empty": (b"", "fewer than the 8-byte header length"),
    "five_bytes": (b"\x05\x00\x00\x00\x00", "fewer than the 8-byte header length"),
    "truncated_header": (_raw(_f32({"a": (0, 16)}), bytes(16))[:30], "truncated header"),
    "huge_header_length": (_raw(b"{}", length=1 << 62), "truncated header"),
    "bad_json": (_raw(b'{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]'),
                 "not valid JSON"),
    "not_utf8": (_raw(b'{"\xff\xfe": 1}'), "not UTF-8"),
    "json_list": (_raw([1, 2]), "JSON list"),
    "data_shorter": (_raw(_f32({"a": (0, 16), "b": (16, 32)}), bytes(28)),
                     "data section has 28 bytes but tensor 'b' ends at byte 32"),
    "overlap": (_raw(_f32({"a": (0, 16), "b": (8, 24)}), bytes(24)), "overlap"),
    "hole": (_raw(_f32({"a": (0, 16), "b": (20, 36)}), bytes(36)), "belong to no tensor"),
    "trailing": (_raw(_f32({"a": (0, 16)}), bytes(20)), "4 bytes after the last tensor"),
    "size_mismatch": (_raw({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}},
                           bytes(20)), "needs 24 bytes"),
    "unknown_dtype": (_raw({"a": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}},
                           bytes(4)), "dtype 'F99'"),
    "negative_dim": (_raw({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}),
                     "non-negative ints"),
    "reversed_offsets": (_raw({"a": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}},
                              bytes(4)), "0 <= begin <= end"),
    "no_dtype": (_raw({"a": {"shape": [1], "data_offsets": [0, 4]}}, bytes(4)),
                 "no dtype string"),
    "entry_not_object": (_raw({"a": [1]}), "not an object"),
    "metadata_not_strings": (_raw({"__metadata__": {"k": 1}}), "__metadata__"),
}


@pytest.mark.parametrize("case", list(CORRUPT))
def test_corrupted_file_raises_serialization_error(case, tmp_path):
    raw, problem = CORRUPT[case]
    path = tmp_path / f"{case}.safetensors"
    path.write_bytes(raw)
    with pytest.raises(nn.SerializationError) as err:
        starling.load(path)
    msg = str(err.value)
    assert str(path) in msg and problem in msg, msg
    # no raw json / struct / safetensors error shown under it
    assert err.value.__cause__ is None
    assert err.value.__context__ is None or err.value.__suppress_context__
    assert isinstance(err.value, ValueError)
    # independent reference: the safetensors package rejects the same bytes too
    import safetensors
    with pytest.raises(Exception):   # noqa: B017  (its own SafetensorError)
        safetensors.deserialize(raw)


def test_every_truncation_of_a_valid_file_is_a_serialization_error(tmp_path):
    path = tmp_path / "whole.safetensors"
    starling.save(path, {"w": snp.arange(6, dtype=snp.float32).reshape(2, 3),
                         "b": snp.asarray(np.array([1, 2], np.int16)), "s": 3})
    raw = path.read_bytes()
    cut = tmp_path / "cut.safetensors"
    for n in range(len(raw)):
        cut.write_bytes(raw[:n])
        with pytest.raises(nn.SerializationError, match="cut.safetensors"):
            starling.load(cut)
    back = starling.load(path)
    assert back["s"] == 3 and A(back["b"]).tolist() == [1, 2]


@pytest.fixture(scope="module")
def valid_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corrupt") / "src.safetensors"
    starling.save(path, {"w": snp.arange(6, dtype=snp.float32), "n": [snp.ones(2), 1]})
    return path


@settings(max_examples=60)
@given(st_h.data())
def test_corrupted_bytes_load_or_raise_serialization_error(valid_file, data):
    """Any byte of a valid file overwritten: the file either still loads (a value in the data
    section changed) or is a SerializationError, never another exception."""
    raw = bytearray(valid_file.read_bytes())
    pos = data.draw(st_h.integers(0, len(raw) - 1))
    raw[pos] = data.draw(st_h.integers(0, 255))
    bad = valid_file.parent / "bad.safetensors"
    bad.write_bytes(bytes(raw))
    try:
        starling.load(bad)
    except nn.SerializationError as e:
        assert str(bad) in str(e)


def test_malformed_tree_metadata(tmp_path):
    from safetensors.numpy import save_file
    path = str(tmp_path / "meta.safetensors")
    for tree, problem in (("{not json", "metadata is malformed"),
                          (json.dumps({"t": "array", "name": "missing"}), "unknown tensor"),
                          (json.dumps({"t": "weird"}), "unknown node type"),
                          (json.dumps([1]), "malformed")):
        save_file({"x": np.zeros(1, np.float32)}, path, metadata={"starling.tree": tree})
        with pytest.raises(nn.SerializationError, match=problem):
            starling.load(path)


def test_save_to_a_missing_directory_is_an_oserror(tmp_path):
    with pytest.raises(OSError, match="missing"):
        starling.save(tmp_path / "missing" / "x.safetensors", {"a": snp.ones(2)})


def test_load_state_dict_of_a_file_name_says_to_load_it(tmp_path):
    net = nn.Linear(2, 2, key=0)
    starling.save(tmp_path / "w.safetensors", net)
    with pytest.raises(TypeError, match=r"starling\.load\(path\)"):
        net.load_state_dict(str(tmp_path / "w.safetensors"))
    with pytest.raises(TypeError, match="mapping"):
        net.load_state_dict([("weight", snp.ones((2, 2)))])
    net.load_state_dict(starling.load(tmp_path / "w.safetensors"))
