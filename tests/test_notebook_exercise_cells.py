"""The root conftest.py makes `pytest --nbval-lax` fail a lesson whose exercise check does not say "not
attempted yet": a solution that leaked into a lesson is caught (negative control), a stub passes."""

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = str(ROOT / "solutions" / "03_chunkwise.py")


def lesson(tmp_path, body):
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from kimik3_lessons import lab"), nbformat.v4.new_code_cell(body),
                nbformat.v4.new_code_cell('lab.exercise("03.1", chunked_loop)')]
    nbformat.write(nb, tmp_path / "lesson.ipynb")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
               "--nbval-current-env", "lesson.ipynb"]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("body, passes", [
    ("def chunked_loop(q, k, v, chunk_size, initial_state):\n    raise NotImplementedError", True),
    ("import importlib.util\n"
     f"spec = importlib.util.spec_from_file_location('s', {SOLUTION!r})\n"
     "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
     "chunked_loop = m.chunked_loop", False),                                        # the solution leaked
    ("def chunked_loop(q, k, v, chunk_size, initial_state):\n    return q, q", False),  # wrong: ❌, not ⬜
])
def test_an_exercise_cell_must_say_not_attempted(tmp_path, body, passes):
    done = lesson(tmp_path, body)
    assert (done.returncode == 0) == passes, done.stdout[-2000:]
    if not passes:
        assert "not attempted yet" in done.stdout
