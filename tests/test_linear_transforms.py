"""Transformation rules of the contraction, linear-algebra and FFT primitives (dot_general, det,
slogdet, inv, solve, cholesky, qr, svd, eigh, fft): closed-form gradients, singular and
degenerate inputs, second derivatives, the complex gauge of eigh / svd, vmap with unbatched and
last-axis operands (one batched call), and jvp(vmap(grad(f))) against a Python loop."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling.test_util import check_grads

LA = snp.linalg
RNG = np.random.default_rng(1234)


def A(x, dt=np.float64):
    return snp.asarray(np.asarray(x, dt))


def N(x):
    return np.asarray(x)


def close(got, want, rtol=1e-10, atol=1e-10):
    np.testing.assert_allclose(N(got), want, rtol=rtol, atol=atol)


def rand(*shape, complex_=False, seed=None):
    r = np.random.default_rng(seed) if seed is not None else RNG
    x = r.standard_normal(shape)
    if complex_:
        x = x + 1j * r.standard_normal(shape)
    return x


def spd(n, complex_=False, batch=()):
    x = rand(*batch, n, n, complex_=complex_)
    return x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)


def fd_grad(f, x, eps=1e-6):
    """Central finite-difference gradient of a real scalar function of a real array."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        g[idx] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def cofactors(a):
    """The cofactor matrix from minors (accurate for singular ``a``: the minors are not)."""
    n = a.shape[0]
    c = np.zeros_like(a)
    for i, j in itertools.product(range(n), range(n)):
        minor = np.delete(np.delete(a, i, 0), j, 1)
        c[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return c


def count_eqns(f, *args, name):
    prog = starling.make_ir(f)(*args)
    return sum(e.primitive.name == name for e in prog.eqns)


# ---- dot_general / matmul / einsum -------------------------------------------------------------

def test_grad_of_trace_of_product_is_the_other_transposed():
    a, b = rand(3, 4), rand(4, 3)
    ga, gb = starling.grad(lambda x, y: LA.trace(x @ y), argnums=(0, 1))(A(a), A(b))
    close(ga, b.T)
    close(gb, a.T)


def test_jacrev_of_matmul_is_a_kronecker_structure():
    a, b = rand(2, 3), rand(3, 4)
    jac = N(starling.jacrev(lambda x: x @ A(b))(A(a)))        # (2, 4, 2, 3)
    want = np.einsum("ip,qj->ijpq", np.eye(2), b)
    close(jac, want)
    close(starling.jacfwd(lambda x: x @ A(b))(A(a)), want)


def test_hessian_of_quadratic_form():
    a, x = rand(4, 4), rand(4)
    h = starling.hessian(lambda v: v @ (A(a) @ v))(A(x))
    close(h, a + a.T)


def test_einsum_gradients_closed_form():
    a, b, c = rand(2, 3), rand(3, 4), rand(4, 2)
    f = lambda x, y, z: snp.einsum("ij,jk,ki->", x, y, z)  # trace(a b c)
    ga, gb, gc = starling.grad(f, argnums=(0, 1, 2))(A(a), A(b), A(c))
    close(ga, (b @ c).T)
    close(gb, (c @ a).T)
    close(gc, (a @ b).T)
    # a diagonal and a batch label: sum_b sum_i x[b, i, i] * y[b, i]
    x, y = rand(2, 3, 3), rand(2, 3)
    gx = starling.grad(lambda u: snp.einsum("bii,bi->", u, A(y)))(A(x))
    close(gx, np.einsum("bi,ij->bij", y, np.eye(3)))


def test_dot_general_second_order_and_complex():
    from starling.arrays.ops.linear import dot_general
    dn = (((2, 0), (0, 2)), ((1,), (1,)))
    for cplx in (False, True):
        x, y = rand(4, 2, 3, complex_=cplx), rand(3, 2, 4, 5, complex_=cplx)
        check_grads(lambda u, v: dot_general(u, v, dn), [x, y], order=2)


def test_preferred_element_type_tangents_and_cotangents():
    from starling.arrays.ops.linear import dot_general
    a, b = rand(3, 4).astype(np.float32), rand(4, 2).astype(np.float32)
    f = lambda x, y: dot_general(x, y, (((1,), (0,)), ((), ())), preferred_element_type=np.float64)
    out, t = starling.jvp(f, (A(a, np.float32), A(b, np.float32)),
                          (A(np.ones_like(a), np.float32), A(np.zeros_like(b), np.float32)))
    assert out.dtype == t.dtype == np.float64
    ga, gb = starling.grad(lambda x, y: snp.sum(f(x, y)), argnums=(0, 1))(A(a, np.float32),
                                                                         A(b, np.float32))
    assert ga.dtype == gb.dtype == np.float32
    close(ga, np.ones((3, 2)) @ b.T, rtol=1e-6)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (1, -1), (-1, None), (None, 2)])
def test_vmap_matmul_one_call(in_axes):
    a, b = rand(3, 4), rand(4, 5)
    xs = np.stack([a, 2 * a, a - 1], axis=in_axes[0]) if in_axes[0] is not None else a
    ys = np.stack([b, b * b, -b], axis=in_axes[1]) if in_axes[1] is not None else b
    f = starling.vmap(snp.matmul, in_axes=in_axes)
    got = f(A(xs), A(ys))

    def take(v, ax, k):
        return v if ax is None else np.take(v, k, axis=ax)
    want = np.stack([take(xs, in_axes[0], k) @ take(ys, in_axes[1], k) for k in range(3)])
    close(got, want)
    assert count_eqns(f, A(xs), A(ys), name="dot_general") == 1


# ---- det / slogdet / inv / solve ---------------------------------------------------------------

def test_grad_of_logdet_is_inverse_transpose():
    a = spd(4) + rand(4, 4)
    g = starling.grad(lambda x: LA.slogdet(x).logabsdet)(A(a))
    close(g, np.linalg.inv(a).T)
    gd = starling.grad(LA.det)(A(a))
    close(gd, np.linalg.det(a) * np.linalg.inv(a).T)


def test_grad_of_sum_of_inverse_matches_finite_differences():
    a = spd(3) + 0.5 * rand(3, 3)
    g = starling.grad(lambda x: snp.sum(LA.inv(x)))(A(a))
    close(g, fd_grad(lambda x: np.linalg.inv(x).sum(), a), rtol=1e-6, atol=1e-7)
    check_grads(LA.inv, [a], order=2)


def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix():
    a = rand(4, 4)
    a[3] = 0.0                             # rank 3: det is exactly 0 (an exact zero pivot)
    assert float(LA.det(A(a))) == 0.0
    close(starling.grad(LA.det)(A(a)), cofactors(a), rtol=1e-9, atol=1e-12)
    b = rand(4, 4)
    b[3] = b[0] + b[1]                     # rank 3 up to rounding (ill-conditioned branch)
    close(starling.grad(LA.det)(A(b)), cofactors(b), rtol=1e-6, atol=1e-9)
    c = np.outer(rand(4), rand(4))         # rank 1: every cofactor is 0
    close(starling.grad(LA.det)(A(c)), np.zeros((4, 4)), atol=1e-12)
    # second derivatives at a real rank n-1 matrix (distinct singular values)
    check_grads(LA.det, [a], order=2)


def test_det_complex_singular_first_order():
    a = rand(3, 3, complex_=True)
    a[2] = 0.0
    t = rand(3, 3, complex_=True)
    _, got = starling.jvp(LA.det, (A(a, np.complex128),), (A(t, np.complex128),))
    close(got, np.sum(cofactors(a) * t), rtol=1e-9)


def test_det_hessian_at_identity_needs_no_svd_derivative():
    # All singular values of I are equal: the SVD branch must not leak NaN (it sees a stand-in).
    h = N(starling.hessian(LA.det)(A(np.eye(3))))
    i = np.eye(3)
    want = np.einsum("ij,kl->ijkl", i, i) - np.einsum("il,kj->ijkl", i, i)
    close(h, want)


def test_slogdet_complex_sign_tangent_and_singular_nan():
    a = rand(3, 3, complex_=True) + 3 * np.eye(3)
    check_grads(lambda x: LA.slogdet(x), [a], order=2)
    s = rand(3, 3)
    s[2] = 0.0
    g = N(starling.grad(lambda x: LA.slogdet(x).logabsdet)(A(s)))
    assert np.all(np.isnan(g))  # not differentiable where logabsdet = -inf; no exception


def test_solve_gradients_and_transpose():
    a, b = spd(3) + rand(3, 3), rand(3, 2)
    check_grads(LA.solve, [a, b], order=2)
    ct = rand(3, 2)
    _, vjp = starling.vjp(lambda y: LA.solve(A(a), y), A(b))
    (gb,) = vjp(A(ct))
    close(gb, np.linalg.solve(a.T, ct))


def test_vmap_solve_with_only_b_batched_is_one_solve():
    a = spd(3) + rand(3, 3)
    bs = rand(5, 3, 2)
    f = starling.vmap(lambda b: LA.solve(A(a), b))
    close(f(A(bs)), np.stack([np.linalg.solve(a, b) for b in bs]))
    assert count_eqns(f, A(bs), name="solve") == 1
    vecs = rand(3, 4)                                          # (n, batch): in_axes=-1
    got = starling.vmap(lambda b: LA.solve(A(a), b), in_axes=-1)(A(vecs))
    close(got, np.linalg.solve(a, vecs).T)
    g = starling.vmap(lambda x, b: LA.solve(x, b), in_axes=(0, None))
    as_ = np.stack([a, a + np.eye(3)])
    close(g(A(as_), A(bs[0])), np.stack([np.linalg.solve(x, bs[0]) for x in as_]))


# ---- cholesky / eigh / svd / qr ----------------------------------------------------------------

def _sym(m):
    return (m + m.T) / 2


def test_cholesky_gradients_are_symmetric():
    # The input is taken as symmetric (JAX / PyTorch): the gradient is the symmetric one, the
    # finite-difference gradient of m -> f(chol((m + m^T) / 2)), whichever triangle is read.
    h = spd(4)
    x = h.copy()
    x[0, 3] = 100.0  # the upper triangle is not read
    g = N(starling.grad(lambda m: 2 * snp.sum(snp.log(LA.diagonal(LA.cholesky(m)))))(A(x)))
    close(g, np.linalg.inv(h))   # d logdet = tr(A^-1 dA), symmetric
    gu = N(starling.grad(lambda m: snp.sum(LA.cholesky(m, upper=True)))(A(h)))
    close(gu, gu.T, atol=1e-14)
    close(gu, fd_grad(lambda m: np.sum(np.linalg.cholesky(_sym(m)).T), h), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("cplx", [False, True])
def test_sum_of_eigenvalues_is_the_trace(cplx):
    h = spd(4, complex_=cplx)
    dt = np.complex128 if cplx else np.float64
    g = starling.grad(lambda m: snp.sum(LA.eigvalsh(m)))(A(h, dt))
    close(g, np.eye(4))
    g = starling.grad(lambda m: snp.sum(LA.eigh(m).eigenvalues))(A(h, dt))
    close(g, np.eye(4))
    # degenerate eigenvalues: the eigenvalue sum is still differentiable
    close(starling.grad(lambda m: snp.sum(LA.eigvalsh(m)))(A(np.eye(3))), np.eye(3))


def test_eigh_gradient_of_eigenvector_function_vs_finite_differences():
    h = spd(3)
    w3 = np.array([1.0, 2.0, 3.0])

    def f(m):  # sign-free: squared components of the top eigenvector
        return snp.sum(LA.eigh(m).eigenvectors[:, -1] ** 2 * A(w3))

    def f_np(m):  # the input is taken as symmetric: its gradient is symmetric
        return np.sum(np.linalg.eigh(_sym(m))[1][:, -1] ** 2 * w3)
    close(starling.grad(f)(A(h)), fd_grad(f_np, h), rtol=1e-6, atol=1e-8)


def test_complex_eigh_and_svd_gauge():
    h = spd(4, complex_=True)
    w, v = LA.eigh(A(h, np.complex128))
    v = N(v)
    piv = v[np.argmax(np.abs(v), axis=0), np.arange(4)]
    close(np.imag(piv), np.zeros(4), atol=1e-14)
    assert np.all(np.real(piv) > 0)
    x = rand(3, 5, complex_=True)
    u, s, vh = (N(o) for o in LA.svd(A(x, np.complex128), full_matrices=False))
    piv = vh[np.arange(3), np.argmax(np.abs(vh), axis=1)]
    close(np.imag(piv), np.zeros(3), atol=1e-14)
    close(u * s @ vh, x)
    check_grads(lambda m: LA.svd(m, full_matrices=False), [x], order=1)


def test_sum_of_singular_values_gradient_is_u_vh():
    for shape in [(4, 3), (3, 5)]:
        x = rand(*shape)
        g = starling.grad(lambda m: snp.sum(LA.svdvals(m)))(A(x))
        u, _, vh = np.linalg.svd(x, full_matrices=False)
        close(g, u @ vh)
        close(starling.grad(lambda m: LA.matrix_norm(m, ord="nuc"))(A(x)), u @ vh)


def test_qr_wide_and_tall_second_order():
    for shape, cplx in [((4, 3), False), ((3, 5), True), ((2, 3, 3), True)]:
        check_grads(lambda m: LA.qr(m), [rand(*shape, complex_=cplx)], order=2)


def test_non_unique_outputs_raise():
    x = A(rand(4, 2))
    with pytest.raises(NotImplementedError, match="svd: .*full_matrices=False"):
        starling.grad(lambda m: snp.sum(LA.svd(m).U))(x)
    with pytest.raises(NotImplementedError, match="qr: .*mode='reduced'"):
        starling.grad(lambda m: snp.sum(LA.qr(m, mode="complete").Q))(x)
    # the singular values alone are fine with full_matrices=True
    g = starling.grad(lambda m: snp.sum(LA.svd(m, compute_uv=False)))(x)
    u, _, vh = np.linalg.svd(N(x), full_matrices=False)
    close(g, u @ vh)


@pytest.mark.parametrize("name", ["det", "inv", "cholesky", "eigh", "svd", "qr", "slogdet"])
def test_vmap_last_axis_and_unbatched(name):
    op = getattr(LA, name)
    mats = np.stack([spd(3) + 0.1 * rand(3, 3) for _ in range(4)], axis=-1)  # (3, 3, 4)
    got = starling.vmap(op, in_axes=-1)(A(mats))
    want = [op(A(mats[..., k])) for k in range(4)]
    for j, g in enumerate(starling.tree.leaves(got)):
        close(g, np.stack([N(starling.tree.leaves(w)[j]) for w in want]))


def test_jvp_of_vmap_of_grad_matches_a_loop():
    mats = np.stack([spd(3) for _ in range(3)])
    tans = rand(3, 3, 3)

    def f(m):
        return (LA.slogdet(m).logabsdet + snp.sum(LA.eigvalsh(m) ** 2) + snp.sum(LA.inv(m))
                + snp.sum(snp.abs(snp.fft.rfft(m)) ** 2) + snp.einsum("ij,jk,ki->", m, m, m))

    _, got = starling.jvp(starling.vmap(starling.grad(f)), (A(mats),), (A(tans),))
    for k in range(3):
        _, want = starling.jvp(starling.grad(f), (A(mats[k]),), (A(tans[k]),))
        close(N(got)[k], want, rtol=1e-9)


# ---- fft ---------------------------------------------------------------------------------------

def test_grad_through_rfft_of_real_signal_vs_finite_differences():
    x = rand(10)
    w = np.linspace(0.5, 2.0, 6)

    def f(v):
        return snp.sum(snp.abs(snp.fft.rfft(v)) ** 2 * A(w))

    def f_np(v):
        return np.sum(np.abs(np.fft.rfft(v)) ** 2 * w)
    close(starling.grad(f)(A(x)), fd_grad(f_np, x), rtol=1e-6, atol=1e-6)
    y = rand(2, 9)

    def g(v):
        return snp.sum(snp.fft.irfft(snp.fft.rfft(v) * A(np.arange(5.0)), n=9) ** 3)

    def g_np(v):
        return np.sum(np.fft.irfft(np.fft.rfft(v) * np.arange(5.0), n=9) ** 3)
    close(starling.grad(g)(A(y)), fd_grad(g_np, y), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fn,kw,cplx", [("fft", {}, True), ("ifft", {"n": 5}, True),
                                        ("rfft", {}, False), ("irfft", {"n": 7}, True),
                                        ("rfftn", {"axes": (0, 1)}, False),
                                        ("irfftn", {"s": (3, 6)}, True)])
def test_fft_vjp_is_the_dense_transpose(fn, kw, cplx):
    """vjp against the transpose of the dense real-linear Jacobian, one column per real input
    direction: with the pairing <a, b> = re sum(a b), the cotangent g satisfies
    re g_k = <ct, J e_k> and -im g_k = <ct, J (i e_k)>."""
    op = getattr(snp.fft, fn)
    x = rand(3, 4, complex_=cplx)
    dt = np.complex128 if cplx else np.float64
    out, vjp = starling.vjp(lambda v: op(v, **kw), A(x, dt))
    odt = N(out).dtype
    ct = rand(*out.shape, complex_=odt.kind == "c")
    (got,) = vjp(A(ct, odt))

    def pair(e):
        col = starling.jvp(lambda v: op(v, **kw), (A(x, dt),), (A(e, dt),))[1]
        return np.real(np.sum(ct * N(col)))
    want = np.zeros(x.shape, dtype=dt)
    for k in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[k] = 1.0
        want[k] = pair(e) - (1j * pair(1j * e) if cplx else 0)
    close(got, want)


def test_vmap_fft_last_axis():
    xs = rand(8, 3, complex_=True)  # batch on the last axis, which is also the fft axis
    got = starling.vmap(snp.fft.fft, in_axes=-1)(A(xs, np.complex128))
    close(got, np.fft.fft(xs.T))
    check_grads(lambda v: snp.fft.hfft(v, n=8), [rand(2, 5, complex_=True)], order=2)
