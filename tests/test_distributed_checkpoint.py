"""starling.distributed.checkpoint: sharded pytrees saved piece by piece, atomically, restored
onto other process counts and layouts; a real 4-rank job with a full disk on one rank and a rank
killed mid-save, then in-process checks (every dtype, targets, corruption, full disk, the
piece-assembly arithmetic against NumPy slicing)."""
from __future__ import annotations

import errno
import json
import os
from typing import NamedTuple

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st_

import starling
import starling.numpy as snp
from starling import nn
from starling.distributed import checkpoint
from starling.distributed.checkpoint import CheckpointError, CheckpointManager, assemble
from starling.nn import serialization
from starling.nn.optim import AdamState
from tests.mpi_jobs import launch, script
from tests.mpi_jobs.checkpoint_kill import values

pytest.importorskip("safetensors")


def _bits(a):
    return np.asarray(a).reshape(-1).view(np.uint8)


def test_four_ranks_full_disk_and_killed_rank_keep_the_previous_checkpoint(tmp_path):
    rc, out = launch(4, script("checkpoint_kill.py"), [tmp_path], timeout=300,
                     fault_tolerant=True)
    path = tmp_path / "report.json"
    assert path.exists(), out[-4000:]
    rep = json.loads(path.read_text())
    first = rep["files1"]
    assert first[-1] == "index.json" and len(first) == 5   # one file per rank + the index
    # rank 2's full disk: every rank raised, naming it; nothing of that save is left
    assert "rank 2: OSError: [Errno 28]" in rep["disk_full_error"]
    assert rep["files_after_disk_full"] == first
    # rank 1 killed mid-write: the survivors got RankFailure naming it; version 1 still current
    assert rep["kill_failed_ranks"] == [1]
    assert rep["index_step_after_kill"] == 1
    assert set(first) <= set(rep["files_after_kill"])
    assert any(f.endswith(".tmp") for f in rep["files_after_kill"])   # the dead rank's half file
    assert rep["removed"] == [1] and rep["mesh3"] == [0, 2, 3]
    assert rep["x_local_shape"] == [4, 6]   # 10 rows over 3 devices: 4, 3, 3
    # the 3 survivors' save collected every leftover: 3 files + the index
    assert len(rep["files3"]) == 4 and rep["files3"][-1] == "index.json"
    assert rep["index3"] == {"step": 3, "metadata": {"world": 3}, "process_count": 3}
    # and one process restores what 3 saved
    got = checkpoint.restore(tmp_path / "ckpt")
    want = values(3)
    for k, a in {"x": got["x"], "w": got["layers"][0]["w"], "m": got["layers"][1]["m"],
                 "p": got["p"], "z": got["z"]}.items():
        assert np.asarray(a).dtype == want[k].dtype
        assert np.array_equal(_bits(a), _bits(want[k])), k
    assert got["step"] == 3 and got["name"] == "run"


# ---- in one process ------------------------------------------------------------------------------

class Pair(NamedTuple):
    a: object
    b: object


def _tree(rng):
    return {"f32": snp.asarray(rng.standard_normal((3, 4)).astype(np.float32)),
            "bf16": rng.standard_normal((5,)).astype(ml_dtypes.bfloat16),
            "f8": rng.standard_normal((2, 2)).astype(ml_dtypes.float8_e4m3fn),
            "i64": np.arange(7, dtype=np.int64), "b": np.array([True, False]),
            "empty": np.zeros((0, 3), np.float32), "scalar": snp.asarray(2.5),
            "nested": [AdamState(snp.asarray(3), [snp.ones(2)], [snp.zeros(2)], None),
                       (1, "s", 3.5), Pair(1, 2)]}


def test_round_trip_every_leaf_kind(tmp_path, rng):
    tree = _tree(rng)
    checkpoint.save(tmp_path / "c", tree, step=7, metadata={"note": "x"})
    got = checkpoint.restore(tmp_path / "c")
    assert set(got) == set(tree)
    for k in ("f32", "bf16", "f8", "i64", "b", "empty", "scalar"):
        assert np.asarray(got[k]).dtype == np.asarray(tree[k]).dtype, k
        assert np.asarray(got[k]).shape == np.asarray(tree[k]).shape, k
        assert np.array_equal(_bits(got[k]), _bits(tree[k])), k
    assert isinstance(got["nested"][0], AdamState) and got["nested"][0].max_exp_avg_sq is None
    assert got["nested"][1] == (1, "s", 3.5)
    # a NamedTuple from outside starling comes back as a tuple: a checkpoint is data, it names
    # no code to import
    assert got["nested"][2] == (1, 2) and not isinstance(got["nested"][2], Pair)
    assert got["scalar"].weak_type == tree["scalar"].weak_type
    index = checkpoint.read_index(tmp_path / "c")
    assert index["step"] == 7 and index["metadata"] == {"note": "x"}
    assert index["arrays"]["f32"]["pieces"][0]["box"] == [[0, 3], [0, 4]]


def test_module_state_dict_and_target(tmp_path):
    model = nn.Linear(3, 2, key=starling.random.key(0))
    checkpoint.save(tmp_path / "m", model)
    sd = checkpoint.restore(tmp_path / "m")
    assert np.array_equal(np.asarray(sd["weight"]), np.asarray(model.weight))
    same = checkpoint.restore(tmp_path / "m", target=model.state_dict())
    assert np.array_equal(np.asarray(same["bias"]), np.asarray(model.bias))
    bad = dict(model.state_dict(), bias=snp.zeros(5))
    with pytest.raises(ValueError, match="bias"):
        checkpoint.restore(tmp_path / "m", target=bad)
    with pytest.raises(TypeError, match="not both"):
        checkpoint.restore(tmp_path / "m", target=bad, shardings={"weight": None, "bias": None})


def test_reshard_between_in_process_meshes(tmp_path, rng):
    # the in-process devices of this test process (conftest.py: 8) stand for processes
    from starling.sharding import NamedSharding, P, distribute, make_mesh
    devs = starling.devices()
    mesh4 = make_mesh((4,), ("d",), devices=devs[:4])
    mesh22 = make_mesh((2, 2), ("a", "b"), devices=devs[4:8])
    mesh3 = make_mesh((3,), ("d",), devices=devs[1:4])
    x = rng.standard_normal((10, 6)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(ml_dtypes.bfloat16)
    tree = {"x": distribute(x, NamedSharding(mesh4, P("d"))),   # torch.chunk rows: 3, 3, 3, 1
            "w": distribute(w, NamedSharding(mesh22, P("b", "a"))),
            "r": distribute(x[:2], NamedSharding(mesh22, P(None, "a"))),  # replicated along b
            "s": distribute(np.float32(7.0), NamedSharding(mesh4, P(), partial={"d": "sum"}))}
    checkpoint.save(tmp_path / "c", tree)
    index = checkpoint.read_index(tmp_path / "c")
    assert [p["box"] for p in index["arrays"]["x"]["pieces"]] == [
        [[0, 3], [0, 6]], [[3, 6], [0, 6]], [[6, 9], [0, 6]], [[9, 10], [0, 6]]]
    assert len(index["arrays"]["r"]["pieces"]) == 2   # each distinct piece written once
    assert index["arrays"]["x"]["layout"] == {"axis_names": ["d"], "mesh_shape": [4],
                                              "spec": [["d"]]}
    got = checkpoint.restore(tmp_path / "c", shardings={
        "x": NamedSharding(mesh3, P("d")), "w": NamedSharding(mesh3, P(None, "d")),
        "r": NamedSharding(mesh22, P("b", "a")),
        "s": NamedSharding(mesh3, P(), partial={"d": "sum"})})
    assert got["x"].sharding.mesh == mesh3
    for name, want in (("x", x), ("w", w), ("r", x[:2]), ("s", np.float32(7.0))):
        a = got[name]
        assert np.array_equal(_bits(np.asarray(a)), _bits(want)), name
        if not a.sharding.partial:
            for shard in a.addressable_shards:   # every piece is its slice of the value
                assert np.array_equal(_bits(shard.data), _bits(np.asarray(want)[shard.index]))
    assert [tuple(s.data.shape) for s in got["x"].addressable_shards] == [(4, 6), (4, 6), (2, 6)]
    with pytest.raises(ValueError, match="prefix"):
        checkpoint.restore(tmp_path / "c", shardings={"x": None})
    with pytest.raises(TypeError, match="NamedSharding"):
        checkpoint.restore(tmp_path / "c", shardings="d")


def test_restore_module_with_dict_shardings(tmp_path):
    from starling.sharding import NamedSharding, P, make_mesh
    model = nn.Linear(4, 2, key=starling.random.key(1))
    checkpoint.save(tmp_path / "m", model)
    mesh = make_mesh((2,), ("d",), devices=starling.devices()[:2])
    got = checkpoint.restore(tmp_path / "m", shardings={"weight": NamedSharding(mesh, P(None, "d")),
                                                        "bias": None})
    assert list(got) == ["weight", "bias"]   # the state dict's order
    assert got["weight"].sharding.spec == P(None, "d")
    assert np.array_equal(np.asarray(got["weight"]), np.asarray(model.weight))


def test_corrupted_truncated_and_missing(tmp_path):
    checkpoint.save(tmp_path / "c", {"x": np.arange(100, dtype=np.float64)})
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        checkpoint.restore(tmp_path / "nothing")
    shard = next(p for p in (tmp_path / "c").iterdir() if p.suffix == ".safetensors")
    raw = bytearray(shard.read_bytes())
    raw[-5] ^= 0xFF
    shard.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="corrupted"):
        checkpoint.restore(tmp_path / "c")
    checkpoint.restore(tmp_path / "c", verify=False)   # the caller's choice
    shard.write_bytes(bytes(raw[:-8]))
    with pytest.raises(CheckpointError, match="wrong size"):
        checkpoint.restore(tmp_path / "c")
    (tmp_path / "c" / "index.json").write_text("{}")
    with pytest.raises(CheckpointError, match="not a Starling checkpoint"):
        checkpoint.restore(tmp_path / "c")


def test_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    checkpoint.save(tmp_path / "c", {"x": np.ones(3)}, step=1)
    before = sorted(os.listdir(tmp_path / "c"))

    def full(path, tensors, metadata=None):
        with open(path, "wb") as f:
            f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(serialization, "write_tensors", full)
    with pytest.raises(CheckpointError, match="previous checkpoint is intact.*Errno 28"):
        checkpoint.save(tmp_path / "c", {"x": np.zeros(3)}, step=2)
    assert sorted(os.listdir(tmp_path / "c")) == before
    assert np.array_equal(np.asarray(checkpoint.restore(tmp_path / "c")["x"]), np.ones(3))


def test_save_validates(tmp_path):
    with pytest.raises(TypeError, match="float4"):
        checkpoint.save(tmp_path / "c", {"x": np.zeros(2, ml_dtypes.float4_e2m1fn)})
    with pytest.raises(TypeError, match="JSON"):
        checkpoint.save(tmp_path / "c", {"x": np.zeros(2)}, metadata={"a": object()})
    with pytest.raises(TypeError, match="step"):
        checkpoint.save(tmp_path / "c", {"x": np.zeros(2)}, step="3")
    with pytest.raises(ValueError, match="unique"):
        checkpoint.save(tmp_path / "c", {"a.b": np.zeros(1), "a": {"b": np.zeros(1)}})
    assert not (tmp_path / "c" / "index.json").exists()


def test_manager_keeps_the_newest(tmp_path):
    m = CheckpointManager(tmp_path / "run", keep=2)
    assert m.latest_step() is None
    with pytest.raises(FileNotFoundError):
        m.restore()
    for step in (0, 5, 10):
        m.save(step, {"w": np.full(2, float(step))})
    assert m.steps() == [5, 10] and m.latest_step() == 10
    assert np.array_equal(np.asarray(m.restore()["w"]), [10.0, 10.0])
    assert np.array_equal(np.asarray(m.restore(5)["w"]), [5.0, 5.0])
    assert sorted(os.listdir(tmp_path / "run")) == ["step_00000005", "step_00000010"]
    with pytest.raises(ValueError, match="keep"):
        CheckpointManager(tmp_path, keep=0)
    with pytest.raises(ValueError, match="step"):
        m.save(-1, {})


@st_.composite
def _tiling(draw):
    shape = tuple(draw(st_.lists(st_.integers(0, 6), min_size=0, max_size=3)))
    cuts = [sorted(set(draw(st_.lists(st_.integers(0, n), max_size=3))) | {0, n})
            for n in shape]
    pieces = [[]]
    for c in cuts:
        pieces = [p + [[a, b]] for p in pieces for a, b in zip(c[:-1], c[1:])]
    box = [sorted(draw(st_.tuples(st_.integers(0, n), st_.integers(0, n)))) for n in shape]
    return shape, pieces, box


@given(_tiling())
def test_assemble_equals_numpy_slicing(case):
    shape, pieces, box = case
    full = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    data = [{"box": p} for p in pieces]

    def get(p):
        return full[tuple(slice(a, b) for a, b in p["box"])]
    out = np.empty(tuple(b - a for a, b in box), np.int64)
    got = assemble(out, [tuple(b) for b in box], data, get)
    assert np.array_equal(got, full[tuple(slice(a, b) for a, b in box)])
    first = pieces[0] if pieces else None
    overlaps = first is not None and all(min(b, pb) > max(a, pa)
                                         for (a, b), (pa, pb) in zip(box, first))
    if overlaps:   # without a piece it needs, the box is not covered
        with pytest.raises(CheckpointError, match="incomplete"):
            assemble(np.empty_like(out), [tuple(b) for b in box], data[1:], get)
