"""The installed package as a user meets it: in a fresh interpreter, from another folder.

A folder named ``starling`` in the working directory comes first on sys.path; the import must
then fail with an ImportError that says so (src/_install.py) instead of a bare "No module named
starling.numpy". The runnable examples work from any folder.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

import starling
from starling import _install

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE_DIR = os.path.dirname(os.path.abspath(starling.__file__))
EDITABLE = _install.installed_location() not in (None, PACKAGE_DIR)


def _run(cwd, *args, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_installed_location_is_this_package():
    where = _install.installed_location()
    assert where is not None, "run the tests against an installed Starling (pip install -e .)"
    assert _install._is_within(PACKAGE_DIR, where)


def test_empty_starling_folder_in_the_working_directory(tmp_path):
    (tmp_path / "starling").mkdir()
    out = _run(tmp_path, "-c", "import starling.examples")
    if EDITABLE:
        # the folder becomes a namespace package; the editable install still finds
        # starling.examples, whose check explains
        assert out.returncode != 0
        err = out.stderr.strip().splitlines()[-1]
        assert err.startswith("ImportError:"), out.stderr
        assert f"the folder {tmp_path / 'starling'}" in err and "namespace package" in err
        assert "hides it" in err and f"({tmp_path})" in err
    else:
        # a regular package on sys.path wins over a namespace folder
        assert out.returncode == 0, out.stderr


def test_copy_of_the_package_in_the_working_directory(tmp_path):
    # e.g. a copy of src/ named starling, without the compiled extension
    shutil.copytree(PACKAGE_DIR, tmp_path / "starling",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    out = _run(tmp_path, "-c", "import starling")
    assert out.returncode != 0
    err = out.stderr.strip().splitlines()[-1]
    assert err.startswith("ImportError:"), out.stderr
    assert f"a package in {tmp_path / 'starling'}" in err and "starling._native" in err
    assert "hides it" in err and f"({tmp_path})" in err


@pytest.mark.parametrize("style", ["function", "module"])
def test_digits_example_runs_from_any_folder(tmp_path, style):
    out = _run(tmp_path, "-m", "starling.examples.digits", "--style", style, "--epochs", "2",
               "--no-progress")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"digits: 1438 train / 359 test images, {style} style", out.stdout
    accuracy = float(re.search(r"test accuracy (\d+\.\d+)%", out.stdout).group(1))
    assert accuracy > 85.0, out.stdout
    assert "per-example gradient norms (vmap(grad))" in out.stdout
    assert re.search(r"DP-SGD step .*: batch loss \d+\.\d+ -> \d+\.\d+", out.stdout), out.stdout


def _ci_requirements():
    spec = importlib.util.spec_from_file_location("ci_requirements",
                                                  ROOT / ".ci" / "requirements.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_requirement_has_a_tested_range():
    # pyproject.toml's policy: a lower bound that .ci/run oldest tests, and an upper bound
    reqs = _ci_requirements()
    found = reqs.requirements()
    assert {"numpy", "ml_dtypes", "pytest", "jupyterlab"} <= {name for name, _ in found}
    for name, spec in found:
        assert re.search(r">=\s*\d", spec), f"{name} {spec!r}: no lower bound"
        assert re.search(r"(^|,)\s*<\s*\d", spec), f"{name} {spec!r}: no upper bound"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] + sum(project["optional-dependencies"].values(), [])
    for name, spec in found:   # a package listed twice (dev and notebooks) has one range
        assert all(line.split(";")[0].replace(" ", "") == name + spec.replace(" ", "")
                   for line in listed if re.match(re.escape(name) + r"\s*[<>=!~]", line))


def test_floors_pin_every_requirement_to_its_lower_bound(capsys):
    reqs = _ci_requirements()
    reqs.floors()
    pins = dict(line.split("==") for line in capsys.readouterr().out.split())
    found = dict(reqs.requirements())
    assert set(pins) == set(found)
    for name, version in pins.items():
        assert f">={version}," in found[name].replace(" ", "") + ",", (name, version)
