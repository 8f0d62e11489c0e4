"""``starling.scipy``: SciPy's names over Starling (as JAX's ``jax.scipy``)."""
from . import optimize

__all__ = ["optimize"]
