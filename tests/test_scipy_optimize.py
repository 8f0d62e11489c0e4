"""starling.scipy.optimize.minimize: BFGS / L-BFGS against scipy.optimize.minimize, hard cases,
implicit derivatives (closed forms, finite differences), compile and vmap."""
import numpy as np
import pytest
import scipy.optimize as so

import starling as st
import starling.numpy as snp
import starling.scipy.optimize as sopt
from starling.test_util import check_grads

METHODS = ("BFGS", "L-BFGS")


def tight(method, gtol):
    """Options asking for |g| <= gtol (L-BFGS would otherwise stop on SciPy's ftol first)."""
    return dict(gtol=gtol) if method == "BFGS" else dict(gtol=gtol, ftol=0)


def f64(a):
    return snp.asarray(np.asarray(a, dtype=np.float64))


def rosen(x):
    return snp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def quad(x, a, b):
    return 0.5 * x @ (a @ x) - b @ x


def spd(n, seed=0):
    m = np.random.default_rng(seed).normal(size=(n, n))
    return m @ m.T + n * np.eye(n)


def logistic_data(seed=0, n=40, d=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = np.where(x @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return x, y


def logistic(w, x, y, lam):
    return snp.mean(snp.logaddexp(0.0, -y * (x @ w))) + 0.5 * lam * w @ w


def logistic_np(w, x, y, lam):
    z = -y * (x @ w)
    return np.mean(np.logaddexp(0.0, z)), x.T @ (-y / (1 + np.exp(-z))) / len(y) + lam * w


# ---- the optimum and the counts against SciPy ----------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("n", [2, 5, 8])
def test_rosenbrock_vs_scipy(method, n):
    x0 = np.linspace(-1.2, 1.0, n)
    r = sopt.minimize(rosen, f64(x0), method=method)
    ref = so.minimize(so.rosen, x0, jac=so.rosen_der,
                      method="BFGS" if method == "BFGS" else "L-BFGS-B",
                      options=dict(gtol=1e-5) if method == "BFGS" else dict(maxcor=10))
    # n = 5 from this start ends in Rosenbrock's second local minimum, for both libraries.
    np.testing.assert_allclose(np.asarray(r.x), ref.x, atol=2e-5)
    assert abs(float(r.fun) - ref.fun) < 1e-8
    assert int(r.status) in (0, 4) and bool(r.success) == (int(r.status) == 0)
    if bool(r.success):
        assert float(snp.max(snp.abs(r.jac))) <= 1e-5
    np.testing.assert_allclose(np.asarray(r.jac), so.rosen_der(np.asarray(r.x)), rtol=1e-9,
                               atol=1e-12)
    assert 0.5 * ref.nit <= int(r.nit) <= 2 * ref.nit + 5
    assert int(r.nfev) == int(r.njev) >= int(r.nit)
    if method == "BFGS":
        assert r.hess_inv.shape == (n, n)
        np.testing.assert_allclose(np.asarray(r.hess_inv), np.asarray(r.hess_inv).T, atol=1e-8)
    else:
        assert r.hess_inv is None


@pytest.mark.parametrize("method", METHODS)
def test_quadratic_and_logistic_vs_scipy(method):
    a, b = spd(6), np.arange(6.0) - 2
    r = sopt.minimize(quad, f64(np.zeros(6)), args=(f64(a), f64(b)), method=method,
                      options=tight(method, 1e-10))
    assert bool(r.success)
    np.testing.assert_allclose(np.asarray(r.x), np.linalg.solve(a, b), rtol=1e-9, atol=1e-12)
    x, y = logistic_data()
    r = sopt.minimize(logistic, f64(np.zeros(3)), args=(f64(x), f64(y), 0.1), method=method,
                      options=tight(method, 1e-9))
    ref = so.minimize(lambda w: logistic_np(w, x, y, 0.0)[0] + 0.05 * w @ w, np.zeros(3),
                      jac=lambda w: logistic_np(w, x, y, 0.1)[1], method="BFGS", tol=1e-10)
    assert bool(r.success) and int(r.status) == 0
    np.testing.assert_allclose(np.asarray(r.x), ref.x, atol=1e-7)
    np.testing.assert_allclose(float(r.fun), ref.fun, rtol=1e-10)


def test_method_spellings_tol_and_options():
    x0 = f64([-1.2, 1.0])
    opts = dict(maxiter=3)
    ref = sopt.minimize(rosen, x0, method="L-BFGS", options=opts)
    for m in ("l-bfgs", "lbfgs", "L-BFGS-B", "l-bfgs-experimental-do-not-rely-on-this"):
        np.testing.assert_array_equal(
            np.asarray(sopt.minimize(rosen, x0, method=m, options=opts).x), np.asarray(ref.x))
    loose = sopt.minimize(rosen, x0, method="bfgs", tol=1e-2)
    strict = sopt.minimize(rosen, x0, method="BFGS", options=dict(gtol=1e-9, norm=2))
    assert int(loose.nit) < int(strict.nit)
    assert float(snp.linalg.norm(strict.jac)) <= 1e-9
    small = sopt.minimize(rosen, x0, method="L-BFGS", options=dict(history_size=2, maxls=30))
    np.testing.assert_allclose(np.asarray(small.x), [1, 1], atol=1e-4)


def test_errors():
    x0 = f64([1.0, 2.0])
    with pytest.raises(ValueError, match="method 'nelder-mead' is not supported"):
        sopt.minimize(rosen, x0, method="nelder-mead")
    with pytest.raises(ValueError, match=r"x0 must be 1-d .* shape \(1, 2\)"):
        sopt.minimize(rosen, x0[None], method="BFGS")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['maxcor'\] for method 'bfgs'"):
        sopt.minimize(rosen, x0, method="BFGS", options=dict(maxcor=3))
    with pytest.raises(ValueError, match="'maxiter' must be an int >= 0"):
        sopt.minimize(rosen, x0, method="BFGS", options=dict(maxiter=-1))
    with pytest.raises(TypeError, match=r"real floating scalar .* shape \(2,\)"):
        sopt.minimize(lambda x: x ** 2, x0, method="BFGS")
    with pytest.raises(TypeError, match="args must be a tuple"):
        sopt.minimize(quad, x0, args=[1], method="BFGS")


# ---- hard cases --------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_hard_cases(method):
    bowl = lambda x: snp.sum((x - 1.0) ** 2)  # noqa: E731
    r = sopt.minimize(bowl, f64([1.0, 1.0]), method=method)       # already at the optimum
    assert (int(r.nit), int(r.nfev), int(r.status), bool(r.success)) == (0, 1, 0, True)
    r = sopt.minimize(bowl, f64([np.nan, 1.0]), method=method)    # NaN start: stops at once
    assert (int(r.nit), int(r.status), bool(r.success)) == (0, 3, False)
    r = sopt.minimize(rosen, f64([-1.2, 1.0]), method=method, options=dict(maxiter=5))
    assert (int(r.nit), int(r.status), bool(r.success)) == (5, 1, False)
    r = sopt.minimize(rosen, f64([-1.2, 1.0]), method=method, options=dict(maxiter=0))
    assert (int(r.nit), int(r.status)) == (0, 1)
    # A flat direction: x[1] does not enter the objective, so it never moves.
    r = sopt.minimize(lambda x: (x[0] - 2.0) ** 2, f64([0.0, 3.0]), method=method)
    np.testing.assert_allclose(np.asarray(r.x), [2.0, 3.0], atol=1e-8)
    assert bool(r.success)
    # Unbounded below: every line search keeps doubling; it stops with success False.
    r = sopt.minimize(lambda x: -snp.sum(x), f64([0.0, 3.0]), method=method)
    assert int(r.status) == 2 and not bool(r.success)
    # NaN beyond x = 3 with the minimiser of the formula at 4: the line search backs off from
    # the NaN region, then gives up there with status 3.
    r = sopt.minimize(lambda x: snp.sum(snp.where(x > 3, np.nan, (x - 4) ** 2)), f64([0.0]),
                      method=method)
    assert int(r.status) == 3 and not bool(r.success) and 2 < float(r.x[0]) <= 3
    # A log barrier (NaN for x < 0) with a big first step: the optimum x = 2 is found.
    r = sopt.minimize(lambda x: snp.sum(x - 2 * snp.log(x)), f64([0.1, 5.0]), method=method)
    assert bool(r.success)
    np.testing.assert_allclose(np.asarray(r.x), [2, 2], atol=1e-4)


@pytest.mark.parametrize("method", METHODS)
def test_dtypes(method):
    bowl = lambda x: snp.sum((x - 1.0) ** 2)  # noqa: E731
    r = sopt.minimize(bowl, snp.asarray([3, 4]), method=method)  # int x0 -> float32
    assert r.x.dtype == snp.float32 and r.fun.dtype == snp.float32 and bool(r.success)
    np.testing.assert_allclose(np.asarray(r.x), [1, 1], atol=1e-5)
    r = sopt.minimize(rosen, snp.asarray([-1.2, 1.0]), method=method, options=dict(gtol=1e-3))
    assert r.x.dtype == snp.float32 and int(r.status) in (0, 2, 4)
    np.testing.assert_allclose(np.asarray(r.x), [1, 1], atol=1e-2)


def test_lbfgs_ring_buffer_matches_dense_recursion():
    # After 7 pairs in a 3-slot ring, -H g must equal the BFGS recursion (N&W eq. 7.19) over the
    # 3 newest pairs from H0 = gamma I, gamma from the newest pair, written densely in NumPy.
    from starling.arrays.scipy import quasi_newton as qn
    rng = np.random.default_rng(8)
    n, m = 5, 3
    mem = qn.lbfgs_init(f64(np.zeros(n)), m)
    pairs = []
    for _ in range(7):
        s_ = rng.normal(size=n)
        y_ = spd(n, seed=9) @ s_ + 0.1 * rng.normal(size=n)
        pairs.append((s_, y_))
        mem = qn.lbfgs_update(mem, f64(s_), f64(y_))
    g = rng.normal(size=n)
    s_, y_ = pairs[-1]
    h = (s_ @ y_) / (y_ @ y_) * np.eye(n)
    for s_, y_ in pairs[-m:]:
        rho = 1 / (y_ @ s_)
        v = np.eye(n) - rho * np.outer(y_, s_)
        h = v.T @ h @ v + rho * np.outer(s_, s_)
    np.testing.assert_allclose(np.asarray(qn.lbfgs_direction(mem, f64(g))), -h @ g, rtol=1e-10)
    # A pair violating the curvature condition is skipped.
    same = qn.lbfgs_update(mem, f64(np.ones(n)), f64(-np.ones(n)))
    np.testing.assert_array_equal(np.asarray(same.s), np.asarray(mem.s))


def test_line_search_strong_wolfe():
    from starling.arrays.scipy.line_search import line_search
    fun = lambda x: snp.sum(x ** 4) + snp.sum(x)  # noqa: E731
    vg = st.value_and_grad(fun)
    x = f64([1.0, -0.5])
    f0, g0 = vg(x)
    p = -g0
    for a0 in (1e-3, 1.0, 100.0):     # bracketing by doubling, zoom from above
        r = line_search(vg, x, p, f0, g0, f64(a0))
        a = float(r.a)
        assert not bool(r.failed) and int(r.status) == 0 and a > 0
        assert float(fun(x + a * p)) <= float(f0) + 1e-4 * a * float(g0 @ p)
        assert abs(float(r.g @ p)) <= 0.9 * abs(float(g0 @ p))
        np.testing.assert_allclose(np.asarray(r.g), np.asarray(vg(x + a * p)[1]))
    r = line_search(vg, x, -p, f0, g0, f64(1.0))   # uphill: no search at all
    assert bool(r.failed) and int(r.status) == 2 and int(r.nfev) == 0
    with pytest.raises(ValueError, match="0 < c1 < c2 < 1"):
        line_search(vg, x, p, f0, g0, 1.0, c1=0.5, c2=0.1)


# ---- implicit differentiation --------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_implicit_quadratic_closed_form(method):
    n = 4
    a, b = spd(n), np.random.default_rng(1).normal(size=n)
    ainv = np.linalg.inv(a)

    def solve(a, b):
        return sopt.minimize(quad, snp.zeros(n, dtype=snp.float64), args=(a, b), method=method,
                             options=tight(method, 1e-11)).x

    for jac in (st.jacfwd, st.jacrev):           # dx*/db = A^-1
        np.testing.assert_allclose(np.asarray(jac(solve, argnums=1)(f64(a), f64(b))), ainv,
                                   atol=1e-12)
    # grad of |x*|^2: by b, A^-T 2x*; by A (the objective sees its symmetric part).
    xs = ainv @ b
    lam = ainv @ (2 * xs)
    ga, gb = st.grad(lambda a, b: snp.sum(solve(a, b) ** 2), argnums=(0, 1))(f64(a), f64(b))
    np.testing.assert_allclose(np.asarray(gb), lam, atol=1e-12)
    np.testing.assert_allclose(np.asarray(ga), -(np.outer(lam, xs) + np.outer(xs, lam)) / 2,
                               atol=1e-12)
    # x0 does not matter.
    g0 = st.grad(lambda x0: snp.sum(sopt.minimize(quad, x0, args=(f64(a), f64(b)),
                                                  method=method).x))(f64(np.ones(n)))
    np.testing.assert_array_equal(np.asarray(g0), np.zeros(n))


@pytest.mark.parametrize("method", METHODS)
def test_implicit_vs_finite_differences(method):
    x, y = logistic_data(seed=2)
    x, y = f64(x), f64(y)

    def fit(lam, shift):
        r = sopt.minimize(lambda w, lam, shift: logistic(w + shift, x, y, lam),
                          snp.zeros(3, dtype=snp.float64), args=(lam, shift), method=method,
                          options=tight(method, 1e-12))
        return r.x, r.fun, r.jac

    # Forward against central differences of the solution, reverse against forward.
    check_grads(fit, (f64(0.3), f64([0.1, -0.2, 0.05])), order=1, eps=1e-5, atol=1e-6,
                rtol=1e-5)


@pytest.mark.parametrize("method", METHODS)
def test_bilevel_hyperparameter_gradient(method):
    x, y = logistic_data(seed=3, n=60)
    tr, va = slice(0, 40), slice(40, 60)
    xt, yt, xv, yv = f64(x[tr]), f64(y[tr]), f64(x[va]), f64(y[va])

    def val_loss(log_lam):
        w = sopt.minimize(logistic, snp.zeros(3, dtype=snp.float64),
                          args=(xt, yt, snp.exp(log_lam)), method=method,
                          options=tight(method, 1e-12)).x
        return logistic(w, xv, yv, 0.0)

    g = float(st.grad(val_loss)(f64(-1.0)))
    h = 1e-5
    fd = (float(val_loss(f64(-1.0 + h))) - float(val_loss(f64(-1.0 - h)))) / (2 * h)
    assert abs(g - fd) <= 1e-7 + 1e-5 * abs(fd)
    # compile(grad) == eager grad
    gc = float(st.compile(st.grad(val_loss))(f64(-1.0)))
    assert abs(gc - g) <= 1e-10 * max(1, abs(g))


def test_implicit_flat_direction_and_second_order():
    # x[1] is flat: the minimum-norm derivative leaves it still, x[0]* = c.
    f = lambda x, c: (x[0] - c) ** 2  # noqa: E731
    jac = st.jacfwd(lambda c: sopt.minimize(f, f64([0.0, 5.0]), args=(c,), method="BFGS").x)
    np.testing.assert_allclose(np.asarray(jac(f64(1.5))), [1.0, 0.0], atol=1e-12)
    # Second order: x* = A^-1 b is nonlinear in A.
    a, b = spd(3, seed=4), np.array([1.0, -1.0, 2.0])

    def solve(a):
        return sopt.minimize(quad, snp.zeros(3, dtype=snp.float64), args=(a, f64(b)),
                             method="BFGS", options=dict(gtol=1e-12)).x

    check_grads(solve, (f64(a),), order=2, modes=("fwd",), eps=1e-5, atol=1e-6, rtol=1e-4)
    # The optimal value f*(b) = -b^T A^-1 b / 2: gradient -x*, Hessian -A^-1 (forward over
    # reverse: the custom rule must reach the outer jacfwd through linearize).
    fstar = lambda b: sopt.minimize(quad, snp.zeros(3, dtype=snp.float64),  # noqa: E731
                                    args=(f64(a), b), method="BFGS",
                                    options=dict(gtol=1e-12)).fun
    np.testing.assert_allclose(np.asarray(st.grad(fstar)(f64(b))), -np.linalg.solve(a, b),
                               atol=1e-12)
    np.testing.assert_allclose(np.asarray(st.hessian(fstar)(f64(b))), -np.linalg.inv(a),
                               atol=1e-12)


def test_implicit_through_closure():
    # Values fun closes over (here traced by grad / vmap) are differentiated like args.
    a = spd(3, seed=7)

    def sol(b):
        return sopt.minimize(lambda x: quad(x, f64(a), b), snp.zeros(3, dtype=snp.float64),
                             method="BFGS", options=dict(gtol=1e-11)).x

    np.testing.assert_allclose(np.asarray(st.jacrev(sol)(f64([1.0, 2.0, 3.0]))),
                               np.linalg.inv(a), atol=1e-11)
    bs = np.random.default_rng(7).normal(size=(2, 3))
    np.testing.assert_allclose(np.asarray(st.vmap(sol)(f64(bs))),
                               np.linalg.solve(a, bs.T).T, atol=1e-10)


# ---- compile and vmap ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_compile_matches_eager(method):
    x, y = logistic_data(seed=5)
    args = (f64(x), f64(y), f64(0.2))
    run = lambda x0, *args: sopt.minimize(logistic, x0, args=args, method=method)  # noqa: E731
    eager = run(f64(np.zeros(3)), *args)
    comp = st.compile(run)(f64(np.zeros(3)), *args)
    np.testing.assert_allclose(np.asarray(comp.x), np.asarray(eager.x), rtol=1e-9, atol=1e-12)
    for field in ("nit", "nfev", "status", "success"):
        assert int(getattr(comp, field)) == int(getattr(eager, field)), field


@pytest.mark.parametrize("method", METHODS)
def test_vmap_matches_loop(method):
    x0s = np.array([[-1.2, 1.0], [2.0, 2.0], [np.nan, 0.0]])
    scale = f64([1.0, 10.0, 1.0])

    def run(x0, c):
        r = sopt.minimize(lambda x, c: c * rosen(x), x0, args=(c,), method=method)
        return r.x, r.nit, r.status, r.fun

    batched = st.vmap(run)(f64(x0s), scale)
    for i in range(len(x0s)):
        one = run(f64(x0s[i]), scale[i])
        for got, want in zip(batched, one):
            np.testing.assert_allclose(np.asarray(got)[i], np.asarray(want), rtol=1e-9,
                                       atol=1e-12)
    # vmap of the implicit derivative over args: dx*/db = A^-1 for each b.
    a = spd(3, seed=6)
    bs = np.random.default_rng(6).normal(size=(4, 3))
    sol = lambda b: sopt.minimize(quad, snp.zeros(3, dtype=snp.float64),  # noqa: E731
                                  args=(f64(a), b), method=method,
                                  options=tight(method, 1e-11)).x
    jacs = st.vmap(st.jacrev(sol))(f64(bs))
    np.testing.assert_allclose(np.asarray(jacs), np.broadcast_to(np.linalg.inv(a), (4, 3, 3)),
                               atol=1e-11)
