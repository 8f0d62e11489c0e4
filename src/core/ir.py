"""The shared trace representation: Program, Equation, Var, Literal; a printer and a checker.

Every transformation that stages code (make_ir, control flow, compile) produces a ``Program``;
every backend consumes one. A Program is in SSA form: each Var is assigned exactly once.

Printed form (like a jaxpr)::

    { lambda c0:f32[3] ; a:f32[3] b:f32[] .
        c:f32[3] = mul a b
        d:f32[3] = add c c0
      in (d) }
"""
from __future__ import annotations

import itertools

import numpy as np

from .avals import ShapedArray


class Var:
    """A typed SSA variable. ``aval`` is its ShapedArray; identity is the object itself."""

    __slots__ = ("aval", "count")
    _counter = itertools.count()

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.count = next(Var._counter)

    def __repr__(self):
        return f"Var({self.count}:{self.aval.str_short()})"


class Literal:
    """A constant scalar operand embedded in the Program (``val`` is a NumPy scalar / 0-d array)."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.val})"


class Equation:
    """``outvars = primitive(*invars, **params)``; invars are Vars or Literals."""

    __slots__ = ("primitive", "invars", "outvars", "params")

    def __init__(self, primitive, invars, outvars, params):
        self.primitive = primitive
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.params = dict(params)

    def __repr__(self):
        return f"Equation({self.primitive.name}, {len(self.invars)} in, {len(self.outvars)} out)"


class Program:
    """A staged function: ``constvars`` (closed-over arrays, values in ``consts``), ``invars``,
    a list of Equations in order, and ``outvars`` (Vars or Literals)."""

    __slots__ = ("constvars", "consts", "invars", "eqns", "outvars", "effects")

    def __init__(self, constvars, consts, invars, eqns, outvars, effects=()):
        self.constvars = list(constvars)
        self.consts = list(consts)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)
        self.effects = tuple(effects)

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    def __str__(self):
        return pretty_print(self)

    def __repr__(self):
        return pretty_print(self)

    def _repr_pretty_(self, p, cycle):
        p.text(pretty_print(self))


def subprogram_params(params: dict):
    """``(key, programs)`` for each entry of an equation's ``params`` holding Programs (a body,
    or a tuple of branches), in order."""
    for k, v in params.items():
        if isinstance(v, Program):
            yield k, [v]
        elif isinstance(v, tuple) and v and all(isinstance(p, Program) for p in v):
            yield k, list(v)


def subprograms(params: dict):
    """The Programs held in an equation's ``params`` (bodies and branches of higher-order
    primitives), in order."""
    for _, progs in subprogram_params(params):
        yield from progs


def is_effectful(eqn) -> bool:
    """True when running ``eqn`` does something besides computing its outputs (a collective, a
    host callback), itself or in a body / branch it holds: passes must then never drop, merge,
    fold or reorder it."""
    if eqn.primitive.meta.get("effectful"):
        return True
    return any(is_effectful(e) for prog in subprograms(eqn.params) for e in prog.eqns)


# ---- printer -----------------------------------------------------------------------------------

class _Namer:
    def __init__(self):
        self.names = {}
        self.gen = self._gen()

    @staticmethod
    def _gen():
        letters = "abcdefghijklmnopqrstuvwxyz"
        for n in itertools.count(1):
            for combo in itertools.product(letters, repeat=n):
                yield "".join(combo)

    def __call__(self, v):
        if isinstance(v, Literal):
            return _literal_str(v.val)
        if v not in self.names:
            self.names[v] = next(self.gen)
        return self.names[v]


def _literal_str(val):
    arr = np.asarray(val)
    if arr.ndim == 0:
        return repr(arr.item())
    return f"<{arr.dtype}{list(arr.shape)}>"


def _param_str(value, namer, indent):
    if isinstance(value, Program):
        return "\n" + pretty_print(value, indent + 4, namer)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Program) for v in value):
        return "(" + ",".join("\n" + pretty_print(v, indent + 4, namer) for v in value) + ")"
    if isinstance(value, np.dtype):
        return str(value)
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return repr(value)


def pretty_print(prog: Program, indent: int = 0, namer: _Namer | None = None) -> str:
    """Readable multi-line text for a Program; sub-Programs in params print as nested blocks."""
    namer = namer or _Namer()
    pad = " " * indent

    def decl(v):
        return f"{namer(v)}:{v.aval.str_short()}"

    consts = " ".join(decl(v) for v in prog.constvars)
    ins = " ".join(decl(v) for v in prog.invars)
    lines = [f"{pad}{{ lambda {consts} ; {ins} ."]
    for eqn in prog.eqns:
        outs = " ".join(decl(v) for v in eqn.outvars)
        args = " ".join(namer(v) for v in eqn.invars)
        params = ""
        if eqn.params:
            items = [f"{k}={_param_str(v, namer, indent + 4)}" for k, v in sorted(eqn.params.items())]
            params = "[" + " ".join(items) + "]"
        lines.append(f"{pad}    {outs} = {eqn.primitive.name}{params} {args}".rstrip())
    outs = " ".join(namer(v) for v in prog.outvars)
    lines.append(f"{pad}  in ({outs}) }}")
    return "\n".join(lines)


# ---- checker -----------------------------------------------------------------------------------

class IRError(ValueError):
    """A Program violates an invariant (use before definition, double assignment, type mismatch)."""


def check_program(prog: Program) -> None:
    """Checks SSA and types: each Var defined once before use; eqn outputs match abstract eval.

    Raises:
        IRError: naming the equation and the violated invariant.
    """
    defined = set()

    def define(v, where):
        if v in defined:
            raise IRError(f"{where}: variable {v} assigned twice")
        defined.add(v)

    for v in prog.constvars:
        define(v, "constvars")
    for v in prog.invars:
        define(v, "invars")
    for i, eqn in enumerate(prog.eqns):
        for v in eqn.invars:
            if isinstance(v, Var) and v not in defined:
                raise IRError(f"equation {i} ({eqn.primitive.name}): {v} used before definition")
        if eqn.primitive.abstract_eval is not None:
            out = eqn.primitive.abstract_eval(*[v.aval for v in eqn.invars], **eqn.params)
            out = out if eqn.primitive.multiple_results else [out]
            got = [v.aval for v in eqn.outvars]
            if [(a.shape, a.dtype) for a in out] != [(a.shape, a.dtype) for a in got]:
                raise IRError(f"equation {i} ({eqn.primitive.name}): outputs {got} do not match "
                              f"abstract eval {list(out)}")
        for v in eqn.outvars:
            define(v, f"equation {i} ({eqn.primitive.name})")
    for v in prog.outvars:
        if isinstance(v, Var) and v not in defined:
            raise IRError(f"output {v} is never defined")


# ---- interpreter -------------------------------------------------------------------------------

def eval_program(prog: Program, consts, *args, apply=None):
    """Runs ``prog`` by binding each equation's primitive under the current trace.

    Because it binds, evaluating a Program inside another transformation (jvp, vmap, staging)
    applies that transformation to it. Returns the list of outputs. ``apply(eqn, inputs) ->
    outputs list``, when given, evaluates the equations whose primitive has no rules of its own
    (the call records of src/transforms/record.py); the others still bind.
    """
    from .trace import EvalTrace
    env = {}

    def read(v):
        if isinstance(v, Literal):
            return EvalTrace.wrap(v.val, v.aval.weak_type)
        return env[v]

    for v, c in zip(prog.constvars, consts):
        env[v] = c
    if len(args) != len(prog.invars):
        raise TypeError(f"eval_program: expected {len(prog.invars)} arguments, got {len(args)}")
    for v, a in zip(prog.invars, args):
        env[v] = a
    for eqn in prog.eqns:
        if apply is not None and eqn.primitive.meta.get("applied"):
            outs = apply(eqn, [read(v) for v in eqn.invars])
        else:
            outs = eqn.primitive.bind(*[read(v) for v in eqn.invars], **eqn.params)
            if not eqn.primitive.multiple_results:
                outs = [outs]
        for v, o in zip(eqn.outvars, outs):
            env[v] = o
    return [read(v) for v in prog.outvars]


# ---- inlining --------------------------------------------------------------------------------

def inline_calls(prog: Program, inline, key="program", into_bodies=False) -> Program:
    """Replaces each equation for which ``inline(eqn)`` holds by the equations of the Program in
    its param ``key`` (whose invars take the equation's operands), recursively. With
    ``into_bodies`` the bodies of other higher-order equations (control flow) are rewritten too.
    Constants of inlined Programs become constants of the result."""
    if not _has_call(prog, inline, into_bodies):
        return prog
    rename = {}
    constvars, consts = list(prog.constvars), list(prog.consts)
    eqns = []

    def r(v):
        return v if isinstance(v, Literal) else rename.get(v, v)

    for eqn in prog.eqns:
        if not inline(eqn):
            params = eqn.params
            if into_bodies and any(True for _ in subprograms(params)):
                params = dict(params)
                for k, progs in subprogram_params(eqn.params):
                    new = [inline_calls(p, inline, key, True) for p in progs]
                    params[k] = new[0] if isinstance(eqn.params[k], Program) else tuple(new)
            eqns.append(Equation(eqn.primitive, [r(v) for v in eqn.invars], eqn.outvars, params))
            continue
        sub = inline_calls(eqn.params[key], inline, key, into_bodies)
        env = {}
        for v, c in zip(sub.constvars, sub.consts):
            nv = Var(v.aval)
            constvars.append(nv)
            consts.append(c)
            env[v] = nv
        for v, a in zip(sub.invars, eqn.invars):
            env[v] = r(a)
        for se in sub.eqns:
            outs = [Var(v.aval) for v in se.outvars]
            env.update(zip(se.outvars, outs))
            eqns.append(Equation(se.primitive, [v if isinstance(v, Literal) else env[v]
                                                for v in se.invars], outs, se.params))
        for old, new in zip(eqn.outvars, sub.outvars):
            rename[old] = new if isinstance(new, Literal) else env[new]
    outvars = [r(v) for v in prog.outvars]
    return Program(constvars, consts, prog.invars, eqns, outvars, prog.effects)


def _has_call(prog, inline, into_bodies):
    for eqn in prog.eqns:
        if inline(eqn):
            return True
        if into_bodies and any(_has_call(p, inline, True) for p in subprograms(eqn.params)):
            return True
    return False


def is_custom_call(eqn) -> bool:
    """True for a staged custom_jvp / custom_vjp call (src/transforms/custom.py): kept in a
    Program so that transformations applied to it later use the custom rule; backends, the
    partitioner and export run its ``call`` Program instead."""
    return bool(eqn.primitive.meta.get("custom_call"))


def inline_custom_calls(prog: Program) -> Program:
    """``prog`` with every staged custom call (bodies included) replaced by its function."""
    return inline_calls(prog, is_custom_call, key="call", into_bodies=True)
