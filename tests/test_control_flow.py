"""switch / cond / while_loop / fori_loop / scan / map under eval, jvp, grad, vmap and nesting,
checked against Python references and closed forms."""
import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.core.primitive import Primitive
from starling.test_util import check_grads

BRANCHES = [lambda v: v * 2.0, lambda v: v * v, lambda v: snp.sin(v)]
PY_BRANCHES = [lambda v: v * 2.0, lambda v: v * v, np.sin]


def f32(x):
    return snp.asarray(np.asarray(x, np.float32))


# ---- switch / cond ------------------------------------------------------------------------------

@pytest.mark.parametrize("index,expect", [(-1, 0), (0, 0), (1, 1), (2, 2), (3, 2), (100, 2)])
def test_switch_clamps_index(index, expect):
    x = f32(0.7)
    got = st.switch(index, BRANCHES, x)
    np.testing.assert_allclose(np.asarray(got), PY_BRANCHES[expect](np.float32(0.7)), rtol=1e-6)
    got_arr = st.switch(snp.asarray(index, dtype=np.int32), BRANCHES, x)
    np.testing.assert_allclose(np.asarray(got_arr), np.asarray(got))


_calls = []
_count_p = Primitive("test_counting_identity")
_count_p.impl = lambda x, tag: (_calls.append(tag), x)[1]
_count_p.abstract_eval = lambda x, tag: x


def test_switch_runs_only_the_chosen_branch():
    branches = [lambda v, k=k: _count_p.bind(v, tag=k) for k in range(3)]
    _calls.clear()
    st.switch(1, branches, f32([1.0, 2.0]))
    assert _calls == [1]
    _calls.clear()
    prog = st.make_ir(lambda i, v: st.switch(i, branches, v))(2, f32([1.0]))
    from starling.core.ir import eval_program
    eval_program(prog, prog.consts, snp.asarray(2), f32([1.0]))
    assert _calls == [2]


def test_switch_operands_pytrees_and_shared_operands():
    def b0(p, s):
        return {"y": p["w"] * s}

    def b1(p, s):
        return {"y": p["w"] + s}

    p = {"w": f32([1.0, 2.0])}
    out = st.switch(1, [b0, b1], p, 3.0)
    np.testing.assert_allclose(np.asarray(out["y"]), [4.0, 5.0])
    prog = st.make_ir(lambda i: st.switch(i, [b0, b1], p, 3.0))(0)
    text = str(prog)
    assert "switch[branches=(" in text and text.count("lambda") == 3


def test_switch_errors():
    x = f32(1.0)
    with pytest.raises(ValueError, match="empty"):
        st.switch(0, [], x)
    with pytest.raises(TypeError, match="integer"):
        st.switch(1.0, BRANCHES, x)
    with pytest.raises(TypeError, match="scalar"):
        st.switch(snp.asarray([0, 1]), BRANCHES, x)
    with pytest.raises(TypeError, match="integer or bool dtype"):
        st.switch(snp.asarray(0.0), BRANCHES, x)
    with pytest.raises(TypeError, match=r"branch 1 output .*f32\[2\].*f32\[\]"):
        st.switch(0, [lambda v: v, lambda v: snp.stack([v, v])], x)
    with pytest.raises(TypeError, match="branch 1 returns a different structure"):
        st.switch(0, [lambda v: v, lambda v: (v, v)], x)
    with pytest.raises(TypeError, match="branch 1 output"):
        st.switch(0, [lambda v: v, lambda v: snp.astype(v, np.int32)], x)


def test_cond():
    x = f32(2.0)
    assert float(st.cond(True, lambda v: v + 1, lambda v: v - 1, x)) == 3.0
    assert float(st.cond(snp.asarray(False), lambda v: v + 1, lambda v: v - 1, x)) == 1.0
    assert float(st.cond(snp.asarray(3), lambda v: v + 1, lambda v: v - 1, x)) == 3.0
    with pytest.raises(TypeError, match="scalar"):
        st.cond(snp.asarray([True, False]), lambda v: v, lambda v: v, x)
    with pytest.raises(TypeError, match="bool or integer"):
        st.cond(snp.asarray(1.0), lambda v: v, lambda v: v, x)
    with pytest.raises(TypeError, match="pred"):
        st.cond(1.0, lambda v: v, lambda v: v, x)


@pytest.mark.parametrize("make, pattern", [
    # structure: a tuple against an array, a dict with other keys
    (lambda v: ((v, v), v), r"cond: true_fun returns a different structure than false_fun"),
    (lambda v: ({"a": v}, {"b": v}), r"true_fun returns a different structure than false_fun"),
    # shape and dtype of a leaf, named by its path
    (lambda v: ({"w": snp.stack([v, v])}, {"w": v}),
     r"cond: true_fun output \['w'\] is f32\[2\] but false_fun gives f32\[\]"),
    (lambda v: ((v, snp.astype(v, np.int32)), (v, v)),
     r"true_fun output \[1\] is i32\[\] but false_fun gives f32\[\]"),
])
@pytest.mark.parametrize("pred", [True, "traced"])
def test_cond_errors_name_true_fun_and_false_fun(make, pattern, pred):
    x = f32(1.0)

    def call(p, v):
        return st.cond(p, lambda a: make(a)[0], lambda a: make(a)[1], v)
    with pytest.raises(TypeError, match=pattern) as err:
        if pred == "traced":
            st.compile(call)(snp.asarray(True), x)
        else:
            call(True, x)
    msg = str(err.value)
    assert "branch" not in msg and "true_fun and false_fun must return the same" in msg
    with pytest.raises(TypeError, match="cond: false_fun is not callable"):
        st.cond(True, lambda v: v, None, x)
    with pytest.raises(TypeError, match="cond: true_fun is not callable"):
        st.cond(True, 3, lambda v: v, x)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_switch_jvp_grad_match_branch(index):
    x = 0.3
    fn = lambda v: st.switch(index, BRANCHES, v)  # noqa: E731
    d = {0: 2.0, 1: 2 * x, 2: np.cos(x)}[index]
    _, t = st.jvp(fn, (f32(x),), (f32(1.0),))
    np.testing.assert_allclose(float(t), d, rtol=1e-6)
    np.testing.assert_allclose(float(st.grad(fn)(f32(x))), d, rtol=1e-6)
    check_grads(fn, (np.float64(x),), order=2)


def test_switch_vmap_batched_index_and_operands():
    idx = snp.asarray([0, 1, 2, 5, -3])
    xs = f32([0.1, 0.2, 0.3, 0.4, 0.5])
    got = st.vmap(lambda i, v: st.switch(i, BRANCHES, v))(idx, xs)
    want = [PY_BRANCHES[min(max(i, 0), 2)](np.float32(v)) for i, v in
            zip([0, 1, 2, 5, -3], [0.1, 0.2, 0.3, 0.4, 0.5])]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    # batched index, unbatched operand
    got2 = st.vmap(lambda i: st.switch(i, BRANCHES, f32(0.3)))(snp.asarray([2, 0]))
    np.testing.assert_allclose(np.asarray(got2), [np.sin(0.3), 0.6], rtol=1e-6)
    # unbatched index stays a switch
    prog = st.make_ir(st.vmap(lambda v: st.switch(1, BRANCHES, v)))(xs)
    assert "switch" in str(prog)


def test_switch_grad_of_vmap_and_vmap_of_grad():
    idx = snp.asarray([0, 1, 2])
    xs = f32([0.1, 0.2, 0.3])
    g = st.grad(lambda v: st.vmap(lambda i, a: st.switch(i, BRANCHES, a))(idx, v).sum())(xs)
    np.testing.assert_allclose(np.asarray(g), [2.0, 0.4, np.cos(0.3)], rtol=1e-6)
    g2 = st.vmap(st.grad(lambda a, i: st.switch(i, BRANCHES, a)))(xs, idx)
    np.testing.assert_allclose(np.asarray(g2), [2.0, 0.4, np.cos(0.3)], rtol=1e-6)


# ---- while_loop / fori_loop ---------------------------------------------------------------------

def _square_three_times(v):
    return st.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] ** 2), (0, v))[1]


def test_while_loop_known_value_and_derivative():
    v = snp.asarray(1.5, dtype=np.float64)
    np.testing.assert_allclose(float(_square_three_times(v)), 1.5 ** 8)
    assert float(st.grad(_square_three_times)(v)) == pytest.approx(136.6875)
    _, t = st.jvp(_square_three_times, (v,), (snp.asarray(1.0, dtype=np.float64),))
    assert float(t) == pytest.approx(136.6875)


def test_while_loop_reverse_mode_needs_max_iterations_when_staged():
    v = snp.asarray(1.5, dtype=np.float64)
    with pytest.raises(TypeError, match="max_iterations"):
        st.make_ir(st.grad(_square_three_times))(v)

    def capped(v):
        return st.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] ** 2), (0, v),
                             max_iterations=10)[1]
    prog = st.make_ir(st.grad(capped))(v)
    from starling.core.ir import eval_program
    (g,) = eval_program(prog, prog.consts, v)
    assert float(g) == pytest.approx(136.6875)
    assert float(st.grad(capped)(v)) == pytest.approx(136.6875)


def test_while_loop_max_iterations_caps_trip_count():
    out = st.while_loop(lambda c: c < 100, lambda c: c + 1, 0, max_iterations=7)
    assert int(out) == 7
    with pytest.raises(ValueError, match="max_iterations"):
        st.while_loop(lambda c: c < 1, lambda c: c + 1, 0, max_iterations=-1)


def test_while_loop_errors():
    with pytest.raises(TypeError, match=r"carry \[0\] changes from"):
        st.while_loop(lambda c: c[0] < 3, lambda c: (snp.stack([c[0], c[0]]), c[1]),
                      (f32(0.0), f32(1.0)))
    with pytest.raises(TypeError, match="changes from i64"):
        st.while_loop(lambda c: c < 3, lambda c: snp.astype(c, np.float32), snp.asarray(0))
    with pytest.raises(TypeError, match="scalar bool"):
        st.while_loop(lambda c: c, lambda c: c + 1, f32(0.0))
    with pytest.raises(TypeError, match="scalar bool"):
        st.while_loop(lambda c: c < 3, lambda c: c + 1, f32([0.0, 1.0]))


def test_while_loop_vmap_batched_predicate_freezes_finished():
    def collatz_steps(n):
        def body(c):
            k, steps = c
            k = snp.where(k % 2 == 0, k // 2, 3 * k + 1)
            return k, steps + 1
        return st.while_loop(lambda c: c[0] != 1, body, (n, 0))[1]

    ns = [1, 2, 3, 6, 7, 27]

    def ref(n):
        s = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s += 1
        return s
    got = st.vmap(collatz_steps)(snp.asarray(ns))
    assert np.asarray(got).tolist() == [ref(n) for n in ns]


def test_while_loop_vmap_of_grad_and_grad_of_vmap():
    vs = snp.asarray([1.1, 0.9, 1.3], dtype=np.float64)
    g = st.vmap(st.grad(_square_three_times))(vs)
    np.testing.assert_allclose(np.asarray(g), 8 * np.asarray(vs) ** 7, rtol=1e-12)
    g2 = st.grad(lambda v: st.vmap(_square_three_times)(v).sum())(vs)
    np.testing.assert_allclose(np.asarray(g2), 8 * np.asarray(vs) ** 7, rtol=1e-12)


def test_while_loop_data_dependent_trip_count_gradient():
    # Newton iterations for sqrt(a): the number of steps depends on a.
    def newton_sqrt(a):
        def body(c):
            x, i = c
            return 0.5 * (x + a / x), i + 1
        return st.while_loop(lambda c: snp.logical_and(snp.abs(c[0] * c[0] - a) > 1e-12, c[1] < 50),
                             body, (a, 0))[0]
    a = snp.asarray(2.0, dtype=np.float64)
    np.testing.assert_allclose(float(newton_sqrt(a)), np.sqrt(2.0), rtol=1e-12)
    np.testing.assert_allclose(float(st.grad(newton_sqrt)(a)), 0.5 / np.sqrt(2.0), rtol=1e-6)


def test_fori_loop_static_is_scan_and_traced_is_while():
    body = lambda i, v: v * 1.5 + i  # noqa: E731
    ref = 1.0
    for i in range(2, 6):
        ref = ref * 1.5 + i
    assert float(st.fori_loop(2, 6, body, f32(1.0))) == pytest.approx(ref)
    assert "scan" in str(st.make_ir(lambda v: st.fori_loop(2, 6, body, v))(f32(1.0)))
    traced = st.make_ir(lambda lo, v: st.fori_loop(lo, 6, body, v))(snp.asarray(2), f32(1.0))
    assert "while" in str(traced)
    g = st.grad(lambda v: st.fori_loop(0, 3, lambda i, w: w * w, v))(snp.asarray(1.5))
    np.testing.assert_allclose(float(g), 136.6875, rtol=1e-5)
    assert float(st.fori_loop(5, 2, body, f32(1.0))) == 1.0


# ---- scan / map ---------------------------------------------------------------------------------

def _py_scan(f, init, xs, reverse=False):
    carry, ys = init, []
    idx = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for i in idx:
        carry, y = f(carry, xs[i])
        ys.append(y)
    if reverse:
        ys.reverse()
    return carry, np.stack(ys)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_python(reverse):
    xs = np.linspace(-1, 1, 5).astype(np.float32)
    f = lambda c, x: (c * 0.9 + x, c * x)  # noqa: E731
    c, ys = st.scan(f, f32(0.5), snp.asarray(xs), reverse=reverse)
    rc, rys = _py_scan(f, np.float32(0.5), xs, reverse)
    np.testing.assert_allclose(float(c), rc, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ys), rys, rtol=1e-6)


def test_scan_pytrees_length_and_empty():
    c, ys = st.scan(lambda c, _: ((c[0] + 1, c[1] * 2), {"a": c[0]}), (0, f32(1.0)), None,
                    length=4)
    assert int(c[0]) == 4 and float(c[1]) == 16.0
    assert np.asarray(ys["a"]).tolist() == [0, 1, 2, 3]
    c, ys = st.scan(lambda c, x: (c + x.sum(), x * 2), f32(1.0), f32(np.zeros((0, 3))))
    assert float(c) == 1.0 and ys.shape == (0, 3)
    with pytest.raises(ValueError, match="length"):
        st.scan(lambda c, x: (c, x), 0.0, None)
    with pytest.raises(ValueError, match="disagree"):
        st.scan(lambda c, x: (c, x), 0.0, (f32(np.zeros(3)), f32(np.zeros(4))))
    with pytest.raises(TypeError, match="carry"):
        st.scan(lambda c, x: (snp.stack([c, c]), x), f32(0.0), f32(np.zeros(3)))


def test_scan_gradients_and_second_derivatives():
    xs = np.array([0.3, -0.2, 0.5, 0.1])

    def f(w, xs):
        c, ys = st.scan(lambda c, x: (snp.tanh(c * w + x), c * x), snp.asarray(0.2, dtype=np.float64),
                        xs)
        return c + ys.sum()

    check_grads(lambda w: f(w, snp.asarray(xs)), (np.float64(0.7),), order=2)
    check_grads(lambda x: f(snp.asarray(0.7, dtype=np.float64), x), (xs,), order=2)
    h = st.grad(st.grad(lambda w: f(w, snp.asarray(xs))))(snp.asarray(0.7, dtype=np.float64))
    eps = 1e-4
    g = st.grad(lambda w: f(w, snp.asarray(xs)))
    fd = (float(g(snp.asarray(0.7 + eps, dtype=np.float64))) -
          float(g(snp.asarray(0.7 - eps, dtype=np.float64)))) / (2 * eps)
    np.testing.assert_allclose(float(h), fd, rtol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_grad_forwards_invariant_residuals(reverse):
    """Partial evaluation passes residuals that are the body's consts (an RNN's weights) or its
    scanned slices straight to the backward scan instead of stacking one copy per iteration;
    the gradients stay right (finite differences)."""
    rng = np.random.default_rng(1)
    w, xs = rng.normal(size=(4, 4)) * 0.5, rng.normal(size=(6, 4))

    def loss(w, xs):
        step = lambda h, x: (snp.tanh(h @ w + x), (h * x).sum())  # noqa: E731
        h, ys = st.scan(step, snp.zeros(4, dtype=np.float64), xs, reverse=reverse)
        return h.sum() + ys.sum()

    prog = st.make_ir(st.grad(loss, argnums=(0, 1)))(w, xs)
    scans = [e for e in prog.eqns if e.primitive.name == "scan"]
    assert len(scans) == 2
    forward, backward = scans
    assert all(tuple(v.aval.shape) != (6, 4, 4) for v in forward.outvars)   # w not stacked
    assert prog.invars[0] in backward.invars and prog.invars[1] in backward.invars
    check_grads(loss, (w, xs), order=1, modes=("rev",))


def test_scan_vmap():
    xs = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
    f = lambda c0, x: st.scan(lambda c, xi: (c + xi, c * xi), c0, x)  # noqa: E731
    c, ys = st.vmap(f)(f32([0.0, 1.0, 2.0]), snp.asarray(xs))
    for b in range(3):
        rc, rys = _py_scan(lambda c, x: (c + x, c * x), np.float32(b), xs[b])
        np.testing.assert_allclose(float(c[b]), rc, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(ys[b]), rys, rtol=1e-6)
    c2, _ = st.vmap(f, in_axes=(None, 1))(f32(0.0), snp.asarray(xs.T))
    np.testing.assert_allclose(np.asarray(c2), xs.sum(axis=1), rtol=1e-5)


def test_map():
    xs = f32(np.arange(6.0).reshape(3, 2))
    out = st.map(lambda r: r.sum() * 2, xs)
    np.testing.assert_allclose(np.asarray(out), [2.0, 10.0, 18.0])


def test_nested_switch_in_while_in_scan():
    def step(c, x):
        def body(s):
            k, v = s
            v = st.switch(k % 3, BRANCHES, v)
            return k + 1, v
        # inside scan the loop is staged, so reverse mode needs a trip-count bound
        _, v = st.while_loop(lambda s: s[0] < 3, body, (0, c * x), max_iterations=3)
        return v, v

    def ref_step(c, x):
        v = c * x
        for k in range(3):
            v = PY_BRANCHES[k % 3](v)
        return v, v

    xs = np.array([0.5, 0.8, 1.1])
    c, ys = st.scan(step, snp.asarray(1.0, dtype=np.float64), snp.asarray(xs))
    rc, rys = _py_scan(ref_step, 1.0, xs)
    np.testing.assert_allclose(float(c), rc, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ys), rys, rtol=1e-12)
    g = st.grad(lambda a: st.scan(step, a, snp.asarray(xs))[0])(snp.asarray(1.0, dtype=np.float64))
    eps = 1e-6
    fd = (_py_scan(ref_step, 1.0 + eps, xs)[0] - _py_scan(ref_step, 1.0 - eps, xs)[0]) / (2 * eps)
    np.testing.assert_allclose(float(g), fd, rtol=1e-6)
    gv = st.vmap(st.grad(lambda a: st.scan(step, a, snp.asarray(xs))[0]))(
        snp.asarray([1.0, 0.9], dtype=np.float64))
    np.testing.assert_allclose(float(gv[0]), fd, rtol=1e-6)


def test_make_ir_prints_nested_blocks():
    prog = st.make_ir(lambda v: st.scan(lambda c, x: (st.cond(x > 0, lambda a: a + x,
                                                               lambda a: a - x, c), c),
                                        v, f32([1.0, -1.0])))(f32(0.0))
    text = str(prog)
    assert "scan[body=" in text and "switch[branches=(" in text


# ---- vmap of cond / switch: an untaken branch's infinite derivative never leaks ----------------

_UNTAKEN = [
    ("log", lambda u: snp.log(u), lambda u: u * 2.0, [0.0, 1.5, -1.0], lambda x: 1 / x),
    ("sqrt", lambda u: snp.sqrt(u), lambda u: u ** 3, [0.0, 4.0, -2.0], lambda x: 0.5 / np.sqrt(x)),
    ("recip", lambda u: 1.0 / u, lambda u: u - 1.0, [0.0, 2.0, -3.0], lambda x: -1 / x ** 2),
]


@pytest.mark.parametrize("name, taken, other, xs, dtaken", _UNTAKEN, ids=[u[0] for u in _UNTAKEN])
def test_vmap_cond_untaken_branch_derivatives_exact(name, taken, other, xs, dtaken):
    xs = np.array(xs)

    def f(x):
        return st.cond(x > 0, taken, other, x)

    def d_want(x):
        return dtaken(x) if x > 0 else float(st.grad(other)(x))
    want = np.array([d_want(x) for x in xs])
    x = snp.asarray(xs)
    got = {
        "vmap(grad)": st.vmap(st.grad(f))(x),
        "grad(vmap)": st.grad(lambda v: snp.sum(st.vmap(f)(v)))(x),
        "jvp(vmap)": st.jvp(st.vmap(f), (x,), (snp.ones_like(x),))[1],
        "vjp(vmap)": st.vjp(st.vmap(f), x)[1](snp.ones_like(x))[0],
        "compiled grad(vmap)": st.compile(st.grad(lambda v: snp.sum(st.vmap(f)(v))))(x),
    }
    for k, v in got.items():
        np.testing.assert_allclose(np.asarray(v), want, rtol=1e-12, err_msg=k)
    # second order, both modes: the taken branch's second derivative
    h_rev = st.grad(lambda v: snp.sum(st.grad(lambda w: snp.sum(st.vmap(f)(w)))(v)))(x)
    h_fwd = st.jvp(lambda v: st.grad(lambda w: snp.sum(st.vmap(f)(w)))(v), (x,),
                   (snp.ones_like(x),))[1]
    h_want = np.array([float(st.grad(st.grad(taken if v > 0 else other))(v)) for v in xs])
    np.testing.assert_allclose(np.asarray(h_rev), h_want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(h_fwd), h_want, rtol=1e-12)


def test_vmap_switch_three_branches_grad_no_nan():
    branches = [lambda u: snp.log(u), lambda u: snp.sqrt(u), lambda u: u * 5.0]
    idx = snp.asarray(np.array([2, 0, 1, 2]))
    x = snp.asarray(np.array([0.0, 2.0, 4.0, -1.0]))
    g = st.grad(lambda v: snp.sum(st.vmap(lambda i, u: st.switch(i, branches, u))(idx, v)))(x)
    np.testing.assert_allclose(np.asarray(g), [5.0, 0.5, 0.25, 5.0], rtol=1e-12)


# ---- loop carries follow JAX's weak-type rules -----------------------------------------------

@pytest.mark.parametrize("init", [0, 0.0])
def test_weak_initial_carry_takes_the_body_dtype(init):
    one = snp.asarray(1.5, dtype=snp.float32)
    loops = {
        "fori": (lambda: st.fori_loop(0, 3, lambda i, c: c + one, init), 4.5),
        "fori dynamic": (lambda: st.fori_loop(0, snp.asarray(3), lambda i, c: c + one, init),
                         4.5),
        "scan": (lambda: st.scan(lambda c, x: (c + x, None), init, snp.ones(3, snp.float32))[0],
                 3.0),
        "while": (lambda: st.while_loop(lambda c: c < 4, lambda c: c + one, init), 4.5),
    }
    for name, (run, want) in loops.items():
        for fn in (run, st.compile(run)):
            out = fn()
            assert out.dtype == np.float32 and not out.weak_type, name
            assert float(out) == want, name
    # a weak float carry with a weak body stays weak (Python scalars throughout)
    out = st.fori_loop(0, 2, lambda i, c: c * 0.5, 1)
    assert out.weak_type and out.dtype == snp.float32 and float(out) == 0.25


def test_strong_carry_changing_dtype_is_a_clear_error():
    c = snp.asarray(0, dtype=snp.int32)
    with pytest.raises(TypeError, match=r"while_loop: carry <root> changes from i32\[\] to f32"):
        st.while_loop(lambda c: c < 3, lambda c: c + 1.5, c)
    with pytest.raises(TypeError, match=r"fori_loop|scan: carry <root> changes from bool"):
        st.fori_loop(0, 3, lambda i, c: c + 1.5, True)     # a Python bool is not weakly typed
    with pytest.raises(TypeError, match=r"scan: carry \['a'\] changes from i32\[\] to f32"):
        st.scan(lambda c, x: ({"a": c["a"] * x}, None), {"a": c}, snp.ones(2, snp.float32))


# ---- compiled loops update their carries in place (from the second iteration on) -----------

def test_compiled_loop_carries_are_updated_in_place_and_stay_right():
    from starling.lowering import buffers
    w = snp.zeros((256, 256))
    xs = snp.asarray((np.arange(5.0)[:, None, None] * np.ones((5, 256, 256))).astype(np.float32))

    def acc(w, xs):
        # carry also returned as y, and a carry passed through unchanged: neither may be
        # overwritten while something else still reads it
        def body(c, x):
            a, same = c
            new = a + x * 2.0
            return (new, same), new
        return st.scan(body, (w, w), xs)

    before = dict(buffers.STATS)
    (a, same), ys = st.compile(acc)(w, xs)
    assert buffers.STATS["donated"] > before["donated"]
    np.testing.assert_array_equal(np.asarray(a), np.full((256, 256), 20.0))
    np.testing.assert_array_equal(np.asarray(same), 0.0)
    np.testing.assert_array_equal(np.asarray(ys)[:, 0, 0], [0.0, 2.0, 6.0, 12.0, 20.0])
    assert float(np.asarray(w).sum()) == 0.0          # the caller's buffers are untouched

    def loop(c):
        return st.while_loop(lambda c: c[1] < 4, lambda c: (c[0] * 0.5 + 1.0, c[1] + 1), c)
    out = st.compile(loop)((snp.ones((200, 200)), 0))
    np.testing.assert_allclose(np.asarray(out[0]), 1.9375)


def test_compiled_loop_takes_initial_carries_that_die_at_it():
    """An initial carry computed inside the program and read by nothing after the loop is the
    loop's from the first iteration: it is updated in place at every iteration (no second
    accumulator-sized buffer), and a carry the program still reads later is not."""
    from starling.lowering import buffers
    xs = snp.asarray(np.arange(4.0, dtype=np.float32)[:, None, None] * np.ones((4, 128, 128),
                                                                              np.float32))

    def acc(w, xs):
        start = w * 3.0                       # dies at the scan: the scan owns it
        kept = w + 1.0                        # read again after the scan: stays the caller's
        (a, b), _ = st.scan(lambda c, x: ((c[0] + x, c[1] + x), None), (start, kept), xs)
        return a, b, kept

    w = snp.ones((128, 128))
    before = buffers.STATS["donated"]
    a, b, kept = st.compile(acc)(w, xs)
    # 4 iterations of the owned carry; the other carry only from the second iteration on
    assert buffers.STATS["donated"] - before == 4 + 3
    np.testing.assert_array_equal(np.asarray(a), np.full((128, 128), 9.0))
    np.testing.assert_array_equal(np.asarray(b), np.full((128, 128), 8.0))
    np.testing.assert_array_equal(np.asarray(kept), 2.0)
    np.testing.assert_array_equal(np.asarray(w), 1.0)


def test_compiled_loop_zero_initialised_accumulator_is_updated_in_place():
    """``zeros`` too big to fold into a constant is a broadcast of a scalar under compile: the
    loop copies it into a buffer it owns before the first iteration (else the first
    iteration's kernel would convert it and hold that copy next to a fresh result), then
    updates that buffer in place at every iteration."""
    from starling.lowering import buffers
    xs = snp.asarray(np.arange(1.0, 5.0, dtype=np.float32)[:, None, None]
                     * np.ones((4, 300, 300), np.float32))

    def acc(xs):
        a, _ = st.scan(lambda c, x: (c + x * 2.0, None), snp.zeros((300, 300), snp.float32), xs)
        return a

    def halve(y):
        return st.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 0.5 + y),
                             (0, snp.zeros((300, 300), snp.float32)))[1]

    f = st.compile(acc)
    f(xs)
    before = dict(buffers.STATS)
    a = f(xs)
    assert buffers.STATS["donated"] - before["donated"] == 4
    assert buffers.STATS["donation_refused"] == before["donation_refused"]
    np.testing.assert_array_equal(np.asarray(a), 20.0)
    np.testing.assert_array_equal(np.asarray(st.compile(halve)(snp.ones((300, 300)))), 1.75)
