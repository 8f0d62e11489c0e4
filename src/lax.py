"""``starling.lax``: JAX's ``lax`` names and semantics over Starling's primitives.

Unlike ``starling.numpy``, ``lax`` functions do not promote dtypes (operands must agree; a
Python scalar takes the array operands' dtype) and take JAX's argument names. Every function
supports ``grad`` / ``jvp`` / ``vmap`` / ``compile`` where the maths allows (integer-valued
results have zero tangents). The implementations live in src/arrays/lax/, one concept per file:

* elementwise.py: ``add sub mul div rem max min neg abs sign exp exp2 log log1p expm1 sqrt
  rsqrt cbrt square pow integer_pow nextafter sin cos tan tanh sinh cosh asin acos atan asinh
  acosh atanh logistic complex clz not_ atan2 floor ceil round
  is_finite eq ne lt le gt ge bitwise_and bitwise_or bitwise_xor bitwise_not shift_left
  shift_right_arithmetic shift_right_logical clamp select_n real imag conj
  convert_element_type`` (``div`` / ``rem`` of integers truncate toward zero, as in C).
* reductions.py: ``reduce`` (any monoid; a tree of pairwise combines for other callables),
  ``reduce_sum reduce_prod reduce_max reduce_min reduce_and reduce_or reduce_xor argmax argmin
  dot batch_matmul full full_like zeros_like_array collapse``.
* bits.py: ``population_count``, ``bitcast_convert_type``, ``reduce_precision``.
* structural.py: ``pad`` (negative and interior padding), ``broadcast_in_dim``, ``broadcast``,
  ``squeeze``, ``expand_dims``, ``rev``, ``reshape``, ``transpose``, ``concatenate``, ``iota``,
  ``broadcasted_iota``.
* slicing.py: ``slice``, ``slice_in_dim``, ``index_in_dim``, ``dynamic_slice``,
  ``dynamic_slice_in_dim``, ``dynamic_index_in_dim``, ``dynamic_update_slice``,
  ``dynamic_update_slice_in_dim``, ``dynamic_update_index_in_dim`` (run-time starts clamp so
  the slice is in bounds).
* gather.py: ``gather``, ``scatter``, ``scatter_add``, ``scatter_sub``, ``scatter_mul``,
  ``scatter_min``, ``scatter_max`` with ``GatherDimensionNumbers`` /
  ``ScatterDimensionNumbers`` (batching dims included) and ``GatherScatterMode``.
* scans.py: ``associative_scan`` (Blelloch's work-efficient parallel prefix, pytrees),
  ``cumsum``, ``cumprod``, ``cummax``, ``cummin``, ``cumlogsumexp``.
* sorting.py: ``sort`` (several operands, ``num_keys``), ``sort_key_val``, ``top_k``.
* windows.py: ``reduce_window`` (padding, strides, base / window dilation; add / mul / max /
  min recognised, any associative callable and pytrees of operands), ``padtype_to_pads``.
* conv.py: ``conv_general_dilated`` (lhs / rhs dilation, feature and batch groups, dimension
  numbers), ``conv``, ``conv_with_general_padding``, ``conv_transpose``,
  ``conv_dimension_numbers``, ``ConvDimensionNumbers``.

* barrier.py: ``optimization_barrier`` (an identity primitive no compiler pass sees through).
* special functions (src/arrays/ops/special*.py, SciPy's names in ``starling.scipy.special``):
  ``erf``, ``erfc``, ``erf_inv``, ``lgamma``, ``digamma``, ``polygamma``, ``zeta``,
  ``igamma``, ``igammac``, ``igamma_grad_a``, ``random_gamma_grad``, ``betainc``,
  ``bessel_i0e``, ``bessel_i1e``; these promote their operands as ``starling.numpy`` does.

Also here: ``dot_general``, ``ragged_dot`` (grouped matrix products for mixture-of-experts
layers: src/arrays/ops/ragged_dot.py), ``scaled_matmul`` (float8 GEMM with per-tensor / per-row
or MX block scales), ``quantize_mx`` / ``dequantize_mx`` (OCP MX formats:
src/arrays/ops/block_scaled.py), ``stop_gradient``, the control flow (``cond``, ``switch``,
``while_loop``, ``fori_loop``, ``scan``, ``map``: Starling's own), and the collectives (psum,
pmean, pmax, pmin, all_gather, psum_scatter, all_to_all, ppermute, axis_index, axis_size, pvary)
which work inside shard_map and vmap(axis_name=), and ``with_sharding_constraint``.
"""
from .arrays.lax.barrier import optimization_barrier  # noqa: F401
from .arrays.lax.bits import (bitcast_convert_type, population_count,  # noqa: F401
                              reduce_precision)
from .arrays.lax.conv import (ConvDimensionNumbers, conv_dimension_numbers,
                              conv_general_dilated, conv, conv_with_general_padding,
                              conv_transpose)  # noqa: F401,A004
from .arrays.lax.elementwise import (add, sub, mul, div, rem, max, min, neg, abs, sign, exp,
                                     exp2, log, log1p, expm1, sqrt, rsqrt, cbrt, square, pow,
                                     integer_pow, nextafter, sin, cos, tan, tanh, sinh, cosh,
                                     asin, acos, atan, asinh, acosh, atanh, logistic, complex,
                                     clz, not_, atan2, floor,
                                     ceil, round, is_finite, eq, ne, lt, le, gt, ge,
                                     bitwise_and, bitwise_or, bitwise_xor, bitwise_not,
                                     shift_left, shift_right_arithmetic, shift_right_logical,
                                     clamp, select_n, real, imag, conj,
                                     convert_element_type)  # noqa: F401,A004
from .arrays.lax.gather import (GatherDimensionNumbers, ScatterDimensionNumbers,
                                GatherScatterMode, gather, scatter, scatter_add, scatter_sub,
                                scatter_mul, scatter_min, scatter_max)  # noqa: F401,A004
from .arrays.lax.reductions import (reduce, reduce_sum, reduce_prod, reduce_max, reduce_min,
                                    reduce_and, reduce_or, reduce_xor, argmax, argmin, dot,
                                    batch_matmul, full, full_like, zeros_like_array,
                                    collapse)  # noqa: F401,A004
from .arrays.lax.scans import (associative_scan, cumlogsumexp, cummax, cummin,  # noqa: F401
                               cumprod, cumsum)
from .arrays.lax.slicing import (slice, slice_in_dim, index_in_dim, dynamic_slice,
                                 dynamic_slice_in_dim, dynamic_index_in_dim,
                                 dynamic_update_slice, dynamic_update_slice_in_dim,
                                 dynamic_update_index_in_dim)  # noqa: F401,A004
from .arrays.lax.sorting import sort, sort_key_val, top_k  # noqa: F401
from .arrays.lax.structural import (pad, broadcast_in_dim, broadcast, squeeze, expand_dims,
                                    rev, reshape, transpose, concatenate, iota,
                                    broadcasted_iota)  # noqa: F401,A004
from .arrays.lax.windows import padtype_to_pads, reduce_window  # noqa: F401
from .arrays.ops.linear import dot_general  # noqa: F401
from .arrays.ops.ragged_dot import ragged_dot  # noqa: F401
from .arrays.ops.block_scaled import dequantize_mx, quantize_mx, scaled_matmul  # noqa: F401
from .arrays.ops.autodiff import stop_gradient  # noqa: F401
from .collectives.ops import (psum, pmax, pmin, pmean, all_gather, psum_scatter, all_to_all,
                              ppermute, axis_index, axis_size, pvary, pbroadcast, all_reduce,
                              all_gather_single, reduce_scatter, reduce_scatter_single,
                              all_to_all_single)  # noqa: F401,A004
from .collectives.constraint import with_sharding_constraint  # noqa: F401
from .transforms.control import cond, fori_loop, map, scan, switch, while_loop  # noqa: F401,A004

__all__ = [
    "add", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "exp", "exp2",
    "log", "log1p", "expm1", "sqrt", "rsqrt", "cbrt", "square", "pow", "integer_pow",
    "nextafter", "sin", "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "asinh",
    "acosh", "atanh", "logistic", "complex", "clz", "not_", "atan2", "floor", "ceil", "round",
    "is_finite", "reduce", "reduce_sum", "reduce_prod", "reduce_max", "reduce_min",
    "reduce_and", "reduce_or", "reduce_xor", "argmax", "argmin", "dot", "batch_matmul", "full",
    "full_like", "zeros_like_array", "collapse",
    "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "shift_left", "shift_right_arithmetic", "shift_right_logical", "clamp",
    "select_n", "real", "imag", "conj", "convert_element_type", "population_count",
    "bitcast_convert_type", "reduce_precision", "pad", "broadcast_in_dim", "broadcast",
    "squeeze", "expand_dims", "rev", "reshape", "transpose", "concatenate", "iota",
    "broadcasted_iota", "slice", "slice_in_dim", "index_in_dim", "dynamic_slice",
    "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice",
    "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim", "GatherDimensionNumbers",
    "ScatterDimensionNumbers", "GatherScatterMode", "gather", "scatter", "scatter_add",
    "scatter_sub", "scatter_mul", "scatter_min", "scatter_max", "associative_scan", "cumsum",
    "cumprod", "cummax", "cummin", "cumlogsumexp", "sort", "sort_key_val", "top_k",
    "reduce_window", "padtype_to_pads", "ConvDimensionNumbers", "conv_dimension_numbers",
    "conv_general_dilated", "conv", "conv_with_general_padding", "conv_transpose",
    "optimization_barrier", "dot_general", "stop_gradient", "with_sharding_constraint", "cond",
    "fori_loop", "map", "scan", "switch", "while_loop", "psum", "pmax", "pmin", "pmean",
    "all_gather", "psum_scatter", "all_to_all", "ppermute", "axis_index", "axis_size", "pvary",
    "pbroadcast", "all_reduce", "all_gather_single", "reduce_scatter", "reduce_scatter_single",
    "all_to_all_single",
]

# ---- special functions (src/arrays/ops/special*.py; SciPy's names: starling.scipy.special) ----
from .arrays.ops.special import erf, erfc  # noqa: E402,F401
from .arrays.ops.special import erfinv as erf_inv  # noqa: E402,F401
from .arrays.ops.special_gamma import digamma, lgamma, polygamma, zeta  # noqa: E402,F401
from .arrays.ops.special_igamma import (  # noqa: E402,F401
    igamma, igamma_grad_a, igammac, random_gamma_grad)
from .arrays.ops.special_beta import betainc  # noqa: E402,F401
from .arrays.ops.special_bessel import bessel_i0e, bessel_i1e  # noqa: E402,F401

__all__ += ["erf", "erfc", "erf_inv", "lgamma", "digamma", "polygamma", "zeta", "igamma",
            "igammac", "igamma_grad_a", "random_gamma_grad", "betainc", "bessel_i0e",
            "bessel_i1e"]
