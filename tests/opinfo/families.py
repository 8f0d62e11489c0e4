"""Imports every family module so that REGISTRY is complete."""
import importlib
import pkgutil

import tests.opinfo as _pkg

for _m in pkgutil.iter_modules(_pkg.__path__):
    if _m.name not in ("families",):
        importlib.import_module(f"tests.opinfo.{_m.name}")
