"""The ``cpp`` backend: fused C++ kernels for CPUs, compiled with the system compiler.

``compile(program)``:

1. runs the backend's own passes after the common pipeline: complex decomposition, fusion
   (elementwise chains, broadcasts, reductions into ``fused_kernel`` equations), DCE;
2. renders every fused group (also inside control-flow bodies) as one C++ function
   (codegen.py; formulas in formulas.py) and compiles them all as ONE shared object,
   cached on disk by content hash (src/lowering/cache.py);
3. builds the *schedule*: a Python function generated for the Program that calls, in order,
   each kernel (through the C launcher in runtime.py), or the primitive's NumPy
   implementation for what is not fused: shape ops (NumPy views), sorting, linear algebra...
   (``gather`` / ``scatter`` / ``concatenate`` are kernels of their own: indexing.py,
   concatenate.py; argmax / argmin are
   reductions of the fused kernels). Float products are ``fused_matmul`` kernels on Starling's
   native strided GEMM (gemm.py); the others run through ``dot_general``'s implementation
   (the same native GEMM when the layout allows, else ``np.matmul``). The control-flow
   primitives (switch, while, scan) run their bodies as compiled schedules of the same module. Kernels with a
   memory plan (the ``reuse`` param of passes/buffer_reuse.py) are launched as
   ``k.run((), outs, *inputs)`` writing into a dead intermediate (after the run-time check
   ``buffers.take``) or a donated argument (``d<i>`` parameters of the schedule, checked by
   ``compile``; ``CppExecutable.call_donated``).

Dynamic shapes (``supports_dynamic_shapes``): a Program with symbolic dims compiles to ONE shared
object whose kernels read their sizes at run time (``k.run(sizes, outs, *inputs)``); per
distinct ShapeEnv only the schedule is rebuilt from the bound Program (dynamic.py).

Threads: every kernel takes them from Starling's one thread pool (src/lowering/runtime/native.py,
native/pool.cpp), never from OpenMP or BLAS.

Everything that does not become native code is logged once per primitive on the
``starling.lowering`` logger, at DEBUG level; with ``STARLING_LOG_FALLBACKS=1`` at WARNING
(elementwise and reduction primitives, which break a fused kernel) or INFO (the others), so
that ordinary use (a notebook) shows nothing unless asked. Without a C++ compiler the backend
warns once and runs programs through numpy_ref. Set ``STARLING_CPP_STRICT=1`` to turn code-generation failures into errors
(tests do) instead of a warning and a NumPy fallback.
"""
from __future__ import annotations

import functools
import logging
import os
import warnings

import numpy as np

from ....arrays.array import wrap
from ....core.ir import Literal, Program, Var
from ....core.symbolic import program_is_symbolic
from ....core.trace import EVAL_TRACE, set_current_trace
from ... import buffers as _buffers
from ... import cache
from ... import debug as _debug
from ...fused import fused_kernel_p
from ...fused_matmul import fused_matmul_p
from ...passes.epilogue import epilogue_fusion
from ...passes.buffer_reuse import buffer_reuse
from ...passes.complex_decompose import complex_decompose
from ...passes.dce import dce
from ...passes.remat import remat
from ...passes.fusion import (ARG_REDUCE_PRIMITIVES, ELEMENTWISE, REDUCE, REDUCE_PRIMITIVES, SINGLE,
                             VIEW, VIEW_PRIMITIVES, FusionPolicy, fusion)
from ...pipeline import run_pipeline
from ...runtime import native as _runtime
from . import codegen as CG
from . import formulas as F
from . import gemm
from . import dynamic, runtime
from .dims import static_shape
from .. import register_backend
from ..numpy_ref import NumpyRefExecutable

logger = logging.getLogger("starling.lowering")

# Primitives whose NumPy implementation IS the intended native path (the native GEMM, views,
# one copy loop in C that a generated kernel would repeat, or reimplemented below): never
# reported as fallbacks.
_NATIVE_BY_DESIGN = frozenset({"dot_general", "ragged_dot", "reshape", "squeeze",
                               "broadcast_in_dim", "transpose", "while", "switch", "scan",
                               "stop_gradient", "real", "imag", "slice", "concatenate", "pad"})
_REPORTED = set()
_WARNED_NO_COMPILER = []


def fallback_level(prim):
    """The logging level of "cpp backend runs <prim> through NumPy": DEBUG, unless the
    environment has STARLING_LOG_FALLBACKS set (not "0"): then WARNING for elementwise and
    reduction primitives, INFO for the others."""
    if os.environ.get("STARLING_LOG_FALLBACKS", "0") in ("", "0"):
        return logging.DEBUG
    return logging.WARNING if prim.family in ("elementwise", "reduction") else logging.INFO


def _report_fallback(prim):
    if prim.name in _REPORTED or prim.name in _NATIVE_BY_DESIGN:
        return
    # collectives (and the start / wait halves of overlapped ones) call the runtime: moving
    # bytes is their native path; ``native_impl``: the implementation is native code already
    # (random bits from starling._native)
    if prim.meta.get("collective") or prim.family == "collectives" or \
            prim.meta.get("native_impl"):
        return
    _REPORTED.add(prim.name)
    logger.log(fallback_level(prim), "starling.lowering: cpp backend runs %s through NumPy",
               prim.name)


# The launcher's fixed limits (runtime.py: ST_MAX_ARGS buffers + sizes, ST_MAX_ND dims);
# larger groups / ranks run unfused instead of failing at launch.
_MAX_KERNEL_ARGS = 448
_MAX_KERNEL_NDIM = 32


class CppPolicy(FusionPolicy):
    """What the C++ kernels can do (asks the formula table); keeps rendered kernels."""

    def __init__(self):
        self.rendered = {}   # id(sub-Program) -> (sub-Program, Kernel)

    def kind(self, eqn):
        # Symbolic dims (dynamic shapes) are fine: kernels take their sizes at run time.
        name = eqn.primitive.name
        if any(len(v.aval.shape) > _MAX_KERNEL_NDIM for v in eqn.outvars):
            return None
        if name in VIEW_PRIMITIVES:
            dt = np.dtype(eqn.invars[0].aval.dtype)
            return VIEW if (F.supported_dtype(dt) or dt.kind == "c") else None
        if name in ("real", "imag") and np.dtype(eqn.invars[0].aval.dtype) in (
                np.dtype(np.complex64), np.dtype(np.complex128)):
            return VIEW
        if name in REDUCE_PRIMITIVES:
            dt = np.dtype(eqn.invars[0].aval.dtype)
            if not F.supported_dtype(dt):
                return None
            if name in ("reduce_and", "reduce_or") and dt.kind != "b":
                return None
            axes = tuple(eqn.params["axes"])
            if name in ARG_REDUCE_PRIMITIVES and axes != tuple(sorted(axes)):
                return None   # the kernel's flat index runs over the reduced axes in order
            return REDUCE
        if name == "complex_pack":
            return ELEMENTWISE if F.supported_dtype(eqn.invars[0].aval.dtype) else None
        single = CG.single_kernel_module(name)
        if single is not None:
            return SINGLE if single.supported(eqn) else None
        if eqn.primitive.scalar_formula is None or eqn.primitive.multiple_results or \
                len(eqn.outvars) != 1:
            return None
        expr = F.render(eqn.primitive, [f"a{i}" for i in range(len(eqn.invars))],
                        [v.aval.dtype for v in eqn.invars], eqn.outvars[0].aval.dtype,
                        eqn.params)
        return ELEMENTWISE if expr is not None else None

    def view_ok(self, base_aval, chain):
        dt = np.dtype(base_aval.dtype)
        shape = tuple(base_aval.shape)
        if dt.kind == "c":
            acc = CG.Access(0, dt, shape, CG.c_strides(shape, 2), 0, True)
        else:
            acc = CG.Access(0, dt, shape, CG.c_strides(shape))
        try:
            for eqn in chain:
                acc = CG.apply_view(acc, eqn)
        except CG.NotFusible:
            return False
        return not acc.complex_base

    def validate(self, sub):
        if len(sub.invars) + len(sub.outvars) > _MAX_KERNEL_ARGS:
            logger.debug("starling.lowering: group of %d buffers not fused (limit %d)",
                         len(sub.invars) + len(sub.outvars), _MAX_KERNEL_ARGS)
            return False
        try:
            kernel = CG.render_kernel(sub, "__ST_KERNEL__")
        except CG.NotFusible as e:
            logger.debug("starling.lowering: group not fused: %s", e)
            return False
        self.rendered[id(sub)] = (sub, kernel)
        return True


def cpp_passes(policy, donated=None):
    """The backend's passes after the common pipeline, in order; ``donated``: None or one bool
    per invar (buffers the caller donates, candidates of the memory plan)."""
    return [("complex_decompose", complex_decompose),
            ("fusion", lambda p: fusion(p, policy)),
            ("epilogue", lambda p: epilogue_fusion(p, gemm.validator(policy))),
            ("remat", lambda p: remat(p, policy.kind, policy.validate, gemm.validator(policy))),
            ("dce", dce),
            ("buffer_reuse", lambda p: buffer_reuse(p, donated))]


class CppExecutable:
    """``exe(consts, args) -> list of Arrays``; ``.program`` is the fused Program, ``.source``
    the generated C++ (``.schedule_source`` the generated Python schedule). The executable runs
    with the constants it was compiled with (the ``consts`` argument is ignored)."""

    def __init__(self, program, run, source, schedule_source, out_weak, library_path, steps):
        self.program = program
        self._run = run
        self.source = source
        self.schedule_source = schedule_source
        self._out_weak = out_weak
        self.library_path = library_path
        self._steps = steps          # (namespace, {callable name: (primitive, params)})
        self._debug_run = None

    def __call__(self, consts, args):
        if _debug.active() is not None:
            return self._call_recorded(args)
        outs = self._run(*[a._buf for a in args])
        return [wrap(o, w) for o, w in zip(outs, self._out_weak)]

    def run_buffers(self, *bufs):
        """Runs on NumPy buffers; returns a tuple of NumPy buffers."""
        return self._run(*bufs)

    @property
    def donation_slots(self):
        """Indices of the invars whose donated buffers the memory plan may write into."""
        return getattr(self._run, "donation_slots", ())

    def call_donated(self, args, donated):
        """Like ``exe(consts, args)``; ``donated`` has one entry per ``donation_slots`` index:
        that argument's buffer, which the caller checked may be overwritten
        (``starling.lowering.buffers.donatable``), or None (allocate instead)."""
        if _debug.active() is not None:
            return self._call_recorded(args)
        outs = self._run(*[a._buf for a in args], *donated)
        return [wrap(o, w) for o, w in zip(outs, self._out_weak)]

    def _call_recorded(self, args):
        """Under ``starling.debug_mode()``: the same schedule, recording every step (each fused
        kernel is one record, primitive "fused_kernel" with its group's primitives)."""
        if self._debug_run is None:
            ns, meta = self._steps
            rec = dict(ns)
            for key, (prim, params) in meta.items():
                rec[key] = _recording(ns[key], prim, params)
            self._debug_run = _rebind(self._run, rec)
        outs = self._debug_run(*[a._buf for a in args])
        return [wrap(o, w) for o, w in zip(outs, self._out_weak)]


def _recording(fn, prim, params):
    def record(bufs, out):
        dm = _debug.active()
        if dm is not None:
            outs = out if isinstance(out, (tuple, list)) else [out]
            dm.record(prim, list(bufs), list(outs), params, source="compiled:cpp")
        return out

    def run(*bufs):
        return record(bufs, fn(*bufs))

    if hasattr(fn, "run"):   # a kernel launcher: the memory plan calls k.run(sizes, outs, ...)
        run.run = lambda sizes, outs, *bufs: record(bufs, fn.run(sizes, outs, *bufs))
    return run


def _rebind(fn, namespace):
    import types
    return types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__)


class CppBackend:
    """The ``cpp`` backend: fused kernels rendered as C++, compiled together into one shared object
    per ``compile_many`` call and cached on disk by content hash. ``supports`` is true for every
    primitive with a reference impl; symbolic shapes (one shared object for all sizes) and donated
    buffers are supported."""
    name = "cpp"
    # A Program with symbolic dims compiles to ONE shared object (dynamic.py).
    supports_dynamic_shapes = True

    def supports(self, primitive) -> bool:
        return primitive.impl is not None

    # compile(prog, donated=mask): the memory plan may write outputs into donated buffers.
    supports_donation = True

    def compile(self, program, donated=None):
        return self.compile_many([program], donated=None if donated is None else [donated])[0]

    def compile_many(self, programs, donated=None):
        """Executables for several Programs whose kernels are compiled together (one compiler
        run: what a test suite or an exporter compiling many functions wants). ``donated``:
        None, or per Program None / one bool per invar (see ``CppExecutable.call_donated``)."""
        compiler = cache.find_compiler()
        if compiler is None:
            if not _WARNED_NO_COMPILER:
                _WARNED_NO_COMPILER.append(True)
                warnings.warn("starling: no C++ compiler found (install g++ or set STARLING_CXX);"
                              " the cpp backend runs programs through numpy_ref", RuntimeWarning,
                              stacklevel=4)
            return [NumpyRefExecutable(p) for p in programs]
        policy = CppPolicy()
        donated = donated or [None] * len(programs)
        fused = [run_pipeline(p, passes=cpp_passes(policy, d), label="cpp")
                 for p, d in zip(programs, donated)]
        try:
            return _build_executables(fused, policy, compiler)
        except (cache.CompileError, CG.NotFusible) as e:
            if os.environ.get("STARLING_CPP_STRICT"):
                raise
            warnings.warn(f"starling: cpp backend could not compile this program; running it "
                          f"through numpy_ref ({str(e).splitlines()[0]})", RuntimeWarning,
                          stacklevel=4)
            return [NumpyRefExecutable(p) for p in programs]


# ---- building the executable ---------------------------------------------------------------------

def _collect_kernels(prog, found):
    """Every fused_kernel / fused_matmul sub-Program of ``prog`` (recursively), in order."""
    for eqn in prog.eqns:
        if eqn.primitive is fused_kernel_p or eqn.primitive is fused_matmul_p:
            found.append(eqn.params["program"])
            continue
        for p in eqn.params.values():
            if isinstance(p, Program):
                _collect_kernels(p, found)
            elif isinstance(p, tuple) and p and all(isinstance(q, Program) for q in p):
                for q in p:
                    _collect_kernels(q, found)
    return found


def _build_executables(progs, policy, compiler):
    """Executables for fused Programs ``progs``, all kernels compiled as one shared object."""
    subs_of = [_collect_kernels(prog, []) for prog in progs]
    names, sources = {}, {}
    for sub in (s for subs in subs_of for s in subs):
        entry = policy.rendered.get(id(sub))
        kernel = entry[1] if entry is not None and entry[0] is sub else \
            gemm.render_any(sub, "__ST_KERNEL__")
        if kernel.source not in sources:
            sources[kernel.source] = f"st_k{len(sources)}"
        names[id(sub)] = (sources[kernel.source], kernel)
    lib, path, source = None, None, None
    if sources:
        body = [src.replace("__ST_KERNEL__", name) for src, name in sources.items()]
        source = F.prelude() + "\n\n".join(body) + "\n"
        libs = (f"-l:{F.mvec_soname()}", "-lm") if F.mvec_functions() else ("-lm",)
        lib, path = cache.load(source, compiler=compiler, libs=libs,
                               symbols=tuple(sources.values()))
        _runtime.init_library(lib)   # the thread pool and GEMM entry points
    launchers, by_sub, size_exprs = {}, {}, {}
    for sub in (s for subs in subs_of for s in subs):
        name, kernel = names[id(sub)]
        exprs = getattr(kernel, "size_exprs", ())   # symbolic kernels: their size parameters
        key = (name, tuple((tuple(a.shape), np.dtype(a.dtype)) for a in kernel.out_avals),
               exprs)
        if key not in launchers:
            launchers[key] = runtime.make_kernel(lib, name, kernel.in_dtypes,
                                                     kernel.out_avals, kernel.work > 1 << 16,
                                                     exprs)
        by_sub[id(sub)] = launchers[key]
        if exprs:
            size_exprs[id(sub)] = exprs
    exes = []
    for prog, subs in zip(progs, subs_of):
        if program_is_symbolic(prog):
            mine = {id(s): size_exprs[id(s)] for s in subs if id(s) in size_exprs}
            exes.append(_dynamic_executable(prog, by_sub, mine, source, path))
            continue
        sched = _Schedule(by_sub)
        run, text = sched.function(prog, "run")
        out_weak = [v.aval.weak_type for v in prog.outvars]
        exes.append(CppExecutable(prog, run, source, text, out_weak, path,
                                  (sched.ns, sched.meta)))
    return exes


def _dynamic_executable(prog, by_sub, size_exprs, source, path):
    """The executable of a Program with symbolic dims: its kernels are compiled once (above);
    per distinct ShapeEnv only the schedule is built, from the bound Program (dynamic.py)."""
    out_weak = [v.aval.weak_type for v in prog.outvars]

    def make(bound, sizes):
        sched = _Schedule(by_sub, sizes)
        run, text = sched.function(bound, "run")
        return CppExecutable(bound, run, source, text, out_weak, path, (sched.ns, sched.meta))
    return dynamic.CppDynamicExecutable(prog, size_exprs, make, source, path,
                                            (fused_kernel_p, fused_matmul_p))


def _sized(k, sizes):
    """Launcher ``k`` bound to its size values: ``f(*inputs)`` like a static launcher, and
    ``f.run(sizes, outs, *inputs)`` where sizes () means the bound ones."""
    f = functools.partial(k.run, sizes, (None,) * k.nout)
    run = k.run

    def run_sized(s, outs, *ins):
        return run(s or sizes, outs, *ins)
    f.run, f.sizes, f.launcher = run_sized, sizes, k
    return f


def _debug_meta(eqn):
    if eqn.primitive is fused_kernel_p:
        sub = eqn.params["program"]
        return "fused_kernel", {"name": eqn.params["name"],
                                "primitives": [e.primitive.name for e in sub.eqns]}
    params = {k: v for k, v in eqn.params.items()
              if not isinstance(v, Program) and not (isinstance(v, tuple) and v
                                                     and isinstance(v[0], Program))}
    return eqn.primitive, params


# Equations launched through a kernel launcher: the memory plan may give them ``reuse``.
_KERNEL_PRIMS = (fused_kernel_p, fused_matmul_p)


class _Schedule:
    """Generates the Python function running a Program: one line per equation."""

    def __init__(self, kernels, sizes=None):
        self.kernels = kernels   # id(sub-Program) -> launcher
        self.sizes = sizes or {}  # id(sub-Program) -> its kernel's size values (dynamic shapes)
        self.texts = []
        self.meta = None         # of the last function: callable name -> (primitive, params)
        self.ns = None

    def function(self, prog, fname):
        # __name__ puts NumPy's floating-point warnings under starling's warning filter.
        ns = {"np": np, "__name__": "starling.lowering.backends.cpp_schedule"}
        meta = {}
        names = {}
        lines = []
        counter = [0]

        def const(value, prefix="C"):
            key = f"{prefix}{len(ns)}"
            ns[key] = value
            return key

        def name_of(v):
            if isinstance(v, Literal):
                return const(v.val, "L")
            return names[v]

        def fresh(v):
            n = f"v{counter[0]}"
            counter[0] += 1
            names[v] = n
            return n

        for v, c in zip(prog.constvars, prog.consts):
            names[v] = const(np.asarray(c._buf) if hasattr(c, "_buf") else c)
        args = [fresh(v) for v in prog.invars]
        last_use = {}
        for i, eqn in enumerate(prog.eqns):
            for v in eqn.invars:
                if not isinstance(v, Literal):
                    last_use[v] = i
        keep = {v for v in prog.outvars if not isinstance(v, Literal)} | set(prog.invars) | \
            set(prog.constvars)
        # The memory plan (passes/buffer_reuse.py): a dead buffer that a later kernel writes
        # into stays alive until that kernel (deleted right after it); donated invars arrive
        # as extra arguments d<i> (None: allocate instead).
        deferred, slots = self._plan_lifetimes(prog, last_use)
        ns["_take"], ns["_reinterpret"] = _buffers.take, _buffers.reinterpret
        for i, eqn in enumerate(prog.eqns):
            ins = ", ".join(name_of(v) for v in eqn.invars)
            into = self._reuse_outs(prog, eqn, names, const)
            outs = [fresh(v) for v in eqn.outvars]
            target = ", ".join(outs) + ("," if len(outs) == 1 and self._tuple_result(eqn) else "")
            # an equation run for its effect alone (a host callback) binds no names
            target = f"{target} = " if outs else ""
            fn = self._callable(eqn)
            fname_k = const(fn, "F")
            meta[fname_k] = _debug_meta(eqn)
            owned = self._owned_carries(eqn, i, last_use, keep)
            if owned:
                # the loop takes the initial carries that die here: it alone holds them, so
                # its body may update them in place from the first iteration on
                own = f"_own{i}"
                positions = _carry_positions(eqn)
                items = [names[eqn.invars[j]] if j in owned else "None" for j in positions]
                lines.append(f"    {own} = [{', '.join(items)}]")
                lines.append(f"    del {', '.join(sorted({names[eqn.invars[j]] for j in owned}))}")
                ins = ", ".join("None" if j in owned else name_of(v)
                                for j, v in enumerate(eqn.invars))
                ins += f", _own={own}"
            if into is not None:
                lines.append(f"    {target}{fname_k}.run((), ({into}), {ins})")
            else:
                lines.append(f"    {target}{fname_k}({ins})")
            dead = [names[v] for j, v in enumerate(eqn.invars) if not isinstance(v, Literal)
                    and last_use.get(v) == i and v not in keep and j not in owned]
            dead += [names[v] for v in eqn.outvars if v not in last_use and v not in keep]
            dead += [names[v] for v in deferred.get(i, ())]
            if dead:
                lines.append(f"    del {', '.join(sorted(set(dead)))}")
        rets = ", ".join(name_of(v) for v in prog.outvars)
        params = args + [f"d{i}=None" for i in slots]
        text = f"def {fname}({', '.join(params)}):\n" + "\n".join(lines) + \
            f"\n    return ({rets}{',' if len(prog.outvars) == 1 else ''})\n"
        exec(compile(text, f"<starling cpp schedule {fname}>", "exec"), ns)  # noqa: S102
        ns[fname].donation_slots = tuple(slots)
        self.texts.append(text)
        self.ns, self.meta = ns, meta
        return ns[fname], "\n".join(self.texts)

    @staticmethod
    def _owned_carries(eqn, i, last_use, keep):
        """Positions of the initial carries of loop equation ``i`` that nothing reads after it
        (each passed once; a literal or a kept value stays the caller's)."""
        if eqn.primitive.name not in ("scan", "while"):
            return set()
        return {j for j in _carry_positions(eqn) if isinstance(eqn.invars[j], Var)
                and last_use.get(eqn.invars[j]) == i and eqn.invars[j] not in keep
                and eqn.invars.count(eqn.invars[j]) == 1}

    @staticmethod
    def _plan_lifetimes(prog, last_use):
        """({equation index: Vars to delete after it}, donated invar indices) of the plan;
        extends ``last_use`` of the buffers written by a later kernel."""
        deferred, slots = {}, set()
        for i, eqn in enumerate(prog.eqns):
            for ref in (eqn.params.get("reuse") or ()) if eqn.primitive in _KERNEL_PRIMS else ():
                if ref is not None and ref[0] == "in":
                    slots.add(ref[1])
                elif ref is not None:
                    v = prog.eqns[ref[1]].outvars[ref[2]]
                    if last_use.get(v, -1) < i:
                        last_use[v] = i
                        deferred.setdefault(i, []).append(v)
        return deferred, sorted(slots)

    @staticmethod
    def _reuse_outs(prog, eqn, names, const):
        """The ``outs`` tuple text of ``k.run`` for a kernel with a memory plan, else None.
        Intermediates go through ``_take`` (run-time check that nothing else holds them);
        donated buffers were checked by the caller (``compile``)."""
        reuse = eqn.params.get("reuse") if eqn.primitive in _KERNEL_PRIMS else None
        if not reuse:
            return None
        items = []
        for o, ref in zip(eqn.outvars, reuse):
            shape = tuple(o.aval.shape)
            if ref is None or not static_shape(o.aval.shape):
                items.append("None")
                continue
            dt = np.dtype(o.aval.dtype)
            shape = tuple(int(d) for d in shape)
            if ref[0] == "in":
                src = prog.invars[ref[1]].aval
                same = np.dtype(src.dtype) == dt and tuple(src.shape) == shape
                items.append(f"d{ref[1]}" if same else
                             f"_reinterpret(d{ref[1]}, {const(dt)}, {const(shape)})")
            else:
                v = prog.eqns[ref[1]].outvars[ref[2]]
                items.append(f"_take({names[v]}, {const(dt)}, {const(shape)})")
        return ", ".join(items) + ("," if len(items) == 1 else "")

    @staticmethod
    def _tuple_result(eqn):
        return eqn.primitive is fused_kernel_p or eqn.primitive.multiple_results

    def _callable(self, eqn):
        prim = eqn.primitive
        p = eqn.params
        if prim is fused_kernel_p or prim is fused_matmul_p:
            sub = dynamic.kernel_program(p["program"])
            sizes = self.sizes.get(id(sub))
            return _sized(self.kernels[id(sub)], sizes) if sizes else self.kernels[id(sub)]
        if prim.name == "dot_general":
            return _dot_fn(eqn)
        if prim.name == "while":
            return self._while_fn(p)
        if prim.name == "switch":
            return self._switch_fn(p)
        if prim.name == "scan":
            return self._scan_fn(p)
        if prim.impl is None:
            from ....core.primitive import MissingRuleError
            raise MissingRuleError(prim, "impl")
        _report_fallback(prim)
        if any(isinstance(v, Program) or (isinstance(v, tuple) and v and
                                          isinstance(v[0], Program)) for v in p.values()):
            return _eval_in_eval_trace(prim, p)
        return functools.partial(prim.impl, **p) if p else prim.impl

    def _sub(self, prog, tag):
        fn, _ = self.function(prog, tag)
        return fn

    def _while_fn(self, p):
        cond = self._sub(p["cond"], "cond")
        body = self._sub(p["body"], "body")
        nc, nb, max_it = p["n_cond"], p["n_body"], p["max_iterations"]
        donate = _carry_donor(body, nb)

        def run_while(*args, _own=None):
            cc, bc, carry = args[:nc], args[nc:nc + nb], list(args[nc + nb:])
            del args      # the caller's carries must not look shared once the loop owns them
            _adopt(carry, _own, body, nb)
            n = len(carry)
            i = 0
            while max_it is None or i < max_it:
                if not bool(cond(*cc, *carry)[0]):
                    break
                given = donate(carry)
                carry = list(body(*bc, *carry, *given)[:n])
                del given
                i += 1
            return carry
        return run_while

    def _switch_fn(self, p):
        branches = [self._sub(b, f"branch{i}") for i, b in enumerate(p["branches"])]
        last = len(branches) - 1

        def run_switch(index, *ops):
            i = int(index)
            return list(branches[0 if i < 0 else (last if i > last else i)](*ops))
        return run_switch

    def _scan_fn(self, p):
        body_prog = p["body"]
        body = self._sub(body_prog, "scan_body")
        length, reverse = p["length"], p["reverse"]
        nc, nk = p["num_consts"], p["num_carry"]
        y_avals = [v.aval for v in body_prog.outvars[nk:]]

        donate = _carry_donor(body, nc)

        def run_scan(*args, _own=None):
            consts, carry, xs = args[:nc], list(args[nc:nc + nk]), args[nc + nk:]
            del args
            _adopt(carry, _own, body, nc)
            ys = [np.empty((length,) + tuple(a.shape), a.dtype) for a in y_avals]
            order = range(length - 1, -1, -1) if reverse else range(length)
            for i in order:
                given = donate(carry)
                outs = body(*consts, *carry, *[x[i] for x in xs], *given)
                del given
                carry = list(outs[:nk])
                _store(ys, i, outs[nk:])     # (a loop variable here would hold a carry)
                del outs
            return carry + ys
        return run_scan


def _carry_positions(eqn):
    """The input positions of a scan's / while loop's initial carries."""
    p = eqn.params
    if eqn.primitive.name == "scan":
        return range(p["num_consts"], p["num_consts"] + p["num_carry"])
    return range(p["n_cond"] + p["n_body"], len(eqn.invars))


def _adopt(carry, own, body=None, first=0):
    """Moves the initial carries the schedule handed over (``own``: one entry per carry, None
    where the caller keeps it) into ``carry``, leaving the loop their only holder. One the body
    would update in place (a donation slot of ``body``, whose carries start at body invar
    ``first``) that is not a C-contiguous array, typically ``zeros`` (a broadcast of a scalar),
    is copied into one now: a kernel would otherwise convert it on every read and the first
    iteration would hold that copy and a fresh result (two accumulators' worth)."""
    if own:
        slots = {s - first for s in getattr(body, "donation_slots", ())}
        for k, buf in enumerate(own):
            if buf is not None:
                if k in slots and isinstance(buf, np.ndarray) and not buf.flags.c_contiguous:
                    buf = np.ascontiguousarray(buf)
                carry[k] = buf
        own.clear()


def _store(ys, i, vals):
    for y, val in zip(ys, vals):
        y[i] = val


def _carry_donor(body, first):
    """For a loop whose body function may write into donated carries (``donation_slots``, the
    body invars from ``first`` on: passes/buffer_reuse.py), ``donate(carry)``: the carry
    buffers the loop alone holds, or None for each one it cannot give, in slot order; () when
    the body takes none."""
    slots = getattr(body, "donation_slots", ())
    if not slots:
        return lambda carry: ()
    positions = [s - first for s in slots]
    return lambda carry: [_buffers.donatable_item(carry, k) for k in positions]


def _eval_in_eval_trace(prim, params):
    def run(*bufs):
        with set_current_trace(EVAL_TRACE):
            return prim.impl(*bufs, **params)
    return run


def _dot_fn(eqn):
    """A product left out of the kernels (other dtypes, symbolic shapes, layouts the GEMM
    kernels refuse): dot_general's implementation (the native GEMM on the operands' memory when
    their layout allows, else np.matmul)."""
    from ....arrays.ops.linear import _dot_general_impl
    return functools.partial(_dot_general_impl, **eqn.params)


register_backend(CppBackend())
