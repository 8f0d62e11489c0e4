"""4 ranks, fault tolerant (tests/test_distributed_checkpoint.py): sharded checkpoints under
failures.

1. save version 1 (uneven Shard, 2-d mesh, replicated-along-an-axis, Partial, plain, bfloat16,
   int64, scalars);
2. save version 2 with rank 2's disk "full" (OSError ENOSPC): CheckpointError on every rank,
   version 1 intact, nothing of version 2 left;
3. save version 2 again, rank 1 SIGKILLs itself half way through writing its file: the
   survivors get RankFailure, version 1 is intact and restores;
4. the 3 survivors reconfigure and restore version 1 onto a 3-device mesh (other layouts);
5. they save version 3 over it and restore that (the dead rank's half file is collected).
Rank 0 writes OUT/report.json.
"""
import errno
import json
import os
import signal
import sys

import ml_dtypes
import numpy as np


def values(version):
    """The global value of every leaf of checkpoint ``version`` (deterministic)."""
    rng = np.random.default_rng(version)
    return {"x": rng.standard_normal((10, 6)).astype(np.float32),
            "w": rng.standard_normal((8, 4)).astype(ml_dtypes.bfloat16),
            "m": rng.standard_normal((6, 4)),
            "p": rng.standard_normal((3,)).astype(np.float32),
            "z": rng.integers(0, 100, (5,)).astype(np.int64)}


def main(out):
    import starling.distributed as dist
    import starling.numpy as snp
    from starling.distributed import checkpoint
    from starling.nn import serialization
    from starling.sharding import NamedSharding, P, ShardedArray, distribute, make_mesh

    dist.initialize()   # no timeout: blocking MPI calls
    rank0 = dist.get_rank()
    ck = os.path.join(out, "ckpt")
    mesh = make_mesh((4,), ("d",))
    mesh2d = make_mesh((2, 2), ("a", "b"))

    def build(version):
        v = values(version)
        return {"x": distribute(v["x"], NamedSharding(mesh, P("d"))),
                "layers": [{"w": distribute(v["w"], NamedSharding(mesh2d, P("a", "b")))},
                           {"m": distribute(v["m"], NamedSharding(mesh2d, P(None, "b")))}],
                "p": distribute(v["p"], NamedSharding(mesh, P(), partial={"d": "sum"})),
                "z": snp.asarray(v["z"]), "step": version, "name": "run"}

    def check(tree, version, where):
        v = values(version)
        got = {"x": tree["x"], "w": tree["layers"][0]["w"], "m": tree["layers"][1]["m"],
               "p": tree["p"], "z": tree["z"]}
        for k, a in got.items():
            full = np.asarray(dist.process_allgather(a))
            assert full.dtype == v[k].dtype and np.array_equal(full.view(np.uint8),
                                                               v[k].view(np.uint8)), (where, k)
            pieces = a.addressable_shards if isinstance(a, ShardedArray) and \
                not a.sharding.partial else []
            for s in pieces:   # each piece is its slice of the value, bit-exact
                assert np.array_equal(np.asarray(s.data), v[k][s.index]), (where, k)
        assert tree["step"] == version and tree["name"] == "run", where

    report = {}
    checkpoint.save(ck, build(1), step=1)
    report["files1"] = sorted(os.listdir(ck))

    real_write = serialization.write_tensors

    def full_disk(path, tensors, metadata=None):
        with open(path, "wb") as f:
            f.write(b"\0" * 100)
        raise OSError(errno.ENOSPC, "No space left on device", path)

    serialization.write_tensors = full_disk if rank0 == 2 else real_write
    try:
        checkpoint.save(ck, build(2), step=2)
        raise AssertionError("no CheckpointError")
    except checkpoint.CheckpointError as e:
        report["disk_full_error"] = str(e)
    serialization.write_tensors = real_write
    dist.barrier()   # every rank has removed its file of the failed save
    report["files_after_disk_full"] = sorted(os.listdir(ck))

    def dying(path, tensors, metadata=None):
        real_write(path, tensors, metadata)
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
        os.kill(os.getpid(), signal.SIGKILL)

    if rank0 == 1:
        serialization.write_tensors = dying
    try:
        checkpoint.save(ck, build(2), step=2)
        raise AssertionError("no RankFailure")
    except dist.RankFailure as e:
        report["kill_failed_ranks"] = list(e.failed_ranks)
    report["files_after_kill"] = sorted(os.listdir(ck))
    report["index_step_after_kill"] = checkpoint.read_index(ck)["step"]
    plain = checkpoint.restore(ck)   # before reconfiguring: restore needs no communication
    for k, a in values(1).items():
        got = {"x": plain["x"], "w": plain["layers"][0]["w"], "m": plain["layers"][1]["m"],
               "p": plain["p"], "z": plain["z"]}[k]
        assert np.array_equal(np.asarray(got).view(np.uint8), a.view(np.uint8)), k

    report["removed"] = list(dist.world_group().reconfigure())
    mesh3 = dist.surviving_mesh(mesh)
    report["mesh3"] = [d.id for d in mesh3.flat_devices]
    shardings = {"x": NamedSharding(mesh3, P("d")),
                 "layers": [{"w": NamedSharding(mesh3, P(None, "d"))},
                            {"m": NamedSharding(mesh3, P("d"))}],
                 "p": NamedSharding(mesh3, P()), "z": None, "step": None, "name": None}
    restored = checkpoint.restore(ck, shardings=shardings)
    check(restored, 1, "restore 4 -> 3")
    report["x_local_shape"] = list(restored["x"].to_local().shape)

    v3 = values(3)
    new = {"x": distribute(v3["x"], shardings["x"]),
           "layers": [{"w": distribute(v3["w"], shardings["layers"][0]["w"])},
                      {"m": distribute(v3["m"], shardings["layers"][1]["m"])}],
           "p": distribute(v3["p"], NamedSharding(mesh3, P(), partial={"d": "sum"})),
           "z": snp.asarray(v3["z"]), "step": 3, "name": "run"}
    checkpoint.save(ck, new, step=3, metadata={"world": dist.get_world_size()})
    report["files3"] = sorted(os.listdir(ck))
    check(checkpoint.restore(ck, target=new), 3, "restore 3 -> 3")
    report["index3"] = {k: checkpoint.read_index(ck)[k]
                        for k in ("step", "metadata", "process_count")}
    if dist.get_rank() == 0:
        with open(os.path.join(out, "report.json"), "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
