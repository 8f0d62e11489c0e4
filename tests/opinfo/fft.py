"""OpInfos of starling.numpy.fft (src/arrays/numpy/fft.py over the fft primitive).

References are ``numpy.fft`` (pocketfft). Starling keeps single precision: float32 / complex64 /
integer / float16 input gives complex64 (NumPy gives complex128 for integers), so
``expected_dtype`` says which. Inputs are finite except one NaN sample (a NaN spreads over its
whole transform in both libraries; where an inf turns into NaN depends on the butterfly order).
"""
import numpy as np

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import rand

C = (np.complex64, np.complex128)
R = (np.float32, np.float64)
DTYPES = C + R + (np.float16, np.int32)
REAL_IN = R + (np.float16, np.int64)
TOLS = {"float32": (1e-4, 1e-4), "complex64": (1e-4, 1e-4), "float16": (1e-3, 1e-3),
        "int32": (1e-4, 1e-4), "int64": (1e-4, 1e-4)}
WIDE = {np.dtype(np.float64), np.dtype(np.complex128)}


def _complex_out(dt, sample):
    return np.dtype(np.complex128 if np.dtype(dt) in WIDE else np.complex64)


def _real_out(dt, sample):
    return np.dtype(np.float64 if np.dtype(dt) in WIDE else np.float32)


def _arr(rng, shape, dt):
    return rand(rng, shape, dt, special=False)


def _with_nan(rng, shape, dt):
    x = _arr(rng, shape, dt)
    if np.dtype(dt).kind in "fc":
        x.reshape(-1)[1] = np.nan
    return x


def one_axis_samples(rng, dt, *, irfft=False):
    cases = [((8,), {}), ((5,), {}), ((3, 4), {"axis": 0}), ((2, 3, 4), {}),
             ((2, 3, 4), {"n": 6}), ((2, 3, 4), {"n": 3, "axis": 1}), ((7,), {"norm": "ortho"}),
             ((6,), {"norm": "forward"}), ((6,), {"norm": "backward", "n": 9}), ((0, 4), {}),
             ((3, 5), {"axis": -2, "norm": "ortho", "n": 4})]
    # A length-1 axis is the smallest transform; irfft of it needs an explicit n (2 * (1 - 1)
    # points is an error).
    cases += [((1,), {"n": 1}), ((4, 1), {"axis": -1, "n": 2})] if irfft else \
        [((1,), {}), ((4, 1), {"axis": -1})]
    out = [Sample((_arr(rng, s, dt),), kw, name=f"[{s} {kw}]") for s, kw in cases]
    if irfft:
        out.append(Sample((_arr(rng, (2, 5), dt),), {"n": 9}, name="[odd n]"))
        out.append(Sample((_arr(rng, (2,), dt),), {}, name="[len 2]"))
    else:
        out.append(Sample((_with_nan(rng, (2, 6), dt),), {}, name="[nan]"))
    return out


def n_axes_samples(rng, dt, *, two=False, irfft=False):
    if two:
        cases = [((4, 6), {}), ((2, 3, 4), {}), ((3, 4), {"s": (5, 2)}),
                 ((2, 3, 4), {"axes": (0, 2)}), ((3, 4), {"norm": "ortho"}),
                 ((3, 4), {"axes": (1, 0), "norm": "forward"}), ((0, 3, 4), {}),
                 ((1, 1), {"s": (1, 1)} if irfft else {})]
    else:
        cases = [((4, 6), {}), ((2, 3, 4), {}), ((2, 3, 4), {"axes": (0, 2)}),
                 ((2, 3, 4), {"s": (3, 5)}), ((2, 3, 4), {"s": (2, -1), "axes": (2, 0)}),
                 ((5,), {"norm": "ortho"}), ((2, 3, 4), {"axes": (-1,), "norm": "forward"}),
                 ((0, 3, 4), {"axes": (1, 2)}), ((3, 4), {"axes": (1, 0), "s": (6, 2)})]
    out = [Sample((_arr(rng, s, dt),), kw, name=f"[{s} {kw}]") for s, kw in cases]
    if irfft:
        out.append(Sample((_arr(rng, (3, 5), dt),), {"s": (3, 9)}, name="[odd]"))
    return out


def shift_samples(rng, dt):
    cases = [((5,), {}), ((4,), {}), ((3, 4), {}), ((3, 4), {"axes": 0}),
             ((2, 3, 5), {"axes": (0, -1)}), ((0, 3), {}), ((1,), {})]
    return [Sample((_arr(rng, s, dt),), kw, name=f"[{s} {kw}]") for s, kw in cases]


def _same(dt, sample):
    return np.dtype(dt)


def _ref(name):
    return getattr(np.fft, name)


def _mk(name, dtypes, samples, out):
    return OpInfo("fft." + name, _ref(name), dtypes, samples, tols=TOLS, expected_dtype=out)


register(
    _mk("fft", DTYPES, one_axis_samples, _complex_out),
    _mk("ifft", DTYPES, one_axis_samples, _complex_out),
    _mk("rfft", REAL_IN, one_axis_samples, _complex_out),
    _mk("irfft", C, lambda r, d: one_axis_samples(r, d, irfft=True), _real_out),
    _mk("hfft", C, lambda r, d: one_axis_samples(r, d, irfft=True), _real_out),
    _mk("ihfft", REAL_IN, one_axis_samples, _complex_out),
    _mk("fftn", DTYPES, n_axes_samples, _complex_out),
    _mk("ifftn", DTYPES, n_axes_samples, _complex_out),
    _mk("rfftn", REAL_IN, n_axes_samples, _complex_out),
    _mk("irfftn", C, lambda r, d: n_axes_samples(r, d, irfft=True), _real_out),
    _mk("fft2", DTYPES, lambda r, d: n_axes_samples(r, d, two=True), _complex_out),
    _mk("ifft2", DTYPES, lambda r, d: n_axes_samples(r, d, two=True), _complex_out),
    _mk("rfft2", REAL_IN, lambda r, d: n_axes_samples(r, d, two=True), _complex_out),
    _mk("irfft2", C, lambda r, d: n_axes_samples(r, d, two=True, irfft=True), _real_out),
    _mk("fftshift", DTYPES + (np.bool_, np.int8), shift_samples, _same),
    _mk("ifftshift", DTYPES + (np.bool_, np.int8), shift_samples, _same),
)
