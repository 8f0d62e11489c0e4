"""The cpp backend's native concatenate kernel (src/lowering/backends/cpp/concatenate.py)."""
import ml_dtypes
import numpy as np
import pytest

import starling as st
import starling.numpy as snp


def _native(f, *args):
    """Whether the compiled Program runs the concatenate as a kernel."""
    ir = st.compile(f).lower(*args).ir
    return any(e.primitive.name == "fused_kernel" and
               e.params["program"].eqns[0].primitive.name == "concatenate" for e in ir.eqns)


def _check(parts, axis):
    arrs = [snp.asarray(p) for p in parts]

    def f(*xs):
        return snp.concatenate(list(xs), axis=axis)
    got = st.compile(f)(*arrs)
    want = np.concatenate(parts, axis=axis)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8),
                                  np.ascontiguousarray(want).view(np.uint8))
    return f, arrs


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.bool_, np.complex64,
                                   ml_dtypes.bfloat16, np.uint16])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_values_bit_for_bit(dtype, axis):
    rng = np.random.default_rng(0)
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for s, n in zip(shapes, (1, 5, 2)):
        s[axis] = n
    parts = [(rng.standard_normal(s) * 10).astype(dtype) for s in shapes]
    f, arrs = _check(parts, axis)
    assert _native(f, *arrs)


def test_nan_inf_and_signed_zeros_are_copied_as_bits():
    a = np.array([[np.nan, -0.0, np.inf]], np.float32)
    b = np.array([[-np.inf, 0.0, np.float32(1e-45)]], np.float32)
    _check([a, b], 0)
    _check([a, b], 1)


def test_empty_and_size_one_operands():
    z = np.zeros((4, 0, 3), np.float32)
    one = np.arange(12, dtype=np.float32).reshape(4, 1, 3)
    two = -np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    _check([z, one, z, two, z], 1)
    _check([z, z], 1)                                  # an empty result
    _check([np.ones((0, 5), np.float32), np.ones((0, 2), np.float32)], 1)


def test_large_rows_and_long_leading_runs_use_the_pool():
    rng = np.random.default_rng(1)
    # many rows (parallel by rows)
    _check([rng.standard_normal((512, 4, 64)).astype(np.float32) for _ in range(3)], 1)
    # two long runs along dim 0 (parallel by chunks of each run)
    _check([rng.standard_normal((3, 300_000)).astype(np.float32),
            rng.standard_normal((2, 300_000)).astype(np.float32)], 0)


def test_gradient_of_a_split_is_a_native_concatenate():
    """The transpose of q, k, v slicing sums zero pads: pad_sum makes it one concatenate."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 12)).astype(np.float32)

    def loss(x):
        q, k, v = x[:, :4], x[:, 4:8], x[:, 8:]
        return snp.sum(q * k * 2.0 + snp.sin(v) * k)

    g = st.compile(st.grad(loss))(snp.asarray(x))
    q, k, v = x[:, :4].astype(np.float64), x[:, 4:8], x[:, 8:]
    want = np.concatenate([2 * k, 2 * q + np.sin(v), np.cos(v) * k], axis=1)
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6, atol=1e-6)
    ir = st.compile(st.grad(loss)).lower(snp.asarray(x)).ir
    assert not any(e.primitive.name == "concatenate" for e in ir.eqns)   # inside a kernel


def test_symbolic_shapes_fall_back_to_numpy():
    n = st.ShapeVar("n", min=1, max=64)
    f = st.compile(lambda a, b: snp.concatenate([a, b], axis=0),
                   dynamic_shapes=st.ShapesSpec({"a": {0: n}, "b": {0: n}}))
    for n in (1, 3):
        a = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
        out = f(snp.asarray(a), snp.asarray(a + 1))
        np.testing.assert_array_equal(np.asarray(out), np.concatenate([a, a + 1]))
