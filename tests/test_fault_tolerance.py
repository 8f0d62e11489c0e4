"""Fault tolerance across processes: RankFailure instead of hangs (killed, exited and stopped
processes, in the eager API, shard_map, compiled sharded programs, barrier, send / recv),
reconfigure + surviving meshes, collective hooks, on_abort; real mpirun jobs (2 and 4 ranks)
plus in-process checks of the pieces that need no MPI."""
from __future__ import annotations

import json

import numpy as np
import pytest

import starling.distributed as dist
from starling.arrays.device import Device
from starling.collectives.mesh import Mesh
from starling.distributed import hooks
from tests.mpi_jobs import launch, script

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_four_ranks_lose_a_dead_then_a_silent_process(tmp_path):
    rc, out = launch(4, script("failures.py"), [tmp_path], timeout=300, detector_timeout=5)
    reports = {}
    for r in (0, 1):
        path = tmp_path / f"rank{r}.json"
        assert path.exists(), out[-4000:]
        reports[r] = json.loads(path.read_text())
    # rank 3 died of an uncaught exception: its on_abort callback ran first
    reason = (tmp_path / "abort3.txt").read_text()
    assert reason == "uncaught ValueError: injected failure on rank 3"
    for r, rep in reports.items():
        events = {e[0]: e[1] for e in rep["events"]}
        assert [e[0] for e in rep["events"]] == [
            "shard_map", "all_reduce", "work", "compiled", "compiled2", "barrier",
            "recv" if r == 0 else "send"]
        for what in ("shard_map", "all_reduce", "work", "compiled"):
            assert events[what] == [3], (what, rep["events"])
        for what in ("compiled2", "barrier", "recv" if r == 0 else "send"):
            assert events[what] == [2], (what, rep["events"])
        assert rep["removed1"] == [3] and rep["size1"] == 3 and rep["rank1"] == r
        assert rep["devices1"] == [[0, 0], [1, 1], [2, 2]]
        assert rep["world_ranks1"] == [0, 1, 2]
        assert rep["mesh3"] == [0, 1, 2]
        assert "failed processes" in rep["stale_mesh_error"]
        assert "surviving_mesh" in rep["stale_mesh_error"]
        assert rep["psum3"] == 1 + 2 + 3 and rep["allreduce3"] == 0 + 1 + 2
        # the stopped process (old rank 2) counted as failed after the detector's timeout
        assert rep["removed2"] == [2] and rep["size2"] == 2 and rep["rank2"] == r
        assert rep["mesh2"] == [0, 1] and rep["mesh2_from_devices"] is True
        assert rep["psum2"] == 1 + 2
        assert rep["compiled2_value"] == 2.0 * 2 * (1 + 2)
        assert rep["split_ranks"] == [0, 1] and rep["split_sum"] == 2.0
        # the global hooks saw the shard_map's all-reduce (mesh group of 4) and the barrier
        assert rep["hooks"] == [["pre", "all_reduce", 4], ["post", "all_reduce", 4],
                                ["pre", "barrier", 4], ["post", "barrier", 4]]


def test_two_ranks_hooks_and_abort_on_uncaught_exception(tmp_path):
    rc, out = launch(2, script("hooks_abort.py"), [tmp_path], timeout=240)
    assert rc != 0, out[-3000:]
    assert not (tmp_path / "not-reached.txt").exists()
    # rank 1's callbacks ran, newest first, past the broken one
    assert (tmp_path / "abort1.txt").read_text() == "uncaught KeyError: 'injected on rank 1'"
    assert (tmp_path / "first1.txt").read_text() == "uncaught KeyError: 'injected on rank 1'"
    assert "ZeroDivisionError" in out and "MPI_ABORT" in out
    for r in (0, 1):
        seen = json.loads((tmp_path / f"hooks{r}.json").read_text())
        assert seen == [
            ["pre", "all_reduce", "world", [3]], ["post", "all_reduce", "world", "Array"],
            ["pre", "all_gather", "world", [2]], ["post", "all_gather", "world", "list"],
            ["pre", "barrier", "world", []], ["post", "barrier", "world", "NoneType"],
            ["pre", "all_reduce", "mesh('d',)", [2]],
            ["post", "all_reduce", "mesh('d',)", "ndarray"],
            ["world", "all_reduce"], ["raised", "refused broadcast"]]


# ---- without MPI ---------------------------------------------------------------------------------

def test_register_collective_hooks_validates_and_removes():
    with pytest.raises(TypeError, match="callable"):
        dist.register_collective_hooks(pre=3)
    with pytest.raises(TypeError, match="pre hook, a post hook or both"):
        dist.register_collective_hooks()
    with pytest.raises(TypeError, match="ProcessGroup"):
        dist.register_collective_hooks(pre=print, group="world")
    calls = []
    fake = type("G", (), {"pre_hooks": [], "post_hooks": []})()

    def pre(op, g, x):
        calls.append(op)
    handle = dist.register_collective_hooks(pre=pre)
    hooks.run_pre("barrier", fake, None)
    handle.remove()
    handle.remove()   # harmless
    hooks.run_pre("barrier", fake, None)
    assert calls == ["barrier"]


def test_on_abort_and_abort_validate():
    with pytest.raises(TypeError, match="callable"):
        dist.on_abort("not a function")
    with pytest.raises(ValueError, match="errorcode"):
        dist.abort("x", errorcode=300)
    ran = []
    h = dist.on_abort(ran.append)
    h.remove()
    from starling.distributed.abort import run_callbacks
    run_callbacks("r")
    assert ran == []


def _grid(shape, failed):
    devs = np.empty(int(np.prod(shape)), object)
    for i in range(devs.size):
        devs[i] = Device("cpu", 100 + i, None if i in failed else i)
    return devs.reshape(shape)


def test_surviving_mesh_drops_failed_devices_and_slices():
    m1 = Mesh(_grid((4,), {2}), ("d",))
    s1 = dist.surviving_mesh(m1)
    assert [d.id for d in s1.flat_devices] == [100, 101, 103] and s1.axis_names == ("d",)
    m2 = Mesh(_grid((3, 2), {3}), ("data", "model"))
    s2 = dist.surviving_mesh(m2)   # the data replica holding the failed device goes
    assert s2.devices_shape == (2, 2)
    assert [d.id for d in s2.flat_devices] == [100, 101, 104, 105]
    s3 = dist.surviving_mesh(m2, axis="model")   # model column 1 lost a device
    assert s3.devices_shape == (3, 1) and [d.id for d in s3.flat_devices] == [100, 102, 104]
    healthy = Mesh(_grid((2,), set()), ("d",))
    assert dist.surviving_mesh(healthy) is healthy
    with pytest.raises(ValueError, match="survived"):
        dist.surviving_mesh(Mesh(_grid((2, 2), {0, 3}), ("a", "b")))
    with pytest.raises(ValueError, match="unknown mesh axis"):
        dist.surviving_mesh(m2, axis="nope")
    with pytest.raises(TypeError, match="Mesh"):
        dist.surviving_mesh([1, 2])
    assert "failed" in repr(_grid((1,), {0})[0])


def test_launch_command_for_fault_tolerance():
    from starling.launch import build_command
    cmd = build_command(4, "t.py", [], detector_timeout=2.0)
    assert cmd[cmd.index("--with-ft") + 1] == "ulfm"
    i = cmd.index("mpi_ft_detector_timeout")
    assert float(cmd[i + 1]) == 2.0
    assert float(cmd[cmd.index("mpi_ft_detector_period") + 1]) == 0.5
    assert "--with-ft" not in build_command(2, "t.py", [])
    with pytest.raises(ValueError, match="detector-timeout"):
        build_command(2, "t.py", [], detector_timeout=0)


def test_an_uncaught_exception_ends_one_rank_and_the_survivors_see_it(tmp_path):
    # without the heartbeat detector: the rank leaves with status 0 (Open MPI 5.0's runtime took
    # a non-zero exit for the end of the job, and its abort hung with the survivors waiting)
    job = tmp_path / "uncaught.py"
    job.write_text(
        "import time, numpy as np\n"
        "import starling.distributed as dist\n"
        "dist.initialize(); r = dist.get_rank(); x = np.ones(4, np.float32)\n"
        "dist.all_reduce(x)\n"
        "if r == 2:\n"
        "    raise ValueError('injected')\n"
        "try:\n"
        "    for _ in range(2000):\n"
        "        dist.all_reduce(x); time.sleep(0.01)\n"
        "    print(f'rank {r}: no failure seen')\n"
        "except dist.RankFailure as e:\n"
        "    last = dist.flight_recorder.entries()[-1]\n"
        "    print(f'rank {r}: RankFailure {list(e.failed_ranks)} {last[\"primitive\"]} '\n"
        "          f'{last[\"state\"]}', flush=True)\n")
    rc, out = launch(3, str(job), timeout=120, fault_tolerant=True)
    assert "rank 2 leaves the job (uncaught ValueError: injected)" in out, out[-3000:]
    for r in (0, 1):
        # the blocking call that saw it (run natively: native_calls.py) is recorded as failed
        assert f"rank {r}: RankFailure [2] all_reduce failed" in out, out[-3000:]
    assert rc == 0, out[-3000:]


def test_a_member_dying_after_a_failed_agreement_check_is_a_rank_failure(tmp_path):
    # rank 2 takes part in the agreement all-reduce with another call's fingerprint, then dies
    # before the members gather each other's descriptions of their calls
    job = tmp_path / "mismatch_then_death.py"
    job.write_text(
        "import os, signal, numpy as np\n"
        "import starling.distributed as dist\n"
        "dist.initialize(); r = dist.get_rank(); x = np.ones(4, np.float32)\n"
        "from mpi4py import MPI   # after starling: it decides how the job is left\n"
        "for _ in range(3):\n"
        "    dist.all_reduce(x)\n"
        "if r == 2:\n"
        "    dist.world_group().comm.Allreduce(np.array([5, -5], np.int64),\n"
        "                                      np.zeros(2, np.int64), op=MPI.MAX)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "try:\n"
        "    dist.all_reduce(x)\n"
        "    print(f'rank {r}: no error', flush=True)\n"
        "except dist.RankFailure as e:\n"
        "    last = dist.flight_recorder.entries()[-1]\n"
        "    print(f'rank {r}: RankFailure {list(e.failed_ranks)} {last[\"primitive\"]} '\n"
        "          f'{last[\"state\"]}', flush=True)\n"
        "dist.world_group().reconfigure()\n"
        "print(f'rank {r}: after reconfigure {dist.all_reduce(x).tolist()}', flush=True)\n")
    rc, out = launch(3, str(job), timeout=120, fault_tolerant=True)
    for r in (0, 1):
        # the blocking call that saw it (run natively: native_calls.py) is recorded as failed
        assert f"rank {r}: RankFailure [2] all_reduce failed" in out, out[-3000:]
        assert f"rank {r}: after reconfigure [2.0, 2.0, 2.0, 2.0]" in out, out[-3000:]
    assert rc == 0, out[-3000:]
