"""OpInfos of starling.numpy.linalg (src/linalg/ and src/arrays/numpy/linalg.py).

References are NumPy's LAPACK routines. Starling computes integer input in float32 and
float16 / bfloat16 in float32 rounded back (documented), so the references do the same: see
``f32ref``. Hard inputs: empty batches and 0x0 matrices, 1x1 matrices, singular and
ill-conditioned matrices (det / slogdet / pinv / matrix_rank), rank-deficient matrices.
"""
import ml_dtypes
import numpy as np

from tests.opinfo import OpInfo, Sample, register

LOW_SET = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}
F32 = np.dtype(np.float32)
FLOAT_C = (np.float32, np.float64, np.complex64, np.complex128)
WITH_INT = FLOAT_C + (np.float16, ml_dtypes.bfloat16, np.int32, np.int64)
TOLS = {"float32": (1e-4, 1e-4), "complex64": (1e-4, 1e-4), "float16": (1e-2, 1e-2),
        "bfloat16": (5e-2, 5e-2)}


def f32ref(fn):
    """``fn`` on float32 copies of bool/int/float16/bfloat16 inputs; float32 results of
    float16/bfloat16 inputs are rounded back (Starling's documented policy)."""
    def ref(*args, **kwargs):
        dt = next((a.dtype for a in args if isinstance(a, np.ndarray)), None)
        if dt is None or (dt.kind not in "biu" and dt not in LOW_SET):
            return fn(*args, **kwargs)
        args = [a.astype(F32) if isinstance(a, np.ndarray) else a for a in args]
        out = fn(*args, **kwargs)

        def back(o):
            o = np.asarray(o)
            return o.astype(dt) if dt in LOW_SET and o.dtype == F32 else o
        return tuple(back(o) for o in out) if isinstance(out, tuple) else back(out)
    return ref


def mat(rng, shape, dt, kind="general"):
    """Matrices of ``shape`` (``(*batch, m, n)``) and dtype ``dt`` of the given kind."""
    dt = np.dtype(dt)
    *batch, m, n = shape
    if dt.kind in "iub":
        x = rng.integers(-3, 4, size=shape).astype(np.float64)
    else:
        x = rng.uniform(-1, 1, size=shape)
        if dt.kind == "c":
            x = x + 1j * rng.uniform(-1, 1, size=shape)
    if kind in ("dd", "spd") and m and n:
        if kind == "spd":
            x = x @ np.conj(np.swapaxes(x, -1, -2))
        x = x + (2 * n + 2) * np.eye(m, n)
    elif kind == "singular" and m >= 2:
        x[..., -1, :] = x[..., 0, :]
    elif kind == "illcond":
        i = np.arange(m)[:, None]
        j = np.arange(n)[None, :]
        x = np.broadcast_to(1.0 / (i + j + 1), shape).copy()  # Hilbert matrix
    elif kind == "zero":
        x = np.zeros(shape)
    elif kind == "rank1" and m and n:
        x = np.einsum("...i,...j->...ij", x[..., :, 0], x[..., 0, :])
    return x.astype(dt)


def arr(rng, shape, dt, kind="general"):
    """Like ``mat`` for any ndim (0-d and 1-d shapes are reshaped from a matrix)."""
    shape = tuple(shape)
    if len(shape) >= 2:
        return mat(rng, shape, dt, kind)
    return mat(rng, (1,) * (2 - len(shape)) + shape, dt, kind).reshape(shape)


SQUARE = [((3, 3), "general"), ((2, 4, 4), "general"), ((1, 1), "general"), ((0, 3, 3), "general"),
          ((0, 0), "general"), ((2, 0, 0), "general"), ((3, 3), "singular"),
          ((4, 4), "zero"), ((2, 1, 2, 2), "dd")]
INVERTIBLE = [((3, 3), "dd"), ((2, 4, 4), "dd"), ((1, 1), "dd"), ((0, 3, 3), "dd"),
              ((0, 0), "dd"), ((2, 1, 2, 2), "dd"), ((5, 5), "general")]


def _square_samples(cases, *, illcond=True):
    def samples(rng, dt):
        out = [Sample((mat(rng, s, dt, k),), name=f"[{s} {k}]") for s, k in cases]
        if illcond and np.dtype(dt).kind in "fc" and np.dtype(dt) not in LOW_SET:
            out.append(Sample((mat(rng, (5, 5), dt, "illcond"),), name="[hilbert5]"))
        return out
    return samples


def solve_samples(rng, dt):
    cases = [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3, 1)),
             ((3, 3), (4, 3, 2)), ((1, 3, 3), (2, 3, 2)), ((0, 2, 2), (0, 2, 1)),
             ((2, 2), (2, 0)), ((1, 1), (1,)), ((2, 1, 2, 2), (3, 2, 4))]
    return [Sample((mat(rng, a, dt, "dd"), arr(rng, b, dt)), name=f"[{a},{b}]") for a, b in cases]


def cholesky_samples(rng, dt):
    """Positive-definite stacks of several sizes (the vmap test scales them, which keeps them
    positive definite), then matrices whose other triangle holds garbage: upper=True must read
    the upper triangle and the default the lower one."""
    out = [Sample((mat(rng, s, dt, "spd"),), kw, name=f"[{s} {kw}]")
           for s, kw in [((3, 3), {}), ((2, 4, 4), {}), ((1, 1), {}), ((0, 2, 2), {}),
                         ((2, 3, 3), {"upper": True}), ((1, 2, 1, 1), {})]]
    upper = mat(rng, (3, 3), dt, "spd")
    upper[..., 2, 0] = upper[..., 1, 0] = 50  # not Hermitian: upper=True reads the upper triangle
    low = mat(rng, (3, 3), dt, "spd")
    low[..., 0, 2] = 50                       # and the default reads the lower one
    out.append(Sample((upper,), {"upper": True}, name="[upper]"))
    out.append(Sample((low,), name="[lower]"))
    return out


def cholesky_grad_samples(rng, dt):
    """The Hermitian samples: derivatives are taken along Hermitian directions (grad_input),
    where the garbage-triangle samples are not positive definite."""
    return [s for s in cholesky_samples(rng, dt) if s.name not in ("[upper]", "[lower]")]


RECT = [(3, 3), (4, 2), (2, 4), (2, 3, 2), (1, 1), (0, 3, 2), (2, 0, 3), (3, 0)]


def qr_samples(rng, dt):
    out = []
    for s in RECT:
        for mode in ("reduced", "complete"):
            out.append(Sample((mat(rng, s, dt),), {"mode": mode}, name=f"[{s} {mode}]"))
    out.append(Sample((mat(rng, (4, 3), dt),), {"mode": "r"}, name="[r]"))
    return out


def svd_samples(rng, dt):
    out = [Sample((mat(rng, s, dt),), {"full_matrices": fm}, name=f"[{s} {fm}]")
           for s in [(3, 3), (4, 2), (2, 3, 4), (1, 1)] for fm in (True, False)]
    out.append(Sample((mat(rng, (0, 3, 2), dt),), {"full_matrices": False}, name="[empty]"))
    out.append(Sample((mat(rng, (4, 4), dt, "rank1"),), {"compute_uv": False}, name="[rank1]"))
    return out


def svdvals_samples(rng, dt):
    out = [Sample((mat(rng, s, dt),), name=f"[{s}]") for s in RECT]
    out.append(Sample((mat(rng, (4, 4), dt, "rank1"),), name="[rank1]"))
    return out


def eigh_samples(rng, dt):
    out = [Sample((mat(rng, s, dt, "spd"),), name=f"[{s}]")
           for s in [(3, 3), (2, 4, 4), (1, 1), (0, 2, 2), (0, 0)]]
    out.append(Sample((mat(rng, (3, 3), dt, "spd"),), {"UPLO": "U"}, name="[U]"))
    return out


def pinv_samples(rng, dt):
    out = [Sample((mat(rng, s, dt),), name=f"[{s}]") for s in [(3, 3), (4, 2), (2, 3, 4), (1, 1)]]
    out.append(Sample((mat(rng, (4, 4), dt, "rank1"),), {"rtol": 1e-3}, name="[rank1]"))
    out.append(Sample((mat(rng, (3, 3), dt, "zero"),), name="[zero]"))
    out.append(Sample((mat(rng, (3, 3), dt, "spd"),), {"hermitian": True}, name="[herm]"))
    out.append(Sample((mat(rng, (0, 3), dt),), name="[empty]"))
    return out


def _matrix_rank(a, *args, **kwargs):
    """np.linalg.matrix_rank, with rank 0 for a matrix without rows or columns (NumPy < 2.4
    raises there: its reference would make the suite depend on the NumPy version)."""
    if 0 in np.shape(a)[-2:]:
        return np.zeros(np.shape(a)[:-2], np.int64)[()]
    return np.linalg.matrix_rank(a, *args, **kwargs)


def rank_samples(rng, dt):
    out = [Sample((mat(rng, s, dt, k),), name=f"[{s} {k}]")
           for s, k in [((3, 3), "general"), ((4, 4), "rank1"), ((3, 3), "zero"),
                        ((2, 4, 3), "general"), ((3, 3), "singular"), ((1, 1), "general"),
                        ((0, 3), "general")]]
    out.append(Sample((mat(rng, (4, 4), dt, "rank1"),), {"rtol": 1e-2}, name="[rtol]"))
    out.append(Sample((mat(rng, (3, 3), dt, "spd"),), {"hermitian": True}, name="[herm]"))
    return out


def power_samples(rng, dt):
    ints = np.dtype(dt).kind in "iu"
    ns = (0, 1, 2, 3, 5) if ints else (0, 1, 2, 3, 5, -1, -2)
    out = [Sample((mat(rng, (3, 3), dt, "dd" if n < 0 else "general"), n), name=f"[n={n}]")
           for n in ns]
    out.append(Sample((mat(rng, (2, 2, 2), dt), 3), name="[batch]"))
    out.append(Sample((mat(rng, (0, 2, 2), dt), 2), name="[empty]"))
    return out


NORM_CASES = [((5,), {}), ((3, 4), {}), ((2, 3, 4), {}), ((0,), {}), ((5,), {"ord": 1}),
              ((5,), {"ord": np.inf}), ((5,), {"ord": -np.inf}), ((5,), {"ord": 0}),
              ((5,), {"ord": 3}), ((5,), {"ord": -1.5}), ((3, 4), {"ord": "fro"}),
              ((3, 4), {"ord": "nuc"}), ((3, 4), {"ord": 1}), ((3, 4), {"ord": -1}),
              ((3, 4), {"ord": 2}), ((3, 4), {"ord": -2}), ((3, 4), {"ord": np.inf}),
              ((3, 4), {"ord": -np.inf}), ((2, 3, 4), {"axis": 1}),
              ((2, 3, 4), {"axis": (2, 0), "ord": 1}), ((2, 3, 4), {"axis": (-1, -2), "ord": 2}),
              ((2, 3, 4), {"axis": -1, "keepdims": True}),
              ((2, 3, 4), {"axis": (0, 1), "keepdims": True, "ord": "nuc"}),
              ((2, 3, 4), {"axis": (0, 2), "keepdims": True, "ord": np.inf}),
              ((3, 4), {"keepdims": True}), ((0, 3), {"axis": 1})]


def norm_samples(rng, dt):
    return [Sample((arr(rng, s, dt),), kw, name=f"[{s} {kw}]") for s, kw in NORM_CASES]


def vector_norm_samples(rng, dt):
    cases = [((5,), {}), ((3, 4), {}), ((3, 4), {"axis": 0}), ((2, 3, 4), {"axis": (0, 2)}),
             ((3, 4), {"ord": 1, "keepdims": True}), ((3, 4), {"ord": np.inf, "axis": -1}),
             ((3, 4), {"ord": 0}), ((3, 4), {"ord": 0.5}), ((0, 3), {"axis": 0}),
             ((3, 4), {"ord": -np.inf}), ((2, 3, 4), {"keepdims": True})]
    return [Sample((arr(rng, s, dt),), kw, name=f"[{s} {kw}]") for s, kw in cases]


def matrix_norm_samples(rng, dt):
    cases = [((3, 4), {}), ((2, 3, 4), {"ord": "nuc"}), ((3, 4), {"ord": 1, "keepdims": True}),
             ((2, 3, 4), {"ord": -1}), ((3, 4), {"ord": 2}), ((2, 3, 4), {"ord": -2}),
             ((3, 4), {"ord": np.inf}), ((3, 4), {"ord": -np.inf, "keepdims": True}),
             ((1, 1), {}), ((0, 3, 4), {"ord": "fro"})]
    return [Sample((mat(rng, s, dt),), kw, name=f"[{s} {kw}]") for s, kw in cases]


def trace_samples(rng, dt):
    cases = [((3, 3), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), 0), ((3, 3), 5), ((0, 2, 2), 0),
             ((1, 1), 0), ((2, 0), 0)]
    return [Sample((mat(rng, s, dt),), {"offset": k}, name=f"[{s} {k}]") for s, k in cases]


def outer_samples(rng, dt):
    return [Sample((arr(rng, (a,), dt), arr(rng, (b,), dt)), name=f"[{a},{b}]")
            for a, b in [(3, 4), (0, 2), (1, 1)]]


def multi_dot_samples(rng, dt):
    cases = [[(2, 3), (3, 4), (4, 5)], [(3,), (3, 4), (4, 2), (2,)], [(5,), (5, 2)],
             [(2, 6), (6, 1), (1, 7), (7, 3)], [(2, 0), (0, 3)]]
    return [Sample(([arr(rng, s, dt) for s in c],),
                   name=f"[{c}]") for c in cases]


def _np(name):
    return getattr(np.linalg, name)


def _qr(a, mode="reduced"):
    return np.linalg.qr(a, mode=mode)


def _phase_of_max(x, axis):
    """Unit phases that make the entry of largest modulus along ``axis`` real positive."""
    i = np.expand_dims(np.argmax(np.abs(x), axis=axis), axis)
    piv = np.take_along_axis(x, i, axis=axis)
    return piv / np.abs(piv)


def _svd(a, full_matrices=True, compute_uv=True):
    """NumPy's SVD in Starling's gauge: each right singular vector (row of Vh) has its entry
    of largest modulus real positive, U's columns turned to match."""
    out = np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    if not compute_uv or out[1].size == 0:
        return out
    u, s, vh = out
    k = s.shape[-1]
    p = _phase_of_max(vh[..., :k, :], -1)
    vh, u = vh.copy(), u.copy()
    vh[..., :k, :] *= np.conj(p)
    u[..., :, :k] *= np.swapaxes(p, -1, -2)
    return u, s, vh


def _eigh(a, UPLO="L"):  # noqa: N803
    """NumPy's eigh in Starling's gauge: eigenvectors have their entry of largest modulus
    real positive."""
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    if v.size:
        v = v * np.conj(_phase_of_max(v, -2))
    return w, v


def _finite(x):
    return np.all(np.isfinite(np.asarray(x, dtype=np.complex128)))


def _nonsingular_first(samples, ref, *, keep_singular):
    """Grad samples as the default (non-empty, finite inputs and outputs, at most 4), without
    the singular ones (names "singular", "zero") unless ``keep_singular(dtype)``."""
    def pick(rng, dt):
        out = []
        for x in samples(rng, dt):
            arrays = [a for a in x.args if isinstance(a, np.ndarray)]
            if not all(a.size and _finite(a) for a in arrays):
                continue
            if not keep_singular(dt) and ("singular" in x.name or "zero" in x.name):
                continue
            res = ref(*x.args, **x.kwargs)
            if all(_finite(r) for r in (res if isinstance(res, tuple) else (res,))):
                out.append(x)
        return out[:4]
    return pick


def _differentiable(samples, bad):
    """Grad samples: those for which ``bad(sample)`` is False, non-empty, at most 5."""
    def pick(rng, dt):
        return [x for x in samples(rng, dt) if not bad(x)
                and all(a.size for a in x.args if isinstance(a, np.ndarray))][:5]
    return pick


def _tall_complete_qr(x):
    m, n = x.args[0].shape[-2:]
    return x.kwargs.get("mode") == "complete" and m > n


def _full_nonsquare_or_deficient_svd(x):
    m, n = x.args[0].shape[-2:]
    return (x.kwargs.get("full_matrices", True) and x.kwargs.get("compute_uv", True) and m != n) \
        or "rank1" in x.name


def _pinv(a, rtol=None, hermitian=False):
    m, n = a.shape[-2:]
    if rtol is None:
        rtol = max(m, n) * np.finfo(a.dtype).eps
    return np.linalg.pinv(a, rtol=rtol, hermitian=hermitian)


def _matrix_power(a, n):
    return np.linalg.matrix_power(a, n)


def _multi_dot(arrays):
    return np.linalg.multi_dot(arrays)


def _real_out(dt, sample):
    dt = np.dtype(dt)
    if dt.kind in "biu":
        return F32
    return {np.dtype(np.complex64): F32, np.dtype(np.complex128): np.dtype(np.float64)}.get(dt, dt)


def _same_or_f32(dt, sample):
    dt = np.dtype(dt)
    return F32 if dt.kind in "biu" else dt


def _int_power_dtype(dt, sample):
    n = sample.args[1]
    dt = np.dtype(dt)
    return F32 if (dt.kind in "iu" and n < 0) else dt


def _trace_dtype(dt, sample):
    dt = np.dtype(dt)
    if dt.kind == "i" or dt.kind == "b":
        return np.dtype(np.int64)
    if dt.kind == "u":
        return np.dtype(np.uint64)
    return dt


L = "linalg."
def _hermitian_part(x):
    """``(x + x^H) / 2`` of a Starling array: the direction the Hermitian-input ops differentiate
    along (their gradients are Hermitian, as in JAX / PyTorch)."""
    import starling.numpy as snp
    return (x + snp.conj(snp.matrix_transpose(x))) * 0.5


register(
    # det: real rank n-1 matrices get exact second derivatives (the SVD branch of the
    # adjugate); complex ones only first derivatives (documented in
    # src/linalg/determinant.py, adjugate).
    OpInfo(L + "det", f32ref(_np("det")), WITH_INT, _square_samples(SQUARE), tols=TOLS,
           grad_samples=_nonsingular_first(_square_samples(SQUARE), _np("det"),
                                           keep_singular=lambda dt: dt.kind != "c")),
    # slogdet is not differentiable at a singular matrix (logabsdet -> -inf).
    OpInfo(L + "slogdet", f32ref(_np("slogdet")), WITH_INT, _square_samples(SQUARE), tols=TOLS,
           grad_samples=_nonsingular_first(_square_samples(SQUARE), _np("slogdet"),
                                           keep_singular=lambda dt: False)),
    OpInfo(L + "inv", f32ref(_np("inv")), WITH_INT, _square_samples(INVERTIBLE), tols=TOLS),
    OpInfo(L + "solve", f32ref(_np("solve")), WITH_INT, solve_samples, tols=TOLS, nin=2),
    OpInfo(L + "cholesky", f32ref(_np("cholesky")), WITH_INT, cholesky_samples, tols=TOLS,
           grad_samples=cholesky_grad_samples, vmap_variants="scale",
           grad_input=_hermitian_part),
    # Derivatives need unique outputs: no complete Q / full U, Vh of a non-square input, no
    # repeated (zero) singular values.
    OpInfo(L + "qr", f32ref(_qr), FLOAT_C + (np.float16,), qr_samples, tols=TOLS,
           grad_samples=_differentiable(qr_samples, _tall_complete_qr)),
    OpInfo(L + "svd", f32ref(_svd), FLOAT_C + (np.int64,), svd_samples, tols=TOLS,
           grad_samples=_differentiable(svd_samples, _full_nonsquare_or_deficient_svd)),
    OpInfo(L + "svdvals", f32ref(_np("svdvals")), WITH_INT, svdvals_samples, tols=TOLS),
    OpInfo(L + "eigh", f32ref(_eigh), FLOAT_C + (np.int64,), eigh_samples, tols=TOLS,
           grad_input=_hermitian_part),
    OpInfo(L + "eigvalsh", f32ref(_np("eigvalsh")), WITH_INT, eigh_samples, tols=TOLS,
           grad_input=_hermitian_part),
    OpInfo(L + "pinv", f32ref(_pinv), FLOAT_C + (np.int64,), pinv_samples, tols=TOLS),
    OpInfo(L + "matrix_rank", f32ref(_matrix_rank), FLOAT_C + (np.int64,), rank_samples,
           differentiable=False),
    OpInfo(L + "matrix_power", _matrix_power, FLOAT_C + (np.int32, np.int64), power_samples,
           tols=TOLS, expected_dtype=_int_power_dtype, check_dtype=True),
    OpInfo(L + "norm", f32ref(_np("norm")), WITH_INT, norm_samples, tols=TOLS,
           expected_dtype=_real_out),
    OpInfo(L + "vector_norm", f32ref(_np("vector_norm")), WITH_INT, vector_norm_samples,
           tols=TOLS, expected_dtype=_real_out),
    OpInfo(L + "matrix_norm", f32ref(_np("matrix_norm")), WITH_INT, matrix_norm_samples,
           tols=TOLS, expected_dtype=_real_out),
    OpInfo(L + "trace", _np("trace"), FLOAT_C + (np.int8, np.uint8, np.int64), trace_samples,
           tols=TOLS, expected_dtype=_trace_dtype),
    OpInfo(L + "diagonal", _np("diagonal"), FLOAT_C + (np.int8, np.bool_), trace_samples),
    OpInfo(L + "outer", _np("outer"), FLOAT_C + (np.int32,), outer_samples, nin=2),
    OpInfo(L + "multi_dot", _multi_dot, FLOAT_C + (np.int64,), multi_dot_samples, tols=TOLS),
)
