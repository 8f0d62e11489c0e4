"""``starling.scipy``: SciPy's names over Starling's primitives (``starling.scipy.linalg``,
``starling.scipy.special``, ``starling.scipy.stats``, ``starling.scipy.signal``,
``starling.scipy.integrate``, ``starling.scipy.ndimage``).

Each submodule is a namespace of its own; this file only imports them.
"""
from . import integrate, linalg, ndimage, signal, special, stats

__all__ = ["integrate", "linalg", "ndimage", "signal", "special", "stats"]
