"""Array: the immutable value users hold. An aval (shape, dtype, weak_type) plus a device buffer.

On CPU the buffer is a NumPy array (or NumPy scalar) that Starling never mutates and never hands
out writable: ``np.asarray(x)`` and ``__dlpack__`` give read-only views; ``asarray`` of NumPy
input copies. Operators and array methods are installed by src/arrays/methods.py, on Array and
on Tracer alike, so traced code reads like eager code.
"""
from __future__ import annotations

import numpy as np

from ..core import casting, dtypes
from ..core.avals import ShapedArray
from ..core.trace import EvalTrace
from . import device as _device


class Array:
    """An immutable n-d array on a Device.

    Attributes:
        shape: tuple of ints, the dims ``(d0, ..., dn-1)``.
        dtype: np.dtype (bool, int8..uint64, float16/bfloat16/float32/float64, complex, float8/4).
        weak_type: True for values made from Python scalars (they adopt the other operand's dtype).
        device: the Device owning the buffer.

    Item assignment raises TypeError: use the functional form ``x.at[idx].set(v)``.
    """

    __slots__ = ("_buf", "_weak", "_device")
    __array_priority__ = 1000

    # Construction goes through ``_wrap`` (no copy, no checks) or ``starling.numpy.asarray``.
    def __init__(self, *args, **kwargs):
        raise TypeError("Array cannot be constructed directly; use starling.numpy.asarray(...)")

    @property
    def aval(self) -> ShapedArray:
        buf = self._buf
        return ShapedArray(buf.shape, buf.dtype, self._weak)

    @property
    def shape(self) -> tuple:
        return self._buf.shape

    @property
    def dtype(self) -> np.dtype:
        return self._buf.dtype

    @property
    def weak_type(self) -> bool:
        return self._weak

    @property
    def ndim(self) -> int:
        return self._buf.ndim

    @property
    def size(self) -> int:
        return self._buf.size

    @property
    def nbytes(self) -> int:
        return self._buf.nbytes

    @property
    def itemsize(self) -> int:
        return self._buf.dtype.itemsize

    @property
    def device(self):
        return self._device

    def __array_namespace__(self, /, *, api_version=None):
        """The ``starling.numpy`` module (Array API). ``api_version`` may be None, "2024.12" or an
        earlier version (2021.12, 2022.12, 2023.12).

        Raises:
            ValueError: for any other api_version.
        """
        if api_version not in (None, "2024.12", "2023.12", "2022.12", "2021.12"):
            raise ValueError(f"__array_namespace__: api_version {api_version!r} is not supported; "
                             "Starling implements '2024.12'")
        from . import numpy as snp
        return snp

    def to_device(self, device, /, *, stream=None):
        """This array on ``device`` (a Device of this process or "cpu"); a no-op when it is
        already there. Raises ValueError for devices of other processes, TypeError for bad input."""
        if stream is not None:
            raise ValueError("to_device: streams are not supported on CPU devices; pass stream=None")
        dev = _device.check_device(device, "to_device")
        if dev == self._device:
            return self
        if dev.platform == "cuda":
            from .cuda import put
            return put(self._buf, self._weak, dev)
        out = wrap(self._buf, self._weak)
        out._device = dev
        return out

    def devices(self) -> set:
        """The set of devices holding this array's data (one, for an unsharded array)."""
        return {self._device}

    @property
    def sharding(self):
        """Where the data lives: ``SingleDeviceSharding(device)`` for an unsharded array (sharded
        arrays have a ``NamedSharding``)."""
        return _device.SingleDeviceSharding(self._device)

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def __len__(self):
        if self._buf.ndim == 0:
            raise TypeError("len() of a 0-d array")
        return self._buf.shape[0]

    def __setitem__(self, idx, value):
        raise TypeError(
            "Starling arrays are immutable: item assignment is not supported. "
            "Use the functional update x = x.at[idx].set(value) (also .add, .multiply, .min, .max).")

    def __delitem__(self, idx):
        raise TypeError("Starling arrays are immutable: build a new array instead, e.g. with a "
                        "boolean mask x[mask] or x.at[idx].set(...)")

    def __hash__(self):
        raise TypeError("unhashable type: 'Array' (arrays are not hashable; use .item() or a tuple)")

    # ---- conversion to Python / NumPy ---------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        buf = np.asarray(self._buf)
        if dtype is not None and np.dtype(dtype) != buf.dtype:
            return casting.astype(buf, dtype)   # Starling's conversion rules
        if copy:
            return buf.copy()
        return _read_only_view(buf)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Exports the buffer through DLPack, read-only (DLPack >= 1.0 carries the flag).

        Raises:
            BufferError: ``dl_device`` names a device other than this CPU.
        """
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"__dlpack__: cannot export a CPU array to device {dl_device}; "
                              "only (1, 0) (kDLCPU) is supported")
        view = self.__array__()
        if copy:
            view = np.array(view)
        kwargs = {}
        if max_version is not None:
            kwargs["max_version"] = max_version
        try:
            return view.__dlpack__(stream=stream, **kwargs)
        except BufferError:
            # Consumers limited to DLPack < 1.0 cannot see a read-only flag: hand them a copy so
            # that no one can write into Starling's buffer.
            return np.array(view).__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return (1, 0)  # (kDLCPU, device id 0): the host memory of this process

    def item(self, *args):
        """The value as a Python scalar (``x.item()`` needs size 1; ``x.item(i)`` indexes flat)."""
        buf = np.asarray(self._buf)
        if not args and buf.size != 1:
            raise ValueError(f"item: can only convert an array of size 1 to a Python scalar, "
                             f"got shape {buf.shape}")
        return buf.item(*args)

    def tolist(self):
        """Nested Python lists of Python scalars (NumPy's ``tolist``)."""
        return np.asarray(self._buf).tolist()

    def to_concrete(self):
        return self

    def block_until_ready(self):
        """Returns self once the value is computed (CPU execution is synchronous)."""
        return self

    def __bool__(self):
        if self._buf.size != 1:
            raise ValueError(f"the truth value of an array with shape {self._buf.shape} is ambiguous; "
                             "use .any() or .all()")
        return bool(self._buf)

    def __int__(self):
        return int(self._scalar("int"))

    def __float__(self):
        return float(self._scalar("float"))

    def __complex__(self):
        v = self._scalar("complex")
        if isinstance(v, float) and v != v:
            return complex(v, v)  # Array API: a real NaN converts to NaN + NaN j
        return complex(v)

    def __index__(self):
        if not dtypes.is_integer(self.dtype) and not dtypes.is_bool(self.dtype):
            raise TypeError(f"only integer arrays can be used as an index, got dtype {self.dtype}")
        return int(self._scalar("index"))

    def _scalar(self, what):
        if self._buf.size != 1 or self._buf.ndim > 0 and what == "index":
            raise TypeError(f"only size-1 arrays can be converted to Python {what}, "
                            f"got shape {self._buf.shape}")
        return np.asarray(self._buf).reshape(()).item()

    def __format__(self, spec):
        if self._buf.ndim == 0:
            return format(self.item(), spec)
        return format(str(self), spec)

    def __repr__(self):
        buf = np.asarray(self._buf)
        body = np.array2string(buf, separator=", ", prefix="Array(")
        extra = ""
        if not _dtype_implied_by_repr(buf):
            extra = f", dtype={buf.dtype.name}"
        if self._weak:
            extra += ", weak_type=True"
        return f"Array({body}{extra})"

    def __str__(self):
        return str(np.asarray(self._buf))

    def __reduce__(self):
        # Pickles as NumPy data; unpickling goes through asarray (a fresh, owned buffer).
        return (_rebuild, (np.asarray(self._buf), self._weak))


def _read_only_view(buf):
    """A view of ``buf`` whose memory is reached through a read-only memoryview, so that not
    even ``setflags(write=True)`` can make it writable. Non-contiguous buffers are copied."""
    if buf.dtype.itemsize == 0:  # float0 (tangents of integers): no data to protect
        view = buf.view()
        view.flags.writeable = False
        return view
    if not buf.flags.c_contiguous:
        out = np.ascontiguousarray(buf)
        out.flags.writeable = False
        return out
    raw = memoryview(buf.reshape(-1).view(np.uint8)).toreadonly()
    return np.frombuffer(raw, dtype=buf.dtype).reshape(buf.shape)


def _dtype_implied_by_repr(buf) -> bool:
    # NumPy's repr omits the dtype for float64, int64 and bool; ours names every other dtype too,
    # but omits the defaults users see most (float32 / int64 / bool) when the data makes them clear.
    if buf.dtype in (dtypes.float32, dtypes.int64, dtypes.bool_):
        return buf.size > 0
    return False


def _rebuild(buf, weak):
    return wrap(np.array(buf), weak)


_new = object.__new__
_DEFAULT_DEVICE = _device.DEFAULT_DEVICE


def wrap(buf, weak=False):
    """Wraps a NumPy buffer that no one else holds into an Array (no copy, no checks)."""
    a = _new(Array)
    a._buf = buf
    a._weak = weak
    a._device = _DEFAULT_DEVICE
    return a


EvalTrace.array_type = Array
EvalTrace.wrap = staticmethod(wrap)
