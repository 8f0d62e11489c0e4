"""Starling: a JAX-style functional array library.

Users write pure functions over immutable arrays (``starling.numpy``), draw randomness from
explicit keys (``starling.random``), and compose transformations.
"""
from __future__ import annotations

import os as _os
import sys as _sys
import warnings as _warnings

from ._install import import_native as _import_native

# First, so that a folder shadowing the installed package or an unbuilt source tree fails here
# with an explanation rather than later with a bare "No module named starling._native".
_import_native(_os.path.dirname(_os.path.abspath(__file__)))

# NumPy floating-point warnings (divide by zero, overflow, invalid) are not raised by Starling's
# kernels: results follow IEEE 754 (inf / nan) silently, as in JAX. np.errstate would cost ~2 us a
# call, so the filter is scoped to Starling's modules instead.
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"starling\.")

from . import tree, tree_util  # noqa: E402,F401
from .arrays.array import Array  # noqa: E402,F401
from .arrays.device import (Device, device_count, device_put, devices,  # noqa: E402,F401
                            local_device_count, local_devices, process_index)
from . import config  # noqa: E402,F401
from .arrays import numpy  # noqa: E402,F401
from .arrays.numpy import fft as _fft, linalg as _linalg  # noqa: E402
from . import linalg  # noqa: E402,F401

_sys.modules[__name__ + ".numpy"] = numpy
_sys.modules[__name__ + ".numpy.fft"] = _fft
_sys.modules[__name__ + ".numpy.linalg"] = _linalg

from .arrays import random  # noqa: E402,F401
_sys.modules[__name__ + ".random"] = random

__version__ = "0.1.0"

from .arrays.ops.autodiff import stop_gradient  # noqa: E402,F401
from .transforms.checkpoint import checkpoint, remat  # noqa: E402,F401
from .core.avals import ShapeDtypeStruct  # noqa: E402,F401
from .transforms import debug  # noqa: E402,F401
from .transforms.debug import (  # noqa: E402,F401
    block_until_ready, device_get, io_callback, pure_callback,
)
from .transforms.custom import custom_jvp, custom_vjp  # noqa: E402,F401
from .transforms.grad import (  # noqa: E402,F401
    grad, hessian, jacfwd, jacrev, jvp, linearize, value_and_grad, vjp,
)
from .transforms.stage import eval_shape, make_ir  # noqa: E402,F401
from .transforms.vmap import vmap  # noqa: E402,F401
from .transforms.control import cond, fori_loop, map, scan, switch, while_loop  # noqa: E402,F401,A004
from . import test_util  # noqa: E402,F401
from .transforms.compile import compile, jit, set_default_backend  # noqa: E402,F401,A004
from .lowering.export import deserialize, export  # noqa: E402,F401
from .lowering.debug import DebugMode, debug_diff, debug_mode  # noqa: E402,F401
from .transforms.dynamic_spec import ShapeVar, ShapesSpec, dynamic_spec  # noqa: E402,F401

# The nn shim (built on the public API above), optimizers, and weight files.
from . import nn  # noqa: E402,F401
from .nn import optim  # noqa: E402,F401
_sys.modules[__name__ + ".optim"] = optim
from .nn.serialization import load, save  # noqa: E402,F401

# Sharded arrays and collectives (built on the public API above).
from . import collectives  # noqa: E402,F401
from . import sharding  # noqa: E402,F401
from . import lax  # noqa: E402,F401
from .arrays import scipy  # noqa: E402,F401
_sys.modules[__name__ + ".scipy"] = scipy
for _sub in scipy.__all__:
    _sys.modules[f"{__name__}.scipy.{_sub}"] = getattr(scipy, _sub)
for _sub in scipy.stats.__all__:   # the distributions' modules: starling.scipy.stats.norm, ...
    if isinstance(getattr(scipy.stats, _sub), type(_sys)):
        _sys.modules[f"{__name__}.scipy.stats.{_sub}"] = getattr(scipy.stats, _sub)
del _sub
from .collectives import shard_map, visualize_sharding  # noqa: E402,F401
