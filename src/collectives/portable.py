"""Sharded programs that outlive their devices: export, deserialize, dynamic shapes.

An exported program records *shardings*, not devices: a mesh is written as its axis names and
sizes, and reads back as an ``AbstractMesh``. Calling the Exported binds it to a concrete mesh of
the same shape: the mesh of its sharded arguments, else the current mesh (``with mesh:``), else
``make_mesh`` over ``starling.devices()``; the program then runs partitioned through ``compile``
(one executable per mesh). So an artifact made on 4 in-process devices runs on 4 MPI processes,
or on any other 4 devices.
"""
from __future__ import annotations

from ..core.ir import Program
from ..lowering import export as _export
from .mesh import AbstractMesh, Mesh, current_mesh, make_mesh
from .sharding import NamedSharding, PartitionSpec


# ---- codecs for the export format ------------------------------------------------------------------

def _enc_mesh(m, enc):
    return {"sizes": list(m.devices_shape), "names": list(m.axis_names)}


def _dec_mesh(j, dec):
    return AbstractMesh(j["sizes"], j["names"])


def _enc_sharding(s, enc):
    return {"mesh": _enc_mesh(s.mesh, enc),
            "spec": [list(s.spec.axes(i)) for i in range(len(s.spec))],
            "partial": [[a, op] for a, op in s.partial]}


def _dec_sharding(j, dec):
    mesh = _dec_mesh(j["mesh"], dec)
    spec = PartitionSpec(*[tuple(e) if e else None for e in j["spec"]])
    return NamedSharding(mesh, spec, dict((a, op) for a, op in j["partial"]))


_export.register_param_codec("mesh", (Mesh, AbstractMesh), _enc_mesh, _dec_mesh)
_export.register_param_codec("named_sharding", NamedSharding, _enc_sharding, _dec_sharding)
_export.register_param_codec("frozenset", frozenset,
                             lambda v, enc: enc(sorted(v, key=repr)),
                             lambda j, dec: frozenset(dec(j)))


# ---- binding an abstract mesh to devices --------------------------------------------------------

def _abstract_meshes(obj, found):
    if isinstance(obj, AbstractMesh):
        found.add(obj)
    elif isinstance(obj, NamedSharding):
        _abstract_meshes(obj.mesh, found)
    elif isinstance(obj, Program):
        for e in obj.eqns:
            for v in e.params.values():
                _abstract_meshes(v, found)
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            _abstract_meshes(v, found)
    return found


def _bind(obj, mesh):
    if isinstance(obj, AbstractMesh):
        return mesh
    if isinstance(obj, NamedSharding):
        if isinstance(obj.mesh, AbstractMesh):
            return NamedSharding(mesh, obj.spec, dict(obj.partial))
        return obj
    if isinstance(obj, Program):
        from ..core.ir import Equation
        eqns = [Equation(e.primitive, e.invars, e.outvars,
                         {k: _bind(v, mesh) for k, v in e.params.items()}) for e in obj.eqns]
        return Program(obj.constvars, obj.consts, obj.invars, eqns, obj.outvars, obj.effects)
    if isinstance(obj, tuple):
        return tuple(_bind(v, mesh) for v in obj)
    if isinstance(obj, list):
        return [_bind(v, mesh) for v in obj]
    return obj


def concrete_mesh(abstract, ops, op="exported"):
    """The concrete mesh an abstract one runs on (see module docstring).

    Raises:
        ValueError: no mesh of that shape can be found (names the shape and what was tried).
    """
    for x in ops:
        m = getattr(getattr(x, "_sharding", None), "mesh", None)
        if m is not None and abstract.matches(m):
            return m
    m = current_mesh()
    if m is not None and abstract.matches(m):
        return m
    import starling
    if len(starling.devices()) == abstract.size:
        return make_mesh(abstract.sizes, abstract.axis_names)
    raise ValueError(f"{op}: the program was exported for a mesh {dict(abstract.shape)} "
                     f"({abstract.size} devices); pass arguments sharded over such a mesh, call "
                     f"it inside `with mesh:`, or run with {abstract.size} devices "
                     f"(starling.devices() has {len(starling.devices())})")


def _call_sharded(exported, prog, ops):
    found = _abstract_meshes(prog, set())
    _abstract_meshes(exported.in_shardings, found)
    sharded_args = any(getattr(x, "_sharding", None) is not None for x in ops)
    if not found and not sharded_args:
        return None
    if len(found) > 1:
        raise ValueError(f"exported {exported.fun_name}: the program uses {len(found)} meshes")
    if found:
        mesh = concrete_mesh(next(iter(found)), ops, f"exported {exported.fun_name}")
    else:
        mesh = next(x._sharding.mesh for x in ops if getattr(x, "_sharding", None) is not None)
    cache = exported.__dict__.setdefault("_per_mesh", {})
    key = (mesh, id(prog))
    fn = cache.get(key)
    if fn is None:
        from ..core.ir import eval_program
        from ..transforms.compile import compile as _compile
        bound = _bind(prog, mesh)
        in_sh = tuple(_bind(s, mesh) for s in exported.in_shardings)

        def flat(*xs):
            return eval_program(bound, bound.consts, *xs)
        fn = cache[key] = _compile(flat, in_shardings=in_sh)
    return fn(*ops)


_export.SHARDED_CALL[0] = _call_sharded
