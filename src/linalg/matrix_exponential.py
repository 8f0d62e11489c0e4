"""The matrix exponential: the ``matrix_exp`` primitive and its Frechet derivative
``expm_frechet`` (a primitive linear in its direction), with their rules."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, is_undefined, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.ops import rules_sharding as RS
from ..arrays.ops import shape_lax
from ..arrays.ops.elementwise_family import promote_operands
from ._common import (
    _check_inexact, _low_precision, _shape_str, _snp, as_inexact, batch_to_front, check_matrix,
    mT,
)


# ---- the scaling and squaring algorithm (NumPy, batched) ---------------------------------------
# Higham 2005, "The scaling and squaring method for the matrix exponential revisited", SIAM J.
# Matrix Anal. Appl. 26(4), Algorithm 2.3: the [m/m] Pade approximant r_m of degree m in
# {3, 5, 7, 9, 13} is accurate to unit roundoff (backward error) for ||A||_1 <= theta_m; larger
# matrices are scaled by 2^-s into that range and the result squared s times. The thetas are
# the paper's (Table 2.3 for double precision; m_max = 7 and its thetas for single precision).
_THETAS = {
    8: ((3, 1.495585217958292e-2), (5, 2.539398330063230e-1), (7, 9.504178996162932e-1),
        (9, 2.097847961257068e0), (13, 5.371920351148152e0)),
    4: ((3, 4.258730016922831e-1), (5, 1.880152677804762e0), (7, 3.925724783138660e0)),
}


def _pade_coefficients(m):
    """b_j of p_m(x) = sum_j b_j x^j, q_m(x) = p_m(-x) (exact, then rounded):
    b_j = (2m - j)! m! / ((2m)! j! (m - j)!)."""
    f = math.factorial
    return [float(Fraction(f(2 * m - j) * f(m), f(2 * m) * f(j) * f(m - j)))
            for j in range(m + 1)]


_PADE = {m: _pade_coefficients(m) for m in (3, 5, 7, 9, 13)}


def _pade(a, m):
    """r_m(a) = q_m(a)^-1 p_m(a) for a stack ``a`` (k, n, n), with p = V + U, q = V - U
    (U: the odd part, V: the even part); degree 13 in Higham's 6-product form."""
    b = _PADE[m]
    eye = np.eye(a.shape[-1], dtype=a.dtype)
    a2 = a @ a
    if m == 13:
        a4 = a2 @ a2
        a6 = a4 @ a2
        u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
                 + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
            + b[0] * eye
    else:
        powers = [eye, a2]
        while len(powers) <= m // 2:
            powers.append(powers[-1] @ a2)
        u = a @ sum(b[2 * k + 1] * p for k, p in enumerate(powers))
        v = sum(b[2 * k] * p for k, p in enumerate(powers))
    return np.linalg.solve(v - u, v + u)


def _one_norms(a):
    return np.abs(a).sum(axis=-2).max(axis=-1)


def _expm_impl(x):
    x = np.asarray(x)
    shape, n = x.shape, x.shape[-1]
    if x.size == 0:
        return np.zeros(shape, x.dtype)
    a = x.reshape((-1, n, n))
    out = np.full(a.shape, np.nan, a.dtype)   # non-finite input gives NaN (documented)
    finite = np.isfinite(a).all(axis=(-2, -1))
    norms = np.where(finite, _one_norms(np.where(finite[:, None, None], a, 0)), 0.0)
    table = _THETAS[8 if np.dtype(dtypes.real_dtype(a.dtype)).itemsize == 8 else 4]
    # Each matrix gets its own degree and its own number of squarings s (the smallest that
    # Algorithm 2.3 allows): over-squaring a matrix of small norm to match the largest of the
    # batch loses accuracy (the squaring phase amplifies rounding errors, Higham 2005 sec. 3;
    # Al-Mohy & Higham 2009, "A new scaling and squaring algorithm", sec. 1), so the max over
    # the batch is not used. Matrices are grouped by degree and the squarings masked, so the
    # Python loops run over at most 5 degrees and max(s) squaring steps, never per matrix.
    m_max, theta_max = table[-1]
    degree = np.full(norms.shape, m_max)
    for m, theta in reversed(table[:-1]):
        degree[norms <= theta] = m
    s = np.zeros(norms.shape, np.int64)
    big = norms > theta_max
    s[big] = np.maximum(0, np.ceil(np.log2(norms[big] / theta_max))).astype(np.int64)
    scale = np.ldexp(1.0, -s).astype(dtypes.real_dtype(a.dtype))   # exact powers of two
    for m, _ in table:
        idx = np.nonzero(finite & (degree == m))[0]
        if idx.size:
            out[idx] = _pade(a[idx] * scale[idx, None, None], m)
    for i in range(int(s.max(initial=0))):
        live = np.nonzero(s > i)[0]
        out[live] = out[live] @ out[live]
    return out.reshape(shape)


def _block_upper(p, q, zeros):
    """[[p, q], [0, p]] (NumPy or Starling stacks; ``zeros`` builds the zero block)."""
    cat = np.concatenate if isinstance(p, np.ndarray) else _snp().concatenate
    return cat([cat([p, q], -1), cat([zeros(p), p], -1)], -2)


def _frechet_impl(x, e):
    x, e = np.asarray(x), np.asarray(e)
    n = x.shape[-1]
    if x.size == 0:
        return np.zeros(e.shape, e.dtype)
    # L is linear in E: E is scaled to the norm of X (at least 1) so that it does not raise
    # the number of squarings of the block matrix (over-squaring loses accuracy), then the
    # result is scaled back.
    en = _one_norms(np.where(np.isfinite(e), e, 0))
    target = np.maximum(_one_norms(np.where(np.isfinite(x), x, 0)), 1.0)
    c = np.where(en > 0, target / np.where(en > 0, en, 1.0), 1.0)
    c = c.astype(dtypes.real_dtype(x.dtype))[..., None, None]
    big = _expm_impl(_block_upper(x, e * c, np.zeros_like))
    return big[..., :n, n:] / c


# ---- matrix_exp --------------------------------------------------------------------------------

matrix_exp_p = Primitive("matrix_exp", family="linalg")


def _expm_abstract(x):
    check_matrix("matrix_exp", x.shape, square=True)
    _check_inexact("matrix_exp", x)
    return ShapedArray(x.shape, x.dtype)


matrix_exp_p.impl = _low_precision(_expm_impl)
matrix_exp_p.abstract_eval = _expm_abstract


def matrix_exp(x, /):
    """The matrix exponential ``exp(x) = sum_k x^k / k!`` of each matrix of a stack:
    ``(*batch, n, n) -> (*batch, n, n)`` (``torch.linalg.matrix_exp``,
    ``jax.scipy.linalg.expm``, ``scipy.linalg.expm``).

    Method: scaling and squaring with Pade approximants of degree 3, 5, 7, 9 or 13 (3, 5 or 7
    in single precision), Higham 2005, "The scaling and squaring method for the matrix
    exponential revisited", SIAM J. Matrix Anal. Appl. 26(4), Algorithm 2.3. Degree and number
    of squarings are chosen per matrix from its 1-norm (no over-squaring of the small matrices
    of a batch). Matrices with a NaN or infinite entry give all-NaN results.

    Derivative: the Frechet derivative ``L(x, dx)``, the upper-right block of
    ``exp([[x, dx], [0, x]])`` (Najfeld & Havel 1995, "Derivatives of the matrix exponential
    and their computation", Adv. Appl. Math. 16; Al-Mohy & Higham 2009, "Computing the Frechet
    derivative of the matrix exponential", SIAM J. Matrix Anal. Appl. 30(4)). ``L(x, .)`` is
    linear; reverse mode uses its transpose ``L(x^T, .)`` (so the gradient of a real loss is
    ``L(x^H, g)``). Any order of derivative works (each order doubles the block size).

    Args:
        x: ``(*batch, n, n)``; float32 / float64 / complex64 / complex128 are computed in their
            precision, bool / integers in float32, float16 / bfloat16 in float32 rounded back.
    Returns:
        ``(*batch, n, n)`` in the dtype of ``x`` (after the promotion above).
    Raises:
        ValueError: ``x.ndim < 2`` or non-square matrices.
    """
    x = as_inexact("matrix_exp", x)
    check_matrix("matrix_exp", x.shape, square=True)
    return matrix_exp_p.bind(x)


# ---- expm_frechet: L(x, e), linear in e -------------------------------------------------------

expm_frechet_p = Primitive("expm_frechet", family="linalg")


def _frechet_abstract(x, e):
    check_matrix("expm_frechet", x.shape, square=True)
    _check_inexact("expm_frechet", x)
    if x.dtype != e.dtype or tuple(x.shape) != tuple(e.shape):
        raise ValueError(f"expm_frechet: the direction must match the matrix, got shapes "
                         f"{_shape_str(x.shape)} / {_shape_str(e.shape)} and dtypes {x.dtype} / "
                         f"{e.dtype}")
    return ShapedArray(e.shape, e.dtype)


expm_frechet_p.impl = _low_precision(_frechet_impl)
expm_frechet_p.abstract_eval = _frechet_abstract


def expm_frechet(x, e, /):
    """The Frechet derivative ``L(x, e) = d/dt exp(x + t e) |_{t=0}`` of the matrix
    exponential at ``x`` in the direction ``e``: ``(*batch, n, n), (*batch, n, n) ->
    (*batch, n, n)`` (``scipy.linalg.expm_frechet`` without ``compute_expm``).

    Method: the upper-right block of ``exp([[x, e], [0, x]])`` by ``matrix_exp``'s algorithm,
    with ``e`` rescaled to the norm of ``x`` first (Najfeld & Havel 1995; Al-Mohy & Higham
    2009, sec. 1).

    Raises:
        ValueError: non-square ``x`` or ``e`` of another shape.
    """
    x, e = promote_operands("expm_frechet", (x, e), "inexact")
    check_matrix("expm_frechet", x.shape, square=True)
    if tuple(x.shape) != tuple(e.shape):
        raise ValueError(f"expm_frechet: the direction must match the matrix, got shapes "
                         f"{_shape_str(x.shape)} and {_shape_str(e.shape)}")
    return expm_frechet_p.bind(x, e)


# ---- rules -------------------------------------------------------------------------------------
# exp is differentiated through L; L(x, e) is linear in e, and its derivative in x is again a
# Frechet derivative, of the block matrix: d L(x, e)[dx, de] is the upper-right block of
# L([[x, e], [0, x]], [[dx, de], [0, dx]]) (exp of the 2x2 block-triangular matrix, Najfeld &
# Havel 1995, Theorem 4.1). Transpose (the plain, non-conjugating one):
# <g, L(x, e)> = tr(g^T int_0^1 e^{sx} e e^{(1-s)x} ds) = <L(x^T, g), e>.

def _expm_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = matrix_exp_p.bind(x)
    if type(t) is Zero:
        return y, Zero(tangent_aval(y.aval))
    return y, expm_frechet_p.bind(x, t)


def _frechet_jvp(primals, tangents):
    (x, e), (dx, de) = primals, tangents
    y = expm_frechet_p.bind(x, e)
    if type(dx) is Zero:
        if type(de) is Zero:
            return y, Zero(tangent_aval(y.aval))
        return y, expm_frechet_p.bind(x, de)
    snp, n = _snp(), x.shape[-1]
    de = snp.zeros_like(dx) if type(de) is Zero else de
    big = expm_frechet_p.bind(_block_upper(x, e, snp.zeros_like),
                              _block_upper(dx, de, snp.zeros_like))
    nd = big.ndim
    upper = shape_lax.slice_in_dim(big, 0, n, axis=nd - 2)
    return y, shape_lax.slice_in_dim(upper, n, 2 * n, axis=nd - 1)


def _frechet_transpose(ct, x, e):
    if is_undefined(x):
        raise ValueError("expm_frechet: linear in the direction e only, not in the matrix x, "
                         "so it cannot be transposed with respect to x")
    if type(ct) is Zero:
        return [None, Zero(tangent_aval(e.aval))]
    return [None, expm_frechet_p.bind(mT(x), ct)]


matrix_exp_p.jvp = _expm_jvp
batch_to_front(matrix_exp_p)
matrix_exp_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own
expm_frechet_p.jvp = _frechet_jvp
expm_frechet_p.transpose = _frechet_transpose
expm_frechet_p.is_linear = True
batch_to_front(expm_frechet_p)
expm_frechet_p.sharding = RS.batch_dims(2)
