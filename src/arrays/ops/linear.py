"""Contractions: the ``dot_general`` primitive and the matmul family built on it.

``dot_general`` is the one contraction primitive (lax-style). Its ``dimension_numbers`` are
``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``: tuples of axes, paired in order.
The output dims are ordered ``(*batch, *lhs_free, *rhs_free)``, each group in operand order.
Both operands have one dtype (the public wrappers promote first); the result has that dtype, or
``preferred_element_type`` when given. Semantics follow ``np.matmul`` on that dtype: integers
wrap (two's complement), bool is "or of ands". float16 / bfloat16 / float8 / float4 accumulate in
float32 and round once at the end (as JAX does on CPU).

The implementation runs float32 / float64 contractions as ONE strided batched GEMM of
Starling's native library on the operands' own memory (src/arrays/ops/dot_layout.py,
native/gemm.h; parallel on Starling's thread pool, no copies for transposed or sliced operands);
everything else, layouts that do not fold into one GEMM, and evaluation under
``reference_mode()`` (the numpy_ref oracle) go through ``np.matmul``.

Every public op here is ``dot_general`` plus shape ops: transformations need one rule set.
"""
from __future__ import annotations

import functools
import math
import sys

import numpy as np

from ...core import casting, dtypes
from ...core.ad_util import Zero, is_undefined, tangent_aval
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ...core.trace import EVAL_TRACE, current_trace, in_reference_mode
from ..array import Array, wrap
from . import dot_layout
from . import shape_lax
from .axes import normalize_axis
from .convert_element_type import convert_element_type
from .elementwise_family import broadcast_shapes, promote_operands
from .rules import add_tangents
from . import rules_sharding as RS

__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "vecdot", "kron",
           "cross"]

_LOW = frozenset((dtypes.float16, dtypes.bfloat16) + dtypes.LOW_PRECISION_FLOATS)
_GEMM = frozenset((np.dtype(np.float32), np.dtype(np.float64)))
_SCALE = frozenset(dtypes.SCALE_FLOATS)

try:
    from ... import _native
except ImportError:   # pragma: no cover  (the extension is part of the package)
    _native = None


class _Namespace:
    """``starling.numpy``, looked up at call time (it imports this module)."""
    _name = __name__.rsplit(".", 2)[0] + ".numpy"

    def __getattr__(self, name):
        return getattr(sys.modules[self._name], name)


snp = _Namespace()

# ---- the primitive -----------------------------------------------------------------------------

dot_general_p = Primitive("dot_general", family="linear")


def _free_axes(ndim, contracting, batch):
    return tuple(i for i in range(ndim) if i not in contracting and i not in batch)


@functools.lru_cache(maxsize=4096)
def _layout(lshape, rshape, dimension_numbers):
    """How the impl runs one contraction: the transposes to the canonical layouts
    ``(*batch, m, k) @ (*batch, k, n)`` (None when already there), the 3-part shapes and the
    output shape. Cached: eager calls repeat the same shapes."""
    (lc, rc), (lb, rb) = dimension_numbers
    lf = _free_axes(len(lshape), lc, lb)
    rf = _free_axes(len(rshape), rc, rb)
    bshape = tuple(lshape[i] for i in lb)
    lfs = tuple(lshape[i] for i in lf)
    rfs = tuple(rshape[i] for i in rf)
    m, n = math.prod(lfs), math.prod(rfs)
    k = math.prod(lshape[i] for i in lc)
    lperm, rperm = lb + lf + lc, rb + rc + rf
    if lperm == tuple(range(len(lshape))):
        lperm = None
    if rperm == tuple(range(len(rshape))):
        rperm = None
    if not lc:
        return lperm, rperm, bshape + (m, 1), bshape + (1, n), bshape + lfs + rfs, False
    return lperm, rperm, bshape + (m, k), bshape + (k, n), bshape + lfs + rfs, True


def _dot_general_impl(lhs, rhs, *, dimension_numbers, preferred_element_type):
    if type(lhs) is not np.ndarray:
        lhs = np.asarray(lhs)
    if type(rhs) is not np.ndarray:
        rhs = np.asarray(rhs)
    out_dt = lhs.dtype if preferred_element_type is None else preferred_element_type
    if out_dt in _LOW:
        work = np.dtype(np.float32)
    else:
        work = out_dt
    lhs, rhs = casting.astype(lhs, work), casting.astype(rhs, work)
    lperm, rperm, ash, bsh, osh, contract = _layout(lhs.shape, rhs.shape, dimension_numbers)
    if contract and ash[-1] > 1 and work in _GEMM and _native is not None \
            and not in_reference_mode():
        out = _native_dot(lhs, rhs, dimension_numbers, osh)
        if out is not None:
            return out if out.dtype == out_dt else out.astype(out_dt)
    a = lhs if lperm is None else lhs.transpose(lperm)
    b = rhs if rperm is None else rhs.transpose(rperm)
    # One np.matmul: BLAS gemm per batch element for floats; NumPy's own loops (wrapping) for
    # integers and bool. No contraction: an outer product per batch element (an exact multiply).
    # A real float contraction over one element (vmap(grad)'s per-example outer products) is
    # the one-term sum 0.0 + a * b: a broadcast multiply is several times faster than a batch
    # of k = 1 GEMMs, and the in-place add 0.0 gives the sum's +0.0 for a -0.0 product.
    if contract and ash[-1] == 1 and np.dtype(work).kind == "f":
        out = np.multiply(a.reshape(ash), b.reshape(bsh))
        np.add(out, out.dtype.type(0.0), out=out)
    elif contract:
        out = np.matmul(a.reshape(ash), b.reshape(bsh))
    else:
        out = a.reshape(ash) * b.reshape(bsh)
    out = out.reshape(osh)
    return casting.astype(out, out_dt)


@functools.lru_cache(maxsize=4096)
def _native_desc(lshape, lstrides, rshape, rstrides, dimension_numbers):
    d = dot_layout.gemm_desc(lshape, lstrides, rshape, rstrides, dimension_numbers)
    return None if d is None else np.array(d, np.int64)


def _native_dot(lhs, rhs, dimension_numbers, out_shape):
    """The product through the native GEMM on the operands' memory, or None when their layout
    does not fold into one descriptor (or is not aligned)."""
    out = _native.empty(out_shape, lhs.dtype)   # large results: recycled warm pages
    return out if _native_dot_into(lhs, rhs, out, dimension_numbers) else None


def _native_dot_into(lhs, rhs, out, dimension_numbers):
    """Writes the product into ``out`` (C-contiguous, of the product's shape and the operands'
    dtype) through the native GEMM; False (nothing written) when the operands' layout does not
    fold into one descriptor or is not aligned."""
    if not (lhs.flags.aligned and rhs.flags.aligned):
        return False
    item = lhs.itemsize
    desc = _native_desc(lhs.shape, tuple(s // item for s in lhs.strides), rhs.shape,
                        tuple(s // item for s in rhs.strides), dimension_numbers)
    if desc is None:
        return False
    if out.size:
        _native.gemm(lhs, rhs, out, desc)
    return True


def dot_into(lhs, rhs, out, dimension_numbers):
    """``out[...] = dot_general(lhs, rhs)`` for NumPy operands of one dtype and a C-contiguous
    ``out`` of the result dtype: float32 / float64 products of more than one term go straight
    into ``out`` through the native GEMM (no temporary, no copy); others through the primitive's
    implementation."""
    if (lhs.dtype == rhs.dtype == out.dtype and out.dtype in _GEMM and _native is not None
            and out.flags.c_contiguous and not in_reference_mode()):
        (lc, _), _ = dimension_numbers
        if math.prod(lhs.shape[i] for i in lc) > 1 and \
                _native_dot_into(lhs, rhs, out, dimension_numbers):
            return
    out[...] = _dot_general_impl(lhs, rhs, dimension_numbers=dimension_numbers,
                                 preferred_element_type=out.dtype)


def _check_dimension_numbers(op, lshape, rshape, ldt, rdt, dimension_numbers):
    """Validates dimension numbers against operand shapes; returns the output shape."""
    (lc, rc), (lb, rb) = dimension_numbers
    if ldt != rdt:
        raise TypeError(f"{op}: operands must have one dtype (promote first), got {ldt} and {rdt}")
    if ldt in dtypes.SCALE_FLOATS:
        raise TypeError(f"{op}: {ldt} holds scales and takes part in no products; convert the "
                        f"operands first (.astype(float32))")
    for name, axes, shape in (("lhs contracting", lc, lshape), ("rhs contracting", rc, rshape),
                              ("lhs batch", lb, lshape), ("rhs batch", rb, rshape)):
        for a in axes:
            if not (type(a) is int and 0 <= a < len(shape)):
                raise ValueError(f"{op}: {name} axis {a!r} is out of bounds for shape "
                                 f"{tuple(shape)} (valid: 0..{len(shape) - 1})")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ValueError(f"{op}: contracting/batch axes must pair up, got dimension_numbers "
                         f"{dimension_numbers}")
    if len(set(lc + lb)) != len(lc + lb) or len(set(rc + rb)) != len(rc + rb):
        raise ValueError(f"{op}: an axis is repeated in dimension_numbers {dimension_numbers}")
    for kind, la, ra in (("contracting", lc, rc), ("batch", lb, rb)):
        for i, j in zip(la, ra):
            if lshape[i] != rshape[j]:
                raise ValueError(f"{op}: {kind} dims differ: {tuple(lshape)} and {tuple(rshape)} "
                                 f"(axis {i} has size {lshape[i]}, axis {j} has {rshape[j]})")
    return (tuple(lshape[i] for i in lb)
            + tuple(lshape[i] for i in _free_axes(len(lshape), lc, lb))
            + tuple(rshape[i] for i in _free_axes(len(rshape), rc, rb)))


def _dot_general_abstract(lhs, rhs, *, dimension_numbers, preferred_element_type):
    shape = _check_dimension_numbers("dot_general", lhs.shape, rhs.shape, lhs.dtype, rhs.dtype,
                                     dimension_numbers)
    dt = lhs.dtype if preferred_element_type is None else preferred_element_type
    return ShapedArray(shape, dt, lhs.weak_type and rhs.weak_type)


dot_general_p.impl = _dot_general_impl
dot_general_p.abstract_eval = _dot_general_abstract
dot_general_p.weak_type = lambda wl, wr, **params: wl and wr


def _bind(x1, x2, dn, pet=None):
    return dot_general_p.bind(x1, x2, dimension_numbers=dn, preferred_element_type=pet)


def dot_general(lhs, rhs, dimension_numbers, preferred_element_type=None):
    """General tensor contraction (lax ``dot_general``).

    Args:
        lhs, rhs: arrays; promoted to one dtype (JAX rules).
        dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``,
            sequences of axes (negative allowed) paired in order; paired dims must have equal size.
        preferred_element_type: result (and accumulation) dtype, or None for the operand dtype.
    Returns:
        Array of shape ``(*batch, *lhs_free, *rhs_free)``.
    Raises:
        ValueError: axes out of bounds / repeated / unpaired, or paired dims of different size.
    """
    lhs, rhs = _pair("dot_general", lhs, rhs)
    (lc, rc), (lb, rb) = dimension_numbers
    nl, nr = lhs.ndim, rhs.ndim
    dn = ((_axes("dot_general", lc, nl), _axes("dot_general", rc, nr)),
          (_axes("dot_general", lb, nl), _axes("dot_general", rb, nr)))
    pet = preferred_dtype("dot_general", lhs.dtype, preferred_element_type)
    _check_dimension_numbers("dot_general", lhs.shape, rhs.shape, lhs.dtype, rhs.dtype, dn)
    return _bind(lhs, rhs, dn, pet)


# ---- transformation rules ----------------------------------------------------------------------
# dot_general is bilinear: its JVP is the sum of the two partial products (each linear in one
# tangent), and reverse mode transposes whichever operand is the linear (undefined) one.

def _dot_general_jvp(primals, tangents, *, dimension_numbers, preferred_element_type):
    (lhs, rhs), (tl, tr) = primals, tangents
    out = _bind(lhs, rhs, dimension_numbers, preferred_element_type)
    t = Zero(tangent_aval(out.aval))
    if not dtypes.is_inexact(out.dtype):
        return out, t
    # Tangents come out in the result dtype (preferred_element_type), like the primal.
    if type(tl) is not Zero:
        t = _bind(tl, rhs, dimension_numbers, preferred_element_type)
    if type(tr) is not Zero:
        t = add_tangents(t, _bind(lhs, tr, dimension_numbers, preferred_element_type))
    return out, t


def _dot_general_transpose(ct, lhs, rhs, *, dimension_numbers, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    if is_undefined(lhs) and is_undefined(rhs):
        raise ValueError("dot_general: cannot transpose with both operands linear (the product "
                         "of two linear values is not linear)")
    if is_undefined(lhs):
        return [_dot_operand_ct(ct, rhs, lhs.aval, (lc, rc), (lb, rb), True), None]
    return [None, _dot_operand_ct(ct, lhs, rhs.aval, (rc, lc), (rb, lb), False)]


def _dot_operand_ct(ct, y, x_aval, contract, batch, x_is_lhs):
    """Cotangent of operand ``x`` (aval ``x_aval``) given the other operand ``y``.

    ``ct`` has dims ``(*batch, *lhs_free, *rhs_free)``. Contracting it with ``y`` over y's free
    dims (and pairing the batch dims) leaves x's batch, free and contracting dims (the last in
    y's axis order). ``ct`` goes first, giving ``(*batch, *x_free, *x_contracting)``, or second,
    giving ``(*batch, *x_contracting, *x_free)``, whichever is already x's axis order (the
    weight gradient of ``x @ w`` is ``x^T @ ct``, made in w's layout); else one transpose."""
    if type(ct) is Zero:
        return Zero(tangent_aval(x_aval))
    (xc, yc), (xb, yb) = contract, batch
    nx = len(x_aval.shape)
    xf = _free_axes(nx, xc, xb)
    yf = _free_axes(y.ndim, yc, yb)
    nb = len(xb)
    start = nb + len(xf) if x_is_lhs else nb
    ct_axes, ct_batch = tuple(range(start, start + len(yf))), tuple(range(nb))
    if ct.dtype != y.dtype:  # preferred_element_type: contract in the cotangent's dtype
        y = convert_element_type(y, ct.dtype, False)
    x_contract = [xc[yc.index(j)] for j in sorted(yc)]
    ct_first = list(xb) + list(xf) + x_contract
    if ct_first != list(range(nx)) and list(xb) + x_contract + list(xf) == list(range(nx)):
        res = _bind(y, ct, ((yf, ct_axes), (yb, ct_batch)))
    else:
        res = _bind(ct, y, ((ct_axes, yf), (ct_batch, yb)))
        res = _permute(res, tuple(ct_first.index(i) for i in range(nx)))
    if res.dtype != x_aval.dtype:  # back to the operand's dtype (complex -> real: real part)
        res = convert_element_type(res, x_aval.dtype, False)
    return res


def _dot_general_batch(args, dims, *, dimension_numbers, preferred_element_type):
    """One dot_general: two batched operands pair their batch axes as a new leading batch
    dimension; a single batched operand keeps its batch axis as a free dim, which lands at a
    known position of the output (no transposes)."""
    (lhs, rhs), (dl, dr) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers

    def phys(axes, d):  # per-example axes -> axes of the batched value
        return tuple(a + (a >= d) for a in axes)

    if dl is not None and dr is not None:
        dn = ((phys(lc, dl), phys(rc, dr)), ((dl,) + phys(lb, dl), (dr,) + phys(rb, dr)))
        return _bind(lhs, rhs, dn, preferred_element_type), 0
    if dl is not None:
        lc, lb = phys(lc, dl), phys(lb, dl)
        out_dim = len(lb) + sum(1 for a in _free_axes(lhs.ndim, lc, lb) if a < dl)
    else:
        rc, rb = phys(rc, dr), phys(rb, dr)
        nlf = lhs.ndim - len(lc) - len(lb)
        out_dim = len(lb) + nlf + sum(1 for a in _free_axes(rhs.ndim, rc, rb) if a < dr)
    return _bind(lhs, rhs, ((lc, rc), (lb, rb)), preferred_element_type), out_dim


def _dot_general_sharding(in_avals, out_avals, *, dimension_numbers, preferred_element_type):
    """Batch dims split alike give split results; a free dim of one operand split (the other
    replicated) splits the matching result dim; contracting dims split alike give a partial
    sum. A pending sum times a replicated operand is not offered (see rules_sharding: not exact
    in IEEE arithmetic with inf / NaN); it is reduced first."""
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = in_avals
    lf = _free_axes(len(lhs.shape), lc, lb)
    rf = _free_axes(len(rhs.shape), rc, rb)
    S, R_, P_ = RS.Shard, RS.R, RS.Partial
    combos = [((S(i),), (S(a), S(b))) for i, (a, b) in enumerate(zip(lb, rb))]
    combos += [((S(len(lb) + i),), (S(a), R_)) for i, a in enumerate(lf)]
    combos += [((S(len(lb) + len(lf) + i),), (R_, S(b))) for i, b in enumerate(rf)]
    combos += [((P_("sum"),), (S(a), S(b))) for a, b in zip(lc, rc)]
    return combos


dot_general_p.jvp = _dot_general_jvp
dot_general_p.transpose = _dot_general_transpose
dot_general_p.batch = _dot_general_batch
dot_general_p.sharding = _dot_general_sharding
dot_general_p.is_linear = True


# ---- helpers -----------------------------------------------------------------------------------

def _pair(op, x1, x2):
    if (type(x1) is Array and type(x2) is Array and x1._buf.dtype is x2._buf.dtype
            and x1._weak is x2._weak and x1._buf.dtype not in _SCALE):
        return x1, x2
    return promote_operands(op, (x1, x2))


def _axes(op, axes, ndim):
    return tuple(normalize_axis(op, a, ndim) for a in axes)


def _kind(dt):
    return ("bool" if dtypes.is_bool(dt) else "integer" if dtypes.is_integer(dt) else
            "complex" if dtypes.is_complex(dt) else "floating")


def preferred_dtype(op, dt, preferred_element_type):
    """The ``preferred_element_type`` of a product of ``dt`` operands, canonicalized (None stays
    None).

    Raises:
        TypeError: a kind other than the operands' (as JAX: integer products stay integer,
            floating ones floating, complex ones complex; bool operands may ask for an integer
            type), or the scale dtype float8_e8m0fnu.
    """
    if preferred_element_type is None:
        return None
    pet = dtypes.canonicalize(preferred_element_type)
    if pet in dtypes.SCALE_FLOATS:
        raise TypeError(f"{op}: preferred_element_type {pet} holds scales and is no product "
                        f"dtype; use float32")
    k, kp = _kind(dt), _kind(pet)
    if k != kp and not (k == "bool" and kp == "integer"):
        raise TypeError(f"{op}: preferred_element_type {pet} ({kp}) does not fit {dt} operands "
                        f"({k}): both must be integer, floating or complex (cast the operands "
                        f"first)")
    return pet


def _pet(preferred_element_type, dt, op):
    return preferred_dtype(op, dt, preferred_element_type)


def _permute(x, perm):
    return shape_lax.transpose(x, perm)


def _broadcast_to(x, shape):
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    return shape_lax.broadcast_in_dim(x, shape, tuple(range(len(shape) - x.ndim, len(shape))))


def _reshape(x, shape):
    return shape_lax.reshape(x, shape)


def _diagonal(x, axis1, axis2, offset=0):
    """The diagonal of dims ``axis1``, ``axis2`` (non-negative, distinct), moved last (NumPy's
    ``diagonal``), gather-free: move both dims last, flatten them and take every
    ``(n + 1)``-th element from the offset's start with a strided static slice."""
    nd = x.ndim
    rest = tuple(i for i in range(nd) if i not in (axis1, axis2))
    x = shape_lax.transpose(x, rest + (axis1, axis2))
    m, n = x.shape[-2], x.shape[-1]
    length = max(0, min(m, n - offset) if offset >= 0 else min(m + offset, n))
    lead = tuple(x.shape[:-2])
    x = shape_lax.reshape(x, lead + (m * n,))
    if length == 0:
        return shape_lax.slice_in_dim(x, 0, 0, 1, nd - 2)
    start = offset if offset >= 0 else -offset * n
    return shape_lax.slice_in_dim(x, start, start + (length - 1) * (n + 1) + 1, n + 1, nd - 2)


def _conj(x):
    return snp.conj(x) if dtypes.is_complex(x.dtype) else x


# ---- matmul family -----------------------------------------------------------------------------

def matmul(x1, x2, /, *, preferred_element_type=None):
    """Matrix product with NumPy / Array API ``matmul`` semantics (the ``@`` operator).

    Shapes: ``(*b1, m, k) @ (*b2, k, n) -> (*broadcast(b1, b2), m, n)``. A 1-d ``x1`` of shape
    ``(k,)`` is a row vector and a 1-d ``x2`` a column vector; the added dim is removed from the
    result (``(k,) @ (k,) -> ()``). Dtypes promote (JAX rules); integers wrap, bool is "or of
    ands" (NumPy); float16/bfloat16 accumulate in float32.

    Args:
        x1, x2: arrays of ndim >= 1.
        preferred_element_type: optional result/accumulation dtype (JAX extension).
    Returns:
        Array of the promoted dtype (or ``preferred_element_type``).
    Raises:
        ValueError: a 0-d operand, contracting dims of different size (the message names both
            shapes), or batch dims that do not broadcast.
    """
    if (type(x1) is Array and type(x2) is Array and preferred_element_type is None
            and current_trace() is EVAL_TRACE):
        b1, b2 = x1._buf, x2._buf
        if b1.dtype is b2.dtype and x1._weak is x2._weak and b1.dtype not in _SCALE:
            dn = _direct_matmul(b1.shape, b2.shape)
            if dn is not None:
                # The primitive's own impl, without the bind round trip (eager hot path).
                return wrap(_dot_general_impl(b1, b2, dimension_numbers=dn,
                                              preferred_element_type=None), x1._weak)
    x1, x2 = _pair("matmul", x1, x2)
    s1, s2 = x1.shape, x2.shape
    n1, n2 = len(s1), len(s2)
    if n1 == 0 or n2 == 0:
        raise ValueError(f"matmul: operands must be at least 1-d, got shapes {tuple(s1)} and "
                         f"{tuple(s2)} (use multiply for scalars)")
    k2 = s2[-2] if n2 >= 2 else s2[0]
    if s1[-1] != k2:
        raise ValueError(f"matmul: contracting dims differ: {tuple(s1)} @ {tuple(s2)} "
                         f"({s1[-1]} != {k2})")
    pet = _pet(preferred_element_type, x1.dtype, "matmul")
    if n2 <= 2 or n1 == 1:
        # No batch dims needed: the free dims of dot_general land in matmul's order already.
        return _bind(x1, x2, (((n1 - 1,), (max(n2 - 2, 0),)), ((), ())), pet)
    if n1 == 2:
        # (m, k) @ (*b, k, n): one contraction gives (m, *b, n); move m next to n.
        out = _bind(x1, x2, (((1,), (n2 - 2,)), ((), ())), pet)
        nb = n2 - 2
        return _permute(out, tuple(range(1, nb + 1)) + (0, nb + 1))
    b1, b2 = s1[:-2], s2[:-2]
    if b1 != b2:
        bshape = broadcast_shapes("matmul", b1, b2)
        if all(d == 1 for d in b2):
            # (*b1, m, k) @ (1.., k, n): one matrix on the right needs no batch dims at all.
            out = _bind(x1, _reshape(x2, tuple(s2[-2:])), (((n1 - 1,), (0,)), ((), ())), pet)
            return _reshape(out, bshape + (s1[-2], s2[-1]))
        x1 = _broadcast_to(x1, bshape + tuple(s1[-2:]))
        x2 = _broadcast_to(x2, bshape + tuple(s2[-2:]))
    nb = max(n1, n2) - 2
    batch = tuple(range(nb))
    return _bind(x1, x2, (((nb + 1,), (nb,)), (batch, batch)), pet)


@functools.lru_cache(maxsize=1024)
def _direct_matmul(s1, s2):
    """matmul's dimension numbers when one dot_general does it alone (no transpose or
    broadcast around it, and valid shapes); else None (the general path, which also raises)."""
    n1, n2 = len(s1), len(s2)
    if n1 == 0 or n2 == 0 or s1[-1] != s2[max(n2 - 2, 0)]:
        return None
    if n2 <= 2 or n1 == 1:
        return (((n1 - 1,), (max(n2 - 2, 0),)), ((), ()))
    if n1 == n2 and s1[:-2] == s2[:-2]:
        batch = tuple(range(n1 - 2))
        return (((n1 - 1,), (n1 - 2,)), (batch, batch))
    return None


def dot(a, b, /, *, preferred_element_type=None):
    """NumPy ``dot``.

    * 0-d operand: elementwise product.
    * ``(k,) . (k,) -> ()``; ``(*a, k) . (k,) -> (*a)``;
    * ``(*a, k) . (*b, k, n) -> (*a, *b, n)`` (contracts the last axis of ``a`` with the
      second-to-last of ``b``; no broadcasting of batch dims, unlike matmul).

    Raises:
        ValueError: contracted dims of different size (naming both shapes).
    """
    a, b = _pair("dot", a, b)
    na, nb = a.ndim, b.ndim
    pet = _pet(preferred_element_type, a.dtype, "dot")
    if na == 0 or nb == 0:
        return _bind(a, b, (((), ()), ((), ())), pet)
    kb = max(nb - 2, 0)
    if a.shape[-1] != b.shape[kb]:
        raise ValueError(f"dot: contracted dims differ: {tuple(a.shape)} . {tuple(b.shape)} "
                         f"({a.shape[-1]} != {b.shape[kb]})")
    return _bind(a, b, (((na - 1,), (kb,)), ((), ())), pet)


def vdot(a, b, /):
    """NumPy ``vdot``: flattens both operands and returns ``sum(conj(a) * b)`` (0-d).

    Raises:
        ValueError: the operands have different sizes.
    """
    a, b = _pair("vdot", a, b)
    if a.size != b.size:
        raise ValueError(f"vdot: operands must have the same size, got shapes {tuple(a.shape)} "
                         f"({a.size} elements) and {tuple(b.shape)} ({b.size} elements)")
    a = _conj(_reshape(a, (a.size,)))
    b = _reshape(b, (b.size,))
    return _bind(a, b, (((0,), (0,)), ((), ())))


def inner(a, b, /):
    """NumPy ``inner``: contracts the last axes: ``(*a, k), (*b, k) -> (*a, *b)`` (no conj).

    A 0-d operand multiplies elementwise.

    Raises:
        ValueError: the last dims differ.
    """
    a, b = _pair("inner", a, b)
    na, nb = a.ndim, b.ndim
    if na == 0 or nb == 0:
        return _bind(a, b, (((), ()), ((), ())))
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"inner: last dims differ: {tuple(a.shape)} and {tuple(b.shape)} "
                         f"({a.shape[-1]} != {b.shape[-1]})")
    return _bind(a, b, (((na - 1,), (nb - 1,)), ((), ())))


def outer(a, b, /):
    """NumPy ``outer``: ``out[i, j] = a.ravel()[i] * b.ravel()[j]``, shape ``(a.size, b.size)``.

    (``starling.numpy.linalg.outer`` is the Array API version, which requires 1-d operands.)
    """
    a, b = _pair("outer", a, b)
    a = _reshape(a, (a.size,))
    b = _reshape(b, (b.size,))
    return _bind(a, b, (((), ()), ((), ())))


def tensordot(x1, x2, /, *, axes=2, preferred_element_type=None):
    """Tensor contraction over ``axes`` (Array API / NumPy ``tensordot``).

    Args:
        x1, x2: arrays; dtypes promote.
        axes: an int ``N`` (the last ``N`` axes of ``x1`` with the first ``N`` of ``x2``, in
            order), or a pair of sequences ``(x1_axes, x2_axes)`` of equal length (negative axes
            allowed; a pair of ints means one axis each).
    Returns:
        Array of shape ``(*x1_free, *x2_free)``.
    Raises:
        ValueError: paired dims differ in size; ``N`` larger than an operand's ndim; axes out of
            bounds or repeated.
    """
    x1, x2 = _pair("tensordot", x1, x2)
    n1, n2 = x1.ndim, x2.ndim
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, (bool, np.bool_)):
        nax = int(axes)
        if nax < 0 or nax > min(n1, n2):
            raise ValueError(f"tensordot: axes={nax} must be in 0..{min(n1, n2)} for shapes "
                             f"{tuple(x1.shape)} and {tuple(x2.shape)}")
        a1, a2 = tuple(range(n1 - nax, n1)), tuple(range(nax))
    else:
        try:
            ax1, ax2 = axes
        except (TypeError, ValueError):
            raise TypeError(f"tensordot: axes must be an int or a pair of sequences, got "
                            f"{axes!r}") from None
        ax1 = (ax1,) if isinstance(ax1, (int, np.integer)) else tuple(ax1)
        ax2 = (ax2,) if isinstance(ax2, (int, np.integer)) else tuple(ax2)
        if len(ax1) != len(ax2):
            raise ValueError(f"tensordot: axes sequences have different lengths: {ax1} and {ax2}")
        a1, a2 = _axes("tensordot", ax1, n1), _axes("tensordot", ax2, n2)
        if len(set(a1)) != len(a1) or len(set(a2)) != len(a2):
            raise ValueError(f"tensordot: repeated axis in axes={axes!r}")
    for i, j in zip(a1, a2):
        if x1.shape[i] != x2.shape[j]:
            raise ValueError(f"tensordot: shape mismatch for sum: {tuple(x1.shape)} axis {i} "
                             f"(size {x1.shape[i]}) vs {tuple(x2.shape)} axis {j} "
                             f"(size {x2.shape[j]})")
    return _bind(x1, x2, ((a1, a2), ((), ())), _pet(preferred_element_type, x1.dtype, "tensordot"))


def vecdot(x1, x2, /, *, axis=-1):
    """Vector dot product ``sum(conj(x1) * x2, axis)`` with broadcasting (Array API ``vecdot``).

    Args:
        x1, x2: arrays whose dims other than ``axis`` broadcast; the ``axis`` dims must be equal.
        axis: the contracted axis, in ``[-N, -1]`` with ``N = min(x1.ndim, x2.ndim)``
            (non-negative axes are accepted when both operands have the same ndim).
    Returns:
        Array of the broadcast shape with ``axis`` removed.
    Raises:
        ValueError: bad axis, unequal contracted dims, or non-broadcasting shapes.
    """
    x1, x2 = _pair("vecdot", x1, x2)
    s1, s2 = tuple(x1.shape), tuple(x2.shape)
    if not s1 or not s2:
        raise ValueError(f"vecdot: operands must be at least 1-d, got shapes {s1} and {s2}")
    axis = _vector_axis("vecdot", axis, s1, s2)
    if s1[axis] != s2[axis]:
        raise ValueError(f"vecdot: contracted dims differ: {s1} and {s2} along axis {axis} "
                         f"({s1[axis]} != {s2[axis]})")
    if axis != -1:
        x1 = _permute(x1, _move_to_end(len(s1), len(s1) + axis))
        x2 = _permute(x2, _move_to_end(len(s2), len(s2) + axis))
    x1 = _conj(x1)
    if x1.ndim == 1 or x2.ndim == 1:
        # A single vector needs no batch dims: contract it against the other's last axis.
        return _bind(x1, x2, (((x1.ndim - 1,), (x2.ndim - 1,)), ((), ())))
    k = s1[axis]
    bshape = broadcast_shapes("vecdot", tuple(x1.shape[:-1]), tuple(x2.shape[:-1]))
    x1 = _broadcast_to(x1, bshape + (k,))
    x2 = _broadcast_to(x2, bshape + (k,))
    nb = len(bshape)
    batch = tuple(range(nb))
    return _bind(x1, x2, (((nb,), (nb,)), (batch, batch)))


def _move_to_end(ndim, axis):
    return tuple(i for i in range(ndim) if i != axis) + (axis,)


def kron(a, b, /):
    """Kronecker product (NumPy ``kron``): block ``(i, j)`` of the result is ``a[i, j] * b``.

    Operands of different ndim get leading 1-dims; the result has shape
    ``(a.shape[0] * b.shape[0], ..., a.shape[-1] * b.shape[-1])``.
    """
    a, b = _pair("kron", a, b)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    a, b = _reshape(a, sa), _reshape(b, sb)
    out = _bind(a, b, (((), ()), ((), ())))  # (*sa, *sb)
    out = _permute(out, tuple(p for i in range(nd) for p in (i, nd + i)))
    return _reshape(out, tuple(x * y for x, y in zip(sa, sb)))


def cross(x1, x2, /, *, axis=-1):
    """Cross product of 3-element vectors along ``axis`` (Array API ``cross``), broadcasting the
    other dims. ``out = (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0)``.

    Raises:
        ValueError: the ``axis`` dims are not both 3, or shapes do not broadcast.
    """
    x1, x2 = _pair("cross", x1, x2)
    if dtypes.is_bool(x1.dtype):
        raise TypeError("cross: bool operands are not supported (use an integer dtype)")
    s1, s2 = tuple(x1.shape), tuple(x2.shape)
    if not s1 or not s2:
        raise ValueError(f"cross: operands must be at least 1-d, got shapes {s1} and {s2}")
    axis = _vector_axis("cross", axis, s1, s2)
    if s1[axis] != 3 or s2[axis] != 3:
        raise ValueError(f"cross: both operands need size 3 along axis {axis}, got shapes "
                         f"{s1} and {s2}")
    x1 = _permute(x1, _move_to_end(len(s1), len(s1) + axis))
    x2 = _permute(x2, _move_to_end(len(s2), len(s2) + axis))
    p = [_component(x1, i) for i in range(3)]
    q = [_component(x2, i) for i in range(3)]
    parts = [p[1] * q[2] - p[2] * q[1], p[2] * q[0] - p[0] * q[2], p[0] * q[1] - p[1] * q[0]]
    nd = parts[0].ndim
    out = shape_lax.concatenate([_reshape(c, tuple(c.shape) + (1,)) for c in parts], nd)
    if axis == -1:
        return out
    dest = nd + 1 + axis  # move the vector dim back to `axis` of the result
    return _permute(out, tuple(range(dest)) + (nd,) + tuple(range(dest, nd)))


def _component(x, i):
    nd = x.ndim
    return _reshape(shape_lax.slice_in_dim(x, i, i + 1, 1, nd - 1), tuple(x.shape[:-1]))


def _vector_axis(op, axis, s1, s2):
    """The Array API vector axis: negative in [-N, -1] (N = the smaller ndim); a non-negative
    axis is accepted when both operands have the same ndim. Returns it negative."""
    n = min(len(s1), len(s2))
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, (bool, np.bool_)):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    axis = int(axis)
    if axis >= 0 and len(s1) == len(s2):
        axis -= n
    if not -n <= axis <= -1:
        raise ValueError(f"{op}: axis {axis} is out of bounds for shapes {s1} and {s2} "
                         f"(valid: {-n}..-1, or 0..{n - 1} when both have ndim {n})")
    return axis


from .einsum import einsum  # noqa: E402  (split out by concept; re-exported here)
