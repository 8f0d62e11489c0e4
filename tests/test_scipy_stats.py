"""starling.scipy.stats against SciPy on hard inputs (tails, points outside the support, df
tiny / huge / inf, parameters outside their domain, NaN), against mpmath where SciPy itself is
inexact, derivatives against finite differences (check_grads), vmap against a loop and
compile against eager."""
from __future__ import annotations

import mpmath
import numpy as np
import pytest
import scipy.special as sc
import scipy.stats as ss

import starling
import starling.numpy as snp
import starling.scipy.stats as st
from starling.scipy.stats import norm as _norm_module   # the import path works
from starling.test_util import check_grads

INF, NAN = np.inf, np.nan


def A(*v, dt=np.float64):
    return snp.asarray(np.array(v, dt))


def rel_err(got, want):
    """Largest relative error; a NaN / inf pattern mismatch counts as inf."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(all="ignore"):
        err = np.abs(got - want) / np.abs(want)
    err = np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))
    return float(np.max(err, initial=0.0))


_X = [-1e300, -1e10, -1e3, -40.0, -5.0, -1.0, -1e-3, -0.0, 0.0, 1e-3, 1.0, 5.0, 40.0, 1e3, 1e10,
      INF, -INF, NAN]
_UNIT = [-0.5, -0.0, 0.0, 1e-300, 1e-10, 0.3, 0.5, 0.9, 1 - 1e-10, 1.0, 1.5, INF, NAN]
_POS = [-1.0, 0.0, 1e-300, 1e-10, 0.3, 1.0, 5.0, 50.0, 800.0, 1e5, NAN]
_COUNTS = [-1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 10.0, 100.0, 1e4, 1e6, INF, NAN]
_Q = [0.0, 1e-300, 1e-20, 1e-9, 0.3, 0.5, 0.7, 1 - 1e-10, 1.0, -0.1, 1.1, NAN]

# (name, functions, points, parameter tuples, rtol): every function at every point for every
# parameter tuple against SciPy in float64.
CASES = [
    ("norm", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], _X,
     [(0.0, 1.0), (0.5, 2.0), (-3.0, 1e-3), (0.0, 0.0), (0.0, -1.0)], 1e-14),
    ("norm", ["ppf", "isf"], _Q, [(0.0, 1.0), (0.5, 2.0), (0.0, -1.0)], 1e-14),
    ("t", ["logpdf", "cdf", "sf", "logcdf", "logsf"], _X,
     [(0.1,), (1.0,), (2.5,), (30.0, 0.5, 2.0), (0.0,), (-1.0,), (3.0, 0.0, -1.0)], 1e-13),
    # SciPy's logpdf differences log-gammas of 500 (4e-13 off: see the mpmath test)
    ("t", ["logpdf", "cdf", "sf", "logcdf", "logsf"], _X, [(1e3,)], 5e-13),
    ("t", ["pdf"], _X, [(0.1,), (1.0,), (2.5,), (30.0, 0.5, 2.0)], 2e-13),
    ("t", ["pdf"], _X, [(1e3,)], 5e-13),   # SciPy differences log-gammas of 500
    ("beta", ["logpdf", "cdf", "sf", "logcdf", "logsf"], _UNIT,
     [(0.5, 0.5), (1.0, 1.0), (2.0, 3.0), (1e-3, 5.0), (50.0, 0.7), (1.0, 0.5), (0.0, 1.0),
      (1.0, -1.0), (2.0, 3.0, -1.0, 3.0)], 1e-13),
    ("beta", ["pdf"], _UNIT, [(0.5, 0.5), (2.0, 3.0), (1e3, 1e3), (50.0, 0.7)], 5e-13),
    ("gamma", ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"], _POS,
     [(1e-3,), (0.5,), (1.0,), (2.5, 0.0, 1.5), (100.0,), (1e5,), (0.0,), (-1.0,),
      (2.0, 1.0, 0.0)], 1e-13),
    ("poisson", ["logpmf", "pmf", "cdf", "sf"], _COUNTS,
     [(0.0,), (1e-10,), (0.5,), (3.0,), (100.0,), (3.0, 2.0), (-1.0,)], 1e-12),
    ("bernoulli", ["logpmf", "pmf", "cdf", "sf"], [-1.0, 0.0, 0.5, 1.0, 2.0, NAN],
     [(0.0,), (0.3,), (1.0,), (1.2,), (-0.1,), (0.3, 1.0)], 1e-15),
    ("bernoulli", ["ppf"], _Q, [(0.0,), (0.3,), (1.0,), (1.2,)], 0.0),
]
_IDS = [f"{c[0]}-{'/'.join(c[1])}" for c in CASES]

# Where Starling is right and SciPy is not (checked below against mpmath or by the maths):
# gamma.logpdf / pdf at x == inf (SciPy: NaN from inf - inf; the density's limit is 0).
_KNOWN = {("gamma", "logpdf", INF): -INF, ("gamma", "pdf", INF): 0.0}


@pytest.mark.parametrize("dist,fns,xs,params,rtol", CASES, ids=_IDS)
def test_values_against_scipy_float64(dist, fns, xs, params, rtol):
    x = np.array(xs, np.float64)
    for fn in fns:
        for p in params:
            got = np.asarray(getattr(getattr(st, dist), fn)(A(*x), *p))
            with np.errstate(all="ignore"):
                want = np.asarray(getattr(getattr(ss, dist), fn)(x, *p), np.float64)
            for (d, f, pt), v in _KNOWN.items():
                if (d, f) == (dist, fn):
                    want = np.where(x == pt, v, want)
            if dist == "t" and fn != "pdf":   # SciPy overflows / underflows: mpmath instead
                loc, scale = (p + (0.0, 1.0))[1:3]
                for i in np.flatnonzero(np.isfinite(x) & ((want == 0) | np.isneginf(want))):
                    with mpmath.workdps(60):
                        ref = _t_ref((x[i] - loc) / scale, p[0])
                    want[i] = ref[fn] - np.log(scale) if fn == "logpdf" else ref[fn]
                    if fn in ("logcdf", "logsf") and min(ref["cdf"], ref["sf"]) == 0.0:
                        # documented: the log of a tail below the float range is -inf unless
                        # z**2 / df > 1 / eps (where the series' leading term is summed in logs)
                        want[i] = got[i] if np.isneginf(got[i]) else want[i]
            if dist == "norm" and fn in ("cdf", "sf"):
                # SciPy's erfc tail is ~3e-14 off (Starling's ndtr: 7e-16 of mpmath): the
                # tails against mpmath
                loc, scale = (p + (0.0, 1.0))[:2]
                for i in np.flatnonzero(np.isfinite(x) & (want > 0) & (want < 1e-10)):
                    z = (x[i] - loc) / scale
                    with mpmath.workdps(60):
                        want[i] = float(mpmath.ncdf(z if fn == "cdf" else -z))
            assert got.dtype == np.float64
            # exp(logpdf): a relative error of |logpdf| * eps (1e-13 near logpdf = -800)
            tol = max(rtol, 2e-13) if fn in ("pdf", "pmf") else rtol
            assert rel_err(got, want) <= tol, (dist, fn, p, x, got, want)


def test_float32_keeps_dtype_and_accuracy():
    x = np.array([-30.0, -3.0, 0.2, 4.0], np.float32)
    for f, ref in [(st.norm.logcdf, ss.norm.logcdf), (st.norm.sf, ss.norm.sf),
                   (lambda v: st.t.cdf(v, 3.0), lambda v: ss.t.cdf(v, 3.0)),
                   (lambda v: st.gamma.logsf(abs(v), 2.0), lambda v: ss.gamma.logsf(abs(v), 2.0))]:
        got = f(snp.asarray(x))
        assert got.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), ref(x.astype(np.float64)), rtol=1e-5)


def test_normal_log_tails_where_scipy_t_underflows():
    # t with df == inf is the normal: log tails through log_ndtr (SciPy's t gives -inf)
    x = np.array([-1e10, -40.0, 40.0])
    np.testing.assert_allclose(np.asarray(st.t.logcdf(A(*x), INF)), sc.log_ndtr(x), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(st.t.logsf(A(*x), INF)), sc.log_ndtr(-x), rtol=1e-15)
    assert float(st.norm.logcdf(A(-40.0))) == pytest.approx(-804.6084420137538, rel=1e-15)


def _t_ref(x, df):
    """mpmath's ``{fn: value}`` of Student's t at ``x`` (standard) for ``df``."""
    x, df = mpmath.mpf(x), mpmath.mpf(df)
    logpdf = (mpmath.loggamma((df + 1) / 2) - mpmath.loggamma(df / 2)
              - mpmath.log(df * mpmath.pi) / 2 - (df + 1) / 2 * mpmath.log1p(x * x / df))
    tail = mpmath.betainc(df / 2, mpmath.mpf(1) / 2, 0, df / (df + x * x), regularized=True) / 2
    small, big = mpmath.log(tail), mpmath.log1p(-tail)
    cdf, sf, logcdf, logsf = ((tail, 1 - tail, small, big) if x < 0
                              else (1 - tail, tail, big, small))
    return {"logpdf": float(logpdf), "cdf": float(cdf), "sf": float(sf),
            "logcdf": float(logcdf), "logsf": float(logsf)}


@pytest.mark.parametrize("x,df", [(-1e-3, 1e3), (0.0, 1e6), (-5.0, 1e6), (-5.0, 1e10), (3.0, 1e10),
                                  (1e200, 3.0), (-1e300, 0.1), (-1e3, 0.1), (-1e-8, 1e12)])
def test_t_against_mpmath_where_scipy_is_inexact(x, df):
    # SciPy's logpdf differences log-gammas (2e-10 off at df = 1e6) and overflows x**2
    with mpmath.workdps(60):
        ref = _t_ref(x, df)
    assert rel_err(st.t.logpdf(A(x), A(df)), ref["logpdf"]) < 1e-14
    assert rel_err(st.t.cdf(A(x), A(df)), ref["cdf"]) < 2e-14


def test_beta_sf_small_x_small_a():
    # 1 - I_x(a, b) at x = 1e-300 with a = 1e-3 is about 1/2 (1 - x rounds to 1: betaincc)
    got = st.beta.sf(A(1e-300), A(1e-3), A(5.0))
    assert rel_err(got, ss.beta.sf(1e-300, 1e-3, 5.0)) < 1e-14
    assert rel_err(st.beta.logcdf(A(1e-300), A(1e-3), A(5.0)),
                   ss.beta.logcdf(1e-300, 1e-3, 5.0)) < 1e-13


# ---- multivariate normal ------------------------------------------------------------------------
def _spd(rng, n, batch=()):
    m = rng.normal(size=batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + np.eye(n)


def test_mvn_against_scipy_full_diag_scalar_and_1d():
    rng = np.random.default_rng(0)
    cov, mean, x = _spd(rng, 3), rng.normal(size=3), rng.normal(size=(5, 3))
    mvn, ref = st.multivariate_normal, ss.multivariate_normal
    for c in [cov, np.array([0.5, 2.0, 1.0]), 2.5]:
        for fn in ["logpdf", "pdf"]:
            got = getattr(mvn, fn)(snp.asarray(x), snp.asarray(mean), snp.asarray(c))
            assert rel_err(got, getattr(ref, fn)(x, mean, c)) < 1e-13, (c, fn)
    got = mvn.logpdf(snp.asarray(x[0]), snp.asarray(mean), snp.asarray(cov))
    assert got.shape == () and rel_err(got, ref.logpdf(x[0], mean, cov)) < 1e-13
    # one dimension: each entry of x is a point (SciPy); scalar mean and cov: elementwise (JAX)
    assert rel_err(mvn.logpdf(A(0.3, -1.0, 2.0), A(0.5), A(2.0)),
                   ref.logpdf([0.3, -1.0, 2.0], 0.5, 2.0)) < 1e-14
    assert rel_err(mvn.logpdf(A(0.3, -1.0, 2.0), 0.5, 2.0),
                   ref.logpdf([0.3, -1.0, 2.0], 0.5, 2.0)) < 1e-14
    assert rel_err(mvn.logpdf(A(0.3, -1.0), None, A(1.0, 3.0)),
                   ref.logpdf([0.3, -1.0], [0.0, 0.0], [1.0, 3.0])) < 1e-14


def test_mvn_batched_broadcast():
    rng = np.random.default_rng(1)
    cov, mean, x = _spd(rng, 3, (4,)), rng.normal(size=(4, 3)), rng.normal(size=(2, 1, 3))
    got = np.asarray(st.multivariate_normal.logpdf(snp.asarray(x), snp.asarray(mean),
                                                   snp.asarray(cov)))
    assert got.shape == (2, 4)
    for i in range(2):
        for j in range(4):
            want = ss.multivariate_normal.logpdf(x[i, 0], mean[j], cov[j])
            assert rel_err(got[i, j], want) < 1e-13


def test_mvn_singular_allow_singular():
    cov = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 0.0]])
    mean = np.array([0.0, 0.0, 0.5])
    x = np.array([[0.3, -0.2, 0.5], [1.0, 0.4, 0.5], [1.0, 0.4, 0.6], [0.0, 0.0, 0.5 + 1e-13]])
    got = st.multivariate_normal.logpdf(snp.asarray(x), snp.asarray(mean), snp.asarray(cov),
                                        allow_singular=True)
    want = ss.multivariate_normal.logpdf(x, mean, cov, allow_singular=True)
    assert np.isneginf(np.asarray(got)[2]) and np.isneginf(want[2])
    assert rel_err(got, want) < 1e-13
    # the same for a rank-deficient diagonal
    got = st.multivariate_normal.logpdf(snp.asarray(x), snp.asarray(mean), A(2.0, 1.0, 0.0),
                                        allow_singular=True)
    want = ss.multivariate_normal.logpdf(x, mean, np.diag([2.0, 1.0, 0.0]), allow_singular=True)
    assert rel_err(got, want) < 1e-13
    # without allow_singular, a non positive definite cov gives NaN (SciPy raises)
    bad = st.multivariate_normal.logpdf(snp.asarray(x), snp.asarray(mean),
                                        snp.asarray(np.diag([1.0, -1.0, 1.0])))
    assert np.isnan(np.asarray(bad)).all()


def test_mvn_shape_errors():
    with pytest.raises(ValueError, match="multivariate_normal.logpdf"):
        st.multivariate_normal.logpdf(A(1.0, 2.0), A(0.0, 0.0, 0.0), snp.eye(3))
    with pytest.raises(ValueError, match="cov"):
        st.multivariate_normal.logpdf(A(1.0, 2.0), A(0.0, 0.0), snp.eye(3))


# ---- entropy ------------------------------------------------------------------------------------
def test_entropy_against_scipy():
    pk = np.array([[0.1, 0.0, 3.0], [0.2, 0.5, 1.0], [0.7, 0.5, 0.0]])
    qk = np.array([[0.3, 0.2, 1.0], [0.3, 0.0, 1.0], [0.4, 0.8, 1.0]])
    for kw in [{}, {"base": 2}, {"axis": 1}, {"axis": -1, "base": 10}]:
        assert rel_err(st.entropy(snp.asarray(pk), **kw), ss.entropy(pk, **kw)) < 1e-15
        assert rel_err(st.entropy(snp.asarray(pk), snp.asarray(qk), **kw),
                       ss.entropy(pk, qk, **kw)) < 1e-15   # includes q == 0 < p: inf
    with pytest.raises(ValueError, match="entropy"):
        st.entropy(snp.asarray(1.0))


# ---- derivatives, vmap, compile -----------------------------------------------------------------
_GRADS = [
    ("norm.logpdf", st.norm.logpdf, (A(-1.3, 0.2, 3.0), A(0.5), A(1.7)), 2),
    ("norm.logcdf", st.norm.logcdf, (A(-40.0, -3.0, 0.2, 3.0), A(0.5), A(1.7)), 2),
    ("norm.logsf", st.norm.logsf, (A(-4.0, 0.2, 30.0), A(0.5), A(1.7)), 2),
    ("norm.ppf", st.norm.ppf, (A(1e-3, 0.3, 0.9), A(0.5), A(1.7)), 2),
    ("t.logpdf", st.t.logpdf, (A(-1e3, -1.3, 0.2, 3.0), A(2.5, 0.7, 50.0, 1e4), A(0.5), A(1.7)),
     2),
    ("t.cdf(x)", lambda x: st.t.cdf(x, A(2.5, 0.7, 50.0, 1e4)), (A(-1e3, -1.3, 0.2, 3.0),), 2),
    ("t.cdf(df)", lambda df: st.t.cdf(A(-1e3, -1.3, 0.2, 3.0), df), (A(2.5, 0.7, 50.0, 1e4),),
     1),
    ("t.logsf", st.t.logsf, (A(-5.0, -1.3, 0.2, 30.0), A(2.5, 0.7, 50.0, 1e4)), 1),
    ("beta.logpdf", st.beta.logpdf, (A(0.01, 0.3, 0.99), A(0.5, 2.0, 30.0), A(0.7, 3.0, 1.5)),
     2),
    ("beta.cdf", st.beta.cdf, (A(0.01, 0.3, 0.99), A(0.5, 2.0, 30.0), A(0.7, 3.0, 1.5)), 1),
    ("beta.logsf", st.beta.logsf, (A(0.01, 0.3, 0.99), A(0.5, 2.0, 30.0), A(0.7, 3.0, 1.5)), 1),
    ("gamma.logpdf", st.gamma.logpdf, (A(0.01, 0.3, 9.0), A(0.5, 2.0, 30.0), A(-0.1), A(1.5)),
     2),
    ("gamma.logcdf", st.gamma.logcdf, (A(0.01, 0.3, 9.0, 100.0), A(0.5, 2.0, 30.0, 3.0)), 2),
    ("poisson.logpmf", lambda mu: st.poisson.logpmf(A(0.0, 3.0, 10.0, 200.0), mu),
     (A(0.5, 2.0, 30.0, 180.0),), 2),
    ("poisson.cdf", lambda mu: st.poisson.cdf(A(0.0, 3.0, 10.0, 200.0), mu),
     (A(0.5, 2.0, 30.0, 180.0),), 2),
    ("bernoulli.logpmf", lambda p: st.bernoulli.logpmf(A(0.0, 1.0, 1.0, 0.0), p),
     (A(0.5, 0.2, 1e-3, 0.9),), 2),
    ("entropy", st.entropy, (A(0.1, 0.2, 0.7), A(0.3, 0.3, 0.4)), 2),
    ("mvn", lambda x, m, c: st.multivariate_normal.logpdf(x, m, (c + c.T) / 2),
     (snp.asarray(np.random.default_rng(2).normal(size=(2, 3))), A(0.1, 0.2, -0.3),
      snp.asarray(_spd(np.random.default_rng(3), 3))), 2),
    ("mvn eigh", lambda x, m, c: st.multivariate_normal.logpdf(x, m, (c + c.T) / 2,
                                                               allow_singular=True),
     (snp.asarray(np.random.default_rng(2).normal(size=(2, 3))), A(0.1, 0.2, -0.3),
      snp.asarray(_spd(np.random.default_rng(3), 3))), 1),
    ("mvn diag", st.multivariate_normal.logpdf,
     (snp.asarray(np.random.default_rng(4).normal(size=(2, 3))), A(0.1, 0.2, -0.3),
      A(0.5, 2.0, 1.0)), 2),
]


@pytest.mark.parametrize("name,f,args,order", _GRADS, ids=[g[0] for g in _GRADS])
def test_grads_against_finite_differences(name, f, args, order):
    check_grads(f, args, order=order, rtol=1e-4, atol=1e-6)


def test_mvn_singular_grad_within_the_support():
    cov = snp.asarray(np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 0.0]]))
    basis, mean = snp.asarray(np.eye(3)[:, :2]), A(0.0, 0.0, 0.5)

    def f(u):   # points mean + basis u stay on the support
        return st.multivariate_normal.logpdf(snp.matmul(u, basis.T) + mean, mean, cov,
                                             allow_singular=True)
    check_grads(f, (snp.asarray(np.array([[0.3, -0.2], [1.0, 0.4]])),), order=2, rtol=1e-4,
                atol=1e-6)


def _mixed(x, df):
    return (st.t.logcdf(x, df) + st.beta.logsf(snp.abs(x) / 6.0, df + 0.1, 2.0)
            + st.gamma.logpdf(snp.abs(x), df + 0.5) + st.poisson.cdf(snp.floor(snp.abs(x)), 2.0)
            + st.norm.logsf(x) + st.bernoulli.logpmf(snp.floor(snp.abs(x)) % 2, 0.3))


def test_vmap_matches_loop_and_compile_matches_eager():
    x = A(-5.0, -1.0, 0.3, 2.0, 5.0)
    df = A(0.5, 1.0, 3.0, 30.0, 1e4)
    eager = np.asarray(_mixed(x, df))
    assert np.isfinite(eager).all()
    loop = np.array([float(_mixed(x[i], df[i])) for i in range(5)])
    np.testing.assert_allclose(np.asarray(starling.vmap(_mixed)(x, df)), loop, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(starling.compile(_mixed)(x, df)), eager, rtol=1e-13)
    rng = np.random.default_rng(5)
    cov, xs = snp.asarray(_spd(rng, 3, (4,))), snp.asarray(rng.normal(size=(4, 3)))
    for singular in (False, True):
        def g(x, c):
            return st.multivariate_normal.logpdf(x, None, c, allow_singular=singular)
        ref = np.array([ss.multivariate_normal.logpdf(np.asarray(xs)[i], None, np.asarray(cov)[i])
                        for i in range(4)])
        np.testing.assert_allclose(np.asarray(starling.vmap(g)(xs, cov)), ref, rtol=1e-13)
        np.testing.assert_allclose(np.asarray(starling.compile(g)(xs, cov)), ref, rtol=1e-13)


def test_namespaces_and_docstrings():
    assert _norm_module is st.norm
    for dist in ["norm", "t", "beta", "gamma", "poisson", "bernoulli", "multivariate_normal"]:
        mod = getattr(st, dist)
        for fn in mod.__all__:
            doc = getattr(mod, fn).__doc__
            assert doc and "Args:" in doc and "Returns:" in doc, (dist, fn)
    with pytest.raises(TypeError, match="norm.cdf"):
        st.norm.cdf(snp.asarray(np.array([1j])))
