"""Shared pieces of starling.linalg: the error and result types, input checks, the dtype
policy, the failure policy (NaN by default, ``check_errors``, LAPACK ``info`` and the
``linalg_info`` primitive of the ``*_ex`` functions), the per-matrix LAPACK drivers (getrf,
potrf) and the helpers that the transformation rules are written with."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..arrays.array import Array, wrap
from ..arrays.ops import rules_sharding as RS
from ..arrays.ops import shape_lax
from ..arrays.ops.convert_element_type import convert_element_type
from ..arrays.ops.elementwise_family import promote_operands
from ..arrays.ops.rules import batch_size, bdim_to_front, defjvp_zero


_LOW = frozenset((dtypes.float16, dtypes.bfloat16) + dtypes.LOW_PRECISION_FLOATS)


class LinAlgError(ValueError):
    """A linear-algebra routine failed on its input: a singular matrix for ``inv`` / ``solve`` /
    ``triangular_solve`` / ``lu_solve``, a matrix that is not positive definite for ``cholesky``.
    Raised only when asked (``check_errors=True``, on concrete values, eager or compiled); by
    default the failed matrices of a stack give NaN results and the others are unaffected.
    Subclasses ValueError (as NumPy's ``numpy.linalg.LinAlgError``)."""


class SlogdetResult(NamedTuple):
    """``slogdet`` output: ``sign`` and ``logabsdet`` of shape ``(*batch,)``."""

    sign: Any
    logabsdet: Any


class QRResult(NamedTuple):
    """``qr`` output: ``Q`` ``(*batch, m, k)`` and ``R`` ``(*batch, k, n)``."""

    Q: Any
    R: Any


class SVDResult(NamedTuple):
    """``svd`` output: ``U``, singular values ``S`` (descending) and ``Vh``."""

    U: Any
    S: Any
    Vh: Any


class EighResult(NamedTuple):
    """``eigh`` output: ascending ``eigenvalues`` and column ``eigenvectors``."""

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


def to_batch(x, batch, core=2):
    """``x`` (``(*b, *core_dims)``, the last ``core`` dims its own) with its leading dims
    broadcast to ``batch`` (NumPy's rules; ``batch`` already checked by broadcast_shapes)."""
    shape = tuple(x.shape)
    if shape[:len(shape) - core] == tuple(batch):
        return x
    nb = len(batch)
    return shape_lax.broadcast_in_dim(x, tuple(batch) + shape[len(shape) - core:],
                                      tuple(range(nb - len(shape) + core, nb + core)))


def _low_precision(fn):
    """Runs ``fn`` in float32 for half/low-precision floats and rounds float results back
    (integer results, such as pivots and LAPACK info, keep their dtype)."""
    def back(o, dt):
        o = np.asarray(o)
        return o.astype(dt) if o.dtype.kind in "fc" else o

    def impl(*xs, **params):
        xs = [np.asarray(x) for x in xs]
        dt = xs[0].dtype
        if dt not in _LOW:
            return fn(*xs, **params)
        out = fn(*[x.astype(np.float32) if x.dtype == dt else x for x in xs], **params)
        if isinstance(out, (list, tuple)):
            return [back(o, dt) for o in out]
        return back(out, dt)
    impl.__name__ = fn.__name__
    return impl


# ---- failures: NaN by default, LinAlgError when asked ------------------------------------------
# A factorization that fails on one matrix of a stack (LAPACK info > 0) must not cost the others
# their results, and eager and compiled code must agree: by default the failed matrices' results
# are NaN. The primitives take ``check_errors``: None (the default), or the name of the public op
# to blame, in which case an evaluation on concrete values raises LinAlgError for the first
# failed matrix. ``info`` arrays follow LAPACK (and torch's ``*_ex``): int32 of shape (*batch),
# 0 = success, k > 0 = the routine's 1-based info.

_ROUTINES = {
    "getrf": ("is singular: the LU factorization with partial pivoting (LAPACK getrf) found the "
              "pivot U[{i}, {i}] exactly zero"),
    "potrf": ("is not positive definite: its leading minor of order {k} is not (the Cholesky "
              "factorization, LAPACK potrf, hit a non-positive or NaN pivot)"),
    "trtrs": "is singular: its diagonal entry [{i}, {i}] is exactly zero (LAPACK trtrs)",
    "nopivot": ("has a zero pivot U[{i}, {i}] in its LU factorization without pivoting "
                "(use pivot=True)"),
}


def errors_param(op, check_errors):
    """The value of a primitive's ``check_errors`` param for the public ``op``."""
    if not isinstance(check_errors, (bool, np.bool_)):
        raise TypeError(f"{op}: check_errors must be a bool, got {check_errors!r}")
    return op if check_errors else None


def raise_on_info(op, info, shape, routine):
    """Raises LinAlgError naming ``op``, ``shape`` and the first matrix with ``info != 0``."""
    bad = np.flatnonzero(np.asarray(info).reshape(-1))
    if not bad.size:
        return
    k = int(np.asarray(info).reshape(-1)[bad[0]])
    batch = tuple(shape[:-2])
    where = (f"matrix {tuple(int(i) for i in np.unravel_index(bad[0], batch))} of the stack"
             if batch else "the matrix")
    what = _ROUTINES[routine].format(i=k - 1, k=k)
    more = f" ({bad.size} of {int(np.prod(batch))} matrices failed)" if bad.size > 1 else ""
    raise LinAlgError(f"{op}: {where} of shape {_shape_str(shape)} {what}{more}")


def settle(outs, info, shape, routine, check_errors):
    """Raises when asked (``check_errors`` is the op name), else sets the results of the failed
    matrices (``info != 0``) to NaN. ``outs``: arrays of shape (*batch, ...)."""
    if check_errors:
        raise_on_info(check_errors, info, shape, routine)
    return nan_where(outs, np.asarray(info) != 0)


def nan_where(outs, bad):
    """Copies of ``outs`` (arrays of shape (*batch, ...)) with NaN (complex: NaN + NaN j) for
    the matrices where ``bad`` (*batch) holds; ``outs`` themselves when none is bad."""
    if not bad.any():
        return list(outs)
    res = [np.array(o) for o in outs]   # writable
    for o in res:
        o[bad] = complex(np.nan, np.nan) if o.dtype.kind == "c" else np.nan
    return res


def _stack(a):
    """``a`` (*batch, m, n) as a C-contiguous (count, m, n) stack and the batch shape."""
    count = int(np.prod(a.shape[:-2], dtype=np.int64))
    return np.ascontiguousarray(a).reshape((count,) + a.shape[-2:]), a.shape[:-2]


def getrf(a):
    """LU factorization with partial pivoting of each matrix of ``a`` (*batch, m, n) (LAPACK
    getrf through scipy.linalg.lapack; SciPy has no batched getrf, so this loops over the
    matrices, about 1 us of overhead each). Returns packed ``lu`` (*batch, m, n), 1-based int32
    ``ipiv`` (*batch, min(m, n)) and int32 ``info`` (*batch)."""
    from scipy.linalg import lapack
    m, n = a.shape[-2:]
    k = min(m, n)
    flat, batch = _stack(a)
    # each matrix Fortran-ordered in place, so that getrf overwrites it without a copy
    lu = np.empty((flat.shape[0], n, m), a.dtype).transpose(0, 2, 1)
    lu[...] = flat
    ipiv = np.empty((flat.shape[0], k), np.int32)
    info = np.zeros(flat.shape[0], np.int32)
    if k:
        fn = lapack.get_lapack_funcs("getrf", dtype=a.dtype)
        for i in range(flat.shape[0]):
            _, ipiv[i], info[i] = fn(lu[i], overwrite_a=True)
        ipiv += 1   # f2py returns LAPACK's pivots 0-based
    info = np.where(info > 0, info, 0).astype(np.int32)
    return (np.ascontiguousarray(lu).reshape(a.shape), ipiv.reshape(batch + (k,)),
            info.reshape(batch))


def potrf_info(a):
    """LAPACK potrf's info (lower triangle) for each matrix of ``a`` (*batch, n, n)."""
    from scipy.linalg import lapack
    flat, batch = _stack(a)
    info = np.zeros(flat.shape[0], np.int32)
    if a.shape[-1]:
        fn = lapack.get_lapack_funcs("potrf", dtype=a.dtype)
        for i in range(flat.shape[0]):
            info[i] = max(int(fn(flat[i], lower=1, clean=0)[1]), 0)
        # potrf's comparisons pass NaN pivots: a non-finite entry at row i of the lower
        # triangle makes the leading minor of order i + 1 the first that is not positive definite
        bad = ~np.isfinite(np.tril(flat))
        rows = np.where(bad.any(axis=-1), np.arange(1, flat.shape[-1] + 1), 0)
        first = np.where(bad.any(axis=(-2, -1)), np.where(rows > 0, rows, 1 << 30).min(axis=-1), 0)
        info = np.where((first > 0) & ((info == 0) | (first < info)), first, info).astype(np.int32)
    return info.reshape(batch)


def info_of(routine, a, out):
    """int32 info (*batch) of ``routine`` ("getrf" / "potrf") on ``a`` (*batch, n, n) for an op
    whose result ``out`` (*batch, ...) is NaN on the matrices where it failed (NumPy's batched
    LAPACK routines fill them so): only the matrices with a NaN (or an empty) result are
    factored again."""
    flat_out = np.asarray(out).reshape(a.shape[:-2] + (-1,))
    if flat_out.shape[-1] == 0:
        cand = np.ones(a.shape[:-2], bool)
    else:
        cand = np.isnan(flat_out).any(axis=-1)
    info = np.zeros(a.shape[:-2], np.int32)
    if cand.any():
        sub = a[cand].astype(np.complex128 if a.dtype.kind == "c" else np.float64)  # as gufunc
        info[cand] = getrf(sub)[2] if routine == "getrf" else potrf_info(sub)
    return info


def gufunc(name, *args):
    """NumPy's batched LAPACK gufunc ``name`` (numpy.linalg._umath_linalg): unlike the public
    wrappers, which raise for the whole stack when one matrix fails, it fills the failed
    matrices' results with NaN and keeps the others. As in NumPy's wrappers, single precision
    is computed in double and rounded back."""
    from numpy.linalg import _umath_linalg
    dt = args[0].dtype
    sig = "D" if dt.kind == "c" else "d"
    with np.errstate(all="ignore"):
        out = getattr(_umath_linalg, name)(*args, signature=f"{sig * len(args)}->{sig}")
    return out.astype(dt, copy=False)


linalg_info_p = Primitive("linalg_info", family="linalg")
linalg_info_p.abstract_eval = lambda a, out, *, routine: ShapedArray(a.shape[:-2], dtypes.int32)
linalg_info_p.impl = _low_precision(lambda a, out, *, routine: info_of(routine, a, out))
defjvp_zero(linalg_info_p)          # an integer output


def lapack_info(routine, a, out):
    """int32 (*batch) LAPACK info of ``routine`` on ``a`` given the op's result ``out`` (the
    ``info`` of the ``*_ex`` functions); an integer output, so its tangents are zero."""
    return linalg_info_p.bind(a, out, routine=routine)


# ---- helpers for the transformation rules ------------------------------------------------------
# Used by every family file. Masks and identities are constants in the REAL dtype of the value
# they multiply, so that they never promote a tangent (complex64 * float32 stays complex64).

def _snp():
    from ..arrays.ops.linear import snp  # the namespace imports this module: look it up lazily
    return snp


def mT(x):  # noqa: N802
    """Transpose of the last two dims (no conjugation); used by the linalg rules."""
    nd = x.ndim
    return shape_lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def conj(x):
    """Complex conjugate of ``x`` (..., m, n); ``x`` itself for real dtypes (no copy)."""
    return _snp().conj(x) if dtypes.is_complex(x.dtype) else x


def mH(x):  # noqa: N802  (conjugate transpose)
    """Conjugate transpose of the last two dims: (..., m, n) -> (..., n, m)."""
    return conj(mT(x))


def mm(a, b):
    """Batched matrix product (..., m, k) @ (..., k, n) -> (..., m, n) (starling.numpy.matmul)."""
    return _snp().matmul(a, b)


def real(x):
    """Real part of ``x``; ``x`` itself for real dtypes."""
    return _snp().real(x) if dtypes.is_complex(x.dtype) else x


def const(values, like):
    """``values`` as a constant array in the real dtype of ``like``."""
    return wrap(np.asarray(values, dtype=dtypes.real_dtype(like.dtype)), False)


def tri(m, n, k, like, upper=False):
    """Constant 0/1 mask of the lower (``upper``: upper) triangle from diagonal ``k`` on."""
    ones = np.ones((m, n))
    return const(np.triu(ones, k) if upper else np.tril(ones, k), like)


def row(v):
    """``v[..., None, :]``."""
    return shape_lax.reshape(v, tuple(v.shape[:-1]) + (1, v.shape[-1]))


def col(v):
    """``v[..., :, None]``."""
    return shape_lax.reshape(v, tuple(v.shape) + (1,))


def diag_part(x):
    """The main diagonal of the last two dims: (..., m, n) -> (..., min(m, n))."""
    from ..arrays.ops.linear import _diagonal
    return _diagonal(x, x.ndim - 2, x.ndim - 1)


def diag_embed(v):
    """``(*b, n) -> (*b, n, n)`` with ``v`` on the diagonal (linear in ``v``)."""
    return row(v) * const(np.eye(v.shape[-1]), v)


def real_diag(x, scale=1.0):
    """``scale * diag(real(diag(x)))`` in the dtype of ``x`` (linear in ``x``)."""
    d = real(x) * const(scale * np.eye(x.shape[-1]), x)
    return d if d.dtype == x.dtype else convert_element_type(d, x.dtype, False)


def imag_diag_part(d):
    """``i * imag(d)`` for a complex vector ``d`` (linear: ``(d - conj(d)) / 2``)."""
    return (d - _snp().conj(d)) * 0.5


def symmetrize(t):
    """``(t + t^H) / 2``: the projection onto Hermitian matrices (linear in ``t``).

    The tangent of an input taken as symmetric / Hermitian (cholesky, eigh, ...): its
    transpose is the same projection, so those functions' gradients are Hermitian matrices, as
    JAX and PyTorch define them, rather than triangular ones."""
    return (t + mH(t)) * 0.5


def offdiag_reciprocal(d, tol=None):
    """``1 / d`` off the diagonal, 0 on it (``d``: ``(*b, n, n)``).

    With ``tol`` (broadcastable to ``d``), entries with ``|d| <= tol`` are 0 too: the pairs of
    (numerically) equal eigenvalues / singular values. A derivative rule that divides by their
    gaps then gives the vectors of a repeated value no rotation among themselves. In reverse
    mode that term multiplies the part of the cotangent that rotates the basis of the repeated
    value's space, which is zero for losses that do not depend on that basis (functions of the
    eigenvalues, of the projector onto the whole space): their gradients come out exact and
    finite instead of 0 / 0."""
    snp = _snp()
    eye = wrap(np.eye(d.shape[-1], dtype=bool), False)
    skip = eye if tol is None else snp.logical_or(eye, snp.abs(d) <= tol)
    return snp.where(skip, 0.0, 1.0 / snp.where(skip, 1.0, d))


def degenerate_tol(values):
    """Gap below which two of ``values`` (``(*b, k)``, from one matrix) count as equal:
    ``k * eps * max|values|`` per matrix, shape ``(*b, 1, 1)``: the size of the rounding
    errors of a backward-stable eigen / singular value solver (LAPACK's error bounds, Anderson
    et al., LAPACK Users' Guide, sec. 4.7)."""
    from ..arrays.ops.autodiff import stop_gradient
    snp = _snp()
    eps = float(dtypes.finfo(values.dtype).eps)
    big = snp.max(snp.abs(stop_gradient(values)), axis=-1, keepdims=True, initial=0.0)
    return col(big * (eps * max(values.shape[-1], 1)))


def eye_of(n, like):
    """Constant (n, n) identity in the dtype of ``like``."""
    return wrap(np.eye(n, dtype=like.dtype), False)


def zeros_for(prim, outs):
    if prim.multiple_results:
        return [Zero(tangent_aval(o.aval)) for o in outs]
    return Zero(tangent_aval(outs.aval))


def batch_to_front(prim):
    """Batch rule for primitives that take leading batch dims: the batch axis goes first (an
    unbatched operand is broadcast) and one call does the whole batch."""
    def rule(args, dims, **params):
        size = batch_size(args, dims)
        out = prim.bind(*[bdim_to_front(a, d, size) for a, d in zip(args, dims)], **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    prim.batch = rule
    return rule


batch_to_front(linalg_info_p)
linalg_info_p.sharding = RS.batch_dims(2)   # each matrix of the stack on its own


# ---- det / slogdet -----------------------------------------------------------------------------


def lapack_or_nan(fn, x, ok=None, per_matrix=()):
    """``fn(x)`` (a LAPACK driver over a stack ``(*batch, m, n)`` returning a list of arrays
    with leading ``*batch`` dims) with NaN results for the matrices it cannot take: those
    holding inf / NaN (``ok``, shape ``(*batch)``: which matrices are usable; default: all
    entries finite) and those on which LAPACK fails (a rare non-convergence raises
    ``numpy.linalg.LinAlgError`` for the whole stack: the stack is then redone matrix by
    matrix). The other matrices of the stack keep their values: Starling's default for
    non-finite input, the same in eager and compiled code (NumPy raises for the whole stack).
    ``per_matrix``: arrays of shape ``(*batch)`` passed to ``fn`` after the stack (one value per
    matrix when it is redone matrix by matrix)."""
    if ok is None:
        ok = np.isfinite(x).all(axis=(-2, -1))
    clean = x if ok.all() else np.where(ok[..., None, None], x, 0)
    try:
        outs = list(fn(clean, *per_matrix))
    except np.linalg.LinAlgError:
        flat = clean.reshape((-1,) + clean.shape[-2:])
        extra = [np.broadcast_to(e, x.shape[:-2]).reshape(-1) for e in per_matrix]
        # the shapes of one matrix's results
        template = list(fn(np.zeros_like(flat[0]), *[e[0] for e in extra]))
        each = []
        for i, a in enumerate(flat):
            try:
                each.append(list(fn(a, *[e[i] for e in extra])))
            except np.linalg.LinAlgError:
                each.append(None)
        done = [r for r in each if r is not None]
        # (NumPy's eig gives a real dtype for a matrix with real eigenvalues: the stack takes
        # the common one)
        outs = [np.empty((len(each),) + t.shape, np.result_type(t, *[r[j] for r in done]))
                for j, t in enumerate(template)]
        for i, r in enumerate(each):
            for o, v in zip(outs, r if r is not None else template):
                o[i] = v
        outs = [o.reshape(x.shape[:-2] + o.shape[1:]) for o in outs]
        ok = ok & np.array([r is not None for r in each]).reshape(ok.shape)
    return nan_where(outs, ~ok)
