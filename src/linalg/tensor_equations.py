"""Tensor equations: ``tensorsolve`` and ``tensorinv``, a reshape around ``solve`` / ``inv`` (so
their derivatives, batch rules and error behaviour are those of the matrix versions)."""
from __future__ import annotations

import math
import operator

from ..arrays.ops import shape_lax
from ..arrays.ops.axes import normalize_axes
from ..arrays.ops.elementwise_family import promote_operands
from ._common import LinAlgError, as_inexact
from .linear_solve import inv, solve


def tensorsolve(a, b, /, axes=None):
    """Solves the tensor equation ``tensordot(a, x, axes=x.ndim) == b`` for ``x`` (NumPy
    ``linalg.tensorsolve``).

    Shapes: ``b`` is ``(*I)`` and ``a`` is ``(*I, *J)`` with ``prod(I) == prod(J)``; ``x`` is
    ``(*J)``. ``axes`` first moves those axes of ``a`` to the end (negative ones count from the
    end, an extension of NumPy's). Method: ``a`` as a ``prod(I) x prod(J)`` matrix, ``solve``
    (LU with partial pivoting, LAPACK ``gesv``), reshaped back.

    Returns:
        ``(*J)``, in the common floating dtype of ``a`` and ``b`` (integers: float32).
    Raises:
        ValueError: bad or repeated ``axes``; ``b.ndim >= a.ndim``; ``b``'s shape is not the
            leading part of ``a``'s.
        LinAlgError: (a ValueError) ``prod(I) != prod(J)``, so the matrix is not square (NumPy
            raises LinAlgError here too); a singular matrix as ``solve`` reports it.
    """
    a, b = promote_operands("tensorsolve", (a, b), "inexact")
    an = a.ndim
    if axes is not None:
        axes = normalize_axes("tensorsolve", axes, an)   # raises for repeated axes
        rest = tuple(i for i in range(an) if i not in axes)
        a = shape_lax.transpose(a, rest + axes)
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sb) >= len(sa) or sa[:len(sb)] != sb:
        raise ValueError(f"tensorsolve: b of shape {sb} must be the leading part of the shape "
                         f"of a, {sa} (after axes={axes!r}): a is (*I, *J) and b is (*I)")
    out_shape = sa[len(sb):]
    rows, cols = math.prod(sb), math.prod(out_shape)
    if rows != cols:
        raise LinAlgError(f"tensorsolve: a of shape {sa} is not square as a matrix: its leading "
                          f"dims {sb} (the shape of b) give {rows} rows but the others, "
                          f"{out_shape}, give {cols} columns")
    x = solve(shape_lax.reshape(a, (rows, cols)), shape_lax.reshape(b, (rows,)))
    return shape_lax.reshape(x, out_shape)


def tensorinv(a, /, ind=2):
    """Inverse of ``a`` for ``tensordot`` (NumPy ``linalg.tensorinv``): ``ainv`` with
    ``tensordot(ainv, a, ind)`` the identity on ``(*J)``.

    Shapes: ``a`` is ``(*I, *J)`` with ``len(I) == ind`` and ``prod(I) == prod(J)``; the result
    is ``(*J, *I)``. Method: ``inv`` of ``a`` as a ``prod(I) x prod(J)`` matrix (LU with partial
    pivoting, LAPACK ``getrf`` / ``getri``), reshaped.

    Returns:
        ``(*J, *I)``, in the floating dtype of ``a`` (integers: float32).
    Raises:
        ValueError: ``ind`` not a positive integer (NumPy: "Invalid ind argument").
        LinAlgError: (a ValueError) ``prod(I) != prod(J)``; a singular matrix as ``inv``
            reports it.
    """
    a = as_inexact("tensorinv", a)
    try:
        ind = operator.index(ind)
    except TypeError:
        raise TypeError(f"tensorinv: ind must be an integer, got {ind!r}") from None
    shape = tuple(a.shape)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got {ind}")
    lead, trail = shape[:ind], shape[ind:]
    rows, cols = math.prod(lead), math.prod(trail)
    if rows != cols:
        raise LinAlgError(f"tensorinv: a of shape {shape} with ind={ind} is not square as a "
                          f"matrix: its first {ind} dims {lead} give {rows} rows but the others, "
                          f"{trail}, give {cols} columns")
    ia = inv(shape_lax.reshape(a, (rows, cols)))
    return shape_lax.reshape(ia, trail + lead)
