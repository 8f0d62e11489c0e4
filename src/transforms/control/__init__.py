"""Structured control flow: switch / cond, while_loop, fori_loop, scan, map.

Each construct is a primitive whose parameters hold sub-Programs of the shared IR, so make_ir
prints them as nested blocks, every transformation handles them with rules, and backends can
lower them to real branches and loops.
"""
from .scan import map, scan  # noqa: A004
from .switch import cond, switch
from .while_loop import fori_loop, while_loop

__all__ = ["cond", "fori_loop", "map", "scan", "switch", "while_loop"]
