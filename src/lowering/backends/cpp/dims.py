"""Sizes of cpp kernels under dynamic shapes: exact dim comparisons and a C printer.

Under dynamic shapes, sizes and strides are DimExprs (core/symbolic.py). A kernel reads the
values of its shape variables from the launcher's sizes array at entry (``sz0, sz1, ...``) and
computes every symbolic bound / stride from them in int64 arithmetic (``c_dim``; no floating
point). Decisions that depend on a size (merging dims, dropping size-1 dims) are taken only when
they hold for EVERY size (``same_dim``: sympy expansion of the difference is 0): a symbolic dim
may be 1 (or 0) at run time.
"""
from __future__ import annotations

import numpy as np
import sympy


def _not_fusible(msg):
    from .codegen import NotFusible   # (import cycle: codegen imports this module)
    return NotFusible(msg)


def is_static(x):
    """True for a concrete dim (a Python or NumPy int), False for a symbolic one."""
    return type(x) is int or isinstance(x, np.integer)


def static_shape(shape):
    """True when every dim of ``shape`` is concrete (see is_static)."""
    return all(is_static(x) for x in shape)


def sym_expr(x):
    """The sympy expression of a dim (int / DimExpr / sympy)."""
    if is_static(x):
        return sympy.Integer(int(x))
    return getattr(x, "expr", x)


def same_dim(a, b) -> bool:
    """True when dims ``a`` and ``b`` are equal for every value of their shape variables."""
    if is_static(a) and is_static(b):
        return int(a) == int(b)
    return sympy.expand(sym_expr(a) - sym_expr(b)) == 0


def same_shape(a, b):
    """True when shapes ``a`` and ``b`` have the same rank and dims equal for every value of their
    shape variables (``same_dim``)."""
    return len(a) == len(b) and all(same_dim(x, y) for x, y in zip(a, b))


def maybe_nonzero(x):
    """False only for a dim that is 0 for every size (a symbolic stride may be 0 at run time)."""
    return bool(x) if is_static(x) else not same_dim(x, 0)


def dim_vars(dims):
    """The shape variables (sympy symbols) of ``dims``, in a deterministic order."""
    out = set()
    for d in dims:
        if not is_static(d):
            out |= sym_expr(d).free_symbols
    return sorted(out, key=lambda v: (v.name, getattr(v, "dummy_index", 0)))


DIM_HELPERS = """#ifndef ST_DIM_HELPERS
#define ST_DIM_HELPERS
static inline int64_t st_dim_fdiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t st_dim_fmod(int64_t a, int64_t b) {
  return a - b * st_dim_fdiv(a, b);
}
static inline int64_t st_dim_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t st_dim_max(int64_t a, int64_t b) { return a > b ? a : b; }
// iterations per pool chunk: about `chunk` units of work of a loop of n over `work` units
static inline int64_t st_grain(int64_t n, int64_t work, int64_t chunk) {
  if (work <= 0) return n > 0 ? n : 1;
  const double g = (double)chunk * (double)n / (double)work;
  return g < 1.0 ? 1 : (int64_t)(g + 0.999999);
}
#endif
"""


def c_dim(x, names=None):
    """C (int64) expression of a dim: an int, a DimExpr / sympy expression over the variables
    named by ``names`` (symbol -> C identifier), or an already rendered C expression (str).
    Floor division and Mod follow Python's semantics (``st_dim_fdiv`` / ``st_dim_fmod`` of
    DIM_HELPERS).
    Raises NotFusible for an expression outside Integer / Symbol / Add / Mul / Pow (positive
    integer exponent) / floor / ceiling / Mod / Max / Min."""
    if isinstance(x, str):
        return x
    if is_static(x):
        return str(int(x))
    return _c_sym(sym_expr(x), names or {})


def _c_sym(e, names):
    if e.is_Integer:
        v = int(e)
        return str(v) if v >= 0 else f"({v})"
    if e.is_Symbol:
        if e not in names:
            raise _not_fusible(f"shape variable {e} is not a size parameter of the kernel")
        return names[e]
    if e.is_Add or e.is_Mul:
        num, den = sympy.fraction(sympy.together(e))
        if den != 1:   # an integer-valued expression with rational coefficients: exact division
            return f"st_dim_fdiv({_c_sym(sympy.expand(num), names)}, {_c_sym(den, names)})"
        parts = [_c_sym(a, names) for a in e.args]
        return "(" + (" + " if e.is_Add else " * ").join(parts) + ")"
    if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
        return "(" + " * ".join([_c_sym(e.base, names)] * int(e.exp)) + ")"
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        n, d = _c_sym(sympy.expand(num), names), _c_sym(den, names)
        if isinstance(e, sympy.floor):
            return n if den == 1 else f"st_dim_fdiv({n}, {d})"
        return n if den == 1 else f"(-st_dim_fdiv(-{n}, {d}))"
    if isinstance(e, sympy.Mod):
        a, m = e.args
        if not (sympy.fraction(sympy.together(a))[1] == 1):
            raise _not_fusible(f"symbolic size {e} (Mod of a non-integer)")
        return f"st_dim_fmod({_c_sym(a, names)}, {_c_sym(m, names)})"
    if isinstance(e, (sympy.Max, sympy.Min)):
        fn = "st_dim_max" if isinstance(e, sympy.Max) else "st_dim_min"
        out = _c_sym(e.args[0], names)
        for a in e.args[1:]:
            out = f"{fn}({out}, {_c_sym(a, names)})"
        return out
    raise _not_fusible(f"symbolic size {e} has no C rendering")
