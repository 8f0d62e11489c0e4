"""``with_sharding_constraint``: pins the layout of a value inside traced code.

The primitive ``sharding_constraint`` (family ``collectives``) is the identity on values; the
partitioner lays its operand out by the given NamedSharding there (redistributing if needed), so
users steer propagation where the cost model alone would choose differently. Eagerly it lays the
array out (``distribute`` / ``redistribute``). Its JVP and transpose constrain the tangent /
cotangent alike; vmap inserts an unsplit dim for the batch.
"""
from __future__ import annotations

from .. import tree as tree_util
from ..arrays.convert import operand
from ..core.ad_util import Zero
from ..core.primitive import Primitive
from ..arrays.ops import rules as R
from .sharding import NamedSharding, PartitionSpec, as_sharding

sharding_constraint_p = Primitive("sharding_constraint", family="collectives")


def _impl(x, *, sharding):
    # inside a per-device Program the layout was already realised by the partitioner
    return x


def _transpose(ct, x, *, sharding):
    if type(ct) is Zero:
        return [ct]
    return [sharding_constraint_p.bind(ct, sharding=sharding)]


def _batch(args, dims, *, sharding):
    x, d = args[0], dims[0]
    spec = list(sharding.spec) + [None] * max(0, d - len(sharding.spec))
    spec.insert(d, None)
    return sharding_constraint_p.bind(x, sharding=sharding.replace(spec=PartitionSpec(*spec))), d


sharding_constraint_p.impl = _impl
sharding_constraint_p.abstract_eval = lambda x, *, sharding: x
sharding_constraint_p.weak_type = lambda w, **p: w
R.deflinear(sharding_constraint_p, _transpose)
sharding_constraint_p.batch = _batch
sharding_constraint_p.eager = lambda args, params: _impl_sharded(args[0], **params)


def _impl_sharded(x, *, sharding):
    from .redistribute import as_layout
    return as_layout(x, sharding)


def with_sharding_constraint(x, shardings):
    """``x`` (a pytree of arrays) laid out by ``shardings`` (a NamedSharding, PartitionSpec with
    the current mesh, or placements; or a pytree prefix of such) inside traced code; eagerly the
    arrays are redistributed.

    Raises:
        ValueError: a layout that does not fit an array's rank, or no mesh for a bare spec.
    """
    leaves, treedef = tree_util.flatten(x)
    if isinstance(shardings, (NamedSharding, PartitionSpec)) or (
            isinstance(shardings, (tuple, list)) and shardings
            and all(hasattr(p, "is_shard") for p in shardings)):
        flat = [shardings] * len(leaves)
    else:
        flat = tree_util.broadcast_prefix(shardings, x)
    out = []
    for leaf, s in zip(leaves, flat):
        a = operand(leaf, "with_sharding_constraint")
        sh = as_sharding(tuple(s) if isinstance(s, list) else s, "with_sharding_constraint",
                         ndim=a.ndim)
        if not isinstance(sh, NamedSharding):
            raise TypeError(f"with_sharding_constraint: expected a NamedSharding, PartitionSpec "
                            f"or placements, got {s!r}")
        sh.check_shape(a.shape, "with_sharding_constraint")
        out.append(sharding_constraint_p.bind(a, sharding=sh))
    return tree_util.unflatten(treedef, out)
