"""Linear least squares: ``lstsq``, composed from the pseudo-inverse (so its derivatives are the
Golub-Pereyra ones of ``pinv``) and the singular values."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..core import dtypes
from ..arrays.array import Array, wrap
from ..arrays.ops import shape_lax
from ..arrays.ops.elementwise_family import broadcast_shapes, promote_operands
from ..arrays.ops.linear import snp
from ._common import check_matrix, mm, to_batch
from .pseudo_inverse import _cutoff, pinv
from .singular_values import svdvals


class LstsqResult(NamedTuple):
    """``lstsq`` output (unpacks as NumPy's 4-tuple): ``solution`` ``(*batch, n[, k])``,
    ``residuals`` ``(*batch, k)`` or ``(*batch, 0)``, ``rank`` ``(*batch)`` int64,
    ``singular_values`` ``(*batch, min(m, n))``."""

    solution: Any
    residuals: Any
    rank: Any
    singular_values: Any


def lstsq(a, b, /, rcond=None):
    """Least-squares solution ``x`` minimizing ``||b - a @ x||_2`` (the minimum-norm one when
    ``a`` is rank-deficient), as ``numpy.linalg.lstsq`` (NumPy >= 2 defaults), batched.

    Shapes: ``a`` is ``(*batch_a, m, n)``. ``b`` is a single vector only when it is 1-d:
    ``(m,)`` gives ``x`` of shape ``(*batch_a, n)``; otherwise ``b`` is ``(*batch_b, m, k)``, its
    batch dims broadcast against ``a``'s (as in ``solve`` and ``torch.linalg.lstsq``), and ``x``
    is ``(*batch, n, k)``. NumPy accepts only 2-d ``a`` (it has no batch dims).

    Method: ``x = pinv(a, rtol=rcond) @ b`` from the SVD (LAPACK ``gesdd``; NumPy calls the
    SVD-based ``gelsd``, which computes the same minimum-norm solution), so singular values
    ``<= rcond * max(S)`` count as zero.

    Args:
        rcond: relative cutoff (a float, or an array broadcasting against ``(*batch)``);
            default ``max(m, n) * eps`` of the dtype (NumPy >= 2); a negative value means
            ``eps`` (as LAPACK ``gelsd``).
    Returns:
        ``LstsqResult(solution, residuals, rank, singular_values)``, a named 4-tuple:

        * ``residuals``: squared 2-norms ``sum |b - a @ x|^2`` of each column, real dtype, shape
          ``(*batch, k)`` (``(*batch, 1)`` for a 1-d ``b``) when ``m > n``, else
          ``(*batch, 0)``. As NumPy, on concrete (eager) input they are empty ``(*batch, 0)``
          too when some matrix has ``rank < n``; inside ``jit`` / ``vmap`` / ``grad`` the rank
          is not known when shapes are fixed, so there the residuals keep the shape
          ``(*batch, k)`` and hold the residuals of the minimum-norm solution.
        * ``rank``: int64 ``(*batch)`` (NumPy: a C int): the number of singular values above
          the cutoff.
        * ``singular_values``: ``(*batch, min(m, n))``, real dtype, descending.
    Derivatives: ``x`` through ``pinv`` (Golub & Pereyra 1973, valid where the rank is
    locally constant), linear in ``b``; residuals through ``x``; singular values as
    ``svdvals`` (distinct values); rank is piecewise constant (zero tangent).
    Raises:
        ValueError: ``a.ndim < 2``; ``b``'s ``m`` dim does not match ``a``'s; batch dims that
            do not broadcast (the messages name both shapes).
    """
    a, b = promote_operands("lstsq", (a, b), "inexact")
    sa, sb = tuple(a.shape), tuple(b.shape)
    check_matrix("lstsq", sa)
    m, n = sa[-2:]
    if len(sb) == 0 or (len(sb) == 1 and sb[0] != m) or (len(sb) >= 2 and sb[-2] != m):
        raise ValueError(f"lstsq: b of shape {sb} does not match a of shape {sa}: expected "
                         f"({m},) or (..., {m}, k)")
    vector = len(sb) == 1
    if vector:
        b = shape_lax.reshape(b, (m, 1))
        sb = (m, 1)
    batch = broadcast_shapes("lstsq", sa[:-2], sb[:-2])
    rtol = _rtol(rcond, m, n, a.dtype)
    if not isinstance(rtol, float):   # an array of cutoffs may have the batch dims of b
        a = to_batch(a, batch)
    # a keeps its own batch dims: one SVD per matrix of a, whatever b's batch (so that vmap
    # over b alone, or many right-hand sides, share one factorization); matmul broadcasts
    s = svdvals(a)
    x = mm(pinv(a, rtol=rtol), b)
    if min(m, n) == 0:
        rank = wrap(np.zeros(tuple(a.shape[:-2]), np.int64), False)
    else:
        rank = snp.sum(snp.astype(s > _cutoff(s, rtol, a), dtypes.int64), axis=-1)
    rank = snp.broadcast_to(rank, batch)
    s = snp.broadcast_to(s, batch + s.shape[-1:])
    resid = _residuals(a, b, x, rank, batch)
    if vector:
        x = shape_lax.reshape(x, batch + (n,))
    return LstsqResult(x, resid, rank, s)


def _rtol(rcond, m, n, dtype):
    eps = float(dtypes.finfo(dtypes.real_dtype(dtype)).eps)
    if rcond is None:
        return max(m, n) * eps
    if isinstance(rcond, (int, float, np.integer, np.floating)):
        return eps if rcond < 0 else float(rcond)
    return rcond   # an array: pinv and _cutoff broadcast it against the batch dims


def _residuals(a, b, x, rank, batch):
    m, n = a.shape[-2:]
    rdt = dtypes.real_dtype(a.dtype)
    if m <= n or (type(rank) is Array and bool(np.any(np.asarray(rank) < n))):
        return wrap(np.zeros(batch + (0,), rdt), False)
    r = b - mm(a, x)
    # |r|^2 as re(conj(r) r): smooth at r = 0, where abs is not
    sq = snp.real(snp.conj(r) * r) if dtypes.is_complex(r.dtype) else r * r
    return snp.sum(sq, axis=-2)
