"""NumPy's function-lifting helpers, built on ``vmap``: vectorize, apply_along_axis,
apply_over_axes, piecewise (exported by ``starling.numpy``).

``vectorize`` and ``apply_along_axis`` run the Python function ONCE, on tracers, under nested
``vmap`` (one level per loop dim): the result is a batched computation, not a Python loop, and
it composes with ``grad`` / ``compile`` / further ``vmap``. The function must therefore be
traceable (Starling ops only, no Python branching on values).
"""
from __future__ import annotations

import functools
import re

from ..arrays.convert import operand
from .vmap import vmap

__all__ = ["vectorize", "apply_along_axis", "apply_over_axes", "piecewise"]


def _snp():
    from ..arrays import numpy as snp
    return snp


# ---- vectorize ----------------------------------------------------------------------------------

_DIMS = r"\((?:\w+(?:,\s*\w+)*)?\)"
_SIGNATURE = re.compile(rf"^\s*{_DIMS}(?:\s*,\s*{_DIMS})*\s*->\s*{_DIMS}(?:\s*,\s*{_DIMS})*\s*$")


def _parse_signature(signature):
    """"(m,n),(n)->(m)" -> ([("m", "n"), ("n",)], [("m",)])."""
    if not _SIGNATURE.match(signature):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r} (expected "
                         "e.g. '(m,n),(n)->(m)')")
    ins, outs = signature.split("->")
    parse = lambda s: [tuple(d for d in re.split(r"\s*,\s*", g.strip()) if d)  # noqa: E731
                       for g in re.findall(r"\(([^)]*)\)", s)]
    return parse(ins), parse(outs)


def _core_sizes(args, in_core):
    sizes = {}
    for i, (x, core) in enumerate(zip(args, in_core)):
        if x.ndim < len(core):
            raise ValueError(f"vectorize: input {i} has shape {tuple(x.shape)}, fewer dims than "
                             f"its core dims {core}")
        for name, d in zip(core, tuple(x.shape)[x.ndim - len(core):]):
            if sizes.setdefault(name, d) != d:
                raise ValueError(f"vectorize: core dim {name!r} has inconsistent sizes "
                                 f"{sizes[name]} and {d} (input {i}, shape {tuple(x.shape)})")
    return sizes


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """A version of ``pyfunc`` that maps over the leading (loop) dims of its array arguments
    with NumPy's broadcasting (NumPy ``vectorize``), implemented with nested ``vmap``.

    Args:
        pyfunc: a traceable function of arrays.
        excluded: positions (ints) and keyword names (strs) of arguments passed to
            ``pyfunc`` unchanged (not converted to arrays, not mapped).
        signature: a generalised-ufunc signature such as ``"(n),(n)->()"`` naming the core
            dims each input consumes and each output produces; None means every input and
            output is a scalar per element. Several outputs (``"->(),()"``) give a tuple.
    Returns:
        The vectorised function. Calling it broadcasts the loop dims of the (non-excluded)
        arguments to one shape ``(*loop)`` and returns arrays of shape ``(*loop, *core_out)``.
    Raises:
        ValueError (when called): an invalid signature, inputs with fewer dims than their core
            dims, inconsistent core-dim sizes, loop dims that do not broadcast, or outputs whose
            dims differ from the signature. TypeError: the number of inputs differs from the
            signature's.
    """
    in_core, out_core = _parse_signature(signature) if signature is not None else (None, None)
    excluded = frozenset(excluded)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        snp = _snp()
        mapped_pos = [i for i in range(len(args)) if i not in excluded]
        mapped_kw = sorted(k for k in kwargs if k not in excluded)
        arrays = [operand(args[i], "vectorize") for i in mapped_pos] + \
            [operand(kwargs[k], "vectorize") for k in mapped_kw]
        cores = in_core if in_core is not None else [()] * len(arrays)
        if len(cores) != len(arrays):
            raise TypeError(f"vectorize: the signature {signature!r} has {len(cores)} inputs, "
                            f"but {len(arrays)} arguments are mapped")
        _core_sizes(arrays, cores)
        loops = [tuple(x.shape)[:x.ndim - len(c)] for x, c in zip(arrays, cores)]
        try:
            loop = snp.broadcast_shapes(*loops) if loops else ()
        except ValueError:
            raise ValueError(f"vectorize: the loop dims {loops} of the inputs do not "
                             "broadcast") from None
        arrays = [snp.broadcast_to(x, tuple(loop) + tuple(x.shape)[x.ndim - len(c):])
                  for x, c in zip(arrays, cores)]

        def core_fn(*xs):
            a = list(args)
            kw = dict(kwargs)
            for i, x in zip(mapped_pos, xs):
                a[i] = x
            for k, x in zip(mapped_kw, xs[len(mapped_pos):]):
                kw[k] = x
            out = pyfunc(*a, **kw)
            _check_outputs(out, out_core)
            return out

        f = core_fn
        for _ in loop:
            f = vmap(f)
        return f(*arrays)

    return wrapped


def _check_outputs(out, out_core):
    outs = out if isinstance(out, tuple) else (out,)
    cores = out_core if out_core is not None else [()] * len(outs)
    if out_core is not None and len(out_core) > 1 and not isinstance(out, tuple):
        raise ValueError(f"vectorize: the signature has {len(out_core)} outputs, the function "
                         "returned one value")
    if len(outs) != len(cores):
        raise ValueError(f"vectorize: the function returned {len(outs)} outputs, the signature "
                         f"has {len(cores)}")
    for i, (o, c) in enumerate(zip(outs, cores)):
        nd = getattr(o, "ndim", 0)
        if nd != len(c):
            raise ValueError(f"vectorize: output {i} of the function has {nd} dims per element "
                             f"(shape {tuple(getattr(o, 'shape', ()))}), the signature says "
                             f"{len(c)} {c}")


# ---- apply_along_axis / apply_over_axes ---------------------------------------------------------

def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` applied to every 1-D slice of ``arr`` along ``axis`` (NumPy
    ``apply_along_axis``), as one batched call (nested ``vmap``).

    Args:
        func1d: traceable function of a 1-D array of length ``n`` (plus ``args`` / ``kwargs``,
            passed unchanged) returning an array of shape ``(*out)`` (a scalar: ``()``).
        axis: the axis of ``arr`` to slice along. arr: array of shape ``(*pre, n, *post)``.
    Returns:
        Array of shape ``(*pre, *out, *post)``.
    Raises:
        AxisError: axis out of range. ValueError: ``arr`` is 0-d.
    """
    snp = _snp()
    x = operand(arr, "apply_along_axis")
    if x.ndim == 0:
        raise ValueError("apply_along_axis: arr must have at least 1 dim, got a 0-d array")
    from ..arrays.ops.axes import normalize_axis
    axis = normalize_axis("apply_along_axis", axis, x.ndim)
    x = snp.moveaxis(x, axis, -1)
    f = lambda v: func1d(v, *args, **kwargs)  # noqa: E731
    for _ in range(x.ndim - 1):
        f = vmap(f)
    r = operand(f(x), "apply_along_axis")
    k = r.ndim - (x.ndim - 1)
    if k == 0:
        return r
    lead = x.ndim - 1
    return snp.moveaxis(r, tuple(range(lead, lead + k)), tuple(range(axis, axis + k)))


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` applied repeatedly, once per axis in ``axes`` (NumPy
    ``apply_over_axes``); a result with one dim fewer gets it back as size 1, so reductions
    behave as with ``keepdims=True``.

    Args:
        func: function ``func(a, axis) -> array`` of ``a``'s ndim or one less.
        a: array. axes: an int or a sequence of ints.
    Returns:
        Array of ``a``'s ndim.
    Raises:
        ValueError: ``func`` returned an array of another ndim.
    """
    snp = _snp()
    x = operand(a, "apply_over_axes")
    for ax in ([axes] if isinstance(axes, int) else list(axes)):
        ax = ax + x.ndim if ax < 0 else ax
        r = operand(func(x, ax), "apply_over_axes")
        if r.ndim == x.ndim - 1:
            r = snp.expand_dims(r, ax)
        elif r.ndim != x.ndim:
            raise ValueError(f"apply_over_axes: func must return an array of ndim {x.ndim} or "
                             f"{x.ndim - 1} for axis {ax}, got shape {tuple(r.shape)}")
        x = r
    return x


# ---- piecewise ----------------------------------------------------------------------------------

def piecewise(x, condlist, funclist, *args, **kw):
    """Piecewise-defined values (NumPy ``piecewise``): where ``condlist[i]`` holds, the value
    is ``funclist[i](x, *args, **kw)`` (or ``funclist[i]`` itself if it is a constant); a
    later condition wins over an earlier one, as NumPy assigns in order. With one more
    function than conditions, the last is the default where no condition holds; otherwise
    those places are 0.

    Every function is evaluated on the whole of ``x`` and the pieces are chosen with ``where``
    (so functions must be elementwise, and differentiable pieces give a differentiable
    result; as with ``where``, a piece that is inf / NaN where it is NOT chosen still makes
    its gradient NaN there).

    Args:
        x: array of shape ``(*shape)``.
        condlist: a bool array of shape ``(*shape)`` or a list of them (n conditions).
        funclist: n or n + 1 callables or scalars.
    Returns:
        Array of ``x``'s shape and dtype.
    Raises:
        ValueError: ``funclist`` has neither n nor n + 1 entries.
    """
    snp = _snp()
    x = operand(x, "piecewise")
    if isinstance(condlist, (list, tuple)) and x.ndim > 0 and condlist \
            and all(isinstance(c, bool) for c in condlist):
        condlist = [condlist]  # one condition spelled as a list of bools
    if not isinstance(condlist, (list, tuple)):
        condlist = [condlist]
    conds = [snp.broadcast_to(snp.astype(operand(c, "piecewise"), snp.bool_), x.shape)
             for c in condlist]
    funcs = list(funclist)
    n = len(conds)
    if len(funcs) not in (n, n + 1):
        raise ValueError(f"piecewise: with {n} conditions funclist must have {n} or {n + 1} "
                         f"entries, got {len(funcs)}")

    def value(f):
        v = f(x, *args, **kw) if callable(f) else f
        return snp.broadcast_to(snp.astype(operand(v, "piecewise"), x.dtype), x.shape)

    if len(funcs) == n + 1:
        none = snp.logical_not(functools.reduce(snp.logical_or, conds)) if conds \
            else snp.ones(x.shape, dtype=snp.bool_)
        conds = conds + [none]
    out = snp.zeros(x.shape, dtype=x.dtype)
    for c, f in zip(conds, funcs):
        out = snp.where(c, value(f), out)
    return out
