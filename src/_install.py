"""Checks that ``import starling`` found a built Starling, and explains when it did not.

A folder named ``starling`` in the working directory comes first on ``sys.path`` (Python puts
the script's folder, or the working directory for ``-c`` / ``-m`` / the REPL, in front), so it
hides the installed package: an empty folder (or a clone of the repository) becomes a namespace
package, a copy of ``src/`` an unbuilt package without the compiled extension. This module
imports nothing from Starling, so it also runs when the package around it is such a stand-in.
"""
from __future__ import annotations

import importlib
import os
import sys

DIST_NAME = "starling"


def installed_location() -> str | None:
    """Where pip installed the distribution ``starling``, or None if it is not installed.

    Returns:
        The repository folder of an editable install (``pip install -e``), else the folder of
        the installed package. Metadata that locates neither (e.g. the ``starling.egg-info``
        that a build leaves in the repository root) is skipped.
    """
    import importlib.metadata   # here: only an import that fails pays for it
    import json
    import urllib.parse
    import urllib.request
    for dist in importlib.metadata.distributions(name=DIST_NAME):
        direct_url = dist.read_text("direct_url.json")
        if direct_url:
            info = json.loads(direct_url)
            url = info.get("url", "")
            if info.get("dir_info", {}).get("editable") and url.startswith("file:"):
                return urllib.request.url2pathname(urllib.parse.urlparse(url).path)
        for f in dist.files or ():
            if f.as_posix() == "starling/__init__.py":
                return os.path.dirname(os.path.abspath(dist.locate_file(f)))
    return None


def _is_within(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([path, folder]) == folder


def shadowed_message(found: str, problem: str, package_dir: str | None = None) -> str:
    """The ImportError text for a ``starling`` imported from ``found`` that is unusable.

    Args:
        found: where the imported ``starling`` lives, e.g. "the folder /x/starling".
        problem: what is wrong with it, one sentence.
        package_dir: the folder of that package when it has one; inside the installed location,
            the installation itself is incomplete rather than hidden.
    """
    installed = installed_location()
    head = f"`import starling` found {found}: {problem}"
    if installed is None:
        return (f"{head} Starling is not installed in this Python environment ({sys.prefix}): "
                'create and activate a virtual environment, then run `pip install -e ".[dev]"` '
                "in the repository root (see README.md).")
    if package_dir is not None and _is_within(package_dir, installed):
        return (f"{head} The installation in {installed} is incomplete: run "
                '`pip install -e ".[dev]"` there again (it builds the extension into src/).')
    return (f"{head} Starling is installed from {installed}, but a folder or file named "
            f"`starling` in the working directory ({os.getcwd()}) comes first on sys.path and "
            "hides it: run Python from another folder (e.g. the repository root) or rename "
            "that one.")


def check_package(package) -> None:
    """Raises ImportError if the module ``sys.modules['starling']`` is not a real package.

    Called by subpackages that run even when ``starling`` itself is a namespace package (an
    editable install still finds them): the namespace package has no ``__file__``.

    Args:
        package: the imported top-level module ``starling``.

    Raises:
        ImportError: ``package`` is a namespace package, with the folder(s) it stands for.
    """
    if getattr(package, "__file__", None) is None:
        folders = ", ".join(getattr(package, "__path__", None) or ["an unknown location"])
        raise ImportError(shadowed_message(
            f"the folder {folders}", "a namespace package, not Starling."))


def import_native(package_dir: str):
    """``starling._native``, or an ImportError that says why it cannot be used.

    Args:
        package_dir: the folder of the ``starling`` package being imported.

    Raises:
        ImportError: the compiled extension cannot be imported, or it comes from another folder
            than ``package_dir`` (the package is a stand-in that hides the installed one, whose
            extension an editable install still finds).
    """
    try:
        native = importlib.import_module(f"{__package__}._native")
    except ImportError as e:
        raise ImportError(shadowed_message(
            f"a package in {package_dir}",
            f"its compiled extension starling._native cannot be imported ({e}).",
            package_dir)) from e
    native_dir = os.path.dirname(os.path.abspath(native.__file__))
    if os.path.realpath(native_dir) != os.path.realpath(package_dir):
        raise ImportError(shadowed_message(
            f"a package in {package_dir}",
            f"its compiled extension starling._native was found in {native_dir} instead.",
            package_dir))
    return native
