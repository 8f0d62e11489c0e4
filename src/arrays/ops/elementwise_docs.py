"""Docstring builders shared by the elementwise op files (arithmetic.py, math*.py).

Most elementwise ops differ only in their formula, accepted dtypes and special values; these
helpers write the common Args / Returns / Raises sections so that each op states only that.
``fill`` and ``entry`` also serve other families of thin wrappers (starling.numpy.fft).
"""
from __future__ import annotations

import functools
import textwrap

ACCEPTS = {
    "any": "any dtype",
    "numeric": "any numeric dtype (bool raises TypeError)",
    "real": "bool, integer or real floating dtype (complex raises TypeError)",
    "real_num": "integer or real floating dtype (bool and complex raise TypeError)",
    "integer": "bool or integer dtype (floating and complex raise TypeError)",
    "int_only": "integer dtype (bool, floating and complex raise TypeError)",
    "bool": "bool dtype",
    "inexact": "any numeric dtype; bool and integers are first promoted to float32 (the default "
               "float, as in JAX)",
    "real_inexact": "real dtype; bool and integers are first promoted to float32 (the default "
                    "float, as in JAX); complex raises TypeError",
}

RETURNS = {
    "same": "the (promoted) input dtype",
    "bool": "bool",
    "real": "the input dtype, or for complex input its real dtype (complex64 -> float32)",
}

PROMOTION = ("dtypes promote by JAX rules (Python scalars are weak: ``x_f32 + 1.0`` is float32, "
             "``x_i8 + 1`` is int8)")

SUBGRADIENTS = """\
Subgradient convention (Starling-wide; JVP and VJP both follow it, since reverse mode is the
transposed JVP, and so do vmap and higher derivatives; the weights below are piecewise constant,
so their own derivative is 0):

* ``maximum`` / ``minimum``: the derivative goes to the operand that produced the output; where
  ``x1 == x2`` (including +-inf ties and ``-0.0 == 0.0``) it is split 0.5 / 0.5. Where the output
  is NaN, all of it goes to the NaN operand (``maximum(nan, 1)``: all to the first); when both
  are NaN it is split evenly. So ``maximum(x, 0.0)`` has derivative 0.5 at ``x == 0``; use
  ``clip`` / ``clamp_min`` with a Python scalar bound for a relu with derivative 0 there.
* ``fmax`` / ``fmin``: ties split 0.5 / 0.5 as above; a NaN operand is ignored (its derivative
  is 0, the other operand's is 1); both NaN split evenly.
* ``clip`` / ``clamp`` (and ``clamp_min`` / ``clamp_max``) with static bounds (Python scalars
  or None): ``d/dx`` is 1 strictly inside ``lo < x < hi``, 0 outside and 0 at ``x == lo`` or
  ``x == hi`` (relu- and hardtanh-style kinks get 0); ``lo > hi`` gives 0 everywhere. A NaN
  ``x`` produced the (NaN) output: ``d/dx`` is 1; a NaN static bound gives 0.
* ``clip`` / ``clamp`` with array bounds (``clip(x, lo, hi) = minimum(maximum(x, lo), hi)``, each
  bound an operand with its own derivative): for ``lo < hi`` the derivative goes to the operand
  that produced the output, and a tie ``x == lo`` or ``x == hi`` splits it 0.5 / 0.5 between
  ``x`` and that bound; ``x == lo == hi`` gives ``x`` everything; ``lo == hi != x`` and
  ``lo > hi`` give ``hi`` (the bound that produced the output) everything. Where any operand is
  NaN, the derivative is split evenly among the NaN operands (a NaN ``x`` alone gets all of
  it). A broadcast bound receives the sum of its shares. With only one array bound, ``clip`` is
  ``maximum`` / ``minimum`` and follows their rule.
* ``abs`` at 0: 0 (also at ``-0.0`` and at complex 0), the minimum-norm subgradient.
"""


@functools.lru_cache(maxsize=None)
def fill(text, initial_indent="", subsequent_indent=""):
    """``textwrap.fill`` to 96 columns that never breaks a line inside a ``code`` literal.

    Args:
        text: one paragraph (str); its own line breaks are treated as spaces.
        initial_indent, subsequent_indent: prefixes of the first and of the other lines.
    Returns:
        The wrapped paragraph (str, no trailing newline).
    """
    # Spaces inside ``code`` literals must not become line breaks.
    parts = text.split("``")
    protected = "``".join(p.replace(" ", "\0") if i % 2 else p for i, p in enumerate(parts))
    wrapped = textwrap.fill(protected, width=96, break_on_hyphens=False,
                            initial_indent=initial_indent, subsequent_indent=subsequent_indent)
    return wrapped.replace("\0", " ")


def entry(head, text, indent=4):
    """One Google-style section entry: ``head + text`` filled with a 4-space hanging indent.

    Args:
        head: the entry's start, e.g. ``"x: "`` or ``"ValueError: "`` (str).
        text: the description (str, one paragraph).
        indent: the entry's own indent (int; continuation lines get 4 more).
    Returns:
        The entry (str) ending in a newline.
    """
    return fill(f"{head}{text}", initial_indent=" " * indent,
                 subsequent_indent=" " * (indent + 4)) + "\n"


def _notes(notes):
    paras = notes.strip().split("\n\n")
    out = []
    for p in paras:
        # Lists and preformatted blocks (the subgradient table) are kept as written.
        out.append(p if p.lstrip().startswith(("*", "Subgradient")) or "\n" in p
                   else fill(p))
    return "\n" + "\n\n".join(out) + "\n"


def unary_doc(summary, domain, out="same", *, notes="", extra_args=""):
    """Google-style docstring for a one-operand elementwise op."""
    returns = RETURNS[out]
    if domain in ("inexact", "real_inexact") and out == "same":
        returns = "the input dtype (float32 for bool / integer input)"
    text = (f"{summary}\n\nArgs:\n" + entry("x: ", f"array of shape ``(*shape)``; "
                                                   f"{ACCEPTS[domain]}.")
            + extra_args + "Returns:\n" + entry("", f"Array of shape ``(*shape)``; dtype: "
                                                     f"{returns}."))
    if domain != "any":
        text += "Raises:\n" + entry("TypeError: ", "the dtype is not accepted (the message "
                                                    "names the op and the dtype).")
    if notes:
        text += _notes(notes)
    return text


def binary_doc(summary, domain, out="same", *, notes="", args="x1, x2", extra_args="",
               promote=True):
    """Google-style docstring for a two-operand broadcasting elementwise op.

    ``promote=False`` is for ops that convert each operand on its own (the logical ops take
    truth values), so neither promotion errors nor Python int overflow can occur.
    """
    returns = RETURNS[out]
    if domain in ("inexact", "real_inexact") and out == "same":
        returns = "the promoted dtype (float32 when it is bool / integer)"
    dtype_rule = PROMOTION if promote else "each operand is converted on its own (no promotion)"
    text = (f"{summary}\n\nArgs:\n"
            + entry(f"{args}: ", f"arrays or Python scalars whose shapes broadcast to "
                                 f"``(*shape)``; {dtype_rule}. Accepts {ACCEPTS[domain]}.")
            + extra_args + "Returns:\n"
            + entry("", f"Array of shape ``(*shape)``; dtype: {returns}.")
            + "Raises:\n"
            + entry("ValueError: ", "the shapes do not broadcast (the message names the op "
                                    "and the shapes)."))
    if promote:
        text += (entry("TypeError: ", "the promoted dtype is not accepted, or the dtypes have no "
                                      "implicit promotion (e.g. float8 with float32).")
                 + entry("OverflowError: ", "a Python int does not fit the integer dtype of the "
                                            "other operand (``x_u8 + 300``)."))
    if notes:
        text += _notes(notes)
    return text
