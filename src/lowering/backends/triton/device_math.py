"""``M``, the device math library of the generated Triton kernels.

On a GPU it is Triton's ``libdevice`` (correctly rounded or faithful functions; ``tl.exp`` and
friends are the fast approximate ones). Triton's interpreter (``TRITON_INTERPRET=1``, how CI and
machines without a GPU run the kernels) cannot call libdevice, so there ``M`` is
``interpreter_module()``: the same names computing with NumPy's ufuncs on the interpreter's
blocks (SciPy for erf / erfc, which NumPy lacks).
"""
from __future__ import annotations

import functools
import types

import numpy as np

NAMES = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
         "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "cbrt", "erf", "erfc",
         "rint", "floor", "ceil", "trunc", "atan2", "hypot", "copysign", "nextafter", "pow",
         "fmod", "ldexp", "popc")


def gpu_module():
    """The ``M`` of kernels compiled for a GPU: Triton's ``libdevice`` (imported on call)."""
    from triton.language.extra import libdevice
    return libdevice


def _popc(x):
    # libdevice's popc: the set bits of the pattern, as int32 (NumPy counts |x| of signed ints)
    return np.bitwise_count(x.view(f"u{x.itemsize}")).astype(np.int32)


def _numpy_functions():
    import scipy.special as sc
    np_names = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
                "acosh": np.arccosh, "atanh": np.arctanh, "atan2": np.arctan2, "pow": np.power,
                "erf": sc.erf, "erfc": sc.erfc, "popc": _popc}
    return {n: np_names.get(n) or getattr(np, n) for n in NAMES}


@functools.lru_cache(maxsize=None)
def interpreter_module():
    """The NumPy-backed ``M`` for kernels run by Triton's interpreter."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def lift(fn):
        def call(*xs):
            data = [x.handle.data for x in xs]
            with np.errstate(all="ignore"):
                out = np.asarray(fn(*data))
            ref = xs[0]
            if fn is _popc:
                return tl.tensor(TensorHandle(out, tl.int32), ref.type.with_element_ty(tl.int32))
            return tl.tensor(TensorHandle(out, ref.handle.dtype.scalar), ref.type)
        return call

    return types.SimpleNamespace(**{n: lift(f) for n, f in _numpy_functions().items()})
