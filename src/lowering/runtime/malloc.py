"""Keeping freed memory for reuse: the C library's allocator as Starling's buffer cache.

Every Starling result is a new buffer (arrays are immutable), so a loop of collectives or
kernels allocates and frees the same sizes over and over. When the C library serves those from
``mmap`` each freed buffer goes back to the kernel and the next one is faulted in page by page
on first write: measured on 2 ranks, a 1 MiB MPI all_reduce into a fresh output took 2.4x the
time of one into a reused buffer. glibc normally raises its mmap threshold after such frees
(up to 32 MiB), but not in processes where Open MPI's memory hooks are loaded, and never above
32 MiB. ``keep_freed_memory(n)`` sets glibc's mmap and trim thresholds (``mallopt``) so that
blocks up to ``n`` bytes come from the heap and freed ones stay there for reuse: the process
keeps its peak heap instead of returning it to the system.

Off with ``STARLING_KEEP_FREED_MEMORY=0``; a no-op outside glibc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

_M_TRIM_THRESHOLD = -1   # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_DONE = []


def keep_freed_memory(max_block: int = 256 << 20) -> bool:
    """Sets glibc's thresholds so freed blocks of up to ``max_block`` bytes are reused (see the
    module docstring). Returns whether the settings took effect (False: disabled by
    ``STARLING_KEEP_FREED_MEMORY=0``, not glibc, or mallopt refused)."""
    if os.environ.get("STARLING_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if _DONE:
        return _DONE[0]
    ok = False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        # mallopt caps M_MMAP_THRESHOLD at HEAP_MAX / 2 (32 MiB on 64-bit) and refuses more
        block = int(max_block)
        ok = bool(mallopt(_M_MMAP_THRESHOLD, block)) or bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20))
        ok = ok and bool(mallopt(_M_TRIM_THRESHOLD, 2 * block))
    except (OSError, AttributeError):   # not glibc (musl, macOS): leave the allocator alone
        ok = False
    _DONE.append(ok)
    return ok
