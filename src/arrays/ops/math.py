"""Elementwise math of ``starling.numpy``, gathered from its three files:

* math_basic.py: one primitive per function (exp, log, sin, ..., rounding, isnan, real, ...);
* math_select.py: maximum / minimum / fmax / fmin, clip (alias clamp), where, nan_to_num;
* math_misc.py: compositions (rsqrt, sinc, modf, isclose, ...), frexp, ldexp, gcd, lcm, i0.
"""
from __future__ import annotations

from . import math_basic as _basic, math_misc as _misc, math_select as _select
from .math_basic import *  # noqa: F401,F403
from .math_misc import *  # noqa: F401,F403
from .math_select import *  # noqa: F401,F403

__all__ = [*_basic.__all__, *_select.__all__, *_misc.__all__]
