"""Native execution resources shared by every backend: the CPUs Starling may use and how
threads (device workers, BLAS, kernel pools) share them (threads.py)."""
