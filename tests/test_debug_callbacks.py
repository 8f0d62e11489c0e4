"""``starling.debug`` (print, callback, breakpoint, check), ``pure_callback``, ``io_callback``,
``block_until_ready`` / ``device_get``: eagerly and under compile, grad, vmap and control flow."""
import sys

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import debug

X = snp.asarray(np.array([1.0, 2.0, 3.0], np.float32))


def _modes(f):
    """f eagerly, compiled, and compiled with no eager cache in between."""
    return {"eager": f, "compiled": st.compile(f)}


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_print_values_in_order(mode, capsys):
    def f(x):
        debug.print("a={a} sum={}", snp.sum(x), a=x[0])
        y = x * 2
        debug.print("y={y}", y=y)
        return y
    out = _modes(f)[mode](X)
    assert np.asarray(out).tolist() == [2, 4, 6]
    assert capsys.readouterr().out.splitlines() == ["a=1.0 sum=6.0", "y=[2. 4. 6.]"]


def test_print_survives_passes_when_its_value_is_unused(capsys):
    @st.compile
    def f(x):
        debug.print("unused {}", x + 1)
        st.cond(x[0] > 0, lambda v: debug.print("branch {}", v) or v, lambda v: v, x)
        return x * 0 + 1
    f(X)
    f(X)
    out = capsys.readouterr().out.splitlines()
    assert out == ["unused [2. 3. 4.]", "branch [1. 2. 3.]"] * 2


def test_print_under_grad_runs_once_with_primals(capsys):
    def f(x):
        debug.print("x={}", x)
        return snp.sum(snp.sin(x))
    for g in (st.grad(f), st.compile(st.grad(f))):
        np.testing.assert_allclose(np.asarray(g(X)), np.cos(np.asarray(X)), rtol=1e-6)
        assert capsys.readouterr().out.splitlines() == ["x=[1. 2. 3.]"]
    _, t = st.jvp(f, (X,), (snp.ones(3),))
    assert capsys.readouterr().out.splitlines() == ["x=[1. 2. 3.]"]
    gg = st.grad(lambda s: st.grad(lambda u: f(u * snp.ones(3)))(s))(1.0)
    assert np.isfinite(float(gg))


def test_print_under_vmap_one_line_per_member(capsys):
    def f(x, c):
        debug.print("row {} c={}", x, c)
        return x * c
    xs = snp.asarray(np.arange(6.0).reshape(3, 2))
    for g in (st.vmap(f, in_axes=(0, None)), st.compile(st.vmap(f, in_axes=(0, None)))):
        g(xs, 2.0)
        assert capsys.readouterr().out.splitlines() == [
            "row [0. 1.] c=2.0", "row [2. 3.] c=2.0", "row [4. 5.] c=2.0"]
    st.vmap(st.vmap(lambda v: debug.print("{}", v) or v))(xs)
    assert capsys.readouterr().out.split() == [str(float(v)) for v in range(6)]


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_callback_inside_loops(mode):
    seen = []

    def f(x):
        def body(i, c):
            debug.callback(lambda i, c: seen.append((int(i), float(c))), i, c)
            return c + 1.0
        c = st.fori_loop(0, 3, body, x)

        def step(c, t):
            debug.callback(lambda t: seen.append(("scan", float(t))), t)
            return c + t, c
        c, _ = st.scan(step, c, snp.asarray([10.0, 20.0]))
        return c
    assert float(_modes(f)[mode](snp.asarray(0.5))) == 33.5
    assert seen == [(0, 0.5), (1, 1.5), (2, 2.5), ("scan", 10.0), ("scan", 20.0)]


def test_callback_pytree_and_static_leaves():
    got = {}

    def f(x):
        debug.callback(lambda tree, tag, scale=1: got.update(tree=tree, tag=tag, scale=scale),
                       {"a": x, "b": [x * 2]}, "label", scale=3)
        return x
    st.compile(f)(X)
    assert got["tag"] == "label" and got["scale"] == 3
    assert np.asarray(got["tree"]["b"][0]).tolist() == [2, 4, 6]
    assert isinstance(got["tree"]["a"], st.Array)


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_check_raises_with_formatted_message(mode):
    def f(x):
        debug.check(snp.all(x > 0), "x must be positive, min was {m}", m=snp.min(x))
        return snp.log(x)
    g = _modes(f)[mode]
    np.testing.assert_allclose(np.asarray(g(X)), np.log(np.asarray(X)))
    with pytest.raises(debug.CheckError, match="min was -1.0"):
        g(snp.asarray(np.array([1.0, -1.0, 2.0], np.float32)))
    with pytest.raises(debug.CheckError, match=r"bad row \[-1.  2.\]"):
        st.vmap(lambda r: debug.check(snp.all(r > 0), "bad row {}", r) or r)(
            snp.asarray(np.array([[1.0, 2.0], [-1.0, 2.0]])))
    with pytest.raises(TypeError, match="msg must be a string"):
        debug.check(True, 3)


def test_breakpoint_calls_the_hook_with_values(monkeypatch):
    hits = []

    def hook(*a, **k):
        frame = sys._getframe(1)
        hits.append(frame.f_locals["values"])
    monkeypatch.setattr(sys, "breakpointhook", hook)
    st.compile(lambda x: debug.breakpoint(x) or x)(X)
    assert len(hits) == 1 and np.asarray(hits[0][0]).tolist() == [1, 2, 3]


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_pure_callback_values_and_dce(mode):
    calls = []

    def host_sort(x):
        calls.append(1)
        return np.sort(np.asarray(x))[::-1].astype(np.float64)   # cast back to float32

    def f(x):
        out = st.pure_callback(host_sort, st.ShapeDtypeStruct((3,), np.float32), x)
        st.pure_callback(host_sort, st.ShapeDtypeStruct((3,), np.float32), x)  # unused
        return out * 2
    out = _modes(f)[mode](snp.asarray(np.array([2.0, 3.0, 1.0], np.float32)))
    assert out.dtype == np.float32 and np.asarray(out).tolist() == [6, 4, 2]
    assert len(calls) == (2 if mode == "eager" else 1)     # compiled: the unused one dropped


def test_pure_callback_vmap_methods():
    def host(x, y):
        return np.asarray(x) + np.asarray(y)
    xs = snp.asarray(np.arange(6.0).reshape(3, 2))
    y = snp.asarray(np.array([10.0, 20.0]))
    want = np.asarray(xs) + np.asarray(y)
    shapes = []

    def host_shape(x, y):
        shapes.append((tuple(x.shape), tuple(y.shape)))
        return np.asarray(x) + np.asarray(y)
    for method, fn, seen in [("sequential", host_shape, [((2,), (2,))] * 3),
                             ("expand_dims", host_shape, [((3, 2), (1, 2))]),
                             ("broadcast_all", host_shape, [((3, 2), (3, 2))])]:
        shapes.clear()
        out = st.vmap(lambda a: st.pure_callback(fn, st.ShapeDtypeStruct((2,), xs.dtype), a, y,
                                                 vmap_method=method))(xs)
        np.testing.assert_array_equal(np.asarray(out), want)
        assert shapes == seen, method
    with pytest.raises(ValueError, match="vmap_method"):
        st.pure_callback(host, st.ShapeDtypeStruct((2,), xs.dtype), y, y, vmap_method="legacy")


def test_pure_callback_results_checked_and_not_differentiable():
    spec = st.ShapeDtypeStruct((2,), np.float32)
    with pytest.raises(TypeError, match=r"has shape \(3,\).*declares \(2,\)"):
        st.pure_callback(lambda x: np.zeros(3), spec, X)
    with pytest.raises(TypeError, match="dtype complex128"):
        st.pure_callback(lambda x: np.zeros(2, complex), spec, X)
    with pytest.raises(TypeError, match="dtype int64"):
        st.compile(lambda x: st.pure_callback(lambda v: np.zeros(2, np.int64), spec, x))(X)
    with pytest.raises(TypeError, match="structure"):
        st.pure_callback(lambda x: (np.zeros(2), np.zeros(2)), spec, X)
    with pytest.raises(TypeError, match="cannot be differentiated"):
        st.grad(lambda x: snp.sum(st.pure_callback(lambda v: np.asarray(v), X, x)))(X)
    # no derivative flows into it: fine under grad (the result is a constant)
    g = st.grad(lambda x: snp.sum(x * st.pure_callback(lambda: np.ones(3, np.float32), X)))(X)
    assert np.asarray(g).tolist() == [1, 1, 1]
    with pytest.raises(TypeError, match="callable"):
        st.pure_callback(3, spec, X)


def test_io_callback_kept_and_ordered_under_vmap_refused():
    log = []

    def record(x):
        log.append(float(x))
        return np.asarray(x) * 2

    @st.compile
    def f(x):
        st.io_callback(record, st.ShapeDtypeStruct((), np.float32), x)        # unused: kept
        st.io_callback(record, st.ShapeDtypeStruct((), np.float32), x)        # repeated: kept
        return st.io_callback(record, None, x)
    assert f(snp.asarray(1.5, dtype=snp.float32)) is None
    assert log == [1.5, 1.5, 1.5]
    with pytest.raises(ValueError, match="ordered"):
        st.vmap(lambda v: st.io_callback(record, X[0], v, ordered=True))(X)
    out = st.vmap(lambda v: st.io_callback(record, X[0], v))(X)
    assert np.asarray(out).tolist() == [2, 4, 6]


def test_block_until_ready_and_device_get():
    tree = {"a": X, "b": [X * 2, "text", 3]}
    assert st.block_until_ready(tree) is tree
    got = st.device_get(tree)
    assert isinstance(got["a"], np.ndarray) and got["b"][1:] == ["text", 3]
    np.testing.assert_array_equal(got["b"][0], [2, 4, 6])
    with pytest.raises(TypeError, match="fmt"):
        debug.print(3)
    with pytest.raises(TypeError, match="shape"):
        st.ShapeDtypeStruct((2, -1), np.float32)


def test_effects_in_untaken_branches_under_vmap_do_not_run(capsys):
    def f(x):
        return st.cond(x > 0, lambda v: (debug.print("pos {}", v), v * 2.0)[1],
                       lambda v: (debug.check(v > 100, "neg fired {}", v), v)[1], x)
    xs = snp.asarray(np.array([1.0, 2.0]))
    for g in (st.vmap(f), st.compile(st.vmap(f))):
        np.testing.assert_array_equal(np.asarray(g(xs)), [2.0, 4.0])   # no false CheckError
        assert capsys.readouterr().out.splitlines() == ["pos 1.0", "pos 2.0"]
    with pytest.raises(debug.CheckError, match="neg fired -3.0"):
        st.vmap(f)(snp.asarray(np.array([1.0, -3.0])))
    capsys.readouterr()
    g = st.grad(lambda v: snp.sum(st.vmap(f)(v)))(snp.asarray(np.array([1.0, 200.0])))
    np.testing.assert_array_equal(np.asarray(g), [2.0, 2.0])
    seen = []
    idx = snp.asarray(np.array([0, 2, 1]))
    branches = [lambda v: v, lambda v: (debug.callback(lambda u: seen.append(float(u)), v), v)[1],
                lambda v: -v]
    out = st.vmap(lambda i, v: st.switch(i, branches, v))(idx, snp.asarray(np.array([5., 6., 7.])))
    assert np.asarray(out).tolist() == [5.0, -6.0, 7.0] and seen == [7.0]
