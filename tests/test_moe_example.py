"""The mixture-of-experts example: top-1 routing through grouped GEMMs trains, keeps every expert
busy, and keeps its accuracy with MXFP8 expert weights."""
from __future__ import annotations

import re

from starling.examples import moe


def test_mixture_of_experts_trains_balanced_and_survives_mxfp8(capsys):
    acc, acc8 = moe.main(["--epochs", "12", "--experts", "4"])
    out = capsys.readouterr().out
    shares = [float(s) for s in re.search(r"shares of the test images: (.*)", out).group(1)
              .split()]
    assert len(shares) == 4 and min(shares) > 0.05, out
    assert acc > 0.92, out
    assert abs(acc - acc8) < 0.03, out
