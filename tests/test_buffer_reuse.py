"""Buffer reuse and donation in compiled programs (cpp backend).

The memory plan (src/lowering/passes/buffer_reuse.py) writes kernel outputs into dead or donated
buffers; the run-time checks (src/lowering/buffers.py) refuse any buffer something else can see.
Every program is checked three ways: against numpy_ref on the same Program (an independent
interpreter), bit for bit against the same cpp kernels with reuse turned off, and for the plan
itself (what was reused, what must never be). The programs of this module are compiled as one
shared object (one compiler run); the donation tests compile a few small functions of their own.
Intermediates here are small, so the reuse threshold is lowered to 0 bytes for the module.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import tree
from starling.arrays.array import wrap
from starling.core.ir import eval_program
from starling.lowering import backends, buffers, cache
from starling.lowering.fused import fused_kernel_p
from starling.lowering.passes import buffer_reuse as BR
from starling.lowering.pipeline import run_pipeline
from starling.transforms.compile import DonatedBufferError
from starling.transforms.stage import make_ir

pytestmark = pytest.mark.skipif(cache.find_compiler() is None, reason="no C++ compiler")

_ENV = {"STARLING_CACHE_DIR": None, "STARLING_CPP_STRICT": "1", "STARLING_REUSE_MIN_BYTES": "0",
        "STARLING_BUFFER_REUSE": None}


@pytest.fixture(scope="module", autouse=True)
def _env(tmp_path_factory):
    old = {k: os.environ.get(k) for k in _ENV}
    for k, v in _ENV.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    os.environ["STARLING_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernels"))
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


RNG = np.random.default_rng(7)


def _f32(*shape):
    return snp.asarray(RNG.normal(size=shape).astype(np.float32))


def _ptr(arr):
    """Data address of an Array's buffer (holding the buffer itself would block donation)."""
    return arr._buf.__array_interface__["data"][0]


# ---- programs -----------------------------------------------------------------------------------
# name -> (function, arguments); each names what the plan must or must not do in the tests below.

def chain(x):                      # elementwise groups separated by sort / cumsum
    s = snp.sort(x)
    a = snp.sin(s) * 2.0 + 1.0     # in place into the sort result (no kernel buffer is free)
    c = snp.cumsum(a)
    d = snp.exp(c * 0.1) - c * 3.0   # into a's buffer (a kernel output, died at cumsum)
    e = snp.cumsum(d)
    return snp.tanh(e * 1e-3) + e    # into d's buffer


def softmax(m):                    # b = a / sum(a): in place into the kernel output `a`
    a = snp.exp(m - 1.0)
    return a / snp.sum(a, axis=1, keepdims=True)


def read_later(x):                 # `a` is read again at the end: nothing may overwrite it
    a = snp.exp(x) + 1.0
    s = snp.sort(a)
    c = snp.cos(s) * 2.0
    t = snp.cumsum(c)
    return t * a


def view_alive(x, y):              # a NumPy view (flip) of `a` outlives `a` itself
    a = snp.exp(x) + 1.0
    v = snp.flip(a)
    s = snp.sort(snp.sin(y) * 3.0)
    b = snp.cos(s) + 2.0           # must not take a's buffer: v still reads it
    t = snp.cumsum(b)
    return t + v


def dead_before(x, y):             # a's buffer died at sort; a later kernel writes into it
    a = snp.exp(x) + 1.0
    s = snp.sort(a)
    c = snp.flip(s) * y + 2.0
    return snp.cumsum(c)


def outputs_kept(x):               # a program output is never overwritten
    a = snp.exp(x) * 0.5
    s = snp.sort(a)
    c = s * s + 1.0
    return a, snp.cumsum(c)


def broadcast_read(x, y):          # s read broadcast over rows, same bytes as the output
    a = snp.exp(x) * 2.0
    s = snp.sort(a)                # float64 [n]
    out = (s[None, :] * y).astype(snp.float32)   # float32 [2, n]: 8n bytes, as s
    return snp.cumsum(out, axis=1)


def transposed_read(m):            # a transposed read of s cannot run in place
    a = snp.exp(m) * 2.0
    s = snp.sort(a, axis=1)
    return s.T + 1.0


def twice(x):                      # the same buffer read twice at the same index: in place
    s = snp.sort(x)
    return snp.cumsum(s * s - s + 0.5)


def twice_transposed(m):           # the same buffer read at two index patterns
    s = snp.sort(snp.exp(m), axis=0)
    return snp.cumsum(s + s.T, axis=0)


def reduction_kernel(m):           # elementwise output + reduction of the same input, one
    s = snp.sort(m, axis=1)        # kernel: the elementwise output runs in place
    return snp.cumsum(s * 2.0, axis=1), snp.sum(s * 2.0, axis=1)


def column_reduction(m):           # the same with a column reduction (other loop structure)
    s = snp.sort(m, axis=0)
    return snp.cumsum(s * 2.0, axis=0), snp.max(s * 2.0, axis=0)


def big_parallel(m):               # large enough for the OpenMP paths of the kernels
    s = snp.sort(m, axis=1)
    t = snp.cos(s) * 2.0 + s
    return snp.cumsum(t, axis=1), snp.sum(t * s, axis=1)


def reinterpret(x):                # float32 buffer reused for an int32 output
    s = snp.sort(x)
    return snp.sort((s * 1000.0).astype(snp.int32))


def hard_values(x):                # NaN / inf / -0.0 through reused buffers
    s = snp.sort(x * -1.0)
    c = snp.where(s == 0.0, -0.0, s) * 2.0
    return snp.cumsum(snp.sqrt(c) + c)


def in_loops(x):                   # intermediates inside while / scan bodies are planned too
    def body(c):
        i, v = c
        s = snp.sort(snp.sin(v) * 2.0)
        return i + 1, snp.cumsum(snp.cos(s) + 1.0) * 1e-2
    _, w = st.while_loop(lambda c: c[0] < 3, body, (0, x))

    def step(c, xi):
        s = snp.sort(snp.exp(xi * 0.1))
        return c + snp.sum(s), snp.cumsum(s * 2.0)
    c, ys = st.scan(step, 0.0, snp.stack([w, x]))
    return c, ys


def reshaped_read(m):              # s read through a reshape (same element order): in place
    s = snp.sort(m, axis=1)
    return snp.cumsum(s.reshape(-1) * 2.0 + 1.0)


def reshaped_transposed(m):        # a reshape then a transpose reorders: never in place
    s = snp.sort(m, axis=1)
    return snp.cumsum(s.reshape(6, 6).T + 1.0, axis=0)


def stacked_read(m):               # a scan's stacked results read as one array: in place
    _, ys = st.scan(lambda c, x: (c, snp.sort(x) * 2.0), 0.0, m)
    return snp.cumsum(ys.reshape(-1) * 3.0)


def sizes(x0, x1, x5):             # size-0 / size-1 / odd sizes: no crash, nothing to reuse at 0
    outs = []
    for x in (x0, x1, x5):
        outs.append(snp.cumsum(snp.sort(snp.exp(x)) * 2.0))
    return outs


def random_program(seed):
    """A random chain over 6x6 float32 values: elementwise groups, sorts, cumsums, flips,
    transposes and reshapes (the last three are views), with values read again later and
    several outputs; bounded ops keep every value finite."""
    rng = np.random.default_rng(seed)
    steps = [(int(rng.integers(0, 9)), int(rng.integers(0, 99)), int(rng.integers(0, 99)))
             for _ in range(int(rng.integers(6, 14)))]
    n_out = int(rng.integers(1, 4))

    def f(x, y):
        vals = [x, y]
        for op, i, j in steps:
            a, b = vals[i % len(vals)], vals[j % len(vals)]
            if op == 0:
                v = snp.tanh(a) * 0.5 + 0.25
            elif op == 1:
                v = snp.sin(a) * b
            elif op == 2:
                v = a + b * 0.5
            elif op == 3:
                v = snp.sort(a, axis=1)
            elif op == 4:
                v = snp.cumsum(a, axis=0) * 0.25
            elif op == 5:
                v = snp.flip(a, axis=0)
            elif op == 6:
                v = a.T
            elif op == 7:
                v = snp.tanh(a.reshape(36)).reshape(6, 6)
            else:
                v = snp.cos(a) - b.T
            vals.append(v)
        return tuple(vals[-1 - k] for k in range(n_out))
    f.__name__ = f"random_{seed}"
    return f


N = 37        # odd: not a multiple of any vector width
CASES = {
    "chain": (chain, lambda: (_f32(N),)),
    "softmax": (softmax, lambda: (_f32(3, N),)),
    "read_later": (read_later, lambda: (_f32(N),)),
    "view_alive": (view_alive, lambda: (_f32(N), _f32(N))),
    "dead_before": (dead_before, lambda: (_f32(N), _f32(N))),
    "outputs_kept": (outputs_kept, lambda: (_f32(N),)),
    "broadcast_read": (broadcast_read, lambda: (snp.asarray(RNG.normal(size=N)),
                                                snp.asarray(RNG.normal(size=(2, N))))),
    "transposed_read": (transposed_read, lambda: (_f32(5, 5),)),
    "twice": (twice, lambda: (_f32(N),)),
    "twice_transposed": (twice_transposed, lambda: (_f32(6, 6),)),
    "reduction_kernel": (reduction_kernel, lambda: (_f32(4, 9),)),
    "column_reduction": (column_reduction, lambda: (_f32(9, 5),)),
    "big_parallel": (big_parallel, lambda: (_f32(2, 1 << 20),)),
    "reinterpret": (reinterpret, lambda: (_f32(N),)),
    "hard_values": (hard_values, lambda: (snp.asarray(np.array(
        [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.0, 3.0, np.nan], np.float32)),)),
    "in_loops": (in_loops, lambda: (_f32(N),)),
    "sizes": (sizes, lambda: (_f32(0), _f32(1), _f32(5))),
    "reshaped_read": (reshaped_read, lambda: (_f32(4, 9),)),
    "reshaped_transposed": (reshaped_transposed, lambda: (_f32(4, 9),)),
    "stacked_read": (stacked_read, lambda: (_f32(3, 12),)),
}
CASES.update({f"random_{seed}": (random_program(seed), lambda: (_f32(6, 6), _f32(6, 6)))
              for seed in range(16)})


@pytest.fixture(scope="module")
def compiled(_env):
    """name -> (program, args, executable with reuse, executable without); one compiler run
    (the kernels are the same C++ with and without the plan: the second build is a cache hit)."""
    staged = {}
    for name, (f, make_args) in CASES.items():
        args = make_args()
        staged[name] = (run_pipeline(make_ir(f)(*args)), args)
    backend = backends.get_backend("cpp")
    progs = [p for p, _ in staged.values()]
    with_plan = backend.compile_many(progs)
    os.environ["STARLING_BUFFER_REUSE"] = "0"
    try:
        without = backend.compile_many(progs)
    finally:
        os.environ.pop("STARLING_BUFFER_REUSE")
    return {name: (p, a, e, e0) for (name, (p, a)), e, e0 in
            zip(staged.items(), with_plan, without)}


def _run(exe, args):
    return [np.asarray(o) for o in exe(None, args)]


def _plans(exe):
    """[(equation, reuse tuple)] of the top-level fused Program of ``exe``."""
    return [(e, e.params["reuse"]) for e in exe.program.eqns
            if e.primitive is fused_kernel_p and "reuse" in e.params]


def _buffer_var(exe, ref):
    prog = exe.program
    return prog.invars[ref[1]] if ref[0] == "in" else prog.eqns[ref[1]].outvars[ref[2]]


@pytest.mark.parametrize("name", list(CASES))
def test_results_match_numpy_ref_and_no_reuse(compiled, name):
    prog, args, exe, exe0 = compiled[name]
    want = eval_program(prog, prog.consts, *args)
    before = dict(buffers.STATS)
    got = _run(exe, args)
    got_again = _run(exe, args)          # second call: pool buffers, same answers
    plain = _run(exe0, args)
    for g, g2, p, w in zip(got, got_again, plain, tree.leaves(want)):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, p)       # the plan changes no bit
        np.testing.assert_array_equal(g2, p)
        # cumsum of kernel results: float32 rounding of vector-math vs NumPy accumulates
        finite = np.abs(w[np.isfinite(w)]) if g.dtype.kind == "f" else np.zeros(0)
        tol = 1e-4 if g.dtype.kind == "f" else 0
        atol = tol * max(1.0, float(finite.max(initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=tol, atol=atol, equal_nan=True)
    assert buffers.STATS["reuse_refused"] == before["reuse_refused"]
    assert "reuse" not in str(exe0.program)


def test_inputs_are_never_modified(compiled):
    for name, (prog, args, exe, _) in compiled.items():
        copies = [np.array(a) for a in args]
        _run(exe, args)
        for a, c in zip(args, copies):
            np.testing.assert_array_equal(np.asarray(a), c, err_msg=name)


def test_chain_reuses_every_buffer_and_counts(compiled):
    _, args, exe, _ = compiled["chain"]
    prog = exe.program
    (e1, r1), (e2, r2), (e3, r3) = _plans(exe)
    assert _buffer_var(exe, r1[0]) in e1.invars                    # in place into sort's result
    assert prog.eqns[r1[0][1]].primitive.name == "sort"
    assert _buffer_var(exe, r2[0]) is e1.outvars[0]                # dead kernel buffers
    assert _buffer_var(exe, r3[0]) is e2.outvars[0]
    assert exe.schedule_source.count("_take(") == 3 and ".run((), (" in exe.schedule_source
    assert "reuse=" in str(exe.program)
    before = buffers.STATS["reused"]
    _run(exe, args)
    assert buffers.STATS["reused"] == before + 3


def test_softmax_divides_in_place(compiled):
    exe = compiled["softmax"][2]
    (eqn, reuse), = _plans(exe)
    buf = _buffer_var(exe, reuse[0])
    assert buf in eqn.invars and buf.aval.shape == (3, N)


def _never_reuses(exe, var):
    return all(_buffer_var(exe, r) is not var for _, reuse in _plans(exe) for r in reuse if r)


def _last_read(prog, var):
    return max([k for k, e in enumerate(prog.eqns) if var in e.invars], default=-1)


@pytest.mark.parametrize("name", list(CASES))
def test_no_buffer_is_overwritten_before_its_last_read(compiled, name):
    exe = compiled[name][2]
    prog = exe.program
    for k, e in enumerate(prog.eqns):
        for r in (e.params.get("reuse") or ()) if e.primitive is fused_kernel_p else ():
            if r is None:
                continue
            assert r[0] == "eqn"                  # no donation here: invars are never written
            buf = _buffer_var(exe, r)
            assert buf not in prog.outvars
            last = _last_read(prog, buf)
            assert last < k or (last == k and buf in e.invars)


def test_values_read_later_or_output_are_not_reused(compiled):
    exe = compiled["read_later"][2]
    a = exe.program.eqns[0].outvars[0]            # exp(x) + 1, read again by the last kernel
    last = _last_read(exe.program, a)
    for k, (eqn, reuse) in enumerate(_plans(exe)):
        if any(r and _buffer_var(exe, r) is a for r in reuse):
            assert eqn is exe.program.eqns[last]  # only the last reader, in place
    assert len(_plans(exe)) == 2
    exe = compiled["outputs_kept"][2]
    assert _never_reuses(exe, exe.program.outvars[0])
    for v in exe.program.invars:
        assert _never_reuses(exe, v)


def test_live_view_blocks_reuse(compiled):
    exe = compiled["view_alive"][2]
    a = next(e.outvars[0] for e in exe.program.eqns if e.primitive is fused_kernel_p)
    assert any(e.primitive.name == "rev" for e in exe.program.eqns)
    assert _never_reuses(exe, a)


def test_dead_buffer_is_written_by_a_later_kernel(compiled):
    exe = compiled["dead_before"][2]
    (eqn, reuse), = _plans(exe)
    buf = _buffer_var(exe, reuse[0])
    assert buf is exe.program.eqns[0].outvars[0] and buf not in eqn.invars


@pytest.mark.parametrize("name", ["broadcast_read", "transposed_read", "twice_transposed",
                                  "reshaped_transposed"])
def test_other_index_patterns_never_run_in_place(compiled, name):
    exe = compiled[name][2]
    for eqn, reuse in _plans(exe):
        for r in reuse:
            if r is not None:
                assert _buffer_var(exe, r) not in eqn.invars, name


@pytest.mark.parametrize("name", ["reduction_kernel", "column_reduction", "big_parallel"])
def test_elementwise_output_next_to_a_reduction_runs_in_place(compiled, name):
    exe = compiled[name][2]
    inplace = 0
    for eqn, reuse in _plans(exe):
        red = {v for e in eqn.params["program"].eqns if e.primitive.name.startswith("reduce")
               for v in e.outvars}
        for o, r in zip(eqn.outvars, reuse):
            if r is not None:
                assert eqn.params["program"].outvars[eqn.outvars.index(o)] not in red
                inplace += _buffer_var(exe, r) in eqn.invars
    assert inplace >= 1


@pytest.mark.parametrize("name, producer", [("reshaped_read", "sort"), ("stacked_read", "scan")])
def test_reshaped_read_runs_in_place(compiled, name, producer):
    """A kernel reading a buffer only through a reshape (a kernel output, or a scan's stacked
    results: e.g. a gradient scaled over the blocks a scan wrote) writes over it."""
    exe = compiled[name][2]
    (eqn, reuse), = [(e, r) for e, r in _plans(exe)
                     if any(x.primitive.name == "reshape" for x in e.params["program"].eqns)]
    buf = _buffer_var(exe, reuse[0])
    assert buf in eqn.invars and buf.aval.shape != eqn.outvars[0].aval.shape
    assert exe.program.eqns[[k for k, e in enumerate(exe.program.eqns)
                             if buf in e.outvars][0]].primitive.name == producer


def test_same_index_twice_runs_in_place_and_reinterpret(compiled):
    exe = compiled["twice"][2]
    (eqn, reuse), = _plans(exe)
    assert _buffer_var(exe, reuse[0]) in eqn.invars
    assert list(eqn.invars).count(_buffer_var(exe, reuse[0])) >= 1
    exe = compiled["reinterpret"][2]
    (eqn, reuse), = _plans(exe)
    buf = _buffer_var(exe, reuse[0])
    assert buf.aval.dtype == np.float32 and eqn.outvars[0].aval.dtype == np.int32


def test_control_flow_bodies_are_planned(compiled):
    exe = compiled["in_loops"][2]
    bodies = [p for e in exe.program.eqns for p in e.params.values()
              if hasattr(p, "eqns")]
    planned = [e for b in bodies for e in b.eqns
               if e.primitive is fused_kernel_p and "reuse" in e.params]
    assert planned
    # a body may write into its loop carries (donated by the loop from the second iteration
    # on), never into scanned slices, loop-invariant operands or the while condition's inputs
    donated_ins = set()
    for e in exe.program.eqns:
        for name, b in e.params.items():
            if not hasattr(b, "eqns"):
                continue
            if e.primitive.name == "scan":
                nc, nk = e.params["num_consts"], e.params["num_carry"]
                carries = set(range(nc, nc + nk))
            elif e.primitive.name == "while" and name == "body":
                carries = set(range(e.params["n_body"], len(b.invars)))
            else:
                carries = set()
            for q in b.eqns:
                for r in (q.params.get("reuse") or ()) if q.primitive is fused_kernel_p else ():
                    if r is not None and r[0] == "in":
                        assert r[1] in carries, (e.primitive.name, name, r)
                        donated_ins.add((e.primitive.name, r[1]))
                    else:
                        assert r is None or b.eqns[r[1]].outvars[r[2]] not in b.invars
    assert ("while", 1) in donated_ins          # the while loop's f32[37] carry


def test_plan_only_for_big_buffers_by_default(compiled, monkeypatch):
    prog, args, _, _ = compiled["chain"]
    monkeypatch.delenv("STARLING_REUSE_MIN_BYTES")
    fused = backends.get_backend("cpp").compile(prog).program
    assert not any("reuse" in e.params for e in fused.eqns)      # 37 floats < 64 KiB
    assert BR.plan(fused, None, min_bytes=0)


def test_debug_mode_runs_the_planned_schedule(compiled):
    _, args, exe, exe0 = compiled["chain"]
    with st.debug_mode(checksums=True) as dm:
        got = _run(exe, args)
    np.testing.assert_array_equal(got[0], _run(exe0, args)[0])
    assert dm.primitives().count("fused_kernel") == 3 and "sort" in dm.primitives()


# ---- run-time checks ----------------------------------------------------------------------------

def test_take_refuses_shared_or_unsuitable_buffers():
    def sched():
        out = {}
        b = np.ones(8, np.float32)
        out["sole"] = buffers.take(b, b.dtype, (8,)) is b
        v = b[::2]
        out["view"] = buffers.take(b, b.dtype, (8,))
        del v
        m = memoryview(b)
        out["memoryview"] = buffers.take(b, b.dtype, (8,))
        del m
        out["again"] = buffers.take(b, b.dtype, (8,)) is b
        out["reinterp"] = buffers.take(b, np.dtype(np.int16), (2, 8)).shape
        out["size"] = buffers.take(b, b.dtype, (9,))
        r = np.ones(8, np.float32)
        r.flags.writeable = False
        out["readonly"] = buffers.take(r, r.dtype, (8,))
        nc = np.ones((4, 4), np.float32).T
        out["strided"] = buffers.take(nc, nc.dtype, (4, 4))
        s = np.float32(1.0)
        out["scalar"] = buffers.take(s, np.dtype(np.float32), ())
        frombuf = np.frombuffer(bytearray(32), np.float32)
        out["foreign"] = buffers.take(frombuf, frombuf.dtype, (8,))
        return out
    out = sched()
    assert out["sole"] and out["again"] and out["reinterp"] == (2, 8)
    for k in ("view", "memoryview", "size", "readonly", "strided", "scalar", "foreign"):
        assert out[k] is None, k


def test_donatable_rules():
    a = snp.asarray(np.arange(6, dtype=np.float32))
    ids = [id(a._buf)]
    assert buffers.donatable(a, ids) is not None
    assert buffers.donatable(a, ids * 2) is None               # passed twice
    user_view = np.asarray(a)                                  # read-only view a user holds
    assert buffers.donatable(a, ids) is None
    del user_view
    b = a.reshape(2, 3)                                        # another Array over the memory
    assert buffers.donatable(a, ids) is None and buffers.donatable(b, [id(b._buf)]) is None
    del b
    assert buffers.donatable(a, ids) is not None
    empty = snp.asarray(np.zeros(0, np.float32))
    assert buffers.donatable(empty, [id(empty._buf)]) is None
    ro = np.ones(3)
    ro.flags.writeable = False
    assert buffers.donatable(wrap(ro), [id(ro)]) is None


# ---- donation -----------------------------------------------------------------------------------

def sgd(w, g):
    return w - 0.05 * g


def test_sgd_step_writes_into_the_donated_buffer():
    step = st.compile(sgd, donate_argnums=0, backend="cpp")
    w0 = RNG.normal(size=1001).astype(np.float32)
    g = snp.asarray(RNG.normal(size=1001).astype(np.float32))
    w = snp.asarray(w0)
    assert "d0" in step.lower(w, g).executable.schedule_source
    ptr = _ptr(w)
    before = buffers.STATS["donated"]
    w1 = step(w, g)
    assert _ptr(w1) == ptr and buffers.STATS["donated"] == before + 1
    np.testing.assert_allclose(np.asarray(w1), w0 - np.float32(0.05) * np.asarray(g),
                               rtol=1e-6, atol=1e-6)
    with pytest.raises(DonatedBufferError):
        w + 1
    with pytest.raises(DonatedBufferError):
        np.asarray(w)
    # a kernel-pool / reused buffer is donatable again: a training loop never allocates
    expect = np.asarray(w1).copy()
    for _ in range(3):
        w1 = step(w1, g)
        expect = expect - np.float32(0.05) * np.asarray(g)
        assert _ptr(w1) == ptr
    np.testing.assert_allclose(np.asarray(w1), expect, rtol=1e-5, atol=1e-6)


def test_donation_never_corrupts_views_or_other_arrays():
    step = st.compile(sgd, donate_argnums=0, backend="cpp")
    w0 = RNG.normal(size=257).astype(np.float32)
    g = snp.asarray(np.ones(257, np.float32))
    want = w0 - np.float32(0.05)

    w = snp.asarray(w0)
    held = np.asarray(w)                          # a user's NumPy view of w
    out = step(w, g)
    np.testing.assert_array_equal(held, w0)       # untouched
    assert not np.shares_memory(held, np.asarray(out))
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)

    w = snp.asarray(w0)
    other = w.reshape(257, 1)                     # another live Array over w's memory
    out = step(w, g)
    np.testing.assert_array_equal(np.asarray(other)[:, 0], w0)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    out2 = step(other.reshape(257), g)            # donating the view: its owner is shared
    np.testing.assert_array_equal(np.asarray(other)[:, 0], w0)
    np.testing.assert_allclose(np.asarray(out2), want, rtol=1e-6)

    both = st.compile(lambda a, b: (a - 0.05 * b, b * 2.0), donate_argnums=0, backend="cpp")
    w = snp.asarray(w0)
    r1, r2 = both(w, w)                           # the same buffer at two positions
    np.testing.assert_allclose(np.asarray(r1), w0 - np.float32(0.05) * w0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(r2), w0 * 2, rtol=1e-6)
    with pytest.raises(DonatedBufferError):
        w * 2


def test_donation_of_pytrees_identity_and_hard_values():
    def update(params, grads):
        return [(p - 0.5 * q, b * 0.5 + q.sum()) for (p, b), q in zip(params, grads)]
    step = st.compile(update, donate_argnums=0, backend="cpp")
    p0 = [np.array([np.nan, np.inf, -0.0, 1.0, -1.0], np.float32), np.ones((3, 3), np.float32)]
    b0 = [np.float32(1.0), np.zeros(1, np.float32)]
    gs = [snp.asarray(np.full(5, 2.0, np.float32)), snp.asarray(np.ones((3, 3), np.float32))]
    params = [(snp.asarray(p), snp.asarray(b)) for p, b in zip(p0, b0)]
    ptrs = [_ptr(p) for p, _ in params]
    out = step(params, gs)
    ref = update([(snp.asarray(p), snp.asarray(b)) for p, b in zip(p0, b0)], gs)
    for (p, b), (rp, rb), ptr in zip(out, ref, ptrs):
        np.testing.assert_array_equal(np.asarray(p), np.asarray(rp))
        np.testing.assert_array_equal(np.asarray(b), np.asarray(rb))
        assert _ptr(p) == ptr
    with pytest.raises(DonatedBufferError):
        params[0][0].sum()

    ident = st.compile(lambda x: x, donate_argnums=0, backend="cpp")
    x = snp.asarray(np.arange(4.0))
    y = ident(x)
    np.testing.assert_array_equal(np.asarray(y), np.arange(4.0))
    with pytest.raises(DonatedBufferError):
        x + 1


def test_donated_value_read_after_the_update_stays_correct():
    def f(w, g):
        new = w - g
        return new, snp.cumsum(snp.sort(w)) + new    # w is needed after `new` is computed
    step = st.compile(f, donate_argnums=0, backend="cpp")
    w0 = RNG.normal(size=65).astype(np.float32)
    g = snp.asarray(RNG.normal(size=65).astype(np.float32))
    a, b = step(snp.asarray(w0), g)
    new = w0 - np.asarray(g)
    np.testing.assert_allclose(np.asarray(a), new, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(b), np.cumsum(np.sort(w0)) + new, rtol=1e-5,
                               atol=1e-5)


def test_donation_off_switch(monkeypatch):
    monkeypatch.setenv("STARLING_BUFFER_REUSE", "0")
    step = st.compile(sgd, donate_argnums=0, backend="cpp")
    w = snp.asarray(np.ones(33, np.float32))
    ptr = _ptr(w)
    out = step(w, snp.asarray(np.ones(33, np.float32)))
    assert _ptr(out) != ptr
    np.testing.assert_allclose(np.asarray(out), np.full(33, 0.95, np.float32))
    with pytest.raises(DonatedBufferError):
        w + 1


def _mlp_loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = snp.maximum(h, 0.0)
    return snp.mean((h - y) ** 2)


def _mlp_step(params, x, y):
    loss, g = st.value_and_grad(_mlp_loss)(params, x, y)
    return loss, [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, g)]


def test_mlp_step_updates_donated_parameters_in_place():
    """The weight updates are GEMM epilogues (w - lr * x.T @ g): they write into w's buffer."""
    sizes = (33, 17, 5)
    data = [(RNG.normal(size=(m, n)).astype(np.float32) * 0.3, RNG.normal(size=n).astype(
        np.float32)) for m, n in zip(sizes[:-1], sizes[1:])]
    x = snp.asarray(RNG.normal(size=(9, sizes[0])).astype(np.float32))
    y = snp.asarray(RNG.normal(size=(9, sizes[-1])).astype(np.float32))
    step = st.compile(_mlp_step, donate_argnums=0, backend="cpp")
    ref = st.compile(_mlp_step, backend="numpy_ref")
    params = [(snp.asarray(w), snp.asarray(b)) for w, b in data]
    want = ref([(snp.asarray(w), snp.asarray(b)) for w, b in data], x, y)
    ptrs = [(_ptr(w), _ptr(b)) for w, b in params]
    got = step(params, x, y)
    for g, w in zip(tree.leaves(got), tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
    assert [(_ptr(w), _ptr(b)) for w, b in got[1]] == ptrs
    with pytest.raises(DonatedBufferError):
        params[0][0] + 1
    for _ in range(2):         # a training loop keeps the same parameter memory
        params = got[1]
        got = step(params, x, y)
    assert [(_ptr(w), _ptr(b)) for w, b in got[1]] == ptrs


def test_dynamic_shapes_plan_once_for_every_size():
    from starling.transforms.dynamic_spec import ShapesSpec, ShapeVar
    n = ShapeVar("n", min=1, max=4096)
    f = st.compile(chain, backend="cpp", dynamic_shapes=ShapesSpec({"x": {0: n}}))
    before = buffers.STATS["reused"]
    for size in (1, 2, 37, 1000):
        x = _f32(size)
        got = np.asarray(f(x))
        want = np.asarray(st.compile(chain, backend="numpy_ref")(x))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1, np.abs(want).max()))
    assert f.num_compiles == 1
    assert buffers.STATS["reused"] == before + 3 * 4
    assert "reuse=" in str(f.lower(_f32(5)).ir)


def test_gemm_epilogue_in_place_over_several_row_blocks():
    """w - lr * (x.T @ g) with w of 2048 x 256 float32: the GEMM runs in blocks of rows (1 MiB
    of product each), every block's epilogue reading and writing its own rows of w."""
    def update(w, x, g):
        return w - 0.1 * (x.T @ g)
    step = st.compile(update, donate_argnums=0, backend="cpp")
    w0 = RNG.normal(size=(2048, 256)).astype(np.float32)
    x = snp.asarray(RNG.normal(size=(8, 2048)).astype(np.float32))
    g = snp.asarray(RNG.normal(size=(8, 256)).astype(np.float32))
    ir = str(step.lower(snp.asarray(w0), x, g).ir)
    w = snp.asarray(w0)
    ptr = _ptr(w)
    out = step(w, x, g)
    want = w0 - np.float32(0.1) * (np.asarray(x).T @ np.asarray(g))
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)
    if "fused_matmul" in ir:       # the epilogue pass ran (a BLAS was found)
        assert _ptr(out) == ptr and "('in', 0)" in ir


def test_a_failing_call_never_exposes_a_half_written_donated_buffer():
    step = st.compile(sgd, donate_argnums=0, backend="cpp")
    g = snp.asarray(np.ones(40, np.float32))
    exe = step.lower(snp.asarray(np.ones(40, np.float32)), g).executable

    def boom(args, donated):
        raise RuntimeError("kernel failed")
    exe.call_donated = boom
    w = snp.asarray(np.ones(40, np.float32))
    with pytest.raises(RuntimeError, match="kernel failed"):
        step(w, g)
    with pytest.raises(DonatedBufferError):          # its buffer was handed over
        w + 1
    kept = snp.asarray(np.ones(40, np.float32))
    view = np.asarray(kept)                           # not donatable: nothing was handed over
    with pytest.raises(RuntimeError, match="kernel failed"):
        step(kept, g)
    np.testing.assert_array_equal(np.asarray(kept + 0), view)


def test_donate_argnums_out_of_range_is_a_clear_error_before_running():
    step = st.compile(sgd, donate_argnums=3, backend="cpp")
    w = snp.asarray(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="donate_argnums 3 is out of range"):
        step(w, w)
    np.testing.assert_array_equal(np.asarray(w), np.ones(4, np.float32))   # still usable


def test_ctypes_launcher_runs_the_same_plan(compiled, monkeypatch):
    from starling.lowering.backends.cpp import runtime as cpp_runtime
    monkeypatch.setattr(cpp_runtime, "launcher", lambda: None)
    prog, args, _, exe0 = compiled["chain"]
    exe = backends.get_backend("cpp").compile(prog)
    assert any(isinstance(f, cpp_runtime.CtypesKernel) for f in exe._steps[0].values())
    before = buffers.STATS["reused"]
    np.testing.assert_array_equal(_run(exe, args)[0], _run(exe0, args)[0])
    assert buffers.STATS["reused"] == before + 3


def test_loop_outputs_alias_only_what_the_body_can_pass_through():
    """A scan's stacked outputs are new arrays; a carry may be its initial value, a carry it
    swaps with, or a constant the body returns, never an unrelated input."""
    from starling.lowering.passes.buffer_reuse import loop_output_sources
    from starling.transforms.stage import make_ir

    def f(c0, c1, c2, k, xs):
        def body(c, x):
            a, b, d = c
            return (b, a, k), x + 1.0         # a and b swap; d becomes the constant k
        return st.scan(body, (c0, c1, c2), xs)

    args = (snp.ones(3), snp.ones(3), snp.ones(3), snp.ones(3), snp.ones((2, 3)))
    prog = make_ir(f)(*args)
    (eqn,) = [e for e in prog.eqns if e.primitive.name == "scan"]
    srcs = loop_output_sources(eqn)
    pos = {v: i for i, v in enumerate(eqn.invars)}
    c0, c1, c2, k = (pos[v] for v in prog.invars[:4])
    assert srcs[0] == srcs[1] == {c0, c1}
    assert srcs[2] == {c2, k}
    assert srcs[3] == set()
