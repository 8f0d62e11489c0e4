import os

# Eight in-process CPU devices, so that the sharding tests can build meshes of up to 8 devices
# (e.g. (4,), (2, 2), (2, 2, 2)). The count is read once, when the devices are first listed: it
# must be set before any test runs.
os.environ.setdefault("STARLING_NUM_CPU_DEVICES", "8")
# One thread of Starling's pool per pytest-xdist worker (the workers already fill the cores);
# the tests of thread-count independence set their own counts.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("STARLING_NUM_THREADS", "1")

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


@pytest.fixture(scope="module")
def cpp_kernel_env(tmp_path_factory):
    """For cpp-backend test modules: kernels go to a fresh temporary cache directory (so the
    module's compiler runs are what it measures) and code-generation failures are errors
    (STARLING_CPP_STRICT) instead of a warning and a NumPy fallback."""
    old = {k: os.environ.get(k) for k in ("STARLING_CACHE_DIR", "STARLING_CPP_STRICT")}
    os.environ["STARLING_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernels"))
    os.environ["STARLING_CPP_STRICT"] = "1"
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
