"""The QR factorization: the ``qr`` primitive with its rules."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ..arrays.ops import shape_lax
from ._common import (
    QRResult, _check_inexact, _low_precision, as_inexact, batch_to_front, check_matrix,
    diag_embed, diag_part, imag_diag_part, mH, mT, mm, tri, zeros_for,
)
from .linear_solve import solve_p


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


