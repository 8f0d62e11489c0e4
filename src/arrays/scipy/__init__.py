"""``starling.scipy``: SciPy's names over Starling's primitives (``starling.scipy.linalg``,
``starling.scipy.special``).

Each submodule is a namespace of its own; this file only imports them.
"""
from . import linalg, special

__all__ = ["linalg", "special"]
