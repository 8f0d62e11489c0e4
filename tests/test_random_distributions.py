"""starling.random distributions beyond the basics: gamma family, discrete (poisson, binomial,
geometric), multivariate (multivariate_normal, orthogonal, ball) and closed-form families.

Statistical tests run at fixed keys against scipy.stats (Kolmogorov-Smirnov for continuous
laws, chi-square for discrete ones) with a p-value threshold of 1e-4; gradients of gamma samples
are checked against finite differences of scipy's inverse CDF at the same quantile.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import starling
import starling.numpy as snp
import starling.random as sr
from starling.core.ir import check_program, eval_program
from starling.transforms.stage import make_ir

P_MIN = 1e-4
N = 10_000


def ks(x, cdf):
    return stats.kstest(np.asarray(x, np.float64).ravel(), cdf).pvalue


def chi2_discrete(x, pmf, support_max):
    """Chi-square goodness of fit of integer samples to ``pmf`` on 0..support_max, with the
    tail beyond merged and bins of expected count < 5 merged into their neighbours."""
    x = np.asarray(x).astype(np.int64).ravel()
    n = x.size
    ks_ = np.arange(support_max + 1)
    p = pmf(ks_)
    obs = np.bincount(np.clip(x, 0, support_max + 1), minlength=support_max + 2)[:support_max + 2]
    exp = np.append(p, max(1.0 - p.sum(), 0.0)) * n
    o_bins, e_bins, o_acc, e_acc = [], [], 0.0, 0.0
    for o, e in zip(obs, exp):
        o_acc += o
        e_acc += e
        if e_acc >= 5:
            o_bins.append(o_acc)
            e_bins.append(e_acc)
            o_acc = e_acc = 0.0
    if e_acc > 0 or o_acc > 0:
        if not e_bins:
            return 1.0 if o_acc == n else 0.0
        o_bins[-1] += o_acc
        e_bins[-1] += e_acc
    o_bins, e_bins = np.array(o_bins), np.array(e_bins)
    if len(o_bins) == 1:
        return 1.0 if o_bins[0] == n else 0.0
    return stats.chisquare(o_bins, e_bins * n / e_bins.sum()).pvalue


def staged(f, *args):
    prog = make_ir(f)(*args)
    check_program(prog)
    out = eval_program(prog, prog.consts, *args)
    return out[0] if len(out) == 1 else out


# ---- gamma family --------------------------------------------------------------------------

@pytest.mark.parametrize("a", [0.01, 0.5, 1.0, 7.5, 1e4])
def test_gamma_ks(a):
    x = np.asarray(sr.gamma(sr.key(1), a, (N,), np.float64))
    assert x.dtype == np.float64 and np.all(x >= 0)
    assert ks(x, stats.gamma(a).cdf) > P_MIN


@pytest.mark.parametrize("a", [0.01, 0.5, 7.5])
def test_gamma_float32_and_loggamma_ks(a):
    x = np.asarray(sr.gamma(sr.key(2), a, (N,)))
    assert x.dtype == np.float32
    if a >= 0.5:
        assert ks(x, stats.gamma(a).cdf) > P_MIN
    lx = np.asarray(sr.loggamma(sr.key(2), a, (N,)))
    assert lx.dtype == np.float32 and np.all(np.isfinite(lx))
    assert ks(lx, stats.loggamma(a).cdf) > P_MIN


def test_gamma_degenerate_parameters_and_errors():
    a = snp.asarray(np.array([0.0, np.inf, 1e-30, 1e30], np.float32))
    x = np.asarray(sr.gamma(sr.key(0), a))
    assert x[0] == 0 and x[1] == np.inf and x[2] == 0 and x[3] > 1e29
    assert np.asarray(sr.loggamma(sr.key(0), 0.0)) == -np.inf
    assert sr.gamma(sr.key(0), 2.0, (0, 3)).shape == (0, 3)
    with pytest.raises(ValueError, match="gamma: a must be >= 0"):
        sr.gamma(sr.key(0), -1.0)
    with pytest.raises(ValueError, match="gamma: a must be >= 0"):
        sr.gamma(sr.key(0), np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="does not broadcast"):
        sr.gamma(sr.key(0), np.ones(3), (2,))
    with pytest.raises(TypeError, match="gamma: dtype"):
        sr.gamma(sr.key(0), 1.0, (2,), np.int32)
    # traced invalid shapes cannot be checked: NaN
    out = starling.compile(lambda a: sr.gamma(sr.key(0), a, (3,)))(np.float32(-1.0))
    assert np.all(np.isnan(np.asarray(out)))


def test_gamma_reproducible_staged_compiled_and_vmapped():
    k = sr.key(3)
    a = snp.asarray(np.array([0.01, 0.3, 1.0, 2.5, 40.0, 1e4], np.float32))
    eager = np.asarray(sr.gamma(k, a))
    np.testing.assert_array_equal(np.asarray(sr.gamma(k, a)), eager)
    np.testing.assert_array_equal(np.asarray(staged(lambda kk, aa: sr.gamma(kk, aa), k, a)),
                                  eager)
    ref = starling.compile(lambda kk, aa: sr.gamma(kk, aa), backend="numpy_ref")(k, a)
    np.testing.assert_array_equal(np.asarray(ref), eager)
    # the C++ backend's float32 log / exp / sin round differently: equal to a few ulps
    np.testing.assert_allclose(np.asarray(starling.compile(sr.gamma)(k, a)), eager, rtol=2e-5)
    keys = sr.split(k, 4)
    vk = np.asarray(starling.vmap(lambda kk: sr.gamma(kk, a))(keys))
    np.testing.assert_array_equal(vk, np.stack([np.asarray(sr.gamma(kk, a)) for kk in keys]))
    va = np.asarray(starling.vmap(lambda aa: sr.loggamma(k, aa, (7,)))(a))
    np.testing.assert_array_equal(va, np.stack([np.asarray(sr.loggamma(k, aa, (7,)))
                                                for aa in a]))


def test_gamma_gradient_matches_inverse_cdf_finite_differences():
    k = sr.key(4)
    a = np.array([0.05, 0.3, 1.0, 2.5, 40.0, 1e3])
    x = np.asarray(sr.gamma(k, a, dtype=np.float64))
    g = np.asarray(starling.grad(lambda aa: snp.sum(sr.gamma(k, aa, dtype=np.float64)))(a))
    u = stats.gamma(a).cdf(x)
    h = 1e-6 * a
    fd = (stats.gamma.ppf(u, a + h) - stats.gamma.ppf(u, a - h)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5)
    gl = np.asarray(starling.grad(lambda aa: snp.sum(sr.loggamma(k, aa, dtype=np.float64)))(a))
    np.testing.assert_allclose(gl, fd / x, rtol=1e-5)
    # tiny a: the samples underflow float32 but the log-space gradient stays finite
    g32 = starling.grad(lambda aa: snp.sum(sr.loggamma(k, aa, (64,))))(np.float32(1e-3))
    assert np.isfinite(np.asarray(g32))
    # compiled and forward mode agree with eager reverse mode
    gc = starling.compile(starling.grad(lambda aa: snp.sum(sr.gamma(k, aa,
                                                                    dtype=np.float64))))(a)
    np.testing.assert_allclose(np.asarray(gc), g, rtol=1e-12)
    _, tj = starling.jvp(lambda aa: sr.gamma(k, aa, dtype=np.float64), (a,), (np.ones_like(a),))
    np.testing.assert_allclose(np.asarray(tj), g, rtol=1e-12)


@pytest.mark.parametrize("a,b", [(0.5, 0.5), (2.0, 5.0), (0.02, 0.05), (300.0, 40.0)])
def test_beta_ks(a, b):
    x = np.asarray(sr.beta(sr.key(5), a, b, (N,), np.float64))
    assert np.all((x >= 0) & (x <= 1))
    # For a, b << 1 a few % of the mass lies within 1e-16 of 1 and rounds to 1.0: test the
    # mass below c = 1 - 1e-12 (binomial) and the law conditioned on X < c (KS).
    c = 1 - 1e-12
    cdf = stats.beta(a, b).cdf
    below = x < c
    assert stats.binomtest(int(below.sum()), x.size, cdf(c)).pvalue > P_MIN
    assert ks(x[below], lambda v: cdf(v) / cdf(c)) > P_MIN


def test_beta_tiny_parameters_no_nan_and_mean_gradient():
    x = np.asarray(sr.beta(sr.key(6), 1e-3, 1e-3, (1000,)))
    assert np.all(np.isfinite(x)) and set(np.unique(np.round(x))) <= {0.0, 1.0}
    # reparameterised gradient of the mean: d/da E[X] = b / (a + b)**2
    a, b = 2.0, 3.0
    ga, gb = starling.grad(lambda p, q: snp.mean(sr.beta(sr.key(7), p, q, (40_000,),
                                                         np.float64)), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(float(ga), b / (a + b) ** 2, rtol=0.05)
    np.testing.assert_allclose(float(gb), -a / (a + b) ** 2, rtol=0.05)
    with pytest.raises(ValueError, match="beta: b must be > 0"):
        sr.beta(sr.key(0), 1.0, 0.0)


def test_dirichlet_marginals_ks_and_tiny_alpha():
    alpha = np.array([0.3, 1.0, 2.5])
    x = np.asarray(sr.dirichlet(sr.key(8), alpha, (N,), np.float64))
    assert x.shape == (N, 3)
    np.testing.assert_allclose(x.sum(-1), 1.0, atol=1e-12)
    for i, ai in enumerate(alpha):
        assert ks(x[:, i], stats.beta(ai, alpha.sum() - ai).cdf) > P_MIN
    tiny = np.asarray(sr.dirichlet(sr.key(9), np.full(4, 1e-3, np.float32), (500,)))
    assert np.all(np.isfinite(tiny))
    np.testing.assert_allclose(tiny.sum(-1), 1.0, atol=1e-6)
    # batched alpha and its mean gradient d/da_0 E[X_0] = (A - a_0) / A**2
    batch = sr.dirichlet(sr.key(1), np.ones((2, 5)))
    assert batch.shape == (2, 5)
    g = starling.grad(lambda al: snp.mean(sr.dirichlet(sr.key(10), al, (40_000,),
                                                       np.float64)[:, 0]))(alpha)
    tot = alpha.sum()
    want = np.array([(tot - alpha[0]) / tot ** 2, -alpha[0] / tot ** 2, -alpha[0] / tot ** 2])
    np.testing.assert_allclose(np.asarray(g), want, rtol=0.08, atol=2e-3)
    with pytest.raises(ValueError, match="dirichlet: alpha must have at least one dim"):
        sr.dirichlet(sr.key(0), 1.0)
    with pytest.raises(ValueError, match="dirichlet: alpha must be > 0"):
        sr.dirichlet(sr.key(0), np.array([1.0, 0.0]))


@pytest.mark.parametrize("df", [0.5, 3.0, 30.0])
def test_chisquare_and_t_ks(df):
    x = np.asarray(sr.chisquare(sr.key(11), df, (N,), np.float64))
    assert ks(x, stats.chi2(df).cdf) > P_MIN
    y = np.asarray(sr.t(sr.key(12), df, (N,), np.float64))
    assert ks(y, stats.t(df).cdf) > P_MIN
    assert sr.student_t is sr.t


def test_f_and_generalized_normal_ks():
    x = np.asarray(sr.f(sr.key(13), 3.0, 7.0, (N,), np.float64))
    assert ks(x, stats.f(3, 7).cdf) > P_MIN
    for p in (0.5, 1.0, 2.0, 8.0):
        y = np.asarray(sr.generalized_normal(sr.key(14), p, (N,), np.float64))
        assert ks(y, stats.gennorm(p).cdf) > P_MIN
    with pytest.raises(ValueError, match="generalized_normal: p must be > 0"):
        sr.generalized_normal(sr.key(0), 0.0)
    with pytest.raises(ValueError, match="chisquare: df must be > 0"):
        sr.chisquare(sr.key(0), -2.0)


# ---- discrete --------------------------------------------------------------------------------

@pytest.mark.parametrize("lam", [0.0, 0.5, 3.0, 9.99, 10.0, 25.0, 1e4])
def test_poisson_chi_square(lam):
    x = np.asarray(sr.poisson(sr.key(20), lam, (N,)))
    assert x.dtype == np.int64 and x.min() >= 0
    assert chi2_discrete(x, stats.poisson(lam).pmf, int(lam + 10 * np.sqrt(lam) + 10)) > P_MIN


@pytest.mark.parametrize("n,p", [(0, 0.3), (10, 0.0), (10, 1.0), (20, 0.3), (7, 0.99),
                                 (50, 0.05), (100, 0.5), (1000, 0.9), (200, 0.05)])
def test_binomial_chi_square(n, p):
    x = np.asarray(sr.binomial(sr.key(21), n, p, (N,)))
    assert x.dtype == np.float32 and x.min() >= 0 and x.max() <= n
    assert chi2_discrete(x, stats.binom(n, p).pmf, n) > P_MIN


@pytest.mark.parametrize("p", [0.3, 1.0, 0.01])
def test_geometric_chi_square(p):
    x = np.asarray(sr.geometric(sr.key(22), p, (N,)))
    assert x.min() >= 1
    assert chi2_discrete(x, stats.geom(p).pmf, 3000) > P_MIN


def test_discrete_array_parameters_reproducible_and_vmapped():
    k = sr.key(23)
    lam = snp.asarray(np.array([0.0, 0.7, 9.5, 10.0, 30.0, 2e5]))
    n = snp.asarray(np.array([0.0, 5.0, 30.0, 100.0, 1e4, 3.0]))
    p = snp.asarray(np.array([0.5, 1.0, 0.4, 0.05, 0.7, 0.0]))
    fns = [lambda kk, a, b, c: sr.poisson(kk, a, (50, 6)),
           lambda kk, a, b, c: sr.binomial(kk, b, c, (50, 6), np.int32),
           lambda kk, a, b, c: sr.geometric(kk, snp.maximum(c, 0.1), (50, 6))]
    for f in fns:
        eager = np.asarray(f(k, lam, n, p))
        np.testing.assert_array_equal(np.asarray(staged(f, k, lam, n, p)), eager)
        np.testing.assert_array_equal(np.asarray(starling.compile(f)(k, lam, n, p)), eager)
        keys = sr.split(k, 3)
        vk = starling.vmap(lambda kk: f(kk, lam, n, p))(keys)
        np.testing.assert_array_equal(np.asarray(vk), np.stack([np.asarray(f(kk, lam, n, p))
                                                                for kk in keys]))
    b = np.asarray(sr.binomial(k, n, p))
    assert b[0] == 0 and b[1] == 5 and b[5] == 0
    vl = starling.vmap(lambda a: sr.poisson(k, a, (4,)))(lam)
    np.testing.assert_array_equal(np.asarray(vl), np.stack([np.asarray(sr.poisson(k, a, (4,)))
                                                            for a in lam]))
    # means of the large-parameter rejection samplers
    big = np.asarray(sr.poisson(k, lam, (400, 6)), np.float64).mean(0)
    np.testing.assert_allclose(big[4:], np.asarray(lam)[4:], rtol=0.03)


def test_discrete_bad_parameters():
    k = sr.key(0)
    with pytest.raises(ValueError, match="poisson: lam must be finite and >= 0"):
        sr.poisson(k, -1.0)
    with pytest.raises(ValueError, match="poisson: lam must be finite and >= 0"):
        sr.poisson(k, np.array([1.0, np.inf]))
    with pytest.raises(TypeError, match="poisson: dtype must be an integer"):
        sr.poisson(k, 1.0, dtype=np.float32)
    with pytest.raises(ValueError, match=r"binomial: p must be in \[0, 1\]"):
        sr.binomial(k, 10, 1.5)
    with pytest.raises(ValueError, match="binomial: n must be finite and >= 0"):
        sr.binomial(k, -3, 0.5)
    with pytest.raises(ValueError, match=r"geometric: p must be in \(0, 1\]"):
        sr.geometric(k, 0.0)
    with pytest.raises(ValueError, match="does not broadcast"):
        sr.poisson(k, np.ones(3), (4,))
    # traced invalid parameters cannot be checked: -1
    f = starling.compile(lambda lam, p: (sr.poisson(k, lam, (2,)), sr.binomial(k, 5.0, p, (2,)),
                                         sr.geometric(k, p, (2,))))
    outs = f(-2.0, 1.5)
    for o in outs:
        assert np.all(np.asarray(o) == -1)
    assert np.all(np.asarray(sr.geometric(k, 1e-12, (5,), np.int16)) == 32767)


# ---- multivariate ----------------------------------------------------------------------------

_A = np.array([[2.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.5, -0.3, 0.4]])
_COV = _A @ _A.T
_MEAN = np.array([1.0, -2.0, 0.5])


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_marginals_ks(method):
    x = np.asarray(sr.multivariate_normal(sr.key(30), _MEAN, _COV, (N,), method=method))
    assert x.shape == (N, 3) and x.dtype == np.float64
    for i in range(3):
        assert ks(x[:, i], stats.norm(_MEAN[i], np.sqrt(_COV[i, i])).cdf) > P_MIN
    # the projection on a fixed direction checks the off-diagonal covariance too
    w = np.array([1.0, -1.0, 2.0])
    assert ks(x @ w, stats.norm(w @ _MEAN, np.sqrt(w @ _COV @ w)).cdf) > P_MIN


def test_multivariate_normal_batches_semidefinite_gradients_and_errors():
    k = sr.key(31)
    covs = np.stack([_COV, np.eye(3)]).astype(np.float32)
    x = sr.multivariate_normal(k, np.zeros((4, 1, 3), np.float32), covs)
    assert x.shape == (4, 2, 3) and x.dtype == np.float32
    # rank-1 covariance: eigh works, every sample lies on the line
    v = np.array([1.0, 2.0, -1.0])
    y = np.asarray(sr.multivariate_normal(k, np.zeros(3), np.outer(v, v), (200,), method="eigh"))
    np.testing.assert_allclose(np.cross(y, v), 0.0, atol=1e-9)
    g = starling.grad(lambda m: snp.sum(sr.multivariate_normal(k, m, _COV, (5,))))(_MEAN)
    np.testing.assert_allclose(np.asarray(g), 5.0)
    f = lambda kk, m, c: sr.multivariate_normal(kk, m, c, (6,))  # noqa: E731
    np.testing.assert_array_equal(np.asarray(staged(f, k, snp.asarray(_MEAN), snp.asarray(_COV))),
                                  np.asarray(f(k, _MEAN, _COV)))
    with pytest.raises(ValueError, match=r"normal: cov must have shape \(\.\.\., 3, 3\)"):
        sr.multivariate_normal(k, _MEAN, np.ones((3, 2)))
    with pytest.raises(ValueError, match="cov must have shape"):
        sr.multivariate_normal(k, _MEAN, np.eye(2))
    with pytest.raises(ValueError, match="method must be one of"):
        sr.multivariate_normal(k, _MEAN, _COV, method="lu")
    with pytest.raises(ValueError, match="does not broadcast to shape"):
        sr.multivariate_normal(k, np.zeros((2, 3)), _COV, (3,))


def test_orthogonal_haar():
    q = np.asarray(sr.orthogonal(sr.key(32), 3, (N // 2,)))
    assert q.shape == (N // 2, 3, 3) and q.dtype == np.float32
    np.testing.assert_allclose(q.transpose(0, 2, 1) @ q, np.broadcast_to(np.eye(3), q.shape),
                               atol=1e-5)
    # Haar: every entry of a uniformly random 3x3 orthogonal matrix is uniform on [-1, 1]
    # (Archimedes), and det = +1 / -1 equally often; plain QR without the sign fix fails both.
    for i, j in [(0, 0), (2, 1)]:
        assert ks(q[:, i, j], stats.uniform(-1, 2).cdf) > P_MIN
    assert stats.binomtest(int((np.linalg.det(q) > 0).sum()), q.shape[0]).pvalue > P_MIN
    wide = np.asarray(sr.orthogonal(sr.key(33), 2, m=5, dtype=np.float64))
    assert wide.shape == (2, 5)
    np.testing.assert_allclose(wide @ wide.T, np.eye(2), atol=1e-12)
    assert sr.orthogonal(sr.key(0), 0, (2,)).shape == (2, 0, 0)
    with pytest.raises(ValueError, match="orthogonal: n must be >= 0"):
        sr.orthogonal(sr.key(0), -1)
    with pytest.raises(TypeError, match="orthogonal: n must be an int"):
        sr.orthogonal(sr.key(0), 2.5)


def test_nn_orthogonal_initializer_is_random_orthogonal():
    w = starling.nn.initializers.orthogonal()(sr.key(34), (5, 3))
    np.testing.assert_array_equal(np.asarray(w), np.asarray(sr.orthogonal(sr.key(34), 5, m=3)))


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 4.0])
def test_ball_radius_ks(p):
    x = np.asarray(sr.ball(sr.key(35), 3, p, (N // 2,), np.float64))
    assert x.shape == (N // 2, 3)
    r = (np.abs(x) ** p).sum(-1) ** (1 / p)
    assert r.max() < 1
    # uniform in the ball: P(|x|_p <= r) = r**d
    assert ks(r ** 3, stats.uniform().cdf) > P_MIN
    # and symmetric: the sign pattern of the coordinates is uniform over the 8 octants
    octant = ((x > 0) * np.array([1, 2, 4])).sum(-1)
    assert stats.chisquare(np.bincount(octant, minlength=8)).pvalue > P_MIN


def test_ball_errors():
    with pytest.raises(ValueError, match="ball: d must be >= 1"):
        sr.ball(sr.key(0), 0)
    with pytest.raises(ValueError, match="ball: p must be > 0"):
        sr.ball(sr.key(0), 2, -1.0)


# ---- closed-form families --------------------------------------------------------------------

_CLOSED = [
    ("pareto", lambda k: sr.pareto(k, 2.5, (N,), np.float64), stats.pareto(2.5)),
    ("weibull_min", lambda k: sr.weibull_min(k, 2.0, 0.7, (N,), np.float64),
     stats.weibull_min(0.7, scale=2.0)),
    ("rayleigh", lambda k: sr.rayleigh(k, 1.5, (N,), np.float64), stats.rayleigh(scale=1.5)),
    ("lognormal", lambda k: sr.lognormal(k, 0.8, (N,), np.float64), stats.lognorm(0.8)),
    ("maxwell", lambda k: sr.maxwell(k, (N,), np.float64), stats.maxwell()),
    ("triangular", lambda k: sr.triangular(k, -1.0, 0.5, 3.0, (N,), np.float64),
     stats.triang(1.5 / 4, loc=-1.0, scale=4.0)),
    ("triangular_mode_at_edge", lambda k: sr.triangular(k, 0.0, 0.0, 1.0, (N,), np.float64),
     stats.triang(0.0)),
    ("wald_small", lambda k: sr.wald(k, 0.1, (N,), np.float64), stats.invgauss(0.1)),
    ("wald", lambda k: sr.wald(k, 30.0, (N,), np.float64), stats.invgauss(30.0)),
]


@pytest.mark.parametrize("name,draw,dist", _CLOSED, ids=[c[0] for c in _CLOSED])
def test_closed_form_ks(name, draw, dist):
    x = np.asarray(draw(sr.key(40 + [c[0] for c in _CLOSED].index(name))))
    assert x.dtype == np.float64 and np.all(np.isfinite(x))
    assert ks(x, dist.cdf) > P_MIN


def test_double_sided_maxwell_and_float32():
    x = np.asarray(sr.double_sided_maxwell(sr.key(50), 1.0, 2.0, (N,), np.float64))
    assert ks(np.abs(x - 1.0) / 2.0, stats.maxwell().cdf) > P_MIN
    assert stats.binomtest(int((x > 1.0).sum()), N).pvalue > P_MIN
    for f in (lambda k: sr.pareto(k, 3.0, (5,)), lambda k: sr.wald(k, 2.0, (5,), np.float16),
              lambda k: sr.lognormal(k, shape=(5,), dtype="bfloat16")):
        out = f(sr.key(1))
        assert out.shape == (5,) and np.all(np.isfinite(np.asarray(out, np.float64)))
        np.testing.assert_array_equal(np.asarray(staged(f, sr.key(1)), np.float64),
                                      np.asarray(out, np.float64))


def test_closed_form_gradients_and_vmap():
    k = sr.key(51)
    check = starling.test_util.check_grads
    check(lambda s, c: sr.weibull_min(k, s, c, (4,), np.float64), (1.5, 0.8), order=1)
    check(lambda b: sr.pareto(k, b, (4,), np.float64), (2.0,), order=1)
    check(lambda m: sr.wald(k, m, (4,), np.float64), (1.3,), order=1)
    check(lambda a, m, b: sr.triangular(k, a, m, b, (4,), np.float64), (-1.0, 0.3, 2.0),
          order=1)
    check(lambda lo, s: sr.double_sided_maxwell(k, lo, s, (4,), np.float64), (0.5, 2.0),
          order=1)
    b = snp.asarray(np.array([0.5, 1.0, 4.0]))
    v = starling.vmap(lambda bb: sr.pareto(k, bb, (3,)))(b)
    np.testing.assert_array_equal(np.asarray(v), np.stack([np.asarray(sr.pareto(k, bb, (3,)))
                                                           for bb in b]))


def test_closed_form_bad_parameters():
    k = sr.key(0)
    cases = [(lambda: sr.pareto(k, 0.0), "pareto: b must be > 0"),
             (lambda: sr.weibull_min(k, 1.0, -1.0), "weibull_min: concentration must be > 0"),
             (lambda: sr.rayleigh(k, np.array([1.0, -1.0])), "rayleigh: scale must be >= 0"),
             (lambda: sr.lognormal(k, -0.5), "lognormal: sigma must be >= 0"),
             (lambda: sr.double_sided_maxwell(k, 0.0, -1.0), "scale must be >= 0"),
             (lambda: sr.triangular(k, 0.0, 2.0, 1.0), "triangular: needs left <= mode"),
             (lambda: sr.triangular(k, 0.0, 0.0, 0.0), "triangular: needs left <= mode"),
             (lambda: sr.triangular(k, -np.inf, 0.0, 1.0), "triangular: left must be finite"),
             (lambda: sr.wald(k, 0.0), "wald: mean must be > 0"),
             (lambda: sr.pareto(k, np.ones(2), (3,)), "does not broadcast")]
    for f, msg in cases:
        with pytest.raises(ValueError, match=msg):
            f()
    with pytest.raises(TypeError, match="maxwell: dtype"):
        sr.maxwell(k, (2,), np.int32)


# ---- choice without replacement and permutation (JAX semantics) ------------------------------

def test_choice_without_replacement_weighted_pair_law():
    # successive sampling: P(first = i, second = j) = p_i p_j / (1 - p_i)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    keys = sr.split(sr.key(60), 20_000)
    draws = np.asarray(starling.vmap(lambda kk: sr.choice(kk, 4, (2,), replace=False,
                                                          p=p))(keys))
    assert np.all(draws[:, 0] != draws[:, 1])
    obs = np.zeros((4, 4))
    np.add.at(obs, (draws[:, 0], draws[:, 1]), 1)
    want = p[:, None] * p[None, :] / (1 - p[:, None])
    off = ~np.eye(4, dtype=bool)
    assert stats.chisquare(obs[off], want[off] * draws.shape[0]).pvalue > P_MIN
    # along an axis of an array: a.shape[:axis] + shape + a.shape[axis + 1:]
    a = snp.asarray(np.arange(24).reshape(2, 6, 2))
    out = np.asarray(sr.choice(sr.key(61), a, (2, 2), replace=False, p=np.ones(6), axis=1))
    assert out.shape == (2, 2, 2, 2)
    cols = out[0, :, :, 0].ravel() // 2
    assert len(set(cols.tolist())) == 4
    np.testing.assert_array_equal(out[1], out[0] + 12)


def test_permutation_axis_and_independent():
    x = np.arange(24).reshape(4, 6)
    same = np.asarray(sr.permutation(sr.key(62), snp.asarray(x), axis=-1))
    np.testing.assert_array_equal(same - same[:, :1], np.broadcast_to(same[0] - same[0, 0],
                                                                      (4, 6)))
    ind = np.asarray(sr.permutation(sr.key(63), snp.asarray(x), axis=0, independent=True))
    np.testing.assert_array_equal(np.sort(ind, axis=0), x)
    assert any(not np.array_equal(ind[:, j] - ind[:, 0], x[:, j] - x[:, 0]) for j in range(6))


def test_multinomial_joint_law_and_marginals():
    p = np.array([0.2, 0.5, 0.0, 0.3])
    x = np.asarray(sr.multinomial(sr.key(64), 3, p, (N,), np.int32))
    assert x.shape == (N, 4) and x.dtype == np.int32 and np.all(x.sum(-1) == 3)
    assert np.all(x[:, 2] == 0)
    outcomes, counts = np.unique(x, axis=0, return_counts=True)
    want = stats.multinomial(3, p).pmf(outcomes) * N
    assert abs(want.sum() - N) < 1e-6 * N
    assert stats.chisquare(counts, want).pvalue > P_MIN
    big = np.asarray(sr.multinomial(sr.key(65), 400.0, np.array([1.0, 2.0, 7.0]), (2000,)))
    assert chi2_discrete(big[:, 0], stats.binom(400, 0.1).pmf, 400) > P_MIN
    # batched n and p, compiled == eager, vmap over keys == loop
    n = snp.asarray(np.array([0.0, 5.0, 100.0]))
    ps = snp.asarray(np.ones((3, 3)))
    f = lambda kk: sr.multinomial(kk, n, ps)  # noqa: E731
    out = np.asarray(f(sr.key(66)))
    np.testing.assert_array_equal(out.sum(-1), [0, 5, 100])
    np.testing.assert_array_equal(np.asarray(starling.compile(f)(sr.key(66))), out)
    keys = sr.split(sr.key(67), 3)
    np.testing.assert_array_equal(np.asarray(starling.vmap(f)(keys)),
                                  np.stack([np.asarray(f(kk)) for kk in keys]))
    with pytest.raises(ValueError, match="multinomial: p must be >= 0"):
        sr.multinomial(sr.key(0), 3, np.array([0.5, -0.1]))
    with pytest.raises(ValueError, match="multinomial: p must have shape"):
        sr.multinomial(sr.key(0), 3, 0.5)
    with pytest.raises(ValueError, match="multinomial: .*broadcast"):
        sr.multinomial(sr.key(0), np.ones(2), np.ones((3, 2)))
