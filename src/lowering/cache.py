"""The native-code toolchain and the on-disk cache of compiled kernels.

A shared object is identified by the SHA-256 of everything that determines its bytes: the source,
the compiler (path and ``--version``), the flags and libraries, this machine's CPU features
(``-march=native``) and the Starling version. Entries live in the user cache directory:
``$STARLING_CACHE_DIR``, else ``$XDG_CACHE_HOME/starling/kernels``, else
``~/.cache/starling/kernels``.

Writes are atomic: the compiler writes a temporary file in the cache directory which is renamed
over the final name (``os.replace``) and a checksum file is written the same way afterwards, so a
compile killed at any point leaves either nothing or a complete entry; an entry whose checksum is
missing or wrong, which fails to load, or which does not define the module's stamp symbol
(``st_module_<hash of the source>``, appended to every source) and the symbols the caller asks
for, is deleted and rebuilt.

Concurrent processes compiling the same source wait for one compiler run: the check-and-build of
an entry holds an exclusive ``fcntl.flock`` on ``<entry>.lock``; whoever gets it second finds the
finished entry. The kernel releases the lock when its holder dies, so a killed process never
blocks the others.

A cache directory that cannot be used (it cannot be created or written, it lies below a regular
file, there is no home directory, a directory stands where an entry should be, ...) never stops a
program: this process then keeps its kernels in a private temporary directory (removed at exit)
and warns ONCE (``KernelCacheWarning``) naming the directory and ``STARLING_CACHE_DIR``. Only
when no temporary directory can be written either does ``build`` raise ``KernelCacheError``.

The compiler is ``$STARLING_CXX`` when set, else the first of ``c++``, ``g++``, ``clang++`` on the
PATH; ``find_compiler()`` returns None when there is none.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import fcntl
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import warnings

logger = logging.getLogger("starling.lowering")

# -ffp-contract=off: no fused multiply-adds the source did not ask for, so a compiled x*y + z
# rounds twice like the eager (NumPy) result instead of differing in the last bit.
# -fopenmp-simd: the `#pragma omp simd` hints only; threads come from Starling's own pool
# (src/lowering/runtime/native.py), never from an OpenMP runtime.
# -mprefer-vector-width=512 (x86 only; other compilers' targets reject it): on AVX-512 machines
# GCC's -march=native still vectorises with 256-bit registers, and calls the 8-wide libmvec
# functions; with 512 bits, 1M float32 tanh on two threads took 176 us instead of 556, a
# tanh-GELU 269 instead of 554, and the transformer, MLP and RNN steps of benchmarks/models.py
# 5% less (no effect on x86 machines without AVX-512).
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
FLAGS = ("-O3", "-march=native") + (("-mprefer-vector-width=512",) if _X86 else ()) + (
    "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math", "-fwrapv", "-ffp-contract=off",
    "-fPIC", "-shared", "-std=c++17", "-w")
# Per process: entries found, compiler runs, damaged entries rebuilt, entries another process
# finished while this one waited for the lock.
STATS = {"hits": 0, "compiles": 0, "corrupt": 0, "waited": 0}
_LOCK = threading.RLock()


class CompileError(RuntimeError):
    """The C++ compiler rejected generated code (a Starling bug: please report it), or could
    not be run."""


class KernelCacheError(CompileError):
    """Neither the kernel cache directory nor a temporary directory can hold compiled kernels."""


class KernelCacheWarning(UserWarning):
    """The kernel cache directory is unusable; this process keeps its kernels in a temporary
    directory instead (see the module docstring)."""


# ---- where entries go ----------------------------------------------------------------------------

_USABLE = set()       # configured directories checked writable in this process
_REPLACED = {}        # configured directory (or None: no home) -> the private directory used
_PRIVATE = {}         # pid -> this process's private temporary directory


def configured_dir():
    """The cache directory the environment asks for (an absolute path), or None when it is
    derived from a home directory that does not exist."""
    path = os.environ.get("STARLING_CACHE_DIR")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME")
        if not base:
            home = os.path.expanduser("~")
            if home.startswith("~"):   # no $HOME and no password-database entry
                return None
            base = os.path.join(home, ".cache")
        path = os.path.join(base, "starling", "kernels")
    return os.path.abspath(path)


def cache_dir() -> str:
    """The directory this process keeps kernels in: the configured one (created if needed),
    or, when that is unusable, the private temporary directory (warning once)."""
    path = configured_dir()
    with _LOCK:
        if path in _REPLACED:
            return _REPLACED[path]
        if path is None:
            return _fall_back(None, "there is no home directory ($HOME is unset)")
        try:
            os.makedirs(path, exist_ok=True)
            if path not in _USABLE:
                _probe(path)
                _USABLE.add(path)
        except OSError as e:
            return _fall_back(path, _reason(e))
        return path


def _probe(path):
    """Raises OSError unless a file can be created in ``path`` (``os.access`` is not enough:
    root passes it on directories of read-only file systems and foreign permissions)."""
    fd, tmp = tempfile.mkstemp(dir=path, prefix=".tmp-probe-")
    os.close(fd)
    os.unlink(tmp)


def _reason(e):
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    return str(e) or type(e).__name__


def _private_dir():
    pid = os.getpid()
    d = _PRIVATE.get(pid)
    if d is None or not os.path.isdir(d):
        try:
            d = tempfile.mkdtemp(prefix=f"starling-kernels-{pid}-")
        except OSError as e:
            raise KernelCacheError(
                f"starling: no directory can hold compiled kernels: the temporary directory "
                f"({tempfile.gettempdir()}) is not writable either ({_reason(e)}); set "
                "STARLING_CACHE_DIR (or TMPDIR) to a writable directory") from None
        _PRIVATE[pid] = d
        atexit.register(shutil.rmtree, d, True)
    return d


def _fall_back(path, reason):
    """The private directory, replacing ``path`` for the rest of this process (warns once)."""
    d = _private_dir()
    if path not in _REPLACED:
        _REPLACED[path] = d
        where = "" if path is None else f" {path}"
        warnings.warn(
            f"starling: the kernel cache directory{where} is not usable ({reason}); this "
            f"process compiles its kernels into the temporary directory {d}, removed at exit. "
            "Set STARLING_CACHE_DIR to a writable directory to keep compiled kernels across "
            "runs.", KernelCacheWarning, stacklevel=2)
    return d


# ---- keys ----------------------------------------------------------------------------------------

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
    """The first line of ``path --version`` (cached per path), or "" when it cannot be run."""
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
    """SHA-256 (hex) of everything a compiled module depends on: the source, the compiler path and
    version, flags, libraries, a signature of the CPU's features and Starling's version."""
    h = hashlib.sha256()
    for part in (source, compiler, compiler_version(compiler), " ".join(flags), " ".join(libs),
                 _cpu_signature(), _starling_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def stamp_symbol(source) -> str:
    """The exported symbol every module built from ``source`` defines (see ``stamped``)."""
    return "st_module_" + hashlib.sha256(source.encode()).hexdigest()[:24]


def stamped(source) -> str:
    """``source`` plus the definition of its stamp symbol: a shared object found under an
    entry's name that lacks it was not built from this source."""
    return (source + f'\nextern "C" {{ __attribute__((visibility("default"))) '
            f"int {stamp_symbol(source)} = 1; }}\n")


# ---- entries -------------------------------------------------------------------------------------

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


def entry_paths(key, tag="k", directory=None):
    """(shared object, checksum file) of the entry ``key`` in ``directory`` (default: the
    directory this process uses, ``cache_dir()``)."""
    so = os.path.join(directory or cache_dir(), f"{tag}-{key[:40]}.so")
    return so, so + ".sha256"


def _valid(so, ck) -> bool:
    if not (os.path.isfile(so) and os.path.isfile(ck)):
        return False
    try:
        with open(ck) as f:
            want = f.read().strip()
        return want == _file_sha(so)
    except (OSError, UnicodeDecodeError):
        return False


@contextlib.contextmanager
def entry_lock(so):
    """Holds an exclusive ``flock`` on ``<so>.lock`` (blocking until other holders release it;
    the kernel releases a dead holder's lock). Raises OSError when the lock file cannot be
    opened."""
    fd = os.open(so + ".lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # releases the lock


def build(source, *, compiler, flags=FLAGS, libs=(), tag="k", extra_args=()):
    """Path of the shared object for ``source`` (compiled now, or found in the cache); the
    module also defines ``stamp_symbol(source)``.

    Raises:
        CompileError: the compiler failed or cannot be run.
        KernelCacheError: no directory can hold the result (see the module docstring).
    """
    full = stamped(source)
    key = cache_key(full, compiler, tuple(flags) + tuple(extra_args), libs)
    args = (full, key, compiler, flags, libs, tag, extra_args)
    with _LOCK:
        d = cache_dir()
        try:
            return _build_in(d, *args)
        except OSError as e:
            if d in _PRIVATE.values():
                raise KernelCacheError(f"starling: cannot write compiled kernels to {d}: "
                                       f"{_reason(e)}") from None
            fallback = _fall_back(configured_dir(), _reason(e))
        try:
            return _build_in(fallback, *args)
        except OSError as e:
            raise KernelCacheError(f"starling: cannot write compiled kernels to {fallback}: "
                                   f"{_reason(e)}") from None


def _build_in(d, source, key, compiler, flags, libs, tag, extra_args):
    so, ck = entry_paths(key, tag, d)
    if _valid(so, ck):
        STATS["hits"] += 1
        return so
    for p in (so, ck):
        if os.path.isdir(p):   # never delete what is not ours: use another directory
            raise IsADirectoryError(errno.EISDIR, "a directory stands where a cache entry "
                                    "goes", p)
    with entry_lock(so):
        if _valid(so, ck):     # another process built it while this one waited
            STATS["hits"] += 1
            STATS["waited"] += 1
            return so
        if os.path.lexists(so) or os.path.lexists(ck):
            STATS["corrupt"] += 1
            logger.warning("starling.lowering: kernel cache entry %s is corrupted; rebuilding",
                           so)
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
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            raise CompileError(f"cannot run the C++ compiler {compiler}: {_reason(e)} (set "
                               "STARLING_CXX to a working compiler)") from None
        if proc.returncode != 0:
            raise CompileError(f"C++ compilation failed ({' '.join(cmd[:2])} ...):\n"
                               f"{proc.stderr[-4000:]}")
        os.replace(tmp_so, so)
    finally:
        _unlink(src)
        _unlink(tmp_so)


def load(source, *, compiler, flags=FLAGS, libs=(), tag="k", extra_args=(), symbols=()):
    """(ctypes.CDLL, path of the loaded file) for ``source``: built or taken from the cache.

    An entry that fails to load, or lacks the module's stamp symbol or one of ``symbols`` (a
    foreign shared object under the entry's name), is deleted and rebuilt once; the rebuilt
    file is loaded through a private copy (the dynamic loader would hand back the object it
    already mapped under the entry's name), whose path is returned.

    Raises:
        CompileError: as ``build``, or the rebuilt entry still cannot be loaded.
    """
    want = (stamp_symbol(source),) + tuple(symbols)
    problem = None
    for attempt in range(2):
        path = build(source, compiler=compiler, flags=flags, libs=libs, tag=tag,
                     extra_args=extra_args)
        loaded = path if attempt == 0 else _private_copy(path)
        try:
            lib = ctypes.CDLL(loaded)
        except OSError as e:
            problem = f"cannot load it ({e})"
        else:
            missing = [s for s in want if not hasattr(lib, s)]
            if not missing:
                return lib, loaded
            problem = f"it does not define {', '.join(missing)}"
        if attempt:
            break
        STATS["corrupt"] += 1
        logger.warning("starling.lowering: kernel cache entry %s is not the expected module "
                       "(%s); rebuilding", path, problem)
        _unlink(path)
        _unlink(path + ".sha256")
    raise CompileError(f"cannot load compiled kernels {path}: {problem}")


def _private_copy(path):
    """A copy of ``path`` under a fresh name in this process's private directory."""
    try:
        fd, copy = tempfile.mkstemp(dir=_private_dir(), prefix="load-", suffix=".so")
        os.close(fd)
        shutil.copyfile(path, copy)
    except OSError as e:
        raise KernelCacheError(f"starling: cannot copy compiled kernels {path}: "
                               f"{_reason(e)}") from None
    return copy


def clear():
    """Deletes every cached kernel of the directory this process uses (the directory stays)."""
    d = cache_dir()
    for name in os.listdir(d):
        if name.endswith((".so", ".sha256", ".lock")) or name.startswith(".tmp-"):
            _unlink(os.path.join(d, name))
