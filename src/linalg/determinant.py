"""Determinants: the ``det`` and ``slogdet`` primitives with their JVP and batch rules."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.array import wrap
from ..arrays.ops import rules_sharding as RS
from ..arrays.ops import shape_lax
from ._common import (
    SlogdetResult, _check_inexact, _low_precision, _snp, as_inexact, batch_to_front,
    check_matrix, col, eye_of, imag_diag_part, mH, mT, mm, row, zeros_for,
)
from .linear_solve import inv_p


det_p = Primitive("det", family="linalg")


def _det_abstract(x):
    check_matrix("det", x.shape, square=True)
    _check_inexact("det", x)
    return ShapedArray(x.shape[:-2], x.dtype)


det_p.impl = _low_precision(lambda x: np.asarray(np.linalg.det(x)))
det_p.abstract_eval = _det_abstract

slogdet_p = Primitive("slogdet", multiple_results=True, family="linalg")


def _slogdet_abstract(x):
    check_matrix("slogdet", x.shape, square=True)
    _check_inexact("slogdet", x)
    batch = x.shape[:-2]
    return [ShapedArray(batch, x.dtype), ShapedArray(batch, dtypes.real_dtype(x.dtype))]


def _slogdet_impl(x):
    sign, logabs = np.linalg.slogdet(x)
    return [np.asarray(sign), np.asarray(logabs)]


slogdet_p.impl = _low_precision(_slogdet_impl)
slogdet_p.abstract_eval = _slogdet_abstract


def det(x, /):
    """Determinant of each matrix of a stack: ``(*batch, n, n) -> (*batch)``.

    Computed from an LU factorization with partial pivoting (LAPACK ``getrf``) as the product of
    the pivots times the permutation's sign. A singular matrix gives exactly 0 when a pivot is an
    exact zero. ``n == 0`` gives 1.

    Derivative: Jacobi's formula ``d det = trace(adj(x) dx)``, with the adjugate from ``det * inv``
    for well-conditioned ``x`` and from the SVD for singular / ill-conditioned ``x`` (so the
    gradient of a rank ``n-1`` matrix is its cofactor matrix, and 0 for lower rank). Second
    derivatives at singular matrices need distinct singular values (real input only).

    Args:
        x: floating or complex array (bool/int promote to float32; float16/bfloat16 are computed
            in float32 and rounded back).
    Returns:
        Array of shape ``(*batch)`` and the dtype of ``x``.
    Raises:
        ValueError: ``x.ndim < 2`` or non-square matrices (the message names the shape).
    """
    x = as_inexact("det", x)
    check_matrix("det", x.shape, square=True)
    return det_p.bind(x)


def slogdet(x, /):
    """Sign and natural log of the absolute determinant: ``(*batch, n, n)`` -> two ``(*batch)``.

    ``det(x) == sign * exp(logabsdet)`` without overflow. For a singular matrix ``sign`` is 0
    and ``logabsdet`` is ``-inf``. Computed from an LU factorization with partial pivoting
    (LAPACK ``getrf``): ``logabsdet`` is the sum of ``log|pivot|``.

    Derivative: ``d logabsdet = re trace(x^-1 dx)``, ``d sign = sign * i im trace(x^-1 dx)``
    (complex); NaN (no error) for a singular matrix.

    Returns:
        ``SlogdetResult(sign, logabsdet)``: ``sign`` has the dtype of ``x`` (for complex input a
        unit-modulus complex number), ``logabsdet`` the real dtype.
    Raises:
        ValueError: ``x.ndim < 2`` or non-square matrices.
    """
    x = as_inexact("slogdet", x)
    check_matrix("slogdet", x.shape, square=True)
    sign, logabs = slogdet_p.bind(x)
    return SlogdetResult(sign, logabs)


# ---- det / slogdet rules -----------------------------------------------------------------------
# Jacobi's formula: d det(A) = trace(adj(A) dA) (Giles 2008, "An extended collection of matrix
# derivative results for forward and reverse mode algorithmic differentiation", sec. 2.2.4);
# d log|det A| = re trace(A^{-1} dA) and, for complex A, d sign = sign * i im trace(A^{-1} dA).

def _det_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    d = det_p.bind(x)
    if type(t) is Zero or x.shape[-1] == 0:
        return d, Zero(tangent_aval(d.aval))
    return d, _snp().sum(mT(adjugate(x, d)) * t, axis=(-2, -1))


def adjugate(x, d):
    """The adjugate ``adj(x)`` (``= det(x) inv(x)`` when invertible) for every square ``x``:
    the transposed cofactor matrix for rank ``n-1``, zero for lower rank.

    Well-conditioned matrices use ``det * inv`` (LU). Singular or ill-conditioned ones (``det``
    exactly 0, or ``n * max|x| * max|inv(x)| > 1/sqrt(eps)``) use the SVD ``x = U diag(s) V^H``:
    ``adj(x) = det(U) det(V^H) V diag(c) U^H`` with ``c_i = prod_{j != i} s_j``, which needs no
    division. Traced code cannot branch on values, so both are computed and ``where`` selects;
    each branch sees a harmless stand-in where it is not selected (the identity for the
    inverse, ``diag(n, ..., 1)`` with distinct singular values for the SVD), so neither makes
    inf/NaN derivatives that reverse mode would multiply by zero.

    Second derivatives: exact through ``inv`` in the regular case; through the SVD rule in the
    singular case, so they need distinct singular values (and, for complex input, nonzero ones:
    a limitation shared with the SVD's gauge term).
    """
    from ..arrays.ops.autodiff import stop_gradient
    from .singular_values import svd_p
    snp = _snp()
    n = x.shape[-1]
    singular = col(col(d == 0))
    inv0 = inv_p.bind(snp.where(singular, eye_of(n, x), x))
    eps = float(dtypes.finfo(dtypes.real_dtype(x.dtype)).eps)
    big = snp.max(snp.abs(stop_gradient(x)), axis=(-2, -1), keepdims=True)
    kappa = big * snp.max(snp.abs(stop_gradient(inv0)), axis=(-2, -1), keepdims=True) * n
    use_svd = snp.logical_or(singular, kappa > float(1.0 / np.sqrt(eps)))
    regular = col(col(d)) * inv0
    stand_in = wrap(np.diag(np.arange(n, 0, -1)).astype(x.dtype), False)
    u, s, vh = svd_p.bind(snp.where(use_svd, x, stand_in), full_matrices=False, compute_uv=True)
    phase = slogdet_p.bind(u)[0] * slogdet_p.bind(vh)[0]
    adj = col(col(phase)) * mm(mH(vh) * row(products_of_others(s)), mH(u))
    return snp.where(use_svd, adj, regular)


def products_of_others(s):
    """``c_i = prod_{j != i} s_j`` along the last axis without division (exact when some
    ``s_j`` are 0): exclusive prefix times exclusive suffix products, each a log-depth
    doubling scan of multiplies (whose derivative is the product rule, also exact at 0)."""
    ax = s.ndim - 1
    return _exclusive_cumprod(s) * shape_lax.rev(_exclusive_cumprod(shape_lax.rev(s, (ax,))),
                                                 (ax,))


def _exclusive_cumprod(s):
    n, ax = s.shape[-1], s.ndim - 1

    def shift(x, k):  # x shifted right by k along the last axis, filled with ones
        ones = wrap(np.ones(tuple(x.shape[:-1]) + (k,), x.dtype), False)
        return shape_lax.concatenate([ones, shape_lax.slice_in_dim(x, 0, n - k, 1, ax)], ax)

    x = shift(s, 1)
    k = 1
    while k < n:
        x = x * shift(x, k)
        k *= 2
    return x


def _slogdet_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    sign, logabs = slogdet_p.bind(x)
    if type(t) is Zero or x.shape[-1] == 0:
        return [sign, logabs], zeros_for(slogdet_p, [sign, logabs])
    snp = _snp()
    # A singular matrix (sign 0, logabsdet -inf) has no derivative: NaN, without an error.
    singular = col(col(sign == 0))
    inv0 = inv_p.bind(snp.where(singular, eye_of(x.shape[-1], x), x))
    tr = snp.sum(snp.where(singular, np.nan, mT(inv0)) * t, axis=(-2, -1))  # trace(x^-1 t)
    if not dtypes.is_complex(x.dtype):
        return [sign, logabs], [Zero(tangent_aval(sign.aval)), tr]
    return [sign, logabs], [sign * imag_diag_part(tr), snp.real(tr)]


det_p.jvp = _det_jvp
slogdet_p.jvp = _slogdet_jvp
batch_to_front(det_p)
det_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
batch_to_front(slogdet_p)
slogdet_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
