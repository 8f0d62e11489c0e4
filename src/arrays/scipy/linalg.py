"""``starling.scipy.linalg``: SciPy's ``scipy.linalg`` names and conventions (as JAX's
``jax.scipy.linalg``) over ``starling.linalg``.

Differences from ``starling.linalg`` (NumPy / PyTorch conventions) are SciPy's: ``cholesky``
returns the UPPER factor by default, ``lu_factor`` pivots are 0-based row swaps,
``solve_triangular`` takes ``lower=`` / ``trans=``, ``eigh`` takes ``lower=`` and an optional
``b`` (generalized problem), ``qr`` modes are "full" / "economic" / "r". Every function works
on stacks ``(*batch, ...)`` and under grad / vmap / compile, except ``schur`` (not
differentiable: it runs SciPy through ``pure_callback``). ``overwrite_*`` and
``check_finite`` arguments are accepted and ignored (arrays are immutable; a non-finite matrix
gives NaN results, as in ``starling.linalg``).
"""
from __future__ import annotations

import numpy as np

from ... import linalg as _la
from .. import numpy as _snp_ns  # noqa: F401  (starling.numpy, loaded with the package)

__all__ = [
    "block_diag", "cho_factor", "cho_solve", "cholesky", "det", "eigh", "eigh_tridiagonal",
    "expm", "expm_frechet", "inv", "lu", "lu_factor", "lu_solve", "polar", "qr", "schur",
    "solve", "solve_sylvester", "solve_triangular", "sqrtm", "svd", "toeplitz",
]

det = _la.det
inv = _la.inv
expm = _la.matrix_exp
sqrtm = _la.sqrtm
solve_sylvester = _la.solve_sylvester


def _snp():
    from ... import numpy as snp
    return snp


def expm_frechet(A, E, compute_expm=True):  # noqa: N803  (SciPy's names)
    """``(expm(A), L(A, E))``, the matrix exponential and its Fréchet derivative in the direction
    ``E`` (Al-Mohy & Higham 2009); just ``L(A, E)`` when ``compute_expm`` is False."""
    frechet = _la.expm_frechet(A, E)
    return (_la.matrix_exp(A), frechet) if compute_expm else frechet


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """Cholesky factor of Hermitian positive definite ``a`` ``(*batch, n, n)``: upper ``U``
    with ``a = U^H U`` by default (SciPy), lower ``L`` with ``a = L L^H`` when ``lower``. A
    matrix that is not positive definite gives NaN (see ``starling.linalg.cholesky``)."""
    return _la.cholesky(a, upper=not lower)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``(c, lower)`` for ``cho_solve``: ``c`` holds the Cholesky factor (SciPy leaves the other
    triangle unspecified; here it is zero)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solves ``a x = b`` from ``cho_factor``'s ``(c, lower)``: ``b`` ``(*batch, n)`` or
    ``(*batch, n, k)``."""
    c, lower = c_and_lower
    return _vector_rhs(b, lambda m: _la.cholesky_solve(m, c, upper=not lower))


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """``(p, l, u)`` with ``a = p @ l @ u`` (``(*batch, m, n)``; ``l`` unit lower
    ``(m, k)``, ``u`` upper ``(k, n)``, ``k = min(m, n)``), or ``(p @ l, u)`` when
    ``permute_l``."""
    p, l_, u = _la.lu(a)
    return (_snp().matmul(p, l_), u) if permute_l else (p, l_, u)


def lu_factor(a, overwrite_a=False, check_finite=True):
    """``(lu, piv)``: packed factors ``(*batch, m, n)`` and int32 0-based row swaps ``piv``
    ``(*batch, min(m, n))`` (row ``i`` was swapped with row ``piv[i]``), SciPy's convention."""
    lu_, piv = _la.lu_factor(a)
    return lu_, piv - 1


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Solves ``a x = b`` (``trans=0``), ``a^T x = b`` (1) or ``a^H x = b`` (2) from
    ``lu_factor``'s ``(lu, piv)``; ``b`` ``(*batch, n)`` or ``(*batch, n, k)``.

    Raises:
        ValueError: ``trans`` not 0, 1 or 2.
    """
    lu_, piv = lu_and_piv
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise ValueError(f"lu_solve: trans must be 0, 1, 2 ('N', 'T', 'C'), got {trans!r}")
    trans = {"N": 0, "T": 1, "C": 2}.get(trans, trans)
    snp = _snp()
    if trans == 1 and snp.isdtype(snp.asarray(lu_).dtype, "complex floating"):
        # a^T x = b  <=>  a^H conj(x) = conj(b)
        return snp.conj(lu_solve(lu_and_piv, snp.conj(b), 2))
    return _vector_rhs(b, lambda m: _la.lu_solve(lu_, piv + 1, m, adjoint=trans != 0))


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """Solves ``op(a) x = b`` with ``a`` triangular ``(*batch, n, n)`` (only the ``lower`` or
    upper triangle read), ``op`` = identity / transpose / conjugate transpose for ``trans`` 0 /
    1 / 2; ``b`` ``(*batch, n)`` or ``(*batch, n, k)``.

    Raises:
        ValueError: ``trans`` not 0, 1 or 2.
    """
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2 ('N', 'T', 'C'), got "
                         f"{trans!r}")
    trans = {"N": 0, "T": 1, "C": 2}.get(trans, trans)
    return _vector_rhs(b, lambda m: _la.triangular_solve(
        a, m, left_side=True, lower=lower, transpose_a=trans != 0, conjugate_a=trans == 2,
        unit_diagonal=unit_diagonal))


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a="gen", transposed=False):
    """Solves ``a x = b`` (``a^T x = b`` when ``transposed``): ``a`` ``(*batch, n, n)``, ``b``
    ``(*batch, n)`` or ``(*batch, n, k)``. ``assume_a``: "gen" (LU), "sym" / "her" (LU on the
    matrix as given), "pos" (Cholesky of the ``lower`` or upper triangle, as SciPy).

    Raises:
        ValueError: an unknown ``assume_a``.
    """
    snp = _snp()
    if assume_a not in ("gen", "general", "sym", "symmetric", "her", "hermitian", "pos",
                        "positive definite"):
        raise ValueError(f"solve: assume_a must be 'gen', 'sym', 'her' or 'pos', got "
                         f"{assume_a!r}")
    if transposed:
        a = snp.matrix_transpose(a)
    if assume_a in ("pos", "positive definite"):
        return cho_solve(cho_factor(a, lower=lower), b)
    return _vector_rhs(b, lambda m: _la.solve(a, m))


def _vector_rhs(b, solve_matrix):
    """``solve_matrix`` on ``b`` as ``(*batch, n, k)``; a vector ``(n,)`` right-hand side (SciPy
    treats a 1-d ``b`` as one vector) goes in as ``(n, 1)`` and comes back ``(n,)``."""
    snp = _snp()
    b = snp.asarray(b)
    if b.ndim == 1:
        return solve_matrix(b[:, None])[..., 0]
    return solve_matrix(b)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         type=1, check_finite=True, subset_by_index=None, subset_by_value=None,  # noqa: A002
         driver=None):
    """Eigenvalues (ascending) and eigenvectors (columns) of Hermitian ``a`` ``(*batch, n, n)``,
    reading its ``lower`` (default) or upper triangle; with ``b`` (Hermitian positive
    definite) the generalized problem ``a v = w b v`` (``type=1``) by Cholesky reduction
    ``L^-1 a L^-H`` (Golub & Van Loan, sec. 8.7), eigenvectors normalized ``v^H b v = I``.

    ``subset_by_index=(lo, hi)``: only eigenpairs ``lo..hi`` (inclusive, static ints).
    Returns:
        ``w`` (``eigvals_only``), else ``(w, v)``.
    Raises:
        ValueError: ``type`` other than 1, ``subset_by_value`` (a value range makes the
            output size depend on the data, which traced code cannot have), a bad index range.
    """
    snp = _snp()
    if type != 1:
        raise ValueError(f"eigh: only type=1 (a v = w b v) is available, got type={type}")
    if subset_by_value is not None:
        raise ValueError("eigh: subset_by_value makes the number of eigenvalues depend on the "
                         "data; use subset_by_index, or select from the full result")
    uplo = "L" if lower else "U"
    if b is None:
        w, v = _la.eigh(a, UPLO=uplo)
    else:
        c = _la.cholesky(b, upper=not lower)
        l_ = c if lower else snp.conj(snp.matrix_transpose(c))
        y = _la.triangular_solve(l_, a, left_side=True, lower=True)
        m = snp.conj(snp.matrix_transpose(
            _la.triangular_solve(l_, snp.conj(snp.matrix_transpose(y)), left_side=True,
                                 lower=True)))
        w, z = _la.eigh(m)
        v = _la.triangular_solve(l_, z, left_side=True, lower=True, transpose_a=True,
                                 conjugate_a=True)
    if subset_by_index is not None:
        lo, hi = (int(i) for i in subset_by_index)
        n = w.shape[-1]
        if not 0 <= lo <= hi < n:
            raise ValueError(f"eigh: subset_by_index must satisfy 0 <= lo <= hi < {n}, got "
                             f"{subset_by_index}")
        w, v = w[..., lo:hi + 1], v[..., lo:hi + 1]
    return w if eigvals_only else (w, v)


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None, tol=None):
    """Eigenvalues (ascending) and eigenvectors of the real symmetric tridiagonal matrix with
    diagonal ``d`` ``(*batch, n)`` and off-diagonal ``e`` ``(*batch, n - 1)``.

    ``select``: "a" (all) or "i" (``select_range=(lo, hi)``, inclusive static indices).
    Returns:
        ``w`` (``eigvals_only``), else ``(w, v)`` with ``v`` ``(*batch, n, k)``.
    Raises:
        ValueError: shapes that do not fit, ``select="v"`` (a data-dependent count).
    """
    snp = _snp()
    d, e = snp.asarray(d), snp.asarray(e)
    if d.ndim < 1 or e.shape[:-1] != d.shape[:-1] or e.shape[-1] != max(d.shape[-1] - 1, 0):
        raise ValueError(f"eigh_tridiagonal: d (*batch, n) and e (*batch, n - 1), got shapes "
                         f"{tuple(d.shape)} and {tuple(e.shape)}")
    if select not in ("a", "i"):
        raise ValueError(f"eigh_tridiagonal: select must be 'a' or 'i' (select='v' makes the "
                         f"number of eigenvalues depend on the data), got {select!r}")
    n = d.shape[-1]
    eye = snp.eye(n, dtype=bool)
    up = snp.eye(n, k=1, dtype=bool)
    pad = snp.concatenate([e, snp.zeros(e.shape[:-1] + (1,), e.dtype)], axis=-1)
    m = (snp.where(eye, d[..., None, :], 0) + snp.where(up, pad[..., :, None], 0)
         + snp.where(up.T, pad[..., None, :], 0))
    sub = None if select == "a" else select_range
    return eigh(m, eigvals_only=eigvals_only, subset_by_index=sub)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """``(u, s, vh)`` (or ``s`` when not ``compute_uv``) of ``a`` ``(*batch, m, n)``; see
    ``starling.linalg.svd`` for the sign convention of the vectors."""
    if not compute_uv:
        return _la.svdvals(a)
    return tuple(_la.svd(a, full_matrices=full_matrices))


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """``(q, r)`` of ``a`` ``(*batch, m, n)``: mode "full" (``q (m, m)``), "economic"
    (``q (m, k)``), "r" (``(r,)``, a 1-tuple as SciPy), "raw" is not available.

    Raises:
        ValueError: an unknown mode, ``pivoting=True`` (column pivoting is not available).
    """
    if pivoting:
        raise ValueError("qr: pivoting=True (rank-revealing column pivoting) is not available; "
                         "use pivoting=False")
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"qr: mode must be 'full', 'economic' or 'r', got {mode!r}")
    if mode == "r":
        return (_la.qr(a, mode="complete").R,)
    q, r = _la.qr(a, mode="complete" if mode == "full" else "reduced")
    return q, r


def polar(a, side="right"):
    """``(u, p)``: ``a = u p`` (``side="right"``) or ``a = p u`` ("left"), ``u`` with
    orthonormal columns, ``p`` Hermitian positive semidefinite (``starling.linalg.polar``)."""
    return tuple(_la.polar(a, side=side))


def schur(a, output="real"):
    """Schur decomposition ``a = z t z^H`` of a square ``a`` (``(n, n)``, or a stack):
    ``output="real"``: quasi-upper-triangular real ``t`` (2x2 blocks for complex pairs), real
    orthogonal ``z``; "complex": upper-triangular complex ``t``, unitary ``z``.

    Runs SciPy (LAPACK ``gees``) on concrete values through ``pure_callback``: usable eagerly,
    compiled and under vmap, not differentiable (the Schur vectors of repeated eigenvalues are
    not unique).

    Raises:
        ValueError: ``output`` not "real" / "complex"; not a stack of square matrices.
        TypeError: under differentiation.
    """
    import scipy.linalg

    from ...transforms.debug import pure_callback
    from ...core.avals import ShapeDtypeStruct
    snp = _snp()
    if output not in ("real", "complex"):
        raise ValueError(f"schur: output must be 'real' or 'complex', got {output!r}")
    a = _la._common.as_inexact("schur", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"schur: expected a square matrix or a stack of them, got shape "
                         f"{tuple(a.shape)}")
    dt = a.dtype if output == "real" else snp.result_type(a.dtype, snp.complex64)

    def host(m):
        m = np.asarray(m)
        flat = m.reshape((-1,) + m.shape[-2:])
        t = np.empty(flat.shape, dt)
        z = np.empty(flat.shape, dt)
        for i, x in enumerate(flat):
            t[i], z[i] = scipy.linalg.schur(x, output=output)
        return t.reshape(m.shape), z.reshape(m.shape)
    spec = ShapeDtypeStruct(a.shape, dt)
    return pure_callback(host, (spec, spec), a, vmap_method="expand_dims")


def block_diag(*arrs):
    """The block-diagonal matrix of the given 2-d (or scalar / 1-d, taken as 1 x n) blocks:
    ``(sum rows, sum cols)``, dtype promoted; no blocks give a ``(1, 0)`` array (SciPy)."""
    snp = _snp()
    if not arrs:
        return snp.zeros((1, 0))
    blocks = []
    for x in arrs:
        x = snp.asarray(x)
        if x.ndim > 2:
            raise ValueError(f"block_diag: blocks must be at most 2-d, got shape "
                             f"{tuple(x.shape)}")
        blocks.append(snp.reshape(x, (1, -1)) if x.ndim < 2 else x)
    dt = snp.result_type(*blocks)
    cols = sum(b.shape[1] for b in blocks)
    rows, start = [], 0
    for b in blocks:
        c = b.shape[1]
        rows.append(snp.concatenate([snp.zeros((b.shape[0], start), dt), b.astype(dt),
                                     snp.zeros((b.shape[0], cols - start - c), dt)], axis=1))
        start += c
    return snp.concatenate(rows, axis=0)


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (``r[0]`` ignored;
    ``r = conj(c)`` by default, a Hermitian matrix): ``(len(c), len(r))``, or with leading
    batch dims ``(*batch, m)`` / ``(*batch, n)`` broadcast."""
    snp = _snp()
    c = snp.asarray(c)
    r = snp.conj(c) if r is None else snp.asarray(r)
    m, n = c.shape[-1], r.shape[-1]
    # entry (i, j): c[i - j] for i >= j, r[j - i] above the diagonal
    vals = snp.concatenate([snp.flip(r[..., 1:], axis=-1), c], axis=-1)
    idx = (np.arange(m)[:, None] - np.arange(n)[None, :]) + (n - 1)
    return snp.take(vals, snp.asarray(idx), axis=-1)
