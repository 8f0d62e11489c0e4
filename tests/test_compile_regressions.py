"""Regressions found by QA of the compile issue (each with the value NumPy / eager gives)."""
from __future__ import annotations

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.lowering import cache
from starling.transforms.compile import DonatedBufferError
from starling.transforms.dynamic_spec import ShapesSpec, ShapeVar

BACKENDS = ["numpy_ref"] + (["cpp"] if cache.find_compiler() is not None else [])


@pytest.mark.parametrize("backend", BACKENDS)
def test_donated_argument_returned_unchanged_gives_a_valid_output(backend):
    ident = st.compile(lambda x: x, donate_argnums=(0,), backend=backend)
    x = snp.arange(3.0)
    out = ident(x)
    np.testing.assert_array_equal(np.asarray(out), [0.0, 1.0, 2.0])
    with pytest.raises(DonatedBufferError):
        np.asarray(x)
    pair = st.compile(lambda x, y: (x, x * 2 + y), donate_argnums=(0,), backend=backend)
    a, b = pair(snp.arange(3.0), snp.ones(3))
    np.testing.assert_array_equal(np.asarray(a), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(b), [1.0, 3.0, 5.0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, shapes", [
    (lambda x: x.sum(axis=0), [(3, 0)]),
    (lambda x: x.mean(axis=0), [(3, 0)]),
    (lambda x: x.max(axis=0, initial=-1.0), [(3, 0)]),
    (lambda x: x.sum(axis=(0, 2)), [(2, 0, 3)]),
    (lambda x, w: (x @ w).sum(axis=0), [(3, 4), (4, 0)]),
])
def test_reductions_with_empty_kept_dims(backend, fn, shapes):
    args = [np.ones(s, np.float32) for s in shapes]
    got = st.compile(fn, backend=backend)(*[snp.asarray(a) for a in args])
    want = fn(*[snp.asarray(a) for a in args])
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("backend", BACKENDS)
def test_more_outputs_than_a_kernel_takes(backend):
    f = st.compile(lambda x: tuple((x * i).sum() for i in range(600)), backend=backend)
    out = f(snp.asarray([1.0, 2.0, 3.0]))
    assert len(out) == 600
    np.testing.assert_array_equal([float(o) for o in out], [6.0 * i for i in range(600)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_more_dims_than_a_kernel_takes(backend):
    x = np.arange(6, dtype=np.float32).reshape((1,) * 31 + (2, 3))
    got = st.compile(lambda x: snp.sin(x.T) * 2, backend=backend)(snp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.sin(x.T) * 2, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [lambda x: x.shape[0] * x, lambda x: x.shape[0] + x,
                                lambda x: x.shape[0] - x, lambda x: (x.shape[0] - 1) * x],
                         ids=["mul", "add", "sub", "expr"])
def test_symbolic_dim_on_the_left_of_an_operator(backend, fn):
    n = ShapeVar("n", min=1, max=64)
    f = st.compile(fn, dynamic_shapes=ShapesSpec({"x": {0: n}}), backend=backend)
    for size in (1, 3, 7):
        x = np.arange(size, dtype=np.float32)
        np.testing.assert_array_equal(np.asarray(f(snp.asarray(x))),
                                      np.asarray(fn(snp.asarray(x))))
    assert f.num_compiles == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_exported_dynamic_function_inside_a_dynamic_compile(backend):
    n = ShapeVar("n", min=1, max=64)
    exported = st.export(lambda x: snp.sin(x) * 2, snp.ones(3, dtype=snp.float32),
                         dynamic_shapes=ShapesSpec({"x": {0: n}}))
    g = st.deserialize(exported.serialize())
    m = ShapeVar("m", min=1, max=16)
    f = st.compile(lambda x: g(x.reshape(-1)) + 1, dynamic_shapes=ShapesSpec({"x": {0: m}}),
                   backend=backend)
    for rows in (1, 3, 5):
        x = np.linspace(-2, 2, rows * 2, dtype=np.float32).reshape(rows, 2)
        np.testing.assert_allclose(np.asarray(f(snp.asarray(x))), np.sin(x.ravel()) * 2 + 1,
                                   rtol=1e-6)
    assert f.num_compiles == 1
    # a derived dim that cannot be read from the caller's shapes is a clear error
    k = ShapeVar("k", min=1, max=8)
    g2 = st.deserialize(st.export(lambda x: x * 2, snp.ones(4, dtype=snp.float32),
                                  dynamic_shapes=ShapesSpec({"x": {0: k * 2}})).serialize())
    h = st.compile(lambda x: g2(x), dynamic_shapes=ShapesSpec({"x": {0: m}}), backend=backend)
    with pytest.raises(ValueError, match="declared alone"):
        h(snp.ones(4, dtype=snp.float32))


def test_list_of_traced_values_is_stacked():
    f = st.compile(lambda x: snp.tanh(x))
    np.testing.assert_allclose(np.asarray(f([1.0, 2.0])), np.tanh([1.0, 2.0]), rtol=1e-6)
    g = st.grad(lambda a: snp.sum(snp.asarray([a, 2 * a, 1.0]) ** 2))
    assert float(g(3.0)) == pytest.approx(30.0)   # d/da (a^2 + 4a^2 + 1) = 10a
    h = st.compile(lambda x: snp.asarray([[x[0], 1.0], [x[1], 2]]))
    np.testing.assert_array_equal(np.asarray(h(snp.asarray([5.0, 6.0]))), [[5, 1], [6, 2]])


def test_threads_making_the_first_call_compile_once():
    import threading
    f = st.compile(lambda x: snp.sin(x) * 2 + 1)
    x = snp.linspace(0, 1, 1000)
    results, barrier = [], threading.Barrier(4)

    def work():
        barrier.wait()
        results.append(np.asarray(f(x)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert f.num_compiles == 1
    for r in results:
        np.testing.assert_allclose(r, np.sin(np.linspace(0, 1, 1000)) * 2 + 1, rtol=1e-6)
