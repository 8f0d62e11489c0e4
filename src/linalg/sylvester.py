"""The Sylvester equation ``a x + x b = c`` (``solve_sylvester``, a primitive linear in ``c``)
and the principal square root of a general matrix (``sqrtm``), whose derivative solves it.

Rules (one place for both):
- sylvester: from ``a x + x b = c``, ``da x + a dx + dx b + x db = dc``, so
  ``dx = solve_sylvester(a, b, dc - da x - x db)``; linear in ``c`` with the (plain,
  non-conjugating) transpose ``ct -> solve_sylvester(a^T, b^T, ct)``, since the operator
  ``x -> a x + x b`` has the transpose ``y -> a^T y + y b^T``.
- sqrtm: ``y y = x`` gives ``y dy + dy y = dx``: ``dy = solve_sylvester(y, y, dx)``. No
  eigenvector derivative appears, so every order is finite where the square root is smooth.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, is_undefined, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ..arrays.ops.convert_element_type import convert_element_type
from ._common import (
    _check_inexact, _low_precision, _shape_str, as_inexact, batch_to_front, check_matrix, mT,
)
from .hermitian_sqrt import sylvester_rhs


def _per_matrix(fn, out_shape, out_dtype, *stacks):
    """``fn(*matrices)`` over aligned stacks ``(k, ., .)``; NaN where an input has a non-finite
    entry or the solver fails (LinAlgError / ValueError), the other matrices unaffected."""
    out = np.full(out_shape, np.nan, out_dtype)
    for i in range(out_shape[0]):
        ms = [s[i] for s in stacks]
        if all(np.isfinite(m).all() for m in ms):
            try:
                with np.errstate(all="ignore"):
                    out[i] = fn(*ms)
            except (np.linalg.LinAlgError, ValueError):
                pass
    return out


# ---- solve_sylvester ---------------------------------------------------------------------------

sylvester_p = Primitive("solve_sylvester", family="linalg")


def _solve_unique(a, b, c):
    """``scipy.linalg.solve_sylvester``, or ValueError when the solution is not unique (to
    rounding): ``a`` and ``-b`` share an eigenvalue. LAPACK ``trsyl`` would scale its way to
    an enormous "solution" instead of failing."""
    import scipy.linalg
    sep = np.abs(np.linalg.eigvals(a)[:, None] + np.linalg.eigvals(b)[None, :]).min(initial=np.inf)
    size = np.abs(a).max(initial=0) + np.abs(b).max(initial=0)
    if not sep > 16 * np.finfo(a.dtype).eps * max(a.shape[0], b.shape[0]) * size:
        raise ValueError("solve_sylvester: a and -b share an eigenvalue")
    return scipy.linalg.solve_sylvester(a, b, c)


def _sylvester_impl(a, b, c):
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    m, n = c.shape[-2:]
    if c.size == 0:
        return np.zeros(c.shape, c.dtype)
    k = int(np.prod(c.shape[:-2], dtype=np.int64))
    out = _per_matrix(_solve_unique, (k, m, n), c.dtype, a.reshape((k, m, m)),
                      b.reshape((k, n, n)), c.reshape((k, m, n)))
    return out.reshape(c.shape)


def _sylvester_abstract(a, b, c):
    for name, x in (("a", a), ("b", b), ("c", c)):
        check_matrix(f"solve_sylvester ({name})", x.shape, square=name != "c")
        _check_inexact("solve_sylvester", x)
    m, n = c.shape[-2:]
    if (a.shape[-1] != m or b.shape[-1] != n or not a.shape[:-2] == b.shape[:-2] == c.shape[:-2]
            or not a.dtype == b.dtype == c.dtype):
        raise ValueError(f"solve_sylvester: a (*batch, m, m), b (*batch, n, n) and c "
                         f"(*batch, m, n) of one dtype, got {_shape_str(a.shape)} {a.dtype}, "
                         f"{_shape_str(b.shape)} {b.dtype}, {_shape_str(c.shape)} {c.dtype}")
    return ShapedArray(c.shape, c.dtype)


def _sylvester_jvp(primals, tangents):
    (a, b, c), (da, db, dc) = primals, tangents
    x = sylvester_p.bind(a, b, c)
    rhs = sylvester_rhs(x, dc, da, db)
    if rhs is None:
        return x, Zero(tangent_aval(x.aval))
    return x, sylvester_p.bind(a, b, rhs)


def _sylvester_transpose(ct, a, b, c):
    if is_undefined(a) or is_undefined(b):
        raise ValueError("solve_sylvester: linear in the right-hand side c only, not in a or b, "
                         "so it cannot be transposed with respect to them")
    if type(ct) is Zero:
        return [None, None, Zero(tangent_aval(c.aval))]
    return [None, None, sylvester_p.bind(mT(a), mT(b), ct)]


sylvester_p.impl = _low_precision(_sylvester_impl)
sylvester_p.abstract_eval = _sylvester_abstract
sylvester_p.jvp = _sylvester_jvp
sylvester_p.transpose = _sylvester_transpose
batch_to_front(sylvester_p)
sylvester_p.sharding = RS.batch_dims(2)


def solve_sylvester(a, b, c):
    """Solves ``a @ x + x @ b = c`` (SciPy ``linalg.solve_sylvester``).

    Args:
        a: ``(*batch, m, m)``; b: ``(*batch, n, n)``; c: ``(*batch, m, n)``; promoted to one
            floating / complex dtype (integers to float32).
    Returns:
        ``x`` ``(*batch, m, n)``. A matrix of the stack whose equation has no unique solution
        (``a`` and ``-b`` share an eigenvalue) or holds a non-finite entry gives NaN.
    Method: Bartels & Stewart (1972), "Solution of the matrix equation AX + XB = C": Schur
    forms of ``a`` and ``b``, then a triangular solve (LAPACK ``trsyl`` through SciPy).
    Derivatives in all three arguments (see the module docstring), every order.
    Raises:
        ValueError: shapes that do not fit.
    """
    from ..arrays.ops.elementwise_family import promote_operands
    a, b, c = promote_operands("solve_sylvester", (a, b, c), "inexact")
    return sylvester_p.bind(a, b, c)


# ---- sqrtm -------------------------------------------------------------------------------------

sqrtm_p = Primitive("sqrtm", family="linalg")


def _sqrtm_impl(x):
    import scipy.linalg
    x = np.asarray(x)
    n = x.shape[-1]
    out_dt = np.result_type(x.dtype, np.complex64)
    if x.size == 0:
        return np.zeros(x.shape, out_dt)
    k = int(np.prod(x.shape[:-2], dtype=np.int64))
    out = _per_matrix(lambda m: scipy.linalg.sqrtm(m.astype(out_dt)), (k, n, n), out_dt,
                      x.reshape((k, n, n)))
    return out.reshape(x.shape)


def _sqrtm_abstract(x):
    check_matrix("sqrtm", x.shape, square=True)
    _check_inexact("sqrtm", x)
    return ShapedArray(x.shape, dtypes.complex_dtype(x.dtype))


def _sqrtm_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = sqrtm_p.bind(x)
    if type(t) is Zero:
        return y, Zero(tangent_aval(y.aval))
    if t.dtype != y.dtype:
        t = convert_element_type(t, y.dtype, False)
    return y, sylvester_p.bind(y, y, t)


sqrtm_p.impl = _low_precision(_sqrtm_impl)
sqrtm_p.abstract_eval = _sqrtm_abstract
sqrtm_p.jvp = _sqrtm_jvp
batch_to_front(sqrtm_p)
sqrtm_p.sharding = RS.batch_dims(2)


def sqrtm(a, /):
    """The principal square root of a general square matrix (SciPy ``linalg.sqrtm``; JAX's
    dtype rule: the result is complex, ``complex64`` for float32 / complex64 input).

    Args:
        a: ``(*batch, n, n)``, floating or complex (integers promote to float32).
    Returns:
        ``y`` ``(*batch, n, n)`` complex with ``y @ y = a`` whose eigenvalues have non-negative
        real parts. A matrix with a non-finite entry, or one SciPy cannot root, gives NaN.
    Method: Higham's blocked Schur method (Deadman, Higham & Ralha 2013, through SciPy);
    derivative ``dy = solve_sylvester(y, y, da)``. For Hermitian positive semidefinite input,
    ``starling.linalg.matrix_sqrth`` is faster and stays real.
    Raises:
        ValueError: not a stack of square matrices.
    """
    return sqrtm_p.bind(as_inexact("sqrtm", a))
