"""Test inputs: ``rnd`` (random real / complex arrays) and hard matrices for linear algebra
(float64 NumPy arrays, closed forms where known).

Sources: Higham, "Accuracy and Stability of Numerical Algorithms" (2nd ed., 2002): Kahan
(sec. 8.3), Hilbert (sec. 28.1); Wilkinson, "The Algebraic Eigenvalue Problem" (1965): W_{2m+1}^+,
whose largest eigenvalues agree in pairs to many digits; Demmel & Veselic 1992 for graded
matrices.
"""
from __future__ import annotations

import numpy as np


def rnd(shape, dtype=np.float64, seed=0):
    """Standard normal entries of ``shape`` (real and imaginary parts for complex ``dtype``)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def kahan(n, theta=1.2):
    """Kahan's upper-triangular matrix ``diag(s^i) (I - c * strict_upper_ones)``, ``s = sin
    theta``, ``c = cos theta``: ``det = prod s^i``; QR without pivoting does not reveal its
    rank deficiency."""
    s, c = np.sin(theta), np.cos(theta)
    return np.diag(s ** np.arange(n)) @ (np.eye(n) - c * np.triu(np.ones((n, n)), 1))


def hilbert(n):
    """``H_ij = 1 / (i + j + 1)``: symmetric positive definite, condition ~ e^(3.5 n)."""
    i = np.arange(n)
    return 1.0 / (i[:, None] + i[None, :] + 1)


def wilkinson(m):
    """Wilkinson's ``W_{2m+1}^+``: tridiagonal, diagonal ``|m - i|``, off-diagonals 1; its top
    eigenvalues come in pairs equal to ~ 1 / m!."""
    d = np.abs(np.arange(2 * m + 1) - m).astype(float)
    return np.diag(d) + np.diag(np.ones(2 * m), 1) + np.diag(np.ones(2 * m), -1)


def graded(n, rng, ratio=1e-3):
    """``D S D`` with ``D = diag(ratio^i)`` and ``S`` symmetric positive definite: entries span
    ``ratio^(2n)``; Jacobi methods keep its eigenvalues to high relative accuracy."""
    x = rng.standard_normal((n, n))
    d = np.diag(ratio ** np.arange(n))
    return d @ (x @ x.T + n * np.eye(n)) @ d


def with_eigenvalues(w, rng):
    """A random real symmetric matrix with eigenvalues ``w`` (repeats give clusters)."""
    q, _ = np.linalg.qr(rng.standard_normal((len(w), len(w))))
    return (q * np.asarray(w, float)) @ q.T


def with_singular_values(s, rng, m=None):
    """A random ``(m, n)`` matrix (``n = len(s)``, ``m >= n``) with singular values ``s``."""
    n = len(s)
    u, _ = np.linalg.qr(rng.standard_normal((m or n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (u * np.asarray(s, float)) @ v.T


def rank_deficient(m, n, r, rng):
    """A random ``(m, n)`` matrix of rank ``r``."""
    return rng.standard_normal((m, r)) @ rng.standard_normal((r, n))


def named(rng):
    """``{name: square float64 matrix}``: the symmetric ones are marked by ``sym`` in the name."""
    return {
        "kahan12": kahan(12), "hilbert8 sym": hilbert(8), "wilkinson21 sym": wilkinson(10),
        "graded8 sym": graded(8, rng), "clustered sym": with_eigenvalues([1, 1, 1, 2, 2, 5], rng),
        "rank2of6": rank_deficient(6, 6, 2, rng), "zero5 sym": np.zeros((5, 5)),
        "identity4 sym": np.eye(4), "size1 sym": np.array([[3.0]]),
        "huge sym": with_eigenvalues([1, 2, 3, 4], rng) * 1e150,
        "tiny sym": with_eigenvalues([1, 2, 3, 4], rng) * 1e-150,
    }
