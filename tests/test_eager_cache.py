"""The eager transformation cache (src/transforms/eager_cache.py): eager grad / value_and_grad /
vjp / vmap reuse derived programs across calls.

Every result is compared bit for bit (dtype, weak type, signs of zeros, NaN positions) with
the same call made with the cache off, which re-traces the function; the cache counters show
which calls the cache served. The cache must follow whatever the function reads on each call
(closures, globals, argument dtypes / shapes / weak types / pytree structure, Python scalars)
and run the function's Python once per call, as re-tracing does.
"""
from __future__ import annotations

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.transforms import eager_cache


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache, on, deriving on the first sighting."""
    saved = eager_cache.is_enabled(), eager_cache._derive_first[0]
    eager_cache.set_enabled(True)
    eager_cache._derive_first[0] = True
    eager_cache.clear()
    yield
    eager_cache.clear()
    eager_cache.set_enabled(saved[0])
    eager_cache._derive_first[0] = saved[1]


def _assert_same_bits(got, want):
    from starling import tree as tree_util
    g_leaves, g_tree = tree_util.flatten(got)
    w_leaves, w_tree = tree_util.flatten(want)
    assert g_tree == w_tree
    for g, w in zip(g_leaves, w_leaves):
        if not hasattr(w, "dtype"):
            assert g == w
            continue
        assert (g.dtype, g.shape, g.weak_type) == (w.dtype, w.shape, w.weak_type)
        gb, wb = np.asarray(g), np.asarray(w)
        assert gb.tobytes() == wb.tobytes(), (gb, wb)


def _uncached(call):
    st.config.update("eager_cache", False)
    try:
        assert not st.config.read("eager_cache")
        return call()
    finally:
        st.config.update("eager_cache", True)


def _hits():
    return eager_cache.stats().get("hit", 0)


def _check(call, n=3, served=True):
    """Calls ``call`` n times with the cache and once without; all results must agree bit for
    bit; ``served``: the cache answered every call after the first."""
    want = _uncached(call)
    h0 = _hits()
    for _ in range(n):
        _assert_same_bits(call(), want)
    if served:
        assert _hits() - h0 >= n - 1, eager_cache.stats()
    return want


# ---- bit-identical results -----------------------------------------------------------------------

def _mlp_loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = snp.maximum(h, 0.0)
    logp = h - snp.logsumexp(h, axis=-1, keepdims=True)
    return -snp.sum(logp * y) / x.shape[0]


def _mlp(dt=np.float32, sizes=(6, 5, 4, 3), batch=7, seed=0):
    rng = np.random.default_rng(seed)
    params = [(snp.asarray((rng.normal(size=(m, n)) / np.sqrt(m)).astype(dt)),
               snp.asarray(np.zeros(n, dt))) for m, n in zip(sizes[:-1], sizes[1:])]
    x = rng.normal(size=(batch, sizes[0])).astype(dt)
    x[0] = 0.0   # ReLU ties (max(0, 0)) and zero rows
    x[1, 0] = -0.0
    y = np.eye(sizes[-1], dtype=dt)[rng.integers(0, sizes[-1], batch)]
    return params, snp.asarray(x), snp.asarray(y)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_value_and_grad_mlp_bit_identical(dt):
    params, x, y = _mlp(dt)
    _check(lambda: st.value_and_grad(_mlp_loss)(params, x, y))
    _check(lambda: st.grad(_mlp_loss, argnums=(0, 1))(params, x, y))


def test_vjp_forward_and_backward_bit_identical():
    params, x, _ = _mlp()

    def f(params, x):
        h = snp.tanh(x @ params[0][0] + params[0][1])
        return {"h": h, "s": snp.sum(h * h, axis=0)}

    rng = np.random.default_rng(1)
    cts = {"h": snp.asarray(rng.normal(size=(7, 5)).astype(np.float32)),
           "s": snp.asarray(np.array([0.0, -0.0, 1.0, np.nan, -2.0], np.float32))}

    def call():
        out, fn = st.vjp(f, params, x)
        return out, fn(cts), fn(cts)
    _check(call)


def test_vmap_and_per_example_grads_bit_identical():
    params, x, y = _mlp()
    per_example = st.vmap(st.grad(lambda p, xi, yi: _mlp_loss(p, xi[None], yi[None])),
                          in_axes=(None, 0, 0))
    _check(lambda: per_example(params, x, y))
    _check(lambda: st.vmap(lambda a: snp.sort(a) * 2.0, in_axes=1, out_axes=0)(x))


def test_nested_transformations_bit_identical():
    f = lambda x: snp.sum(snp.sin(x) * snp.exp(-x * x))  # noqa: E731
    x = snp.asarray(np.linspace(-2, 2, 9, dtype=np.float64))
    _check(lambda: st.grad(st.grad(lambda s: f(x * s)))(snp.asarray(np.float64(0.7))))
    _check(lambda: st.vmap(st.grad(f))(x.reshape(3, 3)))


def test_hard_values_bit_identical():
    x = snp.asarray(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 1.0, -1.0], np.float32))

    def f(x):
        return snp.sum(snp.maximum(x, 1.0) + snp.minimum(x, -0.0) + snp.abs(x) * snp.sqrt(
            snp.abs(x)) + snp.clip(x, -1.0, 1.0))
    _check(lambda: st.value_and_grad(f)(x))


def test_custom_jvp_and_custom_vjp_bit_identical():
    @st.custom_jvp
    def softplus(x):
        return snp.log1p(snp.exp(x))

    @softplus.defjvp
    def _softplus_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t / (1.0 + snp.exp(-x))

    @st.custom_vjp
    def clip_grad(x):
        return x

    def _fwd(x):
        return x, None

    def _bwd(_, g):
        return (snp.clip(g, -0.5, 0.5),)
    clip_grad.defvjp(_fwd, _bwd)

    x = snp.asarray(np.array([-3.0, 0.0, 2.0, 30.0], np.float32))
    _check(lambda: st.grad(lambda x: snp.sum(clip_grad(softplus(x)) * 3.0))(x))
    # vmap keeps the custom rules as call records: the derived program is replayed through
    # the trace machinery, and a later grad still applies the rule
    x2 = x.reshape(2, 2)
    _check(lambda: st.vmap(softplus)(x2))
    _check(lambda: st.grad(lambda x: snp.sum(st.vmap(softplus)(x)))(x2))
    _check(lambda: st.vmap(st.grad(lambda x: snp.sum(clip_grad(x * x))))(x2))


# ---- the cache follows what each call reads ----------------------------------------------------

def test_closed_over_array_changes_are_seen():
    w = [snp.asarray(np.float32(2.0))]
    f = lambda x: snp.sum(x * w[0])  # noqa: E731
    x = snp.asarray(np.ones(3, np.float32))
    for value in (2.0, 3.0, -1.0):
        w[0] = snp.asarray(np.float32(value))
        _check(lambda: st.grad(f)(x))
        assert np.all(np.asarray(st.grad(f)(x)) == value)


SCALE = 2.0


def test_python_scalars_from_closures_and_globals_key_the_cache():
    global SCALE
    x = snp.asarray(np.arange(3, dtype=np.float32))
    k = [1.0]

    def f(x):
        return snp.sum(x * x) * SCALE + snp.sum(x) * k[0]
    try:
        for scale, kk in ((2.0, 1.0), (5.0, 1.0), (5.0, -4.0)):
            SCALE, k[0] = scale, kk
            _check(lambda: st.grad(f)(x))
            np.testing.assert_array_equal(np.asarray(st.grad(f)(x)),
                                          2 * scale * np.arange(3) + kk)
    finally:
        SCALE = 2.0


def test_static_arguments_key_the_cache():
    def f(x, n, mode):
        y = x ** n
        return snp.sum(y if mode == "plain" else snp.tanh(y))

    x = snp.asarray(np.array([0.5, -1.5, 2.0], np.float32))
    for n in (2, 3, 2):
        for mode in ("plain", "tanh"):
            g = _check(lambda: st.grad(f)(x, n, mode))
            if mode == "plain":
                np.testing.assert_allclose(np.asarray(g), n * np.asarray(x) ** (n - 1),
                                           rtol=1e-6)


def test_dtypes_shapes_and_weak_types_key_the_cache():
    f = lambda x: snp.sum(snp.sin(x) * 3.0)  # noqa: E731
    for x in (snp.asarray(np.ones(3, np.float32)), snp.asarray(np.ones(3, np.float64)),
              snp.asarray(np.ones((2, 2), np.float32)), 1.5, snp.asarray(np.float32(1.5)),
              snp.asarray(np.ones(3, np.float32)).astype(snp.bfloat16)):
        v, g = _check(lambda: st.value_and_grad(f)(x))
        want_dtype = np.asarray(x).dtype if hasattr(x, "dtype") else np.float32
        assert g.dtype == want_dtype
        # the weak Python float stays weak through the value, as without the cache
        assert v.weak_type == isinstance(x, float)


def test_pytree_structure_and_argnums_key_the_cache():
    def f(p):
        return snp.sum(p["a"] * 2.0) + snp.sum(p["b"] ** 2)
    a = snp.asarray(np.ones(2, np.float32))
    b = snp.asarray(np.full(2, 3.0, np.float32))
    g = _check(lambda: st.grad(f)({"a": a, "b": b}))
    assert set(g) == {"a", "b"}
    g = _check(lambda: st.grad(lambda p: f({"a": p[1], "b": p[0]}))((a, b)))
    assert isinstance(g, tuple)
    np.testing.assert_array_equal(np.asarray(g[0]), 2.0 * np.ones(2))   # d/db: 2 b at b = a
    h = lambda x, y: snp.sum(x * y * y)  # noqa: E731
    for argnums in (0, 1, (0, 1)):
        _check(lambda: st.value_and_grad(h, argnums=argnums)(a, b))
    _check(lambda: st.value_and_grad(lambda x: (snp.sum(x), {"aux": x * 2, "n": 3}),
                                     has_aux=True)(a))


def test_vmap_axes_key_the_cache():
    x = snp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    f = lambda a, b: a * b + 1.0  # noqa: E731
    for in_axes, out_axes in ((0, 0), (1, 0), ((0, None), 1), ((1, None), 0)):
        b = x[0] if in_axes in ((0, None),) else x[:, 0] if in_axes == ((1, None)) else x
        _check(lambda: st.vmap(f, in_axes=in_axes, out_axes=out_axes)(x, b))


def test_python_runs_once_per_call_with_or_without_cache():
    calls = []

    def f(x):
        calls.append(1)
        print("traced")
        return snp.sum(x * x)
    x = snp.asarray(np.ones(3, np.float32))
    for k in range(1, 5):
        st.grad(f)(x)
        assert len(calls) == k
    assert _hits() >= 3
    calls.clear()
    _uncached(lambda: st.grad(f)(x))
    assert len(calls) == 1


def test_functions_that_read_values_are_retraced_and_correct():
    def f(x):
        if float(snp.sum(x)) > 0:
            return snp.sum(x * x)
        return snp.sum(snp.sin(x))
    for v in (1.0, -1.0, 2.0, -3.0):
        x = snp.asarray(np.full(3, v, np.float32))
        g = _check(lambda: st.grad(f)(x), served=False)
        want = 2 * v if v > 0 else np.cos(np.float32(v))
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6)
    assert eager_cache.stats().get("retraced:read_values", 0) >= 1


def test_first_sighting_is_retraced_then_derived():
    eager_cache._derive_first[0] = False
    x = snp.asarray(np.ones(3, np.float32))
    f = lambda x: snp.sum(x ** 3)  # noqa: E731
    outs = [st.grad(f)(x) for _ in range(4)]
    s = eager_cache.stats()
    assert (s.get("first_sighting"), s.get("derived"), s.get("hit")) == (1, 1, 2), s
    for o in outs[1:]:
        _assert_same_bits(o, outs[0])


def test_errors_are_raised_as_without_the_cache():
    x = snp.asarray(np.ones(3, np.float32))
    for _ in range(2):
        with pytest.raises(TypeError, match="scalar"):
            st.grad(lambda x: x * 2.0)(x)
    out, fn = st.vjp(lambda x: x * 2.0, x)
    with pytest.raises((TypeError, ValueError)):
        fn(snp.asarray(np.ones(4, np.float32)))


def test_config_option_is_checked():
    with pytest.raises(TypeError, match="eager_cache.*bool"):
        st.config.update("eager_cache", 1)
    assert st.config.eager_cache is True


RULE_SCALE = [None]


def test_custom_rule_inside_a_staged_body_reads_its_globals_on_every_call():
    """A custom_jvp inside a cond body is staged with its rule as a live function: the rule's
    closure can change between calls, so such calls are re-traced, never served stale."""
    @st.custom_jvp
    def f(x):
        return snp.sin(x)

    @f.defjvp
    def _f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), t * RULE_SCALE[0]

    def g(x):
        return snp.sum(st.cond(snp.sum(x) > 0, f, lambda x: x * 2.0, x))
    x = snp.asarray(np.array([0.5, 1.0], np.float32))
    for scale in (1.0, 3.0, -2.0):
        RULE_SCALE[0] = snp.asarray(np.float32(scale))
        grad = _check(lambda: st.grad(g)(x), served=False)
        np.testing.assert_array_equal(np.asarray(grad), np.full(2, scale, np.float32))
    s = eager_cache.stats()
    assert s.get("hit", 0) == 0 and s.get("retraced:a custom_jvp / custom_vjp call inside a "
                                          "staged body", 0) >= 9, s
