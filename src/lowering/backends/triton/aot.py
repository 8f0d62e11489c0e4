"""Ahead-of-time compilation of Starling's Triton kernels for a GPU target, without a GPU.

``compile_kernel(kernel, arch=90)`` compiles a codegen.Kernel with Triton's compiler for
``sm_<arch>`` (``sm_90a`` for H100 / H200: Triton picks the arch-specific variant) and returns
Triton's compiled kernel (``.asm`` holds ttir / ttgir / llir / ptx / cubin). It needs no driver:
Triton's wheel ships ptxas. CI uses it to check that every kernel the backend emits reaches PTX
and a cubin for the H200, so a kernel that does not compile fails there and not on the GPU.

Floating-point contraction (``a * b + c`` into an FMA) is disabled, as in the C++ kernels, so
results round as NumPy's.
"""
from __future__ import annotations

OPTIONS = {"enable_fp_fusion": False}


def compile_kernel(kernel, arch=90, config=None, values=None):
    """Triton's CompiledKernel of ``kernel`` for ``cuda`` ``sm_<arch>`` with launch
    configuration ``config`` (autotune.py; default: the kernel's fixed GPU sizes).

    ``values``: the integer arguments of a launch by name (``n``, strides ``s<i>_<d>``), to
    compile what Triton's JIT compiles for that launch: it makes integers equal to 1 constants
    and marks pointers (16-byte aligned buffers) and integers divisible by 16 as such, which
    decides vectorised loads and asynchronous copies. Without ``values`` nothing is assumed."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    _, constants, options = kernel.launch_config(interpret=False, config=config)
    signature, attrs = kernel.signature(), {}
    if values is not None:
        for i, name in enumerate(list(signature)):
            v = values.get(name)
            if v == 1:
                signature[name], constants[name] = "constexpr", 1
            elif signature[name].startswith("*") or (v is not None and v % 16 == 0):
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=kernel.load(interpret=False), signature=signature,
                    constexprs=constants, attrs=attrs)
    return triton.compiler.compile(src, target=GPUTarget("cuda", arch, 32),
                                   options=dict(OPTIONS, **options))
