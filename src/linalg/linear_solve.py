"""General linear systems: the ``inv`` and ``solve`` primitives with their rules, and the
``inv_ex`` / ``solve_ex`` variants that also return LAPACK's ``info``."""
from __future__ import annotations

from ..core.ad_util import Zero, is_undefined, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ..arrays.ops import shape_lax
from ..arrays.ops.elementwise_family import broadcast_shapes, promote_operands
from ..arrays.ops.rules import bdim_to_front, move_axis
from ._common import (
    _check_inexact, _low_precision, _shape_str, as_inexact, batch_to_front, check_matrix,
    errors_param, gufunc, info_of, lapack_info, mT, mm, raise_on_info, to_batch,
)


# ---- inv / solve -------------------------------------------------------------------------------

inv_p = Primitive("inv", family="linalg")


def _inv_abstract(x, *, check_errors=None):
    check_matrix("inv", x.shape, square=True)
    _check_inexact("inv", x)
    return ShapedArray(x.shape, x.dtype)


def _getrf_settled(a, out, check_errors):
    """``out``, computed by a NumPy gufunc (NaN for the matrices where getrf failed), after the
    check that ``check_errors`` asks for."""
    if check_errors:
        raise_on_info(check_errors, info_of("getrf", a, out), a.shape, "getrf")
    return out


inv_p.impl = _low_precision(
    lambda x, *, check_errors=None: _getrf_settled(x, gufunc("inv", x), check_errors))
inv_p.abstract_eval = _inv_abstract


def inv(x, /, *, check_errors=False):
    """Inverse of each matrix of a stack: ``(*batch, n, n) -> (*batch, n, n)``.

    LU factorization with partial pivoting then triangular solves (LAPACK ``gesv`` against the
    identity). Derivative: ``d inv(x) = -inv(x) dx inv(x)``.

    A matrix that is exactly singular (getrf finds a zero pivot) gets an all-NaN inverse, the
    other matrices of the stack are unaffected, in eager and in compiled code alike; with
    ``check_errors=True`` evaluation on concrete values raises instead (``inv_ex`` also returns
    LAPACK's ``info``).

    Raises:
        ValueError: ``x.ndim < 2`` or non-square matrices.
        LinAlgError: ``check_errors=True`` and a matrix is exactly singular (the message names
            the index of the first one in the stack).
    """
    x = as_inexact("inv", x)
    check_matrix("inv", x.shape, square=True)
    return inv_p.bind(x, check_errors=errors_param("inv", check_errors))


def inv_ex(x, /, *, check_errors=False):
    """``inv`` that also returns LAPACK's ``info`` (``torch.linalg.inv_ex``).

    Returns:
        ``(inverse, info)``: ``inverse`` as ``inv(x)`` (all NaN for a singular matrix) and
        ``info`` int32 ``(*batch,)``: 0 on success, ``k > 0`` when getrf's pivot ``U[k-1, k-1]``
        is exactly zero.

    Raises:
        LinAlgError: only with ``check_errors=True``, as ``inv``.
    """
    x = as_inexact("inv_ex", x)
    check_matrix("inv_ex", x.shape, square=True)
    y = inv_p.bind(x, check_errors=errors_param("inv_ex", check_errors))
    return y, lapack_info("getrf", x, y)


solve_p = Primitive("solve", family="linalg")


def _solve_abstract(a, b, *, check_errors=None):
    check_matrix("solve", a.shape, square=True)
    _check_inexact("solve", a)
    if a.dtype != b.dtype:
        raise TypeError(f"solve: operands must have one dtype, got {a.dtype} and {b.dtype}")
    if len(b.shape) != len(a.shape) or b.shape[:-1] != a.shape[:-1]:
        raise ValueError(f"solve: b of shape {_shape_str(b.shape)} does not match a of shape "
                         f"{_shape_str(a.shape)} (expected {_shape_str(a.shape[:-1])} + (k,))")
    return ShapedArray(b.shape, b.dtype)


solve_p.impl = _low_precision(
    lambda a, b, *, check_errors=None: _getrf_settled(a, gufunc("solve", a, b), check_errors))
solve_p.abstract_eval = _solve_abstract


def solve(x1, x2, /, *, check_errors=False):
    """Solves ``x1 @ x = x2`` for ``x`` (Array API 2023.12 / NumPy 2 semantics).

    ``x2`` is a single vector only when it is 1-d: shape ``(n,)`` gives a result of shape
    ``(*batch, n)``. Otherwise ``x2`` is a stack of matrices ``(*batch2, n, k)``, its batch dims
    broadcast against those of ``x1`` (``(*batch1, n, n)``), and the result has shape
    ``(*broadcast(batch1, batch2), n, k)``. (A ``(*batch, n)`` stack of vectors must be written
    ``x2[..., None]``, as in NumPy >= 2.)

    Method: LU factorization with partial pivoting and two triangular solves (LAPACK ``gesv``).
    Derivative: ``dx = solve(x1, dx2 - dx1 @ x)``; the solve is linear in ``x2`` (its transpose is
    ``solve(x1^T, ct)``), and vmap over ``x2`` alone solves all right-hand sides at once.

    A matrix ``x1`` that is exactly singular gives an all-NaN solution, the other matrices of
    the stack are unaffected (eager and compiled alike); ``check_errors=True`` raises instead.

    Raises:
        ValueError: non-square ``x1``, ``x2`` whose ``n`` dim does not match, batch dims that do
            not broadcast (messages name both shapes).
        LinAlgError: ``check_errors=True`` and a matrix is exactly singular (the message names
            the index of the first one in the stack).
    """
    return _solve("solve", x1, x2, check_errors)[0]


def solve_ex(x1, x2, /, *, check_errors=False):
    """``solve`` that also returns LAPACK's ``info`` (``torch.linalg.solve_ex``).

    Returns:
        ``(result, info)``: ``result`` as ``solve(x1, x2)`` and ``info`` int32 of the broadcast
        batch shape: 0 on success, ``k > 0`` when getrf's pivot ``U[k-1, k-1]`` of that ``x1``
        is exactly zero.

    Raises:
        ValueError, LinAlgError: as ``solve``.
    """
    x, a, out = _solve("solve_ex", x1, x2, check_errors)
    return x, lapack_info("getrf", a, out)


def _solve(op, x1, x2, check_errors):
    """``(x, a, out)``: the solution, and the broadcast ``a`` and the raw (*batch, n, k) result
    of the primitive (for ``info``)."""
    check_errors = errors_param(op, check_errors)
    a, b = promote_operands(op, (x1, x2), "inexact")
    sa, sb = tuple(a.shape), tuple(b.shape)
    check_matrix(op, sa, square=True)
    n = sa[-1]
    if len(sb) == 0 or (len(sb) == 1 and sb[0] != n) or (len(sb) >= 2 and sb[-2] != n):
        raise ValueError(f"{op}: x2 of shape {sb} does not match x1 of shape {sa}: expected "
                         f"({n},) or (..., {n}, k)")
    if len(sb) == 1:
        b = shape_lax.broadcast_in_dim(b, sa[:-1] + (1,), (len(sa) - 2,))
        out = solve_p.bind(a, b, check_errors=check_errors)
        return shape_lax.reshape(out, sa[:-1]), a, out
    batch = broadcast_shapes(op, sa[:-2], sb[:-2])
    a, b = to_batch(a, batch), to_batch(b, batch)
    out = solve_p.bind(a, b, check_errors=check_errors)
    return out, a, out


# ---- inv / solve rules -------------------------------------------------------------------------
# d inv(A) = -inv(A) dA inv(A); x = A^{-1} b: dx = A^{-1} (db - dA x) (Giles 2008, sec. 2.2).
# solve is linear in b; its transpose is solve(A^T, ct) (the plain, non-conjugating transpose).

def _inv_jvp(primals, tangents, *, check_errors=None):
    (x,), (t,) = primals, tangents
    y = inv_p.bind(x, check_errors=check_errors)
    if type(t) is Zero:
        return y, Zero(tangent_aval(y.aval))
    return y, -mm(mm(y, t), y)


def _solve_jvp(primals, tangents, *, check_errors=None):
    (a, b), (ta, tb) = primals, tangents
    x = solve_p.bind(a, b, check_errors=check_errors)
    rhs = tb
    if type(ta) is not Zero:
        rhs = -mm(ta, x) if type(tb) is Zero else tb - mm(ta, x)
    if type(rhs) is Zero:
        return x, Zero(tangent_aval(x.aval))
    return x, solve_p.bind(a, rhs)


def _solve_transpose(ct, a, b, *, check_errors=None):
    if is_undefined(a):
        raise ValueError("solve: not linear in the matrix x1 (only in the right-hand side x2), "
                         "so it cannot be transposed with respect to it")
    if type(ct) is Zero:
        return [None, Zero(tangent_aval(b.aval))]
    return [None, solve_p.bind(mT(a), ct)]


def _solve_batch(args, dims, **params):
    (a, b), (da, db) = args, dims
    if da is not None:
        return solve_p.bind(move_axis(a, da, 0), bdim_to_front(b, db, a.shape[da]), **params), 0
    # Only b is batched: the batch becomes extra right-hand sides of one solve (one LU).
    b = move_axis(b, db, b.ndim - 1)
    shape = tuple(b.shape)
    x = solve_p.bind(a, shape_lax.reshape(b, shape[:-2] + (shape[-2] * shape[-1],)), **params)
    return shape_lax.reshape(x, shape), len(shape) - 1


inv_p.jvp = _inv_jvp
batch_to_front(inv_p)
inv_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
solve_p.jvp = _solve_jvp
solve_p.transpose = _solve_transpose
solve_p.is_linear = True
solve_p.batch = _solve_batch


def _solve_sharding(in_avals, out_avals, **params):
    # Besides the batch dims: the right-hand sides (columns of b) are solved independently, and
    # the solve is linear in b (a pending sum of b gives one of x).
    k = len(in_avals[1].shape) - 1
    extra = [((RS.Partial("sum"),), (RS.R, RS.Partial("sum")))]
    if in_avals[1].shape[k] > 1:
        extra.append(((RS.Shard(k),), (RS.R, RS.Shard(k))))
    return RS.batch_dims(2)(in_avals, out_avals) + extra


solve_p.sharding = _solve_sharding


# ---- cholesky ----------------------------------------------------------------------------------

