"""Dynamic shapes on the cpp backend: ONE native artifact for every size in range.

A Program with symbolic dims (``compile(..., dynamic_shapes=)``) is fused and rendered once:
every ``fused_kernel`` becomes a C++ function that reads its sizes (the values of its shape
variables, ``Kernel.size_exprs``) from the launcher's int64 sizes array, so the shared object is
compiled once (codegen.py, ``_emit_symbolic``). What depends on the sizes is only the cheap
Python *schedule*: for each distinct ShapeEnv (``env.key``) the executable binds the sizes into
the non-fused parts of the Program (``bind_shapes``: reshape sizes, dot_general layouts, control
flow bodies, ``dim_value``...), evaluates each kernel's size parameters and builds the schedule
calling ``kernel.run(sizes, outs, *inputs)``. Schedules are cached per env key (bounded: the
oldest is dropped beyond ``MAX_SCHEDULES``).

Fused kernels are hidden from ``bind_shapes`` behind ``KernelRef`` (an opaque param), so binding
never copies their sub-Programs and the schedule finds each kernel's launcher by identity.
"""
from __future__ import annotations

import sympy

from ....core.ir import Equation, Program
from ....core.symbolic import bind_shapes
from ...fused import fused_kernel_p

MAX_SCHEDULES = 64


class KernelRef:
    """A fused kernel's sub-Program as an opaque equation param (not bound by bind_shapes)."""

    __slots__ = ("program",)

    def __init__(self, program):
        self.program = program

    @property
    def eqns(self):
        return self.program.eqns


def kernel_program(param):
    """The sub-Program of a fused_kernel ``program`` param (a Program or a KernelRef)."""
    return param.program if isinstance(param, KernelRef) else param


def with_kernel_refs(prog, kernel_prims=(fused_kernel_p,)):
    """``prog`` with the ``program`` param of every equation of ``kernel_prims`` (native
    kernels; also inside control-flow bodies) wrapped in a KernelRef."""
    eqns, changed = [], False
    for eqn in prog.eqns:
        params = eqn.params
        if eqn.primitive in kernel_prims:
            params = dict(params, program=KernelRef(params["program"]))
        else:
            new = {}
            for k, p in params.items():
                if isinstance(p, Program):
                    new[k] = with_kernel_refs(p, kernel_prims)
                elif isinstance(p, tuple) and p and all(isinstance(q, Program) for q in p):
                    new[k] = tuple(with_kernel_refs(q, kernel_prims) for q in p)
            if new:
                params = dict(params, **new)
        if params is not eqn.params:
            changed = True
            eqn = Equation(eqn.primitive, eqn.invars, eqn.outvars, params)
        eqns.append(eqn)
    if not changed:
        return prog
    return Program(prog.constvars, prog.consts, prog.invars, eqns, prog.outvars, prog.effects)


class CppDynamicExecutable:
    """``exe(consts, args, shape_env=env) -> list of Arrays`` for a fused Program with symbolic
    dims. ``.program`` is the symbolic fused Program and ``.source`` the generated C++ (compiled
    once); ``for_env(env)`` gives the per-size CppExecutable (schedule bound to ``env``).

    Args:
        program: the fused symbolic Program. size_exprs: id(kernel sub-Program) -> its kernel's
            size parameters (sympy expressions). make_executable: ``(bound Program, {id(sub):
            sizes}) -> CppExecutable`` (cpp.py builds the schedule). kernel_prims: the
            primitives whose ``program`` param is a native kernel.
    Raises (when called): TypeError without a shape_env; KeyError (from bind_shapes) for a
        shape variable missing from it.
    """

    def __init__(self, program, size_exprs, make_executable, source, library_path,
                 kernel_prims=(fused_kernel_p,)):
        self.program = program
        self.source = source
        self.library_path = library_path
        self._size_exprs = size_exprs
        self._make = make_executable
        self._ref_program = with_kernel_refs(program, kernel_prims)
        self._by_env = {}

    @property
    def schedule_source(self):
        return None

    def for_env(self, shape_env):
        """The CppExecutable running this Program for the sizes of ``shape_env``."""
        if shape_env is None:
            raise TypeError("the cpp executable of a Program with symbolic dims needs "
                            "shape_env= (the sizes of its shape variables)")
        key = getattr(shape_env, "key", None)
        if key is None:
            key = tuple(sorted(((v.name, getattr(v, "dummy_index", 0)), n)
                               for v, n in shape_env.items()))
        exe = self._by_env.get(key)
        if exe is None:
            exe = self._build(shape_env)
            while self._by_env and len(self._by_env) >= MAX_SCHEDULES:
                self._by_env.pop(next(iter(self._by_env)))   # the oldest
            self._by_env[key] = exe
        return exe

    def _build(self, env):
        senv = {v: sympy.Integer(int(n)) for v, n in env.items()}
        sizes = {}
        for sid, exprs in self._size_exprs.items():
            vals = []
            for e in exprs:
                val = e.xreplace(senv)
                if not val.is_Integer:
                    missing = sorted(s.name for s in val.free_symbols)
                    raise KeyError(f"cpp: no size for shape variable(s) {missing} of a kernel")
                vals.append(int(val))
            sizes[sid] = tuple(vals)
        return self._make(bind_shapes(self._ref_program, env), sizes)

    def __call__(self, consts, args, shape_env=None):
        return self.for_env(shape_env)(consts, args)

    def run_buffers(self, *bufs, shape_env=None):
        """Runs on NumPy buffers for the sizes of ``shape_env``; returns NumPy buffers."""
        return self.for_env(shape_env).run_buffers(*bufs)
