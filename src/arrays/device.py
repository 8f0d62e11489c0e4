"""Devices own buffers. On CPU a buffer is a NumPy array that only Starling holds a reference to.

``starling.devices()`` lists the devices of this process; ``device_put(x, device)`` places a value
on one. The CPU platform exposes ``STARLING_NUM_CPU_DEVICES`` in-process devices (default 1) so
that sharding can be tested on one machine.
"""
from __future__ import annotations

import os


class Device:
    """A device of this process: ``platform`` ("cpu"), ``id`` (int). Compared by identity."""

    __slots__ = ("platform", "id")

    def __init__(self, platform: str, id: int):
        self.platform = platform
        self.id = id

    def __repr__(self):
        return f"{self.platform.upper()}Device(id={self.id})" if self.platform != "cpu" \
            else f"CpuDevice(id={self.id})"

    def __hash__(self):
        return hash((self.platform, self.id))

    def __eq__(self, other):
        return isinstance(other, Device) and (self.platform, self.id) == (other.platform, other.id)


def _num_cpu_devices() -> int:
    raw = os.environ.get("STARLING_NUM_CPU_DEVICES", "1")
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"STARLING_NUM_CPU_DEVICES must be a positive integer, got {raw!r}") from None
    if n < 1:
        raise ValueError(f"STARLING_NUM_CPU_DEVICES must be a positive integer, got {raw!r}")
    return n


_CPU_DEVICES = tuple(Device("cpu", i) for i in range(_num_cpu_devices()))
DEFAULT_DEVICE = _CPU_DEVICES[0]


def devices(platform: str | None = None) -> list[Device]:
    """The devices of this process, optionally only those of ``platform`` ("cpu").

    Raises:
        ValueError: for an unknown platform.
    """
    if platform is None or platform == "cpu":
        return list(_CPU_DEVICES)
    raise ValueError(f"devices: unknown platform {platform!r}; available platforms: ['cpu']")


def local_device_count() -> int:
    """Number of devices of this process."""
    return len(_CPU_DEVICES)


def check_device(device, op="device_put") -> Device:
    """The Device meant by ``device`` (None -> default, "cpu", or a Device of this process).

    Raises:
        TypeError: not a Device or "cpu". ValueError: a Device of another process.
    """
    if device is None:
        return DEFAULT_DEVICE
    if isinstance(device, Device):
        if device not in _CPU_DEVICES:
            raise ValueError(f"{op}: {device} is not a device of this process; have {list(_CPU_DEVICES)}")
        return device
    if isinstance(device, str) and device == "cpu":
        return DEFAULT_DEVICE
    raise TypeError(f"{op}: device must be a starling Device or 'cpu', got {device!r}")


def device_put(x, device=None):
    """Places ``x`` (a pytree of arrays / array-likes) on ``device`` (default: the default device).

    Array-likes (NumPy arrays, Python scalars, lists) are copied into new Starling buffers.
    Raises:
        TypeError: a leaf is not array-like or ``device`` is not a Device.
        ValueError: ``device`` belongs to another process.
    """
    from .. import tree as tree_util
    from .convert import operand
    dev = check_device(device, "device_put")

    def put(leaf):
        a = operand(leaf, "device_put")
        return a.to_device(dev) if hasattr(a, "to_device") else a
    return tree_util.map(put, x)
