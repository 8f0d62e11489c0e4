"""Running a TritonExecutable on a GPU: kernels launched on device buffers, the rest on the host.

``run(program, ...)`` evaluates an executable's Program with its operands in GPU memory
(src/arrays/cuda.py ``DeviceBuffer``): every ``triton_kernel`` equation is launched on the device
(Triton's JIT compiles each kernel once per launch signature and caches the binaries on disk);
layout equations (reshape, transpose, squeeze, broadcast, slice, concatenate) run on the device
buffers with cupy; every other equation runs its NumPy implementation on host copies of its
operands (logged once per primitive), and its results go back to the GPU when a kernel reads
them. ``while_loop``, ``scan`` and ``cond`` / ``switch`` are driven from the host with their
operands left on the GPU (only a loop's predicate or a switch's index is read back); control
flow inside a host equation still launches its bodies' kernels on the GPU (``on_gpu`` tells
``_kernel_impl`` to), with their operands copied in and their results copied out.

Kernels and cupy's copies both run on the device's default stream (Triton's launcher uses
torch's current stream when torch is imported: leave it the default one).

Products (``fused_matmul`` kernels) may run as CUTLASS DSL GEMMs instead (cutlass/gemm.py):
with ``STARLING_GPU_GEMM=cutlass`` wherever CUTLASS renders them, and by default where the
autotuner found CUTLASS faster than every tile of the Triton template (``{"backend":
"cutlass"}`` among the candidates); a product CUTLASS does not express stays with Triton (logged
once per reason).

Launch configurations: the autotuner's winner for the kernel on this GPU when one is cached on
disk (autotune.py); with ``STARLING_TRITON_AUTOTUNE=1`` an untuned kernel is timed over the
candidates on its first launch (a few seconds per kernel) and the winner cached; otherwise the
kernel's fixed GPU sizes.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import os

import numpy as np

from ....arrays import cuda
from . import aot, autotune
from .buffers import DevicePointer, element_strides

logger = logging.getLogger("starling")
_ON_GPU = contextvars.ContextVar("starling_triton_gpu", default=None)


def on_gpu():
    """The GPU (a cuda Device) whose program is running in this context, or None."""
    return _ON_GPU.get()


@contextlib.contextmanager
def running_on(device):
    """Inside the block, ``on_gpu()`` is ``device``: kernels met by host-run equations (control
    flow bodies) launch there."""
    token = _ON_GPU.set(device)
    try:
        yield
    finally:
        _ON_GPU.reset(token)


def _device_name(device):
    import cupy
    name = cupy.cuda.runtime.getDeviceProperties(device.id)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def _config(kernel, device, run, cutlass=False):
    """The launch configuration of ``kernel`` on ``device`` (see the module docstring);
    ``cutlass``: the CUTLASS GEMM competes with the Triton template's tiles."""
    configs = kernel.__dict__.setdefault("_gpu_configs", {})
    if device.id in configs:
        return configs[device.id]
    name = _device_name(device)
    config = autotune.cached(kernel, name)
    if config is None and os.environ.get("STARLING_TRITON_AUTOTUNE") == "1":
        import cupy

        def seconds(c):
            run(c)   # compiles
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            for _ in range(5):
                run(c)
            end.record()
            end.synchronize()
            return cupy.cuda.get_elapsed_time(start, end) / 5e3
        extra = [{"backend": "cutlass"}] if cutlass else []
        config = autotune.choose(kernel, name, seconds, autotune.candidates(kernel) + extra)
    configs[device.id] = config
    return config


def _operand(buf, aval, device):
    """``buf`` (a DeviceBuffer or host value) as a DeviceBuffer of ``aval``'s dtype on
    ``device``."""
    if isinstance(buf, cuda.DeviceBuffer):
        if buf.dtype == aval.dtype and cuda.device_index(buf) == device.id:
            return buf
        buf = cuda.to_host(buf)
    host = np.asarray(buf)
    if host.dtype != aval.dtype:
        host = host.astype(aval.dtype)   # a weakly typed scalar operand
    return cuda.to_device(host, device)


def _select_device(device):
    """Makes ``device`` the one Triton launches on: its driver follows torch's current device
    when torch is imported (not cupy's), so a launch for GPU 1 would go to GPU 0."""
    from triton.runtime import driver
    drv = driver.active
    if drv.get_current_device() != device.id:
        drv.set_current_device(device.id)


def launch(kernel, bufs, device, program=None):
    """Runs ``kernel`` (codegen.Kernel) on ``device`` over ``bufs`` (its inputs, in order);
    returns its outputs as new DeviceBuffers (C-contiguous, the loop shape). ``program``: the
    ``fused_matmul`` sub-Program of a product's kernel, which the CUTLASS GEMM may run instead
    (``_gemm_backend``)."""
    import cupy
    with cupy.cuda.Device(device.id):
        ins = [_operand(b, aval, device) for b, aval in zip(bufs, kernel.in_avals)]
        outs = [cuda.empty(a.shape, a.dtype, device) for a in kernel.out_avals]
        if kernel.size == 0 and not kernel.kept:
            return outs
        args, strides = [], []
        for b, shape in zip(ins, kernel.stride_shapes):
            args.append(DevicePointer(b.data.data.ptr, b.dtype))
            strides += element_strides(b.data, shape)
        ptrs = [DevicePointer(o.data.data.ptr, o.dtype) for o in outs]
        fn = kernel.load(interpret=False)
        _select_device(device)
        gemm = _cutlass_gemm(kernel, program, device)

        def run(config):
            if config and config.get("backend") == "cutlass":
                try:
                    done = gemm is not None and gemm.launch(ins, device, outs)
                except Exception as e:  # noqa: BLE001  (the DSL's compile / launch errors)
                    _log_once(f"the CUTLASS GEMM {kernel.name} failed ({type(e).__name__}: "
                              f"{e}): the Triton template runs it")
                    kernel._cutlass = None
                    raise RuntimeError("CUTLASS GEMM failed") from e
                if not done:
                    raise RuntimeError("the operands' layout is not one TMA reads")
                return
            grid, constants, options = kernel.launch_config(False, config)
            fn[(grid,)](*args, *ptrs, kernel.size, *strides, **constants,
                        **dict(aot.OPTIONS, **options))
        config = _config(kernel, device, run, gemm is not None)
        if gemm is not None and _gemm_backend() == "cutlass":
            config = {"backend": "cutlass"}
        try:
            run(config)
        except RuntimeError:
            if not (config and config.get("backend") == "cutlass"):
                raise
            run(None)   # CUTLASS could not take these buffers: the Triton template
    return outs


def _gemm_backend():
    """``$STARLING_GPU_GEMM``: "auto" (default: the autotuner's choice, else Triton), "triton"
    or "cutlass" (CUTLASS wherever it renders the product)."""
    choice = os.environ.get("STARLING_GPU_GEMM", "auto")
    if choice not in ("auto", "triton", "cutlass"):
        raise ValueError(f"STARLING_GPU_GEMM must be 'auto', 'triton' or 'cutlass', got "
                         f"{choice!r}")
    return choice


_LOGGED_GEMM = set()


def _cutlass_gemm(kernel, program, device):
    """The CUTLASS GEMM of a product's kernel (rendered once), or None: not a product, Triton
    chosen, not a Hopper GPU (the kernels use sm_90a's wgmma and TMA), the CUTLASS DSL not
    installed, or a product / epilogue it does not express (logged once per reason)."""
    if program is None or kernel.tiles is None or _gemm_backend() == "triton" or not any(
            e.primitive.name == "dot_general" for e in program.eqns):   # (grouped products)
        return None
    import cupy
    if cupy.cuda.Device(device.id).compute_capability != "90":
        _log_once("the CUTLASS GEMMs are written for Hopper (sm_90a) GPUs: the Triton "
                  "template runs products on this one")
        return None
    if "_cutlass" not in kernel.__dict__:
        from ..cutlass import gemm as cutlass_gemm
        kernel._cutlass = None
        if cutlass_gemm.available():
            try:
                kernel._cutlass = cutlass_gemm.render(program, kernel.name)
            except cutlass_gemm.NotRendered as e:
                _log_once(f"the CUTLASS GEMM does not take {e}: the Triton template runs it")
    return kernel._cutlass


def _log_once(message):
    if message not in _LOGGED_GEMM:
        _LOGGED_GEMM.add(message)
        logger.info("starling: %s", message)


def launch_kernel_equation(kernel, consts, bufs, device, program=None):
    """The outputs of a ``triton_kernel`` equation (``consts``: its sub-Program's constants;
    ``program``: the sub-Program) launched on ``device``; ``Kernel.finish`` (a host step) runs
    on host copies."""
    outs = launch(kernel, list(consts) + list(bufs), device, program)
    if kernel.finish is None:
        return outs
    return [cuda.to_device(o, device) for o in kernel.finish([cuda.to_host(o) for o in outs])]


def _bid(x, *, shape, broadcast_dimensions):
    import cupy
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return cupy.broadcast_to(x.reshape(expanded), shape)


def _concatenate(*xs, dimension):
    import cupy
    return cupy.concatenate(xs, axis=dimension)


# Layout primitives run on the device buffers themselves (views where cupy can make them, read
# through their strides by the kernels): a host round trip for each transpose of a training step
# would cost more than its kernels. Elements are moved as they are stored (bits for bfloat16 /
# float8), so every dtype takes these paths.
_ON_DEVICE = {
    "reshape": lambda x, *, new_sizes: x.reshape(new_sizes),
    "transpose": lambda x, *, permutation: x.transpose(permutation),
    "squeeze": lambda x, *, dimensions: x.squeeze(axis=tuple(dimensions)),
    "broadcast_in_dim": _bid,
    "slice": lambda x, *, start_indices, limit_indices, strides: x[tuple(
        slice(s, lim, st) for s, lim, st in zip(start_indices, limit_indices,
                                                strides or (1,) * len(start_indices)))],
    "concatenate": _concatenate,
}


def _call(prog, kernel_p, args, device):
    return run(prog, kernel_p, prog.consts, args, device)


def _switch(eqn, ins, kernel_p, device):
    branches = eqn.params["branches"]
    i = int(np.clip(int(np.asarray(cuda.to_host(ins[0]))), 0, len(branches) - 1))
    return _call(branches[i], kernel_p, ins[1:], device)


def _while(eqn, ins, kernel_p, device):
    params = eqn.params
    nc, nb, most = params["n_cond"], params["n_body"], params["max_iterations"]
    cc, bc, carry = ins[:nc], ins[nc:nc + nb], list(ins[nc + nb:])
    i = 0
    while most is None or i < most:
        (pred,) = _call(params["cond"], kernel_p, list(cc) + carry, device)
        if not bool(cuda.to_host(pred)):   # the one value a host-driven loop reads back
            break
        carry = _call(params["body"], kernel_p, list(bc) + carry, device)[:len(carry)]
        i += 1
    return carry


def _scan(eqn, ins, kernel_p, device):
    import cupy
    p = eqn.params
    nc, nk, body = p["num_consts"], p["num_carry"], p["body"]
    consts, carry = list(ins[:nc]), list(ins[nc:nc + nk])
    xs = [_operand(x, v.aval, device) for x, v in zip(ins[nc + nk:], eqn.invars[nc + nk:])]
    steps = []
    for i in (range(p["length"] - 1, -1, -1) if p["reverse"] else range(p["length"])):
        outs = _call(body, kernel_p, consts + carry + [cuda.DeviceBuffer(x.data[i], x.dtype)
                                                       for x in xs], device)
        carry, ys = outs[:nk], outs[nk:]
        steps.append(ys)
    if p["reverse"]:
        steps.reverse()
    stacked = []
    for k, v in enumerate(body.outvars[nk:]):
        if steps:
            with cupy.cuda.Device(device.id):
                stacked.append(cuda.DeviceBuffer(cupy.stack([s[k].data for s in steps]),
                                                 v.aval.dtype))
        else:
            stacked.append(cuda.empty((0,) + tuple(v.aval.shape), v.aval.dtype, device))
    return carry + stacked


# Control flow driven from the host with its operands left on the GPU: a loop's predicate and a
# switch's index are the only values copied back
_CONTROL = {"switch": _switch, "while": _while, "scan": _scan}


def _const(c):
    """The buffer of a Program constant (an Array on either platform, or a host value)."""
    b = getattr(c, "_buf", c)
    return b if isinstance(b, cuda.DeviceBuffer) else np.asarray(b)


def run(program, kernel_p, consts, bufs, device):
    """The outputs (DeviceBuffers) of ``program`` (a TritonExecutable's Program) on ``device``
    for its constants ``consts`` (host buffers) and operands ``bufs`` (DeviceBuffers)."""
    from ....core.ir import Literal
    env = {}

    def read(v):
        return np.asarray(v.val, v.aval.dtype) if isinstance(v, Literal) else env[v]

    for v, c in zip(program.constvars, consts):
        env[v] = _const(c)
    for v, b in zip(program.invars, bufs):
        env[v] = b
    with running_on(device):
        for eqn in program.eqns:
            ins = [read(v) for v in eqn.invars]
            if eqn.primitive is kernel_p:
                sub = eqn.params["program"]
                outs = launch_kernel_equation(eqn.params["kernel"],
                                              [_const(c) for c in sub.consts], ins, device,
                                              sub)
            elif eqn.primitive.name in _CONTROL:
                outs = _CONTROL[eqn.primitive.name](eqn, ins, kernel_p, device)
            elif eqn.primitive.name in _ON_DEVICE and all(
                    isinstance(x, cuda.DeviceBuffer) for x in ins):
                outs = [cuda.DeviceBuffer(
                    _ON_DEVICE[eqn.primitive.name](*[x.data for x in ins], **eqn.params),
                    eqn.outvars[0].aval.dtype)]
            else:
                if any(isinstance(x, cuda.DeviceBuffer) for x in ins):
                    cuda.host_fallback_logged(eqn.primitive.name)
                outs = eqn.primitive.impl(*[cuda.to_host(x) for x in ins], **eqn.params)
                if not eqn.primitive.multiple_results:
                    outs = [outs]
            for v, o in zip(eqn.outvars, outs):
                env[v] = o
    return [_operand(read(v), v.aval, device) for v in program.outvars]
