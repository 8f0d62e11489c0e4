"""``compile`` (alias ``jit``): stage a pure function once per signature, optimise, run natively.

A call looks up the executable for its *signature*: the pytree structure of the arguments, each
array's shape, dtype and weak type, the values of the static arguments, and the backend. On a
miss the function is staged to a Program, the pass pipeline (src/lowering/pipeline.py) runs,
and the backend compiles the result; later calls with the same signature reuse it.

Inside another transformation (grad, vmap, make_ir, ...) a compiled function is traced through
like ordinary code, so ``grad(compile(f))`` and ``compile(grad(f))`` both work; the latter
compiles the whole gradient computation and is the faster pattern.
"""
from __future__ import annotations

import functools
import inspect
import threading

from .. import tree as tree_util
from ..arrays.array import Array, wrap
from ..arrays.convert import operand
from ..core.avals import ShapedArray
from ..core.trace import EVAL_TRACE, EvalTrace, current_trace
from ..lowering import backends as _backends
from ..lowering import buffers as _buffers
from ..lowering.pipeline import run_pipeline
from . import dynamic_spec as _dyn
from .stage import trace_to_program

set_default_backend = _backends.set_default_backend

# Installed by src/collectives/compile_sharded.py (collectives build on transforms, not the reverse):
# build(prog, leaf_shardings, out_shardings, backend) -> executable or None.
SHARDED_BUILD = [None]


class DonatedBufferError(RuntimeError):
    """An Array whose buffer was donated to a compiled function was used afterwards."""


class _DonatedBuffer:
    __slots__ = ("fun_name",)

    def __init__(self, fun_name):
        self.fun_name = fun_name

    def _raise(self, *args, **kwargs):
        raise DonatedBufferError(
            f"this Array was donated to compiled function '{self.fun_name}' (donate_argnums) "
            "and its buffer may have been reused; it cannot be used after that call. Keep the "
            "function's output instead, or do not donate the argument.")

    def __getattr__(self, name):
        self._raise()

    __array__ = _raise
    __len__ = _raise
    __getitem__ = _raise


def _normalize_nums(op, nums):
    if nums is None:
        return ()
    if isinstance(nums, int):
        return (nums,)
    return tuple(int(n) for n in nums)


class Lowered:
    """The result of ``compiled.lower(*args)``: the optimised Program and the backend's
    generated source for one signature."""

    def __init__(self, program, executable, out_tree):
        # A backend that rewrites the Program further (cpp: fusion) exposes the result.
        self.ir = getattr(executable, "program", None) or program
        self.executable = executable
        self.out_tree = out_tree

    @property
    def source(self):
        return getattr(self.executable, "source", None)

    def as_text(self) -> str:
        text = str(self.ir)
        if self.source:
            text += "\n\n" + self.source
        return text

    def __repr__(self):
        return f"Lowered(\n{self.ir}\n)"


class Compiled:
    """A compiled function: call it like the original. Attributes: ``num_compiles`` (how many
    signatures have been staged and compiled), ``lower(*args)``, ``clear_cache()``."""

    def __init__(self, fun, static_argnums, static_argnames, donate_argnums, dynamic_shapes,
                 backend, in_shardings=None, out_shardings=None):
        functools.update_wrapper(self, fun)
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings
        self.fun = fun
        self.static_argnums = _normalize_nums("compile", static_argnums)
        self.static_argnames = tuple(static_argnames or ())
        self.donate_argnums = _normalize_nums("compile", donate_argnums)
        self.dynamic_shapes = dynamic_shapes
        self.backend = backend
        self.num_compiles = 0
        self._cache = {}
        self._lock = threading.RLock()
        # signature -> (executable, consts, out tree or None for one leaf): the fast call path
        # for plain Array positional arguments (under dynamic shapes: the executable bound to the
        # sizes of that signature); None when static arguments need the full path.
        self._fast = None if (static_argnums or static_argnames) else {}
        try:
            self._sig = inspect.signature(fun)
        except (TypeError, ValueError):
            self._sig = None
        self._set_dynamic_shapes(dynamic_shapes)
        if self.static_argnames and self._sig is not None:
            for name in self.static_argnames:
                if name not in self._sig.parameters:
                    raise ValueError(f"compile: static_argnames {name!r} is not a parameter of "
                                     f"{getattr(fun, '__name__', fun)}")
        overlap = set(self.static_argnums) & set(self.donate_argnums)
        if overlap:
            raise ValueError(f"compile: arguments {sorted(overlap)} cannot be both static and "
                             "donated")

    def _set_dynamic_shapes(self, call_site):
        # The spec comes from @dynamic_spec on fun or from dynamic_shapes= (both: ValueError).
        self._spec = _dyn.resolve_spec(self.fun, call_site)
        if self._fast is not None:
            # Under dynamic shapes the fast path caches, per concrete signature, the executable
            # bound to that signature's (already checked) sizes.
            self._fast.clear()
        self.dynamic_shapes = self._spec
        self._leaf_specs = {}
        if self._spec is not None:
            _dyn.check_spec_names(self._spec, self.fun, f"compile({self._name()})")
        self._cache.clear()

    def _name(self):
        return getattr(self.fun, "__name__", "fun")

    def _dynamic(self, treedef, static_pos, nargs, tree, ops):
        """The signature with declared dims symbolic (dynamic_shapes), and the leaf labels."""
        lkey = (treedef, static_pos, nargs)
        info = self._leaf_specs.get(lkey)
        if info is None:
            positions = [i for i in range(nargs) if i not in static_pos]
            specs = _dyn.leaf_specs(self._spec, self.fun, f"compile({self._name()})", tree,
                                    positions)
            info = self._leaf_specs[lkey] = (
                [None if d is None else _dyn.symbolic_dims(d) for _, d in specs],
                [label for label, _ in specs])
        dims, labels = info
        sig = tuple((x.shape if d is None else _dyn.substitute_dims(self, label, x.shape, d),
                     x.dtype, x.weak_type) for x, d, label in zip(ops, dims, labels))
        return sig, labels

    # ---- signature -----------------------------------------------------------------------------
    def _split(self, args, kwargs):
        nargs = len(args)
        static_pos = tuple(n % nargs if -nargs <= n < nargs else n for n in self.static_argnums)
        for n in static_pos:
            if not 0 <= n < nargs:
                raise ValueError(f"compile: static_argnums {n} is out of range for a call with "
                                 f"{nargs} positional arguments")
        statics = []
        for n in static_pos:
            statics.append(("pos", n, _hashable(self, f"argument {n}", args[n])))
        for name in self.static_argnames:
            if name in kwargs:
                statics.append(("kw", name, _hashable(self, f"argument {name!r}", kwargs[name])))
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        return static_pos, tuple(statics), dyn_args, dyn_kwargs

    def _key(self, args, kwargs):
        static_pos, statics, dyn_args, dyn_kwargs = self._split(args, kwargs)
        leaves, treedef = tree_util.flatten((dyn_args, dyn_kwargs))
        ops = [operand(x, "compile") for x in leaves]
        backend = self._backend_for(ops)
        if self._spec is not None:
            # Declared dims enter the key symbolically: one entry serves every size.
            sig, labels = self._dynamic(treedef, static_pos, len(args), (dyn_args, dyn_kwargs),
                                        ops)
            return (treedef, sig, statics, backend), static_pos, ops, treedef, (sig, labels)
        sig = tuple((tuple(x.shape), x.dtype, x.weak_type, getattr(x, "_sharding", None))
                    for x in ops)
        return (treedef, sig, statics, backend), static_pos, ops, treedef, None

    def _backend_for(self, ops):
        """The backend's name: the one asked for, else "triton" for arguments on a GPU, else
        the default.

        Raises:
            ValueError: arguments on a GPU for a backend that runs on the host.
        """
        on_gpu = [x for x in ops if getattr(x, "_device", None) is not None
                  and x._device.platform == "cuda"]
        if not on_gpu:
            return self.backend or _backends.default_backend_name()
        sharded = [x for x in ops if hasattr(x, "_shards")]
        if sharded:
            raise ValueError(f"compile({self._name()}): an argument is on {on_gpu[0]._device} "
                             f"and another is sharded over {sorted(map(str, sharded[0].devices()))}"
                             "; move them to one device with starling.device_put first")
        if self.backend not in (None, "triton"):
            raise ValueError(f"compile({self._name()}): backend {self.backend!r} runs on the "
                             f"host, but an argument is on {on_gpu[0]._device}; use "
                             "backend='triton' (the default for GPU arguments) or move the "
                             "arguments with starling.device_put(x, 'cpu')")
        return "triton"

    def _backend_for_consts(self, prog, backend):
        """``backend``, or the triton backend when the function captured arrays on a GPU
        (constants of the staged Program) and no backend was asked for.

        Raises:
            ValueError: a GPU constant for a backend that runs on the host.
        """
        gpu = [c for c in prog.consts if getattr(getattr(c, "_device", None), "platform",
                                                 None) == "cuda"]
        if not gpu or backend.name == "triton":
            return backend
        if self.backend is not None:
            raise ValueError(f"compile({self._name()}): backend {self.backend!r} runs on the "
                             f"host, but the function reads an array on {gpu[0]._device}; use "
                             "backend='triton' or move it with starling.device_put(x, 'cpu')")
        return _backends.get_backend("triton")

    def _build(self, key, args, kwargs, static_pos, ops, treedef, dyn=None):
        # Threads making the first call with one signature at once stage it once.
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                entry = self._stage_and_compile(key, args, kwargs, static_pos, ops, treedef,
                                                dyn)
            return entry

    def _stage_and_compile(self, key, args, kwargs, static_pos, ops, treedef, dyn=None):
        out_tree = []
        nargs = len(args)

        def flat_fun(*flat):
            dyn_args, dyn_kwargs = tree_util.unflatten(treedef, list(flat))
            it = iter(dyn_args)
            full = [args[i] if i in static_pos else next(it) for i in range(nargs)]
            kw = dict(dyn_kwargs)
            kw.update({k: kwargs[k] for k in self.static_argnames if k in kwargs})
            out = self.fun(*full, **kw)
            o_leaves, ot = tree_util.flatten(out)
            out_tree.append(ot)
            return [operand(o, "compile") for o in o_leaves]

        name = getattr(self.fun, "__name__", "fun")
        backend = _backends.get_backend(key[3])
        if dyn is not None:
            # Staged once with symbolic dims (under the spec's assumptions); the first call's
            # sizes are checked before anything is compiled.
            avals = [ShapedArray(*entry) for entry in dyn[0]]
            binder = _dyn.ShapeBinder(f"compile({name})", avals, dyn[1],
                                      self._spec.relationals, [str(a) for a in
                                                               self._spec.assumptions])
            binder.env_for(ops)
            with _dyn.assuming(self._spec.assumptions):
                prog = trace_to_program(flat_fun, avals)
                prog = run_pipeline(prog, label=name)
            exe = self._sharded_per_size(prog, args, static_pos, ops, out_tree, backend)
            if exe is None:
                exe = _dyn.compile_for_backend(backend, prog) if binder else \
                    backend.compile(prog)
        else:
            prog = trace_to_program(flat_fun, [x.aval for x in ops])
            prog = run_pipeline(prog, label=name)
            backend = self._backend_for_consts(prog, backend)
            donated = self._donated_mask(args, static_pos, len(ops))
            exe = self._sharded(prog, args, static_pos, ops, out_tree, backend)
            if exe is not None:
                pass
            elif (any(donated) and len(donated) == len(prog.invars)
                    and getattr(backend, "supports_donation", False)):
                # The backend's memory plan may write outputs into the donated buffers.
                exe = backend.compile(prog, donated=donated)
            else:
                exe = backend.compile(prog)
            binder = None
        self.num_compiles += 1
        entry = (prog, exe, out_tree[0], binder)
        self._cache[key] = entry
        return entry

    def _sharded(self, prog, args, static_pos, ops, out_tree, backend, probe=False):
        """The sharded executable when arguments are sharded, in/out_shardings are given or the
        program holds shard_maps / sharding constraints; else None. ``probe``: only say
        whether it would be sharded."""
        hook = SHARDED_BUILD[0]
        if hook is None:
            return None
        leaf = [getattr(x, "_sharding", None) for x in ops]
        if probe:
            return any(s is not None for s in leaf) or self.in_shardings is not None or \
                self.out_shardings is not None or any(
                    e.primitive.eager is not None for e in prog.eqns)
        if self.in_shardings is not None:
            dyn = tuple(a for i, a in enumerate(args) if i not in static_pos)
            given = _prefix_shardings(self.in_shardings, dyn, "in_shardings",
                                      getattr(self.fun, "__name__", "fun"))
            leaf = [g if g is not None else own for g, own in zip(given, leaf)] + \
                leaf[len(given):]
        outs = None
        if self.out_shardings is not None:
            # the outputs' avals (described as dtype[shape] in errors), not None: None is an
            # empty subtree to optree
            struct = tree_util.unflatten(out_tree[0], prog.out_avals)
            outs = _prefix_shardings(self.out_shardings, struct, "out_shardings",
                                     getattr(self.fun, "__name__", "fun"))
        return hook(prog, leaf, outs, backend)

    def _sharded_per_size(self, prog, args, static_pos, ops, out_tree, backend):
        """Under dynamic shapes, a sharded program is partitioned for each concrete size (local
        pieces need concrete sizes), compiled once per size; None when nothing is sharded."""
        if not self._sharded(prog, args, static_pos, ops, out_tree, backend, probe=True):
            return None
        return _PerSizeSharded(self, prog, args, static_pos, ops, out_tree, backend)

    def lower(self, *args, **kwargs) -> Lowered:
        """Stages and compiles for these arguments (or hits the cache); returns a Lowered."""
        key, static_pos, ops, treedef, dyn = self._key(args, kwargs)
        entry = self._cache.get(key) or self._build(key, args, kwargs, static_pos, ops, treedef,
                                                    dyn)
        return Lowered(*entry[:3])

    def clear_cache(self):
        self._cache.clear()
        if self._fast is not None:
            self._fast.clear()

    def __call__(self, *args, **kwargs):
        trace = current_trace()
        if trace is EVAL_TRACE and not kwargs and self._fast is not None:
            # Fast path (cpp helper): plain Array positional args whose signature was seen.
            sig = [(a._buf.shape, a._buf.dtype, a._weak) for a in args if type(a) is Array]
            name = self.backend or _backends._DEFAULT[0] or _backends.default_backend_name()
            hit = self._fast.get((name, *sig)) if len(sig) == len(args) else None
            if hit is not None:
                exe, consts, out_tree = hit
                if self.donate_argnums:
                    outs = self._run_donated(exe, consts, args, args)
                    self._donate(args, outs)
                else:
                    outs = exe(consts, args)
                return outs[0] if out_tree is None else tree_util.unflatten(out_tree, outs)
        if trace is not EVAL_TRACE and not isinstance(trace, EvalTrace):
            # Under another transformation: trace through (the outer transformation sees the
            # primitives; an enclosing compile stages them into its own program).
            return self.fun(*args, **kwargs)
        key, static_pos, ops, treedef, dyn = self._key(args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._build(key, args, kwargs, static_pos, ops, treedef, dyn)
        prog, exe, out_tree, binder = entry
        if self.donate_argnums:
            self._check_donate_range(len(args))
        env = None
        if binder:
            env = binder.env_for(ops)
            outs = exe(prog.consts, ops, shape_env=env)
        elif self.donate_argnums:
            outs = self._run_donated(exe, prog.consts, ops, args)
        else:
            outs = exe(prog.consts, ops)
        # (the fast-path key reads the arguments' buffers: before donation invalidates them)
        if (self._fast is not None and not kwargs and trace is EVAL_TRACE
                and all(type(a) is Array for a in args)):
            single = out_tree.num_leaves == 1 and out_tree.is_leaf()
            fkey = (key[3], *[(a._buf.shape, a._buf.dtype, a._weak) for a in args])
            if binder:   # bounded: one entry per distinct size seen
                if len(self._fast) >= 256:
                    self._fast.clear()
                exe = exe.for_env(env) if hasattr(exe, "for_env") else \
                    functools.partial(exe, shape_env=env)
            self._fast[fkey] = (exe, prog.consts, None if single else out_tree)
        if self.donate_argnums:
            self._donate(args, outs)
        return tree_util.unflatten(out_tree, outs)

    def _run_donated(self, exe, consts, ops, args):
        """Runs ``exe`` handing it the buffers of the donated arguments that a run-time check
        (``buffers.donatable``) proves nothing else can see; the others it does not get."""
        slots = getattr(exe, "donation_slots", ())
        if not slots:
            return exe(consts, ops)
        ids = [id(getattr(o, "_buf", None)) for o in ops]
        given = [_buffers.donatable(ops[i], ids) for i in slots]
        try:
            return exe.call_donated(ops, given)
        except BaseException:
            # A donated buffer may be half overwritten: never let its Array show it.
            if any(b is not None for b in given):
                self._donate(args, ())
            raise

    def _check_donate_range(self, nargs):
        for n in self.donate_argnums:
            if not -nargs <= n < nargs:
                raise ValueError(f"compile: donate_argnums {n} is out of range for a call of "
                                 f"{self._name()} with {nargs} positional arguments")

    def _donated_mask(self, args, static_pos, nleaves):
        """One bool per traced leaf (flatten order of (dyn_args, dyn_kwargs)): is it a leaf of
        a donated positional argument? Keyword arguments are never donated."""
        nargs = len(args)
        donated = {n % nargs for n in self.donate_argnums if -nargs <= n < nargs}
        mask = []
        for i, a in enumerate(args):
            if i not in static_pos:
                mask += [i in donated] * len(tree_util.leaves(a))
        return tuple(mask + [False] * (nleaves - len(mask)))

    def _donate(self, args, outs):
        # Every donated Array is invalidated, even where an output shares its buffer (an
        # argument returned unchanged): the output is a new Array that stays valid. (The
        # caller checked the range of donate_argnums before the call.)
        gone = _DonatedBuffer(self._name())
        donated = []
        for n in self.donate_argnums:
            arg = args[n]
            # plain and GPU Arrays (a sharded array's pieces are not donated)
            donated += [x for x in ((arg,) if isinstance(arg, Array) else tree_util.leaves(arg))
                        if isinstance(x, Array) and not hasattr(x, "_shards")]
        ids = {id(x) for x in donated}
        for i, o in enumerate(outs):
            if id(o) in ids:   # the argument object itself came back (numpy_ref: lambda x: x)
                outs[i] = wrap(o._buf, o._weak)
        for leaf in donated:
            leaf._buf = gone

    def __repr__(self):
        return f"Compiled({getattr(self.fun, '__name__', self.fun)})"


class _PerSizeSharded:
    """The executable of a sharded program under dynamic shapes: the symbolic Program bound to
    each call's sizes, partitioned and compiled once per distinct size (bounded cache)."""

    def __init__(self, compiled, prog, args, static_pos, ops, out_tree, backend):
        self._compiled, self._prog = compiled, prog
        self._ctx = (args, static_pos, ops, out_tree, backend)
        self._by_size = {}

    def __call__(self, consts, args, shape_env=None):
        from ..core.symbolic import bind_shapes
        key = getattr(shape_env, "key", None) or frozenset((shape_env or {}).items())
        exe = self._by_size.get(key)
        if exe is None:
            if len(self._by_size) >= 64:
                self._by_size.clear()
            bound = bind_shapes(self._prog, shape_env) if shape_env else self._prog
            a, static_pos, ops, out_tree, backend = self._ctx
            exe = self._by_size[key] = self._compiled._sharded(bound, a, static_pos, args,
                                                               out_tree, backend)
        return exe(consts, args)


def _prefix_shardings(shardings, tree, what, name):
    """One sharding (or None) per leaf of ``tree`` from a pytree prefix of shardings."""
    try:
        return tree_util.broadcast_prefix(shardings, tree)
    except (ValueError, TypeError) as e:
        raise ValueError(f"compile({name}): {what} {shardings!r} is not a pytree prefix of the "
                         f"{'arguments' if what == 'in_shardings' else 'outputs'}: {e}") from None


def _hashable(compiled, what, value):
    try:
        hash(value)
    except TypeError:
        raise TypeError(
            f"compile: static {what} of {getattr(compiled.fun, '__name__', 'fun')} must be "
            f"hashable (it is part of the cache key), got {type(value).__name__}: "
            f"{value!r:.60}. Pass arrays as non-static arguments, or convert lists to tuples."
        ) from None
    if isinstance(value, Array):
        raise TypeError(f"compile: static {what} is an Array; arrays are traced arguments, "
                        "remove it from static_argnums")
    return value


def compile(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=(),  # noqa: A001
            dynamic_shapes=None, backend=None, in_shardings=None, out_shardings=None):
    """Compiles ``fun`` for fast repeated execution; usable as ``@compile`` or
    ``@compile(static_argnums=...)``.

    Args:
        fun: a pure function of pytrees of arrays.
        static_argnums / static_argnames: arguments treated as compile-time constants (must be
            hashable); a new value triggers a new compilation.
        donate_argnums: positional arguments whose buffers the executable may reuse for its
            outputs (the cpp backend's memory plan writes, e.g., ``w - lr * g`` into ``w``'s
            buffer). Donation is a hint: a buffer is overwritten only when a run-time check
            proves nothing else can see it (C-contiguous, writeable, owning its memory, held
            by this Array alone: no NumPy view of it, no other Array over it, not passed twice;
            src/lowering/buffers.py), else the output is freshly allocated. Either way, using
            a donated Array after the call raises DonatedBufferError.
        dynamic_shapes: a ``ShapesSpec`` (starling.transforms.dynamic_spec): the declared dims
            are symbolic, so one compilation serves every size in range. A function decorated
            with ``@dynamic_spec`` carries its own; giving both is a ValueError.
        backend: "cpp" (native kernels), "numpy_ref" (interpreter, the oracle), ... Default:
            set_default_backend's choice, else $STARLING_BACKEND, else "cpp" when a C++
            compiler is found, else "numpy_ref".
        in_shardings / out_shardings: NamedShardings (or None: the argument's own layout;
            replicated for ordinary Arrays), pytree prefixes of the positional arguments / the
            outputs, as in JAX's jit. With sharded arguments, these, or shard_maps inside, the
            program is partitioned into per-device Programs (src/collectives/partition.py) that
            run on their devices concurrently; outputs are sharded arrays (by default with the
            propagated layout, pending reductions applied).
    Returns:
        A ``Compiled`` callable with ``lower(*args)`` and ``num_compiles``.
    Raises:
        TypeError: unhashable static arguments (at call time).
        ValueError: bad static/donate specifications; unknown backend.
    """
    if fun is None:
        return functools.partial(compile, static_argnums=static_argnums,
                                 static_argnames=static_argnames, donate_argnums=donate_argnums,
                                 dynamic_shapes=dynamic_shapes, backend=backend,
                                 in_shardings=in_shardings, out_shardings=out_shardings)
    if backend is not None:
        _backends.get_backend(backend)
    return Compiled(fun, static_argnums, static_argnames, donate_argnums, dynamic_shapes, backend,
                    in_shardings, out_shardings)


jit = compile
