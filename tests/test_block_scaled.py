"""The float8_e8m0fnu scale dtype, MX quantization (OCP MX v1.0) and scaled_matmul.

References are independent of the code under test: conversions against tests/exact_casts.py
(exact integer arithmetic), quantization against a per-block Python loop over math.frexp,
products against float64 NumPy on the exactly widened operands.
"""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as hst

import starling
import starling.numpy as snp
from starling import lax
from tests.exact_casts import E8M0, bits_of, convert, convert_bits

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
F4 = np.dtype(ml_dtypes.float4_e2m1fn)
EMAX = {E4M3: 8, E5M2: 15, F4: 2}
ELEMENTS = list(EMAX)
ALL_BYTES = np.arange(256, dtype=np.uint8).view(E8M0)


def _cast(x, dt, how):
    if how == "eager":
        return np.asarray(snp.asarray(x).astype(dt))
    # a fused kernel of the cpp backend (the multiply keeps the cast out of a lone copy)
    one = np.ones((), x.dtype) if x.dtype != E8M0 else None
    fn = (lambda a: a.astype(dt)) if one is None else (lambda a: (a * one).astype(dt))
    return np.asarray(starling.compile(fn)(x))


def _hard_values(dt):
    """Powers of two over the whole scale range, the halfway points ``1.5 * 2**k`` and their
    neighbours, subnormals, zeros, negatives, NaN, inf and out-of-range values."""
    vals = [0.0, -0.0, -1.0, -2.0 ** -130, math.inf, -math.inf, math.nan, 1e-45, 2.0 ** -149]
    for k in range(-130, 129):
        for v in (2.0 ** k, 1.5 * 2.0 ** k):
            vals.append(v)
    x = np.array(vals, np.float64).astype(dt)
    x = x[np.isfinite(x) | ~np.isfinite(np.array(vals))]
    finite = x[np.isfinite(x) & (x > 0)]
    return np.concatenate([x, np.nextafter(finite, np.inf), np.nextafter(finite, 0)])


@pytest.mark.parametrize("how", ["eager", "compiled"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_e8m0_narrowing_from_floats(dt, how):
    x = _hard_values(np.dtype(dt))
    np.testing.assert_array_equal(bits_of(_cast(x, E8M0, how)), convert_bits(x, E8M0))


@pytest.mark.parametrize("how", ["eager", "compiled"])
def test_e8m0_narrowing_from_integers_and_bool(how):
    big = [(3 << k) + d for k in range(60) for d in (-1, 0, 1)] + [0, -5, 2 ** 63 - 1]
    for dt, vals in ((np.int64, big), (np.int32, [v for v in big if -2 ** 31 <= v < 2 ** 31]),
                     (np.int8, list(range(-128, 128))), (np.uint64, [2 ** 64 - 1, 3 << 62]),
                     (np.bool_, [True, False])):
        x = np.array(vals, dt)
        np.testing.assert_array_equal(bits_of(_cast(x, E8M0, how)), convert_bits(x, E8M0),
                                      err_msg=str(dt))


@pytest.mark.parametrize("how", ["eager", "compiled"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, E4M3,
                                F4, np.int32, np.uint8, np.bool_])
def test_every_e8m0_pattern_widens_by_the_rules(dt, how):
    dt = np.dtype(dt)
    got = _cast(ALL_BYTES, dt, how)
    want = convert(ALL_BYTES, dt)
    if dt.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_array_equal(bits_of(got), bits_of(want))
    if dt == np.float64:   # byte b is exactly 2**(b - 127)
        np.testing.assert_array_equal(got[:255], [2.0 ** (b - 127) for b in range(255)])


def test_e8m0_moves_but_takes_no_arithmetic():
    s = snp.asarray(np.array([1.0, 4.0, 0.25], np.float32)).astype(snp.float8_e8m0fnu)
    assert s.dtype == E8M0
    moved = starling.compile(lambda s: snp.where(snp.arange(3) > 5, s, s[::-1]))(s)
    np.testing.assert_array_equal(bits_of(moved), [125, 129, 127])
    moved = starling.compile(lambda s: snp.concatenate([s[::-1], s]).reshape(2, 3).T)(s)
    assert moved.dtype == E8M0
    np.testing.assert_array_equal(np.asarray(moved).astype(np.float32),
                                  [[0.25, 1.0], [4.0, 4.0], [1.0, 0.25]])
    np.testing.assert_array_equal(bits_of(lax.bitcast_convert_type(s, np.uint8)),
                                  [127, 129, 125])
    for fn, match in ((lambda: s + s, "add: float8_e8m0fnu holds scales"),
                      (lambda: s < s, "less: float8_e8m0fnu holds scales"),
                      (lambda: s * np.float32(2), "float8_e8m0fnu holds scales"),
                      (lambda: s + 1.0, "float8_e8m0fnu holds scales"),
                      # found by review: math functions promoted it to float32, products ran
                      # eagerly but not compiled
                      (lambda: snp.exp(s), "exp: float8_e8m0fnu holds scales"),
                      (lambda: snp.sqrt(s), "sqrt: float8_e8m0fnu holds scales"),
                      (lambda: s @ s, "matmul: float8_e8m0fnu holds scales"),
                      (lambda: snp.dot(s, s), "dot: float8_e8m0fnu holds scales"),
                      (lambda: starling.compile(lambda a: a @ a)(s), "float8_e8m0fnu holds"),
                      (lambda: lax.dot_general(np.ones((2, 2), np.float32),
                                               np.ones((2, 2), np.float32),
                                               (((1,), (0,)), ((), ())),
                                               preferred_element_type=E8M0),
                       "preferred_element_type float8_e8m0fnu holds scales")):
        with pytest.raises(TypeError, match=match):
            fn()
    # reductions compute in float32 and round back, eagerly and compiled alike
    for red in (snp.sum, snp.max, snp.min, lambda a: snp.sort(a)[::-1]):
        eager, compiled = red(s), starling.compile(red)(s)
        assert eager.dtype == compiled.dtype == E8M0
        np.testing.assert_array_equal(bits_of(eager), bits_of(compiled))
    assert float(snp.finfo(snp.float8_e8m0fnu).max) == 2.0 ** 127


# ---- MX quantization -----------------------------------------------------------------------

def _reference_quantize(x, elem, block_size):
    """OCP MX v1.0 section 6.3 along the last axis, one block at a time in Python floats:
    (element bits or None for a block with NaN / inf, scale byte) per block."""
    out = []
    big = float(ml_dtypes.finfo(elem).max)
    for row in x.reshape(math.prod(x.shape[:-1]), x.shape[-1]).astype(np.float64):
        for j in range(0, len(row), block_size):
            block = row[j:j + block_size]
            if not np.all(np.isfinite(block)):
                out.append((None, 0xff))
                continue
            amax = float(np.max(np.abs(block))) if len(block) else 0.0
            shared = -127 if amax == 0 else min(max(math.frexp(amax)[1] - 1 - EMAX[elem],
                                                    -127), 127)
            scaled = np.clip(block / 2.0 ** shared, -big, big)   # exact: a power of two
            out.append((convert_bits(scaled, elem), shared + 127))
    return out


def _check_quantized(x, elem, block_size, q, s):
    """q / s (blocked along the last axis) against the reference."""
    ref = _reference_quantize(x, elem, block_size)
    qb = bits_of(np.asarray(q)).reshape(math.prod(x.shape[:-1]), x.shape[-1])
    sb = bits_of(np.asarray(s)).reshape(-1)
    nb = -(-x.shape[-1] // block_size)
    assert sb.size == len(ref)
    for i, (elements, scale) in enumerate(ref):
        assert sb[i] == scale, f"block {i}: scale byte {sb[i]}, want {scale}"
        if elements is not None:
            r, j = divmod(i, nb)
            np.testing.assert_array_equal(qb[r, j * block_size:(j + 1) * block_size], elements)


@settings(max_examples=60, deadline=None)
@given(hst.sampled_from(ELEMENTS), hst.sampled_from([np.float32, np.float64, np.float16]),
       hst.integers(1, 3), hst.integers(0, 70), hst.sampled_from([1, 4, 32]), hst.data())
def test_quantize_matches_the_spec_per_block(elem, dt, rows, n, block_size, data):
    rng = np.random.default_rng(data.draw(hst.integers(0, 2 ** 16)))
    scale = data.draw(hst.sampled_from([1e-40, 1e-6, 1.0, 1e4, 1e38]))
    x = (rng.standard_normal((rows, n)) * scale)
    if n and data.draw(hst.booleans()):   # zeros, ties, specials at random places
        specials = [0.0, -0.0, np.nan, np.inf, 448.0, 6.0, 2.0 ** -130]
        idx = rng.integers(0, n, size=3)
        x[0, idx] = rng.choice(specials, size=3)
    x = x.astype(dt)
    q, s = lax.quantize_mx(x, elem, block_size=block_size)
    assert q.dtype == elem and s.dtype == E8M0
    assert s.shape == (rows, -(-n // block_size))
    _check_quantized(x, elem, block_size, q, s)


@pytest.mark.parametrize("elem", ELEMENTS, ids=str)
def test_quantize_and_dequantize_compile_and_vmap_bitwise(elem):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 5, 40)) * np.logspace(-20, 20, 40)).astype(np.float32)
    x[0, 0, :32] = 0.0
    x[1, 1, 3] = np.nan
    q, s = lax.quantize_mx(x, elem, axis=1, block_size=2)
    assert s.shape == (3, 3, 40)
    _check_quantized(np.moveaxis(x, 1, -1), elem, 2, np.moveaxis(np.asarray(q), 1, -1),
                     np.moveaxis(np.asarray(s), 1, -1))
    cq, cs = starling.compile(lambda x: lax.quantize_mx(x, elem, axis=1, block_size=2))(x)
    vq, vs = starling.vmap(lambda x: lax.quantize_mx(x, elem, axis=0, block_size=2))(x)
    for a, b in ((q, cq), (s, cs), (q, vq), (s, vs)):
        np.testing.assert_array_equal(bits_of(np.asarray(a)), bits_of(np.asarray(b)))
    d = lax.dequantize_mx(q, s, axis=1, block_size=2)
    cd = starling.compile(lambda q, s: lax.dequantize_mx(q, s, axis=1, block_size=2))(q, s)
    np.testing.assert_array_equal(np.asarray(d), np.asarray(cd))


@pytest.mark.parametrize("elem", ELEMENTS, ids=str)
@pytest.mark.parametrize("out", [np.float32, np.float64, ml_dtypes.bfloat16])
def test_dequantize_is_elements_times_scales(elem, out):
    rng = np.random.default_rng(1)
    q = rng.integers(0, 256, size=(4, 37), dtype=np.uint8)
    if elem == F4:
        q &= 0x0f
    q = q.view(elem)
    sbits = rng.integers(0, 256, size=(4, 2), dtype=np.uint8)
    sbits[0, 0] = 255   # a NaN scale: the whole block is NaN
    got = np.asarray(lax.dequantize_mx(q, sbits.view(E8M0), dtype=out))
    exact = convert(q, np.dtype(np.float64)) * np.repeat(
        np.where(sbits == 255, np.nan, 2.0 ** (sbits.astype(np.int64) - 127)), 32, axis=1)[:, :37]
    want = convert(exact, np.dtype(out)) if np.dtype(out) != np.float64 else exact
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    assert np.isnan(got[0, :32]).all()


def test_round_trip_of_representable_values_is_exact():
    """Values that are element-format numbers times one power of two per block, with a block
    maximum in the format's top binade, come back unchanged."""
    rng = np.random.default_rng(2)
    for elem in ELEMENTS:
        grid = np.unique(np.abs(convert(np.arange(256, dtype=np.uint8).view(elem)[
            :16 if elem == F4 else 256], np.dtype(np.float64))))
        grid = grid[np.isfinite(grid)]
        vals = rng.choice(grid, size=(2, 64)) * rng.choice([-1, 1], size=(2, 64))
        vals[:, ::32] = grid.max()   # every block reaches the top binade
        x = (vals * 2.0 ** rng.integers(-100, 100, size=(2, 1))).astype(np.float32)
        q, s = lax.quantize_mx(x, elem)
        np.testing.assert_array_equal(np.asarray(lax.dequantize_mx(q, s)), x)


@pytest.mark.parametrize("call, kind, match", [
    (lambda: lax.quantize_mx(np.ones(4, np.int32)), TypeError, "x must be float16"),
    (lambda: lax.quantize_mx(np.ones(4, np.float32), np.float16), TypeError,
     "element dtype must be one of"),
    (lambda: lax.quantize_mx(np.ones(4, np.float32), block_size=0), ValueError,
     "block_size must be a positive int"),
    (lambda: lax.quantize_mx(np.ones(4, np.float32), axis=1), ValueError, "out of range"),
    (lambda: lax.dequantize_mx(np.ones((2, 40), E4M3), np.ones((2, 1), E8M0)), ValueError,
     r"scales of shape \(2, 1\) do not fit elements of shape \(2, 40\).*\(2, 2\)"),
    (lambda: lax.dequantize_mx(np.ones((2, 4), E4M3), np.ones((2, 1), np.float32)), TypeError,
     "scales must have dtype float8_e8m0fnu"),
    (lambda: lax.dequantize_mx(np.ones((2, 4), np.float32), np.ones((2, 1), E8M0)), TypeError,
     "elements must have an MX element dtype"),
])
def test_mx_errors(call, kind, match):
    with pytest.raises(kind, match=match):
        call()


def test_mx_pair_saves_and_loads_bit_exactly(tmp_path):
    x = np.random.default_rng(6).standard_normal((3, 64)).astype(np.float32)
    q, s = lax.quantize_mx(x, E5M2)
    starling.save(tmp_path / "mx.safetensors", {"q": q, "s": s})
    back = starling.load(tmp_path / "mx.safetensors")
    assert back["s"].dtype == E8M0 and back["q"].dtype == E5M2
    np.testing.assert_array_equal(bits_of(back["s"]), bits_of(s))
    np.testing.assert_array_equal(bits_of(back["q"]), bits_of(q))


# ---- scaled_matmul -------------------------------------------------------------------------

def _fp8(rng, shape, dt):
    return (rng.standard_normal(shape) * 4).astype(dt)


@pytest.mark.parametrize("dta, dtb", [(E4M3, E4M3), (E4M3, E5M2), (E5M2, E5M2)], ids=str)
@pytest.mark.parametrize("scales", ["tensor", "row"])
@pytest.mark.parametrize("out", [np.float32, ml_dtypes.bfloat16])
def test_scaled_matmul_float32_scales(dta, dtb, scales, out):
    rng = np.random.default_rng(3)
    a, b = _fp8(rng, (5, 48), dta), _fp8(rng, (48, 7), dtb)
    if scales == "tensor":
        sa, sb = np.float32(0.5), np.array([[3.0]], np.float32)
        fa, fb = 0.5, 3.0
    else:
        sa = rng.uniform(0.5, 2, (5, 1)).astype(np.float32)
        sb = rng.uniform(0.5, 2, (1, 7)).astype(np.float32)
        fa, fb = sa.astype(np.float64), sb.astype(np.float64)
    bias = rng.standard_normal(7).astype(np.float32)
    got = lax.scaled_matmul(a, b, sa, sb, out, bias=bias)
    assert got.dtype == np.dtype(out) and got.shape == (5, 7)
    want = (a.astype(np.float64) @ b.astype(np.float64)) * fa * fb + bias
    tol = 2e-6 if np.dtype(out) == np.float32 else 8e-3
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=tol,
                               atol=tol * np.abs(want).max())
    compiled = starling.compile(lambda *args: lax.scaled_matmul(*args, out, bias=bias))
    np.testing.assert_array_equal(np.asarray(compiled(a, b, sa, sb)), np.asarray(got))


def test_scaled_matmul_is_exact_on_small_integers():
    """Products and sums of small integers and power-of-two scales are exact in float32."""
    rng = np.random.default_rng(4)
    a = rng.integers(-8, 9, (6, 32)).astype(E4M3)
    b = rng.integers(-8, 9, (32, 3)).astype(E5M2)
    got = np.asarray(lax.scaled_matmul(a, b, np.float32(0.25), np.full((1, 3), 8, np.float32)))
    np.testing.assert_array_equal(got, (a.astype(np.float64) @ b.astype(np.float64)) * 2)


@pytest.mark.parametrize("elem", ELEMENTS, ids=str)
def test_scaled_matmul_mx_block_scales(elem):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((4, 70)), rng.standard_normal((70, 3))
    qa, sa = lax.quantize_mx(a.astype(np.float32), elem, axis=1)
    qb, sb = lax.quantize_mx(b.astype(np.float32), elem, axis=0)
    got = lax.scaled_matmul(qa, qb, sa, sb)
    da = convert(np.asarray(qa), np.dtype(np.float64)) * np.repeat(
        np.asarray(sa).astype(np.float64), 32, axis=1)[:, :70]
    db = convert(np.asarray(qb), np.dtype(np.float64)) * np.repeat(
        np.asarray(sb).astype(np.float64), 32, axis=0)[:70]
    np.testing.assert_allclose(np.asarray(got), da @ db, rtol=1e-5, atol=1e-5)
    # the quantization error of an MX format is a few percent of the block maxima
    err = np.abs(np.asarray(got) - a @ b).max()
    assert err < (0.1 if elem != F4 else 1.0) * np.abs(a @ b).max()


@pytest.mark.parametrize("call, kind, match", [
    (lambda: lax.scaled_matmul(np.ones((2, 3), E4M3), np.ones((4, 2), E4M3), 1.0, 1.0),
     ValueError, r"expected a \(m, k\) and b \(k, n\), got a \(2, 3\) and b \(4, 2\)"),
    (lambda: lax.scaled_matmul(np.ones((2, 3), np.float32), np.ones((3, 2), E4M3),
                               np.float32(1), np.float32(1)), TypeError,
     "a must be float8_e4m3fn, float8_e5m2"),
    (lambda: lax.scaled_matmul(np.ones((2, 3), E4M3), np.ones((3, 2), E4M3),
                               np.ones((3, 1), np.float32), np.float32(1)), ValueError,
     r"scale_a of shape \(3, 1\).*\(2, 1\) \(per row\)"),
    (lambda: lax.scaled_matmul(np.ones((2, 3), E4M3), np.ones((3, 2), E4M3),
                               np.float32(1), np.float64(1)), TypeError, "scale_b must be float32"),
    (lambda: lax.scaled_matmul(np.ones((2, 3), E4M3), np.ones((3, 2), E4M3), np.float32(1),
                               np.float32(1), np.int32), TypeError, "out_dtype must be one of"),
    (lambda: lax.scaled_matmul(np.ones((2, 40), E4M3), np.ones((40, 2), E4M3),
                               np.ones((2, 1), E8M0), np.ones((2, 2), E8M0)), ValueError,
     r"scale_a of shape \(2, 1\) do not fit a of shape \(2, 40\)"),
    (lambda: lax.scaled_matmul(np.ones((2, 3), E4M3), np.ones((3, 2), E4M3), np.float32(1),
                               np.float32(1), bias=np.ones(3, np.float32)), ValueError,
     r"bias must have shape \(n,\) = \(2,\)"),
])
def test_scaled_matmul_errors(call, kind, match):
    with pytest.raises(kind, match=match):
        call()
