"""Signatures (Array API 2023.12, "Function and method signatures").

The table lists, for every function and method of the standard, its parameters in the standard's
order: names before ``/`` are positional-only, names after ``*`` keyword-only, ``name=`` marks an
optional parameter. Each entry is checked with ``inspect.Signature.bind`` (no call is made):

- every call the standard allows must bind: all positional parameters passed by position (each
  landing on the parameter at that position), positional-or-keyword and keyword-only parameters
  passed by keyword, and only the required ones;
- positional-or-keyword parameters keep the standard's name and position.

Starling may accept more (NumPy-style extras, and keyword-only parameters of the standard that
NumPy takes by position, such as ``sum(x, axis)``): a superset of the standard's call forms is
conforming code's view of a conforming library.
"""
from __future__ import annotations

import inspect

import pytest

import starling.numpy as xp

SIGNATURES = {
    # main namespace
    "arange": "start, /, stop=, step=, *, dtype=, device=",
    "asarray": "obj, /, *, dtype=, device=, copy=",
    "empty": "shape, *, dtype=, device=",
    "empty_like": "x, /, *, dtype=, device=",
    "eye": "n_rows, n_cols=, /, *, k=, dtype=, device=",
    "from_dlpack": "x, /, *, device=, copy=",
    "full": "shape, fill_value, *, dtype=, device=",
    "full_like": "x, /, fill_value, *, dtype=, device=",
    "linspace": "start, stop, /, num, *, dtype=, device=, endpoint=",
    "meshgrid": "*arrays, indexing=",
    "ones": "shape, *, dtype=, device=",
    "ones_like": "x, /, *, dtype=, device=",
    "tril": "x, /, *, k=",
    "triu": "x, /, *, k=",
    "zeros": "shape, *, dtype=, device=",
    "zeros_like": "x, /, *, dtype=, device=",
    "astype": "x, dtype, /, *, copy=, device=",
    "can_cast": "from_, to, /",
    "finfo": "type, /",
    "iinfo": "type, /",
    "isdtype": "dtype, kind",
    "result_type": "*arrays_and_dtypes",
    "abs": "x, /",
    "acos": "x, /",
    "acosh": "x, /",
    "add": "x1, x2, /",
    "asin": "x, /",
    "asinh": "x, /",
    "atan": "x, /",
    "atan2": "x1, x2, /",
    "atanh": "x, /",
    "bitwise_and": "x1, x2, /",
    "bitwise_left_shift": "x1, x2, /",
    "bitwise_invert": "x, /",
    "bitwise_or": "x1, x2, /",
    "bitwise_right_shift": "x1, x2, /",
    "bitwise_xor": "x1, x2, /",
    "ceil": "x, /",
    "clip": "x, /, min=, max=",
    "conj": "x, /",
    "copysign": "x1, x2, /",
    "cos": "x, /",
    "cosh": "x, /",
    "divide": "x1, x2, /",
    "equal": "x1, x2, /",
    "exp": "x, /",
    "expm1": "x, /",
    "floor": "x, /",
    "floor_divide": "x1, x2, /",
    "greater": "x1, x2, /",
    "greater_equal": "x1, x2, /",
    "hypot": "x1, x2, /",
    "imag": "x, /",
    "isfinite": "x, /",
    "isinf": "x, /",
    "isnan": "x, /",
    "less": "x1, x2, /",
    "less_equal": "x1, x2, /",
    "log": "x, /",
    "log1p": "x, /",
    "log2": "x, /",
    "log10": "x, /",
    "logaddexp": "x1, x2, /",
    "logical_and": "x1, x2, /",
    "logical_not": "x, /",
    "logical_or": "x1, x2, /",
    "logical_xor": "x1, x2, /",
    "maximum": "x1, x2, /",
    "minimum": "x1, x2, /",
    "multiply": "x1, x2, /",
    "negative": "x, /",
    "not_equal": "x1, x2, /",
    "positive": "x, /",
    "pow": "x1, x2, /",
    "real": "x, /",
    "remainder": "x1, x2, /",
    "round": "x, /",
    "sign": "x, /",
    "signbit": "x, /",
    "sin": "x, /",
    "sinh": "x, /",
    "square": "x, /",
    "sqrt": "x, /",
    "subtract": "x1, x2, /",
    "tan": "x, /",
    "tanh": "x, /",
    "trunc": "x, /",
    "take": "x, indices, /, *, axis=",
    "matmul": "x1, x2, /",
    "matrix_transpose": "x, /",
    "tensordot": "x1, x2, /, *, axes=",
    "vecdot": "x1, x2, /, *, axis=",
    "broadcast_arrays": "*arrays",
    "broadcast_to": "x, /, shape",
    "concat": "arrays, /, *, axis=",
    "expand_dims": "x, /, axis",
    "flip": "x, /, *, axis=",
    "moveaxis": "x, source, destination, /",
    "permute_dims": "x, /, axes",
    "repeat": "x, repeats, /, *, axis=",
    "reshape": "x, /, shape, *, copy=",
    "roll": "x, /, shift, *, axis=",
    "squeeze": "x, /, axis",
    "stack": "arrays, /, *, axis=",
    "tile": "x, repetitions, /",
    "unstack": "x, /, *, axis=",
    "argmax": "x, /, *, axis=, keepdims=",
    "argmin": "x, /, *, axis=, keepdims=",
    "nonzero": "x, /",
    "searchsorted": "x1, x2, /, *, side=, sorter=",
    "where": "condition, x1, x2, /",
    "unique_all": "x, /",
    "unique_counts": "x, /",
    "unique_inverse": "x, /",
    "unique_values": "x, /",
    "argsort": "x, /, *, axis=, descending=, stable=",
    "sort": "x, /, *, axis=, descending=, stable=",
    "cumulative_sum": "x, /, *, axis=, dtype=, include_initial=",
    "max": "x, /, *, axis=, keepdims=",
    "mean": "x, /, *, axis=, keepdims=",
    "min": "x, /, *, axis=, keepdims=",
    "prod": "x, /, *, axis=, dtype=, keepdims=",
    "std": "x, /, *, axis=, correction=, keepdims=",
    "sum": "x, /, *, axis=, dtype=, keepdims=",
    "var": "x, /, *, axis=, correction=, keepdims=",
    "all": "x, /, *, axis=, keepdims=",
    "any": "x, /, *, axis=, keepdims=",
    # linalg
    "linalg.cholesky": "x, /, *, upper=",
    "linalg.cross": "x1, x2, /, *, axis=",
    "linalg.det": "x, /",
    "linalg.diagonal": "x, /, *, offset=",
    "linalg.eigh": "x, /",
    "linalg.eigvalsh": "x, /",
    "linalg.inv": "x, /",
    "linalg.matmul": "x1, x2, /",
    "linalg.matrix_norm": "x, /, *, keepdims=, ord=",
    "linalg.matrix_power": "x, n, /",
    "linalg.matrix_rank": "x, /, *, rtol=",
    "linalg.matrix_transpose": "x, /",
    "linalg.outer": "x1, x2, /",
    "linalg.pinv": "x, /, *, rtol=",
    "linalg.qr": "x, /, *, mode=",
    "linalg.slogdet": "x, /",
    "linalg.solve": "x1, x2, /",
    "linalg.svd": "x, /, *, full_matrices=",
    "linalg.svdvals": "x, /",
    "linalg.tensordot": "x1, x2, /, *, axes=",
    "linalg.trace": "x, /, *, offset=, dtype=",
    "linalg.vecdot": "x1, x2, /, *, axis=",
    "linalg.vector_norm": "x, /, *, axis=, keepdims=, ord=",
    # fft
    "fft.fft": "x, /, *, n=, axis=, norm=",
    "fft.ifft": "x, /, *, n=, axis=, norm=",
    "fft.fftn": "x, /, *, s=, axes=, norm=",
    "fft.ifftn": "x, /, *, s=, axes=, norm=",
    "fft.rfft": "x, /, *, n=, axis=, norm=",
    "fft.irfft": "x, /, *, n=, axis=, norm=",
    "fft.rfftn": "x, /, *, s=, axes=, norm=",
    "fft.irfftn": "x, /, *, s=, axes=, norm=",
    "fft.hfft": "x, /, *, n=, axis=, norm=",
    "fft.ihfft": "x, /, *, n=, axis=, norm=",
    "fft.fftfreq": "n, /, *, d=, device=",
    "fft.rfftfreq": "n, /, *, d=, device=",
    "fft.fftshift": "x, /, *, axes=",
    "fft.ifftshift": "x, /, *, axes=",
    # Array
    "Array.__abs__": "",
    "Array.__add__": "other, /",
    "Array.__and__": "other, /",
    "Array.__array_namespace__": "*, api_version=",
    "Array.__bool__": "",
    "Array.__complex__": "",
    "Array.__dlpack__": "*, stream=, max_version=, dl_device=, copy=",
    "Array.__dlpack_device__": "",
    "Array.__eq__": "other, /",
    "Array.__float__": "",
    "Array.__floordiv__": "other, /",
    "Array.__ge__": "other, /",
    "Array.__getitem__": "key, /",
    "Array.__gt__": "other, /",
    "Array.__index__": "",
    "Array.__int__": "",
    "Array.__invert__": "",
    "Array.__le__": "other, /",
    "Array.__lshift__": "other, /",
    "Array.__lt__": "other, /",
    "Array.__matmul__": "other, /",
    "Array.__mod__": "other, /",
    "Array.__mul__": "other, /",
    "Array.__ne__": "other, /",
    "Array.__neg__": "",
    "Array.__or__": "other, /",
    "Array.__pos__": "",
    "Array.__pow__": "other, /",
    "Array.__rshift__": "other, /",
    "Array.__setitem__": "key, value, /",
    "Array.__sub__": "other, /",
    "Array.__truediv__": "other, /",
    "Array.__xor__": "other, /",
    "Array.to_device": "device, /, *, stream=",
    # info
    "info.capabilities": "",
    "info.default_device": "",
    "info.default_dtypes": "*, device=",
    "info.dtypes": "*, device=, kind=",
    "info.devices": "",
}


def _parse(spec):
    """(positional [(name, required)], keyword [(name, required)], vararg name or None)."""
    positional, keyword, vararg = [], [], None
    kwonly = False
    posonly_names = set()
    seen = []
    for tok in (t.strip() for t in spec.split(",") if t.strip()):
        if tok == "/":
            posonly_names = {n for n, _ in seen}
            continue
        if tok == "*":
            kwonly = True
            continue
        if tok.startswith("*"):
            vararg, kwonly = tok[1:], True
            continue
        name, required = tok.rstrip("="), not tok.endswith("=")
        (keyword if kwonly else positional).append((name, required))
        seen.append((name, required))
    return positional, keyword, vararg, posonly_names


def _target(qualname):
    ns, _, name = qualname.rpartition(".")
    if ns == "linalg":
        return getattr(xp.linalg, name, None)
    if ns == "fft":
        return getattr(xp.fft, name, None)
    if ns == "info":
        return getattr(xp.__array_namespace_info__(), name, None)
    if ns == "Array":
        return getattr(xp.asarray([1.0]), name, None)
    return getattr(xp, name, None)


@pytest.mark.parametrize("qualname", sorted(SIGNATURES))
def test_signature(qualname):
    fn = _target(qualname)
    assert fn is not None, f"{qualname} is missing"
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    positional, keyword, vararg, posonly = _parse(SIGNATURES[qualname])
    P = inspect.Parameter
    v = object()

    # 1. everything the standard passes by position, by position
    args = [v] * len(positional)
    extra = [v, v] if vararg else []
    try:
        bound = sig.bind(*args, *extra)
    except TypeError as e:
        pytest.fail(f"{qualname}{sig}: cannot pass {len(args) + len(extra)} positional "
                    f"argument(s): {e}")
    for i, (name, _) in enumerate(positional):
        p = params[i] if i < len(params) else None
        assert p is not None and p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD,
                                            P.VAR_POSITIONAL), \
            f"{qualname}{sig}: positional parameter {i} ({name}) is not positional"
        if name not in posonly:  # positional-or-keyword: same name at the same position
            assert p.name == name and p.kind == P.POSITIONAL_OR_KEYWORD, \
                f"{qualname}{sig}: parameter {i} should be positional-or-keyword {name!r}"
    del bound

    # 2. positional-only by position, the rest by keyword
    n_posonly = len(posonly)
    kwargs = {name: v for name, _ in positional[n_posonly:]}
    kwargs.update({name: v for name, _ in keyword})
    try:
        sig.bind(*[v] * n_posonly, *extra, **kwargs)
    except TypeError as e:
        pytest.fail(f"{qualname}{sig}: cannot pass {sorted(kwargs)} by keyword: {e}")

    # 3. only the required parameters
    req_pos = [v for name, req in positional if req]
    req_kw = {name: v for name, req in keyword if req}
    try:
        sig.bind(*req_pos, **req_kw)
    except TypeError as e:
        pytest.fail(f"{qualname}{sig}: the standard's optional parameters must be optional: {e}")


def test_every_table_entry_is_distinct_and_covers_the_extensions():
    names = set(SIGNATURES)
    assert sum(n.startswith("linalg.") for n in names) == 23
    assert sum(n.startswith("fft.") for n in names) == 14
    assert {"Array.to_device", "Array.__array_namespace__", "Array.__dlpack__"} <= names
