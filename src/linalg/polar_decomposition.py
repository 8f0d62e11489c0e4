"""The polar decomposition ``a = U H``: the ``polar`` primitive (QDWH) with its rules."""
from __future__ import annotations

import numpy as np

from ..core.ad_util import Zero
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ._common import (
    _check_inexact, _low_precision, _shape_str, as_inexact, batch_to_front, check_matrix, mH,
    mm, zeros_for,
)
from .linear_solve import solve_p
from .hermitian_sqrt import hermitian_sylvester_p


# ---- QDWH (NumPy, batched) ---------------------------------------------------------------------
# Nakatsukasa, Bai & Gygi 2010, "Optimizing Halley's iteration for computing the matrix polar
# decomposition", SIAM J. Matrix Anal. Appl. 31(5): X_0 = A / alpha (alpha >= ||A||_2), and
# X_{k+1} = X_k (a_k I + b_k X_k^H X_k)(I + c_k X_k^H X_k)^{-1}, with weights chosen from a lower
# bound l_k of sigma_min(X_k) so that [l_k, 1] is mapped as close to 1 as possible; at most 6
# steps for kappa(A) <= 1e16. The step is computed with a QR factorization of
# [sqrt(c) X; I] (QR-based, backward stable for any c) and, once c_k <= 100 (the system is then
# well conditioned), with the Hermitian positive definite Z = I + c X^H X (Nakatsukasa & Higham
# 2012, "Backward stability of iterations for computing the polar decomposition", SIAM J.
# Matrix Anal. Appl. 33(2), sec. 4: the Cholesky-based step). NumPy has no batched triangular
# solve, so Z is solved by LAPACK gesv: kappa(Z) <= 101 keeps it as accurate as Cholesky.

_MAX_ITER = 10      # 6 suffice for kappa <= 1e16 (NBG 2010, sec. 3.2); the rest is margin
_CHOLESKY_C = 100.0


def _weights(l):
    """NBG 2010, eq. (3.11)-(3.12): the dynamical weights for the lower bound ``l`` (float64)."""
    l2 = l * l
    d = np.cbrt(4.0 * (1.0 - l2) / (l2 * l2))
    sd = np.sqrt(1.0 + d)
    a = sd + 0.5 * np.sqrt(np.maximum(8.0 - 4.0 * d + 8.0 * (2.0 - l2) / (l2 * sd), 0.0))
    b = (a - 1.0) ** 2 / 4.0
    return a, b, a + b - 1.0


def _sigma_min_lower_bound(x):
    """A lower bound of sigma_min of each matrix (k, m, n), m >= n: with x = QR,
    sigma_min(x) = 1 / ||R^{-1}||_2 >= 1 / (sqrt(n) ||R^{-1}||_1); 0 when R is singular."""
    r = np.linalg.qr(x, mode="r")
    out = np.zeros(x.shape[0])
    ok = np.nonzero((np.abs(np.diagonal(r, axis1=-2, axis2=-1)) > 0).all(axis=-1))[0]
    if ok.size:
        try:
            inv_norm = np.abs(np.linalg.inv(r[ok])).sum(axis=-2).max(axis=-1)
        except np.linalg.LinAlgError:   # an exactly singular pivot after all: keep the floor
            return out
        with np.errstate(divide="ignore", over="ignore"):
            out[ok] = 1.0 / (np.sqrt(x.shape[-1]) * inv_norm)
    return np.nan_to_num(out, nan=0.0, posinf=0.0)


def _qdwh_step(x, a, b, c):
    """One QDWH step for a stack x (k, m, n) with per-matrix weights (k,) (float64)."""
    k, m, n = x.shape
    rdt = x.real.dtype
    a, b, c = (np.asarray(v, rdt)[:, None, None] for v in (a, b, c))
    out = np.empty_like(x)
    eye = np.eye(n, dtype=x.dtype)
    qr_based = c[:, 0, 0] > _CHOLESKY_C
    i = np.nonzero(qr_based)[0]
    if i.size:
        sc = np.sqrt(c[i])
        stacked = np.concatenate([sc * x[i], np.broadcast_to(eye, (i.size, n, n))], axis=-2)
        q = np.linalg.qr(stacked)[0]
        out[i] = (b[i] / c[i]) * x[i] + ((a[i] - b[i] / c[i]) / sc) * \
            (q[:, :m] @ np.conj(np.swapaxes(q[:, m:], -1, -2)))
    i = np.nonzero(~qr_based)[0]
    if i.size:
        xi = x[i]
        xh = np.conj(np.swapaxes(xi, -1, -2))
        z = eye + c[i] * (xh @ xi)
        y = np.conj(np.swapaxes(np.linalg.solve(z, xh), -1, -2))    # X Z^{-1}
        out[i] = (b[i] / c[i]) * xi + (a[i] - b[i] / c[i]) * y
    return out


def _qdwh(a):
    """U of finite, nonzero matrices a (k, m, n), m >= n; per-matrix convergence by masking."""
    rdt = a.real.dtype
    eps = float(np.finfo(rdt).eps)
    fro = np.sqrt((np.abs(a) ** 2).sum(axis=(-2, -1)))
    n1ninf = np.sqrt(np.abs(a).sum(axis=-2).max(axis=-1) * np.abs(a).sum(axis=-1).max(axis=-1))
    alpha = np.minimum(fro, n1ninf)          # both bound ||a||_2 from above
    x = a / alpha[:, None, None].astype(rdt)
    # l must stay a lower bound of sigma_min(X_k) (too small only costs steps); clamped so
    # that l^4 in the weights does not underflow.
    l = np.clip(_sigma_min_lower_bound(x).astype(np.float64), 1e-60, 1.0)
    active = np.arange(x.shape[0])
    tol_x = (5 * eps) ** (1 / 3)
    for _ in range(_MAX_ITER):
        li = l[active]
        wa, wb, wc = _weights(li)
        new = _qdwh_step(x[active], wa, wb, wc)
        change = np.sqrt((np.abs(new - x[active]) ** 2).sum(axis=(-2, -1)))
        x[active] = new
        l[active] = np.minimum(li * (wa + wb * li * li) / (1.0 + wc * li * li), 1.0)
        # NBG 2010, sec. 4: cubic convergence makes X_{k+1} accurate once the step is below
        # (5 eps)^(1/3) and l has reached 1.
        done = (change <= tol_x) & (np.abs(1.0 - l[active]) <= 10 * eps)
        active = active[~done]
        if not active.size:
            break
    return x


def _polar_impl(x):
    x = np.asarray(x)
    shape, (m, n) = x.shape, x.shape[-2:]
    batch = shape[:-2]
    if x.size == 0:
        return [np.zeros(shape, x.dtype), np.zeros(batch + (n, n), x.dtype)]
    a = x.reshape((-1, m, n))
    u = np.full(a.shape, np.nan, a.dtype)
    finite = np.isfinite(a).all(axis=(-2, -1))
    nonzero = finite & (np.abs(a).max(axis=(-2, -1)) > 0)
    i = np.nonzero(nonzero)[0]
    if i.size:
        u[i] = _qdwh(a[i])
    # A zero matrix, and a rank-deficient one whose zero singular values QDWH keeps at 0 (it
    # maps 0 to 0), leave U with orthonormality lost: those get U = W V^H from the SVD (one
    # choice of the non-unique U; H is unique).
    eye = np.eye(n, dtype=a.dtype)
    uhu = np.conj(np.swapaxes(u, -1, -2)) @ u
    err = np.sqrt((np.abs(uhu - eye) ** 2).sum(axis=(-2, -1)))
    redo = np.nonzero(finite & ~(err <= np.sqrt(np.finfo(a.real.dtype).eps)))[0]
    if redo.size:
        w, _, vh = np.linalg.svd(a[redo], full_matrices=False)
        u[redo] = w @ vh
    h = np.conj(np.swapaxes(u, -1, -2)) @ a
    h = (h + np.conj(np.swapaxes(h, -1, -2))) / 2      # NBG 2010, sec. 5: the Hermitian part
    return [u.reshape(shape), h.reshape(batch + (n, n))]


polar_p = Primitive("polar", multiple_results=True, family="linalg")


def _polar_abstract(x):
    check_matrix("polar", x.shape)
    _check_inexact("polar", x)
    m, n = x.shape[-2:]
    if m < n:
        raise ValueError(f"polar: the primitive takes m >= n, got shape {_shape_str(x.shape)}")
    return [ShapedArray(x.shape, x.dtype), ShapedArray(tuple(x.shape[:-2]) + (n, n), x.dtype)]


polar_p.impl = _low_precision(_polar_impl)
polar_p.abstract_eval = _polar_abstract


def polar(a, /, *, side="right"):
    """The polar decomposition of each matrix of a stack ``a`` ``(*batch, m, n)``:
    ``a = U @ H`` (``side="right"``) or ``a = H @ U`` (``side="left"``), with ``U`` ``(*batch,
    m, n)`` unitary (orthonormal columns when m >= n, orthonormal rows when m < n) and ``H``
    Hermitian positive semidefinite, ``(*batch, n, n)`` (right) or ``(*batch, m, m)`` (left)
    (``scipy.linalg.polar``; ``jax.scipy.linalg.polar`` with ``method="qdwh"``).

    Method: QDWH (Nakatsukasa, Bai & Gygi 2010, "Optimizing Halley's iteration for computing
    the matrix polar decomposition", SIAM J. Matrix Anal. Appl. 31(5)), QR-based steps then
    positive-definite solves once well conditioned (Nakatsukasa & Higham 2012), at most 10
    steps, each matrix of the batch stopping on its own convergence; ``H`` is the Hermitian
    part of ``U^H a``. Wide matrices are decomposed through ``a^H``. ``H`` is unique; ``U`` is
    unique only for full-rank ``a``: for a rank-deficient matrix (and the zero matrix) it is
    the ``W V^H`` of ``a``'s SVD (one of many choices). Matrices with a NaN or infinite entry
    give all-NaN results.

    Derivative (full-rank ``a``, m >= n and right side; the others follow by transposition):
    with ``G = U^H da``, ``Omega = U^H dU`` solves ``H Omega + Omega H = G - G^H``, ``dH`` is
    ``(G + G^H) / 2 - (Omega H - H Omega) / 2`` and ``dU = U Omega + (I - U U^H) da H^{-1}``.
    The Sylvester equation needs only sums of singular values ``s_i + s_j > 0`` (distinct
    singular values are not needed; repeated ones are fine); at a rank-deficient ``a`` the
    derivative is infinite / NaN.

    Args:
        a: ``(*batch, m, n)``; float32 / float64 / complex64 / complex128 are computed in their
            precision, bool / integers in float32, float16 / bfloat16 in float32 rounded back.
        side: ``"right"`` (default) or ``"left"``.
    Returns:
        ``(U, H)`` in the dtype of ``a`` (after the promotion above).
    Raises:
        ValueError: ``a.ndim < 2`` or ``side`` not "right" / "left".
    """
    if side not in ("right", "left"):
        raise ValueError(f"polar: side must be 'right' or 'left', got {side!r}")
    a = as_inexact("polar", a)
    check_matrix("polar", a.shape)
    m, n = a.shape[-2:]
    if m >= n:
        u, h = polar_p.bind(a)
        return (u, h) if side == "right" else (u, mm(mm(u, h), mH(u)))
    # a^H = U' H' (m x m): a = H' U'^H, so the left factors are (U'^H, H') and the right ones
    # (U'^H, U' H' U'^H).
    u, h = polar_p.bind(mH(a))
    return (mH(u), h) if side == "left" else (mH(u), mm(mm(u, h), mH(u)))


# ---- rules -------------------------------------------------------------------------------------
# d(U H) = dA with U^H U = I: Omega = U^H dU is skew-Hermitian, and U^H dA = Omega H + dH gives
# the Sylvester equation for Omega from its skew part and dH from its Hermitian part; the part
# of dU outside the range of U is (I - U U^H) dA H^{-1} (tall input). Everything is linear in
# dA with primal coefficients, so the transpose comes from the rules of its pieces.

def _polar_jvp(primals, tangents):
    (a,), (t,) = primals, tangents
    u, h = polar_p.bind(a)
    if type(t) is Zero:
        return [u, h], zeros_for(polar_p, [u, h])
    g = mm(mH(u), t)
    om = hermitian_sylvester_p.bind(h, g - mH(g))
    dh = (g + mH(g)) * 0.5 - (mm(om, h) - mm(h, om)) * 0.5
    du = mm(u, om)
    if a.shape[-2] > a.shape[-1]:
        du = du + mH(solve_p.bind(h, mH(t - mm(u, g))))
    return [u, h], [du, dh]


polar_p.jvp = _polar_jvp
batch_to_front(polar_p)
polar_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
