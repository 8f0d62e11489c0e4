"""BFGS and L-BFGS as ``starling.while_loop``s over a fixed-size state (traceable: ``compile`` and
``vmap`` apply), sharing one driver that differs only in how the inverse Hessian approximation
is stored, applied and updated.

Sources: Nocedal & Wright, "Numerical Optimization", 2nd ed. (2006): BFGS Algorithm 6.1 with the
inverse update (6.17); L-BFGS Algorithm 7.5 with the two-loop recursion (Algorithm 7.4) and
``H0 = gamma I``, ``gamma = s.y / y.y`` of the newest pair (eq. 7.20); the initial trial step
``min(1, 1.01 * 2 (f_k - f_{k-1}) / phi'(0))`` (eq. 3.60, capped at the unit step as quasi-Newton
methods need); the strong-Wolfe line search of ``line_search.py``.

The NumPy two-loop recursion used eagerly by ``starling.nn``'s ``optim.LBFGS`` is
``starling.nn.lbfgs.two_loop_np``; ``_lbfgs_direction`` here is its traced counterpart over a
ring buffer.
"""
from __future__ import annotations

from typing import NamedTuple

from ... import tree as tree_util
from ...transforms.control import fori_loop, while_loop
from .. import numpy as snp
from .line_search import line_search

# Status codes of ``minimize`` (documented there).
CONVERGED = 0
MAXITER = 1
LINE_SEARCH_FAILED = 2
NONFINITE = 3
NO_PROGRESS = 4
MAXFUN = 5


class QNResults(NamedTuple):
    """The final state of a quasi-Newton run (``minimize`` turns it into ``OptimizeResults``)."""
    x: object
    f: object
    g: object
    mem: object       # BFGS: the inverse Hessian approximation (n, n); L-BFGS: _LBFGSMemory
    converged: object
    status: object
    nit: object
    nfev: object


class _State(NamedTuple):
    k: object
    nfev: object
    x: object
    f: object
    g: object
    mem: object
    f_old: object     # the previous iterate's value (for the initial trial step)
    converged: object
    stopped: object   # stopped without converging, for the reason in ``status``
    status: object


# ---- BFGS: dense inverse Hessian ---------------------------------------------------------------

def bfgs_init(x):
    """``H0 = I`` (as SciPy's BFGS; N&W eq. 6.20 would rescale it after the first step)."""
    return snp.eye(x.shape[0], dtype=x.dtype)


def bfgs_direction(h, g):
    """The quasi-Newton step ``-H g`` for the inverse-Hessian estimate ``h`` ``(n, n)``."""
    return -(h @ g)


def bfgs_update(h, s, y):
    """N&W eq. (6.17), ``H+ = (I - rho s y^T) H (I - rho y s^T) + rho s s^T`` with
    ``rho = 1 / y.s``, expanded to ``O(n^2)``; skipped when ``y.s <= 0`` (which the strong Wolfe
    conditions exclude up to rounding) so that ``H`` stays positive definite."""
    ys = snp.vdot(y, s)
    ok = snp.isfinite(ys) & (ys > 0)
    rho = 1 / snp.where(ok, ys, 1)
    hy = h @ y
    new = (h - rho * (snp.outer(s, hy) + snp.outer(hy, s))
           + (rho * rho * snp.vdot(y, hy) + rho) * snp.outer(s, s))
    return snp.where(ok, new, h)


# ---- L-BFGS: ring buffer of the m newest pairs ---------------------------------------------------

class LBFGSMemory(NamedTuple):
    """The L-BFGS history: ``s`` / ``y`` ``(m, n)`` and ``rho = 1 / (y.s)`` ``(m,)`` as a ring
    buffer (slot ``head`` is written next; unused slots hold zeros and contribute nothing), and
    ``gamma``, the scale of ``H0``."""
    s: object
    y: object
    rho: object
    head: object
    gamma: object


def lbfgs_init(x, m):
    """An empty history of ``m`` pairs for ``x`` ``(n,)``, with ``H0 = I`` (gamma 1)."""
    n, dt = x.shape[0], x.dtype
    return LBFGSMemory(snp.zeros((m, n), dtype=dt), snp.zeros((m, n), dtype=dt),
                       snp.zeros((m,), dtype=dt), snp.zeros((), dtype=snp.int32),
                       snp.ones((), dtype=dt))


def lbfgs_direction(mem, g):
    """``-H g`` by the two-loop recursion (N&W Alg. 7.4), newest pair first, over all ``m``
    slots (empty ones have ``rho = 0``, ``s = y = 0``)."""
    m = mem.s.shape[0]

    def newest_first(j, carry):
        q, alpha = carry
        i = (mem.head - 1 - j) % m
        a = mem.rho[i] * snp.vdot(mem.s[i], q)
        return q - a * mem.y[i], alpha.at[i].set(a)

    q, alpha = fori_loop(0, m, newest_first, (g, snp.zeros_like(mem.rho)))

    def oldest_first(j, r):
        i = (mem.head + j) % m
        b = mem.rho[i] * snp.vdot(mem.y[i], r)
        return r + (alpha[i] - b) * mem.s[i]

    return -fori_loop(0, m, oldest_first, mem.gamma * q)


def lbfgs_update(mem, s, y):
    """Stores the pair in the oldest slot unless ``y.s <= eps y.y`` (the curvature condition
    fails to rounding: N&W Sec. 7.2 skips such pairs)."""
    m = mem.s.shape[0]
    ys = snp.vdot(y, s)
    yy = snp.vdot(y, y)
    ok = snp.isfinite(ys) & snp.isfinite(yy) & (ys > snp.finfo(s.dtype).eps * yy)
    rho = 1 / snp.where(ok, ys, 1)
    new = LBFGSMemory(mem.s.at[mem.head].set(s), mem.y.at[mem.head].set(y),
                      mem.rho.at[mem.head].set(rho), ((mem.head + 1) % m).astype(snp.int32),
                      ys / snp.where(ok, yy, 1))
    return tree_util.map(lambda a, b: snp.where(ok, a, b), new, mem)


# ---- the driver ---------------------------------------------------------------------------------

def _all_finite(v):
    return snp.all(snp.isfinite(v))


def quasi_newton(value_and_grad_fn, x0, mem0, direction, update, *, maxiter, gtol, norm,
                 line_search_maxiter, ftol=None, maxfun=None):
    """Runs N&W Algorithm 6.1 (BFGS) / 7.5 (L-BFGS) depending on ``direction`` / ``update``.

    Each iteration: ``p = direction(mem, g)``; a strong-Wolfe step ``a`` along ``p``;
    ``x += a p``; ``mem = update(mem, s, y)``. It stops when ``|g|_norm <= gtol`` (converged),
    after ``maxiter`` steps, when the line search fails (the iterate is not moved), on a
    non-finite value or gradient, when the relative decrease ``(f_k - f_{k+1}) /
    max(|f_k|, |f_{k+1}|, 1)`` is ``<= ftol`` (if ``ftol`` is given), or after ``maxfun``
    evaluations (if given).
    """
    dt = x0.dtype
    f0, g0 = value_and_grad_fn(x0)
    f0 = snp.asarray(f0, dtype=dt)
    finite = snp.isfinite(f0) & _all_finite(g0)
    i32 = snp.int32
    init = _State(
        k=snp.zeros((), dtype=i32), nfev=snp.ones((), dtype=i32), x=x0, f=f0, g=g0, mem=mem0,
        # So that the first trial step moves x by about 1 (eq. 3.60 with f_{-1} = f0 + |g0|/2,
        # as SciPy).
        f_old=f0 + snp.linalg.norm(g0) / 2,
        converged=finite & (snp.linalg.norm(g0, ord=norm) <= gtol), stopped=~finite,
        status=snp.where(finite, MAXITER, NONFINITE).astype(i32))

    def cond(s):
        go = ~s.converged & ~s.stopped & (s.k < maxiter)
        return go if maxfun is None else go & (s.nfev < maxfun)

    def body(s):
        p = direction(s.mem, s.g)
        t = 1.01 * 2 * (s.f - s.f_old) / snp.vdot(s.g, p)
        a0 = snp.where(snp.isfinite(t) & (t > 0), snp.minimum(t, 1), 1).astype(dt)
        ls = line_search(value_and_grad_fn, s.x, p, s.f, s.g, a0,
                         maxiter=line_search_maxiter)
        ok = ~ls.failed
        step = ls.a * p
        mem = update(s.mem, step, ls.g - s.g)
        converged = ok & (snp.linalg.norm(ls.g, ord=norm) <= gtol)
        stalled = snp.zeros((), dtype=bool)
        if ftol is not None:
            scale = snp.maximum(snp.maximum(snp.abs(s.f), snp.abs(ls.f)), 1)
            stalled = ok & ~converged & (s.f - ls.f <= ftol * scale)
        fail_code = snp.where(ls.nonfinite, NONFINITE, LINE_SEARCH_FAILED)
        return _State(
            k=s.k + ok.astype(i32), nfev=s.nfev + ls.nfev,
            x=snp.where(ok, s.x + step, s.x), f=snp.where(ok, ls.f, s.f),
            g=snp.where(ok, ls.g, s.g),
            mem=tree_util.map(lambda a, b: snp.where(ok, a, b), mem, s.mem),
            f_old=snp.where(ok, s.f, s.f_old), converged=converged, stopped=~ok | stalled,
            status=snp.where(ok, snp.where(stalled, NO_PROGRESS, s.status),
                             fail_code).astype(i32))

    s = while_loop(cond, body, init)
    limit = MAXITER if maxfun is None else snp.where(s.k >= maxiter, MAXITER, MAXFUN)
    status = snp.where(s.converged, CONVERGED, snp.where(s.stopped, s.status, limit))
    return QNResults(x=s.x, f=s.f, g=s.g, mem=s.mem, converged=s.converged,
                     status=status.astype(i32), nit=s.k, nfev=s.nfev)
