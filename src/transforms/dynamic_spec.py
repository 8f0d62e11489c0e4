"""Dynamic shapes declared once: one compiled artifact for every size in a range.

Declare shape variables, say which argument dims they are, and hand the spec to ``compile``
(or ``export``), at the call site or with the decorator::

    batch = ShapeVar("batch", min=2, max=128)
    spec = ShapesSpec({"x": {0: batch}, "y": {0: batch * 2}},
                      assumptions=[batch % 2 == 0])

    @compile
    @dynamic_spec(spec)          # or: compile(f, dynamic_shapes=spec); not both (ValueError)
    def f(x, y): ...

Semantics:

* ``ShapeVar(name, min=1, max=None)`` is a positive integer variable with a range; arithmetic
  with ints and other vars (``batch * 2``, ``batch + 1``, ``n // 2``, ``n % 4``) gives derived
  dims; comparisons give assumptions (``batch % 2 == 0``, ``n >= m``).
* ``ShapesSpec(dims, assumptions=[...])``: ``dims`` maps argument *names* to ``{axis: dim}``
  (negative axes count from the end); for a pytree argument, give the same structure with a
  ``{axis: dim}`` dict (or None) per array leaf. Dims may be ints (checked, not symbolic).
* The signature key of a compiled function uses the symbolic shape for declared dims, so the
  function is staged ONCE, with ``ShapedArray`` avals whose shapes hold symbolic dims
  (``DimExpr``, core/symbolic.py), and runs for every size in range: at each call the sizes are
  read from the arguments (derived dims are solved for their variable), checked against the
  ranges and assumptions, and substituted into the Program's shape parameters by
  ``bind_shapes`` (cached per size; never a re-trace: ``compiled.num_compiles`` stays 1).
* A call that violates a range, a derived dim or an assumption raises ValueError naming the
  argument, the dim and the constraint.
* Python code that branches on a symbolic dim while tracing (``if x.shape[0] > 4:``) raises
  ``InconclusiveDimensionError`` (a TypeError) naming the expression and suggesting ``min=`` /
  ``max=`` / ``assumptions=``, unless the ranges or assumptions decide it (``batch >= 2`` with
  ``min=2`` is simply True). ``==`` is True only when provably equal (as in JAX).

Ops that support symbolic dims (staged once and checked against eager NumPy for several sizes
in tests/test_dynamic_shapes.py):

* elementwise ops with broadcasting (equal symbolic dims, or against size-1 dims), where, astype;
* reductions with any axes / keepdims: sum, prod, max, min, argmax, argmin, mean, var, std,
  median / quantile (the run-time count enters through ``dim_value``), cumsum, sort;
* matmul, dot, tensordot, einsum, outer (``dot_general``, also contracting a symbolic dim);
* reshape (with -1, or sizes that are products / quotients of symbolic dims the assumptions make
  exact), ravel, transpose / permute_dims / moveaxis / swapaxes, expand_dims, squeeze of
  size-1 dims, broadcast_to, flip, roll, pad, tile, repeat;
* concatenate / stack / split (the joined dim is a sum; split needs divisibility, e.g. from an
  assumption);
* basic indexing and slicing with static bounds (``x[1:]``, ``x[:-1]``, ``x[::2]``, ``x[:, 0]``,
  ``x[-1]``), integer-array indexing / take_along_axis with symbolic index shapes (embedding
  lookups with a dynamic batch);
* zeros / ones / full / zeros_like / arange with symbolic sizes; a dim used as a value
  (``s / x.shape[0]``, ``x * n``) stages a ``dim_value`` equation;
* grad, vmap, cond / switch, while_loop, fori_loop and scan (also over a symbolic leading axis)
  inside the function.

Anything that needs a concrete int raises InconclusiveDimensionError (a TypeError) or a
ValueError naming the dim, never a wrong result: ``int(d)``, ``range(d)``, NumPy on shapes,
eye / tri / triu of a symbolic size, a slice bound the ranges cannot place inside the dim
(``x[:5]`` for a dim in [2, 128]), a reshape or split whose divisibility is not implied, a
negative-step slice that may be empty, advanced indexing mixed with symbolic slices, and
broadcasting a symbolic dim against a constant other than 1.
"""
from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Mapping

import sympy

from .. import tree as tree_util
from ..core.avals import ShapedArray
from ..core.symbolic import (  # noqa: F401  (re-exported)
    DimCondition, DimExpr, DimVar, InconclusiveDimensionError, as_dim, as_relational, assuming,
    bind_shapes, program_is_symbolic,
)
from ..arrays.ops import dim_value as _dim_value  # noqa: F401  (registers the primitive)

__all__ = ["ShapeVar", "ShapesSpec", "dynamic_spec", "bind_shapes",
           "InconclusiveDimensionError"]

_log = logging.getLogger("starling.compile")
_SPEC_ATTR = "__starling_dynamic_shapes__"


class ShapeVar(DimExpr):
    """A named positive integer shape variable with the range ``min..max`` (max None: no bound).

    Arithmetic with ints and other ShapeVars gives derived dims (``batch * 2``); comparisons give
    assumptions for ``ShapesSpec`` (``batch % 2 == 0``). Two ShapeVars are different variables
    even if they share a name: reuse the same object for the same size.

    Raises:
        TypeError: a non-identifier name or non-int bounds. ValueError: ``min < 1`` or
            ``max < min``.
    """

    __slots__ = ()

    def __init__(self, name, min=1, max=None):  # noqa: A002  (the natural keyword names)
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"ShapeVar: name must be an identifier string, got {name!r}")
        for what, v in (("min", min), ("max", max)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise TypeError(f"ShapeVar {name}: {what} must be an int, got {v!r}")
        if min is None or min < 1:
            raise ValueError(f"ShapeVar {name}: min must be >= 1 (shape variables are positive), "
                             f"got {min}")
        if max is not None and max < min:
            raise ValueError(f"ShapeVar {name}: max {max} is smaller than min {min}")
        super().__init__(DimVar(name, min, max))

    @property
    def name(self) -> str:
        return self.expr.name

    @property
    def min(self) -> int:
        return self.expr.lo

    @property
    def max(self):
        return self.expr.hi

    def __repr__(self):
        hi = "" if self.max is None else f", max={self.max}"
        return f"ShapeVar({self.name!r}, min={self.min}{hi})"


def _is_dim_dict(v):
    return isinstance(v, Mapping) and all(isinstance(k, int) and not isinstance(k, bool)
                                          for k in v)


def _check_dim(where, d):
    if isinstance(d, DimExpr):
        return d
    if isinstance(d, int) and not isinstance(d, bool) and d >= 0:
        return d
    raise TypeError(f"ShapesSpec: {where} must be a ShapeVar, an expression of ShapeVars or a "
                    f"non-negative int, got {d!r}")


def _check_entry(where, v):
    """Validates one spec entry: a {axis: dim} dict, None, or a pytree of those."""
    if v is None:
        return
    if _is_dim_dict(v):
        for k, d in v.items():
            _check_dim(f"{where} dim {k}", d)
        return
    if isinstance(v, Mapping):
        for k, sub in v.items():
            _check_entry(f"{where}[{k!r}]", sub)
        return
    if isinstance(v, (list, tuple)):
        for i, sub in enumerate(v):
            _check_entry(f"{where}[{i}]", sub)
        return
    raise TypeError(f"ShapesSpec: {where} must be a dict {{axis: dim}} (or a pytree of them), "
                    f"got {v!r}")


class ShapesSpec:
    """Which argument dims are symbolic, plus assumptions relating the shape variables.

    Args:
        dims: ``{argument name: {axis: dim}}`` (or a pytree of such dicts for a pytree argument).
        assumptions: comparisons of shape variables that hold for every call, e.g.
            ``[batch % 2 == 0, n >= m]``. They decide comparisons while tracing and are checked
            at every call.
    Raises:
        TypeError: malformed entries. ValueError: an assumption that is always false or uses a
            variable that no declared dim mentions.
    """

    def __init__(self, dims, assumptions=()):
        if not isinstance(dims, Mapping) or not all(isinstance(k, str) for k in dims):
            raise TypeError(f"ShapesSpec: dims must be a dict keyed by argument names, got "
                            f"{dims!r}")
        for name, v in dims.items():
            _check_entry(f"argument {name!r}", v)
        self.dims = dict(dims)
        self.assumptions = []
        self.relationals = []
        for a in (assumptions or ()):
            rel = as_relational(a)
            if rel is True:
                continue
            self.assumptions.append(a)
            self.relationals.append(rel)
        known = self.variables
        for a, rel in zip(self.assumptions, self.relationals):
            missing = [s for s in rel.free_symbols if s not in known]
            if missing:
                raise ValueError(f"ShapesSpec: the assumption `{a}` uses "
                                 f"{', '.join(sorted(s.name for s in missing))}, which no "
                                 "declared dim mentions")

    @property
    def variables(self) -> frozenset:
        out = set()
        for d in _all_dims(self.dims):
            if isinstance(d, DimExpr):
                out |= d.free_vars
        return frozenset(out)

    def __repr__(self):
        extra = f", assumptions={[str(a) for a in self.assumptions]}" if self.assumptions else ""
        return f"ShapesSpec({self.dims!r}{extra})"


def _all_dims(v):
    if v is None:
        return
    if _is_dim_dict(v):
        yield from v.values()
    elif isinstance(v, Mapping):
        for sub in v.values():
            yield from _all_dims(sub)
    elif isinstance(v, (list, tuple)):
        for sub in v:
            yield from _all_dims(sub)


def dynamic_spec(spec):
    """Decorator attaching a ShapesSpec to a function; ``compile`` and ``export`` honour it
    without call-site arguments. Giving ``dynamic_shapes=`` as well is a ValueError.

    Works above or below ``@compile``.
    """
    if not isinstance(spec, ShapesSpec):
        raise TypeError(f"dynamic_spec: expected a ShapesSpec, got {type(spec).__name__}")

    def deco(fun):
        from .compile import Compiled
        if isinstance(fun, Compiled):
            if fun.dynamic_shapes is not None:
                raise ValueError(_BOTH.format(name=getattr(fun.fun, "__name__", "fun")))
            fun._set_dynamic_shapes(spec)
            return fun
        if getattr(fun, _SPEC_ATTR, None) is not None:
            raise ValueError(f"dynamic_spec: {getattr(fun, '__name__', fun)} already has a "
                             "dynamic_spec")
        try:
            setattr(fun, _SPEC_ATTR, spec)
            return fun
        except (AttributeError, TypeError):
            @functools.wraps(fun)
            def wrapped(*args, **kwargs):
                return fun(*args, **kwargs)
            setattr(wrapped, _SPEC_ATTR, spec)
            return wrapped
    return deco


_BOTH = ("dynamic shapes of {name} are given twice: by the @dynamic_spec decorator and by the "
         "dynamic_shapes= argument; give one of them")


def resolve_spec(fun, call_site):
    """The ShapesSpec for ``fun``: the decorator's or the call-site one (ValueError if both)."""
    decorated = getattr(fun, _SPEC_ATTR, None)
    if decorated is not None and call_site is not None:
        raise ValueError(_BOTH.format(name=getattr(fun, "__name__", "fun")))
    spec = decorated if decorated is not None else call_site
    if spec is not None and not isinstance(spec, ShapesSpec):
        raise TypeError(f"dynamic_shapes must be a ShapesSpec, got {type(spec).__name__}")
    return spec


# ---- matching a spec to the flat arguments -------------------------------------------------------

def _param_names(fun, op):
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return None
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)], sig


def check_spec_names(spec, fun, op):
    """ValueError when the spec names an argument that ``fun`` does not have."""
    got = _param_names(fun, op)
    if got is None:
        return
    _, sig = got
    if any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    for name in spec.dims:
        if name not in sig.parameters:
            raise ValueError(f"{op}: dynamic_shapes names argument {name!r}, which is not a "
                             f"parameter of {getattr(fun, '__name__', fun)}{sig}")


def _lookup(entry, subpath):
    """The {axis: dim} dict for the leaf at ``subpath`` inside an argument's spec entry."""
    for k in subpath:
        if entry is None or _is_dim_dict(entry):
            return entry  # a dim dict given for a whole subtree applies to each of its leaves
        try:
            entry = entry[k]
        except (KeyError, IndexError, TypeError):
            return None
    return entry


def leaf_specs(spec, fun, op, tree, arg_positions):
    """Per flat leaf of ``tree`` (a ``(args, kwargs)`` pair), ``(label, {axis: dim})`` or None.

    ``arg_positions[i]`` is the original position of the i-th positional entry of ``tree``.
    """
    names = _param_names(fun, op)
    pos_names = names[0] if names is not None else []
    paths, _, _ = tree_util.paths_leaves_treedef(tree)
    out = []
    seen = set()
    for path in paths:
        if path[0] == 0:
            pos = arg_positions[path[1]]
            name = pos_names[pos] if pos < len(pos_names) else None
            label = f"argument {name!r}" if name is not None else f"argument {pos}"
        else:
            name = path[1]
            label = f"argument {name!r}"
        sub = path[2:]
        label += tree_util.path_str(sub) if sub else ""
        entry = spec.dims.get(name) if name is not None else None
        if name is not None and name in spec.dims:
            seen.add(name)
        dims = _lookup(entry, sub) if entry is not None else None
        out.append((label, dict(dims) if dims else None))
    missing = [n for n in spec.dims if n not in seen]
    if missing:
        raise ValueError(f"{op}: dynamic_shapes names argument(s) {missing} that the call does "
                         "not pass as arrays")
    return out


def symbolic_dims(dims):
    """A leaf's ``{axis: dim}`` as a tuple of (axis, dim) with ShapeVars as plain DimExprs."""
    return tuple((ax, DimExpr(d.expr) if isinstance(d, ShapeVar) else d)
                 for ax, d in dims.items())


def substitute_dims(op, label, shape, dims):
    """``shape`` with the declared (axis, dim) pairs substituted (ValueError for a bad axis;
    ``op`` is the name for messages, or a Compiled whose name is formatted only then)."""
    out = list(shape)
    for ax, d in dims:
        if not -len(out) <= ax < len(out):
            op = op if isinstance(op, str) else f"compile({op._name()})"
            raise ValueError(f"{op}: dynamic_shapes declares dim {ax} of {label}, which has "
                             f"shape {tuple(shape)} (ndim {len(out)})")
        if type(d) is int and out[ax] != d:
            op = op if isinstance(op, str) else f"compile({op._name()})"
            raise ValueError(f"{op}: {label} dim {ax} has size {out[ax]}, but dynamic_shapes "
                             f"declares it {d}")
        out[ax] = d
    return tuple(out)


def symbolic_avals(op, avals, specs):
    """The avals with declared dims replaced by their symbolic dims (ValueError for bad axes or
    a mismatching int dim)."""
    out = []
    for a, (label, dims) in zip(avals, specs):
        if dims is None:
            out.append(a)
            continue
        shape = substitute_dims(op, label, a.shape, symbolic_dims(dims))
        out.append(ShapedArray(shape, a.dtype, a.weak_type))
    return out


# ---- binding concrete sizes ------------------------------------------------------------------

class ShapeEnv(dict):
    """DimVar -> int, with ``key`` (a hashable tuple of the sizes) for caches."""

    __slots__ = ("key",)


class ShapeBinder:
    """Reads the sizes of the symbolic dims of ``avals`` from concrete arguments, solves for the
    shape variables, checks ranges, derived dims and assumptions, and returns a ShapeEnv.

    Args:
        op: name for messages (e.g. "compile(f)").
        avals: flat symbolic input avals. labels: one label per aval ("argument 'x'").
        relationals / assumption_strs: the assumptions (sympy relationals, display strings).
    """

    def __init__(self, op, avals, labels, relationals=(), assumption_strs=None):
        self.op = op
        self.sites = []  # (leaf, axis, expr, label)
        for i, (a, label) in enumerate(zip(avals, labels)):
            for ax, d in enumerate(a.shape):
                if isinstance(d, DimExpr):
                    self.sites.append((i, ax, d.expr, label))
        self.relationals = list(relationals)
        self.assumption_strs = (list(assumption_strs) if assumption_strs is not None
                                else [str(r) for r in self.relationals])
        variables = set()
        for _, _, e, _ in self.sites:
            variables |= e.free_symbols
        self.variables = sorted(variables, key=lambda v: (v.name, v.dummy_index))
        self._cache = {}

    def __bool__(self):
        return bool(self.sites)

    def env_for(self, ops) -> ShapeEnv:
        sizes = tuple(ops[i].shape[ax] for i, ax, _, _ in self.sites)
        env = self._cache.get(sizes)
        if env is None:
            env = self._solve(sizes)
            if len(self._cache) < 4096:
                self._cache[sizes] = env
        return env

    def _where(self, k, sizes):
        i, ax, e, label = self.sites[k]
        return f"{label} dim {ax} (size {sizes[k]}, declared {e})"

    def _solve(self, sizes):
        env, origin = {}, {}
        pending = list(range(len(self.sites)))
        progress = True
        while pending and progress:
            progress = False
            for k in list(pending):
                e = self.sites[k][2]
                unknown = [v for v in e.free_symbols if v not in env]
                if not unknown:
                    pending.remove(k)
                    continue
                if len(unknown) > 1:
                    continue
                v = unknown[0]
                env[v] = self._solve_one(e, v, env, sizes[k], k, sizes)
                origin[v] = k
                pending.remove(k)
                progress = True
        if pending:
            k = pending[0]
            names = sorted(v.name for v in self.sites[k][2].free_symbols if v not in env)
            raise ValueError(f"{self.op}: cannot determine the shape variable(s) {names} from "
                             f"{self._where(k, sizes)}; declare each variable alone on some "
                             "argument dim")
        for v in self.variables:
            val = env[v]
            if val < v.lo or (v.hi is not None and val > v.hi):
                k = origin[v]
                got = (f"gives {v.name} = {val}" if self.sites[k][2] != v else "")
                raise ValueError(f"{self.op}: {self._where(k, sizes)} {got}".rstrip() +
                                 f" is outside the range of shape variable {v.name}: "
                                 f"{v.lo} <= {v.name} <= {'inf' if v.hi is None else v.hi}")
        senv = {v: sympy.Integer(x) for v, x in env.items()}
        for k, (i, ax, e, label) in enumerate(self.sites):
            val = e.xreplace(senv)
            if not (val.is_Integer and int(val) == sizes[k]):
                vals = ", ".join(f"{v.name} = {env[v]}" for v in sorted(
                    e.free_symbols, key=lambda s: s.name))
                raise ValueError(f"{self.op}: {label} dim {ax} has size {sizes[k]}, but it is "
                                 f"declared {e} = {val} ({vals})")
        for rel, text in zip(self.relationals, self.assumption_strs):
            ok = rel.xreplace(senv)
            if ok is not sympy.true and ok is not True:
                vs = sorted(rel.free_symbols, key=lambda s: s.name)
                k = origin[vs[0]]
                vals = ", ".join(f"{v.name} = {env[v]}" for v in vs)
                raise ValueError(f"{self.op}: {self._where(k, sizes)} violates the assumption "
                                 f"`{text}` ({vals})")
        out = ShapeEnv(env)
        out.key = tuple(env[v] for v in self.variables)
        return out

    def _solve_one(self, e, v, env, size, k, sizes):
        known = {u: sympy.Integer(x) for u, x in env.items()}
        e = e.xreplace(known) if known else e
        if e == v:
            return size
        slope = sympy.diff(e, v)
        if slope.is_Integer and slope != 0:
            c = e.xreplace({v: sympy.Integer(0)})
            if c.is_Integer:
                q, r = divmod(size - int(c), int(slope))
                if r:
                    raise ValueError(f"{self.op}: {self._where(k, sizes)}: no integer "
                                     f"{v.name} gives {e} = {size}")
                return q
        hi = v.hi if v.hi is not None else v.lo + 4096
        for cand in range(v.lo, min(hi, v.lo + 65536) + 1):
            val = e.xreplace({v: sympy.Integer(cand)})
            if val.is_Integer and int(val) == size:
                return cand
        raise ValueError(f"{self.op}: {self._where(k, sizes)}: no {v.name} in "
                         f"{v.range_str()} gives {e} = {size}")


# ---- executing a symbolic Program on a backend ---------------------------------------------------

class PerSizeExecutable:
    """For backends without symbolic-shape support: compiles ``bind_shapes(program, env)`` once
    per concrete size (a backend compile, never a re-trace), logging the fallback once."""

    _logged = set()

    def __init__(self, backend, program):
        self.backend = backend
        self.program = program
        self.source = None
        self._by_size = {}

    def __call__(self, consts, args, shape_env=None):
        key = shape_env.key if isinstance(shape_env, ShapeEnv) else None
        exe = self._by_size.get(key)
        if exe is None:
            if len(self._by_size) >= 64:
                self._by_size.clear()
            if self.backend.name not in PerSizeExecutable._logged:
                PerSizeExecutable._logged.add(self.backend.name)
                _log.warning("compile: backend %r has no symbolic-shape kernels; a function "
                             "with dynamic shapes is compiled once per distinct size "
                             "(staged once)", self.backend.name)
            exe = self.backend.compile(bind_shapes(self.program, shape_env or {}))
            self._by_size[key] = exe
        return exe(consts, args)


def compile_for_backend(backend, program):
    """An executable taking ``shape_env=``: the backend's own when it supports dynamic shapes
    (``backend.supports_dynamic_shapes``), else a PerSizeExecutable."""
    if getattr(backend, "supports_dynamic_shapes", False):
        return backend.compile(program)
    return PerSizeExecutable(backend, program)
