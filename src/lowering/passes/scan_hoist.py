"""Scan hoisting: the products of a ``scan`` body that read scanned slices and loop constants but
nothing carried run once, before the loop, over the whole stacked input.

An RNN's input projection ``x_t @ W_x`` then becomes ONE product of ``length * batch`` rows
instead of ``length`` small ones, each too small to keep the threads busy or to amortise the
GEMM's packing (the "scan RNN" of benchmarks/models.py runs 200 products of 32 x 256 x 256 per
forward pass). This is loop-invariant code motion generalised to values that vary only with the
scanned slice, as cuDNN's RNNs compute their input projections for all time steps at once.

The hoisted equations are those of the body that depend on a scanned slice and on nothing that
depends on a carry (nor are effectful or hold sub-Programs). They are batched along the scan
axis by their vmap rules (``batch_program``); their results that the rest of the body reads
enter the loop as new scanned inputs, so the body keeps what depends on the carry. A body
changes only when a hoisted equation is a ``dot_general``: hoisting elementwise work alone would
only stack intermediates in memory. Each row of the batched product is the product the body
computed, from the same operands; Starling's native GEMM sums each element in the same order
for any number of rows, so its results keep their bits (another BLAS may round differently).

The batched values take memory the loop did not need: a body is left alone when all the hoisted
equations' results, stacked, would take more than ``MAX_EXTRA_BYTES`` and more than the loop's
own stacked operands and results
(a long scan of small slices times a wide matrix would otherwise hold every step's product at
once).

``STARLING_SCAN_HOIST=0`` turns the pass off.
"""
from __future__ import annotations

import logging
import os

import numpy as np

from ...core.ir import Equation, Literal, Program, Var, is_effectful, subprogram_params
from .util import map_subprograms, nbytes, with_eqns

logger = logging.getLogger("starling.lowering")

MAX_EXTRA_BYTES = 64 << 20


def enabled() -> bool:
    return os.environ.get("STARLING_SCAN_HOIST", "1") not in ("0", "")


def scan_hoist(prog: Program) -> Program:
    """``prog`` with the slice-only products of its scans (nested ones too) run before the loops
    (see module docstring)."""
    if not enabled():
        return prog
    eqns = []
    changed = False
    for eqn in prog.eqns:
        new = map_subprograms(eqn, scan_hoist)
        out = _hoist(new) if new.primitive.name == "scan" else [new]
        changed = changed or new is not eqn or len(out) != 1 or out[0] is not eqn
        eqns.extend(out)
    return with_eqns(prog, eqns) if changed else prog


def _split_body(body, nc, nk):
    """(hoisted equations, equations reading constants only, the equations that stay in the
    body, the hoisted Vars the staying equations or the body's outputs read) of a scan body."""
    xs_v = body.invars[nc + nk:]
    varying = set(xs_v)                        # depends on a slice, not on a carry
    carried = set(body.invars[nc:nc + nk])     # depends on a carry (or an effect)
    hoisted, invariant, rest = [], [], []
    for e in body.eqns:
        ins = [v for v in e.invars if isinstance(v, Var)]
        if is_effectful(e) or next(subprogram_params(e.params), None) is not None or \
                any(v in carried for v in ins):
            carried.update(e.outvars)
            rest.append(e)
        elif any(v in varying for v in ins):
            varying.update(e.outvars)
            hoisted.append(e)
        else:
            invariant.append(e)
            rest.append(e)
    produced = {v for e in hoisted for v in e.outvars}
    needed = []
    for v in [v for e in rest for v in e.invars] + list(body.outvars):
        if isinstance(v, Var) and v in produced and v not in needed:
            needed.append(v)
    return hoisted, invariant, rest, needed


def _hoist(eqn: Equation):
    """``[eqn]``, or the hoisted equations followed by the new scan equation."""
    from ...transforms.control.programs import batch_program

    p = eqn.params
    body, nc, nk, length = p["body"], p["num_consts"], p["num_carry"], p["length"]
    if not isinstance(length, (int, np.integer)) or length < 1 or body.constvars or \
            len(body.invars) == nc + nk:
        return [eqn]
    hoisted, invariant, rest, needed = _split_body(body, nc, nk)
    if not needed or not any(e.primitive.name == "dot_general" for e in hoisted):
        return [eqn]
    extra = sum(_int_bytes(v.aval) for e in hoisted for v in e.outvars) * int(length)
    own = sum(_int_bytes(v.aval) for v in eqn.invars[nc + nk:]) + \
        sum(_int_bytes(v.aval) for v in eqn.outvars[nk:])
    if extra > max(MAX_EXTRA_BYTES, own):
        return [eqn]
    consts_v, xs_v = body.invars[:nc], body.invars[nc + nk:]
    keep = {id(e) for e in hoisted} | {id(e) for e in invariant}
    part = Program([], [], consts_v + xs_v, [e for e in body.eqns if id(e) in keep], needed)
    try:
        batched = batch_program(part, [None] * nc + [0] * len(xs_v), int(length),
                                axis_name=None)
    except Exception as e:   # e.g. a primitive without a batching rule: the loop stays as is
        logger.debug("starling.lowering: scan body not hoisted: %s", e)
        return [eqn]
    if batched.constvars or any(isinstance(v, Literal) for v in batched.outvars):
        return [eqn]
    # the batched part's equations run in the enclosing Program, on the scan's own operands
    outer = eqn.invars[:nc] + eqn.invars[nc + nk:]
    sub = dict(zip(batched.invars, outer))
    before = []
    for e in batched.eqns:
        ins = [sub.get(v, v) if isinstance(v, Var) else v for v in e.invars]
        before.append(Equation(e.primitive, ins, e.outvars, e.params))
    stacked = [sub.get(v, v) for v in batched.outvars]
    new_body = Program([], [], list(body.invars) + needed, rest, body.outvars, body.effects)
    params = dict(p, body=new_body)
    return before + [Equation(eqn.primitive, list(eqn.invars) + stacked, eqn.outvars, params)]


def _int_bytes(aval):
    """Bytes of a value of ``aval``; a huge number when unknown (symbolic dims)."""
    n = nbytes(aval)
    return int(n) if isinstance(n, (int, np.integer)) else 1 << 62
