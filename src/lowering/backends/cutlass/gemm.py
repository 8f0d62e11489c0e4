"""Hopper GEMMs with fused epilogues written in the CUTLASS DSL (CuTe DSL, nvidia-cutlass-dsl).

``render(program, name)`` turns a ``fused_matmul`` sub-Program (a product and the elementwise
work consuming it: bias, activation chains, scales, casts) into a ``CutlassGemm``, or raises
NotRendered saying what CUTLASS cannot express here. The kernel (its Python source is generated
per product, like the Triton backend's, and traced by the DSL when it compiles):

* a CTA computes a ``BM x BN`` tile of one batch element: TMA (``cp.async.bulk.tensor``) copies
  ``BM x BK`` / ``BN x BK`` tiles of A / B into a ring of ``STAGES`` swizzled shared-memory
  buffers under a transaction-count mbarrier pipeline; one warpgroup multiplies them with
  ``wgmma`` into float32 registers, keeping one product in flight (``wait_group 1``) and
  handing each buffer back to the copies once the product reading it is done;
* the epilogue runs on the accumulators in registers: every element gets its (row, column)
  from an identity tensor partitioned like the accumulators, reads the epilogue's other inputs
  there (bias vectors and scales are full-shape views with zero strides), evaluates the
  epilogue's scalar formulas (formulas.py) and stores the outputs, predicated on the matrix
  bounds.

Operands: bfloat16 or float16 (both the same), either major (K-major or M / N-major, as the
buffers lie: transposes are read through strides); or float8 (e4m3 / e5m2) buffers of a float32
product (``scaled_matmul``: the widening casts are the tensor cores' own), K-major only, as
float8 wgmma reads them, summed in the tensor cores' accumulator throughout (the "fast
accumulation" of torch._scaled_mm(use_fast_accum=True); the Triton template instead adds each
BK step's sum into float32); at most one batch dim; rows 16-byte aligned (TMA). Products outside that, and epilogues with ops formulas.py does not render, stay with the
Triton template.

``CutlassGemm.compile(arch)`` compiles for a GPU architecture without one (fake tensors of the
product's shapes; how CI checks that the PTX has ``wgmma`` and TMA for ``sm_90a``);
``CutlassGemm.launch(bufs, device, outs)`` runs it on GPU buffers (src/arrays/cuda.py),
compiling once per operand layout.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os

import ml_dtypes
import numpy as np

from ....core.ir import Literal
from ... import cache
from ...fused_matmul import is_operand_cast, operand_views, split
from ..triton.codegen import operands
from . import formulas as F

TILE = (128, 128)     # BM x BN of a CTA (one warpgroup; wgmma m64n128, two along M)
STAGES = 4            # shared-memory ring: 4 x (128 + 128) x 64 x 2 bytes = 128 KiB
_OPERANDS = {np.dtype(ml_dtypes.bfloat16): "cutlass.BFloat16",
             np.dtype(np.float16): "cutlass.Float16"}
# float8 operands of float32 products (scaled_matmul: the casts are read in the tensor cores)
_FP8 = {np.dtype(ml_dtypes.float8_e4m3fn): "cutlass.Float8E4M3FN",
        np.dtype(ml_dtypes.float8_e5m2): "cutlass.Float8E5M2"}


class NotRendered(Exception):
    """A product or epilogue the CUTLASS GEMM does not express (the message says what); the
    Triton template runs it."""


def available() -> bool:
    """True where the CUTLASS DSL imports (nvidia-cutlass-dsl installed)."""
    try:
        import cutlass.cute  # noqa: F401
    except Exception:  # noqa: BLE001  (a broken install is as good as none)
        return False
    return True


class CutlassGemm:
    """A rendered product: ``source`` (the generated module), ``name``, the batch / M / N / K
    sizes, the operand permutations (``perm_a``: A's buffer dims in (M, K[, L]) order; B's in
    (N, K[, L]) order), the epilogue inputs' and outputs' avals."""

    def __init__(self, source, name, sizes, perm_a, perm_b, in_avals, out_avals, ab_dtypes):
        self.source, self.name = source, name
        self.batch, self.m, self.n, self.k = sizes
        self.perm_a, self.perm_b = perm_a, perm_b
        self.in_avals, self.out_avals = list(in_avals), list(out_avals)
        self.ab_dtypes = ab_dtypes   # the operands' buffer dtypes (A, B)
        self._compiled = {}
        self._module = None

    def kernel(self):
        """The generated kernel object (its module imported from the kernel cache)."""
        if self._module is None:
            key = hashlib.sha256(self.source.encode()).hexdigest()[:24]
            d = os.path.join(cache.cache_dir(), "cutlass")
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, f"st_{key}.py")
            if not os.path.exists(path):
                cache._atomic_write(path, self.source.encode())
            spec = importlib.util.spec_from_file_location(f"starling_cutlass_{key}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            self._module = mod
        return self._module.Kernel(TILE, STAGES)

    def compile(self, arch="sm_90a", dump_dir=None):
        """Compiles for ``arch`` with no GPU: fake tensors shaped like contiguous buffers of this
        product; returns the PTX text."""
        import cuda.bindings.driver as cuda_driver
        import cutlass.cute as cute
        from cutlass.cute.runtime import make_fake_tensor
        L, m, n = max(self.batch, 1), self.m, self.n

        def view(dtype, base_shape, perm):
            # a C-contiguous buffer of base_shape read through perm (+ a trailing batch dim)
            strides = [int(np.prod(base_shape[i + 1:])) for i in range(len(base_shape))]
            shape = [base_shape[p] for p in perm]
            stride = [strides[p] for p in perm]
            if len(perm) == 2:
                shape, stride = shape + [1], stride + [int(np.prod(base_shape))]
            return make_fake_tensor(dtype, tuple(shape), tuple(stride), assumed_align=16)

        a = view(_cute_dtype(self.ab_dtypes[0]), self._base_a(), self.perm_a)
        b = view(_cute_dtype(self.ab_dtypes[1]), self._base_b(), self.perm_b)
        xs = [make_fake_tensor(_cute_dtype(v.dtype), (m, n, L), self._bcast_strides(v),
                               assumed_align=4) for v in self.in_avals]
        outs = [make_fake_tensor(_cute_dtype(v.dtype), (m, n, L), (n, 1, m * n),
                                 assumed_align=16) for v in self.out_avals]
        d = dump_dir or os.path.join(cache.cache_dir(), "cutlass", "ptx")
        os.makedirs(d, exist_ok=True)
        fn = cute.compile(self.kernel(), a, b, *xs, *outs, cuda_driver.CUstream(0),
                          options=f"--gpu-arch {arch} --keep-ptx --dump-dir {d}")
        ptx = fn.artifacts.PTX   # the text (this DSL version) or the path it was written to
        if ptx and "\n" not in ptx and os.path.exists(ptx):
            with open(ptx) as f:
                return f.read()
        return ptx

    def _base_a(self):
        return self._base(self.perm_a, (self.m, self.k))

    def _base_b(self):
        return self._base(self.perm_b, (self.n, self.k))

    def _base(self, perm, mk):
        sizes = list(mk) + ([self.batch] if len(perm) == 3 else [])
        base = [0] * len(perm)
        for view_dim, buf_dim in enumerate(perm):
            base[buf_dim] = sizes[view_dim]
        return tuple(base)

    def _bcast_strides(self, aval):
        """(M, N, L) strides of an epilogue input of ``aval`` (right-aligned on (batch, m, n),
        C-contiguous): 0 along its broadcast dims."""
        full = ([self.batch] if self.batch else []) + [self.m, self.n]
        shape = [1] * (len(full) - len(aval.shape)) + list(aval.shape)
        strides = [int(np.prod(shape[i + 1:])) if shape[i] != 1 else 0
                   for i in range(len(shape))]
        sm, sn = strides[-2], strides[-1]
        sl = strides[0] if self.batch else 0
        return (sm, sn, sl)

    def launch(self, bufs, device, outs):
        """Runs on ``device``: ``bufs`` are the DeviceBuffers of (A's buffer, B's buffer, *the
        epilogue inputs), ``outs`` the outputs' (C-contiguous, of the product's shape), written
        here. Returns False, having run nothing, when an operand's layout is one TMA cannot
        read (a base or row stride not 16-byte aligned): the caller runs Triton's kernel."""
        import cuda.bindings.driver as cuda_driver
        import cupy
        import cutlass.cute as cute
        from cutlass.cute.runtime import from_dlpack
        with cupy.cuda.Device(device.id):
            a = _operand_view(bufs[0].data, self.perm_a)
            b = _operand_view(bufs[1].data, self.perm_b)
            k_major = self.ab_dtypes[0] in _FP8   # float8 wgmma reads both operands K-major
            if not (_tma_ready(a, k_major) and _tma_ready(b, k_major)):
                return False
            full = ((self.batch,) if self.batch else ()) + (self.m, self.n)
            xs = []
            for buf in bufs[2:]:
                v = cupy.broadcast_to(buf.data.reshape((1,) * (len(full) - buf.ndim)
                                                       + buf.shape), full)
                xs.append(v.transpose((1, 2, 0)) if self.batch else v[:, :, None])
            ovs = [o.data.transpose((1, 2, 0)) if self.batch else o.data[:, :, None]
                   for o in outs]
            tensors = []
            for arr, dt in [(a, self.ab_dtypes[0]), (b, self.ab_dtypes[1])] + \
                    [(x, v.dtype) for x, v in zip(xs, self.in_avals)] + \
                    [(o, v.dtype) for o, v in zip(ovs, self.out_avals)]:
                t = from_dlpack(arr, assumed_align=16 if arr.data.ptr % 16 == 0 else
                                arr.itemsize)
                t.element_type = _cute_dtype(dt)   # bfloat16 arrives as its uint16 bits
                tensors.append(t)
            key = (cupy.cuda.Device(device.id).compute_capability,) + tuple(
                (arr.shape, arr.strides, arr.data.ptr % 16 == 0) for arr in [a, b] + xs + ovs)
            fn = self._compiled.get(key)
            if fn is None:
                fn = self._compiled[key] = cute.compile(self.kernel(), *tensors,
                                                        cuda_driver.CUstream(0))
            fn(*tensors, cuda_driver.CUstream(0))
        return True


def _cute_dtype(dt):
    import cutlass
    name = {**F.DTYPES, **_OPERANDS, **_FP8}[np.dtype(dt)]
    return getattr(cutlass, name.split(".")[1])


def _operand_view(data, perm):
    """The (rows, K[, L]) view of a cupy buffer read through ``perm``, with a unit batch dim
    when there is none (its stride one matrix's bytes, not 0: a TMA descriptor's strides are
    multiples of 16 bytes, and a size-1 dim is never stepped along)."""
    v = data.transpose(perm)
    if len(perm) == 3:
        return v
    from cupy.lib.stride_tricks import as_strided
    span = max(st * n for st, n in zip(v.strides, v.shape))
    return as_strided(v, v.shape + (1,), v.strides + (-(-span // 16) * 16,))


def _tma_ready(v, k_major=False):
    """TMA reads a view (rows, K[, L]) whose base is 16-byte aligned, with one unit-stride dim
    among the first two (K's, for ``k_major``) and the other dims' strides multiples of 16
    bytes."""
    item = v.itemsize
    s = [x // item for x in v.strides]
    if v.data.ptr % 16 or 1 not in (s[1:2] if k_major else s[:2]):
        return False
    if 1 in v.shape[:2] or any(x == 0 and n > 1 for x, n in zip(s, v.shape)):
        return False   # the major dim would be ambiguous; a broadcast operand has stride 0
    return all(x * item % 16 == 0 for i, x in enumerate(s) if x != 1 and v.shape[i] > 1)


def _perm(chain, rank, dims):
    """Buffer dims (of a rank-``rank`` operand read through the transposes of ``chain``) in the
    order of the view dims ``dims``."""
    perm = tuple(range(rank))
    for e in chain:
        if is_operand_cast(e):   # float8 read by the tensor cores (render checks the formats)
            continue
        if e.primitive.name != "transpose" or len(e.invars[0].aval.shape) != rank:
            raise NotRendered(f"operand view {e.primitive.name}")
        perm = tuple(perm[p] for p in e.params["permutation"])
    return tuple(perm[d] for d in dims)


def render(program, name):
    """The CutlassGemm of a ``fused_matmul`` sub-Program, or raise NotRendered."""
    dot, epi, emit = split(program)
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    a_aval, b_aval = dot.invars[0].aval, dot.invars[1].aval
    nb = len(lb)
    if len(lc) != 1 or len(rc) != 1 or nb > 1 or len(rb) != nb or \
            len(a_aval.shape) != 2 + nb or len(b_aval.shape) != 2 + nb:
        raise NotRendered("a product that is not (one-batch-dim) 2-D x 2-D, one contracting dim")
    dt = np.dtype(a_aval.dtype)
    narrow = (np.dtype(program.invars[0].aval.dtype), np.dtype(program.invars[1].aval.dtype))
    if not ((dt in _OPERANDS and np.dtype(b_aval.dtype) == dt and narrow == (dt, dt)) or
            (dt == np.float32 and np.dtype(b_aval.dtype) == dt and
             all(t in _FP8 for t in narrow))):
        raise NotRendered(f"product of {a_aval.dtype} and {b_aval.dtype} read from "
                          f"{narrow[0]} / {narrow[1]} buffers (bfloat16 / float16 operands, or "
                          "float32 products of float8 ones, only)")
    if program.constvars:
        raise NotRendered("constants in the epilogue")
    d = dot.outvars[0]
    shape = tuple(d.aval.shape)
    if not all(isinstance(x, int) for x in shape + (a_aval.shape[lc[0]],)):
        raise NotRendered("symbolic product shape")
    batch = shape[0] if nb else 0
    m, n = shape[nb:]
    k = a_aval.shape[lc[0]]
    if k == 0 or m == 0 or n == 0:
        raise NotRendered("an empty product")
    if batch > 65535:
        raise NotRendered(f"a batch of {batch} (the grid's z dim takes 65535)")
    chains = operand_views(program)
    a_free = [x for x in range(2 + nb) if x not in tuple(lb) + tuple(lc)][0]
    b_free = [x for x in range(2 + nb) if x not in tuple(rb) + tuple(rc)][0]
    perm_a = _perm(chains[0], 2 + nb, [a_free, lc[0]] + list(lb))
    perm_b = _perm(chains[1], 2 + nb, [b_free, rc[0]] + list(rb))
    ins = list(program.invars[2:])
    outs = list(program.outvars)
    if any(tuple(v.aval.shape) != shape for v in outs):
        raise NotRendered("an output of another shape than the product")
    if any(len(v.aval.shape) > len(shape) for v in ins):
        raise NotRendered("an epilogue input of higher rank than the product")
    # the epilogue, one line per equation, on float32 scalars of the element (m, n, batch)
    env = {d: ("d", np.dtype(d.aval.dtype))}
    lines = []
    if np.dtype(d.aval.dtype) not in F.DTYPES:
        raise NotRendered(f"product of dtype {d.aval.dtype}")
    lines.append(f"d = acc[i]{_to(np.dtype(np.float32), np.dtype(d.aval.dtype))}")
    for i, v in enumerate(ins):
        if np.dtype(v.aval.dtype) not in F.DTYPES:
            raise NotRendered(f"epilogue input of dtype {v.aval.dtype}")
        env[v] = (f"x{i}", np.dtype(v.aval.dtype))
        lines.append(f"x{i} = in{i}[(m, n, bz)]")
    for j, eqn in enumerate(epi.eqns):
        if len(eqn.outvars) != 1 or tuple(eqn.outvars[0].aval.shape) != shape:
            raise NotRendered(f"{eqn.primitive.name} (not elementwise over the product)")
        args, dts = operands(eqn, env, literal=F.literal)
        out_dt = np.dtype(eqn.outvars[0].aval.dtype)
        expr = F.render(eqn.primitive, args, dts, out_dt, eqn.params)
        if expr is None:
            raise NotRendered(f"{eqn.primitive.name} on {[str(t) for t in dts]}")
        env[eqn.outvars[0]] = (f"v{j}", out_dt)
        lines.append(f"v{j} = {expr}")
    stores = []
    for j, v in enumerate(outs):
        if isinstance(v, Literal) or np.dtype(v.aval.dtype) not in F.DTYPES or v not in env:
            raise NotRendered("an output that is not computed in the epilogue")
        stores.append(f"out{j}[(m, n, bz)] = {env[v][0]}")
    src = _module(name, len(ins), len(outs), lines + stores)
    return CutlassGemm(src, name, (batch, m, n, k), perm_a, perm_b, [v.aval for v in ins],
                       [v.aval for v in outs], narrow)


def _to(src, dst):
    return "" if src == dst else f".to({F.DTYPES[dst]})"


def _module(name, nin, nout, epilogue):
    """The source of a kernel module: class ``Kernel`` for operands a, b, inputs in<i>, outputs
    out<j> (all (rows, cols, batch) tensors) with ``epilogue`` lines per element."""
    tensors = ["a", "b"] + [f"in{i}" for i in range(nin)] + [f"out{j}" for j in range(nout)]
    params = ", ".join(f"{t}: cute.Tensor" for t in tensors)
    rest = "".join(f"{t}, " for t in tensors[2:])
    typed = "".join(f"{t}: cute.Tensor, " for t in tensors[2:])
    body = "\n".join("                " + line for line in epilogue)
    return _TEMPLATE.format(name=name, params=params, rest_comma=rest, rest_typed=typed,
                            body=body)


_TEMPLATE = '''# Generated by Starling (src/lowering/backends/cutlass/gemm.py): {name}
import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90
from cutlass.cute.nvgpu import cpasync, warpgroup


class Kernel:
    def __init__(self, tile, stages):
        self.bm, self.bn = tile
        self.stages = stages
        self.threads = 128

    @cute.jit
    def __call__(self, {params}, stream):
        self.a_dtype, self.b_dtype = a.element_type, b.element_type
        a_major = cutlass.tensor_utils.LayoutEnum.from_tensor(a)
        b_major = cutlass.tensor_utils.LayoutEnum.from_tensor(b)
        mma = sm90.make_trivial_tiled_mma(a.element_type, b.element_type,
                                          a_major.sm90_mma_major_mode(),
                                          b_major.sm90_mma_major_mode(), cutlass.Float32,
                                          (1, 1, 1), tiler_mn=(64, self.bn))
        bk = cute.size(mma.shape_mnk, mode=[2]) * 4
        tile = (self.bm, self.bn, bk)
        sa_layout = sm90.make_smem_layout_a(a_major, tile, a.element_type, self.stages)
        sb_layout = sm90.make_smem_layout_b(b_major, tile, b.element_type, self.stages)
        atom_a, ta = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileG2SOp(), a, cute.slice_(sa_layout, (None, None, 0)),
            (self.bm, bk))
        atom_b, tb = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileG2SOp(), b, cute.slice_(sb_layout, (None, None, 0)),
            (self.bn, bk))

        @cute.struct
        class Storage:
            bars: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            sa: cute.struct.Align[cute.struct.MemRange[a.element_type,
                                                       cute.cosize(sa_layout)], 1024]
            sb: cute.struct.Align[cute.struct.MemRange[b.element_type,
                                                       cute.cosize(sb_layout)], 1024]
        self.storage = Storage
        grid = (cute.ceil_div(out0.shape[0], self.bm), cute.ceil_div(out0.shape[1], self.bn),
                out0.shape[2])
        self.kernel(atom_a, ta, atom_b, tb, {rest_comma}mma, sa_layout, sb_layout,
                    tile).launch(grid=grid, block=[self.threads, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, atom_a: cute.CopyAtom, ma: cute.Tensor, atom_b: cute.CopyAtom,
               mb: cute.Tensor, {rest_typed}mma: cute.TiledMma, sa_layout: cute.ComposedLayout,
               sb_layout: cute.ComposedLayout, tile: cutlass.Constexpr):
        tidx, _, _ = cute.arch.thread_idx()
        bx, by, bz = cute.arch.block_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp == 0:
            cpasync.prefetch_descriptor(atom_a)
            cpasync.prefetch_descriptor(atom_b)
        st = cutlass.memory.SmemAllocator().allocate(self.storage)
        stage_bytes = cute.size_in_bytes(self.a_dtype, cute.slice_(sa_layout, (None, None, 0))) \\
            + cute.size_in_bytes(self.b_dtype, cute.slice_(sb_layout, (None, None, 0)))
        pipe = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.bars.data_ptr(), num_stages=self.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.threads // 32),
            tx_count=stage_bytes, cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)))
        sa = st.sa.get_tensor(sa_layout.outer, swizzle=sa_layout.inner)
        sb = st.sb.get_tensor(sb_layout.outer, swizzle=sb_layout.inner)
        coord = (bx, by, None, bz)
        ga = cute.local_tile(ma, tile, coord, proj=(1, None, 1))
        gb = cute.local_tile(mb, tile, coord, proj=(None, 1, 1))
        tas, tag = cpasync.tma_partition(atom_a, 0, cute.make_layout(1),
                                         cute.group_modes(sa, 0, 2), cute.group_modes(ga, 0, 2))
        tbs, tbg = cpasync.tma_partition(atom_b, 0, cute.make_layout(1),
                                         cute.group_modes(sb, 0, 2), cute.group_modes(gb, 0, 2))
        thr = mma.get_slice(tidx)
        fa = mma.make_fragment_A(thr.partition_A(sa))
        fb = mma.make_fragment_B(thr.partition_B(sb))
        ident = cute.make_identity_tensor((out0.shape[0], out0.shape[1]))
        tci = thr.partition_C(cute.local_tile(ident, (tile[0], tile[1]), (bx, by)))
        acc = cute.make_rmem_tensor(tci.shape, cutlass.Float32)
        ktiles = cute.size(ga, mode=[2])
        prod = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
        cons = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        done = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        if warp == 0:   # fill the ring
            for _ in cutlass.range(cutlass.min(self.stages, ktiles), unroll=1):
                pipe.producer_acquire(prod)
                bar = pipe.producer_get_barrier(prod)
                cute.copy(atom_a, tag[(None, prod.count)], tas[(None, prod.index)],
                          tma_bar_ptr=bar)
                cute.copy(atom_b, tbg[(None, prod.count)], tbs[(None, prod.index)],
                          tma_bar_ptr=bar)
                pipe.producer_commit(prod)
                prod.advance()
        mma.set(warpgroup.Field.ACCUMULATE, False)
        kblocks = cute.size(fa, mode=[2])
        for kt in cutlass.range(ktiles, unroll=1):
            pipe.consumer_wait(cons)
            warpgroup.fence()
            for kb in cutlass.range(kblocks, unroll_full=True):
                cute.gemm(mma, acc, fa[(None, None, kb, cons.index)],
                          fb[(None, None, kb, cons.index)], acc)
                mma.set(warpgroup.Field.ACCUMULATE, True)
            warpgroup.commit_group()
            warpgroup.wait_group(1)   # the step before this one is done: its buffer is free
            if kt > 0:
                pipe.consumer_release(done)
                done.advance()
                # refill only the buffer just released: warp 0 must not wait for a buffer that
                # the warpgroup (which needs warp 0 for its next wgmma) has yet to release
                if warp == 0 and prod.count < ktiles:
                    pipe.producer_acquire(prod)
                    bar = pipe.producer_get_barrier(prod)
                    cute.copy(atom_a, tag[(None, prod.count)], tas[(None, prod.index)],
                              tma_bar_ptr=bar)
                    cute.copy(atom_b, tbg[(None, prod.count)], tbs[(None, prod.index)],
                              tma_bar_ptr=bar)
                    pipe.producer_commit(prod)
                    prod.advance()
            cons.advance()
        warpgroup.wait_group(0)
        for i in cutlass.range(cute.size(acc), unroll_full=True):
            m, n = tci[i]
            if m < out0.shape[0] and n < out0.shape[1]:
{body}
'''
