"""The SPMD context: which device a thread is computing for, on which mesh, with which
communicator. Collective primitives read it (``current_spmd``) to find their group and peers.
"""
from __future__ import annotations

import contextvars

_CTX = contextvars.ContextVar("starling_spmd", default=None)


class CollectiveError(RuntimeError):
    """A collective could not complete (a peer failed, the run was aborted)."""


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
    return _CTX.set(ctx)


def reset_spmd(token):
    _CTX.reset(token)
