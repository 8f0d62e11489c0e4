"""Reduction accumulators of the cpp kernels (cpp_codegen.py): initial values, OpenMP
reduction clauses, scalar and per-column updates, and the final value stored.

float32 (and low-precision float) sums and products accumulate in double; max / min of floats
keep a sticky NaN flag so that a NaN anywhere in the reduced range gives NaN, as NumPy does.
"""
from __future__ import annotations

import numpy as np

from . import cpp_formulas as F


class Red:
    __slots__ = ("kind", "dt", "acc_t", "name", "value", "out_acc", "nanflag")

    def __init__(self, kind, dt, name):
        self.kind, self.dt, self.name = kind, np.dtype(dt), name
        t = F.ctype(dt)
        # float32 and the low-precision floats (held in float) sum in double, rounded once
        wide = self.dt == np.float32 or F.is_lowp(self.dt)
        self.acc_t = "double" if (wide and kind in ("sum", "prod")) else t
        self.nanflag = F.has_nan(self.dt) and kind in ("max", "min")
        self.value = None
        self.out_acc = None

    def init(self):
        dt = self.dt
        if self.kind == "sum":
            return "false" if dt.kind == "b" else f"({self.acc_t})0"
        if self.kind == "prod":
            return "true" if dt.kind == "b" else f"({self.acc_t})1"
        if self.kind in ("and",):
            return "true"
        if self.kind in ("or",):
            return "false"
        if dt.kind == "b":
            return "false" if self.kind == "max" else "true"
        if dt.kind == "f" or F.is_lowp(dt):   # -inf, or the lowest value of a format without inf
            return F.literal(F.lowest(dt) if self.kind == "max" else F.highest(dt), dt)
        info = np.iinfo(dt)
        return F.literal(info.min if self.kind == "max" else info.max, dt)

    def _op(self):
        """The reduction as applied: bool sums / products / max / min are or / and."""
        if self.dt.kind == "b":
            return {"sum": "or", "prod": "and", "max": "or", "min": "and"}.get(self.kind,
                                                                              self.kind)
        return self.kind

    def clause(self):
        """OpenMP reduction clauses for the scalar accumulator form."""
        op = {"sum": "+", "prod": "*", "max": "max", "min": "min", "and": "&&", "or": "||"}
        out = f"reduction({op[self._op()]}:{self.name})"
        if self.nanflag:
            out += f" reduction(|:{self.name}_nan)"
        return out

    def _update(self, acc, x, sticky_nan):
        k = self._op()
        if k == "sum":
            return f"{acc} += ({self.acc_t}){x};"
        if k == "prod":
            return f"{acc} *= ({self.acc_t}){x};"
        if k in ("and", "or"):
            return f"{acc} = {acc} {'&&' if k == 'and' else '||'} {x};"
        cmp = ">" if k == "max" else "<"
        if sticky_nan:   # NaN is sticky: once the accumulator is NaN no comparison replaces it
            return f"{acc} = ({x} {cmp} {acc} || {x} != {x}) ? {x} : {acc};"
        return f"{acc} = ({x} {cmp} {acc}) ? {x} : {acc};"

    def update_scalar(self, x):
        """Update of the scalar accumulator (max / min of floats record NaNs in a flag, which
        OpenMP can combine across threads)."""
        s = self._update(self.name, x, False)
        if self.nanflag:
            s += f" {self.name}_nan |= ({x} != {x});"
        return s

    def update_array(self, slot, x):
        """Update of accumulator array element ``slot`` (column reductions)."""
        return self._update(slot, x, self.nanflag)

    def final_scalar(self):
        value = F.acc_value(self.dt, self.name)   # low-precision floats round here
        if self.nanflag:
            return f"({self.name}_nan ? {F.literal(np.nan, self.dt)} : {value})"
        return value
