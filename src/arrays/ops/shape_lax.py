"""The shape family's primitives (lax-style) and their module-level wrappers.

Every NumPy-API shape / joining / creation function of ``starling.numpy`` is a composition of
this small set, so that later transformations (jvp, transpose, vmap, sharding) need rules for
these nine primitives only:

=================  ===========================================  =============================
primitive          params                                        NumPy meaning
=================  ===========================================  =============================
reshape            new_sizes                                     C-order ``np.reshape``
broadcast_in_dim   shape, broadcast_dimensions                   operand dim i -> output dim
                                                                 ``broadcast_dimensions[i]``
transpose          permutation                                   ``np.transpose``
squeeze            dimensions                                    ``np.squeeze``
rev                dimensions                                    ``np.flip``
concatenate        dimension (n operands)                        ``np.concatenate``
pad                padding_config ((lo, hi, interior), ...)      lo/hi may be negative (crop)
slice              start_indices, limit_indices, strides         static ``x[s:l:st]``
iota               dtype, shape, dimension                       ``arange`` along ``dimension``
=================  ===========================================  =============================

Data-movement primitives keep the operand's dtype and weak type. The NumPy impls may return
views of their input buffers: Starling buffers are never written, so sharing them is safe.

Rules (next to each primitive): all but iota are linear, so their JVP applies the primitive to
the tangents and their transposes move cotangents back (reshape <-> reshape, broadcast_in_dim
<-> reduce_sum over the broadcast dims, transpose <-> inverse permutation, squeeze <-> reshape,
rev <-> rev, concatenate <-> one slice per operand, pad <-> negative pad + strided slice (and the
padding value gets the sum over the padded positions), slice <-> pad with zeros (interior
padding for strides)). Batch rules thread the batch axis through the static params in one call.
iota has no operands: its tangent is zero and vmap never batches it.

The module-level functions below (``reshape``, ``broadcast_in_dim``, ``transpose``, ``squeeze``,
``expand_dims``, ``rev``, ``concatenate``, ``pad``, ``static_slice``, ``iota``) take already
normalized, static arguments (non-negative axes, tuples of ints) and are what other families
(indexing, reductions, linalg) should call; the user-facing checks live in shape.py.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.avals import ShapedArray, is_symbolic
from ...core.primitive import Primitive
from ...core.ad_util import Zero, is_undefined, tangent_aval
from ...core.trace import EVAL_TRACE, ConcretizationError, Tracer, current_trace
from ..array import Array, wrap
from . import rules as R
from .axes import AxisError, normalize_axes, normalize_axis  # noqa: F401  (re-used by shape.py)
from . import rules_sharding as RS


def _same_weak(w, **params):
    return w


def _shape_str(shape):
    return str(tuple(shape))


def _shape_tuple(op, shape, allow_minus_one=False):
    """A user shape (int or sequence of ints) as a tuple of ints; errors name ``op``."""
    if (isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_))) \
            or is_symbolic(shape):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{op}: shape must be an int or a sequence of ints, got {shape!r}") \
            from None
    out = []
    for d in dims:
        if type(d) is not int:
            if is_symbolic(d):  # a symbolic dim (dynamic shapes): kept as is
                out.append(d)
                continue
            if isinstance(d, (bool, np.bool_)) or not hasattr(d, "__index__"):
                raise TypeError(f"{op}: shape entries must be integers, got {shape!r}")
            try:
                d = d.__index__()
            except ConcretizationError:
                raise TypeError(f"{op}: shape entries must be static Python ints, got a traced "
                                f"value in {shape!r}") from None
        if d < 0 and not (allow_minus_one and d == -1):
            valid = "non-negative or -1" if allow_minus_one else "non-negative"
            raise ValueError(f"{op}: shape entries must be {valid}, got {tuple(dims)}")
        out.append(d)
    return tuple(out)


def _static_ints(op, name, value):
    """Python ints from an int, a (nested) sequence of ints, or a concrete integer array."""
    if isinstance(value, (Array, Tracer)):
        try:
            value = np.asarray(value.to_concrete())
        except ConcretizationError:
            raise ConcretizationError(
                f"{op}: {name} must be concrete (static) integers, got a traced "
                f"{value.aval.str_short()}; pass Python ints") from None
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iub":
            raise TypeError(f"{op}: {name} must be integers, got dtype {value.dtype}")
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_static_ints(op, name, v) for v in value]
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise TypeError(f"{op}: {name} must be an int or a sequence of ints, got {value!r}")
    return value.__index__()


def _eager(x):
    """True when ``x`` is a concrete Array and the current trace is the eval trace: wrappers
    then run the impl directly (what EvalTrace.process_primitive would do, minus a few calls)."""
    return type(x) is Array and current_trace() is EVAL_TRACE


# ---- transformation rule helpers (see the module docstring) ------------------------------------

def _linear(prim, transpose):
    """Declares ``prim`` linear in all its operands: jvp = prim of the tangents (Zero in, Zero
    out; integer / bool outputs have float0 tangents), and its ``transpose`` rule."""
    def jvp(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents) or not dtypes.is_inexact(ans.dtype):
            return ans, Zero(tangent_aval(ans.aval))
        return ans, prim.bind(*[R.instantiate(t) for t in tangents], **params)
    prim.jvp = jvp
    prim.transpose = transpose
    prim.is_linear = True


def _zero_ct(x):
    return Zero(tangent_aval(x.aval))


def _zero(dt):
    """A 0-d zero of ``dt`` (the padding value of transposed slices)."""
    return wrap(np.zeros((), dt), False)


def _phys(axes, bdim):
    """Per-example axes as axes of the batched value whose batch axis is ``bdim``."""
    return tuple(a + (a >= bdim) for a in axes)


def _to_front(x, d, size):
    """The batch axis of ``x`` first; an unbatched ``x`` (``d`` None) is broadcast to ``size``."""
    if d is None:
        return broadcast_in_dim(x, (size,) + tuple(x.shape), tuple(range(1, x.ndim + 1)))
    return R.move_axis(x, d, 0)


def _reduce_sum(x, axes):
    from .reductions import apply, reduce_sum_p  # reductions imports this module
    return apply(reduce_sum_p, x, tuple(axes), False)


# ---- reshape ----------------------------------------------------------------------------------

reshape_p = Primitive("reshape", family="shape")


def _reshape_abstract(x, *, new_sizes):
    if _size(x.shape) != _size(new_sizes):
        raise ValueError(f"reshape: cannot reshape array of shape {_shape_str(x.shape)} "
                         f"(size {_size(x.shape)}) into shape {_shape_str(new_sizes)}")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def _size(shape):
    n = 1
    for d in shape:
        n = n * d
    return n


reshape_p.impl = lambda x, *, new_sizes: np.reshape(x, new_sizes)
reshape_p.abstract_eval = _reshape_abstract
reshape_p.weak_type = _same_weak


def reshape(x, new_sizes):
    """C-order reshape of ``x`` to the tuple ``new_sizes`` (no -1); a no-op returns ``x``."""
    new_sizes = tuple(new_sizes)
    if tuple(x.shape) == new_sizes:
        return x
    if _eager(x):
        if _size(x.shape) != _size(new_sizes):
            _reshape_abstract(x, new_sizes=new_sizes)  # raises the size-mismatch error
        return wrap(np.reshape(x._buf, new_sizes), x._weak)
    return reshape_p.bind(x, new_sizes=new_sizes)


def _reshape_transpose(ct, x, *, new_sizes):
    if type(ct) is Zero:
        return [_zero_ct(x)]
    return [reshape(ct, x.aval.shape)]


def _reshape_batch(args, dims, *, new_sizes):
    x = R.move_axis(args[0], dims[0], 0)
    return reshape(x, (x.shape[0],) + tuple(new_sizes)), 0


_linear(reshape_p, _reshape_transpose)
reshape_p.batch = _reshape_batch
reshape_p.sharding = RS.reshape_strategy
reshape_p.meta["shard_params"] = RS.local_out_shape("new_sizes")


# ---- broadcast_in_dim -------------------------------------------------------------------------

broadcast_in_dim_p = Primitive("broadcast_in_dim", family="shape")


def _bid_check(x_shape, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != len(x_shape):
        raise ValueError(f"broadcast_in_dim: broadcast_dimensions {broadcast_dimensions} must "
                         f"name one output dim per operand dim of shape {_shape_str(x_shape)}")
    prev = -1
    for i, d in enumerate(broadcast_dimensions):
        if not prev < d < len(shape):
            raise ValueError(f"broadcast_in_dim: broadcast_dimensions {broadcast_dimensions} "
                             f"must be strictly increasing and < {len(shape)}")
        if x_shape[i] != 1 and x_shape[i] != shape[d]:
            raise ValueError(f"broadcast_in_dim: operand dim {i} of size {x_shape[i]} cannot "
                             f"be broadcast to output dim {d} of size {shape[d]} "
                             f"(operand shape {_shape_str(x_shape)}, target {_shape_str(shape)})")
        prev = d


def _bid_abstract(x, *, shape, broadcast_dimensions):
    _bid_check(x.shape, shape, broadcast_dimensions)
    return ShapedArray(shape, x.dtype, x.weak_type)


def broadcast_buf(buf, shape):
    """A broadcast view of the NumPy buffer ``buf`` to ``shape`` (trailing alignment), or None
    when they do not broadcast or an entry is not a non-negative int (callers then take their
    checked path). The ndarray constructor with stride-0 dims is ~5x cheaper than
    ``np.broadcast_to``, the fallback for buffers that cannot export themselves."""
    lead = len(shape) - buf.ndim
    if lead < 0:
        return None
    bshape, bstrides = buf.shape, buf.strides
    strides = []
    for i, d in enumerate(shape):
        if type(d) is not int or d < 0:
            return None
        j = i - lead
        if j < 0:
            strides.append(0)
        elif bshape[j] == d:
            strides.append(bstrides[j])
        elif bshape[j] == 1:
            strides.append(0)
        else:
            return None
    try:
        return np.ndarray(shape, buf.dtype, buf, 0, tuple(strides))
    except (TypeError, ValueError, BufferError):
        return np.broadcast_to(buf, shape)


def _bid_impl(x, *, shape, broadcast_dimensions):
    x = np.asarray(x)
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    x = x.reshape(expanded)
    out = broadcast_buf(x, shape)
    return np.broadcast_to(x, shape) if out is None else out


broadcast_in_dim_p.impl = _bid_impl
broadcast_in_dim_p.abstract_eval = _bid_abstract
broadcast_in_dim_p.weak_type = _same_weak


def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Broadcasts ``x`` to ``shape``; operand dim i becomes output dim ``broadcast_dimensions[i]``.

    A no-op (same shape, identity dims) returns ``x``.
    """
    shape = tuple(shape)
    broadcast_dimensions = tuple(broadcast_dimensions)
    if tuple(x.shape) == shape and broadcast_dimensions == tuple(range(len(shape))):
        return x
    if _eager(x):
        _bid_check(x.shape, shape, broadcast_dimensions)
        return wrap(_bid_impl(x._buf, shape=shape, broadcast_dimensions=broadcast_dimensions),
                    x._weak)
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=broadcast_dimensions)


def _bid_transpose(ct, x, *, shape, broadcast_dimensions):
    # Sum over the output dims that broadcasting created: the new ones and the size-1 operand
    # dims that were stretched; the reshape restores those size-1 dims.
    if type(ct) is Zero:
        return [_zero_ct(x)]
    in_shape = tuple(x.aval.shape)
    summed = [d for d in range(len(shape)) if d not in broadcast_dimensions]
    summed += [d for i, d in enumerate(broadcast_dimensions)
               if in_shape[i] == 1 and shape[d] != 1]
    out = _reduce_sum(ct, sorted(summed)) if summed else ct
    return [reshape(out, in_shape)]


def _bid_batch(args, dims, *, shape, broadcast_dimensions):
    x = R.move_axis(args[0], dims[0], 0)
    return broadcast_in_dim(x, (x.shape[0],) + tuple(shape),
                            (0,) + tuple(d + 1 for d in broadcast_dimensions)), 0


def _bid_sharding(in_avals, out_avals, *, shape, broadcast_dimensions):
    # an operand dim of full size keeps its split; a new or expanded result dim may be split
    # with the operand replicated (each device broadcasts to its own piece only)
    x = in_avals[0]
    combos = [((RS.Shard(d),), (RS.Shard(i),)) for i, d in enumerate(broadcast_dimensions)
              if x.shape[i] == shape[d] and shape[d] > 1]
    full = {d for i, d in enumerate(broadcast_dimensions) if x.shape[i] == shape[d]}
    combos += [((RS.Shard(d),), (RS.R,)) for d in range(len(shape))
               if d not in full and shape[d] > 1]
    return combos + list(RS.VALUE_PARTIALS)


_linear(broadcast_in_dim_p, _bid_transpose)
broadcast_in_dim_p.batch = _bid_batch
broadcast_in_dim_p.sharding = _bid_sharding
broadcast_in_dim_p.meta["shard_params"] = RS.local_out_shape("shape")


# ---- transpose --------------------------------------------------------------------------------

transpose_p = Primitive("transpose", family="shape")


def _transpose_abstract(x, *, permutation):
    if sorted(permutation) != list(range(len(x.shape))):
        raise ValueError(f"transpose: permutation {permutation} is not a permutation of the "
                         f"{len(x.shape)} dims of shape {_shape_str(x.shape)}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


transpose_p.impl = lambda x, *, permutation: np.transpose(x, permutation)
transpose_p.abstract_eval = _transpose_abstract
transpose_p.weak_type = _same_weak


def transpose(x, permutation):
    """Permutes the dims of ``x``: output dim i is input dim ``permutation[i]``."""
    permutation = tuple(permutation)
    if permutation == tuple(range(len(permutation))):
        return x
    if _eager(x) and len(permutation) == x._buf.ndim:
        return wrap(np.transpose(x._buf, permutation), x._weak)
    return transpose_p.bind(x, permutation=permutation)


def _transpose_transpose(ct, x, *, permutation):
    if type(ct) is Zero:
        return [_zero_ct(x)]
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return [transpose(ct, tuple(inverse))]


def _transpose_batch(args, dims, *, permutation):
    # One transpose: the batch axis goes first, the others follow the permutation.
    (x,), (d,) = args, dims
    rest = [i for i in range(x.ndim) if i != d]
    return transpose(x, (d,) + tuple(rest[p] for p in permutation)), 0


_linear(transpose_p, _transpose_transpose)
transpose_p.batch = _transpose_batch
transpose_p.sharding = lambda in_avals, out_avals, *, permutation: [
    ((RS.Shard(d),), (RS.Shard(p),)) for d, p in enumerate(permutation)] + list(RS.VALUE_PARTIALS)


# ---- squeeze ----------------------------------------------------------------------------------

squeeze_p = Primitive("squeeze", family="shape")


def _squeeze_abstract(x, *, dimensions):
    for d in dimensions:
        if not 0 <= d < len(x.shape) or x.shape[d] != 1:
            raise ValueError(f"squeeze: cannot remove dim {d} of shape {_shape_str(x.shape)}: "
                             "only existing dims of size 1 can be squeezed")
    shape = tuple(s for i, s in enumerate(x.shape) if i not in dimensions)
    return ShapedArray(shape, x.dtype, x.weak_type)


squeeze_p.impl = lambda x, *, dimensions: np.squeeze(np.asarray(x), axis=dimensions)
squeeze_p.abstract_eval = _squeeze_abstract
squeeze_p.weak_type = _same_weak


def squeeze(x, dimensions):
    """Removes the size-1 dims ``dimensions`` (sorted, non-negative) of ``x``."""
    dimensions = tuple(sorted(dimensions))
    if not dimensions:
        return x
    if _eager(x):
        _squeeze_abstract(x, dimensions=dimensions)  # errors as staged
        return wrap(x._buf.reshape([d for i, d in enumerate(x._buf.shape)
                                    if i not in dimensions]), x._weak)
    return squeeze_p.bind(x, dimensions=dimensions)


def _squeeze_transpose(ct, x, *, dimensions):
    if type(ct) is Zero:
        return [_zero_ct(x)]
    return [reshape(ct, x.aval.shape)]


def _squeeze_batch(args, dims, *, dimensions):
    (x,), (d,) = args, dims
    phys = _phys(dimensions, d)
    return squeeze(x, phys), d - sum(1 for a in phys if a < d)


def _squeeze_sharding(in_avals, out_avals, *, dimensions):
    kept = [d for d in range(len(in_avals[0].shape)) if d not in dimensions]
    return [((RS.Shard(i),), (RS.Shard(d),)) for i, d in enumerate(kept)] + \
        list(RS.VALUE_PARTIALS)


_linear(squeeze_p, _squeeze_transpose)
squeeze_p.batch = _squeeze_batch
squeeze_p.sharding = _squeeze_sharding


def expand_dims(x, dimensions):
    """Inserts size-1 dims so that they sit at ``dimensions`` of the output (a reshape)."""
    shape = list(x.shape)
    for d in sorted(dimensions):
        shape.insert(d, 1)
    return reshape(x, tuple(shape))


# ---- rev --------------------------------------------------------------------------------------

rev_p = Primitive("rev", family="shape")
_REVERSED = slice(None, None, -1)
_ALL = slice(None)


def _rev_abstract(x, *, dimensions):
    for d in dimensions:
        if not 0 <= d < len(x.shape):
            raise ValueError(f"rev: dimension {d} out of range for shape {_shape_str(x.shape)}")
    return x


rev_p.impl = lambda x, *, dimensions: np.flip(x, dimensions) if dimensions else x
rev_p.abstract_eval = _rev_abstract
rev_p.weak_type = _same_weak


def rev(x, dimensions):
    """Reverses ``x`` along the (non-negative) ``dimensions``."""
    dimensions = tuple(dimensions)
    if not dimensions:
        return x
    if _eager(x):
        _rev_abstract(x, dimensions=dimensions)
        # basic indexing with negative steps: the same view as np.flip, without its overhead
        return wrap(x._buf[tuple(_REVERSED if i in dimensions else _ALL
                                 for i in range(x._buf.ndim))], x._weak)
    return rev_p.bind(x, dimensions=dimensions)


def _rev_transpose(ct, x, *, dimensions):
    if type(ct) is Zero:
        return [_zero_ct(x)]
    return [rev(ct, dimensions)]


def _rev_batch(args, dims, *, dimensions):
    (x,), (d,) = args, dims
    return rev(x, _phys(dimensions, d)), d


_linear(rev_p, _rev_transpose)
rev_p.batch = _rev_batch
rev_p.sharding = lambda in_avals, out_avals, *, dimensions: [
    ((RS.Shard(d),), (RS.Shard(d),)) for d in range(len(in_avals[0].shape))
    if d not in dimensions] + list(RS.VALUE_PARTIALS)


# ---- concatenate ------------------------------------------------------------------------------

concatenate_p = Primitive("concatenate", family="shape")


def _concat_abstract(*xs, dimension):
    first = xs[0]
    rank = len(first.shape)
    if not 0 <= dimension < rank:
        raise ValueError(f"concatenate: dimension {dimension} out of range for rank {rank}")
    total = 0
    for x in xs:
        if x.dtype != first.dtype:
            raise TypeError(f"concatenate: operands must have one dtype, got "
                            f"{', '.join(str(y.dtype) for y in xs)}")
        if len(x.shape) != rank or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape))
                                       if i != dimension):
            raise ValueError(f"concatenate: operand shapes "
                             f"{', '.join(_shape_str(y.shape) for y in xs)} differ outside "
                             f"dimension {dimension}")
        total = total + x.shape[dimension]
    shape = list(first.shape)
    shape[dimension] = total
    return ShapedArray(tuple(shape), first.dtype, all(x.weak_type for x in xs))


def _concat_impl(*xs, dimension):
    # Always C order: NumPy would follow transposed inputs' memory order, and every kernel or
    # GEMM that reads the result would then copy it first.
    xs = [np.asarray(x) for x in xs]
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return np.concatenate(xs, axis=dimension, out=np.empty(shape, np.result_type(*xs)))


concatenate_p.impl = _concat_impl
concatenate_p.abstract_eval = _concat_abstract
concatenate_p.weak_type = lambda *w, dimension: all(w)


def concatenate(operands, dimension):
    """Joins operands of one dtype and rank along the non-negative ``dimension``."""
    operands = tuple(operands)
    if len(operands) == 1:
        return operands[0]
    if all(type(x) is Array for x in operands) and current_trace() is EVAL_TRACE:
        if len({x._buf.dtype for x in operands}) > 1:
            _concat_abstract(*operands, dimension=dimension)  # raises the dtype error
        try:
            out = np.concatenate([x._buf for x in operands], axis=dimension)
        except (ValueError, np.exceptions.AxisError):
            _concat_abstract(*operands, dimension=dimension)  # raises a shape error naming us
            raise
        return wrap(out, all(x._weak for x in operands))
    return concatenate_p.bind(*operands, dimension=dimension)


def _concat_transpose(ct, *xs, dimension):
    # Each linear operand gets the slice of the cotangent it filled.
    out, start = [], 0
    for x in xs:
        n = x.aval.shape[dimension]
        if not is_undefined(x):
            out.append(None)
        elif type(ct) is Zero:
            out.append(_zero_ct(x))
        else:
            out.append(slice_in_dim(ct, start, start + n, 1, dimension))
        start = start + n
    return out


def _concat_batch(args, dims, *, dimension):
    size = R.batch_size(args, dims)
    xs = [_to_front(x, d, size) for x, d in zip(args, dims)]
    return concatenate(xs, dimension + 1), 0


def _concat_sharding(in_avals, out_avals, *, dimension):
    n = len(in_avals)
    return [((RS.Shard(d),), (RS.Shard(d),) * n) for d in range(len(out_avals[0].shape))
            if d != dimension] + [((RS.Partial("sum"),), (RS.Partial("sum"),) * n)]


_linear(concatenate_p, _concat_transpose)
concatenate_p.batch = _concat_batch
concatenate_p.sharding = _concat_sharding


# ---- pad --------------------------------------------------------------------------------------

pad_p = Primitive("pad", family="shape")


def _padded_dim(n, lo, hi, interior):
    return lo + hi + n + max(n - 1, 0) * interior


def _pad_abstract(x, padding_value, *, padding_config):
    if padding_value.shape != () or padding_value.dtype != x.dtype:
        raise TypeError(f"pad: padding value must be a 0-d array of the operand dtype {x.dtype}, "
                        f"got {padding_value.str_short()}")
    if len(padding_config) != len(x.shape):
        raise ValueError(f"pad: padding_config {padding_config} must have one (lo, hi, interior) "
                         f"per dim of shape {_shape_str(x.shape)}")
    shape = []
    for n, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise ValueError(f"pad: interior padding must be >= 0, got {padding_config}")
        d = _padded_dim(n, lo, hi, interior)
        if d < 0:
            raise ValueError(f"pad: padding_config {padding_config} crops shape "
                             f"{_shape_str(x.shape)} below size 0")
        shape.append(d)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type and padding_value.weak_type)


def _pad_impl(x, padding_value, *, padding_config):
    x = np.asarray(x)
    full_shape, place, crop = [], [], []
    for n, (lo, hi, interior) in zip(x.shape, padding_config):
        lo_pos, hi_pos = max(lo, 0), max(hi, 0)
        full = lo_pos + hi_pos + n + max(n - 1, 0) * interior
        full_shape.append(full)
        place.append(slice(lo_pos, lo_pos + n + max(n - 1, 0) * interior, interior + 1))
        crop.append(slice(max(-lo, 0), full - max(-hi, 0)))
    out = np.full(full_shape, padding_value, dtype=x.dtype)
    out[tuple(place)] = x
    return out[tuple(crop)]


pad_p.impl = _pad_impl
pad_p.abstract_eval = _pad_abstract
pad_p.weak_type = lambda wx, wp, *, padding_config: wx and wp


def pad(x, padding_value, padding_config):
    """Pads ``x`` with the 0-d ``padding_value`` (same dtype): per dim ``(lo, hi, interior)``.

    ``lo``/``hi`` may be negative (crop at that edge); ``interior`` (>= 0) values go between
    neighbouring elements.
    """
    padding_config = tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config)
    if all(c == (0, 0, 0) for c in padding_config):
        return x
    shape = x.shape
    if len(padding_config) != len(shape) or any(
            i < 0 or _padded_dim(n, lo, hi, i) < 0
            for n, (lo, hi, i) in zip(shape, padding_config)):
        raise ValueError(f"pad: padding_config {padding_config} is invalid for shape "
                         f"{_shape_str(shape)}: need one (lo, hi, interior >= 0) per dim and "
                         "non-negative padded sizes")
    return pad_p.bind(x, padding_value, padding_config=padding_config)


def _pad_mask(shape, padding_config):
    """Static bool array: True where ``pad`` writes the padding value."""
    return _pad_impl(np.zeros(shape, bool), np.True_, padding_config=padding_config)


def _pad_transpose(ct, x, padding_value, *, padding_config):
    # pad is linear in (x, padding_value) jointly. The operand's cotangent: undo the edges (a
    # pad by (-lo, -hi) crops what was added and restores what was cropped, as zeros), then a
    # strided slice skips the interior padding. The padding value's: the sum of the cotangent
    # over the padded positions (a select with a static mask: exact, no cancellation).
    px, pv = is_undefined(x), is_undefined(padding_value)
    if type(ct) is Zero:
        return [_zero_ct(x) if px else None, _zero_ct(padding_value) if pv else None]
    ct_x = ct_v = None
    if px:
        unpadded = pad(ct, _zero(ct.dtype), [(-lo, -hi, 0) for lo, hi, _ in padding_config])
        ct_x = static_slice(unpadded, (0,) * len(padding_config), tuple(unpadded.shape),
                            tuple(i + 1 for _, _, i in padding_config))
    if pv:
        from .math_select import where
        mask = wrap(_pad_mask(tuple(x.aval.shape), padding_config), False)
        ct_v = _reduce_sum(where(mask, ct, _zero(ct.dtype)), range(len(padding_config)))
    return [ct_x, ct_v]


def _pad_batch(args, dims, *, padding_config):
    (x, v), (dx, dv) = args, dims
    if dv is None:
        cfg = list(padding_config)
        cfg.insert(dx, (0, 0, 0))
        return pad(x, v, cfg), dx
    # A batched padding value (one per example): pad with zeros, then select it in the padded
    # positions (a static mask).
    from .math_select import where
    size = R.batch_size(args, dims)
    x = _to_front(x, dx, size)
    padded = pad(x, _zero(x.dtype), ((0, 0, 0),) + tuple(padding_config))
    mask = wrap(_pad_mask(tuple(x.shape[1:]), padding_config), False)
    fill = broadcast_in_dim(R.move_axis(v, dv, 0), tuple(padded.shape), (0,))
    return where(mask, fill, padded), 0


def _pad_sharding(in_avals, out_avals, *, padding_config):
    # dims without padding keep their split; the padding value is a replicated scalar
    return [((RS.Shard(d),), (RS.Shard(d), RS.R)) for d, cfg in enumerate(padding_config)
            if tuple(cfg) == (0, 0, 0)]


_linear(pad_p, _pad_transpose)
pad_p.batch = _pad_batch
pad_p.sharding = _pad_sharding


# ---- slice ------------------------------------------------------------------------------------

slice_p = Primitive("slice", family="shape")


def _check_slice(shape, start_indices, limit_indices, strides):
    if not len(start_indices) == len(limit_indices) == len(shape) or (
            strides is not None and len(strides) != len(shape)):
        raise ValueError(f"slice: start_indices {start_indices}, limit_indices {limit_indices} "
                         f"and strides {strides} need one entry per dim of shape "
                         f"{_shape_str(shape)}")
    out = []
    for i, (n, s, lim) in enumerate(zip(shape, start_indices, limit_indices)):
        st = 1 if strides is None else strides[i]
        if not 0 <= s <= lim <= n or st < 1:
            raise ValueError(f"slice: need 0 <= start <= limit <= dim and stride >= 1, got "
                             f"start {start_indices}, limit {limit_indices}, strides {strides} "
                             f"for shape {_shape_str(shape)}")
        out.append(-(-(lim - s) // st))
    return tuple(out)


def _slice_abstract(x, *, start_indices, limit_indices, strides):
    shape = _check_slice(x.shape, start_indices, limit_indices, strides)
    return ShapedArray(shape, x.dtype, x.weak_type)


def _slice_impl(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    return np.asarray(x)[tuple(slice(s, lim, st)
                               for s, lim, st in zip(start_indices, limit_indices, strides))]


slice_p.impl = _slice_impl
slice_p.abstract_eval = _slice_abstract
slice_p.weak_type = _same_weak


def static_slice(x, start_indices, limit_indices, strides=None):
    """``x[s0:l0:st0, s1:l1:st1, ...]`` with static, in-range, non-negative bounds.

    Args:
        x: operand of shape ``(d0, ..., dn-1)``.
        start_indices, limit_indices: one int per dim, ``0 <= start <= limit <= d``.
        strides: one int >= 1 per dim, or None for all ones.
    Returns:
        Array of shape ``(ceil((l0 - s0) / st0), ...)``; the full slice returns ``x`` itself.
    """
    start_indices = tuple(start_indices)
    limit_indices = tuple(limit_indices)
    if strides is not None:
        strides = tuple(strides)
        if all(st == 1 for st in strides):
            strides = None
    _check_slice(tuple(x.shape), start_indices, limit_indices, strides)
    if strides is None and all(s == 0 for s in start_indices) \
            and limit_indices == tuple(x.shape):
        return x
    if _eager(x):
        return wrap(_slice_impl(x._buf, start_indices=start_indices, limit_indices=limit_indices,
                                strides=strides), x._weak)
    return slice_p.bind(x, start_indices=start_indices, limit_indices=limit_indices,
                        strides=strides)


def slice_in_dim(x, start, limit, stride=1, axis=0):
    """``static_slice`` along one (non-negative) ``axis``."""
    starts = [0] * len(x.shape)
    limits = list(x.shape)
    strides = [1] * len(x.shape)
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return static_slice(x, starts, limits, strides)


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    # Scatter the cotangent back with zeros: edges (start, the rest) and stride - 1 between.
    if type(ct) is Zero:
        return [_zero_ct(x)]
    strides = strides or (1,) * len(start_indices)
    config = []
    for n, s, k, m in zip(x.aval.shape, start_indices, strides, ct.shape):
        used = (m - 1) * k + 1 if m else 0
        config.append((s, n - s - used, k - 1))
    return [pad(ct, _zero(ct.dtype), config)]


def _slice_batch(args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    starts, limits = list(start_indices), list(limit_indices)
    starts.insert(d, 0)
    limits.insert(d, x.shape[d])
    if strides is not None:
        strides = tuple(strides[:d]) + (1,) + tuple(strides[d:])
    return static_slice(x, starts, limits, strides), d


def _slice_sharding(in_avals, out_avals, *, start_indices, limit_indices, strides):
    # dims taken whole keep their split
    x = in_avals[0]
    return [((RS.Shard(d),), (RS.Shard(d),)) for d in range(len(x.shape))
            if start_indices[d] == 0 and limit_indices[d] == x.shape[d]
            and (strides is None or strides[d] == 1)] + list(RS.VALUE_PARTIALS)


def _slice_local_params(params, in_avals, out_shapes):
    # a dim taken whole takes the whole local piece
    limits = list(params["limit_indices"])
    for d, n in enumerate(out_shapes[0]):
        if params["start_indices"][d] == 0 and n == in_avals[0].shape[d]:
            limits[d] = n
    return dict(params, limit_indices=tuple(limits))


_linear(slice_p, _slice_transpose)
slice_p.batch = _slice_batch
slice_p.sharding = _slice_sharding
slice_p.meta["shard_params"] = _slice_local_params


# ---- iota -------------------------------------------------------------------------------------

iota_p = Primitive("iota", family="shape")


def _iota_abstract(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota: dimension {dimension} out of range for shape {_shape_str(shape)}")
    if dtypes.is_bool(dtype):
        raise TypeError("iota: dtype must be numeric, got bool")
    return ShapedArray(shape, dtype, False)


def _iota_impl(*, dtype, shape, dimension):
    n = shape[dimension]
    if dtype.kind in "iufc":
        base = np.arange(n, dtype=dtype)
    else:
        base = np.arange(n, dtype=np.int64).astype(dtype)  # ml_dtypes: no arange kernel
    if len(shape) == 1:
        return base
    expanded = [1] * len(shape)
    expanded[dimension] = n
    return np.broadcast_to(base.reshape(expanded), shape)


iota_p.impl = _iota_impl
iota_p.abstract_eval = _iota_abstract


def iota(dtype, shape, dimension=0):
    """``0, 1, 2, ...`` of ``dtype`` along ``dimension`` of ``shape``, broadcast elsewhere."""
    dtype = dtypes.canonicalize(dtype)
    shape = tuple(shape)
    _iota_abstract(dtype=dtype, shape=shape, dimension=dimension)  # same errors eagerly
    if current_trace() is EVAL_TRACE:
        return wrap(_iota_impl(dtype=dtype, shape=shape, dimension=dimension), False)
    return iota_p.bind(dtype=dtype, shape=shape, dimension=dimension)


def _iota_batch(args, dims, **params):
    # iota has no operands, so vmap never batches it (BatchTrace binds it on the parent).
    raise TypeError("iota: has no operands, so there is nothing to batch (internal error: the "
                    "batch rule of iota should never run)")


def _iota_sharding(in_avals, out_avals, *, dtype, shape, dimension):
    # any dim may be split: a piece of the iota dim counts from its global start (_iota_local)
    return [((RS.Shard(d),), ()) for d in range(len(shape)) if shape[d] > 1]


def _iota_local(operands, starts, params, local):
    """The device's piece: along ``dimension`` it counts from the piece's global start, in int64
    and then converted, which is what ``arange`` in the dtype gives for the whole."""
    start = starts[0][params["dimension"]]
    if isinstance(start, int):
        return iota_p.bind(**local)
    from .convert_element_type import convert_element_type
    from .arithmetic import add
    base = iota_p.bind(dtype=dtypes.int64, shape=local["shape"], dimension=local["dimension"])
    return convert_element_type(add(base, start), local["dtype"], False)


R.defjvp_zero(iota_p)  # no operands: the output never depends on a differentiated input
iota_p.batch = _iota_batch
iota_p.sharding = _iota_sharding
iota_p.meta["shard_params"] = RS.local_out_shape("shape")
iota_p.meta["shard_local"] = _iota_local
