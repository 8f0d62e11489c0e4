"""PyTorch-style stateful optimizers for the nn shim (re-exported by ``starling.optim``).

``opt = optim.Adam(model, lr=1e-3)`` tracks ``nn.trainable_parameters(model)`` (by name, fixed
at construction). ``opt.step(grads)`` takes the gradient dict from ``nn.value_and_grad`` (or a
module-shaped gradient from ``starling.grad``), runs the pure update (compiled once per
signature when ``starling.compile`` exists), rebinds the model's parameters in place and
returns the model, so both ``opt.step(grads)`` and ``model = opt.step(grads)`` read naturally.
A plain pytree of parameters works too: ``step`` then returns the new pytree (also kept in
``opt.params``). ``step`` is stateful: call it outside transformations, or inside an
``nn.compile``'d training step the optimizer is passed to (its state is lifted into the
compiled program and written back); under a plain ``compile`` use the pure pair, e.g.
``optim.adam(...).update``.

``optim.LBFGS`` follows torch.optim.LBFGS: ``loss = opt.step(closure)`` where ``closure()``
returns ``(loss, grads)`` evaluated at the model's current parameters.
"""
from __future__ import annotations

import numpy as np

from .. import numpy as snp
from .. import tree as tree_util
from .lbfgs import strong_wolfe_np, two_loop_np
from .module import Module, ModuleMutationError, mutation_allowed

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LBFGS"]


def _package():
    import sys
    return sys.modules[__name__.rsplit(".", 2)[0]]


def _check_eager(op, opt):
    if not mutation_allowed(opt):
        raise ModuleMutationError(
            f"{op}: stateful optimizers cannot step inside a transformed function; pass the "
            "optimizer to an nn.compile'd training step, or use the pure pair (e.g. "
            "optim.adam(lr).init / .update with optim.apply_updates) there")


class _Params:
    """The parameter set an optimizer tracks: a module's trainable parameters, or a pytree."""

    def __init__(self, op, params):
        from .stateless import trainable_parameters
        self.op = op
        if isinstance(params, Module):
            self.module = params
            self.names = list(trainable_parameters(params).keys())
            if not self.names:
                raise ValueError(f"{op}: the module has no trainable parameters")
            self.tree = None
        else:
            self.module = None
            self.tree = params

    def current(self):
        if self.module is None:
            return self.tree
        sd = self.module.state_dict()
        return {k: sd[k] for k in self.names}

    def grads(self, grads):
        if self.module is None:
            return grads
        if isinstance(grads, Module):
            sd = grads.state_dict()
            grads = {k: sd[k] for k in self.names if k in sd}
        grads = dict(grads)
        missing = [k for k in self.names if k not in grads]
        extra = [k for k in grads if k not in self.names]
        if missing or extra:
            raise ValueError(f"{self.op}.step: the gradients do not match the optimized "
                             f"parameters: missing {missing}, unexpected {extra}")
        return grads

    def set(self, new):
        if self.module is None:
            self.tree = new
            return new
        self.module._rebind(new)
        return self.module


class Optimizer:
    """Stateful wrapper of a pure ``GradientTransformation``.

    Args:
        params: an nn.Module (its trainable parameters) or a pytree of arrays.
        transformation: e.g. ``optim.adam(1e-3)``.
        compiled: run the update through ``starling.compile`` (when available).
    Attributes:
        state: the transformation's state (a pytree; save it with ``starling.save``).
    """

    def __init__(self, params, transformation, *, compiled=True):
        self._p = _Params(type(self).__name__, params)
        self.transformation = transformation
        self.state = transformation.init(self._p.current())
        tx = transformation

        def step_fn(grads, state, params):
            from .optim import apply_updates
            updates, state = tx.update(grads, state, params)
            return apply_updates(params, updates), state

        pkg = _package()
        self._step_fn = pkg.compile(step_fn) if compiled and hasattr(pkg, "compile") else step_fn

    @property
    def params(self):
        return self._p.current()

    @property
    def num_compiles(self) -> int:
        """How many parameter signatures the update has been staged and compiled for (0 when
        ``compiled=False``; steps inside an ``nn.compile``'d function are staged there)."""
        return getattr(self._step_fn, "num_compiles", 0)

    def zero_grad(self, set_to_none=True):
        """No-op (gradients are values here, not stored on parameters); for PyTorch habits."""

    def step(self, grads):
        """Applies one update; returns the updated model (rebound in place) or pytree."""
        _check_eager(f"{type(self).__name__}.step", self)
        grads = self._p.grads(grads)
        new, self.state = self._step_fn(grads, self.state, self._p.current())
        return self._p.set(new)

    def state_dict(self):
        return {"state": self.state}

    # ---- the state nn.compile lifts ----------------------------------------------------------
    def _lifted_module(self):
        return self._p.module

    def _lifted_state(self):
        """The pytree that changes as it steps: its state (and the parameters it holds itself
        when it tracks a pytree rather than a module)."""
        return self.state, self._p.tree

    def _set_lifted_state(self, value):
        self.state, tree = value
        if self._p.module is None:
            self._p.tree = tree

    def load_state_dict(self, sd):
        """Restores ``state`` (same structure as ``state_dict()['state']``; loaded trees with
        tuples in place of NamedTuples are accepted)."""
        leaves = tree_util.leaves(sd["state"])
        treedef = tree_util.structure(self.state)
        self.state = tree_util.unflatten(treedef, [snp.asarray(x) for x in leaves])


class SGD(Optimizer):
    """torch.optim.SGD: see ``optim.sgd`` for the update."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, compiled=True):
        from .optim import sgd
        super().__init__(params, sgd(lr, momentum, dampening, weight_decay, nesterov, maximize),
                         compiled=compiled)


class Adam(Optimizer):
    """torch.optim.Adam: see ``optim.adam``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, maximize=False, compiled=True):
        from .optim import adam
        super().__init__(params, adam(lr, betas, eps, weight_decay, amsgrad, maximize),
                         compiled=compiled)


class AdamW(Optimizer):
    """torch.optim.AdamW: see ``optim.adamw``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, compiled=True):
        from .optim import adamw
        super().__init__(params, adamw(lr, betas, eps, weight_decay, amsgrad, maximize),
                         compiled=compiled)


class RMSprop(Optimizer):
    """torch.optim.RMSprop: see ``optim.rmsprop``."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, *, maximize=False, compiled=True):
        from .optim import rmsprop
        super().__init__(params, rmsprop(lr, alpha, eps, weight_decay, momentum, centered,
                                         maximize), compiled=compiled)


class Adagrad(Optimizer):
    """torch.optim.Adagrad: see ``optim.adagrad``."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10, *, maximize=False, compiled=True):
        from .optim import adagrad
        super().__init__(params, adagrad(lr, lr_decay, weight_decay, initial_accumulator_value,
                                         eps, maximize), compiled=compiled)


class LBFGS:
    """Closure-based L-BFGS, as torch.optim.LBFGS (plus ``maximize``).

    ``loss = opt.step(closure)``: ``closure()`` returns ``(loss, grads)`` at the current
    parameters (e.g. ``lambda: nn.value_and_grad(loss_fn)(model, x, y)``). One ``step`` runs
    up to ``max_iter`` iterations: direction by the two-loop recursion (Nocedal & Wright
    Alg. 7.4, ``H0 = (s.y / y.y) I``), step ``lr`` (the first ever iteration
    ``min(1, 1/|g|_1) * lr``), or a strong-Wolfe line search with
    ``line_search_fn="strong_wolfe"``; it stops early on ``max|g| <= tolerance_grad``, tiny
    steps or loss changes (``tolerance_change``) or ``max_eval`` evaluations. The arithmetic
    runs in NumPy on the parameters flattened to one vector of their common dtype.

    Returns:
        ``step`` returns the closure's first loss (as PyTorch).
    """

    def __init__(self, params, lr=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None, *,
                 maximize=False):
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        self._p = _Params("LBFGS", params)
        self.lr, self.max_iter = lr, max_iter
        self.max_eval = max_eval if max_eval is not None else max_iter * 5 // 4
        self.tolerance_grad, self.tolerance_change = tolerance_grad, tolerance_change
        self.history_size, self.line_search_fn = history_size, line_search_fn
        self.maximize = maximize
        self.state = {"func_evals": 0, "n_iter": 0, "d": None, "t": None, "old_dirs": [],
                      "old_stps": [], "ro": [], "H_diag": 1.0, "prev_flat_grad": None,
                      "prev_loss": None}
        leaves, self._treedef = tree_util.flatten(self._p.current())
        self._shapes = [tuple(x.shape) for x in leaves]
        self._dtypes = [x.dtype for x in leaves]
        self._dtype = np.result_type(*[np.dtype(d) for d in self._dtypes])

    @property
    def params(self):
        return self._p.current()

    def _flat(self, tree):
        return np.concatenate([np.asarray(x, self._dtype).ravel()
                               for x in tree_util.leaves(tree)])

    def _set(self, vec):
        out, off = [], 0
        for s, d in zip(self._shapes, self._dtypes):
            n = int(np.prod(s))
            out.append(snp.asarray(vec[off:off + n].reshape(s).astype(d)))
            off += n
        self._p.set(tree_util.unflatten(self._treedef, out))

    def _eval(self, closure):
        loss, grads = closure()
        f = float(loss)
        g = self._flat(self._p.grads(grads))
        return (-f, -g) if self.maximize else (f, g)

    def step(self, closure):
        """One L-BFGS step (up to ``max_iter`` iterations); returns the first loss."""
        _check_eager("LBFGS.step", self)
        st = self.state
        f, g = self._eval(closure)
        orig_loss = -f if self.maximize else f
        evals = 1
        st["func_evals"] += 1
        if np.max(np.abs(g)) <= self.tolerance_grad:
            return orig_loss
        d, t = st["d"], st["t"]
        n_iter = 0
        while n_iter < self.max_iter:
            n_iter += 1
            st["n_iter"] += 1
            if st["n_iter"] == 1:
                d = -g
                st["old_dirs"], st["old_stps"], st["ro"] = [], [], []
                st["H_diag"] = 1.0
            else:
                y = g - st["prev_flat_grad"]
                s = d * t
                ys = float(y @ s)
                if ys > 1e-10:
                    if len(st["old_dirs"]) == self.history_size:
                        for k in ("old_dirs", "old_stps", "ro"):
                            st[k].pop(0)
                    st["old_dirs"].append(y)
                    st["old_stps"].append(s)
                    st["ro"].append(1.0 / ys)
                    st["H_diag"] = ys / float(y @ y)
                d = two_loop_np(g, st["old_stps"], st["old_dirs"], st["ro"], st["H_diag"])
            st["prev_flat_grad"] = g.copy()
            prev_loss = f
            t = min(1.0, 1.0 / float(np.sum(np.abs(g)))) * self.lr if st["n_iter"] == 1 \
                else self.lr
            gtd = float(g @ d)
            if gtd > -self.tolerance_change:
                break
            x = self._flat(self._p.current())
            if self.line_search_fn == "strong_wolfe":
                def obj(x0, step, dd):
                    self._set(x0 + step * dd)
                    return self._eval(closure)
                f, g, t, ls_evals = strong_wolfe_np(obj, x, t, d, f, g, gtd,
                                                    tolerance_change=self.tolerance_change)
                self._set(x + t * d)
            else:
                self._set(x + t * d)
                ls_evals = 0
                if n_iter != self.max_iter:
                    f, g = self._eval(closure)
                    ls_evals = 1
            evals += ls_evals
            st["func_evals"] += ls_evals
            if n_iter == self.max_iter or evals >= self.max_eval:
                break
            if np.max(np.abs(g)) <= self.tolerance_grad:
                break
            if np.max(np.abs(d * t)) <= self.tolerance_change:
                break
            if abs(f - prev_loss) < self.tolerance_change:
                break
        st["d"], st["t"], st["prev_loss"] = d, t, f
        return orig_loss
