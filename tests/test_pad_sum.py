"""A sum of zero pads of non-overlapping pieces becomes one concatenate (src/lowering/passes/
pad_sum.py, applied by simplify): when it applies, what it refuses, and that the result has the
same bits as the sum (signed zeros, NaN, inf) eagerly and under compile."""
from __future__ import annotations

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import lax
from starling.core.ir import eval_program
from starling.lowering.passes.dce import dce
from starling.lowering.passes.simplify import simplify

RNG = np.random.default_rng(0)


def _names(prog):
    return [e.primitive.name for e in prog.eqns]


def _hard(shape, dtype=np.float32):
    x = RNG.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[: 4] = [-0.0, np.nan, np.inf, -np.inf][: flat.size]
    return x


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    if a.dtype.kind == "f":
        assert np.array_equal(np.isnan(a), np.isnan(b))
        ok = ~np.isnan(a)
        assert np.array_equal(a[ok], b[ok]) and np.array_equal(np.signbit(a[ok]), np.signbit(b[ok]))
    else:
        assert np.array_equal(a, b)


def _compiled_matches(f, args, want):
    # transcendental formulas of compiled kernels may differ from NumPy's in the last bit; the
    # sign of every zero and the NaN positions may not
    got = np.asarray(st.compile(f)(*args))
    want = np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)
    zero = want == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


def _check(f, args, rewritten):
    prog = st.make_ir(f)(*args)
    out = dce(simplify(prog))
    names = _names(out)
    if rewritten:
        assert "pad" not in names and "concatenate" in names, names
    else:
        assert names.count("pad") == _names(prog).count("pad"), names
    want = eval_program(prog, [], *[snp.asarray(a) for a in args])[0]
    got = eval_program(out, [], *[snp.asarray(a) for a in args])[0]
    _same_bits(got, want)
    _compiled_matches(f, args, want)


def _pads(*cfgs, value=0.0):
    def f(*xs):
        terms = [lax.pad(x, value, cfg) for x, cfg in zip(xs, cfgs)]
        out = terms[0]
        for t in terms[1:]:
            out = out + t
        return out
    return f


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_side_by_side_pieces_become_one_concatenate(dtype):
    # out = [a | b | c] along dim 1; -0.0 + 0.0 = +0.0 as in the sum
    f = _pads(((0, 0, 0), (0, 8, 0)), ((0, 0, 0), (4, 4, 0)), ((0, 0, 0), (8, 0, 0)))
    _check(f, [_hard((5, 4), dtype) for _ in range(3)], True)


def test_gaps_are_zeros_and_order_of_terms_does_not_matter():
    f = _pads(((6, 0, 0), (0, 0, 0)), ((0, 7, 0), (0, 0, 0)))   # rows 3..5 covered by neither
    _check(f, [_hard((3, 2)), _hard((2, 2))], True)


def test_integer_pieces():
    f = _pads(((0, 3, 0),), ((2, 0, 0),), value=0)
    _check(f, [np.arange(2, dtype=np.int32) - 1, np.arange(3, dtype=np.int32) + 5], True)


@pytest.mark.parametrize("cfgs, shapes", [
    ((((0, 2, 0),), ((1, 0, 0),)), [(3,), (4,)]),                       # overlap: a real sum
    ((((0, 0, 0), (0, 2, 0)), ((2, 0, 0), (0, 0, 0))), [(5, 3), (3, 5)]),  # two dims
    ((((0, 1, 1),), ((3, 0, 0),)), [(2,), (1,)]),                       # interior padding
])
def test_refused_where_not_a_placement(cfgs, shapes):
    _check(_pads(*cfgs), [_hard(s) for s in shapes], False)


def test_nonzero_or_negative_zero_padding_is_refused():
    for value in (1.0, -0.0):
        _check(_pads(((0, 2, 0),), ((2, 0, 0),), value=value), [_hard((2,)), _hard((2,))],
               False)


def test_gradient_of_split_matches_eager():
    # the pattern the rule exists for: q, k, v = split(x @ w) in a transformer's backward
    def loss(w, x):
        qkv = x @ w
        q, k, v = qkv[..., :4], qkv[..., 4:8], qkv[..., 8:]
        return snp.sum(q * k * snp.tanh(v))

    w, x = RNG.standard_normal((3, 12)).astype(np.float32), _hard((6, 3))
    x[0] = 0.0
    x[1, 0] = np.nan
    prog = st.make_ir(st.grad(loss))(w, x)
    out = dce(simplify(prog))
    assert "concatenate" in _names(out) and "pad" not in _names(out)
    args = [snp.asarray(w), snp.asarray(x)]
    _same_bits(eval_program(out, [], *args)[0], eval_program(prog, [], *args)[0])
    _compiled_matches(st.grad(loss), [w, x], st.grad(loss)(*args))


@pytest.mark.parametrize("cut", [8, 6])   # 6: the pieces are not whole heads
def test_merged_heads_are_placed_before_the_merge(cut):
    # gradient of q, k = split(qkv) -> (B, T, H, hd) -> transpose: the pad operands are reshapes
    # of transposes; they are concatenated as (B, T, H, hd) pieces (one copy, no reshape copy)
    B, T, H, hd = 2, 3, 2, 4

    def heads(t):
        return snp.transpose(snp.reshape(t, (B, T, -1, hd)), (0, 2, 1, 3))

    def loss(qkv):
        if cut % hd:
            return snp.sum(snp.sin(qkv[..., :cut])) + snp.sum(heads(qkv[..., cut:cut + 8]) ** 2)
        q, k = qkv[..., :cut], qkv[..., cut:16]
        return snp.sum(heads(q) * snp.tanh(heads(k)))

    x = _hard((B, T, 3 * H * hd))
    x[0, 0, 5] = -0.0
    prog = st.make_ir(st.grad(loss))(x)
    out = dce(simplify(prog))
    names = _names(out)
    assert "pad" not in names and "concatenate" in names, names
    cat = next(e for e in out.eqns if e.primitive.name == "concatenate")
    assert len(cat.outvars[0].aval.shape) == (4 if cut % hd == 0 else 3)
    xs = snp.asarray(x)
    _same_bits(eval_program(out, [], xs)[0], eval_program(prog, [], xs)[0])
    _compiled_matches(st.grad(loss), [x], st.grad(loss)(xs))


def test_pieces_from_products_that_underflow_keep_their_add():
    # the cotangent of x[:2] is a product whose terms underflow: it can be -0.0, and the sum of
    # pads gives +0.0 there (eager and compiled must agree)
    def loss(x, w):
        a = x[:2].astype(np.float64)
        return snp.sum(a @ w) + snp.sum(x[2:] * 2.0)

    x = np.ones(4, np.float32)
    w = np.full((2, 2), -1e-300, np.float64)
    want = st.grad(loss)(snp.asarray(x), snp.asarray(w))
    _same_bits(want, np.array([0.0, 0.0, 2.0, 2.0], np.float32))
    _same_bits(st.compile(st.grad(loss))(x, w), want)
