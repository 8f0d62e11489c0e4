"""numpy_ref: interprets the Program with each primitive's NumPy implementation.

Always available; the oracle every other backend is tested against: it evaluates under
``reference_mode()`` (src/core/trace.py), so primitives with a native fast path (dot_general's
GEMM) run their NumPy implementation here and share no kernel with the backends under test.
Programs with symbolic
dims (dynamic shapes) run for any concrete sizes: ``executable(consts, args, shape_env=env)``
substitutes the sizes into the shape params (``bind_shapes``, cached per size). Under
``starling.debug_mode()`` the Program is evaluated under the debug trace, so every executed
equation is recorded (src/lowering/debug.py).
"""
from __future__ import annotations

from ...core.ir import eval_program
from ...core.symbolic import bind_shapes
from ...core.trace import EVAL_TRACE, reference_mode, set_current_trace
from .. import debug as _debug
from . import register_backend


class NumpyRefExecutable:
    """A Program run by the reference interpreter (``eval_program`` on NumPy impls), the oracle
    other backends are compared to. Called as ``exe(consts, args, shape_env=None)``; with symbolic
    shapes, ``shape_env`` gives the sizes and the Program bound to them is cached (at most 256)."""
    source = None

    def __init__(self, program):
        self.program = program
        self._bound = {}

    def __call__(self, consts, args, shape_env=None):
        prog = self.program
        if shape_env:
            key = getattr(shape_env, "key", None) or frozenset(shape_env.items())
            bound = self._bound.get(key)
            if bound is None:
                if len(self._bound) >= 256:  # many distinct sizes: keep memory bounded
                    self._bound.clear()
                bound = self._bound[key] = bind_shapes(prog, shape_env)
            prog = bound
        trace = _debug.active_trace() or EVAL_TRACE
        with set_current_trace(trace), reference_mode():
            return eval_program(prog, consts, *args)


class NumpyRefBackend:
    """The ``numpy_ref`` backend: supports every primitive with a reference impl and symbolic
    shapes; ``compile`` just wraps the Program (nothing is generated)."""
    name = "numpy_ref"
    supports_dynamic_shapes = True

    def supports(self, primitive) -> bool:
        return primitive.impl is not None

    def compile(self, program):
        return NumpyRefExecutable(program)


register_backend(NumpyRefBackend())
