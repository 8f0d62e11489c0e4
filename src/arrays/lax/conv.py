"""Convolutions of ``starling.lax``: ``conv_general_dilated``, ``conv``,
``conv_with_general_padding``, ``conv_transpose``, ``conv_dimension_numbers`` and
``ConvDimensionNumbers``.

Semantics are XLA's Convolution (a cross-correlation: the kernel is not flipped), with input
(``lhs``) dilation, kernel (``rhs``) dilation, explicit or "SAME" / "VALID" padding (negative
pads crop), ``feature_group_count`` (grouped / depthwise convolution) and
``batch_group_count`` (the per-example weight gradient of a grouped convolution).

Method: im2col. The input is put in ``(N, C, *spatial)`` layout and padded ONCE (``lhs_dilation``
as interior zeros, the padding at the edges); each kernel offset is a strided static slice; the
``K = prod(kernel)`` slices are stacked into columns ``(N, C*K, P)`` and contracted with the
kernel reshaped to ``(O, C*K)`` by one matmul (per group, batched), then laid out as
``out_spec`` says. Only pads, slices, reshapes, transposes and ``matmul`` are used, so
gradients (the transpose of a strided slice is a pad: the gradient of a convolution is a
transposed convolution), vmap and compilation come from those primitives, on every backend's
GEMM.
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from ...core import dtypes
from .. import numpy as snp
from ..convert import operand as _operand
from ..ops import shape_lax as SL
from ..ops.convert_element_type import convert_element_type
from ._util import shape_str, static_int, static_ints
from .windows import padtype_to_pads, window_view

__all__ = ["ConvDimensionNumbers", "conv_dimension_numbers", "conv_general_dilated", "conv",
           "conv_with_general_padding", "conv_transpose"]


class ConvDimensionNumbers(NamedTuple):
    """Where the dims of each convolution operand are.

    Attributes:
        lhs_spec: (batch dim, feature dim, *spatial dims) of the input.
        rhs_spec: (output-feature dim, input-feature dim, *spatial dims) of the kernel.
        out_spec: (batch dim, feature dim, *spatial dims) of the output.
    """
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


def _from_strings(lhs, rhs, out, nd):
    for s, need in ((lhs, "NC"), (rhs, "OI"), (out, "NC")):
        if len(s) != nd or any(c not in s for c in need) or len(set(s)) != nd:
            raise ValueError(f"lax.conv: dimension_numbers strings {(lhs, rhs, out)} must each "
                             f"name {nd} distinct dims, including N and C (input / output) or O "
                             "and I (kernel)")
    spatial = [c for c in rhs if c not in "OI"]
    if sorted(spatial) != sorted(c for c in lhs if c not in "NC") or sorted(spatial) != sorted(
            c for c in out if c not in "NC"):
        raise ValueError(f"lax.conv: the spatial dims of {(lhs, rhs, out)} must use the same "
                         "letters")
    return ConvDimensionNumbers(
        (lhs.index("N"), lhs.index("C")) + tuple(lhs.index(c) for c in spatial),
        (rhs.index("O"), rhs.index("I")) + tuple(rhs.index(c) for c in spatial),
        (out.index("N"), out.index("C")) + tuple(out.index(c) for c in spatial))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """``ConvDimensionNumbers`` from None (``NC...`` / ``OI...`` / ``NC...``), a triple of
    strings such as ``("NHWC", "HWIO", "NHWC")`` (the kernel string fixes the order of the
    spatial dims), or a ``ConvDimensionNumbers`` (checked).

    Raises:
        ValueError: ranks differ or are < 2, or inconsistent specs.
    """
    nd = len(lhs_shape)
    if len(rhs_shape) != nd or nd < 2:
        raise ValueError(f"lax.conv: input {shape_str(lhs_shape)} and kernel "
                         f"{shape_str(rhs_shape)} must have one rank >= 2")
    dn = dimension_numbers
    if dn is None:
        full = tuple(range(nd))
        return ConvDimensionNumbers(full, full, full)
    if isinstance(dn, ConvDimensionNumbers):
        specs = dn
    elif isinstance(dn, (tuple, list)) and len(dn) == 3 and all(isinstance(s, str) for s in dn):
        specs = _from_strings(*dn, nd)
    else:
        raise TypeError(f"lax.conv: dimension_numbers must be None, a ConvDimensionNumbers or "
                        f"three strings, got {dn!r}")
    for s in specs:
        if sorted(s) != list(range(nd)):
            raise ValueError(f"lax.conv: each spec of {specs} must be a permutation of "
                             f"0..{nd - 1}")
    return ConvDimensionNumbers(*(tuple(int(a) for a in s) for s in specs))


def _defaults(name, v, n):
    return (1,) * n if v is None else static_ints("conv", name, v, n)


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """General n-d convolution (cross-correlation), XLA's Convolution.

    Args:
        lhs: input; in ``(N, C, *spatial)`` order as ``lhs_spec`` places it.
        rhs: kernel ``(O, C / feature_group_count, *kernel)`` as ``rhs_spec`` places it;
            the dtype of ``lhs``.
        window_strides: one static int >= 1 per spatial dim.
        padding: "VALID", "SAME", "SAME_LOWER" (computed on the dilated input and kernel) or
            one ``(low, high)`` pair per spatial dim (negative crops).
        lhs_dilation: ints >= 1 (``d - 1`` zeros between input elements: a transposed conv).
        rhs_dilation: ints >= 1 (atrous / dilated kernel).
        dimension_numbers: see ``conv_dimension_numbers``.
        feature_group_count: G; ``C`` and ``O`` divisible by G, output features ``g*O/G ..``
            use input features ``g*C/G ..``.
        batch_group_count: B (only with G == 1); ``N`` and ``O`` divisible by B; output
            features group ``g`` uses input examples ``g*N/B .. (g+1)*N/B - 1``.
        precision: accepted; computations run at the operands' precision.
        preferred_element_type: dtype of the result (default the operands').
    Returns:
        Array laid out by ``out_spec``: batch ``N / B``, ``O`` features, spatial sizes
        ``floor((padded dilated input - dilated kernel) / stride) + 1``.
    Raises:
        ValueError: inconsistent shapes, groups, lengths. TypeError: dtypes differ.
    """
    x = _operand(lhs, "lax.conv_general_dilated")
    w = _operand(rhs, "lax.conv_general_dilated")
    if x.dtype != w.dtype:
        raise TypeError(f"lax.conv_general_dilated: lhs dtype {x.dtype} differs from rhs dtype "
                        f"{w.dtype}")
    dn = conv_dimension_numbers(tuple(x.shape), tuple(w.shape), dimension_numbers)
    ns = x.ndim - 2
    x = SL.transpose(x, dn.lhs_spec)
    w = SL.transpose(w, dn.rhs_spec)
    strides = static_ints("conv", "window_strides", window_strides, ns)
    ldil, rdil = _defaults("lhs_dilation", lhs_dilation, ns), _defaults("rhs_dilation",
                                                                        rhs_dilation, ns)
    G = static_int("conv", "feature_group_count", feature_group_count)
    Bg = static_int("conv", "batch_group_count", batch_group_count)
    n, c = x.shape[:2]
    o, ci = w.shape[:2]
    if min(strides + ldil + rdil + (G, Bg), default=1) < 1 or (G > 1 and Bg > 1):
        raise ValueError("lax.conv_general_dilated: strides, dilations and group counts must "
                         "be >= 1, and feature_group_count and batch_group_count cannot both "
                         "exceed 1")
    if c != ci * G or o % G or o % Bg or n % Bg:
        raise ValueError(
            f"lax.conv_general_dilated: input (N={n}, C={c}) and kernel (O={o}, I={ci}) do not "
            f"fit feature_group_count={G} / batch_group_count={Bg}: need C == I * G, O "
            f"divisible by both counts and N divisible by batch_group_count")
    if Bg > 1:
        # example group g becomes feature group g: (B, N/B, C, S) -> (N/B, B*C, S)
        s = tuple(x.shape[2:])
        x = SL.reshape(x, (Bg, n // Bg, c) + s)
        x = SL.reshape(SL.transpose(x, (1, 0, 2) + tuple(range(3, 3 + ns))),
                       (n // Bg, Bg * c) + s)
        n, c, G = n // Bg, Bg * c, Bg
    ks = tuple(w.shape[2:])
    spatial = tuple(x.shape[2:])
    dil_in = tuple((d - 1) * a + 1 if d else 0 for d, a in zip(spatial, ldil))
    dil_k = tuple((k - 1) * r + 1 for k, r in zip(ks, rdil))
    pads = padtype_to_pads(dil_in, dil_k, strides, padding)
    config = ((0, 0, 0), (0, 0, 0)) + tuple((lo, hi, a - 1) for (lo, hi), a in zip(pads, ldil))
    if any(cfg != (0, 0, 0) for cfg in config):
        x = SL.pad(x, snp.zeros((), dtype=x.dtype), config)
    outs = tuple(max((d - k) // s + 1, 0) if d >= k else 0
                 for d, k, s in zip(x.shape[2:], dil_k, strides))
    cols = []
    for offs in itertools.product(*[range(k) for k in ks]):
        v = x
        for i, (off, r, s, m) in enumerate(zip(offs, rdil, strides, outs)):
            v = window_view(v, 2 + i, off * r, s, m)
        cols.append(SL.expand_dims(v, (2,)))
    K, P = math.prod(ks), math.prod(outs)
    cols = SL.concatenate(cols, 2) if len(cols) > 1 else cols[0]   # (N, C, K, *outs)
    cols = SL.reshape(cols, (n, G, (c // G) * K, P))
    wk = SL.reshape(w, (G, o // G, (c // G) * K))
    y = snp.matmul(wk, cols)   # (N, G, O/G, P)
    y = SL.reshape(y, (n, o) + outs)
    if preferred_element_type is not None:
        y = convert_element_type(y, dtypes.canonicalize(preferred_element_type), False)
    return SL.transpose(y, tuple(int(i) for i in np.argsort(dn.out_spec)))


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """``conv_general_dilated`` in ``NC...`` / ``OI...`` layout, no dilation, no groups."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """``conv_general_dilated`` in ``NC...`` / ``OI...`` layout with dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_DEFAULT = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                      4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def _transpose_pads(k, s, padding):
    """(low, high) padding of the stride-dilated input that makes ``conv_transpose`` with
    "SAME" give ``n * s`` outputs and with "VALID" give ``n * s + max(k - s, 0)``."""
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    else:
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    return lo, total - lo


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None):
    """Transposed ("deconvolution") convolution: a convolution of the input dilated by
    ``strides`` (fractionally strided), as used to upsample.

    Args:
        lhs, rhs: input and kernel; ``dimension_numbers`` default to channels-last
            (``NHWC`` / ``HWIO`` / ``NHWC`` and the 1-d / 3-d analogues).
        strides: one int per spatial dim (the upsampling factors).
        padding: "SAME" (output ``n * s``), "VALID" (``n * s + max(k - s, 0)``) or explicit
            ``(low, high)`` pairs for the dilated input.
        rhs_dilation: kernel dilation (default 1).
        transpose_kernel: flip the kernel's spatial dims and swap its I / O dims, which makes
            this the exact transpose (gradient) of ``conv_general_dilated`` with these strides.
        precision, preferred_element_type: as ``conv_general_dilated``.
    Returns:
        The convolution output laid out by ``out_spec``.
    Raises:
        ValueError: as ``conv_general_dilated``; ranks without a default layout.
    """
    x = _operand(lhs, "lax.conv_transpose")
    w = _operand(rhs, "lax.conv_transpose")
    nd = x.ndim
    if dimension_numbers is None:
        if nd not in _TRANSPOSE_DEFAULT:
            raise ValueError(f"lax.conv_transpose: no default layout for rank {nd}; pass "
                             "dimension_numbers")
        dimension_numbers = _TRANSPOSE_DEFAULT[nd]
    dn = conv_dimension_numbers(tuple(x.shape), tuple(w.shape), dimension_numbers)
    ns = nd - 2
    strides = static_ints("conv_transpose", "strides", strides, ns)
    rdil = _defaults("rhs_dilation", rhs_dilation, ns)
    ks = [w.shape[d] for d in dn.rhs_spec[2:]]
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(f"lax.conv_transpose: padding must be 'SAME', 'VALID' or pairs, "
                             f"got {padding!r}")
        pads = tuple(_transpose_pads((k - 1) * r + 1, s, padding.upper())
                     for k, r, s in zip(ks, rdil, strides))
    else:
        pads = padding
    if transpose_kernel:
        w = SL.rev(w, tuple(dn.rhs_spec[2:]))
        o_dim, i_dim = dn.rhs_spec[:2]
        dn = ConvDimensionNumbers(dn.lhs_spec, (i_dim, o_dim) + tuple(dn.rhs_spec[2:]),
                                  dn.out_spec)
    return conv_general_dilated(x, w, (1,) * ns, pads, lhs_dilation=strides, rhs_dilation=rdil,
                                dimension_numbers=dn, precision=precision,
                                preferred_element_type=preferred_element_type)
