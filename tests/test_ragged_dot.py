"""lax.ragged_dot (grouped GEMM) beyond the generated OpInfo checks (tests/opinfo/linear.py):
a mixture-of-experts layer against a per-expert NumPy loop, second-order gradients, the weight
gradient's own mode, traced group sizes (clamped), compile, and the errors."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as hst

import starling
import starling.numpy as snp
from starling import lax
from starling.arrays.ops.ragged_dot import ragged_dot_p
from starling.test_util import check_grads
from starling.transforms.stage import make_ir


def _reference(x, w, sizes):
    """float64 product, one expert at a time (independent of the primitive's grouping code)."""
    out = np.zeros((x.shape[0], w.shape[-1]))
    start = 0
    for i, s in enumerate(sizes):
        s = max(int(s), 0)
        out[start:start + s] = x[start:start + s].astype(np.float64) @ w[i].astype(np.float64)
        start += s
    return out


@settings(max_examples=40, deadline=None)
@given(hst.integers(1, 5), hst.integers(0, 4), hst.integers(1, 4), hst.integers(0, 9),
       hst.data())
def test_matches_per_group_loop(g, k, n, m, data):
    sizes = data.draw(hst.lists(hst.integers(0, m), min_size=g, max_size=g))
    while sum(sizes) > m:   # shrink the largest group until the rows fit
        sizes[int(np.argmax(sizes))] -= 1
    rng = np.random.default_rng(data.draw(hst.integers(0, 2**16)))
    x, w = rng.standard_normal((m, k)), rng.standard_normal((g, k, n))
    got = lax.ragged_dot(x, w, np.array(sizes, np.int64))
    np.testing.assert_allclose(np.asarray(got), _reference(x, w, sizes), rtol=1e-12, atol=1e-12)
    compiled = starling.compile(lambda a, b, s: lax.ragged_dot(a, b, s))
    np.testing.assert_allclose(np.asarray(compiled(x, w, np.array(sizes, np.int64))),
                               _reference(x, w, sizes), rtol=1e-12, atol=1e-12)


def test_mixture_of_experts_layer_and_its_gradients():
    """Tokens sorted by expert through a two-layer expert MLP: values and both weight gradients
    against finite differences (check_grads, orders 1 and 2: the second order runs the
    ``contract`` mode's own transposes)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((10, 4))
    w1, w2 = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 5, 2))
    sizes = np.array([4, 1, 5], np.int32)

    def moe(x, w1, w2):
        return lax.ragged_dot(snp.tanh(lax.ragged_dot(x, w1, sizes)), w2, sizes)

    want = _reference(np.tanh(_reference(x, w1, sizes)), w2, sizes)
    np.testing.assert_allclose(np.asarray(moe(x, w1, w2)), want, rtol=1e-12)
    check_grads(moe, [x, w1, w2], order=2, atol=1e-5, rtol=1e-5)


def test_weight_gradient_is_the_contract_mode():
    """d/dw sum(ragged_dot(x, w) * c) for group i is x[rows_i]^T @ c[rows_i]; rows past the last
    group contribute nothing."""
    rng = np.random.default_rng(2)
    x, c = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    w = rng.standard_normal((2, 3, 2))
    sizes = np.array([2, 3])
    gw = starling.grad(lambda w: snp.sum(lax.ragged_dot(x, w, sizes) * c))(w)
    want = np.stack([x[:2].T @ c[:2], x[2:5].T @ c[2:5]])
    np.testing.assert_allclose(np.asarray(gw), want, rtol=1e-12)
    prog = str(make_ir(starling.grad(lambda w: snp.sum(lax.ragged_dot(x, w, sizes) * c)))(w))
    assert "ragged_dot[mode='contract'" in prog and "dot_general" not in prog


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16])
def test_low_precision_accumulates_in_float32(dt):
    """Each group's sum runs in float32 and rounds once (1 + 2**-9 * 8 terms would be lost if the
    partial sums were rounded to the format)."""
    x = np.full((3, 8), 2.0 ** -9, dt)
    x[:, 0] = 1.0
    w = np.ones((1, 8, 1), dt)
    got = np.asarray(lax.ragged_dot(x, w, np.array([3])))
    assert got.dtype == np.dtype(dt)
    np.testing.assert_array_equal(got.astype(np.float32), np.full((3, 1), 1 + 7 * 2.0 ** -9,
                                                                  np.float32).astype(dt))


def test_preferred_element_type_and_integer_wrap():
    x = np.full((2, 2), 100, np.int8)
    w = np.ones((1, 2, 1), np.int8)
    assert np.asarray(lax.ragged_dot(x, w, np.array([2]))).tolist() == [[-56], [-56]]
    got = lax.ragged_dot(x, w, np.array([2]), preferred_element_type=np.int32)
    assert got.dtype == np.int32 and np.asarray(got).tolist() == [[200], [200]]


def test_traced_group_sizes_are_clamped():
    """Under compile the sizes are not known when the program is built: a negative size counts
    as 0 and groups past m are cut at m (eager calls raise instead, below)."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((5, 2)), rng.standard_normal((3, 2, 2))
    f = starling.compile(lambda s: lax.ragged_dot(x, w, s))
    got = np.asarray(f(np.array([-2, 3, 9])))
    np.testing.assert_allclose(got, _reference(x, w, [0, 3, 2]), rtol=1e-12)


@pytest.mark.parametrize("backend", [None, "cpp", "numpy_ref"])
def test_an_inf_stays_in_its_group_and_huge_sizes_do_not_wrap(backend):
    """Found by review: an inf in one group's matrix must not turn other groups' rows (or rows
    past the last group) into NaN; sizes near 2**63 must neither pass the eager check by
    wrapping around nor break the clamping of traced sizes."""
    x = np.ones((4, 2), np.float32)
    w = np.ones((2, 2, 3), np.float32)
    w[0, 0, 0] = np.inf
    f = (lambda a, b, s: lax.ragged_dot(a, b, s)) if backend is None else \
        starling.compile(lambda a, b, s: lax.ragged_dot(a, b, s), backend=backend)
    got = np.asarray(f(x, w, np.array([1, 2], np.int32)))
    np.testing.assert_array_equal(got[:, 0], [np.inf, 2, 2, 0])
    huge = np.array([2 ** 63 - 1, 2], np.int64)
    if backend is None:
        with pytest.raises(ValueError, match="sum to 9223372036854775809 > m = 4"):
            f(x, w, huge)
    else:
        np.testing.assert_array_equal(np.asarray(f(x, w, huge))[:, 1], [2, 2, 2, 2])


def test_vmap_over_group_sizes_only():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 3)), rng.standard_normal((2, 3, 2))
    sizes = np.array([[1, 3], [4, 0], [0, 2]])
    got = starling.vmap(lambda s: lax.ragged_dot(x, w, s))(sizes)
    for b in range(3):
        np.testing.assert_allclose(np.asarray(got[b]), _reference(x, w, sizes[b]), rtol=1e-12)


@pytest.mark.parametrize("args, kind, match", [
    (((4, 3), (2, 3, 5), [1, 4]), ValueError, "sum to 5 > m = 4"),
    (((4, 3), (2, 3, 5), [-1, 2]), ValueError, "non-negative"),
    (((4, 3), (2, 2, 5), [1, 2]), ValueError, r"rhs must be \(g=2, k=3, n\)"),
    (((4, 3), (3, 3, 5), [1, 2]), ValueError, r"rhs must be \(g=2, k=3, n\)"),
    (((4,), (2, 3, 5), [1, 2]), ValueError, "ranks do not match"),
    (((2, 4, 3), (3, 2, 3, 5), [[1, 2]] * 2), ValueError, "leading batch dims differ"),
    (((4, 3), (2, 3, 5), 3), ValueError, "at least one dim"),
])
def test_errors_name_the_shapes(args, kind, match):
    a, b, sizes = args
    with pytest.raises(kind, match=match):
        lax.ragged_dot(np.ones(a), np.ones(b), np.array(sizes))


def test_float_group_sizes_and_unpromotable_operands():
    with pytest.raises(TypeError, match="group_sizes must have an integer dtype, got float32"):
        lax.ragged_dot(np.ones((2, 2)), np.ones((1, 2, 2)), np.array([2.0], np.float32))
    with pytest.raises(TypeError, match="ragged_dot"):
        lax.ragged_dot(np.ones((2, 2), ml_dtypes.float8_e4m3fn), np.ones((1, 2, 2), np.float32),
                       np.array([2]))


def test_primitive_is_registered_with_all_rules():
    assert ragged_dot_p.jvp and ragged_dot_p.transpose and ragged_dot_p.batch
    assert ragged_dot_p.sharding is not None
