"""Devices own buffers. On CPU a buffer is a NumPy array that only Starling holds a reference to.

``starling.devices()`` lists every device of the job (after ``starling.distributed.initialize()``
the devices of every process; otherwise this process's), ``starling.local_devices()`` the
devices of this process; ``device_put(x, device)`` places a value on one. The CPU platform of a
process exposes N in-process devices (default 1) so that sharding can run, and be tested, on one
machine: N comes from ``starling.config.update("num_cpu_devices", n)`` or the environment
variable ``STARLING_NUM_CPU_DEVICES``, read once when the devices are first listed (like JAX's
``--xla_force_host_platform_device_count``). Work placed on different devices runs concurrently
(one worker thread per device: src/collectives/runtime/).

GPUs are the devices of platform "cuda" (src/arrays/cuda.py): ``devices("cuda")`` lists them
(empty without cupy, a driver or a GPU). ``devices()`` without a platform lists the CPU devices,
on which arrays are made; arrays go to a GPU with ``device_put(x, "cuda")``.
"""
from __future__ import annotations

import os


class Device:
    """A device: ``platform`` ("cpu"), ``id`` (unique in the job), ``process_index`` (the process
    that owns it; 0 without ``starling.distributed``; None once that process failed and the job
    was reconfigured without it). Compared by value (platform and id, which never change)."""

    __slots__ = ("platform", "id", "process_index")

    def __init__(self, platform: str, id: int, process_index: int = 0):
        self.platform = platform
        self.id = id
        self.process_index = process_index

    def __repr__(self):
        proc = ", failed" if self.process_index is None else \
            f", process_index={self.process_index}" if self.process_index else ""
        name = "CpuDevice" if self.platform == "cpu" else f"{self.platform.upper()}Device"
        return f"{name}(id={self.id}{proc})"

    def __hash__(self):
        return hash((self.platform, self.id))

    def __eq__(self, other):
        return isinstance(other, Device) and (self.platform, self.id) == (other.platform, other.id)

    @property
    def is_local(self) -> bool:
        """True when this process owns the device's memory."""
        return self.process_index == process_index()


class SingleDeviceSharding:
    """The sharding of an ordinary Array: all of it on one device."""

    __slots__ = ("device",)

    def __init__(self, device):
        self.device = device

    @property
    def device_set(self) -> set:
        return {self.device}

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and other.device == self.device

    def __hash__(self):
        return hash(("SingleDeviceSharding", self.device))

    def __repr__(self):
        return f"SingleDeviceSharding({self.device})"


def _parse_count(raw, what) -> int:
    try:
        n = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a positive integer, got {raw!r}") from None
    if isinstance(raw, bool) or n < 1 or (isinstance(raw, float) and raw != n):
        raise ValueError(f"{what} must be a positive integer, got {raw!r}")
    return n


# Device 0 of this process exists from import on (every unsharded Array lives there); the other
# local devices are made on first use, when the configured count is final.
DEFAULT_DEVICE = Device("cpu", 0)
_STATE = {"local": None, "global": None, "process_index": 0, "requested": None}


def configure_num_cpu_devices(n) -> None:
    """Sets the number of in-process CPU devices (``starling.config.update("num_cpu_devices",
    n)``). Must run before the devices are first listed.

    Raises:
        ValueError: n is not a positive integer.
        RuntimeError: the devices were already listed with a different count.
    """
    n = _parse_count(n, "num_cpu_devices")
    if _STATE["local"] is not None and len(_STATE["local"]) != n:
        raise RuntimeError(
            f"num_cpu_devices: the devices are already in use ({len(_STATE['local'])} CPU "
            f"devices); set the count to {n} before the first call of starling.devices(), a "
            "mesh or a sharding (or with STARLING_NUM_CPU_DEVICES before the process starts)")
    _STATE["requested"] = n


def _local() -> tuple:
    devs = _STATE["local"]
    if devs is None:
        n = _STATE["requested"]
        if n is None:
            n = _parse_count(os.environ.get("STARLING_NUM_CPU_DEVICES", "1"),
                             "STARLING_NUM_CPU_DEVICES")
        p = _STATE["process_index"]
        first = DEFAULT_DEVICE.id
        devs = (DEFAULT_DEVICE,) + tuple(Device("cpu", first + i, p) for i in range(1, n))
        _STATE["local"] = devs
    return devs


def set_process_devices(process_index: int, global_devices) -> None:
    """Installs the job's device list (``starling.distributed.initialize``): this process's
    devices become those of ``global_devices`` with ``process_index``; DEFAULT_DEVICE is
    renumbered in place so that existing Arrays stay on the first local device."""
    local = tuple(d for d in global_devices if d.process_index == process_index)
    if not local:
        raise RuntimeError(f"process {process_index} owns none of the devices {global_devices}")
    DEFAULT_DEVICE.id = local[0].id
    DEFAULT_DEVICE.process_index = process_index
    local = (DEFAULT_DEVICE,) + local[1:]
    glob = tuple(DEFAULT_DEVICE if d == local[0] else d for d in global_devices)
    _STATE.update(local=local, process_index=process_index, **{"global": glob})


def renumber_processes(new_index, process_index: int) -> None:
    """After processes left the job (``starling.distributed`` reconfiguration): every Device of
    the job takes its process's new index ``new_index[old]``, in place, so that existing meshes
    see it; devices of processes missing from ``new_index`` get ``process_index`` None and leave
    ``devices()``. Device ids do not change. ``process_index``: this process's new index."""
    for d in _STATE["global"] or ():
        d.process_index = new_index.get(d.process_index)
    glob = tuple(d for d in _STATE["global"] or () if d.process_index is not None)
    _STATE.update(process_index=process_index, **{"global": glob})


def local_cpu_device_count_setting() -> int:
    """The configured number of CPU devices per process (without listing them)."""
    if _STATE["local"] is not None:
        return len(_STATE["local"])
    if _STATE["requested"] is not None:
        return _STATE["requested"]
    return _parse_count(os.environ.get("STARLING_NUM_CPU_DEVICES", "1"),
                        "STARLING_NUM_CPU_DEVICES")


def process_index() -> int:
    """The index of this process in the job (0 without ``starling.distributed``)."""
    return _STATE["process_index"]


def devices(platform: str | None = None) -> list[Device]:
    """The CPU devices of the job (all processes' after ``starling.distributed.initialize()``),
    or this process's GPUs for ``platform`` "cuda" (empty where none is usable).

    Raises:
        ValueError: for an unknown platform.
    """
    if _check_platform(platform, "devices") == "cuda":
        from .cuda import cuda_devices
        return cuda_devices()
    glob = _STATE["global"]
    return list(glob if glob is not None else _local())


def local_devices(platform: str | None = None) -> list[Device]:
    """The CPU devices of this process, or its GPUs for ``platform`` "cuda".

    Raises:
        ValueError: for an unknown platform.
    """
    if _check_platform(platform, "local_devices") == "cuda":
        from .cuda import cuda_devices
        return cuda_devices()
    return list(_local())


def _check_platform(platform, op):
    if platform is not None and platform not in ("cpu", "cuda"):
        raise ValueError(f"{op}: unknown platform {platform!r}; available platforms: "
                         "['cpu', 'cuda']")
    return platform


def device_count() -> int:
    """Number of devices of the job."""
    return len(devices())


def local_device_count() -> int:
    """Number of devices of this process."""
    return len(_local())


def check_device(device, op="device_put") -> Device:
    """The Device meant by ``device`` (None -> default, "cpu", a Device of this process, or a
    GPU: "cuda", "gpu", "cuda:N").

    Raises:
        TypeError: not a Device or a device name. ValueError: a Device of another process; a
            GPU where none is usable.
    """
    if device is None:
        return DEFAULT_DEVICE
    if (isinstance(device, Device) and device.platform == "cuda") or (
            isinstance(device, str) and (device in ("cuda", "gpu")
                                         or device.startswith(("cuda:", "gpu:")))):
        from .cuda import device_of
        return device_of(device, op)
    if isinstance(device, Device):
        local = _local()
        if device not in local:
            raise ValueError(f"{op}: {device} is not a device of this process; have {list(local)}")
        return device
    if isinstance(device, str) and device == "cpu":
        return DEFAULT_DEVICE
    raise TypeError(f"{op}: device must be a starling Device, 'cpu' or 'cuda[:N]', got "
                    f"{device!r}")


def places_result(fn):
    """Decorator of array-creating functions with a ``device=`` keyword: the result is put on
    that device (the function itself may ignore it: creation happens on the default device).
    Tracers (staged code) are left alone: staged programs have no devices."""
    import functools

    @functools.wraps(fn)
    def create(*args, device=None, **kwargs):
        dev = check_device(device, fn.__name__)
        out = fn(*args, device=device, **kwargs)
        if device is None or not hasattr(out, "to_device") or hasattr(out, "_shards") \
                or getattr(out, "_device", DEFAULT_DEVICE) == dev:
            return out
        return out.to_device(dev)
    return create


def keeps_layout(fn):
    """Decorator of ``*_like`` creation functions: without ``device=``, the result of a sharded
    input is laid out like it (as JAX does), not gathered on one device."""
    import functools

    @functools.wraps(fn)
    def create(x, *args, device=None, **kwargs):
        out = fn(x, *args, device=device, **kwargs)
        sharding = getattr(x, "_sharding", None)
        if device is None and sharding is not None and hasattr(out, "_buf") \
                and tuple(out.shape) == tuple(x.shape) and not sharding.partial:
            return device_put(out, sharding)
        return out
    return create


def device_put(x, device=None):
    """Places ``x`` (a pytree of arrays / array-likes) on ``device``: a Device of this process,
    "cpu", None (the default device), or a sharding (``NamedSharding``, a PartitionSpec with the
    current mesh, placements), or a pytree prefix of ``x`` of such targets: each leaf is laid
    out across the mesh (``starling.sharding.distribute``).

    Array-likes (NumPy arrays, Python scalars, lists) are copied into new Starling buffers.
    Raises:
        TypeError: a leaf is not array-like or a target is neither a Device nor a sharding.
        ValueError: ``device`` belongs to another process, or a prefix does not match ``x``.
    """
    from .. import tree as tree_util
    if device is None or isinstance(device, (Device, str)) or _is_sharding(device):
        return tree_util.map(lambda leaf: _put_one(leaf, device), x)
    try:
        targets = tree_util.broadcast_prefix(device, x)
    except (ValueError, TypeError) as e:
        raise ValueError(f"device_put: the targets are not a pytree prefix of the value: "
                         f"{e}") from None
    leaves, treedef = tree_util.flatten(x)
    return tree_util.unflatten(treedef, [_put_one(leaf, t) for leaf, t in zip(leaves, targets)])


def _is_sharding(obj) -> bool:
    from ..collectives.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding
    from ..core.placements import Placement
    return isinstance(obj, (NamedSharding, PartitionSpec, SingleDeviceSharding)) or (
        isinstance(obj, tuple) and bool(obj) and all(isinstance(p, Placement) for p in obj))


def _put_one(leaf, target):
    from .convert import operand
    a = operand(leaf, "device_put")
    if target is not None and not isinstance(target, (Device, str)):
        from ..collectives.sharding import as_sharding
        from ..collectives.sharded_array import distribute_sharding
        sharding = as_sharding(target, "device_put", ndim=a.ndim)
        if sharding is None:
            raise TypeError(f"device_put: a target must be a Device, 'cpu', None or a sharding, "
                            f"got {target!r}")
        return distribute_sharding(a, sharding)
    dev = check_device(target, "device_put")
    if hasattr(a, "_shards"):   # a sharded array: gather it onto the device
        from ..collectives.sharded_array import gather_to
        return gather_to(a, dev)
    return a.to_device(dev) if hasattr(a, "to_device") else a
