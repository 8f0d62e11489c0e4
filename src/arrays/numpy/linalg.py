"""``starling.numpy.linalg``: the Array API linear-algebra extension (2023.12) plus NumPy names.

The decompositions, solvers, norms and matrix functions live in ``starling.linalg`` (src/linalg/,
where their derivative conventions, dtype policy and error behaviour are documented) and are
re-exported here; the contractions come from src/arrays/ops/linear.py (dot_general). Everything
works under every transformation (grad, vmap, jit, ...).
"""
from __future__ import annotations

import operator

from ...linalg import (  # noqa: F401
    EigResult, EighResult, LinAlgError, LstsqResult, QRResult, SlogdetResult, SVDResult,
    cholesky, cond, det, eig, eigh, eigvals, eigvalsh, inv, lstsq, matrix_norm, matrix_power,
    matrix_rank, multi_dot, norm, pinv, qr, slogdet, solve, svd, svdvals, tensorinv, tensorsolve,
    vector_norm,
)
from ...linalg._common import check_matrix
from ..convert import operand
from ..ops.linear import _diagonal, cross, matmul, snp, tensordot, vecdot  # noqa: F401
from ..ops.linear import outer as _flat_outer

__all__ = [
    "LinAlgError", "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals",
    "eigvalsh", "inv", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank",
    "matrix_transpose", "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd",
    "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm",
]


def matrix_transpose(x, /):
    """Swaps the last two dims: ``(*batch, m, n) -> (*batch, n, m)`` (see starling.numpy)."""
    return snp.matrix_transpose(x)


def outer(x1, x2, /):
    """Outer product of two 1-d arrays: ``(m,), (n,) -> (m, n)`` (Array API ``linalg.outer``).

    Raises:
        ValueError: an operand is not 1-d (``starling.numpy.outer`` flattens instead).
    """
    x1, x2 = operand(x1, "outer"), operand(x2, "outer")
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"outer: operands must be 1-d, got shapes {tuple(x1.shape)} and "
                         f"{tuple(x2.shape)}")
    return _flat_outer(x1, x2)


def diagonal(x, /, *, offset=0):
    """Diagonals of the last two dims: ``(*batch, m, n) -> (*batch, k)`` (Array API).

    ``offset > 0`` selects a superdiagonal, ``< 0`` a subdiagonal; ``k`` is its length (0 when
    the offset is outside the matrix).

    Raises:
        ValueError: ``x.ndim < 2``.
    """
    x = operand(x, "diagonal")
    check_matrix("diagonal", x.shape)
    nd = x.ndim
    return _diagonal(x, nd - 2, nd - 1, operator.index(offset))


def trace(x, /, *, offset=0, dtype=None):
    """Sum of the diagonals of the last two dims: ``(*batch, m, n) -> (*batch)`` (Array API).

    Args:
        offset: which diagonal (as in ``diagonal``).
        dtype: accumulation/result dtype; default: the dtype of ``x``, except that bool and
            signed integers accumulate in int64 and unsigned integers in uint64 (as ``sum``).
    Raises:
        ValueError: ``x.ndim < 2``.
    """
    x = operand(x, "trace")
    check_matrix("trace", x.shape)
    nd = x.ndim
    d = _diagonal(x, nd - 2, nd - 1, operator.index(offset))
    return snp.sum(d, axis=-1, dtype=dtype)
