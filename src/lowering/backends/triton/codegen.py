"""Fused elementwise groups rendered as Triton kernels.

A group (the sub-Program of a ``fused_kernel`` equation: elementwise equations over one loop
shape ``L``) becomes one kernel over the flattened ``L``: program ``p`` handles positions
``p * BLOCK .. p * BLOCK + BLOCK - 1`` (masked at the end). Each input is read with its own
element strides, passed at launch (0 along broadcast dims), so broadcast operands, transposed and
sliced NumPy views are read in place; outputs are written C-contiguous. The scalar formulas come
from formulas.py; ``M`` in the generated module is the device math library (device_math.py).

Generated kernels call Triton's builtins only, never the standard library's jit functions
(``tl.sum``, ``tl.zeros``, ``tl.cdiv``, ...): an interpreted kernel cannot call those unless
``TRITON_INTERPRET=1`` was set before triton was first imported, which Starling does not require.

Source text: ``render(program, name) -> Kernel``; ``Kernel.load(interpret)`` imports the module
(written to the kernel cache by content hash, since Triton reads a kernel's source from its file)
and returns the function wrapped for Triton's interpreter or its JIT compiler.
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
import os

import numpy as np

from ....core.ir import Literal
from ... import cache
from . import formulas as F


class NotFusible(Exception):
    """The sub-Program cannot be rendered as one Triton kernel (the message names the equation,
    dtype or shape it does not handle): the passes then leave it unfused, the host runs it."""


# Elements per program: on a GPU, and in the interpreter, whose cost is per program.
GPU_BLOCK = 1024
INTERPRETER_BLOCK = 1 << 14


class Kernel:
    """A rendered kernel: ``source`` (module text), ``name`` (its function), ``shape`` (the loop
    shape), ``in_avals`` / ``out_avals`` (inputs right-aligned on the loop shape); for a kernel
    with reductions, ``kept`` (the number of kept positions) and ``reduced`` (the number of
    reduced positions per kept one), else None; ``finish``: the host step from the kernel's
    outputs to the results, or None."""

    def __init__(self, source, name, shape, in_avals, out_avals, kept=None, reduced=None,
                 stride_shapes=None, tiles=None, finish=None):
        self.source, self.name, self.shape = source, name, tuple(shape)
        self.in_avals, self.out_avals = list(in_avals), list(out_avals)
        self.kept, self.reduced = kept, reduced
        # per input: the shape its size-1 dims broadcast to (stride 0), None: its own strides
        self.stride_shapes = stride_shapes or [self.shape] * len(self.in_avals)
        self.tiles = tiles   # matmul kernels: (GPU tile sizes, interpreter tile sizes)
        # host step from the kernel's outputs to the equation's results (e.g. random words
        # viewed as the draw's dtype), or None
        self.finish = finish
        self._loaded = {}

    def __repr__(self):
        return f"Kernel({self.name}, shape={self.shape})"

    @property
    def size(self):
        return math.prod(self.shape)

    def launch_config(self, interpret, config=None):
        """(number of programs, constexpr values, launch options) of a launch. ``config``: an
        autotune.py configuration (block or tile sizes, ``num_warps`` / ``num_stages``); by
        default the interpreter's sizes, or fixed GPU ones."""
        config = dict(config or {})
        options = {k: config.pop(k) for k in ("num_warps", "num_stages") if k in config}
        n = self.size
        if self.tiles is not None:
            t = dict(self.tiles[1 if interpret else 0], **config)
            *batch, m, nn = self.shape
            grid = math.prod(batch) * -(-m // t["BM"]) * -(-nn // t["BN"])
            return grid, dict(t, BLOCK=t["BM"] * t["BN"]), options
        block = config.get("BLOCK")
        cap = INTERPRETER_BLOCK if interpret else GPU_BLOCK
        if self.reduced is None:
            block = block or min(cap, _pow2(n))
            return -(-n // block), {"BLOCK": block}, options
        # a row of RB lanes per kept position, as many rows as fit in the block
        rb = min(block or cap, _pow2(self.reduced))
        block = block or min(cap, max(rb, rb * _pow2(self.kept)))
        rows = block // rb
        return max(1, -(-self.kept // rows)), {"BLOCK": block, "RB": rb}, options

    def signature(self):
        """Triton's argument types (pointer element types, int64 sizes / strides), for ahead-of-
        time compilation."""
        sig = {}
        for i, a in enumerate(self.in_avals):
            sig[f"in{i}"] = "*" + _short(a.dtype)
        for j, a in enumerate(self.out_avals):
            sig[f"out{j}"] = "*" + _short(a.dtype)
        sig["n"] = "i64"
        for i, a in enumerate(self.in_avals):
            for d in range(len(a.shape)):
                sig[f"s{i}_{d}"] = "i64"
        return sig

    def load(self, interpret):
        """The kernel function, for Triton's interpreter (``interpret``) or its JIT compiler."""
        fn = self._loaded.get(interpret)
        if fn is None:
            fn = self._loaded[interpret] = _load(self.source, self.name, interpret)
        return fn


def _short(dt):
    """Triton's signature name of the element type of ``dt`` ("fp32", "i64", "u16", ...)."""
    t = F.tl_dtype(dt)[3:]
    return {"int1": "i1", "float16": "fp16", "float32": "fp32", "float64": "fp64"}.get(
        t, t.replace("uint", "u").replace("int", "i"))


# reductions rendered in kernels: (accumulator update, final block reduction) per primitive
REDUCTIONS = frozenset({"reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
                        "reduce_or", "argmax", "argmin"})
_ARG_SENTINEL = 1 << 62   # the index of a lane that has seen nothing yet (above every real one)
_MONOIDS = {"reduce_sum": (0, "+", "tl.standard._sum_combine"),
            "reduce_prod": (1, "*", "st_mul_combine")}


def render(program, name):
    """The Kernel of a fused group's sub-Program (constants first among its inputs), or raise
    NotFusible naming what Triton cannot compute.

    Without reductions the kernel runs over the flattened loop shape, ``BLOCK`` positions per
    program. With reductions (all over the same axes) a program's ``BLOCK`` lanes form
    ``BLOCK // RB`` rows of ``RB`` lanes, one row per kept position (many short reductions share
    a program; a long one has a program of its own); each row loops over its reduced positions
    ``RB`` at a time, keeping one accumulator per lane (NaN tracked apart for max / min, which
    propagate it as NumPy does), and the lanes of a row are combined after the loop."""
    reds = [e for e in program.eqns if e.primitive.name in REDUCTIONS]
    for e in program.eqns:
        if e.primitive.name.startswith("reduce_") or e.primitive.name.startswith("arg"):
            if e.primitive.name not in REDUCTIONS:
                raise NotFusible(e.primitive.name)
    if reds:
        shape = tuple(reds[0].invars[0].aval.shape)
        axes = tuple(sorted(reds[0].params["axes"]))
        if any(e.primitive.name.startswith("arg") and tuple(e.params["axes"]) != axes
               for e in reds):   # arg indices count over the reduced axes in their order
            raise NotFusible("argmax / argmin over unsorted axes")
        if any(tuple(sorted(e.params["axes"])) != axes or
               tuple(e.invars[0].aval.shape) != shape for e in reds):
            raise NotFusible("reductions over different axes")
    else:
        shapes = {tuple(v.aval.shape) for v in program.outvars}
        if len(shapes) != 1:
            raise NotFusible(f"outputs of several shapes {sorted(shapes)}")
        shape, axes = next(iter(shapes)), ()
    if any(not isinstance(d, int) for d in shape):
        raise NotFusible(f"symbolic shape {shape}")
    nd = len(shape)
    kept = [d for d in range(nd) if d not in axes]
    ins = list(program.constvars) + list(program.invars)
    if reds:
        nr = math.prod(shape[d] for d in axes)
        nk = math.prod(shape[d] for d in kept)
        # lane l of a program: kept position pid * (BLOCK // RB) + l // RB, reduced positions
        # l % RB, l % RB + RB, ... (distinct names: a variable the loop assigns keeps one type)
        lines = ["    lane = tl.arange(0, BLOCK).to(tl.int64)",
                 "    kpos = tl.program_id(0).to(tl.int64) * (BLOCK // RB) + lane // RB",
                 f"    kmask = kpos < {nk}", "    krem = kpos"]
        lines += _unravel(kept, shape, "krem", "    ")
        loop = [f"    for r0 in range(0, {nr}, RB):",
                "        offs = r0 + lane % RB",
                f"        mask = kmask & (offs < {nr})",
                "        rem = offs"] + _unravel(axes, shape, "rem", "        ")
        lin = " + ".join(f"i{d} * {math.prod(shape[d + 1:])}" for d in range(nd)) or "0"
        loop.append(f"        lin = {lin} + offs * 0")   # a block even for a rank-0 loop
        ind = "        "
    else:
        lines = ["    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
                 "    mask = offs < n", "    rem = offs"]
        lines += _unravel(range(nd), shape, "rem", "    ")
        loop, ind = [], "    "
    env, params = {}, []
    for i, v in enumerate(ins):
        loop.append(ind + load(i, v, nd, env, params))
    after, red_out = [], {}
    for k, eqn in enumerate(program.eqns):
        args, dts = operands(eqn, env)
        out = eqn.outvars[0]
        if eqn.primitive.name in REDUCTIONS:
            init, update, final = _reduction(eqn.primitive.name, f"acc{k}", args[0], dts[0],
                                             np.dtype(out.aval.dtype))
            lines += init
            loop += [ind + u for u in update]
            after += final
            red_out[out] = f"r{k}"
            continue
        loop.append(ind + elementwise(k, eqn, args, dts, shape, env))
    where = "lin" if reds else "offs"
    if reds:
        after.insert(0, "    kout = tl.program_id(0).to(tl.int64) * (BLOCK // RB) + "
                        "tl.arange(0, BLOCK // RB)")
    for j, v in enumerate(program.outvars):
        if v in red_out:
            after.append(f"    tl.store(out{j} + kout, {red_out[v]}, mask=kout < {nk})")
            continue
        loop.append(f"{ind}tl.store(out{j} + {where}, {value(v, env)}, mask=mask)")
    outs = list(program.outvars)
    src = module(name, len(ins), len(outs), params, ["RB"] if reds else [],
                 lines + loop + after)
    return Kernel(src, name, shape, [v.aval for v in ins], [v.aval for v in outs],
                  kept=nk if reds else None, reduced=nr if reds else None)


def load(i, v, nd, env, params, lanes=None):
    """The line loading input ``i`` (Var ``v``, right-aligned on a loop of rank ``nd``, indices
    ``i<d>``, element strides ``s<i>_<d>`` appended to ``params``) as block ``x<i>``. ``lanes``:
    the dims whose index varies across a block's lanes (default all); an input indexed by none
    of them (a bias beside a reduction over other dims) is read as a block all the same."""
    dt = v.aval.dtype
    if not F.supported_dtype(dt):
        raise NotFusible(f"input dtype {dt}")
    r = len(v.aval.shape)
    if r > nd:
        raise NotFusible(f"input of rank {r} in a loop of rank {nd}")
    index = " + ".join(f"i{nd - r + d} * s{i}_{d}" for d in range(r)) or "0"
    if not any(nd - r + d in (range(nd) if lanes is None else lanes) for d in range(r)):
        index = f"{index} + offs * 0"
    env[v] = (f"x{i}", dt)
    params += [f"s{i}_{d}" for d in range(r)]
    return f"x{i} = tl.load(in{i} + ({index}), mask=mask)"


def operands(eqn, env, literal=F.literal):
    """(expressions, dtypes) of ``eqn``'s operands: ``env[var][0]``, or ``literal(value,
    dtype)`` for literals (Triton's by default; the CUTLASS renderer passes its own)."""
    args, dts = [], []
    for a in eqn.invars:
        if isinstance(a, Literal):
            args.append(literal(np.asarray(a.val).item(), a.aval.dtype))
        else:
            args.append(env[a][0])
        dts.append(np.dtype(a.aval.dtype))
    return args, dts


def elementwise(k, eqn, args, dts, shape, env):
    """The line computing elementwise ``eqn`` (the k-th) as block ``v<k>``."""
    out = eqn.outvars[0]
    if len(eqn.outvars) != 1 or tuple(out.aval.shape) != tuple(shape):
        raise NotFusible(f"{eqn.primitive.name} (not elementwise over {shape})")
    expr = F.render(eqn.primitive, args, dts, out.aval.dtype, eqn.params)
    if expr is None:
        raise NotFusible(f"{eqn.primitive.name} on {[str(d) for d in dts]}")
    env[out] = (f"v{k}", np.dtype(out.aval.dtype))
    return f"v{k} = {expr}"


def value(v, env):
    """The block of output ``v``."""
    if isinstance(v, Literal):
        return F.literal(np.asarray(v.val).item(), v.aval.dtype)
    return env[v][0]


def module(name, nin, nout, params, constexprs, body):
    """The source of a kernel module: function ``name(in0.., out0.., n, *params, BLOCK,
    *constexprs)`` with ``body`` (lines)."""
    args = [f"in{i}" for i in range(nin)] + [f"out{j}" for j in range(nout)] + ["n"] + \
        list(params) + ["BLOCK: tl.constexpr"] + [f"{c}: tl.constexpr" for c in constexprs]
    return ("# Generated by Starling (src/lowering/backends/triton/)\n"
            "import triton\nimport triton.language as tl\n\nM = None   # device_math, set on load\n"
            + F.HELPERS + f"\n\ndef {name}({', '.join(args)}):\n" + "\n".join(body) + "\n")


def _pow2(n):
    """The smallest power of two >= ``n`` (1 for n <= 1)."""
    return 1 << max(0, (int(n) - 1).bit_length())


def _unravel(dims, shape, rem, ind):
    """Index variables ``i<d>`` of the C-order position ``rem`` over ``dims`` of ``shape``."""
    dims = list(dims)
    out = []
    for j in range(len(dims) - 1, -1, -1):
        d = dims[j]
        if j:
            out += [f"{ind}i{d} = {rem} % {shape[d]}", f"{ind}{rem} = {rem} // {shape[d]}"]
        else:
            out.append(f"{ind}i{d} = {rem}")
    return out


# Block reductions are written as tl.reduce with the standard library's combine functions (what
# tl.sum / tl.max / tl.min do): Triton's interpreter recognises those and reduces with NumPy,
# and calling tl.sum itself from an interpreted kernel fails unless TRITON_INTERPRET was set
# before triton was first imported.
_MAX, _MIN = "tl.standard._elementwise_max", "tl.standard._elementwise_min"


def _rows(block):
    """``block`` (a program's lanes) as one row of ``RB`` lanes per kept position."""
    return f"tl.reshape({block}, [BLOCK // RB, RB])"


def _reduction(name, acc, x, dt, out):
    """(lines before the loop, lines in it, lines after it) of one reduction of block ``x``
    (dtype ``dt``) into ``r<k>`` of dtype ``out``. float16 / bfloat16 accumulate in float32."""
    k = acc[3:]
    wide = np.dtype(np.float32) if dt in F.LOWP else dt
    xv = F.render_cast(x, dt, wide) if wide != dt else x
    if name in ("argmax", "argmin"):
        return _arg_reduction(name, acc, k, xv, wide)
    if name in _MONOIDS:   # sum / prod: identity, operator, combine of a row's lanes
        if wide.kind not in "iuf":
            raise NotFusible(f"{name} of {dt}")
        unit, op, combine = _MONOIDS[name]
        init = [f"    {acc} = {F.literal(unit, wide)}"]
        upd = [f"{acc} = {acc} {op} tl.where(mask, {xv}, {F.literal(unit, wide)})"]
        fin = [f"    r{k} = tl.reduce({_rows(acc)}, 1, {combine})"]
    elif name in ("reduce_max", "reduce_min"):
        big = name == "reduce_max"
        cmp = ">" if big else "<"
        if wide.kind == "f":
            ident = F.literal(-np.inf if big else np.inf, wide)
        elif wide.kind == "b":
            ident = F.literal(not big, wide)
        else:
            info = np.iinfo(wide)
            ident = F.literal(info.min if big else info.max, wide)
        init = [f"    {acc} = {ident}"]
        upd = [f"{acc} = tl.where(mask & ({xv} {cmp} {acc}), {xv}, {acc})"]
        red = _MAX if big else _MIN
        fin = [f"    r{k} = tl.reduce({_rows(acc)}, 1, {red})" if wide.kind != "b" else
               f"    r{k} = tl.reduce({_rows(acc + '.to(tl.int32)')}, 1, {red}) != 0"]
        if wide.kind == "f":   # NumPy's max / min propagate NaN
            init.append(f"    nan{k} = tl.full([BLOCK], 0, tl.int32)")
            upd.append(f"nan{k} = nan{k} | (mask & ({xv} != {xv})).to(tl.int32)")
            fin.append(f"    r{k} = tl.where(tl.reduce({_rows(f'nan{k}')}, 1, {_MAX}) != 0, "
                       f"{F.literal(np.nan, wide, block=False)}, r{k})")
    elif name in ("reduce_and", "reduce_or"):
        if wide.kind != "b":
            raise NotFusible(f"{name} of {dt}")
        if name == "reduce_and":
            init = [f"    {acc} = {F.literal(True, wide)}"]
            upd = [f"{acc} = {acc} & (({xv}) | (mask == 0))"]
            fin = [f"    r{k} = tl.reduce({_rows(acc + '.to(tl.int32)')}, 1, {_MIN}) != 0"]
        else:
            init = [f"    {acc} = {F.literal(False, wide)}"]
            upd = [f"{acc} = {acc} | (({xv}) & mask)"]
            fin = [f"    r{k} = tl.reduce({_rows(acc + '.to(tl.int32)')}, 1, {_MAX}) != 0"]
    else:
        raise NotFusible(name)
    if np.dtype(out) != wide:
        fin.append(f"    r{k} = {F.render_cast(f'r{k}', wide, out)}")
    return init, upd, fin


def _arg_reduction(name, acc, k, xv, wide):
    """argmax / argmin of block ``xv`` (``wide`` dtype): per lane the best value and its index
    (the first NaN wins, then the greatest / least value, ties to the first index), combined
    across a row's lanes by st_argmax_combine / st_argmin_combine."""
    if wide.kind not in "iuf":
        raise NotFusible(f"{name} of {wide}")
    big = name == "argmax"
    cmp = ">" if big else "<"
    if wide.kind == "f":
        ident = F.literal(-np.inf if big else np.inf, wide)
        better = f"({xv} {cmp} {acc}) | (({xv} != {xv}) & ({acc} == {acc}))"
    else:
        info = np.iinfo(wide)
        ident = F.literal(info.min if big else info.max, wide)
        better = f"({xv} {cmp} {acc})"
    idx = f"idx{k}"
    init = [f"    {acc} = {ident}", f"    {idx} = tl.full([BLOCK], {_ARG_SENTINEL}, tl.int64)"]
    upd = [f"take{k} = mask & (({better}) | ({idx} == {_ARG_SENTINEL}))",
           f"{acc} = tl.where(take{k}, {xv}, {acc})",
           f"{idx} = tl.where(take{k}, offs, {idx})"]
    fin = [f"    _, r{k} = tl.reduce(({_rows(acc)}, {_rows(idx)}), 1, st_{name}_combine)"]
    return init, upd, fin


def _load(source, name, interpret):
    import triton
    from . import device_math
    key = hashlib.sha256(source.encode()).hexdigest()[:24]
    d = os.path.join(cache.cache_dir(), "triton")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"st_{key}.py")
    if not os.path.exists(path):
        cache._atomic_write(path, source.encode())
    # a module of its own per use: M differs between the interpreter and the GPU
    spec = importlib.util.spec_from_file_location(f"starling_triton_{key}_{int(interpret)}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.M = device_math.interpreter_module() if interpret else device_math.gpu_module()
    if interpret:
        from triton.runtime.interpreter import InterpretedFunction as wrap
    else:
        wrap = triton.runtime.jit.JITFunction
    for helper in F.HELPER_NAMES:   # device functions the kernel calls by their global names
        setattr(mod, helper, wrap(getattr(mod, helper)))
    return wrap(getattr(mod, name))
