"""``compile`` of sharded programs: partition once, compile each per-device Program, run them on
their devices concurrently.

``compile`` calls ``build(prog, leaf_shardings, out_shardings, backend)`` (installed as its
sharding hook) for a signature with sharded arguments, ``in_shardings`` / ``out_shardings``, or a
program holding shard_map / sharding constraints. The global Program (already through the common
pass pipeline) is partitioned (src/collectives/partition.py); each distinct per-device Program
goes through the pipeline again, the overlap pass (src/collectives/overlap.py: collectives start
as early and are waited for as late as the data allow) and the backend's compiler (cpp: fused
kernels; collectives are unfused equations calling the runtime), and a call lays the arguments out, runs every device's
executable in its worker thread, and returns sharded arrays. ``lower(...).ir`` shows the
per-device Program.
"""
from __future__ import annotations

from .mesh import different_meshes_error
from ..lowering.pipeline import run_pipeline
from .constraint import sharding_constraint_p
from .overlap import overlap_collectives
from .partition import partition, replicated
from .shard_map import shard_map_p
from .sharding import NamedSharding


def _program_mesh(prog):
    for eqn in prog.eqns:
        if eqn.primitive is shard_map_p:
            return eqn.params["mesh"]
        if eqn.primitive is sharding_constraint_p:
            return eqn.params["sharding"].mesh
    return None


class ShardedExecutable:
    """Runs a Partitioned program with compiled per-device executables (``exe(consts, args)``
    like every backend's executable; the consts are the partitioned program's own)."""

    supports_donation = False

    def __init__(self, part, executables, programs):
        self.part = part
        self._exes = executables
        self.program = programs[0] if programs else None
        self.programs = programs
        sources = [getattr(e, "source", None) for e in executables.values()]
        self.source = "\n\n".join(s for s in sources if s) or None

    def __call__(self, consts, args):
        return self.part.run(list(args), executables=self._exes)


def build(prog, leaf_shardings, out_shardings, backend):
    """A ShardedExecutable for ``prog``, or None when nothing is sharded.

    Args:
        leaf_shardings: one NamedSharding or None (replicated / not sharded) per invar.
        out_shardings: None, or one NamedSharding or None per output.
    Raises:
        ValueError: shardings over different meshes.
    """
    meshes = {s.mesh for s in leaf_shardings if isinstance(s, NamedSharding)}
    meshes |= {s.mesh for s in (out_shardings or ()) if isinstance(s, NamedSharding)}
    pm = _program_mesh(prog)
    if pm is not None:
        meshes.add(pm)
    if not meshes:
        return None
    if len(meshes) > 1:
        items = [(f"argument {i} {v.aval.str_short()}", s.mesh)
                 for i, (v, s) in enumerate(zip(prog.invars, leaf_shardings))
                 if isinstance(s, NamedSharding)]
        items += [(f"out_sharding {i}", s.mesh) for i, s in enumerate(out_shardings or ())
                  if isinstance(s, NamedSharding)]
        if pm is not None:
            items.append(("a shard_map / sharding constraint inside", pm))
        raise different_meshes_error("compile", items, "a compiled function runs on one mesh")
    mesh = meshes.pop()
    in_sh = [s if isinstance(s, NamedSharding) else replicated(mesh) for s in leaf_shardings]
    part = partition(prog, in_sh, out_shardings)
    exes, shown = {}, []
    for lp in part.distinct_programs:
        opt = overlap_collectives(run_pipeline(lp, label="per-device"))
        exes[id(lp)] = backend.compile(opt)
        shown.append(getattr(exes[id(lp)], "program", None) or opt)
    return ShardedExecutable(part, exes, shown)
