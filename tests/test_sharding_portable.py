"""Sharded programs under export / deserialize and dynamic shapes."""
from __future__ import annotations

import numpy as np
import pytest

import starling as st
import starling.numpy as snp
from starling import ShapesSpec, ShapeVar, lax
from starling.sharding import AbstractMesh, P, Shard, distribute, make_mesh

pytestmark = pytest.mark.skipif(len(st.devices()) < 4, reason="needs 4 in-process devices")


@pytest.fixture
def mesh():
    return make_mesh((2, 2), ("data", "model"), devices=st.devices()[:4])


def test_export_records_shardings_not_devices(mesh):
    xn = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    x = distribute(xn, mesh, [Shard(0), Shard(1)])
    exp = st.export(lambda x: snp.tanh(x).sum(axis=0), x)
    g = st.deserialize(exp.serialize())
    (sh,) = g.in_shardings
    assert isinstance(sh.mesh, AbstractMesh) and dict(sh.mesh.shape) == {"data": 2, "model": 2}
    assert sh.spec == P("data", "model")
    out = g(x)
    np.testing.assert_allclose(np.asarray(out), np.tanh(xn).sum(0), rtol=1e-6)
    # a plain array is laid out as recorded; another mesh of the same shape works too
    other = make_mesh((2, 2), ("data", "model"), devices=st.devices()[:4][::-1])
    with other:
        np.testing.assert_allclose(np.asarray(g(xn)), np.tanh(xn).sum(0), rtol=1e-6)
    # differentiable through the deserialized program (under grad the arguments are tracers,
    # which carry no layout: the mesh comes from the context)
    with mesh:
        gx = st.grad(lambda x: g(x).sum())(x)
    np.testing.assert_allclose(np.asarray(gx), 1 - np.tanh(xn) ** 2, rtol=1e-5)


def test_exported_shard_map_runs_from_plain_arrays(mesh):
    h = st.shard_map(lambda b: lax.psum(b.sum(), ("data", "model")), mesh,
                     in_specs=P("data", "model"), out_specs=P())
    g = st.deserialize(st.export(h, snp.ones((4, 4))).serialize())
    with mesh:
        assert float(g(snp.ones((4, 4)))) == 16.0
    # without a mesh of its shape in reach, a clear error
    with pytest.raises(ValueError, match="exported for a mesh"):
        g(snp.ones((4, 4)))


def test_exported_sharded_program_needs_a_mesh_of_its_shape(mesh):
    x = distribute(np.ones((4, 4), np.float32), mesh, [Shard(0), Shard(1)])
    g = st.deserialize(st.export(lambda x: x * 2, x).serialize())
    small = make_mesh((2,), ("i",), devices=st.devices()[:2])
    y = distribute(np.ones((4, 4), np.float32), small, [Shard(0)])
    # an argument on a mesh of another shape: the program runs on the current mesh of its shape
    with mesh:
        np.testing.assert_allclose(np.asarray(g(y)), 2 * np.ones((4, 4)))


def test_dynamic_shapes_with_sharded_arguments():
    mesh = make_mesh((2,), ("i",), devices=st.devices()[:2])
    n = ShapeVar("n", 1, 100)
    f = st.compile(lambda x: snp.tanh(x) * 2 + x.sum(), dynamic_shapes=ShapesSpec({"x": {0: n}}))
    for size in (4, 6, 8, 7, 6):
        xn = np.arange(float(size), dtype=np.float32)
        out = f(distribute(xn, mesh, [Shard(0)]))
        assert out.placements == (Shard(0),)
        np.testing.assert_allclose(np.asarray(out), np.tanh(xn) * 2 + xn.sum(), rtol=1e-6)
    assert f.num_compiles == 1
