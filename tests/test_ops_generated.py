"""Generated tests: every OpInfo against its NumPy reference, eager and staged."""
from __future__ import annotations

import numpy as np
import pytest

import starling.numpy as snp
from starling import tree
from starling.core.ir import check_program, eval_program
from starling.transforms.stage import make_ir
from tests.opinfo import REGISTRY, resolve
import tests.opinfo.families  # noqa: F401

CASES = [(info, dt) for info in REGISTRY for dt in info.dtypes]


def _ids(case):
    info, dt = case
    return f"{info.name}-{np.dtype(dt).name}"


def to_starling(x):
    if isinstance(x, np.ndarray):
        return snp.asarray(x)
    if isinstance(x, (list, tuple)) and x and all(isinstance(v, np.ndarray) for v in x):
        return type(x)(snp.asarray(v) for v in x)
    return x


def assert_matches(got, want, info, dt, sample):
    got_leaves = tree.leaves(got)
    want_leaves = tree.leaves(want if isinstance(want, (tuple, list)) else [want])
    if not isinstance(want, (tuple, list)):
        got_leaves = [got]
    assert len(got_leaves) == len(want_leaves), f"{info.name}: {len(got_leaves)} outputs, want {len(want_leaves)}"
    rtol, atol = info.tol(dt)
    for g, w in zip(got_leaves, want_leaves):
        w = np.asarray(w)
        g_np = np.asarray(g)
        assert g_np.shape == w.shape, f"{info.name}{sample.name}: shape {g_np.shape} != {w.shape}"
        if info.check_dtype:
            expect = info.expected_dtype(dt, sample) if info.expected_dtype else w.dtype
            if isinstance(expect, (list, tuple)):
                expect = expect[got_leaves.index(g) if False else 0]
            assert g_np.dtype == np.dtype(expect), (
                f"{info.name}{sample.name}: dtype {g_np.dtype} != {np.dtype(expect)}")
        if g_np.dtype.kind in "biu" and w.dtype.kind in "biu":
            np.testing.assert_array_equal(g_np, w.astype(g_np.dtype), err_msg=f"{info.name}{sample.name}")
        else:
            gf = g_np.astype(np.complex128 if g_np.dtype.kind == "c" or w.dtype.kind == "c" else np.float64)
            wf = w.astype(gf.dtype)
            np.testing.assert_allclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"{info.name}{sample.name} dtype={np.dtype(dt).name}")


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_op_matches_numpy(case, rng):
    info, dt = case
    op = resolve(info.name)
    for sample in info.samples(rng, np.dtype(dt)):
        want = info.ref(*sample.args, **sample.kwargs)
        got = op(*[to_starling(a) for a in sample.args], **sample.kwargs)
        assert_matches(got, want, info, dt, sample)


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_op_staged_matches_eager(case, rng):
    """Abstract eval agrees with the eager result, and the staged Program evaluates to it."""
    info, dt = case
    op = resolve(info.name)
    for sample in info.samples(rng, np.dtype(dt)):
        arr_pos = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]
        if not arr_pos:
            continue
        eager = op(*[to_starling(a) for a in sample.args], **sample.kwargs)
        if getattr(info, "eager_only", False):
            continue

        def f(*arrays):
            args = list(sample.args)
            for i, a in zip(arr_pos, arrays):
                args[i] = a
            return op(*args, **sample.kwargs)

        arrays = [snp.asarray(sample.args[i]) for i in arr_pos]
        prog = make_ir(f)(*arrays)
        check_program(prog)
        staged = eval_program(prog, prog.consts, *arrays)
        eager_leaves = tree.leaves(eager)
        assert len(staged) == len(eager_leaves)
        for s, e in zip(staged, eager_leaves):
            assert s.shape == e.shape and s.dtype == e.dtype, f"{info.name}{sample.name}"
            s_np, e_np = np.asarray(s), np.asarray(e)
            if s_np.dtype.kind not in "biuc":
                s_np, e_np = s_np.astype(np.float64), e_np.astype(np.float64)
            np.testing.assert_array_equal(s_np, e_np, err_msg=f"{info.name}{sample.name}")
