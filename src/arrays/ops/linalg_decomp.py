"""Orthogonal decompositions: the ``qr``, ``svd`` and ``eigh`` primitives with their JVP and batch
rules (shared helpers and the dtype / error policy: linalg_basic.py).

Gauge (a documented choice, so that the outputs are differentiable functions of the input):
complex eigenvectors and singular vectors are only defined up to a unit phase per vector. NumPy
returns whatever phase LAPACK's reductions produce; Starling normalizes it: each eigenvector
(column of ``eigenvectors``), and each right singular vector (row of ``Vh``, with the matching
column of ``U`` turned by the same phase), has its entry of largest modulus (the first one on
ties) real and positive. Real results keep LAPACK's signs (as NumPy). The JVP rules follow the
same gauge, so they agree with finite differences.

Derivatives (limitations as documented in each rule): distinct eigenvalues / singular values,
nonzero singular values for complex input or non-square ``U``/``Vh`` parts, full-rank input for
``qr``; ``full_matrices=True`` (``mode="complete"``) with a non-square input has no derivative
for ``U``/``Vh`` (``Q``): the extra columns are not unique. These raise or give inf/NaN, as in
JAX and PyTorch.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.ad_util import Zero
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ..array import wrap
from . import rules_sharding as RS
from . import shape_lax
from .linalg_basic import (
    EighResult, QRResult, SVDResult, _check_inexact, _low_precision, _snp, as_inexact,
    batch_to_front, check_matrix, col, conj, diag_part, diag_embed, hermitian_part,
    imag_diag_part, mH, mm, mT, offdiag_reciprocal, real, row, solve_p, tri, zeros_for,
)

__all__ = []  # the user functions live in starling.numpy.linalg


# ---- qr ----------------------------------------------------------------------------------------

qr_p = Primitive("qr", multiple_results=True, family="linalg")


def _qr_shapes(shape, full_matrices):
    batch, (m, n) = tuple(shape[:-2]), tuple(shape[-2:])
    k = m if full_matrices else min(m, n)
    return batch + (m, k), batch + (k, n)


def _qr_abstract(x, *, full_matrices):
    check_matrix("qr", x.shape)
    _check_inexact("qr", x)
    qs, rs = _qr_shapes(x.shape, full_matrices)
    return [ShapedArray(qs, x.dtype), ShapedArray(rs, x.dtype)]


def _qr_impl(x, *, full_matrices):
    q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return [q, r]


qr_p.impl = _low_precision(_qr_impl)
qr_p.abstract_eval = _qr_abstract


def qr(x, /, *, mode="reduced"):
    """QR factorization of ``(*batch, m, n)`` matrices by Householder reflections (LAPACK
    ``geqrf`` + ``orgqr`` / ``ungqr``).

    Args:
        mode: "reduced": ``Q (*batch, m, k)``, ``R (*batch, k, n)`` with ``k = min(m, n)``;
            "complete": ``Q (*batch, m, m)``, ``R (*batch, m, n)``; "r": only ``R`` (reduced).
    Returns:
        ``QRResult(Q, R)`` (or the array ``R`` for mode "r"); ``Q`` has orthonormal columns,
        ``R`` is upper triangular. Signs follow LAPACK (R's diagonal may be negative).
        Derivatives need full-rank input; ``mode="complete"`` with ``m > n`` raises
        NotImplementedError (the extra columns of ``Q`` are not unique).
    Raises:
        ValueError: ``x.ndim < 2`` or an unknown mode.
    """
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    x = as_inexact("qr", x)
    check_matrix("qr", x.shape)
    q, r = qr_p.bind(x, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


# Reduced QR A = Q R (m >= n, or the first m columns X of a wide A = [X | Y]): with
# C = Q^H dX R_X^{-1} and Omega = Q^H dQ (skew-Hermitian), Omega's strict lower part is C's and
# its diagonal i im(diag C) (R keeps a real diagonal, as LAPACK's Householder QR gives);
# dQ = Q Omega + (I - Q Q^H) dX R_X^{-1} and dR = Q^H dA - Omega R (Walter & Lehmann 2018,
# "Algorithmic differentiation of linear algebra functions with application in optimum
# experimental design", sec. 3.3; the wide case as in JAX's qr_jvp_rule). R_X must be
# invertible (full-rank input).

def _qr_jvp(primals, tangents, *, full_matrices):
    (x,), (t,) = primals, tangents
    q, r = qr_p.bind(x, full_matrices=full_matrices)
    if type(t) is Zero:
        return [q, r], zeros_for(qr_p, [q, r])
    m, n = x.shape[-2:]
    if full_matrices and m > n:
        raise NotImplementedError(
            f"qr: the derivative of mode='complete' for a tall input of shape {tuple(x.shape)} "
            "is not defined (the last m - n columns of Q are not unique); use mode='reduced'")
    k = min(m, n)
    ax = x.ndim - 1
    tx = t if n == k else shape_lax.slice_in_dim(t, 0, k, 1, ax)
    rx = r if n == k else shape_lax.slice_in_dim(r, 0, k, 1, ax)
    b = mT(solve_p.bind(mT(rx), mT(tx)))            # dX R_X^{-1}
    c = mm(mH(q), b)
    low = c * tri(k, k, -1, c)
    omega = low - mH(low)
    if dtypes.is_complex(c.dtype):
        omega = omega + diag_embed(imag_diag_part(diag_part(c)))
    dq = mm(q, omega)
    if m > k:
        dq = dq + (b - mm(q, c))
    dr = (mm(mH(q), t) - mm(omega, r)) * tri(k, n, 0, r, upper=True)
    return [q, r], [dq, dr]


qr_p.jvp = _qr_jvp
batch_to_front(qr_p)
qr_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own


# ---- svd ---------------------------------------------------------------------------------------

svd_p = Primitive("svd", multiple_results=True, family="linalg")


def _svd_abstract(x, *, full_matrices, compute_uv):
    check_matrix("svd", x.shape)
    _check_inexact("svd", x)
    batch, (m, n) = tuple(x.shape[:-2]), tuple(x.shape[-2:])
    k = min(m, n)
    s = ShapedArray(batch + (k,), dtypes.real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    ku, kv = (m, n) if full_matrices else (k, k)
    return [ShapedArray(batch + (m, ku), x.dtype), s, ShapedArray(batch + (kv, n), x.dtype)]


def _svd_impl(x, *, full_matrices, compute_uv):
    if not compute_uv:
        return [np.linalg.svd(x, compute_uv=False)]
    u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
    if np.iscomplexobj(vh) and s.size:
        u, vh = normalize_svd_phase(u, vh, s.shape[-1])
    return [u, s, vh]


def normalize_svd_phase(u, vh, k):
    """Turns the first ``k`` rows of ``vh`` (and columns of ``u``, by the inverse phase) so
    that each row's entry of largest modulus is real and positive (NumPy arrays)."""
    top = vh[..., :k, :]
    i = np.argmax(np.abs(top), axis=-1)[..., None]
    piv = np.take_along_axis(top, i, axis=-1)
    phase = piv / np.abs(piv)                                 # (*b, k, 1)
    vh, u = vh.copy(), u.copy()
    vh[..., :k, :] = top * np.conj(phase)
    u[..., :, :k] = u[..., :, :k] * np.swapaxes(phase, -1, -2)
    return u, vh


svd_p.impl = _low_precision(_svd_impl)
svd_p.abstract_eval = _svd_abstract


def svd(x, /, *, full_matrices=True, compute_uv=True):
    """Singular value decomposition ``x = U @ diag(S) @ Vh`` of ``(*batch, m, n)`` matrices
    (LAPACK ``gesdd``, divide and conquer).

    Args:
        full_matrices: ``U (*batch, m, m)`` and ``Vh (*batch, n, n)`` when True, else
            ``(*batch, m, k)`` and ``(*batch, k, n)`` with ``k = min(m, n)``.
        compute_uv: NumPy extension; False returns only ``S`` (same as ``svdvals``).
    Returns:
        ``SVDResult(U, S, Vh)``; ``S (*batch, k)`` is real, non-negative and descending. Complex
        singular vectors are in Starling's gauge (module docstring), so they may differ from
        NumPy's by a unit phase per vector.
    Derivatives: need distinct singular values (nonzero ones for complex input or for the
    non-square part); ``U`` / ``Vh`` with ``full_matrices=True`` and ``m != n`` raise
    NotImplementedError (the extra vectors are not unique). ``S`` alone (``compute_uv=False``,
    ``svdvals``) is differentiable wherever its values are distinct.
    Raises:
        ValueError: ``x.ndim < 2``.
    """
    x = as_inexact("svd", x)
    check_matrix("svd", x.shape)
    if not compute_uv:
        return svd_p.bind(x, full_matrices=False, compute_uv=False)[0]
    u, s, vh = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=True)
    return SVDResult(u, s, vh)


def svdvals(x, /):
    """Singular values ``(*batch, min(m, n))`` of ``(*batch, m, n)`` matrices, descending, in the
    real dtype (LAPACK ``gesdd`` without vectors)."""
    x = as_inexact("svdvals", x)
    check_matrix("svdvals", x.shape)
    return svd_p.bind(x, full_matrices=False, compute_uv=False)[0]


# SVD A = U diag(s) V^H (Townsend 2016, "Differentiating the singular value decomposition";
# Seeger et al. 2017, "Auto-differentiating linear algebra"): with dP = U^H dA V,
# ds = re diag(dP); U^H dU = F o (dP S + S dP^H) and V^H dV = F o (S dP + dP^H S) off the
# diagonal, F_ij = 1 / (s_j^2 - s_i^2); the parts outside the spans of U and V are
# (I - U U^H) dA V S^{-1} and (I - V V^H) dA^H U S^{-1}. Complex input leaves one phase per
# pair free: i im(dP_jj) / s_j splits it between U and V, and the rest keeps the normalized gauge
# (see the module docstring). Needs distinct singular values (nonzero where divided by).

def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    (x,), (t,) = primals, tangents
    m, n = x.shape[-2:]
    k = min(m, n)
    if type(t) is Zero:
        outs = svd_p.bind(x, full_matrices=full_matrices, compute_uv=compute_uv)
        return outs, zeros_for(svd_p, outs)
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            f"svd: the derivative of U and Vh with full_matrices=True for a non-square input of "
            f"shape {tuple(x.shape)} is not defined (the extra singular vectors are not unique); "
            "use full_matrices=False")
    u, s, vh = svd_p.bind(x, full_matrices=False, compute_uv=True)
    v = mH(vh)
    dp = mm(mH(u), mm(t, v))
    ds = real(diag_part(dp))
    if not compute_uv:
        return [s], [ds]
    sr, sc = row(s), col(s)
    f = offdiag_reciprocal(sr * sr - sc * sc)
    dph = mH(dp)
    du = mm(u, f * (dp * sr + sc * dph))
    dv = mm(v, f * (sc * dp + dph * sr))
    cplx = dtypes.is_complex(x.dtype)
    inv_s = 1.0 / s if (m != n or cplx) else None  # only where divided by (s may hold zeros)
    if m > k:
        du = du + (mm(t, v) - mm(u, dp)) * row(inv_s)
    if n > k:
        dv = dv + (mm(mH(t), u) - mm(v, dph)) * row(inv_s)
    if cplx:
        itheta = gauge_phase(v, dv)
        dv = dv + v * row(itheta)
        du = du + u * row(itheta + imag_diag_part(diag_part(dp)) * inv_s)
    return [u, s, vh], [du, ds, mH(dv)]


def gauge_phase(v, dv):
    """``i theta_j`` (shape ``(*b, k)``) such that ``dv + v * i theta`` keeps the entry of largest
    modulus of each column of ``v`` real (the impl's gauge): ``theta_j = -im(dv[p_j, j]) /
    v[p_j, j]`` with ``p_j`` that entry's row (a primal-derived one-hot mask picks it)."""
    from .autodiff import stop_gradient
    snp = _snp()
    p = snp.argmax(snp.abs(stop_gradient(v)), axis=-2)  # a row index: piecewise constant
    hot = snp.astype(wrap_rows(v.shape[-2]) == row(p), dtypes.real_dtype(v.dtype))
    vp = snp.sum(snp.real(v) * hot, axis=-2)
    return -imag_diag_part(snp.sum(dv * hot, axis=-2)) / vp


def wrap_rows(n):
    """The constant column ``[[0], [1], ..., [n-1]]`` (int64)."""
    return wrap(np.arange(n, dtype=np.int64).reshape(n, 1), False)


svd_p.jvp = _svd_jvp
batch_to_front(svd_p)
svd_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own


# ---- eigh --------------------------------------------------------------------------------------

eigh_p = Primitive("eigh", multiple_results=True, family="linalg")


def _eigh_abstract(x, *, lower, compute_v):
    check_matrix("eigh", x.shape, square=True)
    _check_inexact("eigh", x)
    w = ShapedArray(x.shape[:-1], dtypes.real_dtype(x.dtype))
    return [w, ShapedArray(x.shape, x.dtype)] if compute_v else [w]


def _eigh_impl(x, *, lower, compute_v):
    uplo = "L" if lower else "U"
    if not compute_v:
        return [np.linalg.eigvalsh(x, UPLO=uplo)]
    w, v = np.linalg.eigh(x, UPLO=uplo)
    if np.iscomplexobj(v) and v.size:
        v = normalize_columns_phase(v)
    return [w, v]


def normalize_columns_phase(v):
    """Turns each column of ``v`` so that its entry of largest modulus is real and positive."""
    i = np.argmax(np.abs(v), axis=-2)[..., None, :]
    piv = np.take_along_axis(v, i, axis=-2)
    return v * np.conj(piv / np.abs(piv))


eigh_p.impl = _low_precision(_eigh_impl)
eigh_p.abstract_eval = _eigh_abstract


def eigh(x, /, *, UPLO="L"):  # noqa: N803  (NumPy's keyword)
    """Eigen-decomposition of Hermitian (real symmetric) matrices ``(*batch, n, n)``
    (LAPACK ``syevd`` / ``heevd``, divide and conquer).

    Only the lower (``UPLO="L"``, default) or upper triangle is read.

    Returns:
        ``EighResult(eigenvalues, eigenvectors)``: eigenvalues ``(*batch, n)`` ascending, in the
        real dtype; eigenvectors ``(*batch, n, n)`` as columns (complex ones in Starling's gauge:
        the entry of largest modulus of each is real positive; NumPy's may differ by a phase).
    Derivatives: with respect to the triangle that is read; the eigenvectors' need distinct
    eigenvalues (the eigenvalues' do not).
    Raises:
        ValueError: non-square matrices, or UPLO not "L"/"U".
    """
    x = as_inexact("eigh", x)
    check_matrix("eigh", x.shape, square=True)
    w, v = eigh_p.bind(x, lower=_uplo("eigh", UPLO), compute_v=True)
    return EighResult(w, v)


def eigvalsh(x, /, *, UPLO="L"):  # noqa: N803
    """Eigenvalues ``(*batch, n)`` (ascending, real dtype) of Hermitian matrices
    ``(*batch, n, n)`` (LAPACK ``syevd`` / ``heevd`` without vectors)."""
    x = as_inexact("eigvalsh", x)
    check_matrix("eigvalsh", x.shape, square=True)
    return eigh_p.bind(x, lower=_uplo("eigvalsh", UPLO), compute_v=False)[0]


def _uplo(op, uplo):
    if uplo not in ("L", "U"):
        raise ValueError(f"{op}: UPLO must be 'L' or 'U', got {uplo!r}")
    return uplo == "L"


# ---- eigh rules --------------------------------------------------------------------------------
# A = V diag(w) V^H with the triangle that the routine reads (Giles 2008, sec. 3.1; Seeger et al.
# 2017): with dP = V^H dA V, dw = re diag(dP) and dV = V (F o dP), F_ij = 1 / (w_j - w_i) off the
# diagonal; complex eigenvectors add the phase term of the normalized gauge. Degenerate
# eigenvalues make F infinite: the eigenvectors are then not differentiable (a documented
# limitation; eigenvalues alone, compute_v=False, only need dP's diagonal).

def _eigh_jvp(primals, tangents, *, lower, compute_v):
    (x,), (t,) = primals, tangents
    if type(t) is Zero:
        outs = eigh_p.bind(x, lower=lower, compute_v=compute_v)
        return outs, zeros_for(eigh_p, outs)
    w, v = eigh_p.bind(x, lower=lower, compute_v=True)
    dp = mm(mH(v), mm(hermitian_part(t, lower), v))
    dw = real(diag_part(dp))
    if not compute_v:
        return [w], [dw]
    dv = mm(v, offdiag_reciprocal(row(w) - col(w)) * dp)
    if dtypes.is_complex(x.dtype):
        dv = dv + v * row(gauge_phase(v, dv))
    return [w, v], [dw, dv]


eigh_p.jvp = _eigh_jvp
batch_to_front(eigh_p)
eigh_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own


# ---- pinv ------------------------------------------------------------------------------------
# The pseudo-inverse is differentiated as itself (Golub & Pereyra, "The differentiation of
# pseudo-inverses and nonlinear least squares problems", SIAM J. Numer. Anal. 10, 1973, eq. 4.12):
#   dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P,
# valid wherever the rank is locally constant. Going through U, S, V instead would divide by
# differences of singular values: NaN at repeated ones (pinv(eye) has them all equal). With
# hermitian=True the tangent is replaced by its Hermitian part (the input is taken as Hermitian).

pinv_p = Primitive("pinv", family="linalg")


def _pinv_impl(x, rtol, *, hermitian):
    x = np.asarray(x)
    return np.linalg.pinv(x, rtol=np.asarray(rtol, dtype=np.float64), hermitian=hermitian)


def _pinv_abstract(x, rtol, *, hermitian):
    check_matrix("pinv", x.shape)
    _check_inexact("pinv", x)
    return ShapedArray(tuple(x.shape[:-2]) + (x.shape[-1], x.shape[-2]), x.dtype)


def _pinv_jvp(primals, tangents, *, hermitian):
    (x, rtol), (dx, _) = primals, tangents
    p = pinv_p.bind(x, rtol, hermitian=hermitian)
    if type(dx) is Zero:
        return p, Zero(p.aval)
    snp = _snp()
    if hermitian:   # the input is taken as Hermitian: so is its tangent (JAX / PyTorch's choice)
        dx = hermitian_part(dx)
    ph, dxh = mH(p), mH(dx)
    eye_m = snp.eye(x.shape[-2], dtype=x.dtype)
    eye_n = snp.eye(x.shape[-1], dtype=x.dtype)
    dp = -mm(mm(p, dx), p) + mm(mm(mm(p, ph), dxh), eye_m - mm(x, p)) \
        + mm(mm(mm(eye_n - mm(p, x), dxh), ph), p)
    return p, dp


def _pinv_batch(args, dims, *, hermitian):
    (x, rtol), (dx, dr) = args, dims
    snp = _snp()
    size = x.shape[dx] if dx is not None else rtol.shape[dr]
    x = snp.moveaxis(x, dx, 0) if dx is not None else \
        snp.broadcast_to(x, (size,) + tuple(x.shape))
    lead = x.ndim - 3    # x's own leading dims after the new batch dim
    if dr is not None:
        # rtol broadcasts against the leading dims from the right: keep the batch first
        rtol = snp.moveaxis(rtol, dr, 0)
        rtol = snp.reshape(rtol, (size,) + (1,) * (lead - (rtol.ndim - 1)) + rtol.shape[1:])
    return pinv_p.bind(x, rtol, hermitian=hermitian), 0


pinv_p.impl = _low_precision(_pinv_impl)
pinv_p.abstract_eval = _pinv_abstract
pinv_p.jvp = _pinv_jvp
pinv_p.batch = _pinv_batch
pinv_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
