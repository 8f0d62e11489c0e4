"""shard_map: derivatives through every differentiable collective (check_grads, closed forms),
composition with the other transformations, bad input, and failures inside one device."""
import threading

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import lax
from starling.collectives import CollectiveError
from starling.core.primitive import Primitive
from starling.sharding import (
    NamedSharding, P, Partial, Replicate, Shard, distribute, make_mesh, redistribute,
)
from starling.test_util import check_grads

pytestmark = pytest.mark.skipif(len(starling.devices()) < 4,
                                reason="needs 4 CPU devices (STARLING_NUM_CPU_DEVICES=4)")

DEV4 = starling.devices()[:4]
M1 = make_mesh((4,), ("i",), devices=DEV4)
M2 = make_mesh((2, 2), ("x", "y"), devices=DEV4)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 3))
W = RNG.standard_normal((3,))
A = RNG.standard_normal((4, 6))
B = RNG.standard_normal((6, 4))
RING = [(r, (r + 1) % 4) for r in range(4)]


def sm(f, mesh, in_specs, out_specs, **kw):
    return starling.shard_map(f, mesh, in_specs=in_specs, out_specs=out_specs, **kw)


# ---- derivatives of every differentiable collective (forward and reverse, order 2) ------------

GRADS = {
    # replicated weights used with split data: their cotangent sums every device's
    "psum-repl-w": (sm(lambda xb, w: lax.psum(snp.sum(snp.sin(xb * w)), "i"), M1,
                       (P("i"), P()), P()), (X, W)),
    "psum-split-out": (sm(lambda xb, w: snp.sin(xb) * lax.psum(snp.sum(xb * w), "i"), M1,
                          (P("i"), P()), P("i")), (X, W)),
    "pmean": (sm(lambda xb, w: lax.pmean(snp.cos(xb) * w, "i"), M1, (P("i"), P()), P()),
              (X, W)),
    "pmax": (sm(lambda xb: lax.pmax(snp.sin(xb), "i") * xb, M1, P("i"), P("i")), (X,)),
    "pmin": (sm(lambda xb: lax.pmin(xb ** 3, "i"), M1, P("i"), P()), (X,)),
    "all_gather": (sm(lambda xb: lax.all_gather(xb ** 2, "i"), M1, P("i"), P()), (X,)),
    "all_gather-tiled": (sm(lambda xb: snp.sin(lax.all_gather(xb, "i", axis=1, tiled=True)), M1,
                            P("i"), P()), (X,)),
    "all_gather-split-out": (sm(lambda xb: lax.all_gather(xb, "i", tiled=True) * snp.sum(xb),
                                M1, P("i"), P("i")), (X,)),
    "psum_scatter-tiled": (sm(lambda xb: lax.psum_scatter(snp.concatenate([xb] * 4) ** 2, "i",
                                                          tiled=True), M1, P("i"), P("i")), (X,)),
    "psum_scatter": (sm(lambda xb: lax.psum_scatter(snp.stack([xb * k for k in range(4)]) ** 2,
                                                    "i"), M1, P("i"), P("i")), (X,)),
    "all_to_all-tiled": (sm(lambda xb: snp.sin(lax.all_to_all(xb, "i", 0, 1, tiled=True)), M1,
                            P(None, "i"), P(None, "i")), (RNG.standard_normal((8, 4)),)),
    "all_to_all": (sm(lambda xb: snp.sin(lax.all_to_all(xb, "i", 0, 1)), M1, P(None, "i"),
                      P(None, "i")), (RNG.standard_normal((4, 4)),)),
    "ppermute-ring": (sm(lambda xb: snp.sin(lax.ppermute(xb, "i", RING)) * xb, M1, P("i"),
                         P("i")), (X,)),
    "ppermute-partial": (sm(lambda xb: snp.sin(lax.ppermute(xb, "i", [(0, 2), (3, 1)])) * xb, M1,
                            P("i"), P("i")), (X,)),
    "axis_index": (sm(lambda xb: xb ** 2 * lax.axis_index("i"), M1, P("i"), P("i")), (X,)),
    "pvary": (sm(lambda xb, w: xb * lax.pvary(w ** 2, "i"), M1, (P("i"), P()), P("i")), (X, W)),
    # 2-d mesh: out_specs naming some axes only
    "2d-matmul-psum-y": (sm(lambda a, b: lax.psum(a @ b, "y"), M2, (P("x", "y"), P("y")),
                            P("x")), (A, B)),
    "2d-psum-x": (sm(lambda a, b: lax.psum(snp.tanh(a @ b), "x"), M2, (P("x", "y"), P("y")),
                     P(None, "y")), (A, B)),
    "2d-psum-xy-repl-w": (sm(lambda a, w: lax.psum(snp.sum(snp.tanh(a * w)), ("x", "y")), M2,
                             (P("x", "y"), P()), P()), (A, W)),
    "2d-all_gather-y": (sm(lambda a: lax.all_gather(snp.sin(a), "y", axis=1, tiled=True), M2,
                           P("x", "y"), P("x")), (A,)),
    "2d-ppermute-yx": (sm(lambda a: lax.ppermute(a ** 2, ("y", "x"), [(0, 3), (3, 1), (1, 0)]),
                          M2, P("x", "y"), P("x", "y")), (A,)),
    "2d-psum_scatter-y": (sm(lambda a, w: lax.psum_scatter(snp.cos(a) * w[:2], "y", tiled=True),
                             M2, (P("x"), P()), P("x", "y")), (RNG.standard_normal((4, 2)), W)),
    "2d-gathers": (sm(lambda a: lax.all_gather(a, "x", tiled=True) + lax.psum(
        lax.all_gather(a, "y", axis=1, tiled=True).sum(), "x"), M2, P("x", "y"), P(None, "y")),
        (A[:, :4],)),
    # several outputs, mixed specs, one not differentiable (int)
    "multi-out": (sm(lambda xb, w, cb: (lax.psum(snp.sum(xb * w), "i"), snp.sin(xb) * cb, cb * 2,
                                        lax.all_gather(w * cb[0], "i"), lax.axis_index("i")[None]),
                     M1, (P("i"), P(), P("i")), (P(), P("i"), P("i"), P(), P("i"))),
                  (X, W, RNG.standard_normal((8, 3)))),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_check_grads(name):
    f, args = GRADS[name]
    check_grads(f, args, order=2)


def test_replicated_weight_gradient_sums_every_device():
    """grad of a replicated weight = the gradient of the whole (unsharded) loss."""
    loss = GRADS["psum-repl-w"][0]
    np.testing.assert_allclose(starling.grad(loss, argnums=1)(X, W),
                               np.sum(X * np.cos(X * W), 0), rtol=1e-12)
    np.testing.assert_allclose(starling.grad(loss)(X, W), W * np.cos(X * W), rtol=1e-12)
    # the weight replicated along one mesh axis and split along the other
    f = sm(lambda a, w: lax.psum(snp.sum(a * w), ("x", "y")), M2, (P("x", "y"), P(None, "y")),
           P())
    w = RNG.standard_normal((1, 6))
    np.testing.assert_allclose(starling.grad(f, argnums=1)(A, w), A.sum(0, keepdims=True),
                               rtol=1e-12)


def test_sharded_arguments_in_other_layouts():
    """Arguments that are already sharded arrays are redistributed to the in_specs."""
    x = np.arange(16.0).reshape(4, 4)
    y = sm(lambda b: b * 2, M2, P(("x", "y")), P(("x", "y")))(x)     # rows over all devices
    f = sm(lambda b: lax.psum(b, "x"), M2, P(None, "x"), P())
    want = 2 * x[:, :2] + 2 * x[:, 2:]
    np.testing.assert_array_equal(f(y), want)
    np.testing.assert_array_equal(f(2 * x), want)
    z = distribute(2 * x, M2, [Partial("sum"), Shard(1)])    # a pending sum over "x"
    np.testing.assert_array_equal(f(z), want)


def test_pmax_pmin_gradient_ties_split_evenly():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    f = sm(lambda b: lax.pmax(b, "i"), M1, P("i"), P())
    np.testing.assert_array_equal(starling.grad(lambda v: snp.sum(f(v)))(x), [0, 0.5, 0.5, 0])
    g = sm(lambda b: lax.pmin(b, "i"), M1, P("i"), P())
    np.testing.assert_array_equal(starling.grad(lambda v: snp.sum(g(v)))(np.array(
        [1.0, 3.0, 1.0, 1.0])), [1 / 3, 0, 1 / 3, 1 / 3])
    np.testing.assert_array_equal(starling.jvp(f, (x,), (np.array([1.0, 2.0, 4.0, 8.0]),))[1],
                                  [3.0])


# ---- composition with the other transformations ------------------------------------------------

LOSS = GRADS["psum-repl-w"][0]


def _dw(x, w):
    return np.sum(x * np.cos(x * w), 0)


def _d2w(x, w):
    return np.sum(-x * x * np.sin(x * w), 0)


def test_grad_of_grad_and_jvp_of_grad():
    gw = starling.grad(LOSS, argnums=1)
    np.testing.assert_allclose(starling.grad(lambda w: snp.sum(gw(X, w)))(W), _d2w(X, W))
    np.testing.assert_allclose(starling.jvp(lambda w: gw(X, w), (W,), (np.ones(3),))[1],
                               _d2w(X, W))


def test_vmap_of_grad_and_of_shard_map():
    ws = RNG.standard_normal((5, 3))
    got = starling.vmap(lambda w: starling.grad(LOSS, argnums=1)(X, w))(ws)
    np.testing.assert_allclose(got, np.stack([_dw(X, w) for w in ws]))
    np.testing.assert_allclose(starling.vmap(lambda w: LOSS(X, w))(ws),
                               [np.sum(np.sin(X * w)) for w in ws])
    xs = RNG.standard_normal((8, 2, 3))
    np.testing.assert_allclose(starling.vmap(LOSS, in_axes=(1, None))(xs, W),
                               [np.sum(np.sin(xs[:, k] * W)) for k in range(2)])


def test_shard_map_of_vmap():
    ws = RNG.standard_normal((5, 3))
    f = sm(lambda xb, ws: lax.psum(starling.vmap(lambda w: snp.sum(snp.sin(xb * w)))(ws), "i"),
           M1, (P("i"), P()), P())
    np.testing.assert_allclose(f(X, ws), [np.sum(np.sin(X * w)) for w in ws])
    check_grads(f, (X, ws), order=2)
    # vmap with an axis name inside the body, its collectives mixed with the mesh axis
    g = sm(lambda xb: starling.vmap(lambda r: lax.psum(snp.sum(r), ("i", "v")), axis_name="v")(
        xb), M1, P("i"), P())
    np.testing.assert_allclose(g(X), np.full(2, X.sum()))


def test_shard_map_inside_control_flow():
    def carry0(w):
        return snp.sum(w) * 0 + 1

    check_grads(lambda w: lax.scan(lambda c, _: (c + LOSS(X, w * c), None), carry0(w), None,
                                   length=3)[0], (W,), order=2)
    for w in (W, -np.abs(W)):
        check_grads(lambda w: lax.cond(snp.sum(w) > 0, lambda w: LOSS(X, w),
                                       lambda w: LOSS(X, 2 * w), w), (w,), order=2)
    check_grads(lambda w: lax.fori_loop(0, 3, lambda i, c: c + LOSS(X, w * c), carry0(w)), (W,),
                order=2)
    check_grads(lambda w: lax.while_loop(lambda c: c[1] < 3,
                                         lambda c: (c[0] + LOSS(X, w * c[0]), c[1] + 1),
                                         (carry0(w), 0))[0], (W,), order=2, modes=("fwd",))


def _scan_psum(xb, w):
    # a collective inside the loop body: its result (invariant) meets the varying carry
    return lax.scan(lambda c, r: (c + lax.psum(snp.sum(snp.sin(r * w * c)), "i"), None),
                    snp.sum(w) * 0 + 1, xb)[0]


def _cond_psum(xb, w):
    return lax.cond(snp.sum(w) > 0, lambda a: lax.psum(snp.sum(snp.sin(a * w)), "i"),
                    lambda a: lax.pmax(snp.sum(a * w) ** 2, "i"), xb)


def _fori_ppermute(xb, w):
    return lax.fori_loop(0, 3, lambda i, c: lax.ppermute(c * snp.sin(xb * w), "i", RING), xb)


@pytest.mark.parametrize("name,f,out", [
    ("scan-psum", _scan_psum, P()),
    ("cond-psum", _cond_psum, P()),
    ("cond-psum-split-out", lambda xb, w: xb * _cond_psum(xb, w), P("i")),
    ("scan", lambda xb, w: lax.psum(lax.scan(lambda c, r: (c + snp.sum(snp.sin(r * w * c)), None),
                                             snp.sum(w) * 0 + 1, xb)[0], "i"), P()),
    ("fori", lambda xb, w: lax.psum(lax.fori_loop(0, 3, lambda i, c: c * snp.sin(xb * w), xb),
                                    "i"), P()),
    ("fori-ppermute", _fori_ppermute, P("i")),
    ("checkpoint", lambda xb, w: lax.psum(starling.checkpoint(
        lambda a, w: snp.sum(snp.sin(a * w)))(xb, w), "i"), P()),
])
def test_control_flow_inside_shard_map_body(name, f, out):
    """Bodies of control flow inside a shard_map body are typed like the body itself (pvary
    where an invariant value meets a varying one), so reverse mode sums what it must. Outputs
    of control flow are typed varying, so P() outputs need check_rep=False."""
    g = sm(f, M1, (P("i"), P()), out, check_rep=out != P())
    check_grads(g, (X, W), order=2)


def test_control_flow_output_varying_inside_is_not_claimed_replicated():
    # the branch output varies with the device although the operand is replicated
    f = sm(lambda w: lax.cond(True, lambda w: w * lax.axis_index("i"), lambda w: w, w), M1,
           P(), P())
    with pytest.raises(ValueError, match=r"claims it is the same on every device along mesh "
                                         r"axes \['i'\]"):
        f(W)
    g = sm(lambda w: lax.cond(True, lambda w: w * lax.axis_index("i"), lambda w: w, w), M1,
           P(), P("i"))
    np.testing.assert_array_equal(g(W[:1]), W[0] * np.arange(4))


def test_checkpoint_around_shard_map():
    check_grads(starling.checkpoint(LOSS), (X, W), order=2)
    np.testing.assert_allclose(starling.grad(starling.checkpoint(LOSS), argnums=1)(X, W),
                               _dw(X, W))


def test_compile_around_shard_map():
    np.testing.assert_allclose(starling.compile(LOSS)(X, W), np.sum(np.sin(X * W)))
    np.testing.assert_allclose(starling.compile(starling.grad(LOSS, argnums=1))(X, W), _dw(X, W))
    np.testing.assert_allclose(starling.grad(starling.compile(LOSS), argnums=1)(X, W), _dw(X, W))


@pytest.mark.parametrize("body,out", [(_scan_psum, P()), (_cond_psum, P()),
                                      (_fori_ppermute, P("i"))],
                         ids=["scan-psum", "cond-psum", "fori-ppermute"])
def test_compile_of_grad_with_control_flow_in_body(body, out):
    """Transformed bodies hold constants (a scan's linearized body): compiled per-device
    programs evaluate them with those constants."""
    g = sm(body, M1, (P("i"), P()), out, check_rep=out != P())

    def loss(x, w):
        return snp.sum(g(x, w) ** 2)

    want = starling.grad(loss, argnums=(0, 1))(X, W)
    for got in (starling.compile(starling.grad(loss, argnums=(0, 1)))(X, W),
                starling.grad(starling.compile(loss), argnums=(0, 1))(X, W)):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_custom_jvp_inside_shard_map_body():
    @starling.custom_jvp
    def f(x):
        return x

    f.defjvp(lambda p, t: (p[0], 2 * t[0]))
    g = sm(lambda xb: lax.psum(snp.sum(f(xb)), "i"), M1, P("i"), P())
    np.testing.assert_array_equal(starling.grad(g)(np.ones(4)), np.full(4, 2.0))
    np.testing.assert_array_equal(starling.compile(starling.grad(g))(np.ones(4)), np.full(4, 2.0))
    np.testing.assert_array_equal(starling.compile(g)(np.ones(4)), 4.0)
    # custom_vjp too, and under vmap of the shard_map
    @starling.custom_vjp
    def h(x):
        return x
    h.defvjp(lambda x: (x, None), lambda _, ct: (3 * ct,))
    k = sm(lambda xb: lax.psum(snp.sum(h(xb)), "i"), M1, P("i"), P())
    np.testing.assert_array_equal(starling.grad(k)(np.ones(4)), np.full(4, 3.0))
    np.testing.assert_array_equal(
        starling.vmap(starling.grad(k))(np.ones((2, 4))), np.full((2, 4), 3.0))


# ---- bad input: clear errors naming the op, the mesh axes and the shapes ----------------------

def test_make_mesh_wrong_device_count():
    n = len(starling.devices())
    with pytest.raises(ValueError, match=rf"make_mesh: a mesh of shape \({n + 1},\) needs "
                                         rf"{n + 1} devices, but {n} are available.*"
                                         r"STARLING_NUM_CPU_DEVICES"):
        make_mesh((n + 1,), ("i",))
    # fewer than all: the message says how to pick them (JAX's make_mesh takes exactly all)
    with pytest.raises(ValueError, match=rf"needs 3 devices, but {n} are available; to use some "
                                         r"of them, pass devices=starling.devices\(\)\[:3\]"):
        make_mesh((3,), ("i",))
    assert make_mesh((3,), ("i",), devices=starling.devices()[:3]).devices.size == 3
    with pytest.raises(ValueError, match=r"\(2, 3\) needs 6 devices, but 4 were given$"):
        make_mesh((2, 3), ("a", "b"), devices=DEV4)
    with pytest.raises(ValueError, match=r"1 axis sizes \(4,\) but 2 names"):
        make_mesh((4,), ("i", "j"))


def test_spec_longer_than_the_array_rank():
    # trailing None entries do not change a layout, but a spec longer than the array is a
    # mistake (JAX rejects it too): every entry point says so
    msg = r"sharding PartitionSpec\('i', None\) has 2 entries but the array has shape \(4,\)"
    with pytest.raises(ValueError, match="shard_map.*" + msg):
        sm(lambda b: b, M1, P("i", None), P("i"))(np.ones(4))
    with pytest.raises(ValueError, match="out_specs.*" + msg.replace("(4,", "(1,")):
        sm(lambda b: b, M1, P("i"), P("i", None))(np.ones(4))
    with pytest.raises(ValueError, match="distribute: " + msg):
        distribute(snp.ones(4), NamedSharding(M1, P("i", None)))
    with pytest.raises(ValueError, match=r"compile \(in_shardings.*" + msg):
        starling.compile(lambda x: x * 2, in_shardings=NamedSharding(M1, P("i", None)))(
            snp.ones(4))
    with pytest.raises(ValueError, match=r"compile \(out_shardings of output 0\).*" + msg):
        starling.compile(lambda x: x * 2, out_shardings=NamedSharding(M1, P("i", None)))(
            snp.ones(4))
    # as long as the rank: fine
    out = distribute(snp.ones((4, 2)), NamedSharding(M1, P("i", None)))
    assert out.placements == (Shard(0),)


def test_unknown_axis_names():
    x = np.arange(8.0)
    with pytest.raises(ValueError, match=r"shard_map\(<lambda>\): in_specs of argument \[0\] "
                                         r"\(shape \(8,\)\).*axis 'z'.*\{'i': 4\}"):
        sm(lambda b: b, M1, P("z"), P("i"))(x)
    with pytest.raises(ValueError, match=r"out_specs of output <root>.*axis 'z'.*\{'i': 4\}"):
        sm(lambda b: b, M1, P("i"), P("z"))(x)
    with pytest.raises(NameError, match=r"psum: unbound axis name 'z'.*axes in scope here: "
                                        r"\['i'\]"):
        sm(lambda b: lax.psum(b, "z"), M1, P("i"), P("i"))(x)
    with pytest.raises(NameError, match=r"all_gather: unbound axis name 'y'.*\['i'\]"):
        sm(lambda b: lax.all_gather(b, ("i", "y")), M1, P("i"), P("i"))(x)
    with pytest.raises(ValueError, match=r"mesh axis is used twice in PartitionSpec\('x', 'x'\)"):
        sm(lambda b: b, M2, P("x", "x"), P("x"))(np.ones((4, 4)))


@pytest.mark.parametrize("call", [
    lambda x: lax.psum(x, "i"), lambda x: lax.pmean(x, "i"), lambda x: lax.all_gather(x, "i"),
    lambda x: lax.ppermute(x, "i", [(0, 1)]), lambda x: lax.psum_scatter(x, "i"),
    lambda x: lax.all_to_all(x, "i", 0, 0), lambda x: lax.axis_index("i"),
    lambda x: lax.axis_size("i")])
def test_collective_outside_shard_map_and_vmap(call):
    with pytest.raises(NameError, match=r"unbound axis name 'i'.*shard_map.*vmap.*axes in scope "
                                        r"here: none"):
        call(np.arange(4.0))


def test_out_specs_claiming_replication_disproved():
    with pytest.raises(ValueError, match=r"out_specs PartitionSpec\(\) of output <root> \(block "
                                         r"f64\[2\]\) claims it is the same on every device along "
                                         r"mesh axes \['i'\].*check_rep=False"):
        sm(lambda b: b * 2, M1, P("i"), P())(np.arange(8.0))
    with pytest.raises(ValueError, match=r"block f64\[2,2\].*along mesh axes \['y'\]"):
        sm(lambda b: lax.psum(b, "x"), M2, P("x", "y"), P())(np.ones((4, 4)))
    # check_rep=False takes the claim on trust
    out = sm(lambda b: lax.psum(b, "i") * 0 + 1, M1, P("i"), P(), check_rep=False)(np.ones(4))
    np.testing.assert_array_equal(out, [1.0])


def test_specs_not_a_prefix():
    x = np.arange(8.0)
    with pytest.raises(ValueError, match=r"in_specs .* is not a pytree prefix of the arguments: "
                                         r".*expected: 3, got: 2.*float64\[8\]"):
        sm(lambda a, b: a, M1, (P("i"), P(), P()), P("i"))(x, x)
    with pytest.raises(ValueError, match=r"missing key\(s\): \['b'\].*float64\[8\]"):
        sm(lambda d: d["a"], M1, ({"b": P("i")},), P("i"))({"a": x})
    with pytest.raises(ValueError, match=r"out_specs .* is not a pytree prefix of the outputs: "
                                         r".*float64\[2\]"):
        sm(lambda a: (a, a), M1, P("i"), (P("i"), P("i"), P()))(x)
    with pytest.raises(TypeError, match=r"in_specs of argument \[0\] \(shape \(8,\)\) must be "
                                        r"PartitionSpecs, got 'i'"):
        sm(lambda b: b, M1, "i", P())(x)


def test_compile_shardings_not_a_prefix_name_shapes_not_data():
    x = np.arange(8.0)
    sh = NamedSharding(M1, P("i"))
    with pytest.raises(ValueError, match=r"in_shardings .* is not a pytree prefix of the "
                                         r"arguments: .*expected: 1, got: 2; tuple: "
                                         r"\(float64\[8\], float64\[8\]\)\.$"):
        starling.compile(lambda a, b: a + b, in_shardings=(sh,))(x, x)
    with pytest.raises(ValueError, match=r"out_shardings .* is not a pytree prefix of the "
                                         r"outputs: .*expected: 3, got: 2; tuple: "
                                         r"\(float64\[8\], float64\[8\]\)\.$"):
        starling.compile(lambda a: (a, a), out_shardings=(sh, sh, sh))(x)


def test_uneven_blocks():
    with pytest.raises(ValueError, match=r"argument \[0\] of shape \(6,\) has dim 0 of size 6, not "
                                         r"divisible by the 4 devices of mesh axes \('i',\)"):
        sm(lambda a: a, M1, P("i"), P("i"))(np.arange(6.0))
    with pytest.raises(ValueError, match=r"argument \[1\]\['w'\] of shape \(2, 3\) has dim 1 of "
                                         r"size 3, not divisible by the 2 devices of mesh axes "
                                         r"\('y',\)"):
        sm(lambda a, d: a, M2, (P("x"), {"w": P(None, "y")}), P("x"))(np.ones(4),
                                                                      {"w": np.ones((2, 3))})


def test_redistribute_to_impossible_placements():
    x = distribute(np.ones((4, 4)), M2, [Shard(0), Replicate()])
    with pytest.raises(ValueError, match=r"redistribute\(f64\[4,4\]\): Shard\(dim=5\) is out of "
                                         r"range for an array with 2 dims"):
        redistribute(x, [Shard(5), Replicate()])
    with pytest.raises(ValueError, match=r"redistribute\(f64\[4,4\]\): 1 placements "
                                         r"\[Shard\(dim=0\)\] for a mesh with 2 axes "
                                         r"\{'x': 2, 'y': 2\}"):
        redistribute(x, [Shard(0)])
    with pytest.raises(ValueError, match=r"distribute\(f64\[4,4\]\): 3 placements"):
        distribute(np.ones((4, 4)), M2, [Shard(0), Replicate(), Replicate()])
    with pytest.raises(ValueError, match=r"PartitionSpec\(None, 'x'\) has 2 entries but the "
                                         r"array has shape \(4,\)"):
        redistribute(distribute(np.ones(4), M2, [Shard(0), Replicate()]), P(None, "x"))
    with pytest.raises(ValueError, match=r"Partial: reduce_op must be one of .* got 'median'"):
        redistribute(x, [Partial("median"), Replicate()])


@pytest.mark.parametrize("perm,match", [
    ([(0, 1), (0, 2)], r"ppermute over axes \('i',\): rank 0 sends more than once in perm "
                       r"\(\(0, 1\), \(0, 2\)\)"),
    ([(0, 1), (2, 1)], r"rank 1 receives more than once"),
    ([(0, 4)], r"ranks must be in \[0, 4\) for axes \('i',\)"),
])
def test_ppermute_bad_perm(perm, match):
    with pytest.raises(ValueError, match=match):
        sm(lambda b: lax.ppermute(b, "i", perm), M1, P("i"), P("i"))(np.arange(8.0))


def test_scatter_and_all_to_all_non_divisible():
    x = np.arange(12.0)
    cases = [
        (lambda b: lax.psum_scatter(b, "i", tiled=True),
         r"psum_scatter: dim 0 of the operand of shape \(3,\) must be divisible by 4 \(the size "
         r"of axes \('i',\)\)"),
        (lambda b: lax.psum_scatter(b, "i"), r"psum_scatter: .*must be equal to 4"),
        (lambda b: lax.all_to_all(b, "i", 0, 0, tiled=True),
         r"all_to_all: split dim 0 of the operand of shape \(3,\) must be divisible by 4"),
        (lambda b: lax.all_to_all(b, "i", 0, 0), r"all_to_all: .*must be equal to 4"),
        (lambda b: lax.psum_scatter(b, "i", op="median"),
         r"psum_scatter: op must be one of \('sum', 'max', 'min', 'prod'\), got 'median'"),
        (lambda b: lax.all_gather(b, "i", axis=3),
         r"all_gather: axis 3 is out of range for an operand with 1 dims"),
    ]
    for f, match in cases:
        with pytest.raises(ValueError, match=match):
            sm(f, M1, P("i"), P("i"))(x)


def test_vmap_mixed_axes_unsupported_collectives():
    x = np.ones((4, 8))
    for f, name in [(lambda r: lax.psum_scatter(r, ("i", "v"), tiled=True), "psum_scatter"),
                    (lambda r: lax.all_to_all(r, ("v", "i"), 0, 0, tiled=True), "all_to_all"),
                    (lambda r: lax.ppermute(r, ("i", "v"), [(0, 1)]), "ppermute")]:
        g = sm(lambda b: starling.vmap(f, axis_name="v")(b), M1, P("i"), P("i"))
        with pytest.raises(ValueError, match=rf"{name}: under vmap\(axis_name='v'\) the axes "
                                             r".* must be just the vmap axis"):
            g(x)


# ---- a failure inside one device's computation ---------------------------------------------------

check_nonneg_p = Primitive("test_check_nonneg")   # test_ prefix: the rules audit skips it


def _check_nonneg(x):
    if np.any(np.asarray(x) < 0):
        raise FloatingPointError(f"check_nonneg: negative entries in a block of shape "
                                 f"{np.shape(x)}")
    return x


check_nonneg_p.impl = _check_nonneg
check_nonneg_p.abstract_eval = lambda x: x


def no_hang(fn, timeout=60.0):
    """``fn()`` in a thread; fails (instead of hanging the suite) if it does not return."""
    box = {}

    def run():
        try:
            box["out"] = fn()
        except BaseException as e:   # re-raised in the caller
            box["err"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"the SPMD run hung for {timeout} s"
    if "err" in box:
        raise box["err"]
    return box["out"]


@pytest.mark.parametrize("body,x", [
    # the failing device never reaches the psum its peers wait in
    (lambda b: lax.psum(check_nonneg_p.bind(b), "i"), [1.0, 2.0, -1.0, 3.0]),
    # it fails after a first collective, between two
    (lambda b: lax.psum(check_nonneg_p.bind(lax.ppermute(b, "i", RING)), "i"),
     [1.0, 2.0, -1.0, 3.0]),
    # devices 0 and 1 fail
    (lambda b: lax.all_gather(check_nonneg_p.bind(b * (lax.axis_index("i") - 1.5)), "i"),
     [1.0, 1.0, 1.0, 1.0]),
], ids=["before", "between", "two-devices"])
def test_failure_on_one_device_reaches_the_caller(body, x):
    f = sm(body, M1, P("i"), P(), check_rep=False)
    with pytest.raises(FloatingPointError, match=r"check_nonneg: negative entries in a block "
                                                 r"of shape \(1,\)"):
        no_hang(lambda: f(np.array(x)))
    # the devices are free again
    np.testing.assert_array_equal(sm(lambda b: lax.psum(b, "i"), M1, P("i"), P())(np.ones(4)),
                                  [4.0])


def test_devices_running_different_collectives_do_not_hang():
    trip = sm(lambda b: lax.fori_loop(0, lax.axis_index("i"), lambda k, c: lax.psum(c, "i"), b),
              M1, P("i"), P("i"))
    with pytest.raises(CollectiveError, match=r"all_reduce\(op=sum\) of float64\[1\] \(collective "
                                              r"#0 of the group .*\) can never complete: "
                                              r"\[CpuDevice\(id=0\)\] finished without calling it"):
        no_hang(lambda: trip(np.ones(4)))
    other = sm(lambda b: lax.cond(lax.axis_index("i") == 2, lambda b: lax.pmax(b, "i"),
                                  lambda b: lax.psum(b, "i"), b), M1, P("i"), P("i"))
    # which device arrives first varies: the message lists what each member called
    with pytest.raises(CollectiveError, match=r"disagree on its collective #0: "
                                              r"all_reduce\(op=max\) of float64\[1\] on "
                                              r"\[CpuDevice\(id=2\)\]; all_reduce\(op=sum\) of "
                                              r"float64\[1\] on \[CpuDevice\(id=[013]"):
        no_hang(lambda: other(np.ones(4)))
    kinds = sm(lambda b: lax.cond(lax.axis_index("i") == 0, lambda b: lax.all_gather(b, "i")[0],
                                  lambda b: lax.ppermute(b, "i", RING), b), M1, P("i"), P("i"))
    with pytest.raises(CollectiveError, match=r"disagree on its collective #0: all_gather\(axis=0, "
                                              r"tiled=False\) of float64\[1\] on "
                                              r"\[CpuDevice\(id=0\)\]; ppermute\(perm="):
        no_hang(lambda: kinds(np.ones(4)))


def test_concurrent_calls_from_threads_do_not_deadlock():
    """Runs started by several Python threads at once queue on every device in one order."""
    f = sm(lambda b: lax.psum(lax.ppermute(b, "i", RING) * 2, "i"), M1, P("i"), P())
    results, errors = {}, []

    def worker(k):
        try:
            results[k] = [float(np.asarray(f(np.arange(4.0) + k))[0]) for _ in range(30)]
        except Exception as e:   # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "concurrent SPMD runs deadlocked"
    assert not errors, errors
    assert results == {k: [2.0 * (6 + 4 * k)] * 30 for k in range(4)}
