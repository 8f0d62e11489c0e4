"""Vector and matrix norms."""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes
from ..arrays.array import Array
from ..arrays.ops import shape_lax
from ..arrays.ops.axes import normalize_axes
from ..arrays.ops.linear import _bind, snp
from ..arrays.ops.autodiff import stop_gradient
from ._common import LinAlgError, _shape_str, as_inexact, check_matrix, degenerate_tol
from .linear_solve import inv
from .singular_values import svdvals


# ---- norms -------------------------------------------------------------------------------------
# Subgradients: every norm is differentiable away from zeros; at a zero the derivative is the
# subgradient of smallest norm, 0, never the NaN of inf * 0 (``|x|`` at 0, ``sqrt`` of a zero
# sum, ``a ** p`` at 0 for p < 1, a zero entry with negative p): a "double where" swaps the
# operand for 1 under the non-smooth function and selects 0 for the value, so no infinity enters
# the derivative. Ties of max / min (ord inf / -inf, the 1 / inf matrix norms, the 2-norm's
# largest singular value) share the derivative equally (starling.numpy.max's rule).

def _real_abs(x):
    """``|x|``, with derivative 0 (not NaN) at 0 for complex ``x`` (real abs has sign(0) = 0)."""
    if not dtypes.is_complex(x.dtype):
        return snp.abs(x)
    zero = x == 0
    return snp.where(zero, 0, snp.abs(snp.where(zero, 1, x)))


def _sumsq(x, axis, keepdims):
    """``sum |x|^2`` written without ``abs`` (``re(conj(x) x)``): smooth at zeros."""
    sq = snp.real(snp.conj(x) * x) if dtypes.is_complex(x.dtype) else x * x
    return snp.sum(sq, axis=axis, keepdims=keepdims)


def _root_at_zero(s, q):
    """``s ** q`` (``q > 0``; ``sqrt`` for 1/2) of ``s >= 0``, 0 with derivative 0 at ``s = 0``."""
    zero = s == 0
    safe = snp.where(zero, 1, s)
    return snp.where(zero, 0, snp.sqrt(safe) if q == 0.5 else safe ** q)


def _empty_reduction(shape, axes):
    return any(shape[a] == 0 for a in axes)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    """Vector p-norm over ``axis`` (Array API ``vector_norm``): ``(sum |x|^p)^(1/p)``.

    Args:
        x: array (bool/int promote to float32).
        axis: None (all elements, as one flattened vector), an int or a tuple of ints.
        keepdims: keep the reduced dims as size 1.
        ord: ``2`` (default, Euclidean), ``1``, ``inf`` (max ``|x|``), ``-inf`` (min ``|x|``),
            ``0`` (number of non-zeros), or any other real p: for ``p < 0`` a zero entry makes
            the norm 0 (``0 ** p = inf``), as NumPy.
    Returns:
        Array in the real dtype of ``x`` (float32 for integer input). An empty reduction gives
        0 (``inf`` for ``p < 0``), as NumPy; NaN entries give NaN (not for ``ord=0``, which
        counts them as non-zero).
    Derivatives: a subgradient at zeros and ties (see the comment above ``_real_abs``): 0 at a
    zero vector and at zero entries (also for ``0 < p < 1`` and ``p < 0``, where the one-sided
    derivatives are infinite), ties of ``inf`` / ``-inf`` share equally; ``ord=0`` is piecewise
    constant (zero derivative).
    Raises:
        ValueError: bad axis or ``ord``; ``ord=-inf`` over an empty reduction (the minimum of
            nothing).
    """
    x = as_inexact("vector_norm", x)
    axes = normalize_axes("vector_norm", axis, x.ndim)
    if isinstance(ord, str):
        raise ValueError(f"vector_norm: invalid norm order {ord!r} for vectors")
    return _vector_norm(x, axes, keepdims, 2 if ord is None else ord)


def _vector_norm(x, axes, keepdims, ord):  # noqa: A002
    if isinstance(ord, (str, bool)) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise ValueError(f"vector_norm: invalid norm order {ord!r} for vectors (use a real "
                         "number, inf or -inf)")
    if ord == 2 and len(axes) == x.ndim and not dtypes.is_complex(x.dtype):
        # The 2-norm of all elements is sqrt(x . x): one BLAS dot, as NumPy computes it.
        flat = shape_lax.reshape(x, (x.size,))
        out = _root_at_zero(_bind(flat, flat, (((0,), (0,)), ((), ()))), 0.5)
        return shape_lax.reshape(out, (1,) * x.ndim) if keepdims else out
    if ord == 2:
        return _root_at_zero(_sumsq(x, axes, keepdims), 0.5)
    if _empty_reduction(x.shape, axes) and ord == math.inf:
        return snp.zeros(_reduced_shape(x.shape, axes, keepdims), dtypes.real_dtype(x.dtype))
    if _empty_reduction(x.shape, axes) and ord == -math.inf:
        raise ValueError(f"vector_norm: ord=-inf (the minimum of |x|) over an empty reduction: "
                         f"shape {tuple(x.shape)}, axes {axes}")
    a = _real_abs(x)
    rdt = a.dtype
    if ord == math.inf:
        return snp.max(a, axis=axes, keepdims=keepdims)
    if ord == -math.inf:
        return snp.min(a, axis=axes, keepdims=keepdims)
    if ord == 0:
        return snp.sum(snp.astype(a != 0, rdt), axis=axes, keepdims=keepdims)
    if ord == 1:
        return snp.sum(a, axis=axes, keepdims=keepdims)
    p = float(ord)
    zero = a == 0
    safe = snp.where(zero, 1, a) ** p
    if p < 0:   # a zero entry: 0 ** p = inf, and inf ** (1 / p) = 0 with derivative 0
        return snp.sum(snp.where(zero, math.inf, safe), axis=axes, keepdims=keepdims) ** (1 / p)
    return _root_at_zero(snp.sum(snp.where(zero, 0, safe), axis=axes, keepdims=keepdims), 1 / p)


def _reduced_shape(shape, axes, keepdims):
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    """Matrix norm of the last two dims (Array API ``matrix_norm``): ``(*batch, m, n) ->
    (*batch)`` (or ``(*batch, 1, 1)`` with keepdims).

    Args:
        ord: "fro" (Frobenius, default), "nuc" (sum of singular values), ``2`` / ``-2``
            (largest / smallest singular value, from the SVD: LAPACK ``gesdd``), ``1`` / ``-1``
            (max / min column sum of ``|x|``), ``inf`` / ``-inf`` (max / min row sum).
    Returns:
        Array in the real dtype of ``x`` (float32 for integer input). Matrices without entries
        give 0 (as NumPy >= 2.4 for ``2`` and ``inf``). For "nuc" / ``2`` / ``-2`` a matrix with
        a NaN or inf entry gives NaN (NumPy: NaN for inf, LinAlgError for NaN) and leaves the
        rest of the stack unaffected; the other orders propagate NaN / inf as NumPy.
    Derivatives: a subgradient at zeros and ties: 0 at the zero matrix for "fro" and at zero
    entries for 1 / inf; tied column / row sums and tied extreme singular values share the
    derivative equally (so it does not depend on the basis the SVD picks); singular values that
    are zero (to rounding) add their minimum-norm subgradient, 0: "nuc" at a singular matrix is
    ``U_r V_r^H`` over the nonzero singular values only, and "nuc" / ``2`` / ``-2`` at the zero
    matrix have derivative 0, in both modes and at every order.
    Raises:
        ValueError: ``x.ndim < 2``, an invalid ``ord``, or ``-2`` / ``-1`` / ``-inf`` (a
            minimum) over nothing (an ``m`` or ``n`` of 0).
    """
    x = as_inexact("matrix_norm", x)
    check_matrix("matrix_norm", x.shape)
    nd = x.ndim
    return _matrix_norm(x, (nd - 2, nd - 1), keepdims, "fro" if ord is None else ord)


def _matrix_norm(x, axes, keepdims, ord):  # noqa: A002
    r, c = axes
    if ord == "fro":
        return _root_at_zero(_sumsq(x, axes, keepdims), 0.5)
    if isinstance(ord, bool):
        pass
    elif ord in ("nuc", 2, -2):
        out = _singular_value_norm(x, axes, ord)
        if keepdims:
            shape = list(x.shape)
            shape[r] = shape[c] = 1
            out = shape_lax.reshape(out, tuple(shape))
        return out
    elif ord in (1, -1, math.inf, -math.inf):
        summed, other = (r, c) if ord in (1, -1) else (c, r)
        sums = snp.sum(_real_abs(x), axis=summed, keepdims=True)
        if x.shape[other] == 0 and ord > 0:   # the largest of no sums: 0, as NumPy >= 2.4
            out = snp.zeros(tuple(1 if i == other else d for i, d in enumerate(sums.shape)),
                            sums.dtype)
        elif x.shape[other] == 0:
            raise ValueError(f"matrix_norm: ord={ord!r} (a minimum over the matrix's "
                             f"{'columns' if ord == -1 else 'rows'}) of a matrix without any, "
                             f"shape {tuple(x.shape)}")
        else:
            out = (snp.max if ord > 0 else snp.min)(sums, axis=other, keepdims=True)
        if not keepdims:
            out = shape_lax.reshape(out, tuple(d for i, d in enumerate(out.shape)
                                               if i not in axes))
        return out
    raise ValueError(f"matrix_norm: invalid norm order {ord!r} for matrices (valid: 'fro', "
                     "'nuc', 1, -1, 2, -2, inf, -inf)")


def _singular_value_norm(x, axes, ord):  # noqa: A002
    """'nuc' / 2 / -2 norms from the singular values (LAPACK ``gesdd``); the matrices with a
    non-finite entry give NaN (as NumPy's SVD does for inf; it raises for NaN) without reaching
    LAPACK, so the rest of a stack is unaffected."""
    r, c = axes
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    x = shape_lax.transpose(x, rest + (r, c))
    if 0 in x.shape[-2:]:
        if ord == -2:
            raise ValueError(f"matrix_norm: ord=-2 (the smallest singular value) of a matrix "
                             f"without entries, shape {tuple(x.shape)}")
        return snp.zeros(x.shape[:-2], dtypes.real_dtype(x.dtype))
    finite = snp.all(snp.isfinite(x), axis=(-2, -1))
    s = svdvals(snp.where(finite[..., None, None], x, 0))
    # a singular value that is zero (to rounding) is a kink (|.|-like): its minimum-norm
    # subgradient, 0, so a singular matrix's null space and the zero matrix add no derivative
    s = snp.where(s <= degenerate_tol(s)[..., 0], stop_gradient(s), s)
    # max / min rather than s[0] / s[-1]: tied singular values share the derivative, which
    # then does not depend on the basis LAPACK picked for their subspace
    out = (snp.sum if ord == "nuc" else snp.max if ord == 2 else snp.min)(s, axis=-1)
    return snp.where(finite, out, math.nan)


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
    from ..arrays.ops.autodiff import stop_gradient
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
        xinv = inv(stop_gradient(x))   # NaN where the LU meets an exact zero pivot
        singular = snp.any(snp.isnan(xinv), axis=(-2, -1))
        if type(x) is Array:   # concrete: no derivative will be taken, one LU is enough
            xinv = snp.where(singular[..., None, None], 0, xinv)
        else:   # differentiable, with no NaN in the derivative (which would meet the mask's 0)
            xinv = inv(snp.where(singular[..., None, None], snp.eye(m, dtype=x.dtype), x))
        r = _matrix_norm(x, (x.ndim - 2, x.ndim - 1), False, p) * \
            _matrix_norm(xinv, (x.ndim - 2, x.ndim - 1), False, p)
        r = snp.where(singular, math.inf, r)
    r = snp.where(~finite, math.inf, r)
    return snp.where(has_nan, math.nan, r)
