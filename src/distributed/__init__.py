"""``starling.distributed``: many processes and machines, on MPI (mpi4py + Open MPI).

Launch with ``python -m starling.launch -n 4 script.py`` (or mpirun / srun), then call
``starling.distributed.initialize()``: ``starling.devices()`` becomes the job's devices,
meshes span processes, and shard_map / compiled sharded programs run their collectives on MPI.
The eager process-group API uses PyTorch's names (``all_reduce``, ``all_gather``,
``reduce_scatter``, ``all_to_all``, ``broadcast``, ``send``, ``recv``, ``barrier``,
``new_group``, ``split_group``); arrays are immutable, so each returns its result.
Object collectives (``broadcast_object``, ``all_gather_object``, ``send_object`` /
``recv_object``) move Python values in a safe encoding (no pickle unless ``allow_pickle``);
``Window`` gives one-sided access (put / get / accumulate) to buffers on other processes.

Observability: ``set_timeout`` bounds collectives; a hung one raises ``CollectiveTimeout``
naming the ranks that never arrived, and the flight recorder (``flight_recorder``) dumps every
rank's recent collectives for ``python -m starling.distributed.flight_recorder DIR``.

Fault tolerance (ULFM; launch with ``--fault-tolerant``): a dead or unreachable process raises
``RankFailure`` on the survivors in every collective, never a hang (src/distributed/failures.py);
``group.reconfigure()`` shrinks a group to the survivors and ``surviving_mesh`` rebuilds meshes
(src/distributed/elastic.py); ``starling.distributed.checkpoint`` saves and restores sharded
pytrees atomically, onto any number of processes (src/distributed/checkpoint.py);
``register_collective_hooks`` runs functions around every collective (src/distributed/hooks.py);
``on_abort`` callbacks run before a job-wide ``abort`` (src/distributed/abort.py).
"""
from ..collectives.runtime.context import CollectiveError, CollectiveTimeout  # noqa: F401
from ..collectives.runtime import inprocess as _inprocess
from . import checkpoint  # noqa: F401
from .abort import abort, on_abort  # noqa: F401
from .arrays import make_array_from_process_local_data, process_allgather  # noqa: F401
from .elastic import reconfigure, surviving_mesh  # noqa: F401
from .failures import RankFailure  # noqa: F401
from .hooks import register_collective_hooks  # noqa: F401
from .group import (NON_GROUP_MEMBER, MPIBackend, ProcessGroup, Work, all_gather,  # noqa: F401
                    all_reduce, all_to_all, barrier, broadcast, get_backend_impl, new_group,
                    recv, reduce_scatter, register_backend, send, set_timeout, split_group)
from . import flight_recorder  # noqa: F401
from .objects import all_gather_object, broadcast_object, recv_object, send_object  # noqa: F401
from .window import Window  # noqa: F401
from .runtime import (DistributedError, fault_tolerant, get_rank, get_world_size,  # noqa: F401
                      initialize, is_initialized, local_rank, shutdown, world_group)


def _remote_comm(mesh):
    from .runtime import world_comm
    world_comm()
    return get_backend_impl().comm_for_mesh(mesh)


_inprocess.REMOTE_COMM[0] = _remote_comm

__all__ = ["initialize", "is_initialized", "shutdown", "get_rank", "get_world_size",
           "local_rank", "world_group", "ProcessGroup", "new_group", "split_group",
           "NON_GROUP_MEMBER", "all_reduce", "all_gather", "reduce_scatter", "all_to_all",
           "broadcast", "send", "recv", "barrier", "Work", "set_timeout", "RankFailure",
           "CollectiveTimeout", "CollectiveError", "DistributedError", "register_backend",
           "get_backend_impl", "MPIBackend", "make_array_from_process_local_data",
           "process_allgather", "broadcast_object", "all_gather_object", "send_object",
           "recv_object", "Window", "flight_recorder", "reconfigure", "surviving_mesh",
           "checkpoint", "register_collective_hooks", "on_abort", "abort", "fault_tolerant"]
