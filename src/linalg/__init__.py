"""``starling.linalg``: dense linear algebra on stacks of matrices ``(*batch, m, n)``.

One file per concept; each primitive and all its rules (JVP, transpose, batch, sharding) live in
one block of its file:

* ``_common.py``: the error and result types, input checks, the dtype policy, rule helpers.
* ``determinant.py`` (det, slogdet), ``linear_solve.py`` (inv, solve, inv_ex, solve_ex),
  ``cholesky_factorization.py`` (cholesky, cholesky_ex), ``qr_factorization.py``, ``singular_values.py`` (svd,
  svdvals), ``hermitian_eigen.py`` (eigh, eigvalsh), ``pseudo_inverse.py`` (pinv, matrix_rank),
  ``norms.py`` (vector_norm, matrix_norm, norm, cond), ``products.py`` (matrix_power,
  multi_dot), ``matrix_exponential.py`` (matrix_exp, expm_frechet), ``sqrtm.py``
  (matrix_sqrth), ``polar_decomposition.py`` (polar), ``general_eigen.py`` (eig, eigvals),
  ``least_squares.py`` (lstsq), ``tensor_equations.py`` (tensorsolve, tensorinv).

Module names differ from the function names they define, so that ``starling.linalg.eigh`` is
always the function (a module of the same name would be shadowed by it).

``starling.numpy.linalg`` re-exports these under the NumPy / Array API names and adds the
contractions (matmul, tensordot, vecdot, ...).

Dtype policy: float32 / float64 / complex64 / complex128 are computed in their own precision;
bool and integer inputs are promoted to float32 (the default float); float16 / bfloat16 / float8
are computed in float32 and rounded back.
"""
from __future__ import annotations

from ._common import (  # noqa: F401
    EighResult, LinAlgError, QRResult, SlogdetResult, SVDResult,
)
from .cholesky_factorization import cholesky, cholesky_ex  # noqa: F401
from .determinant import det, slogdet  # noqa: F401
from .general_eigen import EigResult, eig, eigvals  # noqa: F401
from .hermitian_eigen import eigh, eigvalsh  # noqa: F401
from .least_squares import LstsqResult, lstsq  # noqa: F401
from .matrix_exponential import expm_frechet, matrix_exp  # noqa: F401
from .norms import cond, matrix_norm, norm, vector_norm  # noqa: F401
from .pseudo_inverse import matrix_rank, pinv  # noqa: F401
from .polar_decomposition import polar  # noqa: F401
from .products import matrix_power, multi_dot  # noqa: F401
from .qr_factorization import qr  # noqa: F401
from .linear_solve import inv, inv_ex, solve, solve_ex  # noqa: F401
from .singular_values import svd, svdvals  # noqa: F401
from .sqrtm import matrix_sqrth  # noqa: F401
from .tensor_equations import tensorinv, tensorsolve  # noqa: F401

__all__ = [
    "EigResult", "EighResult", "LinAlgError", "LstsqResult", "QRResult", "SVDResult",
    "SlogdetResult", "cholesky", "cholesky_ex", "cond", "det", "eig", "eigh", "eigvals", "eigvalsh",
    "expm_frechet", "inv", "inv_ex", "lstsq", "matrix_exp", "matrix_norm", "matrix_power",
    "matrix_rank", "matrix_sqrth", "multi_dot", "norm", "pinv", "polar", "qr", "slogdet", "solve",
    "solve_ex", "svd", "svdvals", "tensorinv", "tensorsolve", "vector_norm",
]
