"""Host callbacks and debugging inside transformed code (``starling.debug``,
``starling.pure_callback``, ``starling.io_callback``).

A callback is a Python function called with the concrete values of traced arrays, from inside
``compile``, ``grad``, ``vmap`` and control flow. Three primitives share one set of rules and
differ in what passes may do with them:

================  ========  ================================================================
primitive         outputs   passes
================  ========  ================================================================
debug_callback    none      effectful: never dropped, merged or folded (``debug.print``,
                            ``debug.callback``, ``debug.breakpoint``, ``debug.check``)
io_callback       some      effectful (a side effect whose results are used)
pure_callback     some      pure: dropped when unused, merged when repeated, folded
================  ========  ================================================================

Ordering: Starling runs a program's host steps in program order on one thread, so every
callback runs in the order of the code, ``ordered`` or not (``ordered`` is accepted for JAX's
signature; under ``vmap`` an ordered ``io_callback`` is refused, as in JAX). Differentiation
calls debug callbacks with the primal values, once; a ``pure_callback`` / ``io_callback``
whose inputs carry a derivative is an error (wrap it in ``custom_jvp`` to give one). Under
``vmap`` debug callbacks and io callbacks run once per batch member, in order; a
``pure_callback`` follows its ``vmap_method``.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import tree as tree_util
from ..arrays.array import Array, wrap
from ..arrays.convert import operand
from ..core.ad_util import Zero, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..core.trace import EVAL_TRACE, Tracer, set_current_trace

__all__ = ["callback", "print", "breakpoint", "check", "CheckError", "pure_callback",
           "io_callback", "block_until_ready", "device_get"]

VMAP_METHODS = ("sequential", "expand_dims", "broadcast_all")


class CheckError(ValueError):
    """A ``debug.check`` predicate was False; the message is the check's, formatted with the
    values it was given."""


def _declare(name, effectful):
    p = Primitive(name, multiple_results=True, family="callback")
    p.meta["effectful"] = effectful
    p.meta["host_callback"] = True
    # runs Python, by design, in every backend: never reported as a NumPy fallback
    p.meta["native_impl"] = True
    return p


debug_callback_p = _declare("debug_callback", True)
io_callback_p = _declare("io_callback", True)
pure_callback_p = _declare("pure_callback", False)


def _impl(*bufs, callback, result_avals, op, **_):
    with set_current_trace(EVAL_TRACE):
        outs = callback(*[wrap(np.asarray(b)) for b in bufs])
    return _check_results(op, outs, result_avals)


def _check_results(op, outs, result_avals):
    outs = list(outs)
    if len(outs) != len(result_avals):
        raise TypeError(f"{op}: the callback returned {len(outs)} arrays, result_shape_dtypes "
                        f"declares {len(result_avals)}")
    res = []
    for i, (o, aval) in enumerate(zip(outs, result_avals)):
        a = np.asarray(o)
        if a.shape != tuple(aval.shape):
            raise TypeError(f"{op}: result {i} of the callback has shape {a.shape}, "
                            f"result_shape_dtypes declares {tuple(aval.shape)}")
        if a.dtype != aval.dtype:
            # a float64 result of NumPy for a declared float32 is rounded; a change of kind
            # (int for float, complex for real) is the callback's mistake
            if a.dtype.kind != np.dtype(aval.dtype).kind:
                raise TypeError(f"{op}: result {i} of the callback has dtype {a.dtype}, "
                                f"result_shape_dtypes declares {aval.dtype}")
            a = a.astype(aval.dtype)
        res.append(np.array(a))   # an array the program owns (the callback may keep its own)
    return res


def _abstract_eval(*avals, result_avals, **_):
    return list(result_avals)


def _jvp(prim):
    def rule(primals, tangents, **params):
        outs = prim.bind(*primals, **params)
        if prim is not debug_callback_p and any(type(t) is not Zero for t in tangents):
            raise TypeError(
                f"{params['op']}: cannot be differentiated (its inputs carry a derivative); give "
                "the function a derivative with starling.custom_jvp, or stop_gradient its inputs")
        return outs, [Zero(tangent_aval(o.aval)) for o in outs]
    return rule


def _batch(prim):
    def rule(args, dims, *, callback, result_avals, vmap_method, ordered, op):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        snp = _snp()
        args = [a if d is None else snp.moveaxis(a, d, 0) for a, d in zip(args, dims)]
        batched = [d is not None for d in dims]
        if prim is io_callback_p and ordered:
            raise ValueError(f"{op}: an ordered io_callback cannot run under vmap (the order of "
                             "the batch members' calls is not defined); pass ordered=False")
        if vmap_method == "sequential":
            callback = _sequential(callback, batched, size, result_avals)
        elif vmap_method == "expand_dims":
            args = [a if b else snp.expand_dims(a, 0) for a, b in zip(args, batched)]
        else:   # broadcast_all
            args = [a if b else snp.broadcast_to(a[None], (size,) + tuple(a.shape))
                    for a, b in zip(args, batched)]
        avals = tuple(ShapedArray((size,) + tuple(a.shape), a.dtype) for a in result_avals)
        outs = prim.bind(*args, callback=callback, result_avals=avals, vmap_method=vmap_method,
                         ordered=ordered, op=op)
        return outs, [0] * len(outs)
    return rule


def _sequential(callback, batched, size, result_avals):
    """``callback`` run once per batch member (the batch dim leading), results stacked."""
    def run(*args):
        per = [callback(*[a[i] if b else a for a, b in zip(args, batched)])
               for i in range(size)]
        return [np.stack([np.asarray(p[k]) for p in per]) if per else
                np.zeros((0,) + tuple(aval.shape), aval.dtype)
                for k, aval in enumerate(result_avals)]
    return run


for _p in (debug_callback_p, io_callback_p, pure_callback_p):
    _p.impl = _impl
    _p.abstract_eval = _abstract_eval
    _p.jvp = _jvp(_p)
    _p.batch = _batch(_p)
del _p


def _snp():
    from .. import numpy as snp
    return snp


# ---- the user-facing functions -------------------------------------------------------------

def _is_dynamic(leaf):
    return isinstance(leaf, (Array, Tracer, np.ndarray, np.generic)) or (
        isinstance(leaf, numbers.Number) and not isinstance(leaf, bool))


def _split_args(op, args, kwargs):
    """(operands, rebuild): the array-like leaves of ``(args, kwargs)`` as Starling operands,
    and a function putting values for them back into the user's structure (other leaves, such as
    strings, are kept as they are)."""
    leaves, treedef = tree_util.flatten((args, kwargs))
    where = [i for i, leaf in enumerate(leaves) if _is_dynamic(leaf)]
    operands = [operand(leaves[i], op) for i in where]

    def rebuild(values):
        full = list(leaves)
        for i, v in zip(where, values):
            full[i] = v
        return tree_util.unflatten(treedef, full)
    return operands, rebuild


def _result_avals(op, result_shape_dtypes):
    from .stage import aval_of
    leaves, treedef = tree_util.flatten(result_shape_dtypes)
    try:
        avals = tuple(ShapedArray(tuple(a.shape), np.dtype(a.dtype)) for a in map(aval_of, leaves))
    except (TypeError, AttributeError, ValueError) as e:
        raise TypeError(f"{op}: result_shape_dtypes must be a pytree of objects with .shape and "
                        f".dtype (starling.ShapeDtypeStruct, arrays): {e}") from None
    return avals, treedef


def _bind(prim, op, fn, result_shape_dtypes, args, kwargs, vmap_method, ordered):
    if not callable(fn):
        raise TypeError(f"{op}: the callback must be callable, got {type(fn).__name__}")
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"{op}: vmap_method must be one of {VMAP_METHODS}, got "
                         f"{vmap_method!r}")
    operands, rebuild = _split_args(op, args, kwargs)
    if result_shape_dtypes is None:
        avals, out_tree = (), None
    else:
        avals, out_tree = _result_avals(op, result_shape_dtypes)

    def flat_callback(*values):
        a, kw = rebuild(values)
        out = fn(*a, **kw)
        if out_tree is None:
            return []
        leaves, tree = tree_util.flatten(out)
        if tree != out_tree:
            raise TypeError(f"{op}: the callback returned a value of structure {tree}, "
                            f"result_shape_dtypes declares {out_tree}")
        return leaves

    outs = prim.bind(*operands, callback=flat_callback, result_avals=avals,
                     vmap_method=vmap_method, ordered=bool(ordered), op=op)
    return None if out_tree is None else tree_util.unflatten(out_tree, outs)


def callback(callback, *args, ordered=False, **kwargs):
    """Calls ``callback(*args, **kwargs)`` with the concrete values of traced arrays, for its
    side effect (JAX's ``debug.callback``). Works eagerly and under compile, grad (with the
    primal values, once), vmap (once per batch member, in order) and control flow.

    Args:
        callback: a Python function; its result is ignored. It receives Starling arrays for the
            array leaves of ``args`` / ``kwargs`` (other leaves as they were given).
        ordered: accepted for JAX's signature; callbacks always run in program order here.
    Raises:
        TypeError: ``callback`` not callable.
    """
    _bind(debug_callback_p, "debug.callback", callback, None, args, kwargs, "sequential",
          ordered)


def print(fmt, *args, ordered=False, **kwargs):  # noqa: A001  (JAX's name)
    """Prints ``fmt.format(*args, **kwargs)`` with the concrete values, from inside compiled,
    differentiated or batched code (JAX's ``debug.print``): under vmap one line per batch
    member, in order.

    Raises:
        TypeError: ``fmt`` is not a string.
    """
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print: fmt must be a format string, got {type(fmt).__name__}")
    import builtins

    def emit(*a, **kw):
        builtins.print(fmt.format(*a, **kw), flush=True)
    _bind(debug_callback_p, "debug.print", emit, None, args, kwargs, "sequential", ordered)


def breakpoint(*args, **kwargs):  # noqa: A001  (JAX's name)
    """Stops in the Python debugger (``builtins.breakpoint``, so ``PYTHONBREAKPOINT`` and
    ``sys.breakpointhook`` apply) where the program reaches this point, with ``args`` /
    ``kwargs`` as concrete arrays in the frame's locals (``values``); eagerly and inside
    compiled code alike, once per batch member under vmap."""
    import builtins

    def stop(*values, **named):
        values = (values, named) if named else values   # noqa: F841  (inspect in the debugger)
        builtins.breakpoint()
    _bind(debug_callback_p, "debug.breakpoint", stop, None, args, kwargs, "sequential", False)


def check(pred, msg, *fmt_args, **fmt_kwargs):
    """Raises ``CheckError(msg.format(*fmt_args, **fmt_kwargs))`` when the bool ``pred`` is
    False (any entry False, for an array), checkify-style: eagerly at once; in compiled code
    when the running program reaches the check, which stops the call (no result is returned);
    under vmap when any batch member fails (the first failing member's message).

    Raises:
        CheckError: the predicate is False.
        TypeError: ``msg`` is not a string.
    """
    if not isinstance(msg, str):
        raise TypeError(f"debug.check: msg must be a string, got {type(msg).__name__}")

    def verify(p, *a, **kw):
        if not bool(np.all(np.asarray(p))):
            raise CheckError(msg.format(*a, **kw))
    _bind(debug_callback_p, "debug.check", verify, None, (pred,) + fmt_args, fmt_kwargs,
          "sequential", False)


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """Calls a pure Python function on concrete values and returns its results into traced
    code (JAX's ``pure_callback``): the results have the declared shapes and dtypes; as the
    function is assumed pure, an unused call may be dropped and a repeated one merged.

    Args:
        callback: ``callback(*args, **kwargs)`` receiving Starling arrays for array leaves and
            returning a pytree of arrays matching ``result_shape_dtypes``.
        result_shape_dtypes: pytree of objects with ``.shape`` / ``.dtype``
            (``starling.ShapeDtypeStruct``).
        sharding: accepted for JAX's signature (results are replicated).
        vmap_method: under vmap: ``"sequential"`` (default here: one call per batch member),
            ``"expand_dims"`` (one call; unbatched arguments get a leading size-1 dim),
            ``"broadcast_all"`` (one call; every argument broadcast to the batch size). The
            last two expect results with the batch dim leading.
    Returns:
        A pytree like ``result_shape_dtypes``.
    Raises:
        TypeError: results of the wrong structure / shape / dtype kind (when the callback
            runs), or differentiation with respect to the arguments.
        ValueError: an unknown ``vmap_method``.
    """
    return _bind(pure_callback_p, "pure_callback", callback, result_shape_dtypes, args, kwargs,
                 vmap_method or "sequential", False)


def io_callback(callback, result_shape_dtypes, *args, sharding=None, ordered=False, **kwargs):
    """Like ``pure_callback`` for a function with side effects (JAX's ``io_callback``): never
    dropped, merged or folded; under vmap one call per batch member (refused when
    ``ordered``). ``result_shape_dtypes`` may be None for no results.

    Raises:
        TypeError: as ``pure_callback``; ValueError: ``ordered=True`` under vmap.
    """
    return _bind(io_callback_p, "io_callback", callback, result_shape_dtypes, args, kwargs,
                 "sequential", ordered)


def block_until_ready(x):
    """Waits until every array in the pytree ``x`` is computed; returns ``x`` (JAX's
    ``block_until_ready``). Non-array leaves are passed through."""
    for leaf in tree_util.leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


def device_get(x):
    """The pytree ``x`` with every Starling array replaced by a NumPy array on the host
    (gathered when sharded; JAX's ``device_get``)."""
    return tree_util.map(lambda a: np.asarray(a) if isinstance(a, Array) else a, x)

