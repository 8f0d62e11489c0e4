"""Tests of starling.numpy.fft and the fft primitive: dtypes, errors, round trips, norms,
frequencies, staging, and hypothesis properties against numpy.fft."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import starling.numpy as snp
from starling.arrays.ops.fft import fft as fft_bind
from starling.core.ir import check_program, eval_program
from starling.transforms.stage import make_ir
from tests.hard_matrices import rnd

F = snp.fft


def A(x, dtype=None):
    return snp.asarray(np.asarray(x, dtype=dtype))


# ---- dtypes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt, want", [
    (np.complex64, np.complex64), (np.complex128, np.complex128), (np.float32, np.complex64),
    (np.float64, np.complex128), (np.int64, np.complex64), (np.bool_, np.complex64),
    (np.float16, np.complex64), (ml_dtypes.bfloat16, np.complex64)])
def test_fft_dtypes_keep_precision(dt, want):
    x = A(np.ones(4), dt)
    assert F.fft(x).dtype == np.dtype(want)
    assert F.ifftn(x).dtype == np.dtype(want)


@pytest.mark.parametrize("dt, c, r", [(np.float32, np.complex64, np.float32),
                                      (np.float64, np.complex128, np.float64),
                                      (np.int32, np.complex64, np.float32),
                                      (np.float16, np.complex64, np.float32)])
def test_real_transform_dtypes(dt, c, r):
    x = A(np.ones(6), dt)
    y = F.rfft(x)
    assert y.dtype == np.dtype(c) and y.shape == (4,)
    assert F.irfft(y).dtype == np.dtype(r)
    assert F.hfft(y).dtype == np.dtype(r)
    assert F.ihfft(x).dtype == np.dtype(c)


# ---- errors ------------------------------------------------------------------------------------

def test_errors_name_the_op():
    x = A(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"fft: invalid number of data points \(0\)"):
        F.fft(x, n=0)
    with pytest.raises(ValueError, match=r"ifft: norm must be 'backward', 'ortho' or 'forward'"):
        F.ifft(x, norm="unitary")
    with pytest.raises(ValueError, match=r"rfft: axis 2 is out of bounds for array of ndim 2"):
        F.rfft(x, axis=2)
    with pytest.raises(ValueError, match=r"fftn: duplicate axes 0"):
        F.fftn(x, axes=(0, 0))
    with pytest.raises(ValueError, match=r"fft2: s \(4,\) and axes \(0, 1\) must have the same"):
        F.fft2(x, s=(4,))
    with pytest.raises(TypeError, match=r"rfft: expected a real input, got complex64"):
        F.rfft(A(np.ones(4, np.complex64)))
    with pytest.raises(ValueError, match=r"fft: input must be at least 1-d"):
        F.fft(A(np.float32(1)))
    with pytest.raises(ValueError, match=r"irfft: invalid number of data points \(0\)"):
        F.irfft(A(np.ones(1, np.complex64)))
    with pytest.raises(TypeError, match=r"fft: n must be an int"):
        F.fft(x, n=2.5)
    with pytest.raises(ValueError, match=r"fftfreq: n must be >= 1"):
        F.fftfreq(0)


def test_primitive_checks_trailing_dims():
    x = A(np.ones((2, 5), np.complex64))
    with pytest.raises(ValueError, match=r"fft: FFT with fft_lengths \(4,\) needs trailing "
                                         r"operand dims \(4,\), got shape \(2, 5\)"):
        fft_bind(x, "FFT", (4,))
    with pytest.raises(ValueError, match=r"IRFFT with fft_lengths \(8,\) needs trailing operand "
                                         r"dims \(5,\)"):
        fft_bind(A(np.ones((2, 4), np.complex64)), "IRFFT", (8,))
    with pytest.raises(TypeError, match=r"RFFT needs a float32 or float64 operand"):
        fft_bind(x, "RFFT", (5,))
    with pytest.raises(ValueError, match=r"fft_type must be one of"):
        fft_bind(x, "DCT", (5,))


# ---- identities --------------------------------------------------------------------------------

@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_round_trips(norm):
    x = rnd((3, 7), np.complex128)
    y = F.ifft(F.fft(A(x), norm=norm), norm=norm)
    np.testing.assert_allclose(np.asarray(y), x, atol=1e-12)
    for n in (7, 8):
        r = rnd((2, n))
        back = F.irfft(F.rfft(A(r), norm=norm), n=n, norm=norm)
        np.testing.assert_allclose(np.asarray(back), r, atol=1e-12)
    back = F.ifftn(F.fftn(A(x), norm=norm), norm=norm)
    np.testing.assert_allclose(np.asarray(back), x, atol=1e-12)


def test_ortho_is_unitary():
    x = rnd((16,), np.complex128)
    y = np.asarray(F.fft(A(x), norm="ortho"))
    np.testing.assert_allclose(np.vdot(y, y).real, np.vdot(x, x).real, rtol=1e-12)


def test_hfft_ihfft_inverse_pair():
    x = rnd((9,))
    np.testing.assert_allclose(np.asarray(F.hfft(F.ihfft(A(x)), n=9)), x, atol=1e-12)


def test_frequencies_match_numpy():
    for n in (1, 4, 7):
        for d in (1.0, 0.25):
            got = F.fftfreq(n, d)
            assert got.dtype == np.float32
            np.testing.assert_allclose(np.asarray(got), np.fft.fftfreq(n, d), rtol=1e-6)
            np.testing.assert_allclose(np.asarray(F.rfftfreq(n, d=d, dtype=np.float64)),
                                       np.fft.rfftfreq(n, d), rtol=1e-15)
    got = F.fftfreq(4, A(np.float32(0.5)))
    np.testing.assert_allclose(np.asarray(got), np.fft.fftfreq(4, 0.5), rtol=1e-6)
    with pytest.raises(TypeError, match=r"fftfreq: dtype must be a floating dtype"):
        F.fftfreq(4, dtype=np.int32)


def test_shifts_are_inverse_and_0d_passes_through():
    x = np.arange(15).reshape(3, 5)
    y = F.fftshift(A(x))
    np.testing.assert_array_equal(np.asarray(y), np.fft.fftshift(x))
    np.testing.assert_array_equal(np.asarray(F.ifftshift(y)), x)
    np.testing.assert_array_equal(np.asarray(F.fftshift(A(x), axes=1)), np.fft.fftshift(x, 1))
    assert int(F.fftshift(A(np.int64(3)))) == 3


# ---- staging -----------------------------------------------------------------------------------

def test_staged_fft_moves_axes_with_transposes():
    x = rnd((4, 3), np.float32)

    def f(a):
        return F.rfft(a, n=6, axis=0, norm="ortho")

    prog = make_ir(f)(A(x))
    check_program(prog)
    names = [e.primitive.name for e in prog.eqns]
    assert names.count("fft") == 1 and "transpose" in names and "pad" in names
    out = eval_program(prog, prog.consts, A(x))[0]
    np.testing.assert_allclose(np.asarray(out), np.fft.rfft(x, n=6, axis=0, norm="ortho"),
                               rtol=1e-5, atol=1e-5)


# ---- hypothesis --------------------------------------------------------------------------------

@st.composite
def fftn_problem(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(nd))
    k = draw(st.integers(1, nd))
    axes = tuple(draw(st.permutations(range(nd)))[:k])
    s = tuple(draw(st.integers(1, 6)) for _ in range(k)) if draw(st.booleans()) else None
    norm = draw(st.sampled_from([None, "ortho", "forward"]))
    kind = draw(st.sampled_from(["fftn", "ifftn", "rfftn", "irfftn"]))
    return shape, axes, s, norm, kind


@given(fftn_problem())
def test_fftn_family_matches_numpy(problem):
    shape, axes, s, norm, kind = problem
    dt = np.float64 if kind == "rfftn" else np.complex128
    x = rnd(shape, dt)
    if kind == "irfftn" and s is None and shape[axes[-1]] == 1:
        s = tuple(shape[a] for a in axes[:-1]) + (2,)
    want = getattr(np.fft, kind)(x, s=s, axes=axes, norm=norm)
    got = getattr(F, kind)(A(x), s=s, axes=axes, norm=norm)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-10)
