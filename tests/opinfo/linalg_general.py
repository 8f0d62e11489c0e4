"""OpInfos of eig / eigvals, lstsq, cond, tensorsolve / tensorinv (src/linalg/general_eigen.py,
least_squares.py, norms.py, tensor_equations.py), so that the generated tests check them
against NumPy eager and staged, their derivatives by check_grads (order 2, both modes) and
vmap against a loop.

References are NumPy's, brought to Starling's documented conventions: eig's outputs complex and
its eigenvectors in the gauge "unit norm, entry of largest modulus real positive"; lstsq batched
by a loop over NumPy's 2-d routine. The behaviours that differ between eager and traced code by
design (lstsq's residuals of a rank-deficient tall matrix) are tested in
tests/test_linalg_eig_lstsq.py instead.
"""
import numpy as np

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.linalg import FLOAT_C, TOLS, _phase_of_max, arr, f32ref, mat

L = "linalg."
WITH_I64 = FLOAT_C + (np.int64,)
TOLS = dict(TOLS, int64=TOLS["float32"])   # integers are computed in float32


def _complex_of(dt):
    return np.dtype(np.complex128) if np.dtype(dt) in (np.float64, np.complex128) else \
        np.dtype(np.complex64)


def _eig(a):
    """NumPy's eig with complex outputs and each eigenvector's largest entry real positive."""
    w, v = np.linalg.eig(a)
    cdt = _complex_of(a.dtype)
    w, v = w.astype(cdt), v.astype(cdt)
    if v.size:
        v = v * np.conj(_phase_of_max(v, -2))
    return w, v


def _eigvals(a):
    return np.linalg.eigvals(a).astype(_complex_of(a.dtype))


def _rotation(dt):
    c, s = np.cos(0.7), np.sin(0.7)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 2.0]]).astype(dt)


def eig_samples(rng, dt):
    out = [Sample((mat(rng, s, dt, k),), name=f"[{s} {k}]")
           for s, k in [((3, 3), "general"), ((2, 4, 4), "general"), ((1, 1), "general"),
                        ((2, 1, 3, 3), "dd"), ((3, 3), "singular"), ((0, 3, 3), "general"),
                        ((0, 0), "general")]]
    if np.dtype(dt).kind == "f":
        out.append(Sample((_rotation(dt),), name="[rotation]"))
    return out


def eig_grad_samples(rng, dt):
    """Matrices with well-separated eigenvalues (eigenvectors need distinct ones); a real one
    with a complex-conjugate pair among them."""
    out = []
    for s in [(3, 3), (2, 4, 4)]:
        x = mat(rng, s, dt) + np.diag(np.arange(s[-1]) * 1.5).astype(dt)
        out.append(Sample((x,), name=f"[{s} separated]"))
    if np.dtype(dt).kind == "f":
        out.append(Sample((_rotation(dt) + 0.1 * mat(rng, (3, 3), dt),), name="[pair]"))
    return out


LSTSQ_CASES = [((5, 3), (5,)), ((5, 3), (5, 2)), ((3, 5), (3, 2)), ((3, 3), (3,)),
               ((2, 5, 3), (2, 5, 1)), ((5, 3), (4, 5, 2)), ((2, 1, 4, 2), (3, 4, 2)),
               ((1, 1), (1,)), ((4, 2), (4, 0))]


def lstsq_samples(rng, dt):
    out = [Sample((mat(rng, a, dt), arr(rng, b, dt)), name=f"[{a},{b}]")
           for a, b in LSTSQ_CASES]
    # rank-deficient / empty where the residuals are empty in every mode (m <= n), and rcond
    out.append(Sample((mat(rng, (3, 4), dt, "rank1"), arr(rng, (3, 2), dt)), name="[wide rank1]"))
    out.append(Sample((mat(rng, (2, 3), dt, "zero"), arr(rng, (2,), dt)), name="[wide zero]"))
    out.append(Sample((mat(rng, (0, 3), dt), arr(rng, (0, 2), dt)), name="[m=0]"))
    out.append(Sample((mat(rng, (4, 4), dt, "rank1"), arr(rng, (4,), dt)), {"rcond": 1e-3},
                      name="[square rank1 rcond]"))
    return out


def lstsq_grad_samples(rng, dt):
    return [s for s in lstsq_samples(rng, dt)[:7]]


def _lstsq(a, b, rcond=None):
    """np.linalg.lstsq (2-d only) over the broadcast batch dims, with Starling's documented
    conventions: int64 rank; residuals empty when any matrix of the stack has rank < n."""
    m, n = a.shape[-2:]
    vector = b.ndim == 1
    bb = b[:, None] if vector else b
    batch = np.broadcast_shapes(a.shape[:-2], bb.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    bb = np.broadcast_to(bb, batch + bb.shape[-2:])
    if rcond is None:
        rcond = max(m, n) * np.finfo(a.dtype).eps
    k = bb.shape[-1]
    rdt = np.finfo(a.dtype).dtype
    x = np.zeros(batch + (n, k), a.dtype)
    res = np.zeros(batch + (k,), rdt)
    rank = np.zeros(batch, np.int64)
    s = np.zeros(batch + (min(m, n),), rdt)
    full = m > n
    for i in np.ndindex(*batch):
        xi, ri, rank[i], s[i] = np.linalg.lstsq(a[i], bb[i], rcond=rcond)
        x[i] = xi
        if ri.size:
            res[i] = ri
        else:
            full = full and k == 0
    if not full:
        res = np.zeros(batch + (0,), rdt)
    if vector:
        x = x[..., 0]
    return x, res, rank, s


def cond_samples(rng, dt):
    out = [Sample((mat(rng, (3, 3), dt, "dd"),), {"p": p}, name=f"[p={p}]")
           for p in (None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc")]
    out += [Sample((mat(rng, (2, 4, 4), dt),), name="[batch]"),
            Sample((mat(rng, (3, 5), dt),), name="[wide]"),
            Sample((mat(rng, (5, 3), dt),), {"p": -2}, name="[tall -2]"),
            Sample((mat(rng, (2, 3, 3), dt),), {"p": 1}, name="[batch 1]"),
            Sample((mat(rng, (4, 4), dt, "zero"),), name="[zero]"),
            Sample((mat(rng, (4, 4), dt, "zero"),), {"p": "fro"}, name="[zero fro]"),
            Sample((mat(rng, (0, 2, 2), dt),), {"p": 1}, name="[empty batch]")]
    if np.dtype(dt) in (np.float64, np.complex128):   # NumPy computes 32-bit input in 64 bits
        out.append(Sample((mat(rng, (5, 5), dt, "illcond"),), {"p": 1}, name="[hilbert5 1]"))
    return out


def cond_grad_samples(rng, dt):
    return [s for s in cond_samples(rng, dt) if "zero" not in s.name and "empty" not in s.name
            and "hilbert" not in s.name][:12]


def tensorsolve_samples(rng, dt):
    cases = [((6, 2, 3), (6,), None), ((2, 3, 6), (6,), (0, 1)), ((2, 3, 3, 2), (2, 3), None),
             ((4, 2, 2), (4,), (-2, -1)), ((1, 1), (1,), None)]
    out = []
    for a, b, axes in cases:
        kw = {} if axes is None else {"axes": axes}
        rows = int(np.prod(b))   # without axes: a diagonally dominant matrix, reshaped
        x = mat(rng, a, dt) if axes else mat(rng, (rows, rows), dt, "dd").reshape(a)
        out.append(Sample((x, arr(rng, b, dt)), kw, name=f"[{a},{b},{axes}]"))
    return out


def tensorinv_samples(rng, dt):
    out = []
    for shape, ind in [((4, 6, 8, 3), 2), ((24, 8, 3), 1), ((2, 3, 6), 2), ((1, 1), 1)]:
        rows = int(np.prod(shape[:ind]))
        x = mat(rng, (rows, rows), dt, "dd").reshape(shape)
        out.append(Sample((x,), {"ind": ind}, name=f"[{shape} ind={ind}]"))
    return out


def _np(name):
    return getattr(np.linalg, name)


def _tensorsolve(a, b, axes=None):
    """np.linalg.tensorsolve, with negative axes (a Starling extension) made positive."""
    if axes is not None:
        axes = tuple(ax % a.ndim for ax in axes)
    return np.linalg.tensorsolve(a, b, axes=axes)


register(
    OpInfo(L + "eig", f32ref(_eig), WITH_I64, eig_samples, tols=TOLS, rtol=1e-9, atol=1e-9,
           grad_samples=eig_grad_samples),
    OpInfo(L + "eigvals", f32ref(_eigvals), WITH_I64, eig_samples, tols=TOLS, rtol=1e-9,
           atol=1e-9, grad_samples=eig_grad_samples),
    OpInfo(L + "lstsq", f32ref(_lstsq), WITH_I64, lstsq_samples, tols=TOLS, rtol=1e-9, atol=1e-9,
           nin=2, grad_samples=lstsq_grad_samples),
    OpInfo(L + "cond", f32ref(_np("cond")), WITH_I64, cond_samples, tols=TOLS, rtol=1e-9,
           atol=1e-9, grad_samples=cond_grad_samples),
    OpInfo(L + "tensorsolve", f32ref(_tensorsolve), WITH_I64, tensorsolve_samples,
           tols=TOLS, rtol=1e-9, atol=1e-9, nin=2),
    OpInfo(L + "tensorinv", f32ref(_np("tensorinv")), WITH_I64, tensorinv_samples, tols=TOLS,
           rtol=1e-9, atol=1e-9),
)
