"""``python -m starling.distributed.flight_recorder DIR``: compares the ranks' dumps (see the
package docstring); exit 0 when consistent, 1 when not, 2 when there is nothing to compare."""
import sys

from . import main

sys.exit(main())
