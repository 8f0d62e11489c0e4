"""Named axes in scope: the axes a collective (``psum(x, "i")``) can refer to.

``vmap(f, axis_name="i")`` and ``shard_map(f, mesh, ...)`` bind names to sizes while they trace
``f``; a collective looks its axes up here (the innermost binding of a name wins) to know their
sizes when it is staged. A name bound nowhere is a clear error.
"""
from __future__ import annotations

import contextlib
import contextvars
import math

_ENV = contextvars.ContextVar("starling_axis_env", default=())
_BATCHING = contextvars.ContextVar("starling_batching_axis", default=None)


@contextlib.contextmanager
def bound_axes(sizes: dict):
    """Binds axis names to sizes inside the block."""
    token = _ENV.set(_ENV.get() + tuple(sizes.items()))
    try:
        yield
    finally:
        _ENV.reset(token)


def axis_names_in_scope() -> list:
    """The axis names bound around the caller, innermost first, each once (for error messages)."""
    seen, out = set(), []
    for n, _ in reversed(_ENV.get()):
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def normalize_axis_names(axis_name, op) -> tuple:
    """A tuple of axis names from a name or a sequence of names.

    Raises:
        TypeError: an entry is not a string (or hashable name).
    """
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    for n in names:
        if n is None or isinstance(n, (list, dict, set)):
            raise TypeError(f"{op}: axis_name must be a name or a tuple of names, got "
                            f"{axis_name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"{op}: axis names repeat in {axis_name!r}")
    return names


def axis_size(axis_name, op="axis_size") -> int:
    """The size of a bound axis (the product over a tuple of names).

    Raises:
        NameError: a name that no enclosing shard_map / vmap(axis_name=) binds.
    """
    names = normalize_axis_names(axis_name, op)
    env = _ENV.get()
    sizes = []
    for n in names:
        for name, size in reversed(env):
            if name == n:
                sizes.append(size)
                break
        else:
            bound = axis_names_in_scope()
            raise NameError(
                f"{op}: unbound axis name {n!r}. Collectives refer to the axes of an enclosing "
                f"shard_map (its mesh's axis names) or vmap(..., axis_name=...); axes in scope "
                f"here: {bound or 'none'}")
    return math.prod(sizes)


@contextlib.contextmanager
def batching_axis(name):
    """Marks the block as the batch rule of a vmap over the axis ``name`` (None: unnamed).
    Rules that batch sub-programs (control flow, shard_map bodies) read it with
    ``current_batching_axis`` so that collectives over ``name`` inside them stay bound."""
    token = _BATCHING.set(name)
    try:
        yield
    finally:
        _BATCHING.reset(token)


def current_batching_axis():
    """The axis name of the vmap whose batch rule is running (None when unnamed or none)."""
    return _BATCHING.get()


def uses_axis_name(params: dict, name) -> bool:
    """True when a Program among ``params`` (a higher-order primitive's bodies) holds a
    collective over the axis ``name``, at any depth."""
    from .ir import subprograms
    for prog in subprograms(params):
        for eqn in prog.eqns:
            named = eqn.primitive.meta.get("named_axes")
            if named is not None and name in named(eqn.params):
                return True
            if uses_axis_name(eqn.params, name):
                return True
    return False
