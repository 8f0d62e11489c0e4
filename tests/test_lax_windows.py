"""starling.lax: associative_scan and the cumulative ops, sort / top_k, reduce_window,
convolutions and optimization_barrier, against NumPy and brute-force loop references, with
check_grads, vmap vs a Python loop, and compiled (cpp, strict) vs eager."""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import lax
from starling.test_util import check_grads
from tests.lax_helpers import assert_same, check_compiled, check_vmap

A = snp.asarray
pytestmark = pytest.mark.usefixtures("cpp_kernel_env")


# ---- scans ------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, 9])
def test_associative_scan_sizes_axis_reverse(rng, n):
    x = rng.normal(size=(2, n, 3))
    assert_same(lax.associative_scan(snp.add, A(x), axis=1), A(np.cumsum(x, 1)), atol=1e-12)
    assert_same(lax.associative_scan(lax.max, A(x), reverse=True, axis=-2),
                A(np.maximum.accumulate(x[:, ::-1], 1)[:, ::-1]))


def test_associative_scan_pytree_non_commutative(rng):
    # affine maps v -> a v + b composed in sequence order: not commutative
    a, b = rng.normal(size=(7, 2)), rng.normal(size=(7, 2))

    def compose(f, g):   # f first, then g
        return (g[0] * f[0], g[0] * f[1] + g[1])

    got = lax.associative_scan(compose, (A(a), A(b)))
    wa, wb, acc = [], [], None
    for i in range(7):
        acc = (a[i], b[i]) if acc is None else compose(acc, (a[i], b[i]))
        wa.append(acc[0])
        wb.append(acc[1])
    assert_same(got, (A(np.stack(wa)), A(np.stack(wb))), atol=1e-12)
    rgot = lax.associative_scan(compose, (A(a), A(b)), reverse=True)
    acc, ra = None, []
    for i in reversed(range(7)):
        acc = (a[i], b[i]) if acc is None else compose((a[i], b[i]), acc)
        ra.append(acc[1])
    assert_same(rgot[1], A(np.stack(ra[::-1])), atol=1e-12)
    check_grads(lambda p, q: lax.associative_scan(compose, (p, q))[1], (A(a), A(b)), order=2)
    check_vmap(lambda p, q: lax.associative_scan(compose, (p, q)), (A(a.T), A(b.T)), in_axes=0)
    check_compiled(lambda p, q: lax.associative_scan(compose, (p, q)), A(a), A(b), atol=1e-12)


def test_cumulative_ops(rng):
    x = rng.normal(size=(4, 3))
    for name, ref in [("cumsum", np.cumsum), ("cumprod", np.cumprod),
                      ("cummax", np.maximum.accumulate), ("cummin", np.minimum.accumulate)]:
        f = getattr(lax, name)
        assert_same(f(A(x)), A(ref(x, axis=0)), atol=1e-12)
        assert_same(f(A(x), axis=1, reverse=True), A(ref(x[:, ::-1], axis=1)[:, ::-1]),
                    atol=1e-12)
        check_grads(lambda v: f(v, axis=1), (A(x),), order=2)
    i8 = np.array([100, 100, 100], np.int8)
    assert_same(lax.cumsum(A(i8)), A(np.cumsum(i8, dtype=np.int8)))
    nan = np.array([1.0, np.nan, 3.0, 0.0])
    assert_same(lax.cummax(A(nan)), A(np.array([1.0, np.nan, np.nan, np.nan])))


def test_cumlogsumexp(rng):
    x = np.concatenate([rng.normal(size=6) * 5, [-np.inf, 800.0, 800.0]])
    want = np.logaddexp.accumulate(x)
    assert_same(lax.cumlogsumexp(A(x)), A(want), atol=1e-12, rtol=1e-12)
    assert_same(lax.cumlogsumexp(A(x), reverse=True),
                A(np.logaddexp.accumulate(x[::-1])[::-1]), rtol=1e-12)
    y = A(rng.normal(size=(3, 5)))
    check_grads(lambda v: lax.cumlogsumexp(v, axis=1), (y,), order=2)
    check_vmap(lambda v: lax.cumlogsumexp(v), (y,), in_axes=1)
    with pytest.raises(TypeError, match="real floating"):
        lax.cumlogsumexp(A(np.arange(3)))


# ---- sorting ----------------------------------------------------------------------------------

def test_sort_multi_operand_num_keys(rng):
    k1 = rng.integers(0, 3, size=12).astype(np.float64)
    k1[[2, 7]] = np.nan
    k2 = rng.integers(0, 3, size=12).astype(np.float64)
    v = rng.normal(size=12)
    for nk in (1, 2):
        # np.lexsort: the last key is the primary one; it is stable and puts NaN last
        order = np.lexsort((np.arange(12), k2, k1) if nk == 2 else (np.arange(12), k1))
        got = lax.sort((A(k1), A(k2), A(v)), num_keys=nk)
        assert_same(got, (A(k1[order]), A(k2[order]), A(v[order])))
    check_grads(lambda w: lax.sort((A(k1), w), num_keys=1)[1], (A(v),), order=2)
    x = rng.normal(size=(3, 5))
    assert_same(lax.sort(A(x), dimension=0), A(np.sort(x, 0)))
    assert_same(lax.sort_key_val(A(x), A(-x))[1], A(-np.sort(x, -1)))
    check_vmap(lambda a, b: lax.sort((a, b), num_keys=1), (A(x), A(x[::-1])))
    check_compiled(lambda a, b: lax.sort((a, b), num_keys=2), A(np.round(x)), A(x))
    with pytest.raises(ValueError, match="num_keys"):
        lax.sort((A(x), A(x)), num_keys=3)


def test_top_k_ties_nan(rng):
    x = np.array([[1.0, np.nan, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 0.0, 5.0]])
    v, i = lax.top_k(A(x), 3)
    assert i.dtype == np.int32
    assert_same(i, A(np.array([[1, 2, 3], [4, 0, 1]], np.int32)))
    assert_same(v, A(np.take_along_axis(x, np.asarray(i).astype(np.int64), 1)))
    y = A(rng.normal(size=(4, 6)))
    check_grads(lambda w: lax.top_k(w, 2)[0], (y,), order=2)
    check_vmap(lambda w: lax.top_k(w, 2), (y,), in_axes=1)
    assert lax.top_k(y, 0)[0].shape == (4, 0)


# ---- reduce_window ------------------------------------------------------------------------------

def ref_reduce_window(x, init, fn, dims, strides, pads, base, wdil):
    """Loops: each window combines its PRESENT elements (padding / dilation holes absent) and
    the init value once."""
    n = x.ndim
    shape = [(d - 1) * b + 1 + lo + hi for d, b, (lo, hi) in zip(x.shape, base, pads)]
    vals = np.zeros(shape, x.dtype)
    present = np.zeros(shape, bool)
    for pos in itertools.product(*[range(d) for d in x.shape]):
        q = tuple(p * b + lo for p, b, (lo, _) in zip(pos, base, pads))
        if all(0 <= a < s for a, s in zip(q, shape)):
            vals[q] = x[pos]
            present[q] = True
    outs = [(s - ((k - 1) * w + 1)) // st + 1 if s >= (k - 1) * w + 1 else 0
            for s, k, w, st in zip(shape, dims, wdil, strides)]
    out = np.empty(outs, x.dtype)
    for o in itertools.product(*[range(m) for m in outs]):
        acc = init
        for off in itertools.product(*[range(k) for k in dims]):
            q = tuple(oo * st + f * w for oo, st, f, w in zip(o, strides, off, wdil))
            if present[q]:
                acc = fn(acc, vals[q])
        out[o] = acc
    return out.reshape(outs) if n else out


RW_CASES = [((2, 3), (1, 2), ((0, 0), (0, 0)), (1, 1), (1, 1)),
            ((3, 2), (2, 1), ((1, 1), (0, 1)), (1, 1), (1, 1)),
            ((2, 2), (1, 1), ((1, 0), (0, 2)), (2, 1), (1, 2)),
            ((1, 1), (3, 3), ((0, 0), (-1, 0)), (1, 1), (1, 1)),
            ((6, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1))]


@pytest.mark.parametrize("case", RW_CASES)
def test_reduce_window_vs_loops(rng, case):
    dims, strides, pads, base, wdil = case
    x = rng.normal(size=(5, 4))
    for comp, init, fn in [(lax.max, -np.inf, max), (lax.add, 0.0, lambda a, b: a + b),
                           (lax.min, np.inf, min), (lax.mul, 1.0, lambda a, b: a * b),
                           (lax.add, 1.5, lambda a, b: a + b), (lax.max, 0.25, max),
                           (lambda a, b: a + 2 * b - b, 0.5, lambda a, b: a + b)]:
        got = lax.reduce_window(A(x), init, comp, dims, strides, pads, base, wdil)
        want = ref_reduce_window(x, init, fn, dims, strides, pads, base, wdil)
        assert_same(got, A(want), atol=1e-12, msg=f"{comp} {init} {case}")


def test_reduce_window_same_padding_ints_and_pytrees(rng):
    x = rng.integers(-50, 50, size=(7,)).astype(np.int32)
    got = lax.reduce_window(A(x), int(np.iinfo(np.int32).min), lax.max, (3,), (2,), "SAME")
    want = ref_reduce_window(x, np.iinfo(np.int32).min, max, (3,), (2,), ((1, 1),), (1,), (1,))
    assert_same(got, A(want))
    a, b = rng.normal(size=6), rng.normal(size=6)
    got = lax.reduce_window((A(a), A(b)), (0.0, -np.inf),
                            lambda p, q: (p[0] + q[0], snp.maximum(p[1], q[1])), (3,), (2,),
                            "SAME")
    same = lax.padtype_to_pads((6,), (3,), (2,), "SAME")
    assert same == ((0, 1),)
    assert_same(got[0], A(ref_reduce_window(a, 0.0, lambda u, v: u + v, (3,), (2,), same, (1,),
                                            (1,))), atol=1e-12)
    assert_same(got[1], A(ref_reduce_window(b, -np.inf, max, (3,), (2,), same, (1,), (1,))))
    with pytest.raises(ValueError, match="window_dimensions must be >= 1"):
        lax.reduce_window(A(a), 0.0, lax.add, (0,), (1,), "VALID")
    with pytest.raises(TypeError, match="init_value"):
        lax.reduce_window(A(a), A(np.float32(0)), lax.add, (1,), (1,), "VALID")


def test_reduce_window_transforms(rng):
    x = A(rng.normal(size=(5, 6)))   # distinct values: max is differentiable
    pool = functools.partial(lax.reduce_window, init_value=-np.inf, computation=lax.max,
                             window_dimensions=(2, 3), window_strides=(2, 1), padding="SAME")
    avg = functools.partial(lax.reduce_window, init_value=0.0, computation=lax.add,
                            window_dimensions=(3, 2), window_strides=(1, 2),
                            padding=((1, 1), (0, 1)), base_dilation=(1, 2))
    check_grads(lambda v: pool(v), (x,), order=2)
    check_grads(lambda v: avg(v), (x,), order=2)
    check_vmap(lambda v: pool(v), (A(rng.normal(size=(3, 5, 6))),))
    check_compiled(lambda v: (pool(v), avg(v)), x, atol=1e-12)
    ties = A(np.ones((2, 2)))
    g = starling.grad(lambda v: snp.sum(lax.reduce_window(v, -np.inf, lax.max, (2, 2), (1, 1),
                                                          "VALID")))(ties)
    assert np.isclose(np.asarray(g).sum(), 1.0) and np.all(np.asarray(g) >= 0)


# ---- convolutions ---------------------------------------------------------------------------

def ref_conv(x, w, strides, pads, ldil, rdil, groups=1, batch_groups=1):
    """NC.../OI... convolution by loops over outputs and kernel offsets."""
    n, c = x.shape[:2]
    o, ci = w.shape[:2]
    ns = x.ndim - 2
    shape = [(d - 1) * a + 1 + lo + hi for d, a, (lo, hi) in zip(x.shape[2:], ldil, pads)]
    xp = np.zeros((n, c) + tuple(shape))
    for pos in itertools.product(*[range(d) for d in x.shape[2:]]):
        q = tuple(p * a + lo for p, a, (lo, _) in zip(pos, ldil, pads))
        if all(0 <= v < s for v, s in zip(q, shape)):
            xp[(slice(None), slice(None)) + q] = x[(slice(None), slice(None)) + pos]
    ks = w.shape[2:]
    outs = [max((s - ((k - 1) * r + 1)) // st + 1, 0)
            for s, k, r, st in zip(shape, ks, rdil, strides)]
    nb = n // batch_groups
    out = np.zeros((nb, o) + tuple(outs))
    og = o // max(groups, batch_groups)
    for oo in range(o):
        g = oo // og
        for pos in itertools.product(*[range(m) for m in outs]):
            for off in itertools.product(*[range(k) for k in ks]):
                q = tuple(p * st + f * r for p, st, f, r in zip(pos, strides, off, rdil))
                for cc in range(ci):
                    if batch_groups > 1:
                        xs = xp[g * nb:(g + 1) * nb, cc][(slice(None),) + q]
                    else:
                        xs = xp[:, g * ci + cc][(slice(None),) + q]
                    out[(slice(None), oo) + pos] += xs * w[(oo, cc) + off]
    del ns
    return out


CONV_CASES = [dict(window_strides=(1, 1), padding="VALID"),
              dict(window_strides=(2, 1), padding="SAME"),
              dict(window_strides=(1, 2), padding=((1, -1), (2, 0)), lhs_dilation=(2, 1),
                   rhs_dilation=(1, 2)),
              dict(window_strides=(2, 2), padding="SAME_LOWER", rhs_dilation=(2, 1))]


@pytest.mark.parametrize("kw", CONV_CASES)
def test_conv_general_dilated_vs_loops(rng, kw):
    x, w = rng.normal(size=(2, 4, 5, 4)), rng.normal(size=(6, 2, 3, 2))
    got = lax.conv_general_dilated(A(x), A(w), feature_group_count=2, **kw)
    ld = kw.get("lhs_dilation", (1, 1))
    rd = kw.get("rhs_dilation", (1, 1))
    pads = lax.padtype_to_pads([(d - 1) * a + 1 for d, a in zip(x.shape[2:], ld)],
                               [(k - 1) * r + 1 for k, r in zip(w.shape[2:], rd)],
                               kw["window_strides"], kw["padding"])
    want = ref_conv(x, w, kw["window_strides"], pads, ld, rd, groups=2)
    assert_same(got, A(want), atol=1e-12)


def test_conv_layouts_batch_groups_and_transpose(rng):
    x, w = rng.normal(size=(2, 3, 5, 4)), rng.normal(size=(4, 3, 2, 3))
    want = ref_conv(x, w, (1, 1), ((1, 0), (1, 1)), (1, 1), (1, 1))
    # the kernel string orders the spatial dims (W, H): padding pairs follow that order
    got = lax.conv_general_dilated(A(x.transpose(0, 2, 3, 1)), A(w.transpose(3, 2, 1, 0)), (1, 1),
                                   ((1, 1), (1, 0)), dimension_numbers=("NHWC", "WHIO", "NCHW"))
    assert_same(got, A(want), atol=1e-12)
    xb, wb = rng.normal(size=(4, 3, 5)), rng.normal(size=(6, 3, 2))
    assert_same(lax.conv_general_dilated(A(xb), A(wb), (1,), "VALID", batch_group_count=2),
                A(ref_conv(xb, wb, (1,), ((0, 0),), (1,), (1,), batch_groups=2)), atol=1e-12)
    # conv_transpose with transpose_kernel is the gradient of the strided conv wrt its input
    xt, k = rng.normal(size=(1, 7, 6, 2)), rng.normal(size=(3, 2, 2, 5))
    dn = ("NHWC", "HWIO", "NHWC")
    def fwd(v):
        return lax.conv_general_dilated(v, A(k), (2, 3), "VALID", dimension_numbers=dn)

    y, vjp = starling.vjp(fwd, A(xt))
    ct = A(rng.normal(size=tuple(y.shape)))
    want_t = vjp(ct)[0]
    pads = ((k.shape[0] - 1, k.shape[0] - 1 + 7 - ((y.shape[1] - 1) * 2 + k.shape[0])),
            (k.shape[1] - 1, k.shape[1] - 1 + 6 - ((y.shape[2] - 1) * 3 + k.shape[1])))
    got_t = lax.conv_transpose(ct, A(k), (2, 3), pads, dimension_numbers=dn,
                               transpose_kernel=True)
    assert_same(got_t, want_t, atol=1e-12)
    for pad, size in (("SAME", (6, 6)), ("VALID", (7, 6))):
        out = lax.conv_transpose(A(rng.normal(size=(1, 3, 2, 5))), A(rng.normal(size=(3, 2, 5, 4))),
                                 (2, 3), pad)
        assert tuple(out.shape) == (1,) + size + (4,)
    with pytest.raises(ValueError, match="feature_group_count"):
        lax.conv_general_dilated(A(x), A(w), (1, 1), "VALID", feature_group_count=2)
    with pytest.raises(TypeError, match="dtype"):
        lax.conv_general_dilated(A(x), A(w.astype(np.float32)), (1, 1), "VALID")


def test_conv_transforms(rng):
    x, w = A(rng.normal(size=(2, 4, 5, 3))), A(rng.normal(size=(4, 2, 2, 2)))
    f = functools.partial(lax.conv_general_dilated, window_strides=(2, 1), padding="SAME",
                          rhs_dilation=(1, 2), feature_group_count=2)
    check_grads(lambda a, b: f(a, b), (x, w), order=2)
    check_vmap(lambda a: f(a, w), (A(rng.normal(size=(3, 2, 4, 5, 3))),))
    check_vmap(lambda b: f(x, b), (A(rng.normal(size=(2, 4, 2, 2, 2))),))
    check_compiled(lambda a, b: f(a, b), x, w, atol=1e-12)
    assert lax.conv(x, A(rng.normal(size=(3, 4, 1, 1))), (1, 1), "VALID").shape == (2, 3, 5, 3)


# ---- optimization_barrier ---------------------------------------------------------------------

def test_optimization_barrier():
    x = A(np.arange(3.0))
    tree = {"a": x, "b": (x * 2,)}
    out = lax.optimization_barrier(tree)
    assert_same(out, tree)
    f = lambda v: snp.sum(lax.optimization_barrier((v * v, v))[0])  # noqa: E731
    check_grads(f, (x,), order=2)
    check_vmap(lambda v: lax.optimization_barrier(v * 2), (A(np.ones((2, 3))),))
    check_compiled(f, x)
    assert "optimization_barrier" in str(starling.make_ir(f)(x))
