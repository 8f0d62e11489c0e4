"""Stackless trace context, the Tracer base class and the eval interpreter.

There is no global stack of interpreters. A context variable holds the *current* trace; a
transformation creates its trace with the current one as ``parent``, makes itself current while
it runs the user's function, and its rules bind primitives on the parent. A tracer remembers its
trace; a trace that has ended is invalidated, so a tracer that leaks out of its transformation is
caught the next time it is used (``LeakedTracerError``).
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools


class LeakedTracerError(RuntimeError):
    """A tracer was used after the transformation that made it returned (e.g. stored in a global)."""


class ConcretizationError(TypeError):
    """A traced (abstract) value was used where a concrete Python value is needed."""


class Trace:
    """Base class of interpreters. Subclasses define ``process_primitive(prim, args, params)``.

    ``parent`` is the trace that was current when this one was made; rules bind on it.
    """

    _ids = itertools.count()

    def __init__(self, parent: "Trace | None" = None):
        self.parent = parent
        self.level = 0 if parent is None else parent.level + 1
        self.id = next(Trace._ids)
        self.valid = True

    def invalidate(self):
        self.valid = False

    def check_valid(self, tracer):
        if not self.valid:
            raise LeakedTracerError(
                f"a tracer of an ended {type(self).__name__} was used: {tracer.aval.str_short()}. "
                "A value from inside a transformed function (grad, vmap, compile, ...) escaped "
                "it, e.g. through a global or a closure; return it from the function instead.")

    def __repr__(self):
        return f"{type(self).__name__}(level={self.level})"


class EvalTrace(Trace):
    """The base interpreter: runs each primitive's reference implementation on concrete buffers.

    ``array_type`` and ``wrap`` are installed by src/arrays/array.py (core does not import arrays).
    """

    array_type = None
    wrap = None
    # Array subclasses whose data is not one host buffer -> the function running a primitive
    # on operands that include them: sharded arrays (src/collectives/eager.py), GPU arrays
    # (src/arrays/cuda.py)
    dispatchers: dict = {}

    @classmethod
    def register_dispatch(cls, array_class, fn):
        """Operations with an operand of type ``array_class`` (an Array subclass) run as
        ``fn(prim, args, params)``."""
        cls.dispatchers[array_class] = fn

    def process_primitive(self, prim, args, params):
        if prim.eager is not None:
            return prim.eager(args, params)
        array_type = EvalTrace.array_type
        bufs = []
        weak = []
        for a in args:
            if type(a) is not array_type:
                if isinstance(a, array_type):
                    return _dispatch(prim, args, params)
                _reject_eval_input(prim, a)
            bufs.append(a._buf)
            weak.append(a._weak)
        impl = prim.impl
        if impl is None:
            from .primitive import MissingRuleError
            raise MissingRuleError(prim, "impl")
        out = impl(*bufs, **params)
        out_weak = prim.weak_type(*weak, **params)
        wrap = EvalTrace.wrap
        if prim.multiple_results:
            if type(out_weak) is bool:
                return [wrap(o, out_weak) for o in out]
            return [wrap(o, w) for o, w in zip(out, out_weak)]
        return wrap(out, out_weak)


def _dispatch(prim, args, params):
    """Runs ``prim`` by the dispatcher of its operands' Array subclass; operands of two kinds
    (a sharded array and a GPU array) live on different devices: an error naming them."""
    array_type = EvalTrace.array_type
    found = {}
    for i, a in enumerate(args):
        if type(a) is not array_type:
            if not isinstance(a, array_type):
                _reject_eval_input(prim, a)
            fn = next((EvalTrace.dispatchers[c] for c in type(a).__mro__
                       if c in EvalTrace.dispatchers), None)
            if fn is None:
                raise TypeError(f"{prim.name}: no eager dispatch for {type(a).__name__} operands")
            found.setdefault(fn, i)
    if len(found) > 1:
        where = ", ".join(f"operand {i} on {sorted(map(str, args[i].devices()))}"
                          for i in found.values())
        raise ValueError(f"{prim.name}: operands on different devices ({where}); move them to "
                         "one device with starling.device_put first")
    return next(iter(found))(prim, args, params)


def _reject_eval_input(prim, a):
    if isinstance(a, Tracer):
        a._trace.check_valid(a)
        raise LeakedTracerError(
            f"{prim.name}: got a tracer of {a._trace} outside its transformation")
    raise TypeError(f"{prim.name}: expected Array operands, got {type(a).__name__}")


EVAL_TRACE = EvalTrace()
_current = contextvars.ContextVar("starling_trace", default=EVAL_TRACE)
current_trace = _current.get


@contextlib.contextmanager
def set_current_trace(trace: Trace):
    """Makes ``trace`` current inside the block (restored afterwards, also on error)."""
    token = _current.set(trace)
    try:
        yield trace
    finally:
        _current.reset(token)


# Reference mode: primitive implementations that have a native fast path (e.g. dot_general's
# strided GEMM) take their plain NumPy path instead. The numpy_ref backend, the oracle other
# backends are tested against, evaluates in this mode so that it never shares their kernels.
_reference = contextvars.ContextVar("starling_reference_mode", default=False)
in_reference_mode = _reference.get


@contextlib.contextmanager
def reference_mode():
    """Inside the block, implementations run their NumPy reference path (see above)."""
    token = _reference.set(True)
    try:
        yield
    finally:
        _reference.reset(token)


@contextlib.contextmanager
def new_trace(trace_type, *args, **kwargs):
    """Creates a child of the current trace, makes it current, and invalidates it on exit."""
    trace = trace_type(_current.get(), *args, **kwargs)
    token = _current.set(trace)
    try:
        yield trace
    finally:
        _current.reset(token)
        trace.invalidate()


class Tracer:
    """Base class of the values a transformation passes through the user's function.

    Subclasses define the ``aval`` property (a ShapedArray) and set ``_trace``. Array operators and methods are
    installed on this class by src/arrays (so tracers behave like arrays in user code).
    """

    __slots__ = ("_trace",)
    __array_priority__ = 1000

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    @property
    def weak_type(self):
        return self.aval.weak_type

    @property
    def _weak(self):
        return self.aval.weak_type

    @property
    def ndim(self):
        return len(self.aval.shape)

    @property
    def size(self):
        return self.aval.size

    def to_concrete(self):
        """The concrete Array behind this tracer, or raise ConcretizationError."""
        raise ConcretizationError(
            f"a traced value {self.aval.str_short()} was used where a concrete value is needed "
            f"(Python control flow, bool(), int(), or conversion to NumPy) inside {self._trace}. "
            "Use starling.numpy.where, cond / switch / while_loop, or mark the argument static.")

    def __bool__(self):
        return bool(self.to_concrete())

    def item(self, *args):
        """The concrete value as a Python scalar (raises ConcretizationError when traced)."""
        return self.to_concrete().item(*args)

    def tolist(self):
        """Nested lists of the concrete value (raises ConcretizationError when traced)."""
        return self.to_concrete().tolist()

    def __int__(self):
        return int(self.to_concrete())

    def __float__(self):
        return float(self.to_concrete())

    def __complex__(self):
        return complex(self.to_concrete())

    def __index__(self):
        return self.to_concrete().__index__()

    def __array__(self, dtype=None, copy=None):
        return self.to_concrete().__array__(dtype)

    def __len__(self):
        if not self.aval.shape:
            raise TypeError("len() of a 0-d array")
        return self.aval.shape[0]

    def __hash__(self):
        raise TypeError("unhashable type: tracer (arrays are not hashable)")

    def __repr__(self):
        return f"Tracer<{self.aval.str_short()}, {self._trace}>"
