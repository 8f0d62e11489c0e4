"""The square root of Hermitian positive semidefinite matrices: the ``matrix_sqrth`` primitive,
and the Sylvester equation ``s x + x s = c`` (``hermitian_sylvester``, a primitive linear in
``c``) that its derivative solves; ``polar`` uses the same equation."""
from __future__ import annotations

import numpy as np

from ..core.ad_util import Zero, is_undefined, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ._common import (
    _check_inexact, _low_precision, _shape_str, as_inexact, batch_to_front, check_matrix, mH,
    mT, mm,
)


def _stack_eigh(a, fn):
    """``fn(w, v, i)`` over the finite matrices ``i`` of a stack ``a`` (k, n, n) with their
    eigendecomposition (LAPACK syevd / heevd, lower triangle); NaN for the others."""
    out = np.full(a.shape, np.nan, a.dtype)
    finite = np.nonzero(np.isfinite(a).all(axis=(-2, -1)))[0]
    if finite.size:
        w, v = np.linalg.eigh(a[finite])
        out[finite] = fn(w, v, finite)
    return out


def _conj_t(v):
    return np.conj(np.swapaxes(v, -1, -2))


# ---- matrix_sqrth ------------------------------------------------------------------------------

matrix_sqrth_p = Primitive("matrix_sqrth", family="linalg")


def _sqrth_impl(x):
    x = np.asarray(x)
    shape, n = x.shape, x.shape[-1]
    if x.size == 0:
        return np.zeros(shape, x.dtype)

    def root(w, v, _):
        r = np.sqrt(np.maximum(w, 0)).astype(v.real.dtype)
        return (v * r[..., None, :]) @ _conj_t(v)
    return _stack_eigh(x.reshape((-1, n, n)), root).reshape(shape)


def _sqrth_abstract(x):
    check_matrix("matrix_sqrth", x.shape, square=True)
    _check_inexact("matrix_sqrth", x)
    return ShapedArray(x.shape, x.dtype)


matrix_sqrth_p.impl = _low_precision(_sqrth_impl)
matrix_sqrth_p.abstract_eval = _sqrth_abstract


def matrix_sqrth(x, /):
    """The principal square root ``s`` (Hermitian positive semidefinite, ``s @ s = x``) of
    Hermitian positive semidefinite matrices: ``(*batch, n, n) -> (*batch, n, n)``.

    Method: the eigendecomposition ``x = V diag(w) V^H`` (LAPACK ``syevd`` / ``heevd``) and
    ``s = V diag(sqrt(max(w, 0))) V^H`` (Higham 2008, "Functions of Matrices", sec. 6.1). The
    Hermitian part ``(x + x^H) / 2`` is what is decomposed, so the result and the gradient are
    Hermitian (the gradient is projected onto Hermitian matrices, as in JAX and PyTorch).
    Negative eigenvalues (rounding errors of a semidefinite input, or an indefinite input) are
    clipped to 0: the result is then the root of the nearest semidefinite matrix, not of ``x``.
    Matrices with a NaN or infinite entry give all-NaN results.

    Derivative: ``ds`` solves the Sylvester equation ``s ds + ds s = dx``, i.e.
    ``ds = V ((V^H dx V)_ij / (r_i + r_j)) V^H`` with ``r = sqrt(w)`` (Higham 2008, sec. 6.1).
    The denominators are sums, so repeated eigenvalues (the
    identity) have finite derivatives; they are infinite (inf / NaN) where ``r_i + r_j = 0``,
    i.e. for a singular ``x`` (two zero eigenvalues, or one on the diagonal). Any order of
    derivative works.

    Args:
        x: ``(*batch, n, n)``; float32 / float64 / complex64 / complex128 are computed in their
            precision, bool / integers in float32, float16 / bfloat16 in float32 rounded back.
    Returns:
        ``(*batch, n, n)`` in the dtype of ``x`` (after the promotion above).
    Raises:
        ValueError: ``x.ndim < 2`` or non-square matrices.
    """
    x = as_inexact("matrix_sqrth", x)
    check_matrix("matrix_sqrth", x.shape, square=True)
    return matrix_sqrth_p.bind((x + mH(x)) * 0.5)


# ---- hermitian_sylvester: s x + x s = c, linear in c -------------------------------------------

hermitian_sylvester_p = Primitive("hermitian_sylvester", family="linalg")


def _sylvester_impl(s, c):
    s, c = np.asarray(s), np.asarray(c)
    shape, n = c.shape, c.shape[-1]
    if c.size == 0:
        return np.zeros(shape, c.dtype)
    cs = c.reshape((-1, n, n))

    def solve(w, v, i):
        with np.errstate(divide="ignore", invalid="ignore"):
            k = 1.0 / (w[..., :, None] + w[..., None, :])
        return v @ (k * (_conj_t(v) @ cs[i] @ v)) @ _conj_t(v)
    return _stack_eigh(s.reshape((-1, n, n)), solve).reshape(shape)


def _sylvester_abstract(s, c):
    check_matrix("hermitian_sylvester", s.shape, square=True)
    _check_inexact("hermitian_sylvester", s)
    if s.dtype != c.dtype or tuple(s.shape) != tuple(c.shape):
        raise ValueError(f"hermitian_sylvester: the right-hand side must match the matrix, got "
                         f"shapes {_shape_str(s.shape)} / {_shape_str(c.shape)} and dtypes "
                         f"{s.dtype} / {c.dtype}")
    return ShapedArray(c.shape, c.dtype)


hermitian_sylvester_p.impl = _low_precision(_sylvester_impl)
hermitian_sylvester_p.abstract_eval = _sylvester_abstract


def hermitian_sylvester(s, c):
    """Solves ``s @ x + x @ s = c`` for Hermitian positive (semi)definite ``s``: both
    ``(*batch, n, n)``, one dtype (internal: the derivative of ``matrix_sqrth`` and ``polar``).

    Method: ``s = V diag(w) V^H`` (only the lower triangle of ``s`` is read), then
    ``x = V ((V^H c V)_ij / (w_i + w_j)) V^H`` (Bartels & Stewart 1972 in the eigenbasis).
    Infinite / NaN where ``w_i + w_j = 0``.
    """
    return hermitian_sylvester_p.bind(s, c)


# ---- rules -------------------------------------------------------------------------------------
# sqrth: s s = x gives s ds + ds s = dx. The solution x(s, c) is linear in c; in s,
# ds x + s dx + dx s + x ds = dc, so dx = sylvester(s, dc - ds x - x ds): no eigenvector
# derivative appears, so higher orders stay finite at repeated eigenvalues. Transpose (plain,
# non-conjugating): <g, x(s, c)> = <x(s^T, g), c>, since the operator c -> s c + c s has the
# transpose c -> s^T c + c s^T.

def _sqrth_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = matrix_sqrth_p.bind(x)
    if type(t) is Zero:
        return y, Zero(tangent_aval(y.aval))
    return y, hermitian_sylvester_p.bind(y, t)


def sylvester_rhs(x, dc, da, db):
    """The right-hand side ``dc - da x - x db`` of the tangent equation of ``a x + x b = c``
    (``a dx + dx b = dc - da x - x db``), skipping symbolic-zero terms; None when all are zero.
    Shared by the Hermitian (``a = b = s``) and the general Sylvester primitives."""
    rhs = None if type(dc) is Zero else dc
    for term in ((None if type(da) is Zero else mm(da, x)),
                 (None if type(db) is Zero else mm(x, db))):
        if term is not None:
            rhs = -term if rhs is None else rhs - term
    return rhs


def _sylvester_jvp(primals, tangents):
    (s, c), (ds, dc) = primals, tangents
    x = hermitian_sylvester_p.bind(s, c)
    rhs = sylvester_rhs(x, dc, ds, ds)
    if rhs is None:
        return x, Zero(tangent_aval(x.aval))
    return x, hermitian_sylvester_p.bind(s, rhs)


def _sylvester_transpose(ct, s, c):
    if is_undefined(s):
        raise ValueError("hermitian_sylvester: linear in the right-hand side c only, not in the "
                         "matrix s, so it cannot be transposed with respect to s")
    if type(ct) is Zero:
        return [None, Zero(tangent_aval(c.aval))]
    return [None, hermitian_sylvester_p.bind(mT(s), ct)]


matrix_sqrth_p.jvp = _sqrth_jvp
batch_to_front(matrix_sqrth_p)
matrix_sqrth_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
hermitian_sylvester_p.jvp = _sylvester_jvp
hermitian_sylvester_p.transpose = _sylvester_transpose
hermitian_sylvester_p.is_linear = True
batch_to_front(hermitian_sylvester_p)
hermitian_sylvester_p.sharding = RS.batch_dims(2)
