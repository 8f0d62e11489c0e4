"""``export``: a staged, optimised function as a portable artifact; ``deserialize`` reads it back.

::

    exp = starling.export(f, x_example, ShapedArray((batch, 3), "float32"),
                          dynamic_shapes=ShapesSpec({"x": {0: batch}}))
    blob = exp.serialize()                 # bytes: no pickle, versioned
    g = starling.deserialize(blob)         # in any process: g(x, y) runs the same Program
    starling.grad(lambda x: g(x, y).sum())(x)   # differentiable: grad re-derives from the IR

An ``Exported`` keeps the optimised Program, the input / output avals (symbolic dims allowed)
and pytree structures, and the dynamic-shape assumptions. Calling it checks the arguments
(structure, dtypes, ranks, constant dims, shape-variable ranges and assumptions) and evaluates
the Program by binding its primitives under the current trace (``eval_program``), so an
Exported runs eagerly, inside ``compile``, and under ``grad`` / ``vjp`` / ``jvp`` / ``vmap``:
derivatives are re-derived from the IR with each primitive's rules (no separate VJP artifact
is stored). No device is baked in: constants are plain host buffers placed on the default
device at call time, so one artifact runs on every process / rank of the same device kind.

Serialized format (little-endian)::

    b"STARLING-EXPORT\\0"           16-byte magic
    uint32 version                  FORMAT_VERSION
    uint64 header length            then the UTF-8 JSON header
    blobs                           raw bytes of every constant (dtype / shape in the header)
    32-byte SHA-256                 of everything before it (detects corruption)

The JSON header describes the Program: primitives by registry name; Vars as per-Program tables
of avals; symbolic dims and assumptions as expression trees over named shape variables (with
their ranges); params through a tagged encoder (ints, floats incl. nan / inf, bools, None,
strings, tuples, lists, dicts, dtypes, symbolic dims, avals, nested Programs, slices, pytree
structures made of tuples / lists / dicts / None, NumPy arrays and scalars). A param that is a
Python callable (custom_vjp's ``bwd``) or of any other type cannot be serialized: ``export``
raises TypeError naming the primitive and the param.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import math
import struct
import sys

import numpy as np
import sympy

from .. import tree as tree_util
from ..arrays.array import Array, wrap
from ..arrays.convert import operand
from ..core import dtypes
from ..core.avals import ShapedArray
from ..core.ir import Equation, Literal, Program, Var, eval_program
from ..core.primitive import Primitive
from ..core.symbolic import DimExpr, DimVar, as_relational, assuming, bind_shapes
from ..transforms import dynamic_spec as _dyn
from ..transforms.stage import aval_of, trace_to_program
from .pipeline import run_pipeline

__all__ = ["export", "deserialize", "Exported", "FORMAT_VERSION"]

MAGIC = b"STARLING-EXPORT\0"
FORMAT_VERSION = 1
_DTYPES = {dt.name: dt for dt in dtypes.ALL_DTYPES}
_DTYPES["float0"] = dtypes.float0


# Param types defined above lowering (meshes and shardings of src/collectives) register how they
# serialize: tag -> (type, encode(value, encode_param) -> json, decode(json, decode_param)).
PARAM_CODECS: dict = {}


def register_param_codec(tag, type_, encode, decode):
    """Lets the export format carry params of ``type_`` (``encode`` / ``decode`` receive the
    format's own param encoder / decoder for nested values)."""
    PARAM_CODECS[tag] = (type_, encode, decode)


# Installed by src/collectives: runs an Exported whose program needs a mesh (shard_maps,
# sharding constraints, sharded inputs); (exported, ops) -> flat outputs.
SHARDED_CALL = [None]


# ---- export -------------------------------------------------------------------------------------

def export(fun, *args_or_shape_specs, dynamic_shapes=None) -> "Exported":
    """Stages ``fun`` for arguments like ``args_or_shape_specs``, optimises it and returns an
    Exported.

    Args:
        fun: a pure function of positional pytrees of arrays (a ``compile``d function is
            exported through its Python function; use functools.partial for static values).
        args_or_shape_specs: example arrays / array-likes, or objects with ``shape`` and
            ``dtype`` (e.g. ShapedArray); shapes may hold ShapeVars directly.
        dynamic_shapes: a ShapesSpec (argument names -> symbolic dims). A function decorated
            with ``@dynamic_spec`` carries its own; giving both is a ValueError.
    Raises:
        ValueError: both decorator and call-site specs; a bad spec.
        TypeError: a param that cannot be serialized is only reported by ``serialize``.

    custom_jvp / custom_vjp rules are Python functions and are not exported: the artifact holds
    their primal computation, and derivatives of a deserialized function are that computation's.
    """
    from ..transforms.compile import Compiled
    spec_fun = fun
    if isinstance(fun, Compiled):
        if fun.static_argnums or fun.static_argnames:
            raise ValueError("export: the compiled function has static arguments; export a "
                             "functools.partial with their values bound instead")
        if fun.dynamic_shapes is not None and dynamic_shapes is not None:
            raise ValueError(_dyn._BOTH.format(name=getattr(fun.fun, "__name__", "fun")))
        dynamic_shapes = fun.dynamic_shapes if dynamic_shapes is None else dynamic_shapes
        fun = spec_fun = fun.fun
    spec = _dyn.resolve_spec(spec_fun, dynamic_shapes)
    name = getattr(fun, "__name__", "fun")
    op = f"export({name})"
    tree = (tuple(args_or_shape_specs), {})
    leaves, in_tree = tree_util.flatten(tree)
    avals = [_export_aval(x) for x in leaves]
    if spec is not None:
        _dyn.check_spec_names(spec, fun, op)
        specs = _dyn.leaf_specs(spec, fun, op, tree, list(range(len(args_or_shape_specs))))
        avals = _dyn.symbolic_avals(op, avals, specs)
        assumptions = list(spec.assumptions)
    else:
        assumptions = []
    labels = _labels(fun, tree)
    out_tree = []

    def flat_fun(*flat):
        a, k = tree_util.unflatten(in_tree, list(flat))
        out = fun(*a, **k)
        o_leaves, ot = tree_util.flatten(out)
        out_tree.append(ot)
        return [operand(o, "export") for o in o_leaves]

    with assuming(assumptions):
        prog = trace_to_program(flat_fun, avals)
        prog = run_pipeline(prog, label=name)
    rels = [as_relational(a) for a in assumptions]
    in_shardings = [getattr(x, "_sharding", None) for x in leaves]
    return Exported(name, prog, in_tree, out_tree[0], avals, labels, rels,
                    [str(a) for a in assumptions], in_shardings)


def _export_aval(x):
    if type(x) is Array or isinstance(x, np.ndarray) or not (hasattr(x, "shape")
                                                               and hasattr(x, "dtype")):
        return aval_of(x)
    # A shape spec (ShapedArray or any object with shape / dtype): its shape may hold ShapeVars.
    shape = tuple(DimExpr(d.expr) if isinstance(d, DimExpr) else d for d in x.shape)
    return ShapedArray(shape, dtypes.canonicalize(x.dtype), bool(getattr(x, "weak_type", False)))


def _labels(fun, tree):
    names = _dyn._param_names(fun, "export")
    pos_names = names[0] if names is not None else []
    paths, _, _ = tree_util.paths_leaves_treedef(tree)
    out = []
    for path in paths:
        pos = path[1]
        label = f"argument {pos_names[pos]!r}" if pos < len(pos_names) else f"argument {pos}"
        out.append(label + (tree_util.path_str(path[2:]) if path[2:] else ""))
    return out


# ---- the artifact -------------------------------------------------------------------------------

class Exported:
    """A staged, optimised function with its input/output avals and pytree structures.

    Call it like the original function (positional arguments). Attributes: ``fun_name``,
    ``program`` (the optimised Program), ``in_avals`` / ``out_avals`` (flat, may hold symbolic
    dims), ``in_tree`` / ``out_tree``, ``shape_vars``, ``assumptions`` (display strings).
    ``serialize()`` gives bytes for ``starling.deserialize``.
    """

    def __init__(self, fun_name, program, in_tree, out_tree, in_avals, in_labels,
                 relationals=(), assumption_strs=(), in_shardings=None):
        self.fun_name = fun_name
        # per input leaf: the layout it was exported with (a sharding over a mesh recorded by
        # axis names and sizes, not devices) or None
        self.in_shardings = list(in_shardings) if in_shardings else [None] * len(in_avals)
        self.program = program
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.in_avals = list(in_avals)
        self.out_avals = [v.aval for v in program.outvars]
        self.in_labels = list(in_labels)
        self.relationals = list(relationals)
        self.assumptions = list(assumption_strs)
        self._binder = _dyn.ShapeBinder(f"exported {fun_name}", self.in_avals, self.in_labels,
                                        self.relationals, self.assumptions)
        self._bound = {}

    @property
    def shape_vars(self):
        return list(self._binder.variables)

    def __call__(self, *args):
        leaves, tree = tree_util.flatten((args, {}))
        if tree != self.in_tree:
            raise TypeError(f"exported {self.fun_name}: expected arguments with structure "
                            f"{self.in_tree}, got {tree}")
        ops = [operand(x, f"exported {self.fun_name}") for x in leaves]
        for x, a, label in zip(ops, self.in_avals, self.in_labels):
            self._check_leaf(x, a, label)
        prog = self.program
        if self._binder and not all(type(d) is int for x in ops for d in x.shape):
            # Traced with symbolic shapes (inside a dynamic compile): our variables become the
            # caller's dim expressions.
            prog = bind_shapes(prog, self._symbolic_env(ops))
        elif self._binder:
            env = self._binder.env_for(ops)
            bound = self._bound.get(env.key)
            if bound is None:
                if len(self._bound) >= 256:  # many distinct sizes: keep memory bounded
                    self._bound.clear()
                bound = self._bound[env.key] = bind_shapes(prog, env)
            prog = bound
        hook = SHARDED_CALL[0]
        if hook is not None:
            outs = hook(self, prog, ops)
            if outs is not None:
                return tree_util.unflatten(self.out_tree, outs)
        outs = eval_program(prog, prog.consts, *ops)
        return tree_util.unflatten(self.out_tree, outs)

    def _symbolic_env(self, ops):
        """DimVar -> the caller's dim (int or DimExpr), read from the arg dims declared as a
        variable alone; every declared dim must then equal the caller's for all sizes."""
        import sympy

        from ..core.symbolic import DimExpr, decide

        def expr(d):
            return d.expr if isinstance(d, DimExpr) else sympy.Integer(d)

        env = {}
        for i, ax, e, label in self._binder.sites:
            if e.is_Symbol and e not in env:
                env[e] = ops[i].shape[ax]
        name = f"exported {self.fun_name}"
        senv = {v: expr(d) for v, d in env.items()}
        for i, ax, e, label in self._binder.sites:
            missing = sorted(v.name for v in e.free_symbols if v not in env)
            if missing:
                raise ValueError(f"{name}: with symbolic arguments, the shape variable(s) "
                                 f"{missing} must each be declared alone on some argument dim "
                                 f"({label} dim {ax} is declared {e})")
            got, want = expr(ops[i].shape[ax]), e.xreplace(senv)
            if decide("eq", got, want) is not True:
                raise ValueError(f"{name}: {label} dim {ax} is {got}, but it is declared {e} "
                                 f"= {want}, which is not equal for every size in range")
        return env

    def _check_leaf(self, x, a, label):
        name = f"exported {self.fun_name}"
        if x.dtype != a.dtype:
            raise TypeError(f"{name}: {label} must have dtype {a.dtype}, got {x.dtype}")
        if len(x.shape) != len(a.shape):
            raise ValueError(f"{name}: {label} must have shape {_shape_str(a.shape)} "
                             f"(ndim {len(a.shape)}), got {tuple(x.shape)}")
        for ax, (got, want) in enumerate(zip(x.shape, a.shape)):
            if type(want) is int and got != want:
                raise ValueError(f"{name}: {label} dim {ax} must be {want}, got {got} (shape "
                                 f"{tuple(x.shape)}, expected {_shape_str(a.shape)})")

    def as_text(self) -> str:
        return str(self.program)

    def __repr__(self):
        ins = ", ".join(a.str_short() for a in self.in_avals)
        outs = ", ".join(a.str_short() for a in self.out_avals)
        return f"Exported({self.fun_name}: ({ins}) -> ({outs}))"

    def serialize(self) -> bytes:
        """Bytes in the versioned Starling export format (see the module docstring).

        Raises:
            TypeError: a param that cannot be serialized (names the primitive and param).
        """
        enc = _Encoder()
        header = {
            "format": "starling-export", "version": FORMAT_VERSION,
            "fun_name": self.fun_name,
            "program": enc.program(self.program),
            "in_tree": enc.treedef(self.in_tree), "out_tree": enc.treedef(self.out_tree),
            "in_avals": [enc.aval(a) for a in self.in_avals],
            "in_labels": self.in_labels,
            "assumptions": [enc.expr(r) for r in self.relationals],
            "assumption_text": self.assumptions,
            "in_shardings": [enc.param(sh) for sh in self.in_shardings],
        }
        header["shape_vars"] = [{"name": n, "min": v.lo, "max": v.hi}
                                for v, n in enc.var_names.items()]
        header["blobs"] = enc.blob_meta
        head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
        body = b"".join([MAGIC, struct.pack("<I", FORMAT_VERSION), struct.pack("<Q", len(head)),
                         head] + enc.blobs)
        return body + hashlib.sha256(body).digest()


def _shape_str(shape):
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


# ---- encoding -----------------------------------------------------------------------------------

class _Leaf:
    pass


_LEAF = _Leaf()
_EXPR_OPS = {
    sympy.Add: "Add", sympy.Mul: "Mul", sympy.Pow: "Pow", sympy.floor: "floor",
    sympy.ceiling: "ceiling", sympy.Mod: "Mod", sympy.Max: "Max", sympy.Min: "Min",
    sympy.Eq: "Eq", sympy.Ne: "Ne", sympy.Ge: "Ge", sympy.Gt: "Gt", sympy.Le: "Le",
    sympy.Lt: "Lt",
}
_EXPR_BUILD = {
    "Add": lambda *a: sympy.Add(*a), "Mul": lambda *a: sympy.Mul(*a),
    "Pow": lambda a, b: sympy.Pow(a, b), "floor": sympy.floor, "ceiling": sympy.ceiling,
    "Mod": sympy.Mod, "Max": sympy.Max, "Min": sympy.Min,
    "Eq": lambda a, b: sympy.Eq(a, b, evaluate=False),
    "Ne": lambda a, b: sympy.Ne(a, b, evaluate=False),
    "Ge": lambda a, b: sympy.Ge(a, b, evaluate=False),
    "Gt": lambda a, b: sympy.Gt(a, b, evaluate=False),
    "Le": lambda a, b: sympy.Le(a, b, evaluate=False),
    "Lt": lambda a, b: sympy.Lt(a, b, evaluate=False),
}


def _le_bytes(buf):
    a = np.ascontiguousarray(buf)
    if sys.byteorder != "little" and a.dtype.itemsize > 1 and a.dtype.kind in "iufc":
        a = a.byteswap()
    return a.tobytes()


class _Encoder:
    def __init__(self):
        self.blobs = []
        self.blob_meta = []
        self.offset = 0
        self.var_names = {}   # DimVar -> unique name
        self._where = "program"

    # symbolic expressions ----------------------------------------------------------------
    def _var_name(self, v):
        name = self.var_names.get(v)
        if name is None:
            taken = set(self.var_names.values())
            name, k = v.name, 1
            while name in taken:
                name, k = f"{v.name}_{k}", k + 1
            self.var_names[v] = name
        return name

    def expr(self, e):
        if e.is_Integer:
            return int(e)
        if isinstance(e, DimVar):
            return {"var": self._var_name(e)}
        if e.is_Rational:
            return {"op": "Rational", "args": [int(e.p), int(e.q)]}
        name = _EXPR_OPS.get(type(e))
        if name is not None:
            return {"op": name, "args": [self.expr(a) for a in e.args]}
        raise TypeError(f"export: cannot serialize the symbolic expression {e} "
                        f"({type(e).__name__}) in {self._where}")

    def dim(self, d):
        return d if type(d) is int else {"sym": self.expr(d.expr), "text": str(d)}

    def aval(self, a):
        return {"shape": [self.dim(d) for d in a.shape], "dtype": _dtype_name(a.dtype),
                "weak": bool(a.weak_type)}

    # blobs ------------------------------------------------------------------------------
    def blob(self, buf):
        a = np.asarray(buf)
        raw = _le_bytes(a)
        self.blob_meta.append({"dtype": _dtype_name(a.dtype), "shape": list(a.shape),
                               "offset": self.offset, "nbytes": len(raw)})
        self.blobs.append(raw)
        self.offset += len(raw)
        return len(self.blob_meta) - 1

    # pytrees ----------------------------------------------------------------------------
    def treedef(self, td):
        n = td.num_leaves
        return self._structure(tree_util.unflatten(td, [_LEAF] * n))

    def _structure(self, s):
        if s is _LEAF:
            return "*"
        if s is None:
            return None
        t = type(s)
        if t is tuple:
            return {"tuple": [self._structure(x) for x in s]}
        if t is list:
            return {"list": [self._structure(x) for x in s]}
        if t is dict:
            return {"dict": [[self.param(k), self._structure(v)] for k, v in s.items()]}
        raise TypeError(f"export: cannot serialize a pytree node of type {t.__name__} in "
                        f"{self._where} (supported: tuple, list, dict, None)")

    # params -----------------------------------------------------------------------------
    def param(self, v):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, np.bool_):
            return bool(v)
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"t": "float", "v": repr(v)}
        if isinstance(v, tuple):
            return {"t": "tuple", "v": [self.param(x) for x in v]}
        if isinstance(v, list):
            return {"t": "list", "v": [self.param(x) for x in v]}
        if isinstance(v, dict):
            return {"t": "dict", "v": [[self.param(k), self.param(x)] for k, x in v.items()]}
        if isinstance(v, np.dtype):
            return {"t": "dtype", "v": _dtype_name(v)}
        if isinstance(v, DimExpr):
            return {"t": "dim", "v": self.expr(v.expr)}
        if isinstance(v, ShapedArray):
            return {"t": "aval", "v": self.aval(v)}
        if isinstance(v, Program):
            where = self._where
            out = {"t": "program", "v": self.program(v)}
            self._where = where
            return out
        if isinstance(v, tree_util.PyTreeSpec):
            return {"t": "treedef", "v": self.treedef(v)}
        if isinstance(v, slice):
            return {"t": "slice", "v": [self.param(v.start), self.param(v.stop),
                                        self.param(v.step)]}
        if isinstance(v, Primitive):
            return {"t": "primitive", "v": v.name}
        if type(v) is Array:
            return {"t": "array", "blob": self.blob(v._buf), "weak": bool(v._weak)}
        if isinstance(v, np.ndarray):
            return {"t": "ndarray", "blob": self.blob(v)}
        if isinstance(v, np.generic):
            return {"t": "npscalar", "dtype": _dtype_name(v.dtype), "hex": _le_bytes(v).hex()}
        for tag, (type_, encode, _) in PARAM_CODECS.items():
            if isinstance(v, type_):
                return {"t": tag, "v": encode(v, self.param)}
        if callable(v):
            raise TypeError(f"export: {self._where} has a Python callable "
                            f"({getattr(v, '__name__', type(v).__name__)}), which cannot be "
                            "serialized. Export a function that does not stage it (e.g. apply "
                            "custom_vjp / linearize outside the exported function).")
        raise TypeError(f"export: {self._where} has a value of type {type(v).__name__} "
                        f"({v!r:.60}), which the export format cannot serialize")

    # programs ---------------------------------------------------------------------------
    def program(self, prog):
        ids = {}
        table = []

        def define(v):
            ids[v] = len(table)
            table.append(self.aval(v.aval))
            return ids[v]

        def ref(v):
            if isinstance(v, Literal):
                val = np.asarray(v.val)
                return {"lit": _le_bytes(val).hex(), "dtype": _dtype_name(val.dtype),
                        "aval": self.aval(v.aval)}
            return ids[v]

        constvars = [define(v) for v in prog.constvars]
        consts = []
        for c in prog.consts:
            if type(c) is not Array:
                raise TypeError("export: a Program constant is not a concrete Array "
                                f"({type(c).__name__})")
            consts.append(self.blob(c._buf))
        invars = [define(v) for v in prog.invars]
        eqns = []
        for e in prog.eqns:
            ins = [ref(v) for v in e.invars]
            params = {}
            for k, p in e.params.items():
                self._where = f"primitive '{e.primitive.name}' (param {k!r})"
                params[k] = self.param(p)
            self._where = "program"
            outs = [define(v) for v in e.outvars]
            eqns.append({"p": e.primitive.name, "in": ins, "out": outs, "params": params})
        return {"vars": table, "constvars": constvars, "consts": consts, "invars": invars,
                "eqns": eqns, "outvars": [ref(v) for v in prog.outvars],
                "effects": self.param(tuple(prog.effects))}


def _dtype_name(dt):
    dt = np.dtype(dt)
    if dt == dtypes.float0:
        return "float0"
    if dt.name not in _DTYPES:
        raise TypeError(f"export: unsupported dtype {dt}")
    return dt.name


# ---- decoding -----------------------------------------------------------------------------------

class _Decoder:
    def __init__(self, header, data):
        self.data = data
        self.meta = header["blobs"]
        self.vars = {}
        for sv in header.get("shape_vars", []):
            self.vars[sv["name"]] = DimVar(sv["name"], sv["min"], sv["max"])

    def expr(self, j):
        if isinstance(j, int) and not isinstance(j, bool):
            return sympy.Integer(j)
        if isinstance(j, dict) and "var" in j:
            return self.vars[j["var"]]
        if isinstance(j, dict) and j.get("op") == "Rational":
            return sympy.Rational(*j["args"])
        if isinstance(j, dict) and j.get("op") in _EXPR_BUILD:
            return _EXPR_BUILD[j["op"]](*[self.expr(a) for a in j["args"]])
        raise ValueError(f"deserialize: bad symbolic expression {j!r:.80}")

    def dim(self, j):
        if isinstance(j, int):
            return j
        e = sympy.expand(self.expr(j["sym"]))
        return int(e) if e.is_Integer else DimExpr(e)

    def aval(self, j):
        return ShapedArray(tuple(self.dim(d) for d in j["shape"]), _dtype(j["dtype"]),
                           bool(j["weak"]))

    def blob(self, i):
        m = self.meta[i]
        dt = _dtype(m["dtype"])
        raw = self.data[m["offset"]:m["offset"] + m["nbytes"]]
        n = math.prod(m["shape"])
        if len(raw) != m["nbytes"] or n * dt.itemsize != m["nbytes"]:
            raise ValueError("deserialize: constant data is truncated or inconsistent")
        a = np.frombuffer(raw, dtype=dt).reshape(m["shape"])
        if sys.byteorder != "little" and dt.itemsize > 1 and dt.kind in "iufc":
            a = a.byteswap()
        return a.copy()

    def treedef(self, j):
        return tree_util.structure(self._structure(j), is_leaf=lambda x: x is _LEAF)

    def _structure(self, j):
        if j == "*":
            return _LEAF
        if j is None:
            return None
        if "tuple" in j:
            return tuple(self._structure(x) for x in j["tuple"])
        if "list" in j:
            return [self._structure(x) for x in j["list"]]
        if "dict" in j:
            return {self.param(k): self._structure(v) for k, v in j["dict"]}
        raise ValueError(f"deserialize: bad pytree structure {j!r:.80}")

    def param(self, j):
        if not isinstance(j, dict):
            return j
        t = j.get("t")
        v = j.get("v")
        if t == "float":
            return float(v)
        if t == "tuple":
            return tuple(self.param(x) for x in v)
        if t == "list":
            return [self.param(x) for x in v]
        if t == "dict":
            return {self.param(k): self.param(x) for k, x in v}
        if t == "dtype":
            return _dtype(v)
        if t == "dim":
            e = sympy.expand(self.expr(v))
            return int(e) if e.is_Integer else DimExpr(e)
        if t == "aval":
            return self.aval(v)
        if t == "program":
            return self.program(v)
        if t == "treedef":
            return self.treedef(v)
        if t == "slice":
            return slice(*[self.param(x) for x in v])
        if t == "primitive":
            return _primitive(v)
        if t == "array":
            return wrap(self.blob(j["blob"]), j["weak"])
        if t == "ndarray":
            return self.blob(j["blob"])
        if t == "npscalar":
            dt = _dtype(j["dtype"])
            return np.frombuffer(bytes.fromhex(j["hex"]), dtype=dt).reshape(())[()]
        if t in PARAM_CODECS:
            return PARAM_CODECS[t][2](v, self.param)
        raise ValueError(f"deserialize: unknown param tag {t!r}")

    def program(self, j):
        table = [Var(self.aval(a)) for a in j["vars"]]

        def ref(r):
            if isinstance(r, dict):
                dt = _dtype(r["dtype"])
                val = np.frombuffer(bytes.fromhex(r["lit"]), dtype=dt).reshape(()).copy()
                return Literal(val, self.aval(r["aval"]))
            return table[r]

        constvars = [table[i] for i in j["constvars"]]
        consts = []
        for i, b in enumerate(j["consts"]):
            consts.append(wrap(self.blob(b), constvars[i].aval.weak_type))
        invars = [table[i] for i in j["invars"]]
        eqns = []
        for e in j["eqns"]:
            prim = _primitive(e["p"])
            params = {k: self.param(p) for k, p in e["params"].items()}
            eqns.append(Equation(prim, [ref(r) for r in e["in"]], [table[i] for i in e["out"]],
                                 params))
        return Program(constvars, consts, invars, eqns, [ref(r) for r in j["outvars"]],
                       self.param(j.get("effects")) or ())


def _dtype(name):
    try:
        return _DTYPES[name]
    except (KeyError, TypeError):
        raise ValueError(f"deserialize: unknown dtype {name!r}") from None


_EXTRA_MODULES = ("starling.lowering.fused",)


def _primitive(name):
    prim = Primitive.registry.get(name)
    if prim is None:
        for mod in _EXTRA_MODULES:
            try:
                importlib.import_module(mod)
            except ImportError:
                pass
        prim = Primitive.registry.get(name)
    if prim is None:
        raise ValueError(f"deserialize: the artifact uses primitive {name!r}, which this "
                         "Starling does not define (import the module that declares it, or "
                         "use a matching Starling version)")
    return prim


def deserialize(data) -> Exported:
    """Reads bytes written by ``Exported.serialize()`` back into a callable Exported.

    Raises:
        ValueError: not a Starling export, an unsupported format version, corrupted data, or
            an unknown primitive / dtype.
    """
    data = bytes(data)
    if len(data) < len(MAGIC) + 12 + 32 or not data.startswith(MAGIC):
        raise ValueError("deserialize: the data is not a Starling export (bad magic)")
    (version,) = struct.unpack_from("<I", data, len(MAGIC))
    if version != FORMAT_VERSION:
        raise ValueError(f"deserialize: export format version {version} is not supported "
                         f"(this Starling reads version {FORMAT_VERSION})")
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("deserialize: the export data is corrupted (checksum mismatch)")
    (hlen,) = struct.unpack_from("<Q", data, len(MAGIC) + 4)
    start = len(MAGIC) + 12
    try:
        header = json.loads(body[start:start + hlen].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"deserialize: the export header is not valid JSON: {e}") from None
    if header.get("format") != "starling-export" or header.get("version") != FORMAT_VERSION:
        raise ValueError("deserialize: the export header does not match its format version")
    dec = _Decoder(header, body[start + hlen:])
    try:
        program = dec.program(header["program"])
        in_tree = dec.treedef(header["in_tree"])
        out_tree = dec.treedef(header["out_tree"])
        in_avals = [dec.aval(a) for a in header["in_avals"]]
        rels = [dec.expr(r) for r in header["assumptions"]]
        in_shardings = [dec.param(sh) for sh in header.get("in_shardings", [])] or None
    except (KeyError, IndexError, TypeError) as e:
        raise ValueError(f"deserialize: malformed export header ({type(e).__name__}: "
                         f"{e})") from None
    return Exported(header["fun_name"], program, in_tree, out_tree, in_avals,
                    header["in_labels"], rels, header.get("assumption_text", []), in_shardings)
