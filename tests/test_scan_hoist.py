"""Scan hoisting (src/lowering/passes/scan_hoist.py): products of scanned slices and loop constants
run once before the loop (products bit-equal to the loop without hoisting), products a carry only
accumulates run once after it (the same values up to summation order); NumPy and
finite-difference references."""
import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling.lowering.passes.scan_hoist import scan_hoist


def _scans(prog):
    out = []
    for e in prog.eqns:
        if e.primitive.name == "scan":
            out.append(e)
            out.extend(_scans(e.params["body"]))
    return out


def _body_prims(eqn):
    return [e.primitive.name for e in eqn.params["body"].eqns]


def _products(names):
    """How many of the primitive names are products (the cpp backend fuses dot_generals into
    fused_matmul equations)."""
    return sum(n in ("dot_general", "fused_matmul") for n in names)


def _run_both(f, args, monkeypatch, backend=None):
    """(hoisted result, plain result, hoisted lowered IR) of compiling f on args; the plain
    lowered IR is kept as ``_run_both.plain_ir``."""
    res = []
    irs = []
    for flag in ("1", "0"):
        monkeypatch.setenv("STARLING_SCAN_HOIST", flag)
        g = st.compile(f, backend=backend) if backend else st.compile(f)
        irs.append(g.lower(*args).ir)
        res.append([np.asarray(x) for x in st.tree.leaves(g(*args))])
    _run_both.plain_ir = irs[1]
    return res[0], res[1], irs[0]


def _rnn_data(seq=7, batch=3, hid=5, seed=0):
    rng = np.random.default_rng(seed)
    wx = rng.standard_normal((hid, hid)).astype(np.float32) / 2
    wh = rng.standard_normal((hid, hid)).astype(np.float32) / 3
    b = rng.standard_normal(hid).astype(np.float32)
    xs = rng.standard_normal((seq, batch, hid)).astype(np.float32)
    return wx, wh, b, xs


def _np_rnn_loss(wx, wh, b, xs):
    h = np.zeros(xs.shape[1:], np.float64)
    total = 0.0
    for x in xs.astype(np.float64):
        h = np.tanh(x @ wx + h @ wh + b)
        total += np.sum(h * h)
    return total


def _rnn_loss(wx, wh, b, xs):
    def cell(h, x):
        h = snp.tanh(x @ wx + h @ wh + b)
        return h, snp.sum(h * h)
    _, ys = st.scan(cell, snp.zeros(xs.shape[1:]), xs)
    return snp.sum(ys)


def test_rnn_input_projection_runs_before_the_loop(monkeypatch):
    wx, wh, b, xs = _rnn_data()
    hoisted, plain, ir = _run_both(_rnn_loss, (wx, wh, b, xs), monkeypatch)
    # the product with the slice left the body: one dot_general (h @ wh) stays inside
    (scan,) = _scans(ir)
    assert _products(_body_prims(scan)) == 1
    assert _products(e.primitive.name for e in ir.eqns) == 1
    for a, p in zip(hoisted, plain):
        np.testing.assert_array_equal(a, p)
    np.testing.assert_allclose(hoisted[0], _np_rnn_loss(wx, wh, b, xs), rtol=1e-5)


def test_rnn_gradient_matches_finite_differences(monkeypatch):
    wx, wh, b, xs = _rnn_data(seq=5, batch=2, hid=4, seed=1)
    f = st.value_and_grad(_rnn_loss, argnums=(0, 1, 2))
    hoisted, plain, ir = _run_both(f, (wx, wh, b, xs), monkeypatch)
    # forward: h @ wh stays in the loop; backward: dz @ wh.T stays, the weight gradients
    # (x.T @ dz, h.T @ dz) and the bias gradient (sum of dz) leave it
    fwd, bwd = _scans(ir)
    assert _products(_body_prims(fwd)) == 1 and _products(_body_prims(bwd)) == 1
    assert bwd.params["num_carry"] == 1 and len(bwd.outvars) == 2   # dh; the stacked dz
    for a, p in zip(hoisted, plain):
        np.testing.assert_allclose(a, p, rtol=1e-5, atol=1e-6)
    eps = 1e-6
    args = [wx.astype(np.float64), wh.astype(np.float64), b.astype(np.float64)]
    for k, g in enumerate(hoisted[1:]):
        num = np.zeros(args[k].shape)
        for idx in np.ndindex(args[k].shape):
            up = [a.copy() for a in args]
            dn = [a.copy() for a in args]
            up[k][idx] += eps
            dn[k][idx] -= eps
            num[idx] = (_np_rnn_loss(*up, xs) - _np_rnn_loss(*dn, xs)) / (2 * eps)
        np.testing.assert_allclose(g, num, rtol=2e-3, atol=2e-3)


def test_reverse_scan_two_slices_and_an_invariant_operand(monkeypatch):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    x1 = rng.standard_normal((5, 3, 6)).astype(np.float32)
    x2 = rng.standard_normal((5, 3, 4)).astype(np.float32)

    def f(w, x1, x2):
        def body(c, xs):
            a, b = xs
            # w.T is computed in the body from the constant alone; the product reads two slices
            p = a @ w.T + b
            return c * 0.5 + p, p * 2.0
        return st.scan(body, snp.zeros((3, 4)), (x1, x2), reverse=True)

    hoisted, plain, ir = _run_both(f, (w, x1, x2), monkeypatch)
    (scan,) = _scans(ir)
    assert _products(_body_prims(scan)) == 0
    for a, p in zip(hoisted, plain):
        np.testing.assert_array_equal(a, p)
    c = np.zeros((3, 4))
    ys = np.zeros((5, 3, 4))
    for t in reversed(range(5)):
        p = x1[t].astype(np.float64) @ w.T + x2[t]
        c = c * 0.5 + p
        ys[t] = p * 2
    np.testing.assert_allclose(hoisted[0], c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hoisted[1], ys, rtol=1e-5, atol=1e-6)


def test_nested_scan_and_numpy_ref_backend(monkeypatch):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    xs = rng.standard_normal((4, 2, 5, 3)).astype(np.float32)

    def f(w, xs):
        def outer(c, x):
            def inner(ci, xi):
                return ci + xi @ w, snp.sum(xi @ w)
            ci, ys = st.scan(inner, c, x)
            return ci, ys
        return st.scan(outer, snp.zeros((5, 3)), xs)

    for backend in (None, "numpy_ref"):
        hoisted, plain, ir = _run_both(f, (w, xs), monkeypatch, backend=backend)
        inner = [s for s in _scans(ir) if _products(_body_prims(s))]
        assert not inner
        for a, p in zip(hoisted, plain):
            if backend is None:   # the native GEMM: the same bits for any number of rows
                np.testing.assert_array_equal(a, p)
            else:                 # NumPy's BLAS may block a taller product differently
                np.testing.assert_allclose(a, p, rtol=1e-6, atol=1e-6)
    ref = (xs.astype(np.float64) @ w).sum(axis=(0, 1))
    np.testing.assert_allclose(hoisted[0], ref, rtol=1e-5, atol=1e-5)


def test_bodies_without_a_slice_product_are_left_alone(monkeypatch):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    xs = rng.standard_normal((6, 3)).astype(np.float32)

    def elementwise_only(xs):
        return st.scan(lambda c, x: (c + snp.exp(x), x * 2.0), snp.zeros(3), xs)

    def carry_product(w, xs):
        return st.scan(lambda c, x: (snp.tanh(c @ w) + x, c), snp.ones(3), xs)

    for f, args in ((elementwise_only, (xs,)), (carry_product, (w, xs))):
        hoisted, plain, ir = _run_both(f, args, monkeypatch)
        (scan,) = _scans(ir)
        (scan_plain,) = _scans(_run_both.plain_ir)
        assert len(scan.invars) == len(scan_plain.invars)
        assert _body_prims(scan) == _body_prims(scan_plain)
        for a, p in zip(hoisted, plain):
            np.testing.assert_array_equal(a, p)


def test_length_one_and_a_product_that_is_also_an_output(monkeypatch):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((2, 3)).astype(np.float32)
    for n in (1, 3):
        xs = rng.standard_normal((n, 4, 2)).astype(np.float32)

        def f(w, xs):
            return st.scan(lambda c, x: (c + x @ w, x @ w), snp.zeros((4, 3)), xs)

        hoisted, plain, ir = _run_both(f, (w, xs), monkeypatch)
        (scan,) = _scans(ir)
        assert _products(_body_prims(scan)) == 0
        for a, p in zip(hoisted, plain):
            np.testing.assert_array_equal(a, p)
        np.testing.assert_allclose(hoisted[1], xs.astype(np.float64) @ w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(hoisted[0], (xs.astype(np.float64) @ w).sum(0), rtol=1e-5,
                                   atol=1e-5)


def test_pass_is_the_identity_when_switched_off(monkeypatch):
    wx, wh, b, xs = _rnn_data()
    monkeypatch.setenv("STARLING_SCAN_HOIST", "1")
    prog = st.compile(_rnn_loss).lower(wx, wh, b, xs).ir
    monkeypatch.setenv("STARLING_SCAN_HOIST", "0")
    assert scan_hoist(prog) is prog


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_other_dtypes(monkeypatch, dtype):
    rng = np.random.default_rng(6)
    w = (rng.standard_normal((3, 3)) * 4).astype(dtype)
    xs = (rng.standard_normal((5, 2, 3)) * 4).astype(dtype)

    def f(w, xs):
        return st.scan(lambda c, x: (c * 2 + x @ w, c), snp.zeros((2, 3), dtype), xs)

    hoisted, plain, _ = _run_both(f, (w, xs), monkeypatch)
    for a, p in zip(hoisted, plain):
        np.testing.assert_array_equal(a, p)
    c = np.zeros((2, 3), dtype)
    for x in xs:
        c = c * 2 + x @ w
    np.testing.assert_allclose(hoisted[0], c, rtol=1e-12)


def test_a_product_too_large_to_stack_stays_in_the_loop(monkeypatch):
    # 1000 steps of (1, 2) @ (2, 20000): 80 MB of products stacked, against 8 KB of slices and
    # 4 KB of results: the loop keeps computing one step's product at a time
    rng = np.random.default_rng(7)
    w = rng.standard_normal((2, 20000)).astype(np.float32)
    xs = rng.standard_normal((1000, 1, 2)).astype(np.float32)

    def f(w, xs):
        return st.scan(lambda c, x: (c + snp.max(x @ w), snp.sum(x @ w)), snp.zeros(()), xs)

    monkeypatch.setenv("STARLING_SCAN_HOIST", "1")
    ir = st.compile(f).lower(w, xs).ir
    (scan,) = _scans(ir)
    assert _products(_body_prims(scan)) >= 1
    assert _products(e.primitive.name for e in ir.eqns) == 0


def test_accumulated_products_and_sums_leave_the_loop(monkeypatch):
    rng = np.random.default_rng(8)
    w = rng.standard_normal((3, 3)).astype(np.float32) / 2
    xs = rng.standard_normal((6, 4, 3)).astype(np.float32)
    for reverse in (False, True):
        def f(w, xs):
            def body(carry, x):
                c, acc, accb, acct = carry
                c = snp.tanh(c @ w + x)
                # x.T @ c: a slice times a value of the body; c.T @ x the other way round;
                # sum(c): a bias-style sum
                return (c, acc + x.T @ c, snp.sum(c, axis=0) + accb, c.T @ x + acct), None
            z = snp.zeros((3, 3))
            return st.scan(body, (snp.zeros((4, 3)), z, snp.zeros(3), z), xs,
                           reverse=reverse)[0]

        hoisted, plain, ir = _run_both(f, (w, xs), monkeypatch)
        (scan,) = _scans(ir)
        assert scan.params["num_carry"] == 1
        assert _products(_body_prims(scan)) == 1
        for a, p in zip(hoisted, plain):
            np.testing.assert_allclose(a, p, rtol=1e-5, atol=1e-6)
        c = np.zeros((4, 3))
        acc, accb, acct = np.zeros((3, 3)), np.zeros(3), np.zeros((3, 3))
        for t in (reversed(range(6)) if reverse else range(6)):
            x = xs[t].astype(np.float64)
            c = np.tanh(c @ w + x)
            acc, accb, acct = acc + x.T @ c, accb + c.sum(0), acct + c.T @ x
        for a, r in zip(hoisted, (c, acc, accb, acct)):
            np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-5)


def test_accumulators_read_elsewhere_or_by_constants_stay(monkeypatch):
    rng = np.random.default_rng(9)
    w = rng.standard_normal((3, 3)).astype(np.float32) / 2
    xs = rng.standard_normal((5, 3, 3)).astype(np.float32)

    def read_elsewhere(w, xs):
        def body(carry, x):
            c, acc = carry
            c = snp.tanh(c @ w + x + 0.1 * acc)          # the accumulator is read
            return (c, acc + c.T @ c), None
        return st.scan(body, (snp.zeros((3, 3)), snp.zeros((3, 3))), xs)[0]

    def constant_operand(w, xs):
        def body(carry, x):
            c, acc = carry
            c = snp.tanh(c @ w + x)
            return (c, acc + w.T @ c), None               # w is a loop constant
        return st.scan(body, (snp.zeros((3, 3)), snp.zeros((3, 3))), xs)[0]

    def batched_product(w, xs):
        def body(carry, x):
            c, acc = carry
            c = snp.tanh(c @ w + x)
            return (c, acc + snp.einsum("ij,ij->i", c, c)), None   # a batch dim: stays
        return st.scan(body, (snp.zeros((3, 3)), snp.zeros(3)), xs)[0]

    for f in (read_elsewhere, constant_operand, batched_product):
        hoisted, plain, ir = _run_both(f, (w, xs), monkeypatch)
        (scan,) = _scans(ir)
        assert scan.params["num_carry"] == 2, f.__name__
        for a, p in zip(hoisted, plain):
            np.testing.assert_array_equal(a, p)


def test_low_precision_accumulators_stay_in_the_loop(monkeypatch):
    import ml_dtypes
    rng = np.random.default_rng(10)
    for dtype in (np.float16, ml_dtypes.bfloat16):
        w = rng.standard_normal((3, 3)).astype(dtype)
        xs = rng.standard_normal((40, 3, 3)).astype(dtype)

        def f(w, xs):
            def body(carry, x):
                c, acc = carry
                c = snp.tanh(c @ w + x)
                return (c, acc + c.T @ x), None   # rounds to 8 / 11 bits every step
            return st.scan(body, (snp.zeros((3, 3), dtype), snp.zeros((3, 3), dtype)), xs)[0]

        hoisted, plain, ir = _run_both(f, (w, xs), monkeypatch)
        (scan,) = _scans(ir)
        assert scan.params["num_carry"] == 2
        for a, p in zip(hoisted, plain):
            np.testing.assert_array_equal(a.astype(np.float32), p.astype(np.float32))


def test_memory_rule_with_a_symbolic_dim(monkeypatch):
    # a symbolic batch dim in xs must not make the loop's own size unbounded: the 4000 steps'
    # products (2,) @ (2, 50000), 800 MB stacked, stay in the loop as with static shapes
    from starling.transforms.dynamic_spec import ShapesSpec, ShapeVar
    w = np.ones((2, 50000), np.float32) * 1e-3
    xs = np.ones((4000, 3, 2), np.float32)

    def f(w, xs):
        return st.scan(lambda c, x: (c + snp.max((snp.sum(x, axis=0) @ w) * (c + 1)), None),
                       snp.float32(0), xs)[0]

    monkeypatch.setenv("STARLING_SCAN_HOIST", "1")
    for spec in (None, ShapesSpec({"xs": {1: ShapeVar("b", min=1, max=64)}})):
        ir = st.compile(f, dynamic_shapes=spec).lower(w, xs).ir
        assert _products(e.primitive.name for e in ir.eqns) == 0
