"""What the members of an MPI operation must agree on, worked out once per distinct call.

An eager collective is called again and again with the same op, shape, dtype and parameters
(a training loop's gradient all-reduce). What depends on that signature alone, the flight
recorder's parameters, the arrival board's fingerprint (src/distributed/arrival.py) and the
agreement check's description and 56-bit hash (src/distributed/agreement.py), is computed the
first time and looked up afterwards, so that a collective's bookkeeping costs a dictionary
lookup instead of hashing and formatting on every call (at 1 MiB on two ranks, the raw MPI
call takes ~190 us; every 10 us of bookkeeping is 5% of the bandwidth).
"""
from __future__ import annotations

import copy
import hashlib

import numpy as np

from ..collectives.runtime.flight_recorder import dtype_name
from . import arrival


class CallSpec:
    """One distinct call: ``op``, ``shape`` (a tuple), ``dtype``, ``params`` (a dict: the op's
    arguments, plus ``mode`` "blocking" / "nonblocking" where the call has both forms; shared by
    every record of the call, never changed), ``fingerprint`` (int64: op, dtype, params and the
    shape outside ``params["free_dims"]``, the dims the members may differ in), ``description``
    (``op(args) of dtype[shape]``, the mode left out) and ``check`` (int64 array ``[h, -h]`` of
    the description's 56-bit hash ``h``: the agreement check all-reduces it with MAX;
    ``check_bytes`` its bytes)."""

    __slots__ = ("op", "shape", "dtype", "params", "fingerprint", "description", "check",
                 "check_bytes")

    def __init__(self, op, shape, dtype, params):
        self.op, self.shape, self.dtype, self.params = op, shape, dtype, params
        items = sorted(params.items())
        free = set(params.get("free_dims", ()))
        masked = [None if i in free else int(s) for i, s in enumerate(shape)]
        self.fingerprint = arrival.stable_hash(repr((op, masked, dtype_name(dtype), items)))
        args = ", ".join(f"{k}={v}" for k, v in items if k != "mode")
        self.description = f"{op}({args}) of {np.dtype(dtype).name}{list(shape)}"
        h = int.from_bytes(hashlib.blake2b(self.description.encode(), digest_size=7).digest(),
                           "little")
        self.check = np.array([h, -h], np.int64)
        self.check.flags.writeable = False
        self.check_bytes = self.check.tobytes()


_SPECS: dict = {}
_LIMIT = 4096   # programs repeat a few signatures; a runaway variety must not grow memory


def call_spec(op, shape, dtype, params=None, mode=None) -> CallSpec:
    """The CallSpec of ``op`` on an input of ``shape`` / ``dtype`` with ``params`` (a dict,
    not changed) and ``mode`` (added to the params when not None), cached."""
    shape = tuple(shape)
    try:
        key = (op, shape, dtype, tuple(params.items()) if params else (), mode)
        spec = _SPECS.get(key)
    except TypeError:   # an unhashable parameter value (mesh axes, a permutation as lists)
        key = (op, shape, dtype, repr(params), mode)
        spec = _SPECS.get(key)
    if spec is None:
        p = copy.deepcopy(params) if params else {}   # records share it: none may change it
        if mode is not None:
            p["mode"] = mode
        spec = CallSpec(op, shape, dtype, p)
        if len(_SPECS) >= _LIMIT:
            _SPECS.clear()
        _SPECS[key] = spec
    return spec
