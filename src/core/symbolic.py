"""Symbolic dimensions: integer expressions over named shape variables (sympy underneath).

A symbolic dim is a ``DimExpr``: a thin wrapper around a sympy expression whose free symbols are
``DimVar`` s (sympy Dummies with an integer range ``lo..hi``). Avals hold DimExprs in their shape
tuples when a function is staged for many sizes at once (``starling.compile(...,
dynamic_shapes=...)``, ``starling.export``); the user-level names (``ShapeVar``, ``ShapesSpec``)
live in src/transforms/dynamic_spec.py.

Why a wrapper and not bare sympy: Python code (the user's and the op families') compares dims.
Here every comparison is *decided* from the variables' ranges and the active assumptions:

* ``==`` is True when the dims are provably equal and False otherwise (as in JAX: ``batch == 1``
  is False for a batch that may be 1); ``!=`` is its negation. An undecided ``==`` returns a
  ``DimCondition`` that is falsy and can be given as an assumption (``batch % 2 == 0``).
* ``<``, ``<=``, ``>``, ``>=`` give a Python bool when the ranges / assumptions decide them
  (``batch >= 2`` with ``min=2`` is True); otherwise a ``DimCondition`` whose ``bool()`` raises
  ``InconclusiveDimensionError`` naming the expression and suggesting ``min=`` / ``max=`` /
  ``assumptions=``: Python branching on a symbolic dim cannot be compiled once.
* ``int()`` / ``__index__`` (``range(d)``, ``np.zeros((d,))``) raise the same error.

Arithmetic (``+ - * // %`` with ints and other dims) gives a DimExpr, or an int when the result is
constant (``batch - batch + 3`` is ``3``). ``bind_shapes(program, env)`` substitutes concrete
sizes for the variables in a staged Program (avals and params, nested Programs too).
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from fractions import Fraction

import sympy

from .trace import ConcretizationError

_INF = math.inf


class InconclusiveDimensionError(ConcretizationError):
    """A decision about a symbolic dim (a comparison, ``int()``) that the dims' ranges and the
    declared assumptions cannot settle while tracing."""


class DimVar(sympy.Dummy):
    """A shape variable: a positive integer sympy symbol with the range ``lo..hi`` (hi may be
    None: unbounded). Distinct DimVars never compare equal, even with the same name."""

    __slots__ = ("lo", "hi")

    def __new__(cls, name, lo=1, hi=None):
        obj = super().__new__(cls, name, integer=True, positive=True)
        obj.lo = lo
        obj.hi = hi
        return obj

    def _sympystr(self, printer):
        return self.name

    def range_str(self) -> str:
        return f"[{self.lo}, {'inf' if self.hi is None else self.hi}]"


# ---- bounds (interval arithmetic over the expression tree) -------------------------------------

def _mul_iv(a, b):
    vals = []
    for x in a:
        for y in b:
            vals.append(0 if (x == 0 or y == 0) else x * y)
    return min(vals), max(vals)


def bounds(e):
    """(lo, hi) of an integer sympy expression given its DimVars' ranges (may be +-inf)."""
    if e.is_Integer:
        v = int(e)
        return v, v
    if e.is_Rational:
        v = Fraction(int(e.p), int(e.q))
        return v, v
    if isinstance(e, DimVar):
        return e.lo, (_INF if e.hi is None else e.hi)
    if e.is_Symbol:
        if e.is_positive:
            return 1, _INF
        if e.is_nonnegative:
            return 0, _INF
        return -_INF, _INF
    if e.is_Add:
        lo = hi = 0
        for a in e.args:
            alo, ahi = bounds(a)
            lo, hi = lo + alo, hi + ahi
        return lo, hi
    if e.is_Mul:
        iv = (1, 1)
        for a in e.args:
            iv = _mul_iv(iv, bounds(a))
        return iv
    if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
        n = int(e.exp)
        lo, hi = bounds(e.base)
        if lo >= 0:
            return lo ** n, hi ** n
        cands = [lo ** n, hi ** n] + ([0] if hi >= 0 else [])
        return min(cands), max(cands)
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        lo, hi = bounds(e.args[0])
        f = math.floor if isinstance(e, sympy.floor) else math.ceil
        return (lo if lo == -_INF else f(lo)), (hi if hi == _INF else f(hi))
    if isinstance(e, sympy.Mod):
        a, m = e.args
        if m.is_Integer and int(m) > 0:
            alo, ahi = bounds(a)
            if alo >= 0 and ahi < int(m):
                return alo, ahi
            return 0, int(m) - 1
        mlo, mhi = bounds(m)
        alo, ahi = bounds(a)
        if mlo >= 1 and alo >= 0:
            return 0, min(ahi, mhi - 1)
    if isinstance(e, (sympy.Max, sympy.Min)):
        ivs = [bounds(a) for a in e.args]
        f = max if isinstance(e, sympy.Max) else min
        return f(i[0] for i in ivs), f(i[1] for i in ivs)
    return -_INF, _INF


def _denominator(u):
    """q such that q * u is integer-valued (u: a polynomial with rational coefficients)."""
    q = 1
    for term in sympy.Add.make_args(u):
        c, _ = term.as_coeff_Mul()
        if c.is_Rational:
            q = math.lcm(q, int(c.q))
    return q


def _relax(atom, want_lower):
    """A floor / ceiling / Mod-free expression that bounds ``atom`` from below (or above)."""
    if isinstance(atom, sympy.floor):
        u = atom.args[0]
        return u - sympy.Rational(_denominator(u) - 1, _denominator(u)) if want_lower else u
    if isinstance(atom, sympy.ceiling):
        u = atom.args[0]
        return u if want_lower else u + sympy.Rational(_denominator(u) - 1, _denominator(u))
    if isinstance(atom, sympy.Mod):
        a, m = atom.args
        if m.is_Integer and int(m) > 0:
            # Mod(a, m) = a - m * floor(a / m)
            return _relax_terms(a - m * sympy.floor(a / m), want_lower)
        if bounds(m)[0] >= 1 and bounds(a)[0] >= 0:
            # 0 <= Mod(a, m) <= m - 1 (m symbolic: the upper bound can cancel against m)
            return sympy.Integer(0) if want_lower else m - 1
    return None


def _relax_terms(e, want_lower):
    out = []
    for term in sympy.Add.make_args(e):
        c, atom = term.as_coeff_Mul()
        r = None
        if isinstance(atom, (sympy.floor, sympy.ceiling, sympy.Mod)):
            r = _relax(atom, want_lower if c >= 0 else not want_lower)
        out.append(term if r is None else c * r)
    return sympy.expand(sympy.Add(*out))


def lower_bound(e):
    """A lower bound of the integer expression ``e``: interval bounds, tightened by replacing
    floor / ceiling / Mod terms with linear bounds so that correlated terms cancel
    (``2*floor(b/2 + 1/2) - b >= 0``, ``n - Mod(1, n) >= 1``)."""
    lo = bounds(e)[0]
    if e.has(sympy.floor, sympy.ceiling, sympy.Mod):
        r = _relax_terms(e, True)
        rlo = bounds(r)[0]
        if rlo != -_INF:
            rlo = math.ceil(rlo)  # e is integer-valued
        lo = max(lo, rlo)
    return lo


# ---- assumptions ------------------------------------------------------------------------------

class Facts:
    """Normalized assumptions: substitutions from divisibility facts (``Mod(v, k) == 0`` makes
    ``v = k * q``), ``ge`` expressions known to be >= 0, ``eq`` expressions known to be 0."""

    __slots__ = ("subs", "ge", "eq", "source")

    def __init__(self, conditions=()):
        self.subs = {}
        self.ge = []
        self.eq = []
        self.source = tuple(conditions)
        for c in conditions:
            self._add(c)
        if self.subs:
            self.ge = [_expand(g.xreplace(self.subs)) for g in self.ge]
            self.eq = [_expand(q.xreplace(self.subs)) for q in self.eq]

    def _add(self, cond):
        rel = as_relational(cond)
        if rel is True:
            return
        diff = _expand(rel.lhs - rel.rhs)
        if isinstance(rel, sympy.Eq):
            if isinstance(diff, sympy.Mod) and isinstance(diff.args[0], DimVar) \
                    and diff.args[1].is_Integer and int(diff.args[1]) > 0:
                v, k = diff.args[0], int(diff.args[1])
                if v not in self.subs:
                    q = DimVar(f"{v.name}_div{k}", -(-v.lo // k),
                               None if v.hi is None else v.hi // k)
                    self.subs[v] = k * q
                    return
            self.eq.append(diff)
            self.ge.append(diff)
            self.ge.append(-diff)
        elif isinstance(rel, sympy.GreaterThan):
            self.ge.append(diff)
        elif isinstance(rel, sympy.StrictGreaterThan):
            self.ge.append(diff - 1)
        elif isinstance(rel, sympy.LessThan):
            self.ge.append(-diff)
        elif isinstance(rel, sympy.StrictLessThan):
            self.ge.append(-diff - 1)
        # Ne facts are only checked at call time; they do not help decisions here.

    def prove_ge(self, e, c) -> bool:
        """True when ``e >= c`` follows from ranges and the ge facts."""
        if lower_bound(e) >= c:
            return True
        return any(lower_bound(_expand(e - g)) >= c for g in self.ge)

    def prove_zero(self, e) -> bool:
        if e == 0:
            return True
        return any(_expand(e - q) == 0 or _expand(e + q) == 0 for q in self.eq)


_NO_FACTS = Facts()
_facts = contextvars.ContextVar("starling_dim_facts", default=_NO_FACTS)


@contextlib.contextmanager
def assuming(conditions):
    """Makes ``conditions`` (DimConditions / sympy relationals) the assumptions that decide
    comparisons of symbolic dims inside the block (used while staging a dynamic-shape spec)."""
    token = _facts.set(Facts(conditions))
    try:
        yield
    finally:
        _facts.reset(token)


def _expand(e):
    return sympy.expand(e) if not e.is_Integer else e


def decide(op, lhs, rhs):
    """True / False when ``lhs <op> rhs`` is decided by the ranges and the active assumptions,
    None when it is not. ``op`` is one of "eq", "ne", "lt", "le", "gt", "ge"."""
    facts = _facts.get()
    diff = _expand(lhs - rhs)
    if facts.subs:
        diff = _expand(diff.xreplace(facts.subs))
    if op in ("eq", "ne"):
        if diff.is_Number:
            res = diff == 0
        elif facts.prove_zero(diff):
            res = True
        elif facts.prove_ge(diff, 1) or facts.prove_ge(-diff, 1):
            res = False
        else:
            return None
        return res if op == "eq" else not res
    if op in ("lt", "le"):
        diff, op = -diff, ("gt" if op == "lt" else "ge")
    # Dims are integers, so diff > 0 is diff >= 1.
    strict = 1 if op == "gt" else 0
    if facts.prove_ge(diff, strict):
        return True
    if facts.prove_ge(-diff, 1 - strict):
        return False
    return None


# ---- DimExpr ------------------------------------------------------------------------------------

def _sym(x):
    """The sympy expression of an int / DimExpr operand, or None for other types."""
    if type(x) is int:
        return sympy.Integer(x)
    if isinstance(x, DimExpr):
        return x.expr
    if isinstance(x, bool):
        return None
    if hasattr(x, "__index__") and type(x).__module__ == "numpy":
        return sympy.Integer(int(x))
    return None


def as_dim(e):
    """A dim from a sympy expression: an int when it is constant, else a DimExpr."""
    e = _expand(sympy.sympify(e))
    if e.is_Integer:
        return int(e)
    if e.is_Number:
        raise TypeError(f"symbolic dimension arithmetic gave the non-integer {e}")
    return DimExpr(e)


_OPS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_REL = {"eq": sympy.Eq, "ne": sympy.Ne, "lt": sympy.Lt, "le": sympy.Le, "gt": sympy.Gt,
        "ge": sympy.Ge}


def _describe_vars(expr):
    vs = sorted(expr.free_symbols, key=lambda s: s.name)
    return ", ".join(f"{v.name} in {v.range_str()}" if isinstance(v, DimVar) else v.name
                     for v in vs)


def _inconclusive(what, expr, verb="cannot be decided"):
    facts = _facts.get()
    assumed = ""
    if facts.source:
        assumed = "; assumptions: " + ", ".join(
            str(c) if isinstance(c, DimCondition) else str(as_relational(c)) for c in facts.source)
    return InconclusiveDimensionError(
        f"{what} {verb} while tracing with symbolic dimensions "
        f"({_describe_vars(expr)}{assumed}). A function compiled once for every size cannot "
        "branch on a symbolic dim in Python: narrow the range with ShapeVar(..., min=, max=), "
        "declare a fact with ShapesSpec(..., assumptions=[...]), or compute with "
        "starling.numpy.where / cond instead of an `if`.")


class DimCondition:
    """A comparison of symbolic dims that the ranges and assumptions do not decide.

    ``bool()`` of an ``==`` condition is False (not provably equal), of ``!=`` True; of an order
    comparison it raises InconclusiveDimensionError. Conditions can be passed as assumptions.
    """

    __slots__ = ("op", "lhs", "rhs")

    def __init__(self, op, lhs, rhs):
        self.op, self.lhs, self.rhs = op, lhs, rhs

    @property
    def relational(self):
        return _REL[self.op](self.lhs, self.rhs, evaluate=False)

    def __bool__(self):
        res = decide(self.op, self.lhs, self.rhs)
        if res is not None:
            return res
        if self.op == "eq":
            return False
        if self.op == "ne":
            return True
        raise _inconclusive(f"the comparison `{self}`", self.lhs - self.rhs)

    def __str__(self):
        return f"{self.lhs} {_OPS[self.op]} {self.rhs}"

    def __repr__(self):
        return f"DimCondition({self})"

    def __hash__(self):
        return hash((self.op, self.lhs, self.rhs))


def as_relational(cond):
    """A sympy relational (or True) from a DimCondition, a sympy relational or a bool.

    Raises:
        ValueError: a condition that is always false; TypeError: anything else.
    """
    if isinstance(cond, DimCondition):
        return cond.relational
    if cond is True or cond is sympy.true:
        return True
    if cond is False or cond is sympy.false:
        raise ValueError("an assumption about symbolic dims is always false")
    if isinstance(cond, sympy.core.relational.Relational):
        return cond
    raise TypeError(f"an assumption must be a comparison of shape variables such as "
                    f"`batch % 2 == 0` or `n >= m`, got {cond!r}")


class DimExpr:
    """A symbolic dimension: an integer expression over DimVars. See the module docstring."""

    __slots__ = ("expr",)
    __array_ufunc__ = None  # NumPy defers to our reflected operators

    def __init__(self, expr):
        self.expr = expr

    # arithmetic ----------------------------------------------------------------------------
    def _bin(self, other, fn):
        o = _sym(other)
        if o is None:
            return NotImplemented
        return as_dim(fn(self.expr, o))

    def __add__(self, o): return self._bin(o, lambda a, b: a + b)
    def __radd__(self, o): return self._bin(o, lambda a, b: b + a)
    def __sub__(self, o): return self._bin(o, lambda a, b: a - b)
    def __rsub__(self, o): return self._bin(o, lambda a, b: b - a)
    def __mul__(self, o): return self._bin(o, lambda a, b: a * b)
    def __rmul__(self, o): return self._bin(o, lambda a, b: b * a)
    def __floordiv__(self, o): return self._bin(o, lambda a, b: sympy.floor(a / b))
    def __rfloordiv__(self, o): return self._bin(o, lambda a, b: sympy.floor(b / a))
    def __mod__(self, o): return self._bin(o, lambda a, b: sympy.Mod(a, b))
    def __rmod__(self, o): return self._bin(o, lambda a, b: sympy.Mod(b, a))

    def __divmod__(self, o):
        if _sym(o) is None:
            return NotImplemented
        return self // o, self % o

    def __rdivmod__(self, o):
        if _sym(o) is None:
            return NotImplemented
        return o // self, o % self

    def __pow__(self, o):
        if type(o) is not int or o < 0:
            return NotImplemented
        return as_dim(self.expr ** o)

    def __neg__(self):
        return as_dim(-self.expr)

    def __pos__(self):
        return self

    def __truediv__(self, o):
        raise InconclusiveDimensionError(
            f"symbolic dimension `{self}` used with true division `/` (use `//` for dims) or "
            "passed to a NumPy function that needs a concrete size; this operation does not "
            "support dynamic shapes")

    __rtruediv__ = __truediv__

    # comparisons ---------------------------------------------------------------------------
    def _cmp(self, other, op):
        if op in ("eq", "ne") and isinstance(other, DimExpr) and (
                other is self or other.expr == self.expr):  # structural: the common case
            return op == "eq"
        o = _sym(other)
        if o is None:
            return NotImplemented if op not in ("eq", "ne") else (op == "ne")
        res = decide(op, self.expr, o)
        return DimCondition(op, self.expr, o) if res is None else res

    def __eq__(self, o): return self._cmp(o, "eq")
    def __ne__(self, o): return self._cmp(o, "ne")
    def __lt__(self, o): return self._cmp(o, "lt")
    def __le__(self, o): return self._cmp(o, "le")
    def __gt__(self, o): return self._cmp(o, "gt")
    def __ge__(self, o): return self._cmp(o, "ge")

    def __hash__(self):
        return hash(self.expr)

    def __bool__(self):
        res = decide("ne", self.expr, sympy.Integer(0))
        if res is None:
            raise _inconclusive(f"the truth value of `{self}` (is it nonzero?)", self.expr)
        return res

    # conversions that need a concrete value ------------------------------------------------
    def _concrete(self, what):
        raise _inconclusive(f"{what} of the symbolic dimension `{self}`", self.expr,
                            "is not available")

    def __index__(self):
        self._concrete("a concrete integer (for range(), an index, NumPy)")

    def __int__(self):
        self._concrete("int()")

    def __float__(self):
        self._concrete("float()")

    # introspection -------------------------------------------------------------------------
    @property
    def free_vars(self):
        return frozenset(self.expr.free_symbols)

    def bounds(self):
        """(lo, hi) from the variables' ranges (hi may be inf)."""
        return bounds(self.expr)

    def evaluate(self, env):
        """The int value for ``env`` (DimVar -> int); raises KeyError for a missing variable."""
        v = self.expr.xreplace({k: sympy.Integer(env[k]) for k in self.expr.free_symbols})
        if not v.is_Integer:
            raise ValueError(f"symbolic dimension {self} does not evaluate to an integer for "
                             f"{ {k.name: val for k, val in env.items()} }")
        return int(v)

    def __str__(self):
        return str(self.expr)

    def __repr__(self):
        return str(self.expr)

    def __reduce__(self):
        raise TypeError("symbolic dimensions cannot be pickled; use starling.export to "
                        "serialize programs with dynamic shapes")


def is_dim_expr(d) -> bool:
    """True when ``d`` is a symbolic dimension (``DimExpr``), False for ints and anything else."""
    return isinstance(d, DimExpr)


def evaluate_dim(d, env):
    """An int dim for ``d`` (int or DimExpr) under ``env`` (DimVar -> int)."""
    return d.evaluate(env) if isinstance(d, DimExpr) else d


# ---- substituting concrete sizes into a staged Program ------------------------------------------

def program_is_symbolic(prog) -> bool:
    """True when some aval or param of ``prog`` (or of a nested Program) holds a DimExpr."""
    from .ir import Program
    for v in list(prog.invars) + list(prog.constvars) + list(prog.outvars):
        if any(isinstance(d, DimExpr) for d in v.aval.shape):
            return True
    for eqn in prog.eqns:
        for v in eqn.outvars:
            if any(isinstance(d, DimExpr) for d in v.aval.shape):
                return True
        for p in eqn.params.values():
            if _value_is_symbolic(p, Program):
                return True
    return False


def eqn_is_symbolic(eqn) -> bool:
    """True when an equation's output avals or params hold symbolic dims (such an equation
    cannot be evaluated before the sizes are bound, e.g. by constant folding)."""
    from .ir import Program
    return (any(isinstance(d, DimExpr) for v in eqn.outvars for d in v.aval.shape)
            or any(_value_is_symbolic(p, Program) for p in eqn.params.values()))


def _value_is_symbolic(p, Program):
    if isinstance(p, DimExpr):
        return True
    if isinstance(p, Program):
        return program_is_symbolic(p)
    if isinstance(p, (tuple, list)):
        return any(_value_is_symbolic(x, Program) for x in p)
    if hasattr(p, "shape") and hasattr(p, "dtype") and type(p).__name__ == "ShapedArray":
        return any(isinstance(d, DimExpr) for d in p.shape)
    return False


def bind_shapes(prog, env):
    """A copy of ``prog`` whose avals and params have the DimVars of ``env`` replaced by their
    values: ints (sizes), or DimExprs of another program's variables (an exported symbolic
    function called while tracing with symbolic shapes). Nested Programs (control flow) are
    bound too. Raises KeyError for a DimVar missing from ``env``."""
    from .avals import ShapedArray
    from .ir import Equation, Literal, Program, Var
    senv = {k: (v.expr if isinstance(v, DimExpr) else sympy.Integer(v)) for k, v in env.items()}
    allowed = set()   # variables the substituted values bring in (symbolic binding)
    for v in senv.values():
        allowed |= v.free_symbols
    dim_cache = {}

    def dim(d):
        if not isinstance(d, DimExpr):
            return d
        r = dim_cache.get(d.expr)
        if r is None:
            v = d.expr.xreplace(senv)
            if v.is_Integer:
                r = int(v)
            else:
                missing = sorted(s.name for s in v.free_symbols - allowed)
                if missing:
                    raise KeyError(f"bind_shapes: no size for shape variable(s) {missing} in "
                                   f"{d}")
                r = as_dim(v)
            dim_cache[d.expr] = r
        return r

    def aval(a):
        if any(isinstance(d, DimExpr) for d in a.shape):
            return ShapedArray(tuple(dim(d) for d in a.shape), a.dtype, a.weak_type)
        return a

    def param(p):
        if isinstance(p, DimExpr):
            return dim(p)
        if isinstance(p, Program):
            return program(p)
        if isinstance(p, ShapedArray):
            return aval(p)
        if type(p) is tuple:
            return tuple(param(x) for x in p)
        if type(p) is list:
            return [param(x) for x in p]
        return p

    def program(pr):
        vmap = {}

        def var(v):
            if isinstance(v, Literal):
                return v
            nv = vmap.get(v)
            if nv is None:
                a = aval(v.aval)
                nv = vmap[v] = v if a is v.aval else Var(a)
            return nv

        constvars = [var(v) for v in pr.constvars]
        invars = [var(v) for v in pr.invars]
        eqns = []
        for e in pr.eqns:
            ins = [var(v) for v in e.invars]
            outs = [var(v) for v in e.outvars]
            eqns.append(Equation(e.primitive, ins, outs,
                                 {k: param(p) for k, p in e.params.items()}))
        return Program(constvars, pr.consts, invars, eqns, [var(v) for v in pr.outvars],
                       pr.effects)

    return program(prog)
