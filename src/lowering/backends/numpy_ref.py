"""numpy_ref: interprets the Program with each primitive's NumPy implementation.

Always available; the oracle every other backend is tested against.
"""
from __future__ import annotations

from ...core.ir import eval_program
from ...core.trace import EVAL_TRACE, set_current_trace
from . import register_backend


class NumpyRefExecutable:
    """Runs a Program by evaluating each equation with its NumPy implementation."""

    source = None

    def __init__(self, program):
        self.program = program

    def __call__(self, consts, args):
        with set_current_trace(EVAL_TRACE):
            return eval_program(self.program, consts, *args)


class NumpyRefBackend:
    """The oracle backend: supports every primitive that has an ``impl``."""

    name = "numpy_ref"

    def supports(self, primitive) -> bool:
        return primitive.impl is not None

    def compile(self, program):
        return NumpyRefExecutable(program)


register_backend(NumpyRefBackend())
