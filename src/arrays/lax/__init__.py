"""The implementations behind ``starling.lax`` (src/lax.py is the public namespace)."""
