"""How Starling's threads share the CPUs: the one native thread pool (native/pool.cpp).

Everything Starling runs natively -- fused kernels, GEMM tiles (native/gemm.cpp, eager and
compiled), random streams -- takes its threads from ONE pool in ``starling._native``; BLAS is
not called, so there is never a second pool competing for the cores.

* ``available_cpus()``: what this process may really use: the affinity mask, capped by a cgroup
  CPU quota (containers), not ``os.cpu_count()``.
* ``pool_size()`` / ``set_pool_size(n)``: the pool's threads, the calling thread included;
  ``available_cpus()`` unless ``$STARLING_NUM_THREADS`` says otherwise.
* Shares: each thread that starts parallel work may use at most its share of the pool
  (``set_thread_share``). In-process device worker threads (sharding) call
  ``enter_device_thread()``: each gets ``pool_size() // local devices`` (at least 1), so N
  devices running kernels at once use the one pool between them instead of N x the cores.

Why a pool of our own rather than OpenMP's: a parallel call hands out chunks from a shared
counter and waits only for chunks already started, so a helper thread the OS has descheduled (a
busy machine) costs nothing unless it holds a chunk; an OpenMP region's closing barrier waits for
every member of the team, and its threads with BLAS's own pool oversubscribed the cores (measured
in benchmarks/models.py, "under load"; figures in the module docstring of native/pool.cpp's
Python users: src/lowering/backends/cpp/codegen.py).

NumPy's bundled OpenBLAS is left alone: its ``openblas_set_num_threads_local`` is process-global
in OpenBLAS's pthreads builds (it calls ``openblas_set_num_threads``), so setting it per thread
would change the thread count of every NumPy call in the process.
"""
from __future__ import annotations

import functools

from ... import _native


@functools.lru_cache(maxsize=None)
def available_cpus() -> int:
    """CPUs this process may use: the affinity mask, capped by a cgroup v2/v1 CPU quota."""
    return int(_native.available_cpus())


def pool_size() -> int:
    """Threads of the pool, the calling thread included."""
    return int(_native.pool_size())


def set_pool_size(n: int) -> None:
    """Sets the pool's threads (the calling thread included).

    Raises:
        ValueError: ``n`` is not a positive int.
    """
    if type(n) is not int or n < 1:
        raise ValueError(f"set_pool_size: n must be a positive int, got {n!r}")
    _native.set_pool_size(n)


def set_thread_share(n: int) -> None:
    """Threads a parallel call started from the calling thread may use (0: the whole pool).

    Raises:
        ValueError: ``n`` is not a non-negative int.
    """
    if type(n) is not int or n < 0:
        raise ValueError(f"set_thread_share: n must be a non-negative int, got {n!r}")
    _native.set_thread_share(n)


def thread_share() -> int:
    """Threads a parallel call started from the calling thread may use."""
    return int(_native.thread_share())


def enter_device_thread() -> None:
    """Called by each in-process device worker thread when it starts: its parallel work uses its
    share of the pool, ``pool_size() // local devices`` (at least 1; following later changes
    of the pool size)."""
    from ...arrays import device as _device
    _native.set_thread_divisor(max(1, _device.local_device_count()))
