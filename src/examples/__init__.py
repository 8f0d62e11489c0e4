"""Runnable examples: ``python -m starling.examples.digits``."""
