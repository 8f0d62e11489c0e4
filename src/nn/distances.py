"""Pairwise p-norm distances: ``cdist`` (between two sets of points), ``pdist`` (within one set,
condensed like ``scipy.spatial.distance.pdist``) and their modules ``CDist`` / ``PDist``, with
PyTorch's argument conventions.

Derivative convention (every order, forward and reverse alike): where a norm is not
differentiable (coincident points, a zero coordinate difference under ``p <= 1``) the
derivative is the minimum-norm subgradient, 0, never NaN; ``p = inf`` splits the derivative
evenly among tied coordinates (``max``'s convention); ``p = 0`` (a count) has derivative 0.
Everything is composed of public ops with ``where`` guards, so grad / jvp / vmap / compile /
checkpoint apply to any order by construction.
"""
from __future__ import annotations

import math

import numpy as np

from .. import cond, stop_gradient
from .. import numpy as snp
from .module import Module

__all__ = ["cdist", "pdist", "CDist", "PDist"]

_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
          "donot_use_mm_for_euclid_dist")
# PyTorch's threshold: "if necessary" means more than 25 rows in either input
_MM_MIN_ROWS = 25
# A squared distance from the matmul formula within this many ulps of |x|^2 + |y|^2 is
# rounding noise (measured: <= 4.1 ulps at coincident points for M = 3..2048, float32 and
# float64); it is returned as exactly 0 so coincident points get distance 0 and derivative 0.
_MM_NOISE_ULPS = 16


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distance between each row of ``x1`` and each row of ``x2`` (PyTorch's
    ``torch.cdist``; SciPy's ``cdist`` with metric "minkowski", "cityblock", "chebyshev").

    ``out[..., i, j] = (sum_k |x1[..., i, k] - x2[..., j, k]|^p)^(1/p)``; ``p = 0`` counts the
    nonzero differences (Hamming count), ``p = inf`` is ``max_k |difference|``.

    Args:
        x1: ``(*batch1, P, M)`` points.
        x2: ``(*batch2, R, M)`` points; ``batch1`` and ``batch2`` broadcast.
        p: ``p >= 0`` (a float, ``math.inf`` allowed; ``0 < p < 1`` gives the usual
            non-norm quasi-distance).
        compute_mode: for ``p = 2`` only: ``"use_mm_for_euclid_dist"`` computes
            ``sqrt(|x|^2 + |y|^2 - 2 x.y)`` with one matrix product (fast for large inputs;
            absolute error about ``sqrt(eps) * |x|``: squared distances within rounding of 0
            come out as exactly 0, and inf inputs give NaN); ``"donot_use_mm_for_euclid_dist"``
            sums the squared differences (exact to rounding, memory ``P * R * M``);
            ``"use_mm_for_euclid_dist_if_necessary"`` (default) uses the matrix product when
            ``P > 25`` or ``R > 25``, as PyTorch.

    Returns:
        ``(*batch, P, R)`` with ``batch`` the broadcast of ``batch1`` and ``batch2``; dtype the
        promoted floating dtype of the inputs. ``M = 0`` gives zeros. The exact mode neither
        overflows nor underflows before the result does: for ``p > 1``, when the inputs'
        magnitudes could make ``|d|^p`` leave the normal range (a coordinate above about
        ``(max / M)^(1/p)`` or a nonzero one below ``tiny^(1/p) / eps``), each pair is scaled
        by its largest difference (a ``cond``: one extra pass, only then; both branches run
        under ``vmap``). NaN in a difference gives NaN, an infinite difference ``inf``.

    Derivatives (every order, forward and reverse, including the matmul mode): 0 at
    coincident points and, for ``p <= 1``, 0 along a coordinate whose difference is 0 (the
    minimum-norm subgradient; the true slope is infinite for ``p < 1``). PyTorch has no
    forward mode for cdist; this one does.

    Raises:
        TypeError: non-floating (integer, bool or complex) inputs.
        ValueError: ``p < 0`` or NaN, an unknown ``compute_mode``, inputs of rank < 2,
            different ``M``, or batch dims that do not broadcast.
    """
    op = "cdist"
    x1, x2 = _floating(op, x1, x2)
    p = _check_p(op, p)
    if compute_mode not in _MODES:
        raise ValueError(f"{op}: compute_mode must be one of {_MODES}, got {compute_mode!r}")
    if x1.ndim < 2 or x2.ndim < 2:
        raise ValueError(f"{op}: inputs must be (*batch, P, M) and (*batch, R, M), got shapes "
                         f"{tuple(x1.shape)} and {tuple(x2.shape)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"{op}: x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} must have the "
                         f"same number of columns M")
    try:
        batch = snp.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    except ValueError:
        raise ValueError(f"{op}: the batch dims of x1 {tuple(x1.shape)} and x2 "
                         f"{tuple(x2.shape)} do not broadcast") from None
    P, R, M = int(x1.shape[-2]), int(x2.shape[-2]), int(x1.shape[-1])
    x1 = snp.broadcast_to(x1, batch + (P, M))
    x2 = snp.broadcast_to(x2, batch + (R, M))
    if M == 0 or P == 0 or R == 0:
        return snp.zeros(batch + (P, R), x1.dtype)
    use_mm = p == 2.0 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == "use_mm_for_euclid_dist_if_necessary"
        and (P > _MM_MIN_ROWS or R > _MM_MIN_ROWS)))
    if use_mm:
        return _euclid_mm(x1, x2)
    return _pnorm(x1, x2, p)


def pdist(x, p=2.0):
    """p-norm distance between every pair of rows ``i < j`` of ``x``, in the condensed order
    of ``scipy.spatial.distance.pdist`` (row-major upper triangle; PyTorch's
    ``torch.pdist``). Computed exactly (no matrix-product shortcut), as PyTorch.

    Args:
        x: ``(*batch, N, M)`` points (PyTorch accepts only ``(N, M)``; leading dims here are
            independent sets).
        p: ``p >= 0`` as in :func:`cdist` (0: nonzero count, ``math.inf``: max).

    Returns:
        ``(*batch, N * (N - 1) // 2)``, dtype of ``x`` (floating); the pair ``(i, j)``,
        ``i < j``, sits at ``N*i - i*(i+1)/2 + j - i - 1``. Same values and derivative
        conventions as :func:`cdist`'s exact mode.

    Raises:
        TypeError: non-floating ``x``.
        ValueError: ``p < 0`` or NaN, ``x`` of rank < 2.
    """
    op = "pdist"
    (x,) = _floating(op, x)
    p = _check_p(op, p)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must be (N, M) (or (*batch, N, M)), got shape "
                         f"{tuple(x.shape)}")
    N, M = int(x.shape[-2]), int(x.shape[-1])
    i, j = np.triu_indices(N, k=1)
    if M == 0 or i.size == 0:
        return snp.zeros(tuple(x.shape[:-2]) + (i.size,), x.dtype)
    # All N^2 differences (fused, twice the arithmetic) beat gathering the pairs' rows, which
    # materialises two (N(N-1)/2, M) arrays.
    full = _pnorm(x, x, p)
    return snp.take(snp.reshape(full, tuple(x.shape[:-2]) + (N * N,)), snp.asarray(i * N + j),
                    axis=-1)


class CDist(Module):
    """Module form of :func:`cdist`: ``CDist(p, compute_mode)(x1, x2)``
    ``(*b1, P, M), (*b2, R, M) -> (*b, P, R)``. No parameters (PyTorch has no such module;
    the name follows its style).

    Raises:
        ValueError: bad ``p`` or ``compute_mode`` (at construction), the rest as :func:`cdist`.
    """

    def __init__(self, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
        super().__init__()
        if compute_mode not in _MODES:
            raise ValueError(f"CDist: compute_mode must be one of {_MODES}, got "
                             f"{compute_mode!r}")
        self.p = _check_p("CDist", p)
        self.compute_mode = compute_mode

    def forward(self, x1, x2):
        return cdist(x1, x2, self.p, self.compute_mode)

    def extra_repr(self):
        return f"p={self.p}, compute_mode={self.compute_mode!r}"


class PDist(Module):
    """Module form of :func:`pdist`: ``PDist(p)(x)``, ``(*b, N, M) -> (*b, N(N-1)/2)``.
    No parameters.

    Raises:
        ValueError: bad ``p`` (at construction), the rest as :func:`pdist`.
    """

    def __init__(self, p=2.0):
        super().__init__()
        self.p = _check_p("PDist", p)

    def forward(self, x):
        return pdist(x, self.p)

    def extra_repr(self):
        return f"p={self.p}"


# ---- helpers -------------------------------------------------------------------------------------

def _floating(op, *xs):
    xs = [snp.asarray(x) for x in xs]
    for x in xs:
        if not snp.isdtype(x.dtype, "real floating"):
            raise TypeError(f"{op}: inputs must be real floating, got "
                            f"{', '.join(str(v.dtype) for v in xs)}")
    dtype = snp.result_type(*xs)
    return [x.astype(dtype) for x in xs]


def _check_p(op, p):
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: p must be a real number, got {p!r}") from None
    if not p >= 0:   # also rejects NaN
        raise ValueError(f"{op}: p must be >= 0 (0, fractional, 1, 2, ..., inf), got {p}")
    return p


def _pnorm(x1, x2, p):
    """``(sum_k |d_k|^p)^(1/p)`` for the differences ``d`` of every row of ``x1``
    ``(*b, P, M)`` and ``x2`` ``(*b, R, M)`` -> ``(*b, P, R)`` (``p = 0``: the nonzero count,
    ``p = inf``: the max), with zero derivatives where it is not differentiable."""
    def absdiff(u, v):
        return snp.abs(u[..., :, None, :] - v[..., None, :, :])

    if p == 0.0:
        return snp.sum(x1[..., :, None, :] != x2[..., None, :, :], axis=-1).astype(x1.dtype)
    if p == math.inf:
        return snp.max(absdiff(x1, x2), axis=-1)
    if p <= 1.0:
        # |d|^p >= |d| for |d| <= 1: no term underflows unless |d| is subnormal itself, and a
        # sum that overflows has a result that overflows too
        return _root(_power_sum(absdiff(x1, x2), p), p)
    # p > 1: |d|^p can overflow or underflow where the norm does not. Scaling by the largest
    # |d_k| costs a second pass, so it is taken only when the inputs' magnitudes call for it.
    # (The differences are formed inside the branches, so the fused kernels never store them.)
    return cond(_plain_is_safe(x1, x2, p),
                lambda u, v: _root(_power_sum(absdiff(u, v), p), p),
                lambda u, v: _scaled_pnorm(absdiff(u, v), p), x1, x2)


def _power_sum(a, p):
    """``sum_k a_k^p`` over the last axis for ``a >= 0``, derivative 0 where ``a_k = 0``."""
    if p == 1.0:
        return snp.sum(a, axis=-1)                   # |.|' is 0 at 0 already
    if p == 2.0:
        return snp.sum(a * a, axis=-1)
    nz = a != 0                                      # NaN counts as nonzero and propagates
    return snp.sum(snp.where(nz, snp.where(nz, a, snp.ones_like(a)) ** p, 0), axis=-1)


def _scaled_pnorm(a, p):
    # The norm is homogeneous of degree 1, so its derivative with respect to the scale
    # vanishes: the scale is a constant for differentiation at every order.
    m = stop_gradient(snp.max(a, axis=-1, keepdims=True))
    usable = (m > 0) & snp.isfinite(m)
    scale = snp.where(usable, m, snp.ones_like(m))
    norm = scale[..., 0] * _root(_power_sum(a / scale, p), p)
    return snp.where(m[..., 0] == math.inf, math.inf, norm)


def _plain_is_safe(x1, x2, p):
    """Whether no ``|d_k|^p`` of a difference of rows of ``x1``, ``x2`` can overflow, nor
    (being nonzero) fall below the smallest normal number, by bounds on the coordinates: a
    difference is at most twice the largest ``|coordinate|`` and, when nonzero, at least
    ``eps / 4`` times the smallest nonzero one (two distinct floats differ by at least half
    an ulp of the smaller)."""
    fi = snp.finfo(x1.dtype)
    M = int(x1.shape[-1])
    hi = (float(fi.max) / M) ** (1.0 / p) / 2
    lo = 4.0 / float(fi.eps) * float(fi.smallest_normal) ** (1.0 / p)
    a = snp.abs(snp.concatenate([snp.ravel(x1), snp.ravel(x2)]))
    small = snp.min(snp.where(a != 0, a, math.inf))
    return (snp.max(a) <= hi) & (small >= lo)


def _root(s, p):
    """``s ** (1 / p)`` for ``s >= 0``, with derivative 0 (not inf or NaN) at ``s = 0``."""
    if p == 1.0:
        return s
    live = s != 0
    safe = snp.where(live, s, snp.ones_like(s))
    root = snp.sqrt(safe) if p == 2.0 else safe ** (1.0 / p)
    return snp.where(live, root, 0)


def _euclid_mm(x1, x2):
    """Euclidean cdist by ``|x|^2 + |y|^2 - 2 x.y`` (one matmul), noise-level values -> 0."""
    sq1 = snp.sum(x1 * x1, axis=-1)[..., :, None]
    sq2 = snp.sum(x2 * x2, axis=-1)[..., None, :]
    d2 = sq1 + sq2 - 2 * snp.matmul(x1, snp.matrix_transpose(x2))
    eps = float(snp.finfo(x1.dtype).eps)
    noise = stop_gradient((sq1 + sq2) * (_MM_NOISE_ULPS * eps))
    d2 = snp.where(d2 <= noise, 0, d2)           # NaN is not <= and propagates
    return _root(d2, 2.0)
