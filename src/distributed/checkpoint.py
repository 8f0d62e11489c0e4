"""``starling.distributed.checkpoint``: save and restore pytrees of sharded arrays, each process
writing its own pieces, atomically, restorable onto any number of processes and any layout.

    from starling.distributed import checkpoint
    checkpoint.save("ckpt/step_10", {"params": params, "opt": opt_state}, step=10)
    state = checkpoint.restore("ckpt/step_10", shardings={"params": sh, "opt": None})
    manager = checkpoint.CheckpointManager("ckpt", keep=2)   # one directory per step

**Layout.** A checkpoint is a directory holding ``index.json`` and one safetensors file per
process that had pieces to write, ``<save id>-p<rank>.safetensors``. The index (JSON) gives the
pytree's structure (the skeleton of ``starling.save``: dicts, lists, tuples, NamedTuples,
modules as state dicts, Python scalars), the step and user metadata, the number of processes
that saved, and for every array leaf (by dotted path, e.g. ``params.0.w``): global ``shape``,
``dtype``, ``weak_type``, the ``layout`` it had (mesh axis names and sizes, PartitionSpec; None
for a plain array) and its ``pieces``: which file and tensor hold which index range (``box``:
``[start, stop)`` per dim) with the piece's CRC-32. Each distinct piece is written once: by the
first device of the mesh (flat order) holding it; a plain (unsharded) Array counts as replicated
and is written by rank 0 of the group. A pending Partial reduction is carried out first.

**Atomic.** ``save`` is collective over ``group`` (default: the world; without
``initialize()`` a single process). Every file is written under a temporary name, fsync'd, and
renamed into place; the new pieces have names of their own (a fresh save id), so the previous
checkpoint in the directory is untouched. Then the processes exchange what they wrote (or the
error they hit: a full disk, a permission); only if all succeeded does rank 0 write the index,
fsync it and rename it over the old one, the single step that makes the new checkpoint the
current one, and only then delete the previous save's files and leftovers of interrupted saves.
A process killed at any point leaves the previous checkpoint intact (survivors get
``RankFailure``; an error gets ``CheckpointError`` on every process). All processes must see the
directory (a shared filesystem).

**Restore** reads, in each process, only the pieces overlapping what that process holds in the
target layout (memory-mapped), checks their CRCs, and needs no communication: a checkpoint saved
by 4 processes restores onto 3 (after a failure), onto 1, or onto a different mesh shape or
PartitionSpec. Targets come from ``shardings`` (a NamedSharding, or None for a plain array, per
leaf or per subtree) or from ``target`` (a pytree of arrays whose layouts, shapes and dtypes the
result takes).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import uuid
import zlib

import numpy as np

from .. import tree as tree_util
from ..arrays.array import wrap
from ..collectives.sharded_array import ShardedArray, make_sharded, partial_piece
from ..collectives.sharding import NamedSharding
from ..core.avals import ShapedArray
from ..nn import serialization as ser
from . import runtime

__all__ = ["save", "restore", "read_index", "CheckpointManager", "CheckpointError"]

FORMAT = "starling.distributed.checkpoint"
VERSION = 1
INDEX = "index.json"
_DTYPES = {np.dtype(d).name: np.dtype(d) for d in ser._CODE_TO_DTYPE.values()}


class CheckpointError(RuntimeError):
    """A checkpoint could not be written (the previous one is intact), or one being read is
    incomplete or corrupted."""


# ---- durable files -------------------------------------------------------------------------------

def _fsync_path(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _publish(directory, name, write):
    """``write(tmp_path)``, fsync, rename to ``directory/name``, fsync the directory."""
    tmp = os.path.join(directory, f".{name}.tmp")
    try:
        write(tmp)
        _fsync_path(tmp)
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        _remove(tmp)
        raise
    _fsync_path(directory, directory=True)


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _crc(a) -> int:
    return zlib.crc32(np.ascontiguousarray(a).reshape(-1).view(np.uint8))


# ---- the group's exchange ------------------------------------------------------------------------

def _allgather_bytes(group, payload: bytes) -> list:
    """Every member's ``payload`` (guarded: a dead member raises RankFailure)."""
    if group is None:
        return [payload]
    from .failures import guarded
    from .group import _timeout
    from .mpi_types import mpi_view
    comm, t = group.comm, _timeout(group, None)
    n = np.array([len(payload)], np.int64)
    sizes = np.empty(group.size(), np.int64)
    guarded("checkpoint (sizes)", comm, t, lambda: comm.Iallgather(mpi_view(n), mpi_view(sizes)))
    data = np.frombuffer(payload, np.uint8).copy()
    out = np.empty(int(sizes.sum()), np.uint8)
    displs = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    buf, dt = mpi_view(out)
    guarded("checkpoint", comm, t, lambda: comm.Iallgatherv(
        mpi_view(data), [buf, [int(s) for s in sizes], [int(d) for d in displs], dt]),
        shapes=data.shape, dtype=data.dtype)
    return [out[d:d + s].tobytes() for d, s in zip(displs, sizes)]


def _share(group, obj) -> list:
    return [json.loads(b) for b in _allgather_bytes(group, json.dumps(obj).encode())]


# ---- saving ------------------------------------------------------------------------------------

def _layout(sharding):
    mesh = sharding.mesh
    return {"axis_names": list(mesh.axis_names), "mesh_shape": list(mesh.devices_shape),
            "spec": [list(sharding.spec.axes(i)) for i in range(len(sharding.spec))]}


def _plan_leaf(name, leaf, members, my_rank):
    """(index entry without CRCs, {tensor name: array this process writes})."""
    ser.safetensors_code(leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype,
                         f"checkpoint.save ({name!r})")
    if isinstance(leaf, ShardedArray):
        x = leaf
        failed = [d for d in x.mesh.flat_devices if d.process_index is None]
        if failed:
            raise ValueError(f"checkpoint.save: {name!r} lives partly on devices of failed "
                             f"processes {failed}; its pieces there are lost (restore it from "
                             "a checkpoint or an in-memory replica first)")
        if x.sharding.partial:
            x = x.redistribute(x.sharding.replace(partial={}))
        s = x.sharding
        shape = tuple(x.shape)
        pieces, mine, seen = [], {}, set()
        for pos, dev in enumerate(s.mesh.flat_devices):
            box = s.shard_bounds(shape, dev)
            if box in seen:
                continue
            seen.add(box)
            if dev.process_index not in members:
                raise ValueError(f"checkpoint.save: {name!r} has pieces on process "
                                 f"{dev.process_index}, which is not in the saving group "
                                 f"(world ranks {sorted(members)})")
            writer = members[dev.process_index]
            tensor = f"{name}@{len(pieces)}"
            pieces.append({"writer": writer, "tensor": tensor, "box": [list(b) for b in box]})
            if writer == my_rank:
                mine[tensor] = np.asarray(x._shards[pos])
        return {"shape": list(shape), "dtype": x.dtype.name, "weak_type": bool(x.weak_type),
                "layout": _layout(s), "pieces": pieces}, mine
    a = np.asarray(leaf)
    weak = bool(getattr(leaf, "weak_type", False))
    tensor = f"{name}@0"
    entry = {"shape": list(a.shape), "dtype": a.dtype.name, "weak_type": weak, "layout": None,
             "pieces": [{"writer": 0, "tensor": tensor, "box": [[0, n] for n in a.shape]}]}
    return entry, ({tensor: a} if my_rank == 0 else {})


def _save_group(group):
    if not runtime.is_initialized():
        if group is not None:
            raise ValueError("checkpoint.save: a group was given but starling.distributed is "
                             "not initialized")
        return None
    from .group import _group
    return _group(group)


def save(directory, tree, *, step=None, metadata=None, group=None) -> None:
    """Writes ``tree`` as a checkpoint in ``directory`` (see module docstring); collective over
    ``group``: every member calls it with its own pieces of the same pytree.

    Args:
        directory: the checkpoint directory (made if missing); a checkpoint already there is
            replaced atomically.
        tree: arrays (plain, NumPy, or sharded over meshes whose processes are all in
            ``group``) in dicts / lists / tuples / NamedTuples / modules, Python scalars and None.
        step: an int recorded in the index (``read_index(directory)["step"]``).
        metadata: a JSON-serialisable dict recorded in the index.
        group: the saving ProcessGroup (default: the world).
    Raises:
        CheckpointError: some process could not write (the message says which and why); the
            previous checkpoint is intact.
        RankFailure: a process failed during the save; the previous checkpoint is intact.
        TypeError / ValueError: unsupported leaves or dtypes (as ``starling.save``), metadata
            that is not JSON, pieces on processes outside the group.
    """
    g = _save_group(group)
    rank = 0 if g is None else g.rank()
    members = {0: 0} if g is None else {w: i for i, w in enumerate(g.ranks)}
    if step is not None and not isinstance(step, (int, np.integer)):
        raise TypeError(f"checkpoint.save: step must be an int or None, got {step!r}")
    try:
        json.dumps(metadata)
    except (TypeError, ValueError) as e:
        raise TypeError(f"checkpoint.save: metadata must be JSON-serialisable: {e}") from None
    directory = os.fspath(directory)
    leaves = {}
    skeleton = ser.encode_tree(tree, leaves.__setitem__, "checkpoint.save")
    entries, mine = {}, {}
    for name, leaf in leaves.items():
        entries[name], part = _plan_leaf(name, leaf, members, rank)
        mine.update(part)
    save_id = _share(g, uuid.uuid4().hex[:16] if rank == 0 else None)[0]
    fname = f"{save_id}-p{rank:05d}.safetensors"
    report = {"error": None, "crc": {}, "file": None}
    try:
        os.makedirs(directory, exist_ok=True)
        if mine:
            _publish(directory, fname, lambda p: ser.write_tensors(
                p, mine, {"format": FORMAT, "save_id": save_id, "rank": str(rank)}))
            report["file"] = fname
            report["crc"] = {t: _crc(a) for t, a in mine.items()}
    except Exception as e:   # reported to every process: all raise, nobody commits
        report["error"] = f"{type(e).__name__}: {e}"
    reports = _share(g, report)
    failed = [(r, rep["error"]) for r, rep in enumerate(reports) if rep["error"]]
    if not failed:
        commit_error = None
        if rank == 0:
            commit_error = _commit(directory, save_id, skeleton, entries, reports, step,
                                   metadata, len(reports))
        failed = _share(g, commit_error)[0]
        failed = [(0, failed)] if failed else []
    if failed:
        if report["file"]:   # nobody committed: this save's files are garbage
            _remove(os.path.join(directory, report["file"]))
        what = "; ".join(f"rank {r}: {msg}" for r, msg in failed)
        raise CheckpointError(f"checkpoint.save({directory!r}) failed, the previous checkpoint "
                              f"is intact: {what}")


def _commit(directory, save_id, skeleton, entries, reports, step, metadata, nprocs):
    """Rank 0: writes the index (the commit), then removes what it no longer refers to.
    Returns None, or the error that kept the index from being written."""
    files = {}
    for rep in reports:
        if rep["file"]:
            files[rep["file"]] = os.path.getsize(os.path.join(directory, rep["file"]))
    arrays = {}
    for name, e in entries.items():
        pieces = []
        for p in e["pieces"]:
            rep = reports[p["writer"]]
            pieces.append({"file": rep["file"], "tensor": p["tensor"], "box": p["box"],
                           "crc32": rep["crc"][p["tensor"]]})
        arrays[name] = dict(e, pieces=pieces)
    index = {"format": FORMAT, "version": VERSION, "save_id": save_id, "step": step,
             "metadata": metadata, "process_count": nprocs, "tree": skeleton,
             "arrays": arrays, "files": files}

    def write(path):
        with open(path, "w") as f:
            json.dump(index, f)
    try:
        _publish(directory, INDEX, write)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    for entry in os.listdir(directory):   # the previous save's files, interrupted saves' leftovers
        stale = entry.endswith(".tmp") or (entry.endswith(".safetensors") and entry not in files)
        if stale:
            try:
                _remove(os.path.join(directory, entry))
            except OSError:   # garbage left for the next save to collect
                pass
    return None


# ---- restoring -----------------------------------------------------------------------------------

def read_index(directory) -> dict:
    """The parsed ``index.json`` of the checkpoint in ``directory``.

    Raises:
        FileNotFoundError: no checkpoint there. CheckpointError: not a Starling checkpoint, or
            an unknown version.
    """
    path = os.path.join(os.fspath(directory), INDEX)
    try:
        with open(path) as f:
            index = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"checkpoint.restore: no checkpoint in {directory!r} (no "
                                f"{INDEX})") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"checkpoint: {path} is not valid JSON ({e})") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint: {path} is not a Starling checkpoint index")
    if index.get("version") != VERSION:
        raise CheckpointError(f"checkpoint: {path} has version {index.get('version')}; this "
                              f"Starling reads version {VERSION}")
    return index


class _Reader:
    """The pieces of one checkpoint, opened lazily; each piece's CRC is checked once."""

    def __init__(self, directory, index, verify):
        self.directory, self.index, self.verify = directory, index, verify
        self.views, self.checked = {}, set()

    def piece(self, p):
        f = p["file"]
        if f not in self.views:
            path = os.path.join(self.directory, f)
            size = self.index["files"].get(f)
            if not os.path.exists(path) or os.path.getsize(path) != size:
                raise CheckpointError(f"checkpoint: {path} is missing or has the wrong size "
                                      f"(expected {size} bytes): the checkpoint is incomplete")
            try:
                self.views[f] = ser.tensor_views(path)
            except ValueError as e:
                raise CheckpointError(f"checkpoint: {e}") from None
        try:
            a = self.views[f][p["tensor"]]
        except KeyError:
            raise CheckpointError(f"checkpoint: {f} has no tensor {p['tensor']!r}") from None
        key = (f, p["tensor"])
        if self.verify and key not in self.checked:
            if _crc(a) != p["crc32"]:
                raise CheckpointError(f"checkpoint: piece {p['tensor']!r} of {f} is corrupted "
                                      "(CRC-32 mismatch)")
            self.checked.add(key)
        return a

    def read_box(self, name, box):
        """The ``box`` (``((start, stop), ...)``) of array ``name`` as a new NumPy array."""
        e = self.index["arrays"][name]
        dtype = _DTYPES[e["dtype"]]
        out = np.empty(tuple(b - a for a, b in box), dtype)
        return assemble(out, box, e["pieces"], self.piece, name)


def assemble(out, box, pieces, get, name="array"):
    """Fills ``out`` (the ``box`` of a global array) from the disjoint ``pieces`` (dicts with a
    ``box``), ``get(piece)`` giving a piece's data; returns ``out``.

    Raises:
        CheckpointError: the pieces do not cover ``box``.
    """
    covered = 0
    for p in pieces:
        pbox = p["box"]
        lo = [max(a, pa) for (a, _), (pa, _) in zip(box, pbox)]
        hi = [min(b, pb) for (_, b), (_, pb) in zip(box, pbox)]
        if any(h <= l for l, h in zip(lo, hi)):
            continue
        src = tuple(slice(l - pa, h - pa) for l, h, (pa, _) in zip(lo, hi, pbox))
        dst = tuple(slice(l - a, h - a) for l, h, (a, _) in zip(lo, hi, box))
        out[dst] = get(p)[src]
        covered += int(np.prod([h - l for l, h in zip(lo, hi)]))
    if covered != out.size:   # pieces are disjoint: counting covered elements suffices
        raise CheckpointError(f"checkpoint: the saved pieces of {name!r} cover {covered} of the "
                              f"{out.size} elements asked for: the checkpoint is incomplete")
    return out


def _target_of(x, name, entry):
    """The layout a ``target`` leaf asks for (NamedSharding or None), after checking that it
    matches the saved array."""
    dtype = np.dtype(x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype)
    shape = tuple(x.shape if hasattr(x, "shape") else np.shape(x))
    if shape != tuple(entry["shape"]) or dtype.name != entry["dtype"]:
        raise ValueError(f"checkpoint.restore: target {name!r} is {dtype.name}{list(shape)} but "
                         f"the checkpoint holds {entry['dtype']}{entry['shape']}")
    return x.sharding if isinstance(x, ShardedArray) else None


def restore(directory, target=None, *, shardings=None, verify=True):
    """Reads the checkpoint in ``directory`` (see module docstring); needs no communication.

    Args:
        directory: a checkpoint directory written by ``save``.
        target: optional pytree with the saved structure whose array leaves give each
            result's layout (a ShardedArray's sharding; a plain array: plain), shape and dtype.
        shardings: optional pytree prefix of the saved structure: a NamedSharding (the result
            is laid out by it, over any mesh: this process reads only its devices' pieces) or
            None (a plain Array with the whole value) per leaf or subtree.
        verify: check each piece's CRC-32 before using it.
    Returns:
        The saved pytree (modules come back as state dicts, as with ``starling.load``).
    Raises:
        FileNotFoundError: no checkpoint. CheckpointError: missing, truncated or corrupted
            pieces. ValueError: a target that does not match (shape, dtype, structure) or a
            sharding that does not fit an array. TypeError: ``target`` and ``shardings`` both
            given, or a sharding that is not a NamedSharding.
    """
    if target is not None and shardings is not None:
        raise TypeError("checkpoint.restore: give target or shardings, not both")
    directory = os.fspath(directory)
    index = read_index(directory)
    arrays = index["arrays"]
    skeleton = ser.decode_tree(index["tree"], {n: _Name(n) for n in arrays})
    paths, names, treedef = tree_util.paths_leaves_treedef(skeleton)
    if target is not None:
        given = _by_path(target)
        missing = [tree_util.path_str(p) for p in paths if p not in given]
        extra = sorted(tree_util.path_str(p) for p in set(given) - set(paths))
        if missing or extra:
            raise ValueError(f"checkpoint.restore: target does not have the checkpoint's "
                             f"structure: missing {missing}, not in the checkpoint {extra}")
        layouts = [_target_of(given[p], n.name, arrays[n.name]) if isinstance(n, _Name) else None
                   for p, n in zip(paths, names)]
    elif shardings is not None:
        plain = _plain(skeleton)   # modules' OrderedDicts match the user's dicts
        try:
            flat = tree_util.broadcast_prefix(shardings, plain)
        except ValueError as e:
            raise ValueError(f"checkpoint.restore: shardings is not a pytree prefix of the "
                             f"checkpoint's structure: {e}") from None
        by_path = dict(zip(tree_util.paths_leaves_treedef(plain)[0], flat))
        layouts = [by_path[p] for p in paths]
    else:
        layouts = [None] * len(names)
    reader = _Reader(directory, index, verify)
    values = [_read_leaf(reader, n.name, arrays[n.name], s) if isinstance(n, _Name) else n
              for n, s in zip(names, layouts)]
    return tree_util.unflatten(treedef, values)


def _by_path(tree) -> dict:
    paths, leaves, _ = tree_util.paths_leaves_treedef(tree)
    return dict(zip(paths, leaves))


def _plain(node):
    """``node`` with OrderedDicts as plain dicts (the same paths, the user's container type)."""
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, tuple) and not hasattr(type(node), "_fields"):
        return tuple(_plain(v) for v in node)
    if isinstance(node, tuple):
        return type(node)(*[_plain(v) for v in node])
    return node


class _Name:
    """Stands for an array leaf (by name) while the structure is rebuilt."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<saved array {self.name!r}>"


def _read_leaf(reader, name, entry, sharding):
    shape = tuple(entry["shape"])
    aval = ShapedArray(shape, _DTYPES[entry["dtype"]], bool(entry["weak_type"]))
    if sharding is None:
        return wrap(reader.read_box(name, tuple((0, n) for n in shape)), aval.weak_type)
    if not isinstance(sharding, NamedSharding):
        raise TypeError(f"checkpoint.restore: the target of {name!r} must be a NamedSharding or "
                        f"None, got {sharding!r}")
    sharding.check_shape(shape, f"checkpoint.restore ({name!r})")
    shards = tuple(partial_piece(reader.read_box(name, sharding.shard_bounds(shape, d)),
                                 sharding, d) if d.is_local else None
                   for d in sharding.mesh.flat_devices)
    return make_sharded(aval, sharding, shards)


# ---- one directory per step --------------------------------------------------------------------

class CheckpointManager:
    """Checkpoints of a run, one directory per step: ``root/step_<step>`` (8 digits).

    ``save(step, tree)`` writes one (collective, like ``save``) and keeps the newest ``keep``
    (older ones are removed after the new one is complete: renamed away first, so a step
    directory is either whole or absent); ``steps()`` lists the complete ones, ``latest_step()``
    the newest, ``restore(step=None, ...)`` reads one (default: the newest).

    Args:
        root: the directory holding the step directories (made on first save).
        keep: how many checkpoints to keep (None: all).
        group: the saving ProcessGroup (default: the world).
    Raises:
        ValueError: keep < 1.
    """

    _STEP = re.compile(r"^step_(\d{8,})$")

    def __init__(self, root, keep=2, group=None):
        if keep is not None and (not isinstance(keep, int) or keep < 1):
            raise ValueError(f"CheckpointManager: keep must be a positive int or None, got "
                             f"{keep!r}")
        self.root, self.keep, self.group = os.fspath(root), keep, group

    def directory(self, step) -> str:
        return os.path.join(self.root, f"step_{int(step):08d}")

    def steps(self) -> list:
        """The steps with a complete checkpoint, ascending."""
        if not os.path.isdir(self.root):
            return []
        out = []
        for entry in os.listdir(self.root):
            m = self._STEP.match(entry)
            if m and os.path.exists(os.path.join(self.root, entry, INDEX)):
                out.append(int(m.group(1)))
        return sorted(out)

    def latest_step(self):
        """The newest complete step, or None."""
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, step, tree, metadata=None) -> None:
        """Writes ``tree`` as step ``step`` (see ``save``), then drops checkpoints beyond
        ``keep``."""
        if not isinstance(step, (int, np.integer)) or step < 0:
            raise ValueError(f"CheckpointManager.save: step must be a non-negative int, got "
                             f"{step!r}")
        save(self.directory(step), tree, step=int(step), metadata=metadata, group=self.group)
        g = _save_group(self.group)
        if (g is None or g.rank() == 0) and self.keep is not None:
            for old in self.steps()[:-self.keep]:
                if old == step:
                    continue
                trash = os.path.join(self.root, f".trash-step_{old:08d}-{uuid.uuid4().hex[:8]}")
                os.replace(self.directory(old), trash)
                shutil.rmtree(trash, ignore_errors=True)

    def restore(self, step=None, target=None, *, shardings=None, verify=True):
        """Reads step ``step`` (default: the newest) as ``restore`` does.

        Raises:
            FileNotFoundError: no checkpoint (of that step).
        """
        if step is None:
            step = self.latest_step()
            if step is None:
                raise FileNotFoundError(f"CheckpointManager: no checkpoint in {self.root!r}")
        return restore(self.directory(step), target, shardings=shardings, verify=verify)
