"""Backends: each turns an optimised Program into an executable.

A backend is an object with ``name``, ``supports(primitive) -> bool`` and
``compile(program) -> Executable`` where ``Executable(*consts, *args) -> list of Arrays``
and ``Executable.source`` is the generated source text (or None).

The process-wide default is ``cpp`` (native kernels) when a C++ compiler is found, else
``numpy_ref``; the environment variable ``STARLING_BACKEND`` or ``set_default_backend`` overrides
it. It is decided on first use, so ``import starling`` never looks for a compiler.
"""
from __future__ import annotations

import os

_BACKENDS = {}
_DEFAULT = [None]   # resolved by default_backend_name() on first use


def register_backend(backend):
    """Makes ``backend`` available to compile under ``backend.name``."""
    _BACKENDS[backend.name] = backend
    return backend


def get_backend(name=None):
    """The backend called ``name`` (default: the process-wide default).

    Raises:
        ValueError: unknown backend name (lists the available ones).
    """
    name = default_backend_name() if name is None else name
    if name not in _BACKENDS:
        _load_builtin(name)
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(f"compile: unknown backend {name!r}; available: "
                         f"{sorted(set(_BACKENDS) | {'numpy_ref', 'cpp'})}") from None


def _load_builtin(name):
    import importlib
    try:
        importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        pass


def set_default_backend(name):
    """Sets the process-wide default backend used by ``compile`` (e.g. "cpp", "numpy_ref")."""
    get_backend(name)
    _DEFAULT[0] = name


def default_backend_name():
    """The name of the process-wide default backend: ``set_default_backend``'s choice, else
    ``$STARLING_BACKEND``, else "cpp" when a C++ compiler is available, else "numpy_ref"."""
    if _DEFAULT[0] is None:
        name = os.environ.get("STARLING_BACKEND")
        if not name:
            from ..cache import find_compiler
            name = "cpp" if find_compiler() is not None else "numpy_ref"
        get_backend(name)
        _DEFAULT[0] = name
    return _DEFAULT[0]
