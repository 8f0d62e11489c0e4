"""keep_freed_memory: freed result buffers are reused instead of faulted in again."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

CODE = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from starling.lowering.runtime.malloc import keep_freed_memory
    ok = keep_freed_memory() if sys.argv[1] == "keep" else None
    def cycle():
        a = np.empty(64 << 20, np.uint8)
        a[::4096] = 1          # touch every page, as a kernel writing its result does
        del a
    for _ in range(3):
        cycle()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        cycle()
    print(ok, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _run(mode, **env):
    out = subprocess.run([sys.executable, "-c", CODE, mode], capture_output=True, text=True,
                         env=dict(os.environ, **env), timeout=120)
    assert out.returncode == 0, out.stderr
    ok, faults = out.stdout.split()
    return ok, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_buffers_are_reused_without_page_faults():
    # 50 cycles of a 64 MiB buffer: above glibc's largest dynamic mmap threshold (32 MiB) each
    # one is mapped and faulted in anew (at least 32 faults even with 2 MiB pages); kept on the
    # heap they cost no new faults
    ok, kept = _run("keep")
    assert ok == "True"
    _, fresh = _run("plain")
    assert fresh >= 50 * 32, fresh
    assert kept < 50, kept


def test_can_be_turned_off():
    ok, _ = _run("keep", STARLING_KEEP_FREED_MEMORY="0")
    assert ok == "False"
