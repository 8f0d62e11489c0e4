"""debug_mode: records of executed primitives (eager and compiled), save / load, debug_diff."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import DebugMode, debug_diff, debug_mode
from starling.lowering import debug as debug_hooks


def _step(x, w, scale=1.0):
    h = snp.tanh(x @ w)
    return snp.sum(h * scale, axis=0)


@pytest.fixture
def xw():
    rng = np.random.default_rng(0)
    return (snp.asarray(rng.standard_normal((4, 3)).astype(np.float32)),
            snp.asarray(rng.standard_normal((3, 2)).astype(np.float32)))


def test_eager_records(xw):
    x, w = xw
    with debug_mode(checksums=True) as dm:
        out = _step(x, w)
    np.testing.assert_allclose(out, _step(x, w))  # same values as without debug mode
    assert dm.primitives() == ["dot_general", "tanh", "multiply", "reduce_sum"]
    dot = dm.records[0]
    assert dot["source"] == "eager" and dot["depth"] == 0 and dot["index"] == 0
    assert [i["shape"] for i in dot["inputs"]] == [[4, 3], [3, 2]]
    assert dot["outputs"][0] == {**dot["outputs"][0], "shape": [4, 2], "dtype": "float32",
                                 "weak": False}
    assert dot["params"]["dimension_numbers"] == [[[1], [0]], [[], []]]
    red = dm.records[-1]
    assert red["params"] == {"axes": [0]}
    np.testing.assert_allclose(red["outputs"][0]["checksum"]["sum"],
                               float(np.sum(np.asarray(out, np.float64))), rtol=1e-6)
    json.dumps(dm.to_json())  # JSON-safe


def test_compiled_records(xw):
    x, w = xw
    f = starling.compile(_step, backend="numpy_ref")
    f(x, w)  # compile outside: the records show only execution
    with debug_mode() as dm:
        out = f(x, w)
    np.testing.assert_allclose(out, _step(x, w), rtol=1e-6)
    assert dm.primitives() == ["dot_general", "tanh", "reduce_sum"]  # simplify: h * 1.0 gone
    assert {r["source"] for r in dm.records} == {"compiled"}
    assert "checksum" not in dm.records[0]["outputs"][0]


def test_control_flow_and_grad_are_recorded(xw):
    x, _ = xw
    with debug_mode() as dm:
        starling.cond(True, lambda a: snp.sin(a), lambda a: a, x)
        starling.grad(lambda a: snp.sum(a * a))(x)
    names = dm.primitives()
    assert names[0] == "switch" and names[1] == "sin"
    assert dm.records[1]["depth"] == 1 and dm.records[0]["depth"] == 0
    assert "branches" in dm.records[0]["params"]
    assert "reduce_sum" in names and names.count("multiply") >= 2


def test_no_records_when_not_active(xw):
    x, w = xw
    dm = DebugMode(checksums=True)
    _step(x, w)
    assert len(dm) == 0
    with dm:
        snp.sin(x)
    n = len(dm)
    assert n == 1
    _step(x, w)
    starling.compile(_step)(x, w)
    assert len(dm) == n and debug_hooks.active() is None
    assert starling.core.trace.current_trace() is starling.core.trace.EVAL_TRACE


def test_save_and_load(tmp_path, xw):
    x, w = xw
    with debug_mode(checksums=True, label={"config": "base"}) as dm:
        _step(x, w)
    path = dm.save_logs(tmp_path / "run.json")
    back = DebugMode.load_logs(path)
    assert back.records == dm.records and back.label == {"config": "base"}
    assert not debug_diff(dm, path)
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a Starling debug log"):
        DebugMode.load_logs(tmp_path / "bad.json")
    (tmp_path / "bad2.json").write_text("not json")
    with pytest.raises(ValueError, match="not a Starling debug log"):
        DebugMode.load_logs(tmp_path / "bad2.json")


def test_diff_finds_planted_divergence(xw):
    x, w = xw
    with debug_mode(checksums=True) as a:
        _step(x, w)
        snp.exp(x)
    w2 = w.at[1, 1].add(1e-3)
    with debug_mode(checksums=True) as b:
        _step(x, w2)
        snp.exp(x)
    d = debug_diff(a, b)
    assert d and d.index == 0 and d.primitive == ("dot_general", "dot_general")
    assert any("input[1] checksum sum" in s for s in d.differences)
    text = str(d)
    assert "first divergence at record 0" in text and "dot_general" in text
    # Within tolerance: no divergence.
    w3 = w * (1 + 1e-9)
    with debug_mode(checksums=True) as c:
        _step(x, w3)
        snp.exp(x)
    assert not debug_diff(a, c, rtol=1e-5)
    assert debug_diff(a, c, exact=True) or np.array_equal(np.asarray(w3), np.asarray(w))


def test_diff_reports_shape_params_and_length_with_context(xw):
    x, w = xw
    with debug_mode() as a:
        _step(x, w)
    x3 = x[:3]
    with debug_mode() as b:
        _step(x3, w)  # a different batch: shapes diverge at the first op
    d = debug_diff(a, b)
    assert d.index == 0 and "input[0] shape (4, 3) (a) vs (3, 3) (b)" in d.differences
    with debug_mode() as c:
        h = snp.tanh(x @ w)
        snp.sum(h * 1.0, axis=1)  # a different reduction axis
    d = debug_diff(a, c)
    assert d.index == 3 and d.primitive == ("reduce_sum", "reduce_sum")
    assert any("params differ: axes=[0] (a) vs [1] (b)" in s for s in d.differences)
    assert len(d.context) == 3 and "tanh" in d.context[1]
    with debug_mode() as e:
        _step(x, w)
        snp.sin(x)
    d = debug_diff(a, e)
    assert d.index == 4 and "run b has 1 more records" in d.differences[0]


def test_diff_across_processes(tmp_path, xw):
    x, w = xw
    np.savez(tmp_path / "in.npz", x=np.asarray(x), w=np.asarray(w))
    script = textwrap.dedent("""
        import sys, numpy as np, starling, starling.numpy as snp
        d = sys.argv[1]
        z = np.load(d + "/in.npz")
        x, w = snp.asarray(z["x"]), snp.asarray(z["w"])
        f = starling.compile(lambda x, w: snp.sum(snp.tanh(x @ w), axis=0), backend="numpy_ref")
        with starling.debug_mode(checksums=True) as dm:
            f(x, w)
            snp.exp(x * float(sys.argv[2]))
        dm.save_logs(d + "/log%s.json" % sys.argv[2])
    """)
    for scale in ("1", "2"):
        res = subprocess.run([sys.executable, "-c", script, str(tmp_path), scale],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
    f = starling.compile(lambda x, w: snp.sum(snp.tanh(x @ w), axis=0), backend="numpy_ref")
    with debug_mode(checksums=True) as here:
        f(x, w)
        snp.exp(x * 1.0)
    assert not debug_diff(here, tmp_path / "log1.json")
    d = debug_diff(tmp_path / "log1.json", tmp_path / "log2.json")
    assert d.index == 3 and d.primitive == ("multiply", "multiply")


def test_record_hook_for_native_backends(xw):
    x, _ = xw
    assert debug_hooks.active() is None
    with debug_mode(checksums=True) as dm:
        assert debug_hooks.active() is dm
        dm.record("fused_kernel", [np.asarray(x)], [np.asarray(x) * 2], {"name": "k0"},
                  source="compiled:cpp")
    r = dm.records[0]
    assert r["primitive"] == "fused_kernel" and r["source"] == "compiled:cpp"
    assert r["params"] == {"name": "k0"} and r["outputs"][0]["shape"] == [4, 3]


def test_max_records(xw):
    x, w = xw
    with debug_mode(max_records=2) as dm:
        _step(x, w)
    assert len(dm) == 2 and dm.truncated
