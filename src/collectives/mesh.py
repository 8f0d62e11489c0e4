"""Meshes: an n-d grid of devices with named axes (JAX's ``Mesh``, PyTorch's ``DeviceMesh``).

``Mesh(devices, axis_names)`` takes an n-d array (or nested list) of Devices and one name per
dimension; ``make_mesh((2, 2), ("data", "model"))`` builds one from ``starling.devices()``.
A mesh is a context manager: inside ``with mesh:`` it is the *current mesh* that ``shard_map``,
``with_sharding_constraint`` and bare ``PartitionSpec`` shardings use when none is given.
Devices may belong to other processes (``starling.distributed``): such a mesh spans processes.
"""
from __future__ import annotations

import contextvars
import math
from collections import OrderedDict

import numpy as np

from ..arrays import device as _device

_CURRENT = contextvars.ContextVar("starling_mesh", default=None)


class Mesh:
    """An n-d array of distinct devices with one name per axis.

    Args:
        devices: n-d array-like of ``Device`` (``starling.devices()`` entries).
        axis_names: one distinct, non-empty string per dimension of ``devices``.
    Attributes:
        devices: the device grid (NumPy object array, shape ``mesh.devices_shape``).
        axis_names: tuple of names; ``shape``: OrderedDict name -> size; ``size``: device count.
    Raises:
        TypeError: an entry is not a Device, or a name is not a string.
        ValueError: duplicate devices or names, or as many names as dimensions is violated.
    """

    __slots__ = ("devices", "axis_names", "_hash", "_coords", "_flat", "__weakref__")

    def __init__(self, devices, axis_names):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        axis_names = tuple(axis_names)
        grid = np.empty(np.shape(np.asarray(devices, dtype=object)), dtype=object)
        grid[...] = np.asarray(devices, dtype=object)
        if grid.ndim == 0:
            grid = grid.reshape(1)
        for n in axis_names:
            if not isinstance(n, str) or not n:
                raise TypeError(f"Mesh: axis names must be non-empty strings, got {axis_names!r}")
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"Mesh: axis names must be distinct, got {axis_names!r}")
        if grid.ndim != len(axis_names):
            raise ValueError(f"Mesh: devices of shape {grid.shape} need {grid.ndim} axis names, "
                             f"got {len(axis_names)}: {axis_names!r}")
        flat = tuple(grid.flat)
        for d in flat:
            if not isinstance(d, _device.Device):
                raise TypeError(f"Mesh: every entry of devices must be a starling Device "
                                f"(starling.devices()), got {d!r}")
        if len(set(flat)) != len(flat):
            raise ValueError(f"Mesh: devices must be distinct, got {list(flat)}")
        grid.flags.writeable = False
        self.devices = grid
        self.axis_names = axis_names
        self._flat = flat
        self._coords = {d: np.unravel_index(i, grid.shape) for i, d in enumerate(flat)}
        self._hash = hash((flat, grid.shape, axis_names))

    # ---- shape --------------------------------------------------------------------------------
    @property
    def shape(self) -> "OrderedDict[str, int]":
        return OrderedDict(zip(self.axis_names, self.devices.shape))

    @property
    def devices_shape(self) -> tuple:
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        return len(self._flat)

    @property
    def ndim(self) -> int:
        return len(self.axis_names)

    @property
    def flat_devices(self) -> tuple:
        """The devices in C order of the grid (the order of a sharded array's shards)."""
        return self._flat

    def axis_size(self, name) -> int:
        """Size of the named axis (or product over a tuple of names).

        Raises:
            ValueError: an unknown axis name (the message lists the mesh's axes).
        """
        if isinstance(name, (tuple, list)):
            return math.prod(self.axis_size(n) for n in name)
        return self.devices.shape[self.axis_index_of(name)]

    def axis_index_of(self, name) -> int:
        try:
            return self.axis_names.index(name)
        except ValueError:
            raise ValueError(f"unknown mesh axis {name!r}; the mesh has axes "
                             f"{dict(self.shape)}") from None

    def coords(self, device) -> tuple:
        """The grid coordinates of ``device`` (one int per axis)."""
        try:
            return tuple(int(c) for c in self._coords[device])
        except KeyError:
            raise ValueError(f"{device} is not in the mesh {self}") from None

    def device_position(self, device) -> int:
        """Position of ``device`` in ``flat_devices``."""
        return int(np.ravel_multi_index(self.coords(device), self.devices.shape))

    @property
    def local_devices(self) -> tuple:
        """The devices of the mesh that belong to this process, in flat order."""
        p = _device.process_index()
        return tuple(d for d in self._flat if d.process_index == p)

    @property
    def is_multi_process(self) -> bool:
        return len({d.process_index for d in self._flat}) > 1

    def group(self, axes, device) -> tuple:
        """The devices sharing every coordinate of ``device`` except along ``axes`` (a tuple of
        names), ordered by their coordinates along ``axes`` (major to minor): the group a
        collective over ``axes`` runs in, and the device's rank is its position in it."""
        c = list(self.coords(device))
        idx = [self.axis_index_of(a) for a in axes]
        sizes = [self.devices.shape[i] for i in idx]
        out = []
        for r in range(math.prod(sizes)):
            sub = np.unravel_index(r, sizes) if sizes else ()
            for i, s in zip(idx, sub):
                c[i] = int(s)
            out.append(self.devices[tuple(c)])
        return tuple(out)

    def rank_in(self, axes, device) -> int:
        """The linear index of ``device`` along ``axes`` (major to minor)."""
        c = self.coords(device)
        idx = [self.axis_index_of(a) for a in axes]
        sizes = [self.devices.shape[i] for i in idx]
        return int(np.ravel_multi_index([c[i] for i in idx], sizes)) if idx else 0

    # ---- identity, context ---------------------------------------------------------------------
    def __eq__(self, other):
        return (isinstance(other, Mesh) and self._hash == other._hash
                and self._flat == other._flat and self.devices.shape == other.devices.shape
                and self.axis_names == other.axis_names)

    def __hash__(self):
        return self._hash

    def __enter__(self):
        token = _CURRENT.set(self)
        _TOKENS.setdefault(id(self), []).append(token)
        return self

    def __exit__(self, *exc):
        _CURRENT.reset(_TOKENS[id(self)].pop())
        return False

    def __repr__(self):
        shape = ", ".join(f"'{n}': {s}" for n, s in self.shape.items())
        ids = np.vectorize(lambda d: d.id, otypes=[int])(self.devices).tolist()
        return f"Mesh({{{shape}}}, device ids={ids})"


def different_meshes_error(op, items, hint) -> ValueError:
    """The error for ``op`` meeting values on several meshes. ``items``: (what, mesh) pairs,
    e.g. ("argument 0 f32[4,4]", mesh); the message groups them by mesh (each shown with its
    axes and device ids, so two meshes of the same shape are told apart) and ends with
    ``hint``."""
    groups = {}
    for what, mesh in items:
        groups.setdefault(mesh, []).append(what)
    parts = "; ".join(f"{m!r}: {', '.join(ws)}" for m, ws in groups.items())
    return ValueError(f"{op}: values on {len(groups)} different meshes: {parts}; {hint}")


_TOKENS: dict = {}


def current_mesh() -> Mesh | None:
    """The mesh of the innermost ``with mesh:`` block, or None."""
    return _CURRENT.get()


def make_mesh(axis_shapes, axis_names, devices=None) -> Mesh:
    """A mesh of the given shape over ``devices`` (default: ``starling.devices()``, in order).

    Args:
        axis_shapes: sizes, e.g. ``(2, 2)``; their product must equal the number of devices.
        axis_names: one name per size, e.g. ``("data", "model")``.
        devices: optional list of Devices.
    Raises:
        ValueError: the sizes do not multiply to the device count (the message says how many
            devices there are and how to get more: STARLING_NUM_CPU_DEVICES).
    """
    if isinstance(axis_shapes, int):
        axis_shapes = (axis_shapes,)
    axis_shapes = tuple(int(s) for s in axis_shapes)
    if isinstance(axis_names, str):
        axis_names = (axis_names,)
    axis_names = tuple(axis_names)
    if len(axis_shapes) != len(axis_names):
        raise ValueError(f"make_mesh: {len(axis_shapes)} axis sizes {axis_shapes} but "
                         f"{len(axis_names)} names {axis_names}")
    if any(s < 1 for s in axis_shapes):
        raise ValueError(f"make_mesh: axis sizes must be positive, got {axis_shapes}")
    devs = list(_device.devices() if devices is None else devices)
    need = math.prod(axis_shapes)
    if need != len(devs):
        if devices is not None:
            hint = ""
        elif need < len(devs):
            hint = (f"; to use some of them, pass devices=starling.devices()[:{need}] (the mesh "
                    "covers exactly the devices it is given, as in JAX)")
        else:
            hint = ("; set the number of CPU devices with starling.config.update("
                    "'num_cpu_devices', n) before first use, or STARLING_NUM_CPU_DEVICES=n")
        given = "were given" if devices is not None else "are available"
        raise ValueError(f"make_mesh: a mesh of shape {axis_shapes} needs {need} devices, but "
                         f"{len(devs)} {given}{hint}")
    grid = np.empty(len(devs), dtype=object)
    grid[:] = devs
    return Mesh(grid.reshape(axis_shapes), axis_names)


class AbstractMesh:
    """A mesh's shape without devices: ``axis_names`` and sizes. Shardings read from an export
    are over one until the program runs on a concrete mesh."""

    __slots__ = ("axis_names", "sizes")

    def __init__(self, sizes, axis_names):
        self.sizes = tuple(int(s) for s in sizes)
        self.axis_names = tuple(axis_names)

    @property
    def shape(self):
        return OrderedDict(zip(self.axis_names, self.sizes))

    @property
    def devices_shape(self):
        return self.sizes

    @property
    def size(self):
        return math.prod(self.sizes)

    @property
    def ndim(self):
        return len(self.sizes)

    def axis_size(self, name):
        if isinstance(name, (tuple, list)):
            return math.prod(self.axis_size(n) for n in name)
        return self.sizes[self.axis_index_of(name)]

    def axis_index_of(self, name):
        try:
            return self.axis_names.index(name)
        except ValueError:
            raise ValueError(f"unknown mesh axis {name!r}; the mesh has axes "
                             f"{dict(self.shape)}") from None

    def matches(self, mesh) -> bool:
        return tuple(mesh.axis_names) == self.axis_names and \
            tuple(mesh.devices_shape) == self.sizes

    def __eq__(self, other):
        return isinstance(other, AbstractMesh) and (other.sizes, other.axis_names) == \
            (self.sizes, self.axis_names)

    def __hash__(self):
        return hash((self.sizes, self.axis_names))

    def __repr__(self):
        return f"AbstractMesh({dict(self.shape)})"
