"""Compiled per-example gradients (vmap(grad) of an MLP) and the outer-product rewrite that makes
them fast (src/lowering/passes/outer_product.py, applied by simplify; the eager dot_general impl
takes the same shortcut).

References are independent of the rewrite: float64 NumPy backprop for the MLP, and for single
dot_generals the one-term sum ``0.0 + a * b`` computed in float64 (exact for float32 operands,
so the float32 results must match bit for bit, signs of zeros included).
"""
from __future__ import annotations


import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.arrays.ops.linear import dot_general
from starling.core.ir import check_program, eval_program
from starling.lowering import backends, cache
from starling.lowering.passes.simplify import simplify
from starling.lowering.pipeline import run_pipeline
from starling.transforms.stage import make_ir

needs_cxx = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(cpp_kernel_env):
    yield


# ---- per-example gradients of an MLP -------------------------------------------------------------

def _loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = snp.maximum(h, 0.0)
    return -snp.sum((h - snp.logsumexp(h, axis=-1, keepdims=True)) * y)


PER_EXAMPLE = st.vmap(st.grad(lambda p, xi, yi: _loss(p, xi[None], yi[None])),
                      in_axes=(None, 0, 0))


def _reference(params, x, y):
    """Per-example gradients by explicit backprop in float64: [(dW[b,i,j], db[b,j]) per layer]."""
    params = [(w.astype(np.float64), b.astype(np.float64)) for w, b in params]
    acts = [x.astype(np.float64)]
    for i, (w, b) in enumerate(params):
        z = acts[-1] @ w + b
        acts.append(np.maximum(z, 0) if i < len(params) - 1 else z)
    z = acts[-1]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = y.astype(np.float64)
    delta = p * y.sum(axis=1, keepdims=True) - y
    out = [None] * len(params)
    for i in range(len(params) - 1, -1, -1):
        out[i] = (acts[i][:, :, None] * delta[:, None, :], delta)
        if i:
            delta = (delta @ params[i][0].T) * (acts[i] > 0)
    return out


def _mlp_case(sizes, batch, seed=0):
    rng = np.random.default_rng(seed)
    params = [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32),
               (rng.standard_normal(n) * 0.3).astype(np.float32))
              for m, n in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
    return params, x, y


def _as_arrays(params, x, y):
    return [(snp.asarray(w), snp.asarray(b)) for w, b in params], snp.asarray(x), snp.asarray(y)


def _check_grads(got, ref, rtol, atol):
    assert len(got) == len(ref)
    for (gw, gb), (rw, rb) in zip(got, ref):
        for g, r in ((gw, rw), (gb, rb)):
            g = np.asarray(g)
            assert g.dtype == np.float32 and g.shape == r.shape, (g.dtype, g.shape, r.shape)
            np.testing.assert_allclose(g.astype(np.float64), r, rtol=rtol, atol=atol)


MLP_CASES = [((13, 9, 7, 5), 1), ((13, 9, 7, 5), 3), ((13, 9, 7, 5), 17),
             ((784, 512, 512, 10), 5)]


@needs_cxx
@pytest.mark.parametrize("sizes,batch", MLP_CASES, ids=lambda v: str(v))
def test_compiled_per_example_grads_match_references(sizes, batch):
    params, x, y = _mlp_case(sizes, batch)
    args = _as_arrays(params, x, y)
    got = st.compile(PER_EXAMPLE, backend="cpp")(*args)
    oracle = st.compile(PER_EXAMPLE, backend="numpy_ref")(*args)
    _check_grads(got, _reference(params, x, y), rtol=1e-4, atol=1e-5)
    # The same optimised Program run by the oracle: only reduction order may differ.
    _check_grads(got, [(np.asarray(w, np.float64), np.asarray(b, np.float64))
                       for w, b in oracle], rtol=1e-5, atol=1e-6)
    # Eager vmap(grad) (no pipeline; dot_general's impl) agrees too.
    _check_grads(PER_EXAMPLE(*args), _reference(params, x, y), rtol=1e-4, atol=1e-5)


@needs_cxx
def test_per_example_weight_grads_are_written_by_fused_kernels():
    """The per-example weight gradients are no GEMMs and no transposed views: every result is
    written once, in the returned layout, by a fused kernel."""
    params, x, y = _mlp_case((13, 9, 7, 5), 4)
    low = st.compile(PER_EXAMPLE, backend="cpp").lower(*_as_arrays(params, x, y))
    prog = low.ir
    for e in prog.eqns:
        if e.primitive.name == "dot_general":
            assert len(e.outvars[0].aval.shape) < 3 or 1 in e.outvars[0].aval.shape[1:], e
        assert e.primitive.name != "transpose", e
    producers = {v: e for e in prog.eqns for v in e.outvars}
    for v in prog.outvars[::2]:   # dW of each layer
        assert producers[v].primitive.name == "fused_kernel"


# ---- the outer-product rewrite on single dot_generals ------------------------------------------

# (lhs shape, rhs shape, dimension numbers): every contracting dim has size 1 (or there is none).
OUTER = [
    ((5, 1, 7), (5, 1, 4), (((1,), (1,)), ((0,), (0,)))),        # vmap of x.T @ delta
    ((7, 1), (1, 4), (((1,), (0,)), ((), ()))),                  # plain k = 1 GEMM
    ((7,), (4,), (((), ()), ((), ()))),                          # no contraction at all
    ((7, 3, 1), (1, 4, 3), (((2,), (0,)), ((1,), (2,)))),        # batch dims not leading
    ((2, 1, 3, 1, 5), (1, 2, 1, 4), (((1, 3), (0, 2)), ((0,), (1,)))),  # several unit dims
    ((1, 1, 7), (1, 1, 4), (((1,), (1,)), ((0,), (0,)))),        # batch of one
    ((0, 1, 7), (0, 1, 4), (((1,), (1,)), ((0,), (0,)))),        # empty batch
    ((5, 1, 0), (5, 1, 3), (((1,), (1,)), ((0,), (0,)))),        # empty free dim
    ((3, 1, 33), (3, 1, 17), (((1,), (1,)), ((0,), (0,)))),      # odd sizes (vector tails)
]


def _outer_reference(a, b, dn):
    """float64 ``0.0 + lhs * rhs`` laid out as dot_general's (*batch, *lhs_free, *rhs_free)."""
    (lc, rc), (lb, rb) = dn
    lf = [i for i in range(a.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(b.ndim) if i not in rc and i not in rb]
    at = np.transpose(a, list(lb) + lf + list(lc)).astype(np.float64)
    bt = np.transpose(b, list(rb) + rf + list(rc)).astype(np.float64)
    nb = len(lb)
    at = at.reshape(at.shape[:nb + len(lf)] + (1,) * len(rf))
    bt = bt.reshape(bt.shape[:nb] + (1,) * len(lf) + bt.shape[nb:nb + len(rf)])
    prod = at * bt
    return prod + 0.0 if lc else prod


def _edge_operands(rng, lshape, rshape, dt):
    vals = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, -1.5, 2.0, 3e38, -1e-40], dt)
    a = rng.standard_normal(lshape).astype(dt)
    b = rng.standard_normal(rshape).astype(dt)
    if a.size and b.size:
        a.flat[:min(a.size, len(vals))] = vals[:a.size]
        b.flat[:min(b.size, len(vals))] = vals[::-1][:b.size]
    return a, b


def _assert_same_bits(got, want):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


def _run(prog, *args):
    return eval_program(prog, prog.consts, *[snp.asarray(a) for a in args])


def _outer_programs(dt):
    rng = np.random.default_rng(1)
    out = []
    for lshape, rshape, dn in OUTER:
        a, b = _edge_operands(rng, lshape, rshape, dt)

        def f(x, z, dn=dn):
            return dot_general(x, z, dn)
        out.append((make_ir(f)(snp.asarray(a), snp.asarray(b)), a, b,
                    _outer_reference(a, b, dn).astype(dt)))
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_simplify_rewrites_outer_products_exactly(dt):
    with np.errstate(all="ignore"):
        for prog, a, b, want in _outer_programs(dt):
            out = simplify(prog)
            check_program(out)
            assert "dot_general" not in [e.primitive.name for e in out.eqns], out
            _assert_same_bits(_run(out, a, b)[0], want)
            # Eager dot_general (its impl takes the same shortcut) agrees bit for bit.
            _assert_same_bits(_run(prog, a, b)[0], want)


@needs_cxx
def test_cpp_outer_products_are_exact():
    """All cases in one compiler run; the fused kernels must keep ``+ 0.0`` (-0.0 -> +0.0)."""
    cases = _outer_programs(np.float32) + _outer_programs(np.float64)
    progs = [run_pipeline(p) for p, *_ in cases]
    exes = backends.get_backend("cpp").compile_many(progs)
    with np.errstate(all="ignore"):
        for exe, (_, a, b, want) in zip(exes, cases):
            _assert_same_bits(exe.run_buffers(a, b)[0], want)


def test_not_rewritten_when_not_a_plain_product():
    """Contractions over more than one element, complex, integer, low-precision and mixed
    accumulation keep their dot_general (and its numbers)."""
    rng = np.random.default_rng(2)
    cases = [
        (np.float32, (5, 2, 7), (5, 2, 4), (((1,), (1,)), ((0,), (0,))), None),
        (np.complex64, (5, 1, 7), (5, 1, 4), (((1,), (1,)), ((0,), (0,))), None),
        (np.int32, (5, 1, 7), (5, 1, 4), (((1,), (1,)), ((0,), (0,))), None),
        (np.float16, (5, 1, 7), (5, 1, 4), (((1,), (1,)), ((0,), (0,))), None),
        (np.float32, (5, 1, 7), (5, 1, 4), (((1,), (1,)), ((0,), (0,))), np.float64),
    ]
    for dt, ls, rs, dn, pref in cases:
        a = (rng.standard_normal(ls) * 3).astype(dt)
        b = (rng.standard_normal(rs) * 3).astype(dt)

        def f(x, z, dn=dn, pref=pref):
            return dot_general(x, z, dn, preferred_element_type=pref)
        prog = make_ir(f)(snp.asarray(a), snp.asarray(b))
        out = simplify(prog)
        assert "dot_general" in [e.primitive.name for e in out.eqns], (dt, pref)
        want = np.einsum("bki,bkj->bij", a.astype(np.complex128 if dt == np.complex64
                                                  else np.float64), b)
        got = np.asarray(_run(out, a, b)[0])
        assert got.dtype == np.dtype(pref or dt)
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-2)


def test_transpose_of_outer_product_is_folded_when_it_is_the_only_use():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 1, 5)).astype(np.float32)
    b = rng.standard_normal((6, 1, 3)).astype(np.float32)
    dn = (((1,), (1,)), ((0,), (0,)))
    want = _outer_reference(a, b, dn).astype(np.float32)

    def only(x, z):
        return snp.transpose(dot_general(x, z, dn), (0, 2, 1))

    def twice(x, z):
        d = dot_general(x, z, dn)
        return snp.transpose(d, (2, 0, 1)), d * 2.0
    out = run_pipeline(make_ir(only)(snp.asarray(a), snp.asarray(b)))
    names = [e.primitive.name for e in out.eqns]
    assert "transpose" not in names and "dot_general" not in names, out
    assert names.count("multiply") == 1, out
    _assert_same_bits(_run(out, a, b)[0], want.transpose(0, 2, 1))
    # Two transposes compose; simplify alone drops the superseded rewrites.
    def nested(x, z):
        return snp.transpose(snp.transpose(dot_general(x, z, dn), (0, 2, 1)), (2, 0, 1))
    out = simplify(make_ir(nested)(snp.asarray(a), snp.asarray(b)))
    names = [e.primitive.name for e in out.eqns]
    assert names.count("multiply") == 1 and "dot_general" not in names, out
    _assert_same_bits(_run(out, a, b)[0], want.transpose(0, 2, 1).transpose(2, 0, 1))
    # With a second use the product is computed once and the transpose stays a view of it.
    out = run_pipeline(make_ir(twice)(snp.asarray(a), snp.asarray(b)))
    names = [e.primitive.name for e in out.eqns]
    assert "dot_general" not in names and names.count("multiply") == 2, out
    r1, r2 = _run(out, a, b)
    _assert_same_bits(r1, want.transpose(2, 0, 1))
    _assert_same_bits(r2, want * np.float32(2.0))


def test_outer_product_with_a_dynamic_batch():
    batch = st.ShapeVar("batch", min=1, max=64)
    dn = (((1,), (1,)), ((0,), (0,)))
    f = st.compile(lambda x, z: dot_general(x, z, dn),
                   dynamic_shapes=st.ShapesSpec({"x": {0: batch}, "z": {0: batch}}),
                   backend="numpy_ref")
    rng = np.random.default_rng(4)
    for n in (1, 3, 17):
        a = rng.standard_normal((n, 1, 7)).astype(np.float32)
        b = rng.standard_normal((n, 1, 4)).astype(np.float32)
        _assert_same_bits(f(snp.asarray(a), snp.asarray(b)),
                          _outer_reference(a, b, dn).astype(np.float32))
    assert f.num_compiles == 1
    ir = f.lower(snp.asarray(a), snp.asarray(b)).ir
    assert "dot_general" not in [e.primitive.name for e in ir.eqns], ir
