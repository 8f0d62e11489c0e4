"""The requirements of pyproject.toml, for .ci/run (standard library only).

    python .ci/requirements.py versions   # the installed version of every requirement
    python .ci/requirements.py floors     # constraints pinning every requirement to its lower bound
"""
from __future__ import annotations

import importlib.metadata
import pathlib
import re
import sys
import tomllib

PYPROJECT = pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirements() -> list[tuple[str, str]]:
    """(name, specifier) of every dependency and optional dependency, in file order, once."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        lines += extra
    out = {}
    for line in lines:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*([^;]*)(;.*)?", line)   # ; environment marker
        if m is None:
            raise ValueError(f"{PYPROJECT}: cannot read the requirement {line!r}")
        out.setdefault(m.group(1), m.group(2).strip())
    return list(out.items())


def versions() -> None:
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    for name, spec in requirements():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = "-"
        print(f"{name:<16} {have:<12} (allowed {spec})")


def floors() -> None:
    for name, spec in requirements():
        m = re.search(r">=\s*([0-9][^,\s]*)", spec)
        if m is None:
            raise ValueError(f"{PYPROJECT}: {name} {spec!r} has no lower bound")
        print(f"{name}=={m.group(1)}")


if __name__ == "__main__":
    commands = {"versions": versions, "floors": floors}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: python {sys.argv[0]} {{{'|'.join(commands)}}}")
    commands[sys.argv[1]]()
