"""Grouped (ragged) matrix products: the ``ragged_dot`` primitive behind ``lax.ragged_dot``.

A mixture-of-experts layer sends the tokens of each expert through that expert's weights. With
the tokens sorted by expert, the rows of ``lhs`` form consecutive groups of sizes
``group_sizes`` and group ``i`` is multiplied by ``rhs[i]``: one grouped GEMM instead of a
Python loop or a dense product per expert (JAX: ``lax.ragged_dot``; PyTorch:
``torch._grouped_mm``).

The primitive has two modes, which are each other's transposes (so ``grad`` of either is the
other mode plus the same mode), with leading batch dims ``(*b)`` shared by all operands:

=============  ==========================================  =============================
mode           operands -> result                          meaning
=============  ==========================================  =============================
``rows``       lhs (*b, m, k), rhs (*b, g, k, n)           out[r] = lhs[r] @ rhs[group(r)]
               -> (*b, m, n)
``contract``   lhs (*b, m, k), rhs (*b, m, n) -> (*b, g,   out[i] = lhs[rows_i]^T @ rhs[rows_i]
               k, n)                                       (the weight gradient)
=============  ==========================================  =============================

``group_sizes`` ``(*b, g)`` (any integer dtype) holds non-negative sizes whose sum is at most
``m``. Rows past the last group give zeros (``rows``) or are ignored (``contract``), as in JAX.
Concrete ``group_sizes`` are checked in eager calls; traced ones cannot be, and are clamped
(a negative size counts as 0, groups are cut at row ``m``).

Accumulation: as ``dot_general`` (float16 / bfloat16 / float8 in float32, rounded once;
integers wrap); each group's product is one ``dot_general`` evaluation, and float32 / float64
groups run on the native GEMM writing straight into their rows of the result. Vmapped operands become one more leading batch dim.
Sharding: the batch dims, ``n`` (``rows``: rhs and result; ``contract``: rhs and result) and
``k`` (``rows``: contracted, a pending sum; ``contract``: lhs and result) split; the grouped
dim ``m`` does not (a device's rows would need the global group offsets).
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.ad_util import Zero, is_undefined, tangent_aval
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ...core.trace import EVAL_TRACE, current_trace
from ..array import Array
from . import rules_sharding as RS
from . import shape_lax
from .convert_element_type import convert_element_type
from ..convert import operand
from .elementwise_family import promote_operands
from .linear import dot_into, preferred_dtype
from .rules import add_tangents

try:
    from ... import _native
except ImportError:   # pragma: no cover  (the extension is part of the package)
    _native = None

__all__ = ["ragged_dot"]

ragged_dot_p = Primitive("ragged_dot", family="linear")
_MODES = ("rows", "contract")
_MATMUL = (((1,), (0,)), ((), ()))           # (m, k) @ (k, n)
_OUTER = (((0,), (0,)), ((), ()))            # (m, k)^T @ (m, n)


def _shape_error(mode, lhs, rhs, gs, why):
    want = ("lhs (*b, m, k), rhs (*b, g, k, n), group_sizes (*b, g)" if mode == "rows" else
            "lhs (*b, m, k), rhs (*b, m, n), group_sizes (*b, g)")
    return ValueError(f"ragged_dot: {why}; got lhs {tuple(lhs.shape)}, rhs {tuple(rhs.shape)}, "
                      f"group_sizes {tuple(gs.shape)} (valid: {want})")


def _out_shape(mode, lhs, rhs, gs):
    """The result shape, after checking ranks and sizes (ValueError naming all three shapes)."""
    nb = len(gs.shape) - 1
    if nb < 0:
        raise _shape_error(mode, lhs, rhs, gs, "group_sizes must have at least one dim")
    rhs_rank = nb + (3 if mode == "rows" else 2)
    if len(lhs.shape) != nb + 2 or len(rhs.shape) != rhs_rank:
        raise _shape_error(mode, lhs, rhs, gs, "ranks do not match")
    b = tuple(gs.shape[:nb])
    if tuple(lhs.shape[:nb]) != b or tuple(rhs.shape[:nb]) != b:
        raise _shape_error(mode, lhs, rhs, gs, "leading batch dims differ")
    m, k = lhs.shape[nb:]
    g = gs.shape[nb]
    if mode == "rows":
        rg, rk, n = rhs.shape[nb:]
        if rg != g or rk != k:
            raise _shape_error(mode, lhs, rhs, gs, f"rhs must be (g={g}, k={k}, n) per batch")
        return b + (m, n)
    rm, n = rhs.shape[nb:]
    if rm != m:
        raise _shape_error(mode, lhs, rhs, gs, f"rhs must have m={m} rows like lhs")
    return b + (g, k, n)


def _abstract(lhs, rhs, gs, *, mode, preferred_element_type):
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"ragged_dot: lhs and rhs must have one dtype (promote first), got "
                        f"{lhs.dtype} and {rhs.dtype}")
    if not dtypes.is_integer(gs.dtype):
        raise TypeError(f"ragged_dot: group_sizes must have an integer dtype, got {gs.dtype}")
    dt = lhs.dtype if preferred_element_type is None else preferred_element_type
    return ShapedArray(_out_shape(mode, lhs, rhs, gs), dt, lhs.weak_type and rhs.weak_type)


def _offsets(sizes, m):
    """Row offsets ``[0, s0, s0 + s1, ...]`` of the groups, clamped to ``[0, m]`` (each size is
    clamped to ``[0, m]`` first, so the running sum cannot overflow)."""
    sizes = np.clip(np.asarray(sizes), 0, m).astype(np.int64)
    return np.minimum(np.concatenate([[0], np.cumsum(sizes)]), m)


def _impl(lhs, rhs, gs, *, mode, preferred_element_type):
    lhs, rhs, gs = np.asarray(lhs), np.asarray(rhs), np.asarray(gs)
    nb = gs.ndim - 1
    b = gs.shape[:nb]
    out_dt = lhs.dtype if preferred_element_type is None else preferred_element_type
    shape = _out_shape(mode, lhs, rhs, gs)
    # recycled warm pages for large results (every row is written below)
    out = np.empty(shape, out_dt) if _native is None else _native.empty(list(shape), out_dt)
    m = lhs.shape[nb]
    for idx in np.ndindex(*b):
        off = _offsets(gs[idx], m)
        x, y, o = lhs[idx], rhs[idx], out[idx]
        for i in range(gs.shape[nb]):
            s, e = int(off[i]), int(off[i + 1])
            if mode == "rows":
                if e > s:   # each group's rows written in place: no temporary, no copy
                    dot_into(x[s:e], y[i], o[s:e], _MATMUL)
            elif e > s:
                dot_into(x[s:e], y[s:e], o[i], _OUTER)
            else:
                o[i] = 0
        if mode == "rows":
            o[off[-1]:] = 0   # rows past the last group
    return out


ragged_dot_p.impl = _impl
ragged_dot_p.abstract_eval = _abstract
ragged_dot_p.weak_type = lambda wl, wr, wg, **params: wl and wr


def _bind(lhs, rhs, gs, mode, pet=None):
    return ragged_dot_p.bind(lhs, rhs, gs, mode=mode, preferred_element_type=pet)


def _check_concrete_sizes(gs, m):
    if type(gs) is not Array or current_trace() is not EVAL_TRACE:
        return
    sizes = np.asarray(gs)
    if (sizes < 0).any():
        raise ValueError(f"ragged_dot: group_sizes must be non-negative, got {sizes.tolist()}")
    total = np.asarray(sizes.astype(object).sum(axis=-1))   # Python ints: no wrap-around
    if (total > m).any():
        raise ValueError(f"ragged_dot: group_sizes sum to {total.max()} > m = {m} rows of lhs "
                         f"(group_sizes {sizes.tolist()})")


def ragged_dot(lhs, rhs, group_sizes, preferred_element_type=None):
    """Grouped matrix product (JAX ``lax.ragged_dot``): consecutive row groups of ``lhs``, each
    times its own matrix of ``rhs``, in one call (a mixture-of-experts layer).

    Args:
        lhs: ``(*b, m, k)`` rows sorted by group.
        rhs: ``(*b, g, k, n)``, one ``(k, n)`` matrix per group. lhs and rhs are promoted to
            one dtype (JAX rules).
        group_sizes: ``(*b, g)`` integer array, the number of rows in each group; sizes are
            non-negative and sum to at most ``m`` (rows past the last group give zeros).
        preferred_element_type: result (and accumulation) dtype, or None for the operands'.
    Returns:
        ``(*b, m, n)`` array: row ``r`` of group ``i`` is ``lhs[r] @ rhs[i]``.
    Raises:
        ValueError: shapes that do not fit the above (the message names all three shapes);
            concrete group sizes that are negative or sum past ``m``.
        TypeError: a non-integer ``group_sizes``; operand dtypes with no promotion; a
            ``preferred_element_type`` of another kind than the operands' (float -> int).

    ``grad`` / ``vmap`` / ``jvp`` / ``compile`` and sharding (batch, ``n`` and ``k`` dims) work;
    the weight gradient is the same grouped product in its ``contract`` mode
    (``lhs[rows_i]^T @ cotangent[rows_i]`` per group).
    """
    lhs, rhs = promote_operands("ragged_dot", (lhs, rhs), domain="numeric")
    gs = operand(group_sizes, "ragged_dot")
    pet = preferred_dtype("ragged_dot", lhs.dtype, preferred_element_type)
    _abstract(lhs.aval, rhs.aval, gs.aval, mode="rows", preferred_element_type=pet)
    _check_concrete_sizes(gs, lhs.shape[-2])
    return _bind(lhs, rhs, gs, "rows", pet)


# ---- transformation rules ----------------------------------------------------------------------
# Bilinear in (lhs, rhs): the JVP is the sum of the two partial products; each mode's operand
# cotangents are products of the other mode (see the module docstring's table).

def _jvp(primals, tangents, *, mode, preferred_element_type):
    (lhs, rhs, gs), (tl, tr, _) = primals, tangents
    out = _bind(lhs, rhs, gs, mode, preferred_element_type)
    t = Zero(tangent_aval(out.aval))
    if not dtypes.is_inexact(out.dtype):
        return out, t
    if type(tl) is not Zero:
        t = _bind(tl, rhs, gs, mode, preferred_element_type)
    if type(tr) is not Zero:
        t = add_tangents(t, _bind(lhs, tr, gs, mode, preferred_element_type))
    return out, t


def _swap_last(x):
    n = x.ndim
    return shape_lax.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _transpose(ct, lhs, rhs, gs, *, mode, preferred_element_type):
    if is_undefined(gs):
        raise ValueError("ragged_dot: group_sizes is not a linear operand")
    if is_undefined(lhs) and is_undefined(rhs):
        raise ValueError("ragged_dot: cannot transpose with both operands linear (the product "
                         "of two linear values is not linear)")
    x = lhs if is_undefined(lhs) else rhs   # the linear operand
    if type(ct) is Zero:
        res = Zero(tangent_aval(x.aval))
        return [res, None, None] if x is lhs else [None, res, None]
    other = rhs if x is lhs else lhs
    if ct.dtype != other.dtype:   # preferred_element_type: contract in the cotangent's dtype
        other = convert_element_type(other, ct.dtype, False)
    if mode == "rows":
        res = (_bind(ct, _swap_last(other), gs, "rows") if x is lhs
               else _bind(other, ct, gs, "contract"))
    else:
        res = (_bind(other, _swap_last(ct), gs, "rows") if x is lhs
               else _bind(other, ct, gs, "rows"))
    if res.dtype != x.aval.dtype:   # back to the operand's dtype
        res = convert_element_type(res, x.aval.dtype, False)
    return [res, None, None] if x is lhs else [None, res, None]


def _batch(args, dims, *, mode, preferred_element_type):
    """The vmapped axis becomes one more leading batch dim of all three operands (unbatched ones
    are broadcast along it)."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    lhs, rhs, gs = (shape_lax._to_front(a, d, size) for a, d in zip(args, dims))
    return _bind(lhs, rhs, gs, mode, preferred_element_type), 0


def _sharding(in_avals, out_avals, *, mode, preferred_element_type):
    lhs, rhs, gs = in_avals
    nb = len(gs.shape) - 1
    S, R_, P_ = RS.Shard, RS.R, RS.Partial
    combos = [((S(i),), (S(i), S(i), S(i))) for i in range(nb)]
    if mode == "rows":   # out (*b, m, n): n from rhs; k contracted
        combos += [((S(nb + 1),), (R_, S(nb + 2), R_)), ((P_("sum"),), (S(nb + 1), S(nb + 1), R_))]
    else:                # out (*b, g, k, n): k from lhs, n from rhs
        combos += [((S(nb + 1),), (S(nb + 1), R_, R_)), ((S(nb + 2),), (R_, S(nb + 1), R_))]
    return combos


ragged_dot_p.jvp = _jvp
ragged_dot_p.transpose = _transpose
ragged_dot_p.batch = _batch
ragged_dot_p.sharding = _sharding
ragged_dot_p.is_linear = True
