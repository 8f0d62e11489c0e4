"""Generated transformation tests: every primitive has its rules; every OpInfo's JVP/VJP agrees
with finite differences (check_grads, float64) and its vmap agrees with a Python loop."""
from __future__ import annotations

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import tree
from starling.core.primitive import Primitive
from starling.test_util import check_grads
from tests.opinfo import REGISTRY, resolve
import tests.opinfo.families  # noqa: F401

# Primitives whose rules are intentionally absent, with the reason (documented limits).
NO_JVP = {"custom_lin": "linear stand-in for custom_vjp; forward mode is an error by design"}
NO_BATCH = {"custom_lin": "only ever transposed, never batched"}


def test_every_primitive_has_jvp_and_batch_rules():
    missing = []
    for name, prim in sorted(Primitive.registry.items()):
        if name.startswith("test_") or prim.meta.get("lowering_only") or \
                prim.meta.get("never_bound"):
            continue   # lowering-only (per-device schedules) and never-bound primitives (notes
            # in recordings) say why in their meta
        if prim.jvp is None and name not in NO_JVP:
            missing.append(f"{name}: jvp")
        if prim.batch is None and name not in NO_BATCH:
            missing.append(f"{name}: batch")
        if prim.is_linear and prim.transpose is None:
            missing.append(f"{name}: transpose")
    assert not missing, "missing rules:\n" + "\n".join(missing)


def _finite(x):
    a = np.asarray(x)
    return a.dtype.kind not in "fc" or bool(np.all(np.isfinite(a.astype(np.complex128))))


def _grad_samples(info, rng, dt):
    if info.grad_samples is not None:
        return info.grad_samples(rng, dt)
    out = []
    for s in info.samples(rng, dt):
        arrays = [a for a in s.args if isinstance(a, np.ndarray)]
        if not arrays or not all(_finite(a) for a in arrays):
            continue
        if any(a.size == 0 for a in arrays):
            continue
        try:
            res = info.ref(*s.args, **s.kwargs)
        except Exception:
            continue
        if all(_finite(r) for r in tree.leaves(res if isinstance(res, (tuple, list)) else [res])):
            out.append(s)
    return out[:4]


GRAD_CASES = [(info, dt) for info in REGISTRY if info.differentiable and not info.eager_only
              for dt in info.dtypes if np.dtype(dt) in (np.dtype("float64"), np.dtype("complex128"))]


@pytest.mark.parametrize("case", GRAD_CASES,
                         ids=[f"{i.name}-{np.dtype(d).name}" for i, d in GRAD_CASES])
def test_check_grads(case, rng):
    info, dt = case
    op = resolve(info.name)
    for sample in _grad_samples(info, rng, np.dtype(dt)):
        pos = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)
               and np.dtype(a.dtype).kind in "fc"]
        if not pos:
            continue

        def f(*arrays, sample=sample, pos=pos):
            args = list(sample.args)
            for i, a in zip(pos, arrays):
                args[i] = a if info.grad_input is None else info.grad_input(a)
            return op(*args, **sample.kwargs)

        check_grads(f, [sample.args[i] for i in pos], order=info.grad_order,
                    atol=info.grad_tol, rtol=info.grad_tol)


VMAP_CASES = [(info, dt) for info in REGISTRY if info.vmap and not info.eager_only
              for dt in info.dtypes[:3] + info.dtypes[-2:]]


def _variants(a, keep_sorted=False, n=3, how="roll"):
    if how == "scale":  # keeps structure such as positive definiteness
        return [a, (a * 2).astype(a.dtype), (a * 3).astype(a.dtype)][:n]
    flat = a.reshape(-1)
    out = [a, np.roll(flat, 1).reshape(a.shape), np.roll(flat, 2).reshape(a.shape)][:n]
    if not keep_sorted:
        return out
    # ml_dtypes floats sort NaN / inf unreliably in NumPy: order by a float64 view instead.
    key = (lambda v: v.astype(np.float64)) if a.dtype.kind in "fV" else (lambda v: v)
    return [np.take_along_axis(v, np.argsort(key(v), axis=-1, kind="stable"), axis=-1)
            for v in out]


@pytest.mark.parametrize("case", VMAP_CASES,
                         ids=[f"{i.name}-{np.dtype(d).name}-{k}" for k, (i, d) in
                              enumerate(VMAP_CASES)])
def test_vmap_matches_loop(case, rng):
    info, dt = case
    op = resolve(info.name)
    for sample in info.samples(rng, np.dtype(dt))[:6]:
        pos = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]
        if not pos:
            continue

        def f(*arrays, sample=sample, pos=pos):
            args = list(sample.args)
            for i, a in zip(pos, arrays):
                args[i] = a
            return op(*args, **sample.kwargs)

        batches = [_variants(sample.args[i], keep_sorted=i in info.sorted_args,
                             how=info.vmap_variants) for i in pos]
        # all operands batched on axis 0, then only the first batched on its last axis
        for mode in ("all0", "first_last"):
            if mode == "all0":
                stacked = [np.stack(b) for b in batches]
                in_axes = tuple(0 for _ in pos)
                per_example = [[b[k] for b in batches] for k in range(3)]
            else:
                stacked = [np.stack(batches[0], axis=-1)] + [sample.args[i] for i in pos[1:]]
                in_axes = (-1,) + tuple(None for _ in pos[1:])
                per_example = [[batches[0][k]] + [sample.args[i] for i in pos[1:]]
                               for k in range(3)]
            got = starling.vmap(f, in_axes=in_axes)(*[snp.asarray(s) for s in stacked])
            want = [f(*[snp.asarray(a) for a in ex]) for ex in per_example]
            got_leaves = tree.leaves(got)
            want_leaves = [tree.leaves(w) for w in want]
            assert len(got_leaves) == len(want_leaves[0])
            for j, g in enumerate(got_leaves):
                ref = np.stack([np.asarray(w[j]) for w in want_leaves])
                g = np.asarray(g)
                assert g.shape == ref.shape, f"{info.name} {mode}: {g.shape} vs {ref.shape}"
                assert g.dtype == ref.dtype, f"{info.name} {mode}: {g.dtype} vs {ref.dtype}"
                if g.dtype.kind in "biu":
                    np.testing.assert_array_equal(g, ref)
                else:
                    np.testing.assert_allclose(g.astype(np.complex128), ref.astype(np.complex128),
                                               rtol=1e-5, atol=1e-6, equal_nan=True,
                                               err_msg=f"{info.name} {mode}")
