"""starling.examples.elastic_digits: 4 ranks train the digits MLP data-parallel, rank 2 SIGKILLs
itself mid-step, the 3 survivors reconfigure, resume from the last step all of them completed
and finish. Checked: no step's data lost or applied twice (the examples each step applied, as
the all-reduce itself reported them), and the final parameters equal a clean 3-rank run resumed
from the survivors' checkpoint of that step."""
from __future__ import annotations

import json

import numpy as np

from starling.examples.digits import load_digits
from starling.examples.elastic_digits import schedule
from tests.mpi_jobs import launch

EPOCHS, BATCH, SEED, KILL_STEP = 2, 60, 0, 17


def _run(n, out, *extra):
    rc, text = launch(n, "starling.examples.elastic_digits",
                      ["--epochs", EPOCHS, "--batch-size", BATCH, "--seed", SEED, "--out", out,
                       *extra], module=True, fault_tolerant=True, timeout=360)
    assert out.exists(), text[-4000:]
    return json.loads(out.read_text()), text


def test_killed_rank_no_data_lost_or_repeated_and_matches_clean_resume(tmp_path):
    ckpt = tmp_path / "ckpt"
    killed, text = _run(4, tmp_path / "killed.json", "--kill-rank", 2, "--kill-step", KILL_STEP,
                        "--checkpoint-dir", ckpt, "--checkpoint-every", 10, "--keep", 10)
    n_train = len(load_digits(SEED)[0])
    steps = EPOCHS * (n_train // BATCH)
    assert killed["steps"] == steps
    (rec,) = killed["recoveries"]
    assert rec["removed"] == [2] and rec["world_size"] == 3
    assert "peer process failed" in rec["error"]
    assert f"3 processes resume from step {rec['resumed_from']}" in text
    resume = rec["resumed_from"]
    # the step rank 2 died in never completed anywhere; the survivors resume at or just before it
    assert resume in (KILL_STEP - 1, KILL_STEP)
    assert killed["sizes"] == [4] * resume + [3] * (steps - resume)
    # every step applied exactly its global batch, once: nothing lost, nothing twice
    assert len(killed["log"]) == steps
    for s, applied in enumerate(killed["log"]):
        assert applied == sorted(schedule(s, n_train, BATCH, SEED).tolist()), s
    expected = np.zeros(n_train, np.int64)
    for s in range(steps):
        np.add.at(expected, schedule(s, n_train, BATCH, SEED), 1)
    assert killed["counts"] == expected.tolist()
    assert killed["accuracy"] > 0.85

    clean, _ = _run(3, tmp_path / "clean.json", "--resume", ckpt / f"step_{resume:08d}")
    assert clean["recoveries"] == [] and clean["log"] == killed["log"]
    assert clean["sizes"] == killed["sizes"]
    got = np.concatenate([np.ravel(x) for layer in killed["params"] for x in layer])
    ref = np.concatenate([np.ravel(x) for layer in clean["params"] for x in layer])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
