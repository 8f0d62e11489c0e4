"""GPU: Starling's Triton kernels vs PyTorch (eager and torch.compile) and the copy bandwidth.

Runs only where a CUDA GPU, torch and triton are installed; elsewhere it says so and exits 0.
Cases (float32 / bfloat16, 64M elements; GB/s = bytes read + written per second):

  copy          x.clone(): the device's copy bandwidth, the roof of memory-bound kernels
  cheap         x * 2 + 1
  chain         tanh(x) * 0.5 + exp(-x * x) * y - maximum(x, y) ** 2   (two inputs)
  chain_bf16    the chain on bfloat16 operands (computed in float32, rounded once)

Starling's kernel is the one its triton backend generates for the function (codegen.Kernel),
compiled by Triton's JIT and launched on torch's CUDA tensors (which speak the pointer protocol
Triton takes); it is checked against torch's result first. Targets (issue: GPU backends): a
fused elementwise chain at >= 85% of the copy bandwidth; bf16 GEMM 8192^3 >= 90% of
torch.matmul; GEMM + bias + GELU faster than torch.compile's; the float8 scaled GEMM
(``lax.scaled_matmul``, e4m3 x e4m3 -> bfloat16, per-tensor scales) beside torch._scaled_mm;
and a whole compiled training step on arrays on the GPU (src/arrays/cuda.py) beside torch.

Run: ``python benchmarks/gpu.py [--quick]``. Timings: CUDA events, median of the rounds, the
contenders interleaved round by round.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def _available():
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        return f"needs torch and triton ({e})"
    if not torch.cuda.is_available():
        return "no CUDA device"
    return None


def _kernel(fn, *arrays):
    import starling.numpy as snp
    from starling.lowering import backends
    from starling.lowering.pipeline import run_pipeline
    from starling.transforms.stage import make_ir
    prog = run_pipeline(make_ir(fn)(*[snp.asarray(a) for a in arrays]))
    exe = backends.get_backend("triton").compile(prog)
    if len(exe.kernels) != 1 or len(exe.program.eqns) != 1:
        raise RuntimeError(f"{fn.__name__}: expected one kernel, got\n{exe.program}")
    return next(iter(exe.kernels.values()))


def _launcher(kernel, config=None):
    """Runs ``kernel`` on torch CUDA tensors with launch configuration ``config``; returns its
    last output."""
    from starling.lowering.backends.triton import aot
    jit = kernel.load(interpret=False)
    n = kernel.size
    grid, constants, options = kernel.launch_config(interpret=False, config=config)
    options = dict(aot.OPTIONS, **({"num_warps": 4} | options))

    def run(*tensors):
        import torch
        outs = [torch.empty(a.shape, device="cuda", dtype=_torch_dtype(a.dtype))
                for a in kernel.out_avals]
        bits = [_bits(t) for t in tensors]
        out_bits = [_bits(o) for o in outs]
        strides = []
        for t, shape in zip(tensors, kernel.stride_shapes):
            off = 0 if shape is None else len(shape) - t.dim()
            strides += [0 if shape is not None and t.shape[d] == 1 and shape[off + d] != 1
                        else t.stride(d) for d in range(t.dim())]
        jit[(grid,)](*bits, *out_bits, n, *strides, **constants, **options)
        return outs[-1]
    return run


def _torch_dtype(dt):
    import ml_dtypes
    import torch
    return {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16,
            np.dtype(ml_dtypes.bfloat16): torch.bfloat16,
            np.dtype(ml_dtypes.float8_e4m3fn): torch.float8_e4m3fn,
            np.dtype(ml_dtypes.float8_e5m2): torch.float8_e5m2}[np.dtype(dt)]


def _bits(t):
    """The kernels hold bfloat16 and float8 values as their bits (triton/formulas.py)."""
    import torch
    if t.dtype == torch.bfloat16:
        return t.view(torch.uint16)
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return t.view(torch.uint8)
    return t


def _tuned(kernel, *tensors):
    """``_launcher`` of ``kernel`` with the configuration autotune.py picks on this device
    (timed once per machine; the winner is cached on disk)."""
    import torch
    from starling.lowering.backends.triton import autotune

    def seconds(config):
        run = _launcher(kernel, config)
        return _time({"c": lambda: run(*tensors)}, 3)["c"]
    config = autotune.choose(kernel, torch.cuda.get_device_name(), seconds)
    return _launcher(kernel, config)


def _time(fns, rounds):
    import torch
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                fn()
            end.record()
            torch.cuda.synchronize()
            times[name].append(start.elapsed_time(end) / 10 / 1e3)
    return {k: float(np.median(v)) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    why = _available()
    if why:
        print(f"benchmarks/gpu.py: {why}: nothing to measure")
        return 0
    import ml_dtypes
    import torch
    import starling.numpy as snp
    n = (1 << 24) if args.quick else (1 << 26)
    rounds = 5 if args.quick else 15
    print(f"device: {torch.cuda.get_device_name()}, {n} elements, median of {rounds} rounds")

    def cheap(x):
        return x * 2 + 1

    def chain(x, y):
        return snp.tanh(x) * 0.5 + snp.exp(-x * x) * y - snp.maximum(x, y) ** 2

    def tchain(x, y):
        return torch.tanh(x) * 0.5 + torch.exp(-x * x) * y - torch.maximum(x, y) ** 2

    cases = [("cheap", cheap, lambda x: x * 2 + 1, 1, np.float32, torch.float32),
             ("chain", chain, tchain, 2, np.float32, torch.float32),
             ("chain_bf16", chain, tchain, 2, ml_dtypes.bfloat16, torch.bfloat16)]
    x = torch.randn(n, device="cuda")
    copy_s = _time({"copy": lambda: x.clone()}, rounds)["copy"]
    copy_gbs = 2 * x.numel() * 4 / copy_s / 1e9
    print(f"{'case':<12} {'starling GB/s':>14} {'% of copy':>10} {'torch eager':>12} "
          f"{'torch.compile':>14} {'vs compile':>11}")
    print(f"{'copy':<12} {copy_gbs:>14.0f} {100:>10.0f}")
    for name, sfn, tfn, nin, ndt, tdt in cases:
        kernel = _kernel(sfn, *[np.zeros(n, ndt)] * nin)   # shapes are part of the kernel
        ins = [torch.randn(n, device="cuda").to(tdt) for _ in range(nin)]
        ours = _tuned(kernel, *ins)
        compiled = torch.compile(tfn)
        want = tfn(*ins).float()
        got = ours(*ins).float()
        if not torch.allclose(got, want, rtol=2e-2 if tdt == torch.bfloat16 else 1e-5,
                              atol=1e-5, equal_nan=True):
            raise SystemExit(f"{name}: Starling's kernel disagrees with torch")
        t = _time({"starling": lambda: ours(*ins), "eager": lambda: tfn(*ins),
                   "compile": lambda: compiled(*ins)}, rounds)
        nbytes = (nin + 1) * n * ins[0].element_size()
        gbs = {k: nbytes / v / 1e9 for k, v in t.items()}
        print(f"{name:<12} {gbs['starling']:>14.0f} {100 * gbs['starling'] / copy_gbs:>10.0f} "
              f"{gbs['eager']:>12.0f} {gbs['compile']:>14.0f} "
              f"{t['compile'] / t['starling']:>10.2f}x")
    _gemms(rounds, args.quick)
    _scaled_gemm(rounds, args.quick)
    _training_step(rounds, args.quick)
    return 0


def _training_step(rounds, quick):
    """A whole program on the GPU: ``compile`` of an MLP's training step (value_and_grad and an
    SGD update, bfloat16) on arrays put on the GPU, which picks the triton backend; beside the
    same step in torch eager and with torch.compile (forward compiled, backward by AOTAutograd),
    ms per step."""
    import ml_dtypes
    import torch
    import starling as st
    import starling.numpy as snp
    b, d, h = (4096, 1024, 4096) if quick else (8192, 2048, 8192)
    rng = np.random.default_rng(0)
    bf = ml_dtypes.bfloat16
    host = [(rng.standard_normal((d, h)) / np.sqrt(d)).astype(bf),
            (rng.standard_normal((h, d)) / np.sqrt(h)).astype(bf),
            rng.standard_normal((b, d)).astype(bf), rng.standard_normal((b, d)).astype(bf)]

    def loss(w1, w2, x, t):
        return snp.mean((snp.tanh(x @ w1) @ w2 - t) ** 2)

    @st.compile
    def step(w1, w2, x, t):
        value, (g1, g2) = st.value_and_grad(loss, argnums=(0, 1))(w1, w2, x, t)
        return value, w1 - 0.01 * g1, w2 - 0.01 * g2

    ours = [st.device_put(v, "cuda") for v in host]
    theirs = [torch.tensor(v.astype(np.float32), device="cuda").to(torch.bfloat16)
              for v in host]

    def tloss(w1, w2, x, t):
        return ((torch.tanh(x @ w1) @ w2 - t) ** 2).mean()

    def tstep(lossfn):
        def run():
            w1, w2 = (w.detach().requires_grad_() for w in theirs[:2])
            value = lossfn(w1, w2, *theirs[2:])
            value.backward()
            return value.detach(), w1.detach() - 0.01 * w1.grad, w2.detach() - 0.01 * w2.grad
        return run
    eager, compiled = tstep(tloss), tstep(torch.compile(tloss))
    got, want = step(*ours), eager()
    if not np.allclose(float(got[0]), float(want[0]), rtol=2e-2):
        raise SystemExit(f"training step: loss {float(got[0])} vs torch {float(want[0])}")
    for g, w in zip(got[1:], want[1:]):
        if not np.allclose(np.asarray(g).astype(np.float32), w.float().cpu().numpy(),
                           rtol=2e-2, atol=2e-2):
            raise SystemExit("training step: parameters disagree with torch")
    t = _time({"starling": lambda: step(*ours), "eager": eager, "compile": compiled}, rounds)
    ms = {k: v * 1e3 for k, v in t.items()}
    print(f"MLP training step bf16 (batch {b}, {d} -> {h} -> {d}): starling "
          f"{ms['starling']:.2f} ms, torch eager {ms['eager']:.2f} "
          f"({t['eager'] / t['starling']:.2f}x), torch.compile {ms['compile']:.2f} "
          f"({t['compile'] / t['starling']:.2f}x)")


def _scaled_gemm(rounds, quick):
    """float8 e4m3 GEMM with per-tensor scales to bfloat16: Starling's scaled_matmul kernel
    (float8 wgmma) vs torch._scaled_mm (cuBLASLt), TFLOP/s."""
    import ml_dtypes
    import torch
    from starling import lax
    n = 4096 if quick else 8192
    e4m3, bf = ml_dtypes.float8_e4m3fn, ml_dtypes.bfloat16
    one = np.ones((1, 1), np.float32)
    kern = _kernel(lambda a, b, sa, sb: lax.scaled_matmul(a, b, sa, sb, bf),
                   np.zeros((n, n), e4m3), np.zeros((n, n), e4m3), one, one)
    a = (torch.randn(n, n, device="cuda") * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(n, n, device="cuda") * 4).to(torch.float8_e4m3fn).t().contiguous().t()
    sa = torch.tensor(0.5, device="cuda")
    sb = torch.tensor(0.25, device="cuda")
    ours = _tuned(kern, a, b, sa.view(1, 1), sb.view(1, 1))

    def theirs():
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    if not torch.allclose(ours(a, b, sa.view(1, 1), sb.view(1, 1)).float(), theirs().float(),
                          rtol=3e-2, atol=1.0):
        raise SystemExit("scaled GEMM: Starling's kernel disagrees with torch._scaled_mm")
    t = _time({"ours": lambda: ours(a, b, sa.view(1, 1), sb.view(1, 1)),
               "torch": theirs}, rounds)
    tf = {k: 2 * n ** 3 / v / 1e12 for k, v in t.items()}
    print(f"fp8 scaled GEMM {n}^3 (e4m3 -> bf16): starling {tf['ours']:.0f} TFLOP/s, "
          f"torch._scaled_mm {tf['torch']:.0f} ({t['torch'] / t['ours']:.2f}x)")


def _gemms(rounds, quick):
    """bf16 GEMM (target >= 90% of torch.matmul) and GEMM + bias + GELU (target: faster than
    torch.compile), TFLOP/s; Starling's kernels with the tiles autotune.py picks."""
    import ml_dtypes
    import torch
    import starling.nn.functional as snf
    n = 4096 if quick else 8192
    bf = ml_dtypes.bfloat16
    z = np.zeros((n, n), bf)
    mm = _kernel(lambda a, b: a @ b, z, z)
    epi = _kernel(lambda a, b, c: snf.gelu(a @ b + c), z, z, np.zeros(n, bf))
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    ours_mm, ours_epi = _tuned(mm, a, b), _tuned(epi, a, b, c)

    def tepi(a, b, c):
        return torch.nn.functional.gelu(a @ b + c)
    compiled = torch.compile(tepi)
    for got, want in ((ours_mm(a, b), a @ b), (ours_epi(a, b, c), tepi(a, b, c))):
        if not torch.allclose(got.float(), want.float(), rtol=3e-2, atol=3e-1):
            raise SystemExit("GEMM: Starling's kernel disagrees with torch")
    fns = {"mm": lambda: ours_mm(a, b), "torch_mm": lambda: a @ b,
           "epi": lambda: ours_epi(a, b, c), "compile": lambda: compiled(a, b, c)}
    fns.update(_cutlass_contenders(n, a, b, c, tepi))
    t = _time(fns, rounds)
    tf = {k: 2 * n ** 3 / v / 1e12 for k, v in t.items()}
    print(f"bf16 GEMM {n}^3: starling {tf['mm']:.0f} TFLOP/s, torch.matmul {tf['torch_mm']:.0f}"
          f" ({t['torch_mm'] / t['mm']:.2f}x; target >= 0.90)")
    print(f"GEMM + bias + GELU {n}^3: starling {tf['epi']:.0f} TFLOP/s, torch.compile "
          f"{tf['compile']:.0f} ({t['compile'] / t['epi']:.2f}x; target > 1)")
    for key, what in (("cutlass_mm", "bf16 GEMM"), ("cutlass_epi", "GEMM + bias + GELU")):
        if key in t:
            print(f"{what} {n}^3 as Starling's CUTLASS DSL kernel: {tf[key]:.0f} TFLOP/s "
                  f"({t['torch_mm' if key == 'cutlass_mm' else 'compile'] / t[key]:.2f}x of "
                  f"{'torch.matmul' if key == 'cutlass_mm' else 'torch.compile'})")


def _cutlass_contenders(n, a, b, c, tepi):
    """Starling's CUTLASS DSL GEMMs (plain, and with the bias + GELU epilogue) on the same torch
    tensors (their bits seen as cupy buffers), checked against torch first; none where the
    CUTLASS DSL or cupy is missing or the kernel fails (said, and the rest goes on)."""
    import ml_dtypes
    import torch
    try:
        import cupy
        import starling.nn.functional as snf
        import starling.numpy as snp
        from starling.arrays import cuda
        from starling.lowering import backends
        from starling.lowering.backends.cutlass import gemm
        from starling.lowering.pipeline import run_pipeline
        from starling.transforms.stage import make_ir
        bf = ml_dtypes.bfloat16
        dev = cuda.cuda_devices()[0]

        def buf(t):
            return cuda.DeviceBuffer(cupy.from_dlpack(t.view(torch.uint16)), bf)

        out = {}
        z = np.zeros((n, n), bf)
        for key, fn, args, ref in (
                ("cutlass_mm", lambda x, y: x @ y, (a, b), lambda: a @ b),
                ("cutlass_epi", lambda x, y, v: snf.gelu(x @ y + v), (a, b, c),
                 lambda: tepi(a, b, c))):
            zs = [z, z] + ([np.zeros(n, bf)] if len(args) == 3 else [])
            prog = run_pipeline(make_ir(fn)(*[snp.asarray(v) for v in zs]))
            exe = backends.get_backend("triton").compile(prog)
            (eqn,) = [e for e in exe.program.eqns if e.primitive.name == "fused_matmul"]
            g = gemm.render(eqn.params["program"], key)
            res = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
            ins, outs = [buf(t) for t in args], [buf(res)]

            def run(g=g, ins=ins, outs=outs):
                if not g.launch(ins, dev, outs):
                    raise RuntimeError("operands not readable by TMA")
                return res
            if not torch.allclose(run().float(), ref().float(), rtol=3e-2, atol=3e-1):
                raise RuntimeError(f"{key} disagrees with torch")
            out[key] = run
        return out
    except Exception as e:  # noqa: BLE001  (report and go on with the other contenders)
        print(f"CUTLASS DSL GEMM not measured: {type(e).__name__}: {e}")
        return {}


if __name__ == "__main__":
    sys.exit(main())
