"""For `pytest --nbval-lax notebooks/`: the notebooks run longest first, and an exercise check cell must say
"not attempted yet".

nbval runs every cell and fails on errors; `--nbval-lax` compares no outputs. A course run as committed
(or as the student edition) has every exercise still a stub, so its check cell, `lab.exercise(...)`, must
print the ⬜ "not attempted yet" line: a ✅ would mean a solution leaked into the lesson, a ❌ a check
that rejects the stub for the wrong reason.
"""

import json
from pathlib import Path

import pytest

TIMES = Path(__file__).parent / "docs" / "notebook_times.json"      # each lesson's Run All (`make times`)


def pytest_collection_modifyitems(items):
    """The notebooks longest first, each one's cells in order, so that two workers (`--dist loadfile`) finish
    together instead of one waiting on the longest lessons, which come last in the course; other tests keep
    their order."""
    seconds = json.loads(TIMES.read_text())["seconds"] if TIMES.exists() else {}
    items.sort(key=lambda item: -seconds.get(item.path.name, 0.0) if item.path.suffix == ".ipynb" else 0.0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cell = getattr(item, "cell", None)             # nbval's items carry their notebook cell
    if report.when != "call" or not report.passed or cell is None:
        return
    if not cell.source.startswith("lab.exercise("):
        return
    text = "".join(o.get("text", "") for o in (getattr(item, "test_outputs", None) or [])
                   if o.get("output_type") == "stream")
    if "solution=True" not in cell.source and not (text.startswith("⬜") and "not attempted yet" in text):
        report.outcome = "failed"
        report.longrepr = f"{cell.source!r} should print '⬜ ... not attempted yet' for the stub, " \
                          f"printed {text!r}"
