"""The SPMD context: which device a thread is computing for, on which mesh, with which
communicator. Collective primitives read it (``current_spmd``) to find their group and peers.
"""
from __future__ import annotations

import contextvars
import weakref

_CTX = contextvars.ContextVar("starling_spmd", default=None)
_DEFAULT_TIMEOUT = [None]
_MESH_TIMEOUTS = weakref.WeakKeyDictionary()


class CollectiveError(RuntimeError):
    """A collective could not complete (a peer failed, the run was aborted)."""


class CollectiveMismatch(CollectiveError):
    """The devices of a group called different collectives at the same point of their programs
    (another kind, reduce op, dtype or shape), or one finished without calling it (e.g. a
    device-dependent trip count around a collective)."""


class CollectiveTimeout(CollectiveError):
    """A collective waited longer than its timeout; ``missing`` lists the devices (or ranks) that
    did not arrive."""

    def __init__(self, message, missing=()):
        super().__init__(message)
        self.missing = tuple(missing)


class SpmdContext:
    """Per-device state of one SPMD run: ``mesh``, ``device``, ``comm`` (the runtime's
    communicator) and the sequence numbers that pair up collectives of the same group."""

    __slots__ = ("mesh", "device", "comm", "_seq", "_groups")

    def __init__(self, mesh, device, comm):
        self.mesh = mesh
        self.device = device
        self.comm = comm
        self._seq = {}
        self._groups = {}

    def group(self, axes):
        """(devices of the group over ``axes``, this device's rank in it), cached."""
        g = self._groups.get(axes)
        if g is None:
            devs = self.mesh.group(axes, self.device)
            g = self._groups[axes] = (devs, devs.index(self.device))
        return g

    def peek_seq(self, group) -> int:
        """The sequence number the next collective of ``group`` will get."""
        return self._seq.get(group, 0)

    def next_seq(self, group) -> int:
        n = self._seq.get(group, 0)
        self._seq[group] = n + 1
        return n

    def axis_index(self, axes) -> int:
        return self.mesh.rank_in(axes, self.device)


def current_spmd():
    """The SpmdContext of the running device computation, or None outside SPMD execution."""
    return _CTX.get()


def set_spmd(ctx):
    """Makes ``ctx`` (an SpmdContext) the running device computation's; returns the token for
    ``reset_spmd``."""
    return _CTX.set(ctx)


def reset_spmd(token):
    """Restores the SpmdContext that was current before the ``set_spmd`` that returned ``token``."""
    _CTX.reset(token)


# ---- timeouts -----------------------------------------------------------------------------------

def collective_timeout(mesh=None):
    """Seconds an SPMD collective over ``mesh`` waits for its peers: the mesh's own setting,
    else the default (``starling.distributed.set_timeout``); None waits forever."""
    if mesh is not None:
        t = _MESH_TIMEOUTS.get(mesh)
        if t is not None:
            return t
    return _DEFAULT_TIMEOUT[0]


def set_collective_timeout(seconds, mesh=None):
    """Sets the default timeout (``mesh=None``) or one mesh's (None: back to the default)."""
    if mesh is None:
        _DEFAULT_TIMEOUT[0] = seconds
    elif seconds is None:
        _MESH_TIMEOUTS.pop(mesh, None)
    else:
        _MESH_TIMEOUTS[mesh] = seconds
