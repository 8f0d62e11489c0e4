"""Learning-rate schedules: functions ``count -> learning rate``.

``count`` is the number of updates already applied (0 for the first update), a Python int or
an integer Array (the optimizers pass the step counter they carry in their state, so the
schedules are traceable and work under ``compile``). Every schedule returns a float32 scalar
Array; any optimizer's ``lr`` accepts a float or one of these.
"""
from __future__ import annotations

import math

from .. import numpy as snp

__all__ = ["constant", "linear", "cosine_decay", "linear_warmup", "warmup_cosine_decay",
           "step_decay", "exponential_decay", "join"]


def _t(count):
    return snp.astype(snp.asarray(count), snp.float32)


def _check_steps(op, name, n, allow_zero=False):
    if not isinstance(n, int) or n < 0 or (n == 0 and not allow_zero):
        raise ValueError(f"{op}: {name} must be a {'non-negative' if allow_zero else 'positive'}"
                         f" int, got {n!r}")


def constant(value):
    """``lr(t) = value``."""
    def schedule(count):
        return snp.full((), value, dtype=snp.float32)
    return schedule


def linear(init_value, end_value, transition_steps, transition_begin=0):
    """Linear from ``init_value`` (at ``transition_begin``) to ``end_value`` (after
    ``transition_steps`` more), constant outside."""
    _check_steps("linear", "transition_steps", transition_steps)

    def schedule(count):
        frac = snp.clip((_t(count) - transition_begin) / transition_steps, 0.0, 1.0)
        return init_value + (end_value - init_value) * frac
    return schedule


def cosine_decay(init_value, decay_steps, alpha=0.0):
    """Loshchilov & Hutter (2017), one cycle without restarts:
    ``init * ((1 - alpha) * (1 + cos(pi * min(t, T) / T)) / 2 + alpha)`` with ``T =
    decay_steps``; ``alpha`` is the final fraction of ``init_value``."""
    _check_steps("cosine_decay", "decay_steps", decay_steps)

    def schedule(count):
        frac = snp.minimum(_t(count), float(decay_steps)) / decay_steps
        cos = (snp.cos(frac * math.pi) + 1.0) * 0.5
        return ((1.0 - alpha) * cos + alpha) * init_value
    return schedule


def linear_warmup(peak_value, warmup_steps, init_value=0.0):
    """Goyal et al. (2017): linear from ``init_value`` to ``peak_value`` over ``warmup_steps``,
    then constant ``peak_value``."""
    return linear(init_value, peak_value, warmup_steps) if warmup_steps else constant(peak_value)


def join(schedules, boundaries):
    """Piecewise schedule: ``schedules[i]`` on ``[boundaries[i-1], boundaries[i])``, each
    called with the count since its own start."""
    if len(schedules) != len(boundaries) + 1:
        raise ValueError("join: needs one more schedule than boundaries")

    def schedule(count):
        t = snp.asarray(count)
        out = schedules[0](t)
        for b, s in zip(boundaries, schedules[1:]):
            out = snp.where(t >= b, s(t - b), out)
        return out
    return schedule


def warmup_cosine_decay(init_value, peak_value, warmup_steps, decay_steps, end_value=0.0):
    """Linear warmup from ``init_value`` to ``peak_value`` over ``warmup_steps``, then cosine
    decay to ``end_value`` reached at ``decay_steps`` (counted from 0, warmup included)."""
    _check_steps("warmup_cosine_decay", "warmup_steps", warmup_steps, allow_zero=True)
    if decay_steps <= warmup_steps:
        raise ValueError(f"warmup_cosine_decay: decay_steps ({decay_steps}) must exceed "
                         f"warmup_steps ({warmup_steps})")
    alpha = end_value / peak_value if peak_value else 0.0
    cos = cosine_decay(peak_value, decay_steps - warmup_steps, alpha)
    if not warmup_steps:
        return cos
    return join([linear(init_value, peak_value, warmup_steps), cos], [warmup_steps])


def step_decay(init_value, step_size, gamma=0.1):
    """PyTorch's StepLR: ``init * gamma ** floor(t / step_size)``."""
    _check_steps("step_decay", "step_size", step_size)

    def schedule(count):
        return init_value * snp.power(gamma, snp.floor(_t(count) / step_size))
    return schedule


def exponential_decay(init_value, decay_rate, transition_steps=1, staircase=False):
    """``init * decay_rate ** (t / transition_steps)`` (floored exponent with ``staircase``)."""
    _check_steps("exponential_decay", "transition_steps", transition_steps)

    def schedule(count):
        e = _t(count) / transition_steps
        return init_value * snp.power(decay_rate, snp.floor(e) if staircase else e)
    return schedule
