"""The backend-neutral scalar formula language of the elementwise primitives.

Each elementwise primitive states what it computes on ONE element once, in its family file, as a
``ScalarFormula``: a Python function that builds an expression (``Expr``) of the scalar ops
below from its operands. Every code generator (``lowering/backends/cpp/formulas.py`` renders
C++, ``lowering/backends/triton/formulas.py`` Triton) renders these expressions; no backend keeps
a table of per-primitive formulas, so adding an elementwise op is one block in one family file.

An ``Expr`` has an ``op``, operand ``Expr``s, a result ``dtype`` (a NumPy dtype) and, for some
ops, a static ``attr``. Leaves: ``arg(i, dtype)`` (the primitive's i-th operand) and
``lit(value, dtype)`` (an exact constant). Python operators build arithmetic (``+ - * /``, unary
``-``; bitwise ``& | ^ ~`` on integers, logical on bool); Python numbers beside an ``Expr`` become
literals of its dtype. Operands of an op have one dtype (``cast`` converts).

The ops and their contracts (IEEE 754 binary32 / binary64; integers are two's complement and
wrap; "as NumPy" means the value NumPy's ufunc gives, NaN / inf / -0.0 included):

* arithmetic (ints, floats): ``add sub mul neg``; ``div`` (floats).
* comparisons -> bool: ``eq ne lt le gt ge`` (IEEE: NaN is unordered, ``-0.0 == 0.0``).
* logic on bool: ``and_ or_ xor_ not_``.
* bits on integers: ``band bor bxor binv``; ``shl shr`` (as NumPy: a shift by the bit width or
  more gives 0, or -1 for a negative operand shifted right); ``popcount`` (set bits of the
  two's-complement pattern).
* ``select(c, a, b)``: ``a`` where bool ``c`` else ``b``.
* ``cast(x, dtype)``: Starling's conversion rules (core/casting.py): float -> integer truncates
  and saturates (NaN -> 0), every conversion to a float rounds once to nearest-even.
  ``cast(x, dtype, exact=True)`` states that ``x`` is already a value of ``dtype`` (a selection
  among low-precision operands): backends may skip the rounding.
* math functions of floats (C99 / IEEE semantics, libm accuracy): ``exp exp2 expm1 log log2
  log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh sqrt cbrt erf erfc
  rint`` (round half to even) ``floor ceil trunc fabs``; binary ``atan2 hypot`` (correctly
  rounded) ``copysign nextafter``; ``ldexp(x, e)`` with ``e`` int32.
* ops with NumPy's contract: ``max min`` (NaN-propagating; bool: or / and), ``fmax fmin``
  (NaN-ignoring), ``floordiv`` (Python's floor division; integers: ``x // 0 == 0``,
  ``MIN // -1`` wraps), ``mod`` (Python's remainder, the divisor's sign; integers ``x % 0 ==
  0``), ``fmod`` (C's remainder, the dividend's sign; integers ``x fmod 0 == 0``), ``pow``
  (floats: C ``pow``; integers: wrapping, a negative exponent gives the truncated exact value),
  ``sign`` (NaN stays NaN), ``heaviside(x, h)``, ``logaddexp logaddexp2 spacing``, ``gcd lcm``
  (integers), ``isnan isinf isfinite signbit`` (floats -> bool).

Low-precision floats (float16, bfloat16, float8, float4) appear as operand, literal and cast
dtypes only. A formula's ``lowp`` policy says how the primitive treats them: "round" (the
default) computes the float32 formula on the widened operands and rounds the result to the
result's format once (NumPy's float16 loops and ml_dtypes' ufuncs); "exact" does the same for
results that are values of the operands' format (selections, sign changes), so no rounding is
needed; None hands the operands over as they are (conversions, predicates on the bits).
Complex dtypes have no formulas: the complex_decompose pass rewrites them into real ops first.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as _dtypes

__all__ = ["Expr", "ScalarFormula", "arg", "lit", "cast", "select", "call", "OPS", "LOWP",
           "math1", "same", "Unrenderable", "render_primitive"]

#: the low-precision float formats (held in float32 by the formula language's users)
LOWP = frozenset((_dtypes.float16, _dtypes.bfloat16) + _dtypes.LOW_PRECISION_FLOATS)
F32, F64, BOOL, I32 = (np.dtype(t) for t in (np.float32, np.float64, np.bool_, np.int32))

# name -> (number of operands, accepted dtype kinds, result): result "same" (the operands'
# dtype) or "bool".
OPS = {}


def _ops(names, nargs, kinds, result="same"):
    for n in names.split():
        OPS[n] = (nargs, kinds, result)


_ops("add sub mul", 2, "iuf")
_ops("neg", 1, "iuf")
_ops("div", 2, "f")
_ops("eq ne lt le gt ge", 2, "biuf", "bool")
_ops("and_ or_ xor_", 2, "b")
_ops("not_", 1, "b")
_ops("band bor bxor shl shr", 2, "iu")
_ops("binv popcount", 1, "iu")
_ops("exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh "
     "acosh atanh sqrt cbrt erf erfc rint floor ceil trunc fabs spacing", 1, "f")
_ops("atan2 hypot copysign nextafter heaviside logaddexp logaddexp2", 2, "f")
_ops("max min", 2, "biuf")
_ops("fmax fmin floordiv mod fmod pow", 2, "iuf")
_ops("sign", 1, "iuf")
_ops("gcd lcm", 2, "iu")
_ops("isnan isinf isfinite signbit", 1, "f", "bool")
# special forms (checked by their builders): arg, lit, cast, select, ldexp


class Expr:
    """One node of a scalar formula: ``op`` applied to ``args`` (Exprs), of result ``dtype``;
    ``attr`` is the static part of ``arg`` (index), ``lit`` (value) and ``cast`` (exact
    flag)."""

    __slots__ = ("op", "args", "dtype", "attr")

    def __init__(self, op, args, dtype, attr=None):
        self.op, self.args, self.dtype, self.attr = op, tuple(args), np.dtype(dtype), attr

    def __repr__(self):
        if self.op in ("arg", "lit"):
            return f"{self.op}({self.attr!r}:{self.dtype})"
        attr = "" if self.attr is None else f", {self.attr!r}"
        return f"{self.op}({', '.join(map(repr, self.args))}{attr})"

    def _other(self, v):
        return v if isinstance(v, Expr) else lit(v, self.dtype)

    def __add__(self, o): return call("or_" if self.dtype == BOOL else "add", self, self._other(o))
    def __radd__(self, o): return self._other(o) + self
    def __sub__(self, o): return call("sub", self, self._other(o))
    def __rsub__(self, o): return self._other(o) - self
    def __mul__(self, o): return call("and_" if self.dtype == BOOL else "mul", self, self._other(o))
    def __rmul__(self, o): return self._other(o) * self
    def __truediv__(self, o): return call("div", self, self._other(o))
    def __rtruediv__(self, o): return self._other(o) / self
    def __neg__(self): return call("neg", self)
    def __and__(self, o): return call("and_" if self.dtype == BOOL else "band", self,
                                      self._other(o))
    def __or__(self, o): return call("or_" if self.dtype == BOOL else "bor", self, self._other(o))
    def __xor__(self, o): return call("xor_" if self.dtype == BOOL else "bxor", self,
                                      self._other(o))
    def __invert__(self): return call("not_" if self.dtype == BOOL else "binv", self)


def arg(i, dtype):
    """The primitive's ``i``-th operand, of ``dtype``."""
    return Expr("arg", (), dtype, int(i))


def lit(value, dtype):
    """The constant ``value`` as ``dtype`` (converted by Starling's casting rules; a
    low-precision dtype rounds it to the format)."""
    from .casting import scalar
    dt = np.dtype(dtype)
    return Expr("lit", (), dt, scalar(value, dt))


def cast(x, dtype, exact=False):
    """``x`` converted to ``dtype`` (see the module docstring); ``exact``: no rounding needed."""
    dt = np.dtype(dtype)
    if x.dtype == dt:
        return x
    return Expr("cast", (x,), dt, bool(exact))


def select(c, a, b):
    """``a`` where the bool ``c`` holds, else ``b`` (Python numbers take the other's dtype)."""
    if not isinstance(a, Expr):
        a = b._other(a)
    if not isinstance(b, Expr):
        b = a._other(b)
    if c.dtype != BOOL or a.dtype != b.dtype:
        raise TypeError(f"scalar select: needs a bool condition and operands of one dtype, "
                        f"got {c.dtype}, {a.dtype}, {b.dtype}")
    return Expr("select", (c, a, b), a.dtype)


def ldexp(x, e):
    """``x * 2**e`` (C ``ldexp``) for a float ``x`` and an int32 ``e``."""
    if x.dtype.kind != "f" or x.dtype in LOWP or e.dtype != I32:
        raise TypeError(f"scalar ldexp: needs a float32/64 and an int32, got {x.dtype}, {e.dtype}")
    return Expr("ldexp", (x, e), x.dtype)


def call(op, *args):
    """The op ``op`` (a name in ``OPS``) of ``args`` (Exprs; Python numbers take the dtype of
    the first Expr). Raises TypeError when the operands' dtypes do not fit the op."""
    nargs, kinds, result = OPS[op]
    first = next(a for a in args if isinstance(a, Expr))
    args = [a if isinstance(a, Expr) else first._other(a) for a in args]
    dt = args[0].dtype
    kind = "f" if dt in LOWP else dt.kind   # ml_dtypes' formats have kind "V"
    if len(args) != nargs or any(a.dtype != dt for a in args) or kind not in kinds or (
            dt in LOWP and op != "signbit"):
        raise TypeError(f"scalar {op}: operands {[str(a.dtype) for a in args]} do not fit "
                        f"(takes {nargs} of one dtype of kind {kinds!r})")
    return Expr(op, args, BOOL if result == "bool" else dt)


def __getattr__(name):
    # S.exp(x), S.eq(a, b), ...: the ops of OPS as functions
    if name in OPS:
        return lambda *args: call(name, *args)
    raise AttributeError(f"module 'starling.core.scalar' has no attribute {name!r}")


def is_float(dt):
    """float32 / float64 (the dtypes the math ops take)."""
    return np.dtype(dt) in (F32, F64)


def is_floating(dt):
    """Any real float dtype, the low-precision formats included."""
    dt = np.dtype(dt)
    return dt.kind == "f" or dt in LOWP


class ScalarFormula:
    """``prim.scalar_formula``: ``fn(*operands, out=, params=, fmt=)`` returns the Expr of one
    element (or None where the primitive has no formula for these dtypes: the backend then
    runs its NumPy implementation). ``lowp`` is the low-precision policy (module docstring);
    under "round" / "exact" the operands arrive widened to float32 and ``fmt`` is the
    low-precision dtype they had (else None).

    ``instantiate(in_dtypes, out_dtype, params)`` builds the Expr over ``arg(i, in_dtypes[i])``.
    """

    __slots__ = ("fn", "lowp", "name")

    def __init__(self, fn, lowp="round", name=None):
        if lowp not in ("round", "exact", None):
            raise ValueError(f"ScalarFormula: lowp must be 'round', 'exact' or None, got {lowp!r}")
        self.fn, self.lowp, self.name = fn, lowp, name or getattr(fn, "__name__", "formula")

    def __repr__(self):
        return f"ScalarFormula({self.name})"

    def instantiate(self, in_dtypes, out_dtype, params):
        dts = [np.dtype(d) for d in in_dtypes]
        out = np.dtype(out_dtype)
        if any(d.kind == "c" for d in dts) or out.kind == "c":
            return None
        args = [arg(i, d) for i, d in enumerate(dts)]
        low = [d for d in dts + [out] if d in LOWP]
        if not low or self.lowp is None:
            return self.fn(*args, out=out, params=params, fmt=None)
        fmt = next((d for d in dts if d in LOWP), low[0])
        wide = [cast(a, F32, exact=True) if a.dtype in LOWP else a for a in args]
        res = self.fn(*wide, out=F32 if out in LOWP else out, params=params, fmt=fmt)
        if res is None or out not in LOWP:
            return res
        return cast(res, out, exact=self.lowp == "exact")


def math1(op, ints=None):
    """The formula of a primitive that is the float op ``op``; integer / bool operands give
    ``ints(x)`` (None: no formula)."""
    def formula(*xs, out, params, fmt):
        if is_float(xs[0].dtype):
            return call(op, *xs)
        return ints(*xs) if ints is not None else None
    formula.__name__ = op
    return ScalarFormula(formula)


def same(*xs, out, params, fmt):
    """The formula of an identity (``stop_gradient``, ``real`` of a real number)."""
    return xs[0]


def as_formula(formula, name):
    """``formula`` as a ScalarFormula (a plain function gets the default policy), or None."""
    if formula is None or isinstance(formula, ScalarFormula):
        return formula
    return ScalarFormula(formula, name=name)


class Unrenderable(Exception):
    """Raised by a code generator for an op / dtype of a formula it does not render."""


_RENDERED: dict = {}


def render_primitive(prim, args, in_dtypes, out_dtype, params, *, supported, render_expr):
    """A code generator's rendering of one element of primitive ``prim``: its formula
    instantiated for the dtypes and passed to ``render_expr(expr, args)``; None where the
    primitive has no formula, a dtype is not ``supported`` by the generator, or the formula
    has an op it does not render (``Unrenderable``) or rejects the dtypes / params. Results
    are cached (fusion policies and code generators ask about the same equations again)."""
    formula = prim.scalar_formula
    if formula is None:
        return None
    try:
        key = (render_expr, formula, tuple(args), tuple(np.dtype(d) for d in in_dtypes),
               np.dtype(out_dtype),
               # by type and repr: equal-comparing values render differently (-0.0 and 0.0)
               tuple(sorted((k, type(v), repr(v)) for k, v in params.items())))
        hit = _RENDERED.get(key, _RENDERED)
    except TypeError:   # an unhashable parameter value: rendered every time
        key, hit = None, _RENDERED
    if hit is not _RENDERED:
        return hit
    out = None
    if all(supported(d) for d in in_dtypes) and supported(out_dtype):
        try:
            expr = formula.instantiate(in_dtypes, out_dtype, params)
            out = None if expr is None else render_expr(expr, list(args))
        except (Unrenderable, TypeError, ValueError, ArithmeticError):
            out = None
    if key is not None:
        if len(_RENDERED) > 8192:   # bounded: programs repeat a few signatures
            _RENDERED.clear()
        _RENDERED[key] = out
    return out
