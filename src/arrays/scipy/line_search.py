"""A strong-Wolfe line search written as one ``starling.while_loop`` (traceable, fixed-size state),
for the quasi-Newton methods of ``starling.scipy.optimize``.

Method: Nocedal & Wright, "Numerical Optimization", 2nd ed. (2006), Algorithm 3.5 (bracketing)
and Algorithm 3.6 (zoom). The two phases share one loop: each iteration evaluates the objective
and its gradient at exactly one trial step, so the state has a fixed size and ``vmap`` /
``compile`` apply. Zoom trial steps come from the cubic interpolating the values and slopes at
both ends of the bracket (N&W eq. 3.59), falling back to the quadratic through ``phi(lo)``,
``phi'(lo)`` and ``phi(hi)`` (N&W Sec. 3.5) and then to bisection when the interpolant's
minimiser is not finite or lies too close to an end of the bracket (safeguards in the style of
Moré & Thuente, ACM TOMS 20(3), 1994).

The NumPy version used eagerly by ``starling.nn``'s closure-based ``optim.LBFGS`` is
``starling.nn.lbfgs.strong_wolfe_np``; this one is its traced counterpart.
"""
from __future__ import annotations

from typing import NamedTuple

from ...transforms.control import while_loop
from .. import numpy as snp

__all__ = ["LineSearchResults", "line_search"]

# Status codes of a line search (``LineSearchResults.status``).
LS_OK = 0            # a step satisfying the strong Wolfe conditions was found
LS_MAXITER = 1       # ``maxiter`` evaluations without such a step
LS_NOT_DESCENT = 2   # the direction is not a descent direction, or phi(0) / phi'(0) is not finite
LS_COLLAPSED = 3     # the zoom bracket shrank below the resolution of the step's dtype


class LineSearchResults(NamedTuple):
    """Outcome of ``line_search`` (all 0-d except ``g``).

    Attributes:
        failed: bool, no strong-Wolfe step was found (``a``, ``f``, ``g`` are then 0, ``f0``,
            ``g0``: the start point).
        status: int32, one of 0 (found), 1 (``maxiter`` evaluations used), 2 (not a descent
            direction, or the start values are not finite), 3 (the bracket collapsed).
        nfev: int32, evaluations of the objective (each also evaluates the gradient).
        a: the step length, dtype of ``x``.
        f: the objective at ``x + a p``.
        g: ``(n,)`` the gradient at ``x + a p``.
        nonfinite: bool, the last trial point had a non-finite value or slope.
    """
    failed: object
    status: object
    nfev: object
    a: object
    f: object
    g: object
    nonfinite: object


class _State(NamedTuple):
    i: object         # evaluations so far
    done: object
    stop: object      # stopped early without a step (status in ``status``)
    status: object
    zoom: object      # in Algorithm 3.6 (the bracket [lo, hi] holds a Wolfe step)
    a: object         # the next trial step
    a_prev: object    # Algorithm 3.5's previous trial: step, value, slope
    f_prev: object
    d_prev: object
    a_lo: object      # Algorithm 3.6's bracket: lo has the lowest value found so far
    f_lo: object
    d_lo: object
    a_hi: object
    f_hi: object
    d_hi: object
    a_star: object    # the accepted step, its value and gradient
    f_star: object
    g_star: object
    nonfinite: object


def _zoom_trial(a_lo, f_lo, d_lo, a_hi, f_hi, d_hi):
    """Trial step inside the bracket: the cubic's minimiser (N&W eq. 3.59) if it is finite and
    at least 20% of the width from either end, else the quadratic's (at least 10% away), else
    the midpoint."""
    delta = a_hi - a_lo
    width = snp.abs(delta)
    left = snp.minimum(a_lo, a_hi)
    right = snp.maximum(a_lo, a_hi)
    d1 = d_lo + d_hi - 3 * (f_lo - f_hi) / (a_lo - a_hi)
    disc = d1 * d1 - d_lo * d_hi
    d2 = snp.sign(delta) * snp.sqrt(snp.maximum(disc, 0))
    a_c = a_hi - delta * (d_hi + d2 - d1) / (d_hi - d_lo + 2 * d2)
    ok_c = ((disc >= 0) & snp.isfinite(a_c) & (a_c > left + 0.2 * width)
            & (a_c < right - 0.2 * width))
    curv = (f_hi - f_lo - d_lo * delta) / (delta * delta)
    a_q = a_lo - d_lo / (2 * curv)
    ok_q = ((curv > 0) & snp.isfinite(a_q) & (a_q > left + 0.1 * width)
            & (a_q < right - 0.1 * width))
    return snp.where(ok_c, a_c, snp.where(ok_q, a_q, a_lo + 0.5 * delta))


def line_search(value_and_grad_fn, x, p, f0, g0, a_init, *, maxiter=20, c1=1e-4, c2=0.9):
    """Step length ``a > 0`` along ``p`` satisfying the strong Wolfe conditions.

    With ``phi(a) = f(x + a p)``:  ``phi(a) <= phi(0) + c1 a phi'(0)`` (sufficient decrease) and
    ``|phi'(a)| <= c2 |phi'(0)|`` (curvature). Bracketing (N&W Alg. 3.5) doubles the step from
    ``a_init`` until a bracket is found; zoom (N&W Alg. 3.6) shrinks it by safeguarded cubic /
    quadratic interpolation (see the module docstring). A trial point whose value or slope is
    not finite counts as failing sufficient decrease, so the search backs off from regions
    where the objective is NaN / inf instead of stopping there.

    Near a minimiser the decrease ``c1 a phi'(0)`` drops below the rounding error of ``phi``,
    and the test above fails on noise. As in Hager & Zhang, "A new conjugate gradient method
    with guaranteed descent and an efficient line search", SIAM J. Optim. 16(1), 2005 (the
    approximate Wolfe conditions), sufficient decrease is then also accepted from the slope:
    ``phi'(a) <= (2 c1 - 1) phi'(0)`` (equivalent to the Armijo test on a quadratic) when
    ``phi(a) <= phi(0) + 100 eps |phi(0)|``, ``eps`` the dtype's machine epsilon.

    Args:
        value_and_grad_fn: ``x (n,) -> (f [], g (n,))``, pure and traceable.
        x: ``(n,)`` float, the start point.
        p: ``(n,)`` the search direction (a descent direction: ``g0 . p < 0``).
        f0: 0-d, the objective at ``x``.
        g0: ``(n,)`` the gradient at ``x``.
        a_init: 0-d, the first trial step (> 0).
        maxiter: int, the most evaluations (bracketing and zoom together).
        c1, c2: the Wolfe constants, ``0 < c1 < c2 < 1`` (0.9 suits quasi-Newton directions).
    Returns:
        ``LineSearchResults``.
    Raises:
        ValueError: ``maxiter < 1`` or constants outside ``0 < c1 < c2 < 1``.
    """
    if int(maxiter) < 1:
        raise ValueError(f"line_search: maxiter must be >= 1, got {maxiter}")
    if not 0 < c1 < c2 < 1:
        raise ValueError(f"line_search: need 0 < c1 < c2 < 1, got c1={c1}, c2={c2}")
    dt = x.dtype
    f0 = snp.asarray(f0, dtype=dt)
    d0 = snp.vdot(g0, p)
    eps = float(snp.finfo(dt).eps)
    descent = snp.isfinite(f0) & snp.isfinite(d0) & (d0 < 0)
    # Near a minimiser phi changes by less than its rounding error; then sufficient decrease is
    # judged from the slope (Hager & Zhang's approximate Wolfe condition, see line_search).
    f_noise = 100 * eps * snp.abs(f0)
    zero = snp.zeros((), dtype=dt)
    false = snp.asarray(False)
    init = _State(
        i=snp.zeros((), dtype=snp.int32), done=false, stop=~descent,
        status=snp.where(descent, LS_OK, LS_NOT_DESCENT).astype(snp.int32), zoom=false,
        a=snp.asarray(a_init, dtype=dt), a_prev=zero, f_prev=f0, d_prev=d0,
        a_lo=zero, f_lo=f0, d_lo=d0, a_hi=zero, f_hi=f0, d_hi=d0,
        a_star=zero, f_star=f0, g_star=g0, nonfinite=false)

    def cond(s):
        return ~s.done & ~s.stop & (s.i < maxiter)

    def body(s):
        a = s.a
        f, g = value_and_grad_fn(x + a * p)
        f = snp.asarray(f, dtype=dt)
        d = snp.vdot(g, p)
        bad = ~(snp.isfinite(f) & snp.isfinite(d))
        armijo = f <= f0 + c1 * a * d0
        approx_armijo = (f <= f0 + f_noise) & (d <= (2 * c1 - 1) * d0)
        no_decrease = bad | ~(armijo | approx_armijo)
        curvature = ~bad & (snp.abs(d) <= -c2 * d0)
        # Algorithm 3.5: [prev, a] brackets a Wolfe step when a fails sufficient decrease or is
        # no lower than prev; [a, prev] (reversed) when the slope at a is already uphill.
        b_hi = no_decrease | ((s.i > 0) & (f >= s.f_prev))
        b_done = ~b_hi & curvature
        b_flip = ~b_hi & ~b_done & (d >= 0)
        # Algorithm 3.6: a replaces hi, or becomes lo (the old lo turning into hi when the slope
        # at a points away from hi).
        z_hi = no_decrease | (f >= s.f_lo)
        z_done = ~z_hi & curvature
        z_swap = ~z_hi & ~z_done & (d * (s.a_hi - s.a_lo) >= 0)
        done = snp.where(s.zoom, z_done, b_done)
        zoom = s.zoom | b_hi | b_flip

        # New bracket ends, from the zoom step when zooming, else from the bracketing step.
        a_lo = snp.where(s.zoom, snp.where(z_hi, s.a_lo, a), snp.where(b_hi, s.a_prev, a))
        f_lo = snp.where(s.zoom, snp.where(z_hi, s.f_lo, f), snp.where(b_hi, s.f_prev, f))
        d_lo = snp.where(s.zoom, snp.where(z_hi, s.d_lo, d), snp.where(b_hi, s.d_prev, d))
        a_hi = snp.where(s.zoom, snp.where(z_hi, a, snp.where(z_swap, s.a_lo, s.a_hi)),
                         snp.where(b_hi, a, s.a_prev))
        f_hi = snp.where(s.zoom, snp.where(z_hi, f, snp.where(z_swap, s.f_lo, s.f_hi)),
                         snp.where(b_hi, f, s.f_prev))
        d_hi = snp.where(s.zoom, snp.where(z_hi, d, snp.where(z_swap, s.d_lo, s.d_hi)),
                         snp.where(b_hi, d, s.d_prev))
        collapsed = zoom & ~done & (snp.abs(a_hi - a_lo)
                                    <= eps * snp.maximum(snp.abs(a_lo), snp.abs(a_hi)))
        a_next = snp.where(zoom, _zoom_trial(a_lo, f_lo, d_lo, a_hi, f_hi, d_hi), 2 * a)
        return _State(
            i=s.i + 1, done=done, stop=collapsed,
            status=snp.where(collapsed, LS_COLLAPSED, s.status).astype(snp.int32), zoom=zoom,
            a=a_next, a_prev=a, f_prev=f, d_prev=d,
            a_lo=a_lo, f_lo=f_lo, d_lo=d_lo, a_hi=a_hi, f_hi=f_hi, d_hi=d_hi,
            a_star=snp.where(done, a, s.a_star), f_star=snp.where(done, f, s.f_star),
            g_star=snp.where(done, g, s.g_star), nonfinite=bad)

    s = while_loop(cond, body, init)
    status = snp.where(s.done, LS_OK, snp.where(s.stop, s.status, LS_MAXITER))
    return LineSearchResults(failed=~s.done, status=status.astype(snp.int32), nfev=s.i,
                             a=s.a_star, f=s.f_star, g=s.g_star, nonfinite=s.nonfinite)
