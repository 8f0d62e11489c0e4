"""The CUTLASS DSL (nvidia-cutlass-dsl) backend pieces: Hopper GEMMs with fused epilogues
(gemm.py) from the scalar formulas (formulas.py). Kernels launch on GPU arrays from the triton
backend's GPU runs (triton/gpu.py), where they compete with the Triton template."""
