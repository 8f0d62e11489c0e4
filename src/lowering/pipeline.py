"""The pass pipeline, in order. Each entry is (name, pass); a pass maps Program -> Program.

Common passes (``PASSES``, every backend): inline_custom_calls (staged custom_jvp / custom_vjp
calls run their function: no derivative is taken after lowering), simplify, constant_folding,
simplify again (on the folded constants), cse, scan_hoist (passes/scan_hoist.py: a scan body's
products of scanned slices and constants run once before the loop, batched, and the products a
carry only accumulates once after it), dce. A backend then
runs its own list on the result; the cpp backend's (``cpp.cpp_passes``), in order:

1. complex_decompose: complex arithmetic -> real / imaginary float computations;
2. fusion: elementwise chains, views and reductions -> ``fused_kernel`` equations;
3. epilogue: ``dot_general`` + the fused group consuming it -> one ``fused_matmul``;
4. dce;
5. buffer_reuse (passes/buffer_reuse.py), the memory plan, last because it needs the final
   schedule order: marks each kernel output that can be written into a buffer that is dead at
   that point or donated by the caller (``compile(..., donate_argnums=)``) with the param
   ``reuse``; the schedule then launches that kernel as ``k.run(sizes, outs, *inputs)``.
   ``STARLING_BUFFER_REUSE=0`` turns it off, ``STARLING_REUSE_MIN_BYTES`` sets the smallest
   intermediate worth reusing (default 64 KiB).

Set ``STARLING_DUMP_IR=1`` (or call ``run_pipeline(prog, dump=True)``) to print the Program after
every pass; ``STARLING_DUMP_IR=<dir>`` writes one file per pass into that directory instead.
"""
from __future__ import annotations

import os

from ..core.ir import Program, check_program, inline_custom_calls
from .passes.constant_folding import constant_folding
from .passes.cse import cse
from .passes.dce import dce
from .passes.scan_hoist import scan_hoist
from .passes.simplify import simplify

PASSES = [
    ("inline_custom_calls", inline_custom_calls),
    ("simplify", simplify),
    ("constant_folding", constant_folding),
    # again: folding makes Literals (``x * (1 / n)`` -> ``x * c``, ``broadcast(c)``) that the
    # identities and the scalar operands rule apply to
    ("simplify_folded", simplify),
    ("cse", cse),
    ("scan_hoist", scan_hoist),
    ("dce", dce),
]


def register_pass(name, fn, *, after=None):
    """Adds a pass (e.g. a backend's fusion) after the named pass, or at the end."""
    if any(n == name for n, _ in PASSES):
        return
    if after is None:
        PASSES.append((name, fn))
        return
    idx = [n for n, _ in PASSES].index(after)
    PASSES.insert(idx + 1, (name, fn))


def run_pipeline(prog: Program, passes=None, dump=None, check=False, label="program"):
    """Runs the passes in order; returns the optimised Program."""
    dump = os.environ.get("STARLING_DUMP_IR") if dump is None else dump
    for i, (name, fn) in enumerate(PASSES if passes is None else passes):
        prog = fn(prog)
        if check:
            check_program(prog)
        if dump:
            _dump(prog, f"{i:02d}-{name}", dump, label)
    return prog


def _dump(prog, name, dump, label):
    text = f"# {label}: after {name}\n{prog}\n"
    if isinstance(dump, str) and dump not in ("1", "true", "True") and os.path.isdir(dump):
        with open(os.path.join(dump, f"{label}-{name}.ir"), "w") as f:
            f.write(text)
    else:
        print(text)
