import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# "ci" keeps the whole suite inside its time budget on 2 cores; "dev" explores more.
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# One BLAS thread per test process: with pytest-xdist's workers on 2 cores, OpenBLAS's own
# threads oversubscribe the CPU and small matrix products slow down by orders of magnitude.
try:
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)
except ImportError:  # threadpoolctl comes with scikit-learn; without it, keep the defaults
    pass


@pytest.fixture
def rng():
    return np.random.default_rng(0)
