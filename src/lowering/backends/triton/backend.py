"""The ``triton`` backend: fused elementwise groups as Triton kernels, the rest on the host.

``compile(f, backend="triton")`` runs the backend passes (complex decomposition, fusion with
``TritonPolicy``: elementwise equations whose scalar formulas Triton renders; views stay NumPy
views, read in place through the kernels' strides), renders every fused group as a Triton kernel
(codegen.py, matmul.py) and returns a ``TritonExecutable``: a host-driven schedule that launches
the kernels and runs every other equation with its NumPy implementation; control flow
(``while_loop``, ``scan``, ``cond``) runs on the host, its bodies' fused groups as kernels.

Where kernels run: on arrays in host memory, under Triton's interpreter over the NumPy buffers
themselves (buffers.py; how CI and machines without a GPU run them); on arrays on a GPU
(src/arrays/cuda.py), launched there (gpu.py). ``aot.py`` compiles the same
kernels for a GPU target (sm_90a) without one. The interpreter executes a program of ``BLOCK``
elements as NumPy operations (~1-8 ms each), so ``BLOCK`` is large there
(``codegen.INTERPRETER_BLOCK``).

Kernels compute elementwise groups and their reductions (sum / prod / max / min / and / or /
argmax / argmin over one set of axes), (batched) matrix products with their elementwise
epilogues (matmul.py), grouped products (``ragged_dot``, grouped.py) and random bits
(Philox4x32-10, random.py).
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from ....core.ir import Equation, eval_program
from ....core.primitive import Primitive
from ....core.trace import EVAL_TRACE, set_current_trace
from ...fused import fused_kernel_p
from ...fused_matmul import fused_matmul_p
from ...passes.complex_decompose import complex_decompose
from ...passes.dce import dce
from ...passes.epilogue import epilogue_fusion
from ...passes.fusion import ELEMENTWISE, REDUCE, FusionPolicy, fusion
from ...passes.util import map_subprograms, with_eqns
from ...pipeline import run_pipeline
from .. import register_backend
from . import codegen, formulas as F, gpu, grouped, matmul, random
from .codegen import NotFusible
from .buffers import NumpyBuffer, element_strides

class TritonPolicy(FusionPolicy):
    """Fuses the elementwise equations whose formulas render in Triton for their dtypes and the
    reductions codegen.REDUCTIONS; a finished group is kept when it renders as one kernel."""

    def kind(self, eqn):
        p = eqn.primitive
        if p.name in codegen.REDUCTIONS:
            dt = eqn.invars[0].aval.dtype
            return REDUCE if F.supported_dtype(dt) and F.supported_dtype(
                eqn.outvars[0].aval.dtype) else None
        if p.scalar_formula is None or p.multiple_results or len(eqn.outvars) != 1:
            return None
        if any(not isinstance(d, int) for d in eqn.outvars[0].aval.shape):
            return None
        expr = F.render(p, [f"a{i}" for i in range(len(eqn.invars))],
                        [v.aval.dtype for v in eqn.invars], eqn.outvars[0].aval.dtype,
                        eqn.params)
        return ELEMENTWISE if expr is not None else None

    def validate(self, program):
        return _renders(codegen.render)(program)


def _renders(render):
    """A pass's check that a group renders as one kernel with ``render`` (codegen's for fused
    groups, matmul's for the epilogue pass's products)."""
    def check(program):
        try:
            render(program, "check")
        except (codegen.NotFusible, F.Unsupported):
            return False
        return True
    return check


def triton_passes(policy):
    """The backend's passes after the common pipeline."""
    return [("complex_decompose", complex_decompose), ("fusion", lambda p: fusion(p, policy)),
            ("epilogue", lambda p: epilogue_fusion(p, _renders(matmul.render))), ("dce", dce)]


def _require_triton():
    try:
        import triton  # noqa: F401
    except ImportError:
        raise ImportError("compile(backend='triton') needs the triton package: "
                          "pip install -e '.[gpu]' (it runs without a GPU, in Triton's "
                          "interpreter)") from None


_INTERPRETER_LOCK = threading.Lock()


def launch(kernel, arrays, interpret=True, config=None):
    """Runs ``kernel`` (codegen.Kernel) on the host ``arrays`` (its inputs, in order); returns
    its outputs (new C-contiguous arrays of the loop shape)."""
    outs = [np.empty(a.shape, a.dtype) for a in kernel.out_avals]
    n = kernel.size
    if n == 0 and not kernel.kept:
        return outs
    args, strides = [], []
    for a, aval, shape in zip(arrays, kernel.in_avals, kernel.stride_shapes):
        a = np.asarray(a)
        if a.dtype != aval.dtype or any(s % a.itemsize for s in a.strides):
            a = np.ascontiguousarray(a, aval.dtype)
        args.append(NumpyBuffer(a))
        strides += element_strides(a, shape)
    grid, constants, options = kernel.launch_config(interpret, config)
    fn = kernel.load(interpret)
    # Triton's interpreter patches triton.language for the duration of each launch: launches
    # from several threads (the devices of a sharded array) must take turns
    with (_INTERPRETER_LOCK if interpret else contextlib.nullcontext()), \
            np.errstate(all="ignore"):   # masked-off lanes compute on whatever memory they see
        fn[(grid,)](*args, *[NumpyBuffer(o) for o in outs], n, *strides, **constants,
                    **options)
    return outs


# A rendered kernel in a Program: what a fused_kernel / fused_matmul equation becomes, at the top
# level and in control-flow bodies alike, so that while_loop / scan / cond (whose
# implementations evaluate their bodies equation by equation on the host) launch the kernels.
triton_kernel_p = Primitive("triton_kernel", multiple_results=True, family="lowering")
triton_kernel_p.meta["lowering_only"] = "made by the triton backend in compiled Programs; never " \
    "transformed"


def _kernel_impl(*bufs, kernel, program, name):
    from ....arrays.cuda import to_host
    consts = [gpu._const(c) for c in program.consts]
    device = gpu.on_gpu()
    if device is not None:   # a body of host-driven control flow in a program on a GPU
        return [to_host(o) for o in gpu.launch_kernel_equation(kernel, consts, bufs, device)]
    outs = launch(kernel, [to_host(c) for c in consts] + [np.asarray(b) for b in bufs])
    return outs if kernel.finish is None else kernel.finish(outs)


triton_kernel_p.impl = _kernel_impl
triton_kernel_p.abstract_eval = lambda *avals, kernel, program, name: [
    v.aval for v in program.outvars]
triton_kernel_p.weak_type = lambda *w, kernel, program, name: [
    v.aval.weak_type for v in program.outvars]


# primitives with kernels of their own: (module with render(eqn, name) -> (Kernel, sub-Program),
# kernel name prefix)
_OWN_KERNELS = {"ragged_dot": (grouped, "st_grouped"), "random_bits": (random, "st_random")}


def _with_kernels(prog, kernels):
    """``prog`` with every fused group / product (control-flow bodies included) replaced by a
    ``triton_kernel`` equation; the Kernels are appended to ``kernels``."""
    eqns = []
    for eqn in prog.eqns:
        own = _OWN_KERNELS.get(eqn.primitive.name)
        if own is not None:
            try:
                kernel, sub = own[0].render(eqn, f"{own[1]}_{len(kernels)}")
            except NotFusible:
                eqns.append(eqn)   # the host runs it
                continue
            kernels.append(kernel)
            eqns.append(Equation(triton_kernel_p, eqn.invars, eqn.outvars,
                                 {"kernel": kernel, "program": sub, "name": kernel.name}))
            continue
        render = {fused_kernel_p: codegen.render, fused_matmul_p: matmul.render}.get(
            eqn.primitive)
        if render is None:
            eqns.append(map_subprograms(eqn, lambda p: _with_kernels(p, kernels)))
            continue
        sub = eqn.params["program"]
        prefix = "st_kernel" if eqn.primitive is fused_kernel_p else "st_matmul"
        kernel = render(sub, f"{prefix}_{len(kernels)}")
        kernels.append(kernel)
        eqns.append(Equation(triton_kernel_p, eqn.invars, eqn.outvars,
                             {"kernel": kernel, "program": sub, "name": kernel.name}))
    return with_eqns(prog, eqns)


class TritonExecutable:
    """``exe(consts, args) -> list of Arrays``: a host-driven schedule (every equation evaluated
    in order; control flow by its primitives' implementations) whose fused groups launch their
    Triton kernels. ``.program`` is the fused Program, ``.kernels`` its Kernels (numbered in
    program order, bodies included), ``.source`` their Triton source."""

    def __init__(self, program):
        self.program = program
        found = []
        self._run = _with_kernels(program, found)
        self.kernels = dict(enumerate(found))
        self.source = "\n\n".join(k.source for k in found) or None

    def __call__(self, consts, args, shape_env=None):
        from ....arrays import cuda
        if any(isinstance(a, cuda.CudaArray) for a in list(args) + list(consts)):
            if not any(isinstance(a, cuda.CudaArray) for a in args):   # only constants there
                gpu = next(c for c in consts if isinstance(c, cuda.CudaArray))._device
                args = [cuda.put(a._buf, a._weak, gpu) for a in args]
            device, bufs = cuda.placement("compile", args)
            outs = self.run_on_gpu(consts, bufs, device)
            return [cuda.adopt(o, v.aval.weak_type, device)
                    for o, v in zip(outs, self.program.outvars)]
        with set_current_trace(EVAL_TRACE):
            return eval_program(self._run, consts, *args)

    def run_on_gpu(self, consts, bufs, device):
        """The outputs (DeviceBuffers) of the program on ``device`` for operands ``bufs``
        (DeviceBuffers there); see gpu.py."""
        return gpu.run(self._run, triton_kernel_p, consts, bufs, device)


class TritonBackend:
    """The ``triton`` backend (see the module docstring). ``supports`` is true for every
    primitive with a reference impl: what is not a Triton kernel runs on the host."""
    name = "triton"
    supports_dynamic_shapes = False

    def supports(self, primitive) -> bool:
        return primitive.impl is not None

    def compile(self, program):
        _require_triton()
        fused = run_pipeline(program, passes=triton_passes(TritonPolicy()), label="triton")
        return TritonExecutable(fused)


register_backend(TritonBackend())
