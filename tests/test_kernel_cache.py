"""The on-disk kernel cache (src/lowering/cache.py): hits across in-memory cache clears,
corrupted / partial entries rebuilt, compiles killed mid-way leave no usable garbage."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.lowering import cache
from starling.lowering.backends.cpp import runtime as cpp_runtime

pytestmark = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("STARLING_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("STARLING_CPP_STRICT", "1")
    return tmp_path


X = snp.asarray(np.linspace(-3, 3, 1000, dtype=np.float32))


def _fn(scale):
    return lambda x: snp.tanh(x) * scale + snp.exp(-x * x)


def _want(scale):
    x = np.asarray(X)
    return np.tanh(x) * np.float32(scale) + np.exp(-x * x)


def _entries(d):
    return sorted(p for p in os.listdir(d) if p.startswith("k-") and p.endswith(".so"))


def test_cache_dir_from_env_and_xdg(tmp_path, monkeypatch):
    assert cache.cache_dir() == str(tmp_path)
    monkeypatch.delenv("STARLING_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == str(tmp_path / "xdg" / "starling" / "kernels")


def test_disk_hit_after_clearing_the_in_memory_cache(cache_dir):
    f = st.compile(_fn(0.5), backend="cpp")
    np.testing.assert_allclose(np.asarray(f(X)), _want(0.5), rtol=1e-5, atol=1e-6)
    assert len(_entries(cache_dir)) == 1
    before = dict(cache.STATS)
    f.clear_cache()
    np.testing.assert_allclose(np.asarray(f(X)), _want(0.5), rtol=1e-5, atol=1e-6)
    assert f.num_compiles == 2                        # staged again ...
    assert cache.STATS["compiles"] == before["compiles"]   # ... but not compiled again
    assert cache.STATS["hits"] == before["hits"] + 1
    g = st.compile(_fn(0.5), backend="cpp")           # a new function with the same program
    g(X)
    assert cache.STATS["compiles"] == before["compiles"]


def test_different_programs_get_different_entries(cache_dir):
    st.compile(_fn(0.5), backend="cpp")(X)
    st.compile(_fn(0.25), backend="cpp")(X)
    assert len(_entries(cache_dir)) == 2


@pytest.mark.parametrize("damage", ["garbage", "truncate", "no_checksum", "bad_checksum"])
def test_corrupted_entry_is_detected_and_rebuilt(cache_dir, damage):
    scale = {"garbage": 0.125, "truncate": 0.375, "no_checksum": 0.625, "bad_checksum": 0.875}
    f = st.compile(_fn(scale[damage]), backend="cpp")
    f(X)
    (so,) = _entries(cache_dir)
    path = os.path.join(cache_dir, so)
    # The damaged file replaces the entry (a new inode): this process still maps the old one,
    # and writing into a mapped library in place would crash it (as it would any program).
    if damage in ("garbage", "truncate"):
        with open(path, "rb") as fh:
            data = fh.read()
        data = b"this is not an ELF file" * 100 if damage == "garbage" else data[:100]
        os.unlink(path)
        with open(path, "wb") as fh:
            fh.write(data)
    elif damage == "no_checksum":
        os.unlink(path + ".sha256")
    else:
        with open(path + ".sha256", "w") as fh:
            fh.write("0" * 64)
    before = dict(cache.STATS)
    # A fresh process would dlopen the file again; the in-process check is the checksum.
    g = st.compile(_fn(scale[damage]), backend="cpp")
    np.testing.assert_allclose(np.asarray(g(X)), _want(scale[damage]), rtol=1e-5, atol=1e-6)
    assert cache.STATS["corrupt"] == before["corrupt"] + 1
    assert cache.STATS["compiles"] == before["compiles"] + 1
    assert cache._valid(path, path + ".sha256")


def test_leftover_temporary_files_are_ignored(cache_dir):
    for name in (".tmp-abc.so.part", ".tmp-def.cpp", ".tmp-ghi.part"):
        (cache_dir / name).write_bytes(b"\x7fELF partial")
    f = st.compile(_fn(0.75), backend="cpp")
    np.testing.assert_allclose(np.asarray(f(X)), _want(0.75), rtol=1e-5, atol=1e-6)
    cache.clear()
    assert not [p for p in os.listdir(cache_dir) if p.startswith(".tmp-") or p.endswith(".so")]


_KILLED = r"""
import sys, numpy as np
import starling as st, starling.numpy as snp
x = snp.asarray(np.ones((64, 64), np.float32))
def f(x):
    outs = []
    for i in range(int(sys.argv[1])):
        outs.append(snp.sum(snp.tanh(x * (i + 1.5)) + snp.exp(-x) * i, axis=i % 2))
    return outs
print("compiling", flush=True)
st.compile(f, backend="cpp")(x)
print("done", flush=True)
"""


@pytest.mark.slow
def test_killed_compile_leaves_no_corrupted_entry(cache_dir):
    env = dict(os.environ, STARLING_CACHE_DIR=str(cache_dir))
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, "150"], env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "compiling"
    deadline = time.time() + 60
    # kill while the compiler runs (its temporary output exists) or as soon as possible
    while time.time() < deadline and not [p for p in os.listdir(cache_dir)
                                          if p.endswith(".so.part")]:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for so in _entries(cache_dir):
        path = os.path.join(cache_dir, so)
        # whatever is there under a final name is complete: a valid checksum, or no checksum
        # (then it is rebuilt on use)
        if os.path.exists(path + ".sha256"):
            assert cache._valid(path, path + ".sha256")
    out = subprocess.run([sys.executable, "-c", _KILLED, "150"], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "done" in out.stdout


def test_ctypes_launcher_fallback(monkeypatch):
    monkeypatch.setattr(cpp_runtime, "launcher", lambda: None)
    f = st.compile(_fn(1.5), backend="cpp")
    np.testing.assert_allclose(np.asarray(f(X)), _want(1.5), rtol=1e-5, atol=1e-6)
    xt = snp.transpose(snp.reshape(X, (10, 100)))
    g = st.compile(lambda x: x * 2.0 + 1.0, backend="cpp")
    np.testing.assert_allclose(np.asarray(g(xt)), np.asarray(xt) * 2 + 1)


def test_cache_key_covers_compiler_and_flags():
    cxx = cache.find_compiler()
    k1 = cache.cache_key("int x;", cxx, cache.FLAGS, ())
    assert k1 == cache.cache_key("int x;", cxx, cache.FLAGS, ())
    assert k1 != cache.cache_key("int y;", cxx, cache.FLAGS, ())
    assert k1 != cache.cache_key("int x;", cxx, cache.FLAGS + ("-g",), ())
    assert k1 != cache.cache_key("int x;", cxx, cache.FLAGS, ("-lm",))
    assert k1 != cache.cache_key("int x;", cxx + "-other", cache.FLAGS, ())


def test_compile_error_is_reported(cache_dir):
    with pytest.raises(cache.CompileError, match="compilation failed"):
        cache.build("this is not C++", compiler=cache.find_compiler())
    assert not _entries(cache_dir)


def test_compiler_override_env(monkeypatch):
    monkeypatch.setenv("STARLING_CXX", "definitely-not-a-compiler-xyz")
    assert cache.find_compiler() is None
    monkeypatch.setenv("STARLING_CXX", "g++")
    assert cache.find_compiler().endswith("g++")
