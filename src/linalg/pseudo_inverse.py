"""Pseudo-inverse and rank: the ``pinv`` primitive with its rules, ``matrix_rank``."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.array import wrap
from ..arrays.convert import operand
from ..arrays.ops import rules_sharding as RS
from ..arrays.ops import shape_lax
from ..arrays.ops.linear import snp
from ._common import (
    _check_inexact, _low_precision, _snp, as_inexact, check_matrix, lapack_or_nan, mH, mm,
    symmetrize,
)
from .hermitian_eigen import eigvalsh
from .norms import _real_abs
from .singular_values import svdvals


# ---- pinv ------------------------------------------------------------------------------------
# The pseudo-inverse is differentiated as itself (Golub & Pereyra, "The differentiation of
# pseudo-inverses and nonlinear least squares problems", SIAM J. Numer. Anal. 10, 1973, eq. 4.12):
#   dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P,
# valid wherever the rank is locally constant. Going through U, S, V instead would divide by
# differences of singular values: NaN at repeated ones (pinv(eye) has them all equal). With
# hermitian=True the tangent is replaced by its Hermitian part (the input is taken as Hermitian).

pinv_p = Primitive("pinv", family="linalg")


def _pinv_impl(x, rtol, *, hermitian):
    # matrices holding inf / NaN get NaN, the rest of the stack its values (NumPy raised)
    x = np.asarray(x)
    rtol = np.broadcast_to(np.asarray(rtol, dtype=np.float64), x.shape[:-2])
    return lapack_or_nan(lambda a, r: [np.linalg.pinv(a, rtol=r, hermitian=hermitian)], x,
                         per_matrix=(rtol,))[0]


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
        dx = symmetrize(dx)
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


# ---- pinv / matrix_rank / matrix_power / multi_dot ---------------------------------------------

def _default_rtol(x):
    m, n = x.shape[-2:]
    return max(m, n) * float(dtypes.finfo(dtypes.real_dtype(x.dtype)).eps)


def _mT(x):  # noqa: N802
    nd = x.ndim
    return shape_lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _conj(x):
    return snp.conj(x) if dtypes.is_complex(x.dtype) else x


def _cutoff(s, rtol, x):
    """``rtol * max(s)`` per matrix, shape ``(*batch, 1)``."""
    if rtol is None:
        rtol = _default_rtol(x)
    smax = snp.max(s, axis=-1, keepdims=True)
    if isinstance(rtol, (int, float)):
        return smax * float(rtol)
    rtol = operand(rtol, "pinv")
    return smax * shape_lax.reshape(rtol, tuple(rtol.shape) + (1,))


def pinv(x, /, rcond=None, hermitian=False, *, rtol=None):
    """Moore-Penrose pseudo-inverse ``(*batch, m, n) -> (*batch, n, m)`` from the SVD (LAPACK
    ``gesdd``; ``eigh`` when ``hermitian``): singular values ``<= rtol * max(S)`` are treated as
    zero.

    Derivatives are those of the pseudo-inverse itself (Golub & Pereyra 1973), valid wherever
    the rank is locally constant, not those of the singular vectors, so they stay finite where
    singular values repeat (``jvp(pinv, (eye(3),), (T,))`` is ``-T``, as for ``inv``).

    Args:
        rtol: relative cutoff (a float or an array broadcasting against ``(*batch)``); default
            ``max(m, n) * eps`` of the dtype (Array API; NumPy's legacy default is 1e-15).
        rcond: NumPy's older name for ``rtol``.
        hermitian: ``x`` is Hermitian: use the eigendecomposition.
    Raises:
        ValueError: ``x.ndim < 2``.
    """
    x = as_inexact("pinv", x)
    check_matrix("pinv", x.shape)
    if rtol is None:
        rtol = rcond
    m, n = x.shape[-2:]
    if m == 0 or n == 0:
        return wrap(np.zeros(tuple(x.shape[:-2]) + (n, m), x.dtype), False)
    if rtol is None:
        rtol = max(m, n) * float(np.finfo(dtypes.real_dtype(x.dtype)).eps)
    return pinv_p.bind(x, snp.asarray(rtol, dtype=np.float64), hermitian=bool(hermitian))


def matrix_rank(x, /, *, rtol=None, tol=None, hermitian=False):
    """Rank of ``(*batch, m, n)`` matrices: the number of singular values (LAPACK ``gesdd``)
    above ``max(tol, rtol * max(S))``.

    Args:
        rtol: relative tolerance; default ``max(m, n) * eps`` of the dtype (Array API).
        tol: absolute tolerance (NumPy); when given, ``rtol`` is ignored.
        hermitian: use ``|eigvalsh(x)|`` instead of the SVD.
    Returns:
        int64 array of shape ``(*batch)``.
    Raises:
        ValueError: ``x.ndim < 2``.
    """
    x = as_inexact("matrix_rank", x)
    check_matrix("matrix_rank", x.shape)
    if min(x.shape[-2:]) == 0:
        return wrap(np.zeros(tuple(x.shape[:-2]), np.int64), False)
    s = _real_abs(eigvalsh(x)) if hermitian else svdvals(x)
    if tol is not None:
        cut = tol if isinstance(tol, (int, float)) else shape_lax.reshape(
            operand(tol, "matrix_rank"), tuple(np.shape(tol)) + (1,))
    else:
        cut = _cutoff(s, rtol, x)
    return snp.sum(snp.astype(s > cut, dtypes.int64), axis=-1)


