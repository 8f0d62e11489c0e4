"""Containers: Sequential, ModuleList, ModuleDict (PyTorch's, as pytrees).

Children are attributes named ``"0"``, ``"1"``, ... (Sequential / ModuleList) or by their keys
(ModuleDict), so state-dict names match PyTorch's (``"0.weight"``). The mutating list / dict
methods follow the module mutation rule: allowed outside transformations only.

PRNG keys: ``Sequential.forward(x, key=k)`` splits ``k`` into one key per child whose
``forward`` takes a ``key`` keyword (Dropout, or your own layers) and passes it on.
"""
from __future__ import annotations

import collections
import inspect

from .. import random
from .module import Module, _check_mutable

__all__ = ["Sequential", "ModuleList", "ModuleDict", "takes_key"]

_TAKES_KEY = {}


def takes_key(module) -> bool:
    """Whether ``module.forward`` accepts a ``key`` keyword argument (cached per class)."""
    cls = type(module)
    r = _TAKES_KEY.get(cls)
    if r is None:
        try:
            ps = inspect.signature(cls.forward).parameters
            p = ps.get("key")
            r = p is not None and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
            if cls is Sequential:
                r = True
        except (TypeError, ValueError):
            r = False
        _TAKES_KEY[cls] = r
    return r


def _check_child_name(owner, key):
    """Child names must be non-empty strings that do not shadow attributes (PyTorch's rule)."""
    if not isinstance(key, str):
        raise TypeError(f"{type(owner).__name__}: child names must be strings, got "
                        f"{type(key).__name__}")
    if (hasattr(type(owner), key) or key in ("training",) or key.startswith("_")
            or "." in key or key == ""):
        raise KeyError(f"{type(owner).__name__}: child name {key!r} is not allowed (it would "
                       "shadow an attribute, starts with '_', is empty or contains '.')")


class _Indexed(Module):
    """Shared list behaviour: children stored as attributes "0", "1", ..."""

    def _items(self):
        return [m for _, m in self.named_children()]

    def _reset(self, modules):
        for k in [k for k, _ in self.named_children()]:
            object.__delattr__(self, k)
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"{type(self).__name__}: {type(m).__name__} is not a Module")
            object.__setattr__(self, str(i), m)

    def _mutate(self, what):
        if self.__dict__.get("_sealed"):
            _check_mutable(self, what)

    def __len__(self):
        return sum(1 for _ in self.named_children())

    def __iter__(self):
        return iter(self._items())

    def __getitem__(self, idx):
        items = self._items()
        if isinstance(idx, slice):
            if isinstance(self, Sequential):
                return type(self)(*items[idx])
            return type(self)(items[idx])
        try:
            return items[idx]
        except IndexError:
            raise IndexError(f"{type(self).__name__}: index {idx} is out of range for "
                             f"{len(items)} modules") from None

    def __setitem__(self, idx, module):
        self._mutate("set an item")
        items = self._items()
        items[idx] = module
        self._reset(items)

    def __delitem__(self, idx):
        self._mutate("delete an item")
        items = self._items()
        del items[idx]
        self._reset(items)

    def append(self, module):
        self._mutate("append")
        self._reset(self._items() + [module])
        return self

    def extend(self, modules):
        self._mutate("extend")
        self._reset(self._items() + list(modules))
        return self

    def insert(self, index, module):
        self._mutate("insert")
        items = self._items()
        items.insert(index, module)
        self._reset(items)


class Sequential(_Indexed):
    """Applies its modules in order: ``Sequential(m0, m1, ...)(x) == ...m1(m0(x))``.

    Also ``Sequential(OrderedDict(name=module, ...))`` (children named by the keys).
    ``forward(x, *, key=None)``: see the module docstring for how ``key`` is shared out.
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], (dict, collections.OrderedDict)):
            for name, m in modules[0].items():
                _check_child_name(self, name)
                if not isinstance(m, Module):
                    raise TypeError(f"Sequential: {name!r} is a {type(m).__name__}, not a Module")
                object.__setattr__(self, name, m)
        else:
            self._reset(list(modules))

    def __getitem__(self, idx):
        # Slices keep the children's names (PyTorch's Sequential), so state-dict keys survive.
        if isinstance(idx, slice):
            return type(self)(collections.OrderedDict(list(self.named_children())[idx]))
        return super().__getitem__(idx)

    def append(self, module):
        """Adds ``module`` at the end under the name ``str(len(self))`` (others keep theirs)."""
        self._mutate("append")
        if not isinstance(module, Module):
            raise TypeError(f"Sequential: {type(module).__name__} is not a Module")
        object.__setattr__(self, str(len(self)), module)
        return self

    def forward(self, x, *, key=None):
        children = self._items()
        keyed = [m for m in children if takes_key(m)] if key is not None else []
        keys = random.split(key, len(keyed)) if len(keyed) > 1 else [key] * len(keyed)
        it = iter(keys)
        for m in children:
            if keyed and takes_key(m):
                x = m(x, key=next(it))
            else:
                x = m(x)
        return x


class ModuleList(_Indexed):
    """A list of modules (indexable, iterable); it has no forward of its own."""

    def __init__(self, modules=()):
        super().__init__()
        self._reset(list(modules))


class ModuleDict(Module):
    """An ordered dict of modules by string key (keys must not shadow Module attributes)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            for k, m in dict(modules).items():
                self[k] = m

    def _check_key(self, key):
        _check_child_name(self, key)

    def __setitem__(self, key, module):
        self._check_key(key)
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: {type(module).__name__} is not a Module")
        setattr(self, key, module)

    def __getitem__(self, key):
        v = self.__dict__.get(key)
        if not isinstance(v, Module):
            raise KeyError(key)
        return v

    def __delitem__(self, key):
        self[key]
        delattr(self, key)

    def __contains__(self, key):
        return isinstance(self.__dict__.get(key), Module)

    def __len__(self):
        return sum(1 for _ in self.named_children())

    def __iter__(self):
        return iter(self.keys())

    def keys(self):
        return [k for k, _ in self.named_children()]

    def values(self):
        return [m for _, m in self.named_children()]

    def items(self):
        return list(self.named_children())

    def update(self, modules):
        for k, m in dict(modules).items():
            self[k] = m
