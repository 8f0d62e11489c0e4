"""Collectives inside shard_map (1-d and 2-d meshes) and under vmap(axis_name=), against a NumPy
reference computed from the blocks (tests/collectives_ref.py); their errors."""
import functools

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

M1 = make_mesh((4,), ("i",))
M2 = make_mesh((2, 2), ("x", "y"))
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


def check(f, ref, mesh, spec, x, exact=False):
    """Compares every device's ``f(block)`` with ``ref(members' blocks in rank order, rank,
    own block)``."""
    got = per_device(f, mesh, spec, x)
    blocks = ref_blocks(x, mesh, spec)
    shape, names = mesh_info(mesh)
    for k in range(mesh.size):
        want = ref(k, blocks)
        g = got[k]
        assert g.dtype == want.dtype, (k, g.dtype, want.dtype)
        assert g.shape == want.shape, (k, g.shape, want.shape)
        if exact or want.dtype.kind in "biu":
            np.testing.assert_array_equal(g, want, err_msg=f"device {k}")
        else:
            tol = 1e-2 if want.dtype == BF16 else 1e-6
            np.testing.assert_allclose(g.astype(np.complex128), want.astype(np.complex128),
                                       rtol=tol, atol=tol, err_msg=f"device {k}")


def members(mesh, axes, k, blocks):
    shape, names = mesh_info(mesh)
    return [blocks[j] for j in group(shape, names, axes, k)]


def reduce_ref(mesh, axes, op, dtype):
    """The group's blocks combined by ``op`` in rank order (low precision in float32, as the
    runtime and Starling's reductions accumulate)."""
    acc_dt = np.float32 if dtype == BF16 else dtype

    def ref(k, blocks):
        vals = [b.astype(acc_dt) for b in members(mesh, axes, k, blocks)]
        out = functools.reduce(op, vals)
        return out.astype(dtype)
    return ref


# ---- all-reductions --------------------------------------------------------------------------

REDUCE_DTYPES = [np.float32, np.float64, np.int32, np.bool_, np.complex64, BF16]


@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", REDUCE_DTYPES, ids=str)
def test_psum(mesh, spec, axes, dtype):
    x = values(dtype, (4, 6))
    # booleans: the count of True members, in sum's dtype for bool (JAX counts too)
    out_dt = np.dtype(np.int64) if np.dtype(dtype) == np.bool_ else np.dtype(dtype)
    check(lambda b: lax.psum(b, axes), reduce_ref(mesh, axes, np.add, out_dt), mesh, spec, x)


@pytest.mark.parametrize("mesh,spec,axes", CASES[:4], ids=CASE_IDS[:4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.complex64, BF16], ids=str)
def test_pmean(mesh, spec, axes, dtype):
    x = values(dtype, (4, 6))
    n = mesh.axis_size(axes)
    # integers are averaged in the default float (float32), as mean does
    out_dt = np.dtype(np.float32) if np.dtype(dtype).kind == "i" else np.dtype(dtype)
    wide = np.complex128 if out_dt.kind == "c" else np.float64

    def ref(k, blocks):
        return (sum(b.astype(wide) for b in members(mesh, axes, k, blocks)) / n).astype(out_dt)
    check(lambda b: lax.pmean(b, axes), ref, mesh, spec, x)


@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_, BF16], ids=str)
@pytest.mark.parametrize("name,op", [("pmax", np.maximum), ("pmin", np.minimum)])
def test_pmax_pmin(mesh, spec, axes, dtype, name, op):
    x = values(dtype, (4, 6))
    check(lambda b: getattr(lax, name)(b, axes), reduce_ref(mesh, axes, op, np.dtype(dtype)),
          mesh, spec, x)


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

DATA_DTYPES = [np.float32, np.int32, np.bool_, np.complex64, BF16]


@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("tiled", [False, True])
def test_all_gather(mesh, spec, axes, axis, tiled):
    if tiled and axis == 2:
        axis = -2
    x = values(np.float64, (4, 6, 2)).reshape(4, 6, 2)

    def ref(k, blocks):
        ms = members(mesh, axes, k, blocks)
        return np.concatenate(ms, axis) if tiled else np.stack(ms, axis)
    check(lambda b: lax.all_gather(b, axes, axis=axis, tiled=tiled), ref, mesh, spec, x,
          exact=True)


@pytest.mark.parametrize("dtype", DATA_DTYPES, ids=str)
def test_all_gather_dtypes(dtype):
    x = values(dtype, (4, 6))
    check(lambda b: lax.all_gather(b, ("y", "x"), axis=1),
          lambda k, bl: np.stack(members(M2, ("y", "x"), k, bl), 1), M2, P("x", "y"), x,
          exact=True)


def test_all_gather_scalar_and_torch_spelling():
    x = np.arange(4.0)
    got = per_device(lambda b: lax.all_gather(snp.sum(b), "i"), M1, P("i"), x)
    for g in got:
        np.testing.assert_array_equal(g, x)
    got = per_device(lambda b: starling.collectives.all_gather_single(b, "i"), M1, P("i"), x)
    for g in got:
        np.testing.assert_array_equal(g, x)


# ---- psum_scatter ----------------------------------------------------------------------------

@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("tiled", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.int32, BF16], ids=str)
def test_psum_scatter(mesh, spec, axes, dim, tiled, dtype):
    n = mesh.axis_size(axes)
    shape = [2, 3, 2]
    shape[dim] = 2 * n if tiled else n
    # the global operand: each device's block has the scatter dim's size above
    gshape = list(shape)
    for d, ax in enumerate(spec):
        if ax is not None:
            gshape[d] *= mesh.axis_size(ax if isinstance(ax, tuple) else (ax,))
    x = values(dtype, tuple(gshape), seed=1)
    total = reduce_ref(mesh, axes, np.add, np.dtype(dtype))
    shp, names = mesh_info(mesh)

    def ref(k, blocks):
        s = total(k, blocks)
        r = rank(shp, names, axes, k)
        d = dim % s.ndim
        if not tiled:
            return np.take(s, r, axis=d)
        c = s.shape[d] // n
        return np.take(s, np.arange(r * c, (r + 1) * c), axis=d)
    check(lambda b: lax.psum_scatter(b, axes, scatter_dimension=dim, tiled=tiled), ref,
          mesh, spec, x)


# ---- all_to_all ------------------------------------------------------------------------------

@pytest.mark.parametrize("mesh,spec,axes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("split,concat", [(0, 0), (0, 1), (1, 0), (2, 1), (-1, 0)])
@pytest.mark.parametrize("tiled", [False, True])
def test_all_to_all(mesh, spec, axes, split, concat, tiled):
    n = mesh.axis_size(axes)
    local = [3, 2, 5]
    local[split] = 2 * n if tiled else n
    gshape = list(local)
    for d, ax in enumerate(spec):
        if ax is not None:
            gshape[d] *= mesh.axis_size(ax if isinstance(ax, tuple) else (ax,))
    x = values(np.float64, tuple(gshape), seed=2)
    shp, names = mesh_info(mesh)

    def ref(k, blocks):
        r = rank(shp, names, axes, k)
        s = split % 3
        pieces = []
        for b in members(mesh, axes, k, blocks):
            if tiled:
                c = b.shape[s] // n
                pieces.append(np.take(b, np.arange(r * c, (r + 1) * c), axis=s))
            else:
                pieces.append(np.take(b, r, axis=s))
        return np.concatenate(pieces, concat) if tiled else np.stack(pieces, concat)
    check(lambda b: lax.all_to_all(b, axes, split, concat, tiled=tiled), ref, mesh, spec, x,
          exact=True)


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
    x = values(dtype, (4, 6), seed=3)
    shp, names = mesh_info(mesh)

    def ref(k, blocks):
        ms = members(mesh, axes, k, blocks)
        r = rank(shp, names, axes, k)
        src = [s for s, d in perm if d == r]
        # a member no pair sends to receives zeros
        return ms[src[0]] if src else np.zeros_like(ms[r])
    check(lambda b: lax.ppermute(b, axes, perm), ref, mesh, spec, x, exact=True)


# ---- axis_index ------------------------------------------------------------------------------

@pytest.mark.parametrize("mesh,axes", [(M1, "i"), (M1, ("i",)), (M2, "x"), (M2, "y"),
                                       (M2, ("x", "y")), (M2, ("y", "x"))])
def test_axis_index_and_size(mesh, axes):
    shp, names = mesh_info(mesh)
    ax = (axes,) if isinstance(axes, str) else axes
    got = per_device(lambda b: lax.axis_index(axes), mesh,
                     P(), np.zeros(2))
    for k in range(mesh.size):
        assert got[k].dtype == np.int32
        assert int(got[k]) == rank(shp, names, ax, k)
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
