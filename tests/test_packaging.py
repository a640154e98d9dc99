"""A non-editable install (Colab's first cell: `pip install git+...`) ships only the packages pyproject.toml
lists: every subpackage of kimik3_lessons must be among them, or its lesson fails to import there."""

import pkgutil
from pathlib import Path

import tomllib

import kimik3_lessons

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_installed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"kimik3_lessons"} | {info.name for info in pkgutil.walk_packages(kimik3_lessons.__path__,
                                                                                 prefix="kimik3_lessons.")
                                  if info.ispkg}
    assert found <= listed, f"pyproject.toml's [tool.setuptools] packages lacks {sorted(found - listed)}"
