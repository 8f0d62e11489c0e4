"""``einsum``: Einstein summation planned once per (subscripts, shapes) and lowered to
``dot_general`` plus shape ops (src/arrays/ops/linear.py), so it needs no rules of its own."""
from __future__ import annotations

import functools

import numpy as np

from ...core import dtypes
from ..array import Array, wrap
from ..convert import operand
from .elementwise_family import promote_operands
from .linear import _bind, _diagonal, _permute, _reshape

__all__ = ["einsum"]


# ---- einsum ------------------------------------------------------------------------------------
# einsum is planned once per (subscripts, shapes) and lowered to: diagonals for labels repeated
# within an operand, reshapes that drop size-1 dims broadcast against larger ones, sums (as
# dot_general with a ones vector: keeps einsum's dtype semantics, e.g. int8 stays int8) of labels
# that only one operand has, pairwise dot_generals in the order np.einsum_path picks from the
# SHAPES alone, and a final permute_dims. Labels are letters; ellipsis dims are ints 0..E-1.

def einsum(subscripts, /, *operands, optimize="greedy", precision=None,
           preferred_element_type=None):
    """Einstein summation (NumPy ``einsum``), lowered to pairwise ``dot_general`` contractions.

    Args:
        subscripts: e.g. ``"ij,jk->ik"``; implicit mode (no ``->``) outputs the labels that occur
            once, in alphabetical (ASCII) order, after the broadcast ``...`` dims. ``...`` stands
            for broadcast (right-aligned) dims. Repeated labels in one operand take a diagonal
            (``"ii->i"``); size-1 dims broadcast against larger ones, as in NumPy. The
            interleaved form ``einsum(x, [0, 1], y, [1, 2], [0, 2])`` is accepted too.
        *operands: arrays; dtypes promote (JAX rules).
        optimize: contraction order: "greedy" (default) / True, "optimal", False (operand
            order), or an ``np.einsum_path`` list. The order is chosen from shapes only.
        precision: accepted for JAX compatibility; ignored.
        preferred_element_type: cast operands to this dtype first (accumulation dtype).
    Returns:
        Array of the output labels' shape and the promoted dtype (integers wrap, as in NumPy).
    Raises:
        ValueError: malformed subscripts, operand count or ndim not matching the subscripts,
            inconsistent sizes for a label (naming it and the sizes).
    """
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved_subscripts(subscripts, operands)
    if not operands:
        raise ValueError("einsum: at least one operand is required")
    first = operands[0]
    if len(operands) == 1:
        ops = [operand(first, "einsum")]
    elif type(first) is Array and all(type(o) is Array and o._buf.dtype is first._buf.dtype
                                      and o._weak is first._weak for o in operands):
        ops = operands
    else:
        ops = promote_operands("einsum", operands)
    if preferred_element_type is not None:
        from .convert_element_type import convert_element_type
        pet = dtypes.canonicalize(preferred_element_type)
        ops = [convert_element_type(o, pet, False) for o in ops]
    shapes = tuple(tuple(o.shape) for o in ops)
    if isinstance(optimize, list):
        optimize = tuple(tuple(p) if isinstance(p, (list, tuple)) else p for p in optimize)
    steps = _einsum_plan(subscripts, shapes, optimize)
    return _run_einsum(steps, ops)


def _interleaved_subscripts(first, rest):
    args = (first,) + tuple(rest)
    out = None
    if len(args) % 2:
        args, out = args[:-1], args[-1]
    ops, subs = list(args[0::2]), list(args[1::2])

    def term(sub):
        if not isinstance(sub, (list, tuple)):
            raise TypeError(f"einsum: subscripts must be a string, or the interleaved form "
                            f"einsum(op0, sublist0, op1, sublist1, ..., [out]) with lists of "
                            f"ints; got a {type(sub).__name__} where a sublist belongs")
        parts = []
        for s in sub:
            if s is Ellipsis:
                parts.append("...")
            elif isinstance(s, (int, np.integer)) and 0 <= s < 52:
                parts.append(_LETTERS[int(s)])
            else:
                raise ValueError(f"einsum: sublist entries must be ints in 0..51 or Ellipsis, "
                                 f"got {s!r}")
        return "".join(parts)
    text = ",".join(term(s) for s in subs)
    if out is not None:
        text += "->" + term(out)
    return text, tuple(ops)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _split_term(op, term, where):
    """A term's labels: a list of letters with one ``None`` where ``...`` stands."""
    if "." in term:
        if term.count("...") != 1 or term.replace("...", "").count("."):
            raise ValueError(f"{op}: invalid ellipsis in subscripts '{term}' ({where}); use "
                             "'...' once")
        before, after = term.split("...")
        labels = list(before) + [None] + list(after)
    else:
        labels = list(term)
    for c in labels:
        if c is not None and c not in _LETTERS:
            raise ValueError(f"{op}: invalid subscript {c!r} in '{term}' ({where}); labels are "
                             "letters a-z, A-Z")
    return labels


def _parse_einsum(subscripts, shapes):
    s = subscripts.replace(" ", "")
    if s.count("->") > 1 or s.count("-") != s.count("->") or s.count(">") != s.count("->"):
        raise ValueError(f"einsum: malformed subscripts '{subscripts}' (use at most one '->')")
    lhs, out = s.split("->") if "->" in s else (s, None)
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: subscripts '{subscripts}' name {len(terms)} operand(s) but "
                         f"{len(shapes)} were given")
    raw = [_split_term("einsum", t, f"operand {i}") for i, t in enumerate(terms)]
    ell = 0
    for i, (labels, shape) in enumerate(zip(raw, shapes)):
        named = len(labels) - (None in labels)
        if (None in labels and named > len(shape)) or (None not in labels
                                                       and named != len(shape)):
            raise ValueError(f"einsum: operand {i} has shape {shape} (ndim {len(shape)}) but "
                             f"its subscripts '{terms[i]}' name {named} dims")
        if None in labels:
            ell = max(ell, len(shape) - named)
    ins = []
    for labels, shape in zip(raw, shapes):
        if None in labels:
            e = len(shape) - (len(labels) - 1)
            p = labels.index(None)
            labels = labels[:p] + list(range(ell - e, ell)) + labels[p + 1:]
        ins.append(labels)
    if out is None:
        counts = {}
        for labels in ins:
            for c in labels:
                if isinstance(c, str):
                    counts[c] = counts.get(c, 0) + 1
        outs = list(range(ell)) + sorted(c for c, n in counts.items() if n == 1)
    else:
        o = _split_term("einsum", out, "output")
        if None in o:
            p = o.index(None)
            outs = o[:p] + list(range(ell)) + o[p + 1:]
        else:
            if ell:
                raise ValueError(f"einsum: the operands of '{subscripts}' have '...' dims but the "
                                 "output names no '...'")
            outs = o
        seen = set()
        for c in outs:
            if c in seen:
                raise ValueError(f"einsum: output subscript {c!r} appears more than once in "
                                 f"'{subscripts}'")
            seen.add(c)
            if isinstance(c, str) and not any(c in labels for labels in ins):
                raise ValueError(f"einsum: output subscript {c!r} does not appear in the inputs "
                                 f"of '{subscripts}'")
    return ins, outs


def _label_name(c):
    return repr(c) if isinstance(c, str) else f"'...' dim {c}"


@functools.lru_cache(maxsize=1024)
def _einsum_plan(subscripts, shapes, optimize):
    ins, outs = _parse_einsum(subscripts, shapes)
    steps = []
    shapes = [list(s) for s in shapes]
    # 1. Diagonals for labels repeated within one operand (the diagonal goes last, as NumPy's).
    for i, labels in enumerate(ins):
        while len(set(labels)) != len(labels):
            c = next(c for c in labels if labels.count(c) > 1)
            p = labels.index(c)
            q = labels.index(c, p + 1)
            if shapes[i][p] != shapes[i][q]:
                raise ValueError(f"einsum: operand {i} repeats label {_label_name(c)} over dims "
                                 f"of sizes {shapes[i][p]} and {shapes[i][q]} (shape "
                                 f"{tuple(shapes[i])})")
            steps.append(("diag", i, p, q))
            n = shapes[i][p]
            labels[:] = [x for k, x in enumerate(labels) if k not in (p, q)] + [c]
            shapes[i] = [x for k, x in enumerate(shapes[i]) if k not in (p, q)] + [n]
    # 2. One size per label; size-1 dims broadcast.
    size = {}
    for i, (labels, shape) in enumerate(zip(ins, shapes)):
        for c, d in zip(labels, shape):
            prev = size.get(c, 1)
            if d != 1 and prev != 1 and d != prev:
                raise ValueError(f"einsum: label {_label_name(c)} has inconsistent sizes {prev} "
                                 f"and {d} (operand {i} has shape {tuple(shape)}) in "
                                 f"'{subscripts}'")
            if d != 1:
                size[c] = d
            else:
                size.setdefault(c, 1)
    # 3. Drop size-1 dims that broadcast against a larger size elsewhere.
    for i, (labels, shape) in enumerate(zip(ins, shapes)):
        keep = [k for k, (c, d) in enumerate(zip(labels, shape)) if not (d == 1 and size[c] != 1)]
        if len(keep) != len(labels):
            labels[:] = [labels[k] for k in keep]
            shapes[i] = [shape[k] for k in keep]
            steps.append(("reshape", i, tuple(shapes[i])))
    # 4. Sum labels that no other operand and not the output has.
    out_set = set(outs)
    for i, labels in enumerate(ins):
        lone = [k for k, c in enumerate(labels) if c not in out_set
                and not any(c in other for j, other in enumerate(ins) if j != i)]
        if lone:
            steps.append(("sum", i, tuple(lone), tuple(shapes[i][k] for k in lone)))
            labels[:] = [c for k, c in enumerate(labels) if k not in lone]
            shapes[i] = [d for k, d in enumerate(shapes[i]) if k not in lone]
    # 5. Pairwise contractions in the order einsum_path picks from the shapes.
    for pos in _einsum_path(ins, shapes, outs, optimize):
        pos = sorted(pos)
        while len(pos) >= 2:
            i, j = pos[0], pos[1]
            needed = set(outs)
            for k, labels in enumerate(ins):
                if k not in (i, j):
                    needed.update(labels)
            lx, ly = ins[i], ins[j]
            batch = [c for c in lx if c in ly and c in needed]
            contract = [c for c in lx if c in ly and c not in needed]
            dn = ((tuple(lx.index(c) for c in contract), tuple(ly.index(c) for c in contract)),
                  (tuple(lx.index(c) for c in batch), tuple(ly.index(c) for c in batch)))
            res = batch + [c for c in lx if c not in ly] + [c for c in ly if c not in lx]
            steps.append(("dot", i, j, dn))
            for k in (j, i):
                del ins[k]
                del shapes[k]
            ins.append(res)
            shapes.append([size[c] for c in res])
            last = len(ins) - 1
            pos = sorted([last] + [p - (p > i) - (p > j) for p in pos[2:]])
    # 6. The output order.
    (labels,) = ins
    if labels != outs:
        steps.append(("permute", 0, tuple(labels.index(c) for c in outs)))
    return tuple(steps)


def _einsum_path(ins, shapes, outs, optimize):
    n = len(ins)
    if n < 2:
        return []
    if optimize is False or n == 2:
        return [(0, 1)] * (n - 1)
    if isinstance(optimize, tuple):
        return [p for p in optimize[1:]] if optimize and optimize[0] == "einsum_path" else \
            list(optimize)
    mode = "greedy" if optimize is True else optimize
    names = [c for c in _LETTERS if not any(c in labels for labels in ins)]
    letter = {}
    for labels in ins:
        for c in labels:
            if c not in letter:
                letter[c] = c if isinstance(c, str) else names.pop()
    text = (",".join("".join(letter[c] for c in labels) for labels in ins) + "->"
            + "".join(letter[c] for c in outs))
    # Zero-stride stand-ins: einsum_path reads shapes only, never the (absent) data.
    dummies = [np.broadcast_to(np.empty((), np.float32), tuple(s)) for s in shapes]
    path, _ = np.einsum_path(text, *dummies, optimize=mode)
    return [tuple(p) for p in path[1:]]


def _run_einsum(steps, ops):
    ops = list(ops)
    for step in steps:
        kind, i = step[0], step[1]
        if kind == "dot":
            j, dn = step[2], step[3]
            res = _bind(ops[i], ops[j], dn)
            for k in (j, i) if j > i else (i, j):
                del ops[k]
            ops.append(res)
        elif kind == "diag":
            ops[i] = _diagonal(ops[i], step[2], step[3])
        elif kind == "reshape":
            ops[i] = _reshape(ops[i], step[2])
        elif kind == "sum":
            x = ops[i]
            axes, sizes = step[2], step[3]
            ones = wrap(np.ones(sizes, x.dtype), x.weak_type)
            ops[i] = _bind(x, ones, ((axes, tuple(range(len(axes)))), ((), ())))
        else:  # permute
            ops[i] = _permute(ops[i], step[2])
    return ops[0]
