"""Tests of the contraction family (src/arrays/ops/linear.py): errors, dtype semantics, einsum
lowering, staging, and hypothesis properties against NumPy."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import starling.numpy as snp
from starling.arrays.ops.linear import dot_general, dot_general_p
from starling.core.ir import check_program, eval_program
from starling.transforms.stage import eval_shape, make_ir
from tests.hard_matrices import rnd


def A(x, dtype=None):
    return snp.asarray(np.asarray(x, dtype=dtype))


# ---- errors ------------------------------------------------------------------------------------

def test_matmul_contracting_mismatch_names_shapes():
    with pytest.raises(ValueError, match=r"matmul: contracting dims differ: \(2, 3\) @ \(4, 5\) "
                                         r"\(3 != 4\)"):
        snp.matmul(A(np.ones((2, 3))), A(np.ones((4, 5))))


def test_matmul_vector_mismatch_and_0d():
    with pytest.raises(ValueError, match=r"matmul: contracting dims differ: \(3,\) @ \(4,\)"):
        snp.matmul(A(np.ones(3)), A(np.ones(4)))
    with pytest.raises(ValueError, match=r"matmul: operands must be at least 1-d.*\(\)"):
        snp.matmul(A(np.float32(2)), A(np.ones(3)))


def test_matmul_batch_not_broadcastable():
    with pytest.raises(ValueError, match=r"matmul: .*\(2,\).*\(3,\)"):
        snp.matmul(A(np.ones((2, 3, 4))), A(np.ones((3, 4, 5))))


def test_dot_and_inner_and_vdot_errors():
    with pytest.raises(ValueError, match=r"dot: contracted dims differ: \(2, 3\) \. \(4, 5\)"):
        snp.dot(A(np.ones((2, 3))), A(np.ones((4, 5))))
    with pytest.raises(ValueError, match=r"inner: last dims differ"):
        snp.inner(A(np.ones((2, 3))), A(np.ones((2, 4))))
    with pytest.raises(ValueError, match=r"vdot: operands must have the same size.*\(2, 3\)"):
        snp.vdot(A(np.ones((2, 3))), A(np.ones(5)))


def test_tensordot_errors():
    x, y = A(np.ones((2, 3))), A(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"tensordot: shape mismatch for sum"):
        snp.tensordot(x, y, axes=([0], [0]))
    with pytest.raises(ValueError, match=r"tensordot: axes=3 must be in 0\.\.2"):
        snp.tensordot(x, y, axes=3)
    with pytest.raises(ValueError, match=r"tensordot: axis 5 is out of bounds"):
        snp.tensordot(x, y, axes=([5], [0]))
    with pytest.raises(ValueError, match=r"different lengths"):
        snp.tensordot(x, y, axes=([1], [0, 1]))
    with pytest.raises(TypeError, match=r"tensordot: axis must be an int"):
        snp.tensordot(x, y, axes="ij")


def test_vecdot_and_cross_errors():
    with pytest.raises(ValueError, match=r"vecdot: contracted dims differ"):
        snp.vecdot(A(np.ones((2, 3))), A(np.ones((2, 4))))
    with pytest.raises(ValueError, match=r"vecdot: axis -3 is out of bounds"):
        snp.vecdot(A(np.ones((2, 3))), A(np.ones((2, 3))), axis=-3)
    with pytest.raises(ValueError, match=r"cross: both operands need size 3 along axis -1"):
        snp.cross(A(np.ones(2)), A(np.ones(2)))
    with pytest.raises(TypeError, match=r"cross: bool"):
        snp.cross(A(np.ones(3, bool)), A(np.ones(3, bool)))


@pytest.mark.parametrize("subs, shapes, pattern", [
    ("ij,jk->ik", [(2, 3)], r"name 2 operand\(s\) but 1"),
    ("ij,jk->ik", [(2, 3), (4, 5)], r"label 'j' has inconsistent sizes 3 and 4"),
    ("ij->k", [(2, 3)], r"output subscript 'k' does not appear"),
    ("ij->ii", [(2, 2)], r"output subscript 'i' appears more than once"),
    ("ij", [(2, 3, 4)], r"operand 0 has shape \(2, 3, 4\) \(ndim 3\).*name 2 dims"),
    ("...i->i", [(2, 3)], r"output names no '\.\.\.'"),
    ("i.j", [(2, 3)], r"invalid ellipsis"),
    ("i1", [(2, 3)], r"invalid subscript '1'"),
    ("i->j->k", [(2,)], r"malformed subscripts"),
    ("ii->i", [(2, 3)], r"repeats label 'i' over dims of sizes 2 and 3"),
])
def test_einsum_errors(subs, shapes, pattern):
    with pytest.raises(ValueError, match="einsum: .*" + pattern):
        snp.einsum(subs, *[A(np.ones(s)) for s in shapes])


def test_einsum_needs_an_operand():
    with pytest.raises(ValueError, match="einsum: at least one operand"):
        snp.einsum("i->")


def test_dot_general_checks():
    x, y = A(np.ones((2, 3), np.float32)), A(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"dot_general: contracting dims differ"):
        dot_general(x, y, (((1,), (0,)), ((), ())))
    with pytest.raises(ValueError, match=r"dot_general: lhs batch axis 4 is out of bounds|"
                                         r"axis 4 is out of bounds"):
        dot_general(x, y, (((1,), (1,)), ((4,), (0,))))
    with pytest.raises(ValueError, match=r"repeated"):
        dot_general(x, y, (((0,), (0,)), ((0,), (1,))))
    with pytest.raises(TypeError, match=r"one dtype"):
        make_ir(lambda a, b: dot_general_p.bind(a, b, dimension_numbers=(((1,), (1,)), ((), ())),
                                                preferred_element_type=None))(
            x, A(np.ones((2, 3), np.float64)))


# ---- semantics ---------------------------------------------------------------------------------

def test_dot_general_output_order_batch_lhs_free_rhs_free():
    x, y = rnd((4, 2, 3)), rnd((3, 5, 2))
    # contract x axis 2 with y axis 0, batch x axis 1 with y axis 2: out (2, 4, 5)
    got = dot_general(A(x), A(y), (((2,), (0,)), ((1,), (2,))))
    want = np.einsum("abc,cdb->bad", x, y)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


def test_dot_general_preferred_element_type():
    x = A(np.full((2, 300), 100, np.int8))
    got = dot_general(x, x, (((1,), (1,)), ((), ())), preferred_element_type=np.int32)
    assert got.dtype == np.int32
    assert np.asarray(got)[0, 0] == 300 * 10000


def test_preferred_element_type_keeps_the_operands_kind():
    """Found by review: a float product asked for int32 truncated the operands eagerly but the
    product in Triton kernels; as JAX, the kinds must agree (bool may ask for an integer)."""
    f = np.ones((2, 2), np.float32)
    dn = (((1,), (0,)), ((), ()))
    for call in (lambda: dot_general(f, f, dn, preferred_element_type=np.int32),
                 lambda: snp.matmul(f, f, preferred_element_type=np.int8),
                 lambda: snp.tensordot(f, f, axes=1, preferred_element_type=np.complex64),
                 lambda: dot_general(np.ones((2, 2), np.int32), np.ones((2, 2), np.int32), dn,
                                     preferred_element_type=np.float32)):
        with pytest.raises(TypeError, match="preferred_element_type .* does not fit"):
            call()
    b = np.ones((2, 3), bool)
    assert snp.matmul(b, b.T, preferred_element_type=np.int32).dtype == np.int32
    assert dot_general(f, f, dn, preferred_element_type=np.float64).dtype == np.float64


def test_integer_matmul_wraps_like_numpy():
    x = np.array([[100, 100], [1, 2]], np.int8)
    got = snp.matmul(A(x), A(x))
    assert got.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(got), np.matmul(x, x))


def test_bool_matmul_is_or_of_ands():
    x = np.array([[True, False], [False, False]])
    y = np.array([[False, True], [True, True]])
    got = snp.matmul(A(x), A(y))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(got), np.matmul(x, y))


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16])
def test_low_precision_accumulates_in_float32(dt):
    x = np.full((1, 4096), 1.0, dt)
    y = np.full((4096, 1), 1.0, dt)
    got = snp.matmul(A(x), A(y))
    assert got.dtype == np.dtype(dt)
    # float16 accumulation would stall at 2048; float32 accumulation gives 4096 exactly.
    assert float(np.asarray(got)[0, 0]) == 4096.0


def test_promotion_and_weak_scalars():
    x = A(np.ones((2, 2), np.int32))
    y = A(np.ones((2, 2), np.float32))
    assert snp.matmul(x, y).dtype == np.float32
    assert snp.dot(A(np.ones(3, np.float32)), 2.0).dtype == np.float32
    assert snp.dot(2, A(np.ones(3, np.int8))).dtype == np.int8
    assert snp.matmul([[1.0, 2.0]], A(np.ones((2, 1), np.float64))).dtype == np.float64


def test_operator_and_methods():
    x, y = rnd((3, 4)), rnd((4, 2))
    np.testing.assert_allclose(np.asarray(A(x) @ A(y)), x @ y, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(x @ A(y)), x @ y, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(A(x).dot(A(y))), x.dot(y), rtol=1e-12)


def test_vdot_and_vecdot_conjugate_first():
    a, b = rnd((3,), np.complex128, 1), rnd((3,), np.complex128, 2)
    np.testing.assert_allclose(complex(snp.vdot(A(a), A(b))), np.vdot(a, b), rtol=1e-12)
    np.testing.assert_allclose(complex(snp.vecdot(A(a), A(b))), np.vdot(a, b), rtol=1e-12)


def test_outer_flattens_linalg_outer_requires_1d():
    a, b = rnd((2, 2)), rnd((3,))
    np.testing.assert_allclose(np.asarray(snp.outer(A(a), A(b))), np.outer(a, b))
    with pytest.raises(ValueError, match=r"outer: operands must be 1-d"):
        snp.linalg.outer(A(a), A(b))


def test_einsum_integer_sum_keeps_dtype_and_bool_is_logical():
    x = np.array([100, 100, 100], np.int8)
    got = snp.einsum("i->", A(x))
    assert got.dtype == np.int8 and int(got) == int(np.einsum("i->", x))
    b = np.array([[True, False], [False, False]])
    np.testing.assert_array_equal(np.asarray(snp.einsum("ij->i", A(b))), np.einsum("ij->i", b))


def test_einsum_interleaved_and_optimize_modes():
    x, y, z = rnd((2, 3)), rnd((3, 4)), rnd((4, 5))
    want = np.einsum("ij,jk,kl->il", x, y, z)
    for opt in ("greedy", "optimal", False, True):
        got = snp.einsum("ij,jk,kl->il", A(x), A(y), A(z), optimize=opt)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    path = np.einsum_path("ij,jk,kl->il", x, y, z)[0]
    got = snp.einsum("ij,jk,kl->il", A(x), A(y), A(z), optimize=path)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    got = snp.einsum(A(x), [0, 1], A(y), [1, 2], [0, 2])
    np.testing.assert_allclose(np.asarray(got), x @ y, rtol=1e-12)
    got = snp.einsum(A(x), [Ellipsis, 1])
    np.testing.assert_allclose(np.asarray(got), np.einsum(x, [Ellipsis, 1]), rtol=1e-12)


def test_einsum_diagonal_keeps_infinities_off_diagonal():
    # A masked sum (multiply by eye) would turn the off-diagonal inf into NaN.
    x = np.array([[1.0, np.inf], [-np.inf, 2.0]])
    np.testing.assert_array_equal(np.asarray(snp.einsum("ii->i", A(x))), [1.0, 2.0])
    np.testing.assert_array_equal(float(snp.einsum("ii", A(x))), 3.0)


def test_einsum_preferred_element_type():
    x = A(np.full((300,), 100, np.int8))
    got = snp.einsum("i,i->", x, x, preferred_element_type=np.int32)
    assert got.dtype == np.int32 and int(got) == 3_000_000


def test_cross_with_infinities_matches_numpy():
    a = np.array([np.inf, 0.0, 0.0])
    b = np.array([0.0, 1.0, 0.0])
    np.testing.assert_array_equal(np.asarray(snp.cross(A(a), A(b))), np.cross(a, b))


# ---- staging -----------------------------------------------------------------------------------

def test_einsum_stages_to_dot_general_and_shape_ops():
    x, y, z = rnd((2, 3)), rnd((3, 3)), rnd((3, 5))

    def f(a, b, c):
        return snp.einsum("ij,jj,jk->ki", a, b, c)

    prog = make_ir(f)(A(x), A(y), A(z))
    check_program(prog)
    names = {e.primitive.name for e in prog.eqns}
    assert "dot_general" in names
    assert names <= {"dot_general", "transpose", "reshape", "slice", "broadcast_in_dim"}
    out = eval_program(prog, prog.consts, A(x), A(y), A(z))[0]
    np.testing.assert_allclose(np.asarray(out), np.einsum("ij,jj,jk->ki", x, y, z), rtol=1e-12)


def test_eval_shape_matmul_broadcast():
    sd = eval_shape(snp.matmul, A(np.ones((2, 1, 3, 4), np.float32)),
                    A(np.ones((5, 4, 6), np.float32)))
    assert sd.shape == (2, 5, 3, 6) and sd.dtype == np.float32


# ---- hypothesis --------------------------------------------------------------------------------

@st.composite
def matmul_shapes(draw):
    m, k, n = (draw(st.integers(0, 4)) for _ in range(3))
    nb = draw(st.integers(0, 3))
    batch = [draw(st.integers(0, 3)) for _ in range(nb)]
    b1 = [d if draw(st.booleans()) else 1 for d in batch][draw(st.integers(0, nb)):]
    b2 = [d if draw(st.booleans()) else 1 for d in batch][draw(st.integers(0, nb)):]
    # A vector operand is exactly 1-d (a batched "vector" would be a matrix).
    s1 = tuple(b1) + (m, k) if draw(st.booleans()) else (k,)
    s2 = tuple(b2) + (k, n) if draw(st.booleans()) else (k,)
    return s1, s2


@given(matmul_shapes(), st.sampled_from([np.float64, np.int32, np.complex64]))
def test_matmul_matches_numpy(shapes, dt):
    s1, s2 = shapes
    x, y = rnd(s1, dt, 1), rnd(s2, dt, 2)
    if np.dtype(dt).kind == "i":
        x, y = (rnd(s1, np.float64, 1) * 3).astype(dt), (rnd(s2, np.float64, 2) * 3).astype(dt)
    want = np.matmul(x, y)
    got = snp.matmul(A(x), A(y))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@st.composite
def einsum_problem(draw):
    letters = "abcdef"
    sizes = {c: draw(st.integers(1, 3)) for c in letters}
    n_ops = draw(st.integers(1, 3))
    terms = []
    for _ in range(n_ops):
        nd = draw(st.integers(0, 3))
        terms.append("".join(draw(st.sampled_from(letters)) for _ in range(nd)))
    used = sorted(set("".join(terms)))
    if draw(st.booleans()):
        out = "".join(draw(st.permutations([c for c in used if draw(st.booleans())])))
        subs = ",".join(terms) + "->" + out
    else:
        subs = ",".join(terms)
    shapes = [tuple(sizes[c] for c in t) for t in terms]
    return subs, shapes


@given(einsum_problem())
def test_einsum_matches_numpy(problem):
    subs, shapes = problem
    ops = [rnd(s, np.float64, i) for i, s in enumerate(shapes)]
    want = np.einsum(subs, *ops)
    got = snp.einsum(subs, *[A(o) for o in ops])
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-10)
