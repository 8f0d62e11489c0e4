"""Elementwise ops: error messages, promotion, special values, staging, hypothesis vs NumPy.

The value checks against NumPy on every dtype live in the OpInfos (tests/opinfo/arithmetic.py,
tests/opinfo/math.py); this file covers what the generated tests cannot express.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import starling.numpy as snp
from starling.arrays.ops import arithmetic, math as smath
from starling.core import dtypes
from starling.core.ir import eval_program
from starling.transforms.stage import make_ir

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def A(x, dtype=None):
    """Lists of Python numbers follow Starling's defaults (float32, int64, complex64)."""
    if dtype is None:
        return snp.asarray(x)
    return snp.asarray(np.asarray(x, dtype=dtype))


def eqn_names(prog):
    return [e.primitive.name for e in prog.eqns]


# ---- namespace ---------------------------------------------------------------------------------

def test_every_public_name_is_documented_and_in_the_namespace():
    for name in arithmetic.__all__ + smath.__all__:
        fn = getattr(snp, name)
        assert fn.__doc__ and len(fn.__doc__) > 40, name


@pytest.mark.parametrize("name", ["clip", "clamp", "maximum", "minimum", "fmax", "fmin", "abs"])
def test_subgradient_convention_is_documented(name):
    doc = getattr(snp, name).__doc__
    assert "Subgradient convention" in doc
    assert "0.5 / 0.5" in doc and "x == lo == hi" in doc and "``abs`` at 0: 0" in doc


def test_aliases():
    assert snp.true_divide is snp.divide and snp.mod is snp.remainder
    assert snp.power is snp.pow and snp.absolute is snp.abs
    assert snp.bitwise_not is snp.invert is snp.bitwise_invert
    assert snp.left_shift is snp.bitwise_left_shift and snp.right_shift is snp.bitwise_right_shift
    assert snp.asin is snp.arcsin and snp.atan2 is snp.arctan2 and snp.atanh is snp.arctanh
    assert snp.clamp is snp.clip and snp.conjugate is snp.conj and snp.fix is snp.trunc
    assert snp.radians is snp.deg2rad and snp.degrees is snp.rad2deg


# ---- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn, args, words", [
    (snp.bitwise_and, (A([1.0]), A([2.0])), ["bitwise_and", "float32"]),
    (snp.bitwise_invert, (A([1.0]),), ["bitwise_invert", "float32"]),
    (snp.bitwise_left_shift, (A([True]), A([True])), ["bitwise_left_shift", "bool"]),
    (snp.less, (A([1j]), A([2j])), ["less", "complex64"]),
    (snp.greater_equal, (A([1j]), 1), ["greater_equal", "complex64"]),
    (snp.maximum, (A([1j]), A([1.0])), ["maximum", "complex64"]),
    (snp.fmin, (A([1j]), A([1.0])), ["fmin", "complex64"]),
    (snp.floor, (A([1j]),), ["floor", "complex64"]),
    (snp.clip, (A([1j]), 0, 1), ["clip", "complex64"]),
    (snp.clip, (A([1j]), A([0.0]), None), ["clip", "complex64"]),
    (snp.signbit, (A([1j]),), ["signbit", "complex64"]),
    (snp.arctan2, (A([1j]), A([1j])), ["arctan2", "complex64"]),
    (snp.cbrt, (A([1j]),), ["cbrt", "complex64"]),
    (snp.subtract, (A([True]), A([False])), ["subtract", "bool"]),
    (snp.negative, (A([True]),), ["negative", "bool"]),
    (snp.positive, (A([True]),), ["positive", "bool"]),
    (snp.floor_divide, (A([True]), A([True])), ["floor_divide", "bool"]),
    (snp.round, (A([True]),), ["round", "bool"]),
    (snp.gcd, (A([1.0]), A([2.0])), ["gcd", "float32"]),
    (snp.isneginf, (A([1j]),), ["isneginf", "complex64"]),
    (snp.ldexp, (A([1.0]), A([2.0])), ["ldexp", "float32"]),
    (snp.round, (A([1.5]), 1.5), ["round", "decimals"]),
    (snp.nan_to_num, (A([1.5]),), []),  # no error: sanity of the harness below
])
def test_wrong_dtype_raises_type_error_naming_op_and_dtype(fn, args, words):
    if not words:
        fn(*args)
        return
    with pytest.raises(TypeError) as e:
        fn(*args)
    for w in words:
        assert w in str(e.value)


def test_complex_equality_is_fine():
    assert snp.equal(A([1 + 1j]), A([1 + 1j])).tolist() == [True]
    assert snp.not_equal(A([1 + 1j]), 1).tolist() == [True]


@pytest.mark.parametrize("fn, nargs", [
    (snp.add, 2), (snp.multiply, 2), (snp.less, 2), (snp.maximum, 2), (snp.arctan2, 2),
    (snp.logical_and, 2), (snp.bitwise_xor, 2), (snp.pow, 2), (snp.where, 3), (snp.clip, 3),
    (snp.ldexp, 2), (snp.isclose, 2), (snp.divmod, 2),
])
@pytest.mark.parametrize("staged", [False, True])
def test_non_broadcastable_shapes_raise_value_error(fn, nargs, staged):
    name = "divmod" if fn is snp.divmod else fn.__name__
    x, y, z = A(np.ones((2, 3), np.int32)), A(np.ones((4,), np.int32)), A(np.ones((3,), np.int32))
    args = [x, y, z][:nargs]
    if fn is snp.where:
        args = [A(np.ones((2, 3), bool)), y, z]
    if fn in (snp.arctan2, snp.isclose):
        args = [a.astype(np.float32) if hasattr(a, "astype") else a for a in args]
    with pytest.raises(ValueError) as e:
        if staged:
            make_ir(lambda *a: fn(*a))(*args)
        else:
            fn(*args)
    msg = str(e.value)
    assert name in msg and "(2, 3)" in msg and "(4,)" in msg


def test_where_one_argument_form_is_nonzero():
    c = np.array([[True, False], [False, True]])
    got = snp.where(A(c))
    want = np.nonzero(c)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_where_needs_both_or_neither():
    with pytest.raises(ValueError, match="where: either both or neither"):
        snp.where(A([True]), A([1.0]))


def test_negative_python_int_exponent_raises():
    with pytest.raises(ValueError, match="pow: integers to negative integer powers"):
        A([2, 3], np.int32) ** -1
    with pytest.raises(ValueError, match="pow"):
        snp.pow(2, -2)
    # Float bases are fine, and so are integer bases with an array of negative exponents.
    np.testing.assert_allclose(np.asarray(A([2.0, 4.0]) ** -1), [0.5, 0.25])
    got = snp.pow(A([1, -1, -1, 2, 0, 3], np.int8), A([-3, -3, -2, -1, -1, 2], np.int8))
    assert got.dtype == np.int8 and got.tolist() == [1, -1, 1, 0, 0, 9]


# ---- promotion ---------------------------------------------------------------------------------

def test_weak_type_promotion_table():
    f32 = A([1.0, 2.0], np.float32)
    r = f32 + 1.0
    assert r.dtype == np.float32 and not r.weak_type
    assert (A([1, 2], np.int8) + 1).dtype == np.int8
    with pytest.raises(OverflowError, match="add.*300.*uint8"):
        A([1], np.uint8) + 300
    assert (f32 + A([1.0], np.float64)).dtype == np.float64
    assert (A([1.0], ml_dtypes.bfloat16) + A([1.0], np.float16)).dtype == np.float32
    with pytest.raises(TypeError, match="add.*float8_e4m3fn.*float32"):
        A([1.0], ml_dtypes.float8_e4m3fn) + f32
    assert (A([1, 2], np.int32) + 1.5).dtype == np.float32
    # Weak scalars with low-precision floats keep the low-precision dtype.
    assert (A([1.0], ml_dtypes.float8_e4m3fn) * 2.0).dtype == ml_dtypes.float8_e4m3fn
    # Two Python scalars stay weak.
    s = snp.add(1.0, 2.0)
    assert s.weak_type and s.dtype == np.float32
    # Integer ops that need floats give float32 (JAX), also for int64 and Python ints.
    assert snp.divide(A([1], np.int64), A([2], np.int64)).dtype == np.float32
    assert snp.sin(A([1], np.int64)).dtype == np.float32 and snp.sin(A([True])).dtype == np.float32
    assert snp.sqrt(4).weak_type
    # Output dtype rules: abs of complex is real, comparisons are strong bool.
    assert snp.abs(A([3 + 4j], np.complex128)).dtype == np.float64
    c = snp.less(1.0, 2.0)
    assert c.dtype == np.bool_ and not c.weak_type
    # float_power keeps NumPy's double precision.
    assert snp.float_power(f32, 2).dtype == np.float64
    assert snp.float_power(A([1j]), 2).dtype == np.complex128


@pytest.mark.parametrize("dt", [np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.uint16,
                                np.float32, np.int64, np.complex128, np.bool_])
def test_weak_pairs_promote_alike_eager_and_traced(dt):
    """Two weak operands of one dtype promote by the weak-type table (weak float64 + weak
    float64 is weak float32) on every path: the eager fast path, tracing, and binding."""
    from starling.arrays.array import wrap
    from starling.transforms.vmap import vmap
    a = wrap(np.array([1, 0], dt), True)
    want = dtypes.result_type((np.dtype(dt), True), (np.dtype(dt), True))
    for op in (snp.add, snp.multiply, snp.equal):
        eager = op(a, a)
        traced = vmap(op)(a, a)
        out_dt, out_weak = (np.dtype(bool), False) if op is snp.equal else want
        assert (eager.dtype, eager.weak_type) == (out_dt, out_weak), (op, dt)
        assert (traced.dtype, traced.weak_type) == (out_dt, out_weak), (op, dt)
        np.testing.assert_array_equal(np.asarray(eager), np.asarray(traced))


def test_unsigned_signed_mix_and_uint64_int64():
    assert (A([1], np.uint8) + A([1], np.int8)).dtype == np.int16
    assert (A([1], np.uint64) + A([1], np.int64)).dtype == np.float32  # via weak float -> default


# ---- special values and semantics --------------------------------------------------------------

def test_integer_overflow_wraps():
    assert (A([127], np.int8) + 1).tolist() == [-128]
    assert snp.abs(A([-128], np.int8)).tolist() == [-128]
    assert snp.negative(A([-128], np.int8)).tolist() == [-128]
    assert (A([0], np.uint8) - 1).tolist() == [255]
    assert (A([16], np.int8) * 16).tolist() == [0]


def test_integer_division_by_zero_gives_numpy_values():
    x = A([7, -7, 0], np.int32)
    assert snp.floor_divide(x, 0).tolist() == [0, 0, 0]
    assert snp.remainder(x, 0).tolist() == [0, 0, 0]
    assert snp.fmod(x, 0).tolist() == [0, 0, 0]
    d = snp.divide(x, 0)
    assert d.dtype == np.float32
    assert np.isinf(np.asarray(d)[:2]).all() and np.isnan(np.asarray(d)[2])


def test_remainder_and_floor_divide_follow_python_signs():
    for a in (-7, 7, -1, 0, 5):
        for b in (3, -3, 2, -1):
            assert snp.remainder(A([a]), b).item() == a % b
            assert snp.floor_divide(A([a]), b).item() == a // b
            assert snp.fmod(A([a]), b).item() == math.fmod(a, b)
    for a in (-7.5, 7.5, -0.0):
        for b in (2.0, -2.0):
            assert snp.remainder(A([a], np.float64), b).item() == a % b
    q, r = snp.divmod(A([-7, 7]), 3)
    assert q.tolist() == [-3, 2] and r.tolist() == [2, 1]


def test_logical_ops_take_truth_values():
    x = A([0.0, np.nan, -0.0, 2.0])
    assert snp.logical_and(x, 1).tolist() == [False, True, False, True]
    assert snp.logical_not(A([0, 3], np.int8)).tolist() == [True, False]
    # Each operand is tested on its own: no float8 / float32 promotion error.
    got = snp.logical_or(A([0.0, 1.0], ml_dtypes.float8_e4m3fn), A([0.0, 0.0], np.float32))
    assert got.tolist() == [False, True]
    assert snp.logical_xor(A([1 + 0j, 0j]), True).tolist() == [False, True]


def test_signed_zero_and_nan_handling():
    z = A([-0.0, 0.0])
    assert snp.signbit(z).tolist() == [True, False]
    assert snp.copysign(1.0, z).tolist() == [-1.0, 1.0]
    assert snp.signbit(snp.negative(A([0.0]))).tolist() == [True]
    nan = A([np.nan, 1.0, np.nan])
    one = A([1.0, np.nan, np.nan])
    assert np.isnan(np.asarray(snp.maximum(nan, one))).all()
    assert np.isnan(np.asarray(snp.minimum(one, nan))).all()
    np.testing.assert_array_equal(np.asarray(snp.fmax(nan, one)), [1.0, 1.0, np.nan])
    np.testing.assert_array_equal(np.asarray(snp.fmin(nan, one)), [1.0, 1.0, np.nan])
    assert snp.maximum(A([-0.0]), A([0.0])).item() == 0.0


def test_domain_edges():
    with np.errstate(all="ignore"):
        assert snp.log(A([0.0])).item() == -np.inf
        assert np.isnan(snp.log(A([-1.0])).item())
        assert np.isnan(snp.sqrt(A([-1.0])).item())
        assert snp.arctanh(A([1.0, -1.0])).tolist() == [np.inf, -np.inf]
        assert snp.log1p(A([-1.0])).item() == -np.inf
        assert snp.sqrt(A([-1 + 0j])).item() == 1j
        assert snp.cbrt(A([-8.0])).item() == -2.0
        assert snp.rsqrt(A([0.0, 4.0])).tolist() == [np.inf, 0.5]
        assert snp.arctan2(0.0, A([-0.0])).item() == pytest.approx(math.pi)


def test_rounding():
    x = A([0.5, 1.5, 2.5, -0.5, -1.5, -2.5])
    assert snp.round(x).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0]
    assert snp.rint(x).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0]
    assert snp.round(A([1234, -1255], np.int16), decimals=-2).tolist() == [1200, -1300]
    i = A([1, -2], np.int8)
    for fn in (snp.floor, snp.ceil, snp.trunc):
        assert fn(i) is i  # Array API: integers are returned unchanged
    assert snp.round(i) is i
    assert snp.rint(i).dtype == np.float32
    assert snp.floor(A([-0.5])).item() == -1.0 and snp.ceil(A([-0.5])).item() == -0.0
    assert snp.trunc(A([-1.7, 1.7])).tolist() == [-1.0, 1.0]
    # floor of ints stages no primitive at all.
    assert eqn_names(make_ir(snp.floor)(i)) == []


def test_modf_frexp_ldexp():
    frac, whole = snp.modf(A([-2.5, -2.0, np.inf, 3.25]))
    assert whole.tolist() == [-2.0, -2.0, np.inf, 3.0]
    assert frac.tolist() == [-0.5, -0.0, 0.0, 0.25]
    assert snp.signbit(frac).tolist() == [True, True, False, False]
    m, e = snp.frexp(A([8.0, 0.0, -3.0]))
    assert m.tolist() == [0.5, 0.0, -0.75] and e.tolist() == [4, 0, 2] and e.dtype == np.int32
    assert snp.ldexp(m, e).tolist() == [8.0, 0.0, -3.0]
    assert snp.ldexp(A([1.0], np.float32), 200).item() == np.inf
    assert snp.ldexp(3, 2).item() == 12.0


def test_clip_semantics_and_staging():
    x = A([-2.0, 0.0, 0.5, 1.0, 3.0, np.nan])
    assert np.asarray(snp.clip(x, 0, 1)).tolist()[:5] == [0.0, 0.0, 0.5, 1.0, 1.0]
    assert np.isnan(np.asarray(snp.clip(x, 0, 1))[5])
    assert snp.clip(x, None, None) is x
    # min > max gives max (Array API: minimum(maximum(x, lo), hi)).
    assert snp.clip(A([-1.0, 5.0]), 2.0, 1.0).tolist() == [1.0, 1.0]
    assert snp.clip(A([-1.0, 5.0]), A([2.0]), A([1.0])).tolist() == [1.0, 1.0]
    assert snp.clamp_min(A([-1.0, 5.0]), 0).tolist() == [0.0, 5.0]
    assert snp.clamp_max(A([-1.0, 5.0]), A(0.0)).tolist() == [-1.0, 0.0]
    # Static bounds are params of one clip equation; array bounds give clamp / maximum.
    p = make_ir(lambda v: snp.clip(v, 0, 1))(x)
    assert eqn_names(p) == ["clip"] and p.eqns[0].params == {"lo": 0.0, "hi": 1.0}
    b = A(0.0, np.float32)
    assert eqn_names(make_ir(lambda v, lo: snp.clip(v, lo, 1))(x, b)) == ["clamp"]
    assert eqn_names(make_ir(lambda v, lo: snp.clip(v, lo))(x, b)) == ["maximum"]
    assert eqn_names(make_ir(lambda v, hi: snp.clip(v, None, hi))(x, b)) == ["minimum"]
    # Static bounds are rounded to the result dtype; promotion follows JAX.
    h = make_ir(lambda v: snp.clip(v, 0.1, None))(A([1.0], np.float16))
    assert h.eqns[0].params["lo"] == float(np.float16(0.1))
    assert snp.clip(A([1, 5], np.int8), 2, 3).dtype == np.int8
    assert snp.clip(A([1, 5], np.int8), 1.5, 3).dtype == np.float32
    with pytest.raises(OverflowError, match="clip"):
        snp.clip(A([1], np.uint8), 0, 300)


def test_where():
    c = A([True, False, True])
    assert snp.where(c, A([1.0, 2.0, 3.0]), 0.0).tolist() == [1.0, 0.0, 3.0]
    assert snp.where(A([2, 0], np.int8), 1, A([5, 6], np.int16)).tolist() == [1, 6]
    r = snp.where(c, A([1, 2, 3], np.int8), A([1.0, 2.0, 3.0], np.float16))
    assert r.dtype == np.float16
    assert snp.where(True, 1.0, 2.0).weak_type
    p = make_ir(lambda cond, v: snp.where(cond, v, 0))(A([1, 0]), A([1.0, 2.0]))
    assert eqn_names(p) == ["not_equal", "where"]
    assert p.eqns[1].outvars[0].aval.dtype == np.float32


def test_nan_to_num():
    x = A([np.nan, np.inf, -np.inf, 1.0])
    assert snp.nan_to_num(x).tolist() == [0.0, np.finfo(np.float32).max,
                                          np.finfo(np.float32).min, 1.0]
    assert snp.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0).tolist() == [1.0, 2.0, -2.0, 1.0]
    bf = snp.nan_to_num(A([np.inf], ml_dtypes.bfloat16))
    assert bf.dtype == ml_dtypes.bfloat16 and np.isfinite(np.asarray(bf, np.float32)).all()
    i = A([1, 2])
    assert snp.nan_to_num(i) is i
    z = snp.nan_to_num(A([complex(np.nan, np.inf)]))
    assert z.item() == complex(0, np.finfo(np.float32).max)


def test_isclose_and_compositions():
    got = snp.isclose(A([1.0, np.inf, np.nan, 1.0]), A([1.0 + 1e-7, np.inf, np.nan, np.inf]))
    assert got.tolist() == [True, True, False, False]
    assert snp.isclose(A([np.nan]), A([np.nan]), equal_nan=True).tolist() == [True]
    assert snp.isclose(A([1, 2]), A([1, 3])).tolist() == [True, False]
    assert snp.sinc(A([0.0])).item() == 1.0
    assert snp.angle(A([-1.0, 1j]), deg=True).tolist() == pytest.approx([180.0, 90.0])
    assert snp.isposinf(A([np.inf, -np.inf])).tolist() == [True, False]
    assert snp.isneginf(A([np.inf, -np.inf])).tolist() == [False, True]
    assert snp.gcd(A([12, -18]), A([18, 12])).tolist() == [6, 6]
    assert snp.lcm(A([4, -6]), A([6, 4])).tolist() == [12, 12]


def test_complex_parts():
    z = A([1 + 2j, -3 - 4j])
    assert snp.real(z).tolist() == [1.0, -3.0] and snp.real(z).dtype == np.float32
    assert snp.imag(z).tolist() == [2.0, -4.0]
    assert snp.conj(z).tolist() == [1 - 2j, -3 + 4j]
    assert snp.abs(z).tolist() == [pytest.approx(math.sqrt(5)), 5.0]
    x = A([1.0, 2.0])
    assert snp.real(x) is x and snp.conj(x) is x and snp.imag(x).tolist() == [0.0, 0.0]
    assert z.real.tolist() == [1.0, -3.0]


def test_reciprocal_and_sign():
    assert snp.reciprocal(A([2, 4])).tolist() == [0.5, 0.25]
    assert snp.sign(A([-3, 0, 5], np.int8)).tolist() == [-1, 0, 1]
    s = snp.sign(A([3 + 4j, 0j]))
    np.testing.assert_allclose(np.asarray(s), [0.6 + 0.8j, 0])


def test_positive_returns_the_operand():
    x = A([1.0])
    assert snp.positive(x) is x and (+x) is x


def test_python_scalar_first_operands():
    x = A([1.0, 2.0], np.float16)
    assert (1 - x).tolist() == [0.0, -1.0] and (1 - x).dtype == np.float16
    assert (2 ** x).tolist() == [2.0, 4.0]
    assert (3 // A([2], np.int8)).dtype == np.int8


# ---- eager and staged agree --------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda a, b: snp.clip(a, 0.25, 0.75), lambda a, b: snp.clip(a, b, 0.75),
    lambda a, b: snp.where(a > b, a, 0.0), lambda a, b: snp.isclose(a, b),
    lambda a, b: snp.modf(a), lambda a, b: snp.sinc(a), lambda a, b: snp.logical_and(a, b),
    lambda a, b: snp.pow(a, 2), lambda a, b: snp.nan_to_num(a / b),
])
def test_eager_and_staged_agree(fn, rng):
    a = A(rng.uniform(-1, 1, (3, 4)).astype(np.float32))
    b = A(rng.uniform(-1, 1, (4,)).astype(np.float32))
    eager = fn(a, b)
    prog = make_ir(fn)(a, b)
    staged = eval_program(prog, prog.consts, a, b)
    eager = list(eager) if isinstance(eager, tuple) else [eager]
    for e, s in zip(eager, staged):
        assert e.dtype == s.dtype and e.weak_type == s.weak_type
        np.testing.assert_array_equal(np.asarray(e), np.asarray(s))


# ---- hypothesis: broadcasting shapes and mixed dtypes vs NumPy ---------------------------------

_HDTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64,
            np.complex64]
_HOPS = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "less": np.less, "equal": np.equal, "divide": np.true_divide,
    "arctan2": np.arctan2, "logaddexp": np.logaddexp, "bitwise_and": np.bitwise_and,
}
_DOMAIN = {"subtract": "numeric", "maximum": "real", "minimum": "real", "less": "real",
           "divide": "inexact", "arctan2": "real_inexact", "logaddexp": "real_inexact",
           "bitwise_and": "integer"}


def _expected_dtype(name, d1, d2):
    dt = dtypes.promote_types(d1, d2)
    dom = _DOMAIN.get(name, "any")
    if dom in ("inexact", "real_inexact") and not dtypes.is_inexact(dt):
        dt = dtypes.float32
    if name in ("less", "equal"):
        return dt, np.dtype(np.bool_)
    return dt, dt


def _allowed(name, dt):
    dom = _DOMAIN.get(name, "any")
    if dom == "numeric":
        return dt != np.bool_
    if dom in ("real", "real_inexact"):
        return dt.kind != "c"
    if dom == "integer":
        return dt.kind in "biu"
    return True


def _values(dt, shape):
    return hnp.arrays(dt, shape, elements=hnp.from_dtype(
        dt, allow_nan=False, allow_infinity=False, min_value=-50, max_value=50)
        if dt.kind in "fc" else hnp.from_dtype(dt, min_value=0 if dt.kind == "u" else -50,
                                               max_value=50) if dt.kind in "iu" else None)


@given(data=st.data(), name=st.sampled_from(sorted(_HOPS)),
       shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4),
       d1=st.sampled_from(_HDTYPES), d2=st.sampled_from(_HDTYPES))
def test_binary_ops_broadcast_and_promote_like_numpy(data, name, shapes, d1, d2):
    d1, d2 = np.dtype(d1), np.dtype(d2)
    work, out_dt = _expected_dtype(name, d1, d2)
    x = data.draw(_values(d1, shapes.input_shapes[0]))
    y = data.draw(_values(d2, shapes.input_shapes[1]))
    fn = getattr(snp, name)
    if not _allowed(name, work):
        with pytest.raises(TypeError, match=name):
            fn(A(x), A(y))
        return
    got = fn(A(x), A(y))
    assert got.shape == shapes.result_shape and got.dtype == out_dt
    with np.errstate(all="ignore"):
        want = _HOPS[name](x.astype(work), y.astype(work))
    if out_dt.kind in "biu":
        np.testing.assert_array_equal(np.asarray(got), want)
    else:
        rtol = 1e-3 if work == np.float16 else 1e-5
        np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=rtol, equal_nan=True)


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3),
       dt=st.sampled_from([np.int8, np.float32, np.complex64]))
def test_where_broadcasts_three_shapes(shapes, dt):
    rng = np.random.default_rng(0)
    c = rng.random(shapes.input_shapes[0]) < 0.5
    x = rng.integers(-5, 5, shapes.input_shapes[1]).astype(dt)
    y = rng.integers(-5, 5, shapes.input_shapes[2]).astype(dt)
    got = snp.where(A(c), A(x), A(y))
    assert got.shape == shapes.result_shape and got.dtype == np.dtype(dt)
    np.testing.assert_array_equal(np.asarray(got), np.where(c, x, y))


@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4),
                    elements=st.floats(-10, 10, width=32)),
       lo=st.floats(-5, 5, width=32), width=st.floats(0, 5, width=32))
def test_clip_static_bounds_property(x, lo, width):
    hi = np.float32(lo + width)
    got = np.asarray(snp.clip(A(x), float(lo), float(hi)))
    np.testing.assert_array_equal(got, np.minimum(np.maximum(x, np.float32(lo)), hi))
    assert ((got >= np.float32(lo)) & (got <= hi)).all()


def test_python_float_with_float8_e5m2_keeps_dtype_eager_and_compiled():
    import starling
    x = snp.ones(2, dtype=snp.float8_e5m2)
    assert (x * 2.0).dtype == snp.float8_e5m2 and (2.0 * x).dtype == snp.float8_e5m2
    assert starling.compile(lambda v: v * 2.0)(x).dtype == snp.float8_e5m2
