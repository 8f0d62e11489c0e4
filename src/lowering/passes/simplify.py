"""Algebraic simplification: identities that are exact in IEEE arithmetic.

``x * 1``, ``1 * x``, ``x / 1`` (real dtypes only: for complex a NaN/inf part spreads), ``x - 0``,
``x + (-0.0)`` (and ``x + 0`` for integers: for floats ``-0.0 + 0.0`` is ``+0.0``, so that one
is an identity only where ``x`` provably holds no -0.0, e.g. ``exp``'s or ``abs``'s result),
``negative(negative(x))``, boolean
``x & True`` and ``x | False`` (also where the constant is an ``x & False`` / ``x | True``, as the
JVP rules of max / min / clamp make against a scalar), and no-op ``convert_element_type`` /
``reshape`` / ``transpose`` / ``broadcast_in_dim``. A rewrite
only applies when the replacement has the same shape, dtype and weak type. An elementwise
operand that is a broadcast of a scalar Literal becomes the Literal (elementwise operands
broadcast; a kernel reads a constant instead of a materialised array).

A real float32/float64 ``dot_general`` that is an outer product (contracting dims of size 1, as
vmap(grad) makes for per-example weight gradients) becomes an elementwise multiply, with a
following ``transpose`` of it folded in (see outer_product.py). A sum of zero pads of pieces that
do not overlap (the gradient of slicing an array into parts) becomes one ``concatenate`` of the
pieces (see pad_sum.py).
"""
from __future__ import annotations

import numpy as np

from ...core.ir import Literal, Program
from .outer_product import outer_product_eqns
from .pad_sum import pad_sum_eqns
from .util import map_subprograms, with_eqns


def _lit_equals(v, value, negzero=None):
    if not isinstance(v, Literal):
        return False
    a = np.asarray(v.val)
    if a.ndim != 0:
        return False
    if negzero is not None and a.dtype.kind == "f":
        return bool(a == 0) and bool(np.signbit(a)) == negzero
    return bool(a == value)


def _bool_const(v, producers, depth=8):
    """True / False when bool ``v`` is that constant everywhere (a Literal, ``x & False``,
    ``x | True``, a broadcast of one), else None."""
    if isinstance(v, Literal):
        a = np.asarray(v.val)
        return bool(a) if a.dtype == np.bool_ and a.ndim == 0 else None
    eqn = producers.get(v)
    if eqn is None or depth == 0:
        return None
    name = eqn.primitive.name
    if name == "broadcast_in_dim":
        return _bool_const(eqn.invars[0], producers, depth - 1)
    if name in ("logical_and", "logical_or"):
        absorbing = name == "logical_or"
        if any(_bool_const(x, producers, depth - 1) is absorbing for x in eqn.invars):
            return absorbing
    return None


# Results that are never -0.0 (round to nearest): exp and abs have no negative results, and a
# conversion from an integer or bool makes +0.0 of 0; x + (+0.0) turns -0.0 into +0.0. Views and
# widening float conversions keep the property of their operand. (A contraction's result is not
# among them: a sum whose terms underflow ends at -0.0 when an FMA rounds a tiny negative
# value; a narrowing conversion rounds a tiny negative value to -0.0.)
_NO_NEGATIVE_ZERO = frozenset({"abs", "exp", "iota"})
_SIGN_VIEWS = frozenset({"transpose", "reshape", "squeeze", "broadcast_in_dim", "slice", "rev",
                         "concatenate"})


def _no_negative_zero(v, producers, depth=16):
    """True when ``v`` provably holds no -0.0 (so ``v + 0.0`` is ``v`` bit for bit); complex
    values never qualify."""
    kind = np.dtype(v.aval.dtype).kind
    if kind in "biu":
        return True
    if kind != "f":
        return False
    if isinstance(v, Literal):
        a = np.asarray(v.val)
        return not bool(np.any((a == 0) & np.signbit(a)))
    eqn = producers.get(v)
    if eqn is None or depth == 0:
        return False
    name = eqn.primitive.name
    if name in _NO_NEGATIVE_ZERO:
        return True
    if name == "add":
        return any(_lit_equals(x, 0, negzero=False) for x in eqn.invars)   # real: kind "f"
    if name == "convert_element_type":
        src = np.dtype(eqn.invars[0].aval.dtype)
        if src.kind in "biu":
            return True
        if src.kind != "f" or src.itemsize >= np.dtype(v.aval.dtype).itemsize:
            return False   # narrowing (or same-size) float conversions may round to -0.0
    elif name not in _SIGN_VIEWS:
        return False
    return all(_no_negative_zero(x, producers, depth - 1) for x in eqn.invars)


def _scalar_operands(invars, outvars, producers):
    """An elementwise equation's operands with each broadcast of a scalar Literal replaced by
    the Literal, while another operand still has the result's shape (elementwise operands
    broadcast): a backend then reads a constant instead of a materialised array of copies."""
    if len(outvars) != 1:
        return invars
    shape = tuple(outvars[0].aval.shape)
    new = list(invars)
    for i, v in enumerate(invars):
        eqn = producers.get(v) if not isinstance(v, Literal) else None
        if (eqn is not None and eqn.primitive.name == "broadcast_in_dim"
                and isinstance(eqn.invars[0], Literal) and eqn.invars[0].aval.shape == ()
                and eqn.invars[0].aval.dtype == v.aval.dtype
                and eqn.invars[0].aval.weak_type == v.aval.weak_type
                and any(not isinstance(x, Literal) and tuple(x.aval.shape) == shape
                        for j, x in enumerate(new) if j != i)):
            new[i] = eqn.invars[0]
    return new


def _same_type(a, b):
    # weak_type too: dropping a strong cast of a weak value would change later promotions
    return (tuple(a.aval.shape) == tuple(b.aval.shape) and a.aval.dtype == b.aval.dtype
            and a.aval.weak_type == b.aval.weak_type)


def _rewrite(eqn, producers):
    name = eqn.primitive.name
    out = eqn.outvars[0] if eqn.outvars else None
    ins = eqn.invars
    cand = None
    real = out is not None and out.aval.dtype.kind != "c"
    # For complex values x * (1+0j) is not x when a part is inf/nan ((nan+1j)*(1+0j) is nan+nanj)
    if name == "multiply" and real:
        if _lit_equals(ins[1], 1):
            cand = ins[0]
        elif _lit_equals(ins[0], 1):
            cand = ins[1]
    elif name == "divide" and real and _lit_equals(ins[1], 1):
        cand = ins[0]
    elif name == "subtract" and _lit_equals(ins[1], 0, negzero=False):
        cand = ins[0]
    elif name == "add":
        is_int = out is not None and out.aval.dtype.kind in "iu"
        for x, c in ((ins[0], ins[1]), (ins[1], ins[0])):
            if _lit_equals(c, 0, negzero=None if is_int else True) or (
                    _lit_equals(c, 0, negzero=False) and _no_negative_zero(x, producers)):
                cand = x
                break
    elif name in ("logical_and", "logical_or") and out is not None and \
            out.aval.dtype == np.bool_:
        # x & True = x, x | False = x (the absorbing constants are tracked through producers)
        unit = name == "logical_and"
        for x, c in ((ins[0], ins[1]), (ins[1], ins[0])):
            if _bool_const(c, producers) is unit:
                cand = x
                break
    elif name == "negative":
        prev = producers.get(ins[0])
        if prev is not None and prev.primitive.name == "negative":
            cand = prev.invars[0]
    elif name in ("convert_element_type", "reshape", "broadcast_in_dim", "squeeze"):
        cand = ins[0]
    elif name == "transpose":
        perm = eqn.params.get("permutation")
        if perm is not None and tuple(perm) == tuple(range(len(perm))):
            cand = ins[0]
    if cand is None or isinstance(cand, Literal) or out is None:
        return None
    return cand if _same_type(cand, out) else None


def _outer(eqn, outer, uses, eqns):
    """Equations replacing a dot_general outer product, or a transpose of one whose result has
    no other use (the operands are laid out transposed instead, and the first rewrite is dropped
    from ``eqns``); None otherwise."""
    name = eqn.primitive.name
    if name == "dot_general":
        dot, perm, old = eqn, None, ()
    elif name == "transpose" and eqn.invars[0] in outer:
        dot, perm0, orig, old = outer[eqn.invars[0]]
        if uses.get(orig, 0) != 1:
            return None
        perm = tuple(eqn.params["permutation"])
        perm = perm if perm0 is None else tuple(perm0[p] for p in perm)
    else:
        return None
    new = outer_product_eqns(dot, perm)
    if new is None:
        return None
    if old:
        drop = {id(e) for e in old}
        eqns[:] = [e for e in eqns if id(e) not in drop]
    outer[new[-1].outvars[0]] = (dot, perm, eqn.outvars[0], new)
    return new


def simplify(prog: Program) -> Program:
    """``prog`` with exact algebraic identities applied (see module docstring)."""
    rename, producers, eqns = {}, {}, []
    uses, feeds_add = {}, set()
    for eqn in prog.eqns:
        for v in eqn.invars:
            if not isinstance(v, Literal):
                uses[v] = uses.get(v, 0) + 1
                if eqn.primitive.name == "add":
                    feeds_add.add(v)
    for v in prog.outvars:
        if not isinstance(v, Literal):
            uses[v] = uses.get(v, 0) + 1
    # result Var of a rewritten outer product -> (dot eqn, perm, original Var, its equations)
    outer = {}
    for eqn in prog.eqns:
        eqn = map_subprograms(eqn, simplify)
        invars = [v if isinstance(v, Literal) else rename.get(v, v) for v in eqn.invars]
        if eqn.primitive.family == "elementwise":
            invars = _scalar_operands(invars, eqn.outvars, producers)
        eqn = type(eqn)(eqn.primitive, invars, eqn.outvars, eqn.params)
        new = _outer(eqn, outer, uses, eqns)
        if new is None and eqn.primitive.name == "add":
            out = eqn.outvars[0]
            new = pad_sum_eqns(eqn, producers, uses, out in feeds_add and uses.get(out) == 1,
                               lambda v: _no_negative_zero(v, producers))
        if new is not None:
            eqns.extend(new)
            for e in new:
                producers.update((v, e) for v in e.outvars)
            rename[eqn.outvars[0]] = new[-1].outvars[0]
            continue
        if not eqn.primitive.multiple_results:
            repl = _rewrite(eqn, producers)
            if repl is not None:
                rename[eqn.outvars[0]] = repl
                continue
        for v in eqn.outvars:
            producers[v] = eqn
        eqns.append(eqn)
    outvars = [v if isinstance(v, Literal) else rename.get(v, v) for v in prog.outvars]
    return with_eqns(prog, eqns, outvars)
