"""The side-by-side driver the benchmarks share: every contender (a library, or a variant of
Starling) runs in its own process, so none inherits another's heap, threads or caches; rounds
of all processes are interleaved, so background load on a shared machine hits them alike.

Protocol: the driver starts ``python SCRIPT --worker NAME CASE``; the worker builds its inputs,
runs once (warm-up, compilation) and prints one JSON line ``{"ready": true, "checksum": ...}``;
then for each line ``k`` on its stdin it runs ``k`` calls and prints ``{"seconds": per call}``.
A worker that stays silent past a time limit is killed and left out (a peer was seen to hang),
as is one whose checksum disagrees with the baseline contender's.

Peers not importable by this Python run under ``$STARLING_PEER_PYTHON`` (default
/work/venvs/perf/bin/python) when they are importable there, else are skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import select
import statistics
import subprocess
import sys
import time

# Pause before each worker's round: the previous worker's pool threads (OpenMP, Eigen, ours) may
# still be spinning on both cores for a while after their call returned, which would be timed
# against whoever runs next.
SETTLE_SECONDS = 0.25
PEER_PYTHON = os.environ.get("STARLING_PEER_PYTHON", "/work/venvs/perf/bin/python")


def interpreter(module):
    """A Python that can import ``module`` (None: Starling's own): this one, else the peers'
    venv; None when neither can."""
    if module is None:
        return sys.executable
    for py in (sys.executable, PEER_PYTHON):
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", f"import {module}"], capture_output=True).returncode == 0:
            return py
    return None


def serve(run, checksum=None):
    """The worker's side: one warm-up call of ``run``, the ready line (with ``checksum`` of its
    result when given), then timed batches of calls as the driver asks."""
    out = run()
    msg = {"ready": True}
    if checksum is not None:
        msg["checksum"] = float(checksum(out))
    print(json.dumps(msg), flush=True)
    for line in sys.stdin:
        k = int(line)
        c0, t0 = _cpu_seconds(), time.perf_counter()
        for _ in range(k):
            run()
        print(json.dumps({"seconds": (time.perf_counter() - t0) / k,
                          "cpu": (_cpu_seconds() - c0) / k}), flush=True)


def _cpu_seconds():
    """CPU time of this process, all its threads (user + system): what a call costs a busy
    machine."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Worker:
    """One contender's process, driven over a pipe (see the module docstring)."""

    def __init__(self, script, name, case, py, start_limit=300.0):
        env = dict(os.environ)
        if py != sys.executable:   # the peers' venv lacks Starling: nothing of ours to import
            env.pop("PYTHONPATH", None)
        self.name = name
        self.p = subprocess.Popen([py, os.path.abspath(script), "--worker", name, case],
                                  text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env)
        try:
            line = self._answer(start_limit)
        except TimeoutError as e:
            raise RuntimeError(f"{name}/{case}: {e}: killed") from None
        if not line:
            self.p.wait()
            raise RuntimeError(f"{name}/{case} failed")
        self.first = json.loads(line)
        self.reps = 1
        self.cpu = []      # CPU seconds per call, one per timed batch

    def _answer(self, limit):
        ready, _, _ = select.select([self.p.stdout], [], [], limit)
        if not ready:
            self.p.kill()
            self.p.wait()
            raise TimeoutError(f"no answer within {limit:.0f} s")
        return self.p.stdout.readline()

    def time(self, k, limit=120.0):
        """Seconds per call over ``k`` calls (TimeoutError when the worker is silent)."""
        self.p.stdin.write(f"{k}\n")
        self.p.stdin.flush()
        r = json.loads(self._answer(limit))
        self.cpu.append(r.get("cpu", float("nan")))
        return r["seconds"]

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait()


def start(script, case, contenders, round_time, base=None, rtol=1e-3, atol=1e-3):
    """Starts a worker per contender (name -> module to import, None for Starling):
    ``{name: Worker}``. Contenders whose library is missing, whose worker fails or hangs, or
    whose checksum disagrees with ``base``'s are reported and left out. ``round_time``
    (seconds): each round will run enough calls to take about that long (0: one call)."""
    workers = {}
    for name, module in contenders.items():
        py = interpreter(module)
        if py is None:
            print(f"  ({name}: {module} not installed, skipped)")
            continue
        try:
            workers[name] = Worker(script, name, case, py)
        except RuntimeError as e:
            print(f"  ({e}: skipped)")
    ref = workers[base].first.get("checksum") if base in workers else None
    for name in list(workers):
        got = workers[name].first.get("checksum")
        if ref is not None and got is not None and not abs(got - ref) <= rtol * abs(ref) + atol:
            print(f"  ({name}/{case}: checksum {got} differs from {base}'s {ref}: not timed)")
            workers.pop(name).close()
    for name, w in list(workers.items()):
        try:
            if round_time > 0:
                w.reps = max(1, int(round_time / max(w.time(1), 1e-7)))
            w.cpu.clear()
        except TimeoutError as e:
            print(f"  ({name}/{case}: {e}: skipped)")
            del workers[name]
    return workers


def measure(workers, rounds):
    """``{name: [seconds per call, one per round]}``, the rounds of all workers interleaved; a
    worker that falls silent is reported and dropped (from ``workers`` too)."""
    times = {name: [] for name in workers}
    for _ in range(rounds):
        for name, w in list(workers.items()):
            time.sleep(SETTLE_SECONDS)
            try:
                times[name].append(w.time(w.reps))
            except TimeoutError as e:
                print(f"  ({name}: {e}: skipped)")
                del workers[name], times[name]
    return times


def close(workers):
    for w in workers.values():
        w.close()


def run_interleaved(script, case, contenders, rounds, round_time, base, rtol=1e-3, atol=1e-3):
    """``start``, ``measure``, ``close``: ``{name: [seconds per call, one per round]}``."""
    workers = start(script, case, contenders, round_time, base, rtol, atol)
    try:
        return measure(workers, rounds)
    finally:
        close(workers)


# ---- peak memory of one contender (a fresh process per measurement) ------------------------------

def _status(field):
    """A field of /proc/self/status (VmRSS, VmHWM) in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak():
    """Resets the kernel's peak-RSS mark (``5`` into /proc/self/clear_refs, Linux >= 4.0);
    False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def run_fresh(script, worker_args, python=None, env=None, limit=1800):
    """Runs ``python SCRIPT --worker *worker_args`` in a fresh process (a memory measurement
    must not inherit another contender's heap) and returns the JSON of its last output line,
    or ``{"error": ...}`` when it fails or runs past ``limit`` seconds."""
    python = python or sys.executable
    full = dict(os.environ, **(env or {}))
    full.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    if python != sys.executable:   # the peers' venv lacks Starling: nothing of ours to import
        full.pop("PYTHONPATH", None)
    cmd = [python, os.path.abspath(script), "--worker", *map(str, worker_args)]
    try:
        res = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {limit} s"}
    if res.returncode != 0:
        return {"error": (res.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def measure_peak(step, calls, keep=None):
    """Time and peak memory of ``step()`` in this process: the resident set size (VmRSS) is the
    baseline, one warm-up call (compilation included) runs, the peak mark is reset, ``calls``
    calls are timed, and the peak (VmHWM) read. ``step`` returns what each call produces (dropped
    before the next call; a step that carries state keeps it itself). ``keep(result)`` is what
    is kept of the warm-up's result (e.g. the loss alone; default None: nothing), taken before
    the timed calls so that result is not resident during them. Returns ``{"ms": best call,
    "peak_mib": peak above the baseline, "method": "VmHWM" | "ru_maxrss", "first": keep(the
    warm-up's result)}``; where the mark cannot be reset, ru_maxrss (peak since the process
    started, warm-up included) stands in. tracemalloc would miss most of it (native pools, XLA,
    torch)."""
    import gc
    gc.collect()
    base = _status("VmRSS")
    first = step()
    first = keep(first) if keep is not None else None
    gc.collect()
    hwm = _reset_peak()
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter()
        out = step()
        best = min(best, time.perf_counter() - t0)
        del out
    peak = _status("VmHWM") if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"ms": best * 1e3, "peak_mib": (peak - base) / 2**20, "first": first,
            "method": "VmHWM" if hwm else "ru_maxrss"}


def report(title, times, base, verb="faster", unit="ms", labels=None, cpu=None, target=None):
    """Prints the median and best time per call of each contender (``unit``: "ms" or "us"),
    the median CPU time per call when ``cpu`` (name -> list) is given, and the ratio of each to
    ``base`` (> 1: ``base`` is ``verb``); ``labels`` renames contenders in the table."""
    scale = {"ms": 1e3, "us": 1e6}[unit]
    labels = labels or {}
    print(f"\n{title}")
    ref = times.get(base)
    for name, ts in times.items():
        med, best = statistics.median(ts), min(ts)
        ratio = ""
        if ref and name != base:
            ratio = (f"  {labels.get(base, base)} {med / statistics.median(ref):6.2f}x {verb} "
                     f"(best {best / min(ref):6.2f}x)")
        c = f"  cpu {statistics.median(cpu[name]) * scale:9.3f}" if cpu and cpu.get(name) else ""
        print(f"  {labels.get(name, name):18s} median {med * scale:9.3f} {unit}  best "
              f"{best * scale:9.3f} {unit}{c}{ratio}")
    if target:
        print(f"  target: {target}")


def main(doc, cases, run_case, worker, quick_cases=None, quick=(3, 0.3), full=(7, 1.0)):
    """The command line every benchmark has: ``--worker NAME CASE`` (internal), ``--quick``
    (fewer, shorter rounds; ``quick_cases`` only, when given), ``--cases a,b``; prints the
    load average before and after, as the figures depend on it."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--worker", nargs=2, metavar=("NAME", "CASE"))
    ap.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    ap.add_argument("--cases", default=None, help="comma-separated subset of " + ",".join(cases))
    args = ap.parse_args()
    if args.worker:
        return worker(*args.worker)
    if args.cases:
        chosen = args.cases.split(",")
        unknown = [c for c in chosen if c not in cases]
        if unknown:
            ap.error(f"unknown cases {unknown}; choose from {list(cases)}")
    else:
        chosen = list(quick_cases if args.quick and quick_cases is not None else cases)
    rounds, round_time = quick if args.quick else full
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for case in chosen:
        run_case(case, rounds, round_time)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
