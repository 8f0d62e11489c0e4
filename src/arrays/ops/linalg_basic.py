"""Dense linear-algebra primitives: det, slogdet, inv, solve, cholesky (here) and qr, svd, eigh
(linalg_decomp.py), each with its JVP, batch and (solve) transpose rules.

Each acts on stacks of matrices ``(*batch, m, n)`` (batch dims first, as NumPy's gufuncs) and is
implemented with NumPy's LAPACK bindings (the numpy_ref oracle). Batch rules move the batch axis
to the front (the primitives take leading batch dims already). JVP rules use, on tangents, only
linear ops with primal coefficients (matmul, ``solve`` with a primal matrix, transposes, conj /
real, constant masks, sums), so reverse mode transposes them; ``solve`` is linear in its
right-hand side and has a transpose rule for it.

Dtype policy (documented choice):
    * float32 / float64 / complex64 / complex128 are computed in their own precision.
    * bool and integer inputs are promoted to the default float (float32), as in JAX.
    * float16 / bfloat16 / float8 / float4 are computed in float32 and the results rounded back to
      the input dtype (NumPy's LAPACK has no half-precision kernels).

Singular input: ``det`` / ``slogdet`` of a singular matrix give 0 / (sign 0, logabsdet -inf), the
mathematically correct values. ``inv`` / ``solve`` of an exactly singular matrix (LAPACK finds an
exact zero pivot) and ``cholesky`` of a matrix that is not positive definite raise
``LinAlgError`` (a ValueError) when evaluated on concrete values (eager mode and the NumPy
reference backend); compiled backends cannot raise from device code and return inf/nan instead.
A nearly singular matrix is not detected (its result is merely inaccurate), as in LAPACK.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ...core import dtypes
from ...core.ad_util import Zero, is_undefined, tangent_aval
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ..array import Array, wrap
from . import shape_lax
from .convert_element_type import convert_element_type
from .elementwise_family import promote_operands
from . import rules_sharding as RS
from .rules import batch_size, bdim_to_front, move_axis

__all__ = []  # the user functions live in starling.numpy.linalg

_LOW = frozenset((dtypes.float16, dtypes.bfloat16) + dtypes.LOW_PRECISION_FLOATS)


class LinAlgError(ValueError):
    """A linear-algebra routine failed on its input: a singular matrix for ``inv`` / ``solve``,
    a matrix that is not positive definite for ``cholesky``. Subclasses ValueError (as NumPy's
    ``numpy.linalg.LinAlgError``)."""


class SlogdetResult(NamedTuple):
    """``slogdet`` output: ``sign`` and ``logabsdet`` of shape ``(*batch,)``."""

    sign: Any
    logabsdet: Any


class QRResult(NamedTuple):
    """``qr`` output: ``Q`` ``(*batch, m, k)`` and ``R`` ``(*batch, k, n)``."""

    Q: Any
    R: Any


class SVDResult(NamedTuple):
    """``svd`` output: ``U``, singular values ``S`` (descending) and ``Vh``."""

    U: Any
    S: Any
    Vh: Any


class EighResult(NamedTuple):
    """``eigh`` output: ascending ``eigenvalues`` and column ``eigenvectors``."""

    eigenvalues: Any
    eigenvectors: Any


# ---- shared checks -----------------------------------------------------------------------------

def _shape_str(shape):
    return str(tuple(shape))


def check_matrix(op, shape, square=False):
    """Raises ValueError naming ``op`` unless ``shape`` is ``(*batch, m, n)`` (square if asked)."""
    if len(shape) < 2:
        raise ValueError(f"{op}: expected a stack of matrices of shape (..., m, n) with ndim >= 2, "
                         f"got shape {_shape_str(shape)}")
    if square and shape[-1] != shape[-2]:
        raise ValueError(f"{op}: expected a stack of square matrices (..., n, n), got shape "
                         f"{_shape_str(shape)} ({shape[-2]} != {shape[-1]})")


def _check_inexact(op, aval):
    if not dtypes.is_inexact(aval.dtype):
        raise TypeError(f"{op}: expected a floating or complex dtype (promote first), got "
                        f"{aval.dtype}")


_NATIVE = frozenset((dtypes.float32, dtypes.float64, dtypes.complex64, dtypes.complex128))


def as_inexact(op, x):
    """``x`` as an operand of a floating/complex dtype (bool and ints -> float32)."""
    if type(x) is Array and x._buf.dtype in _NATIVE:
        return x
    (x,) = promote_operands(op, (x,), "inexact")
    return x


def _low_precision(fn):
    """Runs ``fn`` in float32 for half/low-precision floats and rounds float results back."""
    def impl(*xs, **params):
        xs = [np.asarray(x) for x in xs]
        dt = xs[0].dtype
        if dt not in _LOW:
            return fn(*xs, **params)
        out = fn(*[x.astype(np.float32) for x in xs], **params)
        if isinstance(out, list):
            return [o.astype(dt) for o in out]
        return np.asarray(out).astype(dt)
    impl.__name__ = fn.__name__
    return impl


def _lapack(op, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except np.linalg.LinAlgError as e:
        raise LinAlgError(_failure(op, str(e), np.shape(args[0]))) from None


def _failure(op, what, shape):
    shape = _shape_str(shape)
    if "definite" in what:
        return (f"{op}: a matrix of the stack of shape {shape} is not positive definite "
                "(the Cholesky factorization, LAPACK potrf, hit a non-positive pivot)")
    if "ingular" in what:
        return (f"{op}: a matrix of the stack of shape {shape} is singular (LU factorization "
                "with partial pivoting, LAPACK getrf, found an exact zero pivot)")
    return f"{op}: LAPACK failed on input of shape {shape}: {what}"


# ---- helpers for the transformation rules ------------------------------------------------------
# Shared with linalg_decomp.py. Masks and identities are constants in the REAL dtype of the value
# they multiply, so that they never promote a tangent (complex64 * float32 stays complex64).

def _snp():
    from .linear import snp  # the namespace imports this module: look it up lazily
    return snp


def mT(x):  # noqa: N802
    """Transpose of the last two dims (no conjugation); used by the linalg rules."""
    nd = x.ndim
    return shape_lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def conj(x):
    """Complex conjugate of ``x`` (..., m, n); ``x`` itself for real dtypes (no copy)."""
    return _snp().conj(x) if dtypes.is_complex(x.dtype) else x


def mH(x):  # noqa: N802  (conjugate transpose)
    """Conjugate transpose of the last two dims: (..., m, n) -> (..., n, m)."""
    return conj(mT(x))


def mm(a, b):
    """Batched matrix product (..., m, k) @ (..., k, n) -> (..., m, n) (starling.numpy.matmul)."""
    return _snp().matmul(a, b)


def real(x):
    """Real part of ``x``; ``x`` itself for real dtypes."""
    return _snp().real(x) if dtypes.is_complex(x.dtype) else x


def const(values, like):
    """``values`` as a constant array in the real dtype of ``like``."""
    return wrap(np.asarray(values, dtype=dtypes.real_dtype(like.dtype)), False)


def tri(m, n, k, like, upper=False):
    """Constant 0/1 mask of the lower (``upper``: upper) triangle from diagonal ``k`` on."""
    ones = np.ones((m, n))
    return const(np.triu(ones, k) if upper else np.tril(ones, k), like)


def row(v):
    """``v[..., None, :]``."""
    return shape_lax.reshape(v, tuple(v.shape[:-1]) + (1, v.shape[-1]))


def col(v):
    """``v[..., :, None]``."""
    return shape_lax.reshape(v, tuple(v.shape) + (1,))


def diag_part(x):
    """The main diagonal of the last two dims: (..., m, n) -> (..., min(m, n))."""
    from .linear import _diagonal
    return _diagonal(x, x.ndim - 2, x.ndim - 1)


def diag_embed(v):
    """``(*b, n) -> (*b, n, n)`` with ``v`` on the diagonal (linear in ``v``)."""
    return row(v) * const(np.eye(v.shape[-1]), v)


def real_diag(x, scale=1.0):
    """``scale * diag(real(diag(x)))`` in the dtype of ``x`` (linear in ``x``)."""
    d = real(x) * const(scale * np.eye(x.shape[-1]), x)
    return d if d.dtype == x.dtype else convert_element_type(d, x.dtype, False)


def imag_diag_part(d):
    """``i * imag(d)`` for a complex vector ``d`` (linear: ``(d - conj(d)) / 2``)."""
    return (d - _snp().conj(d)) * 0.5


def hermitian_part(t, lower=True):
    """The Hermitian matrix that a routine reading only the lower (``upper``) triangle sees
    when handed ``t``: the strict triangle, its conjugate mirror, and the real part of the
    diagonal (LAPACK ignores the imaginary part of a Hermitian diagonal)."""
    n = t.shape[-1]
    strict = t * tri(n, n, -1 if lower else 1, t, upper=not lower)
    return strict + mH(strict) + real_diag(t)


def offdiag_reciprocal(d):
    """``1 / d`` off the diagonal, 0 on it (``d``: ``(*b, n, n)``)."""
    snp = _snp()
    eye = wrap(np.eye(d.shape[-1], dtype=bool), False)
    return snp.where(eye, 0.0, 1.0 / snp.where(eye, 1.0, d))


def eye_of(n, like):
    """Constant (n, n) identity in the dtype of ``like``."""
    return wrap(np.eye(n, dtype=like.dtype), False)


def zeros_for(prim, outs):
    if prim.multiple_results:
        return [Zero(tangent_aval(o.aval)) for o in outs]
    return Zero(tangent_aval(outs.aval))


def batch_to_front(prim):
    """Batch rule for primitives that take leading batch dims: the batch axis goes first (an
    unbatched operand is broadcast) and one call does the whole batch."""
    def rule(args, dims, **params):
        size = batch_size(args, dims)
        out = prim.bind(*[bdim_to_front(a, d, size) for a, d in zip(args, dims)], **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    prim.batch = rule
    return rule


# ---- det / slogdet -----------------------------------------------------------------------------

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
    from .autodiff import stop_gradient
    from .linalg_decomp import svd_p
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
    from . import shape_lax
    from .elementwise_family import broadcast_shapes
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

cholesky_p = Primitive("cholesky", family="linalg")


def _cholesky_abstract(x):
    check_matrix("cholesky", x.shape, square=True)
    _check_inexact("cholesky", x)
    return ShapedArray(x.shape, x.dtype)


cholesky_p.impl = _low_precision(lambda x: _lapack("cholesky", np.linalg.cholesky, x))
cholesky_p.abstract_eval = _cholesky_abstract


def cholesky(x, /, *, upper=False):
    """Cholesky factor of Hermitian positive-definite matrices ``(*batch, n, n)``.

    Returns lower-triangular ``L`` with ``x = L @ L^H`` (or upper ``U = L^H`` with ``x = U^H @ U``
    when ``upper=True``). Only the lower triangle of ``x`` is read, or the upper one when
    ``upper=True`` (as NumPy), and the real part of the diagonal. Method: LAPACK ``potrf``.
    Derivative: Murray 2016 (see ``_cholesky_jvp``), with respect to the triangle that is read.

    Raises:
        ValueError: non-square matrices.
        LinAlgError: (eager / NumPy backend) a matrix is not positive definite.
    """
    x = as_inexact("cholesky", x)
    check_matrix("cholesky", x.shape, square=True)
    if not upper:
        return cholesky_p.bind(x)
    # U = chol(x^H)^H: the lower triangle of x^H is the (conjugated) upper triangle of x.
    return mH(cholesky_p.bind(mH(x)))


# ---- cholesky rules ----------------------------------------------------------------------------
# A = L L^H: dL = L Phi(L^{-1} dA L^{-H}) with Phi = strictly-lower part plus half the diagonal
# (Murray 2016, "Differentiation of the Cholesky decomposition", eq. 8). The routine reads only
# the lower triangle of A (and the real part of its diagonal), so dA is the Hermitian matrix
# built from the lower triangle of the tangent: the rule agrees with finite differences.

def _cholesky_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    low = cholesky_p.bind(x)
    if type(t) is Zero:
        return low, Zero(tangent_aval(low.aval))
    n = x.shape[-1]
    tmp = solve_p.bind(low, hermitian_part(t))   # L^{-1} dA
    m = solve_p.bind(low, mH(tmp))               # L^{-1} dA L^{-H} (dA is Hermitian)
    phi = m * tri(n, n, -1, m) + real_diag(m, 0.5)
    return low, mm(low, phi)


cholesky_p.jvp = _cholesky_jvp
batch_to_front(cholesky_p)
cholesky_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
