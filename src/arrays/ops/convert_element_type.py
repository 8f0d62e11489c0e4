"""convert_element_type: the one primitive that changes dtype (and weak_type).

Semantics follow NumPy's ``astype`` (C casts): float -> int truncates toward zero, out-of-range
float -> int is implementation-defined as in NumPy, complex -> real keeps the real part,
anything -> bool is ``x != 0``.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.primitive import Primitive
from ..array import Array
from . import rules_sharding as RS

convert_element_type_p = Primitive("convert_element_type", family="convert")


def _impl(x, *, new_dtype, weak_type):
    if x.dtype == new_dtype:
        return x
    # Invalid-value casts (nan -> int) warn from this module: silenced by starling's
    # module-scoped RuntimeWarning filter (src/__init__.py), not per call (catch_warnings ~10 us).
    if dtypes.is_complex(x.dtype) and dtypes.is_bool(new_dtype):
        return np.asarray(x != 0)
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        x = np.real(x)
    return np.asarray(x).astype(new_dtype)


convert_element_type_p.impl = _impl
convert_element_type_p.abstract_eval = lambda x, *, new_dtype, weak_type: x.update(
    dtype=new_dtype, weak_type=weak_type)
convert_element_type_p.weak_type = lambda w, *, new_dtype, weak_type: weak_type


def convert_element_type(x, new_dtype, weak_type=False):
    """Casts ``x`` (Array or Tracer) to ``new_dtype``; a no-op cast returns ``x`` itself.

    Args:
        x: operand of any shape ``(*dims)``.
        new_dtype: target np.dtype (already canonical).
        weak_type: weak flag of the result.
    Returns:
        Array/Tracer of shape ``(*dims)`` and dtype ``new_dtype``.
    """
    if type(x) is Array:
        if x._buf.dtype == new_dtype and x._weak == weak_type:
            return x
    elif x.aval.dtype == new_dtype and x.aval.weak_type == weak_type:
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)


# ---- transformation rules ----------------------------------------------------------------------

def _convert_jvp(primals, tangents, *, new_dtype, weak_type):
    from ...core.ad_util import Zero, tangent_aval
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if type(t) is Zero or not dtypes.is_inexact(new_dtype) or not dtypes.is_inexact(x.dtype):
        return out, Zero(tangent_aval(out.aval))
    return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=False)


def _convert_transpose(ct, x, *, new_dtype, weak_type):
    from ...core.ad_util import Zero, tangent_aval
    if type(ct) is Zero:
        return [Zero(tangent_aval(x.aval))]
    # complex -> real keeps the real part: the (non-conjugating) transpose of the embedding.
    return [convert_element_type_p.bind(ct, new_dtype=x.aval.dtype, weak_type=False)]


def _convert_batch(args, dims, *, new_dtype, weak_type):
    return convert_element_type_p.bind(args[0], new_dtype=new_dtype, weak_type=weak_type), dims[0]


convert_element_type_p.sharding = RS.elementwise()   # rounding: partial sums stay unsplit
convert_element_type_p.jvp = _convert_jvp
convert_element_type_p.transpose = _convert_transpose
convert_element_type_p.batch = _convert_batch
convert_element_type_p.is_linear = True
