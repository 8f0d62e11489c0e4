"""The "cuda" platform: Arrays whose buffers live in the memory of an NVIDIA GPU.

Buffers are cupy arrays (``pip install -e ".[gpu]"``; cupy's memory pool allocates them). cupy
has no bfloat16 / float8 / float4 dtypes, so a ``DeviceBuffer`` holds the elements of those
formats as their bits (uint16 / uint8), beside the Array's dtype; Starling's Triton kernels read
them as bits too (lowering/backends/triton/formulas.py).

* ``starling.devices("cuda")`` lists the GPUs; it is empty, and never raises, where cupy, the
  driver or a GPU is missing (``unavailable_reason()`` says which).
* ``device_put(x, "cuda")`` / ``x.to_device(gpu)`` copy host data to a GPU; ``np.asarray(x)``,
  ``x.item()``, ``x.to_device("cpu")`` copy it back. ``__dlpack__`` exports a copy (so no
  consumer can write into an immutable Array); ``starling.numpy.from_dlpack`` imports a CUDA
  producer's data (torch, cupy) as a copy on its GPU.
* Operations on GPU arrays run on that GPU: each eager operation is compiled once per primitive,
  parameters and operand types by the ``triton`` backend (lowering/backends/triton/), whose
  kernels launch on the device; what Triton does not render runs on the host with explicit
  copies (logged once per primitive). ``compile`` picks the ``triton`` backend for GPU
  arguments.
* Arrays committed to a device do not move implicitly: an operation mixing a GPU array with
  an array on another GPU, on a CPU device other than the default one, or sharded, raises
  ValueError naming both devices. Arrays on the default CPU device (everything made without a
  device, as JAX's uncommitted arrays) are copied to the GPU of the operation (logged once per
  operation); reading a GPU buffer as a NumPy array copies it to the host.

Kernels and copies run on the device's default stream, in order; ``block_until_ready()`` waits
for them.
"""
from __future__ import annotations

import logging

import ml_dtypes
import numpy as np

from ..core import casting
from ..core.trace import EvalTrace
from .array import Array, wrap
from .device import Device

logger = logging.getLogger("starling")

_STATE = {"devices": None, "why": None}
_LOGGED_HOST = set()
_LOGGED_MOVES = set()
# the cupy dtype holding each dtype cupy lacks (as its bits)
_STORAGE = {np.dtype(ml_dtypes.bfloat16): np.dtype(np.uint16),
            **{np.dtype(t): np.dtype(np.uint8) for t in (
                ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn,
                ml_dtypes.float8_e8m0fnu)}}


def cuda_devices() -> list:
    """The GPUs of this process as Devices of platform "cuda" (empty without cupy, a driver or
    a GPU; the reason is ``unavailable_reason()``)."""
    if _STATE["devices"] is None:
        try:
            import cupy
            count = cupy.cuda.runtime.getDeviceCount()
            devs, why = [Device("cuda", i) for i in range(count)], None
            if not devs:
                why = "the CUDA driver reports no GPU"
        except ImportError as e:
            devs, why = [], (f"cupy cannot be imported ({e}); pip install -e '.[gpu]' "
                             "installs it")
        except Exception as e:  # noqa: BLE001  (cupy raises CUDA errors of several types)
            devs, why = [], f"no usable CUDA driver or GPU ({type(e).__name__}: {e})"
        _STATE.update(devices=devs, why=why)
    return list(_STATE["devices"])


def unavailable_reason():
    """Why ``cuda_devices()`` is empty, or None when it is not."""
    cuda_devices()
    return _STATE["why"]


def device_of(spec, op):
    """The cuda Device named by ``spec`` ("cuda", "gpu", "cuda:N", "gpu:N" or a cuda Device).

    Raises:
        ValueError: no GPU is usable, or there is no GPU N.
    """
    devs = cuda_devices()
    if not devs:
        raise ValueError(f"{op}: no cuda device: {unavailable_reason()}")
    if isinstance(spec, Device):
        if spec not in devs:
            raise ValueError(f"{op}: {spec} is not a GPU of this process; have {devs}")
        return spec
    idx = "0" if spec in ("cuda", "gpu") else spec.split(":", 1)[1]
    if not idx.isdigit() or int(idx) >= len(devs):
        raise ValueError(f"{op}: no device {spec!r}; have {devs}")
    return devs[int(idx)]


class DeviceBuffer:
    """The data of a GPU Array: ``data`` (a cupy array on the device, the elements' bits for
    dtypes cupy lacks) and ``dtype`` (the elements' dtype). Never written after it is made."""

    __slots__ = ("data", "dtype")

    def __init__(self, data, dtype):
        self.data, self.dtype = data, np.dtype(dtype)

    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    nbytes = property(lambda self: self.data.nbytes)

    def __repr__(self):
        return f"DeviceBuffer({self.dtype}{list(self.shape)})"

    def __array__(self, dtype=None, copy=None):
        # host code reading a GPU buffer as NumPy (a host fallback) gets a copy
        if copy is False:
            raise ValueError("a GPU buffer cannot be read as a NumPy array without a copy")
        host = to_host(self)
        return host if dtype is None else host.astype(dtype)


def storage_dtype(dtype):
    """The cupy dtype that holds elements of ``dtype``."""
    return _STORAGE.get(np.dtype(dtype), np.dtype(dtype))


def empty(shape, dtype, device):
    """A new DeviceBuffer of ``shape`` / ``dtype`` on ``device`` (contents undefined)."""
    import cupy
    with cupy.cuda.Device(device.id):
        return DeviceBuffer(cupy.empty(shape, storage_dtype(dtype)), dtype)


def to_device(buf, device) -> DeviceBuffer:
    """A copy of the host buffer ``buf`` (NumPy array or scalar) on ``device``."""
    import cupy
    host = np.asarray(buf, order="C")   # (ascontiguousarray would make 0-d arrays 1-d)
    with cupy.cuda.Device(device.id):
        return DeviceBuffer(cupy.asarray(host.view(storage_dtype(host.dtype))), host.dtype)


def to_host(buf):
    """A NumPy copy of ``buf`` (a DeviceBuffer; host buffers are returned as NumPy arrays, and
    a donated buffer raises)."""
    if not isinstance(buf, DeviceBuffer):
        return np.asarray(buf)
    return buf.data.get().view(buf.dtype)


def device_index(buf) -> int:
    """The GPU holding the DeviceBuffer ``buf``."""
    return buf.data.device.id


class CudaArray(Array):
    """An Array in the memory of a GPU (see the module docstring). Build one with
    ``device_put(x, "cuda")`` or get one from an operation on GPU arrays."""

    __slots__ = ()

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("np.asarray(copy=False) of an array on a GPU: it can only be read "
                             "as a host copy")
        host = to_host(self._buf)
        if dtype is not None and np.dtype(dtype) != host.dtype:
            return casting.astype(host, dtype)
        return host   # a fresh host copy: the caller may keep it

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Exports a copy of the data on its GPU through DLPack (kDLCUDA), so that no consumer
        can write into this immutable Array.

        Raises:
            BufferError: ``copy=False``; a dtype cupy cannot export (bfloat16, float8, float4);
                ``dl_device`` names another device.
        """
        if copy is False:
            raise BufferError("__dlpack__: copy=False, but GPU Arrays export a copy (Arrays "
                              "are immutable)")
        buf = self._buf
        if buf.dtype in _STORAGE:
            raise BufferError(f"__dlpack__: cannot export {buf.dtype} from the GPU (cupy has "
                              "no such dtype); convert it with astype first, or copy it to the "
                              "host with np.asarray")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"__dlpack__: the array is on {self._device}, not on DLPack "
                              f"device {tuple(dl_device)}")
        import cupy
        with cupy.cuda.Device(self._device.id):
            data = buf.data.copy()
        kwargs = {} if max_version is None else {"max_version": max_version}
        return data.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return (2, self._device.id)   # kDLCUDA

    def to_device(self, device, /, *, stream=None):
        """This array on ``device`` (a copy unless it is already there).

        Raises:
            ValueError: a stream (kernels and copies use the default stream); an unknown device.
        """
        if stream is not None:
            raise ValueError("to_device: only the default stream is supported; pass "
                             "stream=None")
        from .device import check_device
        dev = check_device(device, "to_device")
        if dev == self._device:
            return self
        if dev.platform == "cuda":
            return put(to_host(self._buf), self._weak, dev)
        out = wrap(to_host(self._buf), self._weak)
        return out if dev == out._device else out.to_device(dev)

    def block_until_ready(self):
        """Returns self once every kernel and copy queued on its GPU finished."""
        import cupy
        cupy.cuda.Device(self._device.id).synchronize()
        return self

    def _host(self):
        return wrap(to_host(self._buf), self._weak)

    def item(self, *args):
        return self._host().item(*args)

    def tolist(self):
        return self._host().tolist()

    def __bool__(self):
        return bool(self._host())

    def _scalar(self, what):
        return self._host()._scalar(what)

    def __repr__(self):
        return f"{repr(self._host())[:-1]}, device={self._device})"

    def __str__(self):
        return str(self._host())

    def __reduce__(self):
        # pickles its data; unpickled on the same platform when it has that GPU
        return (_rebuild, (to_host(self._buf), self._weak, self._device.id))


def _rebuild(buf, weak, index):
    devs = cuda_devices()
    if index < len(devs):
        return put(buf, weak, devs[index])
    return wrap(np.array(buf), weak)


def put(buf, weak, device) -> CudaArray:
    """A CudaArray on ``device`` holding a copy of the host buffer ``buf``."""
    return adopt(to_device(buf, device), weak, device)


def adopt(dbuf, weak, device) -> CudaArray:
    """Wraps the DeviceBuffer ``dbuf`` that no one else holds (no copy)."""
    a = object.__new__(CudaArray)
    a._buf, a._weak, a._device = dbuf, weak, device
    return a


def from_dlpack(x):
    """A CudaArray holding a copy of the data of the CUDA DLPack producer ``x``."""
    import cupy
    dev = cuda_devices()[x.__dlpack_device__()[1]]
    with cupy.cuda.Device(dev.id):
        try:
            data = cupy.from_dlpack(x).copy()
        except (TypeError, ValueError, BufferError) as e:
            raise TypeError(f"from_dlpack: cupy cannot import this CUDA buffer ({e}); for "
                            "bfloat16 / float8 pass its bits (torch: x.view(torch.uint16)) "
                            "and reinterpret them with starling.lax.bitcast_convert_type, or "
                            "convert it to float32 first") from None
    return adopt(DeviceBuffer(data, data.dtype), False, dev)


def placement(op, args):
    """(the GPU, per operand its DeviceBuffer) for an operation on ``args`` (Arrays, at least
    one on a GPU). Arrays on the default CPU device are not committed to it (as JAX's arrays
    made without a device): they are copied to the GPU (logged once per operation for
    arrays that are not 0-d, since such copies cost time). Any other mix raises.

    Raises:
        ValueError: operands on different devices (another GPU, another CPU device, a
            sharded array), naming them.
    """
    from .device import DEFAULT_DEVICE
    gpu = next(a._device for a in args if isinstance(a, CudaArray))
    bufs = []
    for i, a in enumerate(args):
        if isinstance(a, CudaArray) and a._device == gpu:
            bufs.append(a._buf)
        elif type(a) is Array and a._device == DEFAULT_DEVICE:
            if a.ndim and op not in _LOGGED_MOVES:
                _LOGGED_MOVES.add(op)
                logger.info("starling: %s copied a host array (%s) to %s; put it there once "
                            "with starling.device_put to avoid the copy", op,
                            a.aval.str_short(), gpu)
            bufs.append(to_device(a._buf, gpu))
        else:
            first = next(j for j, b in enumerate(args) if isinstance(b, CudaArray))
            raise ValueError(
                f"{op}: operands on different devices: operand {first} "
                f"({args[first].aval.str_short()}) is on {gpu}, operand {i} "
                f"({a.aval.str_short()}) on {_devices_of(a)}; move one with "
                f"starling.device_put(x, device)")
    return gpu, bufs


def _devices_of(a):
    devs = a.devices()
    return next(iter(devs)) if len(devs) == 1 else f"the devices {sorted(devs, key=str)}"


def host_fallback_logged(name):
    """Logs, once per primitive, that ``name`` ran on the host for GPU operands."""
    if name not in _LOGGED_HOST:
        _LOGGED_HOST.add(name)
        logger.info("starling: %s has no GPU kernel; it runs on the host (its operands are "
                    "copied there and its results back)", name)


_CACHE: dict = {}
_CACHE_MAX = 4096


def dispatch(prim, args, params):
    """Runs ``prim`` on operands at least one of which is a GPU array (EvalTrace's dispatch of
    CudaArray operands): its one-equation Program compiled by the triton backend, launched on
    the GPU."""
    from ..core.ir import Equation, Program, Var
    from ..lowering.backends import get_backend
    gpu, bufs = placement(prim.name, args)
    avals = tuple(a.aval for a in args)
    try:
        key = (prim, tuple(sorted((k, _param_key(v)) for k, v in params.items())), avals)
        hash(key)
    except TypeError:
        key = None
    if key is not None and any(_holds_program(v) for v in params.values()):
        key = None   # bodies are new Programs on every call: caching them would only grow
    exe = _CACHE.get(key) if key is not None else None
    if exe is None:
        invars = [Var(a) for a in avals]
        out = prim.rule("abstract_eval")(*avals, **params)
        outvars = [Var(a) for a in (out if prim.multiple_results else [out])]
        exe = get_backend("triton").compile(
            Program([], [], invars, [Equation(prim, invars, outvars, params)], outvars))
        if key is not None:
            if len(_CACHE) >= _CACHE_MAX:
                _CACHE.clear()
            _CACHE[key] = exe
    outs = exe.run_on_gpu([], bufs, gpu)
    weak = prim.weak_type(*[a._weak for a in args], **params)
    if type(weak) is bool:
        weak = [weak] * len(outs)
    results = [adopt(o, w, gpu) for o, w in zip(outs, weak)]
    return results if prim.multiple_results else results[0]


def _param_key(v):
    # floats by their repr: -0.0 == 0.0 (and NaN != NaN) would confuse the cache
    if isinstance(v, float):
        return ("float", repr(v))
    if isinstance(v, tuple):
        return tuple(_param_key(x) for x in v)
    return v


def _holds_program(v):
    from ..core.ir import Program
    return isinstance(v, Program) or (isinstance(v, (tuple, list))
                                      and any(_holds_program(x) for x in v))


EvalTrace.register_dispatch(CudaArray, dispatch)
