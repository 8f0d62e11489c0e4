"""``starling.nn.initializers``: JAX's initializer factories.

Each factory returns ``init(key, shape, dtype=float32) -> Array``, JAX's calling convention
(``w = nn.initializers.glorot_uniform()(key, (n_in, n_out))``); ``starling.nn.init`` has the
PyTorch-style functions (``init.xavier_uniform(key, shape)``) and both draw through the same
samplers. JAX's fan convention differs from PyTorch's: a dense kernel is ``(in, out)``, so by
default ``fan_in = shape[in_axis=-2] * receptive field`` and ``fan_out = shape[out_axis=-1] *
receptive field``, the receptive field being the product of the other (non-batch) dims.
"""
from __future__ import annotations

import math

from .. import numpy as snp
from .. import random
from . import init as _init

__all__ = [
    "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
    "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones",
    "orthogonal", "truncated_normal", "uniform", "variance_scaling", "xavier_normal",
    "xavier_uniform", "zeros",
]

_F32 = snp.float32
# stddev of the standard normal truncated to [-2, 2]: variance_scaling divides by it so the
# truncated draws have the asked-for variance
_TRUNC_STD = 0.87962566103423978


def zeros(key, shape, dtype=_F32):
    """An initializer's signature for zeros: ``key`` is ignored."""
    return _init.zeros(shape, dtype)


def ones(key, shape, dtype=_F32):
    """An initializer's signature for ones: ``key`` is ignored."""
    return _init.ones(shape, dtype)


def constant(value, dtype=_F32):
    """Initializer filling with ``value``."""
    def init(key, shape, dtype=dtype):
        return _init.constant(shape, value, dtype)
    return init


def uniform(scale=1e-2, dtype=_F32):
    """Initializer drawing from ``U[0, scale)``."""
    def init(key, shape, dtype=dtype):
        return _init.uniform(_init.as_key(key, "uniform"), shape, 0.0, scale, dtype)
    return init


def normal(stddev=1e-2, dtype=_F32):
    """Initializer drawing from ``N(0, stddev^2)``."""
    def init(key, shape, dtype=dtype):
        return _init.normal(_init.as_key(key, "normal"), shape, 0.0, stddev, dtype)
    return init


def truncated_normal(stddev=1e-2, dtype=_F32, lower=-2.0, upper=2.0):
    """Initializer drawing ``stddev * z`` with ``z`` standard normal truncated to ``[lower,
    upper]`` (so the draws' own stddev is below ``stddev``)."""
    def init(key, shape, dtype=dtype):
        return _init.trunc_normal(_init.as_key(key, "truncated_normal"), shape, 0.0, stddev,
                                  lower * stddev, upper * stddev, dtype)
    return init


def _fans(shape, in_axis, out_axis, batch_axis):
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(f"variance_scaling: needs a shape with at least 2 dims to take fans "
                         f"from, got {shape}")
    nd = len(shape)
    ins = _axes(in_axis, nd)
    outs = _axes(out_axis, nd)
    batch = _axes(batch_axis, nd)
    receptive = math.prod(d for a, d in enumerate(shape) if a not in ins + outs + batch)
    return (math.prod(shape[a] for a in ins) * receptive,
            math.prod(shape[a] for a in outs) * receptive)


def _axes(a, nd):
    return tuple(x % nd for x in ((a,) if isinstance(a, int) else tuple(a)))


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=_F32):
    """Initializer with variance ``scale / n``, ``n`` the fan chosen by ``mode``.

    Args:
        scale: positive float.
        mode: ``"fan_in"``, ``"fan_out"`` or ``"fan_avg"`` (their mean).
        distribution: ``"truncated_normal"`` (normal truncated to two stddevs, rescaled to the
            variance), ``"normal"``, or ``"uniform"`` (``U(-sqrt(3 var), sqrt(3 var))``).
        in_axis, out_axis, batch_axis: which dims of the shape are the input / output features
            and batch (an int or a tuple each); the rest form the receptive field.
    Raises:
        ValueError: unknown mode or distribution, ``scale <= 0``, a shape with fewer than 2 dims.
    """
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"variance_scaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', "
                         f"got {mode!r}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"variance_scaling: distribution must be 'truncated_normal', 'normal' "
                         f"or 'uniform', got {distribution!r}")
    if not scale > 0:
        raise ValueError(f"variance_scaling: scale must be positive, got {scale}")

    def init(key, shape, dtype=dtype):
        key = _init.as_key(key, "variance_scaling")
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        var = scale / max(fan, 1)
        if distribution == "truncated_normal":
            std = math.sqrt(var) / _TRUNC_STD
            return _init.trunc_normal(key, shape, 0.0, std, -2.0 * std, 2.0 * std, dtype)
        if distribution == "normal":
            return _init.normal(key, shape, 0.0, math.sqrt(var), dtype)
        bound = math.sqrt(3.0 * var)
        return _init.uniform(key, shape, -bound, bound, dtype)
    return init


def glorot_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=_F32):
    """Glorot & Bengio (2010), uniform: ``variance_scaling(1, "fan_avg", "uniform")``."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=_F32):
    """Glorot & Bengio (2010), truncated normal: ``variance_scaling(1, "fan_avg",
    "truncated_normal")``."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def lecun_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=_F32):
    """LeCun et al. (1998), uniform: ``variance_scaling(1, "fan_in", "uniform")``."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=_F32):
    """LeCun et al. (1998), truncated normal: ``variance_scaling(1, "fan_in",
    "truncated_normal")``."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def he_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=_F32):
    """He et al. (2015), uniform: ``variance_scaling(2, "fan_in", "uniform")``."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=_F32):
    """He et al. (2015), truncated normal: ``variance_scaling(2, "fan_in",
    "truncated_normal")``."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale=1.0, column_axis=-1, dtype=_F32):
    """Initializer with orthonormal columns (or rows, if there are fewer rows) times
    ``scale`` (Saxe et al. 2014): the shape is viewed as a matrix whose columns run along
    ``column_axis`` and whose rows are all other dims.

    Raises:
        ValueError: a shape with fewer than 2 dims.
    """
    def init(key, shape, dtype=dtype):
        shape = tuple(shape)
        if len(shape) < 2:
            raise ValueError(f"orthogonal: needs a shape with at least 2 dims, got {shape}")
        key = _init.as_key(key, "orthogonal")
        ax = column_axis % len(shape)
        n_cols = shape[ax]
        rest = shape[:ax] + shape[ax + 1:]
        m = random.orthogonal(key, math.prod(rest), (), dtype, m=n_cols) * scale
        return snp.moveaxis(snp.reshape(m, rest + (n_cols,)), -1, ax)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=_F32):
    """Convolution-kernel initializer of Xiao et al. (2018), "Dynamical isometry and a mean
    field theory of CNNs": zero everywhere except the spatial centre, which holds an orthogonal
    ``(in, out)`` matrix times ``scale``. Kernels are ``(*spatial, in, out)`` with 1 to 3
    spatial dims and ``in <= out``.

    Raises:
        ValueError: a shape that is not 3-5 dims, ``in > out``, or ``column_axis`` not the last.
    """
    def init(key, shape, dtype=dtype):
        shape = tuple(shape)
        if column_axis % max(len(shape), 1) != len(shape) - 1:
            raise ValueError("delta_orthogonal: column_axis must be the last axis")
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"delta_orthogonal: needs a 3-5 dim kernel shape (*spatial, in, "
                             f"out), got {shape}")
        if shape[-2] > shape[-1]:
            raise ValueError(f"delta_orthogonal: needs in <= out, got shape {shape}")
        ortho = orthogonal(scale, -1, dtype)(key, shape[-2:], dtype)
        centre = tuple(d // 2 for d in shape[:-2])
        return snp.zeros(shape, dtype).at[centre].set(ortho)
    return init
