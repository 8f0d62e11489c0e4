"""``starling.numpy``: the Array API standard (2023.12) plus the NumPy names researchers use.

Import it as ``import starling.numpy as snp``. Every function here is a primitive declared in
src/arrays/ops/ (one file per family) or a composition of primitives.
"""
from __future__ import annotations

from ...core.dtypes import (  # noqa: F401
    bfloat16, bool_, complex64, complex128, finfo, float0, float4_e2m1fn, float8_e4m3fn,
    float8_e5m2, float16, float32, float64, iinfo, int8, int16, int32, int64, uint8, uint16,
    uint32, uint64,
)
from ..array import Array  # noqa: F401
from ..ops.arithmetic import *  # noqa: F401,F403
from ..ops.math import *  # noqa: F401,F403
from ..ops.reductions import *  # noqa: F401,F403
from ..ops.cumulative import *  # noqa: F401,F403
from ..ops.sorting import *  # noqa: F401,F403
from ..ops.shape import *  # noqa: F401,F403
from ..ops.creation import *  # noqa: F401,F403
from ..ops.indexing import *  # noqa: F401,F403
from ..ops.linear import *  # noqa: F401,F403
# numeric extras: differences, interpolation, histograms, set operations, convolution,
# covariance, polynomials, windows
from ..ops.differences import *  # noqa: F401,F403
from ..ops.interpolation import *  # noqa: F401,F403
from ..ops.set_ops import *  # noqa: F401,F403
from ..ops.histograms import *  # noqa: F401,F403
from ..ops.convolution import *  # noqa: F401,F403
from ..ops.covariance import *  # noqa: F401,F403
from ..ops.polynomials import *  # noqa: F401,F403
from ..ops.windows import *  # noqa: F401,F403
from .dtype_functions import *  # noqa: F401,F403
from .constants import *  # noqa: F401,F403
from . import fft, linalg  # noqa: F401

__array_api_version__ = "2023.12"

bool = bool_  # noqa: A001  (the Array API names the dtype `bool`)

from .. import methods as _methods  # noqa: E402

_methods.install(__import__(__name__, fromlist=["_"]))
