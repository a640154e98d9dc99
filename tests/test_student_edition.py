"""The student edition (`make student`): the course with outputs cleared and solutions left out, which a
student runs from the top and in which every exercise says "not attempted yet" until they write it.

`make test` builds it and runs its notebooks with nbval (every cell, in a fresh kernel, importing the
edition's own package; conftest.py fails an exercise check that does not say "not attempted yet"). The
tests here check what makes that run stand for the course: the same code, nothing of the solutions."""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import student_edition  # noqa: E402

NOTEBOOKS = sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    out = tmp_path_factory.mktemp("edition") / "student"
    student_edition.build(out)
    return out


def code_cells(path):
    return [("".join(c["source"]), c) for c in json.loads(Path(path).read_text())["cells"]
            if c["cell_type"] == "code"]


def test_solutions_are_left_out_and_the_course_is_in(edition):
    assert not (edition / "solutions").exists() and not (edition / "docs").exists()
    assert not (edition / "tests" / "test_exercises.py").exists()
    for name in ("kimik3_lessons", "Makefile", "pyproject.toml", "figures", "tests"):
        assert (edition / name).exists(), name
    readme = (edition / "README.md").read_text()
    assert "make lab" in readme and "not attempted yet" in readme
    assert sorted(p.name for p in (edition / "notebooks").glob("*.ipynb")) == NOTEBOOKS
    assert all(f"notebooks/{name}" in readme for name in NOTEBOOKS)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_outputs_are_cleared_and_the_code_is_the_courses(edition, name):
    student, course = code_cells(edition / "notebooks" / name), code_cells(ROOT / "notebooks" / name)
    assert [source for source, _ in student] == [source for source, _ in course]
    assert all(cell["outputs"] == [] and cell["execution_count"] is None for _, cell in student)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_exercise_is_a_stub_with_a_check(edition, name):
    from kimik3_lessons import exercises
    sources = [source for source, _ in code_cells(edition / "notebooks" / name)]
    checked = re.findall(r'lab\.exercise\("([\w.]+)",\s*(\w+)\)', "\n".join(sources))
    lesson = name.split("_")[0]
    assert {i for i, _ in checked} == {i for i in exercises.all_ids() if exercises.lesson_of(i) == lesson}
    for exercise_id, function in checked:
        assert exercises.get(exercise_id).name == function
        (stub,) = [s for s in sources if re.search(rf"^def {function}\(", s, re.M)]
        body = stub.split(f"def {function}(", 1)[1]
        assert "raise NotImplementedError" in body, f"{name}: {function} is not a stub"
