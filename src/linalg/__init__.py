"""``starling.linalg``: dense linear algebra on stacks of matrices ``(*batch, m, n)``.

One file per concept; each primitive and all its rules (JVP, transpose, batch, sharding) live in
one block of its file:

* ``_common.py``: the error and result types, input checks, the dtype policy, rule helpers.
* ``determinant.py`` (det, slogdet), ``solve.py`` (inv, solve), ``cholesky.py``, ``qr.py``,
  ``svd.py`` (svd, svdvals), ``eigh.py`` (eigh, eigvalsh), ``pinv.py`` (pinv, matrix_rank),
  ``norms.py`` (vector_norm, matrix_norm, norm), ``products.py`` (matrix_power, multi_dot).

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
from .cholesky import cholesky  # noqa: F401
from .determinant import det, slogdet  # noqa: F401
from .eigh import eigh, eigvalsh  # noqa: F401
from .norms import matrix_norm, norm, vector_norm  # noqa: F401
from .pinv import matrix_rank, pinv  # noqa: F401
from .products import matrix_power, multi_dot  # noqa: F401
from .qr import qr  # noqa: F401
from .solve import inv, solve  # noqa: F401
from .svd import svd, svdvals  # noqa: F401

__all__ = [
    "EighResult", "LinAlgError", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "det",
    "eigh", "eigvalsh", "inv", "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm",
    "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "vector_norm",
]
