"""Reduction accumulators of the cpp kernels (codegen.py): initial values, the reduction
clauses of ``#pragma omp simd``, scalar and per-column updates, the combination of per-chunk
partials (reductions run on the thread pool), and the final value stored.

float32 (and low-precision float) sums and products accumulate in double; max / min of floats
keep a sticky NaN flag so that a NaN anywhere in the reduced range gives NaN, as NumPy does.

``argmax`` / ``argmin`` keep the best value and its index: the flat index over the reduced axes
(C order), which the kernel passes to each update. A candidate replaces the accumulator only if
strictly better, so ties keep the first index, and once the accumulator holds a NaN nothing
replaces it, so the first NaN wins: NumPy's semantics. The initial value is the identity of the
max / min (-inf, or a format's lowest value) with index 0, so a range holding only that value
gives 0 as NumPy does. These updates have no SIMD reduction clause and no partials to combine (``combinable`` is
False): the kernel parallelises only over kept elements and runs the reduced loop in order.
"""
from __future__ import annotations

import numpy as np

from . import formulas as F

# How reductions are split for the thread pool (codegen.py, columns.py).
MIN_UNITS = 8                # parallel work units wanted when the outer dims are few
MAX_PARTS = 256              # chunks (partial accumulators) of a split reduction
# A row reduction with few outer points is split into chunks of about this many elements, each
# accumulating its own partials, combined in chunk order, when it has at least two chunks' worth
# per point. The split and the chunks follow from the sizes alone (not from the kernel's other
# work, nor from whether it runs on the pool), so a sum has the same bits whatever else its
# kernel computes: passes that move work between kernels (remat) keep results bit for bit.
RED_CHUNK = 1 << 12
ARG_KINDS = ("argmax", "argmin")
_INDEX_DT = np.dtype(np.int64)


class Red:
    """One reduction of a kernel: ``kind`` (sum, prod, max, min, and, or, argmax, argmin) of
    values of ``dt``, accumulated in C variables named after ``name``; ``out_dt`` is the dtype
    stored (int64 for argmax / argmin)."""

    __slots__ = ("kind", "dt", "acc_t", "name", "value", "out_acc", "nanflag", "out_dt")

    def __init__(self, kind, dt, name):
        self.kind, self.dt, self.name = kind, np.dtype(dt), name
        t = F.ctype(dt)
        # float32 and the low-precision floats (held in float) sum in double, rounded once
        wide = self.dt == np.float32 or F.is_lowp(self.dt)
        self.acc_t = "double" if (wide and kind in ("sum", "prod")) else t
        self.nanflag = F.has_nan(self.dt) and kind in ("max", "min")
        self.out_dt = _INDEX_DT if kind in ARG_KINDS else self.dt
        self.value = None
        self.out_acc = None

    @property
    def is_arg(self):
        return self.kind in ARG_KINDS

    @property
    def combinable(self):
        """Whether partial accumulators (SIMD lanes, pool chunks) can be combined."""
        return not self.is_arg

    def init(self):
        dt = self.dt
        kind = {"argmax": "max", "argmin": "min"}.get(self.kind, self.kind)
        if kind == "sum":
            return "false" if dt.kind == "b" else f"({self.acc_t})0"
        if kind == "prod":
            return "true" if dt.kind == "b" else f"({self.acc_t})1"
        if kind in ("and",):
            return "true"
        if kind in ("or",):
            return "false"
        if dt.kind == "b":
            return "false" if kind == "max" else "true"
        if dt.kind == "f" or F.is_lowp(dt):   # -inf, or the lowest value of a format without inf
            return F.literal(F.lowest(dt) if kind == "max" else F.highest(dt), dt)
        info = np.iinfo(dt)
        return F.literal(info.min if kind == "max" else info.max, dt)

    def declare_scalar(self):
        """Lines declaring the scalar accumulator(s)."""
        lines = [f"{self.acc_t} {self.name} = {self.init()};"]
        if self.nanflag:
            lines.append(f"int {self.name}_nan = 0;")
        if self.is_arg:
            lines.append(f"int64_t {self.name}_i = 0;")
        return lines

    def declare_array(self, length, used):
        """Lines declaring accumulator arrays of ``length`` elements, the first ``used`` (a C
        expression) initialised."""
        lines = [f"{self.acc_t} {self.name}[{length}];"]
        init = f"{self.name}[k] = {self.init()};"
        if self.is_arg:
            lines.append(f"int64_t {self.name}_i[{length}];")
            init += f" {self.name}_i[k] = 0;"
        lines.append(f"for (int64_t k = 0; k < {used}; ++k) {{ {init} }}")
        return lines

    def _op(self):
        """The reduction as applied: bool sums / products / max / min are or / and."""
        if self.dt.kind == "b":
            return {"sum": "or", "prod": "and", "max": "or", "min": "and"}.get(self.kind,
                                                                              self.kind)
        return self.kind

    def clause(self):
        """``#pragma omp simd`` reduction clauses for the scalar accumulator form ("" for
        argmax / argmin)."""
        if self.is_arg:
            return ""
        op = {"sum": "+", "prod": "*", "max": "max", "min": "min", "and": "&&", "or": "||"}
        out = f"reduction({op[self._op()]}:{self.name})"
        if self.nanflag:
            out += f" reduction(|:{self.name}_nan)"
        return out

    def _update(self, acc, x, sticky_nan, index=None, slot=""):
        k = self._op()
        if k == "sum":
            return f"{acc} += ({self.acc_t}){x};"
        if k == "prod":
            return f"{acc} *= ({self.acc_t}){x};"
        if k in ("and", "or"):
            return f"{acc} = {acc} {'&&' if k == 'and' else '||'} {x};"
        cmp = ">" if k in ("max", "argmax") else "<"
        if k in ARG_KINDS:
            better = f"{x} {cmp} {acc}"
            if F.has_nan(self.dt):   # the first NaN wins and stays
                better = f"{acc} == {acc} && ({better} || {x} != {x})"
            return (f"if ({better}) {{ {acc} = {x}; {self.name}_i{slot} = {index}; }}")
        if sticky_nan:   # NaN is sticky: once the accumulator is NaN no comparison replaces it
            return f"{acc} = ({x} {cmp} {acc} || {x} != {x}) ? {x} : {acc};"
        return f"{acc} = ({x} {cmp} {acc}) ? {x} : {acc};"

    def update_scalar(self, x, index=None):
        """Update of the scalar accumulator with value ``x`` (at flat reduced index ``index``,
        a C expression, for argmax / argmin); max / min of floats record NaNs in a flag, which
        SIMD lanes and pool chunks combine with ``|``."""
        s = self._update(self.name, x, False, index)
        if self.nanflag:
            s += f" {self.name}_nan |= ({x} != {x});"
        return s

    def combine(self, part):
        """Folds a chunk's partial accumulator ``part`` (same type) into the accumulator; its
        NaN flag, if any, is combined by the caller. Not for argmax / argmin (not
        ``combinable``: their kernels run the reduced loop in order on one thread)."""
        return self._update(self.name, part, False)

    def update_array(self, x, index=None):
        """Update of accumulator array element ``k - k0`` (column reductions)."""
        slot = "[k - k0]"
        return self._update(self.name + slot, x, self.nanflag, index, slot)

    def final_scalar(self):
        if self.is_arg:
            return f"{self.name}_i"
        value = F.acc_value(self.dt, self.name)   # low-precision floats round here
        if self.nanflag:
            return f"({self.name}_nan ? {F.literal(np.nan, self.dt)} : {value})"
        return value

    def final_array(self):
        """The value stored from accumulator array element ``k - k0``."""
        if self.is_arg:
            return f"{self.name}_i[k - k0]"
        return F.acc_value(self.dt, f"{self.name}[k - k0]")

    def trivial(self):
        """The result when the reduced axes all have size 1 (the kernel stores it per
        element)."""
        return "((int64_t)0)" if self.is_arg else self.value
