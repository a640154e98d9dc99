"""Every lesson, opened in JupyterLab in headless Chromium, runs from the Run menu without an error, a
failed check or a warning, and its sliders redraw what they drive (see labdriver.py for each check)."""

from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_the_course_has_notebooks():
    assert NOTEBOOKS, "no notebooks/*.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_all_in_jupyterlab(path, lab_server, check):
    report = check(lab_server, path)
    if report.problems:
        pytest.fail(report.summary(), pytrace=False)
