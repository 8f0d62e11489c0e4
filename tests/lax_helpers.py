"""Shared checks of the starling.lax tests: vmap against a Python loop, compiled against eager."""
from __future__ import annotations

import numpy as np

import starling
import starling.numpy as snp
from starling import tree


def assert_same(got, want, atol=0.0, rtol=0.0, msg=""):
    g, w = tree.leaves(got), tree.leaves(want)
    assert len(g) == len(w), msg
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, f"{msg}: shape {a.shape} != {b.shape}"
        assert a.dtype == b.dtype, f"{msg}: dtype {a.dtype} != {b.dtype}"
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b, err_msg=msg)
        else:
            np.testing.assert_allclose(a, b, atol=atol, rtol=rtol, equal_nan=True, err_msg=msg)


def check_vmap(f, args, in_axes=0, atol=1e-12):
    """``vmap(f, in_axes)(*args)`` equals stacking ``f`` over the examples."""
    axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    n = next(a.shape[d] for a, d in zip(args, axes) if d is not None)
    got = starling.vmap(f, in_axes=tuple(axes))(*args)
    outs = []
    for i in range(n):
        one = [a if d is None else snp.take(a, i, axis=d) for a, d in zip(args, axes)]
        outs.append(f(*one))
    want = tree.map(lambda *xs: snp.stack(xs), *outs)
    assert_same(got, want, atol=atol, msg="vmap vs loop")


def check_compiled(f, *args, atol=0.0):
    """``compile(f)`` gives the eager result (the cpp backend, strict: no silent fallback)."""
    want = f(*args)
    got = starling.compile(f)(*args)
    assert_same(got, want, atol=atol, rtol=atol, msg="compiled vs eager")
