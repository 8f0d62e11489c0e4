"""LU factorization with partial pivoting: the ``lu`` primitive (packed factors, LAPACK pivots,
permutation, info) with its rules, the ``lu_pivots_to_permutation`` primitive, and the public
``lu_factor`` / ``lu_factor_ex`` / ``lu`` / ``lu_solve`` (PyTorch's ``torch.linalg`` names)."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ..arrays.ops import shape_lax
from ..arrays.ops.elementwise_family import broadcast_shapes, promote_operands
from ..arrays.ops.rules import defjvp_zero
from ._common import (
    _check_inexact, _low_precision, _shape_str, _snp, as_inexact, batch_to_front, check_matrix,
    const, errors_param, getrf, mm, raise_on_info, settle, to_batch, tri,
)
from .triangular import triangular_solve_p


class LUResult(NamedTuple):
    """``lu`` output: ``P`` ``(*batch, m, m)``, ``L`` ``(*batch, m, k)``, ``U`` ``(*batch, k, n)``
    with ``A = P @ L @ U`` and ``k = min(m, n)``."""

    P: Any
    L: Any
    U: Any


class LUFactorResult(NamedTuple):
    """``lu_factor`` output: packed ``LU`` ``(*batch, m, n)`` and int32 ``pivots``
    ``(*batch, min(m, n))`` (1-based, LAPACK's ``ipiv``)."""

    LU: Any
    pivots: Any


class LUFactorExResult(NamedTuple):
    """``lu_factor_ex`` output: ``LU`` and ``pivots`` as ``lu_factor``, int32 ``info``
    ``(*batch,)``."""

    LU: Any
    pivots: Any
    info: Any


# ---- lu ----------------------------------------------------------------------------------------

lu_p = Primitive("lu", multiple_results=True, family="linalg")


def _lu_abstract(a, *, pivot, check_errors=None):
    check_matrix("lu", a.shape)
    _check_inexact("lu", a)
    *batch, m, n = a.shape
    batch = tuple(batch)
    return [ShapedArray(a.shape, a.dtype), ShapedArray(batch + (min(m, n),), dtypes.int32),
            ShapedArray(batch + (m,), dtypes.int32), ShapedArray(batch, dtypes.int32)]


def _ipiv_to_perm(ipiv, m):
    """The row permutation ``perm`` (0-based, ``a[perm] = L @ U``) of LAPACK's 1-based
    ``ipiv`` (*batch, k): the swaps applied in order to ``arange(m)``, vectorised over the
    stack."""
    batch, k = ipiv.shape[:-1], ipiv.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    perm = np.broadcast_to(np.arange(m, dtype=np.int32), batch + (m,)).reshape(count, m).copy()
    piv = ipiv.reshape(count, k).astype(np.intp) - 1
    rows = np.arange(perm.shape[0])
    for i in range(k):
        j = piv[:, i]
        held = perm[rows, i]
        perm[rows, i] = perm[rows, j]
        perm[rows, j] = held
    return perm.reshape(batch + (m,))


def _lu_nopivot(a):
    """Doolittle LU without row exchanges, vectorised over the stack (one step per column);
    info = the first exactly zero pivot (1-based), after which the factorization is undefined."""
    m, n = a.shape[-2:]
    lu = np.array(a.reshape((int(np.prod(a.shape[:-2], dtype=np.int64)), m, n)), copy=True)
    info = np.zeros(lu.shape[0], np.int32)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(min(m, n)):
            zero = (lu[:, j, j] == 0) & (info == 0)
            info[zero] = j + 1
            lu[:, j + 1:, j] /= lu[:, j, j, None]
            lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j, None] * lu[:, j, None, j + 1:]
    return lu.reshape(a.shape), info.reshape(a.shape[:-2])


def _lu_impl(a, *, pivot, check_errors=None):
    m, n = a.shape[-2:]
    k = min(m, n)
    if pivot:
        lu, ipiv, info = getrf(a)
        # getrf completes on singular input (info > 0 flags an exactly zero pivot of U): the
        # factors are exact, so they are kept; check_errors raises.
        if check_errors:
            raise_on_info(check_errors, info, a.shape, "getrf")
        perm = _ipiv_to_perm(ipiv, m)
    else:
        lu, info = _lu_nopivot(a)
        (lu,) = settle([lu], info, a.shape, "nopivot", check_errors)
        ipiv = np.broadcast_to(np.arange(1, k + 1, dtype=np.int32), a.shape[:-2] + (k,))
        perm = np.broadcast_to(np.arange(m, dtype=np.int32), a.shape[:-2] + (m,))
    return [lu, np.ascontiguousarray(ipiv), np.ascontiguousarray(perm), info]


lu_p.abstract_eval = _lu_abstract
lu_p.impl = _low_precision(_lu_impl)


def lu_factor(A, *, pivot=True, check_errors=False):  # noqa: N803
    """Packed LU factorization with partial pivoting (``torch.linalg.lu_factor``).

    Args:
        A: ``(*batch, m, n)``, float32 / float64 / complex64 / complex128 (bool and integers
            promote to float32; float16 / bfloat16 are computed in float32).
        pivot: ``False`` factors without row exchanges (fails on a zero pivot).
        check_errors: raise LinAlgError (on concrete values) when a pivot is exactly zero.

    Returns:
        ``LUFactorResult(LU, pivots)``: ``LU`` ``(*batch, m, n)`` holds ``U`` in its upper
        triangle and the strictly lower part of the unit-lower ``L``; ``pivots`` int32
        ``(*batch, min(m, n))`` are LAPACK's **1-based** row interchanges (row ``i`` was swapped
        with row ``pivots[i] - 1``, in order), as in PyTorch (SciPy's ``lu_factor`` returns them
        0-based).

    A singular matrix is not a failure here: LAPACK completes the factorization with an exactly
    zero pivot on ``U``'s diagonal and the factors are returned (``lu_solve`` then gives NaN for
    that matrix). With ``pivot=False`` a zero pivot leaves no factorization: that matrix's
    ``LU`` is NaN.

    Method: LAPACK ``getrf`` (per matrix through scipy.linalg.lapack: SciPy has no batched
    getrf). Derivative: de Hoog, Anderssen and Lukas 2011, "Differentiation of matrix
    functionals using triangular factorization": with ``M = L^{-1} P^T dA U^{-1}``,
    ``dL = L tril(M, -1)`` and ``dU = triu(M) U`` (``L`` and ``U`` padded to square with the
    identity for rectangular input); the pivots have zero tangents.

    Raises:
        ValueError: ``A.ndim < 2``.
        LinAlgError: ``check_errors=True`` and a pivot is exactly zero (the message names the
            index of the first such matrix in the stack).
    """
    lu, piv, _, _ = _lu("lu_factor", A, pivot, check_errors)
    return LUFactorResult(lu, piv)


def lu_factor_ex(A, *, pivot=True, check_errors=False):  # noqa: N803
    """``lu_factor`` that also returns LAPACK's ``info`` (``torch.linalg.lu_factor_ex``).

    Returns:
        ``LUFactorExResult(LU, pivots, info)``: ``info`` int32 ``(*batch,)`` is 0 on success and
        ``k > 0`` when the pivot ``U[k-1, k-1]`` is exactly zero (getrf's info).

    Raises:
        ValueError, LinAlgError: as ``lu_factor``.
    """
    lu, piv, _, info = _lu("lu_factor_ex", A, pivot, check_errors)
    return LUFactorExResult(lu, piv, info)


def lu(A, *, pivot=True, check_errors=False):  # noqa: N803
    """LU factorization with partial pivoting ``A = P @ L @ U`` (``torch.linalg.lu``,
    ``scipy.linalg.lu``), for square and rectangular matrices.

    Args:
        A: ``(*batch, m, n)``; dtypes as ``lu_factor``.

    Returns:
        ``LUResult(P, L, U)``: permutation matrix ``P`` ``(*batch, m, m)`` in ``A``'s dtype,
        unit lower-triangular ``L`` ``(*batch, m, k)`` and upper-triangular ``U``
        ``(*batch, k, n)``, ``k = min(m, n)``. Singular input and ``pivot=False`` as in
        ``lu_factor``. Derivatives of ``L`` and ``U`` come from ``lu_factor``'s rule.

    Raises:
        ValueError, LinAlgError: as ``lu_factor``.
    """
    packed, _, perm, _ = _lu("lu", A, pivot, check_errors)
    snp = _snp()
    m, n = packed.shape[-2:]
    k = min(m, n)
    rows = shape_lax.broadcast_in_dim(snp.arange(m, dtype=np.int32), perm.shape + (m,),
                                      (perm.ndim - 1,))
    p = snp.astype(rows == snp.expand_dims(perm, -2), packed.dtype)
    low = (packed * tri(m, n, -1, packed))[..., :, :k] + const(np.eye(m, k), packed)
    up = (packed * tri(m, n, 0, packed, upper=True))[..., :k, :]
    return LUResult(p, low, up)


def _lu(op, a, pivot, check_errors):
    a = as_inexact(op, a)
    check_matrix(op, a.shape)
    return lu_p.bind(a, pivot=bool(pivot), check_errors=errors_param(op, check_errors))


# ---- lu rules ----------------------------------------------------------------------------------

def _padded_factors(packed):
    """``L`` (m, m) and ``U`` (n, n) from the packed factors, padded with the identity."""
    snp = _snp()
    m, n = packed.shape[-2:]
    k = min(m, n)
    nd = packed.ndim
    low = (packed * tri(m, n, -1, packed))[..., :, :k]
    if m > k:
        low = snp.pad(low, [(0, 0)] * (nd - 1) + [(0, m - k)])
    up = (packed * tri(m, n, 0, packed, upper=True))[..., :k, :]
    if n > k:
        up = snp.pad(up, [(0, 0)] * (nd - 2) + [(0, n - k), (0, 0)])
    eye_low = const(np.eye(m), packed)
    eye_up = const(np.diag((np.arange(n) >= k).astype(float)), packed)
    return low + eye_low, up + eye_up


def _lu_jvp(primals, tangents, **params):
    (a,), (t,) = primals, tangents
    outs = lu_p.bind(a, **params)
    packed, perm = outs[0], outs[2]
    zeros = [Zero(tangent_aval(o.aval)) for o in outs[1:]]
    if type(t) is Zero:
        return outs, [Zero(tangent_aval(packed.aval))] + zeros
    snp = _snp()
    m, n = a.shape[-2:]
    x = snp.take_along_axis(t, snp.broadcast_to(snp.expand_dims(perm, -1), perm.shape + (n,)),
                            axis=-2)                                      # P^T dA
    low, up = _padded_factors(packed)
    flags = dict(lower=True, transpose_a=False, conjugate_a=False, check_errors=None)
    la = triangular_solve_p.bind(low, x, left_side=True, unit_diagonal=True, **flags)
    mat = triangular_solve_p.bind(up, la, left_side=False, unit_diagonal=False,
                                  **dict(flags, lower=False))             # L^{-1} P^T dA U^{-1}
    dlu = mm(low, mat * tri(m, n, -1, mat)) + mm(mat * tri(m, n, 0, mat, upper=True), up)
    return outs, [dlu] + zeros


lu_p.jvp = _lu_jvp
batch_to_front(lu_p)
lu_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own


# ---- lu_pivots_to_permutation ------------------------------------------------------------------

lu_pivots_to_permutation_p = Primitive("lu_pivots_to_permutation", family="linalg")


def _pivots_abstract(pivots, *, m):
    if not dtypes.is_integer(pivots.dtype) or len(pivots.shape) < 1 or pivots.shape[-1] > m:
        raise TypeError(f"lu_pivots_to_permutation: expected integer pivots (..., k) with "
                        f"k <= {m}, got {pivots.dtype} of shape {_shape_str(pivots.shape)}")
    return ShapedArray(tuple(pivots.shape[:-1]) + (m,), dtypes.int32)


def _pivots_impl(pivots, *, m):
    pivots = np.asarray(pivots)
    if pivots.size and (pivots.min() < 1 or pivots.max() > m):
        raise ValueError(f"lu_solve: pivots must be LAPACK's 1-based row indices in [1, {m}], "
                         f"got values in [{pivots.min()}, {pivots.max()}]")
    return _ipiv_to_perm(pivots, m)


lu_pivots_to_permutation_p.abstract_eval = _pivots_abstract
lu_pivots_to_permutation_p.impl = _pivots_impl
defjvp_zero(lu_pivots_to_permutation_p)   # an integer output
batch_to_front(lu_pivots_to_permutation_p)
lu_pivots_to_permutation_p.sharding = RS.batch_dims(1)


# ---- lu_solve ----------------------------------------------------------------------------------

def lu_solve(LU, pivots, B, *, left=True, adjoint=False, check_errors=False):  # noqa: N803
    """Solves ``A X = B`` from the LU factorization of ``A`` (``torch.linalg.lu_solve``).

    Args:
        LU: ``(*batch_lu, n, n)`` packed factors and ``pivots`` int ``(*batch_lu, n)`` (1-based)
            from ``lu_factor``.
        B: ``(*batch_b, n, k)`` (``left``) or ``(*batch_b, k, n)``; batch dims broadcast.
        left: solve ``A X = B`` (True) or ``X A = B``.
        adjoint: solve with ``A^H`` in place of ``A``.
        check_errors: raise LinAlgError (on concrete values) when ``U`` has an exactly zero
            diagonal entry.

    Returns:
        ``X`` with ``B``'s shape (broadcast batch dims): a permutation and two triangular solves
        (LAPACK ``getrs``), so its derivatives with respect to ``LU`` and ``B`` come from
        ``triangular_solve``'s rules. A singular factor (zero on ``U``'s diagonal) gives an
        all-NaN ``X`` for that matrix, the others unaffected.

    Raises:
        ValueError: shapes that do not match (named in the message), pivots out of range.
        LinAlgError: ``check_errors=True`` and a factor is singular.
    """
    op = "lu_solve"
    snp = _snp()
    check_errors = errors_param(op, check_errors)
    lu_, b = promote_operands(op, (LU, B), "inexact")
    pivots = snp.asarray(pivots)
    sl, sb, sp = tuple(lu_.shape), tuple(b.shape), tuple(pivots.shape)
    check_matrix(op, sl, square=True)
    n = sl[-1]
    if len(sb) < 2 or sb[-2 if left else -1] != n:
        raise ValueError(f"{op}: B of shape {sb} does not match LU of shape {sl}: expected "
                         f"{'(..., %d, k)' % n if left else '(..., k, %d)' % n}")
    if sp != sl[:-1] or not dtypes.is_integer(pivots.dtype):
        raise ValueError(f"{op}: pivots must be integers of shape {sl[:-1]} (LU's shape "
                         f"{sl} without its last dim), got {pivots.dtype} of shape {sp}")
    batch = broadcast_shapes(op, sl[:-2], sb[:-2])
    lu_, pivots, b = to_batch(lu_, batch), to_batch(pivots, batch, core=1), to_batch(b, batch)
    perm = lu_pivots_to_permutation_p.bind(pivots, m=n)
    rows = -2 if left else -1          # the dim of B that the permutation acts on
    other = b.shape[-1 if left else -2]

    def permute(x, p):
        idx = snp.expand_dims(p, -1) if left else snp.expand_dims(p, -2)
        shape = p.shape + (other,) if left else p.shape[:-1] + (other, n)
        return snp.take_along_axis(x, snp.broadcast_to(idx, shape), axis=rows)

    def tri_solve(x, lower, herm, guard):
        return triangular_solve_p.bind(lu_, x, left_side=left, lower=lower, transpose_a=herm,
                                       conjugate_a=herm, unit_diagonal=lower,
                                       check_errors=check_errors if guard else None)

    if left != adjoint:
        # A X = B: X = U^{-1} L^{-1} P^T B;  X A^H = B: X = B P L^{-H} U^{-H}
        x = permute(b, perm)
        x = tri_solve(x, True, adjoint, False)
        return tri_solve(x, False, adjoint, True)
    # A^H X = B: X = P L^{-H} U^{-H} B;  X A = B: X = B U^{-1} L^{-1} P^T
    x = tri_solve(b, False, adjoint, True)
    x = tri_solve(x, True, adjoint, False)
    return permute(x, snp.argsort(perm, axis=-1))
