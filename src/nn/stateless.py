"""Modules as pure functions: ``replace``, ``functional_call``, ``stateful_call``,
``trainable_parameters`` and the module-aware ``value_and_grad`` / ``grad``.

All of these are pure (they never mutate their inputs, except ``value_and_grad``'s documented
eager write-back of running statistics) and work inside ``grad`` / ``vmap`` / ``compile``.
"""
from __future__ import annotations

import functools

from .. import tree as tree_util
from .module import (
    Module, ModuleMutationError, _is_array, _is_float_dtype, collecting, mutation_allowed,
)

__all__ = ["replace", "functional_call", "stateful_call", "trainable_parameters",
           "value_and_grad", "grad"]


def _check_module(op, module):
    if not isinstance(module, Module):
        raise TypeError(f"{op}: expected an nn.Module, got {type(module).__name__}")


def replace(module, mapping):
    """A copy of ``module`` with some parameters / buffers replaced (``module`` is unchanged).

    Args:
        module: an nn.Module.
        mapping: dict from dotted names (as in ``state_dict()``) to new values (any pytree leaf;
            shapes are not checked).
    Returns:
        A new module tree (new Module objects; unreplaced leaves are shared, arrays being
        immutable).
    Raises:
        KeyError: a name in ``mapping`` is not a parameter or buffer of ``module``.
    """
    _check_module("replace", module)
    paths, leaves, treedef = tree_util.paths_leaves_treedef(module)
    names = [".".join(str(k) for k in p) for p in paths]
    if mapping:
        index = {n: i for i, n in enumerate(names)}
        unknown = [k for k in mapping if k not in index]
        if unknown:
            raise KeyError(f"replace: {type(module).__name__} has no parameter or buffer named "
                           f"{', '.join(map(repr, unknown))} (known: {', '.join(names)})")
        leaves = list(leaves)
        for k, v in mapping.items():
            leaves[index[k]] = v
    return tree_util.unflatten(treedef, leaves)


def trainable_parameters(module, frozen=()):
    """Dict ``{dotted_name: array}`` (in state-dict order) of the parameters that get
    gradients.

    Excluded: buffers, non-floating arrays, parameters frozen with ``requires_grad_(False)``,
    and names in ``frozen`` (exact names, or prefixes such as ``"encoder"`` that freeze a whole
    submodule).
    """
    _check_module("trainable_parameters", module)
    frozen = tuple(frozen)
    out = {}
    for prefix, m in module.named_modules():
        own_params = m._own()[0]
        for k in own_params:
            if k in m._frozen_names:
                continue
            name = f"{prefix}.{k}" if prefix else k
            if any(name == f or name.startswith(f + ".") for f in frozen):
                continue
            v = m.__dict__[k]
            if _is_float_dtype(v.dtype):
                out[name] = v
    return out


def functional_call(module, params, *args, **kwargs):
    """Calls ``module(*args, **kwargs)`` with some parameters / buffers replaced by ``params``
    (dict by dotted name; missing names keep the module's values), as a pure function.

    Running-statistics updates made during the call (BatchNorm in training mode) are discarded;
    use ``stateful_call`` to get them. ``module`` itself is never changed.
    """
    m = replace(module, params)
    with collecting():
        return m(*args, **kwargs)


def stateful_call(module, *args, **kwargs):
    """``(output, new_module)``: calls the module and returns a copy of it carrying the buffers
    its layers updated (BatchNorm running statistics), threading state explicitly. Pure: works
    under grad / vmap / compile, and ``module`` itself is never changed.
    """
    _check_module("stateful_call", module)
    m = replace(module, {})
    with collecting() as col:
        out = m(*args, **kwargs)
    updates = col.named(m)
    return out, (replace(m, updates) if updates else m)


def _value_and_grad_aux(f, params):
    """``((value, aux), grads)`` of ``f(params) -> (scalar, aux)``.

    The aux outputs travel as extra (gradient-stopped) primal outputs of ``vjp`` so that they
    come out as plain values; non-array aux leaves are passed around the transformation.
    """
    from .. import numpy as snp
    from .. import stop_gradient, vjp
    box = []

    def g(p):
        value, aux = f(p)
        leaves, treedef = tree_util.flatten(aux)
        is_arr = [_is_array(x) for x in leaves]
        box.append((treedef, is_arr, [None if a else x for a, x in zip(is_arr, leaves)]))
        arrays = [stop_gradient(x) for a, x in zip(is_arr, leaves) if a]
        return value, arrays

    (value, arrays), vjp_fn = vjp(g, params)
    treedef, is_arr, others = box[-1]
    it = iter(arrays)
    aux = tree_util.unflatten(treedef, [next(it) if a else o for a, o in zip(is_arr, others)])
    if not _is_array(value) or tuple(value.shape) != () or not _is_float_dtype(value.dtype):
        raise TypeError("value_and_grad: the function must return a floating scalar, got "
                        f"{getattr(value, 'shape', type(value).__name__)}")
    one = snp.ones((), dtype=value.dtype)
    (grads,) = vjp_fn((one, [snp.zeros(a.shape, a.dtype) for a in arrays]))
    return (value, aux), grads


def value_and_grad(fn, *, has_aux=False, frozen=(), return_module=False):
    """Differentiates ``fn(module, *args, **kwargs)`` with respect to the module's trainable
    parameters (see ``trainable_parameters``; frozen ones are constants).

    Args:
        fn: returns a floating scalar loss (or ``(loss, aux)`` with ``has_aux``).
        has_aux: as in ``starling.value_and_grad``.
        frozen: dotted names or prefixes of parameters not to differentiate.
        return_module: also return the module carrying the buffers updated in the forward
            pass (BatchNorm running statistics); needed to thread them inside transformations.
    Returns:
        A function ``(module, *args, **kwargs) -> (value, grads)`` (or ``(value, grads,
        new_module)`` with ``return_module``), ``value`` being ``loss`` or ``(loss, aux)`` and
        ``grads`` a dict ``{dotted_name: gradient}`` with the shapes of the parameters
        (the input ``optim`` optimizers take).

    Running statistics: without ``return_module``, updates made by the forward pass are written
    back into ``module`` in place when called outside transformations (PyTorch behaviour) or
    inside an ``nn.compile``'d function the module was passed to, and raise
    ModuleMutationError inside any other transformation (use ``return_module=True`` there).

    The returned function runs eagerly (op by op, like PyTorch); compile a training step that
    calls it with ``nn.compile`` (see there for why that is not the default).
    """
    @functools.wraps(fn)
    def vg(module, *args, **kwargs):
        _check_module("nn.value_and_grad", module)
        params = trainable_parameters(module, frozen)

        def inner(p):
            m = replace(module, p)
            with collecting() as col:
                out = fn(m, *args, **kwargs)
            if has_aux:
                if not isinstance(out, (tuple, list)) or len(out) != 2:
                    raise TypeError("nn.value_and_grad: has_aux=True requires fn to return "
                                    f"(loss, aux), got {type(out).__name__}")
                loss, aux = out
            else:
                loss, aux = out, None
            return loss, (aux, col.named(m))

        (loss, (aux, updates)), grads = _value_and_grad_aux(inner, params)
        value = (loss, aux) if has_aux else loss
        if return_module:
            return value, grads, replace(module, updates)
        if updates:
            if not mutation_allowed(module, updates.values()):
                raise ModuleMutationError(
                    "nn.value_and_grad: the forward pass updated buffers "
                    f"{sorted(updates)} inside a transformed function; use "
                    "nn.value_and_grad(fn, return_module=True), which returns (value, grads, "
                    "new_module), and carry new_module forward (or call model.eval()).")
            module._rebind(updates)
        return value, grads

    return vg


def grad(fn, *, has_aux=False, frozen=()):
    """Gradient dict of ``fn(module, ...)`` with respect to the trainable parameters
    (``(grads, aux)`` with ``has_aux``); see ``value_and_grad``."""
    vg = value_and_grad(fn, has_aux=has_aux, frozen=frozen)

    @functools.wraps(fn)
    def g(module, *args, **kwargs):
        value, grads = vg(module, *args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return g
