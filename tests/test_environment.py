"""environment.yml and pyproject.toml must name the same packages, so conda and pip users get one course."""

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dev dependency)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DECLARED = {"torch", "triton", "jupyterlab", "matplotlib", "nbval", "numpy", "ipywidgets"}


def _name(requirement):
    return re.match(r"\s*([A-Za-z0-9_.\-]+)", requirement).group(1).lower()


def _pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_name(r) for r in project["dependencies"]}
    extras = {_name(r) for reqs in project["optional-dependencies"].values() for r in reqs}
    return runtime, extras - {"kimik3-lessons"}


def _environment_pip_packages():
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "- pip:")
    entries = []
    for line in lines[start + 1:]:
        if not line.startswith("      - "):
            break
        entries.append(line.strip()[2:])
    return {_name(e) for e in entries if not e.startswith("-e")}, [e for e in entries if e.startswith("-e")]


def test_environment_names_the_declared_packages_and_installs_the_package():
    packages, editable = _environment_pip_packages()
    assert packages == DECLARED
    assert editable == ["-e .[dev]"]
    assert "name: kimik3-lessons" in (ROOT / "environment.yml").read_text()
    assert "python=3.11" in (ROOT / "environment.yml").read_text()


def test_environment_and_pyproject_list_the_same_packages():
    runtime, extras = _pyproject()
    packages, _ = _environment_pip_packages()
    assert runtime <= packages, f"runtime dependencies missing from environment.yml: {runtime - packages}"
    unknown = packages - runtime - extras
    assert not unknown, f"environment.yml names packages pyproject.toml does not: {unknown}"
    assert {"fla-core", "einops", "packaging", "transformers", "pytest", "nbval", "ruff"} <= extras
