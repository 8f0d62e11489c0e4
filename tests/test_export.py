"""export / serialize / deserialize: round trips in-process and in a fresh process, grad of a
deserialized function, dynamic shapes, unsupported params and corrupt data."""
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import ShapesSpec, ShapeVar, dynamic_spec
from starling.core.avals import ShapedArray
from starling.lowering.export import FORMAT_VERSION, MAGIC, Exported

F32 = np.dtype("float32")


def _rand(rng, *shape, dtype=np.float32):
    return snp.asarray(rng.standard_normal(shape).astype(dtype))


def _close(got, want, tol=1e-6):
    got_l, got_t = starling.tree.flatten(got)
    want_l, want_t = starling.tree.flatten(want)
    assert got_t == want_t
    for g, w in zip(got_l, want_l):
        assert tuple(g.shape) == tuple(w.shape) and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


def _model(params, x):
    h = snp.tanh(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"]
    return {"logits": logits, "loss": snp.mean(snp.sum(logits ** 2, axis=-1))}


@pytest.fixture
def params(rng):
    return {"w1": _rand(rng, 4, 8), "b1": _rand(rng, 8), "w2": _rand(rng, 8, 3)}


def test_round_trip_in_process(rng, params):
    x = _rand(rng, 5, 4)
    exp = starling.export(_model, params, x)
    assert isinstance(exp, Exported) and exp.fun_name == "_model"
    assert [a.shape for a in exp.out_avals] == [(5, 3), ()]
    data = exp.serialize()
    assert isinstance(data, bytes) and data.startswith(MAGIC)
    assert b"pickle" not in data and b"\x80\x04\x95" not in data  # no pickle stream
    back = starling.deserialize(data)
    _close(back(params, x), _model(params, x))
    _close(exp(params, x), _model(params, x))
    assert "dot_general" in back.as_text()
    # Re-serializing the deserialized artifact gives the same program.
    assert starling.deserialize(back.serialize()).as_text() == back.as_text()


def test_closed_over_constants_and_dtypes_survive(rng):
    table = snp.asarray(rng.standard_normal((6, 2)).astype(np.float32))
    lut = snp.asarray(np.array([1.5, -2.0, 3.25], dtype=np.float64)).astype("bfloat16")
    f = lambda i, z: (table[i] * 2, z * lut, snp.clip(z, -np.inf, 1.0))  # noqa: E731
    i = snp.asarray(np.array([0, 5, 2], np.int32))
    z = snp.asarray(np.array([1.0, 2.0, -1.0], "bfloat16"))
    back = starling.deserialize(starling.export(f, i, z).serialize())
    _close(back(i, z), f(i, z))


def test_control_flow_round_trip(rng):
    def f(x, n):
        y = starling.cond(snp.sum(x) > 0, lambda a: a * 2, lambda a: a - 1, x)
        y = starling.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.5), (0, y))[1]
        carry, ys = starling.scan(lambda c, r: (c + r, c * r), snp.zeros(3), x)
        return y, carry, ys

    x = _rand(rng, 4, 3)
    n = snp.asarray(np.int64(3))
    back = starling.deserialize(starling.export(f, x, n).serialize())
    _close(back(x, n), f(x, n))
    _close(back(-x, n), f(-x, n))


def test_grad_and_vmap_of_deserialized(rng, params):
    x = _rand(rng, 5, 4)
    back = starling.deserialize(starling.export(_model, params, x).serialize())
    want = starling.grad(lambda p: _model(p, x)["loss"])(params)
    got = starling.grad(lambda p: back(p, x)["loss"])(params)
    _close(got, want, tol=1e-5)
    # Inside compile and vmap too (the Program is bound under the current trace).
    _close(starling.compile(lambda p: back(p, x)["loss"])(params), _model(params, x)["loss"])
    xs = _rand(rng, 2, 5, 4)
    got = starling.vmap(lambda xi: back(params, xi)["logits"])(xs)
    _close(got, starling.vmap(lambda xi: _model(params, xi)["logits"])(xs), tol=1e-5)


def test_runs_in_a_fresh_process(tmp_path, rng, params):
    batch = ShapeVar("batch", min=1, max=64)
    x = _rand(rng, 5, 4)
    exp = starling.export(_model, params, x, dynamic_shapes=ShapesSpec({"x": {0: batch}}))
    (tmp_path / "model.starling").write_bytes(exp.serialize())
    x7 = _rand(rng, 7, 4)
    np.savez(tmp_path / "inputs.npz", x=np.asarray(x7),
             **{k: np.asarray(v) for k, v in params.items()})
    script = textwrap.dedent("""
        import sys, numpy as np, starling, starling.numpy as snp
        d = sys.argv[1]
        f = starling.deserialize(open(d + "/model.starling", "rb").read())
        z = np.load(d + "/inputs.npz")
        params = {k: snp.asarray(z[k]) for k in ("w1", "b1", "w2")}
        out = f(params, snp.asarray(z["x"]))
        g = starling.grad(lambda p: f(p, snp.asarray(z["x"]))["loss"])(params)
        np.savez(d + "/out.npz", logits=np.asarray(out["logits"]), loss=np.asarray(out["loss"]),
                 gw1=np.asarray(g["w1"]))
        try:
            f(params, snp.ones((65, 4)))
        except ValueError as e:
            print("RANGE-ERROR", e)
    """)
    env = dict(os.environ)
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                         text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert "RANGE-ERROR" in res.stdout and "batch <= 64" in res.stdout
    out = np.load(tmp_path / "out.npz")
    want = _model(params, x7)
    np.testing.assert_allclose(out["logits"], want["logits"], rtol=1e-6)
    np.testing.assert_allclose(out["loss"], want["loss"], rtol=1e-6)
    gw1 = starling.grad(lambda p: _model(p, x7)["loss"])(params)["w1"]
    np.testing.assert_allclose(out["gw1"], gw1, rtol=1e-5, atol=1e-6)


def test_dynamic_shapes_export(rng):
    b = ShapeVar("b", min=2, max=32)
    spec = ShapesSpec({"x": {0: b}, "y": {0: b * 2}}, assumptions=[b % 2 == 0])

    def f(x, y):
        return snp.concatenate([x, x]) * y, snp.mean(x.reshape(-1, 2, 3), axis=1)

    exp = starling.export(f, ShapedArray((b, 3), F32), ShapedArray((b * 2, 3), F32),
                          dynamic_shapes=spec)
    assert str(exp.in_avals[1].shape[0]) == "2*b"
    back = starling.deserialize(exp.serialize())
    assert [v.name for v in back.shape_vars] == ["b"]
    for n in (2, 8, 32):
        args = (_rand(rng, n, 3), _rand(rng, 2 * n, 3))
        _close(back(*args), f(*args))
    with pytest.raises(ValueError, match=r"argument 'x' dim 0 \(size 5.*`Mod\(b, 2\) == 0`"):
        back(_rand(rng, 5, 3), _rand(rng, 10, 3))
    with pytest.raises(ValueError, match="declared 2\\*b = 8"):
        back(_rand(rng, 4, 3), _rand(rng, 9, 3))
    with pytest.raises(ValueError, match="2 <= b <= 32"):
        back(_rand(rng, 34, 3), _rand(rng, 68, 3))


def test_shape_vars_in_shape_specs_and_decorator(rng):
    n = ShapeVar("n", max=100)

    @dynamic_spec(ShapesSpec({"x": {1: n}}))
    def f(x):
        return snp.cumsum(x, axis=1)[:, -1]

    exp = starling.export(f, ShapedArray((2, 5), F32))
    back = starling.deserialize(exp.serialize())
    for k in (1, 50):
        x = _rand(rng, 2, k)
        _close(back(x), f(x))
    g = starling.export(lambda x: snp.sum(x * x, axis=0), ShapedArray((n, 3), F32))
    x = _rand(rng, 9, 3)
    _close(starling.deserialize(g.serialize())(x), snp.sum(x * x, axis=0))
    # A compiled function's spec is honoured as well.
    c = starling.compile(lambda x: x + 1, dynamic_shapes=ShapesSpec({"x": {0: n}}))
    back = starling.deserialize(starling.export(c, snp.ones(4)).serialize())
    _close(back(snp.ones(7)), snp.full(7, 2.0))


def test_call_checks_inputs(rng, params):
    x = _rand(rng, 5, 4)
    back = starling.deserialize(starling.export(_model, params, x).serialize())
    with pytest.raises(TypeError, match="argument 'x' must have dtype float32, got float64"):
        back(params, x.astype(np.float64))
    with pytest.raises(ValueError, match="argument 'x' dim 0 must be 5, got 6"):
        back(params, _rand(rng, 6, 4))
    with pytest.raises(ValueError, match="argument 'x' must have shape"):
        back(params, _rand(rng, 5))
    with pytest.raises(TypeError, match="expected arguments with structure"):
        back({"w1": params["w1"]}, x)


def test_callable_param_cannot_be_serialized():
    @starling.custom_vjp
    def f(x):
        return snp.sin(x)

    f.defvjp(lambda x: (snp.sin(x), x), lambda r, g: (g * snp.cos(r),))
    x = snp.ones(3)
    exp = starling.export(lambda x, t: starling.linearize(f, x)[1](t), x, x)
    assert "custom_lin" in exp.as_text()
    with pytest.raises(TypeError, match="primitive 'custom_lin' \\(param 'bwd'\\).*callable"):
        exp.serialize()


def test_corrupt_or_foreign_bytes_are_value_errors(rng):
    data = starling.export(lambda x: x * 2, snp.ones(3)).serialize()
    body = data[:-32]
    flipped = bytearray(data)
    flipped[len(MAGIC) + 40] ^= 0xFF
    cases = {
        "corrupted": bytes(flipped),
        "truncated|corrupted": data[:-5],
        "not a Starling export": b"PK\x03\x04" + data[4:],
        "not a Starling export ": b"",
    }
    for what, blob in cases.items():
        with pytest.raises(ValueError, match=what.strip()):
            starling.deserialize(blob)
    future = MAGIC + struct.pack("<I", FORMAT_VERSION + 1) + body[len(MAGIC) + 4:]
    import hashlib
    future += hashlib.sha256(future).digest()
    with pytest.raises(ValueError, match=f"version {FORMAT_VERSION + 1} is not supported"):
        starling.deserialize(future)


def test_unknown_primitive_is_a_value_error():
    data = starling.export(lambda x: snp.sin(x), snp.ones(3)).serialize()
    import hashlib
    body = data[:-32].replace(b'"p":"sin"', b'"p":"sin_v9"')
    body = body[:len(MAGIC) + 4] + struct.pack("<Q", struct.unpack_from(
        "<Q", body, len(MAGIC) + 4)[0] + 3) + body[len(MAGIC) + 12:]
    with pytest.raises(ValueError, match="primitive 'sin_v9'"):
        starling.deserialize(body + hashlib.sha256(body).digest())
