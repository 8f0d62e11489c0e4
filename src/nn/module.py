"""``nn.Module``: PyTorch-style modules that are pytrees of immutable arrays.

A module is an ordinary Python object whose attributes are sorted into three kinds:

* **leaves**: attributes holding an Array (NumPy arrays are converted on assignment). Floating
  arrays are *parameters* unless registered with ``register_buffer`` (running statistics);
  non-floating arrays are always buffers.
* **submodules**: attributes holding a Module (they nest; names are dotted as in PyTorch,
  ``"0.weight"``, ``"encoder.layers.1.bias"``).
* **static configuration**: everything else (ints, strings, activation functions, ``training``,
  the frozen-parameter names). It is the pytree's auxiliary data, so a change of configuration
  (e.g. ``train()`` vs ``eval()``) is a different tree structure and ``compile`` retraces.

Every subclass is registered as a pytree node in the "starling" namespace, so a module can be
passed straight through ``grad``, ``vmap`` and ``compile``; ``starling.tree.map(f, model)``
returns a new module. Shared submodules (one object reachable twice) are flattened twice and
come back as two copies: tie weights by reusing the array in ``forward`` instead.

Mutation semantics (the choice, stated once): arrays are immutable, and *modules are mutable
Python objects only outside transformed code*. Outside ``grad`` / ``vmap`` / ``compile`` ...,
assigning an attribute, ``train()`` / ``eval()`` / ``requires_grad_()`` / ``load_state_dict()``
and ``optim.*.step`` rebind the module's attributes in place, as in PyTorch (they return the
module for chaining). Inside a transformed function any such mutation, or assigning a traced
value to a module anywhere, raises ``ModuleMutationError``: build new modules functionally with
``nn.replace`` / ``nn.functional_call`` / ``starling.tree.map`` and return them instead.

The one exception is ``nn.compile``: it lifts the state of the modules and optimizers passed to
the compiled function, so *their* in-place updates (``optim.*.step``, running statistics,
assigning a parameter) are staged by that compile's own trace and written back after each call
(``mutation_allowed`` is the single rule every mutating method asks).

Running statistics (BatchNorm) are *threaded explicitly*: a layer calls ``update_buffers``;
eagerly this rebinds in place (PyTorch behaviour); under ``nn.stateful_call`` /
``nn.value_and_grad`` the new values are collected and returned in a new module; anywhere else
inside a transformation it is a ``ModuleMutationError`` that says what to use.
"""
from __future__ import annotations

import collections
import collections.abc
import contextlib
import contextvars
import os

import numpy as np

from .. import tree as tree_util
from ..arrays.array import Array
from ..core import dtypes
from ..core.trace import EvalTrace, Tracer, current_trace

__all__ = ["Module", "ModuleMutationError", "StateDictError", "IncompatibleKeys"]


class ModuleMutationError(RuntimeError):
    """A module was mutated inside a transformed function (grad, vmap, compile, ...), or was
    given a traced value. Modules there are values: build a new one and return it."""


class StateDictError(ValueError):
    """``load_state_dict`` found missing, unexpected or mis-shaped keys."""


IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

def _is_array(v):
    return isinstance(v, (Array, Tracer))


def _is_float_dtype(dt):
    # ml_dtypes floats (bfloat16, float8) are kind 'V' in NumPy; starling's dtypes module knows.
    return dtypes.is_inexact(np.dtype(dt))


class _Lifted:
    """The objects whose state one ``nn.compile`` trace lifted, and that trace."""

    __slots__ = ("trace", "ids")

    def __init__(self, trace, objects):
        self.trace, self.ids = trace, frozenset(id(o) for o in objects)


_LIFTED = contextvars.ContextVar("starling_nn_lifted_state", default=None)


@contextlib.contextmanager
def lifted(trace, objects):
    """Context (used by ``nn.compile``) in which ``objects`` may be rebound by ``trace``."""
    token = _LIFTED.set(_Lifted(trace, objects))
    try:
        yield
    finally:
        _LIFTED.reset(token)


def mutation_allowed(obj, values=()) -> bool:
    """Whether module or optimizer ``obj`` may be rebound in place to ``values`` now.

    True outside transformations with concrete values (PyTorch behaviour), and inside an
    ``nn.compile`` that lifted ``obj``'s state when the current trace is that compile's own and
    the values are its tracers or concrete (a tracer of a nested grad / vmap would leak).
    """
    trace = current_trace()
    lift = _LIFTED.get()
    if lift is not None and trace is lift.trace and id(obj) in lift.ids:
        return not any(isinstance(v, Tracer) and v._trace is not trace for v in values)
    return isinstance(trace, EvalTrace) and not any(isinstance(v, Tracer) for v in values)


def _check_mutable(module, what, value=None):
    if mutation_allowed(module, () if value is None else (value,)):
        return
    if isinstance(value, Tracer):
        raise ModuleMutationError(
            f"{type(module).__name__}: cannot {what} to a traced value ({value.aval.str_short()}). "
            "Modules are pytrees: inside grad / vmap / compile build a new module with "
            "nn.replace(module, {name: value}) or starling.tree.map and return it (or pass the "
            "module to an nn.compile'd function, which writes its updates back).")
    raise ModuleMutationError(
        f"{type(module).__name__}: cannot {what} inside a transformed function "
        f"({current_trace()}). Modules are immutable values there: build a new module with "
        "nn.replace(module, {name: value}) / starling.tree.map and return it, use "
        "nn.stateful_call or nn.value_and_grad(..., return_module=True) for running "
        "statistics, pass modules and optimizers that a compiled step updates as arguments of "
        "an nn.compile'd function, and call train() / eval() / requires_grad_() before "
        "transforming.")


def _contains_module_or_array(value):
    if isinstance(value, (list, tuple, dict)):
        items = value.values() if isinstance(value, dict) else value
        return any(isinstance(v, (Module, Array, Tracer, np.ndarray)) or
                   _contains_module_or_array(v) for v in items)
    return False


class _Aux:
    """Static part of a module's pytree node: class, child names, configuration (hashable)."""

    __slots__ = ("cls", "names", "static", "_hash")

    def __init__(self, cls, names, static):
        self.cls, self.names, self.static = cls, names, static
        try:
            self._hash = hash((cls, names, static))
        except TypeError:  # unhashable configuration (a list): hash the names only
            self._hash = hash((cls, names, tuple(k for k, _ in static)))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if type(other) is not _Aux or self.cls is not other.cls or self.names != other.names:
            return False
        try:
            return bool(self.static == other.static)
        except Exception:  # configuration values without a plain boolean ==
            return all(a is b for a, b in zip(self.static, other.static))

    def __repr__(self):
        return f"{self.cls.__name__}{list(self.names)}"


def _split_names(d):
    params, buffers, mods = [], [], []
    bufs = d["_buffer_names"]
    for k, v in d.items():
        if isinstance(v, Module):
            mods.append(k)
        elif _is_array(v):
            if k in bufs or not _is_float_dtype(v.dtype):
                buffers.append(k)
            else:
                params.append(k)
    return params, buffers, mods


def _flatten(m):
    d = m.__dict__
    params, buffers, mods = _split_names(d)
    names = tuple(params + buffers + mods)
    named = set(names)
    static = tuple((k, v) for k, v in d.items() if k not in named and k != "_sealed")
    return [d[k] for k in names], _Aux(type(m), names, static), names


def _unflatten(aux, children):
    obj = object.__new__(aux.cls)
    d = obj.__dict__
    d.update(aux.static)
    d.update(zip(aux.names, children))
    d["_sealed"] = True
    return obj


class _ModuleMeta(type):
    """Registers every Module subclass as a pytree node and seals instances after __init__."""

    def __init__(cls, name, bases, ns, **kw):
        super().__init__(name, bases, ns, **kw)
        tree_util.register_node(cls, _flatten, _unflatten)

    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        obj.__dict__["_sealed"] = True
        return obj


class Module(metaclass=_ModuleMeta):
    """Base class of layers and models (PyTorch's ``nn.Module`` as a pytree).

    Subclasses set arrays and submodules as attributes in ``__init__`` and define
    ``forward``; ``module(*args)`` calls ``forward``. See the module docstring of
    ``starling.nn.module`` for what is a leaf, what is static, and when mutation is allowed.

    Attributes:
        training: True in training mode (Dropout active, BatchNorm uses batch statistics).
    """

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        d = obj.__dict__
        d["_sealed"] = False
        d["training"] = True
        d["_buffer_names"] = ()
        d["_frozen_names"] = frozenset()
        return obj

    def __init__(self):
        pass

    # ---- attributes --------------------------------------------------------------------------
    def __setattr__(self, name, value):
        if self.__dict__.get("_sealed"):
            _check_mutable(self, f"set attribute {name!r}", value)
        if isinstance(value, np.ndarray):
            from .. import numpy as snp
            value = snp.asarray(value)
        elif _contains_module_or_array(value):
            raise TypeError(
                f"{type(self).__name__}.{name}: a {type(value).__name__} holding modules or "
                "arrays is not tracked; use nn.ModuleList / nn.ModuleDict for modules and one "
                "attribute per array")
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if self.__dict__.get("_sealed"):
            _check_mutable(self, f"delete attribute {name!r}")
        object.__delattr__(self, name)

    def register_buffer(self, name: str, tensor, persistent: bool = True):
        """Adds an array that is state but not a parameter (no gradient, not optimised), e.g.
        running statistics. ``tensor`` None records the name with no value (as PyTorch).

        Buffers are always persistent (part of ``state_dict``): ``persistent=False`` raises
        NotImplementedError.
        """
        if not persistent:
            raise NotImplementedError(
                f"register_buffer: persistent=False (buffer {name!r}) is not supported; buffers "
                "are always persistent (in state_dict): use persistent=True")
        if self.__dict__.get("_sealed"):
            _check_mutable(self, f"register buffer {name!r}", tensor)
        if name not in self._buffer_names:
            object.__setattr__(self, "_buffer_names", self._buffer_names + (name,))
        setattr(self, name, tensor)

    def register_parameter(self, name: str, param):
        setattr(self, name, param)

    def add_module(self, name: str, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {type(module).__name__} is not a Module")
        setattr(self, name, module)

    register_module = add_module

    # ---- traversal ---------------------------------------------------------------------------
    def named_children(self):
        for k, v in self.__dict__.items():
            if isinstance(v, Module):
                yield k, v

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """Pre-order ``(dotted_name, module)`` pairs, this module first with name ``prefix``."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self.named_children():
            yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                       remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def _own(self):
        return _split_names(self.__dict__)

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        """``(dotted_name, array)`` for every parameter (frozen ones included, as PyTorch)."""
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for k in m._own()[0]:
                yield (f"{mp}.{k}" if mp else k), m.__dict__[k]

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for k in m._own()[1]:
                yield (f"{mp}.{k}" if mp else k), m.__dict__[k]

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str):
        m = self
        if target == "":
            return m
        for part in target.split("."):
            nxt = m.__dict__.get(part)
            if not isinstance(nxt, Module):
                raise AttributeError(f"{type(m).__name__} has no submodule {part!r} "
                                     f"(looking up {target!r})")
            m = nxt
        return m

    # ---- state dict --------------------------------------------------------------------------
    def state_dict(self, prefix: str = ""):
        """Ordered dict of every parameter and buffer by dotted name (PyTorch's order: each
        module's parameters, then its buffers, then its children). Values are the module's
        (immutable) Arrays, not copies."""
        out = collections.OrderedDict()
        self._fill_state_dict(out, prefix)
        return out

    def _fill_state_dict(self, out, prefix):
        params, buffers, mods = self._own()
        d = self.__dict__
        for k in params + buffers:
            out[prefix + k] = d[k]
        for k in mods:
            d[k]._fill_state_dict(out, prefix + k + ".")

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Rebinds parameters and buffers from ``state_dict`` (outside transformations).

        Values may be Arrays, NumPy arrays or anything ``starling.numpy.asarray`` takes (also
        PyTorch tensors); they are converted to the current value's dtype (``assign=True``
        keeps the given dtype).

        Returns:
            ``IncompatibleKeys(missing_keys, unexpected_keys)`` (both empty when strict).
        Raises:
            StateDictError: shapes differ (always), or keys are missing / unexpected when
                ``strict``; the message lists every offending key.
            ModuleMutationError: called inside a transformed function.
            TypeError: ``state_dict`` is not a mapping (e.g. a file name).
        """
        _check_mutable(self, "load_state_dict")
        if not isinstance(state_dict, collections.abc.Mapping):
            hint = (" (a file name: load it with starling.load(path) first)"
                    if isinstance(state_dict, (str, bytes, os.PathLike)) else "")
            raise TypeError(f"{type(self).__name__}.load_state_dict: expected a mapping of "
                            f"names to arrays, got {type(state_dict).__name__}{hint}")
        from .. import numpy as snp
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        new, bad_shape = {}, []
        for k, cur in own.items():
            if k not in state_dict:
                continue
            v = _to_array(state_dict[k])
            if tuple(v.shape) != tuple(cur.shape):
                bad_shape.append(f"{k}: expected shape {tuple(cur.shape)}, got {tuple(v.shape)}")
                continue
            new[k] = v if assign or v.dtype == cur.dtype else snp.astype(v, cur.dtype)
        problems = []
        if bad_shape:
            problems.append("size mismatch for " + "; ".join(bad_shape))
        if strict and missing:
            problems.append("missing key(s): " + ", ".join(repr(k) for k in missing))
        if strict and unexpected:
            problems.append("unexpected key(s): " + ", ".join(repr(k) for k in unexpected))
        if problems:
            raise StateDictError(f"error(s) in loading state_dict for {type(self).__name__}:\n  "
                                 + "\n  ".join(problems))
        self._rebind(new)
        return IncompatibleKeys(missing, unexpected)

    def _rebind(self, mapping):
        """Rebinds dotted names to new values in place (outside transformations only)."""
        _check_mutable(self, "rebind parameters")
        for name, v in mapping.items():
            head, _, leaf = name.rpartition(".")
            m = self.get_submodule(head)
            if isinstance(v, Tracer):
                _check_mutable(m, f"set {name!r}", v)
            object.__setattr__(m, leaf, v)

    # ---- modes -------------------------------------------------------------------------------
    def train(self, mode: bool = True):
        """Sets training mode on this module and every submodule (in place); returns self."""
        _check_mutable(self, "train()/eval()")
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        """Freezes (False) or unfreezes every parameter of this module tree (in place); frozen
        parameters get no gradient from ``nn.value_and_grad`` and are not optimised."""
        _check_mutable(self, "requires_grad_()")
        for m in self.modules():
            names = frozenset() if requires_grad else frozenset(m._own()[0])
            object.__setattr__(m, "_frozen_names", names)
        return self

    def apply(self, fn):
        """Calls ``fn(m)`` on every submodule (children first) and on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, dtype):
        """Converts floating parameters and buffers to ``dtype`` (in place); returns self."""
        from .. import numpy as snp
        _check_mutable(self, "to()")
        self._rebind({k: snp.astype(v, dtype) for k, v in self.state_dict().items()
                      if _is_float_dtype(v.dtype)})
        return self

    # ---- state updates (running statistics) --------------------------------------------------
    def buffer(self, name):
        """The current value of buffer ``name``: the latest value recorded by
        ``update_buffers`` in this collected call (so a module applied twice in one forward
        pass sees its first update, as eagerly), else the attribute."""
        col = _COLLECTOR.get()
        if col is not None:
            entry = col.by_id.get(id(self))
            if entry is not None and name in entry[1]:
                return entry[1][name]
        return getattr(self, name)

    def update_buffers(self, **values):
        """Records new values of buffers (e.g. running statistics) computed in ``forward``.

        Eagerly (outside transformations) this rebinds them in place, as PyTorch updates its
        buffers, and so does it inside an ``nn.compile`` that lifted this module (written back
        after the call). Under ``nn.stateful_call`` / ``nn.value_and_grad`` the values are
        collected and returned in a new module. Inside any other transformation it raises.

        Raises:
            ModuleMutationError: inside a transformation that does not collect updates.
        """
        col = _COLLECTOR.get()
        if col is not None:
            col.record(self, values)
            return
        if mutation_allowed(self, values.values()):
            for k, v in values.items():
                object.__setattr__(self, k, v)
            return
        raise ModuleMutationError(
            f"{type(self).__name__}: updating buffers {sorted(values)} inside a transformed "
            f"function ({current_trace()}). Thread them explicitly: `out, model = "
            "nn.stateful_call(model, x)` or `loss, grads, model = nn.value_and_grad(loss_fn, "
            "return_module=True)(model, ...)`, pass the model to an nn.compile'd step, or call "
            "model.eval() before transforming.")

    # ---- calling and printing ----------------------------------------------------------------
    def forward(self, *args, **kwargs):
        """The module's computation; subclasses must override it (the base raises
        NotImplementedError naming the class)."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward(); subclasses "
                                  "of nn.Module must override it")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def extra_repr(self) -> str:
        """One-line configuration shown by ``repr`` (override in layers)."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        children = list(self.named_children())
        if not children:
            return f"{type(self).__name__}({extra})"
        lines = [f"{type(self).__name__}("]
        if extra:
            lines.append("  " + extra.replace("\n", "\n  "))
        for name, m in children:
            lines.append(f"  ({name}): " + repr(m).replace("\n", "\n  "))
        lines.append(")")
        return "\n".join(lines)


def _to_array(v):
    from .. import numpy as snp
    if _is_array(v):
        return v
    if hasattr(v, "detach") and hasattr(v, "cpu"):  # a PyTorch tensor
        v = v.detach().cpu().numpy()
    return snp.asarray(v)


# ---- collecting buffer updates -------------------------------------------------------------------

class _Collector:
    def __init__(self):
        self.by_id = {}

    def record(self, module, values):
        self.by_id.setdefault(id(module), (module, {}))[1].update(values)

    def named(self, root):
        """Collected updates of ``root``'s submodules by dotted name."""
        out = {}
        if not self.by_id:
            return out
        for prefix, m in root.named_modules(remove_duplicate=False):
            entry = self.by_id.get(id(m))
            if entry is not None:
                for k, v in entry[1].items():
                    out[f"{prefix}.{k}" if prefix else k] = v
        return out


_COLLECTOR = contextvars.ContextVar("starling_nn_buffer_updates", default=None)


@contextlib.contextmanager
def collecting():
    """Context in which ``Module.update_buffers`` records instead of rebinding."""
    col = _Collector()
    token = _COLLECTOR.set(col)
    try:
        yield col
    finally:
        _COLLECTOR.reset(token)


def leaf_names(module):
    """Dotted names of a module's leaves in pytree-flatten order (== state_dict order)."""
    return list(module.state_dict().keys())
