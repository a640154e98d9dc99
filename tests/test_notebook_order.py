"""`make test` runs the notebooks on two workers, longest first (conftest.py), so that neither waits alone on
lessons 11 and 13 at the end."""

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conftest)


def test_notebooks_run_longest_first_with_their_cells_in_order():
    seconds = json.loads(conftest.TIMES.read_text())["seconds"]
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert {p.name for p in notebooks} <= set(seconds), "run `make times`: a lesson has no time"
    items = [SimpleNamespace(path=p, cell=i) for p in notebooks for i in range(3)]
    items.append(SimpleNamespace(path=ROOT / "tests" / "test_notebook_order.py", cell=0))
    conftest.pytest_collection_modifyitems(items)
    order = list(dict.fromkeys(item.path.name for item in items if item.path.suffix == ".ipynb"))
    assert order == sorted(order, key=lambda name: -seconds[name]), order
    assert order[0] == max(seconds, key=seconds.get)
    for name in order:                                  # each notebook's cells stay in their order
        assert [item.cell for item in items if item.path.name == name] == [0, 1, 2]
