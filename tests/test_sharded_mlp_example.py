"""The sharded digits example: a 2x2 mesh (data x tensor parallel) trains like one device."""
from __future__ import annotations

import os
import re
import subprocess
import sys


def test_sharded_mlp_matches_single_device():
    env = dict(os.environ, STARLING_NUM_CPU_DEVICES="4")
    out = subprocess.run([sys.executable, "-m", "starling.examples.sharded_mlp", "--epochs", "3",
                          "--no-progress"], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    # the weights keep their Megatron layouts from step to step
    assert "placements [Replicate(), Shard(dim=1)]" in text
    assert "placements [Replicate(), Shard(dim=0)]" in text
    acc = float(re.search(r"^test accuracy ([\d.]+)%", text, re.M).group(1))
    ref = re.search(r"single device: final loss ([\d.]+), test accuracy ([\d.]+)%.*difference "
                    r"([\d.e+-]+)", text)
    assert ref is not None, text
    assert acc == float(ref.group(2))
    # same batches, same model: per-step losses equal within float32 rounding
    assert float(ref.group(3)) < 1e-5
    assert acc > 90.0
