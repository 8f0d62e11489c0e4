"""The ``cpp`` backend: fused loops rendered as C++, compiled by the system compiler into one
shared object per program, run by the native runtime (thread pool, GEMM).

Modules: ``backend`` (the backend object, its fusion policy and executables), ``codegen``
(kernels), ``formulas`` (the scalar formulas rendered as C++), ``lowp`` (low-precision float
conversions), ``reductions``, ``indexing`` (gather / scatter kernels), ``gemm`` (GEMM with
fused epilogues), ``dims`` / ``dynamic`` (symbolic shapes), ``runtime`` (loading, launching).
"""
from .backend import CppBackend, CppPolicy, cpp_passes  # noqa: F401
