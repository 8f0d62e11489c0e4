"""Transformation rules of the shape primitives (reshape, broadcast_in_dim, transpose, squeeze,
rev, concatenate, pad, slice, iota): closed-form gradients, the lax-level parameters the public
ops never reach (negative and interior padding, strided slices, size-1 expansion), vmap with
in_axes None / -1 against a Python loop, and composition (jvp of vmap of grad)."""
import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling.arrays.ops import shape_lax as L
from starling.core.ad_util import Zero
from starling.test_util import check_grads


def rand(rng, *shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


def close(got, want, **kw):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-9, **kw)


# ---- closed-form gradients -----------------------------------------------------------------

def test_grad_sum_of_squares_through_reshape(rng):
    x = rand(rng, 2, 3, 4)
    g = starling.grad(lambda x: snp.sum(x.reshape(4, -1) ** 2))(snp.asarray(x))
    assert g.shape == (2, 3, 4)
    close(g, 2 * x)


def test_grad_through_concatenate_split(rng):
    a, b = rand(rng, 2, 3), rand(rng, 4, 3)

    def f(a, b):
        c = snp.concatenate([a, 3.0 * b], axis=0)          # (6, 3)
        p, q, r = snp.split(c, [1, 4], axis=0)
        return snp.sum(p) + 2.0 * snp.sum(q ** 2) + 5.0 * snp.sum(r)

    ga, gb = starling.grad(f, argnums=(0, 1))(snp.asarray(a), snp.asarray(b))
    c = np.concatenate([a, 3 * b])
    gc = np.concatenate([np.ones((1, 3)), 4 * c[1:4], 5 * np.ones((2, 3))])
    close(ga, gc[:2])
    close(gb, 3 * gc[2:])


def test_grad_through_pad_and_slicing(rng):
    x = rand(rng, 3, 4)
    w = rand(rng, 5, 9)
    f = lambda x: snp.sum(snp.pad(x, ((1, 1), (2, 3)), constant_values=7.0) * w)
    close(starling.grad(f)(snp.asarray(x)), w[1:4, 2:6])
    g = lambda x: snp.sum(x[::2, 1:] * w[:2, :3]) + snp.sum(x[::-1, 0])
    want = np.zeros_like(x)
    want[::2, 1:] = w[:2, :3]
    want[:, 0] += 1
    close(starling.grad(g)(snp.asarray(x)), want)


def test_grad_of_pad_value_counts_padded_positions(rng):
    x = snp.asarray(rand(rng, 2, 3))
    w = rand(rng, 2 + 1 + 2, 3 + 0 + 4)

    def f(v):
        return snp.sum(snp.pad(x, ((1, 2), (0, 4)), constant_values=v) * w)

    mask = np.ones_like(w, bool)
    mask[1:3, 0:3] = False
    close(starling.grad(f)(snp.asarray(0.5)), w[mask].sum())


def test_grad_through_transpose_and_broadcast_to(rng):
    x = rand(rng, 2, 3, 4)
    w = rand(rng, 4, 2, 3)
    close(starling.grad(lambda x: snp.sum(snp.permute_dims(x, (2, 0, 1)) * w))(snp.asarray(x)),
          np.transpose(w, (1, 2, 0)))
    w2 = rand(rng, 4, 3, 2)
    close(starling.grad(lambda x: snp.sum(x.T * w2))(snp.asarray(x)), w2.T)
    # broadcast_to: the gradient sums over the broadcast dims (new leading and stretched 1s)
    y = rand(rng, 3, 1)
    v = rand(rng, 5, 3, 4)
    g = starling.grad(lambda y: snp.sum(snp.broadcast_to(y, (5, 3, 4)) * v))(snp.asarray(y))
    assert g.shape == (3, 1)
    close(g, v.sum(axis=(0, 2))[:, None])


def test_grad_squeeze_expand_flip_roll(rng):
    x = rand(rng, 1, 4, 1)
    w = rand(rng, 4)
    f = lambda x: snp.sum(snp.roll(snp.flip(snp.squeeze(x)), 1) * w)
    want = np.roll(w, -1)[::-1].reshape(1, 4, 1)
    close(starling.grad(f)(snp.asarray(x)), want)


def test_integer_outputs_have_zero_tangents():
    x = snp.asarray(np.arange(6))
    y, t = starling.jvp(lambda x: snp.reshape(x, (2, 3)), (x,), (np.zeros(6, snp.float0),))
    assert t.dtype == snp.float0 and t.shape == (2, 3)


# ---- lax-level parameters, check_grads order 2 -----------------------------------------------

PAD_CONFIGS = [
    ((1, 2, 0), (0, 3, 0)),
    ((-1, 2, 1), (2, -2, 0)),          # crop one edge, pad the other, interior padding
    ((0, 0, 2), (-1, -1, 1)),
    ((-2, -1, 1), (3, 0, 3)),
]


@pytest.mark.parametrize("config", PAD_CONFIGS, ids=str)
def test_pad_lax_grads(rng, config):
    x = rand(rng, 3, 4)
    check_grads(lambda x, v: L.pad(x, v, config), [x, np.array(0.7)], order=2)


@pytest.mark.parametrize("config", PAD_CONFIGS, ids=str)
def test_pad_lax_transpose_matches_numpy(rng, config):
    x = rand(rng, 3, 4)
    out_shape = L._pad_impl(x, 0.0, padding_config=config).shape
    ct = rand(rng, *out_shape)
    _, vjp = starling.vjp(lambda x, v: L.pad(x, v, config), snp.asarray(x),
                          snp.asarray(np.float64(0)))
    gx, gv = vjp(snp.asarray(ct))
    # the vjp of a linear map is its transpose: compare with the dense Jacobian
    basis = np.eye(x.size).reshape(x.size, 3, 4)
    jac = np.stack([L._pad_impl(b, 0.0, padding_config=config).ravel() for b in basis], 1)
    close(gx, (jac.T @ ct.ravel()).reshape(3, 4))
    close(gv, ct[L._pad_mask((3, 4), config)].sum())


@pytest.mark.parametrize("args", [
    ((0, 1), (3, 4), (2, 3)), ((1, 0), (2, 4), None), ((0, 0), (0, 4), (1, 1)),
    ((2, 1), (3, 2), (5, 7)),
], ids=str)
def test_slice_lax_grads(rng, args):
    x = rand(rng, 3, 4)
    check_grads(lambda x: L.static_slice(x, *args), [x], order=2)


@pytest.mark.parametrize("shape,dims", [((3, 1), (0, 2)), ((1,), (1,)), ((), ()),
                                        ((2, 1), (1, 2))], ids=str)
def test_broadcast_in_dim_grads(rng, shape, dims):
    x = rand(rng, *shape)
    out = (2, 3, 4)
    out = tuple(shape[dims.index(d)] if d in dims and shape[dims.index(d)] != 1 else o
                for d, o in enumerate(out))
    check_grads(lambda x: L.broadcast_in_dim(x, out, dims), [x], order=2)


def test_concatenate_grads_complex(rng):
    a = rand(rng, 2, 3) + 1j * rand(rng, 2, 3)
    b = rand(rng, 2, 1) + 1j * rand(rng, 2, 1)
    check_grads(lambda a, b: L.concatenate([a, b, a], 1), [a, b], order=2)


def test_transpose_rules_on_zero_cotangents():
    from starling.core.ad_util import UndefinedPrimal
    from starling.core.avals import ShapedArray
    aval = ShapedArray((2, 3), np.dtype(np.float32), False)
    ct = Zero(ShapedArray((3, 2), np.dtype(np.float32), False))
    out = L.transpose_p.transpose(ct, UndefinedPrimal(aval), permutation=(1, 0))
    assert type(out[0]) is Zero and out[0].aval.shape == (2, 3)
    v = snp.asarray(np.float32(1))
    out = L.pad_p.transpose(Zero(ShapedArray((4, 3), np.dtype(np.float32), False)),
                            UndefinedPrimal(aval), v, padding_config=((1, 1, 0), (0, 0, 0)))
    assert type(out[0]) is Zero and out[1] is None


# ---- vmap against a Python loop ---------------------------------------------------------------

def _loop(f, in_axes, args):
    n = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = []
    for k in range(n):
        ex = [a if ax is None else np.take(a, k, axis=ax) for a, ax in zip(args, in_axes)]
        outs.append(np.asarray(f(*[snp.asarray(e) for e in ex])))
    return np.stack(outs)


def _check_vmap(f, in_axes, *args):
    got = starling.vmap(f, in_axes=in_axes)(*[snp.asarray(a) for a in args])
    want = _loop(f, in_axes, args)
    assert got.shape == want.shape and got.dtype == want.dtype
    close(got, want)


UNARY = {
    "reshape": lambda x: snp.reshape(x, (3, -1)),
    "reshape_F": lambda x: snp.reshape(x, (-1,), order="F"),
    "T": lambda x: x.T,
    "permute_dims": lambda x: snp.permute_dims(x, (1, 0, 2)),
    "moveaxis": lambda x: snp.moveaxis(x, 0, -1),
    "squeeze": lambda x: snp.squeeze(snp.expand_dims(x, (0, 2)), (0, 2)),
    "broadcast_to": lambda x: snp.broadcast_to(x[:, :1], (5, 2, 1, 3)),
    "flip": lambda x: snp.flip(x, (0, 2)),
    "rot90": lambda x: snp.rot90(x, 1, (0, 2)),
    "roll": lambda x: snp.roll(x, (1, -1), (0, 2)),
    "slice": lambda x: x[1:, ::2, ::-1],
    "lax_slice": lambda x: L.static_slice(x, (0, 1, 0), (2, 3, 3), (2, 1, 2)),
    "pad": lambda x: snp.pad(x, ((1, 0), (0, 2), (1, 1)), mode="reflect"),
    "lax_pad": lambda x: L.pad(x, snp.asarray(np.float32(9)), ((1, -1, 1), (0, 0, 0), (-1, 2, 2))),
    "tile": lambda x: snp.tile(x, (2, 1, 2)),
    "repeat": lambda x: snp.repeat(x, [1, 0, 2], axis=2),
    "split": lambda x: snp.split(x, [1], axis=2)[1],
    "unstack": lambda x: snp.unstack(x, axis=1)[0],
    "stack_self": lambda x: snp.stack([x, 2 * x], axis=-1),
    "tril": lambda x: snp.tril(x),
    "diag": lambda x: snp.diag(x[0]),
}


@pytest.mark.parametrize("in_axis", [0, -1, 1])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_vmap_unary(rng, name, in_axis):
    x = rand(rng, 4, 2, 3, 3, dtype=np.float32)  # per example (2, 3, 3) after the batch axis
    x = np.moveaxis(x, 0, in_axis)
    _check_vmap(UNARY[name], (in_axis,), x)


@pytest.mark.parametrize("in_axes", [(0, None), (None, -1), (-1, 1), (None, 0)])
def test_vmap_concatenate_mixed(rng, in_axes):
    a = rand(rng, 2, 3, dtype=np.float32)
    b = rand(rng, 2, 2, dtype=np.float32)
    a = a if in_axes[0] is None else np.stack([a, a + 1, a - 1], in_axes[0] % 3)
    b = b if in_axes[1] is None else np.stack([b, 2 * b, -b], in_axes[1] % 3)
    _check_vmap(lambda a, b: snp.concatenate([a, b, a], axis=-1), in_axes, a, b)
    _check_vmap(lambda a, b: snp.hstack([b, a]), in_axes, a, b)


@pytest.mark.parametrize("in_axes", [(None, 0), (0, 0), (-1, None), (1, 0)])
def test_vmap_pad_batched_value(rng, in_axes):
    x = rand(rng, 3, 4, dtype=np.float32)
    v = rand(rng, 2, dtype=np.float32)
    if in_axes[0] is not None:
        x = np.stack([x, -x], in_axes[0] % 3)
    if in_axes[1] is None:
        v = v[0]
    config = ((1, -1, 1), (2, 0, 0))
    _check_vmap(lambda x, v: L.pad(x, v, config), in_axes, x, v)
    _check_vmap(lambda x, v: snp.pad(x, 1, constant_values=v), in_axes, x, v)


def test_vmap_broadcast_in_dim_and_iota(rng):
    x = rand(rng, 1, 2, 3, dtype=np.float32)
    _check_vmap(lambda x: L.broadcast_in_dim(x, (4, 5, 2), (0, 2)), (-1,), x)
    _check_vmap(lambda x: x + snp.arange(3.0), (0,), rand(rng, 2, 3, dtype=np.float32))
    with pytest.raises(TypeError, match="iota"):
        L.iota_p.batch([], [])


def test_vmap_of_grad_and_grad_of_vmap(rng):
    xs = rand(rng, 3, 2, 4)

    def f(x):
        y = snp.concatenate([x.T, snp.flip(x, 0).T], axis=1)      # (4, 4)
        return snp.sum(snp.pad(y, 1)[1:-1:2] ** 2)

    got = starling.vmap(starling.grad(f))(snp.asarray(xs))
    want = np.stack([np.asarray(starling.grad(f)(snp.asarray(x))) for x in xs])
    close(got, want)
    g2 = starling.grad(lambda xs: snp.sum(starling.vmap(f)(xs)))(snp.asarray(xs))
    close(g2, want)


def test_jvp_of_vmap_of_grad(rng):
    xs = rand(rng, 3, 2, 3)
    ts = rand(rng, 3, 2, 3)

    def f(x):
        y = snp.reshape(snp.broadcast_to(x[:, None, :], (2, 2, 3)), (4, 3))
        return snp.sum(snp.roll(y, 1, 0) * y * y)

    vg = starling.vmap(starling.grad(f))
    _, t = starling.jvp(vg, (snp.asarray(xs),), (snp.asarray(ts),))
    # reference: finite differences of the batched gradient
    eps = 1e-6
    fd = (np.asarray(vg(snp.asarray(xs + eps * ts))) -
          np.asarray(vg(snp.asarray(xs - eps * ts)))) / (2 * eps)
    np.testing.assert_allclose(np.asarray(t), fd, rtol=1e-5, atol=1e-6)


def test_hessian_through_shape_ops(rng):
    x = rand(rng, 2, 3)

    def f(x):
        y = snp.concatenate([x, x[:, ::-1]], 0)   # (4, 3)
        return snp.sum(y.T.reshape(-1)[::2] ** 3)

    h = np.asarray(starling.hessian(f)(snp.asarray(x)))
    eps = 1e-5
    num = np.zeros((6, 6))
    g = starling.grad(f)
    for i in range(6):
        d = np.zeros(6)
        d[i] = eps
        num[:, i] = (np.asarray(g(snp.asarray(x + d.reshape(2, 3)))) -
                     np.asarray(g(snp.asarray(x - d.reshape(2, 3))))).ravel() / (2 * eps)
    np.testing.assert_allclose(h.reshape(6, 6), num, rtol=1e-5, atol=1e-6)
