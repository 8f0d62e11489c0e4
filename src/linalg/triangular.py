"""Triangular systems: the ``triangular_solve`` primitive with its rules, its PyTorch-named alias
``solve_triangular``, and ``cholesky_solve`` (two triangular solves with a Cholesky factor)."""
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
    _check_inexact, _low_precision, _shape_str, check_matrix, conj, errors_param, mm, mT,
    raise_on_info, settle, to_batch, tri,
)


# ---- triangular_solve --------------------------------------------------------------------------

triangular_solve_p = Primitive("triangular_solve", family="linalg")


def _rhs_dim(left_side):
    """The dim of ``b`` that must match ``a``'s order (the other one indexes right-hand sides)."""
    return -2 if left_side else -1


def _triangular_abstract(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal,
                         check_errors=None):
    check_matrix("triangular_solve", a.shape, square=True)
    _check_inexact("triangular_solve", a)
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve: operands must have one dtype, got {a.dtype} and "
                        f"{b.dtype}")
    if len(b.shape) != len(a.shape) or b.shape[:-2] != a.shape[:-2] \
            or b.shape[_rhs_dim(left_side)] != a.shape[-1]:
        raise ValueError(f"triangular_solve: b of shape {_shape_str(b.shape)} does not match a of "
                         f"shape {_shape_str(a.shape)} (left_side={left_side})")
    return ShapedArray(b.shape, b.dtype)


def _substitute(t, b, lower, unit):
    """Forward (``lower``) or back substitution on a stack ``t`` (c, m, m), ``b`` (c, m, k),
    vectorised over the stack: one step per row, reading only the triangle (and the diagonal
    unless ``unit``)."""
    m = t.shape[-1]
    x = np.empty(b.shape, np.result_type(t, b))
    for i in (range(m) if lower else range(m - 1, -1, -1)):
        done = slice(0, i) if lower else slice(i + 1, m)
        r = b[:, i, :] - np.matmul(t[:, i:i + 1, done], x[:, done, :])[:, 0, :]
        x[:, i, :] = r if unit else r / t[:, i, i, None]
    return x


def _trtrs(a, b, lower, transpose, conjugate, unit):
    """LAPACK trtrs per matrix (SciPy has no batched triangular solve). Each C-ordered matrix
    is handed over as its transpose ``a^T``, which is Fortran-ordered (no copy), so the
    ``op`` asked for is rewritten in terms of ``a^T`` (lower becomes upper)."""
    from scipy.linalg import lapack
    fn = lapack.get_lapack_funcs("trtrs", dtype=a.dtype)
    # a x = b: (a^T)^T x = b;  a^T x = b;  conj(a) x = b: (a^T)^H x = b;
    # a^H x = b: conj(a^T) x = b  <=>  a^T conj(x) = conj(b)
    trans = (0 if transpose else 2) if conjugate else (0 if transpose else 1)
    flip = conjugate and transpose and a.dtype.kind == "c"
    b = np.conj(b) if flip else b
    a = np.ascontiguousarray(a)
    x = np.empty(b.shape, a.dtype)
    for i in range(a.shape[0]):
        x[i] = fn(a[i].T, b[i], lower=int(not lower), trans=trans, unitdiag=int(unit))[0]
    return np.conj(x) if flip else x


def _solve_left(a, b, lower, transpose, conjugate, unit):
    """Solves ``op(a) x = b`` for stacks a (c, m, m), b (c, m, k), op = the chosen transpose /
    conjugation of the ``lower`` (else upper) triangle of a."""
    c, m, k = b.shape
    if 2 * m < c and k <= 16:
        # Many small systems: substitution over the whole stack at once beats one LAPACK call
        # per matrix (measured on 2 cores: 20000 x 8x8, 2 ms vs 34 ms; 1000 x 64x64 and one
        # column, 4 ms vs 6 ms; with 64 columns trtrs wins, 34 ms vs 83 ms).
        t = np.swapaxes(a, -1, -2) if transpose else a
        t = np.conj(t) if conjugate else t
        return _substitute(t, b, lower != transpose, unit)
    return _trtrs(a, b, lower, transpose, conjugate, unit)


def _triangular_impl(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal,
                     check_errors=None):
    m = a.shape[-1]
    batch = a.shape[:-2]
    info = np.zeros(batch, np.int32)
    if not unit_diagonal and m:
        zero = np.diagonal(a, axis1=-2, axis2=-1) == 0
        info = np.where(zero.any(-1), np.argmax(zero, -1) + 1, 0).astype(np.int32)
        if info.any():   # trtrs would stop there: a unit pivot keeps the other matrices clean
            if check_errors:
                raise_on_info(check_errors, info, a.shape, "trtrs")
            a = a.copy()
            a[info != 0, np.arange(m), np.arange(m)] = 1
    rhs = b if left_side else np.swapaxes(b, -1, -2)
    # x op(a) = b  <=>  op(a)^T x^T = b^T
    count = int(np.prod(batch, dtype=np.int64))
    flat_a = a.reshape((count, m, m))
    flat_b = np.ascontiguousarray(rhs).reshape((count,) + rhs.shape[-2:])
    x = _solve_left(flat_a, flat_b, lower, transpose_a != (not left_side), conjugate_a,
                    unit_diagonal).reshape(rhs.shape)
    x = x if left_side else np.swapaxes(x, -1, -2)
    return settle([x], info, a.shape, "trtrs", None)[0]


triangular_solve_p.abstract_eval = _triangular_abstract
triangular_solve_p.impl = _low_precision(_triangular_impl)


def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False,
                     conjugate_a=False, unit_diagonal=False, check_errors=False):
    """Solves a triangular system, with the semantics and defaults of JAX's
    ``lax.linalg.triangular_solve``.

    ``left_side=True`` solves ``op(a) @ x = b``, ``left_side=False`` (the default, as in JAX)
    ``x @ op(a) = b``, where ``op(a)`` is ``a``, ``a^T`` (``transpose_a``), ``conj(a)``
    (``conjugate_a``) or ``a^H`` (both). Only the lower (``lower=True``) or upper (default)
    triangle of ``a`` is read, and not its diagonal when ``unit_diagonal`` (taken as ones).

    Args:
        a: ``(*batch_a, m, m)``, float32 / float64 / complex64 / complex128 (bool and integers
            promote to float32; float16 / bfloat16 are computed in float32).
        b: ``(*batch_b, m, n)`` when ``left_side``, else ``(*batch_b, n, m)``; the batch dims
            broadcast against ``a``'s.
        check_errors: raise LinAlgError (on concrete values) for an exactly zero diagonal entry.

    Returns:
        ``x`` of ``b``'s shape (with the broadcast batch dims) and the promoted dtype. A matrix
        with an exactly zero diagonal entry (and ``unit_diagonal=False``) gives an all-NaN ``x``;
        the other matrices of the stack are unaffected.

    Method: substitution (LAPACK ``trtrs`` / ``trsm``); for many small systems with few
    right-hand sides, substitution vectorised over the stack. Derivative:
    ``dx = op(a)^{-1} (db - op(da) x)`` (or ``(db - x op(da)) op(a)^{-1}``) with ``da``
    restricted to the triangle that is read; linear in ``b`` (transpose: the solve with
    ``op(a)^T``), and vmap over ``b`` alone adds right-hand sides to one solve.

    Raises:
        ValueError: non-square ``a``, ``b`` not a stack of matrices or of a non-matching shape,
            batch dims that do not broadcast.
        LinAlgError: ``check_errors=True`` and a diagonal entry is exactly zero (the message
            names the index of the first such matrix in the stack).
    """
    return _triangular("triangular_solve", a, b, left_side=bool(left_side), lower=bool(lower),
                       transpose_a=bool(transpose_a), conjugate_a=bool(conjugate_a),
                       unit_diagonal=bool(unit_diagonal),
                       check_errors=errors_param("triangular_solve", check_errors))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False,  # noqa: N803
                     check_errors=False):
    """Solves ``A X = B`` (``left``) or ``X A = B`` for triangular ``A``: PyTorch's
    ``torch.linalg.solve_triangular`` (``upper`` is required, as there).

    Args:
        A: ``(*batch_a, n, n)``; only its upper (``upper=True``) or lower triangle is read, and
            not its diagonal when ``unitriangular`` (taken as ones).
        B: ``(*batch_b, n, k)`` (``left``) or ``(*batch_b, k, n)``; batch dims broadcast.

    Returns:
        ``X`` with ``B``'s shape (broadcast batch dims). See ``triangular_solve`` for dtypes, the
        method, derivatives and the NaN result of a matrix with a zero diagonal entry.

    Raises:
        ValueError, LinAlgError: as ``triangular_solve``.
    """
    return _triangular("solve_triangular", A, B, left_side=bool(left), lower=not upper,
                       transpose_a=False, conjugate_a=False, unit_diagonal=bool(unitriangular),
                       check_errors=errors_param("solve_triangular", check_errors))


def cholesky_solve(B, L, *, upper=False, check_errors=False):  # noqa: N803
    """Solves ``A X = B`` given the Cholesky factor of ``A`` (``torch.cholesky_solve``;
    ``jax.scipy.linalg.cho_solve``).

    Args:
        B: ``(*batch_b, n, k)`` right-hand sides.
        L: ``(*batch_l, n, n)`` lower-triangular factor with ``A = L L^H`` (only its lower
            triangle is read), or upper with ``A = U^H U`` when ``upper=True``; batch dims
            broadcast.

    Returns:
        ``X`` ``(*batch, n, k)``: two triangular solves, ``L^{-H} (L^{-1} B)``, so that its
        derivatives (with respect to the read triangle of ``L``, and to ``B``) come from
        ``triangular_solve``'s rules. A factor with an exactly zero diagonal entry gives NaN.

    Raises:
        ValueError: shapes that do not match (named in the message).
        LinAlgError: ``check_errors=True`` and a factor has an exactly zero diagonal entry.
    """
    check_errors = errors_param("cholesky_solve", check_errors)
    lower = not upper
    y = _triangular("cholesky_solve", L, B, left_side=True, lower=lower, transpose_a=upper,
                    conjugate_a=upper, unit_diagonal=False, check_errors=check_errors)
    return _triangular("cholesky_solve", L, y, left_side=True, lower=lower, transpose_a=lower,
                       conjugate_a=lower, unit_diagonal=False, check_errors=None)


def _triangular(op, a, b, **params):
    a, b = promote_operands(op, (a, b), "inexact")
    sa, sb = tuple(a.shape), tuple(b.shape)
    check_matrix(op, sa, square=True)
    left = params["left_side"]
    if len(sb) < 2 or sb[_rhs_dim(left)] != sa[-1]:
        want = f"(..., {sa[-1]}, k)" if left else f"(..., k, {sa[-1]})"
        raise ValueError(f"{op}: b of shape {sb} does not match a of shape {sa}: expected a "
                         f"stack of matrices {want} (write b[..., None] for a vector)")
    batch = broadcast_shapes(op, sa[:-2], sb[:-2])
    a, b = to_batch(a, batch), to_batch(b, batch)
    return triangular_solve_p.bind(a, b, **params)


# ---- triangular_solve rules --------------------------------------------------------------------
# left:  op(a) x = b  =>  dx = op(a)^{-1} (db - op(da) x);  right: dx = (db - x op(da)) op(a)^{-1},
# where da keeps only what the routine reads: the triangle, without the diagonal when it is a
# unit one (so the rule agrees with finite differences in any direction). The map b -> x is
# linear; its transpose is the solve with op(a)^T, i.e. with transpose_a toggled.

def _op(t, transpose_a, conjugate_a):
    t = mT(t) if transpose_a else t
    return conj(t) if conjugate_a else t


def _triangular_jvp(primals, tangents, **params):
    (a, b), (ta, tb) = primals, tangents
    x = triangular_solve_p.bind(a, b, **params)
    rhs = tb
    if type(ta) is not Zero:
        m = a.shape[-1]
        lower = params["lower"]
        k = (-1 if lower else 1) if params["unit_diagonal"] else 0
        da = _op(ta * tri(m, m, k, ta, upper=not lower), params["transpose_a"],
                 params["conjugate_a"])
        d = -mm(da, x) if params["left_side"] else -mm(x, da)
        rhs = d if type(tb) is Zero else tb + d
    if type(rhs) is Zero:
        return x, Zero(tangent_aval(x.aval))
    return x, triangular_solve_p.bind(a, rhs, **dict(params, check_errors=None))


def _triangular_transpose(ct, a, b, **params):
    if is_undefined(a):
        raise ValueError("triangular_solve: not linear in the matrix a (only in the right-hand "
                         "side b), so it cannot be transposed with respect to it")
    if type(ct) is Zero:
        return [None, Zero(tangent_aval(b.aval))]
    flipped = dict(params, transpose_a=not params["transpose_a"], check_errors=None)
    return [None, triangular_solve_p.bind(a, ct, **flipped)]


def _triangular_batch(args, dims, **params):
    (a, b), (da, db) = args, dims
    if da is not None:
        return triangular_solve_p.bind(move_axis(a, da, 0), bdim_to_front(b, db, a.shape[da]),
                                       **params), 0
    # Only b is batched: the batch becomes extra right-hand sides of one solve (columns of b on
    # the left side, rows on the right side).
    if params["left_side"]:
        b = move_axis(b, db, b.ndim - 1)
        shape = tuple(b.shape)
        merged = shape[:-2] + (shape[-2] * shape[-1],)
        x = triangular_solve_p.bind(a, shape_lax.reshape(b, merged), **params)
        return shape_lax.reshape(x, shape), len(shape) - 1
    b = move_axis(b, db, b.ndim - 3)
    shape = tuple(b.shape)
    merged = shape[:-3] + (shape[-3] * shape[-2], shape[-1])
    x = triangular_solve_p.bind(a, shape_lax.reshape(b, merged), **params)
    return shape_lax.reshape(x, shape), len(shape) - 3


def _triangular_sharding(in_avals, out_avals, **params):
    # Besides the batch dims: the right-hand sides (columns of b on the left side, rows on the
    # right side) are solved independently, and a pending sum of b gives one of x.
    nd = len(in_avals[1].shape)
    k = nd - 1 if params.get("left_side", True) else nd - 2
    extra = [((RS.Partial("sum"),), (RS.R, RS.Partial("sum")))]
    if in_avals[1].shape[k] > 1:
        extra.append(((RS.Shard(k),), (RS.R, RS.Shard(k))))
    return RS.batch_dims(2)(in_avals, out_avals) + extra


triangular_solve_p.jvp = _triangular_jvp
triangular_solve_p.transpose = _triangular_transpose
triangular_solve_p.is_linear = True
triangular_solve_p.batch = _triangular_batch
triangular_solve_p.sharding = _triangular_sharding
