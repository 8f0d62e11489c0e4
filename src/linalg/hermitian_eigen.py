"""Hermitian eigendecomposition: the ``eigh`` primitive with its rules.

Eigenvectors are in Starling's gauge (the rule of singular_values.py): each column's entry of
largest modulus is real and positive, so they may differ from NumPy's by a sign / phase.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from .jacobi import eigh_batched   # native Jacobi for stacks of small matrices, else LAPACK
from ._common import (
    EighResult, _check_inexact, _low_precision, as_inexact, batch_to_front, check_matrix, col,
    degenerate_tol, diag_part, mH, mm, offdiag_reciprocal, real, row, symmetrize, zeros_for,
)
from .singular_values import gauge_phase


# ---- eigh --------------------------------------------------------------------------------------

eigh_p = Primitive("eigh", multiple_results=True, family="linalg")


def _eigh_abstract(x, *, lower, compute_v):
    check_matrix("eigh", x.shape, square=True)
    _check_inexact("eigh", x)
    w = ShapedArray(x.shape[:-1], dtypes.real_dtype(x.dtype))
    return [w, ShapedArray(x.shape, x.dtype)] if compute_v else [w]


def _eigh_impl(x, *, lower, compute_v):
    if not compute_v:
        return eigh_batched(x, lower, compute_v=False)
    w, v = eigh_batched(x, lower)
    if v.size:
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
    (LAPACK ``syevd`` / ``heevd``, divide and conquer; stacks of small matrices: the native
    batched cyclic Jacobi, ``starling.linalg.jacobi``).

    Only the lower (``UPLO="L"``, default) or upper triangle is read.

    Returns:
        ``EighResult(eigenvalues, eigenvectors)``: eigenvalues ``(*batch, n)`` ascending, in the
        real dtype; eigenvectors ``(*batch, n, n)`` as columns, in Starling's gauge: the entry
        of largest modulus of each is real positive (NumPy's may differ by a sign / phase).
    Derivatives: ``x`` is taken as Hermitian, so its tangent is projected onto Hermitian
    matrices (``(t + t^H) / 2``, as JAX and PyTorch): gradients are Hermitian matrices, not
    triangular ones (finite differences of the read triangle alone differ off the diagonal).
    Eigenvalues closer than rounding (``n * eps * max|w|``) are treated as one repeated
    eigenvalue whose eigenvectors do not rotate among themselves, so gradients are finite and
    exact for losses that do not depend on the choice of basis of that eigenspace and use the
    cluster's eigenvalues only through their sum: ``sum(w)``, ``sum(log(w))``, ``sum(f(w))``,
    the projector ``V_k V_k^H`` onto a whole cluster. The decomposition itself is not
    differentiable at a repeated eigenvalue (the eigenvalues split along the eigenvalues of the
    perturbation's block), so other functions built from it (e.g. ``V diag(f(w)) V^H``) get
    the derivative of the diagonal of that block only: use the matrix functions
    (``matrix_sqrth``, ``matrix_exp``) for those.
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
# A = V diag(w) V^H with dA = (T + T^H) / 2 (Giles 2008, sec. 3.1; Seeger et al. 2017): with
# dP = V^H dA V, dw = re diag(dP) and dV = V (F o dP), F_ij = 1 / (w_j - w_i) off the diagonal,
# 0 for pairs equal to rounding (offdiag_reciprocal: no rotation inside a repeated eigenvalue's
# eigenspace); complex eigenvectors add the phase term of the normalized gauge.

def _eigh_jvp(primals, tangents, *, lower, compute_v):
    (x,), (t,) = primals, tangents
    if type(t) is Zero:
        outs = eigh_p.bind(x, lower=lower, compute_v=compute_v)
        return outs, zeros_for(eigh_p, outs)
    w, v = eigh_p.bind(x, lower=lower, compute_v=True)
    dp = mm(mH(v), mm(symmetrize(t), v))
    dw = real(diag_part(dp))
    if not compute_v:
        return [w], [dw]
    dv = mm(v, offdiag_reciprocal(row(w) - col(w), degenerate_tol(w)) * dp)
    if dtypes.is_complex(x.dtype):
        dv = dv + v * row(gauge_phase(v, dv))
    return [w, v], [dw, dv]


eigh_p.jvp = _eigh_jvp
batch_to_front(eigh_p)
eigh_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own


