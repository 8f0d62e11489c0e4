"""Transformation rules of the indexing primitives (gather, scatter set/add/multiply/min/max,
argwhere, choose): closed-form gradients with duplicate indices, out-of-bounds modes under
grad, ties of scatter min/max, exact products for scatter multiply at zeros, second
derivatives, vmap of every operand combination against a Python loop, and compositions
(vmap of grad, jvp of vmap, jvp of vmap of grad, staging of grad)."""
import itertools

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling.arrays.ops.gather_scatter import (argwhere_p, choose_p, gather, gather_p, scatter,
                                                scatter_p)
from starling.core.dtypes import float0
from starling.core.ir import eval_program
from starling.test_util import check_grads

A = snp.asarray
MODES = ("clip", "wrap", "drop", "fill", "promise_in_bounds")
OPS = ("set", "add", "multiply", "min", "max")


def rand(rng, *shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


def close(got, want, **kw):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-9, **kw)


def test_rules_are_declared():
    for p in (gather_p, scatter_p, choose_p):
        assert p.jvp and p.batch and p.transpose and p.is_linear, p.name
    assert argwhere_p.jvp and argwhere_p.batch


# ---- x.at[i].add / set with duplicate indices -------------------------------------------------

def test_grad_at_add_with_duplicates(rng):
    x, v, w = rand(rng, 5, 2), rand(rng, 4, 2), rand(rng, 5, 2)
    i = np.array([1, 3, 1, 1])
    f = lambda x, v: snp.sum(A(w) * x.at[A(i)].add(v))
    gx, gv = starling.grad(f, argnums=(0, 1))(A(x), A(v))
    close(gx, w)                  # d/dx: the cotangent itself
    close(gv, w[i])               # d/dv_k: the cotangent gathered at i_k, for every duplicate
    _, t = starling.jvp(f, (A(x), A(v)), (A(np.zeros_like(x)), A(np.ones_like(v))))
    close(t, np.sum(w[i]))


def test_grad_at_set_with_duplicates_last_wins(rng):
    x, v, w = rand(rng, 6), rand(rng, 5), rand(rng, 6)
    i = np.array([2, 4, 2, -4, 0])   # -4 is 2 again: update 3 is the last write to element 2
    f = lambda x, v: snp.sum(A(w) * x.at[A(i)].set(v))
    gx, gv = starling.grad(f, argnums=(0, 1))(A(x), A(v))
    want_x = w.copy()
    want_x[[0, 2, 4]] = 0.0
    close(gx, want_x)
    close(gv, [0.0, w[4], 0.0, w[2], w[0]])
    # forward mode agrees: the tangent scatter keeps the same (last) update
    tv = rand(rng, 5)
    _, t = starling.jvp(lambda v: A(x).at[A(i)].set(v), (A(v),), (A(tv),))
    close(t, [tv[4], 0, tv[3], 0, tv[1], 0])


def test_grad_at_set_traced_indices_inside_vmap(rng):
    # per-example duplicate patterns: the batch index keeps the examples apart
    x, v = rand(rng, 3, 4), rand(rng, 3, 3)
    i = np.array([[0, 0, 1], [2, 3, 2], [1, 1, 1]])
    f = lambda x, v, i: snp.sum(snp.sin(x.at[i].set(v)))
    got = starling.vmap(starling.grad(f, argnums=(0, 1)))(A(x), A(v), A(i))
    for k in range(3):
        want = starling.grad(f, argnums=(0, 1))(A(x[k]), A(v[k]), A(i[k]))
        close(got[0][k], want[0])
        close(got[1][k], want[1])
    # closed form for example 2: only the last of the three writes survives
    close(got[1][2], [0, 0, np.cos(v[2, 2])])


# ---- gathers: x[idx], take_along_axis, second derivatives ------------------------------------

def test_grad_of_gather_with_repeated_indices_accumulates(rng):
    x = rand(rng, 6, 3)
    idx = np.array([[0, 5, 0], [5, 5, 2]])
    g = starling.grad(lambda x: snp.sum(x[A(idx)]))(A(x))
    close(g, np.bincount(idx.ravel(), minlength=6)[:, None] * np.ones((1, 3)))
    # two index arrays plus a slice: scatter-add at (row, col) pairs
    r, c = np.array([1, 1, 4]), np.array([2, 2, 0])
    w = rand(rng, 3)
    g = starling.grad(lambda x: snp.sum(x[A(r), A(c)] * A(w)))(A(x))
    want = np.zeros_like(x)
    np.add.at(want, (r, c), w)
    close(g, want)


def test_grad_of_take_along_axis(rng):
    x, w = rand(rng, 3, 5), rand(rng, 3, 4)
    idx = np.array([[0, 4, 4, 1], [2, 2, 2, 2], [3, 0, 1, 3]])
    g = starling.grad(lambda x: snp.sum(snp.take_along_axis(x, A(idx), axis=1) * A(w)))(A(x))
    want = np.zeros_like(x)
    np.add.at(want, (np.arange(3)[:, None], idx), w)
    close(g, want)
    check_grads(lambda x: snp.take_along_axis(x, A(idx), axis=1) ** 2, [x], order=2)


def test_hessian_of_cubed_gather(rng):
    x = rand(rng, 5)
    idx = np.array([0, 3, 3, 1, 3])
    h = starling.hessian(lambda x: snp.sum(x[A(idx)] ** 3))(A(x))
    counts = np.bincount(idx, minlength=5)
    close(h, np.diag(6 * x * counts))
    gg = starling.grad(lambda x: snp.sum(starling.grad(lambda y: snp.sum(y[A(idx)] ** 3))(x)))
    close(gg(A(x)), 6 * x * counts)


def test_check_grads_of_gather_modes(rng):
    x = rand(rng, 4, 3)
    i = np.array([[5, -1], [-7, 2]])
    for mode in ("clip", "wrap", "fill", "drop", "promise_in_bounds"):
        ii = np.clip(i, -4, 3) if mode == "promise_in_bounds" else i
        fill = 1.5 if mode in ("fill", "drop") else None   # (the default fill is NaN)
        check_grads(lambda x: gather(x, A(ii), mode=mode, fill_value=fill), [x], order=2)
    check_grads(lambda x: gather(x, A([1, 0]), A([[2], [0]]), mode="clip"), [x], order=2)
    check_grads(lambda x: snp.diagonal(x[:, None, :] * x[:, :, None], 1, 0, 2), [x], order=2)


# ---- out-of-bounds modes under grad ----------------------------------------------------------

def test_get_modes_under_grad():
    x = A(np.arange(1.0, 5.0))
    i = A(np.array([1, 9, -1, -6]))
    grad = lambda mode: np.asarray(starling.grad(
        lambda x: snp.sum(x.at[i].get(mode=mode, fill_value=0.0)))(x))
    close(grad("clip"), [1, 1, 0, 2])      # 9 -> 3 and -6 -> -2 -> 0: clamped reads accumulate
    close(grad("wrap"), [0, 2, 1, 1])      # 9 % 4 = 1, -1 -> 3, -6 % 4 = 2
    close(grad("fill"), [0, 1, 0, 1])      # out-of-bounds reads are constants: no gradient
    close(grad("drop"), [0, 1, 0, 1])


def test_update_modes_under_grad(rng):
    x, v, w = A(rand(rng, 4)), A(np.array([1.0, 2.0, 3.0])), rand(rng, 4)
    i = A(np.array([2, 7, -9]))
    for mode, rows in (("drop", [2, None, None]), ("fill", [2, None, None]),
                       ("promise_in_bounds", [2, None, None]), ("clip", [2, 3, 0]),
                       ("wrap", [2, 3, 3])):
        gv = starling.grad(lambda v: snp.sum(A(w) * x.at[i].add(v, mode=mode)))(v)
        close(gv, [0.0 if r is None else w[r] for r in rows], err_msg=mode)
        gx, gv = starling.grad(lambda x, v: snp.sum(A(w) * x.at[i].set(v, mode=mode)),
                               argnums=(0, 1))(x, v)
        written = {r for r in rows if r is not None}
        last = {r: k for k, r in enumerate(rows) if r is not None}
        close(gx, [0.0 if j in written else w[j] for j in range(4)], err_msg=mode)
        close(gv, [w[r] if r is not None and last[r] == k else 0.0 for k, r in enumerate(rows)],
              err_msg=mode)


@pytest.mark.parametrize("op", OPS)
def test_check_grads_of_scatter_every_mode(op, rng):
    for mode in MODES:
        i = np.array([1, 3, 1, 7, 1]) if mode != "promise_in_bounds" else np.array([1, 3, 1, -2, 1])
        x, u = rand(rng, 5, 2), rand(rng, 5, 2)
        check_grads(lambda x, u: scatter(x, u, A(i), op=op, mode=mode), [x, u], order=2)
    # complex values, two index arrays
    x = rand(rng, 3, 4) + 1j * rand(rng, 3, 4)
    u = rand(rng, 2, 3) + 1j * rand(rng, 2, 3)
    if op in ("set", "add", "multiply"):
        check_grads(lambda x, u: scatter(x, u, A([[0], [2]]), A([1, 1, 3]), op=op), [x, u],
                    order=2)


# ---- scatter multiply: duplicates and zeros ---------------------------------------------------

def _mul_grad_reference(x, i, v, w):
    """d/dv_k of sum(w * x.at[i].multiply(v)): w[p] x[p] prod of the other updates at p."""
    g = np.zeros_like(v)
    for k, p in enumerate(i):
        others = [v[j] for j in range(len(i)) if i[j] == p and j != k]
        g[k] = w[p] * x[p] * np.prod(others)
    return g


@pytest.mark.parametrize("v", [[2.0, -1.5, 0.5, 3.0], [0.0, -1.5, 0.5, 3.0],
                               [0.0, -1.5, 0.0, 3.0], [0.0, 0.0, 0.0, 3.0]])
def test_grad_at_multiply_with_duplicates_and_zeros(v):
    x, w = np.array([1.5, -2.0, 3.0]), np.array([0.5, 2.0, -1.0])
    i, v = np.array([1, 2, 1, 1]), np.array(v)
    f = lambda x, v: snp.sum(A(w) * x.at[A(i)].multiply(v))
    gx, gv = starling.grad(f, argnums=(0, 1))(A(x), A(v))
    prods = np.ones(3)
    np.multiply.at(prods, i, v)
    close(gx, w * prods)
    close(gv, _mul_grad_reference(x, i, v, w))
    # second derivatives are exact too, also at zero updates (see _other_products)
    check_grads(lambda x, v: x.at[A(i)].multiply(v), [x, v], order=2)


def test_multiply_with_unique_indices_promise(rng):
    x, v = rand(rng, 4), rand(rng, 2)
    i = A(np.array([3, 0]))
    check_grads(lambda x, v: x.at[i].multiply(v, unique_indices=True), [x, v], order=2)


# ---- scatter min / max: the selected contributor, ties shared ---------------------------------

def test_grad_of_scatter_max_ties_split_evenly():
    x = A(np.array([1.0, 5.0, -2.0]))
    i = A(np.array([0, 0, 1, 1]))
    v = A(np.array([1.0, 0.5, 5.0, 5.0]))
    gx, gv = starling.grad(lambda x, v: snp.sum(x.at[i].max(v) * A([1.0, 6.0, 10.0])),
                           argnums=(0, 1))(x, v)
    close(gx, [0.5, 2.0, 10.0])          # element 0: x ties one update; element 1: three-way
    close(gv, [0.5, 0.0, 2.0, 2.0])
    _, t = starling.jvp(lambda x, v: x.at[i].max(v), (x, v),
                        (A(np.array([1.0, 3.0, 7.0])), A(np.array([3.0, 100.0, 6.0, 9.0]))))
    close(t, [2.0, 6.0, 7.0])


def test_grad_of_scatter_min_selected_and_nan():
    x = A(np.array([4.0, np.nan, 0.0]))
    i = A(np.array([0, 1, 0, 2]))
    v = A(np.array([2.0, 1.0, 3.0, 1.0]))
    gx, gv = starling.grad(lambda x, v: snp.sum(x.at[i].min(v)), argnums=(0, 1))(x, v)
    close(gx, [0.0, 1.0, 1.0])     # NaN wins (propagates); 0 < 1 keeps x[2]
    close(gv, [1.0, 0.0, 0.0, 0.0])


# ---- choose / select --------------------------------------------------------------------------

def test_grad_of_choose_with_broadcasting(rng):
    a, b, c = rand(rng, 3, 4), rand(rng, 4), rand(rng, 3, 1)
    which = np.array([[0, 1, 2, 1]] * 3)
    w = rand(rng, 3, 4)
    ga, gb, gc = starling.grad(lambda a, b, c: snp.sum(A(w) * snp.choose(A(which), [a, b, c])),
                               argnums=(0, 1, 2))(A(a), A(b), A(c))
    close(ga, w * (which == 0))
    close(gb, np.sum(w * (which == 1), axis=0))
    close(gc, np.sum(w * (which == 2), axis=1, keepdims=True))
    for mode in ("clip", "wrap"):
        wh = np.array([[5, -1, 2, 3]])
        check_grads(lambda a, b, c: snp.choose(A(wh), [a, b, c], mode=mode), [a, b, c], order=2)


def test_grad_of_select_and_where_mask_update(rng):
    a, b = rand(rng, 3, 4), rand(rng, 4)
    c1, c2 = rng.random((3, 4)) < 0.4, rng.random(4) < 0.5
    ga, gb, gd = starling.grad(lambda a, b, d: snp.sum(snp.select([A(c1), A(c2)], [a, b], d)),
                               argnums=(0, 1, 2))(A(a), A(b), A(0.5))
    close(ga, c1)
    close(gb, np.sum(~c1 & c2, axis=0))
    close(gd, np.sum(~c1 & ~c2))
    # .at[traced mask] updates go through choose as well
    m = rng.random((3, 4)) < 0.5
    g = starling.grad(lambda x, m: snp.sum(x.at[m].set(2.0 * x) ** 2))
    gx = starling.vmap(g, in_axes=(None, 0))(A(a), A(np.stack([m, ~m])))
    close(gx[0], np.where(m, 8 * a, 2 * a))
    close(gx[1], np.where(~m, 8 * a, 2 * a))


# ---- argwhere / nonzero -----------------------------------------------------------------------

def test_argwhere_has_zero_jvp_and_feeds_gathers(rng):
    x = rand(rng, 6)
    f = lambda x: snp.sum(x[snp.nonzero(x > 0, size=4, fill_value=0)[0]] ** 2)
    pos = np.flatnonzero(x > 0)[:4]
    pos = np.concatenate([pos, np.zeros(4 - len(pos), int)])
    want = np.zeros(6)
    np.add.at(want, pos, 2 * x[pos])
    close(starling.grad(f)(A(x)), want)
    out, t = starling.jvp(lambda x: snp.argwhere(x, size=3), (A(x),), (A(np.ones(6)),))
    assert out.dtype == np.int64 and t.dtype == float0


@pytest.mark.parametrize("shape,size", [((3, 4), 5), ((3, 4), 20), ((2, 3, 2), 4), ((), 2),
                                        ((5,), 0), ((0, 3), 2)])
def test_vmap_argwhere_matches_loop(shape, size, rng):
    xs = (rng.random((3,) + shape) < 0.5) * rng.integers(1, 4, (3,) + shape)
    xs[1] = 0
    for in_axis, stacked in ((0, xs), (-1, np.moveaxis(xs, 0, -1))):
        got = starling.vmap(lambda x: snp.argwhere(x, size=size, fill_value=-7),
                            in_axes=in_axis)(A(stacked))
        for k in range(3):
            want = np.argwhere(xs[k])[:size]
            want = np.concatenate([want, np.full((size - len(want), len(shape)), -7)])
            np.testing.assert_array_equal(np.asarray(got[k]), want)
    if shape:
        got = starling.vmap(lambda x: snp.nonzero(x.astype(bool), size=size)[-1])(A(xs))
        want = [np.concatenate([np.nonzero(e)[-1], np.zeros(size, int)])[:size] for e in xs]
        np.testing.assert_array_equal(np.asarray(got), want)


# ---- vmap against a Python loop ---------------------------------------------------------------

def _check_vmap(f, in_axes, *args):
    got = starling.vmap(f, in_axes=in_axes)(*[A(a) for a in args])
    n = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    for k in range(n):
        ex = [a if ax is None else np.take(a, k, axis=ax) for a, ax in zip(args, in_axes)]
        want = np.asarray(f(*[A(e) for e in ex]))
        g = np.moveaxis(np.asarray(got), 0, 0)[k]
        assert g.shape == want.shape and g.dtype == want.dtype
        np.testing.assert_array_equal(g, want)


AXES = [ax for ax in itertools.product((None, 0, -1), repeat=3) if ax != (None, None, None)]


def _stack(a, ax, rng):
    if ax is None:
        return a
    reps = np.stack([a, np.roll(a, 1, axis=0), np.roll(a, 2, axis=0)])
    return np.moveaxis(reps, 0, ax)


@pytest.mark.parametrize("axes", AXES, ids=str)
def test_vmap_getitem_every_batched_combination(axes, rng):
    x, r, c = rand(rng, 4, 5, 4), np.array([[0, 3], [3, 1]]), np.array([4, -1])
    x_ax, r_ax, c_ax = axes
    args = [_stack(x, x_ax, rng), _stack(r, r_ax, rng), _stack(c, c_ax, rng)]
    _check_vmap(lambda x, r, c: x[r, c], axes, *args)       # gather on 2 leading axes
    _check_vmap(lambda x, r, c: x[:, c, r[0]], axes, *args)  # gather behind a slice
    _check_vmap(lambda x, r, c: x.at[r, c].get(mode="fill", fill_value=-1.0), axes, *args)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", ["drop", "clip", "wrap"])
def test_vmap_scatter_every_batched_combination(op, mode, rng):
    x, u = rand(rng, 5, 2), rand(rng, 2, 3, 2)
    i = np.array([[1, 1, 7], [3, -1, 1]])                   # duplicates and out-of-bounds
    u[0, 1] = u[0, 0]                                      # a tie between updates
    f = lambda x, u, i: scatter(x, u, i, op=op, mode=mode)
    for axes in itertools.product((None, 0, -1), repeat=3):
        if axes == (None, None, None):
            continue
        args = [_stack(a, ax, rng) for a, ax in zip((x, u, i), axes)]
        _check_vmap(f, axes, *args)


def test_vmap_gather_modes_and_broadcast_indices(rng):
    x = rand(rng, 3, 4, 2)
    i = np.array([[5], [-4], [1]])          # (3, 1) per example
    j = np.array([0, 9, -2])                # (3,) per example: broadcast B = (3, 3)
    for mode in ("clip", "wrap", "fill"):
        f = lambda x, i, j: gather(x, i, j, mode=mode, fill_value=0.25)
        for axes in ((0, None, None), (None, 0, None), (None, None, 0), (1, 0, 0), (-1, None, 0)):
            args = [_stack(a, ax, rng) for a, ax in zip((x, i, j), axes)]
            _check_vmap(f, axes, *args)


def test_nested_vmap_of_gather_and_scatter(rng):
    x = rand(rng, 2, 3, 6)
    i = rng.integers(0, 6, (2, 3, 4))
    got = starling.vmap(starling.vmap(lambda x, i: x[i]))(A(x), A(i))
    close(got, np.take_along_axis(x, i, axis=2))
    got = starling.vmap(starling.vmap(lambda x, i: x.at[i].add(1.0), in_axes=(0, 0)),
                        in_axes=(1, None), out_axes=1)(A(x), A(i[:, 0]))
    want = x.copy()
    for a in range(2):
        for b in range(3):
            np.add.at(want[a, b], i[a, 0], 1.0)
    close(got, want)


def test_vmap_choose_in_axes(rng):
    w = np.array([[0, 2, 1, 1], [2, 2, 0, 1]])
    a, b, c = rand(rng, 2, 4), rand(rng, 4), rand(rng, 4, 2)
    _check_vmap(lambda w, a, b, c: snp.choose(w, [a, b, c]), (0, 0, None, -1), w, a, b, c)
    _check_vmap(lambda w, a, b, c: snp.choose(w, [a, b, c]), (None, None, None, 1), w[0], a[0],
                b, c)


# ---- compositions -----------------------------------------------------------------------------

def test_vmap_of_grad_of_gather_loss(rng):
    x, idx, w = rand(rng, 4, 6), rng.integers(-6, 6, (4, 5)), rand(rng, 5)
    loss = lambda x, i: snp.sum(snp.tanh(x[i]) * A(w))
    got = starling.vmap(starling.grad(loss))(A(x), A(idx))
    for k in range(4):
        close(got[k], starling.grad(loss)(A(x[k]), A(idx[k])))
    # the gradient of a vmapped loss (grad of vmap) agrees too
    total = starling.grad(lambda x: snp.sum(starling.vmap(loss)(x, A(idx))))(A(x))
    close(total, got)


def test_jvp_of_vmap_and_of_vmap_of_grad(rng):
    x, tx = rand(rng, 3, 5), rand(rng, 3, 5)
    v, tv = rand(rng, 3, 4), rand(rng, 3, 4)
    i = np.array([[0, 0, 4, 2], [1, 3, 3, 3], [4, 4, 4, 4]])

    def f(x, v):
        y = x.at[A(i[0])].multiply(v) + x.at[A(i[1])].max(v)
        return snp.sum(y[A(i[2])] ** 2) + snp.sum(snp.take(y, A([1, 1]), axis=0))

    out, t = starling.jvp(starling.vmap(f), (A(x), A(v)), (A(tx), A(tv)))
    for k in range(3):
        o, tk = starling.jvp(f, (A(x[k]), A(v[k])), (A(tx[k]), A(tv[k])))
        close(out[k], o)
        close(t[k], tk)
    g = starling.grad(f, argnums=(0, 1))
    out, t = starling.jvp(starling.vmap(g), (A(x), A(v)), (A(tx), A(tv)))
    for k in range(3):
        o, tk = starling.jvp(g, (A(x[k]), A(v[k])), (A(tx[k]), A(tv[k])))
        for a, b in zip(out + t, o + tk):
            close(a[k], b)


def test_staged_grad_of_traced_gather_and_scatter(rng):
    x, v = rand(rng, 5), rand(rng, 3)
    i = np.array([4, 0, 4])
    f = lambda x, v, i: snp.sum(snp.cos(x.at[i].set(v)[i] * x[i]))
    g = starling.grad(f, argnums=(0, 1))
    prog = starling.make_ir(g)(A(x), A(v), A(i))
    got = eval_program(prog, prog.consts, A(x), A(v), A(i))
    want = g(A(x), A(v), A(i))
    close(got[0], want[0])
    close(got[1], want[1])
