"""Convolution and pooling layers (see ``nn.functional_conv`` for the method)."""
from __future__ import annotations

import math

from .. import numpy as snp
from .. import random
from . import functional as F
from . import init
from .functional_conv import _tuple
from .module import Module

__all__ = ["Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d"]


class _ConvNd(Module):
    _nd = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", *, key=None, dtype=snp.float32):
        super().__init__()
        name = type(self).__name__
        nd = self._nd
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"{name}: padding_mode must be 'zeros', 'reflect', 'replicate' or "
                             f"'circular', got {padding_mode!r}")
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise ValueError(f"{name}: padding must be 'same', 'valid', an int or a tuple, got "
                             f"{padding!r}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _tuple(name, "kernel_size", kernel_size, nd)
        self.stride = _tuple(name, "stride", stride, nd)
        self.padding = padding if isinstance(padding, str) else _tuple(name, "padding", padding,
                                                                       nd)
        if self.padding == "same" and any(s != 1 for s in self.stride):
            raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
        self.dilation = _tuple(name, "dilation", dilation, nd)
        self.groups = groups
        self.padding_mode = padding_mode
        kw, kb = random.split(init.as_key(key, name))
        shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = init.kaiming_uniform(kw, shape, a=math.sqrt(5), dtype=dtype)
        fan_in = init.fan_in_and_fan_out(shape)[0]
        bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
        self.bias = init.uniform(kb, (out_channels,), -bound, bound, dtype) if bias else None

    def _pad_mode(self, x):
        """Applies non-zero padding modes explicitly; returns (x, padding for the conv)."""
        if self.padding_mode == "zeros":
            return x, self.padding
        nd = self._nd
        if self.padding == "valid":
            return x, 0
        if self.padding == "same":
            pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                    for k, d in zip(self.kernel_size, self.dilation)]
        else:
            pads = [(p, p) for p in self.padding]
        mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[self.padding_mode]
        x = snp.pad(x, ((0, 0),) * (x.ndim - nd) + tuple(pads), mode=mode)
        return x, 0

    def forward(self, x):
        x, padding = self._pad_mode(x)
        conv = F.conv1d if self._nd == 1 else F.conv2d
        return conv(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._nd:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else \
                f", padding={self.padding}"
        if self.dilation != (1,) * self._nd:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-d convolution ``(N, C_in, L) -> (N, C_out, L_out)`` (also unbatched ``(C_in, L)``).

    Parameters: ``weight`` ``(C_out, C_in/groups, k)`` ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    (PyTorch's ``kaiming_uniform(a=sqrt(5))``, ``fan_in = C_in/groups * k``); ``bias``
    ``(C_out,)`` ~ the same uniform. ``padding``: int, tuple, "same" or "valid";
    ``padding_mode``: "zeros", "reflect", "replicate" or "circular". ``key`` required.
    """

    _nd = 1


class Conv2d(_ConvNd):
    """2-d convolution ``(N, C_in, H, W) -> (N, C_out, H_out, W_out)`` (also unbatched).

    Parameters: ``weight`` ``(C_out, C_in/groups, kh, kw)``, ``bias`` ``(C_out,)``, both
    ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with ``fan_in = C_in/groups * kh * kw`` (PyTorch).
    ``stride`` / ``padding`` / ``dilation``: int or pair; ``padding`` also "same" / "valid".
    """

    _nd = 2


class _PoolNd(Module):
    _nd = 0
    _kind = ""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.dilation = dilation
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self):
        s = f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
        if self._kind == "max":
            s += f", dilation={self.dilation}"
        return s + f", ceil_mode={self.ceil_mode}"


class MaxPool1d(_PoolNd):
    """Max pooling over the last dim (see ``nn.functional.max_pool1d``).

    ``return_indices=True`` (PyTorch's argmax indices, for ``MaxUnpool1d``) is not supported:
    NotImplementedError at construction; only the pooled values are returned.
    """

    _nd, _kind = 1, "max"

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__(kernel_size, stride, padding, dilation, ceil_mode)
        if return_indices:
            raise NotImplementedError("MaxPool1d: return_indices=True is not supported; only "
                                      "return_indices=False (the pooled values)")

    def forward(self, x):
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)


class MaxPool2d(_PoolNd):
    """Max pooling over the last two dims ``(*, H, W)`` (see ``nn.functional.max_pool2d``).

    ``return_indices=True`` (PyTorch's argmax indices, for ``MaxUnpool2d``) is not supported:
    NotImplementedError at construction; only the pooled values are returned.
    """

    _nd, _kind = 2, "max"

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__(kernel_size, stride, padding, dilation, ceil_mode)
        if return_indices:
            raise NotImplementedError("MaxPool2d: return_indices=True is not supported; only "
                                      "return_indices=False (the pooled values)")

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)


class AvgPool1d(_PoolNd):
    """Average pooling over the last dim (see ``nn.functional.avg_pool1d``)."""

    _nd, _kind = 1, "avg"

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__(kernel_size, stride, padding, 1, ceil_mode, count_include_pad)

    def forward(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool2d(_PoolNd):
    """Average pooling over the last two dims (see ``nn.functional.avg_pool2d``)."""

    _nd, _kind = 2, "avg"

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__(kernel_size, stride, padding, 1, ceil_mode, count_include_pad,
                         divisor_override)

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)
