"""4 ranks, fault tolerant with the heartbeat detector (tests/test_fault_tolerance.py).

Phase 1: rank 3 dies of an uncaught exception (its on_abort callback runs, the process leaves);
the survivors' first operation touching it is a shard_map, then eager collectives, a Work and a
compiled sharded program: each raises RankFailure naming world rank 3. They reconfigure to 3
ranks and compute correctly on the surviving mesh.
Phase 2: rank 2 stops (SIGSTOP: alive but silent); the detector declares it failed; the first
operation is a compiled sharded program, then barrier, recv and send; all raise RankFailure. The
two survivors reconfigure, rebuild their meshes and groups, and check results. Every survivor
writes what it saw to OUT/rank<r>.json; the stopped process is SIGKILLed at the end.
"""
import json
import os
import signal
import sys
import time

import numpy as np

import starling as st
import starling.distributed as dist
import starling.numpy as snp
from starling.sharding import NamedSharding, P, make_mesh

out_dir = sys.argv[1]
world = dist.initialize(timeout=600.0)   # polled nonblocking calls (never expires here)
rank0 = dist.get_rank()
assert dist.get_world_size() == 4, dist.get_world_size()
pids = [int(p) for p in dist.all_gather(snp.asarray(os.getpid()))]
report = {"start_rank": rank0, "events": [], "hooks": []}
dist.on_abort(lambda reason: open(os.path.join(out_dir, f"abort{rank0}.txt"), "w").write(reason))
hooks = dist.register_collective_hooks(
    pre=lambda op, g, x: report["hooks"].append(["pre", op, g.size()]),
    post=lambda op, g, out: report["hooks"].append(["post", op, g.size()]))


def expect_failure(what, fn):
    t = time.monotonic()
    try:
        fn()
    except dist.RankFailure as e:
        report["events"].append([what, list(e.failed_ranks), round(time.monotonic() - t, 3)])
        return
    raise AssertionError(f"{what}: no RankFailure")


def psum_fn(mesh):
    return st.shard_map(lambda x: st.lax.psum(x, "d"), mesh=mesh, in_specs=P("d"),
                        out_specs=P())


def local_piece(mesh, value):
    return dist.make_array_from_process_local_data(NamedSharding(mesh, P("d")),
                                                   np.full((2,), value, np.float32))


@st.compile
def total(x):
    return snp.sum(x * 2.0)


mesh4 = make_mesh((4,), ("d",))
x = local_piece(mesh4, rank0 + 1.0)
assert np.allclose(np.asarray(psum_fn(mesh4)(x).to_local()), 10.0)
dist.barrier()
hooks.remove()
if rank0 == 3:
    raise ValueError("injected failure on rank 3")

# ---- phase 1: a dead process ---------------------------------------------------------------------
expect_failure("shard_map", lambda: psum_fn(mesh4)(x))
expect_failure("all_reduce", lambda: dist.all_reduce(snp.ones(3)))
expect_failure("work", lambda: dist.all_reduce(snp.ones(3), async_op=True).wait())
expect_failure("compiled", lambda: dist.process_allgather(total(x)))
removed = world.reconfigure()
report["removed1"] = list(removed)
report["size1"] = dist.get_world_size()
report["rank1"] = dist.get_rank()
report["devices1"] = [[d.id, d.process_index] for d in st.devices()]
mesh3 = dist.surviving_mesh(mesh4)
report["mesh3"] = [d.id for d in mesh3.flat_devices]
try:
    psum_fn(mesh4)
    psum_fn(mesh4)(x)
except ValueError as e:
    report["stale_mesh_error"] = str(e)
x3 = local_piece(mesh3, rank0 + 1.0)
report["psum3"] = float(np.asarray(psum_fn(mesh3)(x3).to_local())[0])
report["allreduce3"] = float(np.asarray(dist.all_reduce(snp.asarray(float(rank0)))))
report["world_ranks1"] = world.ranks

# ---- phase 2: a silent process -------------------------------------------------------------------
if dist.get_rank() == 2:
    os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(60)
expect_failure("compiled2", lambda: dist.process_allgather(total(x3)))
expect_failure("barrier", lambda: dist.barrier())
if dist.get_rank() == 0:
    expect_failure("recv", lambda: dist.recv(((1 << 20,), np.float32), src=2))
else:
    expect_failure("send", lambda: dist.send(snp.ones(1 << 20), dst=2))
removed = world.reconfigure()
report["removed2"] = list(removed)
report["size2"] = dist.get_world_size()
report["rank2"] = dist.get_rank()
mesh2 = dist.surviving_mesh(mesh3)
report["mesh2"] = [d.id for d in mesh2.flat_devices]
report["mesh2_from_devices"] = make_mesh((2,), ("d",)) == mesh2
x2 = local_piece(mesh2, rank0 + 1.0)
report["psum2"] = float(np.asarray(psum_fn(mesh2)(x2).to_local())[0])
report["compiled2_value"] = float(np.asarray(dist.process_allgather(total(x2))))
sub = dist.split_group(0)
report["split_ranks"] = sub.ranks
report["split_sum"] = float(np.asarray(dist.all_reduce(snp.asarray(1.0), group=sub)))
if dist.get_rank() == 0:
    os.kill(pids[2], signal.SIGKILL)
with open(os.path.join(out_dir, f"rank{rank0}.json"), "w") as f:
    json.dump(report, f)
