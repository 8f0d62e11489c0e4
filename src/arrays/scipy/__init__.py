"""``starling.scipy``: SciPy's names over Starling's primitives, as JAX's ``jax.scipy``
(``starling.scipy.linalg``, ``optimize``, ``special``).

Each submodule is a namespace of its own; this file only imports them.
"""
from . import linalg, optimize, special

__all__ = ["linalg", "optimize", "special"]
