"""``starling.optim``: optimizers as pure function pairs, plus PyTorch-style stateful wrappers.

Pure API (works under ``compile``; pytrees in, pytrees out, no side effects)::

    opt = optim.adam(lr=1e-3)                     # a GradientTransformation(init, update)
    state = opt.init(params)
    updates, state = opt.update(grads, state, params)
    params = optim.apply_updates(params, updates)   # params + updates, leafwise

``params`` / ``grads`` are any pytrees of floating arrays with the same structure (dicts from
``nn.value_and_grad``, lists, modules, ...). ``lr`` is a float or a schedule
``count -> lr`` (``optim.cosine_decay`` ...) evaluated at the step counter carried in the state
(the number of updates already applied). Updates are cast to each parameter's dtype.

Stateful wrappers for the nn shim: ``opt = optim.Adam(model, lr=1e-3)``; ``opt.step(grads)``
rebinds the model's trainable parameters in place and returns the model (see
``starling.optim_stateful``). Formulas follow ``torch.optim`` (2.x) and are stated on each
function; the first steps are checked against hand-computed values and torch in the tests.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .. import numpy as snp
from .. import tree as tree_util
from .schedules import (  # noqa: F401
    constant, cosine_decay, exponential_decay, join, linear, linear_warmup, step_decay,
    warmup_cosine_decay,
)

__all__ = [
    "GradientTransformation", "sgd", "adam", "adamw", "rmsprop", "adagrad", "lbfgs", "chain",
    "clip_by_global_norm", "global_norm", "clip_grad_norm", "apply_updates",
    "SGDState", "AdamState", "RMSpropState", "AdagradState", "LBFGSState",
    "constant", "linear", "cosine_decay", "linear_warmup", "warmup_cosine_decay", "step_decay",
    "exponential_decay", "join",
    "Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LBFGS",
]


class GradientTransformation(NamedTuple):
    """``init(params) -> state`` and ``update(grads, state, params=None) -> (updates,
    state)``."""
    init: Callable[[Any], Any]
    update: Callable[..., Any]


class SGDState(NamedTuple):
    """State of ``sgd``: ``count`` (int32 scalar, steps taken) and ``momentum_buffer`` (a pytree
    like the params, or None without momentum)."""
    count: Any
    momentum_buffer: Any


class AdamState(NamedTuple):
    """State of ``adam`` / ``adamw``: ``count`` (int32 scalar, steps taken), ``exp_avg`` and
    ``exp_avg_sq`` (the first and second moment estimates, pytrees like the params) and
    ``max_exp_avg_sq`` (their running maximum with amsgrad, else None)."""
    count: Any
    exp_avg: Any
    exp_avg_sq: Any
    max_exp_avg_sq: Any


class RMSpropState(NamedTuple):
    """State of ``rmsprop``: ``count`` (int32 scalar, steps taken), ``square_avg`` (pytree like the
    params), ``grad_avg`` (centered only, else None) and ``momentum_buffer`` (with momentum, else
    None)."""
    count: Any
    square_avg: Any
    grad_avg: Any
    momentum_buffer: Any


class AdagradState(NamedTuple):
    """State of ``adagrad``: ``count`` (int32 scalar, steps taken) and ``sum`` (the accumulated
    squared gradients, a pytree like the params)."""
    count: Any
    sum: Any  # noqa: A003


class LBFGSState(NamedTuple):
    """State of ``lbfgs``: ``count`` (int32 scalar, steps taken), ``s_history`` and ``y_history``
    (the last parameter and gradient differences, ``(history_size, n)`` over the ``n`` flattened
    parameters, newest last), ``n_valid`` (int32 scalar, how many of those rows are in use) and
    ``prev_params`` / ``prev_grads`` (``(n,)``, the previous step's)."""
    count: Any
    s_history: Any
    y_history: Any
    n_valid: Any
    prev_params: Any
    prev_grads: Any


_tmap = tree_util.map


def _zeros_like(tree):
    return _tmap(snp.zeros_like, tree)


def _count0():
    return snp.zeros((), dtype=snp.int32)


def _lr(lr, count):
    return lr(count) if callable(lr) else lr


def _s(v, dtype):
    """A scalar hyperparameter as a value of ``dtype`` (Python floats stay weak)."""
    if isinstance(v, (int, float)):
        return v
    return snp.astype(v, dtype)


def _check_lr(op, lr):
    if not callable(lr) and not lr >= 0.0:
        raise ValueError(f"{op}: invalid learning rate {lr!r} (must be >= 0 or a schedule)")


def _prep_grads(op, grads, params, weight_decay, maximize):
    """PyTorch's preamble: negate for ``maximize``, add L2 ``weight_decay * p``."""
    if maximize:
        grads = _tmap(lambda g: -g, grads)
    if weight_decay:
        if params is None:
            raise ValueError(f"{op}: weight_decay needs params: call update(grads, state, "
                             "params)")
        grads = _tmap(lambda g, p: g + p * weight_decay, grads, params)
    return grads


def _cast_like(updates, ref):
    return _tmap(lambda u, r: u if u.dtype == r.dtype else snp.astype(u, r.dtype), updates, ref)


def sgd(lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
        maximize=False) -> GradientTransformation:
    """Stochastic gradient descent (torch.optim.SGD).

    ``g <- g + wd p``; with momentum ``mu``: ``b <- g`` on the first step, else
    ``b <- mu b + (1 - dampening) g``; the step direction is ``g + mu b`` (Nesterov,
    Sutskever et al. 2013) or ``b``; ``update = -lr * direction``.

    Raises:
        ValueError: negative hyperparameters; nesterov without momentum or with dampening.
    """
    _check_lr("sgd", lr)
    if momentum < 0 or weight_decay < 0:
        raise ValueError(f"sgd: momentum ({momentum}) and weight_decay ({weight_decay}) must be "
                         ">= 0")
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError("sgd: nesterov momentum requires momentum > 0 and zero dampening")

    def init(params):
        return SGDState(_count0(), _zeros_like(params) if momentum else None)

    def update(grads, state, params=None):
        g = _prep_grads("sgd", grads, params, weight_decay, maximize)
        buf = None
        if momentum:
            if dampening:
                first = state.count == 0
                buf = _tmap(lambda b, g: snp.where(first, g, b * momentum + g * (1 - dampening)),
                            state.momentum_buffer, g)
            else:  # from zeros, mu * 0 + g == g: PyTorch's first-step copy needs no branch
                buf = _tmap(lambda b, g: b * momentum + g, state.momentum_buffer, g)
            g = _tmap(lambda g, b: g + b * momentum, g, buf) if nesterov else buf
        lr_t = _lr(lr, state.count)
        upd = _tmap(lambda d: d * -_s(lr_t, d.dtype), g)
        return _cast_like(upd, grads), SGDState(state.count + 1, buf)

    return GradientTransformation(init, update)


def _adam(op, lr, betas, eps, weight_decay, amsgrad, maximize, decoupled):
    _check_lr(op, lr)
    b1, b2 = betas
    if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0) or eps < 0 or weight_decay < 0:
        raise ValueError(f"{op}: invalid betas {betas}, eps {eps} or weight_decay {weight_decay}")

    def init(params):
        return AdamState(_count0(), _zeros_like(params), _zeros_like(params),
                         _zeros_like(params) if amsgrad else None)

    def update(grads, state, params=None):
        g = _prep_grads(op, grads, params, 0.0 if decoupled else weight_decay, maximize)
        m = _tmap(lambda m, g: m * b1 + g * (1.0 - b1), state.exp_avg, g)
        v = _tmap(lambda v, g: v * b2 + g * g * (1.0 - b2), state.exp_avg_sq, g)
        vmax = _tmap(snp.maximum, state.max_exp_avg_sq, v) if amsgrad else None
        # Bias corrections in float64 (torch computes them in Python floats).
        t = snp.astype(state.count + 1, snp.float64)
        bc1 = 1.0 - snp.power(b1, t)
        bc2_sqrt = snp.sqrt(1.0 - snp.power(b2, t))
        lr_t = _lr(lr, state.count)
        step = (lr_t if isinstance(lr_t, (int, float)) else snp.astype(lr_t, snp.float64)) / bc1

        def leaf(m, v, p):
            dt = m.dtype
            denom = snp.sqrt(v) / snp.astype(bc2_sqrt, dt) + eps
            u = m / denom * -snp.astype(step, dt)
            if decoupled and weight_decay:
                u = u - p * (_s(lr_t, dt) * weight_decay)
            return u

        if decoupled and weight_decay and params is None:
            raise ValueError(f"{op}: weight_decay needs params: call update(grads, state, params)")
        ref = params if params is not None else m
        upd = _tmap(leaf, m, vmax if amsgrad else v, ref)
        return _cast_like(upd, grads), AdamState(state.count + 1, m, v, vmax)

    return GradientTransformation(init, update)


def adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
         maximize=False) -> GradientTransformation:
    """Adam (Kingma & Ba 2015) as torch.optim.Adam: ``g <- g + wd p`` (L2);
    ``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2) g^2`` (``v_max = max(v_max, v)`` with
    amsgrad, Reddi et al. 2018); ``update = -lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t)
    + eps)`` at step ``t = 1, 2, ...``."""
    return _adam("adam", lr, betas, eps, weight_decay, amsgrad, maximize, decoupled=False)


def adamw(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
          maximize=False) -> GradientTransformation:
    """AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW: Adam without the L2 term plus
    the decoupled decay ``-lr * wd * p`` (PyTorch multiplies ``p`` by ``1 - lr wd`` first)."""
    return _adam("adamw", lr, betas, eps, weight_decay, amsgrad, maximize, decoupled=True)


def rmsprop(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
            maximize=False) -> GradientTransformation:
    """RMSprop (Hinton's lecture 6e; centered: Graves 2013) as torch.optim.RMSprop:
    ``s <- alpha s + (1 - alpha) g^2``; centered also ``a <- alpha a + (1 - alpha) g`` and
    ``s - a^2`` in place of ``s``; ``avg = sqrt(.) + eps``; with momentum
    ``b <- mu b + g / avg``, ``update = -lr b``, else ``update = -lr g / avg``."""
    _check_lr("rmsprop", lr)
    if not 0.0 <= alpha or eps < 0 or momentum < 0 or weight_decay < 0:
        raise ValueError("rmsprop: alpha, eps, momentum and weight_decay must be >= 0")

    def init(params):
        return RMSpropState(_count0(), _zeros_like(params),
                            _zeros_like(params) if centered else None,
                            _zeros_like(params) if momentum else None)

    def update(grads, state, params=None):
        g = _prep_grads("rmsprop", grads, params, weight_decay, maximize)
        sq = _tmap(lambda s, g: s * alpha + g * g * (1.0 - alpha), state.square_avg, g)
        ga = _tmap(lambda a, g: a * alpha + g * (1.0 - alpha), state.grad_avg, g) \
            if centered else None
        if centered:
            avg = _tmap(lambda s, a: snp.sqrt(s - a * a) + eps, sq, ga)
        else:
            avg = _tmap(lambda s: snp.sqrt(s) + eps, sq)
        lr_t = _lr(lr, state.count)
        buf = None
        if momentum:
            buf = _tmap(lambda b, g, a: b * momentum + g / a, state.momentum_buffer, g, avg)
            upd = _tmap(lambda b: b * -_s(lr_t, b.dtype), buf)
        else:
            upd = _tmap(lambda g, a: g / a * -_s(lr_t, g.dtype), g, avg)
        return _cast_like(upd, grads), RMSpropState(state.count + 1, sq, ga, buf)

    return GradientTransformation(init, update)


def adagrad(lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
            maximize=False) -> GradientTransformation:
    """Adagrad (Duchi et al. 2011) as torch.optim.Adagrad: ``S <- S + g^2`` (from
    ``initial_accumulator_value``); ``update = -lr / (1 + (t - 1) lr_decay) * g / (sqrt(S) +
    eps)`` at step ``t = 1, 2, ...``."""
    _check_lr("adagrad", lr)
    if lr_decay < 0 or weight_decay < 0 or initial_accumulator_value < 0 or eps < 0:
        raise ValueError("adagrad: lr_decay, weight_decay, initial_accumulator_value and eps "
                         "must be >= 0")

    def init(params):
        return AdagradState(_count0(), _tmap(
            lambda p: snp.full_like(p, initial_accumulator_value), params))

    def update(grads, state, params=None):
        g = _prep_grads("adagrad", grads, params, weight_decay, maximize)
        s = _tmap(lambda s, g: s + g * g, state.sum, g)
        clr = _lr(lr, state.count)
        if lr_decay:  # in float64, as torch's Python-float arithmetic
            clr = clr / (snp.astype(state.count, snp.float64) * lr_decay + 1.0)
        upd = _tmap(lambda g, s: g / (snp.sqrt(s) + eps) * -_s(clr, g.dtype), g, s)
        return _cast_like(upd, grads), AdagradState(state.count + 1, s)

    return GradientTransformation(init, update)


def global_norm(tree):
    """``sqrt(sum of squares of every leaf)`` (a float scalar Array)."""
    leaves = tree_util.leaves(tree)
    if not leaves:
        return snp.zeros((), dtype=snp.float32)
    total = None
    for x in leaves:
        s = snp.sum(snp.abs(x) ** 2)
        total = s if total is None else total + s
    return snp.sqrt(total)


def clip_grad_norm(grads, max_norm):
    """``(clipped_grads, total_norm)``: PyTorch's ``clip_grad_norm_`` as a pure function:
    every gradient is scaled by ``min(1, max_norm / (total_norm + 1e-6))``."""
    norm = global_norm(grads)
    coef = snp.minimum(max_norm / (norm + 1e-6), 1.0)
    return _tmap(lambda g: g * snp.astype(coef, g.dtype), grads), norm


def clip_by_global_norm(max_norm) -> GradientTransformation:
    """A transformation clipping the global gradient norm to ``max_norm`` (see
    ``clip_grad_norm``); combine with ``chain(clip_by_global_norm(1.0), adam(...))``."""
    if not max_norm > 0:
        raise ValueError(f"clip_by_global_norm: max_norm must be positive, got {max_norm}")

    def init(params):
        return ()

    def update(grads, state, params=None):
        return clip_grad_norm(grads, max_norm)[0], state

    return GradientTransformation(init, update)


def chain(*transforms) -> GradientTransformation:
    """Applies transformations in order (each one's updates are the next one's gradients)."""
    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(grads, state, params=None):
        new = []
        for t, s in zip(transforms, state):
            grads, s = t.update(grads, s, params)
            new.append(s)
        return grads, tuple(new)

    return GradientTransformation(init, update)


def apply_updates(params, updates):
    """``params + updates`` leafwise, keeping each parameter's dtype.

    ``params`` may be an nn.Module and ``updates`` a dict by parameter name (as from
    ``nn.value_and_grad``): a new module is returned (the input is not changed).
    """
    from .module import Module
    if isinstance(params, Module) and isinstance(updates, dict):
        from .stateless import replace
        sd = params.state_dict()
        return replace(params, {k: _add(sd[k], u) for k, u in updates.items()})
    return _tmap(_add, params, updates)


def _add(p, u):
    r = p + u
    return r if r.dtype == p.dtype else snp.astype(r, p.dtype)


from .lbfgs import lbfgs  # noqa: E402
from .optim_stateful import LBFGS, SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop  # noqa: E402
