"""General linear systems: the ``inv`` and ``solve`` primitives with their rules."""
from __future__ import annotations

import numpy as np

from ..core.ad_util import Zero, is_undefined, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ..arrays.ops import shape_lax
from ..arrays.ops.elementwise_family import broadcast_shapes, promote_operands
from ..arrays.ops.rules import bdim_to_front, move_axis
from ._common import (
    _check_inexact, _lapack, _low_precision, _shape_str, as_inexact, batch_to_front,
    check_matrix, mT, mm,
)


# ---- inv / solve -------------------------------------------------------------------------------

inv_p = Primitive("inv", family="linalg")


def _inv_abstract(x):
    check_matrix("inv", x.shape, square=True)
    _check_inexact("inv", x)
    return ShapedArray(x.shape, x.dtype)


inv_p.impl = _low_precision(lambda x: _lapack("inv", np.linalg.inv, x))
inv_p.abstract_eval = _inv_abstract


def inv(x, /):
    """Inverse of each matrix of a stack: ``(*batch, n, n) -> (*batch, n, n)``.

    LU factorization with partial pivoting then triangular solves (LAPACK ``gesv`` against the
    identity). Derivative: ``d inv(x) = -inv(x) dx inv(x)``.

    Raises:
        ValueError: ``x.ndim < 2`` or non-square matrices.
        LinAlgError: (eager / NumPy backend) a matrix is exactly singular.
    """
    x = as_inexact("inv", x)
    check_matrix("inv", x.shape, square=True)
    return inv_p.bind(x)


solve_p = Primitive("solve", family="linalg")


def _solve_abstract(a, b):
    check_matrix("solve", a.shape, square=True)
    _check_inexact("solve", a)
    if a.dtype != b.dtype:
        raise TypeError(f"solve: operands must have one dtype, got {a.dtype} and {b.dtype}")
    if len(b.shape) != len(a.shape) or b.shape[:-1] != a.shape[:-1]:
        raise ValueError(f"solve: b of shape {_shape_str(b.shape)} does not match a of shape "
                         f"{_shape_str(a.shape)} (expected {_shape_str(a.shape[:-1])} + (k,))")
    return ShapedArray(b.shape, b.dtype)


solve_p.impl = _low_precision(lambda a, b: _lapack("solve", np.linalg.solve, a, b))
solve_p.abstract_eval = _solve_abstract


def solve(x1, x2, /):
    """Solves ``x1 @ x = x2`` for ``x`` (Array API 2023.12 / NumPy 2 semantics).

    ``x2`` is a single vector only when it is 1-d: shape ``(n,)`` gives a result of shape
    ``(*batch, n)``. Otherwise ``x2`` is a stack of matrices ``(*batch2, n, k)``, its batch dims
    broadcast against those of ``x1`` (``(*batch1, n, n)``), and the result has shape
    ``(*broadcast(batch1, batch2), n, k)``. (A ``(*batch, n)`` stack of vectors must be written
    ``x2[..., None]``, as in NumPy >= 2.)

    Method: LU factorization with partial pivoting and two triangular solves (LAPACK ``gesv``).
    Derivative: ``dx = solve(x1, dx2 - dx1 @ x)``; the solve is linear in ``x2`` (its transpose is
    ``solve(x1^T, ct)``), and vmap over ``x2`` alone solves all right-hand sides at once.

    Raises:
        ValueError: non-square ``x1``, ``x2`` whose ``n`` dim does not match, batch dims that do
            not broadcast (messages name both shapes).
        LinAlgError: (eager / NumPy backend) a matrix is exactly singular.
    """
    a, b = promote_operands("solve", (x1, x2), "inexact")
    sa, sb = tuple(a.shape), tuple(b.shape)
    check_matrix("solve", sa, square=True)
    n = sa[-1]
    if len(sb) == 0 or (len(sb) == 1 and sb[0] != n) or (len(sb) >= 2 and sb[-2] != n):
        raise ValueError(f"solve: x2 of shape {sb} does not match x1 of shape {sa}: expected "
                         f"({n},) or (..., {n}, k)")
    if len(sb) == 1:
        b = shape_lax.broadcast_in_dim(b, sa[:-1] + (1,), (len(sa) - 2,))
        out = solve_p.bind(a, b)
        return shape_lax.reshape(out, sa[:-1])
    batch = broadcast_shapes("solve", sa[:-2], sb[:-2])
    nb = len(batch)
    if sa[:-2] != batch:
        a = shape_lax.broadcast_in_dim(a, batch + sa[-2:], tuple(range(nb - len(sa) + 2, nb + 2)))
    if sb[:-2] != batch:
        b = shape_lax.broadcast_in_dim(b, batch + sb[-2:], tuple(range(nb - len(sb) + 2, nb + 2)))
    return solve_p.bind(a, b)


# ---- inv / solve rules -------------------------------------------------------------------------
# d inv(A) = -inv(A) dA inv(A); x = A^{-1} b: dx = A^{-1} (db - dA x) (Giles 2008, sec. 2.2).
# solve is linear in b; its transpose is solve(A^T, ct) (the plain, non-conjugating transpose).

def _inv_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = inv_p.bind(x)
    if type(t) is Zero:
        return y, Zero(tangent_aval(y.aval))
    return y, -mm(mm(y, t), y)


def _solve_jvp(primals, tangents):
    (a, b), (ta, tb) = primals, tangents
    x = solve_p.bind(a, b)
    rhs = tb
    if type(ta) is not Zero:
        rhs = -mm(ta, x) if type(tb) is Zero else tb - mm(ta, x)
    if type(rhs) is Zero:
        return x, Zero(tangent_aval(x.aval))
    return x, solve_p.bind(a, rhs)


def _solve_transpose(ct, a, b):
    if is_undefined(a):
        raise ValueError("solve: not linear in the matrix x1 (only in the right-hand side x2), "
                         "so it cannot be transposed with respect to it")
    if type(ct) is Zero:
        return [None, Zero(tangent_aval(b.aval))]
    return [None, solve_p.bind(mT(a), ct)]


def _solve_batch(args, dims):
    (a, b), (da, db) = args, dims
    if da is not None:
        return solve_p.bind(move_axis(a, da, 0), bdim_to_front(b, db, a.shape[da])), 0
    # Only b is batched: the batch becomes extra right-hand sides of one solve (one LU).
    b = move_axis(b, db, b.ndim - 1)
    shape = tuple(b.shape)
    x = solve_p.bind(a, shape_lax.reshape(b, shape[:-2] + (shape[-2] * shape[-1],)))
    return shape_lax.reshape(x, shape), len(shape) - 1


inv_p.jvp = _inv_jvp
batch_to_front(inv_p)
inv_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
solve_p.jvp = _solve_jvp
solve_p.transpose = _solve_transpose
solve_p.is_linear = True
solve_p.batch = _solve_batch


def _solve_sharding(in_avals, out_avals):
    # Besides the batch dims: the right-hand sides (columns of b) are solved independently, and
    # the solve is linear in b (a pending sum of b gives one of x).
    k = len(in_avals[1].shape) - 1
    extra = [((RS.Partial("sum"),), (RS.R, RS.Partial("sum")))]
    if in_avals[1].shape[k] > 1:
        extra.append(((RS.Shard(k),), (RS.R, RS.Shard(k))))
    return RS.batch_dims(2)(in_avals, out_avals) + extra


solve_p.sharding = _solve_sharding


# ---- cholesky ----------------------------------------------------------------------------------

