"""Normalisation layers: LayerNorm, RMSNorm, GroupNorm, BatchNorm1d, BatchNorm2d.

BatchNorm keeps its running statistics as *buffers* and threads them explicitly (see the
mutation notes in ``nn.module``): in training mode ``forward`` normalises with the batch
statistics and hands the new running statistics to ``update_buffers``, which rebinds them
eagerly, or returns them through ``nn.stateful_call`` / ``nn.value_and_grad(...,
return_module=True)`` inside transformations (so BatchNorm works under ``compile``).
"""
from __future__ import annotations

from .. import numpy as snp
from . import functional as F
from . import init
from .module import Module

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d"]


def _shape(normalized_shape):
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(int(d) for d in normalized_shape)


class LayerNorm(Module):
    """Layer normalisation over the trailing ``normalized_shape`` dims (Ba et al. 2016).

    ``(*, *normalized_shape) -> same``. Parameters ``weight`` (ones) and ``bias`` (zeros) of
    ``normalized_shape`` when ``elementwise_affine`` (``bias=False`` drops the bias).
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, *, dtype=snp.float32):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = init.ones(self.normalized_shape, dtype) if elementwise_affine else None
        self.bias = (init.zeros(self.normalized_shape, dtype)
                     if elementwise_affine and bias else None)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class RMSNorm(Module):
    """Root-mean-square normalisation (Zhang & Sennrich 2019) over the trailing
    ``normalized_shape`` dims; ``eps=None`` uses the input dtype's machine epsilon (PyTorch).
    Parameter ``weight`` (ones) when ``elementwise_affine``."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine: bool = True, *,
                 dtype=snp.float32):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = init.ones(self.normalized_shape, dtype) if elementwise_affine else None

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Group normalisation (Wu & He 2018): ``(N, C, *) -> same``, statistics over each of
    ``num_groups`` channel groups and the spatial dims; per-channel ``weight`` (ones) and
    ``bias`` (zeros) when ``affine``."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, *, dtype=snp.float32):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                     eps, affine)
        self.weight = init.ones((num_channels,), dtype) if affine else None
        self.bias = init.zeros((num_channels,), dtype) if affine else None

    def forward(self, x):
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected input (N, {self.num_channels}, *), got shape "
                             f"{tuple(x.shape)}")
        n, c = x.shape[:2]
        g = snp.reshape(x, (n, self.num_groups, -1))
        mean = snp.mean(g, axis=-1, keepdims=True)
        gc = g - mean
        var = snp.mean(gc * gc, axis=-1, keepdims=True)
        y = snp.reshape(gc * snp.rsqrt(var + self.eps), x.shape)
        if self.affine:
            cs = (1, c) + (1,) * (x.ndim - 2)
            y = y * snp.reshape(self.weight, cs) + snp.reshape(self.bias, cs)
        return y

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _BatchNorm(Module):
    _ndims = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum=0.1, affine: bool = True,
                 track_running_stats: bool = True, *, dtype=snp.float32):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = init.ones((num_features,), dtype) if affine else None
        self.bias = init.zeros((num_features,), dtype) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", init.zeros((num_features,), dtype))
            self.register_buffer("running_var", init.ones((num_features,), dtype))
            self.register_buffer("num_batches_tracked", snp.asarray(0, dtype=snp.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def _check(self, x):
        name = type(self).__name__
        if x.ndim not in self._ndims or x.shape[1] != self.num_features:
            want = " or ".join(f"{d}-d (N, {self.num_features}{', L' if d == 3 else ''}"
                               f"{', H, W' if d == 4 else ''})" for d in self._ndims)
            raise ValueError(f"{name}: expected {want} input, got shape {tuple(x.shape)}")

    def forward(self, x):
        """Normalises ``x`` per channel; in training mode also updates the running stats
        (``running = (1 - m) * running + m * batch``, unbiased batch variance; ``momentum=None``
        is the cumulative average ``m = 1 / num_batches_tracked``)."""
        self._check(x)
        use_batch = self.training or not self.track_running_stats
        if not use_batch:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                False, self.momentum, self.eps)
        axes = (0,) + tuple(range(2, x.ndim))
        n = x.size // x.shape[1]
        if self.training and n <= 1:
            raise ValueError(f"{type(self).__name__}: expected more than 1 value per channel "
                             f"when training, got input shape {tuple(x.shape)}")
        cs = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        mean = snp.mean(x, axis=axes)
        xc = x - snp.reshape(mean, cs)
        var = snp.mean(xc * xc, axis=axes)
        y = xc * snp.reshape(snp.rsqrt(var + self.eps), cs)
        if self.affine:
            y = y * snp.reshape(self.weight, cs) + snp.reshape(self.bias, cs)
        if self.training and self.track_running_stats:
            from .. import stop_gradient
            nbt = self.buffer("num_batches_tracked") + 1
            m = (1.0 / snp.astype(nbt, snp.float32)) if self.momentum is None else self.momentum
            rm, rv = self.buffer("running_mean"), self.buffer("running_var")
            bm = stop_gradient(mean).astype(rm.dtype)
            bv = stop_gradient(var * (n / (n - 1))).astype(rv.dtype)
            self.update_buffers(running_mean=rm * (1.0 - m) + bm * m,
                                running_var=rv * (1.0 - m) + bv * m,
                                num_batches_tracked=nbt)
        return y

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation (Ioffe & Szegedy 2015) of ``(N, C)`` or ``(N, C, L)`` input.

    Parameters ``weight`` (ones) / ``bias`` (zeros) ``(C,)`` when ``affine``; buffers
    ``running_mean`` (zeros), ``running_var`` (ones), ``num_batches_tracked`` (int64 0) when
    ``track_running_stats``. Note: ``starling.grad`` over a whole module containing the int64
    buffer needs ``allow_int=True``; ``nn.value_and_grad`` differentiates parameters only.
    """

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(N, C, H, W)`` input (see BatchNorm1d)."""

    _ndims = (4,)
