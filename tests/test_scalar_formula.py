"""The backend-neutral scalar formula language (core/scalar.py): builders, dtype checks, the
low-precision policies, and its C++ rendering evaluated against NumPy on hard values."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.core import scalar as S
from starling.core.primitive import Primitive
from starling.lowering.backends.cpp import formulas as F

F32, I8, BF16 = np.dtype(np.float32), np.dtype(np.int8), np.dtype(ml_dtypes.bfloat16)


def test_builders_give_typed_expressions():
    x, y = S.arg(0, F32), S.arg(1, F32)
    e = S.select(S.lt(x, 0.5), x * 2 + y, -x / y)
    assert e.op == "select" and e.dtype == F32
    assert S.lt(x, y).dtype == np.bool_
    assert (S.arg(0, np.bool_) + S.arg(1, np.bool_)).op == "or_"   # bool + bool: or (NumPy)
    assert (S.arg(0, I8) & 3).op == "band"
    assert S.cast(x, F32) is x
    assert S.lit(300, np.float16).attr == np.float16(300)


@pytest.mark.parametrize("bad", [
    lambda: S.div(S.arg(0, I8), S.arg(1, I8)),            # div takes floats
    lambda: S.add(S.arg(0, F32), S.arg(1, np.float64)),   # one dtype per op
    lambda: S.exp(S.arg(0, BF16)),                         # low precision: widen first
    lambda: S.select(S.arg(0, F32), S.arg(1, F32), S.arg(2, F32)),
    lambda: S.ldexp(S.arg(0, F32), S.arg(1, np.int64)),
])
def test_ill_typed_formulas_raise_naming_the_op(bad):
    with pytest.raises(TypeError, match="scalar"):
        bad()


def test_unknown_op_and_policy():
    with pytest.raises(AttributeError, match="no attribute 'expp'"):
        S.expp
    with pytest.raises(ValueError, match="lowp must be"):
        S.ScalarFormula(S.same, lowp="fast")


def test_low_precision_policies():
    add = Primitive.registry["add"].scalar_formula
    e = add.instantiate([BF16, BF16], BF16, {})
    # float32 sum of the widened operands, rounded once to bfloat16
    assert e.op == "cast" and e.dtype == BF16 and e.attr is False
    assert e.args[0].op == "add" and e.args[0].dtype == F32
    assert all(a.op == "cast" and a.attr is True for a in e.args[0].args)
    m = Primitive.registry["maximum"].scalar_formula.instantiate([BF16, BF16], BF16, {})
    assert m.op == "cast" and m.attr is True            # a selection: no rounding needed
    c = Primitive.registry["convert_element_type"].scalar_formula.instantiate(
        [BF16], F32, {"new_dtype": F32, "weak_type": False})
    assert c.op == "cast" and c.args[0].op == "arg"      # conversions see the format itself
    assert Primitive.registry["exp"].scalar_formula.instantiate(
        [np.complex64], np.complex64, {}) is None


def test_every_fusible_elementwise_primitive_states_one_formula():
    with_formula = {n for n, p in Primitive.registry.items() if p.scalar_formula is not None}
    for name in ("add", "exp", "where", "clip", "round", "nan_to_num", "ldexp",
                 "convert_element_type", "stop_gradient", "population_count", "erf"):
        assert name in with_formula
        assert isinstance(Primitive.registry[name].scalar_formula, S.ScalarFormula)
    # the C++ backend renders them all; it keeps no table of its own
    assert not hasattr(F, "FORMULA_PRIMITIVES") and not hasattr(F, "CppFormula")
    for name in with_formula:
        p = Primitive.registry[name]
        nin = p.meta.get("nin", 1)
        dts = [np.bool_] + [np.float32] * (nin - 1) if name == "where" else [np.float32] * nin
        out = np.bool_ if p.meta.get("out") == "bool" else np.float32
        params = {"decimals": 1} if name == "round" else {"lo": 0.0, "hi": 1.0} if name == "clip" \
            else {"nan": 0.0, "posinf": None, "neginf": None} if name == "nan_to_num" else {}
        if name == "ldexp":
            dts = [np.float32, np.int32]
        if name in ("gcd", "lcm", "population_count", "bitwise_left_shift",
                    "bitwise_right_shift", "bitwise_and", "bitwise_or", "bitwise_xor",
                    "bitwise_invert"):
            dts, out = [np.int32] * nin, np.int32
        if name.startswith("logical_"):
            dts, out = [np.bool_] * nin, np.bool_
        assert F.render(p, [f"a{i}" for i in range(len(dts))], dts, out, params), name


# Compiled (C++ rendering of the formulas) against NumPy on values where formulas go wrong:
# signed zeros, NaN, inf, ties, the integer extremes.
_HARD = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, np.inf, -np.inf, np.nan,
                  3.0, -7.0, 1e-40, 1e30], np.float32)


_CASES = {   # name: (function, ulps of the result format allowed: libm's transcendental functions)
    "maximum": (lambda a, b: snp.maximum(a, b), 0),
    "fmin": (lambda a, b: snp.fmin(a, b), 0),
    "floor_divide": (lambda a, b: snp.floor_divide(a, b), 0),
    "remainder": (lambda a, b: snp.remainder(a, b), 0),
    "fmod": (lambda a, b: snp.fmod(a, b), 0),
    "heaviside": (lambda a, b: snp.heaviside(a, b), 0),
    "copysign": (lambda a, b: snp.copysign(a, b), 0),
    "clip": (lambda a, b: snp.clip(a, -1.0, 2.0) + b, 0),
    "nan_to_num": (lambda a, b: snp.nan_to_num(a / b), 0),
    "where_sign_round": (lambda a, b: snp.where(a < b, snp.sign(a), snp.round(b, 1)), 0),
    "logaddexp": (lambda a, b: snp.logaddexp(a, b), 2),
}


@pytest.mark.parametrize("case", list(_CASES))
@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_compiled_formulas_match_numpy_on_hard_values(case, dt):
    fn, ulps = _CASES[case]
    a, b = np.meshgrid(_HARD, _HARD)
    a, b = a.ravel().astype(dt), b.ravel().astype(dt)
    with np.errstate(all="ignore"):
        want = np.asarray(fn(snp.asarray(a), snp.asarray(b)))   # eager: NumPy implementations
        got = np.asarray(st.compile(fn)(snp.asarray(a), snp.asarray(b)))
    assert got.dtype == want.dtype
    w, g = want.astype(np.float64), got.astype(np.float64)
    with np.errstate(all="ignore"):
        unit = np.abs(w.astype(dt).astype(np.float64) - np.nextafter(w.astype(dt), dt(np.inf))
                      .astype(np.float64))
    same = (w == g) | (np.isnan(w) & np.isnan(g)) | (np.abs(w - g) <= ulps * unit)
    same &= (np.signbit(w) == np.signbit(g)) | np.isnan(w) | (ulps > 0)
    assert same.all(), (a[~same][:5], b[~same][:5], g[~same][:5], w[~same][:5])


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.int64])
def test_compiled_integer_formulas_wrap_like_numpy(dt):
    info = np.iinfo(dt)
    v = np.array([0, 1, -1 if info.min else 2, info.min, info.max, info.min + 1, info.max - 1, 7],
                 dtype=dt)
    a, b = np.meshgrid(v, v)
    a, b = a.ravel(), b.ravel()

    def fn(a, b):
        return [snp.abs(a) - b, -a * b + a, snp.floor_divide(a, b), snp.remainder(a, b),
                snp.maximum(a, b) ^ snp.bitwise_left_shift(a, b & 7), snp.sign(a)]
    with np.errstate(all="ignore"):
        want = fn(snp.asarray(a), snp.asarray(b))
        got = st.compile(fn)(snp.asarray(a), snp.asarray(b))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("backend", ["cpp", "numpy_ref"])
def test_params_that_compare_equal_are_rendered_apart(backend):
    # -0.0 == 0.0: a cache of rendered formulas keyed by equality gave clip(x, -0.0, 2) the
    # rendering of clip(x, 0.0, 2)
    x = np.array([-3.0, 1.0], np.float32)
    a = np.asarray(st.compile(lambda x: snp.clip(x, 0.0, 2.0), backend=backend)(x))
    b = np.asarray(st.compile(lambda x: snp.clip(x, -0.0, 2.0), backend=backend)(x))
    assert not np.signbit(a[0]) and np.signbit(b[0]) and b[1] == 1.0


def test_nan_to_num_keeps_a_negative_zero_replacement():
    x = np.array([np.nan, 1.0], np.float32)
    got = np.asarray(st.compile(lambda x: snp.nan_to_num(x, nan=-0.0))(x))
    assert np.signbit(got[0]) and np.signbit(np.nan_to_num(x, nan=-0.0)[0]) and got[1] == 1.0


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_spacing_of_negative_zero_is_positive_as_numpy(dt):
    x = np.array([-0.0, 0.0, -1.0, 1.0], dt)
    np.testing.assert_array_equal(np.asarray(st.compile(snp.spacing)(x)), np.spacing(x))
    assert not np.signbit(np.asarray(st.compile(snp.spacing)(x))[0])


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.float16, ml_dtypes.bfloat16])
def test_round_with_decimals_matches_numpy_to_the_bit(dt):
    # NumPy's factor 10**d is exact only up to 1e22 (then built by repeated multiplication)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(64) * 10.0 ** rng.integers(-30, 30, 64)).astype(dt)
    x[:3] = [1e30 if dt != np.float16 else 6e4, -0.0, 2.5]
    for d in (-40, -23, -3, -1, 1, 2, 7, 22, 23, 30, 39, 45):
        with np.errstate(all="ignore"):
            want = np.asarray(snp.round(snp.asarray(x), d)).astype(np.float64)
            got = np.asarray(st.compile(lambda x: snp.round(x, d))(x)).astype(np.float64)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        assert (same & (np.signbit(got) == np.signbit(want))).all(), (d, x[~same], got[~same])
