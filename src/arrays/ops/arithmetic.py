"""Elementwise arithmetic, comparison, logical and bitwise ops (the operators of Array).

Integer overflow wraps (two's complement), as in NumPy. Integer division by zero returns 0 for
floor_divide and remainder (NumPy's result), with no warning.
"""
from __future__ import annotations

import numpy as np

from .elementwise_family import binary, unary

__all__ = ["add"]

add = binary("add", np.add, doc="""Elementwise ``x1 + x2`` with broadcasting.

Args:
    x1, x2: arrays or Python scalars; shapes broadcast to ``(*shape)``; dtypes promote (JAX rules,
        Python scalars weak).
Returns:
    Array of shape ``(*shape)`` and the promoted dtype. bool + bool is logical or (NumPy).
Raises:
    ValueError: shapes do not broadcast. TypeError: no promotion between the dtypes.
""")
