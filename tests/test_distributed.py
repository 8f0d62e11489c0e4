"""starling.distributed on real MPI jobs: each test launches ``python -m starling.launch`` with
2 or 4 processes (oversubscribed on this machine), the ranks check their results against NumPy
and print one line each; the test checks every rank reported and the launcher's exit code."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("mpi4py")

PRELUDE = """
import numpy as np, starling as st, starling.numpy as snp
import starling.distributed as dist
from starling.sharding import make_mesh, NamedSharding, P
from starling import lax
dist.initialize()
r, n = dist.get_rank(), dist.get_world_size()
def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)
"""


def run_job(tmp_path, n, body, timeout=120, extra=(), devices=1, env=None):
    script = tmp_path / "job.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    env = dict(os.environ, STARLING_NUM_CPU_DEVICES=str(devices), OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "starling.launch", "-n", str(n), *extra,
                           str(script)], capture_output=True, text=True, timeout=timeout,
                          env=env)
    return proc


def assert_ranks_ok(proc, n):
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in range(n):
        assert f"rank {r} OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_eager_collectives_and_groups_two_ranks(tmp_path):
    proc = run_job(tmp_path, 2, """
        x = snp.arange(6.0).reshape(2, 3) + 10 * r
        xs = [np.arange(6.0).reshape(2, 3) + 10 * k for k in range(n)]
        close(dist.all_reduce(x), sum(xs))
        close(dist.all_reduce(x, op="max"), np.maximum(*xs))
        close(dist.all_reduce(x, op="avg"), sum(xs) / n)
        close(dist.all_reduce(x.astype(snp.int32), op="prod"), np.prod(np.stack(xs), 0))
        assert dist.all_reduce(snp.asarray(r == 0), op="max").item() is True
        g = dist.all_gather(x)
        assert len(g) == n and all(np.array_equal(np.asarray(a), b) for a, b in zip(g, xs))
        y = snp.arange(4.0) + r
        close(dist.reduce_scatter(y), (np.arange(4.0) * 2 + 1).reshape(2, 2)[r])
        close(dist.all_to_all(y), np.stack([np.arange(4.0) + k for k in range(n)])[:, 2*r:2*r+2].reshape(-1))
        close(dist.broadcast(x, src=1), xs[1])
        w = dist.all_reduce(x, async_op=True)
        close(w.wait(), sum(xs)); assert w.is_completed() and w.exception() is None
        # NumPy operands: blocking calls read them in place (never written), a Work's copy is
        # taken at the call, so a later change by the caller does not reach the peers
        xn = np.asarray(x).copy(); before = xn.copy()
        close(dist.all_reduce(xn), sum(xs)); close(dist.all_gather(xn)[1 - r], xs[1 - r])
        close(dist.broadcast(xn, src=0), xs[0]); assert np.array_equal(xn, before)
        w = dist.all_reduce(xn, async_op=True); xn[...] = -1.0
        close(w.wait(), sum(xs))
        try:
            dist.all_reduce(np.array(["a", "b"]))
            raise AssertionError("expected TypeError")
        except TypeError as e:
            assert str(e).startswith("all_reduce: dtype: <U1 is not supported"), e
        bf = x.astype(snp.bfloat16)
        close(dist.all_reduce(bf).astype(snp.float32), sum(xs), tol=0.05)
        # scale floats (powers of two) combine in float32 too: their bytes are no integers
        e8 = np.array([1.0, 2.0, 0.5, 4.0 ** -r], snp.float8_e8m0fnu)   # 1 + 1/4 rounds to 1
        assert np.asarray(dist.all_reduce(e8)).astype(np.float32).tolist() == [2, 4, 1, 1]
        assert np.asarray(dist.all_reduce(e8, op="max")).astype(np.float32).tolist() == \
            [1, 2, 0.5, 1]
        # max / min are NumPy's: a NaN on any member gives NaN (MPI_MAX kept rank 1's 1.0
        # against rank 0's NaN), natively and through the mpi4py op used by other MPIs
        from starling.distributed import mpi_types
        v = np.array([np.nan, 1.0, 2.0 + r, -np.inf], np.float32) if r == 0 else \
            np.array([1.0, np.nan, 2.0 + r, np.inf], np.float32)
        for op, ufunc in (("max", np.maximum), ("min", np.minimum)):
            want = ufunc(*[np.asarray(a) for a in dist.all_gather(v)])
            for dt in (np.float32, np.float64, np.float16):
                got = np.asarray(dist.all_reduce(v.astype(dt), op=op))
                assert np.array_equal(got, want.astype(dt), equal_nan=True), (op, dt, got)
            got = np.asarray(dist.reduce_scatter(np.tile(v, n), op=op))
            assert np.array_equal(got, want, equal_nan=True), (op, got)
            out = np.empty_like(v)
            dist.world_group().comm.Allreduce(
                v, out, op=mpi_types.python_nan_extremum_op(op, np.float32))
            assert np.array_equal(out, want, equal_nan=True), (op, out)
        # their average divides (floor division of the float32 sum gave 0, then NaN)
        assert np.asarray(dist.all_reduce(e8, op="avg")).astype(np.float32).tolist() == \
            [1, 2, 0.5, 0.5]
        # results of 1 MiB and more come from the buffer pool, 64 bytes into its blocks (Open
        # MPI reduced into page-aligned outputs up to 50% slower)
        big = [np.arange(3 << 20, dtype=np.float32) % 997 + k for k in range(n)]
        for mine in (big[r], snp.asarray(big[r])):
            got = dist.all_reduce(mine)
            close(got, sum(big))
            assert np.asarray(got).ctypes.data % 4096 != 0
            gathered = dist.all_gather(mine)
            assert all(np.array_equal(np.asarray(a), b) for a, b in zip(gathered, big))
            close(dist.reduce_scatter(mine), sum(big).reshape(n, -1)[r])
            close(dist.all_to_all(mine), np.concatenate([b.reshape(n, -1)[r] for b in big]))
        close(dist.all_reduce(big[r].astype(np.float16), op="avg").astype(np.float32),
              (sum(big) / n).astype(np.float16), tol=1e-3)
        # sums of 8- and 16-bit integers wrap as NumPy's do at every size (Open MPI's AVX ops
        # saturated them from 64 elements on: int8 100 + 100 gave 127)
        for dt in (np.int8, np.uint8, np.int16, np.uint16):
            for size in (8, 1000):
                v = np.full(size, np.iinfo(dt).max // 2 + 7 + r, dt)
                want = sum(np.full(size, np.iinfo(dt).max // 2 + 7 + k, dt).astype(np.int64)
                           for k in range(n)).astype(dt)
                got = dist.all_reduce(v)
                assert got.dtype == dt and np.array_equal(np.asarray(got), want), (dt, size)
                assert np.array_equal(np.asarray(dist.reduce_scatter(np.tile(v, n))), want)
        # MPI orders no complex numbers: max / min of them is refused up front, sums work
        c = np.array([1 + 2j, 3 - 1j], np.complex64) * (r + 1)
        close(dist.all_reduce(c), c / (r + 1) * sum(range(1, n + 1)))
        for op in ("max", "min"):
            try:
                dist.all_reduce(c, op=op)
                raise AssertionError("expected TypeError")
            except TypeError as e:
                assert f"reduce op '{op}' is not defined for complex64" in str(e), e
        # a Work dropped unfinished keeps its buffers until MPI is done with them: rank 1 comes
        # late, rank 0 drops the Work and fills new blocks of the same size meanwhile
        import time, gc
        payload = np.full(1 << 20, 1.0 + r, np.float32)
        if r == 0:
            w = dist.all_reduce(payload, async_op=True)
            del w
            gc.collect()
            held = [np.full(1 << 20, 5.0, np.float32) for _ in range(4)]
            from starling.distributed.mpi_types import result_buffer
            held += [result_buffer((1 << 20,), np.float32) for _ in range(4)]
            for h in held:
                h[:] = 5.0
        else:
            time.sleep(0.5)
            close(dist.all_reduce(payload, async_op=True).wait(), np.full(1 << 20, 3.0))
        dist.barrier()
        if r == 0:
            assert all(np.all(h == 5.0) for h in held)
        for bad in (True, 2, -1, 1.0):
            try:
                dist.broadcast(x, src=bad)
                raise AssertionError("expected ValueError")
            except ValueError as e:
                assert "broadcast: src must be a rank of the group in [0, 2)" in str(e), e
        if r == 0:
            dist.send(x * 2, dst=1)
        else:
            close(dist.recv(x, src=0), xs[0] * 2)
        dist.barrier()
        sub = dist.split_group(color=0, key=-r)
        assert sub.size() == n and sub.rank() == n - 1 - r
        none = dist.split_group(color=None if r == 1 else 0)
        assert (none is dist.NON_GROUP_MEMBER) == (r == 1)
        solo = dist.new_group([0])
        if r == 0:
            close(dist.all_reduce(x, group=solo), xs[0])
        else:
            assert solo is dist.NON_GROUP_MEMBER
        try:
            dist.all_reduce(x, op="mean")
            raise AssertionError("expected ValueError")
        except ValueError as e:
            assert "op must be one of" in str(e)
        # a message to oneself would complete only while MPI buffers it (torch refuses it too)
        for call in (lambda: dist.send(x, dst=r), lambda: dist.recv(x, src=r),
                     lambda: dist.send_object([1], dst=r), lambda: dist.recv_object(src=r)):
            try:
                call()
                raise AssertionError("expected ValueError")
            except ValueError as e:
                assert f"{r} is this process's own rank" in str(e), e
        assert type(dist.get_backend_impl()).__name__ == "MPIBackend"
        print(f"rank {r} OK")
    """)
    assert_ranks_ok(proc, 2)


def test_shard_map_and_compile_across_four_processes(tmp_path):
    proc = run_job(tmp_path, 4, """
        mesh = make_mesh((2, 2), ("a", "b"))
        full = np.arange(32.0).reshape(8, 4)
        sh = NamedSharding(mesh, P("a", "b"))
        piece = full[sh.shard_index(full.shape, st.local_devices()[0])]
        x = dist.make_array_from_process_local_data(sh, piece)
        close(dist.process_allgather(x), full)
        # collectives over one and two axes, against NumPy on the blocks
        f = st.shard_map(lambda b: (lax.psum(b, "a"), lax.psum(b, ("a", "b")),
                                    lax.all_gather(b, "b", axis=1, tiled=True),
                                    lax.axis_index(("a", "b")) + 0 * b[0, :1]),
                         mesh, in_specs=P("a", "b"), out_specs=(P(None, "b"), P(), P("a"), P(("a", "b"))))
        s_a, s_all, gath, idx = f(x)
        blocks = full.reshape(2, 4, 2, 2).transpose(0, 2, 1, 3)
        close(dist.process_allgather(s_a), np.concatenate([blocks[0, j] + blocks[1, j] for j in range(2)], 1))
        close(dist.process_allgather(s_all), blocks.sum((0, 1)))
        close(dist.process_allgather(gath), full)
        close(dist.process_allgather(idx), np.arange(4.0))
        perm = [(k, (k + 1) % 2) for k in range(2)]
        pp = st.shard_map(lambda b: lax.ppermute(b, "a", perm), mesh, in_specs=P("a", "b"), out_specs=P("a", "b"))(x)
        close(dist.process_allgather(pp), np.concatenate([full[4:], full[:4]], 0))
        a2a = st.shard_map(lambda b: lax.all_to_all(b, "b", 0, 1, tiled=True), mesh,
                           in_specs=P("a", "b"), out_specs=P("a", "b"))(x)
        # member j of axis b gets chunk j (rows) of every member's block, side by side
        want = np.block([[np.concatenate([blocks[a, i][2 * j:2 * j + 2] for i in range(2)], 1)
                          for j in range(2)] for a in range(2)])
        close(dist.process_allgather(a2a), want)
        rs = st.shard_map(lambda b: lax.psum_scatter(b, "b", scatter_dimension=0, tiled=True), mesh,
                          in_specs=P("a", "b"), out_specs=P(("a", "b")))(x)
        want = np.concatenate([(blocks[a, 0] + blocks[a, 1])[2 * j:2 * j + 2]
                               for a in range(2) for j in range(2)], 0)
        close(dist.process_allgather(rs), want)
        # integer sums wrap like NumPy's (Open MPI's AVX ops saturate 8- and 16-bit sums)
        i16 = dist.make_array_from_process_local_data(sh, np.full((4, 2), 20000, np.int16))
        s16 = st.shard_map(lambda b: lax.psum(b, ("a", "b")), mesh, in_specs=P("a", "b"),
                           out_specs=P())(i16)
        assert np.array_equal(np.asarray(dist.process_allgather(s16)),
                              np.full((4, 2), 80000 - 65536, np.int16))
        # recorder entries are copies: changing one changes no later record
        e = [e for e in dist.flight_recorder.entries() if e["primitive"] == "all_reduce"][-1]
        e["params"]["axes"].append("changed")
        st.shard_map(lambda b: lax.psum(b, ("a", "b")), mesh, in_specs=P("a", "b"), out_specs=P())(i16)
        e = [e for e in dist.flight_recorder.entries() if e["primitive"] == "all_reduce"][-1]
        assert e["params"]["axes"] == ["a", "b"], e
        # gradients through collectives across processes: d/dx sum(psum(x^2)) = 2x * 4 blocks
        loss = lambda x: st.shard_map(lambda b: lax.psum(snp.sum(b * b), ("a", "b")), mesh,
                                      in_specs=P("a", "b"), out_specs=P())(x)
        g = st.grad(loss)(x)
        close(dist.process_allgather(g), 2 * full)
        # a replicated weight's gradient sums every process's contribution
        w = dist.make_array_from_process_local_data(NamedSharding(mesh, P()), np.asarray(3.0, np.float32))
        lw = lambda w: st.shard_map(lambda w, b: lax.psum(snp.sum(w * b), ("a", "b")), mesh,
                                    in_specs=(P(), P("a", "b")), out_specs=P())(w, x)
        close(dist.process_allgather(st.grad(lw)(w)), full.sum())
        # a compiled, partitioned program: its collectives run on MPI
        c = st.compile(lambda x: snp.tanh(x * 0.1).sum(axis=0))
        close(dist.process_allgather(c(x)), np.tanh(full * 0.1).sum(0), tol=1e-5)
        print(f"rank {r} OK")
    """, timeout=180)
    assert_ranks_ok(proc, 4)


def test_sharded_digits_on_four_processes_matches_one_device():
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("STARLING_NUM_CPU_DEVICES", None)
    proc = subprocess.run([sys.executable, "-m", "starling.launch", "-n", "4", "-m",
                           "starling.examples.sharded_mlp", "--epochs", "1", "--no-progress"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "in 4 processes" in out
    diff = float(out.rsplit("difference", 1)[1].split()[0])
    assert diff < 1e-5, out


HYBRID_MESHES = """
from starling.sharding import Mesh
D = st.devices()
assert len(D) == 4 and len(st.local_devices()) == 2 and D[2].process_index == 1
m22 = make_mesh((2, 2), ("a", "b"))                      # a across the processes, b inside each
m4 = Mesh(np.array([D[0], D[2], D[1], D[3]]), ("x",))   # one axis interleaving the processes
"""


def test_hybrid_mesh_collectives_grads_and_compiled_programs(tmp_path):
    # 2 processes x 2 devices: groups inside a process (b), across (a: one device each) and
    # mixed (a+b, b+a in an order interleaving the processes, x), each against NumPy
    proc = run_job(tmp_path, 2, HYBRID_MESHES + textwrap.dedent("""
        R, C = 4, 8
        X = (np.arange(4 * R * C, dtype=np.float32).reshape(4 * R, C) * 0.37) % 5 - 2
        def check(mesh, axes, body, ref):
            spec = P(tuple(mesh.axis_names))   # device k holds rows [k*R, (k+1)*R)
            x = st.device_put(X, NamedSharding(mesh, spec))
            got = dist.process_allgather(st.shard_map(body, mesh, in_specs=spec, out_specs=spec)(x))
            block = lambda d: X[mesh.device_position(d) * R:(mesh.device_position(d) + 1) * R]
            want = []
            for d in mesh.flat_devices:
                grp = mesh.group(axes, d)
                want.append(ref([block(g) for g in grp], grp.index(d), len(grp)))
            close(got, np.concatenate(want, 0))
        def chunk(a, k, n, dim):
            s = a.shape[dim] // n
            return np.take(a, np.arange(k * s, (k + 1) * s), axis=dim)
        size = lax.axis_size
        CASES = {
            "psum": (lambda ax: lambda b: lax.psum(b, ax), lambda g, k, n: sum(g)),
            "pmax": (lambda ax: lambda b: lax.pmax(b, ax), lambda g, k, n: np.max(g, 0)),
            "pmin": (lambda ax: lambda b: lax.pmin(b, ax), lambda g, k, n: np.min(g, 0)),
            "pmean": (lambda ax: lambda b: lax.pmean(b, ax), lambda g, k, n: np.mean(g, 0)),
            "gather0": (lambda ax: lambda b: lax.all_gather(b, ax, axis=0, tiled=True),
                        lambda g, k, n: np.concatenate(g, 0)),
            "gather1": (lambda ax: lambda b: lax.all_gather(b, ax, axis=1, tiled=True),
                        lambda g, k, n: np.concatenate(g, 1)),
            "stack1": (lambda ax: lambda b: lax.all_gather(b, ax, axis=1),
                       lambda g, k, n: np.stack(g, 1)),
            "scatter1": (lambda ax: lambda b: lax.psum_scatter(b, ax, scatter_dimension=1,
                                                               tiled=True),
                         lambda g, k, n: chunk(sum(g), k, n, 1)),
            "scatter_untiled": (lambda ax: lambda b: lax.psum_scatter(
                                    snp.stack([b * (i + 1) for i in range(size(ax))], 0), ax),
                                lambda g, k, n: sum(g) * (k + 1)),
            "a2a01": (lambda ax: lambda b: lax.all_to_all(b, ax, 0, 1, tiled=True),
                      lambda g, k, n: np.concatenate([chunk(s, k, n, 0) for s in g], 1)),
            "a2a10": (lambda ax: lambda b: lax.all_to_all(b, ax, 1, 0, tiled=True),
                      lambda g, k, n: np.concatenate([chunk(s, k, n, 1) for s in g], 0)),
            "a2a_untiled": (lambda ax: lambda b: lax.all_to_all(b.reshape(size(ax), -1), ax, 0, 0),
                            lambda g, k, n: np.stack([s.reshape(n, -1)[k] for s in g], 0)),
            "shift": (lambda ax: lambda b: lax.ppermute(
                          b, ax, [(i, (i + 1) % size(ax)) for i in range(size(ax))]),
                      lambda g, k, n: g[(k - 1) % n]),
            "first_to_last": (lambda ax: lambda b: lax.ppermute(b, ax, [(0, size(ax) - 1)]),
                              lambda g, k, n: g[0] if k == n - 1 else 0 * g[0]),
            "axis_index": (lambda ax: lambda b: b * 0 + lax.axis_index(ax).astype(snp.float32),
                           lambda g, k, n: 0 * g[0] + k),
        }
        for mesh, groups in ((m22, ["a", "b", ("a", "b"), ("b", "a")]), (m4, ["x"])):
            for axes in groups:
                for name, (body, ref) in CASES.items():
                    try:
                        check(mesh, axes if isinstance(axes, tuple) else (axes,), body(axes), ref)
                    except Exception as e:
                        raise AssertionError(f"{name} over {axes} of {mesh}: {e}") from e
        # the runtime's own calls: broadcast, uneven tiled pieces; private result buffers
        from starling.collectives.runtime.inprocess import run_spmd
        from starling.core.placements import chunk_bounds
        def piece(p, rows, cols):
            return (100 * p + np.arange(rows * cols, dtype=np.float32)).reshape(rows, cols)
        def rows(a, k, n):
            lo, hi = chunk_bounds(a.shape[0], n, k)
            return a[lo:hi]
        DIRECT = {
            "broadcast": (lambda c, ax, p: c.comm.broadcast(c, piece(p, 2, 3), ax, 1),
                          lambda g, k, n: piece(g[1], 2, 3)),
            "gather": (lambda c, ax, p: c.comm.all_gather(c, piece(p, 1 + p, 3), ax, 0, True),
                       lambda g, k, n: np.concatenate([piece(q, 1 + q, 3) for q in g], 0)),
            "a2a_concat": (lambda c, ax, p: c.comm.all_to_all(c, piece(p, 4, 2 + p % 2), ax,
                                                              0, 1, True),
                           lambda g, k, n: np.concatenate(
                               [rows(piece(q, 4, 2 + q % 2), k, n) for q in g], 1)),
            "a2a_split": (lambda c, ax, p: c.comm.all_to_all(c, piece(p, 3 + p, 2), ax, 0, 0,
                                                             True),
                          lambda g, k, n: np.concatenate(
                              [rows(piece(q, 3 + q, 2), k, n) for q in g], 0)),
            "scatter": (lambda c, ax, p: c.comm.reduce_scatter(c, piece(p, 7, 2), ax, "sum", 0,
                                                               True),
                        lambda g, k, n: rows(sum(piece(q, 7, 2) for q in g), k, n)),
        }
        for mesh, groups in ((m22, [("a",), ("b",), ("a", "b"), ("b", "a")]), (m4, [("x",)])):
            for ax in groups:
                for name, (fn, ref) in DIRECT.items():
                    outs = run_spmd(mesh, lambda c: fn(c, ax, mesh.device_position(c.device)))
                    for dev, got in zip(mesh.local_devices, outs):
                        grp = mesh.group(ax, dev)
                        want = ref([mesh.device_position(q) for q in grp], grp.index(dev),
                                   len(grp))
                        assert np.array_equal(got, want), (name, ax, dev, got, want)
                    assert not np.shares_memory(outs[0], outs[1]), (name, ax)
        # a process's data covers its devices' pieces (one block); device_put splits a global one
        full = np.arange(32.0).reshape(8, 4)
        xl = dist.make_array_from_process_local_data(NamedSharding(m22, P("a", "b")),
                                                     full[4 * r:4 * r + 4])
        close(dist.process_allgather(xl), full)
        xl = dist.make_array_from_process_local_data(NamedSharding(m22, P("b", "a")),
                                                     full[:, 2 * r:2 * r + 2])
        close(dist.process_allgather(xl), full)
        try:   # rows 0:2 and 4:6 of process 0
            dist.make_array_from_process_local_data(NamedSharding(m4, P("x")), full[:4])
            raise AssertionError("no error")
        except ValueError as e:
            assert "do not form one block" in str(e), e
        # integer sums are exact; bfloat16 ones accumulate in float32
        xi = st.device_put(np.arange(32, dtype=np.int32).reshape(8, 4),
                           NamedSharding(m22, P(("a", "b"))))
        si = st.shard_map(lambda b: lax.psum(b, ("b", "a")), m22, in_specs=P(("a", "b")),
                          out_specs=P(("a", "b")))(xi)
        assert np.array_equal(np.asarray(dist.process_allgather(si)),
                              np.tile(np.arange(32).reshape(4, 2, 4).sum(0), (4, 1)))
        rng = np.random.default_rng(0)
        X = rng.standard_normal((8, 12)).astype(np.float32)
        Xb = X.astype(snp.bfloat16)
        sb = st.shard_map(lambda b: lax.psum(b, "x"), m4, in_specs=P("x"), out_specs=P("x"))(
            st.device_put(Xb, NamedSharding(m4, P("x"))))
        close(np.asarray(dist.process_allgather(sb)).astype(np.float32),
              np.tile(Xb.astype(np.float32).reshape(4, 2, 12).sum(0), (4, 1)), tol=2e-2)
        for mesh, spec in ((m22, P("a", "b")), (m22, P("b", "a")), (m4, P(None, "x"))):
            axes = tuple(mesh.axis_names)
            x = st.device_put(X, NamedSharding(mesh, spec))
            # gradients through psum and all_gather over every device
            loss = lambda x: st.shard_map(lambda b: lax.psum(snp.sum(b * b), axes), mesh,
                                          in_specs=spec, out_specs=P())(x)
            close(dist.process_allgather(st.grad(loss)(x)), 2 * X)
            lg = lambda x: st.shard_map(
                lambda b: snp.sum(lax.all_gather(b, axes, axis=0, tiled=True) ** 2), mesh,
                in_specs=P(axes), out_specs=P())(x)
            xr = st.device_put(X, NamedSharding(mesh, P(axes)))
            close(dist.process_allgather(st.grad(lg)(xr)), 2 * X)
            # compiled, partitioned programs: a matmul contracting over the sharded dim
            W = rng.standard_normal((12, 6)).astype(np.float32)
            w = st.device_put(W, NamedSharding(mesh, P(spec[1], None)))
            mm = st.compile(lambda x, w: snp.tanh(x @ w))
            close(dist.process_allgather(mm(x, w)), np.tanh(X @ W))
            c = st.compile(lambda x: snp.tanh(x * 0.1).sum(axis=0))
            close(dist.process_allgather(c(x)), np.tanh(X * 0.1).sum(0))
            # eager ops on sharded arrays; uneven pieces; re-layouts (all_to_all, gathers)
            close(dist.process_allgather(x.sum(axis=1)), X.sum(1))
            close(dist.process_allgather(x.T @ x), X.T @ X, tol=1e-4)
            U = rng.standard_normal((5, 7)).astype(np.float32)
            u = st.device_put(U, NamedSharding(mesh, spec))
            close(dist.process_allgather(snp.exp(u).sum(axis=0)), np.exp(U).sum(0))
            for other in (P(None, axes), P(axes), P(axes[::-1]), P()):
                v = st.device_put(u, NamedSharding(mesh, other))
                close(dist.process_allgather(v * 2 + u), 3 * U)
        # the sharded digits example: data over processes, model inside them
        from starling.examples import sharded_mlp
        sharded_mlp.main(["--epochs", "1", "--no-progress"])
        print(f"rank {r} OK")
    """), timeout=240, devices=2)
    assert_ranks_ok(proc, 2)
    assert "4 devices of 2 processes" in proc.stdout, proc.stdout[-2000:]
    diff = float(proc.stdout.rsplit("difference", 1)[1].split()[0])
    assert diff < 1e-5, proc.stdout[-2000:]


def test_hybrid_mesh_timeouts_and_failures(tmp_path):
    proc = run_job(tmp_path, 2, HYBRID_MESHES + textwrap.dedent("""
        import os, signal, time
        T = 1.0
        X = np.arange(32.0, dtype=np.float32).reshape(8, 4)
        x = st.device_put(X, NamedSharding(m22, P("a", "b")))
        f_ab = st.shard_map(lambda b: lax.psum(b, ("a", "b")), m22, in_specs=P("a", "b"),
                            out_specs=P())   # hierarchical
        f_a = st.shard_map(lambda b: lax.psum(b, "a"), m22, in_specs=P("a", "b"),
                           out_specs=P(None, "b"))   # one device of each process
        close(dist.process_allgather(f_ab(x)), X.reshape(2, 4, 2, 2).sum((0, 2)))
        close(dist.process_allgather(f_a(x)), X[:4] + X[4:])
        dist.set_timeout(T, m22)
        for f in (f_ab, f_a):
            if r == 1:
                time.sleep(T + 1.0)
                f(x)   # joins late: completes
            else:
                try:
                    f(x)
                    raise AssertionError("no timeout")
                except dist.CollectiveTimeout as e:
                    assert e.missing == (1,), (e.missing, str(e))
                    assert "all_reduce: timed out" in str(e), str(e)
                    assert "world ranks [0, 1]" in str(e), str(e)
                    print(f"rank {r}: timeout names rank 1", flush=True)
        dist.set_timeout(None, m22)
        if r == 0:
            assert any(e["state"] == "timeout" and e["source"] == "mpi"
                       for e in dist.flight_recorder.entries())
        dist.barrier()
        close(dist.process_allgather(f_ab(x)), X.reshape(2, 4, 2, 2).sum((0, 2)))   # still works
        dist.barrier()
        if r == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            f_ab(x)
            raise AssertionError("no RankFailure")
        except dist.RankFailure as e:
            assert e.failed_ranks == (1,), (e.failed_ranks, str(e))
        print(f"rank {r} OK", flush=True)
    """), timeout=120, extra=("--fault-tolerant",), devices=2)
    assert "rank 0 OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("timeout names rank 1") == 2, proc.stdout[-3000:]


def test_launcher_forwards_exit_codes_and_signals(tmp_path):
    proc = run_job(tmp_path, 2, """
        import sys
        sys.exit(3 if r == 1 else 0)
    """)
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    script = tmp_path / "sleep.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-m", "starling.launch", "-n", "2", str(script)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "started" not in (p.stdout.readline() or ""):
        pass
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    assert time.monotonic() - t0 < 30
    assert rc != 0


def test_launcher_rejects_bad_arguments():
    out = subprocess.run([sys.executable, "-m", "starling.launch", "-n", "0", "x.py"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "-n must be positive" in out.stderr


def test_distributed_errors_before_initialize():
    code = ("import starling.distributed as d\n"
            "try:\n    d.all_reduce(1.0)\nexcept d.DistributedError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "ERR starling.distributed is not initialized" in out.stdout, out.stderr


@pytest.mark.parametrize("native", ["1", "0"])
def test_blocking_collectives_natively_and_in_python_give_numpy_results(tmp_path, native):
    """Blocking collectives without a timeout run from C++ under Open MPI (src/distributed/
    native_calls.py; the first call of a signature through the generic path, the repeats
    replayed); ``STARLING_MPI_NATIVE=0`` keeps them in Python (another MPI). Both give NumPy's
    results on every dtype and size class, record every call in the flight recorder in order
    (the native ring merged with the Python one, dumps included), and run hooks registered
    after a signature was replayed."""
    proc = run_job(tmp_path, 2, """
        import json, os, tempfile
        import ml_dtypes
        from starling.distributed import native_calls
        NATIVE = os.environ["STARLING_MPI_NATIVE"] == "1"
        assert native_calls.available() == NATIVE
        world = dist.world_group()
        for dt in (np.float32, np.float64, np.int32, np.int8, np.bool_, ml_dtypes.bfloat16):
            for shape in ((), (0,), (1,), (4, 3), (1 << 19,)):   # 0-d .. 2 MiB (pooled results)
                base = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) % 5
                xs = [(base + 3 * k).astype(dt) for k in range(n)]
                tol = 0.1 if dt == ml_dtypes.bfloat16 else 1e-6
                if dt == np.bool_:
                    total = xs[0] | xs[1]
                elif dt == np.int8:
                    total = (xs[0].astype(np.int64) + xs[1]).astype(np.int8)   # wraps
                else:
                    total = xs[0].astype(np.float64) + xs[1].astype(np.float64)
                total = np.asarray(total, np.float64)
                for _ in range(2):   # the first call plans, the second replays
                    got = dist.all_reduce(xs[r])
                    close(np.asarray(got).astype(np.float64), total, tol=tol)
                    assert np.asarray(got).dtype == np.dtype(dt) and got.shape == shape
                    if dt != np.bool_:
                        close(np.asarray(dist.all_reduce(xs[r], op="max"), np.float64),
                              np.maximum(*xs).astype(np.float64))
                    rows = dist.all_gather(xs[r])
                    assert all(np.array_equal(np.asarray(a), b) for a, b in zip(rows, xs))
                    x_before = xs[r].copy()
                    b = dist.broadcast(xs[r], src=1)   # a NumPy input: read, never written
                    assert np.array_equal(np.asarray(b), xs[1])
                    assert np.array_equal(xs[r], x_before)
                    if shape and shape[0] % n == 0:
                        rs = dist.reduce_scatter(xs[r])
                        k = shape[0] // n
                        close(np.asarray(rs, np.float64), total[r * k:(r + 1) * k], tol=tol)
                        a2a = dist.all_to_all(xs[r])
                        want = np.concatenate([x[r * k:(r + 1) * k] for x in xs])
                        assert np.array_equal(np.asarray(a2a), want)
        close(dist.all_reduce(np.full(3, 2.0 + r), op="avg"), [2.5] * 3)
        close(dist.all_reduce(np.full(3, 2.0 + r), op="avg"), [2.5] * 3)
        assert bool(world.track.replays) == NATIVE
        # every call is in the flight recorder, in order, whichever ring holds it
        dist.flight_recorder.clear()
        x = np.ones(5, np.float32)
        dist.all_reduce(x)
        dist.all_reduce(x, timeout=30)   # a timeout: the Python path
        dist.all_reduce(x)
        dist.all_gather(x)
        mine = [e for e in dist.flight_recorder.entries() if e["group"] == world.uid]
        assert [e["primitive"] for e in mine] == ["all_reduce"] * 3 + ["all_gather"], mine
        assert [e["seq"] - mine[0]["seq"] for e in mine] == [0, 1, 2, 3]
        assert all(e["state"] == "completed" and e["end"] >= e["start"] for e in mine)
        assert [e["params"]["mode"] for e in mine] == ["blocking", "nonblocking", "blocking",
                                                       "blocking"]
        assert mine[0]["inputs"] == [{"shape": [5], "dtype": "float32", "weak": False}]
        d = tempfile.mkdtemp()
        dist.flight_recorder.dump(d)
        dumped = json.load(open(os.path.join(d, f"rank{r}.json")))
        assert [e["primitive"] for e in dumped["records"]][-4:] == [e["primitive"] for e in mine]
        # hooks registered after a signature was replayed still run
        seen = []
        with dist.register_collective_hooks(pre=lambda op, g, v: seen.append(op),
                                            post=lambda op, g, v: seen.append(op + "!")):
            close(dist.all_reduce(x), [2.0] * 5)
        assert seen == ["all_reduce", "all_reduce!"], seen
        print(f"rank {r} OK")
    """, env={"STARLING_MPI_NATIVE": native})
    assert_ranks_ok(proc, 2)


def test_members_that_disagree_get_a_clear_error_not_a_wrong_result(tmp_path):
    # MPI moves bytes: without the agreement check these gave reinterpreted bits, a sum over
    # different shapes, half-received broadcasts, uninitialised tails or MPI_ERR_TRUNCATE
    proc = run_job(tmp_path, 2, """
        import pytest
        def raises(fn, *parts):
            with pytest.raises(ValueError) as e:
                fn()
            for p in parts:
                assert p in str(e.value), str(e.value)
        raises(lambda: dist.all_reduce(snp.ones(3, dtype=snp.float32 if r == 0 else snp.int32)),
               "all_reduce", "rank 0: all_reduce(op=sum) of float32[3]",
               "rank 1: all_reduce(op=sum) of int32[3]")
        raises(lambda: dist.all_reduce(snp.ones((2, 3) if r == 0 else (3, 2))),
               "float32[2, 3]", "float32[3, 2]")
        raises(lambda: dist.all_reduce(snp.ones(3), op="sum" if r == 0 else "max"),
               "op=sum", "op=max")
        raises(lambda: dist.broadcast(snp.ones(3 if r == 0 else 4), 0), "broadcast",
               "float32[4]")
        raises(lambda: dist.all_gather(snp.ones(2 if r == 0 else 3)), "all_gather")
        # a barrier is checked too (it waited forever for an all_reduce on the other rank)
        raises(lambda: dist.barrier() if r == 0 else dist.all_reduce(snp.ones(2)),
               "rank 0: barrier() of float64[]", "rank 1: all_reduce(op=sum) of float32[2]")
        dist.barrier()
        # a pre hook refusing the call on one rank: the other's check names the refusal (its
        # all_reduce paired with rank 1's next one: a wrong result, then a hang)
        def pre(op, g, v):
            if r == 1:
                raise RuntimeError("health check failed")
        with dist.register_collective_hooks(pre=pre):
            if r == 1:
                with pytest.raises(RuntimeError, match="health check failed"):
                    dist.all_reduce(snp.ones(2))
            else:
                raises(lambda: dist.all_reduce(snp.ones(2)),
                       "rank 1: all_reduce(refused_by_pre_hook=RuntimeError: health check "
                       "failed) of float32[2]")
        close(dist.all_reduce(snp.arange(2.0)), [0.0, 2.0])
        # arguments invalid on one rank only: it raises its error, the other a ValueError
        # naming it (it waited for the invalid rank forever)
        def invalid(fn, error, text):
            if r == 1:
                with pytest.raises(error, match=text):
                    fn()
            else:
                raises(fn, f"rank 1: ", f"invalid_arguments={error.__name__}: ", text)
        invalid(lambda: dist.reduce_scatter(snp.ones(4 if r == 0 else 3)), ValueError,
                "reduce_scatter: dim 0 of shape")
        invalid(lambda: dist.all_to_all(snp.ones(4 if r == 0 else 3)), ValueError,
                "all_to_all: dim 0 of shape")
        invalid(lambda: dist.all_reduce(snp.ones(2), op="sum" if r == 0 else "mean"),
                ValueError, "all_reduce: op must be one of")
        invalid(lambda: dist.all_reduce(snp.ones(2, dtype=snp.complex64 if r else snp.float32),
                                        op="max"), TypeError, "is not defined for complex64")
        invalid(lambda: dist.broadcast(snp.ones(2), src=0 if r == 0 else 7), ValueError,
                "broadcast: src must be a rank of the group")
        invalid(lambda: dist.all_gather(np.ones(2) if r == 0 else np.array(["a"])), TypeError,
                "all_gather: dtype: <U1 is not supported")
        invalid(lambda: dist.all_reduce(snp.ones(2), timeout=None if r == 0 else 0), ValueError,
                "timeout seconds must be positive")
        invalid(lambda: dist.barrier(timeout=None if r == 0 else -1.0), ValueError,
                "timeout seconds must be positive")
        with pytest.raises(ValueError, match="dim 0 of shape"):   # invalid on both: own errors
            dist.reduce_scatter(snp.ones(3))
        # a refusing member records its call as the others do: sequence numbers stay in step
        seqs = dist.all_gather(np.array([dist.flight_recorder.entries()[-1]["seq"]]))
        assert int(seqs[0][0]) == int(seqs[1][0]), seqs
        # each call is checked, also once both ranks made (and cached) both calls
        for _ in range(3):
            close(dist.all_reduce(snp.ones(3)), [2.0] * 3)
            close(dist.all_reduce(snp.ones(4)), [2.0] * 4)
        raises(lambda: dist.all_reduce(snp.ones(3 if r == 0 else 4)), "float32[3]", "float32[4]")
        # the refused call ends as an error in the flight recorder, not "started" forever
        last = [e for e in dist.flight_recorder.entries() if e["primitive"] == "all_reduce"][-1]
        assert last["state"] == "error" and "different shapes" in last["error"], last
        if r == 0:
            for m in (snp.ones(3), snp.ones(3), snp.arange(3.0)):
                dist.send(m, 1)
        else:
            raises(lambda: dist.recv(snp.zeros(5), 0), "rank 0 of group world sent float32[3]",
                   "receives float32[5]")
            raises(lambda: dist.recv(snp.zeros(3, dtype=snp.int32), 0), "receives int32[3]")
            close(dist.recv(snp.zeros(3), 0), [0.0, 1.0, 2.0])   # streams stay paired
        # the group is fine afterwards
        close(dist.all_reduce(snp.ones(2)), [2.0, 2.0])
        print(f"rank {r} OK")
    """)
    assert_ranks_ok(proc, 2)


def test_poll_until_tests_without_pause_then_backs_off():
    """The wait of a collective under a timeout: True as soon as the test passes (here on its
    200th call: a back-off from the first call would sleep for most of a second before it),
    False once the timeout has passed."""
    from starling.distributed.failures import poll_until
    calls = []

    def test():
        calls.append(time.monotonic())
        return len(calls) >= 200
    assert poll_until(test, timeout=30.0)
    assert len(calls) == 200
    began = time.monotonic()
    assert not poll_until(lambda: False, timeout=0.05)
    assert time.monotonic() - began >= 0.05


def test_three_devices_per_process_and_a_hybrid_mesh_after_reconfigure(tmp_path):
    """3 processes x 3 devices: a (data, model) mesh with data across the processes and model
    inside each; collectives over either axis and both, and a compiled data-parallel gradient
    step, against NumPy; then rank 1 dies, the survivors reconfigure, build the surviving
    (2, 3) mesh and compute the same things on it."""
    proc = run_job(tmp_path, 3, textwrap.dedent("""
        import os, signal
        from starling.sharding import Mesh
        D = st.devices()
        assert len(D) == 9 and len(st.local_devices()) == 3
        assert [d.process_index for d in D] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
        mesh = make_mesh((3, 3), ("data", "model"))
        rng = np.random.default_rng(0)
        X = rng.standard_normal((18, 6)).astype(np.float32)
        W = rng.standard_normal((6, 3)).astype(np.float32)

        def checks(mesh, X, tag):
            nd, nm = mesh.shape["data"], mesh.shape["model"]
            x = st.device_put(X, NamedSharding(mesh, P("data", "model")))
            blocks = X.reshape(nd, X.shape[0] // nd, nm, X.shape[1] // nm).transpose(0, 2, 1, 3)
            for axes, want in ((("model",), blocks.sum(1, keepdims=True)),
                               (("data",), blocks.sum(0, keepdims=True)),
                               (("data", "model"), blocks.sum((0, 1), keepdims=True))):
                f = st.shard_map(lambda b, axes=axes: lax.psum(b, axes), mesh,
                                 in_specs=P("data", "model"), out_specs=P("data", "model"))
                got = np.asarray(dist.process_allgather(f(x)))
                full = np.broadcast_to(want, blocks.shape).transpose(0, 2, 1, 3).reshape(X.shape)
                close(got, full, 1e-4)
            # data-parallel gradient of a linear model, compiled, rows split over every device
            xs = st.device_put(X, NamedSharding(mesh, P(("data", "model"))))
            loss = lambda w, x: snp.mean((x @ w) ** 2)
            g = st.compile(st.grad(loss))(W, xs)
            close(dist.process_allgather(g), 2 * X.T @ (X @ W) / (X.shape[0] * W.shape[1]), 1e-4)
            print(f"rank {r} {tag} OK", flush=True)

        checks(mesh, X, "9 devices")
        dist.barrier()
        if r == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            checks(mesh, X, "stale")
            raise AssertionError("no RankFailure")
        except dist.RankFailure as e:
            assert e.failed_ranks == (1,), (e.failed_ranks, str(e))
        removed = dist.world_group().reconfigure()
        assert tuple(removed) == (1,), removed
        small = dist.surviving_mesh(mesh)
        assert small.shape == {"data": 2, "model": 3}, small.shape
        # the survivors are renumbered (as MPI's shrink does): old rank 2 is process 1 now
        assert [d.process_index for d in small.flat_devices] == [0, 0, 0, 1, 1, 1]
        assert dist.get_world_size() == 2 and dist.get_rank() == (0 if r == 0 else 1)
        checks(small, X[:12], "6 devices")
        print(f"rank {r} OK", flush=True)
    """), timeout=180, extra=("--fault-tolerant",), devices=3)
    assert proc.returncode == 0 or "rank 0 OK" in proc.stdout, proc.stdout[-3000:] + \
        proc.stderr[-3000:]
    for rank in (0, 2):
        assert f"rank {rank} OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert f"rank {rank} 6 devices OK" in proc.stdout
    assert proc.stdout.count("9 devices OK") == 3, proc.stdout[-3000:]


def test_a_timed_out_collective_keeps_its_buffers_until_the_late_rank_comes(tmp_path):
    """Found by review: after a timeout the abandoned request did not keep its send / result
    buffers alive; freed, they were reused for new arrays, so the late rank summed whatever was
    there and its result was written into an array the user held."""
    proc = run_job(tmp_path, 2, """
        import gc, time
        N = 1000
        if r == 0:
            try:
                dist.all_reduce(np.full(N, 7.0, np.float32), timeout=0.5)
                raise AssertionError("no timeout")
            except dist.CollectiveTimeout:
                pass
            gc.collect()
            held = [snp.asarray(np.full(N, 1.0, np.float32)) + 0 for _ in range(20)]
            t0 = time.time()
            while time.time() - t0 < 3:
                dist.failures._reap()
                time.sleep(0.01)
            bad = [i for i, h in enumerate(held) if not np.all(np.asarray(h) == 1)]
            assert not bad, bad
        else:
            time.sleep(1.5)
            late = np.asarray(dist.all_reduce(np.full(N, 7.0, np.float32), timeout=30))
            assert np.all(late == 14.0), np.unique(late)
        dist.barrier()
        # found by the second review: the abandoned operation progressed only when the
        # timed-out rank called MPI again; now a progress thread tests it meanwhile, so the
        # late rank completes while rank 0 computes without MPI
        M = 1 << 19
        if r == 0:
            try:
                dist.all_reduce(np.full(M, 1.0, np.float32), timeout=0.3)
                raise AssertionError("no timeout")
            except dist.CollectiveTimeout:
                pass
            t0 = time.time()
            while time.time() - t0 < 3.0:   # Python work, no MPI call
                sum(range(1000))
        else:
            time.sleep(1.0)
            late = np.asarray(dist.all_reduce(np.full(M, 2.0, np.float32), timeout=2.0))
            assert np.all(late == 3.0), np.unique(late)
        dist.barrier()
        print(f"rank {r} OK", flush=True)
    """)
    assert_ranks_ok(proc, 2)


def test_messages_need_no_hidden_collective(tmp_path):
    """Found by review: the header communicator of send / recv was made by the first message,
    a collective of the whole group: the first recv ignored its timeout (it waited for the
    sender's Dup), and a third rank in another collective meanwhile broke the job."""
    proc = run_job(tmp_path, 3, """
        import time
        if r == 0:
            time.sleep(2.0)
            dist.send(np.ones(5, np.float32), 1, timeout=10)
        elif r == 1:
            t0 = time.time()
            try:
                dist.recv(((5,), np.float32), 0, timeout=0.5)
                raise AssertionError("no timeout")
            except dist.CollectiveTimeout:
                assert time.time() - t0 < 1.8, time.time() - t0
        dist.barrier()
        # found by the same review: timeout= is checked as set_timeout checks its seconds
        for bad in (0, -1, float("nan"), True, "x"):
            for call in (lambda: dist.all_reduce(np.ones(2, np.float32), timeout=bad),
                         lambda: dist.set_timeout(bad),
                         lambda: dist.all_reduce(np.ones(2, np.float32), async_op=True).wait(
                             timeout=bad)):
                try:
                    call()
                    raise AssertionError(f"timeout {bad!r} accepted")
                except ValueError as e:
                    assert "must be positive or None" in str(e), str(e)
        g = dist.new_group([0, 1, 2])   # a fresh group: its first messages
        if r == 0:
            dist.send(np.full(5, 3.0, np.float32), 1, group=g, timeout=10)
        elif r == 1:
            close(dist.recv(((5,), np.float32), 0, group=g, timeout=10), np.full(5, 3.0))
        else:   # meanwhile a bystander enters the group's next collective first
            close(dist.all_reduce(np.ones(2, np.float32), group=g, timeout=10), [3, 3])
        if r != 2:
            close(dist.all_reduce(np.ones(2, np.float32), group=g, timeout=10), [3, 3])
        print(f"rank {r} OK", flush=True)
    """)
    assert_ranks_ok(proc, 3)
