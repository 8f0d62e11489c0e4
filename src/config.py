"""``starling.config``: process-wide settings, JAX's ``config.update(name, value)`` style.

==================  =====================================================================
name                meaning
==================  =====================================================================
num_cpu_devices     in-process CPU devices (default 1, or $STARLING_NUM_CPU_DEVICES);
                    must be set before the devices are first listed
eager_cache         bool: eager grad / value_and_grad / vjp / vmap reuse derived programs
                    across calls (default True, or $STARLING_EAGER_CACHE=0 for False; see
                    src/transforms/eager_cache.py)
==================  =====================================================================
"""
from __future__ import annotations

from .arrays import device as _device



def _set_eager_cache(value):
    from .transforms import eager_cache
    eager_cache.set_enabled(value)


def _get_eager_cache():
    from .transforms import eager_cache
    return eager_cache.is_enabled()


_SETTERS = {"num_cpu_devices": _device.configure_num_cpu_devices,
            "eager_cache": _set_eager_cache}
_GETTERS = {"num_cpu_devices": _device.local_cpu_device_count_setting,
            "eager_cache": _get_eager_cache}


def update(name: str, value) -> None:
    """Sets the option ``name``.

    Raises:
        KeyError: an unknown option (the message lists the known ones).
        ValueError / RuntimeError: an invalid value, or a setting that can no longer change.
    """
    if name not in _SETTERS:
        raise KeyError(f"starling.config: unknown option {name!r}; known: {sorted(_SETTERS)}")
    _SETTERS[name](value)


def read(name: str):
    """The current value of option ``name``."""
    if name not in _GETTERS:
        raise KeyError(f"starling.config: unknown option {name!r}; known: {sorted(_GETTERS)}")
    return _GETTERS[name]()


def __getattr__(name):
    if name in _GETTERS:
        return _GETTERS[name]()
    raise AttributeError(name)
