"""A safe binary encoding of Python values for the object collectives (no pickle by default).

``encode(obj)`` accepts, nested to any mix:

* ``None``, ``bool``, ``int`` (any size), ``float``, ``complex``, ``str``, ``bytes``;
* ``list``, ``tuple``, ``dict`` with ``str`` / ``int`` / ``float`` / ``bool`` keys;
* NumPy arrays and scalars, and Starling Arrays, of Starling's dtypes (bool, int8..uint64,
  float16 / bfloat16 / float32 / float64, float8 / float4, complex64 / complex128).

Exactly these types (not their subclasses: a namedtuple or an OrderedDict would come back as
something else) are encoded as data; decoding builds only these types, so a payload cannot
carry code. Anything else is a TypeError naming the type and pointing to ``allow_pickle=True``,
the explicit opt-in: with it, such values travel pickled, and a receiver unpickles them only
when it passes ``allow_pickle=True`` too; without it, a payload holding a pickle is refused
(ValueError) before anything is unpickled.

Format: ``b"STOB"``, a version byte, one value. A value is a one-byte tag and its body;
lengths and counts are unsigned 64-bit little-endian, checked against the bytes that remain
(a corrupt or hostile length is a ValueError, never a huge allocation). Arrays carry their
dtype name, shape and little-endian bytes. Nesting deeper than ``MAX_DEPTH`` is refused both
ways (no RecursionError from a crafted payload).
"""
from __future__ import annotations

import math
import pickle
import struct
import sys

import numpy as np

from ..core import dtypes

MAGIC = b"STOB"
VERSION = 1
MAX_DEPTH = 200

_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")
_DTYPES = {dt.name: dt for dt in dtypes.ALL_DTYPES}
_KEY_TYPES = (str, int, float, bool)

# tags
_NONE, _TRUE, _FALSE, _INT, _FLOAT, _COMPLEX = b"N", b"T", b"F", b"i", b"f", b"c"
_STR, _BYTES, _LIST, _TUPLE, _DICT = b"s", b"b", b"l", b"t", b"d"
_NDARRAY, _NPSCALAR, _ARRAY, _PICKLE, _ERROR = b"A", b"g", b"S", b"P", b"E"


# ---- encoding -----------------------------------------------------------------------------------

def encode(obj, allow_pickle=False, op="encode") -> bytes:
    """The payload of ``obj`` (see module docstring).

    Raises:
        TypeError: a value of another type (unless ``allow_pickle``), a dict key that is not a
            string or number, an array of an unsupported dtype, or a ShardedArray with pieces
            on other processes.
        ValueError: a container holding itself, or nesting deeper than ``MAX_DEPTH``.
    """
    out = bytearray(MAGIC)
    out.append(VERSION)
    _Encoder(out, allow_pickle, op).value(obj, (), 0)
    return bytes(out)


def error_payload(message) -> bytes:
    """A payload telling the receivers that the sender could not encode its object."""
    body = str(message).encode("utf-8", "replace")
    return bytes(MAGIC) + bytes([VERSION]) + _ERROR + _U64.pack(len(body)) + body


class _Encoder:
    def __init__(self, out, allow_pickle, op):
        self.out, self.allow_pickle, self.op = out, allow_pickle, op

    def _len(self, n):
        self.out += _U64.pack(n)

    def _blob(self, tag, data):
        self.out += tag
        self._len(len(data))
        self.out += data

    def value(self, x, path, depth):
        if depth > MAX_DEPTH:
            raise ValueError(f"{self.op}: the object nests deeper than {MAX_DEPTH} levels")
        t = type(x)
        out = self.out
        if x is None:
            out += _NONE
        elif t is bool:
            out += _TRUE if x else _FALSE
        elif t is int:
            n = (x.bit_length() + 8) // 8   # two's complement with room for the sign
            self._blob(_INT, x.to_bytes(n, "little", signed=True))
        elif t is float:
            out += _FLOAT + _F64.pack(x)
        elif t is complex:
            out += _COMPLEX + _F64.pack(x.real) + _F64.pack(x.imag)
        elif t is str:
            self._blob(_STR, x.encode("utf-8", "surrogatepass"))
        elif t is bytes:
            self._blob(_BYTES, x)
        elif t is list or t is tuple:
            self._container(x, path)
            out += _LIST if t is list else _TUPLE
            self._len(len(x))
            for i, item in enumerate(x):
                self.value(item, path + (x,), depth + 1)
        elif t is dict:
            self._container(x, path)
            out += _DICT
            self._len(len(x))
            for k, v in x.items():
                if type(k) not in _KEY_TYPES:
                    raise TypeError(f"{self.op}: dict keys must be str, int, float or bool, got "
                                    f"a key of type {type(k).__name__} ({k!r:.60})")
                self.value(k, path, depth + 1)
                self.value(v, path + (x,), depth + 1)
        elif t is np.ndarray:
            out += _NDARRAY
            self._array(x)
        elif isinstance(x, np.generic) and x.dtype.name in _DTYPES:
            out += _NPSCALAR
            self._array(np.asarray(x))
        elif _is_starling_array(x):
            out += _ARRAY + (b"\x01" if x.weak_type else b"\x00")
            self._array(_local_buffer(x, self.op))
        elif self.allow_pickle:
            self._blob(_PICKLE, pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL))
        else:
            raise TypeError(
                f"{self.op}: cannot send a value of type {t.__module__}.{t.__qualname__} "
                "safely (supported: None, bool, int, float, complex, str, bytes, list, tuple, "
                "dict with str/number keys, NumPy / Starling arrays). Pass allow_pickle=True on "
                "the sender and the receivers to send it pickled, if they trust each other.")

    def _container(self, x, path):
        if any(p is x for p in path):
            raise ValueError(f"{self.op}: the object contains itself (a {type(x).__name__} "
                             "holding a reference to itself cannot be encoded)")

    def _array(self, a):
        name = a.dtype.name
        if name not in _DTYPES or a.dtype.names is not None:
            raise TypeError(f"{self.op}: arrays of dtype {a.dtype} cannot be sent; supported "
                            f"dtypes: {sorted(_DTYPES)}")
        self._blob(b"", name.encode())
        self._len(a.ndim)
        for d in a.shape:
            self._len(int(d))
        a = np.ascontiguousarray(a, dtype=_DTYPES[name])   # native byte order
        data = (a.byteswap() if sys.byteorder == "big" else a).tobytes()
        self._len(len(data))
        self.out += data


def _is_starling_array(x):
    from ..arrays.array import Array
    return isinstance(x, Array)


def _local_buffer(x, op):
    from ..collectives.sharded_array import ShardedArray
    if isinstance(x, ShardedArray) and any(s is None for s in x._shards):
        raise TypeError(f"{op}: a sharded array with pieces on other processes cannot be sent "
                        "as an object; gather it first (starling.distributed.process_allgather)")
    return np.asarray(x)


# ---- decoding -----------------------------------------------------------------------------------

def decode(payload, allow_pickle=False, op="decode"):
    """The value of a payload made by ``encode``.

    Raises:
        ValueError: not a Starling payload, a corrupt one, a pickled value without
            ``allow_pickle`` (refused, not unpickled).
        TypeError: the sender could not encode its object (an error payload).
    """
    data = memoryview(bytes(payload))
    if bytes(data[:4]) != MAGIC or len(data) < 5:
        raise ValueError(f"{op}: not a Starling object payload (it may be a raw pickle, which "
                         "is never unpickled)")
    if data[4] != VERSION:
        raise ValueError(f"{op}: payload version {data[4]}; this Starling reads version "
                         f"{VERSION}")
    d = _Decoder(data, allow_pickle, op)
    value = d.value(0)
    if d.pos != len(data):
        raise ValueError(f"{op}: corrupt payload ({len(data) - d.pos} trailing bytes)")
    return value


class _Decoder:
    def __init__(self, data, allow_pickle, op):
        self.data, self.pos, self.allow_pickle, self.op = data, 5, allow_pickle, op

    def _corrupt(self, what):
        return ValueError(f"{self.op}: corrupt payload ({what} at byte {self.pos})")

    def _take(self, n):
        if n > len(self.data) - self.pos:
            raise self._corrupt(f"{n} bytes announced, {len(self.data) - self.pos} left")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def _u64(self):
        return _U64.unpack(self._take(8))[0]

    def _blob(self):
        return bytes(self._take(self._u64()))

    def value(self, depth):
        if depth > MAX_DEPTH:
            raise ValueError(f"{self.op}: the payload nests deeper than {MAX_DEPTH} levels")
        tag = bytes(self._take(1))
        if tag == _NONE:
            return None
        if tag == _TRUE:
            return True
        if tag == _FALSE:
            return False
        if tag == _INT:
            return int.from_bytes(self._blob(), "little", signed=True)
        if tag == _FLOAT:
            return _F64.unpack(self._take(8))[0]
        if tag == _COMPLEX:
            return complex(_F64.unpack(self._take(8))[0], _F64.unpack(self._take(8))[0])
        if tag == _STR:
            try:
                return self._blob().decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                raise self._corrupt("invalid UTF-8") from None
        if tag == _BYTES:
            return self._blob()
        if tag in (_LIST, _TUPLE):
            n = self._count(1)
            items = [self.value(depth + 1) for _ in range(n)]
            return items if tag == _LIST else tuple(items)
        if tag == _DICT:
            n = self._count(2)
            out = {}
            for _ in range(n):
                k = self.value(depth + 1)
                if type(k) not in _KEY_TYPES:
                    raise self._corrupt(f"a dict key of type {type(k).__name__}")
                out[k] = self.value(depth + 1)
            return out
        if tag == _NDARRAY:
            return self._array()
        if tag == _NPSCALAR:
            a = self._array()
            if a.ndim != 0:
                raise self._corrupt("a NumPy scalar with dimensions")
            return a[()]
        if tag == _ARRAY:
            weak = bytes(self._take(1)) == b"\x01"
            from ..arrays.array import wrap
            return wrap(self._array(), weak)
        if tag == _PICKLE:
            blob = self._blob()
            if not self.allow_pickle:
                raise ValueError(f"{self.op}: the payload holds a pickled value; refusing to "
                                 "unpickle it (unpickling can run arbitrary code). Pass "
                                 "allow_pickle=True only if you trust the sender.")
            return pickle.loads(blob)
        if tag == _ERROR:
            raise TypeError(f"{self.op}: the sender could not encode its object: "
                            f"{self._blob().decode('utf-8', 'replace')}")
        raise self._corrupt(f"unknown tag {tag!r}")

    def _count(self, min_bytes_each):
        n = self._u64()
        if n * min_bytes_each > len(self.data) - self.pos:
            raise self._corrupt(f"{n} items announced")
        return n

    def _array(self):
        name = self._blob().decode("ascii", "replace")
        dt = _DTYPES.get(name)
        if dt is None:
            raise self._corrupt(f"array dtype {name!r}")
        ndim = self._u64()
        if ndim > 64:
            raise self._corrupt(f"{ndim} array dimensions")
        shape = tuple(self._u64() for _ in range(ndim))
        nbytes = self._u64()
        if nbytes != math.prod(shape) * dt.itemsize:
            raise self._corrupt(f"{nbytes} bytes for a {dt}{list(shape)} array")
        a = np.frombuffer(self._take(nbytes), dt).reshape(shape).copy()
        if sys.byteorder == "big":
            a = a.byteswap()
        if dt == np.bool_:   # a crafted byte other than 0 / 1 must not make an odd bool
            a = np.asarray(a.view(np.uint8) != 0)
        return a
