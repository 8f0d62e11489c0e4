"""convert_element_type: the one primitive that changes dtype (and weak_type).

Semantics are Starling's own (JAX / XLA's), the same in eager mode, in staged programs and in
compiled kernels, whatever NumPy / ml_dtypes is installed; ``core/casting.py`` defines and
implements them for NumPy buffers (see ``convert_element_type``'s docstring).
"""
from __future__ import annotations

from ...core import casting, dtypes, scalar as S
from ...core.primitive import Primitive
from ..array import Array
from . import rules_sharding as RS

convert_element_type_p = Primitive("convert_element_type", family="convert")


def _impl(x, *, new_dtype, weak_type):
    # Overflow warnings of the NumPy casts inside are silenced by starling's module-scoped
    # RuntimeWarning filter (src/__init__.py), not per call (catch_warnings costs ~10 us).
    return casting.astype(x, new_dtype)


convert_element_type_p.impl = _impl
convert_element_type_p.abstract_eval = lambda x, *, new_dtype, weak_type: x.update(
    dtype=new_dtype, weak_type=weak_type)
convert_element_type_p.weak_type = lambda w, *, new_dtype, weak_type: weak_type
convert_element_type_p.scalar_formula = S.ScalarFormula(
    lambda x, *, out, **_: S.cast(x, out), lowp=None, name="convert_element_type")


def convert_element_type(x, new_dtype, weak_type=False):
    """Casts ``x`` (Array or Tracer) to ``new_dtype``; a no-op cast returns ``x`` itself.

    The conversion (JAX / XLA ``convert_element_type`` semantics; identical in eager mode,
    staged programs and compiled kernels, independent of the installed NumPy / ml_dtypes):

    * to bool: ``x != 0`` (NaN is True; complex: either part nonzero); from bool: 0 / 1.
    * integer -> integer: two's complement wrap-around (the low bits).
    * float -> integer, every float dtype (float16 / 32 / 64, bfloat16, float8, float4):
      truncation toward zero; NaN -> 0; beyond the integer's range (+-inf too) saturates to its
      min / max (unsigned: negatives -> 0). E.g. ``bfloat16(300) -> uint8`` is 255,
      ``-inf -> int32`` is -2147483648.
    * to a floating dtype: the exact value rounded once, to nearest, ties to even (no double
      rounding: float64 or int64 -> bfloat16 is correctly rounded); then overflow gives +-inf,
      except float8_e4m3fn (NaN) and float4_e2m1fn (saturates to +-6).
    * complex -> real: the real part, converted as above.
    * NaN bits per format: see ``starling.core.casting``.

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
