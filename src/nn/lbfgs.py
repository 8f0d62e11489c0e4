"""L-BFGS: the two-loop recursion (Nocedal & Wright, "Numerical Optimization", 2nd ed.,
Algorithm 7.4), a strong-Wolfe line search (Algorithms 3.5 / 3.6 with the cubic interpolation
of eq. 3.59), and the pure ``optim.lbfgs`` transformation (fixed step, no line search, a
fixed-size history so that it works under ``compile``).

The closure-based ``optim.LBFGS`` (PyTorch's interface) lives in ``optim_stateful`` and uses
the NumPy helpers below (it runs eagerly, between closure evaluations).
"""
from __future__ import annotations

import math

import numpy as np

from .. import numpy as snp
from .. import tree as tree_util

__all__ = ["lbfgs", "two_loop_np", "strong_wolfe_np"]


# ---- pytree <-> flat vector ----------------------------------------------------------------------

def ravel(tree):
    """``(vector, unravel)``: the leaves concatenated in their common dtype; ``unravel(v)``
    rebuilds the tree with each leaf's shape and dtype."""
    leaves, treedef = tree_util.flatten(tree)
    if not leaves:
        raise ValueError("lbfgs: there are no parameters")
    dt = snp.result_type(*[x.dtype for x in leaves])
    shapes = [tuple(x.shape) for x in leaves]
    dts = [x.dtype for x in leaves]
    sizes = [math.prod(s) for s in shapes]
    vec = snp.concatenate([snp.reshape(snp.astype(x, dt), (-1,)) for x in leaves])

    def unravel(v):
        out, off = [], 0
        for s, n, d in zip(shapes, sizes, dts):
            out.append(snp.astype(snp.reshape(v[off:off + n], s), d))
            off += n
        return tree_util.unflatten(treedef, out)
    return vec, unravel


# ---- pure transformation -------------------------------------------------------------------------

def lbfgs(lr=1.0, history_size=10, maximize=False):
    """Limited-memory BFGS as a pure ``GradientTransformation`` (fixed step ``lr``, no line
    search; use ``optim.LBFGS`` for PyTorch's closure-based version with line search).

    At step ``k > 0`` the pair ``s = x_k - x_{k-1}``, ``y = g_k - g_{k-1}`` enters the history
    (the ``history_size`` most recent pairs) when ``y.s > 1e-10``; the direction is
    ``d = -H g`` by the two-loop recursion (N&W Alg. 7.4) with ``H0 = (s.y / y.y) I`` from the
    newest pair; ``update = lr * d``. The first step is ``-lr * min(1, 1/|g|_1) * g`` (PyTorch).
    State holds the history as fixed-size ``(history_size, n)`` arrays over all parameters
    flattened in one vector.

    Raises:
        ValueError: ``history_size < 1``.
    """
    from .optim import GradientTransformation, LBFGSState
    if history_size < 1:
        raise ValueError(f"lbfgs: history_size must be >= 1, got {history_size}")
    m = history_size

    def init(params):
        vec, _ = ravel(params)
        n = vec.shape[0]
        z = snp.zeros((m, n), dtype=vec.dtype)
        return LBFGSState(snp.zeros((), dtype=snp.int32), z, z, snp.zeros((), dtype=snp.int32),
                          snp.zeros_like(vec), snp.zeros_like(vec))

    def update(grads, state, params=None):
        if params is None:
            raise ValueError("lbfgs: update needs params: call update(grads, state, params)")
        g, _ = ravel(grads)
        if maximize:
            g = -g
        x, unravel = ravel(params)
        dt = g.dtype
        s = x - state.prev_params
        y = g - state.prev_grads
        ys = snp.vdot(y, s)
        accept = (state.count > 0) & (ys > 1e-10)
        S = snp.where(accept, snp.concatenate([state.s_history[1:], s[None]]), state.s_history)
        Y = snp.where(accept, snp.concatenate([state.y_history[1:], y[None]]), state.y_history)
        k = snp.where(accept, snp.minimum(state.n_valid + 1, m), state.n_valid)
        ys_all = snp.sum(S * Y, axis=1)
        valid = snp.arange(m) >= (m - k)
        rho = snp.where(valid, 1.0 / snp.where(valid, ys_all, 1.0), 0.0).astype(dt)
        yy = snp.vdot(Y[m - 1], Y[m - 1])
        gamma = snp.where(k > 0, ys_all[m - 1] / snp.where(k > 0, yy, 1.0), 1.0).astype(dt)
        q = g
        alphas = [None] * m
        for i in range(m - 1, -1, -1):
            alphas[i] = rho[i] * snp.vdot(S[i], q)
            q = q - alphas[i] * Y[i]
        r = q * gamma
        for i in range(m):
            beta = rho[i] * snp.vdot(Y[i], r)
            r = r + S[i] * (alphas[i] - beta)
        first = state.count == 0
        t0 = snp.minimum(1.0, 1.0 / snp.sum(snp.abs(g))).astype(dt)
        step = snp.where(first, t0, 1.0).astype(dt) * lr
        upd_vec = -r * step
        new = LBFGSState(state.count + 1, S, Y, k, x, g)
        return unravel(upd_vec), new

    return GradientTransformation(init, update)


# ---- NumPy helpers for the closure-based LBFGS ---------------------------------------------------

def two_loop_np(g, s_list, y_list, rho_list, h_diag):
    """``-H g`` by Nocedal & Wright Alg. 7.4 (lists oldest first; ``H0 = h_diag I``)."""
    q = -g
    al = [0.0] * len(s_list)
    for i in range(len(s_list) - 1, -1, -1):
        al[i] = float(s_list[i] @ q) * rho_list[i]
        q = q - al[i] * y_list[i]
    r = q * h_diag
    for i in range(len(s_list)):
        be = float(y_list[i] @ r) * rho_list[i]
        r = r + s_list[i] * (al[i] - be)
    return r


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic interpolating (x1, f1, f'1), (x2, f2, f'2) (N&W eq. 3.59),
    clamped to ``bounds`` (default the interval); the bisection point if it has none."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc >= 0:
        d2 = math.sqrt(disc)
        if x1 <= x2:
            t = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            t = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        if math.isfinite(t):
            return min(max(t, lo), hi)
    return (lo + hi) / 2.0


def strong_wolfe_np(obj, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Line search for a step ``t`` along ``d`` satisfying the strong Wolfe conditions
    ``f(x + t d) <= f + c1 t g.d`` and ``|g(x + t d).d| <= c2 |g.d|`` (N&W Alg. 3.5, zoom 3.6).

    ``obj(x, t, d) -> (f, g)`` evaluates at ``x + t d``. Returns ``(f_new, g_new, t, evals)``.
    """
    d_norm = float(np.max(np.abs(d)))
    f_new, g_new = obj(x, t, d)
    evals = 1
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    bracket = None
    for i in range(max_ls):
        if f_new > f + c1 * t * gtd or (i > 0 and f_new >= f_prev):
            bracket = [(t_prev, f_prev, g_prev, gtd_prev), (t, f_new, g_new, gtd_new)]
            break
        if abs(gtd_new) <= -c2 * gtd:
            return f_new, g_new, t, evals
        if gtd_new >= 0:
            bracket = [(t_prev, f_prev, g_prev, gtd_prev), (t, f_new, g_new, gtd_new)]
            break
        # Extrapolate: the cubic step, kept in [t + 0.01 (t - t_prev), 10 t].
        t_next = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                            bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = obj(x, t, d)
        evals += 1
        gtd_new = float(g_new @ d)
    if bracket is None:  # no bracket within max_ls: take the last point
        return f_new, g_new, t, evals
    # Zoom (Alg. 3.6): bracket[0] is the low end (lowest f satisfying sufficient decrease).
    lo, hi = (bracket[0], bracket[1]) if bracket[0][1] <= bracket[1][1] else \
        (bracket[1], bracket[0])
    for _ in range(max_ls - evals + 1):
        if abs(hi[0] - lo[0]) * d_norm < tolerance_change:
            break
        a, b = sorted((lo[0], hi[0]))
        t = _cubic_min(lo[0], lo[1], lo[3], hi[0], hi[1], hi[3])
        # Safeguard: keep the trial point away from the ends (0.1 of the interval).
        eps = 0.1 * (b - a)
        t = min(max(t, a + eps), b - eps)
        f_new, g_new = obj(x, t, d)
        evals += 1
        gtd_new = float(g_new @ d)
        point = (t, f_new, g_new, gtd_new)
        if f_new > f + c1 * t * gtd or f_new >= lo[1]:
            hi = point
        else:
            if abs(gtd_new) <= -c2 * gtd:
                return f_new, g_new, t, evals
            if gtd_new * (hi[0] - lo[0]) >= 0:
                hi = lo
            lo = point
    return lo[1], lo[2], lo[0], evals
