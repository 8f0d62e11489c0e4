"""Fused elementwise groups rendered as Triton kernels.

A group (the sub-Program of a ``fused_kernel`` equation: elementwise equations over one loop
shape ``L``) becomes one kernel over the flattened ``L``: program ``p`` handles positions
``p * BLOCK .. p * BLOCK + BLOCK - 1`` (masked at the end). Each input is read with its own
element strides, passed at launch (0 along broadcast dims), so broadcast operands, transposed and
sliced NumPy views are read in place; outputs are written C-contiguous. The scalar formulas come
from formulas.py; ``M`` in the generated module is the device math library (device_math.py).

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
    pass


class Kernel:
    """A rendered kernel: ``source`` (module text), ``name`` (its function), ``shape`` (the loop
    shape), ``in_avals`` / ``out_avals``, ``in_ranks`` (each input's rank, right-aligned on the
    loop shape)."""

    def __init__(self, source, name, shape, in_avals, out_avals):
        self.source, self.name, self.shape = source, name, tuple(shape)
        self.in_avals, self.out_avals = list(in_avals), list(out_avals)
        self._loaded = {}

    @property
    def size(self):
        return math.prod(self.shape)

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
    return {"tl.int1": "i1", "tl.float16": "fp16", "tl.bfloat16": "bf16", "tl.float32": "fp32",
            "tl.float64": "fp64"}.get(F.tl_dtype(dt), F.tl_dtype(dt)[3:].replace("int", "i")
                                       .replace("ui", "u"))


def render(program, name):
    """The Kernel of a fused group's sub-Program (constants first among its inputs), or raise
    NotFusible naming what Triton cannot compute."""
    outs = list(program.outvars)
    shapes = {tuple(v.aval.shape) for v in outs}
    if len(shapes) != 1 or any(not isinstance(d, int) for d in next(iter(shapes))):
        raise NotFusible(f"outputs of several or symbolic shapes {sorted(shapes)}")
    shape = next(iter(shapes))
    ins = list(program.constvars) + list(program.invars)
    nd = len(shape)
    lines = ["    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
             "    mask = offs < n", "    rem = offs"]
    for d in range(nd - 1, -1, -1):
        lines.append(f"    i{d} = rem % {shape[d]}" if d else f"    i{d} = rem")
        if d:
            lines.append(f"    rem = rem // {shape[d]}")
    env = {}
    params = []
    for i, v in enumerate(ins):
        dt = v.aval.dtype
        if not F.supported_dtype(dt):
            raise NotFusible(f"input dtype {dt}")
        r = len(v.aval.shape)
        if r > nd:
            raise NotFusible(f"input of rank {r} in a loop of rank {nd}")
        index = " + ".join(f"i{nd - r + d} * s{i}_{d}" for d in range(r)) or "offs * 0"
        lines.append(f"    x{i} = tl.load(in{i} + ({index}), mask=mask)")
        env[v] = (f"x{i}", dt)
        params += [f"s{i}_{d}" for d in range(r)]
    for k, eqn in enumerate(program.eqns):
        args, dts = [], []
        for a in eqn.invars:
            if isinstance(a, Literal):
                args.append(F.literal(np.asarray(a.val).item(), a.aval.dtype))
                dts.append(a.aval.dtype)
            else:
                args.append(env[a][0])
                dts.append(env[a][1])
        out = eqn.outvars[0]
        if len(eqn.outvars) != 1 or tuple(out.aval.shape) != shape:
            raise NotFusible(f"{eqn.primitive.name} (not elementwise over {shape})")
        expr = F.render(eqn.primitive, args, dts, out.aval.dtype, eqn.params)
        if expr is None:
            raise NotFusible(f"{eqn.primitive.name} on {[str(d) for d in dts]}")
        lines.append(f"    v{k} = {expr}")
        env[out] = (f"v{k}", np.dtype(out.aval.dtype))
    for j, v in enumerate(outs):
        val = F.literal(np.asarray(v.val).item(), v.aval.dtype) if isinstance(v, Literal) \
            else env[v][0]
        lines.append(f"    tl.store(out{j} + offs, {val}, mask=mask)")
    args = [f"in{i}" for i in range(len(ins))] + [f"out{j}" for j in range(len(outs))] + \
        ["n"] + params + ["BLOCK: tl.constexpr"]
    src = ("# Generated by Starling (src/lowering/backends/triton/codegen.py)\n"
           "import triton\nimport triton.language as tl\n\nM = None   # device_math, set on load\n"
           f"\n\ndef {name}({', '.join(args)}):\n" + "\n".join(lines) + "\n")
    return Kernel(src, name, shape, [v.aval for v in ins], [v.aval for v in outs])


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
    fn = getattr(mod, name)
    if interpret:
        from triton.runtime.interpreter import InterpretedFunction
        return InterpretedFunction(fn)
    return triton.runtime.jit.JITFunction(fn)
