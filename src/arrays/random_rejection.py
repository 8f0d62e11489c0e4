"""Vectorised rejection sampling for ``starling.random``: rounds of a ``while_loop``.

A rejection sampler proposes a candidate for every element at once; each round ``i`` draws
fresh bits from ``fold_in(key, i)`` (the key passed here is used for nothing else), and an
element keeps the first candidate it accepts. The loop ends when every element has accepted, so
its trip count is the maximum over the elements (a few rounds for acceptance rates near 1: the
chance that one of ``n`` elements is still rejecting after ``r`` rounds is below
``n (1 - rate)**r``). Every element's value depends only on the key and the element's position,
never on the other elements, so eager, compiled and vmapped draws agree bit for bit.
"""
from __future__ import annotations

from ..core import dtypes
from . import numpy as snp
from .ops.convert_element_type import convert_element_type
from .random import fold_in


def rejection_loop(key, value, done, propose):
    """Runs rejection rounds until every element has accepted.

    Args:
        key: a key, uint32 ``(2,)``, reserved for the rounds.
        value: ``(*s)`` initial values (kept where ``done`` starts True).
        done: bool ``(*s)``: elements already decided (invalid or degenerate parameters).
        propose: ``round_key -> (candidate, accept)``, both ``(*s)``: one vectorised round.
    Returns:
        ``(*s)``: per element, the first accepted candidate (or ``value`` where ``done``).
    """
    from ..transforms.control import while_loop

    def cond(carry):
        return snp.logical_not(snp.all(carry[1]))

    def body(carry):
        i, finished, val = carry
        cand, ok = propose(fold_in(key, i))
        take = snp.logical_and(ok, snp.logical_not(finished))
        val = snp.where(take, convert_element_type(cand, val.dtype), val)
        return i + 1, snp.logical_or(finished, ok), val

    start = convert_element_type(snp.zeros((), dtypes.uint32), dtypes.uint32)
    return while_loop(cond, body, (start, snp.asarray(done), value))[2]
