"""The native-code toolchain and the on-disk cache of compiled kernels.

A shared object is identified by the SHA-256 of everything that determines its bytes: the source,
the compiler (path and ``--version``), the flags and libraries, this machine's CPU features
(``-march=native``) and the Starling version. Entries live in the user cache directory:
``$STARLING_CACHE_DIR``, else ``$XDG_CACHE_HOME/starling/kernels``, else
``~/.cache/starling/kernels``.

Writes are atomic: the compiler writes a temporary file in the cache directory which is renamed
over the final name (``os.replace``) and a checksum file is written the same way afterwards, so a
compile killed at any point leaves either nothing or a complete entry; an entry whose checksum is
missing or wrong, or which fails to load, is deleted and rebuilt.

The compiler is ``$STARLING_CXX`` when set, else the first of ``c++``, ``g++``, ``clang++`` on the
PATH; ``find_compiler()`` returns None when there is none.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading

logger = logging.getLogger("starling.lowering")

# -ffp-contract=off: no fused multiply-adds the source did not ask for, so a compiled x*y + z
# rounds twice like the eager (NumPy) result instead of differing in the last bit.
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-fwrapv",
         "-ffp-contract=off", "-fPIC", "-shared", "-std=c++17", "-w")
STATS = {"hits": 0, "compiles": 0, "corrupt": 0}
_LOCK = threading.Lock()


class CompileError(RuntimeError):
    """The C++ compiler rejected generated code (a Starling bug: please report it)."""


def cache_dir() -> str:
    path = os.environ.get("STARLING_CACHE_DIR")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "starling", "kernels")
    os.makedirs(path, exist_ok=True)
    return path


def find_compiler():
    """Absolute path of the C++ compiler, or None."""
    env = os.environ.get("STARLING_CXX")
    if env:
        return shutil.which(env) or (env if os.path.isfile(env) else None)
    for name in ("c++", "g++", "clang++"):
        path = shutil.which(name)
        if path:
            return path
    return None


@functools.lru_cache(maxsize=None)
def compiler_version(path) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


@functools.lru_cache(maxsize=None)
def _cpu_signature() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") or line.startswith("Features"):
                    return hashlib.sha256(line.encode()).hexdigest()[:16]
    except OSError:
        pass
    import platform
    return platform.machine() + platform.processor()


def _starling_version() -> str:
    try:
        from .. import __version__
        return __version__
    except ImportError:
        return "0"


def cache_key(source, compiler, flags, libs) -> str:
    h = hashlib.sha256()
    for part in (source, compiler, compiler_version(compiler), " ".join(flags), " ".join(libs),
                 _cpu_signature(), _starling_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _file_sha(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _atomic_write(path, data: bytes):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def entry_paths(key, tag="k"):
    d = cache_dir()
    so = os.path.join(d, f"{tag}-{key[:40]}.so")
    return so, so + ".sha256"


def _valid(so, ck) -> bool:
    if not (os.path.exists(so) and os.path.exists(ck)):
        return False
    try:
        with open(ck) as f:
            want = f.read().strip()
        return want == _file_sha(so)
    except OSError:
        return False


def build(source, *, compiler, flags=FLAGS, libs=(), tag="k", extra_args=()):
    """Path of the shared object for ``source`` (compiled now, or found in the cache)."""
    key = cache_key(source, compiler, tuple(flags) + tuple(extra_args), libs)
    so, ck = entry_paths(key, tag)
    with _LOCK:
        if _valid(so, ck):
            STATS["hits"] += 1
            return so
        if os.path.exists(so) or os.path.exists(ck):
            STATS["corrupt"] += 1
            logger.warning("starling.lowering: kernel cache entry %s is corrupted; rebuilding",
                           os.path.basename(so))
            _unlink(so)
            _unlink(ck)
        _compile(source, so, compiler, flags, libs, extra_args)
        _atomic_write(ck, _file_sha(so).encode())
        STATS["compiles"] += 1
        return so


def _compile(source, so, compiler, flags, libs, extra_args):
    d = os.path.dirname(so)
    fd, src = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".cpp")
    with os.fdopen(fd, "w") as f:
        f.write(source)
    fd, tmp_so = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".so.part")
    os.close(fd)
    cmd = [compiler, *flags, *extra_args, src, "-o", tmp_so, *libs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"C++ compilation failed ({' '.join(cmd[:2])} ...):\n"
                               f"{proc.stderr[-4000:]}")
        os.replace(tmp_so, so)
    finally:
        _unlink(src)
        _unlink(tmp_so)


def load(source, *, compiler, flags=FLAGS, libs=(), tag="k", extra_args=()):
    """(ctypes.CDLL, path) for ``source``: built or taken from the cache; an entry that fails
    to load is deleted and rebuilt once."""
    for attempt in range(2):
        path = build(source, compiler=compiler, flags=flags, libs=libs, tag=tag,
                     extra_args=extra_args)
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            if attempt:
                raise CompileError(f"cannot load compiled kernels {path}: {e}") from None
            STATS["corrupt"] += 1
            logger.warning("starling.lowering: cannot load %s (%s); rebuilding", path, e)
            key_files = (path, path + ".sha256")
            for p in key_files:
                _unlink(p)
    raise AssertionError("unreachable")


def clear():
    """Deletes every cached kernel (the directory stays)."""
    d = cache_dir()
    for name in os.listdir(d):
        if name.endswith(".so") or name.endswith(".sha256") or name.startswith(".tmp-"):
            _unlink(os.path.join(d, name))
