"""Timeouts, the flight recorder, object collectives and one-sided windows on real MPI jobs
(``python -m starling.launch``, each with a hard timeout): a rank that is alive but asleep is
named by the ranks that time out waiting for it, eagerly and in shard_map; the ranks' dumps
are compared by the flight-recorder tool; objects travel without pickle; windows are read and
written while their owner computes."""
from __future__ import annotations

import textwrap

import pytest

from tests.test_distributed import assert_ranks_ok, run_job

pytest.importorskip("mpi4py")

from starling.distributed import flight_recorder as dfr  # noqa: E402
from starling.lowering.debug import DebugMode  # noqa: E402

# Shared by the 2- and 4-rank jobs: every rank but 0 reads, writes and accumulates into rank 0's
# buffer (sum, max, min, its own slot) while rank 0 computes without any MPI call; rank 0 sees
# the final values appear in its memory during that loop (the accesses needed nothing from it).
PASSIVE_WINDOW = """
import time
def passive_target_check():
    # rank 0's buffer: [sum, max, min, unused, slot of rank 1, ..., slot of rank n-1]
    w = dist.Window(np.zeros(3 + n))
    want = [n - 1.0, n - 1.0, -(n - 1.0), 0.0] + [100.0 + k for k in range(1, n)]
    dist.barrier()
    if r == 0:
        deadline = time.monotonic() + 60
        a = np.eye(64)
        while time.monotonic() < deadline:   # computing: no MPI call in this loop
            a = np.tanh(a @ a)
            if w._local.tolist() == want:   # its own memory, read directly
                break
        else:
            raise AssertionError(f"accesses did not land while rank 0 computed: {w._local}")
    else:
        with w.lock(0, exclusive=False):   # element-wise atomic: shared lock is enough
            w.accumulate(snp.asarray([1.0]), 0, offset=0, op="sum")
            w.accumulate(snp.asarray([float(r)]), 0, offset=1, op="max")
            w.accumulate(snp.asarray([-float(r)]), 0, offset=2, op="min")
        w.put(snp.asarray([100.0 + r]), 0, offset=3 + r)   # its own exclusive lock
        while np.asarray(w.get(0)).tolist() != want:
            time.sleep(0.01)
    dist.barrier()
    close(w.array(), want if r == 0 else np.zeros(3 + n))
    w.free()
"""


def test_timeouts_name_the_sleeping_rank_eager_and_spmd(tmp_path, monkeypatch):
    dumps = tmp_path / "dumps"
    monkeypatch.setenv("STARLING_FLIGHT_RECORDER_DIR", str(dumps))
    proc = run_job(tmp_path, 3, """
        import os, time
        T = 1.0
        LATE = T + 1.0   # rank 1 sleeps this long: a report naming it came within timeout + 1 s
        def expect_timeout(call, what):
            t0 = time.monotonic()
            try:
                call()
            except dist.CollectiveTimeout as e:
                took = time.monotonic() - t0
                # naming rank 1 means its arrival was read before it woke up (no upper bound
                # on the clock: a loaded machine may deschedule this process at any time)
                assert e.missing == (1,), (what, e.missing, str(e))
                assert "ranks that did not arrive: [1]" in str(e), str(e)
                assert os.environ["STARLING_FLIGHT_RECORDER_DIR"] in str(e), str(e)
                assert took >= T, (what, took)   # never before the deadline
                print(f"rank {r}: {what} timed out naming rank 1 after {took:.2f} s", flush=True)
            else:
                raise AssertionError(f"{what} did not time out")

        # ranks 0 and 2 meet right before each timed call, so that on a loaded machine the
        # only rank late by more than the timeout is the sleeper
        pair = dist.new_group([0, 2])

        # eager: rank 1 is alive but asleep in Python (rank 2 waits on an async Work)
        x = snp.arange(3.0) + r
        if r == 1:
            time.sleep(LATE)
            close(dist.all_reduce(x, timeout=T), np.arange(3.0) * 3 + 3)   # joins late
        elif r == 0:
            expect_timeout(lambda: dist.all_reduce(x, timeout=T), "all_reduce")
        else:
            work = dist.all_reduce(x, async_op=True)
            expect_timeout(lambda: work.wait(timeout=T), "all_reduce Work.wait")

        # shard_map on a mesh over the 3 processes: the first call also creates the group
        mesh = make_mesh((n,), ("i",))
        xs = dist.make_array_from_process_local_data(NamedSharding(mesh, P("i")),
                                                     np.full(2, float(r)))
        f = st.shard_map(lambda b: lax.psum(b, "i"), mesh, in_specs=P("i"), out_specs=P())
        dist.set_timeout(T)
        if r == 1:
            time.sleep(LATE)
        else:
            dist.barrier(group=pair, timeout=60)
            expect_timeout(lambda: f(xs), "shard_map psum (new group)")
        dist.set_timeout(None)
        close(f(xs), [3.0, 3.0])   # the creation left pending completes; everyone goes on

        # the group exists now; a timeout set for this mesh only
        dist.set_timeout(T, mesh)
        if r == 1:
            time.sleep(LATE)
            close(f(xs), [3.0, 3.0])
        else:
            dist.barrier(group=pair, timeout=60)
            expect_timeout(lambda: f(xs), "shard_map psum")
        dist.set_timeout(None, mesh)
        dist.barrier()
        print(f"rank {r} OK", flush=True)
    """, timeout=240)
    assert_ranks_ok(proc, 3)
    assert proc.stdout.count("timed out naming rank 1") == 6, proc.stdout
    # every rank dumped, rank 1 from its watchdog while asleep (asked by the others)
    logs = {p.stem: DebugMode.load_logs(p) for p in dumps.glob("*.json")}
    assert sorted(logs) == ["rank0", "rank1", "rank2"]
    assert logs["rank1"].meta["reason"].startswith("requested by rank")
    result = dfr.compare(dumps)
    assert not result.consistent
    first = str(result.first)
    assert "collective #2 of group spmd[0, 1, 2]" in first and "rank1 has no record" in first
    assert "all_reduce(float32[2])" in first or "all_reduce(float64[2])" in first


def test_timeouts_and_dumps_after_a_failure_and_reconfigure(tmp_path, monkeypatch):
    # 3 ranks, fault tolerant: rank 1 is killed; the survivors (job ranks 0 and 2) get
    # RankFailure and reconfigure, so job rank 2 becomes world rank 1. The world and a mesh
    # group over the same two processes are made again: new incarnations (uid~1), which both
    # survivors name alike; timeouts in them name the sleeper by its new world rank, and its dump
    # (requested through the arrival board, addressed by job rank) is filed as rank2.json
    dumps = tmp_path / "dumps"
    monkeypatch.setenv("STARLING_FLIGHT_RECORDER_DIR", str(dumps))
    proc = run_job(tmp_path, 3, """
        import os, signal, time
        T = 1.0
        j = r   # the job rank, kept through the reconfiguration
        world = dist.world_group()
        assert world.uid == "world", world.uid
        devs = st.devices()
        mesh02 = make_mesh((2,), ("i",), devices=[devs[0], devs[2]])
        f02 = st.shard_map(lambda b: lax.psum(b, "i"), mesh02, in_specs=P("i"), out_specs=P())
        def x02():
            return dist.make_array_from_process_local_data(NamedSharding(mesh02, P("i")),
                                                           np.full(1, float(j)))
        if j != 1:
            close(f02(x02()), [2.0])
        dist.barrier()
        if j == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            dist.all_reduce(snp.ones(1))
        except dist.RankFailure as e:
            assert e.failed_ranks == (1,), e.failed_ranks
        else:
            raise AssertionError("no RankFailure")
        assert world.reconfigure() == (1,)
        r, n = dist.get_rank(), dist.get_world_size()
        assert (r, n) == ({0: 0, 2: 1}[j], 2), (j, r, n)
        assert world.uid == "world~1", world.uid
        close(f02(x02()), [2.0])   # its group is made again over the same two processes

        def expect_timeout(call, group):
            try:
                call()
            except dist.CollectiveTimeout as e:
                assert e.missing == (1,), (e.missing, str(e))
                assert f"group {group}, world ranks [0, 1]" in str(e), str(e)
                print(f"rank {r}: timed out in {group} naming rank 1", flush=True)
            else:
                raise AssertionError(f"{group}: no timeout")

        if r == 1:
            time.sleep(T + 1.0)
            close(dist.all_reduce(snp.ones(1), timeout=T), [2.0])   # joins late
        else:
            expect_timeout(lambda: dist.all_reduce(snp.ones(1), timeout=T), "world~1")
        dist.set_timeout(T, mesh02)
        if r == 1:
            time.sleep(T + 1.0)
            close(f02(x02()), [2.0])
        else:
            expect_timeout(lambda: f02(x02()), "spmd[0, 2]~1")
        dist.set_timeout(None, mesh02)
        dist.barrier()
        groups = sorted({e["group"] for e in dist.flight_recorder.entries()})
        print(f"rank {r} groups {groups}", flush=True)
        print(f"rank {r} OK", flush=True)
    """, timeout=240, extra=("--fault-tolerant",))
    out = proc.stdout + proc.stderr
    for r in (0, 1):
        assert f"rank {r} OK" in proc.stdout, out[-4000:]
    assert proc.stdout.count("timed out in world~1 naming rank 1") == 1, out[-4000:]
    assert proc.stdout.count("timed out in spmd[0, 2]~1 naming rank 1") == 1, out[-4000:]
    groups = [line.split(" groups ", 1)[1] for line in proc.stdout.splitlines()
              if " groups " in line]
    assert len(groups) == 2 and groups[0] == groups[1], groups   # the survivors agree
    for uid in ("world", "world~1", "spmd[0, 2]", "spmd[0, 2]~1"):
        assert repr(uid) in groups[0], groups[0]
    # files by job rank; job rank 2 (world rank 1 now) dumped when rank 0 asked
    logs = {p.stem: DebugMode.load_logs(p) for p in dumps.glob("*.json")}
    assert sorted(logs) == ["rank0", "rank2"], sorted(logs)
    assert logs["rank2"].meta["reason"] == "requested by rank 0", logs["rank2"].meta


def test_window_two_ranks_and_flight_recorder_of_a_mismatched_job(tmp_path, monkeypatch):
    bad, ok = tmp_path / "bad", tmp_path / "ok"
    monkeypatch.setenv("STARLING_FLIGHT_RECORDER_DIR", str(bad))
    proc = run_job(tmp_path, 2, textwrap.dedent(PASSIVE_WINDOW) + textwrap.dedent(f"""
        o = 1 - r
        w = dist.Window(snp.arange(4.0) + 10 * r)
        assert w.shape_of(o) == (4,) and w.dtype_of(o) == np.float32 and w.size == 2
        # active target: puts and an async get complete at the next fence
        w.fence()
        w.put(snp.asarray([100.0 + r]), o, offset=r)
        pending = w.get(o, offset=2, shape=(2,), async_op=True)
        try:
            w.get(o)
            raise AssertionError("a synchronous get inside a fence epoch")
        except ValueError as e:
            assert "fence epoch" in str(e)
        try:
            with w.lock(o):
                pass
            raise AssertionError("a lock inside a fence epoch")
        except ValueError as e:
            assert "fence(end=True)" in str(e)
        w.fence(end=True)
        mine = np.arange(4.0) + 10 * r
        mine[o] = 100.0 + o
        close(w.array(), mine)
        close(pending.wait(), np.arange(2.0, 4.0) + 10 * o)
        # bad accesses are errors naming what is wrong
        for call, err, text in [
                (lambda: w.put(snp.ones(3), o, offset=2), IndexError, "do not fit"),
                (lambda: w.put(snp.ones(1, dtype=snp.complex64), o), TypeError, "cast"),
                (lambda: w.accumulate(snp.ones(1), o, op="prod"), ValueError, "op must be"),
                (lambda: w.get(5), ValueError, "target must be a rank")]:
            try:
                call()
                raise AssertionError(text)
            except err as e:
                assert text in str(e), str(e)
        w.free()
        h = dist.Window(snp.ones(2, dtype=snp.bfloat16))   # raw bytes: replace, not reduce
        h.accumulate(snp.asarray([3.0], dtype=snp.bfloat16), o, op="replace")
        try:
            h.accumulate(snp.ones(1, dtype=snp.bfloat16), o, op="sum")
            raise AssertionError("bfloat16 sum")
        except TypeError as e:
            assert "cannot compute" in str(e)
        dist.barrier()
        close(h.array().astype(snp.float32), [3.0, 1.0])
        h.free()
        # Open MPI's accumulate saturates 8- and 16-bit integer sums: refused, not wrong
        i8 = dist.Window(np.zeros(4, np.int8))
        i8.fence()
        try:
            i8.accumulate(np.full(2, 100, np.int8), o)
            raise AssertionError("int8 sum")
        except TypeError as e:
            assert "cannot compute 'sum' on int8" in str(e) and "window of int32" in str(e), e
        i8.accumulate(np.full(2, 100, np.int8), o, op="max")
        i8.fence()
        close(i8.array(), [100, 100, 0, 0])
        i8.free()
        passive_target_check()

        # a consistent history, dumped on demand
        x = snp.arange(3.0) + r
        dist.all_reduce(x)
        dist.broadcast(x, src=1)
        if r == 0:
            dist.send(x, dst=1, tag=5)
        else:
            dist.recv(x, src=0, tag=5)
        dist.flight_recorder.dump({str(ok)!r})
        dist.barrier()
        # rank 1 calls all_reduce with another shape: each rank fails (MPI error or timeout)
        y = snp.arange(4.0) if r == 1 else x
        try:
            dist.all_reduce(y, timeout=1.0)
            raise AssertionError("the mismatched all_reduce completed")
        except Exception as e:
            print(f"rank {{r}}: mismatched all_reduce raised {{type(e).__name__}}", flush=True)
        print(f"rank {{r}} OK", flush=True)
    """), timeout=240)
    assert_ranks_ok(proc, 2)
    good = dfr.compare(ok)
    assert good.consistent and good.collectives >= 3 and good.messages == 1, str(good)
    assert dfr.main([str(ok)]) == 0
    result = dfr.compare(bad)
    first = str(result.first)
    assert "rank1 called all_reduce(float32[4])" in first, str(result)
    assert "input[0] shape (4,) (rank1) vs (3,) (rank0)" in first, str(result)
    assert dfr.main([str(bad)]) == 1


def test_objects_and_windows_four_ranks(tmp_path, monkeypatch):
    monkeypatch.setenv("STARLING_FLIGHT_RECORDER_DIR", str(tmp_path / "dumps"))
    proc = run_job(tmp_path, 4, textwrap.dedent(PASSIVE_WINDOW) + textwrap.dedent(f"""
        import fractions, os
        obj = {{"rank": r, "a": snp.arange(3.0) * r, "t": (1, "x", None, b"\\0"),
                2.5: [True, 1 + 2j], "big": 2 ** 80 + r}}
        b = dist.broadcast_object(obj if r == 2 else None, src=2)
        assert b["rank"] == 2 and b["big"] == 2 ** 80 + 2 and b[2.5] == [True, 1 + 2j], b
        close(b["a"], np.arange(3.0) * 2)
        g = dist.all_gather_object(obj)
        assert [v["rank"] for v in g] == [0, 1, 2, 3] and g[3]["t"] == (1, "x", None, b"\\0")
        if r == 0:
            dist.send_object({{"hi": [1, 2]}}, dst=1)
            dist.send_object(np.arange(5, dtype=np.int16), dst=1, tag=3)
        elif r == 1:
            got = dist.recv_object(src=0, tag=3)   # tags keep messages apart
            assert got.dtype == np.int16 and got.tolist() == [0, 1, 2, 3, 4]
            assert dist.recv_object(src=0) == {{"hi": [1, 2]}}
        # an unsupported value fails on its sender and on every receiver alike
        try:
            dist.broadcast_object(fractions.Fraction(1, 3) if r == 0 else None)
            raise AssertionError("no TypeError")
        except TypeError as e:
            assert "fractions.Fraction" in str(e) and "allow_pickle=True" in str(e), str(e)
        got = dist.all_gather_object(fractions.Fraction(r, 7), allow_pickle=True)
        assert got == [fractions.Fraction(k, 7) for k in range(4)]
        # a malicious pickle is refused by a receiver that did not opt in
        target = {str(tmp_path / "pwned")!r}
        class Evil:
            def __reduce__(self):
                return (open, (target, "w"))
        if r == 0:
            dist.send_object(Evil(), dst=3, allow_pickle=True)
        elif r == 3:
            try:
                dist.recv_object(src=0)
                raise AssertionError("unpickled a payload without allow_pickle")
            except ValueError as e:
                assert "refusing to unpickle" in str(e)
            assert not os.path.exists(target)
        # a message that never comes: the timeout names the sender
        if r == 0:
            try:
                dist.recv_object(src=3, timeout=0.5)
                raise AssertionError("no timeout")
            except dist.CollectiveTimeout as e:
                assert e.missing == (3,) and "message #" in str(e), str(e)
        dist.barrier()
        if r == 3:   # sent after the timeout: the receive given up on must not swallow it
            dist.send_object("late", dst=0)
        elif r == 0:
            assert dist.recv_object(src=3, timeout=60) == "late"
        # a ring of puts in a fence epoch, then passive access while the target computes
        w = dist.Window(np.full(n, -1.0))
        w.fence()
        w.put(snp.asarray([float(r)]), (r + 1) % n, offset=r)
        w.fence(end=True)
        want = np.full(n, -1.0)
        want[(r - 1) % n] = (r - 1) % n
        close(w.array(), want)
        w.free()
        passive_target_check()
        print(f"rank {{r}} OK", flush=True)
    """), timeout=240)
    assert_ranks_ok(proc, 4)
