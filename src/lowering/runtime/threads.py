"""How Starling's threads share the CPUs.

``available_cpus()`` is what this process may really use: the affinity mask, capped by a
cgroup CPU quota (containers), not ``os.cpu_count()``. Device worker threads (in-process
sharding) split them: each calls ``enter_device_thread()``, which limits BLAS to their share,
so that N devices running GEMMs at once do not run N x (BLAS threads) on the cores
(oversubscription costs far more than it gains on a shared machine).

Caveat (measured): NumPy's bundled OpenBLAS exports ``openblas_set_num_threads_local`` but it
sets the process-wide count, so once in-process devices run, BLAS calls anywhere in the
process use the devices' share of the CPUs.
"""
from __future__ import annotations

import ctypes
import functools
import os


@functools.lru_cache(maxsize=None)
def available_cpus() -> int:
    """CPUs this process may use: the affinity mask, capped by a cgroup v2/v1 CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        n = max(1, min(n, int(quota + 0.5) or 1))
    return max(1, n)


def _cgroup_quota():
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            q, period = f.read().split()[:2]
            if q != "max":
                return int(q) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            q = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period = int(f.read())
        if q > 0 and period > 0:
            return q / period
    except (OSError, ValueError):
        pass
    return None


@functools.lru_cache(maxsize=None)
def _blas_local_setter():
    """OpenBLAS's per-thread ``openblas_set_num_threads_local`` from NumPy's bundled library
    (found through NumPy's extension module, which links it), or None."""
    try:
        import numpy.linalg._umath_linalg as m
        lib = ctypes.CDLL(m.__file__)
        fn = lib.openblas_set_num_threads_local
    except (OSError, AttributeError, ImportError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def set_blas_threads(n: int) -> bool:
    """Limits BLAS to ``n`` threads (per calling thread where the library supports it; the
    OpenBLAS bundled with NumPy applies it process-wide); False when there is no control."""
    fn = _blas_local_setter()
    if fn is None:
        return False
    fn(max(1, int(n)))
    return True


def enter_device_thread() -> None:
    """Called by each in-process device worker thread when it starts: its BLAS calls use its
    share of the CPUs (``available_cpus() // local devices``, at least 1)."""
    from ...arrays import device as _device
    share = max(1, available_cpus() // max(1, _device.local_device_count()))
    set_blas_threads(share)
