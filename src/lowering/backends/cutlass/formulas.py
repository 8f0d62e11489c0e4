"""The CUTLASS DSL renderer of the scalar formula language (core/scalar.py), for GEMM epilogues.

``render(prim, args, in_dtypes, out_dtype, params)`` instantiates the primitive's
``scalar_formula`` and renders it as a Python expression over CuTe DSL scalars (``cutlass``
numeric values traced when the kernel compiles), or returns None where this renderer has no
rendering: the epilogue then stays with the Triton template (logged once by gemm.py).

Rendered: float32 arithmetic (IEEE ``+ - * /``; no contraction into FMA is requested), the
comparisons and ``select``, NumPy's NaN-propagating ``maximum`` / ``minimum``, the math
functions of ``cute.math`` (exp, log, tanh, erf, ...), and conversions between float32 and
bfloat16 / float16 (round to nearest even, by the hardware's ``cvt.rn``) and bool. Integers,
float64, float8 and complex are not rendered here.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ....core import scalar as S

_F32 = np.dtype(np.float32)
DTYPES = {_F32: "cutlass.Float32", np.dtype(ml_dtypes.bfloat16): "cutlass.BFloat16",
          np.dtype(np.float16): "cutlass.Float16", np.dtype(np.bool_): "cutlass.Boolean"}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">="}
_MATH = {"exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
         "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos", "tan": "tan",
         "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh",
         "tanh": "tanh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "erf": "erf",
         "erfc": "erfc", "cbrt": "cbrt", "sqrt": "sqrt", "floor": "floor", "ceil": "ceil",
         "trunc": "trunc", "rint": "roundeven", "fabs": "abs", "atan2": "atan2",
         "copysign": "copysign", "pow": "pow"}


class Unsupported(S.Unrenderable):
    """An op or dtype of a formula this renderer does not render."""


def supported_dtype(dt) -> bool:
    """True for the dtypes epilogue values take here: float32, bfloat16, float16, bool."""
    return np.dtype(dt) in DTYPES


def literal(value, dt) -> str:
    """``value`` as a CuTe DSL scalar of ``dt`` (exactly: float32 values by their repr)."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return f"cutlass.Boolean({bool(value)})"
    v = float(np.asarray(value, dt).astype(np.float32))
    text = repr(v) if math.isfinite(v) else f"float({str(v)!r})"
    return f"{DTYPES[dt]}({text})"


def render_expr(e, args) -> str:
    """The CuTe DSL expression of formula ``e`` (operand ``i`` is ``args[i]``)."""
    dt, op = np.dtype(e.dtype), e.op
    if op == "arg":
        return args[e.attr]
    if not supported_dtype(dt) or any(not supported_dtype(x.dtype) for x in e.args):
        raise Unsupported(f"{op} on {[str(x.dtype) for x in e.args]} -> {dt}")
    if op == "lit":
        return literal(e.attr, dt)
    a = [render_expr(x, args) for x in e.args]
    if op == "cast":
        src = np.dtype(e.args[0].dtype)
        if src == np.bool_:
            return _select(a[0], literal(1, dt), literal(0, dt), dt)
        if dt == np.bool_:
            return f"({a[0]} != {literal(0, src)})"
        return f"({a[0]}).to({DTYPES[dt]})"
    if dt not in (_F32, np.dtype(np.bool_)):
        raise Unsupported(f"{op} computed in {dt}")   # formulas compute in float32
    if op == "select":
        return _select(a[0], a[1], a[2], dt)
    if op in ("and_", "or_"):
        return f"({a[0]} {'and' if op == 'and_' else 'or'} {a[1]})"
    if op == "not_":
        return f"(not {a[0]})"
    if op in _INFIX:
        return f"({a[0]} {_INFIX[op]} {a[1]})"
    if op == "neg":
        return f"(-{a[0]})"
    if op == "pow" and a[1] == literal(2.0, dt):
        return f"({a[0]} * {a[0]})"   # NumPy squares too: exactly pow(x, 2)
    if op in ("max", "min", "fmax", "fmin"):
        cmp = ">" if op in ("max", "fmax") else "<"
        nan = a[0] if op in ("max", "min") else a[1]
        return _select(f"({a[0]} {cmp} {a[1]}) or ({nan} != {nan})", a[0], a[1], dt)
    if op == "isnan":
        return f"({a[0]} != {a[0]})"
    if op in _MATH:
        return f"cute.math.{_MATH[op]}({', '.join(a)})"
    raise Unsupported(op)


def _select(c, a, b, dt):
    # cutlass.select_ gives an MLIR value: wrapped back into the DSL's numeric type
    return f"{DTYPES[np.dtype(dt)]}(cutlass.select_({c}, {a}, {b}))"


def render(prim, args, in_dtypes, out_dtype, params):
    """CuTe DSL expression of one element of primitive ``prim``, or None (not rendered)."""
    return S.render_primitive(prim, args, in_dtypes, out_dtype, params,
                              supported=supported_dtype, render_expr=render_expr)
