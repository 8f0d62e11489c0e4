"""Collectives overlap independent compute in compiled per-device programs."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_collectives_start_early_wait_late_and_stay_correct():
    code = textwrap.dedent("""
        import numpy as np, starling as st, starling.numpy as snp
        from starling.sharding import make_mesh, P
        from starling import lax
        mesh = make_mesh((2,), ("i",))
        def f(g, a, b):
            s = lax.psum(g * 2.0, "i")        # communication ...
            c = snp.tanh(a @ b)               # ... independent of this compute
            t = lax.all_gather(s, "i", tiled=True)
            return t + 1.0, c.sum()
        sm = st.compile(st.shard_map(f, mesh, in_specs=(P("i"), P(), P()),
                                     out_specs=(P(), P())))
        g = snp.arange(8.0); a = snp.ones((64, 64)) * 0.01; b = snp.ones((64, 64))
        t, c = sm(g, a, b)
        ref = np.tile(2 * (np.arange(4.0) + np.arange(4.0, 8.0)), 2) + 1
        assert np.allclose(np.asarray(t), ref), np.asarray(t)
        assert np.allclose(float(c), np.tanh(0.64) * 64 * 64, rtol=1e-5)
        names = [e.primitive.name for e in sm.lower(g, a, b).ir.eqns]
        # the all_reduce starts before the matmul and is waited for after it
        start, dot = names.index("collective_start"), names.index("fused_matmul")
        wait = names.index("collective_wait")
        assert start < dot < wait, names
        # the all_gather depends on the all_reduce: its start comes after that wait
        assert names.count("collective_start") == 2
        second = [i for i, n in enumerate(names) if n == "collective_start"][1]
        assert second > wait, names
        print("OK")
    """)
    env = dict(os.environ, STARLING_NUM_CPU_DEVICES="2")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]


def test_small_collectives_run_inline_in_order_with_threaded_ones():
    # collectives of <= 64 KiB per device run in the device's own thread when nothing it started
    # is in flight; a small one started while a large one is on the communication thread waits
    # its turn there (out of order, the devices would pair different collectives)
    code = textwrap.dedent("""
        import numpy as np, starling as st, starling.numpy as snp
        from starling.sharding import make_mesh, P
        from starling import lax
        mesh = make_mesh((2,), ("i",))
        def f(big, small):
            b = lax.psum(big, "i")                 # 256 KiB per device: threaded
            s = lax.psum(small, "i")               # started while b may be in flight
            s2 = lax.pmax(s * 2.0, "i")            # nothing in flight after b's wait: inline
            return b + s2.sum(), s
        sm = st.compile(st.shard_map(f, mesh, in_specs=(P("i"), P("i")),
                                     out_specs=(P("i"), P("i"))))
        big = np.arange(2 * 65536, dtype=np.float32); small = np.arange(8, dtype=np.float32)
        for _ in range(3):
            b, s = sm(big, small)
        bs, ss = big.reshape(2, -1).sum(0), small.reshape(2, -1).sum(0)
        assert np.array_equal(np.asarray(s), np.tile(ss, 2))
        assert np.array_equal(np.asarray(b), np.tile(bs + (2 * ss).sum(), 2))
        print("OK")
    """)
    env = dict(os.environ, STARLING_NUM_CPU_DEVICES="2")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]
