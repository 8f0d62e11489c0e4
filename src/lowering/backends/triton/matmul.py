"""Matrix products with fused epilogues as Triton kernels (``fused_matmul`` sub-Programs).

The epilogue pass (passes/epilogue.py) hands the backend ``d = dot_general(a, b)`` with the
elementwise work that consumes ``d`` (bias, activation chains, scales, casts). Here one program
computes a ``BM x BN`` tile of ``d``: it walks ``K`` in steps of ``BK`` with ``tl.dot`` into a
float32 accumulator (float64 for float64 operands; float32 products in IEEE precision, no TF32),
flattens the tile into a block of ``BM * BN`` positions and runs the epilogue on it with the
elementwise code generator (codegen.py), reading its other inputs through their strides and
writing only the outputs, so ``d`` never goes to memory unless it is an output itself.

Supported: 2-D products (one contracting dim each side) and batched ones (any number of batch
dims: a program per tile of one batch element) whose operands are the buffers themselves or
transposes of them (read through permuted strides), float16 / bfloat16 / float32 / float64
operands of one dtype, or float32 products of operands widened from low-precision buffers
(``widen_step``: float8 ``scaled_matmul`` on the tensor cores). Others raise NotFusible: the
epilogue pass then leaves the product to the host and the epilogue to the elementwise kernels.
"""
from __future__ import annotations

import numpy as np

from ....core import dtypes
from ...fused_matmul import is_operand_cast, operand_views, split
from . import formulas as F
from .codegen import Kernel, NotFusible, elementwise, load, module, operands, value

# Tile sizes: for the GPU (H100 / H200 class, compiled by aot.py) and for the interpreter, whose
# cost is per program (tl.dot needs every tile dim >= 16).
GPU_TILES = {"BM": 128, "BN": 128, "BK": 64, "WIDE": 0}
INTERPRETER_TILES = {"BM": 32, "BN": 32, "BK": 32, "WIDE": 1}
_GROUP = 8   # rows of tiles per group of programs (render's program order)
_DOT_DTYPES = {dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64}


def _operand_strides(chain, base, rank, dims):
    """The stride parameter names of view dims ``dims`` of a ``dot`` operand of rank ``rank``
    read from ``base`` (its invar) through the view ``chain`` (transposes only)."""
    perm = tuple(range(rank))
    for e in chain:
        if is_operand_cast(e):   # widened in registers after the load (widen_step)
            continue
        if e.primitive.name != "transpose" or len(e.invars[0].aval.shape) != rank:
            raise NotFusible(f"operand view {e.primitive.name}")
        perm = tuple(perm[p] for p in e.params["permutation"])
    return [f"s{base}_{perm[d]}" for d in dims]   # view dim d is base dim perm[d]


def dot_step(dt, ind, acc="acc", typed=False):
    """Lines (indented by ``ind``) adding ``a @ b`` (tiles of dtype ``dt`` just loaded) to
    ``acc``: float32 products in IEEE precision (no TF32); bfloat16 products on the tensor
    cores, except in the interpreter (``WIDE``), whose bfloat16 arithmetic flushes subnormals:
    there the operands are widened exactly and multiplied in float32 (bfloat16 products are
    exact in float32: the same sums). ``typed``: on the GPU the tiles were loaded as bfloat16
    (``typed_pointers``), else as their bits."""
    if dt != dtypes.bfloat16:
        prec = ', input_precision="ieee"' if dt == np.float32 else ""
        return [f"{ind}{acc} = tl.dot(a, b, {acc}{prec})"]
    bits = [] if typed else [f"{ind}    a = a.to(tl.bfloat16, bitcast=True)",
                             f"{ind}    b = b.to(tl.bfloat16, bitcast=True)"]
    return [f"{ind}if WIDE:", f"{ind}    a = st_from_bf16(a)", f"{ind}    b = st_from_bf16(b)",
            f'{ind}    {acc} = tl.dot(a, b, {acc}, input_precision="ieee")',
            f"{ind}else:"] + bits + [f"{ind}    {acc} = tl.dot(a, b, {acc})"]


def typed_pointers(fmt, names, ind):
    """Lines making the pointers ``names`` (to the bits of a format Triton has: ``fmt``, e.g.
    "tl.bfloat16") point to ``fmt`` on the GPU: ``tl.dot`` then takes the tiles straight from
    shared memory (wgmma), where a bitcast after the load would route them through registers
    and make every step wait for the last one's product."""
    return [f"{ind}if not WIDE:"] + [
        f"{ind}    {p} = {p}.to(tl.pointer_type({fmt}), bitcast=True)" for p in names]


def widen_step(dt, narrow, ind, typed=False):
    """Lines adding ``a @ b`` to ``acc`` for float32 products (``dt``) of operands loaded from
    the narrower buffer dtypes ``narrow`` (an operand cast in their view chains). Two float8
    operands of one format multiply on the tensor cores (wgmma), whose reduced-precision sums
    are added into the float32 accumulator after every ``BK`` step (``max_num_imprecise_acc=BK``,
    as CUTLASS and PyTorch's ``use_fast_accum=False`` do; 0 would make Triton give up the float8
    instructions); elsewhere, and in the interpreter (``WIDE``), the operands are widened
    exactly and multiplied in float32: products of float8 values are exact there, so only the
    order of the sums differs. ``typed``: on the GPU the float8 tiles were loaded as their format
    (``typed_pointers``)."""
    wide = [f"{ind}{x} = {F.render_cast(x, t, dt)}" for x, t in zip("ab", narrow) if t != dt]
    ieee = [f'{ind}acc = tl.dot(a, b, acc, input_precision="ieee")']
    fp8 = _FP8.get(narrow[0])
    if fp8 is None or narrow[1] != narrow[0]:
        return wide + ieee
    return ([f"{ind}if WIDE:"] + ["    " + x for x in wide + ieee] + [f"{ind}else:"] +
            [f"{ind}    {x} = {x}.to({fp8}, bitcast=True)" for x in "ab" if not typed] +
            [f"{ind}    acc = tl.dot(a, b, acc, max_num_imprecise_acc=BK)"])


_FP8 = {dtypes.float8_e4m3fn: "tl.float8e4nv", dtypes.float8_e5m2: "tl.float8e5"}


def render(program, name):
    """The Kernel of a ``fused_matmul`` sub-Program, or raise NotFusible."""
    dot, epi, emit = split(program)
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    a_aval, b_aval = dot.invars[0].aval, dot.invars[1].aval
    nb = len(lb)
    if len(lc) != 1 or len(rc) != 1 or len(rb) != nb or \
            len(a_aval.shape) != 2 + nb or len(b_aval.shape) != 2 + nb:
        raise NotFusible("a product that is not (batched) 2-D x 2-D with one contracting dim")
    dt = np.dtype(a_aval.dtype)
    if dt not in _DOT_DTYPES or np.dtype(b_aval.dtype) != dt:
        raise NotFusible(f"product of {a_aval.dtype} and {b_aval.dtype}")
    d = dot.outvars[0]
    shape = tuple(d.aval.shape)     # (*batch, m, n)
    m, n = shape[nb:]
    k = a_aval.shape[lc[0]]
    if not all(isinstance(x, int) for x in shape + (k,)):
        raise NotFusible("symbolic product shape")
    chains = operand_views(program)
    narrow = tuple(np.dtype(v.aval.dtype) for v in program.invars[:2])
    if narrow != (dt, dt) and (dt != np.float32 or not all(F.supported_dtype(t)
                                                           for t in narrow)):
        raise NotFusible(f"operands widened from {narrow} to {dt}")
    ins = list(program.constvars) + list(program.invars)
    ia = len(program.constvars)
    ib = ia + 1
    a_free = [x for x in range(2 + nb) if x not in tuple(lb) + tuple(lc)][0]
    b_free = [x for x in range(2 + nb) if x not in tuple(rb) + tuple(rc)][0]
    *sab, sam, sak = _operand_strides(chains[0], ia, 2 + nb, list(lb) + [a_free, lc[0]])
    *sbb, sbk, sbn = _operand_strides(chains[1], ib, 2 + nb, list(rb) + [rc[0], b_free])
    acc_t = "tl.float64" if dt == np.float64 else "tl.float32"
    # the batch element's indices (C order over the batch dims) and operand offsets
    batch = ["    oa = pb * 0", "    ob = pb * 0", "    rest = pb"]
    for x in range(nb - 1, -1, -1):
        batch += [f"    b{x} = rest % {shape[x]}", f"    rest = rest // {shape[x]}",
                  f"    oa = oa + b{x} * {sab[x]}", f"    ob = ob + b{x} * {sbb[x]}"]

    # operands whose bits are held as integers but that the tensor cores take as their format
    fmt = "tl.bfloat16" if narrow == (dt, dt) == (dtypes.bfloat16,) * 2 else \
        _FP8.get(narrow[0]) if narrow[0] == narrow[1] and narrow[0] != dt else None
    tm, tn = f"(({m} + BM - 1) // BM)", f"(({n} + BN - 1) // BN)"
    body = [
        "    pid = tl.program_id(0)",
        f"    tiles = {tm} * {tn}",
        "    pb = (pid // tiles).to(tl.int64)",   # the batch element
        "    pid = pid % tiles",
        # groups of GROUP rows of tiles run together, so that their programs share the tiles of
        # B they read in the L2 cache (the order Triton's matmul tutorial uses)
        f"    width = {_GROUP} * {tn}",
        f"    first = (pid // width) * {_GROUP}",
        f"    rows = tl.minimum({tm} - first, {_GROUP})",
        "    pm = first + (pid % width) % rows",
        "    pn = (pid % width) // rows",
    ] + batch + [
        # rows / columns past the edge read row / column 0 again (in bounds, never stored), so
        # that only the contracting dim needs a mask, and none when BK divides it
        f"    rm = (pm * BM + tl.arange(0, BM)) % {max(m, 1)}",
        f"    rn = (pn * BN + tl.arange(0, BN)) % {max(n, 1)}",
        "    rk = tl.arange(0, BK)",
        "    wk = rk.to(tl.int64)",   # 64-bit offsets: a stride times BK may pass 2**31
        f"    pa = in{ia} + oa + rm[:, None].to(tl.int64) * {sam} + wk[None, :] * {sak}",
        f"    pbb = in{ib} + ob + wk[:, None] * {sbk} + rn[None, :].to(tl.int64) * {sbn}",
    ] + typed_pointers(fmt, ("pa", "pbb"), "    ") * (fmt is not None) + [
        f"    acc = tl.full((BM, BN), 0, {acc_t})",
        f"    for k0 in range(0, {k}, BK):",
        f"        if {k} % BK == 0:",
        "            a = tl.load(pa)",
        "            b = tl.load(pbb)",
        "        else:",
        f"            a = tl.load(pa, mask=rk[None, :] < {k} - k0, other=0.0)",
        f"            b = tl.load(pbb, mask=rk[:, None] < {k} - k0, other=0.0)",
        f"        pa += BK * tl.cast({sak}, tl.int64)",
        f"        pbb += BK * tl.cast({sbk}, tl.int64)",
    ] + (dot_step(dt, "        ", typed=True) if narrow == (dt, dt) else
         widen_step(dt, narrow, "        ", typed=fmt is not None)) + [
        "    offs = tl.arange(0, BLOCK)",
    ] + [f"    i{x} = b{x} + offs * 0" for x in range(nb)] + [
        f"    i{nb} = (pm * BM + offs // BN).to(tl.int64)",   # no int32 overflow of i * n
        f"    i{nb + 1} = (pn * BN + offs % BN).to(tl.int64)",
        f"    mask = (i{nb} < {m}) & (i{nb + 1} < {n})",
    ]
    wide = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
    flat = "tl.reshape(acc, [BLOCK])"
    out_dt = np.dtype(d.aval.dtype)
    body.append(f"    dv = {F.render_cast(flat, wide, out_dt) if out_dt != wide else flat}")
    env, params = {d: ("dv", out_dt)}, []
    for i, v in enumerate(ins):   # stride parameters in input order, as launches pass them
        if i in (ia, ib):
            params += [f"s{i}_{x}" for x in range(2 + nb)]
        else:
            body.append("    " + load(i, v, 2 + nb, env, params))
    for j, eqn in enumerate(epi.eqns):
        args, dts = operands(eqn, env)
        if eqn.primitive.name.startswith("reduce_") or eqn.primitive.name.startswith("arg"):
            raise NotFusible(f"{eqn.primitive.name} in a matmul epilogue")
        body.append("    " + elementwise(j, eqn, args, dts, shape, env))
    outs = list(program.outvars)
    for j, v in enumerate(outs):
        lin = f"pb * {m * n} + i{nb} * {n} + i{nb + 1}"
        body.append(f"    tl.store(out{j} + {lin}, {value(v, env)}, mask=mask)")
    if any(tuple(v.aval.shape) != shape for v in outs):
        raise NotFusible("a matmul output of another shape")
    src = module(name, len(ins), len(outs), params, ["BM", "BN", "BK", "WIDE"], body)
    stride_shapes = [None if i in (ia, ib) else shape for i in range(len(ins))]
    return Kernel(src, name, shape, [v.aval for v in ins], [v.aval for v in outs],
                  stride_shapes=stride_shapes, tiles=(GPU_TILES, INTERPRETER_TILES))
