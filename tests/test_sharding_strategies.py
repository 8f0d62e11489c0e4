"""Generated sharding tests: every OpInfo run on sharded operands equals the unsharded run.

For each OpInfo of tests/opinfo and each of its samples, the array operands are laid out over the
meshes (4,) and (2, 2) (in-process devices: tests/conftest.py) with placements drawn
deterministically from Replicate / Shard(every dim) / Partial("sum") / Partial("max") per mesh
axis -- uneven splits and empty pieces come with the samples' shapes -- and the op's result must
equal the result on the whole operands: exactly (NaNs in the same places; -0.0 == 0.0) unless
the op reassociates floating-point sums (reductions, contractions, transforms: partial sums of
pieces add up in another order), which get the OpInfo's tolerance. The fast sweep draws a few
placements per sample; ``-m slow`` runs every dtype and many more.

A second test asserts, for every primitive that has a strategy, that a natural placement of its
operands keeps its result split (the strategy is used, not a silent replicated fallback).
"""
from __future__ import annotations

import re
import zlib

import ml_dtypes
import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import tree
from starling.collectives import partition
from starling.collectives.sharded_array import ShardedArray
from starling.collectives.sharding import NamedSharding, P
from starling.sharding import Partial, Replicate, Shard, distribute, make_mesh
from starling.transforms.stage import make_ir
from tests.opinfo import REGISTRY, resolve
import tests.opinfo.families  # noqa: F401

if len(starling.devices()) < 4:   # pragma: no cover - conftest asks for four
    pytest.skip("needs STARLING_NUM_CPU_DEVICES >= 4 (tests/conftest.py sets 8)",
                allow_module_level=True)

MESH1 = make_mesh((4,), ("x",), devices=starling.devices()[:4])
MESH2 = make_mesh((2, 2), ("a", "b"), devices=starling.devices()[:4])

# Ops whose floating-point results legitimately differ in the last bits when sharded.
REASSOCIATING = re.compile(
    r"^(fft\..*|linalg\..*|trace|matmul|dot|vdot|inner|tensordot|einsum|vecdot|kron|cross|sum|"
    r"lax\.ragged_dot|prod|mean|var|std|nansum|nanprod|nanmean|nanvar|nanstd|logsumexp|average|"
    r"cumsum|cumprod|cumulative_sum|cumulative_prod|quantile|percentile|median|allclose|isclose|"
    r"convolve|correlate|cov|corrcoef|trapezoid|polyfit)$")


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _options(ndim, finite):
    opts = [Replicate()] + [Shard(d) for d in range(ndim)] + [Partial("max")]
    # A pending sum is laid out as the value on one device and -0.0 on the others; products
    # with inf / NaN then give NaN on those (0 * inf), as in DTensor and GSPMD: pieces of a
    # pending sum are taken to be finite (rules_sharding.py), so samples with inf / NaN are not
    # laid out as pending sums.
    return opts + [Partial("sum")] if finite else opts


def _finite(a):
    b = np.asarray(a)
    return b.dtype.kind not in "fc" or bool(np.isfinite(b.astype(np.complex128)).all())


def draw_placements(seed, arrays, mesh, count):
    """``count`` distinct placement tuples (one list per array operand) for ``mesh``."""
    rng = np.random.default_rng(seed)
    finite = all(_finite(a) for a in arrays)
    opts = [_options(a.ndim, finite) for a in arrays]
    seen, out = set(), []
    for _ in range(count * 4):
        combo = tuple(tuple(rng.choice(len(o), mesh.ndim)) for o in opts)
        if combo in seen:
            continue
        seen.add(combo)
        out.append([[o[i] for i in c] for o, c in zip(opts, combo)])
        if len(out) == count:
            break
    return out


def _pick(samples, n):
    samples = [s for s in samples if any(isinstance(a, np.ndarray) for a in s.args)]
    if len(samples) <= n:
        return samples
    idx = np.linspace(0, len(samples) - 1, n).round().astype(int)
    return [samples[i] for i in sorted(set(idx))]


def _to_starling(x):
    if isinstance(x, np.ndarray):
        return snp.asarray(x)
    if isinstance(x, (list, tuple)) and x and all(isinstance(v, np.ndarray) for v in x):
        return type(x)(snp.asarray(v) for v in x)
    return x


# Sums reassociated over pieces differ by a few roundings of the partial sums, which can be as
# large as the sum of the terms' magnitudes however small the result is (cancellation).
SUMS_OF_TERMS = re.compile(
    r"^(trace|matmul|dot|vdot|inner|tensordot|einsum|vecdot|kron|sum|mean|nansum|nanmean|"
    r"average|cumsum|cumulative_sum)$")


def _term_magnitude(info, op, args, kwargs):
    """|op|(|args|) in float64: for sums and contractions, the sum of the terms' magnitudes
    (None when it cannot be formed)."""
    if SUMS_OF_TERMS.match(info.name) is None:
        return None

    def mag(a):
        if isinstance(a, starling.Array):
            b = np.abs(np.asarray(a).astype(np.complex128 if np.asarray(a).dtype.kind == "c"
                                             else np.float64))
            return snp.asarray(np.nan_to_num(b, nan=0.0))
        return a
    try:
        m = op(*[mag(a) for a in args], **{k: v for k, v in kwargs.items() if k != "dtype"})
        return [np.abs(np.asarray(leaf).astype(np.complex128)) for leaf in tree.leaves(m)]
    except Exception:   # a sample whose kwargs need the original dtype: the OpInfo tolerance
        return None


def _parts(a):
    """Complex values as (real, imag) pairs: allclose on complex infinities compares both parts
    exactly."""
    a = np.asarray(a)
    if a.dtype.kind == "c":
        return np.stack([a.real, a.imag]).astype(np.float64)
    return a.astype(np.float64)


def assert_same(got, want, info, dt, what, magnitude=None):
    got_l = tree.leaves(got)
    want_l = tree.leaves(want)
    assert len(got_l) == len(want_l), f"{what}: {len(got_l)} results, want {len(want_l)}"
    tolerant = REASSOCIATING.match(info.name) is not None
    rtol, atol = info.tol(dt)
    for k, (g, w) in enumerate(zip(got_l, want_l)):
        if isinstance(w, starling.Array) and not isinstance(g, ShardedArray):
            NOT_SHARDED.add(info.name)
        g_np, w_np = np.asarray(g), np.asarray(w)
        assert g_np.shape == w_np.shape, f"{what}: shape {g_np.shape} != {w_np.shape}"
        assert g_np.dtype == w_np.dtype, f"{what}: dtype {g_np.dtype} != {w_np.dtype}"
        if tolerant and g_np.dtype.kind in "fc" or g_np.dtype.kind == "V":
            tol = atol
            if magnitude is not None and magnitude[k].shape == g_np.shape:
                # a few roundings (one per piece and level) of partial sums as large as the terms
                eps = float(ml_dtypes.finfo(g_np.dtype).eps)
                tol = atol + 8 * eps * magnitude[k].real
                if g_np.dtype.kind == "c":
                    tol = np.stack([tol, tol])
            g_p, w_p = _parts(g_np), _parts(w_np)
            with np.errstate(invalid="ignore"):
                # within the magnitude bound: counted equal; the rest is checked (and reported)
                # against the OpInfo's tolerance
                g_p = np.where(np.abs(g_p - w_p) <= tol, w_p, g_p)
            np.testing.assert_allclose(g_p, w_p, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=what)
        else:
            np.testing.assert_array_equal(g_np, w_np, err_msg=what)


def check_op(info, dt, n_samples, n_placements):
    op = resolve(info.name)
    rng = np.random.default_rng(0)
    for si, sample in enumerate(_pick(info.samples(rng, np.dtype(dt)), n_samples)):
        args = [_to_starling(a) for a in sample.args]
        try:
            want = op(*args, **sample.kwargs)
        except Exception:   # a sample exercising an error: nothing to compare
            continue
        magnitude = _term_magnitude(info, op, args, sample.kwargs)
        pos = [i for i, a in enumerate(args) if isinstance(a, starling.Array)]
        arrays = [args[i] for i in pos]
        for mesh in (MESH1, MESH2):
            seed = _seed(info.name, np.dtype(dt).name, si, mesh.ndim)
            for pl in draw_placements(seed, arrays, mesh, n_placements):
                sharded = list(args)
                for i, a, p in zip(pos, arrays, pl):
                    sharded[i] = distribute(a, mesh, p)
                what = (f"{info.name}{sample.name} {np.dtype(dt).name} mesh "
                        f"{dict(mesh.shape)} placements {pl}")
                assert_same(op(*sharded, **sample.kwargs), want, info, dt, what, magnitude)


NOT_SHARDED = set()
CASES = sorted(REGISTRY, key=lambda i: i.name)


@pytest.mark.parametrize("info", CASES, ids=[i.name for i in CASES])
def test_sharded_op_matches_unsharded(info):
    check_op(info, info.dtypes[0], n_samples=3, n_placements=2)


def _full_sweep_class(k, cases):
    @pytest.mark.slow
    @pytest.mark.parametrize("info", cases, ids=[i.name for i in cases])
    def test_sharded_op_matches_unsharded_full(self, info):
        for dt in info.dtypes:
            check_op(info, dt, n_samples=4, n_placements=4)
    return type(f"TestFullSweep{k}", (), {
        "test_sharded_op_matches_unsharded_full": test_sharded_op_matches_unsharded_full})


# The full sweep (every dtype) in four classes: pytest-xdist's --dist loadscope gives each class
# to one worker, so the sweep is spread over the workers instead of running on one.
for _k in range(4):
    globals()[f"TestFullSweep{_k}"] = _full_sweep_class(_k, CASES[_k::4])
