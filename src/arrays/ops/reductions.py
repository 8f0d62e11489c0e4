"""Reductions: sum, prod, max, min, all, any, argmax, argmin, count_nonzero, ptp (and, re-exported
from reductions_stats.py, mean / var / std / average / logsumexp / the nan-aware reductions /
allclose / array_equal; from reductions_quantile.py, quantile / percentile / median).

Primitives (one per monoid, lax-style; every public reduction is a composition of them):

=============  ===============================  =========================================
primitive      params                           semantics
=============  ===============================  =========================================
reduce_sum     axes (sorted tuple of ints)      sum over ``axes``; dtype kept, ints wrap
reduce_prod    axes                             product over ``axes``; dtype kept
reduce_max     axes                             max over ``axes``; NaN propagates; an empty
                                                reduction gives the dtype's lowest value
reduce_min     axes                             as reduce_max with the highest value
reduce_and     axes                             logical and (bool operand)
reduce_or      axes                             logical or (bool operand)
argmax         axes                             int64 index of the first maximum (the first
                                                NaN if any), flat (C order) over ``axes``
argmin         axes                             as argmax for the minimum
=============  ===============================  =========================================

The primitives keep their operand's dtype: the public wrappers pick the accumulation dtype
first (``sum`` of int8 accumulates in int64, as the Array API and NumPy say) and cast. Float16,
bfloat16, float8 and float4 operands are accumulated in float32 inside reduce_sum / reduce_prod
and rounded back once (documented choice, as in JAX: summing in the narrow type loses too much).
Complex max/min order lexicographically (real part, then imaginary part), as NumPy does.

keepdims is applied by the wrappers (a reshape), so the primitives stay minimal.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from ...core import casting, dtypes
from ...core.ad_util import Zero, tangent_aval
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ...core.trace import EVAL_TRACE, current_trace
from ..array import Array, wrap
from ..convert import operand
from .axes import AxisError, normalize_axes  # noqa: F401  (AxisError re-exported for users)
from .convert_element_type import convert_element_type, convert_element_type_p
from .elementwise_family import broadcast_shapes
from . import rules_sharding as RS
from .shape_lax import broadcast_in_dim, pad as lax_pad, reshape as lax_reshape
from .shape_lax import transpose as lax_transpose

__all__ = ["sum", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "all", "any",
           "count_nonzero", "ptp"]

_pyany = builtins.any  # this module defines its own any / all / max / min / sum

# Accumulated in float32 and rounded back once: NumPy has no native low-precision kernels and
# float16 sums lose digits quickly.
_ACC32 = frozenset((dtypes.float16, dtypes.bfloat16) + dtypes.LOW_PRECISION_FLOATS)
_F32 = np.dtype(np.float32)


_SNP = []


def _ns():
    # starling.numpy imports this module, so the namespace is looked up when a function first
    # runs (and cached: an import statement per call costs about a microsecond).
    if not _SNP:
        from .. import numpy as snp
        _SNP.append(snp)
    return _SNP[0]


# ---- shared helpers (also used by reductions_stats.py and cumulative.py) -------------------------

def reduced_shape(shape, axes):
    """``shape`` without the dims in ``axes``."""
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def kept_shape(shape, axes):
    """``shape`` with the dims in ``axes`` set to 1 (the keepdims shape)."""
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def reduction_size(shape, axes):
    """Number of elements reduced into each output element (an int, or symbolic)."""
    return math.prod(shape[a] for a in axes)


def is_empty_reduction(shape, axes) -> bool:
    """True when some reduced dim is statically 0 (a symbolic dim never counts as empty).

    Args:
        shape: the operand's shape (ints and symbolic dims).
        axes: the reduced axes (normalized ints).
    """
    return _pyany(type(shape[a]) is int and shape[a] == 0 for a in axes)


def no_out(op, out):
    """Rejects NumPy's ``out=`` argument of reduction ``op``.

    Raises:
        TypeError: ``out`` is not None (Starling arrays are immutable; the message says to use the
            returned array).
    """
    if out is not None:
        raise TypeError(f"{op}: out= is not supported: Starling arrays are immutable; use the "
                        "returned array")


def const(value, dt, weak=False):
    """A 0-d Array of dtype ``dt`` holding ``value`` (a literal when staged)."""
    return wrap(casting.scalar(value, dt), weak)


def cast(x, dt):
    """``x`` converted to ``dt``; keeps the weak flag when the dtype does not change."""
    if x.dtype == dt:
        return x
    return convert_element_type(x, dt, False)


def restore_dims(r, shape, axes):
    """Reshapes a reduction result ``r`` to the keepdims shape of ``shape``."""
    kept = kept_shape(shape, axes)
    if type(r) is Array and current_trace() is EVAL_TRACE:
        return wrap(np.reshape(r._buf, kept), r._weak)
    return _ns().reshape(r, kept)


def check_mask(op, where, shape):
    """The ``where=`` mask as a bool operand that broadcasts to ``shape``."""
    mask = operand(where, op)
    if mask.dtype != dtypes.bool_:
        raise TypeError(f"{op}: where= must be a boolean mask, got dtype {mask.dtype}")
    try:
        ok = broadcast_shapes(op, mask.shape, shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{op}: where= mask of shape {tuple(mask.shape)} does not broadcast to "
                         f"the input shape {tuple(shape)}")
    return mask


def masked(op, x, where, fill):
    """``x`` with the entries where ``where`` is False replaced by ``fill`` (of x's dtype)."""
    mask = check_mask(op, where, x.shape)
    # check_mask made sure that the mask broadcasts to x.shape, so the result has x's shape.
    return _ns().where(mask, x, const(fill, x.dtype, x.weak_type))


def to_bool(x):
    """``x != 0`` as a bool operand (NaN is True; complex is True if either part is nonzero)."""
    dt = x.dtype
    if dt == dtypes.bool_:
        return x
    if dtypes.is_complex(dt):
        return _ns().not_equal(x, const(0, dt))
    return convert_element_type(x, dtypes.bool_, False)


def sum_dtype(op, dt, dtype):
    """Accumulation dtype of sum / prod / cumsum (Array API): small signed ints and bool -> int64,
    unsigned ints -> uint64, floats and complex keep their dtype; ``dtype`` overrides."""
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    if dt.kind == "i" or dt == dtypes.bool_:
        return dtypes.int64
    if dt.kind == "u":
        return dtypes.uint64
    return dt


def apply(prim, x, axes, keepdims, **params):
    """Binds a reduction primitive over ``axes`` (runs its impl directly for concrete Arrays
    under the eval trace), then restores the reduced dims as size 1 when ``keepdims``."""
    if type(x) is Array and current_trace() is EVAL_TRACE:
        r = prim.impl(x._buf, axes=axes, **params)
        if keepdims:
            r = np.reshape(r, kept_shape(x.shape, axes))
        return wrap(r, x._weak if prim.meta.get("keeps_weak") else False)
    r = prim.bind(x, axes=axes, **params)
    if keepdims:
        r = _ns().reshape(r, kept_shape(x.shape, axes))
    return r


# ---- primitives ----------------------------------------------------------------------------------

def _lowest(dt):
    """Identity of max: -inf, or the most negative finite value for dtypes without inf."""
    if dt == dtypes.bool_:
        return False
    if dtypes.is_integer(dt):
        return np.iinfo(dt).min
    if dtypes.is_complex(dt):
        return complex(-np.inf, -np.inf)
    v = np.array(-np.inf, dtype=dt)
    return -np.inf if np.isinf(v) else dtypes.finfo(dt).min


def _highest(dt):
    if dt == dtypes.bool_:
        return True
    if dtypes.is_integer(dt):
        return np.iinfo(dt).max
    if dtypes.is_complex(dt):
        return complex(np.inf, np.inf)
    v = np.array(np.inf, dtype=dt)
    return np.inf if np.isinf(v) else dtypes.finfo(dt).max


def _accumulate_impl(ufunc):
    def impl(x, *, axes):
        dt = x.dtype
        if dt in _ACC32:
            return np.asarray(ufunc.reduce(x.astype(_F32), axis=axes)).astype(dt)
        # dtype= keeps the operand's dtype: NumPy would widen small ints (the wrapper decides).
        return ufunc.reduce(x, axis=axes, dtype=dt)
    return impl


def _extremum_impl(ufunc, identity):
    def impl(x, *, axes):
        dt = x.dtype
        if is_empty_reduction(x.shape, axes):
            return np.full(reduced_shape(x.shape, axes), identity(dt), dtype=dt)
        if dt in _ACC32:
            return np.asarray(ufunc.reduce(x.astype(_F32), axis=axes)).astype(dt)
        return ufunc.reduce(x, axis=axes)
    return impl


def _logical_impl(ufunc):
    def impl(x, *, axes):
        return ufunc.reduce(x, axis=axes)
    return impl


def _reduce_abstract_eval(x, *, axes):
    return ShapedArray(reduced_shape(x.shape, axes), x.dtype, x.weak_type)


def _declare(name, impl):
    p = Primitive(name, family="reduction")
    p.impl = impl
    p.abstract_eval = _reduce_abstract_eval
    p.weak_type = lambda w, *, axes: w
    p.meta["keeps_weak"] = True
    return p


reduce_sum_p = _declare("reduce_sum", _accumulate_impl(np.add))
reduce_prod_p = _declare("reduce_prod", _accumulate_impl(np.multiply))
reduce_max_p = _declare("reduce_max", _extremum_impl(np.maximum, _lowest))
reduce_min_p = _declare("reduce_min", _extremum_impl(np.minimum, _highest))
reduce_and_p = _declare("reduce_and", _logical_impl(np.logical_and))
reduce_or_p = _declare("reduce_or", _logical_impl(np.logical_or))
reduce_max_p.meta["identity"] = _lowest
reduce_min_p.meta["identity"] = _highest
# Sharding: a split kept dim stays split; a split reduced dim leaves a pending reduction
# (and / or of bools are min / max of 0 / 1).
reduce_sum_p.sharding = RS.reduction("sum", linear=True)
reduce_prod_p.sharding = RS.reduction("prod")
reduce_max_p.sharding = RS.reduction("max")
reduce_min_p.sharding = RS.reduction("min")
reduce_and_p.sharding = RS.reduction("min")
reduce_or_p.sharding = RS.reduction("max")


def _arg_impl(np_fn, name):
    def impl(x, *, axes):
        out_shape = reduced_shape(x.shape, axes)
        if not axes:
            return np.zeros(x.shape, dtype=np.int64)
        if is_empty_reduction(x.shape, axes):
            raise ValueError(f"{name}: zero-size reduction along axes {axes} of an array of "
                             f"shape {x.shape} has no {name[3:]}imum")
        if x.dtype in _ACC32:
            x = x.astype(_F32)  # exact: every low-precision value is a float32
        if len(axes) == 1:
            r = np_fn(x, axis=axes[0])
        else:
            rest = [i for i in range(x.ndim) if i not in axes]
            xt = np.transpose(x, rest + list(axes))
            r = np_fn(xt.reshape(out_shape + (reduction_size(x.shape, axes),)), axis=-1)
        return np.asarray(r, dtype=np.int64)
    return impl


def _arg_abstract_eval(x, *, axes):
    return ShapedArray(reduced_shape(x.shape, axes), dtypes.int64, False)


argmax_p = Primitive("argmax", family="reduction")
argmin_p = Primitive("argmin", family="reduction")
for _p, _fn in ((argmax_p, np.argmax), (argmin_p, np.argmin)):
    _p.impl = _arg_impl(_fn, _p.name)
    _p.abstract_eval = _arg_abstract_eval
    _p.sharding = RS.reduction(None)   # an index over a split dim needs the whole dim
del _p, _fn


# ---- transformation rules ----------------------------------------------------------------------
#
# reduce_sum: linear; its transpose broadcasts the cotangent back over the reduced axes.
# reduce_prod: product rule without dividing by x: d prod = sum_i t_i * prod_{j != i} x_j, where
#   the "product of the others" is (exclusive running product from the left) * (exclusive running
#   product from the right), so zeros in x (one or several) are exact.
# reduce_max / reduce_min: the subgradient convention: over the k entries equal to the result,
#   the JVP is the MEAN of their tangents (so reverse mode gives 1/k to each tie); when the
#   result is NaN, the k NaN entries share it the same way.
# argmax / argmin / reduce_and / reduce_or: integer or bool outputs, zero tangents.
# Batch rules: the batch axis stays where it is and the reduced axes are renumbered around it.

def _zero_out(ans):
    return Zero(tangent_aval(ans.aval))


def _batched_axes(axes, d):
    """Per-example ``axes`` renumbered for an operand whose batch axis is ``d``; and the batch
    axis of the result (the reduced axes before ``d`` disappear)."""
    new = tuple(a + (a >= d) for a in axes)
    return new, d - builtins.sum(1 for a in new if a < d)


def _reduction_batch(prim):
    def rule(args, dims, *, axes):
        new, out_dim = _batched_axes(axes, dims[0])
        return prim.bind(args[0], axes=new), out_dim
    prim.batch = rule
    return rule


def _reduce_sum_transpose(ct, x, *, axes):
    shape = tuple(x.aval.shape)
    if type(ct) is Zero:
        return [Zero(tangent_aval(x.aval))]
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [broadcast_in_dim(ct, shape, kept)]


def _to_last(x, axes):
    """``x`` with the dims in ``axes`` moved to the end and flattened into one: (*rest, n)."""
    rest = [i for i in range(x.ndim) if i not in axes]
    xt = lax_transpose(x, tuple(rest + list(axes)))
    return lax_reshape(xt, tuple(x.shape[i] for i in rest) + (reduction_size(x.shape, axes),))


def prod_of_others(x, axis):
    """``prod_{j != i} x_j`` along ``axis`` for every position ``i`` (no division: exact with
    zeros), from the exclusive running products of both directions."""
    from .cumulative import cumprod_p
    one = const(1, x.dtype)
    cfg_l = [(0, 0, 0)] * x.ndim
    cfg_r = [(0, 0, 0)] * x.ndim
    cfg_l[axis], cfg_r[axis] = (1, -1, 0), (-1, 1, 0)
    left = cumprod_p.bind(lax_pad(x, one, cfg_l), axis=axis, reverse=False)
    right = cumprod_p.bind(lax_pad(x, one, cfg_r), axis=axis, reverse=True)
    return _ns().multiply(left, right)


def _reduce_prod_jvp(primals, tangents, *, axes):
    x, = primals
    t, = tangents
    ans = reduce_prod_p.bind(x, axes=axes)
    if type(t) is Zero or not dtypes.is_inexact(x.dtype) or is_empty_reduction(x.shape, axes):
        return ans, _zero_out(ans)
    if not axes:
        return ans, t
    xf, tf = _to_last(x, axes), _to_last(t, axes)
    last = xf.ndim - 1
    g = _ns().multiply(tf, prod_of_others(xf, last))
    return ans, reduce_sum_p.bind(g, axes=(last,))


def _is_nan_or(x, mask):
    if not dtypes.is_inexact(x.dtype):
        return mask
    return _ns().logical_or(mask, _ns().isnan(x))


def extremum_jvp(prim):
    """JVP of reduce_max / reduce_min: the mean of the tangents of the entries equal to the
    result (NaN entries when the result is NaN)."""
    def rule(primals, tangents, *, axes):
        x, = primals
        t, = tangents
        ans = prim.bind(x, axes=axes)
        if type(t) is Zero or not dtypes.is_inexact(x.dtype):
            return ans, _zero_out(ans)
        if not axes:
            return ans, t
        if is_empty_reduction(x.shape, axes):
            return ans, _zero_out(ans)
        snp = _ns()
        hit = snp.equal(x, lax_reshape(ans, kept_shape(x.shape, axes)))
        hit = _is_nan_or(x, hit)  # no NaN in x unless the result is NaN (NaN propagates)
        count = reduce_sum_p.bind(convert_element_type(hit, dtypes.real_dtype(x.dtype), False),
                                  axes=axes)
        picked = reduce_sum_p.bind(snp.where(hit, t, 0), axes=axes)
        return ans, snp.divide(picked, count)
    prim.jvp = rule
    return rule


def _declare_rules():
    from . import rules as R
    R.deflinear(reduce_sum_p, _reduce_sum_transpose)
    reduce_prod_p.jvp = _reduce_prod_jvp
    extremum_jvp(reduce_max_p)
    extremum_jvp(reduce_min_p)
    for p in (reduce_and_p, reduce_or_p, argmax_p, argmin_p):
        R.defjvp_zero(p)
    for p in (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p, reduce_or_p,
              argmax_p, argmin_p):
        _reduction_batch(p)


_declare_rules()


# ---- public: sum / prod ------------------------------------------------------------------------

def _sum_like(op, prim, identity, combine, x, axis, dtype, keepdims, initial, where):
    x = operand(x, op)
    axes = normalize_axes(op, axis, x.ndim, sort=True)
    acc = sum_dtype(op, x.dtype, dtype)
    if acc != x.dtype:
        x = convert_element_type(x, acc, False)
    if where is not None:
        x = masked(op, x, where, identity)
    r = apply(prim, x, axes, keepdims)
    if initial is not None:
        r = cast(getattr(_ns(), combine)(r, initial), acc)
    return r


def sum(x, /, axis=None, dtype=None, out=None, keepdims=False, *, initial=None,  # noqa: A001
        where=None):
    """Sum of elements over the given axes (Array API ``sum`` plus NumPy's extras).

    Args:
        x: input array, shape ``(*dims)``, any dtype.
        axis: None (all axes), an int or a tuple of ints; negative axes count from the end.
        dtype: accumulation and result dtype. None: bool and signed ints accumulate in int64,
            unsigned ints in uint64 (Array API / NumPy), floats and complex keep their dtype
            (float16 / bfloat16 / float8 are summed in float32 and rounded back once).
        out: must be None (arrays are immutable).
        keepdims: keep the reduced axes as size-1 dims.
        initial: a scalar added to the result (NumPy).
        where: bool mask broadcastable to ``x.shape``; only True entries are summed.
    Returns:
        Array of shape ``(*dims)`` without the reduced axes (size 1 with ``keepdims``). An empty
        reduction gives 0. Integer overflow wraps (two's complement), as in NumPy.
    Raises:
        AxisError: (ValueError / IndexError) an axis is out of range. ValueError: duplicate axes
        or a mask that does not broadcast. TypeError: bad axis type, non-bool mask, ``out=``.
    """
    if out is not None:
        no_out("sum", out)
    if type(x) is Array and where is None and initial is None and current_trace() is EVAL_TRACE:
        buf = x._buf
        axes = normalize_axes("sum", axis, buf.ndim, sort=True)
        acc = sum_dtype("sum", buf.dtype, dtype)
        weak = x._weak
        if acc != buf.dtype:
            buf, weak = convert_element_type_p.impl(buf, new_dtype=acc, weak_type=False), False
        r = reduce_sum_p.impl(buf, axes=axes)
        if keepdims:
            r = np.reshape(r, kept_shape(buf.shape, axes))
        return wrap(r, weak)
    return _sum_like("sum", reduce_sum_p, 0, "add", x, axis, dtype, keepdims, initial, where)


def prod(x, /, axis=None, dtype=None, out=None, keepdims=False, *, initial=None, where=None):
    """Product of elements over the given axes (Array API ``prod`` plus NumPy's extras).

    Args:
        x: input array, shape ``(*dims)``, any dtype.
        axis: None (all axes), an int or a tuple of ints (negative allowed).
        dtype: accumulation / result dtype; None follows ``sum`` (int8 -> int64, uint8 -> uint64,
            bool -> int64, floats keep theirs, float16/bfloat16 multiplied in float32).
        out: must be None. keepdims: keep reduced axes as size 1.
        initial: a scalar multiplied into the result. where: bool mask of entries to include.
    Returns:
        Array without the reduced axes. An empty reduction gives 1; integer overflow wraps.
    Raises:
        AxisError / ValueError / TypeError: as ``sum``.
    """
    no_out("prod", out)
    return _sum_like("prod", reduce_prod_p, 1, "multiply", x, axis, dtype, keepdims, initial,
                     where)


# ---- public: max / min -------------------------------------------------------------------------

def extremum(op, prim, combine, x, axis, keepdims, initial, where):
    """max / min (and nanmax / nanmin): the shared argument handling."""
    x = operand(x, op)
    axes = normalize_axes(op, axis, x.ndim, sort=True)
    if initial is None:
        if where is not None:
            raise ValueError(f"{op}: where= needs initial= (the value of a slice with no selected "
                             f"entries), since {combine} has no identity")
        if is_empty_reduction(x.shape, axes):
            empty = [a for a in axes if x.shape[a] == 0]
            raise ValueError(f"{op}: zero-size reduction along axis {empty[0]} (array shape "
                             f"{tuple(x.shape)}) has no identity; pass initial=")
    if where is not None:
        x = masked(op, x, where, prim.meta["identity"](x.dtype))
    r = apply(prim, x, axes, keepdims)
    if initial is not None:
        r = cast(getattr(_ns(), combine)(r, initial), x.dtype)
    return r


def max(x, /, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
    """Maximum over the given axes (Array API ``max`` plus NumPy's ``initial`` / ``where``).

    Args:
        x: input array, shape ``(*dims)``, any dtype (complex compares lexicographically).
        axis: None (all axes), an int or a tuple of ints (negative allowed).
        out: must be None. keepdims: keep reduced axes as size 1.
        initial: a scalar included in every slice (makes empty reductions valid).
        where: bool mask of entries to include (needs ``initial``).
    Returns:
        Array of ``x``'s dtype without the reduced axes. NaN propagates (a slice with a NaN
        gives NaN); use ``nanmax`` to ignore NaNs.
    Raises:
        ValueError: zero-size reduction without ``initial``, or ``where`` without ``initial``;
            duplicate axes. AxisError: axis out of range. TypeError: bad axis type.
    """
    no_out("max", out)
    if (type(x) is Array and initial is None and where is None
            and current_trace() is EVAL_TRACE):
        axes = normalize_axes("max", axis, x.ndim, sort=True)
        if not is_empty_reduction(x.shape, axes):
            return apply(reduce_max_p, x, axes, keepdims)
    return extremum("max", reduce_max_p, "maximum", x, axis, keepdims, initial, where)


def min(x, /, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
    """Minimum over the given axes; the mirror image of ``max`` (see there).

    Returns:
        Array of ``x``'s dtype without the reduced axes; NaN propagates (``nanmin`` skips NaN).
    Raises:
        ValueError: zero-size reduction without ``initial``; ``where`` without ``initial``.
        AxisError: axis out of range.
    """
    no_out("min", out)
    if (type(x) is Array and initial is None and where is None
            and current_trace() is EVAL_TRACE):
        axes = normalize_axes("min", axis, x.ndim, sort=True)
        if not is_empty_reduction(x.shape, axes):
            return apply(reduce_min_p, x, axes, keepdims)
    return extremum("min", reduce_min_p, "minimum", x, axis, keepdims, initial, where)


def amax(x, /, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Alias of ``max`` (NumPy name)."""
    return max(x, axis, out, keepdims, initial, where)


def amin(x, /, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Alias of ``min`` (NumPy name)."""
    return min(x, axis, out, keepdims, initial, where)


def ptp(x, /, axis=None, out=None, keepdims=False):
    """Peak to peak: ``max(x, axis) - min(x, axis)`` (NumPy ``ptp``).

    Args:
        x: numeric array (bool raises TypeError, as in NumPy). axis, keepdims: as ``max``.
    Returns:
        Array of ``x``'s dtype; unsigned results wrap as in NumPy.
    Raises:
        TypeError: bool input. ValueError: zero-size reduction. AxisError: bad axis.
    """
    no_out("ptp", out)
    x = operand(x, "ptp")
    if x.dtype == dtypes.bool_:
        raise TypeError("ptp: unsupported dtype bool (max - min is not defined for booleans); "
                        "cast to an integer dtype first")
    hi = extremum("ptp", reduce_max_p, "maximum", x, axis, keepdims, None, None)
    lo = extremum("ptp", reduce_min_p, "minimum", x, axis, keepdims, None, None)
    return _ns().subtract(hi, lo)


# ---- public: argmax / argmin -------------------------------------------------------------------

def _arg(op, prim, x, axis, keepdims):
    x = operand(x, op)
    if axis is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axis, (tuple, list)):
        raise TypeError(f"{op}: axis must be an int or None, got {axis!r}")
    else:
        axes = normalize_axes(op, axis, x.ndim)
    if is_empty_reduction(x.shape, axes):
        raise ValueError(f"{op}: attempt to take the {op} of an empty sequence: zero-size "
                         f"reduction along axis {'None' if axis is None else axis} of an array "
                         f"of shape {tuple(x.shape)}")
    r = apply(prim, x, axes, False)
    if keepdims:
        r = restore_dims(r, x.shape, tuple(range(x.ndim)) if axis is None else axes)
    return r


def argmax(x, /, axis=None, out=None, *, keepdims=False):
    """Index of the maximum along an axis (first occurrence of ties; the first NaN if any).

    Args:
        x: input array, any dtype (complex compares lexicographically).
        axis: an int (negative allowed) or None: the index into the flattened array.
        out: must be None. keepdims: keep the reduced axis (all axes for None) as size 1.
    Returns:
        int64 Array of ``x.shape`` without ``axis`` (0-d for ``axis=None``).
    Raises:
        ValueError: the reduced axis has size 0. AxisError: axis out of range.
        TypeError: a tuple axis (NumPy accepts one axis only).
    """
    no_out("argmax", out)
    if type(x) is Array and type(axis) is int and not keepdims and current_trace() is EVAL_TRACE:
        buf = x._buf
        ax = normalize_axes("argmax", axis, buf.ndim)
        if buf.shape[ax[0]] and buf.dtype not in _ACC32:
            return wrap(np.argmax(buf, axis=ax[0]).astype(np.int64, copy=False), False)
    return _arg("argmax", argmax_p, x, axis, keepdims)


def argmin(x, /, axis=None, out=None, *, keepdims=False):
    """Index of the minimum along an axis; the mirror image of ``argmax`` (see there)."""
    no_out("argmin", out)
    if type(x) is Array and type(axis) is int and not keepdims and current_trace() is EVAL_TRACE:
        buf = x._buf
        ax = normalize_axes("argmin", axis, buf.ndim)
        if buf.shape[ax[0]] and buf.dtype not in _ACC32:
            return wrap(np.argmin(buf, axis=ax[0]).astype(np.int64, copy=False), False)
    return _arg("argmin", argmin_p, x, axis, keepdims)


# ---- public: all / any / count_nonzero ---------------------------------------------------------

def _logical(op, prim, identity, x, axis, keepdims, where):
    if type(x) is Array and where is None and current_trace() is EVAL_TRACE \
            and x._buf.dtype == dtypes.bool_:
        return apply(prim, x, normalize_axes(op, axis, x.ndim, sort=True), keepdims)
    x = operand(x, op)
    axes = normalize_axes(op, axis, x.ndim, sort=True)
    x = to_bool(x)
    if where is not None:
        x = masked(op, x, where, identity)
    return apply(prim, x, axes, keepdims)


def all(x, /, axis=None, out=None, keepdims=False, *, where=None):  # noqa: A001
    """True where every element along the axes is nonzero (NaN counts as nonzero).

    Args:
        x: input array, any dtype. axis: None / int / tuple of ints.
        out: must be None. keepdims: keep reduced axes as size 1.
        where: bool mask; masked-out entries count as True.
    Returns:
        bool Array without the reduced axes; an empty reduction gives True.
    Raises:
        AxisError: axis out of range. ValueError: duplicate axes.
    """
    no_out("all", out)
    return _logical("all", reduce_and_p, True, x, axis, keepdims, where)


def any(x, /, axis=None, out=None, keepdims=False, *, where=None):  # noqa: A001
    """True where some element along the axes is nonzero (NaN counts as nonzero).

    Args:
        x: input array, any dtype. axis: None / int / tuple of ints.
        out: must be None. keepdims: keep reduced axes as size 1.
        where: bool mask; masked-out entries count as False.
    Returns:
        bool Array without the reduced axes; an empty reduction gives False.
    Raises:
        AxisError: axis out of range. ValueError: duplicate axes.
    """
    no_out("any", out)
    return _logical("any", reduce_or_p, False, x, axis, keepdims, where)


def count_nonzero(x, /, axis=None, *, keepdims=False):
    """Number of nonzero elements over the given axes (NaN counts as nonzero).

    Args:
        x: input array, any dtype. axis: None / int / tuple of ints. keepdims: as ``sum``.
    Returns:
        int64 Array without the reduced axes.
    Raises:
        AxisError: axis out of range. ValueError: duplicate axes.
    """
    x = operand(x, "count_nonzero")
    axes = normalize_axes("count_nonzero", axis, x.ndim, sort=True)
    return apply(reduce_sum_p, convert_element_type(to_bool(x), dtypes.int64, False), axes,
                 keepdims)


from .reductions_stats import *  # noqa: E402,F401,F403
from .reductions_stats import __all__ as _stats_all  # noqa: E402
from .reductions_quantile import *  # noqa: E402,F401,F403
from .reductions_quantile import __all__ as _quantile_all  # noqa: E402

__all__ += _stats_all + _quantile_all
