"""Testing utilities for users and Starling's own tests: ``check_grads``.

``check_grads`` compares forward-mode JVPs with central finite differences and reverse-mode VJPs
with the transpose identity ``<vjp(ct), t> == <ct, jvp(t)>`` (real part of the bilinear product,
which holds for complex functions under the non-conjugating convention), all in float64 /
complex128 so that the check measures the rules, not rounding. Order 2 repeats the checks on
the JVP and VJP functions themselves.
"""
from __future__ import annotations

import numpy as np

from . import tree as tree_util
from .arrays.array import wrap
from .arrays.convert import operand
from .core import dtypes
from .transforms.grad import jvp, vjp


class GradCheckError(AssertionError):
    """A derivative disagrees with its finite-difference or transpose-identity reference."""


def _to_x64(x):
    x = operand(x, "check_grads")
    buf = np.asarray(x)
    if dtypes.is_complex(buf.dtype):
        return wrap(buf.astype(np.complex128), False)
    if dtypes.is_floating(buf.dtype):
        return wrap(buf.astype(np.float64), False)
    return x


def _rand_like(rng, x):
    shape = tuple(x.shape)
    if dtypes.is_complex(x.dtype):
        v = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    elif dtypes.is_floating(x.dtype):
        v = rng.standard_normal(shape)
    else:
        return wrap(np.zeros(shape, dtypes.float0), False)
    return wrap(np.asarray(v, dtype=x.dtype), False)


def _np(x):
    return np.asarray(x, dtype=np.complex128 if np.iscomplexobj(np.asarray(x)) else np.float64)


def _inner(xs, ys):
    total = 0.0
    for x, y in zip(xs, ys):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype == dtypes.float0 or y.dtype == dtypes.float0:
            continue
        total += float(np.real(np.sum(_np(x) * _np(y))))
    return total


def _close(name, got, want, atol, rtol):
    for g, w in zip(got, want):
        if np.asarray(g).dtype == dtypes.float0:  # integer outputs: nothing to compare
            continue
        g, w = _np(g), _np(w)
        if g.shape != w.shape:
            raise GradCheckError(f"{name}: shape {g.shape} != {w.shape}")
        if not np.allclose(g, w, atol=atol, rtol=rtol, equal_nan=True):
            err = np.max(np.abs(g - w)) if g.size else 0.0
            raise GradCheckError(f"{name}: max abs error {err:.3g} (atol={atol}, rtol={rtol})\n"
                                 f"got:  {g}\nwant: {w}")


def check_jvp(f, args, *, eps=1e-6, atol=1e-5, rtol=1e-5, seed=0):
    """Forward mode against central differences ``(f(x + eps t) - f(x - eps t)) / (2 eps)``."""
    rng = np.random.default_rng(seed)
    args = [_to_x64(a) for a in args]
    tangents = [_rand_like(rng, a) for a in args]
    _, t_out = jvp(f, tuple(args), tuple(tangents))

    def shifted(sign):
        moved = []
        for a, t in zip(args, tangents):
            if np.asarray(t).dtype == dtypes.float0:
                moved.append(a)
            else:
                moved.append(wrap(np.asarray(a) + sign * eps * np.asarray(t), False))
        return tree_util.leaves(f(*moved))

    plus, minus = shifted(1.0), shifted(-1.0)
    fd = [None if np.asarray(p).dtype == dtypes.float0 else (_np(p) - _np(m)) / (2 * eps)
          for p, m in zip(plus, minus)]
    _close("check_jvp (jvp vs finite differences)", tree_util.leaves(t_out), fd, atol, rtol)
    return args, tangents


def check_vjp(f, args, *, atol=1e-5, rtol=1e-5, seed=0):
    """Reverse mode against forward mode through ``<vjp(ct), t> == <ct, jvp(t)>``."""
    rng = np.random.default_rng(seed + 1)
    args = [_to_x64(a) for a in args]
    tangents = [_rand_like(rng, a) for a in args]
    out, vjp_fn = vjp(f, *args)
    out_leaves, out_tree = tree_util.flatten(out)
    cts = [_rand_like(rng, operand(o, "check_grads")) for o in out_leaves]
    ct_in = vjp_fn(tree_util.unflatten(out_tree, cts))
    _, t_out = jvp(f, tuple(args), tuple(tangents))
    lhs = _inner(tree_util.leaves(ct_in), tangents)
    rhs = _inner(cts, tree_util.leaves(t_out))
    if not np.isclose(lhs, rhs, atol=atol, rtol=rtol):
        raise GradCheckError(f"check_vjp: transpose identity fails: <vjp(ct), t> = {lhs!r} but "
                             f"<ct, jvp(t)> = {rhs!r}")
    return args


def check_grads(f, args, order=2, modes=("fwd", "rev"), *, eps=1e-6, atol=1e-5, rtol=1e-5,
                seed=0):
    """Checks derivatives of ``f`` at ``args`` up to ``order`` in the given ``modes``.

    Args:
        f: function of positional array arguments returning a pytree of arrays.
        args: tuple of arrays (float / complex; int arguments are held fixed).
        order: highest derivative order to check (>= 1).
        modes: any of "fwd" (JVP vs finite differences) and "rev" (VJP vs JVP by the
            transpose identity).
    Raises:
        GradCheckError: naming the failed check, with the values.
        ValueError: bad ``order`` or ``modes``.
    """
    if order < 1:
        raise ValueError(f"check_grads: order must be >= 1, got {order}")
    bad = set(modes) - {"fwd", "rev"}
    if bad or not modes:
        raise ValueError(f"check_grads: modes must be a non-empty subset of ('fwd', 'rev'), "
                         f"got {modes!r}")
    args = tuple(args)
    if "fwd" in modes:
        xs, ts = check_jvp(f, args, eps=eps, atol=atol, rtol=rtol, seed=seed)
        if order > 1:
            check_grads(lambda *a: jvp(f, a, tuple(ts))[1], xs, order - 1, modes, eps=eps,
                        atol=atol, rtol=rtol, seed=seed + 2)
    if "rev" in modes:
        xs = check_vjp(f, args, atol=atol, rtol=rtol, seed=seed)
        if order > 1:
            rng = np.random.default_rng(seed + 3)
            out = f(*xs)
            out_leaves, out_tree = tree_util.flatten(out)
            cts = tree_util.unflatten(out_tree, [_rand_like(rng, operand(o, "check_grads"))
                                                 for o in out_leaves])
            check_grads(lambda *a: vjp(f, *a)[1](cts), xs, order - 1, modes, eps=eps,
                        atol=atol, rtol=rtol, seed=seed + 4)
