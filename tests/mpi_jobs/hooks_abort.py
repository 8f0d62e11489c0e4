"""2 ranks, not fault tolerant (tests/test_fault_tolerance.py): collective hooks, then an
uncaught exception on rank 1 while rank 0 waits in a barrier with no timeout: rank 1's on_abort
callbacks run and the whole job ends (exit code 1) instead of rank 0 waiting forever."""
import json
import os
import sys

import numpy as np

import starling as st
import starling.distributed as dist
import starling.numpy as snp
from starling.sharding import NamedSharding, P, make_mesh

out = sys.argv[1]
world = dist.initialize()
rank = dist.get_rank()
seen = []
pre = lambda op, g, x: seen.append(["pre", op, g.name, list(np.shape(x))])  # noqa: E731
post = lambda op, g, res: seen.append(["post", op, g.name, type(res).__name__])  # noqa: E731
with dist.register_collective_hooks(pre=pre, post=post):
    dist.all_reduce(snp.ones(3))
    dist.all_gather(snp.ones(2)).pop()
    dist.barrier()
    mesh = make_mesh((2,), ("d",))
    x = dist.make_array_from_process_local_data(NamedSharding(mesh, P("d")), np.ones(2))
    st.shard_map(lambda b: st.lax.psum(b, "d"), mesh=mesh, in_specs=P("d"), out_specs=P())(x)
dist.all_reduce(snp.ones(1))   # after the with block: no hooks
only_world = dist.register_collective_hooks(post=lambda op, g, r: seen.append(["world", op]),
                                            group=world)
sub = dist.new_group([0, 1])
dist.all_reduce(snp.ones(1), group=sub)   # another group: not seen
dist.all_reduce(snp.ones(1))
only_world.remove()


def refuse(op, g, x):
    raise RuntimeError(f"refused {op}")


h = dist.register_collective_hooks(pre=refuse)
try:
    dist.broadcast(snp.ones(1), src=0)
except RuntimeError as e:
    seen.append(["raised", str(e)])
h.remove()
dist.barrier()
with open(os.path.join(out, f"hooks{rank}.json"), "w") as f:
    json.dump(seen, f)

dist.on_abort(lambda reason: open(os.path.join(out, f"first{rank}.txt"), "w").write(reason))
dist.on_abort(lambda reason: 1 / 0)   # a broken callback does not stop the others
dist.on_abort(lambda reason: open(os.path.join(out, f"abort{rank}.txt"), "w").write(reason))
if rank == 1:
    raise KeyError("injected on rank 1")
dist.barrier()   # no timeout: only the abort ends this wait
open(os.path.join(out, "not-reached.txt"), "w").write("rank 0 passed the barrier")
