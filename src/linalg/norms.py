"""Vector and matrix norms."""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes
from ..arrays.ops import shape_lax
from ..arrays.ops.axes import normalize_axes
from ..arrays.ops.linear import _bind, snp
from ._common import as_inexact, check_matrix
from .singular_values import svdvals


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




# ---- cond --------------------------------------------------------------------------------------

def _is_cond_order(p):
    if p is None:
        return True
    if isinstance(p, str):
        return p in ("fro", "nuc")
    return isinstance(p, (int, float, np.integer, np.floating)) and not isinstance(p, bool) \
        and p in (2, -2, 1, -1, math.inf, -math.inf)


def cond(x, p=None):
    """Condition number of ``(*batch, m, n)`` matrices (NumPy ``linalg.cond``): ``(*batch)``.

    * ``p`` None or 2: ``S_max / S_min``; ``-2``: ``S_min / S_max``, from the singular values
      (LAPACK ``gesdd``); any ``m, n``.
    * ``p`` 1, -1, inf, -inf, "fro", "nuc": ``norm(x, p) * norm(inv(x), p)`` (LU inverse,
      LAPACK ``getrf`` / ``getri``); square matrices only.

    Singular matrices give ``inf`` (where the SVD or the LU factorization meets an exact zero;
    a numerically singular matrix gives a huge finite number, as in NumPy, since rounding
    rarely leaves an exact zero). Matrices with a NaN entry give NaN; with an inf entry (and no
    NaN) ``inf``. NumPy gives the same values, except that its SVD raises on NaN input and its
    ``"nuc"`` norm on a singular one.

    Returns:
        ``(*batch)`` in the real dtype of ``x`` (float32 for integer input).
    Derivatives: those of the formulas above where the result is finite (``1 / S_min`` and the
    norms' subgradients; see ``matrix_norm``); zero where it is inf or NaN.
    Raises:
        ValueError: ``x.ndim < 2`` or an invalid ``p`` (valid: None, 2, -2, 1, -1, inf, -inf,
            "fro", "nuc").
        LinAlgError: (a ValueError, as NumPy) non-square matrices for a ``p`` that needs the
            inverse, or matrices without entries (``m == 0`` or ``n == 0``).
    """
    from ._common import LinAlgError, _shape_str
    from .solve import inv
    x = as_inexact("cond", x)
    check_matrix("cond", x.shape)
    if not _is_cond_order(p):
        raise ValueError(f"cond: invalid norm order p={p!r} (valid: None, 2, -2, 1, -1, inf, "
                         "-inf, 'fro', 'nuc')")
    m, n = x.shape[-2:]
    if m == 0 or n == 0:
        raise LinAlgError(f"cond: not defined on matrices without entries, got shape "
                          f"{_shape_str(x.shape)}")
    svd_based = p is None or (not isinstance(p, str) and abs(p) == 2)
    if not svd_based and m != n:
        raise LinAlgError(f"cond: p={p!r} needs square matrices (it uses the inverse), got "
                          f"shape {_shape_str(x.shape)}")
    # Matrices with non-finite entries are replaced by the identity and their results set at
    # the end, so that no NaN reaches LAPACK (whose SVD raises on it) and the other matrices of
    # the stack are unaffected.
    finite = snp.all(snp.isfinite(x), axis=(-2, -1))
    has_nan = snp.any(snp.isnan(x), axis=(-2, -1))
    x = snp.where(finite[..., None, None], x, snp.eye(m, n, dtype=x.dtype))
    if svd_based:
        s = svdvals(x)
        num, den = (s[..., -1], s[..., 0]) if p == -2 else (s[..., 0], s[..., -1])
        zero = den == 0   # singular (or, for p = -2, zero): inf, with a zero derivative
        r = snp.where(zero, math.inf, num / snp.where(zero, 1, den))
    else:
        xinv = inv(x)   # NaN for the matrices whose LU meets an exact zero pivot
        singular = snp.any(snp.isnan(xinv), axis=(-2, -1))
        xinv = snp.where(singular[..., None, None], 0, xinv)
        r = _matrix_norm(x, (x.ndim - 2, x.ndim - 1), False, p) * \
            _matrix_norm(xinv, (x.ndim - 2, x.ndim - 1), False, p)
        r = snp.where(singular, math.inf, r)
    r = snp.where(~finite, math.inf, r)
    return snp.where(has_nan, math.nan, r)
