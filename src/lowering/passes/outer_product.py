"""Outer products written as ``dot_general`` become elementwise multiplies (used by simplify).

A real float32/float64 ``dot_general`` whose contracting dims all have size 1 (or that has none)
is a batched outer product: ``out[*b, *i, *j] = lhs[*b, *i] * rhs[*b, *j]``. vmap(grad) makes one
of these for every per-example weight gradient (``x.T @ delta`` with one row per example). Run
as a GEMM it is one BLAS call per example with k = 1 (tiny, badly shaped calls that read and
write the big result at a fraction of memory speed); as an elementwise ``multiply`` of the two
operands laid out as ``(*b, *i, 1...)`` and ``(*b, 1..., *j)`` (views: reshapes, a transpose only
when the non-unit dims are out of order) a backend fuses it into one loop that writes the
result once.

A ``transpose`` of such a product (the transpose rule of dot_general emits one) is folded in: the
operands are laid out in the transposed order instead, so the result is written directly in the
layout the program returns.

Exactness: a contraction over one element is the one-term sum ``0.0 + a * b``; the rewrite keeps
that ``add 0.0`` (it turns ``-0.0`` into ``+0.0`` as the GEMM's sum does; NaN, inf and every other
value are unchanged). A dot_general without contracting dims is a plain product (no add). The
dtype is left alone unless operands, result and ``preferred_element_type`` are one real float32
or float64 dtype (complex products and low-precision accumulation are not plain multiplies).
"""
from __future__ import annotations

import functools

import numpy as np

from ...core.avals import ShapedArray
from ...core.ir import Literal
from .util import emit


def outer_product_eqns(dot_eqn, perm=None):
    """Equations computing ``dot_eqn``'s result (transposed by ``perm`` when given: result dim
    ``k`` is dot result dim ``perm[k]``) elementwise; the last equation's outvar is the result.
    None when ``dot_eqn`` is not a real float32/float64 outer product."""
    lhs, rhs = dot_eqn.invars
    out = dot_eqn.outvars[0]
    if isinstance(lhs, Literal) or isinstance(rhs, Literal) or out.aval.weak_type:
        return None
    dt = np.dtype(out.aval.dtype)
    pref = dot_eqn.params.get("preferred_element_type")
    if (dt not in (np.float32, np.float64) or np.dtype(lhs.aval.dtype) != dt
            or np.dtype(rhs.aval.dtype) != dt or (pref is not None and np.dtype(pref) != dt)):
        return None
    (lc, rc), (lb, rb) = dot_eqn.params["dimension_numbers"]
    lshape, rshape = tuple(lhs.aval.shape), tuple(rhs.aval.shape)
    if any(not (type(lshape[i]) is int and lshape[i] == 1) for i in lc):
        return None
    lf = [i for i in range(len(lshape)) if i not in lc and i not in lb]
    rf = [i for i in range(len(rshape)) if i not in rc and i not in rb]
    # Dot result dims in order: batch, lhs free, rhs free; for each, the lhs / rhs dim it
    # comes from (None: the operand has a unit dim there).
    src_l = list(lb) + lf + [None] * len(rf)
    src_r = list(rb) + [None] * len(lf) + rf
    out_shape = tuple(out.aval.shape)
    if perm is not None:
        perm = tuple(perm)
        if sorted(perm) != list(range(len(out_shape))):
            return None
        src_l = [src_l[p] for p in perm]
        src_r = [src_r[p] for p in perm]
        out_shape = tuple(out_shape[p] for p in perm)
    eqns = []

    op = functools.partial(emit, eqns)

    def layout(x, shape, src):
        # The contracting dims have size 1, so once the used dims are in result order the rest is
        # a reshape; the transpose is only needed when non-unit dims change order.
        order = [i for i in src if i is not None]
        moved = [i for i in order if shape[i] != 1]
        if moved != sorted(moved):
            x = op("transpose", [x], permutation=tuple(order) + tuple(
                i for i in range(len(shape)) if i not in order))
        sizes = tuple(1 if i is None else shape[i] for i in src)
        return x if sizes == tuple(x.aval.shape) else op("reshape", [x], new_sizes=sizes)

    try:
        res = op("multiply", [layout(lhs, lshape, src_l), layout(rhs, rshape, src_r)])
        if lc:
            res = op("add", [res, Literal(dt.type(0.0), ShapedArray((), dt, False))])
    except (TypeError, ValueError):   # symbolic sizes a view cannot express: keep the dot
        return None
    if tuple(res.aval.shape) != out_shape:
        return None
    return eqns
