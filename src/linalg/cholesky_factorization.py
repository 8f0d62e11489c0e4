"""The Cholesky factorization: the ``cholesky`` primitive with its rules, and ``cholesky_ex``
(which also returns LAPACK's ``info``)."""
from __future__ import annotations

import numpy as np

from ..core.ad_util import Zero, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ._common import (
    _check_inexact, _low_precision, as_inexact, batch_to_front, check_matrix, errors_param,
    gufunc, info_of, lapack_info, mH, mm, raise_on_info, real_diag, symmetrize, tri,
)
from .linear_solve import solve_p


cholesky_p = Primitive("cholesky", family="linalg")


def _cholesky_abstract(x, *, check_errors=None):
    check_matrix("cholesky", x.shape, square=True)
    _check_inexact("cholesky", x)
    return ShapedArray(x.shape, x.dtype)


def _cholesky_impl(x, *, check_errors=None):
    low = gufunc("cholesky_lo", x)   # NaN for the matrices where potrf failed
    # potrf's comparisons pass NaN pivots: a non-finite lower triangle fails too (all NaN)
    bad = ~np.isfinite(np.tril(x)).all(axis=(-2, -1))
    if bad.any():
        low = np.array(low)
        low[bad] = np.nan
    if check_errors:
        raise_on_info(check_errors, info_of("potrf", x, low), x.shape, "potrf")
    return low


cholesky_p.impl = _low_precision(_cholesky_impl)
cholesky_p.abstract_eval = _cholesky_abstract


def cholesky(x, /, *, upper=False, check_errors=False):
    """Cholesky factor of Hermitian positive-definite matrices ``(*batch, n, n)``.

    Returns lower-triangular ``L`` with ``x = L @ L^H`` (or upper ``U = L^H`` with ``x = U^H @ U``
    when ``upper=True``). Only the lower triangle of ``x`` is read, or the upper one when
    ``upper=True`` (as NumPy), and the real part of the diagonal. Method: LAPACK ``potrf``.
    Derivative: Murray 2016 (see ``_cholesky_jvp``). ``x`` is taken as Hermitian, so its
    tangent is projected onto Hermitian matrices (``(t + t^H) / 2``, as JAX and PyTorch): the
    gradient is a Hermitian matrix, not a triangular one.

    A matrix that is not positive definite (or holds NaN) gets an all-NaN factor, the other
    matrices of the stack are unaffected, in eager and in compiled code alike; with
    ``check_errors=True`` evaluation on concrete values raises instead (``cholesky_ex`` also
    returns LAPACK's ``info``).

    Raises:
        ValueError: non-square matrices.
        LinAlgError: ``check_errors=True`` and a matrix is not positive definite (the message
            names the index of the first one in the stack).
    """
    return _cholesky("cholesky", x, upper, check_errors)[0]


def cholesky_ex(x, /, *, upper=False, check_errors=False):
    """``cholesky`` that also returns LAPACK's ``info`` (``torch.linalg.cholesky_ex``).

    Returns:
        ``(factor, info)``: ``factor`` as ``cholesky(x, upper=upper)`` and ``info`` int32
        ``(*batch,)``: 0 on success, ``k > 0`` when the leading minor of order ``k`` is not
        positive definite (LAPACK potrf).

    Raises:
        ValueError, LinAlgError: as ``cholesky``.
    """
    factor, x, low = _cholesky("cholesky_ex", x, upper, check_errors)
    return factor, lapack_info("potrf", x, low)


def _cholesky(op, x, upper, check_errors):
    """``(factor, a, low)``: the factor, and the matrix the primitive factored with its raw
    lower factor (for ``info``)."""
    x = as_inexact(op, x)
    check_matrix(op, x.shape, square=True)
    check_errors = errors_param(op, check_errors)
    if not upper:
        low = cholesky_p.bind(x, check_errors=check_errors)
        return low, x, low
    # U = chol(x^H)^H: the lower triangle of x^H is the (conjugated) upper triangle of x.
    x = mH(x)
    low = cholesky_p.bind(x, check_errors=check_errors)
    return mH(low), x, low


# ---- cholesky rules ----------------------------------------------------------------------------
# A = L L^H: dL = L Phi(L^{-1} dA L^{-H}) with Phi = strictly-lower part plus half the diagonal
# (Murray 2016, "Differentiation of the Cholesky decomposition", eq. 8), with dA = (T + T^H) / 2:
# the input is a Hermitian matrix (its tangent too), whichever triangle LAPACK reads; finite
# differences agree along Hermitian directions.

def _cholesky_jvp(primals, tangents, *, check_errors=None):
    (x,), (t,) = primals, tangents
    low = cholesky_p.bind(x, check_errors=check_errors)
    if type(t) is Zero:
        return low, Zero(tangent_aval(low.aval))
    n = x.shape[-1]
    tmp = solve_p.bind(low, symmetrize(t))   # L^{-1} dA
    m = solve_p.bind(low, mH(tmp))               # L^{-1} dA L^{-H} (dA is Hermitian)
    phi = m * tri(n, n, -1, m) + real_diag(m, 0.5)
    return low, mm(low, phi)


cholesky_p.jvp = _cholesky_jvp
batch_to_front(cholesky_p)
cholesky_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
