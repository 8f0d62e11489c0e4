"""``starling.save`` / ``starling.load``: pytrees of arrays in the safetensors format.

File layout (the safetensors specification, written through the ``safetensors`` package's
``serialize_file``): an 8-byte little-endian header length, a JSON header mapping each tensor
name to ``{"dtype", "shape", "data_offsets"}`` plus a ``"__metadata__"`` dict of strings, then
the raw little-endian data. ``load`` checks a file against the specification itself (every byte
range matches its tensor's dtype and shape, the ranges tile the data exactly) so that a truncated
or corrupted file is a ``SerializationError`` naming the file and the problem. Other tools (PyTorch's
``safetensors.torch.load_file``, Hugging Face) read these files directly.

* Tensor names are the leaves' dotted paths: ``{"enc": {"w": x}}`` -> ``"enc.w"``, list items
  by index (``"layers.0.bias"``); an nn.Module is stored as its ``state_dict()`` (names like
  PyTorch's, so ``model.load_state_dict(starling.load(path))`` round-trips).
* Every dtype round-trips bit-exactly, including bfloat16 (``BF16``), float8
  (``F8_E4M3`` = ``float8_e4m3fn``, ``F8_E5M2``) and the MX scale dtype (``F8_E8M0`` =
  ``float8_e8m0fnu``), which ``safetensors.numpy`` cannot handle.
* ``__metadata__["starling.tree"]`` records the container structure as JSON (dicts, lists,
  tuples, NamedTuples importable by name, None, Python scalars), so ``load`` rebuilds it;
  files without it (written by other tools) load as a flat dict by tensor name.

The pieces serve ``starling.distributed.checkpoint`` too: ``encode_tree`` / ``decode_tree``
(the JSON skeleton of a pytree), ``write_tensors`` (a dict of NumPy arrays to one file) and
``tensor_views`` (read-only memory-mapped views of a file's tensors, so that a reader touches
only the bytes it uses).
"""
from __future__ import annotations

import json
import math
import os
import sys

import numpy as np

from .. import numpy as snp
from ..arrays.array import Array
from ..core import dtypes
from ..core.trace import Tracer

__all__ = ["save", "load", "SerializationError"]

_META_KEY = "starling.tree"
_NAME_TO_CODE = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
    "float8_e8m0fnu": "F8_E8M0", "int64": "I64", "int32": "I32",
    "int16": "I16", "int8": "I8", "uint64": "U64", "uint32": "U32", "uint16": "U16",
    "uint8": "U8", "bool": "BOOL", "complex64": "C64",
}
_CODE_TO_DTYPE = {
    "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16,
    "BF16": dtypes.bfloat16, "F8_E4M3": dtypes.float8_e4m3fn, "F8_E5M2": dtypes.float8_e5m2,
    "F8_E8M0": dtypes.float8_e8m0fnu,
    "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8,
    "U64": dtypes.uint64, "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8,
    "BOOL": dtypes.bool_, "C64": dtypes.complex64,
}


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def encode_tree(tree, put, op="save"):
    """The JSON skeleton of ``tree`` (see module docstring); each array leaf is handed to
    ``put(name, leaf)`` under its unique dotted name.

    Raises:
        TypeError: unsupported leaves, traced values. ValueError: two leaves with one name.
    """
    names = set()

    def put_once(name, leaf):
        if name in names:
            raise ValueError(f"{op}: two leaves map to the tensor name {name!r}; rename keys "
                             "(dotted names must be unique)")
        names.add(name)
        put(name, leaf)
    return _encode(tree, "", put_once, op)


def _encode(node, prefix, put, op="save"):
    from .module import Module
    if isinstance(node, Module):
        sd = node.state_dict()
        return {"t": "module", "class": type(node).__qualname__,
                "c": {k: _encode(v, _join(prefix, k), put, op) for k, v in sd.items()}}
    if isinstance(node, (Array, Tracer, np.ndarray, np.generic)):
        if isinstance(node, Tracer):
            raise TypeError(f"{op}: {prefix or 'the value'} is a traced value; save concrete "
                            "arrays outside transformations")
        name = prefix or "array"
        put(name, node)
        return {"t": "array", "name": name}
    if isinstance(node, dict):
        keys = list(node.keys())
        for k in keys:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"save: dict keys must be str or int, got {k!r}")
        return {"t": "dict", "k": [[k, isinstance(k, int)] for k in keys],
                "c": [_encode(node[k], _join(prefix, str(k)), put, op) for k in keys]}
    if _is_namedtuple(node):
        cls = type(node)
        return {"t": "namedtuple", "class": f"{cls.__module__}:{cls.__qualname__}",
                "c": [_encode(v, _join(prefix, f), put, op) for f, v in zip(cls._fields, node)]}
    if isinstance(node, (list, tuple)):
        return {"t": "list" if isinstance(node, list) else "tuple",
                "c": [_encode(v, _join(prefix, str(i)), put, op) for i, v in enumerate(node)]}
    if node is None or isinstance(node, (bool, int, float, str)):
        return {"t": "scalar", "v": node}
    raise TypeError(f"{op}: cannot save a {type(node).__name__} at {prefix or 'the root'} "
                    "(arrays, dicts, lists, tuples, NamedTuples, modules, None and Python "
                    "scalars are supported)")


def _join(prefix, k):
    return f"{prefix}.{k}" if prefix else k


def save(path, tree) -> None:
    """Writes a pytree of arrays (or an nn.Module's state dict) to ``path`` (safetensors).

    Args:
        path: file name (str or os.PathLike); overwritten if it exists.
        tree: arrays (Starling or NumPy) nested in dicts / lists / tuples / NamedTuples /
            modules, with None and Python scalars allowed as leaves.
    Raises:
        TypeError: unsupported leaves or dtypes (float4), traced values.
        ValueError: two leaves whose dotted names coincide.
        OSError: the file cannot be written (e.g. its directory does not exist).
    """
    tensors = {}
    skeleton = encode_tree(tree, lambda name, leaf: tensors.__setitem__(name, np.asarray(leaf)))
    write_tensors(path, tensors, {_META_KEY: json.dumps(skeleton), "format": "np"})


def safetensors_code(dtype, what="save"):
    """The safetensors dtype code of a NumPy dtype ("F32", "BF16", ...).

    Raises:
        TypeError: the dtype has none (float4 and other types safetensors lacks).
    """
    dname = np.dtype(dtype).name
    if dname not in _NAME_TO_CODE:
        raise TypeError(f"{what}: dtype {dname} has no safetensors code (supported: "
                        f"{', '.join(_NAME_TO_CODE)})")
    return _NAME_TO_CODE[dname]


def write_tensors(path, tensors, metadata=None) -> None:
    """Writes ``{name: NumPy array}`` to the safetensors file ``path`` (little-endian, C order),
    with the string dict ``metadata`` in the header.

    Raises:
        TypeError: a dtype safetensors cannot store.
    """
    import safetensors
    specs, keep = {}, []
    for name, a in tensors.items():
        a = np.require(a, requirements="C")
        safetensors_code(a.dtype, f"save ({name!r})")
        if a.dtype.byteorder == ">":
            a = a.byteswap().view(a.dtype.newbyteorder("<"))
        keep.append(a)
        dname = np.dtype(a.dtype).name
        if hasattr(safetensors, "TensorSpec"):
            specs[name] = safetensors.TensorSpec(dtype=dname, shape=list(a.shape),
                                                 data_ptr=a.ctypes.data, data_len=a.nbytes)
        else:  # safetensors < 0.6
            specs[name] = {"dtype": dname, "shape": list(a.shape), "data": a.tobytes()}
    try:
        safetensors.serialize_file(specs, os.fspath(path), metadata=dict(metadata or {}))
    except Exception as e:  # noqa: BLE001  (safetensors reports I/O failures as SafetensorError)
        if isinstance(e, OSError):
            raise
        raise OSError(f"save: cannot write {os.fspath(path)}: {e}") from None
    finally:
        del keep


def tensor_views(path) -> dict:
    """``{name: read-only NumPy array}`` of the safetensors file ``path``, memory-mapped (data
    is read from disk when used); only the header is read now, checked as ``load`` checks it.

    Raises:
        SerializationError: (a ValueError) not a valid safetensors file (see ``load``).
        OSError: the file cannot be read.
    """
    path = os.fspath(path)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else 0
        raw = head + f.read(min(n, _MAX_HEADER))
    _, tensors, start = _parse(raw, path, size)
    data = np.memmap(path, np.uint8, "r", offset=start) if size > start else \
        np.empty(0, np.uint8)
    return {name: data[lo:hi].view(np.dtype(dt).newbyteorder("<")).reshape(shape)
            for name, dt, shape, lo, hi in tensors}


def decode_tree(skeleton, arrays):
    """The pytree of ``encode_tree``'s ``skeleton`` with ``arrays[name]`` at each array leaf."""
    return _decode(skeleton, arrays)


def _decode(node, arrays):
    t = node["t"]
    if t == "array":
        return arrays[node["name"]]
    if t == "module":
        import collections
        return collections.OrderedDict((k, _decode(v, arrays)) for k, v in node["c"].items())
    if t == "dict":
        return {(int(k) if is_int else k): _decode(v, arrays)
                for (k, is_int), v in zip(node["k"], node["c"])}
    if t == "list":
        return [_decode(v, arrays) for v in node["c"]]
    if t == "tuple":
        return tuple(_decode(v, arrays) for v in node["c"])
    if t == "namedtuple":
        items = [_decode(v, arrays) for v in node["c"]]
        cls = _safe_namedtuple_class(str(node.get("class", "")))
        return tuple(items) if cls is None else cls(*items)
    if t == "scalar":
        return node["v"]
    raise ValueError(f"unknown node type {t!r}")


def _safe_namedtuple_class(name):
    """The NamedTuple class ``module:qualname`` names, only if it is a NamedTuple defined in an
    already-imported ``starling`` module; None otherwise (the tuple is then rebuilt as a plain
    tuple). A weights file is data: loading it must never import modules or call anything
    else that the file names."""
    mod, _, qual = name.partition(":")
    if not (mod == "starling" or mod.startswith("starling.")):
        return None
    obj = sys.modules.get(mod)
    for part in qual.split("."):
        if obj is None or part.startswith("_"):
            return None
        obj = getattr(obj, part, None)
    if isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields"):
        return obj
    return None


class SerializationError(ValueError):
    """``starling.load`` was given a file that is not a valid safetensors file: truncated,
    corrupted, or using a dtype Starling does not read. The message names the file and what is
    wrong (e.g. "the data section has 96 bytes but tensor 'w' ends at byte 128")."""


_MAX_HEADER = 100_000_000   # the safetensors package's own limit on the JSON header


def _parse(raw, path, size=None):
    """(header, [(name, dtype, shape, begin, end)], start of the data section) of the bytes
    ``raw`` of a safetensors file, checked against the specification: every tensor's byte
    range matches its dtype and shape, and the ranges tile the data section exactly.
    ``size``: the file's size when ``raw`` holds only its beginning (at least the header)."""
    size = len(raw) if size is None else size

    def bad(problem):
        return SerializationError(f"load: {path} is not a valid safetensors file: {problem}")

    if size < 8:
        raise bad(f"it has {size} bytes, fewer than the 8-byte header length (truncated?)")
    n = int.from_bytes(raw[:8], "little")
    if n > size - 8 or n > len(raw) - 8 or n > _MAX_HEADER:
        raise bad(f"truncated header: its length field says {n} bytes but {size - 8} "
                  "bytes follow")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except UnicodeDecodeError as e:
        raise bad(f"the header is not UTF-8 text ({e.reason} at byte {8 + e.start})") from None
    except json.JSONDecodeError as e:
        raise bad(f"the header is not valid JSON ({e.msg} at line {e.lineno} column "
                  f"{e.colno})") from None
    except RecursionError:
        raise bad("the header nests too deeply") from None
    if not isinstance(header, dict):
        raise bad(f"the header is a JSON {type(header).__name__}, not an object mapping tensor "
                  "names to {dtype, shape, data_offsets}")
    meta = header.get("__metadata__")
    if meta is not None and not (isinstance(meta, dict)
                                 and all(isinstance(v, str) for v in meta.values())):
        raise bad("__metadata__ must map strings to strings")
    tensors = [_tensor_entry(name, info, bad) for name, info in header.items()
               if name != "__metadata__"]
    data_len = size - 8 - n
    last = max(tensors, key=lambda t: t[4], default=None)
    if last is not None and last[4] > data_len:
        raise bad(f"the data section has {data_len} bytes but tensor {last[0]!r} ends at byte "
                  f"{last[4]} (truncated file?)")
    pos, prev = 0, None
    for t in sorted(tensors, key=lambda t: (t[3], t[4])):
        if t[3] < pos:
            raise bad(f"tensors {prev[0]!r} (bytes {prev[3]}..{prev[4]}) and {t[0]!r} (bytes "
                      f"{t[3]}..{t[4]}) overlap")
        if t[3] > pos:
            raise bad(f"bytes {pos}..{t[3]} of the data section belong to no tensor")
        pos, prev = t[4], t
    if pos != data_len:
        raise bad(f"{data_len - pos} bytes after the last tensor's data belong to no tensor")
    return header, tensors, 8 + n


def _tensor_entry(name, info, bad):
    """(name, dtype, shape, begin, end) of one header entry; raises ``bad(problem)``."""
    if not isinstance(info, dict):
        raise bad(f"the entry of tensor {name!r} is not an object")
    code, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(code, str):
        raise bad(f"tensor {name!r} has no dtype string (got {code!r})")
    dt = _CODE_TO_DTYPE.get(code)
    if dt is None:
        raise bad(f"tensor {name!r} has dtype {code!r}, which Starling does not read "
                  f"(supported: {', '.join(_CODE_TO_DTYPE)})")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise bad(f"tensor {name!r} has shape {shape!r}; expected a list of non-negative ints")
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(type(o) is int for o in offsets) and 0 <= offsets[0] <= offsets[1]):
        raise bad(f"tensor {name!r} has data_offsets {offsets!r}; expected [begin, end] with "
                  "0 <= begin <= end")
    size = math.prod(shape) * np.dtype(dt).itemsize
    if offsets[1] - offsets[0] != size:
        raise bad(f"tensor {name!r} ({code}, shape {shape}) needs {size} bytes but its "
                  f"data_offsets {offsets} span {offsets[1] - offsets[0]}")
    return name, dt, tuple(shape), offsets[0], offsets[1]


def load(path):
    """Reads a file written by ``save`` (or any safetensors file) into Starling Arrays.

    Returns:
        The saved pytree (an nn.Module comes back as its state dict, an OrderedDict by
        dotted name); a file without Starling's tree metadata gives ``{name: Array}`` in the
        order of the data.
    Raises:
        SerializationError: (a ValueError) the file is not a valid safetensors file:
            truncated (header or data), a header that is not JSON or not of the format,
            byte ranges that overlap, leave holes or do not match a tensor's dtype and shape,
            a dtype Starling does not read, or malformed Starling tree metadata. The message
            names the file and the problem.
        OSError: the file cannot be read (e.g. FileNotFoundError).
    """
    with open(os.fspath(path), "rb") as f:
        raw = f.read()
    header, tensors, start = _parse(raw, path)
    arrays = {}
    for name, dt, shape, begin, end in tensors:
        count = (end - begin) // np.dtype(dt).itemsize
        buf = np.frombuffer(raw, dtype=np.dtype(dt).newbyteorder("<"), count=count,
                            offset=start + begin)
        arrays[name] = snp.asarray(buf.astype(dt).reshape(shape))
    meta = header.get("__metadata__") or {}
    if _META_KEY in meta:
        try:
            return _decode(json.loads(meta[_META_KEY]), arrays)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError,
                RecursionError) as e:
            problem = f"unknown tensor {e}" if isinstance(e, KeyError) else str(e) or \
                type(e).__name__
            raise SerializationError(f"load: {path}: the {_META_KEY!r} metadata is malformed "
                                     f"({problem}); starling.load reads the tensors of files "
                                     "without it as a flat dict") from None
    return {name: arrays[name] for name, *_ in sorted(tensors, key=lambda t: t[3])}
