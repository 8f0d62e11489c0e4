"""Sliding windows: ``starling.lax.reduce_window`` and the window arithmetic shared with the
convolutions (``padtype_to_pads``, ``window_view``).

Padding and base-dilation holes are ABSENT from the windows (XLA: each window combines its
operand elements and the initial value once), e.g. a "SAME" sum with ``init_value`` 10 adds 10
once per window. Method: the operand is padded ONCE (``base_dilation`` as interior padding,
``padding`` at the edges; negative padding crops) with the identity of a recognised monoid, or,
for other callables, with the initial value and a "present" mask carried through the combines;
then it is reduced one dimension at a time:
along a dim with window ``k``, stride ``s`` and dilation ``w`` the output is the combination of
the ``k`` strided static slices starting at ``0, w, ..., (k-1) w``. Since the reduction is
associative and commutative (XLA's requirement too), reducing dim by dim equals reducing whole
windows and costs ``sum(k)`` rather than ``prod(k)`` combines. The initial value is combined
once more per window unless it is the identity of a recognised monoid (``lax.add`` with 0,
``lax.max`` with -inf / the minimum integer, ``lax.min`` with +inf / the maximum, ``lax.mul``
with 1), exactly as XLA defines ``ReduceWindow``.

Every step is a static slice, a pad or the elementwise combine, so the result differentiates
(a slice transposes to a pad), batches and compiles like those primitives. For max / min, tied
elements of a window share its derivative (a convex combination, set by the pairwise order of
the combines); XLA's select-and-scatter gives all of it to one of them.
"""
from __future__ import annotations

import operator

import numpy as np

from ...core import dtypes
from ... import tree
from .. import numpy as snp
from ..convert import operand as _operand
from ..ops import shape_lax as SL
from . import elementwise as E
from ._util import is_python_scalar, scalar_like, shape_str, static_ints

__all__ = ["reduce_window", "padtype_to_pads"]

_MONOIDS = {E.add: "add", snp.add: "add", operator.add: "add",
            E.mul: "mul", snp.multiply: "mul", operator.mul: "mul",
            E.max: "max", snp.maximum: "max", E.min: "min", snp.minimum: "min"}
_COMBINE = {"add": snp.add, "mul": snp.multiply, "max": snp.maximum, "min": snp.minimum}


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """Explicit ``(lo, hi)`` pads per dim for ``padding`` "VALID" (none), "SAME" (output size
    ``ceil(n / s)``, the odd pad element at the end) or "SAME_LOWER" (at the start); a sequence
    of pairs is returned as it is. ``window_shape`` are the (dilated) window extents.

    Raises:
        ValueError: an unknown padding string or a wrong number of pairs.
    """
    n = len(in_shape)
    if isinstance(padding, str):
        kind = padding.upper()
        if kind == "VALID":
            return ((0, 0),) * n
        if kind not in ("SAME", "SAME_LOWER"):
            raise ValueError(f"lax: padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence "
                             f"of (low, high) pairs, got {padding!r}")
        pads = []
        for size, k, s in zip(in_shape, window_shape, window_strides):
            out = -(-size // s)
            total = max((out - 1) * s + k - size, 0)
            small = total // 2
            pads.append((small, total - small) if kind == "SAME" else (total - small, small))
        return tuple(pads)
    pads = tuple(static_ints("padding", "padding pair", p, 2) for p in padding)
    if len(pads) != n:
        raise ValueError(f"lax: padding has {len(pads)} (low, high) pairs for {n} dims")
    return pads


def window_view(x, axis, offset, stride, count):
    """``x[..., offset : offset + stride * (count - 1) + 1 : stride, ...]`` along ``axis``."""
    if count == 0:
        return SL.slice_in_dim(x, 0, 0, 1, axis)
    return SL.slice_in_dim(x, offset, offset + stride * (count - 1) + 1, stride, axis)


def _windows_out(n, k, s, w):
    span = (k - 1) * w + 1
    return max((n - span) // s + 1, 0) if n >= span else 0


def _identity(kind, dt):
    if kind == "add":
        return 0
    if kind == "mul":
        return 1
    if dtypes.is_bool(dt):
        return kind == "min"
    if dtypes.is_integer(dt):
        info = np.iinfo(dt)
        return int(info.min) if kind == "max" else int(info.max)
    return -np.inf if kind == "max" else np.inf


def _is_identity(kind, init_vals, x):
    v = init_vals
    if v is None:
        return False
    try:
        return bool(v == _identity(kind, x.dtype))
    except TypeError:
        return False


def _init_value(leaf, init, op):
    if is_python_scalar(init):
        return scalar_like(op, init, leaf.dtype, weak=False)
    v = _operand(init, f"lax.{op}")
    if v.shape != () or v.dtype != leaf.dtype:
        raise TypeError(f"lax.{op}: init_value must be 0-d with the operand's dtype "
                        f"{leaf.dtype}, got {v.dtype}{list(v.shape)}")
    return v


def _known_scalar(init):
    if is_python_scalar(init):
        return init
    if type(init).__name__ == "Array":
        try:
            return np.asarray(init._buf).item()
        except Exception:  # noqa: BLE001  (a sharded or lazy array: not known)
            return None
    if isinstance(init, np.ndarray) or isinstance(init, np.generic):
        return np.asarray(init).item()
    return None


def _masked(combine):
    """``combine`` over (values..., present) lists: absent entries (padding, dilation holes)
    leave the other operand unchanged."""
    def run(a, b):
        both = snp.logical_and(a[-1], b[-1])
        out = combine(a[:-1], b[:-1])
        out = [snp.where(both, o, snp.where(a[-1], x, y)) for o, x, y in zip(out, a, b)]
        return out + [snp.logical_or(a[-1], b[-1])]
    return run


def reduce_window(operand, init_value, computation, window_dimensions, window_strides,
                  padding, base_dilation=None, window_dilation=None):
    """Reduces every window of ``operand`` with ``computation`` (XLA ReduceWindow).

    Args:
        operand: array of shape ``(d0, ..., dn-1)``, or a pytree of such arrays (then
            ``init_value`` is a matching pytree of scalars and ``computation`` combines two
            such pytrees).
        init_value: scalar of the operand's dtype, combined once into each window.
        computation: associative and commutative binary function; ``lax.add`` / ``lax.mul``
            / ``lax.max`` / ``lax.min`` (or the ``starling.numpy`` / ``operator`` equivalents)
            are recognised; any other callable is applied pairwise to whole slices.
        window_dimensions: n static ints >= 1.
        window_strides: n static ints >= 1.
        padding: "VALID", "SAME", "SAME_LOWER", or n ``(low, high)`` pairs (negative crops),
            applied to the base-dilated operand.
        base_dilation: n ints >= 1 (default 1): ``b - 1`` init values between elements.
        window_dilation: n ints >= 1 (default 1): the spacing of a window's elements.
    Returns:
        Array (pytree) with dim ``i`` of size ``floor((D_i - W_i) / s_i) + 1`` (0 when the
        dilated window ``W_i`` is larger than the padded, dilated size ``D_i``).
    Raises:
        ValueError: wrong lengths or non-positive sizes. TypeError: init values of another
        dtype.
    """
    leaves, treedef = tree.flatten(operand)
    init_leaves, init_def = tree.flatten(init_value)
    if not leaves or len(init_leaves) != len(leaves):
        raise ValueError(f"lax.reduce_window: operand has {len(leaves)} arrays and init_value "
                         f"{len(init_leaves)}; they must match (at least one)")
    leaves = [_operand(x, "lax.reduce_window") for x in leaves]
    shape = tuple(leaves[0].shape)
    if any(tuple(x.shape) != shape for x in leaves):
        raise ValueError("lax.reduce_window: operands must have one shape, got "
                         f"{', '.join(shape_str(x.shape) for x in leaves)}")
    n = len(shape)
    dims = static_ints("reduce_window", "window_dimensions", window_dimensions, n)
    strides = static_ints("reduce_window", "window_strides", window_strides, n)
    base = (1,) * n if base_dilation is None else static_ints(
        "reduce_window", "base_dilation", base_dilation, n)
    wdil = (1,) * n if window_dilation is None else static_ints(
        "reduce_window", "window_dilation", window_dilation, n)
    for name, v in (("window_dimensions", dims), ("window_strides", strides),
                    ("base_dilation", base), ("window_dilation", wdil)):
        if any(a < 1 for a in v):
            raise ValueError(f"lax.reduce_window: {name} must be >= 1, got {v}")
    inits = [_init_value(x, v, "reduce_window") for x, v in zip(leaves, init_leaves)]
    dilated = tuple((d - 1) * b + 1 if d else 0 for d, b in zip(shape, base))
    pads = padtype_to_pads(dilated, [(k - 1) * w + 1 for k, w in zip(dims, wdil)], strides,
                           padding)
    kind = _MONOIDS.get(computation) if len(leaves) == 1 else None
    if kind is not None:
        def combine(a, b):
            return [_COMBINE[kind](a[0], b[0])]
    else:
        def combine(a, b):
            out = tree.leaves(computation(tree.unflatten(treedef, a),
                                          tree.unflatten(treedef, b)))
            if len(out) != len(a):
                raise ValueError(f"lax.reduce_window: computation returned {len(out)} arrays "
                                 f"for {len(a)} operands")
            return [_operand(o, "lax.reduce_window") for o in out]
    config = tuple((lo, hi, b - 1) for (lo, hi), b in zip(pads, base))
    holes = any(lo > 0 or hi > 0 for lo, hi in pads) or any(b > 1 for b in base)
    mask = None
    if kind is not None:
        # padding and dilation holes are absent from the windows: pad with the identity
        fill = [scalar_like("reduce_window", _identity(kind, x.dtype), x.dtype, False)
                for x in leaves]
    else:
        fill = inits
        if holes:   # no identity known: carry a "present" mask through the combines
            ones = snp.ones(shape, dtype=dtypes.bool_)
            mask = SL.pad(ones, snp.zeros((), dtype=dtypes.bool_), config)
            combine = _masked(combine)
    xs = [SL.pad(x, v, config) for x, v in zip(leaves, fill)]
    if mask is not None:
        xs = xs + [mask]
    for ax, (k, s, w) in enumerate(zip(dims, strides, wdil)):
        count = _windows_out(xs[0].shape[ax], k, s, w)
        acc = [window_view(x, ax, 0, s, count) for x in xs]
        for j in range(1, k):
            acc = combine(acc, [window_view(x, ax, j * w, s, count) for x in xs])
        xs = acc
    known = [_known_scalar(v) for v in init_leaves]
    if kind is None or not _is_identity(kind, known[0], leaves[0]):
        full = [snp.broadcast_to(v, tuple(xs[0].shape)) for v in inits]
        if mask is not None:
            full = full + [snp.ones(tuple(xs[0].shape), dtype=dtypes.bool_)]
        xs = combine(full, xs)
    if mask is not None:
        xs = xs[:-1]
    return tree.unflatten(treedef, xs)
