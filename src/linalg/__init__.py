"""``starling.linalg``: dense linear algebra on stacks of matrices ``(*batch, m, n)``.

One file per concept; each primitive and all its rules (JVP, transpose, batch, sharding) live in
one block of its file:

* ``_common.py``: the error and result types, input checks, the dtype policy, rule helpers.
* ``determinant.py`` (det, slogdet), ``linear_solve.py`` (inv, solve, inv_ex, solve_ex),
  ``cholesky_factorization.py`` (cholesky, cholesky_ex), ``triangular.py`` (triangular_solve,
  solve_triangular, cholesky_solve), ``lu_factorization.py`` (lu_factor, lu_factor_ex, lu,
  lu_solve), ``qr_factorization.py``, ``singular_values.py`` (svd, svdvals),
  ``hermitian_eigen.py`` (eigh, eigvalsh), ``pseudo_inverse.py`` (pinv, matrix_rank),
  ``norms.py`` (vector_norm, matrix_norm, norm, cond), ``products.py`` (matrix_power,
  multi_dot), ``matrix_exponential.py`` (matrix_exp, expm_frechet), ``hermitian_sqrt.py``
  (matrix_sqrth), ``sylvester.py`` (solve_sylvester, sqrtm of a general matrix),
  ``polar_decomposition.py`` (polar), ``general_eigen.py`` (eig, eigvals),
  ``least_squares.py`` (lstsq), ``tensor_equations.py`` (tensorsolve, tensorinv);
  ``jacobi.py``: the native batched Jacobi eigh / SVD kernels (native/jacobi.cpp) that eigh and
  svd use for stacks of small matrices (LAPACK otherwise).

Module names differ from the function names they define, so that ``starling.linalg.eigh`` is
always the function (a module of the same name would be shadowed by it).

``starling.numpy.linalg`` re-exports these under the NumPy / Array API names and adds the
contractions (matmul, tensordot, vecdot, ...).

Dtype policy: float32 / float64 / complex64 / complex128 results have the input's dtype (inv,
solve and cholesky compute single precision in double and round back, as NumPy's wrappers do;
the others compute in the input's precision); bool and integer inputs are promoted to float32
(the default float); float16 / bfloat16 / float8 are computed in float32 and rounded back.

Derivatives: functions of Hermitian input (cholesky, eigh, eigvalsh, matrix_sqrth, pinv with
hermitian=True) differentiate along Hermitian directions, so their gradients are Hermitian
matrices (as in JAX and PyTorch). Eigenvalues / singular values equal to rounding count as one
repeated value whose vectors do not rotate among themselves: gradients of losses that do not
depend on the basis of such a subspace are finite and exact. Eigenvectors and right singular
vectors are in one gauge whatever kernel computed them: the entry of largest modulus of each
is real and positive (the left singular vectors follow their right ones; singular_values.py).

Failures (a singular matrix for inv / solve / triangular_solve / lu_solve / cholesky_solve, a
matrix that is not positive definite for cholesky): by default the failed matrices of a stack
give NaN results and the others are unaffected, the same in eager and in compiled code. With
``check_errors=True`` an evaluation on concrete values raises ``LinAlgError`` naming the op, the
shape and the index of the first failed matrix; the ``*_ex`` functions (inv_ex, solve_ex,
cholesky_ex, lu_factor_ex; PyTorch's names) also return LAPACK's ``info`` (int32, one per
matrix, 0 = success). An exactly zero pivot is not a failure of ``lu`` / ``lu_factor`` (LAPACK
completes the factorization; ``info`` reports it).
"""
from __future__ import annotations

from ._common import (  # noqa: F401
    EighResult, LinAlgError, QRResult, SlogdetResult, SVDResult,
)
from .cholesky_factorization import cholesky, cholesky_ex  # noqa: F401
from .determinant import det, slogdet  # noqa: F401
from .general_eigen import EigResult, eig, eigvals  # noqa: F401
from .hermitian_eigen import eigh, eigvalsh  # noqa: F401
from .lu_factorization import (  # noqa: F401
    LUFactorExResult, LUFactorResult, LUResult, lu, lu_factor, lu_factor_ex, lu_solve,
)
from .least_squares import LstsqResult, lstsq  # noqa: F401
from .matrix_exponential import expm_frechet, matrix_exp  # noqa: F401
from .norms import cond, matrix_norm, norm, vector_norm  # noqa: F401
from .pseudo_inverse import matrix_rank, pinv  # noqa: F401
from .polar_decomposition import polar  # noqa: F401
from .products import matrix_power, multi_dot  # noqa: F401
from .qr_factorization import qr  # noqa: F401
from .linear_solve import inv, inv_ex, solve, solve_ex  # noqa: F401
from .singular_values import svd, svdvals  # noqa: F401
from .hermitian_sqrt import matrix_sqrth  # noqa: F401
from .sylvester import solve_sylvester, sqrtm  # noqa: F401
from .tensor_equations import tensorinv, tensorsolve  # noqa: F401
from .triangular import cholesky_solve, solve_triangular, triangular_solve  # noqa: F401

__all__ = [
    "EigResult", "EighResult", "LUFactorExResult", "LUFactorResult", "LUResult", "LinAlgError",
    "LstsqResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cholesky_ex",
    "cholesky_solve", "cond", "det", "eig", "eigh", "eigvals", "eigvalsh", "expm_frechet", "inv",
    "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matrix_exp", "matrix_norm",
    "matrix_power", "matrix_rank", "matrix_sqrth", "multi_dot", "norm", "pinv", "polar", "qr",
    "slogdet", "solve", "solve_ex", "solve_sylvester", "solve_triangular", "sqrtm", "svd",
    "svdvals", "tensorinv",
    "tensorsolve", "triangular_solve", "vector_norm",
]
