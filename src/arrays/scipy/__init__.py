"""``starling.scipy``: SciPy's names over Starling's primitives, as JAX's ``jax.scipy``
(``starling.scipy.integrate``, ``linalg``, ``ndimage``, ``optimize``, ``signal``, ``special``,
``stats``).

Each submodule is a namespace of its own; this file only imports them.
"""
from . import integrate, linalg, ndimage, optimize, signal, special, stats

__all__ = ["integrate", "linalg", "ndimage", "optimize", "signal", "special", "stats"]
