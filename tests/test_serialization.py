"""starling.save / starling.load (safetensors): pytree structure, every dtype bit-exactly
(bfloat16, float8 included), modules via state_dict, interop with the safetensors package."""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

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
    with pytest.raises(ValueError, match="not a safetensors file"):
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
