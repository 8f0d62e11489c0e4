"""Debug mode: a log of every executed primitive, eager and compiled, and a diff of two logs.

Usage::

    with starling.debug_mode(checksums=True) as dm:
        loss = step(params, batch)           # eager ops and compiled functions alike
    dm.save_logs("run_a.json")
    ...
    print(starling.debug_diff("run_a.json", "run_b.json"))   # first divergence, with context

Each record is a JSON-safe dict::

    {"index": 12, "primitive": "add", "source": "eager" | "compiled" | "compiled:<backend>",
     "depth": 0,                         # > 0 inside a control-flow primitive's body
     "inputs":  [{"shape": [3, 4], "dtype": "float32", "weak": false, "checksum": {...}}, ...],
     "outputs": [...], "params": {"axes": [0]}}

A checksum (``checksums=True``) is ``{"sum", "sumsq"}`` (float64 sums over finite values),
``{"nan", "inf"}`` counts and ``"hash"`` (blake2b of the raw bytes). ``debug_diff`` compares
sums within ``rtol`` / ``atol`` (the hash only with ``exact=True``), so runs in different
processes or with different but numerically close configurations can be compared.

How it hooks in:

* eager: entering the block makes a ``DebugTrace`` (a subclass of EvalTrace that records and
  delegates) the current trace; the eager fast paths of the op wrappers test
  ``current_trace() is EVAL_TRACE``, so they step aside and every op binds its primitive.
* compiled: ``Compiled`` treats any EvalTrace subclass as eager and calls its executable;
  executables ask this module whether debug mode is active. The numpy_ref executable evaluates
  its Program under ``active_trace()`` (a DebugTrace with source "compiled"), so each executed
  equation is recorded. Other backends call the hook API directly:

  - ``active() -> DebugMode | None``: cheap; None when no debug mode is active.
  - ``DebugMode.record(primitive, inputs, outputs, params=None, source="compiled:cpp")``
    with ``primitive`` a Primitive or name, ``inputs`` / ``outputs`` sequences of NumPy arrays
    or Arrays (one call per executed equation or fused kernel).

Only the innermost active debug mode records. Inside the block the current trace is a
DebugTrace, not EVAL_TRACE: code that tests ``current_trace() is EVAL_TRACE`` to mean "not
under a transformation" should test ``isinstance(current_trace(), EvalTrace)`` instead.
"""
from __future__ import annotations

import contextvars
import hashlib
import json
import math
import os
import threading

import numpy as np

from ..core.trace import EvalTrace, _current, current_trace

__all__ = ["DebugMode", "debug_mode", "debug_diff", "DebugDiff", "active", "active_trace",
           "log_document", "write_log"]

_LOG_FORMAT = "starling-debug-log"
_LOG_VERSION = 1
_active = contextvars.ContextVar("starling_debug_mode", default=None)


def active():
    """The innermost active DebugMode, or None (the hook every executable may consult)."""
    return _active.get()


def active_trace():
    """The DebugTrace compiled executables evaluate under (source "compiled"), or None."""
    dm = _active.get()
    return None if dm is None else dm._compiled_trace


class DebugTrace(EvalTrace):
    """EvalTrace that records each primitive (name, avals, params, checksums) into ``mode``."""

    def __init__(self, mode, source):
        super().__init__(None)
        self.mode = mode
        self.source = source

    def process_primitive(self, prim, args, params):
        mode = self.mode
        slot = mode._begin()
        mode._depth += 1
        try:
            out = EvalTrace.process_primitive(self, prim, args, params)
        finally:
            mode._depth -= 1
        outs = out if prim.multiple_results else [out]
        mode._fill(slot, prim.name, [a._buf for a in args], [a._weak for a in args],
                   [o._buf for o in outs], [o._weak for o in outs], params, self.source)
        return out


# ---- JSON-safe values ---------------------------------------------------------------------------

def _jsonable(v, depth=0):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else str(f)
    if isinstance(v, np.dtype):
        return str(v)
    if depth > 4:
        return "..."
    if isinstance(v, (tuple, list)):
        return [_jsonable(x, depth + 1) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x, depth + 1) for k, x in v.items()}
    from ..core.ir import Program
    if isinstance(v, Program):
        return f"<Program: {len(v.invars)} in, {len(v.eqns)} eqns, {len(v.outvars)} out>"
    if hasattr(v, "shape") and hasattr(v, "dtype") and not callable(v):
        return f"<{getattr(v, 'dtype', '?')}{list(getattr(v, 'shape', ()))}>"
    if callable(v):
        return f"<callable {getattr(v, '__name__', type(v).__name__)}>"
    text = str(v)
    return text if len(text) <= 200 else text[:197] + "..."


def checksum(buf) -> dict | None:
    """Float64 sum and sum of squares over finite values, NaN / inf counts, and a byte hash."""
    a = np.asarray(buf)
    if a.dtype.kind == "V" or a.dtype.names is not None:
        return None
    digest = hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=8).hexdigest()
    if a.dtype.kind == "c":
        f = np.concatenate([a.real.ravel(), a.imag.ravel()]).astype(np.float64)
    else:
        f = a.astype(np.float64).ravel()
    finite = np.isfinite(f)
    n_nan = int(np.isnan(f).sum())
    n_inf = int(f.size - finite.sum() - n_nan)
    if n_nan or n_inf:
        f = f[finite]
    s = float(f.sum())
    ss = float(np.dot(f, f))
    return {"sum": s if math.isfinite(s) else str(s), "sumsq": ss if math.isfinite(ss) else str(ss),
            "nan": n_nan, "inf": n_inf, "hash": digest}


def _describe(buf, weak, with_checksum):
    a = np.asarray(buf)
    d = {"shape": list(a.shape), "dtype": str(a.dtype), "weak": bool(weak)}
    if with_checksum:
        d["checksum"] = checksum(a)
    return d


# ---- the log file -------------------------------------------------------------------------------

def log_document(records, *, label=None, checksums=False, truncated=False, meta=None) -> dict:
    """The JSON document of a log: ``records`` (dicts as in the module docstring; writers may add
    keys of their own, e.g. the flight recorder's ``state`` / ``start`` / ``end``), a free-text
    ``label``, whether values carry checksums, whether records were dropped (``truncated``) and
    ``meta``, a dict of facts about the whole log."""
    return {"format": _LOG_FORMAT, "version": _LOG_VERSION, "label": _jsonable(label),
            "checksums": bool(checksums), "truncated": bool(truncated),
            "meta": _jsonable(dict(meta or {})), "records": list(records)}


def write_log(path, document) -> str:
    """Writes a ``log_document`` as JSON to ``path`` atomically (a temporary file, then rename:
    a reader never sees half a log, even when the writer is killed)."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}-{threading.get_ident()}"
    with open(tmp, "w") as f:
        json.dump(document, f)
    os.replace(tmp, path)
    return path


# ---- the mode -----------------------------------------------------------------------------------

class DebugMode:
    """Records executed primitives while active (``with DebugMode(...) as dm`` or
    ``with starling.debug_mode(...) as dm``).

    Args:
        checksums: also record value checksums of every input and output (slower).
        params: record the primitives' parameters (JSON-safe renderings).
        max_records: stop recording after this many (None: no limit); ``truncated`` says so.
        label: free text saved with the log (e.g. the configuration of the run).
    Attributes:
        records: list of dicts (see the module docstring).
        meta: dict of facts about the whole log (who wrote it, why), saved with it.
    """

    def __init__(self, checksums=False, params=True, max_records=None, label=None):
        self.checksums = bool(checksums)
        self.params = bool(params)
        self.max_records = max_records
        self.label = label
        self.records = []
        self.truncated = False
        self.meta = {}
        self._depth = 0
        self._tokens = []
        self._eager_trace = DebugTrace(self, "eager")
        self._compiled_trace = DebugTrace(self, "compiled")

    # context management --------------------------------------------------------------------
    def __enter__(self):
        mode_token = _active.set(self)
        trace_token = None
        if isinstance(current_trace(), EvalTrace):
            # Only swap in the recording interpreter at top level (not inside a transformation:
            # there, transformations bind their rules on this trace once they reach eval).
            trace_token = _current.set(self._eager_trace)
        self._tokens.append((mode_token, trace_token))
        return self

    def __exit__(self, *exc):
        mode_token, trace_token = self._tokens.pop()
        if trace_token is not None:
            _current.reset(trace_token)
        _active.reset(mode_token)
        return False

    # recording ------------------------------------------------------------------------------
    def _begin(self):
        if self.max_records is not None and len(self.records) >= self.max_records:
            self.truncated = True
            return None
        self.records.append(None)
        return len(self.records) - 1

    def _fill(self, slot, name, in_bufs, in_weak, out_bufs, out_weak, params, source):
        if slot is None:
            return
        self.records[slot] = {
            "index": slot,
            "primitive": name,
            "source": source,
            "depth": self._depth,
            "inputs": [_describe(b, w, self.checksums) for b, w in zip(in_bufs, in_weak)],
            "outputs": [_describe(b, w, self.checksums) for b, w in zip(out_bufs, out_weak)],
            "params": ({str(k): _jsonable(v) for k, v in sorted(params.items())}
                       if (self.params and params) else {}),
        }

    def record(self, primitive, inputs, outputs, params=None, source="compiled"):
        """Records one executed equation (the hook for native backends).

        Args:
            primitive: a Primitive or its name.
            inputs / outputs: sequences of NumPy arrays or Arrays.
            params: the equation's params (rendered JSON-safe), or None.
            source: e.g. "compiled:cpp".
        """
        slot = self._begin()

        def unpack(xs):
            bufs, weak = [], []
            for x in xs:
                bufs.append(getattr(x, "_buf", x))
                weak.append(bool(getattr(x, "_weak", False)))
            return bufs, weak

        ib, iw = unpack(inputs)
        ob, ow = unpack(outputs)
        self._fill(slot, getattr(primitive, "name", str(primitive)), ib, iw, ob, ow,
                   params or {}, source)

    # access ---------------------------------------------------------------------------------
    def __len__(self):
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def primitives(self):
        """The executed primitive names, in order."""
        return [r["primitive"] for r in self.records if r is not None]

    def summary(self) -> dict:
        """Counts of executed primitives by name."""
        out = {}
        for name in self.primitives():
            out[name] = out.get(name, 0) + 1
        return out

    def to_json(self) -> dict:
        return log_document([r for r in self.records if r is not None], label=self.label,
                            checksums=self.checksums, truncated=self.truncated, meta=self.meta)

    def save_logs(self, path):
        """Writes the records as JSON to ``path`` (atomically: a temporary file, then rename)."""
        return write_log(path, self.to_json())

    @classmethod
    def load_logs(cls, path) -> "DebugMode":
        """Reads a log written by ``save_logs`` into an inactive DebugMode.

        Raises:
            ValueError: the file is not a Starling debug log (or has an unknown version).
        """
        with open(os.fspath(path)) as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"load_logs: {path} is not a Starling debug log: {e}") from None
        return cls.from_json(data, str(path))

    @classmethod
    def from_json(cls, data, where="log") -> "DebugMode":
        if not isinstance(data, dict) or data.get("format") != _LOG_FORMAT:
            raise ValueError(f"load_logs: {where} is not a Starling debug log")
        if data.get("version") != _LOG_VERSION:
            raise ValueError(f"load_logs: {where} has log version {data.get('version')}; this "
                             f"Starling reads version {_LOG_VERSION}")
        dm = cls(checksums=data.get("checksums", False), label=data.get("label"))
        dm.records = list(data["records"])
        dm.truncated = bool(data.get("truncated", False))
        dm.meta = dict(data.get("meta") or {})
        return dm

    def __repr__(self):
        return f"DebugMode({len(self.records)} records, checksums={self.checksums})"


def debug_mode(checksums=False, params=True, max_records=None, label=None) -> DebugMode:
    """``with starling.debug_mode(checksums=True) as dm:`` records every executed primitive
    (eager and compiled) into ``dm.records``. See DebugMode and the module docstring."""
    return DebugMode(checksums=checksums, params=params, max_records=max_records, label=label)


# ---- comparing two runs -------------------------------------------------------------------------

class DebugDiff:
    """The first divergence between two logs (``found`` False when none).

    Attributes: ``index`` (record position), ``primitive`` (pair of names), ``differences``
    (list of strings), ``context`` (the records before, as one-line summaries), ``a`` / ``b``
    (the two diverging records, or None past the end of a log).
    """

    def __init__(self, found, index=None, a=None, b=None, differences=(), context=(), n=0):
        self.found = found
        self.index = index
        self.a, self.b = a, b
        self.primitive = (a and a["primitive"], b and b["primitive"])
        self.differences = list(differences)
        self.context = list(context)
        self.compared = n

    def __bool__(self):
        return self.found

    def __str__(self):
        if not self.found:
            return f"no divergence in {self.compared} records"
        lines = [f"first divergence at record {self.index}: "
                 f"{self.primitive[0]} (a) vs {self.primitive[1]} (b)"]
        lines += [f"  - {d}" for d in self.differences]
        if self.context:
            lines.append("  context (preceding records):")
            lines += [f"    {c}" for c in self.context]
        if self.a is not None:
            lines.append(f"  a: {_one_line(self.a)}")
        if self.b is not None:
            lines.append(f"  b: {_one_line(self.b)}")
        return "\n".join(lines)

    __repr__ = __str__


def _one_line(r):
    ins = ", ".join(f"{x['dtype']}{x['shape']}" for x in r["inputs"])
    outs = ", ".join(f"{x['dtype']}{x['shape']}" for x in r["outputs"])
    params = f" {r['params']}" if r.get("params") else ""
    return f"[{r['index']}] {r['primitive']}({ins}) -> {outs}{params} ({r.get('source', '?')})"


def _records_of(x):
    if isinstance(x, DebugMode):
        return [r for r in x.records if r is not None]
    if isinstance(x, (str, os.PathLike)):
        return DebugMode.load_logs(x).records
    if isinstance(x, dict):
        return DebugMode.from_json(x).records
    return list(x)


def _num(v):
    return float(v) if not isinstance(v, str) else float(v)


def _close(x, y, rtol, atol):
    x, y = _num(x), _num(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= atol + rtol * max(abs(x), abs(y))


def _compare_values(what, va, vb, rtol=1e-5, atol=1e-8, exact=False, names=("a", "b")):
    """Differences between two lists of value descriptions (shape, dtype, checksums), as
    readable strings naming the sides ``names``."""
    na, nb = names
    diffs = []
    if len(va) != len(vb):
        return [f"{what}: {len(va)} ({na}) vs {len(vb)} ({nb})"]
    for i, (x, y) in enumerate(zip(va, vb)):
        tag = f"{what}[{i}]"
        if x["shape"] != y["shape"]:
            diffs.append(f"{tag} shape {tuple(x['shape'])} ({na}) vs {tuple(y['shape'])} ({nb})")
        if x["dtype"] != y["dtype"]:
            diffs.append(f"{tag} dtype {x['dtype']} ({na}) vs {y['dtype']} ({nb})")
        ca, cb = x.get("checksum"), y.get("checksum")
        if ca and cb and not diffs:
            if exact and ca["hash"] != cb["hash"]:
                diffs.append(f"{tag} bytes differ (hash {ca['hash']} vs {cb['hash']})")
            for key in ("nan", "inf"):
                if ca[key] != cb[key]:
                    diffs.append(f"{tag} {key} count {ca[key]} ({na}) vs {cb[key]} ({nb})")
            for key in ("sum", "sumsq"):
                if not _close(ca[key], cb[key], rtol, atol):
                    diffs.append(f"{tag} checksum {key} {ca[key]!r} ({na}) vs {cb[key]!r} ({nb}) "
                                 f"beyond rtol={rtol}, atol={atol}")
    return diffs


def params_difference(pa, pb, names=("a", "b")):
    """The parameters that differ between two records' ``params``, as one readable string (or
    None when they agree)."""
    pa, pb = pa or {}, pb or {}
    if pa == pb:
        return None
    keys = sorted(set(pa) | set(pb))
    changed = [k for k in keys if pa.get(k) != pb.get(k)]
    return "params differ: " + ", ".join(
        f"{k}={pa.get(k)!r} ({names[0]}) vs {pb.get(k)!r} ({names[1]})" for k in changed)


def debug_diff(a, b, *, rtol=1e-5, atol=1e-8, exact=False, compare_params=True,
               context=3) -> DebugDiff:
    """The first record where two runs diverge.

    Args:
        a, b: DebugModes, paths of saved logs, loaded JSON dicts or lists of records.
        rtol, atol: tolerance for the checksum sums (when both runs recorded checksums).
        exact: also require identical bytes (checksum hashes).
        compare_params: a parameter change counts as a divergence.
        context: how many preceding records to include.
    Returns:
        A DebugDiff (falsy when the runs agree); ``str()`` gives a readable report.
    """
    ra, rb = _records_of(a), _records_of(b)
    n = min(len(ra), len(rb))
    for i in range(n):
        x, y = ra[i], rb[i]
        diffs = []
        if x["primitive"] != y["primitive"]:
            diffs.append(f"primitive {x['primitive']} (a) vs {y['primitive']} (b)")
        else:
            diffs += _compare_values("input", x["inputs"], y["inputs"], rtol, atol, exact)
            diffs += _compare_values("output", x["outputs"], y["outputs"], rtol, atol, exact)
            changed = params_difference(x.get("params"), y.get("params")) if compare_params \
                else None
            if changed:
                diffs.append(changed)
        if diffs:
            ctx = [_one_line(r) for r in ra[max(0, i - context):i]]
            return DebugDiff(True, i, x, y, diffs, ctx, n)
    if len(ra) != len(rb):
        longer, which = (ra, "a") if len(ra) > len(rb) else (rb, "b")
        extra = longer[n]
        ctx = [_one_line(r) for r in ra[max(0, n - context):n]]
        return DebugDiff(True, n, extra if which == "a" else None, extra if which == "b" else None,
                         [f"run {which} has {len(longer) - n} more records "
                          f"({len(ra)} vs {len(rb)})"], ctx, n)
    return DebugDiff(False, n=n)
