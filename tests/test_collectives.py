"""Collectives inside shard_map (1-d and 2-d meshes) and under vmap(axis_name=), against a NumPy
reference computed from the blocks (tests/collectives_ref.py). Their errors and their
derivatives are tested in test_shard_map.py."""
import functools
import math

import ml_dtypes
import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import lax
from starling.sharding import P, make_mesh
from tests.collectives_ref import group, mesh_info, per_device, rank, ref_blocks

pytestmark = pytest.mark.skipif(len(starling.devices()) < 4,
                                reason="needs 4 CPU devices (STARLING_NUM_CPU_DEVICES=4)")

DEV4 = starling.devices()[:4]
M1 = make_mesh((4,), ("i",), devices=DEV4)
M2 = make_mesh((2, 2), ("x", "y"), devices=DEV4)
BF16 = np.dtype(ml_dtypes.bfloat16)

# (mesh, in_spec of a 2-d operand, collective axes): single axes of both meshes, both axes in
# both orders, and an operand replicated along the collective's axis (P(None, "y") over "x").
CASES = [
    (M1, P("i"), ("i",)),
    (M2, P("x", "y"), ("x",)),
    (M2, P("x", "y"), ("y",)),
    (M2, P("x", "y"), ("x", "y")),
    (M2, P("x", "y"), ("y", "x")),
    (M2, P(("y", "x")), ("x", "y")),
    (M2, P(None, "y"), ("x",)),
]
CASE_IDS = ["1d-i", "2d-x", "2d-y", "2d-xy", "2d-yx", "2d-dim0yx", "2d-repl-x"]


def values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-50, 50, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype == BF16:   # halves of small integers: exact in bfloat16 and in float32 sums
        return (rng.integers(-16, 16, shape) / 2).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def layout(mesh):
    """(grid shape, axis names) of a Mesh, or a virtual grid given as that pair."""
    return mesh if isinstance(mesh, tuple) else mesh_info(mesh)


def members(lay, axes, k, blocks):
    shape, names = layout(lay)
    return [blocks[j] for j in group(shape, names, axes, k)]


def my_rank(lay, axes, k):
    shape, names = layout(lay)
    return rank(shape, names, axes, k)


def compare(got, blocks, ref, exact=False):
    """Every member's output ``got[k]`` against ``ref(k, blocks)``."""
    assert len(got) == len(blocks)
    for k, g in enumerate(got):
        want = ref(k, blocks)
        g = np.asarray(g)
        assert g.dtype == want.dtype, (k, g.dtype, want.dtype)
        assert g.shape == want.shape, (k, g.shape, want.shape)
        if exact or want.dtype.kind in "biu":
            np.testing.assert_array_equal(g, want, err_msg=f"member {k}")
        else:
            tol = 1e-2 if want.dtype == BF16 else 1e-6
            np.testing.assert_allclose(g.astype(np.complex128), want.astype(np.complex128),
                                       rtol=tol, atol=tol, err_msg=f"member {k}")


def check(f, ref, mesh, spec, x, exact=False):
    """Every device's ``f(its block)`` against ``ref(k, blocks of all devices)``."""
    compare(per_device(f, mesh, spec, x), ref_blocks(x, mesh, spec), ref, exact)


def global_shape(local, mesh, spec):
    out = list(local)
    for d, ax in enumerate(spec):
        if ax is not None:
            out[d] *= mesh.axis_size(ax if isinstance(ax, tuple) else (ax,))
    return tuple(out)


# ---- NumPy references: ref(k, blocks) -> member k's result ------------------------------------

def ref_reduce(lay, axes, op, dtype):
    """The group's blocks combined by ``op`` in rank order (low precision in float32, as the
    runtime and Starling's reductions accumulate)."""
    dtype = np.dtype(dtype)
    acc_dt = np.float32 if dtype == BF16 else dtype
    return lambda k, blocks: functools.reduce(
        op, [b.astype(acc_dt) for b in members(lay, axes, k, blocks)]).astype(dtype)


def ref_mean(lay, axes, dtype):
    # integers are averaged in the default float (float32), as mean does
    out_dt = np.dtype(np.float32) if np.dtype(dtype).kind in "biu" else np.dtype(dtype)
    wide = np.complex128 if out_dt.kind == "c" else np.float64
    return lambda k, blocks: np.mean([b.astype(wide) for b in members(lay, axes, k, blocks)],
                                     0).astype(out_dt)


def ref_gather(lay, axes, axis, tiled):
    return lambda k, blocks: (np.concatenate if tiled else np.stack)(
        members(lay, axes, k, blocks), axis)


def chunk(x, r, n, dim, tiled):
    """Chunk ``r`` of ``n`` of ``x`` along ``dim`` (untiled: the entry, dim removed)."""
    if not tiled:
        return np.take(x, r, axis=dim)
    c = x.shape[dim] // n
    return np.take(x, np.arange(r * c, (r + 1) * c), axis=dim)


def ref_scatter(lay, axes, dim, tiled, dtype):
    total = ref_reduce(lay, axes, np.add, dtype)
    n = len(members(lay, axes, 0, [None] * math.prod(layout(lay)[0])))
    return lambda k, blocks: chunk(total(k, blocks), my_rank(lay, axes, k), n,
                                   dim % blocks[0].ndim, tiled)


def ref_a2a(lay, axes, split, concat, tiled):
    def ref(k, blocks):
        ms = members(lay, axes, k, blocks)
        r = my_rank(lay, axes, k)
        pieces = [chunk(b, r, len(ms), split % b.ndim, tiled) for b in ms]
        return (np.concatenate if tiled else np.stack)(pieces, concat)
    return ref


def ref_ppermute(lay, axes, perm):
    def ref(k, blocks):
        ms = members(lay, axes, k, blocks)
        r = my_rank(lay, axes, k)
        src = [s for s, d in perm if d == r]
        # a member no pair sends to receives zeros
        return ms[src[0]] if src else np.zeros_like(ms[r])
    return ref


def ref_axis_index(lay, axes):
    return lambda k, blocks: np.int32(my_rank(lay, axes, k))


# ---- all-reductions --------------------------------------------------------------------------

REDUCE_DTYPES = [np.float32, np.float64, np.int32, np.bool_, np.complex64, BF16]


@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", REDUCE_DTYPES, ids=str)
def test_psum(mesh, spec, axes, dtype):
    x = values(dtype, (4, 6))
    # booleans: the count of True members, in sum's dtype for bool (JAX counts too)
    out_dt = np.int64 if np.dtype(dtype) == np.bool_ else dtype
    check(lambda b: lax.psum(b, axes), ref_reduce(mesh, axes, np.add, out_dt), mesh, spec, x)


@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_, np.complex64,
                                   BF16], ids=str)
def test_pmean(mesh, spec, axes, dtype):
    check(lambda b: lax.pmean(b, axes), ref_mean(mesh, axes, dtype), mesh, spec,
          values(dtype, (4, 6)))


@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_, BF16], ids=str)
@pytest.mark.parametrize("name,op", [("pmax", np.maximum), ("pmin", np.minimum)])
def test_pmax_pmin(mesh, spec, axes, dtype, name, op):
    check(lambda b: getattr(lax, name)(b, axes), ref_reduce(mesh, axes, op, dtype), mesh, spec,
          values(dtype, (4, 6)))


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int32], ids=str)
@pytest.mark.parametrize("n", [70001, 600001])
def test_psum_large_buffers(dtype, n):
    """Above 2**16 elements the members reduce one chunk each (in rank order), in cache-sized
    blocks (600001 elements: chunks of two blocks, the second partial): the result is the
    reference and bit-identical on every member."""
    x = values(dtype, (4, n), seed=7)
    check(lambda b: lax.psum(b, ("y", "x")), ref_reduce(M2, ("y", "x"), np.add, dtype), M2,
          P(("x", "y")), x, exact=True)


@pytest.mark.parametrize("name,op", [("pmax", np.fmax), ("pmin", np.fmin)])
def test_pmax_pmin_ties_nan_inf(name, op):
    # column 0: a tie of the extreme on two devices; 1: NaN on one device (propagates to all);
    # 2: +-inf; 3: signed zeros (equal values)
    x = np.array([[3.0, 1.0, np.inf, 0.0],
                  [3.0, np.nan, -np.inf, -0.0],
                  [-1.0, 2.0, 5.0, 0.0],
                  [3.0, 0.5, 1.0, -0.0]])
    got = np.stack(per_device(lambda b: getattr(lax, name)(b, "i"), M1, P("i"), x))
    want = op.reduce(x, axis=0, keepdims=True)
    want[:, 1] = np.nan
    for k in range(4):
        np.testing.assert_array_equal(got[k], want)


# ---- all_gather ------------------------------------------------------------------------------

@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("tiled", [False, True])
def test_all_gather(mesh, spec, axes, axis, tiled):
    x = values(np.float64, (4, 6, 2))
    ax = axis % (3 if tiled else 4)
    check(lambda b: lax.all_gather(b, axes, axis=axis, tiled=tiled),
          ref_gather(mesh, axes, ax, tiled), mesh, spec, x, exact=True)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.complex64, BF16], ids=str)
def test_all_gather_dtypes(dtype):
    check(lambda b: lax.all_gather(b, ("y", "x"), axis=1), ref_gather(M2, ("y", "x"), 1, False),
          M2, P("x", "y"), values(dtype, (4, 6)), exact=True)


def test_all_gather_scalar_empty_and_torch_spelling():
    x = np.arange(4.0)
    for g in per_device(lambda b: lax.all_gather(snp.sum(b), "i"), M1, P("i"), x):
        np.testing.assert_array_equal(g, x)
    for g in per_device(lambda b: starling.collectives.all_gather_single(b, "i"), M1, P("i"), x):
        np.testing.assert_array_equal(g, x)
    for g in per_device(lambda b: lax.all_gather(b, "i", axis=1, tiled=True), M1, P("i"),
                        np.zeros((4, 0))):
        assert g.shape == (1, 0)


# ---- psum_scatter ----------------------------------------------------------------------------

@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("tiled", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_, BF16], ids=str)
def test_psum_scatter(mesh, spec, axes, dim, tiled, dtype):
    n = mesh.axis_size(axes)
    local = [2, 3, 2]
    local[dim] = 2 * n if tiled else n
    x = values(dtype, global_shape(local, mesh, spec), seed=1)
    out_dt = np.int64 if np.dtype(dtype) == np.bool_ else dtype
    check(lambda b: lax.psum_scatter(b, axes, scatter_dimension=dim, tiled=tiled),
          ref_scatter(mesh, axes, dim, tiled, out_dt), mesh, spec, x)


@pytest.mark.parametrize("op,fn", [("max", np.maximum), ("min", np.minimum),
                                   ("prod", np.multiply)])
def test_psum_scatter_other_ops(op, fn):
    x = values(np.float64, (16, 3), seed=4)
    check(lambda b: lax.psum_scatter(b, "i", tiled=True, op=op),
          lambda k, bl: chunk(ref_reduce(M1, ("i",), fn, np.float64)(k, bl), k, 4, 0, True),
          M1, P("i"), x)


# ---- all_to_all ------------------------------------------------------------------------------

@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("split,concat", [(0, 0), (0, 1), (1, 0), (2, 1), (-1, 0)])
@pytest.mark.parametrize("tiled", [False, True])
def test_all_to_all(mesh, spec, axes, split, concat, tiled):
    n = mesh.axis_size(axes)
    local = [3, 2, 5]
    local[split] = 2 * n if tiled else n
    x = values(np.float64, global_shape(local, mesh, spec), seed=2)
    check(lambda b: lax.all_to_all(b, axes, split, concat, tiled=tiled),
          ref_a2a(mesh, axes, split, concat, tiled), mesh, spec, x, exact=True)


# ---- ppermute --------------------------------------------------------------------------------

PERMS = {
    ("i",): [[(0, 1), (1, 2), (2, 3), (3, 0)], [(0, 3), (3, 0)], [(1, 0)], [(2, 2), (0, 1)], []],
    ("x",): [[(0, 1), (1, 0)], [(1, 0)]],
    ("y", "x"): [[(0, 3), (3, 1), (1, 2), (2, 0)], [(3, 0), (0, 1)]],
}


@pytest.mark.parametrize("mesh,axes,perm", [
    (M1 if axes == ("i",) else M2, axes, perm) for axes, ps in PERMS.items() for perm in ps])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.complex64, BF16], ids=str)
def test_ppermute(mesh, axes, perm, dtype):
    spec = P("i") if mesh is M1 else P("x", "y")
    check(lambda b: lax.ppermute(b, axes, perm), ref_ppermute(mesh, axes, perm), mesh, spec,
          values(dtype, (4, 6), seed=3), exact=True)


# ---- axis_index ------------------------------------------------------------------------------

@pytest.mark.parametrize("mesh,axes", [(M1, "i"), (M1, ("i",)), (M2, "x"), (M2, "y"),
                                       (M2, ("x", "y")), (M2, ("y", "x"))])
def test_axis_index_and_size(mesh, axes):
    ax = (axes,) if isinstance(axes, str) else axes
    check(lambda b: lax.axis_index(axes), ref_axis_index(mesh, ax), mesh, P(), np.zeros(4))
    sizes = []
    starling.shard_map(lambda b: sizes.append(lax.axis_size(axes)) or b, mesh, in_specs=P(),
                       out_specs=P())(np.zeros(2))
    assert sizes == [mesh.axis_size(ax)]


def test_collectives_on_pytrees_and_torch_spellings():
    x = {"a": np.arange(8.0).reshape(4, 2), "b": np.arange(4, dtype=np.int32)}
    got = per_device(lambda t: lax.psum(t, "i"), M1, P("i"), x)
    for k in range(4):
        np.testing.assert_array_equal(got["a"][k], x["a"].sum(0, keepdims=True))
        np.testing.assert_array_equal(got["b"][k], [6])
    C = starling.collectives
    got = per_device(lambda b: (C.all_reduce(b, "i", "max"), C.all_reduce(b, "i", "avg"),
                                C.reduce_scatter_single(snp.concatenate([b] * 4), "i"),
                                C.all_to_all_single(snp.concatenate([b] * 4), "i")),
                     M1, P("i"), x["a"])
    for k in range(4):
        np.testing.assert_array_equal(got[0][k], x["a"].max(0, keepdims=True))
        np.testing.assert_allclose(got[1][k], x["a"].mean(0, keepdims=True))
        np.testing.assert_array_equal(got[2][k], x["a"].sum(0, keepdims=True))
        np.testing.assert_array_equal(got[3][k], x["a"])


# ---- vmap(axis_name=): the batch is a group of members ----------------------------------------
#
# Each layout runs ``g`` on a grid of members given by vmap axes (and a mesh axis), so the same
# references apply: member k of the grid holds ``x.reshape(-1, *local)[k]``.

def run_vmap(g, x):
    return starling.vmap(g, axis_name="v")(x)


def run_nested(g, x):
    return starling.vmap(starling.vmap(g, axis_name="b"), axis_name="a")(x)


def run_mesh_vmap(g, x):
    # x: (4, 2, *local); device i maps over its block's (2, *local)
    return starling.shard_map(lambda b: starling.vmap(g, axis_name="v")(b[0])[None], M1,
                              in_specs=P("i"), out_specs=P("i"))(x)


def run_vmap_mesh(g, x):
    # the batch outside, the mesh inside: x: (2, 4, *local), shard_map under vmap
    return starling.vmap(starling.shard_map(lambda b: g(b[0])[None], M1, in_specs=P("i"),
                                            out_specs=P("i")), axis_name="v")(x)


VLAYOUTS = {
    "vmap": (run_vmap, ((4,), ("v",)), [("v",)]),
    "nested": (run_nested, ((2, 3), ("a", "b")),
               [("a",), ("b",), ("a", "b"), ("b", "a")]),
    "mesh+vmap": (run_mesh_vmap, ((4, 2), ("i", "v")),
                  [("v",), ("i",), ("i", "v"), ("v", "i")]),
    "vmap+mesh": (run_vmap_mesh, ((2, 4), ("v", "i")),
                  [("v",), ("i",), ("i", "v"), ("v", "i")]),
}


def vmap_cases():
    for lname, (run, lay, axes_list) in VLAYOUTS.items():
        for axes in axes_list:
            yield pytest.param(run, lay, axes, id=f"{lname}-{'.'.join(axes)}")


def group_size(lay, axes):
    shape, names = lay
    return math.prod(shape[names.index(a)] for a in axes)


def check_grid(g, run, lay, local, ref, dtype=np.float64, exact=False, seed=0):
    shape, _ = lay
    x = values(dtype, tuple(shape) + tuple(local), seed=seed)
    out = np.asarray(run(g, x))
    n = math.prod(shape)
    compare(list(out.reshape((n,) + out.shape[len(shape):])),
            list(x.reshape((n,) + tuple(local))), ref, exact)


# Collectives over several axes that include the vmap axis: psum-like reductions, all_gather and
# axis_index compose the batch with the other axes; psum_scatter, all_to_all and ppermute do not
# (they raise a ValueError naming the axes).
MIXED_UNSUPPORTED = "must be just the vmap axis"


def mixed(axes):
    return len(axes) > 1 and any(a in ("v", "a", "b") for a in axes)


@pytest.mark.parametrize("run,lay,axes", list(vmap_cases()))
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_], ids=str)
def test_vmap_reductions(run, lay, axes, dtype):
    out_dt = np.int64 if np.dtype(dtype) == np.bool_ else dtype
    check_grid(lambda b: lax.psum(b, axes), run, lay, (3,),
               ref_reduce(lay, axes, np.add, out_dt), dtype)
    check_grid(lambda b: lax.pmax(b, axes), run, lay, (3,),
               ref_reduce(lay, axes, np.maximum, dtype), dtype)
    check_grid(lambda b: lax.pmin(b, axes), run, lay, (3,),
               ref_reduce(lay, axes, np.minimum, dtype), dtype)
    check_grid(lambda b: lax.pmean(b, axes), run, lay, (3,), ref_mean(lay, axes, dtype), dtype)


@pytest.mark.parametrize("run,lay,axes", list(vmap_cases()))
@pytest.mark.parametrize("axis,tiled", [(0, False), (1, False), (-1, False), (0, True),
                                        (1, True)])
def test_vmap_all_gather(run, lay, axes, axis, tiled):
    ax = axis % (2 if tiled else 3)
    check_grid(lambda b: lax.all_gather(b, axes, axis=axis, tiled=tiled), run, lay, (3, 2),
               ref_gather(lay, axes, ax, tiled), exact=True)


@pytest.mark.parametrize("run,lay,axes", list(vmap_cases()))
def test_vmap_axis_index(run, lay, axes):
    check_grid(lambda b: lax.axis_index(axes), run, lay, (), ref_axis_index(lay, axes),
               exact=True)


@pytest.mark.parametrize("run,lay,axes", list(vmap_cases()))
@pytest.mark.parametrize("dim,tiled", [(0, False), (1, False), (0, True), (-1, True)])
def test_vmap_psum_scatter(run, lay, axes, dim, tiled):
    n = group_size(lay, axes)
    local = [3, 2]
    local[dim] = 2 * n if tiled else n
    g = lambda b: lax.psum_scatter(b, axes, scatter_dimension=dim, tiled=tiled)  # noqa: E731
    if mixed(axes):
        with pytest.raises(ValueError, match=MIXED_UNSUPPORTED):
            check_grid(g, run, lay, tuple(local), None)
        return
    check_grid(g, run, lay, tuple(local), ref_scatter(lay, axes, dim, tiled, np.float64))


@pytest.mark.parametrize("run,lay,axes", list(vmap_cases()))
@pytest.mark.parametrize("split,concat,tiled", [(0, 1, False), (1, 0, False), (0, 0, True),
                                                (0, 1, True), (1, 0, True)])
def test_vmap_all_to_all(run, lay, axes, split, concat, tiled):
    n = group_size(lay, axes)
    local = [3, 2]
    local[split] = 2 * n if tiled else n
    g = lambda b: lax.all_to_all(b, axes, split, concat, tiled=tiled)  # noqa: E731
    if mixed(axes):
        with pytest.raises(ValueError, match=MIXED_UNSUPPORTED):
            check_grid(g, run, lay, tuple(local), None)
        return
    check_grid(g, run, lay, tuple(local), ref_a2a(lay, axes, split, concat, tiled), exact=True)


@pytest.mark.parametrize("run,lay,axes", list(vmap_cases()))
def test_vmap_ppermute(run, lay, axes):
    n = group_size(lay, axes)
    for perm in ([(r, (r + 1) % n) for r in range(n)], [(n - 1, 0)], []):
        g = lambda b: lax.ppermute(b, axes, perm)  # noqa: E731
        if mixed(axes):
            with pytest.raises(ValueError, match=MIXED_UNSUPPORTED):
                check_grid(g, run, lay, (3,), None)
            return
        check_grid(g, run, lay, (3,), ref_ppermute(lay, axes, perm), exact=True)


def test_vmap_in_out_axes_and_unbatched_operands():
    """in_axes / out_axes variants and collectives of values the batch does not touch, against
    a Python loop over the examples."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 2))      # mapped along axis 1 (size 4)
    y = rng.standard_normal((4, 2))         # not mapped

    def f(xb, yb):
        return (lax.psum(xb, "v"), lax.psum(yb, "v"), lax.pmax(yb, "v"),
                lax.all_gather(yb, "v", axis=1), lax.ppermute(yb, "v", [(0, 1), (1, 0)]),
                lax.psum_scatter(yb, "v"), lax.axis_index("v"), xb * lax.pmean(yb, "v")[0])

    out = starling.vmap(f, in_axes=(1, None), out_axes=(0, 1, 0, -1, 0, 0, 0, 2),
                        axis_name="v")(x, y)
    xs = [x[:, j] for j in range(4)]
    want = [np.stack([sum(xs)] * 4), np.stack([4 * y] * 4, 1), np.stack([y] * 4),
            np.stack([np.stack([y] * 4, 1)] * 4, -1),
            np.stack([y, y, np.zeros_like(y), np.zeros_like(y)]),
            np.stack([4 * y[j] for j in range(4)]), np.arange(4, dtype=np.int32),
            np.stack([xs[j] * y[0] for j in range(4)], 2)]
    for got, w in zip(out, want):
        np.testing.assert_allclose(np.asarray(got), w, rtol=1e-12, atol=1e-12)
        assert np.asarray(got).shape == w.shape


def test_vmap_collectives_inside_control_flow():
    """A collective over the vmap axis inside cond / scan / while_loop bodies sees the batch
    (the bodies are batched with the vmap's axis name), also when no operand is batched."""
    x = np.array([0.0, 1.0, 2.0, 3.0])
    vm = functools.partial(starling.vmap, axis_name="v")
    got = vm(lambda v: lax.cond(v > 1, lambda v: lax.psum(v, "v"), lambda v: -v, v))(x)
    np.testing.assert_array_equal(got, np.where(x > 1, 6.0, -x))
    got = vm(lambda v: lax.scan(lambda c, _: (c + lax.pmax(v, "v"), c), v, None, length=3))(x)
    np.testing.assert_array_equal(got[0], x + 9.0)
    np.testing.assert_array_equal(got[1], np.stack([x, x + 3, x + 6], 1))
    got = vm(lambda v: lax.while_loop(lambda c: c[1] < lax.axis_index("v"),
                                      lambda c: (c[0] + lax.psum(v, "v"), c[1] + 1), (v, 0))[0])(x)
    np.testing.assert_array_equal(got, x + 6.0 * np.arange(4))
    # nothing batched: the member's index still reaches the body
    got = starling.vmap(lambda _: lax.cond(True, lambda: lax.axis_index("v"),
                                           lambda: np.int32(-1)),
                        in_axes=None, axis_size=3, axis_name="v")(0.0)
    np.testing.assert_array_equal(got, [0, 1, 2])
    got = starling.vmap(lambda v: lax.scan(lambda c, _: (c + lax.psum(1.0, "v"), None), v,
                                           None, length=2)[0], in_axes=None, axis_size=3,
                        axis_name="v")(1.0)
    np.testing.assert_array_equal(got, [7.0, 7.0, 7.0])
    g = starling.shard_map(lambda b: b * lax.axis_index("v") + lax.psum(b, "i"), M1,
                           in_specs=P("i"), out_specs=P("i"))
    got = starling.vmap(g, in_axes=None, axis_size=2, axis_name="v")(np.arange(4.0))
    np.testing.assert_array_equal(got, [[6.0] * 4, [6.0, 7.0, 8.0, 9.0]])


# ---- batch rules of collectives over other axes (vmap without the axis name) -----------------

GENERIC = {
    "psum": lambda r: lax.psum(r, "i"),
    "pmin": lambda r: lax.pmin(r, "i"),
    "all_gather-0": lambda r: lax.all_gather(r, "i", axis=0),
    "all_gather-2": lambda r: lax.all_gather(r, "i", axis=2),
    "all_gather-1-tiled": lambda r: lax.all_gather(r, "i", axis=1, tiled=True),
    "psum_scatter-0-tiled": lambda r: lax.psum_scatter(r, "i", tiled=True),
    "psum_scatter-1": lambda r: lax.psum_scatter(r[:, :4], "i", scatter_dimension=1),
    "all_to_all-01-tiled": lambda r: lax.all_to_all(r, "i", 0, 1, tiled=True),
    "all_to_all-11-tiled": lambda r: lax.all_to_all(r, "i", 1, 1, tiled=True),
    "all_to_all-10": lambda r: lax.all_to_all(r[:, :4], "i", 1, 0),
    "ppermute": lambda r: lax.ppermute(r, "i", [(0, 1), (1, 2), (2, 0)]),
}


@pytest.mark.parametrize("name", list(GENERIC))
@pytest.mark.parametrize("in_axis,out_axis", [(1, 0), (0, -1), (-1, 1)])
def test_vmap_of_collective_over_another_axis(name, in_axis, out_axis):
    """vmap (no axis name) of collectives over the mesh axis, batch at any position, against
    a Python loop over the examples inside the same shard_map."""
    g = GENERIC[name]
    x = values(np.float64, (4, 8, 8, 8), seed=6)

    def batched(b):
        return starling.vmap(g, in_axes=in_axis, out_axes=out_axis)(b[0])[None]

    def looped(b):
        n = b.shape[1 + in_axis % 3]
        return snp.stack([g(snp.take(b[0], k, axis=in_axis)) for k in range(n)], out_axis)[None]

    got, want = (np.asarray(starling.shard_map(h, M1, in_specs=P("i"), out_specs=P("i"))(x))
                 for h in (batched, looped))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("values", [np.array([100, 120, 7, 1], np.int8),
                                    np.array([200, 250, 0, 1], np.uint8),
                                    np.array([True, False, True, True]),
                                    np.array([4e4, 1.0, 3e4, -4e4], np.float16)],
                         ids=["int8", "uint8", "bool", "float16"])
def test_partial_avg_sums_wide_before_dividing(values):
    """A pending mean of copies of ``values`` is ``values``: its sum is taken in int64 (float32
    for 16-bit floats), not in a dtype where 100 + 120 wraps around or 4e4 + 4e4 overflows."""
    from starling.sharding import Partial, Replicate, Shard, distribute, redistribute
    x = distribute(values, M2, [Partial("avg"), Replicate()])
    np.testing.assert_array_equal(np.asarray(x), values)
    for to in ([Shard(0), Replicate()], [Replicate(), Replicate()]):
        np.testing.assert_array_equal(np.asarray(redistribute(x, to)), values)
    y = redistribute(distribute(values, M2, [Replicate(), Replicate()]), [Partial("avg"),
                                                                         Replicate()])
    np.testing.assert_array_equal(np.asarray(y), values)
    # pmean: integers become float32 (as mean); 16-bit floats are summed in float32
    for g in per_device(lambda b: lax.pmean(b, "i"), M1, P(), values):
        np.testing.assert_allclose(np.asarray(g).astype(np.float64), values.astype(np.float64))


def test_sharding_log_shows_the_bytes_each_choice_moves(monkeypatch, caplog):
    """STARLING_LOG_SHARDING=1: the cost logged is what the chosen layout moves (inv needs the
    whole matrix on every device: 3/4 of it arrives), not 0 (the layout counted as already
    there)."""
    import logging
    from starling.sharding import Shard, distribute
    monkeypatch.setenv("STARLING_LOG_SHARDING", "1")
    x = distribute(np.ones((64, 64), np.float32) + 64 * np.eye(64, dtype=np.float32), M2,
                   [Shard(0), Shard(1)])
    with caplog.at_level(logging.INFO, logger="starling.sharding"):
        snp.linalg.inv(x)
    inv = [r.getMessage() for r in caplog.records if r.getMessage().startswith("sharding inv")]
    assert inv and inv[0].endswith(f"(moves {64 * 64 * 4 * 3 // 4} bytes/device)"), inv


def test_layouts_and_sharded_arrays_pickle_and_copy():
    import copy
    import pickle
    from starling.sharding import NamedSharding, Partial, Replicate, Shard, distribute
    for obj in (P("x", None), P(("x", "y")), P(), Shard(1), Replicate(), Partial("max"),
                NamedSharding(M2, P("x"))):
        for back in (pickle.loads(pickle.dumps(obj)), copy.copy(obj), copy.deepcopy(obj)):
            assert back == obj and repr(back) == repr(obj)
    x = distribute(np.arange(6.0), M2, [Shard(0), Partial("sum")])
    for back in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x)):
        assert back.placements == x.placements
        np.testing.assert_array_equal(np.asarray(back), np.asarray(x))


def test_to_local_inside_a_shard_map_body_says_what_to_do():
    from starling.sharding import Shard, distribute
    x = distribute(np.arange(16.0).reshape(4, 4), M2, [Shard(0), Shard(1)])
    f = starling.shard_map(lambda b: b + x.to_local(), M2, in_specs=P("x", "y"),
                           out_specs=P("x", "y"))
    with pytest.raises(ValueError, match=r"to_local: called inside a shard_map body over mesh "
                                         r"axes \['x', 'y'\].*f64\[4,4\].*as an argument"):
        f(np.ones((4, 4)))


def test_values_on_two_meshes_of_one_shape_are_told_apart():
    from starling.sharding import Mesh, Replicate, Shard, distribute
    other = Mesh(np.array(DEV4[::-1]).reshape(2, 2), ("x", "y"))
    x = distribute(np.ones((4, 4)), M2, [Shard(0), Replicate()])
    y = distribute(np.ones((4, 4)), other, [Shard(0), Replicate()])
    ids = r"device ids=\[\[3, 2\], \[1, 0\]\]\): (operand|argument) 1 f64\[4,4\]"
    with pytest.raises(ValueError, match=r"add: values on 2 different meshes: .*" + ids):
        x + y
    with pytest.raises(ValueError, match=r"compile: values on 2 different meshes: .*" + ids):
        starling.compile(lambda p, q: p + q)(x, y)


def test_shard_map_as_a_decorator_keywords_refused_visualize_returns_none(capsys):
    from starling.sharding import Replicate, Shard, distribute, visualize_sharding

    @starling.shard_map(mesh=M1, in_specs=P("i"), out_specs=P())
    def total(b):
        return lax.psum(b.sum(), "i")
    assert float(total(np.arange(8.0))) == 28.0
    f = starling.shard_map(lambda a, k=2: a * k, M1, in_specs=P("i"), out_specs=P("i"))
    with pytest.raises(TypeError, match=r"keyword arguments \['k'\] are not supported"):
        f(np.ones(4), k=3)
    with pytest.raises(TypeError, match="shard_map: f must be a function, got int"):
        starling.shard_map(3, M1, in_specs=P(), out_specs=P())
    assert visualize_sharding(distribute(np.ones((4, 4)), M2, [Shard(0), Replicate()])) is None
    assert "dev 0,1" in capsys.readouterr().out


def test_shard_map_inside_a_shard_map_over_the_same_axes_is_a_clear_error():
    inner = starling.shard_map(lambda b: b * 2, M2, in_specs=P("x", "y"), out_specs=P("x", "y"))
    outer = starling.shard_map(lambda b: inner(b), M2, in_specs=P("x", "y"),
                               out_specs=P("x", "y"))
    with pytest.raises(ValueError, match=r"already maps the mesh axes \['x', 'y'\]"):
        outer(np.ones((4, 4)))
