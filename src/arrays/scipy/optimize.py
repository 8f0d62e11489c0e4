"""``starling.scipy.optimize``: unconstrained minimisation with JAX's ``jax.scipy.optimize``
interface (``minimize`` with BFGS / L-BFGS, ``OptimizeResults``), written with Starling's own
loops and derivatives so that it runs under ``compile`` and ``vmap``, and differentiable in
``args`` by implicit differentiation at the optimum.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ... import tree as tree_util
from ...core import dtypes
from ...linalg import eigh
from ...transforms.custom import custom_jvp
from ...transforms.grad import jacfwd, jvp, value_and_grad
from ...core.avals import ShapedArray
from ...transforms.control import programs
from .. import numpy as snp
from ..convert import operand
from ..ops.autodiff import stop_gradient
from . import quasi_newton as qn

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """The result of ``minimize`` (a pytree; JAX's fields).

    Attributes:
        x: ``(n,)`` the solution, differentiable in ``args`` (implicit function theorem).
        success: bool[], whether the gradient norm reached ``gtol`` (``status == 0``).
        status: int32[], 0 converged (``|jac|_norm <= gtol``); 1 ``maxiter`` iterations
            reached; 2 the line search found no strong-Wolfe step (often: the gradient norm is
            below what the dtype's rounding lets the objective resolve; ``x`` is the last
            accepted iterate); 3 a non-finite objective or gradient (at ``x0``, or at every
            point the last line search tried); 4 (L-BFGS) the relative decrease of the
            objective fell below ``ftol``; 5 (L-BFGS) ``maxfun`` evaluations reached.
        fun: 0-d, the objective at ``x`` (differentiable in ``args``).
        jac: ``(n,)`` the gradient at ``x`` (differentiable in ``args``).
        hess_inv: BFGS: ``(n, n)`` the final inverse Hessian approximation; L-BFGS: None (as
            JAX).
        nfev: int32[], evaluations of the objective (each also evaluates the gradient).
        njev: int32[], evaluations of the gradient (= ``nfev``).
        nit: int32[], iterations (accepted steps).
    """
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


_BFGS_NAMES = ("bfgs",)
_LBFGS_NAMES = ("l-bfgs", "lbfgs", "l-bfgs-b", "l-bfgs-experimental-do-not-rely-on-this")
_BFGS_OPTIONS = ("maxiter", "gtol", "norm", "line_search_maxiter")
_LBFGS_OPTIONS = ("maxiter", "gtol", "norm", "maxcor", "history_size", "ftol", "maxfun",
                  "maxls", "line_search_maxiter")


def _options(method, n, tol, options):
    """Validated options with defaults (SciPy's defaults, and ``tol`` as SciPy maps it)."""
    options = dict(options or {})
    lbfgs = method in _LBFGS_NAMES
    valid = _LBFGS_OPTIONS if lbfgs else _BFGS_OPTIONS
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"minimize: unknown option(s) {unknown} for method {method!r}; valid "
                         f"options are {list(valid)}")
    if lbfgs:
        if "maxcor" in options and "history_size" in options:
            raise ValueError("minimize: give 'maxcor' or its alias 'history_size', not both")
        if "maxls" in options and "line_search_maxiter" in options:
            raise ValueError("minimize: give 'maxls' or its alias 'line_search_maxiter', not "
                             "both")
        opts = dict(maxiter=15000, gtol=1e-5 if tol is None else tol, norm=math.inf,
                    maxcor=options.pop("history_size", 10),
                    ftol=2.220446049250313e-09 if tol is None else tol, maxfun=15000,
                    line_search_maxiter=options.pop("maxls", 20))
    else:
        opts = dict(maxiter=200 * n, gtol=1e-5 if tol is None else tol, norm=math.inf,
                    line_search_maxiter=20)
    opts.update(options)
    for name in ("maxiter", "maxcor", "maxfun", "line_search_maxiter"):
        if name in opts:
            v = opts[name]
            low = 0 if name == "maxiter" else 1
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < low:
                raise ValueError(f"minimize: option {name!r} must be an int >= {low}, got {v!r}")
    for name in ("gtol", "ftol"):
        if name in opts and not (isinstance(opts[name], (int, float, np.floating))
                                 and opts[name] >= 0):
            raise ValueError(f"minimize: option {name!r} must be a number >= 0, got "
                             f"{opts[name]!r}")
    return opts


def _check_out(out):
    """Raises a clear error unless ``fun``'s output ``out`` is a real floating scalar."""
    shape = getattr(out, "shape", None)
    dtype = getattr(out, "dtype", None)
    if shape is None or tuple(shape) != () or not dtypes.is_floating(dtype):
        desc = (f"shape {tuple(shape)} dtype {dtype}" if shape is not None
                else type(out).__name__)
        raise TypeError(f"minimize: fun(x0, *args) must return a real floating scalar (shape "
                        f"()), got {desc}")


def _closure_convert(fun, x0, args):
    """``(flat_fun, operands)`` with ``flat_fun(x, *operands) == fun(x, *args)``: ``fun`` staged
    once, the array leaves of ``args`` and every array ``fun`` closes over (traced values of
    enclosing transformations included) turned into explicit operands, so that the implicit
    derivative covers them all. Python scalars in ``args`` stay Python values (as arrays they
    would be rounded to float32, Starling's default for Python floats)."""
    leaves, treedef = tree_util.flatten(args)
    keep = [not isinstance(v, (bool, int, float, complex)) for v in leaves]
    arrays = [operand(v, "minimize") for v, k in zip(leaves, keep) if k]

    def staged(x, *arrs):
        it = iter(arrs)
        out = fun(x, *tree_util.unflatten(treedef, [next(it) if k else v
                                                    for v, k in zip(leaves, keep)]))
        _check_out(out)
        return [out]

    prog, consts = programs.stage(staged, [ShapedArray(x0.shape, x0.dtype)]
                                  + [a.aval for a in arrays])
    n_consts = len(consts)

    def flat_fun(x, *ops):
        return programs.call(prog, list(ops[:n_consts]) + [x] + list(ops[n_consts:]))[0]

    return flat_fun, list(consts) + arrays


def _hessian_pinv_solve(hess, b):
    """``-H^+ b`` for the symmetric Hessian ``H`` by its eigendecomposition, eigenvalues below
    ``n eps max|lambda|`` treated as zero: the exact ``-H^-1 b`` when ``H`` is nonsingular, and
    the minimum-norm solution along flat directions (there the solution does not move). Linear
    in ``b`` (``H`` holds no tangents), so reverse mode transposes it."""
    n = hess.shape[-1]
    lam, v = eigh((hess + hess.T) / 2)
    cutoff = n * snp.finfo(hess.dtype).eps * snp.max(snp.abs(lam))
    keep = snp.abs(lam) > cutoff
    inv_lam = snp.where(keep, 1 / snp.where(keep, lam, 1), 0)
    return -(v @ (inv_lam * (v.T @ b)))


def _implicit_outputs(fun, x, f, g, ops):
    """``(x, f, g)`` unchanged, carrying derivatives in ``args`` by the implicit function theorem:
    at a stationary point ``grad_x fun(x*, a) = 0``, so ``dx* = -H^-1 (d/da grad_x fun) da`` with
    ``H`` the Hessian in ``x`` (Griewank & Walther, "Evaluating Derivatives", 2nd ed., Ch. 15;
    Blondel et al., "Efficient and Modular Implicit Differentiation", NeurIPS 2022). ``H`` is
    dense, from ``jacfwd`` of the gradient (``n`` forward passes, then an ``O(n^3)``
    eigendecomposition): meant for moderate ``n``. ``df = d_a fun da + g.dx*`` and
    ``dg = H dx* + (d/da grad_x fun) da`` (zero up to rounding) follow by the chain rule.
    Tangents of ``x``, ``f``, ``g`` themselves (they come out of the solver's loop under
    ``stop_gradient``) are ignored: the solution does not depend on ``x0``."""

    @custom_jvp
    def solution(x, f, g, a):
        return x, f, g

    @solution.defjvp
    def solution_jvp(primals, tangents):
        # Calling ``solution`` again gives ``x`` the derivatives of enclosing differentiations
        # (their tangents reach it through this same rule), so higher orders are right too.
        x, f, g = solution(*primals)
        a = primals[3]
        ta = tangents[3]
        vg = value_and_grad(lambda x_, a_: fun(x_, *a_))
        _, (df_a, dg_a) = jvp(lambda a_: vg(x, a_), (a,), (ta,))
        hess = jacfwd(lambda x_: vg(x_, a)[1])(x)
        dx = _hessian_pinv_solve(hess, dg_a)
        return (x, f, g), (dx, df_a.astype(f.dtype) + snp.vdot(g, dx), hess @ dx + dg_a)

    return solution(x, f, g, list(ops))


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
    """Minimises ``fun(x, *args)`` over ``x`` by BFGS or L-BFGS (JAX's
    ``jax.scipy.optimize.minimize``; SciPy's ``scipy.optimize.minimize`` semantics).

    The solvers are ``starling.while_loop``s over a fixed-size state, so ``minimize`` works under
    ``starling.compile`` and ``starling.vmap`` (over ``x0`` or ``args``; batch members stop
    together, each frozen once done). Each iteration takes a quasi-Newton direction and a step
    satisfying the strong Wolfe conditions (Nocedal & Wright, "Numerical Optimization", 2nd ed.,
    Algorithms 3.5 / 3.6 with cubic / quadratic interpolation; see ``line_search.py``):

    * ``"BFGS"``: the dense inverse Hessian approximation, ``H0 = I``, updated by N&W eq. 6.17
      (Algorithm 6.1). ``O(n^2)`` memory and work per iteration.
    * ``"L-BFGS"`` (also spelled ``"l-bfgs"``, ``"lbfgs"``, JAX's
      ``"l-bfgs-experimental-do-not-rely-on-this"``, and ``"L-BFGS-B"``, accepted without
      bounds): the ``maxcor`` newest pairs in an ``(maxcor, n)`` ring buffer, applied by the
      two-loop recursion (N&W Algorithms 7.4 / 7.5). Not SciPy's L-BFGS-B code (Byrd, Lu,
      Nocedal & Zhu): it reaches the same optimum, by other iterates.

    Differentiation: ``x`` (and ``fun`` / ``jac``) are differentiable in ``args`` by the
    implicit function theorem at the returned point (forward mode by a ``custom_jvp`` rule,
    reverse mode by transposing it): ``dx*/da = -H^-1 d(grad_x f)/da``, with the Hessian ``H``
    formed densely by ``jacfwd`` of the gradient (``n`` forward passes) and inverted through
    its eigendecomposition, eigenvalues below ``n eps max|lambda|`` counting as zero (flat
    directions get a zero derivative; a nonsingular ``H`` gives exactly ``-H^-1``). The
    derivative is that of the exact optimum, so it is as accurate as ``x`` is (tighten
    ``gtol``; when ``success`` is False it treats the returned point as stationary all the
    same). It is zero in ``x0``; the solver's iterations are never differentiated. Values
    that ``fun`` closes over (traced values of enclosing ``grad`` / ``jvp`` / ``vmap``
    included) are differentiated like ``args``: ``fun`` is staged once and the arrays it
    captures become explicit inputs of the rule.

    Args:
        fun: ``fun(x, *args) -> f``, ``x`` of shape ``(n,)``, ``f`` a real scalar; pure and
            traceable by Starling (it is evaluated with ``value_and_grad`` inside loops).
        x0: ``(n,)`` the start point; must be 1-d as in JAX (ravel a pytree yourself). A
            floating dtype is kept (float64 for SciPy-level accuracy); integers and bools become
            float32.
        args: a tuple of extra arguments (pytrees of arrays) passed to ``fun``.
        method: ``"BFGS"`` or ``"L-BFGS"`` (spellings above), case-insensitive.
        tol: if given, ``gtol`` (and for L-BFGS also ``ftol``) when the options do not set it,
            as SciPy does.
        options: a dict. Both methods: ``maxiter`` (BFGS default ``200 n``, L-BFGS 15000),
            ``gtol`` (1e-5; converged when ``|g|_norm <= gtol``), ``norm`` (``inf``; the
            ``ord`` of ``starling.numpy.linalg.norm``), ``line_search_maxiter`` (20: objective
            evaluations per line search). L-BFGS also: ``maxcor`` (alias ``history_size``;
            10), ``ftol`` (2.2e-9, SciPy's; stop when the relative decrease is ``<= ftol``;
            0 turns the test off, which a tight ``gtol`` needs), ``maxfun`` (15000),
            ``maxls`` (alias of ``line_search_maxiter``).
    Returns:
        ``OptimizeResults(x, success, status, fun, jac, hess_inv, nfev, njev, nit)``; the status
        codes are listed on ``OptimizeResults``. Non-finite values never hang the loop: a NaN at
        ``x0`` gives ``status`` 3 and ``nit`` 0, and a line search backs off from NaN / inf
        regions or stops with ``success`` False.
    Raises:
        ValueError: an unknown method or option, an option of the wrong type or range, ``x0``
            not 1-d.
        TypeError: ``args`` is not a tuple; ``x0`` is complex; ``fun`` does not return a real
            floating scalar.
    """
    if not isinstance(method, str):
        raise ValueError(f"minimize: method must be a string, got {method!r}")
    meth = method.lower()
    if meth not in _BFGS_NAMES + _LBFGS_NAMES:
        raise ValueError(f"minimize: method {method!r} is not supported; use 'BFGS' or 'L-BFGS' "
                         f"(or {', '.join(repr(m) for m in _LBFGS_NAMES[1:])})")
    if not isinstance(args, tuple):
        raise TypeError(f"minimize: args must be a tuple, got {type(args).__name__}")
    x0 = snp.asarray(x0)
    if x0.ndim != 1:
        raise ValueError(f"minimize: x0 must be 1-d (shape (n,)), got shape {tuple(x0.shape)}; "
                         "ravel it (and unravel inside fun)")
    if dtypes.is_complex(x0.dtype):
        raise TypeError(f"minimize: x0 must be real, got {x0.dtype}")
    if not dtypes.is_floating(x0.dtype):
        x0 = x0.astype(snp.float32)
    opts = _options(meth, x0.shape[0], tol, options)
    flat_fun, ops = _closure_convert(fun, x0, args)

    # The loop never sees tangents: derivatives come from the implicit rule below.
    const_ops = stop_gradient(ops)
    x_init = stop_gradient(x0)

    def value_and_grad_fn(x):
        return value_and_grad(lambda x_: flat_fun(x_, *const_ops))(x)

    common = dict(maxiter=opts["maxiter"], gtol=opts["gtol"], norm=opts["norm"],
                  line_search_maxiter=opts["line_search_maxiter"])
    if meth in _BFGS_NAMES:
        res = qn.quasi_newton(value_and_grad_fn, x_init, qn.bfgs_init(x_init),
                              qn.bfgs_direction, qn.bfgs_update, **common)
        hess_inv = res.mem
    else:
        res = qn.quasi_newton(value_and_grad_fn, x_init, qn.lbfgs_init(x_init, opts["maxcor"]),
                              qn.lbfgs_direction, qn.lbfgs_update, ftol=opts["ftol"] or None,
                              maxfun=opts["maxfun"], **common)
        hess_inv = None
    x, f, g = _implicit_outputs(flat_fun, res.x, res.f, res.g, ops)
    return OptimizeResults(x=x, success=res.converged, status=res.status, fun=f, jac=g,
                           hess_inv=hess_inv, nfev=res.nfev, njev=res.nfev, nit=res.nit)
