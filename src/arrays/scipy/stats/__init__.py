"""``starling.scipy.stats``: probability distributions as namespaces of functions (JAX's
``jax.scipy.stats``; SciPy's ``scipy.stats`` methods with the same names and arguments).

Each distribution is a module: ``stats.norm.logpdf(x, loc=0, scale=1)``,
``stats.t.cdf(x, df)``, ``stats.poisson.logpmf(k, mu)``, ... Everything is elementwise with
NumPy broadcasting (``multivariate_normal`` over the last axis), differentiable where the
maths allows, and works under ``vmap`` and ``compile``. Outside the support log-densities
are ``-inf`` (never NaN) and cdfs are 0 or 1; parameters outside their domain give NaN, as in
SciPy. Tails come from the special functions of ``starling.scipy.special`` (``log_ndtr``,
``betainc``, ``gammainc`` / ``gammaincc``).
"""
from . import bernoulli, beta, gamma, multivariate_normal, norm, poisson, t
from .entropy_measures import entropy

__all__ = ["bernoulli", "beta", "gamma", "multivariate_normal", "norm", "poisson", "t",
           "entropy"]
