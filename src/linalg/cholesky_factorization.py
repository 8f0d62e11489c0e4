"""The Cholesky factorization: the ``cholesky`` primitive with its rules."""
from __future__ import annotations

import numpy as np

from ..core.ad_util import Zero, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ._common import (
    _check_inexact, _lapack, _low_precision, as_inexact, batch_to_front, check_matrix,
    symmetrize, mH, mm, real_diag, tri,
)
from .linear_solve import solve_p


cholesky_p = Primitive("cholesky", family="linalg")


def _cholesky_abstract(x):
    check_matrix("cholesky", x.shape, square=True)
    _check_inexact("cholesky", x)
    return ShapedArray(x.shape, x.dtype)


cholesky_p.impl = _low_precision(lambda x: _lapack("cholesky", np.linalg.cholesky, x))
cholesky_p.abstract_eval = _cholesky_abstract


def cholesky(x, /, *, upper=False):
    """Cholesky factor of Hermitian positive-definite matrices ``(*batch, n, n)``.

    Returns lower-triangular ``L`` with ``x = L @ L^H`` (or upper ``U = L^H`` with ``x = U^H @ U``
    when ``upper=True``). Only the lower triangle of ``x`` is read, or the upper one when
    ``upper=True`` (as NumPy), and the real part of the diagonal. Method: LAPACK ``potrf``.
    Derivative: Murray 2016 (see ``_cholesky_jvp``). ``x`` is taken as Hermitian, so its
    tangent is projected onto Hermitian matrices (``(t + t^H) / 2``, as JAX and PyTorch): the
    gradient is a Hermitian matrix, not a triangular one.

    Raises:
        ValueError: non-square matrices.
        LinAlgError: (eager / NumPy backend) a matrix is not positive definite.
    """
    x = as_inexact("cholesky", x)
    check_matrix("cholesky", x.shape, square=True)
    if not upper:
        return cholesky_p.bind(x)
    # U = chol(x^H)^H: the lower triangle of x^H is the (conjugated) upper triangle of x.
    return mH(cholesky_p.bind(mH(x)))


# ---- cholesky rules ----------------------------------------------------------------------------
# A = L L^H: dL = L Phi(L^{-1} dA L^{-H}) with Phi = strictly-lower part plus half the diagonal
# (Murray 2016, "Differentiation of the Cholesky decomposition", eq. 8), with dA = (T + T^H) / 2:
# the input is a Hermitian matrix (its tangent too), whichever triangle LAPACK reads; finite
# differences agree along Hermitian directions.

def _cholesky_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    low = cholesky_p.bind(x)
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
