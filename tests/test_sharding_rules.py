"""Sharding strategies in use: for every primitive with a strategy, a natural layout of its
operands keeps its result split (no silent replicated fallback) and the value is the unsharded
one; random draws and iota split with per-device offsets (bit-exact); control-flow bodies;
layout hints; regressions of the partitioner and of Partial layouts."""
from __future__ import annotations

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import random
from starling.arrays.ops import rules_sharding as RS
from starling.arrays.ops.gather_scatter import gather, scatter
from starling.collectives import partition
from starling.collectives.sharding import NamedSharding, P
from starling.core.primitive import Primitive
from starling.linalg.hermitian_sqrt import hermitian_sylvester
from starling.sharding import Partial, Replicate, Shard, distribute, make_mesh
from starling.transforms.stage import make_ir

if len(starling.devices()) < 4:   # pragma: no cover - conftest asks for four
    pytest.skip("needs STARLING_NUM_CPU_DEVICES >= 4 (tests/conftest.py sets 8)",
                allow_module_level=True)

M1 = make_mesh((4,), ("x",), devices=starling.devices()[:4])
M2 = make_mesh((2, 2), ("a", "b"), devices=starling.devices()[:4])
S0, S1, S2, R = Shard(0), Shard(1), Shard(2), Replicate()
PS = Partial("sum")
RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 6))
Y = RNG.standard_normal((8, 6))
SPD = np.einsum("bij,bkj->bik", B := RNG.standard_normal((4, 3, 3)), B) + 3 * np.eye(3)


def _sharded(value, placement, mesh=M1):
    return distribute(snp.asarray(value), mesh, [placement] * mesh.ndim if mesh is M1
                      else placement)


def run(fn, operands, want_out):
    """``fn`` on the operands laid out as given equals ``fn`` on the whole operands, and its
    results have the placements ``want_out`` (one per result) on M1."""
    whole = fn(*[snp.asarray(v) for v, _ in operands])
    got = fn(*[_sharded(v, p) for v, p in operands])
    got_l = list(got) if isinstance(got, (tuple, list)) else [got]
    whole_l = list(whole) if isinstance(whole, (tuple, list)) else [whole]
    for g, w, p in zip(got_l, whole_l, want_out):
        assert g.placements == (p,), f"result placed {g.placements}, expected {p}"
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12)


IDX = np.array([5, 0, 3, 3, 7, 1, 2, 2])
PIVOTS = snp.asarray(np.array([[3, 2, 3], [1, 3, 3], [2, 2, 3], [1, 2, 3]], np.int32))


def _key_batch_bits(keys):
    """random_bits of a batch of keys (as vmap makes it): one stream per key."""
    return random._random_bits(keys, (3,), np.dtype("uint32"), random.TAG_BITS)
# primitive -> (function, [(operand value, placement on M1)], result placements)
NATURAL = {
    "clip": (lambda x: snp.clip(x, -0.5, 0.5), [(X, S0)], [S0]),
    "round": (lambda x: snp.round(x, 1), [(X, S1)], [S1]),
    "nan_to_num": (snp.nan_to_num, [(X, S0)], [S0]),
    "where": (lambda x, y: snp.where(x > 0, x, y), [(X, S0), (Y, S0)], [S0]),
    "frexp": (snp.frexp, [(X, S1)], [S1, S1]),
    "ldexp": (lambda x: snp.ldexp(x, snp.asarray(np.full((8, 6), 3, np.int32))), [(X, S0)],
              [S0]),
    "stop_gradient": (starling.stop_gradient, [(X, PS)], [PS]),
    "cumsum": (lambda x: snp.cumsum(x, axis=1), [(X, S0)], [S0]),
    "cumprod": (lambda x: snp.cumprod(x, axis=0), [(X, S1)], [S1]),
    "cummax": (lambda x: snp.cummax(x, axis=0), [(X, Partial("max"))], [Partial("max")]),
    "cummin": (lambda x: snp.cummin(x, axis=1), [(X, S0)], [S0]),
    "sort": (lambda x: snp.sort(x, axis=1), [(X, S0)], [S0]),
    "argsort": (lambda x: snp.argsort(x, axis=0), [(X, S1)], [S1]),
    "top_k": (lambda x: snp.top_k(x, 3), [(X, S0)], [S0, S0]),
    "searchsorted": (lambda a, v: snp.searchsorted(a, v), [(np.sort(X[:, 0]), S0), (Y, R)],
                     [PS]),
    "gather": (lambda x, i: gather(x, i), [(X, R), (IDX, S0)], [S0]),
    "scatter": (lambda x, u, i: scatter(x, u, i, op="add"), [(X, R), (Y, S0), (IDX, S0)], [PS]),
    "choose": (lambda w, a, b: snp.choose(w, [a, b]), [((X > 0).astype(np.int32), S1), (X, S1),
                                                       (Y, S1)], [S1]),
    "det": (snp.linalg.det, [(SPD, S0)], [S0]),
    "slogdet": (snp.linalg.slogdet, [(SPD, S0)], [S0, S0]),
    "inv": (snp.linalg.inv, [(SPD, S0)], [S0]),
    "pinv": (snp.linalg.pinv, [(SPD, S0)], [S0]),
    "solve": (snp.linalg.solve, [(SPD, R), (SPD, S2)], [S2]),
    "cholesky": (snp.linalg.cholesky, [(SPD, S0)], [S0]),
    "triangular_solve": (lambda a, b: starling.linalg.triangular_solve(a, b, left_side=True),
                         [(SPD, R), (SPD, S2)], [S2]),
    "lu": (starling.linalg.lu_factor, [(SPD, S0)], [S0, S0]),
    "lu_pivots_to_permutation": (lambda lu, b: starling.linalg.lu_solve(lu, PIVOTS, b),
                                 [(SPD, S0), (SPD, S0)], [S0]),
    "linalg_info": (lambda a: starling.linalg.inv_ex(a)[1], [(SPD, S0)], [S0]),
    "qr": (snp.linalg.qr, [(SPD, S0)], [S0, S0]),
    "svd": (snp.linalg.svd, [(SPD, S0)], [S0, S0, S0]),
    "eigh": (snp.linalg.eigh, [(SPD, S0)], [S0, S0]),
    "matrix_exp": (starling.linalg.matrix_exp, [(SPD, S0)], [S0]),
    "expm_frechet": (starling.linalg.expm_frechet, [(SPD, S0), (SPD, S0)], [S0]),
    "matrix_sqrth": (starling.linalg.matrix_sqrth, [(SPD, S0)], [S0]),
    "sqrtm": (starling.linalg.sqrtm, [(SPD, S0)], [S0]),
    "solve_sylvester": (starling.linalg.solve_sylvester, [(SPD, S0), (SPD, S0), (SPD, S0)],
                        [S0]),
    "hermitian_sylvester": (hermitian_sylvester, [(SPD, S0), (SPD, S0)], [S0]),
    "polar": (starling.linalg.polar, [(SPD, S0)], [S0, S0]),
    "fft": (lambda x: snp.fft.fft(x, axis=1), [(X.astype(np.complex128), S0)], [S0]),
    "philox4x32": (random.philox4x32, [(np.array([1, 2], np.uint32), R),
                                       (RNG.integers(0, 2**32, (8, 4)).astype(np.uint32), S0)],
                   [S0]),
    "random_bits": (lambda k: _key_batch_bits(k), [(RNG.integers(0, 9, (4, 2)).astype(np.uint32),
                                                    S0)], [S0]),
    "reduce_sum": (lambda x: snp.sum(x, axis=1), [(X, S0)], [S0]),
    "reduce_max": (lambda x: snp.max(x, axis=0), [(X, S0)], [Partial("max")]),
    "argmax": (lambda x: snp.argmax(x, axis=1), [(X, S0)], [S0]),
    "dot_general": (snp.matmul, [(X, S0), (Y.T, R)], [S0]),
    "ragged_dot": (lambda x, w: starling.lax.ragged_dot(x, w, np.array([3, 0, 4])),
                   [(X, R), (RNG.standard_normal((3, 6, 4)), S2)], [S1]),
    "reshape": (lambda x: snp.reshape(x, (8, 2, 3)), [(X, S0)], [S0]),
    "broadcast_in_dim": (lambda x: snp.broadcast_to(x, (2, 8, 6)), [(X, S1)], [S2]),
    "transpose": (snp.transpose, [(X, S0)], [S1]),
    "rev": (lambda x: snp.flip(x, 1), [(X, S0)], [S0]),
    "concatenate": (lambda x, y: snp.concatenate([x, y], 1), [(X, S0), (Y, S0)], [S0]),
    "convert_element_type": (lambda x: x.astype(np.float32), [(X, S0)], [S0]),
}
NATURAL["reduce_min"] = (lambda x: snp.min(x, axis=1), [(X, S0)], [S0])
NATURAL["reduce_prod"] = (lambda x: snp.prod(x, axis=1), [(X, S0)], [S0])
NATURAL["reduce_and"] = (lambda x: snp.all(x, axis=1), [(X > 0, S0)], [S0])
NATURAL["reduce_or"] = (lambda x: snp.any(x, axis=1), [(X > 0, S0)], [S0])
NATURAL["argmin"] = (lambda x: snp.argmin(x, axis=0), [(X, S1)], [S0])
NATURAL["squeeze"] = (lambda x: snp.squeeze(x, 1), [(X[:, :1], S0)], [S0])
NATURAL["pad"] = (lambda x: snp.pad(x, ((0, 0), (1, 2))), [(X, S0)], [S0])
NATURAL["slice"] = (lambda x: x[:, 1:4], [(X, S0)], [S0])
NATURAL["eig"] = (snp.linalg.eig, [(SPD, S0)], [S0, S0])
NATURAL["reduce_precision"] = (lambda x: starling.lax.reduce_precision(x, 5, 10), [(X, S1)],
                               [S1])

# Primitives that get their own tests below (position-dependent pieces, bodies).
ELSEWHERE = {"iota": "test_iota_split_counts_from_its_start",
             "scan": "test_scan_keeps_splits", "switch": "test_switch_keeps_splits",
             "while": "test_while_keeps_splits"}


def _has_strategy(prim):
    return prim.sharding is not None and prim.sharding is not RS.replicated_only


def _generic_elementwise():
    """Elementwise primitives without params: each runs on operands split alike."""
    out = {}
    for name, prim in Primitive.registry.items():
        if prim.meta.get("family") == "elementwise" or getattr(prim, "family", None) != \
                "elementwise" or name in NATURAL or "domain" not in prim.meta \
                or prim.multiple_results or "nin" not in prim.meta:
            continue
        out[name] = prim
    return out


def test_every_strategy_is_exercised():
    covered = set(NATURAL) | set(ELSEWHERE) | set(_generic_elementwise())
    missing = sorted(n for n, p in Primitive.registry.items()
                     if _has_strategy(p) and n not in covered and not n.startswith("test_"))
    assert not missing, f"primitives with a strategy but no natural-placement test: {missing}"


@pytest.mark.parametrize("name", sorted(NATURAL))
def test_natural_placement_stays_split(name):
    fn, operands, want = NATURAL[name]
    run(fn, operands, want)


def _domain_operand(domain, k):
    if domain in ("integer", "int_only"):
        return (RNG.integers(1, 5, (8, 6)) + k).astype(np.int32)
    if domain == "bool":
        return RNG.random((8, 6)) > 0.5
    return RNG.uniform(0.1, 0.9, (8, 6)) + 0.01 * k


@pytest.mark.parametrize("name", sorted(_generic_elementwise()))
def test_elementwise_primitive_stays_split(name):
    prim = Primitive.registry[name]
    args = [_domain_operand(prim.meta["domain"], k) for k in range(prim.meta["nin"])]
    whole = prim.bind(*[snp.asarray(a) for a in args])
    for mesh, pl in ((M1, [S0]), (M2, [S1, S0])):
        got = prim.bind(*[distribute(snp.asarray(a), mesh, pl) for a in args])
        assert got.placements == tuple(pl)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(whole))


def test_partial_sums_pass_linear_and_selecting_ops():
    c = snp.asarray(X > 0)
    x, y = _sharded(X, PS), _sharded(Y, PS)
    out = snp.where(c, x, y)
    assert out.placements == (PS,)
    np.testing.assert_allclose(np.asarray(out), np.where(X > 0, X, Y))
    f = snp.fft.fft(_sharded(X.astype(np.complex128), PS), axis=1)
    assert f.placements == (PS,)
    np.testing.assert_allclose(np.asarray(f), np.fft.fft(X, axis=1), atol=1e-12)
    s = snp.linalg.solve(snp.asarray(SPD), _sharded(SPD, PS))
    assert s.placements == (PS,)
    np.testing.assert_allclose(np.asarray(s), np.linalg.solve(SPD, SPD), atol=1e-12)


def test_gather_window_and_scatter_window_dims():
    g = gather(_sharded(X, S1), snp.asarray(IDX))
    assert g.placements == (S1,)
    np.testing.assert_array_equal(np.asarray(g), X[IDX])
    u = RNG.standard_normal((8, 6))
    s = scatter(_sharded(X, S1), _sharded(u, S1), snp.asarray(IDX), op="set")
    assert s.placements == (S1,)
    want = X.copy()
    for i, r in enumerate(IDX):   # "set": the last duplicate wins
        want[r] = u[i]
    np.testing.assert_array_equal(np.asarray(s), want)
    # the piece of a device holding no column: an empty window (was a reshape error)
    empty = scatter(snp.zeros((8, 0)), snp.zeros((8, 0)), snp.asarray(IDX), op="set")
    assert empty.shape == (8, 0)


# ---- random draws and iota: pieces at their global offsets -------------------------------------

def _draw_program(shape, dtype):
    return make_ir(lambda k: random.bits(k, shape, dtype))(random.key(0))


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("shape,mesh,spec", [
    ((10,), M1, P("x")), ((8,), M1, P("x")), ((5, 3), M1, P(None, "x")), ((3, 7), M1, P("x")),
    ((6, 5), M2, P("a", "b")), ((5, 7), M2, P(None, ("a", "b"))), ((2, 3), M2, P(("a", "b"))),
    ((7, 3, 5), M2, P("b", None, "a")), ((0, 3), M1, P("x"))])
def test_sharded_draw_equals_unsharded_bit_for_bit(dtype, shape, mesh, spec):
    k = random.key(1234)
    prog = make_ir(lambda k: random.bits(k, shape, dtype))(k)
    out_s = NamedSharding(mesh, spec)
    part = partition(prog, [NamedSharding(mesh, P())], out_shardings=[out_s])
    got = part.run([k])[0]
    assert got.sharding == out_s
    np.testing.assert_array_equal(np.asarray(got), np.asarray(random.bits(k, shape, dtype)))
    if 0 in shape:   # nothing to draw: every layout costs nothing, the plain draw is kept
        return
    for dev, prog_d in part.programs.items():
        # each device draws only its own elements: no whole draw, no redistribution
        names = {e.primitive.name for e in prog_d.eqns}
        assert "random_bits" not in names and not names & {"shard_slice", "all_gather"}
        local = out_s.local_shape(shape, dev)
        philox = [e for e in prog_d.eqns if e.primitive.name == "philox4x32"]
        assert [tuple(e.outvars[0].aval.shape) for e in philox] == [local + (4,)]


def test_sharded_distributions_and_split_keys():
    k = random.key(7)
    # uniform and split draw their pieces in place; normal (Box-Muller pairs the two halves of
    # one draw) needs the draw whole, but gives the same numbers
    for fn, in_place in ((lambda k: random.uniform(k, (9, 5)), True),
                         (lambda k: random.split(k, 9), True),
                         (lambda k: random.normal(k, (9, 5)), False)):
        prog = make_ir(fn)(k)
        part = partition(prog, [NamedSharding(M2, P())],
                         out_shardings=[NamedSharding(M2, P(("a", "b")))])
        np.testing.assert_array_equal(np.asarray(part.run([k])[0]), np.asarray(fn(k)))
        whole = any("random_bits" in {e.primitive.name for e in p.eqns}
                    for p in part.distinct_programs)
        assert whole != in_place
    keys = random.split(k, 4)   # a batch of keys split: whole streams per device
    got = _key_batch_bits(distribute(keys, M1, [S0]))
    assert got.placements == (S0,)
    want = np.stack([np.asarray(random.bits(kk, (3,))) for kk in keys])
    np.testing.assert_array_equal(np.asarray(got), want)


def test_replicated_key_draws_whole_without_a_hint():
    k = distribute(random.key(3), M1, [R])
    got = random.bits(k, (8, 2))
    assert got.placements == (R,)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(random.bits(random.key(3), (8, 2))))


@pytest.mark.parametrize("dtype", ["int32", "float16", "int8", "float32"])
@pytest.mark.parametrize("shape,dim,mesh,spec", [
    ((10,), 0, M1, P("x")), ((5, 3), 0, M2, P(("a", "b"))), ((3, 300), 1, M2, P("a", "b")),
    ((4, 6), 1, M1, P("x"))])
def test_iota_split_counts_from_its_start(dtype, shape, dim, mesh, spec):
    from starling.arrays.ops.shape_lax import iota
    prog = make_ir(lambda: iota(np.dtype(dtype), shape, dim) * 1)()
    out_s = NamedSharding(mesh, spec)
    part = partition(prog, [], out_shardings=[out_s])
    got = part.run([])[0]
    assert got.sharding == out_s
    assert all(e.primitive.name not in ("shard_slice", "all_gather")
               for p in part.distinct_programs for e in p.eqns)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(iota(np.dtype(dtype), shape, dim)))


# ---- control flow --------------------------------------------------------------------------------

def test_scan_keeps_splits():
    xs = RNG.standard_normal((5, 8, 6))

    def f(c, x):
        return c * 0.5 + snp.sin(x), snp.sum(x, axis=1)
    z = snp.zeros((8, 6), dtype=np.float64)
    want_c, want_y = starling.scan(f, z, snp.asarray(xs))
    # carry and xs split along the (non-scanned) row dim, on a 2-d mesh with uneven pieces
    c0 = distribute(z, M2, [S0, S1])
    got_c, got_y = starling.scan(f, c0, distribute(snp.asarray(xs), M2, [S1, S2]))
    assert got_c.placements == (S0, S1) and got_y.placements == (S1, PS)
    np.testing.assert_allclose(np.asarray(got_c), np.asarray(want_c), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got_y), np.asarray(want_y), rtol=1e-12)
    # consts and carries replicated, xs split
    got_c, got_y = starling.scan(f, z, distribute(snp.asarray(xs), M1, [S2]))
    assert got_y.placements == (PS,)   # a row sum over the split dim: pending
    np.testing.assert_allclose(np.asarray(got_y), np.asarray(want_y), rtol=1e-12)


def test_scan_body_with_communication_runs_replicated():
    # the carry depends on a sum over the split dim: no communication-free body strategy
    def f(c, x):
        return c + snp.sum(x), x * c
    xs = RNG.standard_normal((3, 8))
    c = snp.asarray(np.float64(0.0))
    want = starling.scan(f, c, snp.asarray(xs))
    got = starling.scan(f, c, distribute(snp.asarray(xs), M1, [S1]))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


def test_switch_keeps_splits():
    x = _sharded(X, S0)
    got = starling.switch(1, [lambda a, b: a - b, lambda a, b: a * b + 1.0], x, _sharded(Y, S0))
    assert got.placements == (S0,)
    np.testing.assert_array_equal(np.asarray(got), X * Y + 1.0)
    # branches that disagree on the result layout (a sum over the split dim in one) still agree
    # on the value
    got = starling.cond(False, lambda a: snp.sum(a, 0), lambda a: a[0] * 2.0, x)
    np.testing.assert_allclose(np.asarray(got), X[0] * 2.0)
    got = starling.cond(True, lambda a: snp.sum(a, 0), lambda a: a[0] * 2.0, x)
    np.testing.assert_allclose(np.asarray(got), X.sum(0), rtol=1e-12)


def test_while_keeps_splits():
    x = distribute(snp.asarray(X), M2, [S0, S1])
    out, n = starling.while_loop(lambda v: v[1] < 4, lambda v: (snp.tanh(v[0]) + 0.5, v[1] + 1),
                                 (x, 0))
    assert out.placements == (S0, S1) and int(n) == 4
    want = X
    for _ in range(4):
        want = np.tanh(want) + 0.5
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-12)
    # a predicate reading the split values needs them whole on every device
    out, n = starling.while_loop(lambda v: snp.max(v[0]) < 3.0, lambda v: (v[0] + 1.0, v[1] + 1),
                                 (x, 0))
    k = int(np.ceil(3.0 - X.max()))
    assert int(n) == k
    np.testing.assert_allclose(np.asarray(out), X + k)


# ---- layout hints and partitioner regressions ----------------------------------------------------

def test_constraint_pulls_the_producer_layout():
    from starling.sharding import with_sharding_constraint
    from starling.arrays.ops.shape_lax import iota

    def f(x):
        return x + with_sharding_constraint(iota(np.dtype("float64"), (8, 6), 1) * 2.0,
                                            NamedSharding(M1, P(None, "x")))
    x = snp.asarray(X)
    part = partition(make_ir(f)(x), [NamedSharding(M1, P(None, "x"))])
    names = [e.primitive.name for e in part.distinct_programs[0].eqns]
    assert "shard_slice" not in names and "all_gather" not in names
    np.testing.assert_array_equal(np.asarray(part.run([x])[0]), X + 2.0 * np.arange(6))


def test_device_classes_see_intermediate_layouts():
    # (1,) split by both axes of a 2x2 mesh: devices (0,1), (1,0), (1,1) all hold 0 elements,
    # but gathering the minor axis first gives (0,1) one element and the others none: they
    # must not share one per-device program.
    x = distribute(snp.asarray(np.array([0.5])), M2, [S0, S0])
    np.testing.assert_allclose(np.asarray(snp.arccos(x)), np.arccos([0.5]))


def test_partial_sum_keeps_negative_zero():
    v = np.array([-0.0, 0.0, 1.5])
    for x in (distribute(snp.asarray(v), M1, [PS]),
              distribute(snp.asarray(v), M2, [R, R]).redistribute([PS, PS])):
        back = np.asarray(x.full_array())
        np.testing.assert_array_equal(np.signbit(back), np.signbit(v))
        np.testing.assert_array_equal(1.0 / back, 1.0 / v)


def test_data_parallel_weight_gradient_reduces_instead_of_gathering():
    # the cost model counts work repeated on every device: gathering the batch-split
    # activations to compute the weight gradient whole on each device moves fewer bytes than
    # all-reducing it, but doubles the product; data parallelism reduces the gradient
    from starling.collectives.sharding import NamedSharding
    from starling.sharding import PartitionSpec
    mesh = make_mesh((2,), ("d",), devices=starling.devices()[:2])
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((64, 256)).astype(np.float32)
    w_np = rng.standard_normal((256, 256)).astype(np.float32) / 16
    x = distribute(snp.asarray(x_np), NamedSharding(mesh, PartitionSpec("d", None)))
    w = distribute(snp.asarray(w_np), NamedSharding(mesh, PartitionSpec()))
    f = starling.compile(starling.grad(lambda w, x: snp.sum(snp.tanh(x @ w))),
                         out_shardings=NamedSharding(mesh, PartitionSpec()))
    ir = str(f.lower(w, x).ir)
    assert "all_gather" not in ir and "all_reduce" in ir, ir
    want = x_np.astype(np.float64).T @ (1 - np.tanh(x_np.astype(np.float64) @ w_np) ** 2)
    np.testing.assert_allclose(np.asarray(f(w, x)), want, rtol=2e-4, atol=2e-4)
