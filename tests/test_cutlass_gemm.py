"""CUTLASS DSL GEMMs (src/lowering/backends/cutlass/): rendered from ``fused_matmul`` programs
and compiled for the H100 / H200 (sm_90a) without a GPU, the PTX checked for the Hopper
instructions (wgmma from shared memory fed by TMA, one product kept in flight). The CUTLASS DSL
has no interpreter, so values are checked on a GPU only (tests/test_cuda_device.py); here the
products' reference is the host path every other test compares against."""
import re

import ml_dtypes
import numpy as np
import pytest

import starling.nn.functional as snf
import starling.numpy as snp
from starling.lowering import backends
from starling.lowering.backends.cutlass import formulas as CF
from starling.lowering.backends.cutlass import gemm
from starling.lowering.pipeline import run_pipeline
from starling.transforms.stage import make_ir

pytestmark = pytest.mark.skipif(not gemm.available(),
                                reason="needs nvidia-cutlass-dsl (pip install -e '.[gpu]')")
BF, F16 = ml_dtypes.bfloat16, np.float16


def _program(fn, *xs):
    """The fused_matmul sub-Program of ``fn``'s one product, as the triton backend forms it."""
    prog = run_pipeline(make_ir(fn)(*[snp.asarray(x) for x in xs]))
    exe = backends.get_backend("triton").compile(prog)
    (eqn,) = [e for e in exe.program.eqns if e.primitive.name == "fused_matmul"]
    return eqn.params["program"]


def _check_hopper_ptx(ptx, ab):
    assert ".target sm_90a" in ptx
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.{ab}\.{ab}", ptx)
    assert "cp.async.bulk.tensor" in ptx and "mbarrier" in ptx     # TMA into the ring
    assert "wgmma.wait_group.sync.aligned \t1;" in ptx              # a product in flight


@pytest.mark.parametrize("name, fn, xs, ab", [
    ("mm", lambda a, b: a @ b, [np.zeros((256, 192), BF), np.zeros((192, 384), BF)], "bf16"),
    ("addmm_gelu", lambda a, b, c: snf.gelu(a @ b + c),
     [np.zeros((256, 192), BF), np.zeros((192, 384), BF), np.zeros(384, BF)], "bf16"),
    ("bmm_transposed", lambda q, k: q @ k.transpose(0, 2, 1),
     [np.zeros((4, 128, 64), F16), np.zeros((4, 256, 64), F16)], "f16"),
    ("scaled_f32", lambda a, b: (a @ b).astype(np.float32) * 0.5,
     [np.zeros((128, 64), BF), np.zeros((64, 128), BF)], "bf16"),
    ("column_major_a", lambda a, b: snp.maximum(a.T @ b, 0.0),
     [np.zeros((192, 256), BF), np.zeros((192, 128), BF)], "bf16"),
])
def test_products_compile_to_hopper_wgmma_with_tma(name, fn, xs, ab):
    g = gemm.render(_program(fn, *xs), name)
    _check_hopper_ptx(g.compile("sm_90a"), ab)


@pytest.mark.parametrize("fa, fb, names", [
    (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fn, "e4m3.e4m3"),
    (ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn, "e5m2.e4m3")])
def test_float8_scaled_products_run_on_float8_wgmma(fa, fb, names):
    # scaled_matmul's widening casts are read by the tensor cores; the scales are the epilogue
    from starling import lax
    one = np.ones((1, 1), np.float32)
    # B is the transpose of an (N, K) buffer: K-major, as float8 wgmma reads it
    prog = _program(lambda a, bt, sa, sb: lax.scaled_matmul(a, bt.T, sa, sb, BF),
                    np.zeros((256, 256), fa), np.zeros((128, 256), fb), one, one)
    g = gemm.render(prog, "scaled")
    assert g.perm_b == (0, 1)
    ptx = g.compile("sm_90a")
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.f32\.{names}", ptx)
    assert "cp.async.bulk.tensor" in ptx


def test_epilogue_is_the_formulas_rounded_like_the_cpu():
    # every op of a bfloat16 epilogue rounds to bfloat16, as Starling defines it everywhere;
    # maximum propagates NaN; the bias is read at the element's column
    g = gemm.render(_program(lambda a, b, c: snp.maximum(snf.gelu(a @ b + c), -1.0) / 3,
                             np.zeros((256, 192), BF), np.zeros((192, 384), BF),
                             np.zeros(384, BF)), "epi")
    body = g.source[g.source.index("if m < out0"):]
    assert "x0 = in0[(m, n, bz)]" in body and "cute.math.erfc" in body
    assert body.count(".to(cutlass.BFloat16)") >= 6
    assert "!= (v4).to(cutlass.Float32)" in body          # NaN check of maximum
    assert g._bcast_strides(snp.zeros(384, BF).aval) == (0, 1, 0)
    ptx = g.compile("sm_90a")
    assert "cvt.rn.bf16.f32" in ptx and "div.rn.f32" in ptx   # IEEE division, RNE rounding
    assert not re.search(r"div\.(approx|full)", ptx)


@pytest.mark.parametrize("fn, xs, why", [
    (lambda a, b: a @ b, [np.zeros((64, 32), np.float32), np.zeros((32, 64), np.float32)],
     "bfloat16 / float16 operands"),
    (lambda a, b: a @ b, [np.zeros((64, 32), BF), np.zeros((32, 64), F16)],
     "bfloat16 / float16 operands"),
    (lambda a, b: (a @ b).astype(np.int32), [np.zeros((64, 32), BF), np.zeros((32, 64), BF)],
     "convert_element_type"),
])
def test_what_cutlass_does_not_express_stays_with_triton(fn, xs, why):
    prog = run_pipeline(make_ir(fn)(*[snp.asarray(x) for x in xs]))
    exe = backends.get_backend("triton").compile(prog)
    found = [e for e in exe.program.eqns if e.primitive.name == "fused_matmul"]
    if not found:   # the epilogue pass left the product to the host: nothing to render
        return
    with pytest.raises(gemm.NotRendered, match=why):
        gemm.render(found[0].params["program"], "x")


def test_formula_renderer_covers_select_casts_and_math():
    from starling.core import scalar as S
    f32 = np.dtype(np.float32)
    x = S.arg(0, f32)
    e = S.select(S.call("gt", x, S.lit(0, f32)), S.call("exp", x), S.cast(S.cast(x, BF), f32))
    src = CF.render_expr(e, ["v"])
    assert "cute.math.exp(v)" in src and "cutlass.select_" in src
    assert ".to(cutlass.BFloat16)" in src
    assert CF.literal(np.inf, f32) == "cutlass.Float32(float('inf'))"
    with pytest.raises(CF.Unsupported):
        CF.render_expr(S.cast(x, np.dtype(np.int32)), ["v"])
