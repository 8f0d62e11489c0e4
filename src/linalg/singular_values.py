"""The singular value decomposition: the ``svd`` primitive with its rules.

Gauge (a documented choice, so that the outputs are functions of the input, the same from every
kernel, and differentiable): singular vectors are only defined up to a sign (real) or a unit
phase (complex) per pair. NumPy returns whatever LAPACK's reductions produce; Starling turns each
right singular vector (row of ``Vh``), and the matching column of ``U`` by the same factor, so
that its entry of largest modulus (the first one on ties) is real and positive. Results may
therefore differ from NumPy's by a sign / phase per pair. ``eigh`` uses the same rule for its
eigenvectors (columns). The JVP rules follow the gauge, so they agree with finite differences
(away from ties of the largest entry, where the gauge itself jumps).
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.array import wrap
from ..arrays.ops import rules_sharding as RS
from .jacobi import svd_batched   # native Jacobi for stacks of small matrices, else LAPACK
from ._common import (
    SVDResult, _check_inexact, _low_precision, _snp, as_inexact, batch_to_front, check_matrix,
    degenerate_tol,
    col, diag_part, imag_diag_part, mH, mm, offdiag_reciprocal, real, row, zeros_for,
)


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
        return svd_batched(x, compute_uv=False)
    u, s, vh = svd_batched(x, full_matrices=full_matrices)
    if s.size:
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
    (LAPACK ``gesdd``, divide and conquer; stacks of small matrices: the native batched
    one-sided Jacobi SVD, ``starling.linalg.jacobi``).

    Args:
        full_matrices: ``U (*batch, m, m)`` and ``Vh (*batch, n, n)`` when True, else
            ``(*batch, m, k)`` and ``(*batch, k, n)`` with ``k = min(m, n)``.
        compute_uv: NumPy extension; False returns only ``S`` (same as ``svdvals``).
    Returns:
        ``SVDResult(U, S, Vh)``; ``S (*batch, k)`` is real, non-negative and descending. The
        singular vectors are in Starling's gauge (module docstring), so they may differ from
        NumPy's by a sign / unit phase per pair.
    Derivatives: ``S``'s exist wherever the singular values are distinct, and symmetric
    functions of them (norms) everywhere but at zero. For ``U`` / ``Vh``, singular values equal
    to rounding are treated as one repeated value whose vectors do not rotate among themselves:
    gradients are finite and exact for losses that do not depend on the basis of that subspace
    (as for ``eigh``); complex input or the non-square part needs nonzero singular values.
    ``U`` / ``Vh`` with ``full_matrices=True`` and ``m != n`` raise NotImplementedError (the
    extra vectors are not unique). ``S`` alone (``compute_uv=False``,
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
# (see the module docstring). Singular values equal to rounding (degenerate_tol) count as one
# repeated value: no rotation among its vectors (offdiag_reciprocal). The 1/s terms need nonzero
# singular values.

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
    f = offdiag_reciprocal(sr * sr - sc * sc, degenerate_tol(s * s) * 2.0)
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
    from ..arrays.ops.autodiff import stop_gradient
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


