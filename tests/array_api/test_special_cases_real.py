"""Special cases of the elementwise functions for real floating-point operands (Array API 2023.12).

Each row is one bullet of the standard's "Special Cases" lists, with representative operands for
conditions such as "a positive finite number". Every row is checked in float32 and float64, through
the function and, where one exists, through the array operator.
"""
from __future__ import annotations

import math
import operator

import numpy as np
import pytest

import starling.numpy as xp
from tests.array_api import (
    INF, NAN, NINF, PI, REAL_FLOATS, Approx, OneOf, dname, fmt, matches, scalar,
)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

P2, P4 = Approx(PI / 2), Approx(PI / 4)

# ---- unary: (function, x, expected) ------------------------------------------------------------
UNARY = [
    # abs
    ("abs", NAN, NAN), ("abs", -0.0, 0.0), ("abs", NINF, INF), ("abs", INF, INF),
    ("abs", -2.5, 2.5),
    # acos
    ("acos", NAN, NAN), ("acos", 1.5, NAN), ("acos", INF, NAN), ("acos", -1.5, NAN),
    ("acos", NINF, NAN), ("acos", 1.0, 0.0),
    # acosh
    ("acosh", NAN, NAN), ("acosh", 0.5, NAN), ("acosh", -2.0, NAN), ("acosh", NINF, NAN),
    ("acosh", 1.0, 0.0), ("acosh", INF, INF),
    # asin
    ("asin", NAN, NAN), ("asin", 1.5, NAN), ("asin", INF, NAN), ("asin", -1.5, NAN),
    ("asin", 0.0, 0.0), ("asin", -0.0, -0.0),
    # asinh
    ("asinh", NAN, NAN), ("asinh", 0.0, 0.0), ("asinh", -0.0, -0.0), ("asinh", INF, INF),
    ("asinh", NINF, NINF),
    # atan
    ("atan", NAN, NAN), ("atan", 0.0, 0.0), ("atan", -0.0, -0.0), ("atan", INF, P2),
    ("atan", NINF, Approx(-PI / 2)),
    # atanh
    ("atanh", NAN, NAN), ("atanh", -1.5, NAN), ("atanh", NINF, NAN), ("atanh", 1.5, NAN),
    ("atanh", INF, NAN), ("atanh", -1.0, NINF), ("atanh", 1.0, INF), ("atanh", 0.0, 0.0),
    ("atanh", -0.0, -0.0),
    # ceil / floor / trunc / round: integer-valued inputs are returned unchanged
    *[(f, v, v) for f in ("ceil", "floor", "trunc", "round")
      for v in (INF, NINF, 0.0, -0.0, NAN, 3.0, -7.0, 2.0 ** 60)],
    ("round", 0.5, 0.0), ("round", 1.5, 2.0), ("round", 2.5, 2.0), ("round", -2.5, -2.0),
    ("round", -3.5, -4.0),
    # cos / cosh
    ("cos", NAN, NAN), ("cos", 0.0, 1.0), ("cos", -0.0, 1.0), ("cos", INF, NAN),
    ("cos", NINF, NAN),
    ("cosh", NAN, NAN), ("cosh", 0.0, 1.0), ("cosh", -0.0, 1.0), ("cosh", INF, INF),
    ("cosh", NINF, INF),
    # exp / expm1
    ("exp", NAN, NAN), ("exp", 0.0, 1.0), ("exp", -0.0, 1.0), ("exp", INF, INF),
    ("exp", NINF, 0.0),
    ("expm1", NAN, NAN), ("expm1", 0.0, 0.0), ("expm1", -0.0, -0.0), ("expm1", INF, INF),
    ("expm1", NINF, -1.0),
    # isfinite / isinf / isnan
    ("isfinite", INF, False), ("isfinite", NINF, False), ("isfinite", NAN, False),
    ("isfinite", 0.0, True), ("isfinite", -2.5, True),
    ("isinf", INF, True), ("isinf", NINF, True), ("isinf", NAN, False), ("isinf", 1.0, False),
    ("isinf", -0.0, False),
    ("isnan", NAN, True), ("isnan", INF, False), ("isnan", 0.0, False), ("isnan", -1.0, False),
    # log family
    *[(f, v, w) for f in ("log", "log2", "log10")
      for v, w in ((NAN, NAN), (-1.0, NAN), (NINF, NAN), (-0.5, NAN), (0.0, NINF),
                   (-0.0, NINF), (1.0, 0.0), (INF, INF))],
    ("log1p", NAN, NAN), ("log1p", -1.5, NAN), ("log1p", NINF, NAN), ("log1p", -1.0, NINF),
    ("log1p", -0.0, -0.0), ("log1p", 0.0, 0.0), ("log1p", INF, INF),
    # sign
    ("sign", -2.5, -1.0), ("sign", NINF, -1.0), ("sign", -0.0, 0.0), ("sign", 0.0, 0.0),
    ("sign", 3.0, 1.0), ("sign", INF, 1.0), ("sign", NAN, NAN),
    # signbit (NaN sign bits are covered in test_signbit_nan_sign)
    ("signbit", 0.0, False), ("signbit", -0.0, True), ("signbit", INF, False),
    ("signbit", NINF, True), ("signbit", 2.0, False), ("signbit", -2.0, True),
    # sin / sinh
    ("sin", NAN, NAN), ("sin", 0.0, 0.0), ("sin", -0.0, -0.0), ("sin", INF, NAN),
    ("sin", NINF, NAN),
    ("sinh", NAN, NAN), ("sinh", 0.0, 0.0), ("sinh", -0.0, -0.0), ("sinh", INF, INF),
    ("sinh", NINF, NINF),
    # sqrt
    ("sqrt", NAN, NAN), ("sqrt", -1.0, NAN), ("sqrt", NINF, NAN), ("sqrt", 0.0, 0.0),
    ("sqrt", -0.0, -0.0), ("sqrt", INF, INF),
    # square: as x * x
    ("square", NAN, NAN), ("square", -0.0, 0.0), ("square", NINF, INF), ("square", INF, INF),
    ("square", -3.0, 9.0),
    # tan / tanh
    ("tan", NAN, NAN), ("tan", 0.0, 0.0), ("tan", -0.0, -0.0), ("tan", INF, NAN),
    ("tan", NINF, NAN),
    ("tanh", NAN, NAN), ("tanh", 0.0, 0.0), ("tanh", -0.0, -0.0), ("tanh", INF, 1.0),
    ("tanh", NINF, -1.0),
    # negative / positive: sign of zeros and infinities
    ("negative", 0.0, -0.0), ("negative", -0.0, 0.0), ("negative", INF, NINF),
    ("negative", NAN, NAN),
    ("positive", -0.0, -0.0), ("positive", NINF, NINF), ("positive", NAN, NAN),
]

_UNARY_OPERATOR = {"abs": operator.abs, "negative": operator.neg, "positive": operator.pos}


def _rid(row):
    return f"{row[0]}({', '.join(fmt(v) for v in row[1:-1])})->{fmt(row[-1])}"


@pytest.mark.parametrize("row", UNARY, ids=_rid)
def test_unary_special_case(row):
    name, x, want = row
    fn = getattr(xp, name)
    ops = [fn] + ([_UNARY_OPERATOR[name]] if name in _UNARY_OPERATOR else [])
    bad = []
    for dt in REAL_FLOATS:
        for op in ops:
            r = op(xp.asarray([x], dtype=dt))
            got = scalar(r)
            if not matches(want, got):
                bad.append(f"{dname(dt)} {getattr(op, '__name__', op)}: got {fmt(float(got))}")
    assert not bad, f"{_rid(row)}: " + "; ".join(bad)


def test_signbit_nan_sign():
    # "If x_i is NaN and the sign bit of x_i is 1 (0), the result is True (False)."
    for dt in REAL_FLOATS:
        x = xp.asarray(np.array([np.nan, -np.nan], dtype=dt))
        assert np.signbit(np.asarray(x)).tolist() == [False, True]  # the inputs themselves
        assert np.asarray(xp.signbit(x)).tolist() == [False, True], dname(dt)


# ---- binary: (function, x1, x2, expected) ------------------------------------------------------
_POS, _NEG = (0.5, 3.0), (-0.5, -3.0)   # positive / negative finite numbers
_FIN = _POS + _NEG + (0.0, -0.0)         # finite numbers

BINARY = [
    # add
    *[("add", a, b, NAN) for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN), (NAN, INF))],
    ("add", INF, NINF, NAN), ("add", NINF, INF, NAN), ("add", INF, INF, INF),
    ("add", NINF, NINF, NINF),
    *[("add", INF, b, INF) for b in _FIN], *[("add", NINF, b, NINF) for b in _FIN],
    *[("add", a, INF, INF) for a in _FIN], *[("add", a, NINF, NINF) for a in _FIN],
    ("add", -0.0, -0.0, -0.0), ("add", -0.0, 0.0, 0.0), ("add", 0.0, -0.0, 0.0),
    ("add", 0.0, 0.0, 0.0),
    *[("add", z, b, b) for z in (0.0, -0.0) for b in (2.5, -2.5)],
    *[("add", a, z, a) for z in (0.0, -0.0) for a in (2.5, -2.5)],
    ("add", 2.5, -2.5, 0.0), ("add", -0.75, 0.75, 0.0),
    # subtract (as x1 + (-x2))
    ("subtract", NAN, 1.0, NAN), ("subtract", INF, INF, NAN), ("subtract", NINF, NINF, NAN),
    ("subtract", INF, NINF, INF), ("subtract", -0.0, 0.0, -0.0), ("subtract", 0.0, 0.0, 0.0),
    ("subtract", -0.0, -0.0, 0.0), ("subtract", 2.5, 2.5, 0.0), ("subtract", 1.0, INF, NINF),
    # atan2
    *[("atan2", a, b, NAN) for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN))],
    ("atan2", 1.0, 0.0, P2), ("atan2", 1.0, -0.0, P2), ("atan2", INF, 0.0, P2),
    ("atan2", 0.0, 2.0, 0.0), ("atan2", 0.0, INF, 0.0), ("atan2", 0.0, 0.0, 0.0),
    ("atan2", 0.0, -0.0, Approx(PI)), ("atan2", 0.0, -2.0, Approx(PI)),
    ("atan2", 0.0, NINF, Approx(PI)),
    ("atan2", -0.0, 2.0, -0.0), ("atan2", -0.0, 0.0, -0.0), ("atan2", -0.0, -0.0, Approx(-PI)),
    ("atan2", -0.0, -2.0, Approx(-PI)),
    ("atan2", -1.0, 0.0, Approx(-PI / 2)), ("atan2", -1.0, -0.0, Approx(-PI / 2)),
    ("atan2", 2.0, INF, 0.0), ("atan2", 2.0, NINF, Approx(PI)), ("atan2", -2.0, INF, -0.0),
    ("atan2", -2.0, NINF, Approx(-PI)),
    ("atan2", INF, 2.0, P2), ("atan2", INF, -2.0, P2), ("atan2", NINF, 2.0, Approx(-PI / 2)),
    ("atan2", NINF, -0.0, Approx(-PI / 2)),
    ("atan2", INF, INF, P4), ("atan2", INF, NINF, Approx(3 * PI / 4)),
    ("atan2", NINF, INF, Approx(-PI / 4)), ("atan2", NINF, NINF, Approx(-3 * PI / 4)),
    # copysign (x1 not NaN); NaN results are checked in test_copysign_nan_sign
    ("copysign", 2.0, -1.0, -2.0), ("copysign", -2.0, -0.0, -2.0), ("copysign", -2.0, 0.0, 2.0),
    ("copysign", 2.0, 3.0, 2.0), ("copysign", INF, NINF, NINF), ("copysign", 0.0, -5.0, -0.0),
    ("copysign", -0.0, 5.0, 0.0),
    # divide
    *[("divide", a, b, NAN) for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN))],
    *[("divide", a, b, NAN) for a in (INF, NINF) for b in (INF, NINF)],
    *[("divide", a, b, NAN) for a in (0.0, -0.0) for b in (0.0, -0.0)],
    ("divide", 0.0, 2.0, 0.0), ("divide", -0.0, 2.0, -0.0), ("divide", 0.0, -2.0, -0.0),
    ("divide", -0.0, -2.0, 0.0), ("divide", 0.0, INF, 0.0), ("divide", -0.0, NINF, 0.0),
    ("divide", 2.0, 0.0, INF), ("divide", 2.0, -0.0, NINF), ("divide", -2.0, 0.0, NINF),
    ("divide", -2.0, -0.0, INF), ("divide", INF, 0.0, INF), ("divide", NINF, -0.0, INF),
    ("divide", INF, 2.0, INF), ("divide", INF, -2.0, NINF), ("divide", NINF, 2.0, NINF),
    ("divide", NINF, -2.0, INF),
    ("divide", 2.0, INF, 0.0), ("divide", 2.0, NINF, -0.0), ("divide", -2.0, INF, -0.0),
    ("divide", -2.0, NINF, 0.0),
    ("divide", 3.0, 2.0, 1.5), ("divide", -3.0, -2.0, 1.5), ("divide", -3.0, 2.0, -1.5),
    ("divide", 3.0, -2.0, -1.5),
    # floor_divide (the standard allows Python's results where it says so)
    *[("floor_divide", a, b, NAN) for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN))],
    *[("floor_divide", a, b, NAN) for a in (INF, NINF) for b in (INF, NINF)],
    *[("floor_divide", a, b, NAN) for a in (0.0, -0.0) for b in (0.0, -0.0)],
    ("floor_divide", 0.0, 2.0, 0.0), ("floor_divide", -0.0, 2.0, -0.0),
    ("floor_divide", 0.0, -2.0, -0.0), ("floor_divide", -0.0, -2.0, 0.0),
    ("floor_divide", 2.0, 0.0, INF), ("floor_divide", 2.0, -0.0, NINF),
    ("floor_divide", -2.0, 0.0, NINF), ("floor_divide", -2.0, -0.0, INF),
    ("floor_divide", INF, 2.0, OneOf(INF, NAN)), ("floor_divide", INF, -2.0, OneOf(NINF, NAN)),
    ("floor_divide", NINF, 2.0, OneOf(NINF, NAN)), ("floor_divide", NINF, -2.0, OneOf(INF, NAN)),
    ("floor_divide", 2.0, INF, 0.0), ("floor_divide", 2.0, NINF, OneOf(-0.0, -1.0)),
    ("floor_divide", -2.0, INF, OneOf(-0.0, -1.0)), ("floor_divide", -2.0, NINF, 0.0),
    ("floor_divide", 7.0, 2.0, 3.0), ("floor_divide", -7.0, 2.0, -4.0),
    ("floor_divide", 7.0, -2.0, -4.0), ("floor_divide", -7.0, -2.0, 3.0),
    # hypot
    *[("hypot", a, b, INF) for a in (INF, NINF) for b in (NAN, 1.0, 0.0, INF)],
    *[("hypot", a, b, INF) for b in (INF, NINF) for a in (NAN, -1.0, 0.0)],
    ("hypot", 0.0, -3.0, 3.0), ("hypot", -0.0, 2.5, 2.5), ("hypot", -4.0, 0.0, 4.0),
    ("hypot", 5.0, -0.0, 5.0), ("hypot", -0.0, -0.0, 0.0),
    ("hypot", 1.0, NAN, NAN), ("hypot", NAN, NAN, NAN), ("hypot", NAN, -1.0, NAN),
    ("hypot", 3.0, 4.0, 5.0), ("hypot", -3.0, -4.0, 5.0),
    # logaddexp
    ("logaddexp", NAN, 1.0, NAN), ("logaddexp", 1.0, NAN, NAN), ("logaddexp", NAN, INF, NAN),
    ("logaddexp", INF, 1.0, INF), ("logaddexp", INF, NINF, INF), ("logaddexp", INF, INF, INF),
    ("logaddexp", -2.0, INF, INF), ("logaddexp", NINF, INF, INF),
    ("logaddexp", NINF, 1.0, Approx(1.0)),
    # maximum / minimum: NaN propagates
    *[(f, a, b, NAN) for f in ("maximum", "minimum")
      for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN), (NAN, INF), (NINF, NAN))],
    ("maximum", 1.0, 2.0, 2.0), ("maximum", NINF, -3.0, -3.0), ("minimum", 1.0, 2.0, 1.0),
    ("minimum", INF, -3.0, -3.0),
    # multiply
    *[("multiply", a, b, NAN) for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN))],
    *[("multiply", a, b, NAN) for a in (INF, NINF) for b in (0.0, -0.0)],
    *[("multiply", a, b, NAN) for a in (0.0, -0.0) for b in (INF, NINF)],
    ("multiply", 2.0, 3.0, 6.0), ("multiply", -2.0, -3.0, 6.0), ("multiply", -2.0, 3.0, -6.0),
    ("multiply", 0.0, -3.0, -0.0), ("multiply", -0.0, -3.0, 0.0), ("multiply", -0.0, 0.0, -0.0),
    ("multiply", INF, INF, INF), ("multiply", INF, NINF, NINF), ("multiply", NINF, NINF, INF),
    ("multiply", INF, -2.0, NINF), ("multiply", NINF, -2.0, INF), ("multiply", 2.0, NINF, NINF),
    ("multiply", -0.5, INF, NINF),
    # pow
    ("pow", 2.0, NAN, NAN), ("pow", NAN, 0.0, 1.0), ("pow", NAN, -0.0, 1.0),
    ("pow", 3.0, 0.0, 1.0), ("pow", INF, -0.0, 1.0), ("pow", NAN, 2.0, NAN),
    ("pow", NAN, -1.0, NAN),
    ("pow", 2.0, INF, INF), ("pow", -2.0, INF, INF), ("pow", 2.0, NINF, 0.0),
    ("pow", -2.0, NINF, 0.0),
    ("pow", 1.0, INF, 1.0), ("pow", -1.0, INF, 1.0), ("pow", 1.0, NINF, 1.0),
    ("pow", -1.0, NINF, 1.0),
    ("pow", 1.0, 5.0, 1.0), ("pow", 1.0, INF, 1.0), ("pow", 1.0, -0.5, 1.0),
    ("pow", 0.5, INF, 0.0), ("pow", -0.5, INF, 0.0), ("pow", 0.5, NINF, INF),
    ("pow", -0.5, NINF, INF),
    ("pow", INF, 0.5, INF), ("pow", INF, 3.0, INF), ("pow", INF, -0.5, 0.0),
    ("pow", INF, -3.0, 0.0),
    ("pow", NINF, 3.0, NINF), ("pow", NINF, 2.0, INF), ("pow", NINF, 0.5, INF),
    ("pow", NINF, -3.0, -0.0), ("pow", NINF, -2.0, 0.0), ("pow", NINF, -0.5, 0.0),
    ("pow", 0.0, 2.0, 0.0), ("pow", 0.0, 0.5, 0.0), ("pow", 0.0, -2.0, INF),
    ("pow", 0.0, -0.5, INF),
    ("pow", -0.0, 3.0, -0.0), ("pow", -0.0, 2.0, 0.0), ("pow", -0.0, 0.5, 0.0),
    ("pow", -0.0, -3.0, NINF), ("pow", -0.0, -2.0, INF), ("pow", -0.0, -0.5, INF),
    ("pow", -2.0, 0.5, NAN), ("pow", -3.0, -1.5, NAN),
    ("pow", 2.0, 3.0, 8.0), ("pow", -2.0, 3.0, -8.0), ("pow", 4.0, -0.5, 0.5),
    # remainder
    *[("remainder", a, b, NAN) for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN))],
    *[("remainder", a, b, NAN) for a in (INF, NINF) for b in (INF, NINF)],
    *[("remainder", a, b, NAN) for a in (0.0, -0.0) for b in (0.0, -0.0)],
    ("remainder", 0.0, 2.0, 0.0), ("remainder", -0.0, 2.0, 0.0), ("remainder", 0.0, -2.0, -0.0),
    ("remainder", -0.0, -2.0, -0.0),
    *[("remainder", a, b, NAN) for a in (2.0, -2.0) for b in (0.0, -0.0)],
    *[("remainder", a, b, NAN) for a in (INF, NINF) for b in (2.0, -2.0)],
    ("remainder", 2.0, INF, 2.0), ("remainder", 2.0, NINF, NINF), ("remainder", -2.0, INF, INF),
    ("remainder", -2.0, NINF, -2.0),
    ("remainder", 7.0, 3.0, 1.0), ("remainder", -7.0, 3.0, 2.0), ("remainder", 7.0, -3.0, -2.0),
    ("remainder", -7.0, -3.0, -1.0), ("remainder", 6.0, 3.0, 0.0), ("remainder", -6.0, 3.0, 0.0),
    ("remainder", 6.0, -3.0, -0.0),
    # equal / not_equal and the ordering comparisons
    *[("equal", a, b, False) for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN), (INF, NINF))],
    ("equal", INF, INF, True), ("equal", NINF, NINF, True), ("equal", -0.0, 0.0, True),
    ("equal", -0.0, -0.0, True), ("equal", 0.0, -0.0, True), ("equal", 0.0, 0.0, True),
    ("equal", 2.5, 2.5, True), ("equal", 2.5, 3.0, False),
    *[("not_equal", a, b, True) for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN), (INF, NINF),
                                               (NINF, INF), (2.5, 3.0))],
    ("not_equal", INF, INF, False), ("not_equal", 0.0, -0.0, False),
    ("not_equal", 2.5, 2.5, False),
    *[(f, a, b, False) for f in ("less", "less_equal", "greater", "greater_equal")
      for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN), (NAN, INF))],
    ("less", -0.0, 0.0, False), ("less_equal", -0.0, 0.0, True), ("greater", 0.0, -0.0, False),
    ("greater_equal", 0.0, -0.0, True), ("less", NINF, -1e30, True), ("greater", INF, 1e30, True),
]

_BINARY_OPERATOR = {
    "add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
    "divide": operator.truediv, "floor_divide": operator.floordiv, "remainder": operator.mod,
    "pow": operator.pow, "equal": operator.eq, "not_equal": operator.ne, "less": operator.lt,
    "less_equal": operator.le, "greater": operator.gt, "greater_equal": operator.ge,
}


@pytest.mark.parametrize("row", BINARY, ids=_rid)
def test_binary_special_case(row):
    name, a, b, want = row
    fn = getattr(xp, name)
    ops = [fn] + ([_BINARY_OPERATOR[name]] if name in _BINARY_OPERATOR else [])
    bad = []
    for dt in REAL_FLOATS:
        for op in ops:
            r = op(xp.asarray([a], dtype=dt), xp.asarray([b], dtype=dt))
            got = scalar(r)
            if not matches(want, got):
                bad.append(f"{dname(dt)} {getattr(op, '__name__', op)}: got {fmt(float(got))}")
    assert not bad, f"{_rid(row)}: " + "; ".join(bad)


def test_copysign_nan_sign():
    # x1 NaN: the result is NaN whose sign bit is the sign of x2 (also for NaN x2 with either
    # sign bit); x2 NaN with sign bit 1 (0): the result is -|x1| (|x1|).
    for dt in REAL_FLOATS:
        nan, mnan = np.array(np.nan, dt), -np.array(np.nan, dt)
        x1 = xp.asarray(np.array([nan, nan, nan, nan, nan, nan, 2.0, -2.0], dtype=dt))
        x2 = xp.asarray(np.array([-1.0, -0.0, 0.0, 1.0, mnan, nan, mnan, nan], dtype=dt))
        r = np.asarray(xp.copysign(x1, x2))
        assert np.isnan(r[:6]).all(), dname(dt)
        assert np.signbit(r).tolist() == [True, True, False, False, True, False, True, False], \
            dname(dt)
        assert r[6:].tolist() == [-2.0, 2.0], dname(dt)


def test_clip_nan():
    # "If x_i (min_i, max_i) is NaN, the result is NaN."
    for dt in REAL_FLOATS:
        x = xp.asarray([NAN, 0.5, 0.5, 5.0], dtype=dt)
        lo = xp.asarray([0.0, NAN, 0.0, 0.0], dtype=dt)
        hi = xp.asarray([1.0, 1.0, NAN, 1.0], dtype=dt)
        r = np.asarray(xp.clip(x, lo, hi))
        assert np.isnan(r[:3]).all(), (dname(dt), r)
        assert r[3] == 1.0


def test_hypot_symmetry():
    # hypot(x1, x2) must equal hypot(x2, x1), hypot(x1, -x2), hypot(-x1, x2) and hypot(-x1, -x2).
    vals = np.array([0.0, -0.0, 1e-300, 3.0, -4.0, 1e300, np.inf, -np.inf, np.nan])
    a, b = np.meshgrid(vals, vals)
    x1, x2 = xp.asarray(a.ravel()), xp.asarray(b.ravel())
    ref = np.asarray(xp.hypot(x1, x2))
    for p, q in ((x2, x1), (x1, -x2), (-x1, x2), (-x1, -x2)):
        np.testing.assert_array_equal(np.asarray(xp.hypot(p, q)), ref)


@pytest.mark.parametrize("name", ["cosh", "sinh", "tanh"])
def test_hyperbolic_parity(name):
    # cosh(x) == cosh(-x); sinh(x) == -sinh(-x); tanh(-x) == -tanh(x) for all operands.
    fn = getattr(xp, name)
    x = xp.asarray([0.0, -0.0, 0.3, -2.0, 20.0, np.inf, -np.inf, np.nan], dtype=xp.float64)
    lhs, rhs = np.asarray(fn(x)), np.asarray(fn(-x))
    if name != "cosh":
        rhs = -rhs
    np.testing.assert_array_equal(lhs, rhs)
    ok = ~np.isnan(lhs)  # the sign of a NaN carries no meaning here
    np.testing.assert_array_equal(np.signbit(lhs[ok]), np.signbit(rhs[ok]))


def test_add_is_commutative_on_special_values():
    vals = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan]
    a, b = np.meshgrid(vals, vals)
    x1, x2 = xp.asarray(a.ravel()), xp.asarray(b.ravel())
    r1, r2 = np.asarray(xp.add(x1, x2)), np.asarray(xp.add(x2, x1))
    np.testing.assert_array_equal(r1, r2)
    ok = ~np.isnan(r1)
    np.testing.assert_array_equal(np.signbit(r1[ok]), np.signbit(r2[ok]))


def test_round_half_to_even_many():
    # "If two integers are equally close to x_i, the result is the even integer closest to x_i."
    x = np.arange(-10.5, 10.6, 1.0)
    got = np.asarray(xp.round(xp.asarray(x, dtype=xp.float64)))
    want = [float(math.floor(v) if math.floor(v) % 2 == 0 else math.ceil(v)) for v in x]
    assert got.tolist() == want
