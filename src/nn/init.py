"""Weight initialisers (``starling.nn.init``), each drawing from an explicit PRNG key.

Unlike PyTorch's in-place ``nn.init.*_`` functions these *return* a new array:
``w = init.kaiming_uniform(key, (out, in), a=math.sqrt(5))``. The formulas are PyTorch's
(which follow the papers cited on each function), so layers built with the same shapes have
the same distributions as PyTorch's defaults:

=============================  ==============================================================
layer                          default initialisation
=============================  ==============================================================
Linear, Conv1d/2d weight       ``kaiming_uniform(a=sqrt(5))`` = U(-1/sqrt(fan_in), 1/sqrt(fan_in))
Linear, Conv1d/2d bias         U(-1/sqrt(fan_in), 1/sqrt(fan_in))
Bilinear weight and bias       U(-1/sqrt(in1_features), 1/sqrt(in1_features))
Embedding weight               N(0, 1) (the ``padding_idx`` row zero)
MultiheadAttention             in-projection ``xavier_uniform``, biases 0, out-projection as
                               Linear's weight with a zero bias
LayerNorm, RMSNorm, BatchNorm  weight 1, bias 0; BatchNorm running mean 0, running var 1
=============================  ==============================================================

``fan_in = shape[1] * prod(shape[2:])`` and ``fan_out = shape[0] * prod(shape[2:])`` for a
weight of shape ``(out, in, *kernel)``.
"""
from __future__ import annotations

import math

from .. import numpy as snp
from .. import random

__all__ = ["calculate_gain", "fan_in_and_fan_out", "uniform", "normal", "zeros", "ones",
           "constant", "kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal",
           "trunc_normal", "as_key"]

_F32 = snp.float32


def as_key(key, op):
    """A PRNG key from ``key`` (a key array or an int seed); TypeError naming ``op`` if None."""
    if key is None:
        raise TypeError(f"{op}: initial parameters are drawn from an explicit PRNG key: pass "
                        "key=starling.random.key(seed) (or an int seed)")
    if isinstance(key, int):
        return random.key(key)
    return key


def calculate_gain(nonlinearity: str, param=None) -> float:
    """Recommended gain for ``nonlinearity`` (PyTorch's table): linear / conv / sigmoid 1,
    tanh 5/3, relu sqrt(2), leaky_relu sqrt(2 / (1 + slope^2)) (slope ``param``, default
    0.01), selu 3/4.

    Raises:
        ValueError: an unknown nonlinearity.
    """
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                        "conv_transpose2d", "conv_transpose3d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}")


def fan_in_and_fan_out(shape):
    """``(fan_in, fan_out)`` of a weight of shape ``(out, in, *kernel)`` (at least 2-d).

    Raises:
        ValueError: fewer than 2 dims.
    """
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(f"fan_in_and_fan_out: needs a shape with at least 2 dims, got {shape}")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def uniform(key, shape, low=0.0, high=1.0, dtype=_F32):
    """U(low, high) samples of ``shape``."""
    return random.uniform(key, tuple(shape), dtype, low, high)


def normal(key, shape, mean=0.0, std=1.0, dtype=_F32):
    """N(mean, std^2) samples of ``shape``."""
    z = random.normal(key, tuple(shape), dtype)
    if std != 1.0:
        z = z * std
    return z + mean if mean != 0.0 else z


def trunc_normal(key, shape, mean=0.0, std=1.0, a=-2.0, b=2.0, dtype=_F32):
    """N(mean, std^2) truncated to ``[a, b]`` (absolute bounds, as PyTorch)."""
    z = random.truncated_normal(key, (a - mean) / std, (b - mean) / std, tuple(shape), dtype)
    return z * std + mean


def zeros(shape, dtype=_F32):
    """A new array of zeros of ``shape`` (default dtype float32): the functional counterpart of
    PyTorch's ``nn.init.zeros_`` (arrays are immutable)."""
    return snp.zeros(tuple(shape), dtype=dtype)


def ones(shape, dtype=_F32):
    """A new array of ones of ``shape`` (default dtype float32): PyTorch's ``nn.init.ones_``."""
    return snp.ones(tuple(shape), dtype=dtype)


def constant(shape, value, dtype=_F32):
    """A new array of ``shape`` filled with ``value`` (default dtype float32): PyTorch's
    ``nn.init.constant_``."""
    return snp.full(tuple(shape), value, dtype=dtype)


def _fan(shape, mode):
    fan_in, fan_out = fan_in_and_fan_out(shape)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")


def kaiming_uniform(key, shape, a=0.0, mode="fan_in", nonlinearity="leaky_relu", dtype=_F32):
    """He et al., "Delving deep into rectifiers" (2015): U(-b, b) with
    ``b = gain * sqrt(3 / fan)``, ``gain = calculate_gain(nonlinearity, a)``.
    With ``a = sqrt(5)`` (PyTorch's Linear / Conv default) ``b = 1 / sqrt(fan_in)``."""
    fan = _fan(shape, mode)
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan) if fan else 0.0
    if bound == 0.0:
        return zeros(shape, dtype)
    return uniform(key, shape, -bound, bound, dtype)


def kaiming_normal(key, shape, a=0.0, mode="fan_in", nonlinearity="leaky_relu", dtype=_F32):
    """He et al. (2015): N(0, std^2) with ``std = gain / sqrt(fan)``."""
    fan = _fan(shape, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0
    return normal(key, shape, 0.0, std, dtype)


def xavier_uniform(key, shape, gain=1.0, dtype=_F32):
    """Glorot & Bengio (2010): U(-b, b) with ``b = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = fan_in_and_fan_out(shape)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform(key, shape, -bound, bound, dtype)


def xavier_normal(key, shape, gain=1.0, dtype=_F32):
    """Glorot & Bengio (2010): N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = fan_in_and_fan_out(shape)
    return normal(key, shape, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), dtype)
