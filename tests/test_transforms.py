"""The transformation API: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian,
vmap, custom_jvp, custom_vjp, stop_gradient, make_ir; composition and error messages."""
import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.core.trace import LeakedTracerError
from starling.test_util import GradCheckError, check_grads


def f64(x):
    return snp.asarray(np.asarray(x, np.float64))


def test_grad_closed_forms_and_higher_order():
    f = lambda x: x ** 3 + 2.0 * x  # noqa: E731
    x = f64(1.5)
    assert float(st.grad(f)(x)) == pytest.approx(3 * 1.5 ** 2 + 2)
    assert float(st.grad(st.grad(f))(x)) == pytest.approx(9.0)
    assert float(st.grad(st.grad(st.grad(f)))(x)) == pytest.approx(6.0)
    _, t = st.jvp(st.grad(f), (x,), (f64(1.0),))
    assert float(t) == pytest.approx(9.0)


def test_pytrees_argnums_has_aux():
    def loss(params, x, scale):
        y = snp.tanh(x @ params["w"] + params["b"])
        return snp.sum(y * y) * scale, {"y": y}

    rng = np.random.default_rng(0)
    params = {"w": f64(rng.normal(size=(3, 2))), "b": f64(rng.normal(size=(2,)))}
    x = f64(rng.normal(size=(4, 3)))
    (val, aux), g = st.value_and_grad(loss, has_aux=True)(params, x, 2.0)
    assert set(g) == {"w", "b"} and g["w"].shape == (3, 2)
    assert aux["y"].shape == (4, 2)
    gp, gx = st.grad(lambda p, x: loss(p, x, 2.0)[0], argnums=(0, 1))(params, x)
    assert gx.shape == (4, 3)
    check_grads(lambda w, b, x: loss({"w": w, "b": b}, x, 2.0)[0],
                (params["w"], params["b"], x), order=2)


def test_perturbation_confusion():
    # d/dx [x * d/dy (x * y)] = d/dx [x * x] = 2x
    g = st.grad(lambda x: x * st.grad(lambda y: x * y)(f64(3.0)))(f64(3.0))
    assert float(g) == pytest.approx(6.0)
    # d/dx [d/dy (x*y) at y=x] with closures over the outer tracer
    h = st.grad(lambda x: st.grad(lambda y: snp.sin(x * y))(x))(f64(0.4))
    x = 0.4
    expect = -np.sin(x * x) * x * x * 2 + np.cos(x * x) * 1  # d/dx [x cos(x^2)]
    expect = np.cos(x * x) - 2 * x * x * np.sin(x * x)
    assert float(h) == pytest.approx(expect)


def test_integer_inputs():
    with pytest.raises(TypeError, match="floating"):
        st.grad(lambda x: x * 2.0)(snp.asarray(3))
    g = st.grad(lambda x, n: x * n, allow_int=False)(f64(2.0), snp.asarray(3))
    assert float(g) == 3.0
    _, vjp_fn = st.vjp(lambda x, n: x * n, f64(2.0), snp.asarray(3))
    gx, gn = vjp_fn(f64(1.0))
    assert float(gx) == 3.0 and gn.dtype == st.numpy.float0
    ga = st.grad(lambda x, n: x * n, argnums=1, allow_int=True)(f64(2.0), snp.asarray(3))
    assert ga.dtype == st.numpy.float0


def test_complex_convention():
    z = snp.asarray(3 + 4j, dtype=np.complex128)
    g = st.grad(lambda z: snp.abs(z) ** 2)(z)
    assert complex(g) == pytest.approx(6 - 8j)
    gh = st.grad(lambda z: z * z, holomorphic=True)(z)
    assert complex(gh) == pytest.approx(2 * (3 + 4j))
    with pytest.raises(TypeError, match="holomorphic"):
        st.grad(lambda z: z * z)(z)


def test_grad_errors():
    with pytest.raises(TypeError, match=r"scalar \(shape \(\)\), got shape \(3,\)"):
        st.grad(lambda x: x * 2.0)(f64([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="argnums 2"):
        st.grad(lambda x, y: x * y, argnums=2)(f64(1.0), f64(2.0))
    with pytest.raises(TypeError, match="pair"):
        st.grad(lambda x: x, has_aux=True)(f64(1.0))


def test_jvp_errors():
    with pytest.raises(ValueError, match="shape"):
        st.jvp(lambda x: x, (f64([1.0, 2.0]),), (f64([1.0]),))
    with pytest.raises(TypeError, match="dtype"):
        st.jvp(lambda x: x, (f64(1.0),), (snp.asarray(1.0, dtype=np.float32),))
    with pytest.raises(TypeError, match="tree structures"):
        st.jvp(lambda x, y: x, (f64(1.0), f64(1.0)), (f64(1.0),))


def test_linearize_matches_jvp():
    f = lambda x: snp.sin(x) * x  # noqa: E731
    x = f64([0.1, 0.5, 1.0])
    y, f_jvp = st.linearize(f, x)
    t = f64([1.0, -2.0, 0.5])
    np.testing.assert_allclose(np.asarray(f_jvp(t)), np.asarray(st.jvp(f, (x,), (t,))[1]))


def test_jacobians_and_hessian():
    a = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.0]])
    f = lambda x: snp.asarray(a) @ snp.sin(x)  # noqa: E731
    x = f64([0.3, -0.7])
    want = a * np.cos(np.asarray(x))[None, :]
    np.testing.assert_allclose(np.asarray(st.jacfwd(f)(x)), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(st.jacrev(f)(x)), want, rtol=1e-12)
    q = np.array([[2.0, 1.0], [0.0, 3.0]])
    h = st.hessian(lambda x: x @ snp.asarray(q) @ x)(x)
    np.testing.assert_allclose(np.asarray(h), q + q.T, rtol=1e-12)


def test_vmap_axes_and_errors():
    x = f64(np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(np.asarray(st.vmap(lambda r: r * 2.0, in_axes=1, out_axes=1)(x)),
                               np.asarray(x) * 2)
    out = st.vmap(lambda a, b: a + b, in_axes=(0, None))(x, f64([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(np.asarray(out), np.asarray(x) + 1)
    out = st.vmap(lambda d: d["a"] * d["b"], in_axes=({"a": 0, "b": None},))(
        {"a": x, "b": f64(2.0)})
    np.testing.assert_allclose(np.asarray(out), np.asarray(x) * 2)
    out = st.vmap(st.vmap(lambda a: a * a), in_axes=-1)(x)
    np.testing.assert_allclose(np.asarray(out), (np.asarray(x) ** 2).T)
    out = st.vmap(lambda: f64(1.0), axis_size=3)()
    assert out.shape == (3,)
    with pytest.raises(ValueError, match=r"inconsistent sizes.*size 2.*size 3"):
        st.vmap(lambda a, b: a + b)(f64(np.zeros(2)), f64(np.zeros(3)))
    with pytest.raises(ValueError, match="out of range"):
        st.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(ValueError, match="axis_size"):
        st.vmap(lambda a: a, in_axes=None)(x)


def test_leaked_tracer_is_reported():
    leaked = []
    st.grad(lambda x: (leaked.append(x), x * 2.0)[1])(f64(1.0))
    with pytest.raises(LeakedTracerError):
        leaked[0] * 2.0
    leaked.clear()
    st.vmap(lambda x: (leaked.append(x), x)[1])(f64([1.0, 2.0]))
    with pytest.raises(LeakedTracerError):
        snp.sin(leaked[0])


def test_custom_jvp_and_vjp_compose():
    @st.custom_jvp
    def safe_log1pexp(x):
        return snp.log1p(snp.exp(x))

    @safe_log1pexp.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return safe_log1pexp(x), t * (1.0 / (1.0 + snp.exp(-x)))

    x = f64([-50.0, 0.0, 50.0])
    g = st.vmap(st.grad(safe_log1pexp))(x)
    np.testing.assert_allclose(np.asarray(g), 1 / (1 + np.exp(-np.asarray(x))), rtol=1e-12)
    gg = st.grad(lambda v: st.vmap(safe_log1pexp)(v).sum())(x)
    np.testing.assert_allclose(np.asarray(gg), np.asarray(g))

    @st.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda _, ct: (snp.clip(ct, -1.0, 1.0),))
    g = st.grad(lambda v: (clip_grad(v) * 10.0).sum())(f64([1.0, 2.0]))
    np.testing.assert_allclose(np.asarray(g), [1.0, 1.0])
    gv = st.vmap(st.grad(lambda v: clip_grad(v) * 0.5))(f64([1.0, 2.0]))
    np.testing.assert_allclose(np.asarray(gv), [0.5, 0.5])
    with pytest.raises(TypeError, match="forward-mode"):
        st.jvp(clip_grad, (f64(1.0),), (f64(1.0),))


def test_custom_jvp_nondiff_argnums():
    from functools import partial

    @partial(st.custom_jvp, nondiff_argnums=(0,))
    def apply(fn, x):
        return fn(x)

    @apply.defjvp
    def _(fn, primals, tangents):
        return apply(fn, primals[0]), tangents[0] * 42.0

    assert float(st.grad(lambda x: apply(snp.sin, x))(f64(0.1))) == 42.0


def test_custom_rule_cotangent_dtypes():
    # another float precision is cast to the primal's; integer or complex-for-real values are
    # a bug in the rule and raise (a cast would truncate / drop the imaginary part silently)
    def make(ct_of):
        @st.custom_vjp
        def g(x):
            return x * 2

        g.defvjp(lambda x: (x * 2, None), lambda r, ct: (ct_of(ct),))
        return lambda x: snp.sum(g(x))

    x = snp.ones(3, dtype=snp.float32)
    g = st.grad(make(lambda ct: np.full(ct.shape, 1.5, np.float64)))(x)
    assert g.dtype == snp.float32 and np.all(np.asarray(g) == 1.5)
    for bad, dt in ((lambda ct: np.ones(ct.shape, np.int32), "int32"),
                    (lambda ct: np.full(ct.shape, 1 + 2j, np.complex64), "complex64")):
        with pytest.raises(TypeError, match=rf"custom_vjp g: bwd cotangent has dtype {dt}, but "
                                            r"its primal float32\[3\] needs a float32 one"):
            st.grad(make(bad))(x)

    @st.custom_jvp
    def h(x):
        return x * 2

    h.defjvp(lambda p, t: (h(p[0]), snp.ones(3, dtype=snp.int32)))
    with pytest.raises(TypeError, match=r"custom_jvp h: tangent output has dtype int32"):
        st.jvp(h, (x,), (x,))


def test_stop_gradient():
    g = st.grad(lambda x: x * st.stop_gradient(x))(f64(3.0))
    assert float(g) == 3.0
    out = st.stop_gradient({"a": f64(1.0)})
    assert float(out["a"]) == 1.0


def test_classic_traps():
    # sqrt at 0 through the double-where pattern is finite
    def safe_sqrt(x):
        return snp.where(x > 0, snp.sqrt(snp.where(x > 0, x, 1.0)), 0.0)
    assert float(st.grad(safe_sqrt)(f64(0.0))) == 0.0
    # logsumexp with -inf entries
    x = f64([-np.inf, 0.0, 0.0])
    g = st.grad(lambda v: snp.logsumexp(v))(x)
    np.testing.assert_allclose(np.asarray(g), [0.0, 0.5, 0.5])
    # softmax row of all -inf: logsumexp value -inf, gradient not NaN
    g2 = st.grad(lambda v: snp.logsumexp(v))(f64([-np.inf, -np.inf]))
    assert not np.any(np.isnan(np.asarray(g2)))
    # duplicate indices in .at[].add
    idx = snp.asarray([0, 0, 2])
    g3 = st.grad(lambda v: (snp.zeros(3, dtype=np.float64).at[idx].add(v) ** 2).sum())(
        f64([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(np.asarray(g3), [6.0, 6.0, 6.0])


def test_make_ir_of_grad_is_readable():
    text = str(st.make_ir(st.grad(lambda x: snp.sin(x) * x))(f64(1.0)))
    assert text.startswith("{ lambda") and "sin" in text and "cos" in text


def test_check_grads_catches_a_wrong_rule():
    from starling.core.primitive import Primitive
    from starling.arrays.ops import rules as R
    bad = Primitive("test_bad_square")
    bad.impl = lambda x: x * x
    bad.abstract_eval = lambda x: x
    R.defjvp(bad, lambda g, ans, x: g * x)  # wrong: should be 2 x g
    R.batch_unary_same_axis(bad)
    with pytest.raises(GradCheckError):
        check_grads(lambda x: bad.bind(x), (f64(1.3),), order=1, modes=("fwd",))


def test_has_aux_returns_concrete_values():
    (val, aux), g = st.value_and_grad(lambda x: ((x ** 2).sum(), {"a": x * 2}), has_aux=True)(
        f64([1.0, 2.0]))
    assert type(aux["a"]) is st.Array and aux["a"].tolist() == [2.0, 4.0]
    g2, aux2 = st.vmap(st.grad(lambda x: ((x ** 2).sum(), x * 2), has_aux=True))(
        f64([[1.0], [3.0]]))
    assert type(aux2) is st.Array and aux2.tolist() == [[2.0], [6.0]]
    _, _, aux3 = st.jvp(lambda x: (x * 3, x * 4), (f64(1.0),), (f64(1.0),), has_aux=True)
    assert type(aux3) is st.Array and float(aux3) == 4.0


def test_argnums_and_jacrev_errors():
    with pytest.raises(ValueError, match="more than once"):
        st.grad(lambda x, y: x * y, argnums=(0, 0))(f64(2.0), f64(3.0))
    with pytest.raises(TypeError, match="argnums must be an int"):
        st.grad(lambda x: x, argnums=1.0)(f64(2.0))
    with pytest.raises(TypeError, match="complex output"):
        st.jacrev(lambda x: snp.exp(1j * x))(f64([0.5]))
    np.testing.assert_allclose(np.asarray(st.jacfwd(lambda x: snp.exp(1j * x))(f64([0.5]))),
                               [[1j * np.exp(0.5j)]])


def test_traced_item_and_leaked_concretization():
    from starling.core.trace import ConcretizationError
    with pytest.raises(ConcretizationError):
        st.vmap(lambda x: x.item())(f64([1.0, 2.0]))
    leaked = []
    st.grad(lambda x: (leaked.append(x), x * 1.0)[1])(f64(1.0))
    with pytest.raises(LeakedTracerError):
        np.asarray(leaked[0])


def test_array_of_traced_values_stacks():
    j = st.jacrev(lambda x: snp.array([x, x ** 2]))(f64(2.0))
    np.testing.assert_allclose(np.asarray(j), [1.0, 4.0])


def test_compiled_grad_keeps_eager_weak_type():
    f = lambda x: x * x  # noqa: E731
    eager, compiled = st.grad(f)(3.0), st.compile(st.grad(f))(3.0)
    assert eager.weak_type == compiled.weak_type and float(compiled) == 6.0
