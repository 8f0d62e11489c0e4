"""Grouped matrix products (``ragged_dot``, src/arrays/ops/ragged_dot.py) as Triton kernels.

Both modes of the primitive, over its leading batch dims ``(*b)``, with the group sizes read by
the kernel at run time (no host synchronisation, so a mixture-of-experts step can be one
launch per product whatever the routing):

* ``rows`` (``out[r] = lhs[r] @ rhs[group(r)]``, out ``(*b, m, n)``): a program per
  ``BM x BN`` tile of the output. It walks the groups in order, keeping the running row offset,
  and for each group that overlaps its rows computes the product of those rows (the others
  masked to zero) with the group's matrix, ``K`` in steps of ``BK``, and takes it for the
  group's rows only (so an inf in one group's matrix cannot reach another group's rows as
  0 * inf). A tile meets one or two groups in the usual case; rows past the last group stay
  zero.
* ``contract`` (``out[i] = lhs[rows_i]^T @ rhs[rows_i]``, out ``(*b, g, k, n)``, the weight
  gradient): a program per ``BM x BN`` tile of one group's ``(k, n)`` result; it sums the
  group's row offset and walks the group's rows in steps of ``BK``.

Sizes follow the primitive: negative sizes count as 0 and groups are cut at row ``m`` (each
size clamped to ``[0, m]`` before it is added, so no sum overflows). The
operands are read through their element strides, so they need no particular alignment (unlike
TMA-based grouped GEMMs, which want 16-byte aligned rows). The products and accumulators are
those of matmul.py (``dot_step``): float32 accumulators, IEEE float32 products, bfloat16 on the
tensor cores. Other dtypes and symbolic shapes raise NotFusible: the host runs them.
"""
from __future__ import annotations

import numpy as np

from ....core.ir import Equation, Program, Var
from . import formulas as F
from .codegen import Kernel, NotFusible, module
from .matmul import _DOT_DTYPES, GPU_TILES, INTERPRETER_TILES, dot_step


def _batch_offsets(nb, batch, pb, strides_of):
    """Lines setting ``o<i>`` (the element offset of operand ``i``'s batch element) from the
    flattened batch index ``pb`` over the static ``batch`` shape."""
    lines = [f"    o{i} = {pb} * 0" for i in range(3)]
    rem = pb
    for d in range(nb - 1, -1, -1):
        lines.append(f"    bi = {rem} % {batch[d]}" if d else f"    bi = {rem}")
        if d:
            lines.append(f"    rest = {rem} // {batch[d]}")
            rem = "rest"
        lines += [f"    o{i} = o{i} + bi * {strides_of(i, d)}" for i in range(3)]
    return lines


def _program(eqn):
    """A one-equation sub-Program of ``eqn`` (what ``triton_kernel`` equations carry)."""
    ins = [Var(v.aval) for v in eqn.invars]
    return Program([], [], ins, [Equation(eqn.primitive, ins, eqn.outvars, eqn.params)],
                   eqn.outvars)


def render(eqn, name):
    """(Kernel, sub-Program) of a ``ragged_dot`` equation, or raise NotFusible."""
    lhs, rhs, gs = (v.aval for v in eqn.invars)
    out = eqn.outvars[0].aval
    mode = eqn.params["mode"]
    dt = np.dtype(lhs.dtype)
    if dt not in _DOT_DTYPES or not F.supported_dtype(out.dtype):
        raise NotFusible(f"ragged_dot of {lhs.dtype}")
    shapes = (lhs.shape, rhs.shape, gs.shape, out.shape)
    if not all(isinstance(d, int) for s in shapes for d in s):
        raise NotFusible("symbolic ragged_dot shape")
    nb = len(gs.shape) - 1
    batch = tuple(gs.shape[:nb])
    m, k = lhs.shape[nb:]
    g = gs.shape[nb]
    acc_t = "tl.float64" if dt == np.float64 else "tl.float32"
    wide = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)

    def s(i, d):
        return f"s{i}_{d}"

    def size(i):   # group i's size clamped to [0, m] (so no running sum overflows)
        v = f"tl.load(in2 + o2 + {i} * {s(2, nb)}).to(tl.int64)"
        return f"tl.minimum(tl.maximum({v}, 0), {m})"

    if mode == "rows":
        n = rhs.shape[-1]
        rows, cols, tile_batch = m, n, batch
        body = ["    pb = (tl.program_id(0) // tiles).to(tl.int64)"]
        body += _batch_offsets(nb, batch, "pb", s)
        body += [
            "    rm = (pm * BM + tl.arange(0, BM)).to(tl.int64)",
            "    rn = (pn * BN + tl.arange(0, BN)).to(tl.int64)",
            f"    acc = tl.full((BM, BN), 0, {acc_t})",
            "    start = pb * 0",
            f"    for i in range(0, {g}):",
            f"        end = start + {size('i')}",
            f"        end = tl.where(end < {m}, end, {m})",
            "        lo = tl.where(start > pm * BM, start, pm * BM)",
            "        hi = tl.where(end < pm * BM + BM, end, pm * BM + BM)",
            "        if lo < hi:",
            # the group's own product, then taken for its rows only: the other rows of the
            # tile (zeros here) times an inf of this group's matrix would give NaN
            f"            part = tl.full((BM, BN), 0, {acc_t})",
            f"            for k0 in range(0, {k}, BK):",
            "                kk = (k0 + tl.arange(0, BK)).to(tl.int64)",
            f"                a = tl.load(in0 + o0 + rm[:, None] * {s(0, nb)} + kk[None, :] * "
            f"{s(0, nb + 1)}, mask=(rm[:, None] >= start) & (rm[:, None] < end) & "
            f"(kk[None, :] < {k}), other=0)",
            f"                b = tl.load(in1 + o1 + i * {s(1, nb)} + kk[:, None] * "
            f"{s(1, nb + 1)} + rn[None, :] * {s(1, nb + 2)}, mask=(kk[:, None] < {k}) & "
            f"(rn[None, :] < {n}), other=0)",
        ] + dot_step(dt, "                ", "part") + [
            "            acc = tl.where((rm[:, None] >= start) & (rm[:, None] < end), part, acc)",
            "        start = end",
        ]
    elif mode == "contract":
        n = rhs.shape[-1]
        rows, cols, tile_batch = k, n, batch + (g,)
        body = ["    pb = (tl.program_id(0) // tiles).to(tl.int64)",
                f"    ig = pb % {g}", f"    pbb = pb // {g}"]
        body += _batch_offsets(nb, batch, "pbb", s)
        body += [
            "    rk = (pm * BM + tl.arange(0, BM)).to(tl.int64)",
            "    rn = (pn * BN + tl.arange(0, BN)).to(tl.int64)",
            f"    acc = tl.full((BM, BN), 0, {acc_t})",
            "    start = pb * 0",
            "    for i in range(0, ig):",
            f"        start = start + {size('i')}",
            f"        start = tl.where(start < {m}, start, {m})",
            f"    end = start + {size('ig')}",
            f"    end = tl.where(end < {m}, end, {m})",
            "    for r0 in range(start, end, BK):",
            "        rr = (r0 + tl.arange(0, BK)).to(tl.int64)",
            f"        a = tl.load(in0 + o0 + rr[None, :] * {s(0, nb)} + rk[:, None] * "
            f"{s(0, nb + 1)}, mask=(rr[None, :] < end) & (rk[:, None] < {k}), other=0)",
            f"        b = tl.load(in1 + o1 + rr[:, None] * {s(1, nb)} + rn[None, :] * "
            f"{s(1, nb + 1)}, mask=(rr[:, None] < end) & (rn[None, :] < {n}), other=0)",
        ] + dot_step(dt, "        ")
    else:
        raise NotFusible(f"ragged_dot mode {mode}")
    head = [
        f"    tiles = (({rows} + BM - 1) // BM) * (({cols} + BN - 1) // BN)",
        "    pid = tl.program_id(0) % tiles",
        f"    pm = pid // (({cols} + BN - 1) // BN)",
        f"    pn = pid % (({cols} + BN - 1) // BN)",
    ]
    flat = "tl.reshape(acc, [BLOCK])"
    cast = F.render_cast(flat, wide, out.dtype) if np.dtype(out.dtype) != wide else flat
    tail = [
        "    offs = tl.arange(0, BLOCK)",
        "    i0 = (pm * BM + offs // BN).to(tl.int64)",   # no int32 overflow of i0 * cols
        "    i1 = (pn * BN + offs % BN).to(tl.int64)",
        f"    mask = (i0 < {rows}) & (i1 < {cols})",
        f"    tl.store(out0 + pb * {rows * cols} + i0 * {cols} + i1, {cast}, mask=mask)",
    ]
    params = [f"s{i}_{d}" for i, a in enumerate((lhs, rhs, gs)) for d in range(len(a.shape))]
    src = module(name, 3, 1, params, ["BM", "BN", "BK", "WIDE"], head + body + tail)
    kernel = Kernel(src, name, tile_batch + (rows, cols), [lhs, rhs, gs], [out],
                    stride_shapes=[None, None, None], tiles=(GPU_TILES, INTERPRETER_TILES))
    return kernel, _program(eqn)
