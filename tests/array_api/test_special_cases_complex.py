"""Special cases of the elementwise functions for complex floating-point operands
(Array API 2023.12).

Each row is one bullet of the standard's complex "Special Cases" lists: input ``a + bj`` and the
expected real and imaginary components. Functions the standard defines through another one
(``asin(x) = -1j * asinh(x*1j)``, ``cos(x) = cosh(x*1j)``, ``log2(x) = log(x) / log(2)``, ...) are
checked on the inputs that map onto the other function's rows, with the expectation carried
through the same formula. ``x*1j`` is the exact rotation ``-b + aj``.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import starling.numpy as xp
from tests.array_api import (
    ANYINF, ANYZ, COMPLEX_FLOATS, INF, NAN, NINF, PI, REAL_OF, AnySign, Approx, cis, dname, fmt,
    matches, neg_spec, scale_spec,
)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

P = Approx(PI)
P2, P4, P34 = Approx(PI / 2), Approx(PI / 4), Approx(3 * PI / 4)
_POSF = (0.5, 2.0)          # positive finite numbers
_NZF = (0.5, -2.0)          # nonzero finite numbers
_FIN = (0.5, -2.0, 0.0)     # finite numbers


def _c(a, b):
    return complex(a, b)


# (function, (a, b), (expected real, expected imag))
TABLE = {
    "acos": [
        ((0.0, 0.0), (P2, -0.0)), ((-0.0, 0.0), (P2, -0.0)),
        ((0.0, NAN), (P2, NAN)), ((-0.0, NAN), (P2, NAN)),
        *[((a, INF), (P2, NINF)) for a in _FIN],
        *[((a, NAN), (NAN, NAN)) for a in _NZF],
        *[((NINF, b), (P, NINF)) for b in _POSF],
        *[((INF, b), (0.0, NINF)) for b in _POSF],
        ((NINF, INF), (P34, NINF)), ((INF, INF), (P4, NINF)),
        ((INF, NAN), (NAN, ANYINF)), ((NINF, NAN), (NAN, ANYINF)),
        *[((NAN, b), (NAN, NAN)) for b in _FIN],
        ((NAN, INF), (NAN, NINF)), ((NAN, NAN), (NAN, NAN)),
    ],
    "acosh": [
        ((0.0, 0.0), (0.0, P2)), ((-0.0, 0.0), (0.0, P2)),
        *[((a, INF), (INF, P2)) for a in _FIN],
        *[((a, NAN), (NAN, NAN)) for a in _NZF],
        ((0.0, NAN), (NAN, AnySign(P2))),
        *[((NINF, b), (INF, P)) for b in _POSF],
        *[((INF, b), (INF, 0.0)) for b in _POSF],
        ((NINF, INF), (INF, P34)), ((INF, INF), (INF, P4)),
        ((INF, NAN), (INF, NAN)), ((NINF, NAN), (INF, NAN)),
        *[((NAN, b), (NAN, NAN)) for b in _FIN],
        ((NAN, INF), (INF, NAN)), ((NAN, NAN), (NAN, NAN)),
    ],
    "asinh": [
        ((0.0, 0.0), (0.0, 0.0)),
        *[((a, INF), (INF, P2)) for a in _POSF],
        *[((a, NAN), (NAN, NAN)) for a in _FIN],
        *[((INF, b), (INF, 0.0)) for b in _POSF],
        ((INF, INF), (INF, P4)),
        ((NAN, 0.0), (NAN, 0.0)),
        *[((NAN, b), (NAN, NAN)) for b in _NZF],
        ((NAN, INF), (ANYINF, NAN)), ((NAN, NAN), (NAN, NAN)),
    ],
    "atanh": [
        ((0.0, 0.0), (0.0, 0.0)), ((0.0, NAN), (0.0, NAN)), ((1.0, 0.0), (INF, 0.0)),
        *[((a, INF), (0.0, P2)) for a in _POSF],
        *[((a, NAN), (NAN, NAN)) for a in _NZF],
        *[((INF, b), (0.0, P2)) for b in _POSF],
        ((INF, INF), (0.0, P2)), ((INF, NAN), (0.0, NAN)),
        *[((NAN, b), (NAN, NAN)) for b in _FIN],
        ((NAN, INF), (ANYZ, P2)), ((NAN, NAN), (NAN, NAN)),
    ],
    "cosh": [
        ((0.0, 0.0), (1.0, 0.0)), ((0.0, INF), (NAN, ANYZ)), ((0.0, NAN), (NAN, ANYZ)),
        *[((a, INF), (NAN, NAN)) for a in _NZF],
        *[((a, NAN), (NAN, NAN)) for a in _NZF],
        ((INF, 0.0), (INF, 0.0)),
        *[((INF, b), cis(b, INF)) for b in (1.0, 2.0, -1.0, -2.0)],
        ((INF, INF), (ANYINF, NAN)), ((INF, NAN), (INF, NAN)),
        ((NAN, 0.0), (NAN, ANYZ)), ((NAN, -0.0), (NAN, ANYZ)),
        *[((NAN, b), (NAN, NAN)) for b in _NZF],
        ((NAN, NAN), (NAN, NAN)),
    ],
    "exp": [
        ((0.0, 0.0), (1.0, 0.0)), ((-0.0, 0.0), (1.0, 0.0)),
        *[((a, INF), (NAN, NAN)) for a in _FIN],
        *[((a, NAN), (NAN, NAN)) for a in _FIN],
        ((INF, 0.0), (INF, 0.0)),
        *[((NINF, b), cis(b, 0.0)) for b in (0.0, 1.0, 2.0, -1.0, -2.0)],
        *[((INF, b), cis(b, INF)) for b in (1.0, 2.0, -1.0, -2.0)],
        ((NINF, INF), (ANYZ, ANYZ)), ((INF, INF), (ANYINF, NAN)),
        ((NINF, NAN), (ANYZ, ANYZ)), ((INF, NAN), (ANYINF, NAN)),
        ((NAN, 0.0), (NAN, 0.0)),
        *[((NAN, b), (NAN, NAN)) for b in (0.5, -2.0, INF)],
        ((NAN, NAN), (NAN, NAN)),
    ],
    "expm1": [
        ((0.0, 0.0), (ANYZ, ANYZ)), ((-0.0, 0.0), (ANYZ, ANYZ)),
        *[((a, INF), (NAN, NAN)) for a in _FIN],
        *[((a, NAN), (NAN, NAN)) for a in _FIN],
        ((INF, 0.0), (INF, 0.0)),
        *[((NINF, b), (cis(b, 0.0)[0] - 1.0, cis(b, 0.0)[1])) for b in (1.0, 2.0, -1.0)],
        *[((INF, b), cis(b, INF)) for b in (1.0, 2.0, -1.0, -2.0)],
        ((NINF, INF), (-1.0, ANYZ)), ((INF, INF), (ANYINF, NAN)),
        ((NINF, NAN), (-1.0, ANYZ)), ((INF, NAN), (ANYINF, NAN)),
        ((NAN, 0.0), (NAN, 0.0)),
        *[((NAN, b), (NAN, NAN)) for b in (0.5, -2.0, INF)],
        ((NAN, NAN), (NAN, NAN)),
    ],
    "log": [
        ((-0.0, 0.0), (NINF, P)), ((0.0, 0.0), (NINF, 0.0)),
        *[((a, INF), (INF, P2)) for a in _FIN],
        *[((a, NAN), (NAN, NAN)) for a in _FIN],
        *[((NINF, b), (INF, P)) for b in _POSF],
        *[((INF, b), (INF, 0.0)) for b in _POSF],
        ((NINF, INF), (INF, P34)), ((INF, INF), (INF, P4)),
        ((INF, NAN), (INF, NAN)), ((NINF, NAN), (INF, NAN)),
        *[((NAN, b), (NAN, NAN)) for b in _FIN],
        ((NAN, INF), (INF, NAN)), ((NAN, NAN), (NAN, NAN)),
    ],
    "log1p": [
        ((-1.0, 0.0), (NINF, 0.0)),
        *[((a, INF), (INF, P2)) for a in _FIN],
        *[((a, NAN), (NAN, NAN)) for a in _FIN],
        *[((NINF, b), (INF, P)) for b in _POSF],
        *[((INF, b), (INF, 0.0)) for b in _POSF],
        ((NINF, INF), (INF, P34)), ((INF, INF), (INF, P4)),
        ((INF, NAN), (INF, NAN)), ((NINF, NAN), (INF, NAN)),
        *[((NAN, b), (NAN, NAN)) for b in _FIN],
        ((NAN, INF), (INF, NAN)), ((NAN, NAN), (NAN, NAN)),
    ],
    "sinh": [
        ((0.0, 0.0), (0.0, 0.0)), ((0.0, INF), (ANYZ, NAN)), ((0.0, NAN), (ANYZ, NAN)),
        *[((a, INF), (NAN, NAN)) for a in _POSF],
        *[((a, NAN), (NAN, NAN)) for a in _POSF],
        ((INF, 0.0), (INF, 0.0)),
        *[((INF, b), cis(b, INF)) for b in (1.0, 2.0)],
        ((INF, INF), (ANYINF, NAN)), ((INF, NAN), (ANYINF, NAN)),
        ((NAN, 0.0), (NAN, 0.0)),
        *[((NAN, b), (NAN, NAN)) for b in _NZF],
        ((NAN, NAN), (NAN, NAN)),
    ],
    "sqrt": [
        ((0.0, 0.0), (0.0, 0.0)), ((-0.0, 0.0), (0.0, 0.0)),
        *[((a, INF), (INF, INF)) for a in (0.5, -2.0, 0.0, NAN, INF, NINF)],
        *[((a, NAN), (NAN, NAN)) for a in _FIN],
        *[((NINF, b), (0.0, INF)) for b in _POSF],
        *[((INF, b), (INF, 0.0)) for b in _POSF],
        ((NINF, NAN), (NAN, ANYINF)), ((INF, NAN), (INF, NAN)),
        *[((NAN, b), (NAN, NAN)) for b in (0.5, -2.0, 0.0)],
        ((NAN, NAN), (NAN, NAN)),
    ],
    "tanh": [
        ((0.0, 0.0), (0.0, 0.0)),
        *[((a, INF), (NAN, NAN)) for a in _NZF],
        ((0.0, INF), (0.0, NAN)),
        *[((a, NAN), (NAN, NAN)) for a in _NZF],
        ((0.0, NAN), (0.0, NAN)),
        # "1 + 0j": C99 gives the zero the sign of sin(2b), so either sign is accepted.
        *[((INF, b), (1.0, ANYZ)) for b in _POSF],
        ((INF, INF), (1.0, ANYZ)), ((INF, NAN), (1.0, ANYZ)),
        ((NAN, 0.0), (NAN, 0.0)),
        *[((NAN, b), (NAN, NAN)) for b in (0.5, -2.0, INF)],
        ((NAN, NAN), (NAN, NAN)),
    ],
    "abs": [
        *[((a, b), (INF, None)) for a in (INF, NINF) for b in (0.5, NAN, INF, 0.0)],
        *[((a, b), (INF, None)) for b in (INF, NINF) for a in (NAN, -2.0, 0.0)],
        ((0.0, -3.0), (3.0, None)), ((-0.0, 2.5), (2.5, None)), ((-4.0, 0.0), (4.0, None)),
        ((5.0, -0.0), (5.0, None)), ((-0.0, -0.0), (0.0, None)),
        ((NAN, 1.0), (NAN, None)), ((1.0, NAN), (NAN, None)), ((NAN, NAN), (NAN, None)),
        ((3.0, -4.0), (5.0, None)),
    ],
    "sign": [
        *[((a, b), (ANYZ, ANYZ)) for a in (0.0, -0.0) for b in (0.0, -0.0)],
        *[((a, b), (NAN, NAN)) for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN), (NAN, 0.0))],
        ((3.0, -4.0), (Approx(0.6), Approx(-0.8))), ((-2.0, 0.0), (-1.0, 0.0)),
        ((0.0, 5.0), (0.0, 1.0)),
    ],
    "isfinite": [
        *[((a, b), (False, None)) for a, b in ((NAN, 1.0), (1.0, NAN), (INF, 0.0), (NINF, NAN),
                                               (0.0, INF), (2.0, NINF))],
        ((1.0, -2.0), (True, None)), ((0.0, -0.0), (True, None)),
    ],
    "isinf": [
        *[((a, b), (True, None)) for a, b in ((INF, 0.0), (NINF, NAN), (INF, INF), (0.0, INF),
                                              (NAN, NINF))],
        *[((a, b), (False, None)) for a, b in ((NAN, 1.0), (1.0, NAN), (1.0, -2.0))],
    ],
    "isnan": [
        *[((a, b), (True, None)) for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, INF), (INF, NAN))],
        *[((a, b), (False, None)) for a, b in ((INF, 1.0), (1.0, -2.0), (0.0, NINF))],
    ],
}

# Functions the standard defines through another function: (base, rotate the input by 1j,
# multiply the result by -1j).
_DERIVED = {"asin": ("asinh", True, True), "atan": ("atanh", True, True),
            "cos": ("cosh", True, False), "sin": ("sinh", True, True),
            "tan": ("tanh", True, True)}


def _derived_rows():
    rows = []
    for name, (base, rot, mul) in _DERIVED.items():
        for (a, b), (re, im) in TABLE[base]:
            # x*1j == (a, b) for x = (b, -a): the base function sees this table row's input.
            x = (b, -a) if rot else (a, b)
            want = (im, neg_spec(re)) if mul else (re, im)
            rows.append((name, x, want))
    for name, c in (("log2", 1 / math.log(2)), ("log10", 1 / math.log(10))):
        for x, (re, im) in TABLE["log"]:
            rows.append((name, x, (scale_spec(re, c), scale_spec(im, c))))
    return rows


ROWS = [(name, x, want) for name, rows in TABLE.items() for x, want in rows] + _derived_rows()


def _rid(row):
    name, (a, b), (re, im) = row
    w = fmt(re) if im is None else f"({fmt(re)}, {fmt(im)})"
    sb = fmt(b)
    return f"{name}({fmt(a)}{'' if sb[0] in '+-' else '+'}{sb}j)->{w}"


@pytest.mark.parametrize("row", ROWS, ids=_rid)
def test_complex_unary_special_case(row):
    name, (a, b), (re, im) = row
    fn = getattr(xp, name)
    bad = []
    for dt in COMPLEX_FLOATS:
        r = fn(xp.asarray(np.array([_c(a, b)], dtype=dt)))
        got = np.asarray(r).reshape(())[()]
        if im is None:  # real-valued result (abs, isnan, ...)
            if isinstance(re, bool):
                ok = r.dtype == xp.bool and matches(re, got)
            else:
                ok = r.dtype == REAL_OF[dt] and matches(re, got)
            if not ok:
                shown = got if isinstance(got, np.bool_) else float(got)
                bad.append(f"{dname(dt)}: got {fmt(shown)} ({r.dtype})")
            continue
        if r.dtype != dt:
            bad.append(f"{dname(dt)}: dtype {r.dtype}")
            continue
        g = complex(got)
        if not (matches(re, g.real) and matches(im, g.imag)):
            bad.append(f"{dname(dt)}: got ({fmt(g.real)}, {fmt(g.imag)})")
    assert not bad, f"{_rid(row)}: " + "; ".join(bad)


# ---- binary ------------------------------------------------------------------------------------

def _cx(vals, dt):
    return xp.asarray(np.array(vals, dtype=dt))


@pytest.mark.parametrize("dt", COMPLEX_FLOATS, ids=dname)
def test_complex_add_components_follow_real_rules(dt):
    # "if z1 = -0 + 0j and z2 = -0 - 0j, the result of z1 + z2 is -0 + 0j"
    z1 = np.array([complex(-0.0, 0.0)], dtype=dt)
    z2 = np.array([complex(-0.0, -0.0)], dtype=dt)
    r = complex(np.asarray(xp.add(_cx(z1, dt), _cx(z2, dt)))[0])
    assert math.copysign(1, r.real) < 0 and r.real == 0, r
    assert math.copysign(1, r.imag) > 0 and r.imag == 0, r
    # (inf + 1j) + (-inf + 1j): the real parts give NaN, the imaginary parts 2.
    r = complex(np.asarray(xp.add(_cx([complex(INF, 1)], dt), _cx([complex(NINF, 1)], dt)))[0])
    assert math.isnan(r.real) and r.imag == 2.0


@pytest.mark.parametrize("name", ["multiply", "divide"])
@pytest.mark.parametrize("dt", COMPLEX_FLOATS, ids=dname)
def test_complex_all_nan_operands(name, dt):
    # "If a, b, c, and d are all NaN, the result is NaN + NaN j."
    z = _cx([complex(NAN, NAN)], dt)
    r = complex(np.asarray(getattr(xp, name)(z, z))[0])
    assert math.isnan(r.real) and math.isnan(r.imag)


@pytest.mark.parametrize("dt", COMPLEX_FLOATS, ids=dname)
def test_complex_multiply_divide_textbook(dt):
    # Finite operands: (a+bj)(c+dj) = (ac-bd) + (bc+ad)j; division by the textbook formula.
    z1 = np.array([1 + 2j, -3.5 + 0.5j, 2 - 1j], dtype=dt)
    z2 = np.array([3 - 1j, 0.25 + 2j, -1 - 1j], dtype=dt)
    m = np.asarray(xp.multiply(_cx(z1, dt), _cx(z2, dt)))
    want = [(a.real * c.real - a.imag * c.imag) + 1j * (a.imag * c.real + a.real * c.imag)
            for a, c in zip(z1.astype(complex), z2.astype(complex))]
    np.testing.assert_allclose(m, want, rtol=1e-6)
    d = np.asarray(xp.divide(_cx(z1, dt), _cx(z2, dt)))
    want = [((a.real * c.real + a.imag * c.imag) + 1j * (a.imag * c.real - a.real * c.imag))
            / (c.real ** 2 + c.imag ** 2) for a, c in zip(z1.astype(complex), z2.astype(complex))]
    np.testing.assert_allclose(d, want, rtol=1e-6)


_EQ_ROWS = [
    # (z1, z2, equal)
    (complex(NAN, 0), complex(NAN, 0), False), (complex(1, NAN), complex(1, NAN), False),
    (complex(1, 2), complex(1, NAN), False), (complex(NAN, NAN), complex(1, 2), False),
    (complex(-0.0, 0.0), complex(0.0, -0.0), True), (complex(INF, NINF), complex(INF, NINF), True),
    (complex(1, 2), complex(1, 2), True), (complex(1, 2), complex(1, -2), False),
    (complex(1, 2), complex(2, 2), False),
]


@pytest.mark.parametrize("dt", COMPLEX_FLOATS, ids=dname)
def test_complex_equal_not_equal(dt):
    z1 = _cx([r[0] for r in _EQ_ROWS], dt)
    z2 = _cx([r[1] for r in _EQ_ROWS], dt)
    want = [r[2] for r in _EQ_ROWS]
    assert np.asarray(xp.equal(z1, z2)).tolist() == want
    assert np.asarray(z1 == z2).tolist() == want
    assert np.asarray(xp.not_equal(z1, z2)).tolist() == [not w for w in want]
    assert np.asarray(z1 != z2).tolist() == [not w for w in want]


@pytest.mark.parametrize("name", ["cosh", "sinh", "tanh", "exp", "sqrt", "log"])
@pytest.mark.parametrize("dt", COMPLEX_FLOATS, ids=dname)
def test_conjugate_symmetry(name, dt):
    # e.g. "cosh(conj(x)) must equal conj(cosh(x))"; the same holds for the other functions
    # whose branch cuts lie on the real axis, away from these sample points.
    z = np.array([0.5 + 0.25j, -1.5 + 2j, 3 - 0.5j, 0.1 + 4j], dtype=dt)
    fn = getattr(xp, name)
    lhs = np.asarray(fn(xp.conj(_cx(z, dt))))
    rhs = np.conj(np.asarray(fn(_cx(z, dt))))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-5)


@pytest.mark.parametrize("dt", COMPLEX_FLOATS, ids=dname)
def test_round_complex_components(dt):
    # round applies to real and imaginary components independently (half to even).
    z = _cx([complex(0.5, 1.5), complex(-2.5, NAN), complex(INF, -0.0)], dt)
    r = np.asarray(xp.round(z))
    assert r.dtype == dt
    assert r[0] == complex(0.0, 2.0)
    assert r[1].real == -2.0 and math.isnan(r[1].imag)
    assert r[2].real == INF and r[2].imag == 0 and math.copysign(1, r[2].imag) < 0


def test_pow_complex_matches_exp_log():
    # "special cases should be handled as if the operation is implemented as exp(x2*log(x1))";
    # for ordinary values the result is that formula.
    z1 = np.array([1 + 1j, -2 + 0.5j, 0.3 - 4j], dtype=np.complex128)
    z2 = np.array([0.5 - 1j, 2 + 0j, -1.5 + 0.25j], dtype=np.complex128)
    got = np.asarray(xp.pow(xp.asarray(z1), xp.asarray(z2)))
    np.testing.assert_allclose(got, np.exp(z2 * np.log(z1)), rtol=1e-12)
