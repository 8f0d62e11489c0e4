"""Runtimes move bytes between devices; everything else (partitioning, scheduling, the rules of
the collectives) is shared. ``context.py``: the SPMD context a device's work runs in;
``inprocess.py``: devices of this process (one worker thread each, collectives through shared
memory); the MPI runtime for many processes is ``mpi.py`` (``starling.distributed``).
"""
from .context import (CollectiveError, CollectiveMismatch, CollectiveTimeout,  # noqa: F401
                      SpmdContext, current_spmd)
