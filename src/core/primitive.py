"""Primitive: a named operation with one slot per rule; ``bind`` dispatches to the current trace.

Every rule of a primitive is registered in the family file that declares it (src/arrays/ops/).
A rule that is missing is an error naming the primitive and the rule, never a silent fallback.

Rule slots:
    impl(*buffers, **params)            NumPy reference implementation (the numpy_ref oracle).
    abstract_eval(*avals, **params)     output ShapedArray(s) from input avals.
    weak_type(*in_weak, **params)       eager weak-type of the output(s) (cheap; avoids abstract eval).
    jvp(primals, tangents, **params)    forward-mode rule (issue: transformations).
    transpose(cts, *args, **params)     for linear primitives.
    batch(args, dims, **params)         vmap rule.
    sharding(...)                       single-mesh-dim sharding strategy.
    scalar_formula                      for elementwise ops: a formula every code generator renders.
    eager(args, params)                 optional: runs the primitive on concrete Arrays itself,
                                        for primitives whose results are sharded arrays
                                        (shard_map, sharding_constraint); ``impl`` then serves
                                        backends that run per-device Programs.
"""
from __future__ import annotations

from . import trace as _trace

RULES = ("impl", "abstract_eval", "jvp", "transpose", "batch", "sharding")


class MissingRuleError(NotImplementedError):
    """Raised when a transformation needs a rule that a primitive does not define."""

    def __init__(self, prim, rule):
        super().__init__(f"primitive '{prim.name}' has no {rule} rule")
        self.primitive = prim
        self.rule = rule


def _weak_never(*in_weak, **params):
    return False


class Primitive:
    """A named operation. ``multiple_results`` says whether outputs come as a list.

    Attributes are rule slots (see module docstring); ``family`` names the op family file.
    """

    __slots__ = ("name", "multiple_results", "family", "impl", "abstract_eval", "weak_type",
                 "jvp", "transpose", "batch", "sharding", "scalar_formula", "is_linear",
                 "eager", "meta", "__weakref__")

    registry: dict[str, "Primitive"] = {}

    def __init__(self, name: str, *, multiple_results: bool = False, family: str = ""):
        if name in Primitive.registry:
            raise ValueError(f"primitive '{name}' is declared twice")
        self.name = name
        self.multiple_results = multiple_results
        self.family = family
        self.impl = None
        self.abstract_eval = None
        self.weak_type = _weak_never
        self.jvp = None
        self.transpose = None
        self.batch = None
        self.sharding = None
        self.scalar_formula = None
        self.eager = None
        self.is_linear = False
        self.meta = {}
        Primitive.registry[name] = self

    def bind(self, *args, **params):
        """Applies this primitive under the current trace (eval, jvp, vmap, staging, ...)."""
        return _trace.current_trace().process_primitive(self, args, params)

    def rule(self, slot: str):
        fn = getattr(self, slot)
        if fn is None:
            raise MissingRuleError(self, slot)
        return fn

    def __repr__(self):
        return self.name
