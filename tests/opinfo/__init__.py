"""Op metadata for generated tests: one OpInfo per public op of starling.numpy.

Each family module in this package appends OpInfos to REGISTRY. The generated tests
(tests/test_ops_generated.py) check every OpInfo against its NumPy reference on every dtype it
lists, on its sample inputs (which include hard cases: size-0/size-1 dims, NaN/inf, -0.0,
integer overflow) and on hypothesis-drawn shapes where ``hypothesis_shapes`` is set.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

REGISTRY: list["OpInfo"] = []


@dataclasses.dataclass
class Sample:
    """One call: ``op(*args, **kwargs)``; args are NumPy arrays / Python values."""
    args: tuple
    kwargs: dict = dataclasses.field(default_factory=dict)
    name: str = ""


@dataclasses.dataclass
class OpInfo:
    """Metadata of one op.

    name: attribute of starling.numpy (dotted for submodules: "linalg.inv", "fft.fft"), or of
        starling for "scipy." and "lax." names.
    ref: NumPy/SciPy reference taking the same arguments (as NumPy arrays).
    dtypes: the dtypes to test.
    samples: ``samples(rng, dtype) -> list[Sample]``.
    rtol/atol: default tolerances; ``tols`` overrides per dtype name.
    expected_dtype: ``expected_dtype(dtype, sample) -> np.dtype`` when it differs from NumPy's
        (e.g. JAX promotion: sin(int) is float32); None compares values only after casting.
    check_dtype: compare result dtypes (with expected_dtype, or NumPy's result dtype).
    differentiable: whether check_grads applies (False for integer/bool-valued and
        piecewise-constant ops, whose JVP must be zero).
    grad_samples: ``grad_samples(rng, dtype) -> list[Sample]`` for check_grads (defaults to the
        samples whose float arguments and outputs are finite).
    grad_input: applied to each differentiated argument before the op in check_grads: the
        ops that take their input as symmetric / Hermitian (cholesky, eigh) define derivatives
        along Hermitian directions only, so they are checked as ``op(sym(x))``.
    vmap: whether the generated vmap-vs-loop test applies (False for eager-only ops).
    """
    name: str
    ref: Callable
    dtypes: tuple
    samples: Callable
    rtol: float = 1e-6
    atol: float = 1e-6
    tols: dict = dataclasses.field(default_factory=dict)
    expected_dtype: Callable | None = None
    check_dtype: bool = True
    differentiable: bool = True
    hypothesis_shapes: bool = False
    nin: int = 1
    eager_only: bool = False
    grad_samples: Callable | None = None   # samples for check_grads (default: finite samples)
    grad_input: Callable | None = None
    grad_tol: float = 1e-5
    grad_order: int = 2
    vmap: bool = True
    sorted_args: tuple = ()   # argument positions that must stay sorted in vmap variants
    vmap_variants: str = "roll"   # how vmap batch variants are made: "roll" entries, "scale" 1,2,3

    def tol(self, dtype):
        default = {"float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2), "float32": (1e-5, 1e-6),
                   "complex64": (1e-5, 1e-6), "float8_e4m3fn": (1e-1, 1e-1),
                   "float8_e5m2": (2e-1, 2e-1), "float4_e2m1fn": (5e-1, 5e-1)}
        name = np.dtype(dtype).name
        if name in self.tols:
            return self.tols[name]
        if name in default:
            r, a = default[name]
            return max(r, self.rtol), max(a, self.atol)
        return self.rtol, self.atol


def register(*infos):
    REGISTRY.extend(infos)
    return infos


def resolve(name):
    """``name`` in starling.numpy, or in starling.lax / starling.scipy for names starting with
    ``lax.`` / ``scipy.`` ("lax.igamma", "scipy.special.gammaln")."""
    import starling
    import starling.numpy as snp
    obj = starling if name.split(".")[0] in ("lax", "scipy") else snp
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj
