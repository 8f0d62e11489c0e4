"""Dynamic shapes: ShapeVar / ShapesSpec / @dynamic_spec with compile (one compilation for every
size in range), range and assumption checks, branching errors, symbolic dims in ops."""
import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import ShapesSpec, ShapeVar, dynamic_spec
from starling.core.avals import ShapedArray
from starling.core.ir import check_program, eval_program
from starling.core.symbolic import DimExpr, InconclusiveDimensionError, bind_shapes
from starling.lowering import backends

F32 = np.dtype("float32")


def _rand(rng, *shape):
    return snp.asarray(rng.standard_normal(shape).astype(np.float32))


def _close(got, want, tol=1e-5):
    for g, w in zip(starling.tree.leaves(got), starling.tree.leaves(want)):
        assert tuple(g.shape) == tuple(w.shape) and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


# ---- one compilation for every size -----------------------------------------------------------

def test_one_compilation_serves_every_size(rng):
    batch = ShapeVar("batch", min=2, max=128)

    def mlp(x, w1, w2):
        h = snp.tanh(x @ w1 + 1.0)
        y = h @ w2
        return snp.mean(y, axis=0), snp.reshape(y, (-1,)), snp.sum(y * y) / x.shape[0]

    f = starling.compile(mlp, dynamic_shapes=ShapesSpec({"x": {0: batch}}), backend="numpy_ref")
    w1, w2 = _rand(rng, 5, 8), _rand(rng, 8, 3)
    for n in (2, 3, 17, 64, 128):
        x = _rand(rng, n, 5)
        _close(f(x, w1, w2), mlp(x, w1, w2))
    assert f.num_compiles == 1
    ir = f.lower(_rand(rng, 9, 5), w1, w2).ir
    assert isinstance(ir.in_avals[0].shape[0], DimExpr)
    assert "f32[batch,5]" in str(ir) and "f32[3*batch]" in str(ir)
    assert f.num_compiles == 1
    # A different static part of the signature (dtype) is a new compilation.
    f(_rand(rng, 4, 5).astype(np.float64), w1.astype(np.float64), w2.astype(np.float64))
    assert f.num_compiles == 2


def test_range_violation_names_argument_dim_and_constraint():
    batch = ShapeVar("batch", min=2, max=8)
    f = starling.compile(lambda x: x + 1, dynamic_shapes=ShapesSpec({"x": {1: batch}}))
    f(snp.ones((3, 2)))
    for bad in (1, 9):
        with pytest.raises(ValueError, match=r"argument 'x' dim 1 \(size %d.*2 <= batch <= 8"
                           % bad):
            f(snp.ones((3, bad)))
    assert f.num_compiles == 1


def test_out_of_range_first_call_compiles_nothing():
    n = ShapeVar("n", min=4)
    f = starling.compile(lambda x: x * 2, dynamic_shapes=ShapesSpec({"x": {0: n}}))
    with pytest.raises(ValueError, match="4 <= n <= inf"):
        f(snp.ones(3))
    assert f.num_compiles == 0


def test_assumption_is_checked_and_used_while_tracing(rng):
    batch = ShapeVar("batch", min=2, max=64)
    spec = ShapesSpec({"x": {0: batch}}, assumptions=[batch % 2 == 0])

    decided = []

    def pairs(x):
        if not isinstance(x.shape[0], int):  # staged: decided only by the assumption
            decided.append(bool(x.shape[0] % 2 == 0))
        return snp.sum(x.reshape(x.shape[0] // 2, 2, 3), axis=1), snp.split(x, 2)[1]

    f = starling.compile(pairs, dynamic_shapes=spec)
    for n in (2, 6, 20):
        x = _rand(rng, n, 3)
        _close(f(x), pairs(x))
    assert f.num_compiles == 1 and decided == [True]
    with pytest.raises(ValueError, match=r"argument 'x' dim 0 \(size 7.*Mod\(batch, 2\) == 0.*"
                                         r"batch = 7"):
        f(_rand(rng, 7, 3))
    # Without the assumption the division cannot be decided for every size in range.
    g = starling.compile(pairs, dynamic_shapes=ShapesSpec({"x": {0: batch}}))
    with pytest.raises(ValueError, match=r"cannot reshape array of shape \(batch, 3\)"):
        g(_rand(rng, 4, 3))
    assert decided == [True, False]
    h = starling.compile(lambda x: snp.split(x, 2)[0], dynamic_shapes=ShapesSpec({"x": {0: batch}}))
    with pytest.raises(InconclusiveDimensionError, match=r"Mod\(batch, 2\).*assumptions="):
        h(_rand(rng, 4, 3))


def test_derived_dims(rng):
    b = ShapeVar("b", min=1, max=50)
    spec = ShapesSpec({"x": {0: b}, "y": {0: b * 2}, "z": {0: b + 1}})

    def fun(x, y, z):
        return snp.concatenate([x, x]) + y, z[1:] * x, snp.concatenate([x, y, z])

    f = starling.compile(fun, dynamic_shapes=spec)
    for n in (1, 4, 9):
        args = (_rand(rng, n, 2), _rand(rng, 2 * n, 2), _rand(rng, n + 1, 2))
        _close(f(*args), fun(*args))
    assert f.num_compiles == 1
    assert "f32[4*b + 1,2]" in str(f.lower(*args).ir)
    with pytest.raises(ValueError, match=r"argument 'y' dim 0 has size 7, but it is declared "
                                         r"2\*b = 8 \(b = 4\)"):
        f(_rand(rng, 4, 2), _rand(rng, 7, 2), _rand(rng, 5, 2))


def test_variable_solved_from_a_derived_dim_only(rng):
    n = ShapeVar("n", max=20)
    f = starling.compile(lambda x: snp.sum(x.reshape(2, -1), axis=0),
                         dynamic_shapes=ShapesSpec({"x": {0: 2 * n + 2}}))
    for k in (4, 10, 30):
        x = _rand(rng, k)
        _close(f(x), snp.sum(x.reshape(2, -1), axis=0))
    assert f.num_compiles == 1
    with pytest.raises(ValueError, match="no integer n gives 2\\*n \\+ 2 = 5"):
        f(_rand(rng, 5))
    with pytest.raises(ValueError, match="outside the range of shape variable n"):
        f(_rand(rng, 44))


def test_branching_on_a_symbolic_dim_raises_clear_error():
    batch = ShapeVar("batch", min=2, max=128)

    def branchy(x):
        if x.shape[0] > 4:
            return x * 2
        return x

    f = starling.compile(branchy, dynamic_shapes=ShapesSpec({"x": {0: batch}}))
    with pytest.raises(InconclusiveDimensionError) as info:
        f(snp.ones((8, 3)))
    msg = str(info.value)
    assert "batch > 4" in msg and "2, 128" in msg
    assert "min=" in msg and "max=" in msg and "assumptions=" in msg
    assert isinstance(info.value, TypeError)


def test_branch_decided_by_the_range_is_allowed():
    batch = ShapeVar("batch", min=2, max=128)

    def fun(x):
        if x.shape[0] >= 2 and x.shape[0] < 1000 and x.shape[0] != 1:
            return x[1:] - x[:-1]
        return x

    f = starling.compile(fun, dynamic_shapes=ShapesSpec({"x": {0: batch}}))
    x = snp.arange(10.0)
    _close(f(x), x[1:] - x[:-1])


def test_int_of_symbolic_dim_raises():
    n = ShapeVar("n")
    f = starling.compile(lambda x: snp.zeros(int(x.shape[0])), dynamic_shapes=ShapesSpec(
        {"x": {0: n}}))
    with pytest.raises(InconclusiveDimensionError, match="int\\(\\) of the symbolic dimension"):
        f(snp.ones(3))


# ---- the decorator -------------------------------------------------------------------------------

def test_decorator_is_honoured_without_call_site_arguments(rng):
    n = ShapeVar("n", max=64)

    @starling.compile
    @dynamic_spec(ShapesSpec({"x": {0: n}}))
    def f(x):
        return snp.cumsum(x, axis=0)

    for k in (1, 5, 64):
        x = _rand(rng, k, 2)
        _close(f(x), snp.cumsum(x, axis=0))
    assert f.num_compiles == 1

    # Decorator above compile works too.
    g = dynamic_spec(ShapesSpec({"x": {0: n}}))(starling.compile(lambda x: x * 3))
    g(snp.ones(3))
    g(snp.ones(4))
    assert g.num_compiles == 1


def test_decorator_and_call_site_spec_together_is_value_error():
    n = ShapeVar("n")
    spec = ShapesSpec({"x": {0: n}})

    @dynamic_spec(spec)
    def f(x):
        return x

    with pytest.raises(ValueError, match="given twice"):
        starling.compile(f, dynamic_shapes=spec)
    with pytest.raises(ValueError, match="given twice"):
        dynamic_spec(spec)(starling.compile(lambda x: x, dynamic_shapes=spec))
    with pytest.raises(ValueError, match="given twice"):
        starling.export(f, snp.ones(3), dynamic_shapes=spec)


def test_spec_errors():
    n = ShapeVar("n")
    with pytest.raises(ValueError, match="'y', which is not a parameter"):
        starling.compile(lambda x: x, dynamic_shapes=ShapesSpec({"y": {0: n}}))
    f = starling.compile(lambda x: x, dynamic_shapes=ShapesSpec({"x": {2: n}}))
    with pytest.raises(ValueError, match="declares dim 2 of argument 'x'"):
        f(snp.ones(3))
    with pytest.raises(TypeError, match="ShapesSpec"):
        ShapesSpec({"x": {0: "n"}})
    with pytest.raises(TypeError, match="keyed by argument names"):
        ShapesSpec([("x", {0: n})])
    m = ShapeVar("m")
    with pytest.raises(ValueError, match="uses m, which no declared dim"):
        ShapesSpec({"x": {0: n}}, assumptions=[m >= 2])
    with pytest.raises(ValueError, match="always false"):
        ShapesSpec({"x": {0: n}}, assumptions=[n < 1])
    with pytest.raises(ValueError, match="min must be >= 1"):
        ShapeVar("k", min=0)
    with pytest.raises(ValueError, match="max 1 is smaller than min 2"):
        ShapeVar("k", min=2, max=1)
    with pytest.raises(TypeError, match="identifier"):
        ShapeVar("not a name")
    with pytest.raises(TypeError, match="dynamic_spec"):
        dynamic_spec({"x": {0: n}})


def test_pytree_arguments_kwargs_and_negative_axes(rng):
    n = ShapeVar("n", max=32)
    spec = ShapesSpec({"p": {"a": {0: n}, "b": None}, "z": {-1: n}})
    fun = lambda p, *, z: p["a"].sum(0) * p["b"] + z.sum(0).sum()  # noqa: E731
    f = starling.compile(fun, dynamic_shapes=spec)
    for k in (1, 3, 9):
        p = {"a": _rand(rng, k, 2), "b": _rand(rng, 2)}
        z = _rand(rng, 4, k)
        _close(f(p, z=z), fun(p, z=z))
    assert f.num_compiles == 1
    with pytest.raises(ValueError, match=r"argument 'z' dim 1 has size 4, but it is declared n"):
        f({"a": _rand(rng, 3, 2), "b": _rand(rng, 2)}, z=_rand(rng, 4, 4))


def test_int_dims_in_a_spec_are_checked():
    n = ShapeVar("n")
    f = starling.compile(lambda x: x.sum(0), dynamic_shapes=ShapesSpec({"x": {0: n, 1: 3}}))
    f(snp.ones((2, 3)))
    with pytest.raises(ValueError, match="argument 'x' dim 1 has size 4, but dynamic_shapes "
                                         "declares it 3"):
        f(snp.ones((2, 4)))


def test_static_arguments_and_dynamic_shapes(rng):
    n = ShapeVar("n")
    f = starling.compile(lambda k, x: snp.roll(x, k, axis=0), static_argnums=0,
                         dynamic_shapes=ShapesSpec({"x": {0: n}}))
    for size in (3, 5):
        x = _rand(rng, size, 2)
        _close(f(1, x), snp.roll(x, 1, axis=0))
    f(2, x)
    assert f.num_compiles == 2  # one per static value, not per size


# ---- symbolic dims through the ops --------------------------------------------------------------

def _case(name, fun, *shapes, min_=2):
    return pytest.param(fun, shapes, min_, id=name)


B = "b"
OPS = [
    _case("broadcast", lambda x, y: x + y * 2.0 - 1, (B, 3), (1, 3)),
    _case("broadcast_same", lambda x, y: snp.maximum(x, y), (B, 3), (B, 3)),
    _case("unary", lambda x: snp.exp(snp.sin(x)), (B, 3)),
    _case("where", lambda x: snp.where(x > 0, x, 0.5), (B, 3)),
    _case("astype", lambda x: (x * 10).astype(np.int32), (B, 3)),
    _case("sum_axes", lambda x: (snp.sum(x, 0), snp.sum(x), snp.max(x, 1, keepdims=True)),
          (B, 3)),
    _case("mean_var_std", lambda x: (snp.mean(x), snp.var(x, 0), snp.std(x, 0, ddof=1)), (B, 3)),
    _case("arg_reductions", lambda x: (snp.argmax(x, 0), snp.argmin(x, 1)), (B, 3)),
    _case("median", lambda x: snp.median(x, axis=0), (B, 3)),
    _case("matmul", lambda x, w: x @ w, (B, 3), (3, 4)),
    _case("contract_symbolic", lambda x: x.T @ x, (B, 3)),
    _case("batched_matmul", lambda x, y: x @ y, (B, 2, 3), (B, 3, 4)),
    _case("einsum", lambda x, w: snp.einsum("bi,ij->bj", x, w), (B, 3), (3, 4)),
    _case("reshape", lambda x: (x.reshape(-1), x.reshape(x.shape[0], 2, 3), x.reshape(-1, 3)),
          (B, 6)),
    _case("transpose", lambda x: (x.T, snp.moveaxis(x[None], 1, 0), snp.expand_dims(x, 1)),
          (B, 3)),
    _case("squeeze", lambda x: snp.squeeze(x, 1), (B, 1)),
    _case("broadcast_to", lambda x: snp.broadcast_to(x[:, None], (x.shape[0], 4)), (B,)),
    _case("concat_stack", lambda x, y: (snp.concatenate([x, y, x]), snp.stack([x, x], 1)),
          (B, 3), (B, 3)),
    _case("slicing", lambda x: (x[1:], x[:-1], x[:, 1:], x[::2], x[::-1], x[-1], x[0, 1],
                                  x[-2::-2]),
          (B, 3)),
    _case("slicing_min1", lambda x: (x[1:], x[-1], x[:, -1], x[::3], x[::-1]), (B, 3), min_=1),
    _case("slice_inside", lambda x: x[1:3], (B, 3), min_=3),
    _case("flip_roll_pad_tile", lambda x: (snp.flip(x, 0), snp.roll(x, 2, 0),
                                           snp.pad(x, ((1, 2), (0, 0))), snp.tile(x, (2, 1))),
          (B, 3)),
    _case("cumsum_sort", lambda x: (snp.cumsum(x, 0), snp.sort(x, 0)), (B, 3)),
    _case("creation", lambda x: (snp.zeros(x.shape) + x, snp.ones((x.shape[0],)),
                                 snp.arange(x.shape[0]), snp.full((x.shape[0], 2), 3.0),
                                 snp.zeros_like(x)), (B, 3)),
    _case("dim_as_value", lambda x: x * x.shape[0] + snp.sum(x) / (x.shape[0] * 3), (B, 3)),
    _case("gather", lambda t, i: (t[i], snp.take_along_axis(t, i[:, None] % 3, 1)),
          (B, 3), (B, "i32")),
    _case("embedding", lambda t, i: t[i], (10, 4), (B, "i32")),
    _case("grad", lambda x, w: starling.grad(lambda w: snp.sum(snp.tanh(x @ w) ** 2))(w),
          (B, 3), (3, 2)),
    _case("vmap", lambda x: starling.vmap(lambda r: snp.dot(r, r))(x), (B, 3)),
    _case("cond", lambda x: starling.cond(snp.sum(x) > 0, lambda y: y * 2, lambda y: -y, x),
          (B, 3)),
    _case("while", lambda x: starling.fori_loop(0, 3, lambda i, c: c * 0.5 + 1.0, x), (B, 3)),
    _case("scan", lambda x: starling.scan(lambda c, r: (c + r, c * r), snp.zeros(3), x), (B, 3)),
]


@pytest.mark.parametrize("fun,shapes,min_", OPS)
def test_ops_with_symbolic_dims_match_eager(fun, shapes, min_, rng):
    b = ShapeVar("b", min=min_, max=64)
    names = [f"a{i}" for i in range(len(shapes))]
    dims = {n: {ax: b for ax, d in enumerate(s) if d == B} for n, s in zip(names, shapes)}
    wrapped = eval(f"lambda {', '.join(names)}: fun({', '.join(names)})", {"fun": fun})
    f = starling.compile(wrapped, dynamic_shapes=ShapesSpec(dims), backend="numpy_ref")
    for size in (min_, min_ + 3):
        args = []
        for s in shapes:
            if s[-1] == "i32":
                args.append(snp.asarray(rng.integers(0, 3, size).astype(np.int32)))
            else:
                args.append(_rand(rng, *[size if d == B else d for d in s]))
        _close(f(*args), fun(*args), tol=1e-4)
    assert f.num_compiles == 1


@pytest.mark.parametrize("fun,what", [
    (lambda x: x[:5], "b >= 5"),                    # may or may not be inside the dim
    (lambda x: x.reshape(3, -1), r"Mod\(b, 3\)"),  # 3 need not divide 4*b
    (lambda x: snp.eye(x.shape[0]), "symbolic dimension `b`"),
    (lambda x: x + snp.ones((5, 4)), "could not be broadcast"),
])
def test_unsupported_uses_raise_clear_errors(fun, what):
    b = ShapeVar("b", min=2, max=64)
    f = starling.compile(fun, dynamic_shapes=ShapesSpec({"x": {0: b}}))
    with pytest.raises((TypeError, ValueError), match=what):
        f(snp.ones((5, 4)))


def test_dim_comparison_semantics():
    a = ShapeVar("a", min=2, max=10)
    c = ShapeVar("c", min=1)
    assert (a >= 2) is True and (a > 10) is False and (a + 1 > a) is True
    assert (a == a) is True and (a == 1) is False and (a != 0) is True
    assert (a * 2 == a + a) is True and (a - a) == 0 and isinstance(a - a, int)
    assert not (c == 1) and bool(c != 1)      # undecided ==: not provably equal
    cond = a > 4
    with pytest.raises(InconclusiveDimensionError, match="a > 4"):
        bool(cond)
    with pytest.raises(InconclusiveDimensionError):
        range(a)
    assert str(a * 2 + 1) == "2*a + 1" and repr(a) == "ShapeVar('a', min=2, max=10)"
    assert divmod(4 * a + 1, 2)[1] == 1 and (4 * a) // 4 == a


def test_bind_shapes_gives_a_concrete_program(rng):
    b = ShapeVar("b", max=100)
    prog = starling.make_ir(lambda x: (snp.mean(x.reshape(-1, 2), axis=0), x[1:] * 2))(
        ShapedArray((DimExpr(b.expr), 4), F32))
    assert "f32[b - 1,4]" in str(prog)
    bound = bind_shapes(prog, {b.expr: 5})
    check_program(bound)
    assert [v.aval.shape for v in bound.outvars] == [(2,), (4, 4)]
    x = _rand(rng, 5, 4)
    got = eval_program(bound, bound.consts, x)
    _close(got, [snp.mean(x.reshape(-1, 2), axis=0), x[1:] * 2])
    with pytest.raises(KeyError, match="no size for shape variable"):
        bind_shapes(prog, {})


class _NoDynamicBackend:
    """A backend without symbolic-shape support: compile counts per concrete program."""

    name = "test_no_dynamic"

    def __init__(self):
        self.compiled = 0

    def supports(self, primitive):
        return True

    def compile(self, program):
        self.compiled += 1
        return backends.get_backend("numpy_ref").compile(program)


def test_backend_without_symbolic_support_compiles_per_size_but_stages_once(rng):
    backend = backends.register_backend(_NoDynamicBackend())
    n = ShapeVar("n")
    f = starling.compile(lambda x: snp.sum(x, 0), dynamic_shapes=ShapesSpec({"x": {0: n}}),
                         backend=backend.name)
    for k in (2, 3, 2, 3, 7):
        x = _rand(rng, k, 2)
        _close(f(x), snp.sum(x, 0))
    assert f.num_compiles == 1 and backend.compiled == 3
