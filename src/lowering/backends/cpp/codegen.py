"""C++ code generation for one ``fused_kernel`` sub-Program (cpp backend).

A kernel is a loop nest over the group's loop shape L. Every operand is an *access*: a buffer
read (or written) at ``offset + sum(index[d] * stride[d])`` -- a group input of any shape that
broadcasts to L (stride 0 along broadcast dims), possibly through views (broadcast_in_dim,
reshape, squeeze, transpose, real / imag of a complex buffer) that only change strides. Values
computed in the kernel live in registers; group outputs are L-shaped stores or reductions.

Loop structure, after dropping size-1 dims and merging adjacent dims that every access walks
contiguously (so most kernels become one flat loop, or rows x columns with a bias):

* no reduction: chunks of one flat dim on the pool, or of the flattened outer dims (split into
  blocks of the inner dim when the outer dims are few) with an inner ``simd`` loop;
* reduction over the trailing dims (O, R): accumulators per outer point, inner ``simd
  reduction``; parallel over O, or over R when O is small (full reductions: chunks of R
  accumulate partials, combined in chunk order, so results do not depend on the threads);
* reduction over leading / middle dims (O, R, I): per block of the innermost kept dim, an
  accumulator array updated by a ``simd`` loop for every reduced index (column sums);
* reduced dims that are not adjacent (sums over N, H, W of NCHW): the kept dims between them
  loop outside (``_loop_order``), which gives one of the structures above;
* argmax / argmin (reductions.py): as the others, but the reduced range runs in order
  (no partials combined over it, no ``simd`` on a row reduction's loop).

Parallelism (``st_par``: chunks on Starling's thread pool, native/pool.cpp) is switched on only
when the estimated work (elements x cost units) exceeds ``PARALLEL_WORK`` (env
``STARLING_CPP_PARALLEL_WORK``, default 2**18): waking threads costs microseconds. float32 sums
and products accumulate in double.

Under dynamic shapes sizes and strides may be symbolic (DimExprs): the kernel reads its shape
variables from the launcher's sizes array and the same structures are emitted with C expressions
(``c_dim``) for bounds and strides; the parallel decision, the blocking and the "few outer
points" choice of row reductions become run-time branches unless the variables' ranges decide
them. Static kernels are generated exactly as without dynamic shapes.
"""
from __future__ import annotations

import importlib

import math
import os

import numpy as np

from . import formulas as F
from .columns import ColumnReductions
from .reductions import MAX_PARTS, MIN_UNITS, RED_CHUNK, Red
from .dims import DIM_HELPERS, c_dim, dim_vars, same_dim  # noqa: F401  (re-exported)
from .dims import is_static as _static, maybe_nonzero as _maybe_nonzero
from .dims import same_shape as _same_shape, sym_expr as _sym_expr

PARALLEL_WORK = int(os.environ.get("STARLING_CPP_PARALLEL_WORK", 1 << 18))
CHUNK_WORK = int(os.environ.get("STARLING_CPP_CHUNK_WORK", 1 << 16))
_EXPENSIVE = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
              "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
              "arctanh", "cbrt", "arctan2", "hypot", "pow", "logaddexp", "logaddexp2", "fmod",
              "floor_divide", "remainder", "nextafter", "spacing", "round", "erf", "erfc"}
_VIEWS = {"broadcast_in_dim", "reshape", "squeeze", "transpose"}
_REDUCE = {"reduce_sum": "sum", "reduce_prod": "prod", "reduce_max": "max", "reduce_min": "min",
           "reduce_and": "and", "reduce_or": "or", "argmax": "argmax", "argmin": "argmin"}


class NotFusible(Exception):
    """The sub-Program cannot be rendered as one kernel (the pass then leaves it unfused)."""


def c_strides(shape, scale=1):
    """Row-major (C-order) strides of ``shape`` (ints or symbolic dims), in elements times
    ``scale``: the last dim has stride ``scale``."""
    out, acc = [], scale
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


class Access:
    """A strided view of buffer ``buf``: element type ``dt`` (np.dtype), ``shape``, ``strides``
    (in elements of ``dt``), ``offset``; ``complex_base`` marks an unsplit complex buffer."""

    __slots__ = ("buf", "dt", "shape", "strides", "offset", "complex_base", "loop_strides", "id")

    def __init__(self, buf, dt, shape, strides, offset=0, complex_base=False):
        self.buf, self.dt, self.shape = buf, np.dtype(dt), tuple(shape)
        self.strides, self.offset, self.complex_base = tuple(strides), offset, complex_base
        self.loop_strides = None
        self.id = None


def _contiguous(acc):
    scale = 2 if acc.complex_base else 1
    if _same_shape(acc.strides, c_strides(acc.shape, scale)):
        return True
    n = math.prod(acc.shape)
    return _static(n) and n <= 1


def apply_view(acc, eqn):
    """The Access of ``eqn`` (a view primitive) applied to ``acc``; raises NotFusible.
    Views of an interleaved complex buffer stay complex until ``real`` / ``imag`` picks a part."""
    name, p = eqn.primitive.name, eqn.params
    out_shape = tuple(eqn.outvars[0].aval.shape)
    cb = acc.complex_base
    if name in ("real", "imag"):
        if not cb:
            raise NotFusible(f"{name} of a real buffer is not a view")
        real_dt = np.dtype(eqn.outvars[0].aval.dtype)
        return Access(acc.buf, real_dt, acc.shape, acc.strides,
                      acc.offset + (1 if name == "imag" else 0))
    if name == "reshape":
        if not _contiguous(acc):
            strides = reshape_strides(acc.shape, acc.strides, out_shape)
            if strides is None:
                raise NotFusible("reshape of a strided view")
            return Access(acc.buf, acc.dt, out_shape, strides, acc.offset, cb)
        return Access(acc.buf, acc.dt, out_shape, c_strides(out_shape, 2 if cb else 1),
                      acc.offset, cb)
    if name == "slice":
        step = p["strides"] or (1,) * len(acc.shape)
        if not all(_static(x) for x in (*acc.strides, acc.offset)):
            raise NotFusible("slice of a symbolic view")
        offset = acc.offset + sum(int(b) * s for b, s in zip(p["start_indices"], acc.strides))
        return Access(acc.buf, acc.dt, out_shape,
                      [s * int(k) for s, k in zip(acc.strides, step)], offset, cb)
    if name == "squeeze":
        dims = {d % max(len(acc.shape), 1) for d in p["dimensions"]}
        keep = [i for i in range(len(acc.shape)) if i not in dims]
        return Access(acc.buf, acc.dt, out_shape, [acc.strides[i] for i in keep], acc.offset, cb)
    if name == "transpose":
        perm = p["permutation"]
        return Access(acc.buf, acc.dt, out_shape, [acc.strides[i] for i in perm], acc.offset, cb)
    if name == "broadcast_in_dim":
        strides = [0] * len(out_shape)
        for i, d in enumerate(p["broadcast_dimensions"]):
            if same_dim(acc.shape[i], out_shape[d]):
                strides[d] = acc.strides[i]
            elif not (_static(acc.shape[i]) and acc.shape[i] == 1):
                raise NotFusible(f"broadcast of dim {acc.shape[i]} to {out_shape[d]}")
        return Access(acc.buf, acc.dt, out_shape, strides, acc.offset, cb)
    raise NotFusible(name)


def reshape_strides(shape, strides, new_shape):
    """Strides that view memory laid out as (``shape``, ``strides``) as ``new_shape`` without a
    copy, or None when there are none (NumPy's no-copy reshape rule: each group of old dims
    that multiplies to a group of new dims must itself be contiguous). Static shapes only."""
    if not all(_static(x) for x in (*shape, *strides, *new_shape)):
        return None
    shape, strides, new_shape = ([int(x) for x in t] for t in (shape, strides, new_shape))
    if math.prod(new_shape) == 0:
        return c_strides(new_shape)
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    new = [i for i, n in enumerate(new_shape) if n != 1]
    out = [0] * len(new_shape)
    i = j = 0
    while i < len(old) and j < len(new):
        i1, j1 = i + 1, j + 1
        po, pn = old[i][0], new_shape[new[j]]
        while po != pn:
            if po < pn:
                if i1 == len(old):
                    return None
                po *= old[i1][0]
                i1 += 1
            else:
                if j1 == len(new):
                    return None
                pn *= new_shape[new[j1]]
                j1 += 1
        for k in range(i, i1 - 1):   # the old group must be contiguous in itself
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        st = old[i1 - 1][1]
        for k in range(j1 - 1, j - 1, -1):
            out[new[k]] = st
            st *= new_shape[new[k]]
        i, j = i1, j1
    return tuple(out) if i == len(old) and j == len(new) else None


def broadcast_strides(acc, loop):
    """Strides of ``acc`` over loop shape ``loop`` (right-aligned NumPy broadcasting)."""
    nd = len(loop)
    if len(acc.shape) > nd:
        raise NotFusible(f"operand of shape {acc.shape} does not broadcast to {loop}")
    pad = nd - len(acc.shape)
    out = [0] * pad
    for i, (s, st) in enumerate(zip(acc.shape, acc.strides)):
        L = loop[pad + i]
        if same_dim(s, L):
            # a symbolic L may be 1 at run time: the stride is then multiplied by index 0
            out.append(0 if (_static(L) and L == 1) else st)
        elif _static(s) and s == 1:
            out.append(0)
        else:
            raise NotFusible(f"operand of shape {acc.shape} does not broadcast to {loop}")
    return out


def lone_equation(sub, row_block, supported, what):
    """The one equation of ``sub``, a group that is a kernel of its own (fusion kind SINGLE:
    gather / scatter, concatenate) reading only the group's inputs and writing its outputs;
    NotFusible (naming ``what``) when it is not that or ``supported(eqn)`` refuses it."""
    if row_block is not None or len(sub.eqns) != 1 or not supported(sub.eqns[0]):
        raise NotFusible(f"not a lone static {what}")
    eqn = sub.eqns[0]
    if list(eqn.outvars) != list(sub.outvars) or not all(v in sub.invars for v in eqn.invars):
        raise NotFusible(f"{what} kernel with other inputs or outputs")
    return eqn


class Kernel:
    """A rendered kernel: ``source`` (one extern "C" function ``name(void* const* args)``, the
    launcher ABI of runtime.py), ``in_dtypes`` (NumPy dtype each input buffer must have),
    ``out_avals``, ``work`` (an upper bound under dynamic shapes), ``size_exprs``: the kernel's
    size parameters (sympy expressions; () for a static kernel): its shape variables, whose
    values it reads from the sizes array, then the other symbolic output dims (for the
    launcher's output allocation)."""

    def __init__(self, name, source, in_dtypes, out_avals, work, parallel):
        self.name, self.source = name, source
        self.in_dtypes, self.out_avals = in_dtypes, out_avals
        self.work, self.parallel = work, parallel
        self.size_exprs = ()


# Primitives run as kernels of their own (fusion kind SINGLE) -> the module rendering them
# (each has ``supported(eqn)`` and ``render(sub, fname, row_block)``).
_SINGLE = {"gather": "indexing", "scatter": "indexing", "concatenate": "concatenate"}


def single_kernel_module(name):
    """The module rendering primitive ``name`` as a kernel of its own, or None."""
    mod = _SINGLE.get(name)
    return None if mod is None else importlib.import_module(f".{mod}", __package__)


def render_kernel(sub, fname, row_block=None) -> Kernel:
    """Renders the fused sub-Program ``sub`` as the C++ function ``fname``; raises NotFusible.
    With ``row_block`` (gemm.RowBlock) it is a GEMM epilogue over one block of rows.
    A lone gather / scatter / concatenate is rendered by its own module (``_SINGLE``)."""
    if len(sub.eqns) == 1 and sub.eqns[0].primitive.name in _SINGLE:
        return single_kernel_module(sub.eqns[0].primitive.name).render(sub, fname, row_block)
    b = _KernelBuilder(sub, fname)
    b.row_block = row_block
    return b.build()


class _KernelBuilder:
    def __init__(self, sub, fname):
        self.sub, self.fname = sub, fname
        self.accesses = []     # reads
        self.stores = []       # (Access, value expr, ctype)
        self.reds = []
        self.stmts = []        # body lines; leaf loads are "{L<id>}" placeholders
        self.cost = 0
        self.n = 0

    def _access(self, acc):
        acc.id = len(self.accesses) + len(self.stores)
        self.accesses.append(acc)
        return acc

    def build(self):
        sub = self.sub
        from ....core.ir import Literal
        env = {}
        in_dtypes = []
        for i, v in enumerate(sub.invars):
            dt = np.dtype(v.aval.dtype)
            shape = tuple(v.aval.shape)
            in_dtypes.append(dt)
            if dt.kind == "c":
                real = np.dtype(np.float32 if dt == np.complex64 else np.float64)
                env[v] = ("leaf", Access(i, real, shape, c_strides(shape, 2), 0, True))
            elif F.supported_dtype(dt):
                env[v] = ("leaf", Access(i, dt, shape, c_strides(shape)))
            else:
                raise NotFusible(f"input dtype {dt}")
        loop = self._loop_shape()
        self.loop = loop

        def operand(v):
            if isinstance(v, Literal):
                return F.literal(v.val, v.aval.dtype), np.dtype(v.aval.dtype)
            kind, x = env[v]
            if kind == "leaf":
                if x.complex_base:
                    raise NotFusible("complex value used without real/imag split")
                if x.id is None:
                    x.loop_strides = broadcast_strides(x, loop)
                    self._access(x)
                return "{L%d}" % x.id, x.dt
            if kind == "expr":
                return x
            raise NotFusible("a reduced value is used inside its own kernel")

        for eqn in sub.eqns:
            name = eqn.primitive.name
            out = eqn.outvars[0]
            src = eqn.invars[0] if eqn.invars else None
            src_leaf = (src is not None and not isinstance(src, Literal)
                        and env[src][0] == "leaf")
            if name in _VIEWS or (name in ("real", "imag") and src_leaf
                                  and env[src][1].complex_base):
                if not src_leaf:
                    raise NotFusible(f"{name} of a computed value")
                env[out] = ("leaf", apply_view(env[src][1], eqn))
                continue
            if name in _REDUCE:
                x, dt = operand(eqn.invars[0])
                red = Red(_REDUCE[name], dt, f"acc{len(self.reds)}")
                red.value = x
                self.reds.append((red, tuple(sorted(eqn.params["axes"])), out))
                env[out] = ("reduced", red)
                self.cost += 1
                continue
            if name == "complex_pack":
                (re, rdt), (im, _) = operand(eqn.invars[0]), operand(eqn.invars[1])
                env[out] = ("pack", (re, im, rdt))
                continue
            if eqn.primitive.scalar_formula is None or eqn.primitive.multiple_results:
                raise NotFusible(name)
            args, dts = zip(*[operand(v) for v in eqn.invars]) if eqn.invars else ((), ())
            expr = F.render(eqn.primitive, list(args), list(dts), out.aval.dtype, eqn.params)
            if expr is None:
                raise NotFusible(f"{name} on {[str(d) for d in dts]}")
            t = F.ctype(out.aval.dtype)
            vn = f"v{self.n}"
            self.n += 1
            self.stmts.append(f"const {t} {vn} = ({t})({expr});")
            env[out] = ("expr", (vn, np.dtype(out.aval.dtype)))
            self.cost += 16 if name in _EXPENSIVE else (4 if name in ("divide", "sqrt") else 1)
        return self._finish(env)

    def _loop_shape(self):
        from ...passes.fusion import REDUCE_PRIMITIVES
        shapes = []
        for eqn in self.sub.eqns:
            name = eqn.primitive.name
            if name in REDUCE_PRIMITIVES:
                shapes.append(tuple(eqn.invars[0].aval.shape))
            elif name not in _VIEWS and name not in ("real", "imag"):
                shapes.append(tuple(eqn.outvars[0].aval.shape))
            elif name in ("real", "imag") and eqn.invars[0].aval.dtype.kind != "c":
                shapes.append(tuple(eqn.outvars[0].aval.shape))
        if not shapes:
            raise NotFusible("no computation")
        nd = max(len(s) for s in shapes)
        loop = [1] * nd
        for s in shapes:
            for i, d in enumerate(s):
                j = nd - len(s) + i
                if not (_static(d) and d == 1):
                    if not ((_static(loop[j]) and loop[j] == 1) or same_dim(loop[j], d)):
                        raise NotFusible("inconsistent shapes")
                    loop[j] = d
        return tuple(loop)

    def _finish(self, env):
        from ....core.ir import Literal
        loop = self.loop
        nd = len(loop)
        axes = None
        out_avals = []
        nin = len(self.sub.invars)
        for j, v in enumerate(self.sub.outvars):
            if isinstance(v, Literal) or v not in env:
                raise NotFusible("output is not computed by the kernel")
            kind, x = env[v]
            out_avals.append(v.aval)
            shape = tuple(v.aval.shape)
            buf = nin + j
            if kind == "expr":
                if not _same_shape(shape, loop):
                    raise NotFusible(f"output of shape {shape} in a loop over {loop}")
                acc = Access(buf, x[1], shape, c_strides(shape))
                acc.loop_strides = list(c_strides(shape))
                self.stores.append((acc, x[0]))
            elif kind == "pack":
                re, im, rdt = x
                if not _same_shape(shape, loop):
                    raise NotFusible(f"output of shape {shape} in a loop over {loop}")
                for part, off in ((re, 0), (im, 1)):
                    acc = Access(buf, rdt, shape, c_strides(shape, 2), off)
                    acc.loop_strides = list(c_strides(shape, 2))
                    self.stores.append((acc, part))
            elif kind == "reduced":
                red = x
                r_axes = next(a for r, a, o in self.reds if r is red)
                r_axes = tuple(a % nd for a in r_axes) if nd else ()
                if axes is None:
                    axes = r_axes
                elif axes != r_axes:
                    raise NotFusible("reductions over different axes")
                kept = [i for i in range(nd) if i not in r_axes]
                st = c_strides(tuple(loop[i] for i in kept))
                strides = [0] * nd
                for i, s in zip(kept, st):
                    strides[i] = s
                acc = Access(buf, red.out_dt, shape, ())
                acc.loop_strides = strides
                red.out_acc = acc
            else:
                raise NotFusible("output is an input view")
        for red, a, _ in self.reds:
            a = tuple(x % nd for x in a) if nd else ()
            if axes is None:
                axes = a
            if a != axes:
                raise NotFusible("reductions over different axes")
        reds = [r for r, _, _ in self.reds if r.out_acc is not None]
        return _emit(self, loop, set(axes or ()), reds, in_dtypes=[
            np.dtype(v.aval.dtype) for v in self.sub.invars], out_avals=out_avals)


# ---- loop structure and emission -----------------------------------------------------------------

def _loop_order(loop, red_axes):
    """The loop dims in nesting order: as given, except that kept dims lying between reduced
    ones move in front of the first reduced dim, so the reduced dims are adjacent (e.g. the
    per-channel sums over (N, H, W) of an NCHW array loop as C, N, H, W). Every access is
    strided, so any order is valid; the reduced dims keep their order (argmax's flat index)."""
    red = sorted(d for d in red_axes if not (_static(loop[d]) and loop[d] == 1))
    if not red:
        return list(range(len(loop)))
    between = [d for d in range(red[0], red[-1]) if d not in red_axes]
    return [d for d in range(red[0]) if d not in red_axes] + between + \
        [d for d in range(red[0], len(loop)) if d not in between]


def _merge_dims(loop, red_axes, accs, order=None):
    """[(size, reduced, {access index: stride})] over the dims in ``order`` (default: loop
    order) after dropping size-1 dims and merging dims every access walks contiguously.
    Symbolic sizes are never dropped (they may be 1 or more at run time) and merge only on
    stride identities that hold for every size."""
    dims = []
    for d in (range(len(loop)) if order is None else order):
        size = loop[d]
        if _static(size) and size == 1:
            continue
        dims.append([size, d in red_axes, [a.loop_strides[d] for a in accs]])
    merged = []
    for dim in dims:
        if merged:
            prev = merged[-1]
            if prev[1] == dim[1] and all(same_dim(ps, s * dim[0])
                                         for ps, s in zip(prev[2], dim[2])):
                prev[0] *= dim[0]
                prev[2] = dim[2]
                continue
        merged.append(dim)
    return merged


def _emit(b, loop, red_axes, reds, in_dtypes, out_avals):
    reads = b.accesses
    stores = [s for s, _ in b.stores]
    red_outs = [r.out_acc for r in reds]
    accs = reads + stores + red_outs
    for i, a in enumerate(accs):
        a.id = i
    row = getattr(b, "row_block", None)   # a GEMM epilogue over a block of rows (gemm.py)
    if row is not None:
        loop, red_axes = row.restrict(loop, red_axes, accs)
    # a GEMM epilogue keeps its row dims outermost (the blocks are rows)
    dims = _merge_dims(loop, red_axes, accs, None if row is not None else
                       _loop_order(loop, red_axes))
    flags = [d[1] for d in dims]
    if True in flags:
        first = flags.index(True)
        last = len(flags) - 1 - flags[::-1].index(True)
        if not all(flags[first:last + 1]):
            raise NotFusible("reduced axes are not contiguous")
    total = math.prod(loop) if loop else 1
    work = total * max(b.cost, 1)
    svars = dim_vars(list(loop) + [d for v in b.sub.invars for d in v.aval.shape]
                     + [d for a in out_avals for d in a.shape])
    if svars:
        if row is not None:
            raise NotFusible("GEMM epilogue kernels need static sizes")
        return _emit_symbolic(b, dims, accs, reds, reads, work, svars, in_dtypes, out_avals)
    par = work >= PARALLEL_WORK and (row is None or row.parallel)
    e = _Emitter(b, dims, accs, reds, par, work=work, elems=total)
    lines = [f'extern "C" void {b.fname}(void* const* st_args{row.param if row else ""}) {{']
    for a in accs:
        t = F.ptr_ctype(a.dt)
        const = "const " if a in reads else ""
        lines.append(f"  {const}{t}* __restrict p{a.id} = ({const}{t}*)st_args[{a.buf}]"
                     f"{row.offset(a) if row else ''};")
    lines += ["  " + x for x in e.emit()]
    lines.append("}")
    return Kernel(b.fname, "\n".join(lines), in_dtypes, out_avals, work, par)


def _emit_symbolic(b, dims, accs, reds, reads, work, svars, in_dtypes, out_avals):
    """A kernel whose sizes are run-time values: ``szI`` = sizes[I] for the shape variables
    ``svars``. The parallel decision is taken at run time (from the work for these sizes)
    unless the variables' ranges decide it; each variant is the static structure with
    symbolic bounds and strides."""
    from ....core.symbolic import bounds
    names = {v: f"sz{i}" for i, v in enumerate(svars)}
    lo, hi = bounds(_sym_expr(work))
    variants = [True] if lo >= PARALLEL_WORK else ([False] if hi < PARALLEL_WORK
                                                    else [True, False])
    nbuf = len(in_dtypes) + len(out_avals)
    lines = [f'extern "C" void {b.fname}(void* const* st_args) {{']
    for a in accs:
        t = F.ptr_ctype(a.dt)
        const = "const " if a in reads else ""
        lines.append(f"  {const}{t}* __restrict p{a.id} = ({const}{t}*)st_args[{a.buf}];")
    lines.append(f"  const int64_t* __restrict st_sz = (const int64_t*)st_args[{nbuf}];")
    for i, (v, n) in enumerate(names.items()):
        lines.append(f"  const int64_t {n} = st_sz[{i}];  // {v}")
    saved = list(b.stores)   # an emitter may add stores (reductions over size-1 axes only)
    bodies = []
    for par in variants:
        b.stores[:] = saved
        bodies.append(_Emitter(b, dims, accs, reds, par, names, work=work,
                               elems=math.prod(dims[d][0] for d in range(len(dims)))).emit())
    if len(bodies) == 1:
        lines += ["  " + x for x in bodies[0]]
    else:
        lines.append(f"  if ({c_dim(work, names)} >= {PARALLEL_WORK}) {{")
        lines += ["    " + x for x in bodies[0]]
        lines.append("  } else {")
        lines += ["    " + x for x in bodies[1]]
        lines.append("  }")
    lines.append("}")
    size_exprs = list(svars)
    for a in out_avals:
        for d in a.shape:
            e = _sym_expr(d)
            if not _static(d) and e not in size_exprs:
                size_exprs.append(e)
    kernel = Kernel(b.fname, DIM_HELPERS + "\n".join(lines), in_dtypes, out_avals,
                    int(min(hi, 1 << 62)), variants[0])
    kernel.size_exprs = tuple(size_exprs)
    return kernel


class _Emitter(ColumnReductions):
    def __init__(self, b, dims, accs, reds, par, size_names=None, work=1, elems=1):
        self.b, self.dims, self.accs, self.reds, self.par = b, dims, accs, reds, par
        self.reads = b.accesses
        self.size_names = size_names    # shape variable -> C name (symbolic kernels)
        self.work = work                # the kernel's work (elements x cost), maybe symbolic
        self.elems = elems              # the loop's elements, maybe symbolic

    def c(self, x):
        """C expression of a size / stride (an int prints as itself)."""
        return c_dim(x, self.size_names)

    # -- helpers --
    def _base(self, a, idx):
        """Offset expression of access ``a`` for the outer index variables ``idx`` (dim -> var)."""
        terms = [str(a.offset)] if a.offset else []
        for d, var in idx.items():
            s = self.dims[d][2][a.id]
            if _maybe_nonzero(s):
                terms.append(f"{var} * {self.c(s)}")
        return " + ".join(terms) if terms else "0"

    def _bases(self, idx, accs):
        out = []
        for a in accs:
            t = F.ptr_ctype(a.dt)
            const = "const " if a in self.reads else ""
            out.append(f"{const}{t}* __restrict b{a.id} = p{a.id} + ({self._base(a, idx)});")
        return out

    def _elem(self, a, inner):
        if inner is None:
            return f"b{a.id}[0]"
        s = self.dims[inner][2][a.id]
        if not _static(s):
            return f"b{a.id}[k * {self.c(s)}]"
        return f"b{a.id}[k]" if s == 1 else (f"b{a.id}[0]" if s == 0 else f"b{a.id}[k * {s}]")

    def _body(self, inner, red_mode, red_index=None):
        """Innermost statements: loads, the computation, stores and reduction updates
        (``red_index``: C expression of the flat index over the reduced dims, for argmax)."""
        lines = []
        loads = {}
        for a in self.reads:
            loads["L%d" % a.id] = f"l{a.id}"
            elem = self._elem(a, inner)
            if a.dt.kind == "b":
                lines.append(f"const bool l{a.id} = ({elem} != 0);")
            else:   # low-precision floats widen to float here (lowp.py)
                lines.append(f"const {F.ctype(a.dt)} l{a.id} = {F.load_expr(a.dt, elem)};")
        for st in self.b.stmts:
            lines.append(st.format(**loads))
        for a, val in self.b.stores:
            lines.append(f"{self._elem(a, inner)} = {_stored(a, val.format(**loads))};")
        for r in self.reds:
            x = r.value.format(**loads)
            if red_mode == "array":
                lines.append(r.update_array(x, red_index))
            else:
                lines.append(r.update_scalar(x, red_index))
        return lines

    def _decompose(self, var, sizes, names):
        """Lines splitting flat index ``var`` into ``names`` over ``sizes`` (C order)."""
        lines = [f"int64_t q_ = {var};"] if len(sizes) > 1 else []
        if len(sizes) == 1:
            return [f"const int64_t {names[0]} = {var};"]
        for n, s in zip(reversed(names), reversed(sizes)):
            s = self.c(s)
            lines.append(f"const int64_t {n} = q_ % {s}; q_ /= {s};")
        return lines

    def _prod(self, sizes):
        """The product of ``sizes`` (ints, DimExprs, C expressions): an int when static."""
        if all(_static(x) or not isinstance(x, str) for x in sizes):
            return math.prod(sizes)
        return " * ".join(self.c(x) for x in sizes) or "1"

    def _grain(self, n, limit=None, outer=1, per=None):
        """Iterations per pool chunk of a parallel loop of ``n`` iterations, run ``outer`` times
        over the kernel: about CHUNK_WORK units of work each (``per``: (units in the kernel,
        units per chunk) instead), at most ``limit`` chunks; a C expression when sizes are
        symbolic."""
        total, chunk = per or (self.work, CHUNK_WORK)
        if _static(n) and _static(total) and _static(outer):
            g = max(1, -(-chunk * n * outer // max(int(total), 1)))
            if limit:
                g = max(g, -(-n // limit))
            return g
        g = f"st_grain({self.c(n)} * {self.c(outer)}, {self.c(total)}, {chunk})"
        return f"st_dim_max({g}, ({self.c(n)} + {limit - 1}) / {limit})" if limit else g

    def _loop(self, var, n, body, par=None):
        """``for var in [0, n)`` around ``body`` (lines): on the pool (``st_par``) when the
        kernel is parallel (or ``par``), else a plain loop."""
        if not (self.par if par is None else par):
            return [f"for (int64_t {var} = 0; {var} < {self.c(n)}; ++{var}) {{"] + \
                ["  " + x for x in body] + ["}"]
        g = self._grain(n)
        return [f"st_par({self.c(n)}, {self.c(g)}, [&](int64_t st_lo, int64_t st_hi) {{",
                f"  for (int64_t {var} = st_lo; {var} < st_hi; ++{var}) {{"] + \
            ["    " + x for x in body] + ["  }", "});"]

    # -- structures --
    def emit(self):
        dims = self.dims
        reds = self.reds
        red_dims = [i for i, d in enumerate(dims) if d[1]]
        if reds and not red_dims:
            # Reductions over size-1 axes only: each element is its own result.
            for r in reds:
                self.b.stores.append((r.out_acc, r.trivial()))
            self.reds = []
            return self._elementwise()
        if not reds:
            return self._elementwise()
        if red_dims[-1] == len(dims) - 1:
            return self._row_reduction(red_dims)
        return self._column_reduction(red_dims)

    def _store_reds(self, idx, final=True):
        lines = []
        for r in self.reds:
            a = r.out_acc
            lines.append(f"p{a.id}[{self._base(a, idx)}] = {_stored(a, r.final_scalar())};")
        return lines

    def _init_reds(self):
        return [line for r in self.reds for line in r.declare_scalar()]

    def _flat_index(self, red_dims, last=None):
        """C expression of the flat (C-order) index over the reduced dims ``red_dims`` from
        their loop variables ``i<d>`` (the last one's variable is ``last`` when given)."""
        expr = None
        for n, d in enumerate(red_dims):
            var = last if (last is not None and n == len(red_dims) - 1) else f"i{d}"
            expr = var if expr is None else f"({expr}) * {self.c(self.dims[d][0])} + {var}"
        return expr

    def _elementwise(self):
        dims = self.dims
        accs = self.accs
        red_mode = "scalar"
        if not dims:
            return ["{"] + self._bases({}, accs) + self._body(None, red_mode) + ["}"]
        if len(dims) == 1:
            K = dims[0][0]
            inner = ["#pragma omp simd", "for (int64_t k = k0; k < k1; ++k) {"] + \
                ["  " + x for x in self._body(0, red_mode)] + ["}"]
            if not self.par:
                return self._bases({}, accs) + [
                    "const int64_t k0 = 0;", f"const int64_t k1 = {self.c(K)};"] + inner
            return [f"st_par({self.c(K)}, {self.c(self._grain(K))}, "
                    "[&](int64_t k0, int64_t k1) {"] + \
                ["  " + x for x in self._bases({}, accs) + inner] + ["});"]
        inner = len(dims) - 1
        K = dims[inner][0]
        outer = list(range(inner))
        P = math.prod(dims[d][0] for d in outer)
        NB = 1
        lines = []
        if not (_static(P) and _static(K)):
            if self.par:   # blocks of the inner dim when the outer dims are few: at run time
                NB, BK = "st_nb", "st_bk"
                cP, cK = self.c(P), self.c(K)
                lines += [f"const int64_t st_nb = ({cP} < {MIN_UNITS} && {cK} >= 1024) ? "
                          f"st_dim_min(({cK} + 511) / 512, ({MIN_UNITS} + st_dim_max({cP}, 1)"
                          f" - 1) / st_dim_max({cP}, 1)) : 1;",
                          f"const int64_t st_bk = ({cK} + st_nb - 1) / st_nb;"]
        elif self.par and P < MIN_UNITS and K >= 1024:
            NB = min(-(-K // 512), -(-MIN_UNITS // max(P, 1)))
        if _static(NB):
            BK = -(-K // NB) if NB > 1 else K
        blocked = not _static(NB) or NB > 1
        names = [f"i{d}" for d in outer] + (["kb"] if blocked else [])
        sizes = [dims[d][0] for d in outer] + ([NB] if blocked else [])
        body = self._decompose("p_", sizes, names) if sizes else []
        idx = {d: f"i{d}" for d in outer}
        body += self._bases(idx, accs)
        if blocked:
            cB, cK = self.c(BK), self.c(K)
            body += [f"const int64_t k0 = kb * {cB};",
                     f"const int64_t k1 = k0 + {cB} < {cK} ? k0 + {cB} : {cK};"]
        else:
            body += ["const int64_t k0 = 0;", f"const int64_t k1 = {self.c(K)};"]
        body += ["#pragma omp simd", "for (int64_t k = k0; k < k1; ++k) {"]
        body += ["  " + x for x in self._body(inner, red_mode)] + ["}"]
        return lines + self._loop("p_", self._prod([P, NB]), body)

    def _row_reduction(self, red_dims, inside=None):
        """Reduced dims are the trailing ones: scalar accumulators per outer point. When the
        outer points are few and long (``inside``, see RED_CHUNK) the reduction itself is
        split: each chunk of the first reduced loop accumulates into its own partials,
        combined in chunk order; the chunks run on the pool when the kernel is parallel."""
        dims = self.dims
        outer = [d for d in range(len(dims)) if d < red_dims[0]]
        P = math.prod(dims[d][0] for d in outer)
        inner = len(dims) - 1
        reads_stores = self.reads + [s for s, _ in self.b.stores]
        clauses = " ".join(r.clause() for r in self.reds)
        ordered = not all(r.combinable for r in self.reds)   # argmax: one pass, in order
        if ordered:
            inside = False
        if inside is None and not (_static(P) and _static(self.elems)):
            # few outer points and enough elements (run-time sizes): split the reduction
            return ([f"if ({self.c(P)} < {2 * MIN_UNITS} && {self.c(self.elems)} >= "
                     f"{2 * RED_CHUNK} * {self.c(P)}) {{"]
                    + ["  " + x for x in self._row_reduction(red_dims, True)] + ["} else {"]
                    + ["  " + x for x in self._row_reduction(red_dims, False)] + ["}"])
        if inside is None:   # split the reduction itself (see RED_CHUNK): sizes decide
            inside = P < 2 * MIN_UNITS and self.elems >= 2 * RED_CHUNK * P
        body = self._decompose("p_", [dims[d][0] for d in outer], [f"i{d}" for d in outer]) \
            if outer else []
        body += self._init_reds()
        idx = {d: f"i{d}" for d in outer}
        loops = list(red_dims[:-1])   # nested loops over the reduced dims but the innermost
        K = dims[inner][0]
        if not inside:
            body += self._reduce_nest(loops, idx, reads_stores, clauses, "0", self.c(K), None,
                                      ordered=ordered)
            body += self._store_reds({d: f"i{d}" for d in outer})
            return self._loop("p_", P, body)
        first = loops[0] if loops else None
        n = dims[first][0] if loops else K
        chunk = self._init_reds()     # the chunk's own accumulators (shadowing the point's)
        chunk += self._reduce_nest(loops, idx, reads_stores, clauses, "st_lo", "st_hi", first,
                                   self.c(K))
        parts, combine = [], []
        for i, r in enumerate(self.reds):
            parts.append(f"{r.acc_t} st_part{i}[{MAX_PARTS}];")
            chunk.append(f"st_part{i}[st_lo / st_g] = {r.name};")
            combine.append("  " + r.combine(f"st_part{i}[st_c]"))
            if r.nanflag:
                parts.append(f"int st_pnan{i}[{MAX_PARTS}];")
                chunk.append(f"st_pnan{i}[st_lo / st_g] = {r.name}_nan;")
                combine.append(f"  {r.name}_nan |= st_pnan{i}[st_c];")
        cn = self.c(n)
        grain = self._grain(n, MAX_PARTS, P, per=(self.elems, RED_CHUNK))
        body += [f"const int64_t st_g = {self.c(grain)};"] + parts
        if self.par:
            body += [f"st_par({cn}, st_g, [&](int64_t st_lo, int64_t st_hi) {{"]
            body += ["  " + x for x in chunk] + ["});"]
        else:   # the same chunks, one after the other
            body += [f"for (int64_t st_lo = 0; st_lo < {cn}; st_lo += st_g) {{",
                     f"  const int64_t st_hi = st_lo + st_g < {cn} ? st_lo + st_g : {cn};"]
            body += ["  {"] + ["    " + x for x in chunk] + ["  }", "}"]
        body += [f"for (int64_t st_c = 0; st_c < ({cn} + st_g - 1) / st_g; ++st_c) {{"]
        body += combine + ["}"]
        body += self._store_reds({d: f"i{d}" for d in outer})
        return self._loop("p_", P, body, par=False)

    def _reduce_nest(self, loops, idx, accs, clauses, lo, hi, split, k_end=None, ordered=False):
        """The loops over the reduced dims ``loops`` (then the innermost ``k``) updating the
        scalar accumulators. The range ``[lo, hi)`` applies to reduced dim ``split`` (the first
        of ``loops``), or to ``k`` when ``split`` is None (then ``k_end`` is unused). ``ordered``
        (argmax / argmin): no SIMD reordering, and updates get the flat reduced index."""
        idx = dict(idx)
        nest = []
        depth = 0
        for d in loops:
            a, b = (lo, hi) if d == split else ("0", self.c(self.dims[d][0]))
            nest.append("  " * depth + f"for (int64_t i{d} = {a}; i{d} < {b}; ++i{d}) {{")
            idx[d] = f"i{d}"
            depth += 1
        ind = "  " * depth
        nest += [ind + x for x in self._bases(idx, accs)]
        k0, k1 = (lo, hi) if split is None else ("0", k_end)
        if not ordered:
            nest.append(ind + f"#pragma omp simd {clauses}")
        nest.append(ind + f"for (int64_t k = {k0}; k < {k1}; ++k) {{")
        inner = len(self.dims) - 1
        index = self._flat_index(loops + [inner], last="k") if ordered else None
        nest += [ind + "  " + x for x in self._body(inner, "scalar", index)]
        nest.append(ind + "}")
        for depth in range(len(loops) - 1, -1, -1):
            nest.append("  " * depth + "}")
        return nest


def _stored(acc, value):
    # bool as uint8_t; low-precision floats round to their format's bits (lowp.py)
    return F.store_expr(acc.dt, value)


def module_source(kernels) -> str:
    """The whole translation unit: prelude + every kernel."""
    return F.prelude() + "\n\n".join(k.source for k in kernels) + "\n"
