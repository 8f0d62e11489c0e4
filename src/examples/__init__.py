"""Runnable examples: ``python -m starling.examples.digits``."""
import sys as _sys

from .._install import check_package as _check_package

# With an editable install this package is found even when a folder named `starling` in the
# working directory has become the top-level `starling` (a namespace package): say so here,
# before the example's first `import starling.numpy` fails without a reason.
_check_package(_sys.modules[__name__.rpartition(".")[0]])
