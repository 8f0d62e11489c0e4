"""The flight recorder on the in-process runtime: collectives are recorded per device, a timeout
names the devices that never arrived and dumps one debug-format log per device, and the compare
tool (``python -m starling.distributed.flight_recorder``) names the first mismatch of real
mismatched runs. MPI jobs are in tests/test_distributed_observe.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import lax
from starling.collectives.runtime import flight_recorder as fr
from starling.collectives.runtime.context import (CollectiveError, CollectiveTimeout,
                                                  collective_timeout)
from starling.collectives.runtime.inprocess import InProcessComm, run_spmd
from starling.distributed import flight_recorder as dfr
from starling.distributed import set_timeout
from starling.lowering.debug import DebugMode, debug_diff
from starling.sharding import P, make_mesh

if len(starling.devices()) < 8:   # pragma: no cover - conftest asks for eight
    pytest.skip("needs STARLING_NUM_CPU_DEVICES >= 8 (tests/conftest.py sets 8)",
                allow_module_level=True)

# The last four devices: a device left stuck by a timeout test delays nobody else's tests.
DEVS = starling.devices()[4:8]
MESH = make_mesh((4,), ("i",), devices=DEVS)
NAMES = [f"cpu{d.id}" for d in DEVS]


@pytest.fixture
def dumps(tmp_path, monkeypatch):
    d = tmp_path / "dumps"
    monkeypatch.setenv("STARLING_FLIGHT_RECORDER_DIR", str(d))
    fr.clear()
    return d


def _all_reduce(shape_of=lambda rank: (3,), skip=(), sleep=None):
    """A per-device function: an all_reduce over the mesh, except on the ranks in ``skip``
    (they return at once) or ``sleep = (ranks, seconds, event)`` (they sleep, set the event and
    return)."""
    def fn(ctx):
        rank = ctx.axis_index(("i",))
        if rank in skip:
            return None
        if sleep is not None and rank in sleep[0]:
            time.sleep(sleep[1])
            sleep[2].set()
            return None
        x = np.full(shape_of(rank), float(rank), np.float32)
        return ctx.comm.all_reduce(ctx, x, ("i",), "sum")
    return fn


def test_collectives_are_recorded_per_device(dumps):
    f = starling.shard_map(lambda b: lax.all_gather(lax.psum(b, "i"), "i", tiled=True), MESH,
                           in_specs=P("i"), out_specs=P())
    out = f(snp.arange(8.0))
    blocks = np.arange(8.0).reshape(4, 2)
    np.testing.assert_allclose(np.asarray(out), np.tile(blocks.sum(0), 4))
    recs = fr.entries()
    assert sorted(r["rank"] for r in recs) == sorted(NAMES * 2)
    for name in NAMES:
        mine = [r for r in recs if r["rank"] == name]
        assert [r["primitive"] for r in mine] == ["all_reduce", "all_gather"]
        assert [r["seq"] for r in mine] == [0, 1]
        assert all(r["state"] == "completed" and r["end"] >= r["start"] for r in mine)
        assert mine[0]["inputs"] == [{"shape": [2], "dtype": "float32", "weak": False}]
        assert mine[0]["params"] == {"op": "sum", "axes": ["i"]}
        assert mine[1]["params"]["free_dims"] == [0] and mine[0]["group_ranks"] == NAMES
    where = fr.dump()
    assert where == str(dumps)
    assert sorted(os.listdir(dumps)) == sorted(f"{n}.json" for n in NAMES)
    log = DebugMode.load_logs(dumps / f"{NAMES[1]}.json")   # debug mode's log format
    assert log.meta["participant"] == NAMES[1] and len(log.records) == 2
    result = dfr.compare(dumps)
    assert result.consistent and result.collectives == 2, str(result)
    assert dfr.main([str(dumps)]) == 0


def test_device_that_skips_a_collective_is_named_and_dumped(dumps):
    # device 2 returns without calling the all_reduce: the others learn it (no need to wait for
    # a timeout), every device's log is dumped, and the tool names the device with no record
    with pytest.raises(CollectiveError, match="finished without calling it") as info:
        run_spmd(MESH, _all_reduce(skip={2}), comm=InProcessComm(MESH, timeout=30))
    assert str(DEVS[2]) in str(info.value) and str(dumps) in str(info.value)
    states = {n: [r["state"] for r in DebugMode.load_logs(dumps / f"{n}.json").records]
              for n in NAMES}
    assert states[NAMES[2]] == [] and "error" in sum(states.values(), [])
    assert all(states[n] in (["error"], ["aborted"]) for n in NAMES if n != NAMES[2])
    result = dfr.compare(dumps)
    assert not result.consistent
    first = str(result.first)
    assert f"{NAMES[2]} has no record of it" in first and "all_reduce(float32[3])" in first
    assert dfr.main([str(dumps)]) == 1


def test_stuck_device_does_not_hold_the_timeout_back(dumps):
    # device 3 sleeps (alive, not in a collective): the others time out naming it, and run_spmd
    # reports after a short grace instead of waiting for the sleeper
    comm = InProcessComm(MESH, timeout=0.3)
    woke = threading.Event()
    with pytest.raises(CollectiveTimeout) as info:
        run_spmd(MESH, _all_reduce(sleep=({3}, 3.0, woke)), comm=comm)
    assert not woke.is_set()   # reported while the sleeper still sleeps
    e = info.value
    assert e.missing == (DEVS[3],)
    assert "timed out after 0.3 s" in str(e) and str(dumps) in str(e)
    log = DebugMode.load_logs(dumps / f"{NAMES[0]}.json")   # as it was when the dump ran
    # device 0 timed out itself, or was aborted by a peer that timed out first (an aborted
    # record rewrites the dump), or the dump ran before either was recorded
    assert [r["state"] for r in log.records] in (["timeout"], ["aborted"], ["started"])
    assert "has no record of it" in str(dfr.compare(dumps).first)
    woke.wait()   # let the sleeper finish before the next test uses its device


def test_set_timeout_per_mesh_and_default(dumps):
    mesh = make_mesh((2,), ("j",), devices=DEVS[:2])

    def fn(ctx):
        if ctx.axis_index(("j",)) == 1:
            time.sleep(0.6)   # late, not gone
        return ctx.comm.broadcast(ctx, np.ones(2), ("j",), 0)

    try:
        set_timeout(0.25, mesh)
        assert collective_timeout(mesh) == 0.25 and collective_timeout(MESH) is None
        with pytest.raises(CollectiveTimeout) as info:
            run_spmd(mesh, fn)
        assert info.value.missing == (DEVS[1],)
        time.sleep(0.6)
        set_timeout(None, mesh)
        set_timeout(5.0)
        assert collective_timeout(mesh) == 5.0
    finally:
        set_timeout(None)
        set_timeout(None, mesh)
    with pytest.raises(ValueError, match="positive or None"):
        set_timeout(0)
    for bad in ("5", True, float("nan"), -1.0):
        with pytest.raises(ValueError, match="positive or None"):
            set_timeout(bad)


def test_mismatched_shapes_are_named_by_the_compare_tool(dumps):
    # device 1 calls all_reduce with another shape: the rendezvous fails, each device records
    # what it called, and the tool names the shape difference at that sequence number
    with pytest.raises(CollectiveError, match="disagree"):
        run_spmd(MESH, _all_reduce(shape_of=lambda r: (4,) if r == 1 else (3,)),
                 comm=InProcessComm(MESH, timeout=30))
    result = dfr.compare(dumps)
    assert not result.consistent
    first = str(result.first)
    assert f"{NAMES[1]} called all_reduce(float32[4])" in first
    assert f"input[0] shape (4,) ({NAMES[1]}) vs (3,) ({NAMES[0]})" in first
    # the dumps are debug logs: debug_diff compares two of them record by record too
    d = debug_diff(dumps / f"{NAMES[0]}.json", dumps / f"{NAMES[1]}.json")
    assert d and "input[0] shape (3,) (a) vs (4,) (b)" in d.differences


def test_compare_tool_messages_truncation_and_errors(tmp_path):
    def log(who, records, truncated=False, when=1e12):
        doc = {"format": "starling-debug-log", "version": 1, "label": None, "checksums": False,
               "truncated": truncated, "records": records,
               "meta": {"kind": "starling-flight-recorder", "participant": who, "time": when}}
        (tmp_path / f"{who}.json").write_text(json.dumps(doc))

    def rec(who, kind, seq, shape, peer=None, group="g", op="x", start=1.0):
        return {"index": 0, "primitive": op, "source": "mpi", "depth": 0,
                "inputs": [{"shape": shape, "dtype": "float32", "weak": False}], "outputs": [],
                "params": {"tag": 0} if kind != "collective" else {}, "kind": kind,
                "rank": who, "group": group, "group_ranks": ["rank0", "rank1"], "seq": seq,
                "peer": peer, "state": "completed", "start": start, "end": start, "error": None}

    # a message whose receiver expected another shape, then one never received
    log("rank0", [rec("rank0", "send", 0, [3], "rank1", op="send"),
                  rec("rank0", "send", 1, [3], "rank1", op="send", start=2.0)])
    log("rank1", [rec("rank1", "recv", 0, [4], "rank0", op="recv")])
    result = dfr.compare(tmp_path)
    assert len(result.problems) == 2 and result.messages == 2
    assert "message #0 from rank0 to rank1 (tag 0, group g): sent and received differ" in \
        str(result.first)
    assert "rank1 has no matching recv" in result.problems[1].what
    # a truncated ring does not count older sequence numbers as missing
    for f in tmp_path.iterdir():
        f.unlink()
    log("rank0", [rec("rank0", "collective", s, [2]) for s in range(3)])
    log("rank1", [rec("rank1", "collective", 2, [2])], truncated=True)
    assert dfr.compare(tmp_path).consistent
    # a member without a dump is a problem; no dumps at all, or a foreign file, is an error
    (tmp_path / "rank1.json").unlink()
    assert "no dump from rank1" in str(dfr.compare(tmp_path).first)
    assert dfr.main([str(tmp_path / "missing")]) == 2   # no such path
    (tmp_path / "other.json").write_text(json.dumps(DebugMode().to_json()))
    with pytest.raises(ValueError, match="not a flight-recorder dump"):
        dfr.compare(tmp_path)


def test_module_entry_point_exit_codes(dumps):
    run_spmd(MESH, _all_reduce(), comm=InProcessComm(MESH))
    fr.dump()
    env = dict(os.environ, PYTHONWARNINGS="error::RuntimeWarning")
    cmd = [sys.executable, "-m", "starling.distributed.flight_recorder"]
    ok = subprocess.run(cmd + [str(dumps)], capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and "consistent" in ok.stdout, ok.stderr
    (dumps / "empty").mkdir()
    assert dfr.main([str(dumps / "empty")]) == 2


def _ring(monkeypatch, size):
    """A ring of ``size`` records, as ``STARLING_FLIGHT_RECORDER_SIZE=size`` at import makes."""
    monkeypatch.setattr(fr, "_CAPACITY", size)
    monkeypatch.setattr(fr, "_SLOTS", [None] * size)


def test_recording_can_be_turned_off_and_bad_sizes_are_refused(monkeypatch):
    monkeypatch.setenv("STARLING_FLIGHT_RECORDER_SIZE", "-1")
    with pytest.raises(ValueError, match="STARLING_FLIGHT_RECORDER_SIZE"):
        fr._capacity()
    monkeypatch.setenv("STARLING_FLIGHT_RECORDER_SIZE", "many")
    with pytest.raises(ValueError, match="STARLING_FLIGHT_RECORDER_SIZE"):
        fr._capacity()
    _ring(monkeypatch, 0)   # SIZE=0 at import
    assert fr.record_start("x", "p", "g", ["p"], 0, (), "float32", source="t") is None
    assert fr.record_end(None, "timeout") is None and fr.entries() == []
    # found by review: a timeout message named a dump directory that recording off never makes
    assert "recording is off" in fr.dumps_note() and "dumps:" not in fr.dumps_note()


def test_ring_records_read_as_documented_dicts_and_truncation_counts_from_clear(
        tmp_path, monkeypatch):
    """Records are kept as given and read as the documented dicts; a dump says it is truncated
    exactly when more records were made since the last clear than the ring holds."""
    _ring(monkeypatch, 3)
    fr.clear()
    rec = fr.record_start("all_reduce", "cpu0", "g1", ["cpu0", "cpu1"], 4, (2, 3),
                          np.dtype(np.float32), source="inprocess", params={"op": "sum"})
    assert rec["inputs"] == [{"shape": [2, 3], "dtype": "float32", "weak": False}]
    assert rec.get("source") == "inprocess" and rec.get("missing", 7) == 7
    fr.record_end(rec, "completed")
    (entry,) = fr.entries()
    assert entry["state"] == "completed" and entry["end"] >= entry["start"]
    assert entry["params"] == {"op": "sum"} and entry["seq"] == 4 and entry["rank"] == "cpu0"
    for i in range(2):
        fr.record_start("barrier", "cpu0", "g1", ["cpu0"], i, (), None, source="t")
    fr.dump(tmp_path / "full")
    assert not json.loads((tmp_path / "full" / "cpu0.json").read_text())["truncated"]
    fr.record_start("barrier", "cpu0", "g1", ["cpu0"], 2, (), None, source="t")
    fr.dump(tmp_path / "over")
    assert json.loads((tmp_path / "over" / "cpu0.json").read_text())["truncated"]


def test_ring_reuses_finished_records_but_never_one_still_in_flight(monkeypatch):
    """The ring rewrites a finished record's slot in place (src/collectives/runtime/
    flight_recorder.py): a collective still in flight when the ring wraps keeps its own record
    (its end is still filed on it), and the ring reads as the last records, oldest first."""
    _ring(monkeypatch, 3)
    fr.clear()
    start = lambda seq: fr.record_start("all_reduce", "cpu0", "g", ["cpu0"], seq, (2,),
                                        np.dtype(np.float32), source="t", params={"op": "sum"})
    slow = start(0)                 # stays in flight while 5 more come and go
    done, indices = [], []
    for seq in range(1, 6):
        r = start(seq)
        indices.append(r.index)
        fr.record_end(r, "completed")
        done.append(r)
    assert slow.state == "started" and slow.seq == 0
    assert done[3] is done[0]       # slot 1 rewritten in place: seq 1, then seq 4
    # a second end of the old record (a timed-out call completing later) leaves seq 4 alone
    assert fr.record_end(done[0], "timeout", "late", index=indices[0]) is None
    assert done[0].seq == 4 and done[0].state == "completed" and done[0].error is None
    assert done[0].index == indices[3] == indices[0] + 3
    assert [e["seq"] for e in fr.entries()] == [3, 4, 5]
    assert [e["index"] for e in fr.entries()] == sorted(e["index"] for e in fr.entries())
    fr.record_end(slow, "completed")   # its slot was taken by a fresh record meanwhile
    assert slow.state == "completed" and slow.end >= slow.start
    assert all(e["state"] == "completed" for e in fr.entries())
    assert [e["seq"] for e in fr.entries()] == [3, 4, 5]


def test_call_specs_are_computed_once_and_shared_without_being_changed(monkeypatch):
    """The signature bookkeeping of MPI collectives (src/distributed/callspec.py) is made once
    per distinct call; records share its params, and a reader changing a record's dict does not
    reach the spec or later records."""
    from starling.distributed.callspec import call_spec
    _ring(monkeypatch, 8)
    f32 = np.dtype(np.float32)
    a = call_spec("all_reduce", (2, 3), f32, {"op": "sum"}, "blocking")
    assert call_spec("all_reduce", [2, 3], f32, {"op": "sum"}, "blocking") is a
    assert a.params == {"op": "sum", "mode": "blocking"}
    assert a.description == "all_reduce(op=sum) of float32[2, 3]"   # the mode left out
    h = int(a.check[0])
    assert a.check.tolist() == [h, -h] and 0 < h < 1 << 56 and not a.check.flags.writeable
    # everything the members must agree on changes the fingerprint and the hash
    others = [call_spec("all_reduce", (2, 3), f32, {"op": "max"}, "blocking"),
              call_spec("all_reduce", (3, 2), f32, {"op": "sum"}, "blocking"),
              call_spec("all_reduce", (2, 3), np.dtype(np.int32), {"op": "sum"}, "blocking"),
              call_spec("all_gather", (2, 3), f32, {"op": "sum"}, "blocking")]
    assert len({a.fingerprint} | {o.fingerprint for o in others}) == 5
    assert len({h} | {int(o.check[0]) for o in others}) == 5
    # the mode is filed (a blocking and a nonblocking call never match) but is no argument
    nb = call_spec("all_reduce", (2, 3), f32, {"op": "sum"}, "nonblocking")
    assert nb.fingerprint != a.fingerprint and nb.description == a.description
    # dims the members may differ in do not enter the fingerprint
    free = lambda n: call_spec("all_gather", (n, 4), f32, {"free_dims": (0,)})
    assert free(3).fingerprint == free(5).fingerprint
    # unhashable parameters (a permutation as lists) are cached by their text
    p = call_spec("ppermute", (4,), f32, {"perm": [[0, 1], [1, 0]]})
    assert p is call_spec("ppermute", (4,), f32, {"perm": [[0, 1], [1, 0]]})
    assert p.fingerprint != call_spec("ppermute", (4,), f32, {"perm": [[0, 1], [1, 1]]}).fingerprint
    fr.clear()
    fr.record_start("all_reduce", "rank0", "g", ["rank0"], 0, a.shape, a.dtype, source="mpi",
                    params=a.params)
    fr.entries()[0]["params"]["op"] = "changed by a reader"
    assert a.params["op"] == "sum" and fr.entries()[0]["params"]["op"] == "sum"


def test_templates_live_while_held_and_unheld_ones_are_dropped(monkeypatch):
    monkeypatch.setattr(fr, "_TEMPLATES", {})
    monkeypatch.setattr(fr, "_HANDLES", fr.weakref.WeakValueDictionary())
    monkeypatch.setattr(fr, "_SWEEP", {"at": 1024, "next_id": 0})

    def make(i):
        return fr.template(("key", i), "all_reduce", "rank0", "g", ["rank0"], (i,), "float32",
                           source="mpi")

    kept = make(-1)
    assert make(-1) is kept   # the same key while held: the same template
    for i in range(5000):     # e.g. a job whose inputs take ever new shapes
        make(i)
    assert len(fr._TEMPLATES) <= 1024
    t = fr._TEMPLATES[kept.id]
    assert (t.op, t.shapes, t.rank) == ("all_reduce", (-1,), "rank0")
    ids = {make(i).id for i in range(3)}
    assert len(ids) == 3 and kept.id not in ids
