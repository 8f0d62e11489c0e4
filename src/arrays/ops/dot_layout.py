"""A ``dot_general`` as ONE strided batched GEMM on its operands' own memory.

``gemm_desc`` turns the operands' shapes and element strides and the dimension numbers into the
descriptor of Starling's native GEMM (native/gemm.h): the product's rows are the output's leading
``(*batch, *lhs_free)`` dims flattened, its ``N`` columns the ``rhs_free`` dims, and the
contraction ``K`` the paired contracting dims. Dims of one role are folded into one when their
strides allow it (adjacent in memory order), in the order the output or the pairing needs; the
contracting pairs may be taken in any order (a sum). So a transposed, sliced or reshaped operand
becomes strides and a transpose flag, never a copy. What cannot be folded gives None (the caller
then copies): column dims or contracting pairs whose strides do not chain, or more row dims than
the descriptor's ``MAX_LOOPS`` loops.

The eager ``dot_general`` (src/arrays/ops/linear.py) and the cpp backend's GEMM kernels
(src/lowering/backends/cpp/gemm.py) both build their descriptors here.
"""
from __future__ import annotations

import math

MAX_LOOPS = 8    # native/gemm.h kMaxLoops


def _chain(dims, nops):
    """``(size, strides)`` of ``dims`` ([(size, stride_0, ..., stride_{nops-1})], outermost
    first) folded into one dim, or None when their strides do not chain (``stride[i] ==
    stride[i+1] * size[i+1]`` for every operand). Size-1 dims are dropped first; no dim folds to
    ``(1, zeros)``."""
    dims = [d for d in dims if d[0] != 1]
    if not dims:
        return 1, (0,) * nops
    for outer, inner in zip(dims, dims[1:]):
        if any(so != si * inner[0] for so, si in zip(outer[1:], inner[1:])):
            return None
    return math.prod(d[0] for d in dims), tuple(dims[-1][1:])


def _merge_rows(dims):
    """Adjacent row dims ``(size, sa, sb)`` merged where both strides chain."""
    out = []
    for d in dims:
        if d[0] == 1:
            continue
        if out and out[-1][1] == d[1] * d[0] and out[-1][2] == d[2] * d[0]:
            out[-1] = (out[-1][0] * d[0], d[1], d[2])
        else:
            out.append(d)
    return out


def gemm_desc(lshape, lstrides, rshape, rstrides, dimension_numbers):
    """The native GEMM descriptor (a tuple of ints) of ``dot_general(lhs, rhs)`` reading the
    operands through element strides ``lstrides`` / ``rstrides``, or None when the layout does
    not fold into one descriptor. Sizes may be 0 (the caller skips empty products)."""
    (lc, rc), (lb, rb) = dimension_numbers
    lset, rset = set(lc) | set(lb), set(rc) | set(rb)
    lf = [i for i in range(len(lshape)) if i not in lset]
    rf = [i for i in range(len(rshape)) if i not in rset]
    cols = _chain([(rshape[i], rstrides[i]) for i in rf], 1)
    if cols is None:
        return None
    N, (sbn,) = cols
    pairs = [(lshape[i], lstrides[i], rstrides[j]) for i, j in zip(lc, rc)]
    k = _chain(pairs, 2)
    if k is None:   # the pairs may be summed in any order: try memory order of the lhs
        k = _chain(sorted(pairs, key=lambda p: -abs(p[1])), 2)
    if k is None:
        return None
    K, (sak, sbk) = k
    rows = _merge_rows([(lshape[i], lstrides[i], rstrides[j]) for i, j in zip(lb, rb)]
                       + [(lshape[i], lstrides[i], 0) for i in lf])
    if rows and rows[-1][2] == 0:
        M, sam = rows[-1][0], rows[-1][1]
        loops = rows[:-1]
    else:   # the innermost row dim moves B too (a batch dim): every row is its own product
        M, sam = 1, 0
        loops = rows
    if len(loops) > MAX_LOOPS:
        return None
    flat = [x for loop in loops for x in loop]
    return (M, N, K, sam, sak, sbk, sbn, len(loops), *flat)


def element_strides(array):
    """The strides of a NumPy array in elements, or None when one is not a multiple of the
    item size (a byte-offset view) or the data is not aligned to the item size."""
    item = array.itemsize
    if array.ctypes.data % item:
        return None
    out = []
    for s in array.strides:
        if s % item:
            return None
        out.append(s // item)
    return tuple(out)
