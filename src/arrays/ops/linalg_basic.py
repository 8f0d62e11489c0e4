"""Dense linear-algebra primitives: det, slogdet, inv, solve, cholesky, qr, svd, eigh.

Each acts on stacks of matrices ``(*batch, m, n)`` (batch dims first, as NumPy's gufuncs) and is
implemented with NumPy's LAPACK bindings (the numpy_ref oracle). Forward only for now: the
differentiation and batching rules live with the solvers in src/linalg (a later issue).

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
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ..array import Array
from .elementwise_family import promote_operands

__all__ = []  # the user functions live in starling.numpy.linalg

_LOW = frozenset((dtypes.float16, dtypes.bfloat16) + dtypes.LOW_PRECISION_FLOATS)


class LinAlgError(ValueError):
    """A linear-algebra routine failed on its input: a singular matrix for ``inv`` / ``solve``,
    a matrix that is not positive definite for ``cholesky``. Subclasses ValueError (as NumPy's
    ``numpy.linalg.LinAlgError``)."""


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


class EighResult(NamedTuple):
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
    identity).

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
    when ``upper=True``). Only the lower triangle of ``x`` is read. Method: LAPACK ``potrf``.

    Raises:
        ValueError: non-square matrices.
        LinAlgError: (eager / NumPy backend) a matrix is not positive definite.
    """
    x = as_inexact("cholesky", x)
    check_matrix("cholesky", x.shape, square=True)
    out = cholesky_p.bind(x)
    if upper:
        from . import shape_lax
        nd = out.ndim
        out = shape_lax.transpose(out, tuple(range(nd - 2)) + (nd - 1, nd - 2))
        if dtypes.is_complex(out.dtype):
            from .linear import snp
            out = snp.conj(out)
    return out


# ---- qr ----------------------------------------------------------------------------------------

qr_p = Primitive("qr", multiple_results=True, family="linalg")


def _qr_shapes(shape, full_matrices):
    batch, (m, n) = tuple(shape[:-2]), tuple(shape[-2:])
    k = m if full_matrices else min(m, n)
    return batch + (m, k), batch + (k, n)


def _qr_abstract(x, *, full_matrices):
    check_matrix("qr", x.shape)
    _check_inexact("qr", x)
    qs, rs = _qr_shapes(x.shape, full_matrices)
    return [ShapedArray(qs, x.dtype), ShapedArray(rs, x.dtype)]


def _qr_impl(x, *, full_matrices):
    q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return [q, r]


qr_p.impl = _low_precision(_qr_impl)
qr_p.abstract_eval = _qr_abstract


def qr(x, /, *, mode="reduced"):
    """QR factorization of ``(*batch, m, n)`` matrices by Householder reflections (LAPACK
    ``geqrf`` + ``orgqr`` / ``ungqr``).

    Args:
        mode: "reduced": ``Q (*batch, m, k)``, ``R (*batch, k, n)`` with ``k = min(m, n)``;
            "complete": ``Q (*batch, m, m)``, ``R (*batch, m, n)``; "r": only ``R`` (reduced).
    Returns:
        ``QRResult(Q, R)`` (or the array ``R`` for mode "r"); ``Q`` has orthonormal columns,
        ``R`` is upper triangular. Signs follow LAPACK (R's diagonal may be negative).
    Raises:
        ValueError: ``x.ndim < 2`` or an unknown mode.
    """
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    x = as_inexact("qr", x)
    check_matrix("qr", x.shape)
    q, r = qr_p.bind(x, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


# ---- svd ---------------------------------------------------------------------------------------

svd_p = Primitive("svd", multiple_results=True, family="linalg")


def _svd_abstract(x, *, full_matrices, compute_uv):
    check_matrix("svd", x.shape)
    _check_inexact("svd", x)
    batch, (m, n) = tuple(x.shape[:-2]), tuple(x.shape[-2:])
    k = min(m, n)
    s = ShapedArray(batch + (k,), dtypes.real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    ku, kv = (m, n) if full_matrices else (k, k)
    return [ShapedArray(batch + (m, ku), x.dtype), s, ShapedArray(batch + (kv, n), x.dtype)]


def _svd_impl(x, *, full_matrices, compute_uv):
    if not compute_uv:
        return [np.linalg.svd(x, compute_uv=False)]
    u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
    return [u, s, vh]


svd_p.impl = _low_precision(_svd_impl)
svd_p.abstract_eval = _svd_abstract


def svd(x, /, *, full_matrices=True, compute_uv=True):
    """Singular value decomposition ``x = U @ diag(S) @ Vh`` of ``(*batch, m, n)`` matrices
    (LAPACK ``gesdd``, divide and conquer).

    Args:
        full_matrices: ``U (*batch, m, m)`` and ``Vh (*batch, n, n)`` when True, else
            ``(*batch, m, k)`` and ``(*batch, k, n)`` with ``k = min(m, n)``.
        compute_uv: NumPy extension; False returns only ``S`` (same as ``svdvals``).
    Returns:
        ``SVDResult(U, S, Vh)``; ``S (*batch, k)`` is real, non-negative and descending.
    Raises:
        ValueError: ``x.ndim < 2``.
    """
    x = as_inexact("svd", x)
    check_matrix("svd", x.shape)
    if not compute_uv:
        return svd_p.bind(x, full_matrices=False, compute_uv=False)[0]
    u, s, vh = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=True)
    return SVDResult(u, s, vh)


def svdvals(x, /):
    """Singular values ``(*batch, min(m, n))`` of ``(*batch, m, n)`` matrices, descending, in the
    real dtype (LAPACK ``gesdd`` without vectors)."""
    x = as_inexact("svdvals", x)
    check_matrix("svdvals", x.shape)
    return svd_p.bind(x, full_matrices=False, compute_uv=False)[0]


# ---- eigh --------------------------------------------------------------------------------------

eigh_p = Primitive("eigh", multiple_results=True, family="linalg")


def _eigh_abstract(x, *, lower, compute_v):
    check_matrix("eigh", x.shape, square=True)
    _check_inexact("eigh", x)
    w = ShapedArray(x.shape[:-1], dtypes.real_dtype(x.dtype))
    return [w, ShapedArray(x.shape, x.dtype)] if compute_v else [w]


def _eigh_impl(x, *, lower, compute_v):
    uplo = "L" if lower else "U"
    if not compute_v:
        return [np.linalg.eigvalsh(x, UPLO=uplo)]
    w, v = np.linalg.eigh(x, UPLO=uplo)
    return [w, v]


eigh_p.impl = _low_precision(_eigh_impl)
eigh_p.abstract_eval = _eigh_abstract


def eigh(x, /, *, UPLO="L"):  # noqa: N803  (NumPy's keyword)
    """Eigen-decomposition of Hermitian (real symmetric) matrices ``(*batch, n, n)``
    (LAPACK ``syevd`` / ``heevd``, divide and conquer).

    Only the lower (``UPLO="L"``, default) or upper triangle is read.

    Returns:
        ``EighResult(eigenvalues, eigenvectors)``: eigenvalues ``(*batch, n)`` ascending, in the
        real dtype; eigenvectors ``(*batch, n, n)`` as columns.
    Raises:
        ValueError: non-square matrices, or UPLO not "L"/"U".
    """
    x = as_inexact("eigh", x)
    check_matrix("eigh", x.shape, square=True)
    w, v = eigh_p.bind(x, lower=_uplo("eigh", UPLO), compute_v=True)
    return EighResult(w, v)


def eigvalsh(x, /, *, UPLO="L"):  # noqa: N803
    """Eigenvalues ``(*batch, n)`` (ascending, real dtype) of Hermitian matrices
    ``(*batch, n, n)`` (LAPACK ``syevd`` / ``heevd`` without vectors)."""
    x = as_inexact("eigvalsh", x)
    check_matrix("eigvalsh", x.shape, square=True)
    return eigh_p.bind(x, lower=_uplo("eigvalsh", UPLO), compute_v=False)[0]


def _uplo(op, uplo):
    if uplo not in ("L", "U"):
        raise ValueError(f"{op}: UPLO must be 'L' or 'U', got {uplo!r}")
    return uplo == "L"
