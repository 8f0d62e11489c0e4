"""Everyday failures of the kernel cache (src/lowering/cache.py) are a warning or just work:
unusable cache directories fall back to a private temporary directory with ONE warning, foreign
entries are rebuilt, and concurrent processes compiling the same kernel wait for one compiler run
(an flock that dies with its holder). Real files, real processes; tests run as root, so an
unwritable directory is made honestly: a child process without CAP_DAC_OVERRIDE (setpriv)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.lowering import cache

pytestmark = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")

X = snp.asarray(np.linspace(-3, 3, 257, dtype=np.float32))


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """This process's cache state as at start-up (no directory checked, none replaced)."""
    monkeypatch.setattr(cache, "_USABLE", set())
    monkeypatch.setattr(cache, "_REPLACED", {})
    monkeypatch.setattr(cache, "_PRIVATE", {})
    monkeypatch.setenv("STARLING_CPP_STRICT", "1")
    yield
    for d in cache._PRIVATE.values():
        shutil.rmtree(d, ignore_errors=True)


def _compile_and_check(scale):
    """Compiles a new kernel (``scale`` makes the source unique) and checks its values."""
    f = st.compile(lambda x: snp.tanh(x) * scale + snp.exp(-x * x), backend="cpp")
    x = np.asarray(X)
    np.testing.assert_allclose(np.asarray(f(X)), np.tanh(x) * np.float32(scale) + np.exp(-x * x),
                               rtol=1e-5, atol=1e-6)


def _cache_warnings(fn, *args):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        fn(*args)
    return [str(w.message) for w in rec if issubclass(w.category, cache.KernelCacheWarning)]


def _entries(d):
    return sorted(p for p in os.listdir(d) if p.startswith("k-") and p.endswith(".so"))


def _check_fallback(got, configured):
    assert len(got) == 1, got
    assert "STARLING_CACHE_DIR" in got[0]
    if configured is not None:
        assert str(configured) in got[0]
    private = cache.cache_dir()
    assert private in got[0] and os.path.isdir(private)
    assert _entries(private)   # the kernel went there


@pytest.mark.parametrize("layout", ["below_a_file", "is_a_file"])
def test_cache_dir_that_is_or_lies_below_a_regular_file(fresh, tmp_path, monkeypatch, layout):
    (tmp_path / "file").write_text("not a directory")
    target = tmp_path / "file" / "kernels" if layout == "below_a_file" else tmp_path / "file"
    monkeypatch.setenv("STARLING_CACHE_DIR", str(target))
    got = _cache_warnings(_compile_and_check, 0.3125 if layout == "is_a_file" else 0.1875)
    _check_fallback(got, target)
    # one warning per process: later kernels go to the same place silently
    assert _cache_warnings(_compile_and_check, 0.5625) == []
    assert (tmp_path / "file").read_text() == "not a directory"


def test_directory_at_an_entry_path(fresh, tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("STARLING_CACHE_DIR", str(first))
    _compile_and_check(0.6875)
    (name,) = _entries(first)
    (second / name).mkdir(parents=True)            # the same entry, blocked by a directory
    (second / name / "keep.txt").write_text("user data")
    monkeypatch.setenv("STARLING_CACHE_DIR", str(second))
    got = _cache_warnings(_compile_and_check, 0.6875)
    _check_fallback(got, second)
    assert (second / name / "keep.txt").read_text() == "user data"   # nothing deleted


def test_no_home_directory(fresh, monkeypatch):
    for var in ("STARLING_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(var, raising=False)
    # What os.path.expanduser gives for a user without $HOME and without a passwd entry.
    monkeypatch.setattr(os.path, "expanduser", lambda p: p)
    assert cache.configured_dir() is None
    got = _cache_warnings(_compile_and_check, 0.8125)
    _check_fallback(got, None)
    assert "home" in got[0]


def test_foreign_shared_object_with_matching_checksum_is_rebuilt(fresh, tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("STARLING_CACHE_DIR", str(first))
    _compile_and_check(0.40625)
    (a,) = _entries(first)
    _compile_and_check(0.90625)
    (b,) = [e for e in _entries(first) if e != a]
    # Under a's name: b's shared object (valid ELF, even a kernel named st_k0) with its checksum.
    second.mkdir()
    shutil.copyfile(first / b, second / a)
    (second / (a + ".sha256")).write_text(cache._file_sha(second / a))
    monkeypatch.setenv("STARLING_CACHE_DIR", str(second))
    before = dict(cache.STATS)
    assert _cache_warnings(_compile_and_check, 0.40625) == []
    assert cache.STATS["corrupt"] == before["corrupt"] + 1
    assert cache.STATS["compiles"] == before["compiles"] + 1
    assert cache._valid(second / a, second / (a + ".sha256"))
    stamp = re.search(rb"st_module_[0-9a-f]{24}", (first / a).read_bytes()).group()
    assert stamp in (second / a).read_bytes()      # rebuilt: a's module again


def test_no_writable_directory_anywhere(fresh, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("STARLING_CACHE_DIR", str(tmp_path / "file" / "kernels"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "file" / "tmp"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(cache.KernelCacheError, match="STARLING_CACHE_DIR"):
            _compile_and_check(0.71875)
        # without STARLING_CPP_STRICT the backend says so and runs the program through NumPy
        monkeypatch.delenv("STARLING_CPP_STRICT")
        _compile_and_check(0.71875)


# ---- unwritable directories: a child process without the capability to override permissions

_CHILD = r"""
import json, sys, warnings
import numpy as np
import starling as st, starling.numpy as snp
from starling.lowering import cache
warnings.simplefilter("always")
x = np.linspace(-2, 2, 33, dtype=np.float32)
for scale in (0.25, 0.75):
    y = st.compile(lambda v: snp.tanh(v) * scale + 1.0, backend="cpp")(snp.asarray(x))
    np.testing.assert_allclose(np.asarray(y), np.tanh(x) * np.float32(scale) + 1, rtol=1e-6)
print(json.dumps({"dir": cache.cache_dir(), "stats": cache.STATS}))
"""


def _unprivileged(cmd):
    """``cmd`` run so that file permissions bind: as root, without CAP_DAC_OVERRIDE /
    CAP_DAC_READ_SEARCH (setpriv); as another user, unchanged."""
    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a directory unwritable")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", *cmd]


@pytest.mark.parametrize("which", ["STARLING_CACHE_DIR", "HOME"])
def test_unwritable_cache_or_home_directory(tmp_path, which):
    ro = tmp_path / "read-only"
    ro.mkdir()
    ro.chmod(0o555)
    env = {k: v for k, v in os.environ.items()
           if k not in ("STARLING_CACHE_DIR", "XDG_CACHE_HOME", "HOME")}
    env.update(STARLING_CPP_STRICT="1", TMPDIR=str(tmp_path))
    if which == "HOME":
        env["HOME"] = str(ro)
        configured = ro / ".cache" / "starling" / "kernels"
    else:
        env["STARLING_CACHE_DIR"] = str(ro)
        configured = ro
    out = subprocess.run(_unprivileged([sys.executable, "-c", _CHILD]), env=env,
                         capture_output=True, text=True, timeout=300)
    ro.chmod(0o755)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "KernelCacheWarning" in ln]
    assert len(lines) == 1, out.stderr
    assert str(configured) in lines[0] and "STARLING_CACHE_DIR" in lines[0]
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["dir"].startswith(str(tmp_path)) and report["dir"] in lines[0]
    assert report["stats"]["compiles"] >= 2
    assert os.listdir(ro) == []


# ---- concurrent processes ----------------------------------------------------------------------

_WORKER = r"""
import json, os, sys, time
import numpy as np
import starling as st, starling.numpy as snp
from starling.lowering import cache
from starling.lowering.backends.cpp import runtime as cpp_runtime
cpp_runtime.launcher()                 # built or found before the measured part
if sys.argv[1] == "launcher":
    sys.exit(0)
before = dict(cache.STATS)
barrier = sys.argv[2]
if barrier != "-":                     # start compiling together with the other process
    open(barrier + "." + str(os.getpid()), "w").close()
    d, stem = os.path.split(barrier)
    while sum(p.startswith(stem + ".") for p in os.listdir(d)) < 2:
        time.sleep(0.005)
print("compiling", flush=True)
x = np.linspace(-2, 2, 101, dtype=np.float32)
y = st.compile(lambda v: snp.tanh(v) * 0.4375 + snp.exp(-v * v), backend="cpp")(snp.asarray(x))
np.testing.assert_allclose(np.asarray(y), np.tanh(x) * np.float32(0.4375) + np.exp(-x * x),
                           rtol=1e-5, atol=1e-6)
print(json.dumps({k: cache.STATS[k] - before[k] for k in before}), flush=True)
"""

_SLOW_CXX = """#!/bin/sh
# the real compiler, STARLING_TEST_CXX_DELAY seconds late when it compiles (not for --version)
case " $* " in *" -o "*) [ -n "$STARLING_TEST_CXX_DELAY" ] && sleep "$STARLING_TEST_CXX_DELAY";;
esac
exec "%s" "$@"
"""


@pytest.fixture
def shared(tmp_path):
    """(environment, cache directory): an empty shared cache and a compiler wrapper that can be
    slowed down; the launcher extension is already built there."""
    wrapper = tmp_path / "slow-cxx"
    wrapper.write_text(_SLOW_CXX % cache.find_compiler())
    wrapper.chmod(0o755)
    d = tmp_path / "kernels"
    env = dict(os.environ, STARLING_CACHE_DIR=str(d), STARLING_CXX=str(wrapper),
               STARLING_CPP_STRICT="1")
    env.pop("STARLING_TEST_CXX_DELAY", None)
    out = subprocess.run([sys.executable, "-c", _WORKER, "launcher"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return env, d


def _worker(env, barrier, delay=None, **kw):
    env = dict(env)
    if delay is not None:
        env["STARLING_TEST_CXX_DELAY"] = str(delay)
    return subprocess.Popen([sys.executable, "-c", _WORKER, "kernel", barrier], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _stats(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads(out.splitlines()[-1])


def test_two_processes_compile_the_same_kernel_once(shared, tmp_path):
    env, d = shared
    # the compiler takes 2 s longer, so both processes look for the entry while it runs
    procs = [_worker(env, str(tmp_path / "barrier"), delay=2) for _ in range(2)]
    stats = [_stats(p) for p in procs]
    assert sum(s["compiles"] for s in stats) == 1, stats
    assert sum(s["waited"] for s in stats) == 1, stats
    assert all(s["compiles"] + s["hits"] == 1 and s["corrupt"] == 0 for s in stats), stats
    assert len(_entries(d)) == 1


def _lock_held(d):
    import fcntl
    for name in os.listdir(d):
        if name.startswith("k-") and name.endswith(".lock"):
            fd = os.open(os.path.join(d, name), os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            finally:
                os.close(fd)
    return False


def test_a_killed_lock_holder_does_not_block_the_others(shared):
    env, d = shared
    holder = _worker(env, "-", delay=600, start_new_session=True)  # compiles "forever"
    try:
        deadline = time.monotonic() + 120
        while not _lock_held(d):
            assert holder.poll() is None, holder.stderr.read()
            assert time.monotonic() < deadline, "the first process never took the lock"
            time.sleep(0.02)
        waiter = _worker(env, "-")
        assert waiter.stdout.readline().strip() == "compiling"
        time.sleep(0.5)          # let it block on the lock (it succeeds either way)
        assert waiter.poll() is None   # still waiting for the holder
    finally:
        os.killpg(holder.pid, signal.SIGKILL)   # the holder, its compiler wrapper and sleep
        holder.wait()
    out, err = waiter.communicate(timeout=300)
    assert waiter.returncode == 0, err
    stats = json.loads(out.splitlines()[-1])
    assert stats["compiles"] == 1 and stats["corrupt"] == 0, stats
    assert len(_entries(d)) == 1
