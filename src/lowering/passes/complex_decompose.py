"""Complex decomposition: complex elementwise arithmetic becomes real / imaginary float work.

Every complex value computed by a supported equation is represented by two real Vars (its real
and imaginary parts, of the matching float dtype); supported equations are rewritten on the parts:
``add``, ``subtract``, ``multiply``, ``divide`` (Smith's algorithm, with NumPy's branch for a zero
divisor), ``negative``, ``conj``, ``real``, ``imag``, ``abs`` (``hypot``), ``square``,
``reciprocal``, ``equal`` / ``not_equal``, ``isnan`` / ``isinf`` / ``isfinite``, ``where``,
``convert_element_type``, the view primitives, ``reduce_sum``; part by part ``rint``, ``round``
and ``nan_to_num``; and the elementary functions of complex_math.py (``exp``, ``exp2``,
``expm1``, ``log``, ``log2``, ``log10``, ``log1p``, ``sqrt``, ``sin``, ``cos``, ``tan``,
``sinh``, ``cosh``, ``tanh``, ``arcsin``, ``arccos``, ``arctan``, ``arcsinh``, ``arccosh``,
``arctanh``, ``sign``, ``pow``), which match the NumPy reference including special values.

``reduce_prod`` of complex values is kept whole (it runs through NumPy on the cpp backend): its
running complex product couples the two parts at every step, which the real reductions of the
fused kernels cannot express, and a polar rewrite (product of moduli, sum of angles) would
change its rounding and its special values.

Where a complex value enters (program inputs, constants, results of other equations such as a
complex ``dot_general``) it is split with ``real`` / ``imag`` (which a fused kernel reads in place,
as strided views of the interleaved buffer); where one is needed whole (program outputs, operands
of equations kept complex) the parts are joined with ``complex_pack``, which fused kernels write
interleaved. So a backend without complex arithmetic (the C++ kernels) handles complex programs.
"""
from __future__ import annotations

import numpy as np

from ...arrays.ops import rules as R
from ...arrays.ops.elementwise_family import broadcast_shapes
from ...core import dtypes
from ...core.avals import ShapedArray
from ...core.ir import Equation, Literal, Program, Var
from ...core.primitive import Primitive
from . import complex_math as CM
from .util import map_subprograms

# ---- complex_pack: (re, im) -> re + 1j * im ------------------------------------------------------

complex_pack_p = Primitive("complex_pack", family="lowering")


def _pack_impl(re, im):
    re, im = np.asarray(re), np.asarray(im)
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), dtypes.complex_dtype(re.dtype))
    out.real = re
    out.imag = im
    return out


def _pack_abstract(re, im):
    shape = broadcast_shapes("complex_pack", re.shape, im.shape)
    return ShapedArray(shape, dtypes.complex_dtype(re.dtype), re.weak_type and im.weak_type)


def _pack_transpose(ct, re, im):
    from ...core.ad_util import Zero, is_undefined
    snp = R.snp()
    out = []
    for x, part in ((re, snp.real), (im, snp.imag)):
        if not is_undefined(x):
            out.append(None)
        elif type(ct) is Zero:
            out.append(Zero(x.aval))
        else:
            out.append(R.unbroadcast(part(ct), x.aval))
    return out


complex_pack_p.impl = _pack_impl
complex_pack_p.abstract_eval = _pack_abstract
complex_pack_p.weak_type = lambda a, b: a and b
R.deflinear(complex_pack_p, _pack_transpose)
R.batch_elementwise(complex_pack_p)
complex_pack_p.meta.update(nin=2)

# ---- the pass ------------------------------------------------------------------------------------

_VIEWS = ("broadcast_in_dim", "reshape", "squeeze", "transpose")


class _Builder:
    def __init__(self):
        self.eqns = []

    def op(self, name, *ins, **params):
        prim = Primitive.registry[name]
        aval = prim.abstract_eval(*[v.aval for v in ins], **params)
        out = Var(aval.strip_weak_type())
        self.eqns.append(Equation(prim, list(ins), [out], params))
        return out

    def lit(self, value, dt):
        dt = np.dtype(dt)
        return Literal(dt.type(value), ShapedArray((), dt, False))


def _is_complex(v):
    return np.dtype(v.aval.dtype).kind == "c"


def complex_decompose(prog: Program) -> Program:
    """Rewrites the supported complex equations of ``prog`` (and its sub-Programs) on real
    and imaginary parts."""
    if not _has_complex(prog):
        return prog
    return _Decomposer(prog).run()


def _has_complex(prog):
    for eqn in prog.eqns:
        if any(_is_complex(v) for v in list(eqn.invars) + list(eqn.outvars)):
            return True
        for p in eqn.params.values():
            if isinstance(p, Program) or (isinstance(p, tuple) and p
                                          and isinstance(p[0], Program)):
                return True
    return False


class _Decomposer:
    def __init__(self, prog):
        self.prog = prog
        self.b = _Builder()
        self.parts = {}     # complex Var -> (re, im)
        self.packed = {}    # complex Var -> Var holding the packed value
        self.rename = {}

    def split(self, v):
        """(re, im) of complex operand ``v``."""
        b = self.b
        if isinstance(v, Literal):
            z = complex(np.asarray(v.val)[()])
            rdt = dtypes.real_dtype(np.dtype(v.aval.dtype))
            return b.lit(z.real, rdt), b.lit(z.imag, rdt)
        v = self.rename.get(v, v)
        if v not in self.parts:
            self.parts[v] = (b.op("real", v), b.op("imag", v))
        return self.parts[v]

    def whole(self, v):
        """A Var holding complex ``v`` (packing its parts if it was decomposed)."""
        if isinstance(v, Literal):
            return v
        v = self.rename.get(v, v)
        if v in self.packed:
            return self.packed[v]
        if v in self.parts and v not in self.packed:
            re, im = self.parts[v]
            if not (isinstance(re, Var) and re.aval.shape == tuple(v.aval.shape)) and not (
                    isinstance(im, Var) and im.aval.shape == tuple(v.aval.shape)):
                re = self.b.op("broadcast_in_dim", re, shape=tuple(v.aval.shape),
                               broadcast_dimensions=())
            out = Var(v.aval)
            self.b.eqns.append(Equation(complex_pack_p, [re, im], [out], {}))
            self.packed[v] = out
            return out
        return v

    def run(self):
        b = self.b
        for eqn in self.prog.eqns:
            eqn = map_subprograms(eqn, complex_decompose)
            res = None
            if any(_is_complex(v) for v in list(eqn.invars) + list(eqn.outvars)):
                res = self.rewrite(eqn)
            if res is None:
                ins = [self.whole(v) if not isinstance(v, Literal) and _is_complex(v)
                       else self.rename.get(v, v) if not isinstance(v, Literal) else v
                       for v in eqn.invars]
                b.eqns.append(Equation(eqn.primitive, ins, eqn.outvars, eqn.params))
                continue
            out = eqn.outvars[0]
            if _is_complex(out):
                self.parts[out] = res
            else:
                self.rename[out] = res
        outvars = []
        for v in self.prog.outvars:
            if isinstance(v, Literal):
                outvars.append(v)
            elif _is_complex(v):
                outvars.append(self.whole(v))
            else:
                outvars.append(self.rename.get(v, v))
        return Program(self.prog.constvars, self.prog.consts, self.prog.invars, b.eqns, outvars,
                       self.prog.effects)

    # ---- rules ---------------------------------------------------------------------------------
    def rewrite(self, eqn):
        """(re, im) for a complex result, a Var for a real result, None to keep the eqn."""
        name = eqn.primitive.name
        ins = eqn.invars
        if eqn.primitive.multiple_results or len(eqn.outvars) != 1:
            return None
        out = eqn.outvars[0]
        b = self.b
        cin = [v for v in ins if _is_complex(v)]
        if name == "convert_element_type":
            return self._convert(ins[0], out, eqn.params)
        if cin and any(not _is_complex(v) for v in ins) and name != "where":
            return None
        if name in ("add", "subtract"):
            (ar, ai), (br, bi) = self.split(ins[0]), self.split(ins[1])
            return b.op(name, ar, br), b.op(name, ai, bi)
        if name == "multiply":
            return self._mul(self.split(ins[0]), self.split(ins[1]))
        if name == "square":
            x = self.split(ins[0])
            return self._mul(x, x)
        if name == "divide":
            return self._div(self.split(ins[0]), self.split(ins[1]))
        if name == "reciprocal":
            return self._recip(self.split(ins[0]))
        if name == "negative":
            xr, xi = self.split(ins[0])
            return b.op("negative", xr), b.op("negative", xi)
        if name == "conj":
            xr, xi = self.split(ins[0])
            return xr, b.op("negative", xi)
        if name in ("real", "imag"):
            xr, xi = self.split(ins[0])
            return _as_var(b, xr if name == "real" else xi, out)
        if name == "abs":
            xr, xi = self.split(ins[0])
            return b.op("hypot", xr, xi)
        if name in _UNARY or name in _PARTWISE or name == "pow":
            return self._math(name, ins, out, eqn.params)
        if name in ("equal", "not_equal"):
            (ar, ai), (br, bi) = self.split(ins[0]), self.split(ins[1])
            join = "logical_and" if name == "equal" else "logical_or"
            return b.op(join, b.op(name, ar, br), b.op(name, ai, bi))
        if name in ("isnan", "isinf"):
            xr, xi = self.split(ins[0])
            return b.op("logical_or", b.op(name, xr), b.op(name, xi))
        if name == "isfinite":
            xr, xi = self.split(ins[0])
            return b.op("logical_and", b.op(name, xr), b.op(name, xi))
        if name == "where":
            c = ins[0]
            c = self.rename.get(c, c) if isinstance(c, Var) else c
            if _is_complex(ins[0]):
                return None
            (xr, xi), (yr, yi) = self.split(ins[1]), self.split(ins[2])
            return b.op("where", c, xr, yr), b.op("where", c, xi, yi)
        if name in _VIEWS:
            if not self._decomposed(ins[0]):
                return None   # a view of a whole complex value stays one (no split + repack)
            xr, xi = self.split(ins[0])
            return (self._view(name, xr, eqn.params, out),
                    self._view(name, xi, eqn.params, out))
        if name == "reduce_sum":
            xr, xi = self.split(ins[0])
            return (b.op("reduce_sum", _full(b, xr, ins[0]), **eqn.params),
                    b.op("reduce_sum", _full(b, xi, ins[0]), **eqn.params))
        return None

    def _decomposed(self, v):
        return isinstance(v, Var) and self.rename.get(v, v) in self.parts and \
            self.rename.get(v, v) not in self.packed

    def _view(self, name, x, params, out):
        # A part that is a scalar stand-in for a uniform value (the zero imaginary part of a
        # real -> complex cast, a Literal or a 0-d result of ops on it): every view of it is
        # that scalar broadcast to the view's shape.
        if isinstance(x, Literal) or (not x.aval.shape and out.aval.shape):
            return self.b.op("broadcast_in_dim", x, shape=tuple(out.aval.shape),
                             broadcast_dimensions=())
        return self.b.op(name, x, **params)

    def _convert(self, x, out, params):
        b = self.b
        src, dst = np.dtype(x.aval.dtype), np.dtype(out.aval.dtype)
        if src.kind != "c" and dst.kind == "c":
            rdt = dtypes.real_dtype(dst)
            xv = self.rename.get(x, x) if isinstance(x, Var) else x
            re = xv if src == rdt else b.op("convert_element_type", xv, new_dtype=rdt,
                                             weak_type=False)
            return re, b.lit(0, rdt)
        if src.kind == "c" and dst.kind == "c":
            xr, xi = self.split(x)
            rdt = dtypes.real_dtype(dst)
            if rdt == dtypes.real_dtype(src):
                return xr, xi
            return tuple(b.op("convert_element_type", p, new_dtype=rdt, weak_type=False)
                         if isinstance(p, Var) else b.lit(p.val, rdt) for p in (xr, xi))
        if src.kind == "c":
            xr, xi = self.split(x)
            if dst.kind == "b":
                zero = b.lit(0, xr.aval.dtype)
                return b.op("logical_or", b.op("not_equal", xr, zero),
                            b.op("not_equal", xi, zero))
            xr = _full(b, xr, x)
            return b.op("convert_element_type", xr, new_dtype=dst, weak_type=False)
        return None

    def _mul(self, a, c):
        b = self.b
        (ar, ai), (br, bi) = a, c
        return (b.op("subtract", b.op("multiply", ar, br), b.op("multiply", ai, bi)),
                b.op("add", b.op("multiply", ar, bi), b.op("multiply", ai, br)))

    def _div(self, a, c):
        # Smith's algorithm with NumPy's branches: |br| >= |bi| (and a zero divisor) or not.
        b = self.b
        (ar, ai), (br, bi) = a, c
        rdt = (br if isinstance(br, Var) else bi if isinstance(bi, Var) else ar).aval.dtype
        one, zero = b.lit(1, rdt), b.lit(0, rdt)
        abr, abi = b.op("abs", br), b.op("abs", bi)
        first = b.op("greater_equal", abr, abi)
        both0 = b.op("logical_and", b.op("equal", abr, zero), b.op("equal", abi, zero))
        rat = b.op("divide", bi, br)
        scl = b.op("divide", one, b.op("add", br, b.op("multiply", bi, rat)))
        ra = b.op("multiply", b.op("add", ar, b.op("multiply", ai, rat)), scl)
        ia = b.op("multiply", b.op("subtract", ai, b.op("multiply", ar, rat)), scl)
        rat2 = b.op("divide", br, bi)
        scl2 = b.op("divide", one, b.op("add", bi, b.op("multiply", br, rat2)))
        rb = b.op("multiply", b.op("add", b.op("multiply", ar, rat2), ai), scl2)
        ib = b.op("multiply", b.op("subtract", b.op("multiply", ai, rat2), ar), scl2)
        rz, iz = b.op("divide", ar, abr), b.op("divide", ai, abr)
        re = b.op("where", first, b.op("where", both0, rz, ra), rb)
        im = b.op("where", first, b.op("where", both0, iz, ia), ib)
        return re, im

    def _recip(self, x):
        b = self.b
        xr, xi = x
        rdt = (xr if isinstance(xr, Var) else xi).aval.dtype
        one = b.lit(1, rdt)
        first = b.op("less_equal", b.op("abs", xi), b.op("abs", xr))
        r1 = b.op("divide", xi, xr)
        d1 = b.op("add", xr, b.op("multiply", xi, r1))
        r2 = b.op("divide", xr, xi)
        d2 = b.op("add", b.op("multiply", xr, r2), xi)
        re = b.op("where", first, b.op("divide", one, d1), b.op("divide", r2, d2))
        im = b.op("where", first, b.op("negative", b.op("divide", r1, d1)),
                  b.op("negative", b.op("divide", one, d2)))
        return re, im

    def _math(self, name, ins, out, params):
        """The elementary functions (complex_math.py): accurate ones in float64, NumPy's own
        formulas in the operand's precision, part-wise ones on each part."""
        b = self.b
        rdt = dtypes.real_dtype(np.dtype(out.aval.dtype))
        xr, xi = (CM.R(b, p) for p in self.split(ins[0]))
        if name in _PARTWISE:
            res = (CM.op(name, xr, **params), CM.op(name, xi, **params))
        elif name == "pow":
            res = CM.c_pow((xr, xi), tuple(CM.R(b, p) for p in self.split(ins[1])))
        else:
            fn, accurate = _UNARY[name]
            if accurate:
                res = fn(CM.to(xr, CM.F64), CM.to(xi, CM.F64))
                res = tuple(CM.to(p, rdt) for p in res)
            else:
                res = fn(xr, xi)
            if name in _LOG_SCALE:
                res = tuple(p * rdt.type(_LOG_SCALE[name]) for p in res)
        return tuple(_as_var(b, p.v, out) if isinstance(p.v, Var) else p.v for p in res)


def _as_var(b, x, out):
    """``x`` (a part) as a Var of ``out``'s shape (Literals are broadcast)."""
    if isinstance(x, Var) and tuple(x.aval.shape) == tuple(out.aval.shape):
        return x
    return b.op("broadcast_in_dim", x, shape=tuple(out.aval.shape),
                broadcast_dimensions=tuple(range(len(out.aval.shape) - len(x.aval.shape),
                                                 len(out.aval.shape))))


# name -> (formula, computed in float64?)
_UNARY = {
    "exp": (CM.c_exp, False), "exp2": (CM.c_exp2, False), "expm1": (CM.c_expm1, False),
    "log1p": (CM.c_log1p, False), "sign": (CM.c_sign, False),
    "log": (CM.c_log, True), "log2": (CM.c_log, True), "log10": (CM.c_log, True),
    "sqrt": (CM.c_sqrt, True), "sin": (CM.c_sin, True), "cos": (CM.c_cos, True),
    "tan": (CM.c_tan, True), "sinh": (CM.c_sinh, True), "cosh": (CM.c_cosh, True),
    "tanh": (CM.c_tanh, True), "arcsin": (CM.c_asin, True), "arccos": (CM.c_acos, True),
    "arctan": (CM.c_atan, True), "arcsinh": (CM.c_asinh, True),
    "arccosh": (CM.c_acosh, True), "arctanh": (CM.c_atanh, True),
}
# NumPy's log2 / log10 of complex: both parts of log times log2(e) / log10(e), in the dtype
_LOG_SCALE = {"log2": 1.442695040888963407359924681001892137,
              "log10": 0.434294481903251827651128918916605082}
_PARTWISE = ("rint", "round", "nan_to_num")


def _full(b, x, like):
    """Part ``x`` at the full shape of complex ``like`` (a Literal part is broadcast)."""
    if isinstance(x, Var):
        return x
    return b.op("broadcast_in_dim", x, shape=tuple(like.aval.shape), broadcast_dimensions=())
