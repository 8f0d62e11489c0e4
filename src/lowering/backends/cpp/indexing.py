"""Native kernels of the indexing primitives ``gather`` and ``scatter`` (cpp backend).

The conventions are those of src/arrays/ops/gather_scatter.py: ``x`` of shape
``(d0, ..., d{k-1}, *rest)`` is indexed on its k leading axes by k integer arrays broadcasting to
``B``; ``gather`` gives ``out[b, r] = x[i0[b], ..., i{k-1}[b], r]`` of shape ``(*B, *rest)``,
``scatter`` returns a copy of ``x`` where each indexed block is combined with ``updates[b]``.

Each kernel runs alone (the fusion pass makes one ``fused_kernel`` of each such equation: kind
``SINGLE``), over static shapes. Per index point ``b`` (C order) every index is read in its own
dtype at its broadcast position and normalised as NumPy's implementation does: a uint64 value
beyond int64 stays out of bounds; mode "wrap" takes the Python modulo of the raw value; the
other modes add the dim to a negative value once, then "clip" / "promise_in_bounds" clamp and
"fill" / "drop" mark the point invalid.

* gather copies the ``rest`` block of ``R`` elements as bytes (any dtype, complex and
  low-precision floats included), or writes ``fill_value`` (its bytes in the dtype) for an
  invalid point; an indexed axis of size 0 gives all fill ("fill" / "drop") or zeros. Points
  run in parallel (chunks on the thread pool) when the kernel is large.
* scatter copies ``x`` into the output, then applies the updates in C order of ``B``, one
  point after the other: "set" keeps the last update of a repeated index and "add" /
  "multiply" / "min" / "max" accumulate every update in that order, which is what NumPy's
  ``ufunc.at`` computes, so the results are bit-identical (the combining formula is the cpp
  backend's elementwise formula of add / multiply / minimum / maximum for the dtype: float16 and
  bfloat16 round each step as NumPy and ml_dtypes do). Invalid points ("fill", "drop",
  "promise_in_bounds") are skipped. The sequential order is the semantics: no threads.

``render(sub, fname)`` returns the ``codegen.Kernel`` of a one-equation sub-Program, or
raises ``NotFusible`` (symbolic shapes, a combining formula the dtype lacks, e.g. complex add).
"""
from __future__ import annotations

import math

import numpy as np

from . import formulas as F
from .codegen import CHUNK_WORK, PARALLEL_WORK, Kernel, NotFusible, c_strides, lone_equation
from .dims import static_shape

PRIMITIVES = ("gather", "scatter")
_COMBINE = {"add": "add", "multiply": "multiply", "min": "minimum", "max": "maximum"}


def supported(eqn) -> bool:
    """Whether ``eqn`` (a gather / scatter) can be a native kernel: static shapes, at least
    one index array."""
    if eqn.primitive.name not in PRIMITIVES:
        return False
    n_idx = len(eqn.invars) - (1 if eqn.primitive.name == "gather" else 2)
    avals = [v.aval for v in eqn.invars] + [v.aval for v in eqn.outvars]
    static = all(static_shape(a.shape) for a in avals)
    return n_idx >= 1 and static


def render(sub, fname, row_block=None) -> Kernel:
    """The kernel of the one-equation sub-Program ``sub`` (a gather or scatter)."""
    eqn = lone_equation(sub, row_block, supported, "gather / scatter")
    # the kernel's arguments are the group's inputs (a Var read twice is passed once)
    args = [sub.invars.index(v) for v in eqn.invars]
    in_dtypes = [np.dtype(v.aval.dtype) for v in sub.invars]
    if eqn.primitive.name == "gather":
        return _gather(eqn, fname, args, in_dtypes)
    return _scatter(eqn, fname, args, in_dtypes)


class _Plan:
    """Sizes and the index-normalising code shared by both kernels."""

    def __init__(self, eqn, x_aval, idx_avals, out_shape):
        self.x_shape = tuple(int(d) for d in x_aval.shape)
        self.k = len(idx_avals)
        self.lead = self.x_shape[:self.k]
        self.dt = np.dtype(x_aval.dtype)
        self.R = math.prod(self.x_shape[self.k:])
        self.B = tuple(int(d) for d in out_shape[:len(out_shape) - len(self.x_shape) + self.k])
        self.nB = math.prod(self.B)
        self.idx_dts = [np.dtype(a.dtype) for a in idx_avals]
        self.idx_strides = [_broadcast_strides(tuple(int(d) for d in a.shape), self.B)
                            for a in idx_avals]

    def index_lines(self, mode, idx_args):
        """C lines computing ``st_t`` (the flat offset of the indexed block in x, in blocks)
        and ``st_ok`` (false for an invalid point) for index point ``b``; index array j is
        kernel argument ``idx_args[j]``."""
        lines = ["int64_t q_ = b;"]
        coords = [f"c{d}" for d in range(len(self.B))]
        for d in range(len(self.B) - 1, -1, -1):
            lines.append(f"const int64_t {coords[d]} = q_ % {self.B[d]}; q_ /= {self.B[d]};")
        lines += ["int64_t st_t = 0;", "bool st_ok = true;"]
        lead_strides = c_strides(self.lead)
        for j, (dt, strides) in enumerate(zip(self.idx_dts, self.idx_strides)):
            d = self.lead[j]
            off = " + ".join(f"{c} * {s}" for c, s in zip(coords, strides) if s) or "0"
            raw = f"((const {F.ctype(dt)}*)st_args[{idx_args[j]}])[{off}]"
            if dt == np.uint64:   # beyond int64: stays out of bounds, never negative
                lines.append(f"int64_t v{j} = {raw} > (uint64_t)9223372036854775807ULL ? "
                             f"(int64_t)9223372036854775807LL : (int64_t){raw};")
            else:
                lines.append(f"int64_t v{j} = (int64_t){raw};")
            if mode == "wrap":
                lines.append(f"v{j} %= {d}; if (v{j} < 0) v{j} += {d};")
            else:
                lines.append(f"if (v{j} < 0) v{j} += {d};")
                if mode in ("fill", "drop"):
                    lines.append(f"if (v{j} < 0 || v{j} >= {d}) st_ok = false;")
                else:   # clip, promise_in_bounds: clamped
                    lines.append(f"v{j} = v{j} < 0 ? 0 : (v{j} >= {d} ? {d - 1} : v{j});")
            lines.append(f"st_t += v{j} * {lead_strides[j]};")
        return lines


def _broadcast_strides(shape, batch):
    """Element strides of a C-contiguous array of ``shape`` read at the points of ``batch``
    (NumPy broadcasting: right-aligned, 0 along broadcast dims)."""
    own = c_strides(shape)
    pad = len(batch) - len(shape)
    return [0] * pad + [0 if n == 1 and b != 1 else s
                        for n, b, s in zip(shape, batch[pad:], own)]


def _bytes_literal(value, dt):
    raw = np.asarray(value).astype(dt).tobytes()
    return "{" + ", ".join(str(b) for b in raw) + "}"


def _gather(eqn, fname, args, in_dtypes):
    x, *idx = eqn.invars
    out = eqn.outvars[0]
    p = _Plan(eqn, x.aval, [v.aval for v in idx], tuple(out.aval.shape))
    mode, fill = eqn.params["mode"], eqn.params["fill_value"]
    isz, nout = p.dt.itemsize, len(in_dtypes)
    block = p.R * isz
    filler = fill if mode in ("fill", "drop") else 0
    lines = [f'extern "C" void {fname}(void* const* st_args) {{',
             "  const unsigned char* __restrict st_x = "
             f"(const unsigned char*)st_args[{args[0]}];",
             f"  unsigned char* __restrict st_o = (unsigned char*)st_args[{nout}];",
             f"  static const unsigned char st_fill[{isz}] = {_bytes_literal(filler, p.dt)};"]
    empty_axis = 0 in p.lead
    work = p.nB * max(p.R, 1)
    par = work >= PARALLEL_WORK
    if par:   # chunks of about CHUNK_WORK elements on the thread pool
        grain = max(1, -(-CHUNK_WORK * p.nB // work))
        lines.append(f"  st_par({p.nB}, {grain}, [&](int64_t st_lo, int64_t st_hi) {{")
        lines.append("  for (int64_t b = st_lo; b < st_hi; ++b) {")
    else:
        lines.append(f"  for (int64_t b = 0; b < {p.nB}; ++b) {{")
    body = [] if empty_axis else p.index_lines(mode, args[1:])
    body.append(f"unsigned char* st_d = st_o + b * {block};")
    fill_block = [f"for (int64_t r = 0; r < {p.R}; ++r) "
                  f"__builtin_memcpy(st_d + r * {isz}, st_fill, {isz});"]
    if empty_axis:   # no valid index exists
        body += fill_block
    else:
        body.append(f"if (st_ok) __builtin_memcpy(st_d, st_x + st_t * {block}, {block});")
        body.append("else {")
        body += ["  " + x for x in fill_block] + ["}"]
    lines += ["    " + x for x in body] + ["  }"] + (["  });"] if par else []) + ["}"]
    return Kernel(fname, "\n".join(lines), in_dtypes, [out.aval], work, par)


def _scatter(eqn, fname, args, in_dtypes):
    x, updates, *idx = eqn.invars
    out = eqn.outvars[0]
    p = _Plan(eqn, x.aval, [v.aval for v in idx], tuple(updates.aval.shape))
    op, mode = eqn.params["op"], eqn.params["mode"]
    mode = "drop" if mode in ("fill", "promise_in_bounds") else mode
    isz, nout = p.dt.itemsize, len(in_dtypes)
    block = p.R * isz
    total = math.prod(p.x_shape) * isz
    lines = [f'extern "C" void {fname}(void* const* st_args) {{',
             f"  __builtin_memcpy(st_args[{nout}], st_args[{args[0]}], {total});"]
    if 0 in p.lead or p.nB == 0 or p.R == 0:
        return Kernel(fname, "\n".join(lines + ["}"]), in_dtypes, [out.aval], total, False)
    if op == "set":
        apply = [f"__builtin_memcpy(st_o + st_t * {block}, st_u + b * {block}, {block});"]
    else:
        if not F.supported_dtype(p.dt):
            raise NotFusible(f"scatter-{op} of {p.dt}")
        pt, t = F.ptr_ctype(p.dt), F.ctype(p.dt)
        a, u = "st_a", "st_b"
        expr = F.render(_COMBINE[op], [a, u], [p.dt, p.dt], p.dt, {})
        if expr is None:
            raise NotFusible(f"scatter-{op} of {p.dt}")
        apply = [f"{pt}* st_e = ({pt}*)(st_o) + st_t * {p.R};",
                 f"const {pt}* st_v = (const {pt}*)(st_u) + b * {p.R};",
                 f"for (int64_t r = 0; r < {p.R}; ++r) {{",
                 f"  const {t} {a} = {F.load_expr(p.dt, 'st_e[r]')};",
                 f"  const {t} {u} = {F.load_expr(p.dt, 'st_v[r]')};",
                 f"  st_e[r] = {F.store_expr(p.dt, f'({t})({expr})')};", "}"]
    lines += [f"  unsigned char* __restrict st_o = (unsigned char*)st_args[{nout}];",
              "  const unsigned char* __restrict st_u = "
              f"(const unsigned char*)st_args[{args[1]}];",
              f"  for (int64_t b = 0; b < {p.nB}; ++b) {{"]
    body = p.index_lines(mode, args[2:]) + ["if (!st_ok) continue;"] + apply
    lines += ["    " + x for x in body] + ["  }", "}"]
    return Kernel(fname, "\n".join(lines), in_dtypes, [out.aval], p.nB * max(p.R, 1), False)
