"""Matrix products: ``matrix_power`` and ``multi_dot``."""
from __future__ import annotations

import math
import operator

import numpy as np

from ..arrays.array import wrap
from ..arrays.convert import operand
from ..arrays.ops import shape_lax
from ..arrays.ops.linear import matmul
from ._common import check_matrix
from .linear_solve import inv


def matrix_power(x, n, /):
    """``x`` raised to the integer power ``n`` by repeated squaring (``matmul``):
    ``(*batch, m, m) -> (*batch, m, m)``.

    ``n == 0`` gives the identity (in the dtype of ``x``); ``n < 0`` inverts first (``inv``,
    promoting integers to float32). Integer matrices with ``n >= 0`` stay integer (wrapping).

    Raises:
        TypeError: ``n`` is not an integer. ValueError: non-square matrices.
    """
    x = operand(x, "matrix_power")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}") from None
    check_matrix("matrix_power", x.shape, square=True)
    if n == 0:
        eye = np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape)
        return wrap(np.array(eye), x.weak_type)
    if n < 0:
        x, n = inv(x), -n
    result = None
    power = x
    while True:
        if n & 1:
            result = power if result is None else matmul(result, power)
        n >>= 1
        if not n:
            return result
        power = matmul(power, power)


def multi_dot(arrays, *, preferred_element_type=None):
    """NumPy ``linalg.multi_dot``: ``arrays[0] @ arrays[1] @ ...`` in the cheapest order
    (dynamic programming over the chain, as in Cormen et al., "Introduction to Algorithms").

    The first array may be 1-d (a row vector) and the last 1-d (a column vector); the others must
    be 2-d.

    Raises:
        ValueError: fewer than two arrays, wrong ndims, or mismatched inner dims.
    """
    arrays = [operand(a, "multi_dot") for a in arrays]
    if len(arrays) < 2:
        raise ValueError(f"multi_dot: needs at least 2 arrays, got {len(arrays)}")
    first_1d, last_1d = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first_1d:
        arrays[0] = shape_lax.reshape(arrays[0], (1,) + tuple(arrays[0].shape))
    if last_1d:
        arrays[-1] = shape_lax.reshape(arrays[-1], tuple(arrays[-1].shape) + (1,))
    for i, a in enumerate(arrays):
        if a.ndim != 2:
            raise ValueError(f"multi_dot: array {i} must be 2-d (only the first and last may be "
                             f"1-d), got shape {tuple(a.shape)}")
    for i in range(len(arrays) - 1):
        if arrays[i].shape[1] != arrays[i + 1].shape[0]:
            raise ValueError(f"multi_dot: shapes {tuple(arrays[i].shape)} and "
                             f"{tuple(arrays[i + 1].shape)} (arrays {i} and {i + 1}) do not "
                             "align")
    dims = [a.shape[0] for a in arrays] + [arrays[-1].shape[1]]
    order = _chain_order(dims)

    def build(i, j):
        if i == j:
            return arrays[i]
        k = order[i][j]
        return matmul(build(i, k), build(k + 1, j), preferred_element_type=preferred_element_type)

    out = build(0, len(arrays) - 1)
    if first_1d and last_1d:
        return shape_lax.reshape(out, ())
    if first_1d:
        return shape_lax.reshape(out, tuple(out.shape[1:]))
    if last_1d:
        return shape_lax.reshape(out, tuple(out.shape[:-1]))
    return out


def _chain_order(dims):
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split
