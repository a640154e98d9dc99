"""environment.yml builds the environment the tests run in: pyproject.toml's package and extras, nothing else.

conda is not on the test machines, so the test does what conda does with the file's pip section: it asks
pip to resolve it (`pip install --dry-run`) against this environment. An environment.yml that names a
package pyproject.toml does not, a wrong extra, or a requirement this environment does not satisfy makes
pip report something to install, and the test fails with it.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dev dependency)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def environment():
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def pip_section(env):
    return next(entry["pip"] for entry in env["dependencies"] if isinstance(entry, dict))


def would_install(requirements):
    """What `pip install` of `requirements` (environment.yml's pip lines) would add to this environment."""
    args = [a for line in requirements for a in line.split(maxsplit=1)]   # "-e .[dev]" -> "-e", ".[dev]"
    report = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
                             *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return sorted(item["metadata"]["name"] for item in json.loads(report.stdout)["install"]
                  if item["metadata"]["name"] != "kimik3-lessons")


def test_environment_installs_the_package_with_its_dev_extra_and_nothing_else():
    assert pip_section(environment()) == ["-e .[dev]"]


def test_environment_resolves_to_the_environment_the_tests_run_in():
    assert would_install(pip_section(environment())) == []


def test_a_requirement_this_environment_lacks_would_be_installed():
    """The control: the same resolution reports a package that is not installed (`pip-install-test`)."""
    assert would_install(["pip-install-test"]) == ["pip-install-test"]


def test_environment_python_is_pyprojects():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    pythons = [d for d in environment()["dependencies"] if isinstance(d, str) and re.match(r"python\b", d)]
    assert pythons == [f"python{requires}"], (pythons, requires)


def pins(text):
    """{canonical name: version} of the `name==version` lines of a constraints file."""
    found = {}
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            found[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return found


def unpinned(installed, pinned):
    """The installed distributions (name -> version) constraints.txt does not pin at that version, torch
    and its CUDA libraries aside (TORCH_SPEC decides them), the course itself and the installers (pip,
    setuptools, wheel: a venv's own, which `pip freeze` does not list)."""
    skip = re.compile(r"^(torch|nvidia-.*|kimik3-lessons|pip|setuptools|wheel)$")
    return sorted(f"{name} {version} (constraints.txt: {pinned.get(name, 'absent')})"
                  for name, version in installed.items()
                  if not skip.match(name) and pinned.get(name) != version)


def test_constraints_pin_every_package_the_tests_run_with():
    """constraints.txt holds the exact versions `make test` runs with: every distribution of this environment
    at its installed version (`make constraints` rewrites it after an upgrade). A package upgraded or added
    without it fails here, named. setuptools' own copies of its dependencies (setuptools/_vendor, on
    sys.path once anything has imported setuptools) are not distributions of the environment."""
    from importlib import metadata
    installed = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version
                 for d in metadata.distributions() if "_vendor" not in Path(d.locate_file("")).parts}
    pinned = pins((ROOT / "constraints.txt").read_text())
    assert not unpinned(installed, pinned), "not pinned by constraints.txt: " + "; ".join(
        unpinned(installed, pinned))
    # a negative control: the same check fails on a package whose version moved
    assert unpinned({"numpy": "9.9.9"}, pinned) == [f"numpy 9.9.9 (constraints.txt: {pinned['numpy']})"]
