"""The elementwise family: shared broadcasting, dtype rules and primitive/wrapper construction.

An elementwise primitive takes operands of ONE dtype (the wrapper promotes first) whose shapes
broadcast NumPy-style; its output has the broadcast shape. Each op declares:

* ``domain``: which input dtypes it accepts and what it does with the rest:
    "any"       every dtype;
    "numeric"   everything but bool (bool raises TypeError);
    "real"      bool/int/float, not complex;
    "real_num"  int/float, not bool or complex;
    "integer"   bool and integers (bitwise ops), floats raise TypeError;
    "int_only"  integers only (shifts);
    "bool"      bool only;
    "inexact"   float/complex; bool and int inputs are promoted to the default float (float32,
                as in JAX: ``sin(int64) -> float32``);
    "real_inexact"  like "inexact" but complex raises TypeError.
* ``out``: "same" (the input dtype), "bool" (comparisons, predicates), "real" (abs of complex).

The NumPy implementation runs low-precision floats (bfloat16, float8, float4) in float32 and
rounds the result back, since NumPy has no native kernels for them.
"""
from __future__ import annotations

import functools

import numpy as np

from ...core import casting, dtypes, scalar
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ...core.trace import EVAL_TRACE, Tracer, current_trace
from ..array import Array, wrap
from ..convert import operand
from .convert_element_type import convert_element_type
from . import rules_sharding
from .rules import batch_elementwise

_LOW = frozenset(dtypes.LOW_PRECISION_FLOATS) | {dtypes.bfloat16}

DOMAINS = {
    "any": frozenset(dtypes.ALL_DTYPES),
    "numeric": frozenset(dtypes.ALL_DTYPES) - {dtypes.bool_},
    "real": frozenset(dtypes.ALL_DTYPES) - frozenset(dtypes.COMPLEXES),
    "real_num": frozenset(dtypes.ALL_DTYPES) - frozenset(dtypes.COMPLEXES) - {dtypes.bool_},
    "integer": frozenset((dtypes.bool_,) + dtypes.SIGNED_INTS + dtypes.UNSIGNED_INTS),
    "int_only": frozenset(dtypes.SIGNED_INTS + dtypes.UNSIGNED_INTS),
    "bool": frozenset((dtypes.bool_,)),
    "inexact": frozenset(dtypes.FLOATS + dtypes.COMPLEXES),
    "real_inexact": frozenset(dtypes.FLOATS),
    # ops that move or select values without computing on them (concatenate, where, choose)
    "data": frozenset(dtypes.ALL_DTYPES + dtypes.SCALE_FLOATS),
}
_PROMOTE_TO_FLOAT = {"inexact", "real_inexact"}
_DOMAIN_WORDS = {
    "any": "any dtype", "numeric": "a numeric dtype (not bool)",
    "real": "a real dtype (bool, integer or floating; not complex)",
    "real_num": "an integer or real floating dtype",
    "integer": "a boolean or integer dtype", "int_only": "an integer dtype",
    "bool": "the bool dtype", "inexact": "a floating or complex dtype (integers are promoted)",
    "real_inexact": "a real floating dtype (integers are promoted; not complex)",
    "data": "any dtype",
}


def broadcast_shapes(op, *shapes):
    """NumPy broadcasting of shapes; raises ValueError naming ``op`` and all shapes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        size = 1
        for s in shapes:
            if len(s) + i < 0:
                continue
            d = s[i]
            if d == 1:
                continue
            if size == 1:
                size = d
            elif d != size:
                raise ValueError(f"{op}: operands could not be broadcast together with shapes "
                                 f"{', '.join(str(tuple(s)) for s in shapes)}")
        out.append(size)
    return tuple(out)


def _in_float32(fn):
    def run(*args, **params):
        dt = args[0].dtype
        if dt in _LOW:
            out = fn(*[casting.astype(a, dtypes.float32) for a in args], **params)
            out = np.asarray(out)
            return casting.astype(out, dt) if out.dtype == np.float32 else out
        return fn(*args, **params)
    run.__name__ = getattr(fn, "__name__", "impl")
    return run


def _check_domain(op, dt, domain):
    if dt in dtypes.SCALE_FLOATS and dt not in DOMAINS[domain]:
        raise TypeError(f"{op}: {dt} holds scales (powers of two) and takes part in no "
                        f"arithmetic or comparison; convert it first (.astype(float32))")
    if dt not in DOMAINS[domain]:
        raise TypeError(f"{op}: unsupported dtype {dt}; expected {_DOMAIN_WORDS[domain]}")


def _float_target(dt, weak):
    if dtypes.is_inexact(dt):
        return dt, weak
    return dtypes.DEFAULT_FLOAT, weak


def promote_operands(op, args, domain="any"):
    """Converts args to operands of one dtype (JAX promotion with weak types) for ``op``.

    Python scalars are built directly at the result dtype (no cast op); an out-of-range Python
    int for an integer result raises OverflowError. Returns the list of operands.
    """
    infos = []
    for a in args:
        if type(a) in (int, float, complex, bool):
            infos.append((dtypes.dtype_of_scalar(a), not isinstance(a, bool)))
        else:
            a = operand(a, op)
            infos.append((a.dtype, a.weak_type))
    try:
        dt, weak = dtypes.result_type(*infos)
    except TypeError as e:
        raise TypeError(f"{op}: {e}") from None
    if dt in dtypes.SCALE_FLOATS:   # before promotion to float could hide it
        _check_domain(op, dt, domain)
    if domain in _PROMOTE_TO_FLOAT:
        dt, weak = _float_target(dt, weak)
    _check_domain(op, dt, domain)
    out = []
    for a, (adt, aweak) in zip(args, infos):
        if type(a) in (int, float, complex, bool):
            out.append(_scalar_at(op, a, dt, weak))
        else:
            a = operand(a, op)
            out.append(convert_element_type(a, dt, weak) if (adt != dt or aweak != weak) else a)
    return out


def _scalar_at(op, value, dt, weak):
    if dtypes.is_integer(dt) and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dt)
        if not info.min <= value <= info.max:
            raise OverflowError(f"{op}: Python int {value} is out of range for {dt} "
                                f"[{info.min}, {info.max}]")
    if dtypes.is_integer(dt) or dtypes.is_bool(dt):
        if isinstance(value, (float, complex)):
            raise TypeError(f"{op}: cannot use Python {type(value).__name__} {value} with {dt}")
    # Built directly at the target dtype: a Python scalar is a constant, never a staged cast.
    return wrap(casting.scalar(value, dt), weak)


class Elementwise:
    """Declares one elementwise primitive and its public wrapper.

    Args:
        name: primitive and function name.
        impl: NumPy implementation taking ``nin`` arrays of one dtype (NumPy ufuncs work for the
            ml_dtypes low-precision floats too).
        nin: number of operands.
        domain: accepted dtypes (see module docstring).
        out: "same", "bool" or "real".
        doc: docstring of the public wrapper.
        low_precision_in_float32: run bfloat16/float8/float4 inputs in float32 and round back
            (for impls that are not NumPy ufuncs).
        partials: the op's Partial sharding strategies (linear ops: ``add`` of two partial sums
            is a partial sum; see rules_sharding.elementwise). Every elementwise op may run on
            operands split alike along any dim.
        formula: its scalar formula (core/scalar.py): a ``ScalarFormula``, or a function
            ``fn(*operands, out=, params=, fmt=)`` under the default low-precision policy. None:
            no backend fuses the op (it runs its NumPy implementation).
    """

    def __init__(self, name, impl, nin, *, domain="any", out="same", doc="",
                 low_precision_in_float32=False, partials=(), formula=None):
        self.name = name
        self.nin = nin
        self.domain = domain
        self.out = out
        self.allowed = DOMAINS[domain]
        prim = Primitive(name, family="elementwise")
        if low_precision_in_float32:
            impl = _in_float32(impl)
        prim.impl = _checked_impl(name, impl, nin)
        prim.abstract_eval = self._abstract_eval
        prim.weak_type = (lambda *w: False) if out == "bool" else (lambda *w: all(w))
        prim.meta.update(nin=nin, domain=domain, out=out, numpy_impl=impl)
        # Every elementwise primitive batches by broadcasting and shards along any dim; ops with
        # params override this.
        batch_elementwise(prim)
        prim.sharding = rules_sharding.elementwise(partials)
        prim.scalar_formula = scalar.as_formula(formula, name)
        self.primitive = prim
        self.wrapper = self._make_wrapper(doc)

    def out_dtype(self, dt):
        if self.out == "bool":
            return dtypes.bool_
        if self.out == "real":
            return dtypes.real_dtype(dt)
        return dt

    def _abstract_eval(self, *avals):
        shape = avals[0].shape if self.nin == 1 else broadcast_shapes(
            self.name, *[a.shape for a in avals])
        dt = avals[0].dtype
        weak = False if self.out == "bool" else all(a.weak_type for a in avals)
        return ShapedArray(shape, self.out_dtype(dt), weak)

    def _make_wrapper(self, doc):
        # The fast paths below inline what EvalTrace.process_primitive would do for concrete
        # Arrays of an allowed dtype; any other case (tracers, promotion, debug traces) binds.
        prim, name, allowed, domain = self.primitive, self.name, self.allowed, self.domain
        bind = prim.bind
        impl = prim.meta["numpy_impl"]
        is_ufunc = isinstance(impl, np.ufunc)
        bool_out = self.out == "bool"
        if self.nin == 1:
            def wrapper(x, /):
                if type(x) is Array and current_trace() is EVAL_TRACE:
                    buf = x._buf
                    if buf.dtype in allowed:
                        return wrap(impl(buf), False if bool_out else x._weak)
                elif isinstance(x, Tracer) and x.dtype in allowed:
                    return bind(x)   # promotion would keep it as it is
                (x,) = promote_operands(name, (x,), domain)
                return bind(x)
        elif self.nin == 2:
            def wrapper(x1, x2, /):
                if type(x1) is Array and current_trace() is EVAL_TRACE:
                    b1 = x1._buf
                    t2 = type(x2)
                    if t2 is Array:
                        b2 = x2._buf
                        if (b1.dtype is b2.dtype and x1._weak is x2._weak and b1.dtype in allowed
                                and (not x1._weak or _weak_pair_kept(b1.dtype))):
                            try:
                                out = impl(b1, b2)
                            except ValueError:
                                broadcast_shapes(name, b1.shape, b2.shape)
                                raise
                            return wrap(out, False if bool_out else x1._weak)
                    elif (t2 is float and is_ufunc and b1.dtype in _NEP50_FLOATS
                          and b1.dtype in allowed):
                        # NumPy 2 treats Python floats as weak (NEP 50), like Starling does.
                        return wrap(impl(b1, x2), False if bool_out else x1._weak)
                    elif t2 in _FAST_SCALARS and b1.dtype in allowed:
                        s = _scalar_same_dtype(b1.dtype, x1._weak, x2)
                        if s is not None:
                            return wrap(impl(b1, s), False if bool_out else x1._weak)
                elif (type(x1) in _FAST_SCALARS and type(x2) is Array
                      and current_trace() is EVAL_TRACE):
                    b2 = x2._buf
                    if (type(x1) is float and is_ufunc and b2.dtype in _NEP50_FLOATS
                            and b2.dtype in allowed):
                        return wrap(impl(x1, b2), False if bool_out else x2._weak)
                    if b2.dtype in allowed:
                        s = _scalar_same_dtype(b2.dtype, x2._weak, x1)
                        if s is not None:
                            return wrap(impl(s, b2), False if bool_out else x2._weak)
                elif _traced_pair(x1, x2):
                    dt, weak = x1.dtype, x1.weak_type
                    if (dt == x2.dtype and weak == x2.weak_type and dt in allowed
                            and (not weak or _weak_pair_kept(dt))):
                        return bind(x1, x2)   # promotion would keep both as they are
                return bind(*promote_operands(name, (x1, x2), domain))
        else:
            def wrapper(*args):
                if len(args) != self.nin:
                    raise TypeError(f"{name}: takes {self.nin} operands, got {len(args)}")
                return bind(*promote_operands(name, args, domain))
        wrapper.__name__ = wrapper.__qualname__ = name
        wrapper.__doc__ = doc
        wrapper.primitive = prim
        return wrapper


@functools.lru_cache(maxsize=None)
def _weak_pair_kept(dt):
    """Whether two weak operands of dtype ``dt`` promote to ``dt`` (weak): not for a weak
    float64 or int8, say, which promote to the default float / int dtype."""
    return dtypes.result_type((dt, True), (dt, True)) == (dt, True)


def _traced_pair(x1, x2):
    """Both operands are tracers or plain Arrays, and at least one is a tracer."""
    t1, t2 = isinstance(x1, Tracer), isinstance(x2, Tracer)
    return (t1 or t2) and (t1 or type(x1) is Array) and (t2 or type(x2) is Array)


_FAST_SCALARS = (int, float)
# Dtypes for which NumPy's own weak-scalar rule (NEP 50) gives Starling's result dtype for a
# Python float operand (ml_dtypes floats are excluded: NumPy promotes some of them to float32).
_NEP50_FLOATS = frozenset((dtypes.float16, dtypes.float32, dtypes.float64, dtypes.complex64,
                           dtypes.complex128))
_KEEPS_DTYPE: dict = {}


def _scalar_same_dtype(dt, weak, value):
    """A NumPy scalar of ``dt`` for a Python int/float when promotion keeps ``dt``, else None."""
    key = (dt, weak, type(value))
    keeps = _KEEPS_DTYPE.get(key)
    if keeps is None:
        keeps = dtypes.result_type((dt, weak), (dtypes.dtype_of_scalar(value), True)) == (dt, weak)
        _KEEPS_DTYPE[key] = keeps
    if not keeps:
        return None
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if not info.min <= value <= info.max:
            return None  # the general path raises the OverflowError
    return casting.scalar(value, dt)


def _checked_impl(name, fn, nin):
    # Floating-point warnings (divide by zero, invalid) are silenced for all of starling by a
    # module-scoped warnings filter in starling/__init__.py: np.errstate costs ~2 us per call.
    if nin == 1:
        return fn
    else:
        def impl(*xs):
            try:
                return fn(*xs)
            except ValueError:
                broadcast_shapes(name, *[np.shape(x) for x in xs])
                raise
    impl.__name__ = name
    return impl


def unary(name, impl, *, domain="any", out="same", doc="", partials=(), formula=None):
    """Declares a one-operand elementwise op; returns its public wrapper (``.primitive`` set)."""
    return Elementwise(name, impl, 1, domain=domain, out=out, doc=doc,
                       partials=partials, formula=formula).wrapper


def binary(name, impl, *, domain="any", out="same", doc="", partials=(), formula=None):
    """Declares a two-operand broadcasting elementwise op; returns its public wrapper."""
    return Elementwise(name, impl, 2, domain=domain, out=out, doc=doc,
                       partials=partials, formula=formula).wrapper


def nary(name, impl, nin, *, domain="any", out="same", doc="", partials=(), formula=None):
    """Declares an ``nin``-operand broadcasting elementwise op; returns its public wrapper."""
    return Elementwise(name, impl, nin, domain=domain, out=out, doc=doc,
                       partials=partials, formula=formula).wrapper
