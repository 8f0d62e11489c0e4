"""``starling.scipy``: SciPy's names over Starling (as JAX's ``jax.scipy``)."""
from . import optimize  # noqa: F401
