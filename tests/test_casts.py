"""Starling's conversion rules (src/core/casting.py) and the correctly rounded ``hypot`` of the cpp
backend, against exact integer arithmetic (tests/exact_casts.py), never against the installed
NumPy / ml_dtypes casts:

* float -> integer, every float and integer dtype: hypothesis sweeps of bit patterns, the values
  around every integer dtype's limits, NaN and inf; eager, numpy_ref and compiled results equal
  the oracle (truncation, NaN -> 0, saturation);
* float64 / 32- and 64-bit integers -> every low-precision format: values next to the formats'
  halfway points (a double rounding through float32 lands on them), all three paths;
* Python scalars: weak scalars in operations, creation, fills, updates, bounds, big ints;
* hypot and complex abs compiled: correctly rounded on random, huge, tiny, subnormal, exact
  halfway (Pythagorean triples whose hypotenuse needs one bit more) and special inputs.
"""
from __future__ import annotations

import functools
import math
import random
from math import isqrt

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hs

import starling as st
import starling.numpy as snp
from starling.core import casting
from starling.lowering import cache
from starling.lowering.fused import fused_kernel_p
from tests import exact_casts
from tests.exact_casts import BF16, E4M3, E5M2, F4, F16, F32, F64

INTS = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32, np.uint64))
LOWP = (F16, BF16, E4M3, E5M2, F4)
FLOATS = LOWP + (F32, F64)
N = 32   # elements per hypothesis example (one compiled signature per dtype)

needs_cpp = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(cpp_kernel_env):
    yield


def _bits(x):
    return exact_casts.bits_of(x)


def _equal(got, want, what):
    """``got`` (any dtype) equals the oracle's ``want`` (values, or bits for a float dtype)."""
    got = np.asarray(got)
    g = got if got.dtype.kind in "biu" else _bits(got)
    bad = np.nonzero(g != want)[0]
    assert not len(bad), f"{what}: {len(bad)} differ, e.g. {[(g[i], want[i]) for i in bad[:5]]}"


@functools.lru_cache(maxsize=None)
def _compiled(src, targets, backend):
    fn = st.compile(lambda a: [a.astype(t) for t in targets], backend=backend)
    if backend == "cpp" and cache.find_compiler() is not None:
        low = fn.lower(snp.zeros(N, src))
        assert all(e.primitive is fused_kernel_p for e in low.executable.program.eqns), src
    return fn


def _check_all_paths(x, targets):
    """eager, numpy_ref and (with a compiler) cpp results of ``x.astype(t)`` for each target
    equal the oracle."""
    a = snp.asarray(x)
    paths = {"eager": [a.astype(t) for t in targets],
             "numpy_ref": _compiled(x.dtype, targets, "numpy_ref")(a)}
    if cache.find_compiler() is not None:
        paths["cpp"] = _compiled(x.dtype, targets, "cpp")(a)
    for t, *results in zip(targets, *paths.values()):
        want = exact_casts.convert_bits(x, t)
        for name, got in zip(paths, results):
            assert np.asarray(got).dtype == t
            _equal(got, want, f"{x.dtype} -> {t} ({name}), x={x.tolist()}")


# ---- float -> integer ----------------------------------------------------------------------

def _limits(fdt):
    """Bit patterns of ``fdt`` values around every integer dtype's limits, and specials."""
    vals = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1.0,
            -1.0, 1.5, -1.5]
    for it in INTS:
        info = np.iinfo(it)
        for v in (info.min, info.max, info.max + 1):
            f = float(v)
            vals += [f - 1.0, f - 0.5, f, f + 0.5, f + 1.0]
            vals += np.nextafter(f, [-math.inf, math.inf]).tolist()
    return sorted(set(_bits(casting.astype(np.array(vals), fdt)).tolist()))


def _float_arrays(fdt):
    nbits = 4 if fdt == F4 else 8 * fdt.itemsize
    storage = exact_casts.STORAGE[fdt.itemsize]
    elem = hs.one_of(hs.integers(0, (1 << nbits) - 1), hs.sampled_from(_limits(fdt)))
    if fdt in (F32, F64):
        floats = hs.floats(width=8 * fdt.itemsize, allow_nan=True, allow_infinity=True)
        elem = hs.one_of(elem, floats.map(lambda v: int(_bits(np.array(v, fdt)))))
    return hs.lists(elem, min_size=N, max_size=N).map(
        lambda v: np.array(v, storage).view(fdt))


@pytest.mark.parametrize("fdt", FLOATS, ids=[d.name for d in FLOATS])
@given(data=hs.data())
def test_float_to_int_truncates_and_saturates(fdt, data):
    _check_all_paths(data.draw(_float_arrays(fdt)), INTS)


def test_float_to_int_documented_examples():
    bf = snp.asarray(np.array([128, 300, -129, 255.5, -1.5], np.float32)).astype(BF16)
    assert bf.astype(np.int8).tolist() == [127, 127, -128, 127, -1]
    assert bf.astype(np.uint8).tolist() == [128, 255, 0, 255, 0]
    x = snp.asarray(np.array([np.nan, np.inf, -np.inf, -0.9, 2.0 ** 63, -2.0 ** 64]))
    assert x.astype(np.int32).tolist() == [0, 2 ** 31 - 1, -2 ** 31, 0, 2 ** 31 - 1, -2 ** 31]
    assert x.astype(np.uint64).tolist() == [0, 2 ** 64 - 1, 0, 0, 2 ** 63, 0]
    z = snp.asarray(np.array([2.7 - 5j, np.nan + 1j, 1e30 + 0j]))
    assert z.astype(np.int16).tolist() == [2, 0, 32767]


# ---- wide sources -> low-precision formats: one rounding -------------------------------------

@functools.lru_cache(maxsize=None)
def _grid(dt, src):
    """The finite non-negative values of format ``dt`` (integers below ``src``'s maximum for an
    integer ``src``), sorted."""
    storage = exact_casts.STORAGE[dt.itemsize]
    vals = np.unique(casting.astype(np.arange(1 << (8 * dt.itemsize), dtype=storage).view(dt),
                                    F64))
    vals = vals[np.isfinite(vals) & (vals >= 0)]
    if src.kind in "iu":
        vals = vals[(vals == np.round(vals)) & (vals < float(np.iinfo(src).max))]
    return vals


def _near_halfway(src):
    """Values of ``src`` next to a halfway point between two neighbouring values of one of the
    formats (an integer one for integer sources), or anywhere."""
    def pick(args):
        dt, index, offset, sign = args
        vals = _grid(dt, src)
        i = index % (len(vals) - 1)
        mid = (vals[i] + vals[i + 1]) / 2
        if src.kind in "iu":
            v = int(mid) + offset
            v = -v if sign and src.kind == "i" else v
            return int(min(max(v, np.iinfo(src).min), np.iinfo(src).max))
        for _ in range(abs(offset)):
            mid = np.nextafter(mid, math.copysign(math.inf, offset))
        return float(-mid if sign else mid)
    near = hs.tuples(hs.sampled_from(LOWP), hs.integers(0, 1 << 16), hs.integers(-3, 3),
                     hs.booleans()).map(pick)
    if src.kind in "iu":
        info = np.iinfo(src)
        anywhere = hs.integers(int(info.min), int(info.max))
    else:
        anywhere = hs.floats(allow_nan=True, allow_infinity=True)
    return hs.lists(hs.one_of(near, anywhere), min_size=N, max_size=N).map(
        lambda v: np.array(v, src))


WIDE = tuple(np.dtype(t) for t in (np.float64, np.int32, np.uint32, np.int64, np.uint64))


@pytest.mark.parametrize("src", WIDE, ids=[d.name for d in WIDE])
@given(data=hs.data())
def test_wide_sources_round_once_to_low_precision(src, data):
    _check_all_paths(data.draw(_near_halfway(src)), LOWP)


def test_double_rounding_examples():
    # 1 + 2**-8 + 2**-40 lies above the bfloat16 halfway point 1 + 2**-8; float32 rounds it onto
    # that point, from which a second rounding (to even) would give 1.0
    v = 1 + 2 ** -8 + 2 ** -40
    x = snp.asarray(np.array([v, -v]))
    assert x.astype(BF16).astype(np.float64).tolist() == [1 + 2 ** -7, -1 - 2 ** -7]
    i = snp.asarray(np.array([2 ** 24 + 2 ** 16 + 1, 2 ** 60 + 2 ** 52 + 1], np.int64))
    assert i.astype(BF16).astype(np.float64).tolist() == [2 ** 24 + 2 ** 17, 2 ** 60 + 2 ** 53]
    assert snp.asarray(np.array([2 ** 24 + 2 ** 16 + 1], np.int32)).astype(BF16).tolist() == [
        2 ** 24 + 2 ** 17]


# ---- Python scalars --------------------------------------------------------------------------

def test_python_scalars_round_once_and_saturate():
    v = 1 + 2 ** -8 + 2 ** -40
    up = 1 + 2 ** -7
    ones = snp.ones(3, dtype=BF16)
    assert (ones * v).astype(np.float64).tolist() == [up] * 3              # weak scalar
    assert float(snp.asarray(v, dtype=BF16)) == up
    assert snp.full(2, v, dtype=BF16).astype(np.float64).tolist() == [up] * 2
    assert snp.full_like(ones, v).astype(np.float64).tolist() == [up] * 3
    assert snp.asarray([v, -v], dtype=BF16).astype(np.float64).tolist() == [up, -up]
    assert ones.at[1].set(v).astype(np.float64).tolist() == [1, up, 1]
    assert snp.clip(snp.asarray([0.0, 2.0], dtype=BF16), v, 1.5).astype(
        np.float64).tolist() == [up, 1.5]
    assert snp.linspace(v, v, 2, dtype=BF16).astype(np.float64).tolist() == [up, up]
    # Python ints beyond 64 bits: rounded once (2**70 + 2**62 is a bfloat16 halfway point)
    assert float(snp.asarray(2 ** 70 + 2 ** 62 + 1, dtype=BF16)) == 2.0 ** 70 + 2.0 ** 63
    assert float(snp.asarray(2 ** 70 + 2 ** 62, dtype=BF16)) == 2.0 ** 70
    assert float(snp.asarray(-(2 ** 2000), dtype=F32)) == -math.inf
    # ints near 2**53: float32(2**53 + 2**29 + 1) rounds up (NumPy's scalar type rounds twice)
    assert float(snp.asarray(2 ** 53 + 2 ** 29 + 1, dtype=F32)) == 2.0 ** 53 + 2.0 ** 30
    # float -> int: truncation, saturation, NaN -> 0; Python ints out of range raise
    assert snp.asarray([300.7, -5.5, np.nan, 1e300], dtype=np.uint8).tolist() == [255, 0, 0, 255]
    assert snp.full(2, np.nan, dtype=np.int32).tolist() == [0, 0]
    assert snp.full(2, -1e10, dtype=np.int32).tolist() == [-2 ** 31] * 2
    with pytest.raises(OverflowError):
        snp.asarray([300], dtype=np.uint8)
    with pytest.raises(OverflowError):
        snp.full(2, 300, dtype=np.uint8)


def test_casting_scalar_matches_the_oracle():
    rng = np.random.default_rng(0)
    values = [1 + 2 ** -8 + 2 ** -40, 65520.0, 65519.99, 464.0, 464.01, 6.5, 7.0, 1e-45, 2.0 ** -150,
              -0.0, math.inf, math.nan, 3.0e38, 2 ** 63, -2 ** 63, 2 ** 64 - 1, 2 ** 24 + 1]
    values += rng.standard_normal(40).tolist() + (rng.standard_normal(20) * 1e5).tolist()
    for dt in LOWP + (F32, F64) + INTS:
        for v in values:
            if dt.kind in "iu" and isinstance(v, int) and not (
                    np.iinfo(dt).min <= v <= np.iinfo(dt).max):
                with pytest.raises(OverflowError):
                    casting.scalar(v, dt)
                continue
            src = np.array(v, np.float64 if isinstance(v, float) else (
                np.uint64 if v >= 2 ** 63 else np.int64))
            want = exact_casts.convert_bits(src.reshape(1), dt)[0]
            got = np.asarray(casting.scalar(v, dt))
            assert (got if dt.kind in "iu" else _bits(got)) == want, (v, dt)


# ---- hypot / complex abs, correctly rounded ----------------------------------------------------

def _hypot_bits(x, y, dt):
    """Bits of ``sqrt(x^2 + y^2)`` rounded to nearest even in ``dt`` (float32 / float64): the
    integer square root with a sticky bit, rounded by the exact oracle's encoder."""
    if math.isinf(x) or math.isinf(y):
        return exact_casts.encoder(dt)(("inf", 0))
    if math.isnan(x) or math.isnan(y):
        return None
    vx, vy = exact_casts.from_float(abs(x)), exact_casts.from_float(abs(y))
    e = min(vx[3], vy[3])
    n = (vx[2] << (vx[3] - e)) ** 2 + (vy[2] << (vy[3] - e)) ** 2     # value^2 = n * 4**e
    k = max(0, 60 - n.bit_length() // 2)                                # extra bits of the root
    s = isqrt(n << (2 * k))
    sticky = int(s * s != n << (2 * k))
    return exact_casts.encoder(dt)(("num", 0, 2 * s + sticky, e - k - 1))


def _pythagorean(rng, legs_bits):
    """(a, b) with a^2 + b^2 = c^2, legs below 2**legs_bits, c odd in [2**legs_bits,
    2**(legs_bits + 1)): c is a halfway point of the format with legs_bits bits."""
    while True:
        q = rng.randrange(1 << (legs_bits // 2 - 3), 1 << (legs_bits // 2 + 1))
        p = round(q * (1 + math.sqrt(2))) + rng.randrange(-3, 4)
        if (p - q) % 2 == 0 or math.gcd(p, q) != 1:
            continue
        a, b, c = p * p - q * q, 2 * p * q, p * p + q * q
        if max(a, b) < 1 << legs_bits <= c < 2 << legs_bits:
            return a, b


def _hard_pairs(dt):
    rng = np.random.default_rng(1)
    r = random.Random(1)
    info = np.finfo(dt)
    lo, hi = int(np.log2(info.smallest_subnormal)), int(np.log2(info.max))
    n = 3000
    e = rng.integers(lo, hi, n)
    x = rng.uniform(0.5, 1.0, n) * 2.0 ** e
    y = x * rng.uniform(0, 1.5, n) * 2.0 ** rng.integers(-60, 1, n)
    sub = float(info.smallest_subnormal)
    xs = rng.integers(1, 1 << 20, n) * sub
    ys = rng.integers(1, 1 << 20, n) * sub
    mant = 53 if dt == np.float64 else 24
    trip = [_pythagorean(r, mant) for _ in range(1500)]
    scale = 2.0 ** rng.integers(lo + 60, hi - mant - 2, len(trip))
    tx = np.array([a for a, _ in trip]) * scale
    ty = np.array([b for _, b in trip]) * scale
    big = float(info.max)
    special = [(big, big), (big, 1.0), (big / 1.5, big / 1.5), (math.inf, math.nan),
               (math.nan, -math.inf), (math.nan, 1.0), (0.0, -0.0), (-3.0, 4.0), (sub, sub),
               (sub, 0.0), (1.0, 1.0), (float(info.tiny), float(info.tiny)), (1e-300, 1e-300)]
    sx = np.array([a for a, _ in special])
    sy = np.array([b for _, b in special])
    x = np.concatenate([x, xs, tx, sx, -y]).astype(dt)
    y = np.concatenate([y, ys, ty, sy, x[:n]]).astype(dt)
    return x, y


@needs_cpp
@pytest.mark.parametrize("dt", [np.float64, np.float32], ids=["float64", "float32"])
def test_compiled_hypot_and_complex_abs_are_correctly_rounded(dt):
    x, y = _hard_pairs(np.dtype(dt))
    z = np.empty(x.shape, np.complex128 if dt == np.float64 else np.complex64)
    z.real, z.imag = x, y
    f = st.compile(lambda x, y, z: (snp.hypot(x, y), snp.abs(z)), backend="cpp")
    low = f.lower(snp.asarray(x), snp.asarray(y), snp.asarray(z))
    assert "st_hypot(" in low.source
    h, a = (_bits(np.asarray(r)) for r in f(snp.asarray(x), snp.asarray(y), snp.asarray(z)))
    normal = float(np.finfo(dt).tiny)
    for i, (xi, yi) in enumerate(zip(x.tolist(), y.tolist())):
        want = _hypot_bits(xi, yi, np.dtype(dt))
        if want is None:
            assert np.isnan(np.asarray(h).view(dt)[i]) and np.isnan(np.asarray(a).view(dt)[i])
            continue
        assert h[i] == want and a[i] == want, (xi, yi, h[i], a[i], want)
        if dt == np.float64 and i < 3000 and math.hypot(xi, yi) >= normal:
            # the random pairs: CPython's math.hypot (correctly rounded but for some exact
            # halfway cases and subnormal results) agrees with the oracle
            assert _bits(np.float64(math.hypot(xi, yi))) == want, (xi, yi)


@needs_cpp
def test_complex_abs_of_one_plus_one_j_matches_numpy():
    z = snp.asarray(np.array([1 + 1j, 3 + 4j, 1e300 + 1e300j, 5e-324 + 5e-324j]))
    got = np.asarray(st.compile(snp.abs, backend="cpp")(z))
    assert got.tolist() == [math.hypot(1, 1), 5.0, math.hypot(1e300, 1e300), 5e-324]
