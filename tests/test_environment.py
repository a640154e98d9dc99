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
