"""The sharding log: ``STARLING_LOG_SHARDING=1`` prints every layout choice of the partitioner,
every redistribution and the primitives without a sharding strategy to stderr.

Records go to the ``logging`` logger ``"starling.sharding"`` at INFO. When the variable is set
and neither that logger nor the root logger has a handler (a plain script or notebook, where
INFO records would otherwise vanish), one stderr handler is attached to it.
"""
from __future__ import annotations

import logging
import os
import sys

logger = logging.getLogger("starling.sharding")


def enabled() -> bool:
    """True when ``STARLING_LOG_SHARDING`` is set (and not 0); then makes the records visible
    (see the module docstring)."""
    if os.environ.get("STARLING_LOG_SHARDING") in (None, "", "0"):
        return False
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    return True
