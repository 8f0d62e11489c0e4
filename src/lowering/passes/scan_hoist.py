"""Scan hoisting: products move out of ``scan`` loops, before or after them, so that each runs
as ONE product of ``length * rows`` rows instead of ``length`` small ones, each too small to keep
the threads busy or to amortise the GEMM's packing (the "scan RNN" of benchmarks/models.py ran
200 products of 32 x 256 x 256 per pass and direction). cuDNN's RNNs work this way: input
projections for all time steps at once before the recurrence, weight gradients after it.

Before the loop: the equations of a body that depend on a scanned slice and on nothing that
depends on a carry (nor are effectful or hold sub-Programs), an RNN's input projection
``x_t @ W_x``, are batched along the scan axis by their vmap rules (``batch_program``); their
results that the rest of the body reads enter the loop as new scanned inputs. A body changes
only when a hoisted equation is a ``dot_general``: hoisting elementwise work alone would only
stack intermediates in memory. Each row of the batched product is the product the body
computed, from the same operands; Starling's native GEMM sums each element in the same order for
any number of rows, so its results keep their bits (another BLAS may round differently).
Elementwise functions hoisted with a product (``exp``, ``tanh`` of it) may change in the last
bit: the cpp kernels' vector loop and scalar tail can round differently, so a value's bits
depend on its position in the array.

After the loop: a carry that only accumulates a product, ``acc = acc + dot_general(a_t, b_t)``
(no batch dims) or ``acc = acc + reduce_sum(a_t)`` with nothing else reading ``acc``, the weight
and bias gradients of a transposed scan, leaves the loop: the loop stacks the operands it
computes (a scanned slice is already stacked) and the sum over the steps becomes one product
that also contracts the scan axis, added to the carry's initial value after the loop. The sum
runs in another order (the GEMM's blocks instead of step after step), so float results may
differ in the last bits, as any change of summation order does; accumulators of fewer than 32
bits of float (which round every step to a few bits) stay in the loop.

Both take memory the loop did not need: together, the batched values (before) and the stacked
operands (after) may take ``MAX_EXTRA_BYTES``, or as much as the loop's own stacked operands and
results when those are larger; what would not fit, or has sizes not known when compiling, stays
in the loop (a long scan of small slices times a wide matrix would otherwise hold every step's
product at once).

``STARLING_SCAN_HOIST=0`` turns the pass off.
"""
from __future__ import annotations

import logging
import os

import numpy as np

from ...core.avals import ShapedArray
from ...core.ir import Equation, Literal, Program, Var, is_effectful, subprogram_params
from .util import map_subprograms, nbytes, with_eqns

logger = logging.getLogger("starling.lowering")

MAX_EXTRA_BYTES = 64 << 20


def enabled() -> bool:
    """False when the environment sets ``STARLING_SCAN_HOIST`` to "0" (or to nothing): the
    pass then returns Programs unchanged. Read at each compilation."""
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
        out = [new]
        if new.primitive.name == "scan":
            budget = _budget(new)
            out, used = _hoist(new, budget)
            out = out[:-1] + _sink(out[-1], budget - used)
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


def _hoist(eqn: Equation, budget: int):
    """(``[eqn]``, 0), or (the hoisted equations followed by the new scan equation, the bytes
    of the batched values)."""
    from ...transforms.control.programs import batch_program

    p = eqn.params
    body, nc, nk, length = p["body"], p["num_consts"], p["num_carry"], p["length"]
    if not isinstance(length, (int, np.integer)) or length < 1 or body.constvars or \
            len(body.invars) == nc + nk:
        return [eqn], 0
    hoisted, invariant, rest, needed = _split_body(body, nc, nk)
    if not needed or not any(e.primitive.name == "dot_general" for e in hoisted):
        return [eqn], 0
    used = _stacked_bytes([v for e in hoisted for v in e.outvars], length)
    if used > budget:
        return [eqn], 0
    consts_v, xs_v = body.invars[:nc], body.invars[nc + nk:]
    keep = {id(e) for e in hoisted} | {id(e) for e in invariant}
    part = Program([], [], consts_v + xs_v, [e for e in body.eqns if id(e) in keep], needed)
    try:
        batched = batch_program(part, [None] * nc + [0] * len(xs_v), int(length),
                                axis_name=None)
    except Exception as e:   # e.g. a primitive without a batching rule: the loop stays as is
        logger.debug("starling.lowering: scan body not hoisted: %s", e)
        return [eqn], 0
    if batched.constvars or any(isinstance(v, Literal) for v in batched.outvars):
        return [eqn], 0
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
    return before + [Equation(eqn.primitive, list(eqn.invars) + stacked, eqn.outvars, params)], \
        used


_SUMMED = ("dot_general", "reduce_sum")


def _sinkable(body, nc, nk):
    """{carry position: (its add equation, the summed equation)} of the carries that only
    accumulate a product or a sum of values that change from step to step."""
    uses = {}
    for v in [v for e in body.eqns for v in e.invars] + list(body.outvars):
        if isinstance(v, Var):
            uses[v] = uses.get(v, 0) + 1
    producer = {v: e for e in body.eqns for v in e.outvars}
    # values of the constants alone: stacking them would repeat one value every step
    consts = set(body.invars[:nc])
    for e in body.eqns:
        if not is_effectful(e) and all(v in consts for v in e.invars if isinstance(v, Var)):
            consts.update(e.outvars)
    found = {}
    for k in range(nk):
        ci, co = body.invars[nc + k], body.outvars[k]
        add = producer.get(co) if isinstance(co, Var) else None
        if add is None or add.primitive.name != "add" or uses.get(ci) != 1 or \
                uses.get(co) != 1 or ci not in add.invars:
            continue
        t = add.invars[1] if add.invars[0] is ci else add.invars[0]
        summed = producer.get(t) if isinstance(t, Var) else None
        if summed is None or summed.primitive.name not in _SUMMED or uses.get(t) != 1 or \
                t.aval.shape != ci.aval.shape or t.aval.dtype != ci.aval.dtype or \
                not _order_free(ci.aval.dtype):
            continue
        if summed.primitive.name == "dot_general" and \
                tuple(map(tuple, summed.params["dimension_numbers"][1])) != ((), ()):
            continue
        if any(not isinstance(v, Var) or v in consts for v in summed.invars):
            continue
        found[k] = (add, summed)
    return found


def _sink(eqn: Equation, budget: int):
    """``[eqn]``, or the scan equation without its accumulating carries followed by the
    equations summing their products over the steps (see module docstring)."""
    p = eqn.params
    body, nc, nk, length = p["body"], p["num_consts"], p["num_carry"], p["length"]
    if not isinstance(length, (int, np.integer)) or length < 1 or body.constvars:
        return [eqn]
    found = _sinkable(body, nc, nk)
    if not found:
        return [eqn]
    xs_v = body.invars[nc + nk:]
    scanned = set(xs_v)
    new_ys = []
    for _, summed in found.values():
        new_ys += [v for v in summed.invars if v not in scanned and v not in new_ys]
    if _stacked_bytes(new_ys, length) > budget:
        return [eqn]
    drop = {id(e) for pair in found.values() for e in pair}
    keep = [k for k in range(nk) if k not in found]
    new_body = Program([], [], body.invars[:nc] + [body.invars[nc + k] for k in keep] + xs_v,
                       [e for e in body.eqns if id(e) not in drop],
                       [body.outvars[k] for k in keep] + body.outvars[nk:] + new_ys,
                       body.effects)
    consts, init, xs = eqn.invars[:nc], eqn.invars[nc:nc + nk], eqn.invars[nc + nk:]
    stacked = [Var(ShapedArray((int(length),) + tuple(v.aval.shape), v.aval.dtype,
                               v.aval.weak_type)) for v in new_ys]
    scan = Equation(eqn.primitive, consts + [init[k] for k in keep] + xs,
                    [eqn.outvars[k] for k in keep] + eqn.outvars[nk:] + stacked,
                    dict(p, body=new_body, num_carry=len(keep)))
    whole = dict(zip(xs_v, xs))
    whole.update(zip(new_ys, stacked))
    after = []
    for k, (add, summed) in found.items():
        if summed.primitive.name == "dot_general":
            (ca, cb), batch = summed.params["dimension_numbers"]
            params = dict(summed.params, dimension_numbers=(
                ((0,) + tuple(c + 1 for c in ca), (0,) + tuple(c + 1 for c in cb)), batch))
        else:
            params = dict(summed.params, axes=(0,) + tuple(a + 1 for a in summed.params["axes"]))
        total = Var(summed.outvars[0].aval)
        after.append(Equation(summed.primitive, [whole[v] for v in summed.invars], [total],
                              params))
        ci = body.invars[nc + k]
        after.append(Equation(add.primitive, [init[k] if v is ci else total for v in add.invars],
                              [eqn.outvars[k]], add.params))
    return [scan] + after


def _order_free(dtype) -> bool:
    """True for accumulators whose sum may run in another order: integers (wrapping sums do not
    depend on it) and floats of 32 bits and more (the last bits may change). A float16 /
    bfloat16 / float8 accumulator rounds every step to a few bits: summing once would change
    its value by far more than rounding, so such carries stay in the loop."""
    dt = np.dtype(dtype)
    return dt.kind in "iu" or (dt.kind in "fc" and dt.itemsize >= 4)


def _budget(eqn) -> int:
    """Bytes the hoisted values of scan ``eqn`` may take: MAX_EXTRA_BYTES, or as much as the
    loop's own stacked operands and results when they are larger (sizes not known when
    compiling count as nothing here)."""
    p = eqn.params
    nc, nk = p["num_consts"], p["num_carry"]
    own = 0
    for v in list(eqn.invars[nc + nk:]) + list(eqn.outvars[nk:]):
        n = nbytes(v.aval)
        own += int(n) if isinstance(n, (int, np.integer)) else 0
    return max(MAX_EXTRA_BYTES, own)


def _stacked_bytes(per_step, length) -> int:
    """Bytes of the body Vars ``per_step`` stacked over ``length`` steps (sizes not known when
    compiling count as more than any budget)."""
    total = 0
    for v in per_step:
        n = nbytes(v.aval)
        total += int(n) * int(length) if isinstance(n, (int, np.integer)) else 1 << 62
    return total
