"""The small kernel everything else stands on: dtypes, avals, primitives, traces, the IR."""
