"""``nn.compile``: compile a training step that updates modules and optimizers in place.

A PyTorch-style step mutates: ``opt.step(grads)`` rebinds the model's parameters, BatchNorm
rebinds its running statistics. ``starling.compile`` stages pure functions only (there, such a
mutation is a ``ModuleMutationError``). ``nn.compile`` *lifts* the state of the modules and
optimizers passed as arguments, as Flax NNX's ``nnx.jit`` does and as torch.compile
functionalizes the mutation of its inputs:

1. the arguments are scanned for ``nn.Module`` and stateful optimizer objects (an optimizer's
   module is lifted too, so it may come from a closure); their array attributes and optimizer
   states are the *state leaves*;
2. the function is staged once per signature (``starling.compile``) with the state leaves as
   inputs: the real objects temporarily hold the tracers, and inside that trace (and only it)
   ``mutation_allowed`` lets those objects be rebound;
3. the staged program returns the function's output and the state leaves that changed; after
   each call they are rebound into the objects, exactly where eager code would have put them.

The signature (when to stage again) is: each lifted module's class, its array attribute names,
its configuration (``training``, frozen names, hyperparameters: the module's static pytree
data) and how the modules nest and alias (shared submodules, an optimizer's module); the
identity of each optimizer (its hyperparameters are constants of the program); the pytree
structure of the other arguments; and the shape / dtype / weak type of every leaf. A step with
a different input shape, dtype or parameter structure therefore stages again, counted by
``num_compiles``.
"""
from __future__ import annotations

import functools
import threading

from .. import tree as tree_util
from ..arrays.array import Array
from ..core.trace import EvalTrace, Tracer, current_trace
from .module import Module, ModuleMutationError, lifted
from .optim_stateful import LBFGS, Optimizer

__all__ = ["compile", "jit", "StatefulCompiled"]


_STATEFUL = (Module, Optimizer, LBFGS)


def _is_stateful(x):
    return isinstance(x, _STATEFUL)


class _Key:
    """A call's signature apart from the leaves' avals (which ``starling.compile`` keys on).

    Module configuration may hold unhashable values (a list); such a key hashes by the argument
    structure only and compares by ``==``.
    """

    __slots__ = ("parts", "_hash")

    def __init__(self, parts):
        self.parts = parts
        try:
            self._hash = hash(parts)
        except TypeError:
            self._hash = hash(parts[0])

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        try:
            return bool(self.parts == other.parts)
        except Exception:  # configuration without a plain boolean ==: never reuse
            return False


# configuration values that are never modules or arrays (the common case, checked first: the
# scan runs on every call)
_PLAIN = frozenset({bool, int, float, complex, str, bytes, tuple, frozenset, type(None)})


def _module_entries(m):
    """``(leaf names, [(child name, submodule)], static items)`` of one module object."""
    names, children, static = [], [], []
    for k, v in m.__dict__.items():
        t = type(v)
        if t is Array:
            names.append(k)
        elif t in _PLAIN:
            if k != "_sealed":
                static.append((k, v))
        elif isinstance(v, Module):
            children.append((k, v))
        elif isinstance(v, (Array, Tracer)):
            names.append(k)
        else:
            static.append((k, v))
    return tuple(names), children, tuple(static)


class _Call:
    """One call's lifted objects, their state leaves, the other argument leaves and the key."""

    __slots__ = ("objects", "index", "slots", "descs", "state", "dynamic", "kinds", "arg_tree",
                 "statics", "key", "saved")

    def __init__(self, name, args, kwargs, static_argnums, static_argnames):
        self.objects, self.index, self.slots, self.descs, self.state = [], {}, [], [], []
        self.statics = ()
        if static_argnums or static_argnames:
            args, kwargs = self._split_static(name, args, kwargs, static_argnums,
                                              static_argnames)
        if not kwargs and all(type(a) is Array or isinstance(a, _STATEFUL) for a in args):
            # the usual call, step(model, opt, x, y): no pytree to flatten
            leaves, self.arg_tree = args, len(args)
        else:
            leaves, self.arg_tree = tree_util.flatten((args, kwargs), is_leaf=_is_stateful)
        kinds, dynamic = [], []
        for x in leaves:
            if isinstance(x, Module):
                kinds.append(self._module(x))
            elif isinstance(x, Optimizer):
                kinds.append(self._optimizer(x))
            elif isinstance(x, LBFGS):
                raise TypeError(
                    f"nn.compile({name}): optim.LBFGS cannot be staged (its step runs NumPy "
                    "arithmetic on concrete values); compile what its closure calls instead: "
                    "vg = nn.compile(nn.value_and_grad(loss)); opt.step(lambda: vg(model, x, "
                    "y))")
            else:
                kinds.append(-1)
                dynamic.append(x)
        self.kinds, self.dynamic = tuple(kinds), dynamic
        self.key = _Key((self.arg_tree, self.kinds, tuple(self.descs), self.statics))

    def _split_static(self, name, args, kwargs, nums, names):
        """Moves static arguments out of the traced ones into ``self.statics`` (the key)."""
        n = len(args)
        pos = sorted({i % n if -n <= i < n else i for i in nums})
        for i in pos:
            if not 0 <= i < n:
                raise ValueError(f"nn.compile({name}): static_argnums {i} is out of range for "
                                 f"a call with {n} positional arguments")
        statics = [(i, args[i]) for i in pos] + [(k, kwargs[k]) for k in names if k in kwargs]
        for where, v in statics:
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"nn.compile({name}): static argument {where!r} must be "
                                f"hashable (it is part of the cache key), got "
                                f"{type(v).__name__}") from None
        self.statics = tuple(statics)
        return (tuple(a for i, a in enumerate(args) if i not in pos),
                {k: v for k, v in kwargs.items() if k not in names})

    def _new(self, obj):
        i = len(self.objects)
        self.index[id(obj)] = i
        self.objects.append(obj)
        self.descs.append(None)
        return i

    def _module(self, m):
        i = self.index.get(id(m))
        if i is not None:
            return i
        i = self._new(m)
        names, children, static = _module_entries(m)
        start = len(self.state)
        d = m.__dict__
        self.state.extend([d[k] for k in names])
        self.slots.append((start, len(self.state), names))
        # submodules are numbered after this module's own leaves are taken (pre-order)
        kids = []
        for k, c in children:
            kids.append((k, self._module(c)))
        self.descs[i] = (type(m), names, tuple(kids), static)
        return i

    def _optimizer(self, o):
        i = self.index.get(id(o))
        if i is not None:
            return i
        i = self._new(o)
        leaves, tdef = tree_util.flatten(o._lifted_state())
        start = len(self.state)
        self.state.extend(leaves)
        self.slots.append((start, len(self.state), tdef))
        mod = o._lifted_module()
        self.descs[i] = (o, tdef, None if mod is None else self._module(mod))
        return i

    # ---- during the trace ------------------------------------------------------------------
    def install(self, state):
        """Puts ``state`` (tracers) into the objects, saving their attributes for ``restore``."""
        self.saved = [(obj, dict(obj.__dict__)) for obj in self.objects]
        for obj, (a, b, info) in zip(self.objects, self.slots):
            if isinstance(obj, Module):
                for k, v in zip(info, state[a:b]):
                    object.__setattr__(obj, k, v)
            else:
                obj._set_lifted_state(tree_util.unflatten(info, state[a:b]))

    def restore(self):
        for obj, d in self.saved:
            obj.__dict__.clear()
            obj.__dict__.update(d)
        self.saved = None

    def arguments(self, dynamic):
        it = iter(dynamic)
        leaves = [next(it) if k < 0 else self.objects[k] for k in self.kinds]
        if type(self.arg_tree) is int:
            args, kwargs = leaves, {}
        else:
            args, kwargs = tree_util.unflatten(self.arg_tree, leaves)
        if self.statics:
            args, kwargs = list(args), dict(kwargs)
            for where, v in self.statics:
                if isinstance(where, int):
                    args.insert(where, v)
                else:
                    kwargs[where] = v
        return args, kwargs

    def read(self, name):
        """The objects' state leaves after the function ran; their structure must not have
        changed (that would change the program's signature)."""
        out = []
        for i, obj in enumerate(self.objects):
            if isinstance(obj, Module):
                names, children, static = _module_entries(obj)
                desc = (type(obj), names,
                        tuple((k, self.index.get(id(c), c)) for k, c in children), static)
                if desc != self.descs[i]:
                    raise ModuleMutationError(
                        f"nn.compile({name}): the function changed the structure of "
                        f"{_where(self, i)} ({_difference(self.descs[i], desc)}). Inside a "
                        "compiled step only parameters and buffers may be rebound; call "
                        "train() / eval() / requires_grad_(), add or remove attributes or "
                        "submodules outside it.")
                out.extend(obj.__dict__[k] for k in names)
            else:
                leaves, tdef = tree_util.flatten(obj._lifted_state())
                if tdef != self.slots[i][2]:
                    raise ModuleMutationError(
                        f"nn.compile({name}): the function changed the structure of the state "
                        f"of {type(obj).__name__} (from {self.slots[i][2]} to {tdef})")
                before, now = self.saved[i][1], obj.__dict__
                other = sorted(k for k in set(before) | set(now) if k != "state"
                               and before.get(k, _UNSET) is not now.get(k, _UNSET))
                if other:
                    # only ``state`` is lifted: another attribute would keep its staged value
                    raise ModuleMutationError(
                        f"nn.compile({name}): the function changed attribute(s) {other} of "
                        f"{type(obj).__name__}, which are not lifted into the compiled step "
                        "(only the optimizer's state is); keep what changes per step in state")
                out.extend(leaves)
        return out

    # ---- after the call --------------------------------------------------------------------
    def write_back(self, changed):
        """Rebinds the state leaves the program changed (``None``: unchanged)."""
        state = self.state
        for obj, (a, b, info) in zip(self.objects, self.slots):
            if isinstance(obj, Module):
                for j in range(a, b):
                    v = changed[j]
                    if v is not None:
                        object.__setattr__(obj, info[j - a], v)
            elif any(v is not None for v in changed[a:b]):
                new = [state[j] if changed[j] is None else changed[j] for j in range(a, b)]
                obj._set_lifted_state(tree_util.unflatten(info, new))


_UNSET = object()


def _where(call, i):
    obj = call.objects[i]
    for root in call.objects:
        if isinstance(root, Module):
            for prefix, m in root.named_modules():
                if m is obj and prefix:
                    return f"submodule {prefix!r} ({type(obj).__name__}) of {type(root).__name__}"
    return f"the {type(obj).__name__} argument"


def _difference(old, new):
    _, names, children, static = old
    if names != new[1]:
        return f"array attributes {list(names)} -> {list(new[1])}"
    if children != new[2]:
        return f"submodules {[k for k, _ in children]} -> {[k for k, _ in new[2]]}"
    was, now = dict(static), dict(new[3])
    changed = sorted(k for k in set(was) | set(now) if k not in was or k not in now
                     or was[k] is not now[k])
    return "; ".join(f"{k}: {was.get(k, '<unset>')!r} -> {now.get(k, '<unset>')!r}"
                     for k in changed) or "configuration"


def _snapshot(out):
    """A copy of the output pytree (modules in it are rebuilt from their current leaves before
    the lifted objects get their original attributes back)."""
    leaves, tdef = tree_util.flatten(out)
    return tree_util.unflatten(tdef, leaves)


class StatefulCompiled:
    """A function compiled by ``nn.compile``: call it like the original.

    Attributes:
        num_compiles: how many signatures have been staged and compiled.
    """

    def __init__(self, fun, static_argnums, static_argnames, backend):
        from .. import compile as _compile
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.static_argnums = ((static_argnums,) if isinstance(static_argnums, int)
                               else tuple(static_argnums))
        self.static_argnames = ((static_argnames,) if isinstance(static_argnames, str)
                                else tuple(static_argnames))
        self.backend = backend
        self._compile = _compile
        self._programs = {}
        self._lock = threading.RLock()
        self._staging = None

    def _name(self):
        return getattr(self.fun, "__name__", "fun")

    @property
    def num_compiles(self) -> int:
        return sum(p.num_compiles for p in list(self._programs.values()))

    def clear_cache(self):
        self._programs.clear()

    def _flat(self, *flat):
        """The pure function ``starling.compile`` stages: state leaves and argument leaves in,
        ``(output, changed state leaves or None)`` out."""
        call = self._staging
        n = len(call.state)
        state = list(flat[:n])
        trace = current_trace()
        call.install(state)
        try:
            with lifted(trace, call.objects):
                args, kwargs = call.arguments(flat[n:])
                out = _snapshot(self.fun(*args, **kwargs))
            new = call.read(self._name())
        finally:
            call.restore()
        return out, [None if a is b else a for a, b in zip(new, state)]

    def _program(self, call):
        program = self._programs.get(call.key)
        if program is None:
            def flat(*leaves):
                return self._flat(*leaves)
            flat.__name__ = flat.__qualname__ = self._name()
            program = self._programs[call.key] = self._compile(flat, backend=self.backend)
        return program

    def _run(self, method, args, kwargs):
        with self._lock:
            call = _Call(self._name(), args, kwargs, self.static_argnums, self.static_argnames)
            program = self._program(call)
            prev, self._staging = self._staging, call
            try:
                return call, getattr(program, method)(*call.state, *call.dynamic)
            finally:
                self._staging = prev

    def __call__(self, *args, **kwargs):
        if not isinstance(current_trace(), EvalTrace):
            # Under another transformation (or inside an nn.compile'd function): trace through.
            return self.fun(*args, **kwargs)
        call, (out, changed) = self._run("__call__", args, kwargs)
        call.write_back(changed)
        return out

    def lower(self, *args, **kwargs):
        """Stages and compiles for these arguments (or hits the cache); returns the
        ``starling`` ``Lowered`` (``.ir``, ``.as_text()``) of the flat program, whose inputs
        are the lifted state leaves then the argument leaves."""
        return self._run("lower", args, kwargs)[1]

    def __repr__(self):
        return f"nn.compile({self._name()})"


def compile(fun=None, *, static_argnums=(), static_argnames=(), backend=None):  # noqa: A001
    """Compiles a function that may update the modules and optimizers it is given in place:
    the PyTorch-style training step, staged once per signature (``starling.compile``).

    Usable as ``@nn.compile`` or ``@nn.compile(static_argnames=...)``::

        loss_and_grad = nn.value_and_grad(lambda m, x, y: F.cross_entropy(m(x), y))

        @nn.compile
        def train_step(model, opt, x, y):
            loss, grads = loss_and_grad(model, x, y)
            opt.step(grads)            # rebinds model's parameters: lifted, written back
            return loss

        for x, y in batches:
            loss = train_step(model, opt, x, y)

    Semantics are those of running the function eagerly: after each call the modules hold the
    parameters and buffers (BatchNorm running statistics) the function left in them and each
    optimizer its new state; frozen parameters (``requires_grad_(False)``) and Dropout keys
    passed as arguments behave as eagerly. Modules and optimizers are read afresh on every
    call, so ``load_state_dict`` / ``optimizer.load_state_dict`` between calls take effect.

    Why this is opt-in (``nn.value_and_grad`` and ``opt.step`` run eagerly unless called from a
    function compiled like this): staging runs the Python function once per signature, so

    * Python values the function reads from closures or globals (arrays, a learning rate, a
      batch) are constants of the program: pass whatever changes between calls as an argument.
      Modules and optimizers the function updates must be arguments (or the module of an
      optimizer argument); updating another one raises ``ModuleMutationError``, while only
      *reading* a module from a closure would freeze its current parameters.
    * Python side effects (printing, appending to a list) happen at staging only, and Python
      control flow on array values raises ``ConcretizationError`` (use ``starling.numpy.where``,
      ``cond``, ``while_loop``).

    Args:
        fun: a function of pytrees of arrays, ``nn.Module`` objects and ``optim`` optimizer
            objects (``optim.SGD``, ``Adam`` ...), returning a pytree of arrays (modules in
            the output come back as new module values).
        static_argnums / static_argnames: arguments that are compile-time constants (must be
            hashable; a new value stages again), e.g. a flag choosing a code path.
        backend: as for ``starling.compile``.
    Returns:
        A ``StatefulCompiled`` with ``num_compiles``, ``lower(*args)`` and ``clear_cache()``.
        Called inside another transformation it traces through (``fun`` runs as is).
    Raises:
        ModuleMutationError: the function changed the structure of a lifted module (``train()``,
            ``eval()``, ``requires_grad_()``, new attributes or submodules: do that outside), or
            mutated a module or optimizer that was not lifted.
        TypeError: an ``optim.LBFGS`` argument (compile the loss-and-gradient function its
            closure calls instead); unhashable static arguments; non-array leaves in the
            arguments or the output.
        ValueError: ``static_argnums`` out of range for a call; an unknown backend.

    Calls of one compiled function are serialised by a lock; while a call stages (first call
    per signature) the lifted objects briefly hold tracers, so do not use them from another
    thread meanwhile (an eager PyTorch-style step is not thread-safe either).
    """
    if fun is None:
        return functools.partial(compile, static_argnums=static_argnums,
                                 static_argnames=static_argnames, backend=backend)
    if backend is not None:
        from .. import compile as _compile
        _compile(fun, backend=backend)  # an unknown backend is a ValueError now, not at the call
    return StatefulCompiled(fun, static_argnums, static_argnames, backend)


jit = compile
