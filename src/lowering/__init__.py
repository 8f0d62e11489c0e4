"""From the shared IR to executables: the pass pipeline and the backends."""
