"""Batched Hermitian eigensolver and SVD: Starling's native Jacobi kernels for stacks of small
matrices, LAPACK (through NumPy) otherwise.

The native kernels (native/jacobi.h) run a chunk of 16 float32 / 8 float64 matrices at once, the
batch being the SIMD lane direction, and spread chunks over Starling's thread pool:

* eigh: cyclic two-sided Jacobi (Golub & Van Loan, *Matrix Computations*, 4th ed., sec. 8.5;
  Rutishauser's rotation formulas), rotating while ``|a_pq| > eps sqrt(|a_pp a_qq|)`` (Demmel &
  Veselic, "Jacobi's method is more accurate than QR", SIAM J. Matrix Anal. Appl. 13(4), 1992);
* svd: one-sided Jacobi (Hestenes 1958; Demmel & Veselic 1992; Drmac & Veselic, "New fast and
  accurate Jacobi SVD algorithm", SIAM J. Matrix Anal. Appl. 29(4), 2008) on ``A`` or ``A^H``,
  whichever is tall; left vectors of zero singular values and the extra columns of
  ``full_matrices=True`` completed by Gram-Schmidt.

Both scale each matrix by a power of two first (huge and tiny input are safe), and a matrix
holding NaN or inf gives NaN results (so does LAPACK's path, through
``_common.lapack_or_nan``). Accuracy is LAPACK's: scaled residuals
``||A V - V L|| / (n eps ||A||)`` and ``||V^H V - I|| / (n eps)`` of order 1. The vectors come
in no particular sign / phase: the eigh and svd primitives normalize them
(``starling.linalg.hermitian_eigen``, ``singular_values``), so both paths give the same gauge.

Which path runs is decided by shape alone (never by values), from timings against NumPy's
LAPACK on 2 cores: the kernels compute a whole chunk whatever the batch, so one matrix of size
32 is faster in LAPACK, 8 of them in Jacobi.
"""
from __future__ import annotations

import math

import numpy as np

from ._common import lapack_or_nan

__all__ = ["eigh_batched", "svd_batched", "use_jacobi_eigh", "use_jacobi_svd"]

MAX_N = 64          # the kernels' limit on n (eigh) and min(m, n) (svd)
_TALL = 8           # svd: Jacobi while max(m, n) <= _TALL * min(m, n) (no QR preconditioning)
_DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def _native():
    from .. import _native
    return _native


def _batch_size(shape):
    return math.prod(shape[:-2])


def _min_batch(n):
    # below this a chunk's unused lanes and the sweep count make LAPACK faster (measured)
    return max(1, n // 4)


def use_jacobi_eigh(shape, dtype):
    """Whether :func:`eigh_batched` takes the native Jacobi kernel for ``(*batch, n, n)``."""
    n = shape[-1]
    return (np.dtype(dtype).type in _DTYPES and 1 <= n <= MAX_N
            and _batch_size(shape) >= _min_batch(n))


def use_jacobi_svd(shape, dtype, full_matrices=False):
    """Whether :func:`svd_batched` takes the native Jacobi kernel for ``(*batch, m, n)``."""
    m, n = shape[-2:]
    small, big = min(m, n), max(m, n)
    if full_matrices and m != n:
        # U's (or Vh's) extra columns span the complement of the range: any orthonormal basis
        # of it is valid, and callers (and tests) expect LAPACK's. The kernel computes them
        # (jacobi_svd(full_matrices=True)), but the primitive keeps LAPACK's choice.
        return False
    return (np.dtype(dtype).type in _DTYPES and 1 <= small <= MAX_N and big <= _TALL * small
            and _batch_size(shape) >= _min_batch(small))


def eigh_batched(x, lower=True, compute_v=True):
    """Eigenvalues (and eigenvectors) of a stack of Hermitian matrices.

    Args:
        x: ``(*batch, n, n)`` NumPy array, float32 / float64 / complex64 / complex128 (other
            dtypes go to LAPACK); only the lower (``lower=True``) or upper triangle is read.
        lower: which triangle to read.
        compute_v: also return the eigenvectors.
    Returns:
        ``[w]`` or ``[w, v]``: eigenvalues ``(*batch, n)`` ascending in the real dtype,
        eigenvectors ``(*batch, n, n)`` as columns.
    Matrices holding inf / NaN (in the triangle that is read, for eigh), or on which LAPACK
    does not converge, give NaN results; the rest of the stack is unaffected.
    """
    x = np.asarray(x)
    if not use_jacobi_eigh(x.shape, x.dtype):
        uplo = "L" if lower else "U"
        # only the triangle that is read must be finite (LAPACK ignores the other)
        half = np.tril(x) if lower else np.triu(x)
        ok = np.isfinite(half).all(axis=(-2, -1))
        if not compute_v:
            return lapack_or_nan(lambda a: [np.linalg.eigvalsh(a, UPLO=uplo)], x, ok)
        return lapack_or_nan(lambda a: list(np.linalg.eigh(a, UPLO=uplo)), x, ok)
    batch, n = x.shape[:-2], x.shape[-1]
    a = np.ascontiguousarray(x.reshape((-1, n, n)))
    w, v, _ = _native().jacobi_eigh(a, lower, compute_v)
    w = w.reshape(batch + (n,))
    return [w, v.reshape(x.shape)] if compute_v else [w]


def svd_batched(x, full_matrices=True, compute_uv=True):
    """Singular value decomposition of a stack of matrices, shaped as ``numpy.linalg.svd``.

    Args:
        x: ``(*batch, m, n)`` NumPy array, float32 / float64 / complex64 / complex128 (other
            dtypes go to LAPACK).
        full_matrices: ``U (*batch, m, m)``, ``Vh (*batch, n, n)``; else ``(*batch, m, k)`` and
            ``(*batch, k, n)``, ``k = min(m, n)``.
        compute_uv: also return ``U`` and ``Vh``.
    Returns:
        ``[s]`` or ``[u, s, vh]``; ``s (*batch, k)`` descending, in the real dtype.
    Matrices holding inf / NaN (in the triangle that is read, for eigh), or on which LAPACK
    does not converge, give NaN results; the rest of the stack is unaffected.
    """
    x = np.asarray(x)
    if not use_jacobi_svd(x.shape, x.dtype, full_matrices and compute_uv):
        if not compute_uv:
            return lapack_or_nan(lambda a: [np.linalg.svd(a, compute_uv=False)], x)
        return lapack_or_nan(lambda a: list(np.linalg.svd(a, full_matrices=full_matrices)), x)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    a = np.ascontiguousarray(x.reshape((-1, m, n)))
    u, s, vh, _ = _native().jacobi_svd(a, bool(full_matrices), bool(compute_uv))
    s = s.reshape(batch + s.shape[-1:])
    if not compute_uv:
        return [s]
    return [u.reshape(batch + u.shape[-2:]), s, vh.reshape(batch + vh.shape[-2:])]
