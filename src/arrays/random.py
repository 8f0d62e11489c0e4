"""``starling.random``: counter-based pseudo-random numbers from explicit keys (Philox4x32-10).

Randomness is a pure function of a *key*: the same key always gives the same numbers, and
nothing is hidden in global state, so random code works unchanged under ``make_ir``, ``vmap``
and ``compile``. Make a key with ``key(seed)``, derive independent keys with ``split`` or
``fold_in``, and never draw twice from the same key (that repeats the numbers)::

    k = starling.random.key(0)
    k_init, k_drop = starling.random.split(k)
    w = starling.random.normal(k_init, (3, 4))

Keys are raw ``uint32`` arrays of shape ``(2,)`` (JAX's raw key style): ``key[0]`` and
``key[1]`` are the Philox key words ``k0`` and ``k1``.

The generator is Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as
1, 2, 3", SC'11): a keyed bijection of a 128-bit counter, ``philox(counter, key) -> 4 words``.
Every derivation below is exact and versioned by this docstring (bit-for-bit reproducible):

* ``key(seed)``: the 64-bit two's complement of ``seed`` split into ``(hi32, lo32)``; seeds in
  ``[-2**63, 2**64)``, so ``key(-1) == [0xffffffff, 0xffffffff]`` and ``key(2**32) == [1, 0]``.
  Integer seed arrays are sign-extended (signed dtypes) or zero-extended (unsigned) to 64 bits.
* The *stream* of a key with tag ``t``: word ``j`` is word ``j % 4`` of
  ``philox((b mod 2**32, b >> 32, t, 0), key)`` with block ``b = j // 4``. The tag separates
  uses of one key: 0 for ``bits`` (and every distribution), 1 for ``split``, 2 for ``fold_in``.
* ``bits(key, shape, dtype)``: the first ``prod(shape)`` values of the tag-0 stream read as
  little-endian ``dtype`` (uint8/16/32/64: a uint64 is ``w[2i] | w[2i+1] << 32``), in C order.
  A prefix of the stream does not depend on ``shape``: ``bits(k, (6,))[:3] == bits(k, (3,))``.
* ``split(key, num)``: key ``i`` is words ``(2i, 2i + 1)`` of the tag-1 stream.
* ``fold_in(key, data)``: words 0 and 1 of ``philox((lo32(d), hi32(d), 2, 0), key)`` with ``d``
  the 64-bit two's complement of ``data``.

Primitives (family "random"): ``philox4x32`` (keys ``(*b, 2)`` and counters ``(*b, 4)`` ->
``(*b, 4)``) and ``random_bits`` (the stream; static ``shape``, ``dtype``, ``tag``). Each has a
vectorised NumPy reference (``meta["numpy_impl"]``: ``philox4x32_numpy``, ``random_bits_numpy``;
the numpy_ref oracle) and runs the C++ kernels of ``starling._native`` on concrete arrays
(bit-identical; tested). ``bits`` of 10M uint32 take about 10 ms (AVX2 kernel).

The distributions live beside this file, one concept per file, and are re-exported here:
random_distributions.py (uniform, normal, truncated_normal, bernoulli, categorical, gumbel,
exponential, laplace, logistic, cauchy), random_gamma.py (gamma, loggamma, beta, dirichlet,
chisquare, t, f, generalized_normal), random_discrete.py (poisson, binomial, multinomial,
geometric), random_multivariate.py (multivariate_normal, orthogonal, ball) and
random_closed_form.py (pareto, weibull_min, rayleigh, lognormal, maxwell, double_sided_maxwell,
triangular, wald). Rejection samplers run as ``while_loop`` rounds whose round ``i`` draws from
``fold_in(key, i)`` (random_rejection.py).
"""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes
from ..core.avals import ShapedArray, canonicalize_shape
from ..core.primitive import Primitive
from ..core.trace import EVAL_TRACE, Tracer, current_trace
from .array import Array, wrap
from .convert import operand
from .ops.convert_element_type import convert_element_type
from .ops.elementwise_family import broadcast_shapes

try:
    from .. import _native
except ImportError:  # pragma: no cover - the extension is part of every install
    _native = None

__all__ = [
    "key", "PRNGKey", "split", "fold_in", "key_data", "bits", "philox4x32", "randint",
    "permutation", "choice", "rademacher",
]

TAG_BITS, TAG_SPLIT, TAG_FOLD_IN = 0, 1, 2

_U32 = dtypes.uint32
_BITS_DTYPES = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
_LE = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}

# Philox4x32 constants (Salmon et al. 2011, section 5): multipliers and Weyl key increments.
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


# ---- the NumPy reference (numpy_ref oracle) --------------------------------------------------

def philox4x32_numpy(key, counters):
    """Philox4x32-10 in vectorised NumPy. key: uint32 ``(*kb, 2)``; counters: uint32
    ``(*cb, 4)``; ``kb`` and ``cb`` broadcast to ``b``. Returns uint32 ``(*b, 4)``.

    Each round: ``(c0, c1, c2, c3) <- (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2), hi(M0 c0) ^ c3 ^ k1,
    lo(M0 c0))`` with 32x32 -> 64-bit products, then ``k0 += W0, k1 += W1`` (mod 2**32).
    """
    key = np.asarray(key, np.uint32)
    counters = np.asarray(counters, np.uint32)
    batch = np.broadcast_shapes(key.shape[:-1], counters.shape[:-1])
    c0, c1, c2, c3 = (np.broadcast_to(counters[..., i], batch).astype(np.uint64)
                      for i in range(4))
    k0 = key[..., 0].astype(np.uint64)
    k1 = key[..., 1].astype(np.uint64)
    for _ in range(10):
        p0 = _M0 * c0  # < 2**64: exact in uint64
        p1 = _M1 * c2
        c0, c1, c2, c3 = (p1 >> _S32) ^ c1 ^ k0, p1 & _MASK32, (p0 >> _S32) ^ c3 ^ k1, p0 & _MASK32
        k0 = (k0 + _W0) & _MASK32
        k1 = (k1 + _W1) & _MASK32
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def _stream_counters(n_blocks, tag):
    b = np.arange(n_blocks, dtype=np.uint64)
    ctr = np.empty((n_blocks, 4), np.uint32)
    ctr[:, 0] = b & _MASK32
    ctr[:, 1] = b >> _S32
    ctr[:, 2] = tag
    ctr[:, 3] = 0
    return ctr


def _n_words(size, dtype):
    return -(-size * dtype.itemsize // 4)


def _words_to(words, size, dtype, out_shape):
    # words: a fresh (K, n_words) uint32 array -> (*out_shape) of `dtype`, read little-endian.
    # Returns a view of `words` when no trimming is needed (no one else holds `words`).
    if np.little_endian:
        v = np.ascontiguousarray(words).view(dtype)
        if v.shape[1] != size:
            v = v[:, :size]
        v = v.reshape(out_shape)
        return v if v.flags.c_contiguous else np.array(v, order="C")
    le = np.ascontiguousarray(words, dtype=_LE[4]).view(_LE[dtype.itemsize])[:, :size]
    return np.array(le.reshape(out_shape), dtype=dtype, order="C")  # keeps 0-d


def random_bits_numpy(key, *, shape, dtype, tag):
    """The tag-``tag`` stream of each key in ``key`` (uint32 ``(*kb, 2)``) as ``dtype``
    ``(*kb, *shape)``; NumPy reference of the ``random_bits`` primitive."""
    key = np.asarray(key, np.uint32)
    size = math.prod(shape)
    n_words = _n_words(size, dtype)
    n_blocks = -(-n_words // 4)
    flat = key.reshape(-1, 1, 2)
    words = philox4x32_numpy(flat, _stream_counters(n_blocks, tag)[None])
    words = words.reshape(flat.shape[0], 4 * n_blocks)[:, :n_words]
    return _words_to(words, size, dtype, key.shape[:-1] + tuple(shape))


def _random_bits_native(key, shape, dtype, tag):
    size = math.prod(shape)
    flat = np.ascontiguousarray(key, dtype=np.uint32).reshape(-1, 2)
    words = _native.philox4x32_10_stream(flat, _n_words(size, dtype), tag)
    return _words_to(words, size, dtype, key.shape[:-1] + tuple(shape))


def _philox_native(key, counters):
    batch = np.broadcast_shapes(key.shape[:-1], counters.shape[:-1])
    n = math.prod(batch)
    if key.ndim == 1 or math.prod(key.shape[:-1]) == 1:
        k = key.reshape(1, 2)
    else:
        k = np.broadcast_to(key, batch + (2,)).reshape(n, 2)
    c = np.broadcast_to(counters, batch + (4,)).reshape(n, 4)
    return _native.philox4x32_10(c, k).reshape(batch + (4,))


# ---- primitives --------------------------------------------------------------------------------

philox4x32_p = Primitive("philox4x32", family="random")
random_bits_p = Primitive("random_bits", family="random")


def _check_u32_trailing(op, aval, what, last):
    if aval.dtype != _U32:
        raise TypeError(f"{op}: {what} must have dtype uint32, got {aval.dtype}")
    if aval.ndim == 0 or aval.shape[-1] != last:
        raise ValueError(f"{op}: {what} must have shape (..., {last}), got {tuple(aval.shape)}")


def _philox_abstract_eval(key, counters):
    _check_u32_trailing("philox4x32", key, "key", 2)
    _check_u32_trailing("philox4x32", counters, "counters", 4)
    try:
        batch = np.broadcast_shapes(key.shape[:-1], counters.shape[:-1])
    except ValueError:
        raise ValueError(f"philox4x32: key batch shape {tuple(key.shape[:-1])} and counters "
                         f"batch shape {tuple(counters.shape[:-1])} do not broadcast") from None
    return ShapedArray(batch + (4,), _U32)


def _random_bits_abstract_eval(key, *, shape, dtype, tag):
    _check_u32_trailing("random_bits", key, "key", 2)
    return ShapedArray(tuple(key.shape[:-1]) + tuple(shape), dtype)


def _random_bits_native_impl(key, *, shape, dtype, tag):
    return _random_bits_native(np.asarray(key), shape, dtype, tag)


def _philox_native_impl(key, counters):
    return _philox_native(np.asarray(key, np.uint32), np.asarray(counters, np.uint32))


# ``impl`` (what the eval interpreter runs on concrete buffers: eager calls, and the primal
# computations inside grad / vmap / staged-program evaluation) is the native kernel when the
# extension is built; ``meta["numpy_impl"]`` is the pure NumPy reference, the oracle it is
# tested against bit for bit. ``meta["native_impl"]`` tells backends that ``impl`` is native
# code (the cpp backend does not report it as a NumPy fallback).
philox4x32_p.impl = _philox_native_impl if _native is not None else philox4x32_numpy
philox4x32_p.abstract_eval = _philox_abstract_eval
philox4x32_p.meta.update(numpy_impl=philox4x32_numpy)
random_bits_p.impl = _random_bits_native_impl if _native is not None else random_bits_numpy
random_bits_p.abstract_eval = _random_bits_abstract_eval
random_bits_p.meta.update(numpy_impl=random_bits_numpy)
for _p in (philox4x32_p, random_bits_p):
    _p.meta["native_impl"] = _native is not None
del _p


def _random_bits_batch(args, dims, *, shape, dtype, tag):
    # The key's batch axis becomes a leading key batch dim: one stream per key.
    from .ops import rules
    (k,), (d,) = args, dims
    return random_bits_p.bind(rules.move_axis(k, d, 0), shape=shape, dtype=dtype, tag=tag), 0


def _install_transform_rules():
    # Keys are integers: tangents are always zero. philox4x32 broadcasts over leading dims like
    # an elementwise op (the trailing word axis never carries the batch).
    from .ops import rules
    rules.defjvp_zero(philox4x32_p)
    rules.defjvp_zero(random_bits_p)
    rules.batch_elementwise(philox4x32_p)
    random_bits_p.batch = _random_bits_batch


_install_transform_rules()


# ---- sharding ----------------------------------------------------------------------------------
# A draw may be split along the key's batch dims (each device draws the streams of its keys) and
# along the stream's dims: then each device draws only its own elements, at their positions in
# the whole stream, so a sharded draw equals the unsharded one bit for bit whatever the layout
# (uneven chunks included). Element ``p`` (C order of ``shape``) of a ``dtype`` of ``s`` bytes
# is bytes ``[p s, p s + s)`` of the stream: word ``w = p s // 4`` (``2p`` and ``2p + 1`` for
# 8 bytes) of block ``w // 4``, lane ``w % 4``; a device evaluates Philox on the blocks of its
# elements (one block per element: up to 16x the work of the dense stream for uint8, 4x for
# uint32; the dense stream kernel serves splits along the key batch only).

def _random_bits_sharding(in_avals, out_avals, *, shape, dtype, tag):
    from .ops.rules_sharding import R, Shard
    kb = tuple(in_avals[0].shape[:-1])
    combos = [((Shard(d),), (Shard(d),)) for d in range(len(kb)) if kb[d] > 1]
    return combos + [((Shard(len(kb) + j),), (R,)) for j in range(len(shape)) if shape[j] > 1]


def _random_bits_local_params(params, in_avals, out_shapes):
    nkb = len(in_avals[0].shape) - 1
    return dict(params, shape=tuple(out_shapes[0][nkb:]))


def _random_bits_local(operands, starts, params, local):
    """The device's piece of the draw (see above): ``starts[0]`` has the global start of the
    piece along every result dim."""
    (k,) = operands
    nkb = len(k.shape) - 1
    st = starts[0][nkb:]
    if all(isinstance(s, int) for s in st):   # only key batch dims split: whole streams
        return random_bits_p.bind(k, **local)
    return stream_window(k, st, params["shape"], local["shape"], local["dtype"], local["tag"])


def stream_window(k, starts, full_shape, shape, dtype, tag):
    """Elements ``[starts[j], starts[j] + shape[j])`` (per dim ``j``) of the ``full_shape`` draw
    of the tag-``tag`` stream of every key of ``k`` (uint32 ``(*kb, 2)``) as ``dtype``: uint
    ``(*kb, *shape)``. ``starts``: ints or int64 scalars (traced ones too)."""
    from . import numpy as snp
    from .ops.shape_lax import iota, reshape
    i64 = dtypes.int64
    nd = len(shape)
    pos = None
    for j in range(nd):
        stride = math.prod(full_shape[j + 1:])
        term = (iota(i64, tuple(shape), j) + starts[j]) * stride
        pos = term if pos is None else pos + term
    if pos is None:
        pos = snp.zeros((), i64)
    size = dtype.itemsize
    word = pos * 2 if size == 8 else (pos * size) // 4
    block = word // 4
    lo32 = convert_element_type(snp.bitwise_and(block, 0xFFFFFFFF), _U32)
    ctr = snp.stack([lo32, convert_element_type(snp.right_shift(block, 32), _U32),
                     snp.full_like(lo32, tag), snp.zeros_like(lo32)], axis=-1)
    words = philox4x32(reshape(k, tuple(k.shape[:-1]) + (1,) * nd + (2,)), ctr)

    def lane(w):   # the word of each element at lane w % 4 of its block: uint32 (*kb, *shape)
        idx = snp.broadcast_to(snp.expand_dims(w % 4, -1), tuple(words.shape[:-1]) + (1,))
        return snp.squeeze(snp.take_along_axis(words, idx, axis=-1), -1)
    if size == 8:
        lo, hi = (convert_element_type(lane(word + i), dtypes.uint64) for i in (0, 1))
        return snp.bitwise_or(lo, snp.left_shift(hi, 32))
    out = lane(word)
    if size < 4:
        shift = convert_element_type(((pos * size) % 4) * 8, _U32)
        out = snp.bitwise_and(snp.right_shift(out, shift), (1 << (8 * size)) - 1)
    return convert_element_type(out, dtype)


def _philox_sharding(in_avals, out_avals):
    # elementwise over the batch dims; the trailing word dim is never split
    from .ops.rules_sharding import elementwise
    last = len(out_avals[0].shape) - 1
    return [c for c in elementwise()(in_avals, out_avals) if c[0][0].dim != last]


random_bits_p.sharding = _random_bits_sharding
random_bits_p.meta["shard_params"] = _random_bits_local_params
random_bits_p.meta["shard_local"] = _random_bits_local
philox4x32_p.sharding = _philox_sharding


def _is_eager(*xs):
    if current_trace() is not EVAL_TRACE:
        return False
    return all(type(x) is Array for x in xs)


def _u32_operand(x, op, what):
    """Arrays/Tracers must already be uint32; other array-likes of integers in [0, 2**32) are
    copied to uint32."""
    if isinstance(x, (Array, Tracer)):
        if x.dtype != _U32:
            raise TypeError(f"{op}: {what} must have dtype uint32, got {x.dtype}")
        return x
    if isinstance(x, (bool, float, complex, str, bytes)) or x is None:
        raise TypeError(f"{op}: {what} must be a uint32 array, got {type(x).__name__}")
    buf = np.asarray(x)
    if buf.dtype == _U32:
        return wrap(np.array(buf), False)
    if buf.dtype.kind not in "iu":
        raise TypeError(f"{op}: {what} must be a uint32 array, got dtype {buf.dtype}")
    if buf.size and (buf.min() < 0 or buf.max() > 0xFFFFFFFF):
        raise TypeError(f"{op}: {what} must be a uint32 array; got {buf.dtype} values outside "
                        "[0, 2**32)")
    return wrap(buf.astype(_U32), False)


def philox4x32(key, counters):
    """The Philox4x32-10 block function (Salmon et al., SC'11), elementwise over batch dims.

    Args:
        key: uint32 ``(*kb, 2)``: the key words ``(k0, k1)``.
        counters: uint32 ``(*cb, 4)``: the counter words ``(c0, c1, c2, c3)``.
    Returns:
        uint32 ``(*b, 4)`` with ``b`` the broadcast of ``kb`` and ``cb``. Matches Random123's
        ``philox4x32_R(10, ctr, key)`` (its published known-answer vectors are tested).
    Raises:
        TypeError: a dtype other than uint32. ValueError: wrong trailing dims, or batch shapes
        that do not broadcast.
    """
    key = _u32_operand(key, "philox4x32", "key")
    counters = _u32_operand(counters, "philox4x32", "counters")
    if _native is not None and _is_eager(key, counters):
        _philox_abstract_eval(key.aval, counters.aval)
        return wrap(_philox_native(key._buf, counters._buf), False)
    return philox4x32_p.bind(key, counters)


def _random_bits(k, shape, dtype, tag):
    # k: a checked uint32 (*kb, 2) key operand.
    if _native is not None and _is_eager(k):
        return wrap(_random_bits_native(k._buf, shape, dtype, tag), False)
    return random_bits_p.bind(k, shape=shape, dtype=dtype, tag=tag)


# ---- keys ----------------------------------------------------------------------------------------

def _check_key(k, op):
    """A uint32 ``(2,)`` key operand, or TypeError/ValueError naming ``op``."""
    if type(k) is Array or isinstance(k, Tracer):
        if k.dtype != _U32:
            raise TypeError(f"{op}: key must be a uint32 array of shape (2,) as made by "
                            f"starling.random.key(seed), got dtype {k.dtype}")
    else:
        k = _u32_operand(k, op, "key")
    if tuple(k.shape) != (2,):
        raise ValueError(f"{op}: key must have shape (2,) (one key; made by "
                         f"starling.random.key(seed) or split), got shape {tuple(k.shape)}")
    return k


def _shape(shape, op):
    return canonicalize_shape(shape, op)


def _seed_words(seed: int, op):
    if not -(1 << 63) <= seed < (1 << 64):
        raise OverflowError(f"{op}: seed {seed} is out of range [-2**63, 2**64)")
    s = seed & 0xFFFFFFFFFFFFFFFF
    return s >> 32, s & 0xFFFFFFFF


def key(seed):
    """A PRNG key from an integer seed.

    Args:
        seed: a Python int in ``[-2**63, 2**64)`` (or NumPy integer), or an integer Array of any
            shape ``(*s)`` (possibly traced). Signed values are sign-extended to 64 bits,
            unsigned ones zero-extended.
    Returns:
        uint32 Array ``(2,)`` (``(*s, 2)`` for an array seed): ``(hi32, lo32)`` of the 64-bit
        two's complement of the seed, e.g. ``key(1) == [0, 1]``, ``key(-1) == [2**32-1]*2``.
    Raises:
        TypeError: a float, bool or complex seed. OverflowError: a Python int out of range.
    """
    if isinstance(seed, (bool, np.bool_)) or isinstance(seed, (float, complex, str)):
        raise TypeError(f"key: seed must be an integer, got {type(seed).__name__}")
    if isinstance(seed, (int, np.integer)):
        hi, lo = _seed_words(int(seed), "key")
        return wrap(np.array([hi, lo], dtype=np.uint32), False)
    if not isinstance(seed, (Array, Tracer)):
        buf = np.asarray(seed)
        if buf.dtype.kind not in "iu":
            raise TypeError(f"key: seed must be an integer array, got dtype {buf.dtype}")
        seed = wrap(np.array(buf), False)
    dt = seed.dtype
    if not dtypes.is_integer(dt):
        raise TypeError(f"key: seed must have an integer dtype, got {dt}")
    if type(seed) is Array:
        s = seed._buf.astype(np.int64 if dtypes.is_signed_int(dt) else np.uint64)
        s = s.astype(np.uint64)
        out = np.stack([(s >> _S32).astype(np.uint32), (s & _MASK32).astype(np.uint32)], -1)
        return wrap(out, False)
    from . import numpy as snp
    hi, lo = _hi_lo(seed)
    return snp.stack([hi, lo], axis=-1)


def _hi_lo(x):
    """(hi32, lo32) uint32 words of the 64-bit two's complement of an integer Array / Tracer."""
    from . import numpy as snp
    s = convert_element_type(x, dtypes.int64 if dtypes.is_signed_int(x.dtype) else dtypes.uint64)
    s = convert_element_type(s, dtypes.uint64)
    hi = convert_element_type(snp.right_shift(s, 32), _U32)
    return hi, convert_element_type(s, _U32)  # the C cast keeps the low 32 bits


PRNGKey = key


def key_data(k):
    """The raw uint32 words of a key (keys are already raw ``(2,)`` uint32 arrays: identity)."""
    return _u32_operand(k, "key_data", "key")


def split(k, num=2):
    """Splits a key into ``num`` new keys (independent streams).

    Args:
        k: a key, uint32 ``(2,)``.
        num: number of keys (int), or a shape tuple ``(*s)``.
    Returns:
        uint32 ``(num, 2)`` (or ``(*s, 2)``): key ``i`` is words ``(2i, 2i+1)`` of the tag-1
        Philox stream of ``k`` (see the module docstring).
    Raises:
        TypeError / ValueError: a bad key, or a negative / non-integer ``num``.
    """
    k = _check_key(k, "split")
    shape = _shape(num, "split")
    return _random_bits(k, shape + (2,), _U32, TAG_SPLIT)


def fold_in(k, data):
    """A new key from ``k`` and an integer ``data`` (e.g. a step or a device index).

    Args:
        k: a key, uint32 ``(2,)``.
        data: a Python int in ``[-2**63, 2**64)`` or an integer Array of shape ``(*s)``
            (possibly traced); signed values are sign-extended to 64 bits.
    Returns:
        uint32 ``(2,)`` (``(*s, 2)`` for array data): words 0 and 1 of
        ``philox4x32((lo32(d), hi32(d), 2, 0), k)`` with ``d`` the 64-bit value of ``data``.
    Raises:
        TypeError: a bad key or non-integer data. OverflowError: a Python int out of range.
    """
    k = _check_key(k, "fold_in")
    if isinstance(data, (bool, np.bool_)) or isinstance(data, (float, complex, str)):
        raise TypeError(f"fold_in: data must be an integer, got {type(data).__name__}")
    if isinstance(data, (int, np.integer)):
        hi, lo = _seed_words(int(data), "fold_in")
        ctr = wrap(np.array([lo, hi, TAG_FOLD_IN, 0], np.uint32), False)
        return _first_two(philox4x32(k, ctr))
    if not isinstance(data, (Array, Tracer)):
        buf = np.asarray(data)
        if buf.dtype.kind not in "iu":
            raise TypeError(f"fold_in: data must be an integer array, got dtype {buf.dtype}")
        data = wrap(np.array(buf), False)
    dt = data.dtype
    if not dtypes.is_integer(dt):
        raise TypeError(f"fold_in: data must have an integer dtype, got {dt}")
    if type(data) is Array and type(k) is Array:
        words = key(data)._buf  # (*s, 2) = (hi, lo)
        ctr = np.empty(words.shape[:-1] + (4,), np.uint32)
        ctr[..., 0] = words[..., 1]
        ctr[..., 1] = words[..., 0]
        ctr[..., 2] = TAG_FOLD_IN
        ctr[..., 3] = 0
        return _first_two(philox4x32(k, wrap(ctr, False)))
    from . import numpy as snp
    hi, lo = _hi_lo(data)
    ctr = snp.stack([lo, hi, snp.full_like(lo, TAG_FOLD_IN), snp.zeros_like(lo)], axis=-1)
    return _first_two(philox4x32(k, ctr))


def _first_two(block):
    if type(block) is Array:
        return wrap(np.ascontiguousarray(block._buf[..., :2]), False)
    return block[..., :2]


def bits(k, shape=(), dtype=dtypes.uint32):
    """Uniformly random bits.

    Args:
        k: a key, uint32 ``(2,)``.
        shape: the output shape ``(*shape)``.
        dtype: uint8, uint16, uint32 (default) or uint64.
    Returns:
        Array ``(*shape)`` of ``dtype``: the tag-0 Philox stream of ``k`` read little-endian
        (see the module docstring); a prefix does not depend on ``shape``.
    Raises:
        TypeError: a bad key or a dtype that is not an unsigned integer.
        ValueError: a negative dim.
    """
    k = _check_key(k, "bits")
    dt = dtypes.canonicalize(dtype)
    if dt not in _BITS_DTYPES:
        raise TypeError(f"bits: dtype must be an unsigned integer dtype (uint8, uint16, uint32, "
                        f"uint64), got {dt}")
    return _random_bits(k, _shape(shape, "bits"), dt, TAG_BITS)


# ---- discrete distributions --------------------------------------------------------------------

def _int_bound(x, op, name):
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be an integer, got bool")
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = operand(x, op)
    if not (dtypes.is_integer(x.dtype) or dtypes.is_bool(x.dtype)):
        raise TypeError(f"{op}: {name} must be an integer (scalar or array), got dtype {x.dtype}")
    return x


def randint(key, shape=(), minval=0, maxval=None, dtype=dtypes.int64):
    """Uniform integers in ``[minval, maxval)``.

    Method: ``minval + (b mod (maxval - minval))`` with ``b`` 64 random bits (two stream
    words), in 64-bit wrap-around arithmetic. Each value has probability
    ``floor(2**64 / r) / 2**64`` or ``ceil(2**64 / r) / 2**64`` for a range of ``r`` values, so
    the relative bias is below ``r / 2**64`` (below ``2**-32`` for ranges up to ``2**32``).

    Args:
        key: a key, uint32 ``(2,)``.
        shape: output shape ``(*shape)``; array bounds must broadcast to it.
        minval: inclusive lower bound (int or integer array). With ``maxval=None`` the single
            bound is ``maxval`` and ``minval`` is 0 (like ``numpy.random.randint(high)``).
        maxval: exclusive upper bound (int or integer array).
        dtype: an integer dtype (default int64).
    Returns:
        Array ``(*shape)`` of ``dtype``. Where array bounds have ``maxval <= minval`` the value
        is ``minval``.
    Raises:
        TypeError: a bad key, a non-integer dtype or bounds. ValueError: a negative dim, scalar
        bounds with ``minval >= maxval``, or bounds that do not broadcast to ``shape``.
        OverflowError: a scalar bound outside the dtype's range (``maxval`` may be max + 1).
    """
    k = _check_key(key, "randint")
    dt = dtypes.canonicalize(dtype)
    if not dtypes.is_integer(dt):
        raise TypeError(f"randint: dtype must be an integer dtype, got {dt}")
    shape = _shape(shape, "randint")
    if maxval is None:
        minval, maxval = 0, minval
    lo = _int_bound(minval, "randint", "minval")
    hi = _int_bound(maxval, "randint", "maxval")
    info = np.iinfo(dt)
    from . import numpy as snp
    b = _random_bits(k, shape, dtypes.uint64, TAG_BITS)
    if type(lo) is int and type(hi) is int:
        if not info.min <= lo <= info.max or not info.min <= hi <= info.max + 1:
            raise OverflowError(f"randint: bounds [{lo}, {hi}) are out of range for {dt} "
                                f"[{info.min}, {info.max + 1})")
        if lo >= hi:
            raise ValueError(f"randint: minval ({lo}) must be less than maxval ({hi})")
        r = hi - lo
        off = b if r == 1 << 64 else snp.remainder(b, wrap(np.uint64(r), False))
        out = snp.add(off, wrap(np.uint64(lo & 0xFFFFFFFFFFFFFFFF), False))
        if dtypes.is_signed_int(dt):
            out = convert_element_type(out, dtypes.int64)
        return convert_element_type(out, dt)
    # Array bounds: work in int64 (uint64 for a uint64 dtype), clipped to the dtype's range
    # with maxval up to max + 1 where the work type holds it.
    work = dtypes.uint64 if dt == dtypes.uint64 else dtypes.int64
    wmax = np.iinfo(work).max
    lo, hi = (convert_element_type(x, work) if type(x) is not int else
              wrap(np.asarray(min(max(x, np.iinfo(work).min), wmax), work), False)
              for x in (lo, hi))
    for x in (lo, hi):
        if broadcast_shapes("randint", shape, tuple(x.shape)) != shape:
            raise ValueError(f"randint: bound shape {tuple(x.shape)} does not broadcast to the "
                             f"requested shape {shape}")
    lo = snp.clip(lo, int(info.min), int(info.max))
    hi = snp.clip(hi, int(info.min), min(int(info.max) + 1, int(wmax)))
    lo64 = convert_element_type(lo, dtypes.uint64)
    empty = snp.less_equal(hi, lo)
    r = snp.subtract(convert_element_type(hi, dtypes.uint64), lo64)
    r = snp.where(empty, wrap(np.uint64(1), False), r)
    out = snp.add(snp.remainder(b, r), lo64)
    if dtypes.is_signed_int(dt):
        out = convert_element_type(out, dtypes.int64)
    return snp.broadcast_to(convert_element_type(out, dt), shape)


def permutation(key, x, axis=0, independent=False):
    """A random permutation of ``arange(x)`` (int ``x``) or of ``x`` along ``axis``.

    Method: sort keys: ``argsort`` of 64 random bits per position (ties, which would favour the
    original order, have probability below ``n**2 / 2**65``).

    Args:
        key: a key, uint32 ``(2,)``.
        x: an int ``n`` (returns a permutation of ``0..n-1``) or an array ``(*s)`` with
            ``ndim >= 1``.
        axis: the axis of ``x`` to permute.
        independent: if True, each 1-d slice along ``axis`` is permuted independently;
            otherwise all slices move together (one permutation of the indices).
    Returns:
        int64 ``(n,)`` for an int ``x``; else an array like ``x``.
    Raises:
        TypeError: a bad key or a non-integer, non-array ``x``. ValueError: a negative ``n`` or
        a 0-d array. AxisError: ``axis`` out of range.
    """
    k = _check_key(key, "permutation")
    from . import numpy as snp
    from .ops.axes import normalize_axis
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        n = int(x)
        if n < 0:
            raise ValueError(f"permutation: n must be non-negative, got {n}")
        return snp.argsort(_random_bits(k, (n,), dtypes.uint64, TAG_BITS))
    x = operand(x, "permutation")
    if x.ndim == 0:
        raise ValueError("permutation: x must be an int or an array with at least one dim, got "
                         "a 0-d array")
    ax = normalize_axis("permutation", axis, x.ndim)
    if independent:
        idx = snp.argsort(_random_bits(k, tuple(x.shape), dtypes.uint64, TAG_BITS), axis=ax)
        return snp.take_along_axis(x, idx, axis=ax)
    perm = snp.argsort(_random_bits(k, (x.shape[ax],), dtypes.uint64, TAG_BITS))
    return snp.take(x, perm, axis=ax)


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Random samples from ``arange(a)`` (int ``a``) or from the entries of ``a`` along ``axis``.

    Methods: with replacement, uniform ``randint`` indices, or ``categorical(log p)`` when
    ``p`` is given; without replacement, the first ``prod(shape)`` entries of a ``permutation``,
    or the Gumbel-top-k trick (``argsort`` of ``-(log p + gumbel)``) when ``p`` is given.

    Args:
        key: a key, uint32 ``(2,)``.
        a: an int ``n`` or an array whose ``axis`` has ``n`` entries.
        shape: shape of the sample ``(*shape)``.
        replace: sample with replacement.
        p: non-negative weights ``(n,)`` (need not be normalised), or None for uniform.
            Zero-weight entries are never drawn (without replacement: unless fewer than
            ``prod(shape)`` entries have positive weight).
        axis: the axis of ``a`` to draw along.
    Returns:
        int64 ``(*shape)`` for an int ``a``; otherwise ``a`` with ``axis`` replaced by
        ``(*shape)``.
    Raises:
        ValueError: ``n == 0`` with a non-empty sample, ``p`` not of shape ``(n,)``, or more
        samples than entries without replacement. AxisError / TypeError as ``permutation``.
    """
    k = _check_key(key, "choice")
    from . import numpy as snp
    from .ops.axes import normalize_axis
    from .random_distributions import categorical, gumbel
    shape = _shape(shape, "choice")
    if isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
        n, arr, ax = int(a), None, 0
        if n < 0:
            raise ValueError(f"choice: a must be non-negative, got {n}")
    else:
        arr = operand(a, "choice")
        if arr.ndim == 0:
            raise ValueError("choice: a must be an int or an array with at least one dim")
        ax = normalize_axis("choice", axis, arr.ndim)
        n = arr.shape[ax]
    m = math.prod(shape)
    if n == 0 and m > 0:
        raise ValueError("choice: cannot draw from an empty population")
    if not replace and m > n:
        raise ValueError(f"choice: cannot draw {m} samples without replacement from {n} entries")
    if p is not None:
        p = operand(p, "choice")
        if tuple(p.shape) != (n,):
            raise ValueError(f"choice: p must have shape ({n},), got {tuple(p.shape)}")
        cd = dtypes.float64 if p.dtype == dtypes.float64 else dtypes.float32
        logp = snp.log(convert_element_type(p, cd))
    if m == 0:
        idx = wrap(np.zeros(shape, np.int64), False)
    elif replace:
        idx = randint(k, shape, 0, n) if p is None else categorical(k, logp, shape=shape)
    else:
        if p is None:
            order = permutation(k, n)
        else:
            order = snp.argsort(snp.negative(snp.add(logp, gumbel(k, (n,), cd))))
        idx = snp.reshape(order[:m], shape)
    if arr is None:
        return idx
    return snp.take(arr, idx, axis=ax)


def rademacher(key, shape=(), dtype=dtypes.int64):
    """Uniform random signs -1 / +1 (the top bit of each stream word).

    Returns:
        Array ``(*shape)`` of ``dtype`` (default int64; any signed integer or floating dtype).
    Raises:
        TypeError: a bad key or an unsigned / bool / complex dtype. ValueError: a negative dim.
    """
    k = _check_key(key, "rademacher")
    dt = dtypes.canonicalize(dtype)
    if not (dtypes.is_signed_int(dt) or dtypes.is_floating(dt)):
        raise TypeError(f"rademacher: dtype must be a signed integer or floating dtype, got {dt}")
    from . import numpy as snp
    top = snp.right_shift(_random_bits(k, _shape(shape, "rademacher"), dtypes.uint32, TAG_BITS),
                          31)
    signs = snp.subtract(snp.multiply(convert_element_type(top, dtypes.int8), 2), 1)
    return convert_element_type(signs, dt)


# The distributions live in their own concept files; they import the helpers above, so they
# are attached last.
from . import random_closed_form as _closed_form  # noqa: E402
from . import random_discrete as _discrete, random_distributions as _dists  # noqa: E402
from . import random_gamma as _gamma, random_multivariate as _multivariate  # noqa: E402

for _mod in (_dists, _gamma, _discrete, _multivariate, _closed_form):
    globals().update({_name: getattr(_mod, _name) for _name in _mod.__all__})
    __all__ = __all__ + list(_mod.__all__)
del _mod
