"""Collective hooks: functions run just before and just after every collective across processes.

``register_collective_hooks(pre=None, post=None, group=None)`` registers them for one group, or
with ``group=None`` for every collective: the eager API (``all_reduce``, ``barrier``, ``send``,
...) and the collectives of shard_map / compiled sharded programs over meshes spanning
processes (src/distributed/mpi_comm.py), whose group is the ProcessGroup of the mesh devices
taking part (on a mesh where a process owns several devices of the group, the hooks run once
per such device, in its thread, with its value; collectives among one process's devices run
no hooks). It returns a handle whose ``remove()`` unregisters them (also a context manager).

* ``pre(op, group, value)`` runs before the operation starts: ``op`` is its name
  ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "ppermute", "send",
  "recv", "barrier"; the object collectives "broadcast_object", "all_gather_object",
  "send_object", "recv_object"; a ``Window``'s "window_create", "window_fence",
  "window_free"), ``group`` the ProcessGroup, ``value`` this process's input (a NumPy array;
  for ``recv`` the receive buffer, for ``barrier`` and window fences / frees a 0-d
  placeholder, for object collectives a placeholder with ``shape == ()`` and
  ``dtype == "object"``).
* ``post(op, group, result)`` runs after it completed, with this process's result (an Array, a
  list of Arrays for ``all_gather``, a NumPy array inside SPMD programs, None for ``send`` /
  ``recv`` / ``barrier``). A collective that fails (``RankFailure``, ``CollectiveTimeout``) runs
  no post hook.

Uses: health checks and fault injection before a collective (a pre hook that raises aborts the
collective on this process, before anything was sent; without a timeout the other members'
agreement check then fails with a ValueError naming the refusal, so that none of them pairs
this collective with the refusing member's next one; under a timeout, or for ``async_op``
and messages, which are not checked, the refusing member is one operation behind the others
until it leaves the job), logging and metrics after. Hooks run in
the calling thread, in registration order, global hooks before the group's; an exception from a
hook propagates to the caller of the collective. Hooks must not start collectives themselves.
"""
from __future__ import annotations

_GLOBAL = {"pre": [], "post": []}


class HookHandle:
    """What ``register_collective_hooks`` returns: ``remove()`` unregisters the hooks (calling it
    twice is harmless); as a context manager, the hooks are active inside the ``with`` block."""

    def __init__(self, lists, pre, post):
        self._entries = [(lists["pre"], pre), (lists["post"], post)]

    def remove(self) -> None:
        for lst, fn in self._entries:
            if fn is not None:
                for i, f in enumerate(lst):
                    if f is fn:
                        del lst[i]
                        break
        self._entries = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def register_collective_hooks(pre=None, post=None, group=None) -> HookHandle:
    """Registers ``pre(op, group, value)`` and / or ``post(op, group, result)`` (see module
    docstring) for the collectives of ``group``, or of every group when ``group`` is None.

    Returns:
        A HookHandle (``remove()``; usable in ``with``).
    Raises:
        TypeError: a hook is not callable, both are None, or ``group`` is not a ProcessGroup.
    """
    from .group import ProcessGroup
    for name, fn in (("pre", pre), ("post", post)):
        if fn is not None and not callable(fn):
            raise TypeError(f"register_collective_hooks: {name} must be callable or None, got "
                            f"{fn!r}")
    if pre is None and post is None:
        raise TypeError("register_collective_hooks: give a pre hook, a post hook or both")
    if group is None:
        lists = _GLOBAL
    elif isinstance(group, ProcessGroup):
        lists = {"pre": group.pre_hooks, "post": group.post_hooks}
    else:
        raise TypeError(f"register_collective_hooks: group must be a ProcessGroup or None, got "
                        f"{group!r}")
    if pre is not None:
        lists["pre"].append(pre)
    if post is not None:
        lists["post"].append(post)
    return HookHandle(lists, pre, post)


def run_pre(op, group, value) -> None:
    """Runs the pre hooks of ``group`` (global ones first)."""
    if _GLOBAL["pre"] or group.pre_hooks:   # (a copy: a hook may remove itself)
        for hook in tuple(_GLOBAL["pre"]) + tuple(group.pre_hooks):
            hook(op, group, value)


def run_post(op, group, result):
    """Runs the post hooks of ``group`` (global ones first); returns ``result``."""
    if _GLOBAL["post"] or group.post_hooks:
        for hook in tuple(_GLOBAL["post"]) + tuple(group.post_hooks):
            hook(op, group, result)
    return result
