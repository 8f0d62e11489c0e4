"""Eigendecomposition of general square matrices: the ``eig`` primitive with its rules, ``eig``
and ``eigvals``."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ..arrays.ops.convert_element_type import convert_element_type
from ._common import (
    _LOW, _check_inexact, _snp, as_inexact, batch_to_front, check_matrix, col, conj,
    degenerate_tol, diag_part, lapack_or_nan, mm, offdiag_reciprocal, real, row, zeros_for,
)
from .hermitian_eigen import normalize_columns_phase
from .linear_solve import inv
from .singular_values import gauge_phase


class EigResult(NamedTuple):
    """``eig`` output: complex ``eigenvalues`` ``(*batch, n)`` and column ``eigenvectors``
    ``(*batch, n, n)``."""

    eigenvalues: Any
    eigenvectors: Any


# ---- eig ---------------------------------------------------------------------------------------

eig_p = Primitive("eig", multiple_results=True, family="linalg")


def _eig_abstract(x, *, compute_v):
    check_matrix("eig", x.shape, square=True)
    _check_inexact("eig", x)
    cdt = dtypes.complex_dtype(x.dtype)
    w = ShapedArray(x.shape[:-1], cdt)
    return [w, ShapedArray(x.shape, cdt)] if compute_v else [w]


def _eig_impl(x, *, compute_v):
    x = np.asarray(x)
    cdt = dtypes.complex_dtype(x.dtype)
    if x.dtype in _LOW:   # (eig / eigvals convert these first; a direct bind may not)
        x = x.astype(np.float32)
    # LAPACK rejects non-finite input (and, rarely, fails to converge): those matrices of the
    # stack give NaN and the others their values, in eager and compiled code alike.
    outs = [o.astype(cdt) for o in lapack_or_nan(lambda a: _geev(a, compute_v), x)]
    if compute_v and outs[1].size:
        outs[1] = normalize_columns_phase(outs[1])
    return outs


def _geev(x, compute_v):
    if compute_v:
        return list(np.linalg.eig(x))
    return [np.linalg.eigvals(x)]


eig_p.impl = _eig_impl
eig_p.abstract_eval = _eig_abstract


def _eig_operand(op, x):
    x = as_inexact(op, x)
    check_matrix(op, x.shape, square=True)
    if x.dtype in _LOW:   # no complex type below complex64: compute in float32
        x = convert_element_type(x, dtypes.float32, False)
    return x


def eig(x, /):
    """Eigenvalues and right eigenvectors of general square matrices ``(*batch, n, n)``:
    ``x @ V = V * w[..., None, :]`` (LAPACK ``geev``: Hessenberg reduction, then the shifted
    QR algorithm, then back-substitution for the vectors).

    The outputs are complex whatever the values, as in ``torch.linalg.eig`` and ``jax.numpy``:
    NumPy returns real arrays when every eigenvalue happens to be real, which makes the dtype
    depend on the values. Real input gives its complex eigenvalues in conjugate pairs with
    conjugate eigenvectors. The eigenvalues are in LAPACK's order (not sorted).

    Eigenvector gauge: each column has unit 2-norm, and its entry of largest modulus is real and
    positive (the first such entry at ties, e.g. the two entries of modulus ``1/sqrt(2)`` of a
    2x2 rotation's eigenvectors; there the gauge, and so the derivative, jumps). NumPy's columns
    may differ from these by a unit phase each.

    Args:
        x: ``(*batch, n, n)``; float32 / float64 / complex64 / complex128; bool and integers
            are computed as float32, float16 / bfloat16 as float32 (there is no smaller complex
            type).
    Returns:
        ``EigResult(eigenvalues, eigenvectors)``: ``(*batch, n)`` and ``(*batch, n, n)``
        (eigenvectors as columns), complex64 for float32 / complex64 input, complex128 for
        float64 / complex128. Matrices with NaN or inf entries (and, rarely, ones on which the
        QR algorithm does not converge) give NaN, without affecting the rest of the stack.
    Derivatives (Giles 2008, "Collected matrix derivative results for forward and reverse mode
    algorithmic differentiation", sec. 3.1): with ``dP = V^{-1} dA V``, ``dw = diag(dP)`` and
    ``dV = V (F o dP)``, ``F_ij = 1 / (w_j - w_i)`` off the diagonal, plus the multiple of each
    column that keeps its norm and phase gauge. The eigenvectors' derivative needs distinct
    eigenvalues; eigenvalues equal to rounding (``n * eps * max|w|``) count as one repeated
    value whose vectors get no rotation among themselves (finite, and exact for losses that do
    not depend on the basis of its eigenspace, as for ``eigh``). The eigenvalues' needs a
    diagonalizable matrix, and distinct eigenvalues for each one alone (a repeated eigenvalue
    is not differentiable, only symmetric functions of the group such as their sum are:
    ``grad`` of ``sum(real(eigvals(x)))`` is the identity). At a defective matrix (a Jordan
    block) ``V`` is singular and the derivatives are not finite: the eigenvalues move like
    ``eps^(1/k)`` there.
    For real input the tangents of the real input are real and the cotangent reaching ``x`` is
    the real part (the input cannot move off the reals).
    Raises:
        ValueError: ``x.ndim < 2`` or non-square matrices.
    """
    x = _eig_operand("eig", x)
    w, v = eig_p.bind(x, compute_v=True)
    return EigResult(w, v)


def eigvals(x, /):
    """Eigenvalues ``(*batch, n)`` (complex, LAPACK's order) of general square matrices
    ``(*batch, n, n)`` (LAPACK ``geev`` without vectors). Dtypes, NaN policy and derivatives as
    for ``eig`` (whose docstring says which are defined); the derivative computes the vectors.

    Raises:
        ValueError: ``x.ndim < 2`` or non-square matrices.
    """
    x = _eig_operand("eigvals", x)
    return eig_p.bind(x, compute_v=False)[0]


# ---- eig rules ---------------------------------------------------------------------------------
# A V = V W gives dP + W C - C W = dW with C = V^{-1} dV, dP = V^{-1} dA V: dW = diag(dP),
# C_ij = dP_ij / (w_j - w_i) off the diagonal, 0 for pairs equal to rounding (as in eigh: no
# rotation inside a repeated eigenvalue's space, exact for losses that do not depend on its
# basis, e.g. at a diagonalizable repeated eigenvalue such as the identity's). C's diagonal (a
# multiple c_j of each column) is fixed by the gauge: re(v_j^H dv_j) = 0 keeps the unit norm,
# and the imaginary part of c_j keeps the pivot entry real (singular_values.gauge_phase). Real
# input: its real tangent is promoted to complex by a convert_element_type, whose transpose
# takes the real part of the cotangent.

def _eig_jvp(primals, tangents, *, compute_v):
    (x,), (t,) = primals, tangents
    if type(t) is Zero:
        outs = eig_p.bind(x, compute_v=compute_v)
        return outs, zeros_for(eig_p, outs)
    w, v = eig_p.bind(x, compute_v=True)
    if t.dtype != v.dtype:
        t = convert_element_type(t, v.dtype, False)
    dp = mm(inv(v), mm(t, v))
    dw = diag_part(dp)
    if not compute_v:
        return [w], [dw]
    dv = mm(v, offdiag_reciprocal(row(w) - col(w), degenerate_tol(w)) * dp)
    dv = dv - v * row(real(_snp().sum(conj(v) * dv, axis=-2)))
    dv = dv + v * row(gauge_phase(v, dv))
    return [w, v], [dw, dv]


eig_p.jvp = _eig_jvp
batch_to_front(eig_p)
eig_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
