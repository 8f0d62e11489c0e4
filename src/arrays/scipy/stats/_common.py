"""What every distribution of ``starling.scipy.stats`` shares: promotion of its arguments, the
location-scale change of variable, SciPy's NaN for invalid parameters, and safe logs for the
branches a ``where`` discards (so neither values nor gradients pick up NaN from them)."""
from __future__ import annotations

import inspect
import math

from ... import numpy as snp
from ...ops.elementwise_docs import entry, fill
from ...ops.elementwise_family import promote_operands

NAN = float("nan")
NEG_INF = -float("inf")
LOG_2PI = math.log(2.0 * math.pi)
LOG_2 = math.log(2.0)


def promote(op, *args):
    """The operands broadcast-ready at one real floating dtype (JAX rules: bool / integers
    become the default float); TypeError naming ``op`` for complex or unpromotable dtypes."""
    return promote_operands(op, args, "real_inexact")


def standardize(op, x, loc, scale, *params):
    """``((x - loc) / scale, scale, *params)``, all promoted to one floating dtype."""
    x, loc, scale, *params = promote(op, x, loc, scale, *params)
    return ((x - loc) / scale, scale, *params)


def invalid_to_nan(value, bad, *points):
    """``value`` with NaN where the (broadcastable) mask ``bad`` holds (SciPy's answer for
    parameters outside their domain: ``scale <= 0``, ``df <= 0``, ...) or where one of
    ``points`` is NaN (the support tests are False for NaN, which would otherwise give
    ``-inf`` or a cdf of 0 / 1)."""
    for x in points:
        bad = bad | snp.isnan(x)
    return snp.where(bad, NAN, value)


def safe(x, ok, fill):
    """``x`` where ``ok``, else ``fill``: the operand given to a formula whose result a later
    ``where(ok, ...)`` discards, so that the discarded branch stays finite and its gradient is
    not ``0 * inf = NaN``."""
    return snp.where(ok, x, fill)


def outside(value, out_mask, fill):
    """``value`` replaced by ``fill`` (``-inf`` for log-densities, 0 or 1 for cdfs) where
    ``out_mask`` holds (``x`` outside the support)."""
    return snp.where(out_mask, fill, value)


# ---- docstrings ---------------------------------------------------------------------------------
_ARGS = {
    "x": "the points at which to evaluate.",
    "k": "the points (counts) at which to evaluate; non-integers are outside the support.",
    "q": "probabilities in ``[0, 1]`` (NaN outside).",
    "loc": "location: the distribution is shifted by ``loc`` (default 0).",
    "scale": "scale, ``> 0`` (default 1; NaN results where ``scale <= 0``).",
    "df": "degrees of freedom, ``> 0`` (``inf`` allowed: the normal limit; NaN where "
          "``df <= 0``).",
    "a": "shape parameter, ``> 0`` (NaN where ``a <= 0``).",
    "b": "second shape parameter, ``> 0`` (NaN where ``b <= 0``).",
    "mu": "the mean, ``>= 0`` (NaN where ``mu < 0``).",
    "p": "the probability of a 1, in ``[0, 1]`` (NaN outside).",
}


def document(args, *, notes=""):
    """Decorator completing the docstring of an elementwise distribution function.

    The function's own docstring is a summary paragraph, optionally followed by notes (the
    method, its source, the derivatives); the Google-style Args / Returns / Raises sections
    shared by the distributions are put after the summary.

    Args:
        args: the parameter names in order (str); their descriptions come from ``_ARGS``.
        notes: a last paragraph shared by several functions (str), after their own notes.
    """
    def deco(f):
        summary, _, own = inspect.cleandoc(f.__doc__ or "").partition("\n\n")
        text = _paragraph(summary) + "\n\nArgs:\n"
        for name in args:
            text += entry(f"{name}: ", "array or Python scalar of a shape broadcasting with the "
                                       f"others to ``(*shape)``; {_ARGS[name]}")
        text += "Returns:\n" + entry("", "Array ``(*shape)`` of the promoted floating dtype "
                                         "(JAX rules: bool / integers become float32).")
        text += "Raises:\n" + entry("TypeError: ", "complex operands (the message names the "
                                                    "function).")
        text += entry("ValueError: ", "shapes that do not broadcast.")
        for para in own.split("\n\n") + [notes]:
            if para:
                text += "\n" + _paragraph(para) + "\n"
        f.__doc__ = text
        return f
    return deco


def _paragraph(text):
    """One docstring paragraph, its source line breaks undone, filled to 96 columns."""
    return fill(text.replace("\n", " "))


def log_of(p, complement):
    """``log(p)`` from the probability ``p`` and its complement ``1 - p`` (each computed
    directly): ``log1p(-complement)`` where ``p > 1/2``, so that a ``p`` close to 1 keeps the
    relative accuracy of its small complement."""
    high = p > 0.5
    return snp.where(high, snp.log1p(-safe(complement, high, 0.0)), snp.log(safe(p, ~high, 0.5)))
