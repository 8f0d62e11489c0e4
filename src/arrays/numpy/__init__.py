"""``starling.numpy``: the Array API standard (2024.12) plus the NumPy names researchers use.

Import it as ``import starling.numpy as snp``. Every function here is a primitive declared in
src/arrays/ops/ (one file per family) or a composition of primitives.
"""
from __future__ import annotations

from ...core.dtypes import float0  # noqa: F401
from ..array import Array  # noqa: F401
from ..array import Array as ndarray  # noqa: F401  (jnp.ndarray: isinstance(x, snp.ndarray))
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
from .scalar_types import *  # noqa: F401,F403
# NumPy's structural / API names (index helpers, nan-statistics, partition, bits, predicates).
from ..ops.index_tricks import *  # noqa: F401,F403
from ..ops.reductions_nan import *  # noqa: F401,F403
from ..ops.sorting_partition import *  # noqa: F401,F403
from ..ops.shape_numpy import *  # noqa: F401,F403
from ..ops.bits import *  # noqa: F401,F403
from ..ops.predicates import *  # noqa: F401,F403
# vectorize & co. are transformations (nested vmap) that NumPy spells as namespace functions.
from ...transforms.vectorize import *  # noqa: F401,F403
from . import fft, linalg  # noqa: F401

__array_api_version__ = "2024.12"

bool = bool_  # noqa: A001  (the Array API names the dtype `bool`)

from .. import methods as _methods  # noqa: E402

_methods.install(__import__(__name__, fromlist=["_"]))
