"""The ``triton`` backend: fused elementwise / reduction kernels and matmuls with fused epilogues
rendered as Triton from the scalar formula language (core/scalar.py), run by Triton's
interpreter over host buffers (CI, no GPU) and compiled ahead of time for GPU targets (sm_90a).

Modules: ``backend`` (the backend object, its fusion policy and host schedule), ``codegen``
(kernels), ``formulas`` (the scalar formulas rendered as Triton), ``device_math`` (the math
library of the kernels: libdevice, or NumPy under the interpreter), ``buffers`` (NumPy arrays as
the interpreter's tensors), ``matmul`` (products with fused epilogues), ``autotune`` (launch
configurations timed on a device, cached on disk), ``aot`` (compilation for a GPU target
without a GPU). Importing this package does not import triton; compiling does.
"""
from .backend import TritonBackend, TritonPolicy, launch  # noqa: F401
