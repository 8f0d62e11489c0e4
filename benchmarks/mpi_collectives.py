"""MPI collectives: Starling's all_reduce / all_gather vs raw mpi4py on the same buffers.

Run: ``python benchmarks/mpi_collectives.py [--quick]`` (it launches itself on 2 ranks with
``python -m starling.launch``). For each size from 1 KiB to 64 MiB (float32), rank 0 prints the
bandwidth of ``starling.distributed.all_reduce`` / ``all_gather`` and of mpi4py's
``Allreduce`` / ``Allgather`` on the same buffers, rounds interleaved (the order swapped
every round), the median of the rounds (31; 5 with ``--quick``), and the median of the
per-round ratios (each round times both back to back) with its quartiles (target: >= 0.9 for
sizes >= 1 MiB; with 15 rounds the median of a 1 MiB all_gather, whose quartiles span ~0.15
here, moved by 0.1 between runs). The
medians, not the best rounds: two ranks busy-polling on a shared two-core machine see stalls
of either side, and one lucky round of one contender made single-run ratios swing from 0.6 to
2.4 at the same size.

The same buffers: mpi4py reads the same input and writes into the memory Starling's result
would take (``mpi_types.result_buffer``, called on every call as Starling does: for results of
1 MiB and more the recycled block Starling's own call just released). Which memory a large
reduction writes decides its speed here by more than Starling's overhead does, and not by how
that memory was made: in one process holding a NumPy output, six pool blocks (at offsets 64 B
to 1 MiB) and a second NumPy output, all warm, a 64 MiB ``Allreduce`` took 20-23 ms into each
but the last one allocated, 34-40 ms into that one; one more 4 MiB allocation after it made it
fast (and, in one run, the first NumPy output slow). Starling's result block is allocated by
its first call, after the benchmark's own buffers, so a fixed NumPy output for mpi4py against
it compared two allocations, not two libraries (ratios of 0.65 at 64 MiB and 2.7 at 1 MiB in
one run). The last column, mpi4py into its own fixed NumPy output (allocated first), is printed
for reference.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

SIZES = [1 << k for k in range(10, 27, 2)]   # bytes: 1 KiB .. 64 MiB


def worker(quick):
    import numpy as np
    import starling.distributed as dist
    from mpi4py import MPI
    from starling.distributed.mpi_types import result_buffer
    dist.initialize()
    comm = dist.world_group().comm
    r = comm.Get_rank()
    rounds = 5 if quick else 31
    if r == 0:
        print(f"{'bytes':>10} {'op':>10} {'starling GB/s':>14} {'mpi4py GB/s':>12} {'ratio':>7} "
              f"{'(quartiles)':>13} {'mpi4py own-buffer GB/s':>23}")
    for nbytes in SIZES:
        n = nbytes // 4
        x = np.ones(n, np.float32)
        out = np.empty_like(x)
        gout = np.empty(2 * n, np.float32)
        reps = max(1, min(200, (1 << 24) // nbytes))
        f32 = np.float32
        cases = {
            "all_reduce": (lambda: dist.all_reduce(x),
                           lambda: comm.Allreduce(x, result_buffer(x.shape, f32)),
                           lambda: comm.Allreduce(x, out)),
            "all_gather": (lambda: dist.all_gather(x),
                           lambda: comm.Allgather(x, result_buffer((2,) + x.shape, f32)),
                           lambda: comm.Allgather(x, gout)),
        }
        for name, (ours, raw, own) in cases.items():
            times = {"starling": [], "mpi4py": [], "own": []}
            ours(), raw(), own()
            for k in range(rounds):
                order = (("starling", ours), ("mpi4py", raw), ("own", own))
                for who, fn in order[::-1] if k % 2 else order:
                    comm.Barrier()
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        fn()
                    dt = comm.allreduce((time.perf_counter() - t0) / reps, op=MPI.MAX)
                    times[who].append(dt)
            if r == 0:
                med = {who: float(np.median(t)) for who, t in times.items()}
                # each round times both back to back: the median and quartiles of the rounds'
                # ratios (a ratio of the two medians can fall outside those quartiles)
                lo, mid, hi = np.quantile(np.divide(times["mpi4py"], times["starling"]),
                                          [0.25, 0.5, 0.75])
                gb = lambda t: nbytes / t / 1e9
                print(f"{nbytes:>10} {name:>10} {gb(med['starling']):>14.3f} "
                      f"{gb(med['mpi4py']):>12.3f} {mid:>7.2f} "
                      f"({lo:.2f}, {hi:.2f}) {gb(med['own']):>23.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--worker", action="store_true")
    args = ap.parse_args()
    if args.worker:
        worker(args.quick)
        return
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "starling.launch", "-n", "2", os.path.abspath(__file__),
           "--worker"] + (["--quick"] if args.quick else [])
    sys.exit(subprocess.call(cmd, env=env))


if __name__ == "__main__":
    main()
