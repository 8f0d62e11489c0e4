"""Scripts the fault-tolerance tests run as real MPI jobs, and ``launch`` to run them.

Each script is started by ``python -m starling.launch`` (mpirun, oversubscribed on small
machines) under a hard timeout: on expiry the whole process group (launcher, mpirun, ranks) is
killed and the test fails, so a hang can never stall the suite.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def script(name: str) -> str:
    return os.path.join(HERE, name)


def launch(n, target, args=(), *, timeout, module=False, fault_tolerant=False,
           detector_timeout=None, cwd=None, during=None):
    """Runs ``target`` on ``n`` processes; returns (returncode, stdout + stderr). ``during()``,
    if given, runs in a thread while the job runs (e.g. to kill one of its ranks)."""
    pytest.importorskip("mpi4py")
    cmd = [sys.executable, "-m", "starling.launch", "-n", str(n)]
    if fault_tolerant:
        cmd.append("--fault-tolerant")
    if detector_timeout is not None:
        cmd += ["--detector-timeout", str(detector_timeout)]
    if module:
        cmd.append("-m")
    cmd += [target] + [str(a) for a in args]
    # one device and one BLAS / kernel thread per rank (the ranks share a few cores; the test
    # process itself has several in-process devices, see conftest.py)
    env = dict(os.environ, STARLING_NUM_CPU_DEVICES="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=cwd, start_new_session=True)
    if during is not None:
        threading.Thread(target=during, daemon=True).start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)   # the launcher forwards it: mpirun ends the ranks
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        pytest.fail(f"MPI job {target} {list(args)} did not finish in {timeout} s (a hang):\n"
                    f"{out[-4000:]}")
    return proc.returncode, out


def rank_pid(marker: str, rank: int, timeout: float = 120.0) -> int:
    """The pid of MPI rank ``rank`` of the job whose command line contains ``marker`` (found
    through /proc: the rank's OMPI_COMM_WORLD_RANK)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() not in f.read():
                        continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:   # gone, or not ours
                continue
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
                return int(pid)
        time.sleep(0.1)
    raise TimeoutError(f"no rank {rank} of a job running {marker!r}")
