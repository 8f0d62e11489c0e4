"""``starling.numpy.linalg``: the Array API linear-algebra extension (2023.12) plus NumPy names.

Decompositions and solvers are primitives declared in src/arrays/ops/linalg_basic.py (det,
slogdet, inv, solve, cholesky) and linalg_decomp.py (qr, svd, eigh); contractions come from
src/arrays/ops/linear.py (dot_general). Everything here is a composition of those and of the
public elementwise, reduction and shape ops, so it works under every transformation (grad,
vmap, ...); the derivative conventions and limitations of the primitives (singular ``det``,
degenerate ``eigh`` / ``svd``, the complex eigenvector gauge) are documented there.

Dtype policy: bool / integer inputs are promoted to float32 (the default float); float16 and
bfloat16 are computed in float32 and rounded back. Singular inputs: ``det`` gives 0, ``slogdet``
gives (0, -inf); ``inv`` / ``solve`` raise ``LinAlgError`` in eager mode (see linalg_basic).
"""
from __future__ import annotations

from ..ops.axes import normalize_axes

import math
import operator

import numpy as np

from ...core import dtypes
from ..array import wrap
from ..convert import operand
from ..ops import shape_lax
from ..ops.linalg_basic import (  # noqa: F401
    EighResult, LinAlgError, QRResult, SlogdetResult, SVDResult, as_inexact, check_matrix,
    cholesky, det, inv, slogdet, solve,
)
from ..ops.linalg_decomp import eigh, eigvalsh, pinv_p, qr, svd, svdvals  # noqa: F401
from ..ops.linear import _bind, _diagonal, cross, matmul, snp, tensordot, vecdot
from ..ops.linear import outer as _flat_outer

__all__ = [
    "LinAlgError", "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
    "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm",
    "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace",
    "vecdot", "vector_norm",
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


# ---- norms -------------------------------------------------------------------------------------

def _real_abs(x):
    return snp.abs(x)


def _sumsq(a, axis, keepdims):
    return snp.sum(a * a, axis=axis, keepdims=keepdims)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    """Vector p-norm over ``axis`` (Array API ``vector_norm``): ``(sum |x|^p)^(1/p)``.

    Args:
        x: array (bool/int promote to float32).
        axis: None (all elements, as one flattened vector), an int or a tuple of ints.
        keepdims: keep the reduced dims as size 1.
        ord: ``2`` (default, Euclidean), ``1``, ``inf`` (max ``|x|``), ``-inf`` (min ``|x|``),
            ``0`` (number of non-zeros), or any other real p (including negative p).
    Returns:
        Array in the real dtype of ``x`` (float32 for integer input).
    Raises:
        ValueError: bad axis or ``ord``; ``ord=inf/-inf`` over an empty reduction.
    """
    x = as_inexact("vector_norm", x)
    axes = normalize_axes("vector_norm", axis, x.ndim)
    if isinstance(ord, str):
        raise ValueError(f"vector_norm: invalid norm order {ord!r} for vectors")
    return _vector_norm(x, axes, keepdims, 2 if ord is None else ord)


def _vector_norm(x, axes, keepdims, ord):  # noqa: A002
    if ord == 2 and len(axes) == x.ndim and not dtypes.is_complex(x.dtype):
        # The 2-norm of all elements is sqrt(x . x): one BLAS dot, as NumPy computes it.
        flat = shape_lax.reshape(x, (x.size,))
        out = snp.sqrt(_bind(flat, flat, (((0,), (0,)), ((), ()))))
        return shape_lax.reshape(out, (1,) * x.ndim) if keepdims else out
    a = _real_abs(x)
    rdt = a.dtype
    if ord == 2:
        return snp.sqrt(_sumsq(a, axes, keepdims))
    if ord == math.inf:
        return snp.max(a, axis=axes, keepdims=keepdims)
    if ord == -math.inf:
        return snp.min(a, axis=axes, keepdims=keepdims)
    if ord == 0:
        return snp.sum(snp.astype(a != 0, rdt), axis=axes, keepdims=keepdims)
    if ord == 1:
        return snp.sum(a, axis=axes, keepdims=keepdims)
    if isinstance(ord, str) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise ValueError(f"vector_norm: invalid norm order {ord!r} for vectors (use a real "
                         "number, inf or -inf)")
    p = float(ord)
    return snp.sum(a ** p, axis=axes, keepdims=keepdims) ** (1.0 / p)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    """Matrix norm of the last two dims (Array API ``matrix_norm``): ``(*batch, m, n) ->
    (*batch)`` (or ``(*batch, 1, 1)`` with keepdims).

    Args:
        ord: "fro" (Frobenius, default), "nuc" (sum of singular values), ``2`` / ``-2``
            (largest / smallest singular value, from the SVD: LAPACK ``gesdd``), ``1`` / ``-1``
            (max / min column sum of ``|x|``), ``inf`` / ``-inf`` (max / min row sum).
    Returns:
        Array in the real dtype of ``x`` (float32 for integer input).
    Raises:
        ValueError: ``x.ndim < 2`` or an invalid ``ord``.
    """
    x = as_inexact("matrix_norm", x)
    check_matrix("matrix_norm", x.shape)
    nd = x.ndim
    return _matrix_norm(x, (nd - 2, nd - 1), keepdims, "fro" if ord is None else ord)


def _matrix_norm(x, axes, keepdims, ord):  # noqa: A002
    r, c = axes
    if ord == "fro":
        return snp.sqrt(_sumsq(_real_abs(x), axes, keepdims))
    if ord in ("nuc", 2, -2):
        nd = x.ndim
        rest = tuple(i for i in range(nd) if i not in axes)
        s = svdvals(shape_lax.transpose(x, rest + (r, c)))
        if ord == "nuc":
            out = snp.sum(s, axis=-1)
        elif ord == 2:
            out = snp.max(s, axis=-1)
        else:
            out = snp.min(s, axis=-1)
        if keepdims:
            shape = list(x.shape)
            shape[r] = shape[c] = 1
            out = shape_lax.reshape(out, tuple(shape))
        return out
    if ord in (1, -1, math.inf, -math.inf) and not isinstance(ord, bool):
        summed, other = (r, c) if ord in (1, -1) else (c, r)
        sums = snp.sum(_real_abs(x), axis=summed, keepdims=True)
        red = snp.max if ord > 0 else snp.min
        out = red(sums, axis=other, keepdims=True)
        if not keepdims:
            out = shape_lax.reshape(out, tuple(d for i, d in enumerate(out.shape)
                                               if i not in axes))
        return out
    raise ValueError(f"matrix_norm: invalid norm order {ord!r} for matrices (valid: 'fro', "
                     "'nuc', 1, -1, 2, -2, inf, -inf)")


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002
    """NumPy ``linalg.norm``: a vector or matrix norm depending on ``axis`` and ``ord``.

    * ``axis=None, ord=None``: 2-norm of all elements (Frobenius norm for matrices).
    * ``axis=None`` and ``ord`` given: ``x`` must be 1-d (vector norm) or 2-d (matrix norm).
    * ``axis`` an int: vector norm along it (see ``vector_norm`` for ``ord``).
    * ``axis`` a pair: matrix norm over those dims (see ``matrix_norm`` for ``ord``).

    Returns:
        Array in the real dtype of ``x`` (float32 for integer input); reduced dims kept as size 1
        with ``keepdims``.
    Raises:
        ValueError: invalid ``ord`` for the norm kind, bad axis, ``ord`` with ``x.ndim > 2`` and
            no axis.
    """
    x = as_inexact("norm", x)
    nd = x.ndim
    if axis is None:
        if ord is None:
            return _vector_norm(x, tuple(range(nd)), keepdims, 2)
        if nd not in (1, 2):
            raise ValueError(f"norm: ord={ord!r} with axis=None needs a 1-d or 2-d array, got "
                             f"shape {tuple(x.shape)}")
        axes = tuple(range(nd))
    else:
        axes = normalize_axes("norm", axis, nd)
    if len(axes) == 1:
        if isinstance(ord, str):
            raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
        return _vector_norm(x, axes, keepdims, 2 if ord is None else ord)
    if len(axes) == 2:
        return _matrix_norm(x, axes, keepdims, "fro" if ord is None else ord)
    raise ValueError(f"norm: axis must name 1 or 2 dims, got {axis!r}")


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


def matrix_power(x, n, /):
    """``x`` raised to the integer power ``n`` by repeated squaring (``matmul``):
    ``(*batch, m, m) -> (*batch, m, m)``.

    ``n == 0`` gives the identity (in the dtype of ``x``); ``n < 0`` inverts first (``inv``,
    promoting integers to float32). Integer matrices with ``n >= 0`` stay integer (wrapping).

    Raises:
        TypeError: ``n`` is not an integer. ValueError: non-square matrices.
    """
    x = operand(x, "matrix_power")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}") from None
    check_matrix("matrix_power", x.shape, square=True)
    if n == 0:
        eye = np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape)
        return wrap(np.array(eye), x.weak_type)
    if n < 0:
        x, n = inv(x), -n
    result = None
    power = x
    while True:
        if n & 1:
            result = power if result is None else matmul(result, power)
        n >>= 1
        if not n:
            return result
        power = matmul(power, power)


def multi_dot(arrays, *, preferred_element_type=None):
    """NumPy ``linalg.multi_dot``: ``arrays[0] @ arrays[1] @ ...`` in the cheapest order
    (dynamic programming over the chain, as in Cormen et al., "Introduction to Algorithms").

    The first array may be 1-d (a row vector) and the last 1-d (a column vector); the others must
    be 2-d.

    Raises:
        ValueError: fewer than two arrays, wrong ndims, or mismatched inner dims.
    """
    arrays = [operand(a, "multi_dot") for a in arrays]
    if len(arrays) < 2:
        raise ValueError(f"multi_dot: needs at least 2 arrays, got {len(arrays)}")
    first_1d, last_1d = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first_1d:
        arrays[0] = shape_lax.reshape(arrays[0], (1,) + tuple(arrays[0].shape))
    if last_1d:
        arrays[-1] = shape_lax.reshape(arrays[-1], tuple(arrays[-1].shape) + (1,))
    for i, a in enumerate(arrays):
        if a.ndim != 2:
            raise ValueError(f"multi_dot: array {i} must be 2-d (only the first and last may be "
                             f"1-d), got shape {tuple(a.shape)}")
    for i in range(len(arrays) - 1):
        if arrays[i].shape[1] != arrays[i + 1].shape[0]:
            raise ValueError(f"multi_dot: shapes {tuple(arrays[i].shape)} and "
                             f"{tuple(arrays[i + 1].shape)} (arrays {i} and {i + 1}) do not "
                             "align")
    dims = [a.shape[0] for a in arrays] + [arrays[-1].shape[1]]
    order = _chain_order(dims)

    def build(i, j):
        if i == j:
            return arrays[i]
        k = order[i][j]
        return matmul(build(i, k), build(k + 1, j), preferred_element_type=preferred_element_type)

    out = build(0, len(arrays) - 1)
    if first_1d and last_1d:
        return shape_lax.reshape(out, ())
    if first_1d:
        return shape_lax.reshape(out, tuple(out.shape[1:]))
    if last_1d:
        return shape_lax.reshape(out, tuple(out.shape[:-1]))
    return out


def _chain_order(dims):
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split
