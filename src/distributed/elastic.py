"""Carrying on after processes fail: reconfigure groups, rebuild meshes over the survivors.

With ULFM (``python -m starling.launch --fault-tolerant``) a dead or unreachable process makes
the survivors' collectives raise ``RankFailure`` (src/distributed/failures.py). Every survivor
then calls ``group.reconfigure()`` (``starling.distributed.reconfigure(group)``):

1. the group's communicator is revoked (``MPI_Comm_revoke``), so survivors still inside an
   operation on it, or entering one, get ``RankFailure`` and come to reconfigure too;
2. it is shrunk to the survivors (``MPI_Comm_shrink``, itself fault tolerant: an agreement on
   who is gone) and replaces the old one *in place*, keeping the members' order;
3. for the world group, the job shrinks with it: ranks are renumbered 0..n-1 (survivors keep
   their relative order), ``get_rank()`` / ``get_world_size()`` follow, each Device takes its
   process's new ``process_index`` in place and devices of failed processes leave
   ``starling.devices()`` (their ``process_index`` becomes None; device ids never change).
   Every other communicator of this process is revoked too (the MPI communicators of mesh
   groups, which are dropped and made again on demand, and every ProcessGroup from
   ``new_group`` / ``split_group``): call ``reconfigure()`` on the groups you keep using, or
   make new ones.

A reconfigured group, and a mesh group made again, is a new incarnation of its group on the
arrival board (``group.uid`` gains ``~1``, ``~2``...: src/distributed/arrival.py), so timeouts
never read a previous incarnation's counts; flight-recorder dumps keep naming processes by their
rank when the job started (``rank3.json``), whatever their world rank now.

Meshes: ``make_mesh(shape, names)`` over ``starling.devices()`` now uses the survivors;
``surviving_mesh(mesh)`` rebuilds an existing mesh without the failed devices (a 1-d mesh loses
them; an n-d mesh loses every slice along ``axis`` that holds one, e.g. the data-parallel
replicas that lost a member). A mesh that still holds a failed device is refused by the MPI
runtime with a message saying so. Data on failed processes is gone: restore it from in-memory
replicas or a checkpoint (src/distributed/checkpoint.py); ``starling.examples.elastic_digits``
shows both.
"""
from __future__ import annotations

import numpy as np

from ..arrays import device as _device
from ..collectives.mesh import Mesh
from . import runtime
from .failures import detect_failures


def reconfigure(group=None):
    """Shrinks ``group`` (default: the world) to its surviving members, in place; see the module
    docstring. Every surviving member must call it.

    Returns:
        Tuple of the world ranks (numbered as before the call) of the members that left.
    Raises:
        RankFailure: the shrink itself failed (call again).
        ValueError / TypeError: not a member / not a ProcessGroup.
    """
    from .group import _LIVE, _group
    g = _group(group)
    MPI = runtime.mpi()
    world = runtime.world_group()
    is_world = g is world
    before = g.ranks
    old = g.comm
    revoke = [old] + ([other.comm for other in list(_LIVE) if other is not world]
                      if is_world else [])
    for comm in revoke:
        try:
            comm.Revoke()
        except MPI.Exception:   # already revoked
            pass
    with detect_failures("reconfigure", old):
        new = old.Shrink()
    new.Set_errhandler(MPI.ERRORS_RETURN)
    new_group, old_group = new.Get_group(), old.Get_group()
    try:
        kept = MPI.Group.Translate_ranks(new_group, list(range(new.Get_size())), old_group)
    finally:
        new_group.Free()
        old_group.Free()
    kept = [int(r) for r in kept]
    removed = tuple(before[i] for i in range(len(before)) if i not in set(kept))
    if is_world:
        from . import mpi_comm
        mpi_comm.drop_group_cache()
        _device.renumber_processes({old_rank: i for i, old_rank in enumerate(kept)},
                                   new.Get_rank())
        runtime.replace_world(new)
    else:
        g.replace_comm(new)
    return removed


def is_failed(device) -> bool:
    """True when ``device``'s process failed and the world was reconfigured without it."""
    return device.process_index is None


def surviving_mesh(mesh, axis=None) -> Mesh:
    """``mesh`` without the devices of failed processes (after ``world_group().reconfigure()``).

    A 1-d mesh keeps its surviving devices in order. An n-d mesh keeps every slice along
    ``axis`` (default: its first axis, by convention the data-parallel one) whose devices all
    survived, so the other axes keep their sizes: a (data=2, model=2) mesh that lost one device
    becomes (data=1, model=2). A mesh without failed devices is returned as it is.

    Args:
        mesh: a Mesh built before the failure.
        axis: the axis name to shrink along (n-d meshes).
    Returns:
        A Mesh with the same axis names.
    Raises:
        TypeError: ``mesh`` is not a Mesh.
        ValueError: an unknown axis, or no device / no complete slice survives.
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(f"surviving_mesh: expected a starling Mesh, got {mesh!r}")
    alive = np.vectorize(lambda d: not is_failed(d), otypes=[bool])(mesh.devices)
    name = mesh.axis_names[0] if axis is None else axis
    i = mesh.axis_index_of(name)
    if alive.all():
        return mesh
    if mesh.ndim == 1:
        keep = np.flatnonzero(alive)
    else:
        others = tuple(k for k in range(mesh.ndim) if k != i)
        keep = np.flatnonzero(alive.all(axis=others))
    if keep.size == 0:
        raise ValueError(f"surviving_mesh: no {'device' if mesh.ndim == 1 else 'slice'} of "
                         f"{mesh} along {name!r} survived")
    return Mesh(np.take(mesh.devices, keep, axis=i), mesh.axis_names)
