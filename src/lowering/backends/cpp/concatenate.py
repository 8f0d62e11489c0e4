"""Native kernel of ``concatenate`` (cpp backend): the operands' bytes laid end to end.

With ``d`` the concatenated dim, the output is ``outer = prod(shape[:d])`` rows, each the
operands' rows one after the other (operand ``i`` contributes ``shape_i[d] * prod(shape[d+1:])``
elements per row). The kernel copies those runs with ``memcpy``: on the thread pool by rows when
there are enough of them, else each operand's run split into chunks of ``CHUNK_BYTES``. Any
dtype (bytes are copied: complex, bool and the low-precision floats too), static shapes only.

Why a kernel of its own: NumPy's ``concatenate`` walks a non-leading dim in small pieces
(measured: 3 x (8, 128, 4, 64) float32 along dim 2, a transformer's q / k / v gradients, 330 us
for 3 MiB on one thread). It is a fused group nothing joins (fusion kind ``SINGLE``), like the
gather / scatter kernels of indexing.py.
"""
from __future__ import annotations

import math

import numpy as np

from .codegen import PARALLEL_WORK, Kernel, lone_equation
from .dims import static_shape

PRIMITIVES = ("concatenate",)
CHUNK_BYTES = 1 << 18   # a chunk of a long run copied by one task
ROW_TASK_BYTES = 1 << 16  # rows per task: about this many bytes


def supported(eqn) -> bool:
    """Whether ``eqn`` (a concatenate) can be a native kernel: static shapes, operands all Vars
    of the output's dtype."""
    from ....core.ir import Literal
    out = eqn.outvars[0].aval
    return (eqn.primitive.name == "concatenate" and static_shape(out.shape)
            and all(not isinstance(v, Literal) and static_shape(v.aval.shape)
                    and np.dtype(v.aval.dtype) == np.dtype(out.dtype) for v in eqn.invars))


def render(sub, fname, row_block=None) -> Kernel:
    """The kernel of the one-equation sub-Program ``sub`` (a concatenate)."""
    eqn = lone_equation(sub, row_block, supported, "concatenate")
    out = eqn.outvars[0]
    shape = tuple(int(s) for s in out.aval.shape)
    d = int(eqn.params["dimension"])
    isz = np.dtype(out.aval.dtype).itemsize
    outer = math.prod(shape[:d])
    tail = math.prod(shape[d + 1:])
    runs = [(sub.invars.index(v), int(v.aval.shape[d]) * tail * isz) for v in eqn.invars]
    runs = [(a, n) for a, n in runs if n]            # empty operands add nothing
    row = sum(n for _, n in runs)
    in_dtypes = [np.dtype(v.aval.dtype) for v in sub.invars]
    nout = len(sub.invars)
    total = outer * row
    par = total // isz >= PARALLEL_WORK if isz else False
    lines = [f'extern "C" void {fname}(void* const* st_args) {{',
             f"  unsigned char* __restrict st_o = (unsigned char*)st_args[{nout}];"]
    for k, (a, _) in enumerate(runs):
        lines.append(f"  const unsigned char* __restrict st_i{k} = "
                     f"(const unsigned char*)st_args[{a}];")
    if total == 0:
        pass
    elif outer >= 16 or not par:
        # rows: each task copies whole rows (every operand's run of them)
        grain = max(1, ROW_TASK_BYTES // max(row, 1))
        body = []
        off = 0
        for k, (_, n) in enumerate(runs):
            body.append(f"__builtin_memcpy(st_o + r * {row} + {off}, st_i{k} + r * {n}, {n});")
            off += n
        if par:
            lines.append(f"  st_par({outer}, {grain}, [&](int64_t st_lo, int64_t st_hi) {{")
            lines.append("  for (int64_t r = st_lo; r < st_hi; ++r) {")
            lines += ["    " + x for x in body] + ["  }", "  });"]
        else:
            lines.append(f"  for (int64_t r = 0; r < {outer}; ++r) {{")
            lines += ["    " + x for x in body] + ["  }"]
    else:
        # few long rows (a concatenate along a leading dim): chunks of each run
        off = 0
        for k, (_, n) in enumerate(runs):
            chunks = -(-n // CHUNK_BYTES)
            lines += [f"  for (int64_t r = 0; r < {outer}; ++r) {{",
                      f"    unsigned char* st_d = st_o + r * {row} + {off};",
                      f"    const unsigned char* st_s = st_i{k} + r * {n};",
                      f"    st_par({chunks}, 1, [&](int64_t st_lo, int64_t st_hi) {{",
                      "      for (int64_t c = st_lo; c < st_hi; ++c) {",
                      f"        const int64_t st_b = c * {CHUNK_BYTES};",
                      f"        const int64_t st_n = {n} - st_b < {CHUNK_BYTES} ? "
                      f"{n} - st_b : {CHUNK_BYTES};",
                      "        __builtin_memcpy(st_d + st_b, st_s + st_b, st_n);",
                      "      }", "    });", "  }"]
            off += n
    lines.append("}")
    return Kernel(fname, "\n".join(lines), in_dtypes, [out.aval], max(total // max(isz, 1), 1),
                  par)
