"""Grading a class: the nbgrader export (`make nbgrader`) round trip, and the CSV grader
(`python -m kimik3_lessons grade`), on one short lesson.

The round trip is nbgrader's own: `nbgrader generate_assignment` on the exported source, three submissions
of the release (the solutions; the release unchanged; a wrong answer in every other exercise, the
solution in the rest), `nbgrader autograde`, and the grades read back from the gradebook and from
`nbgrader export`: full marks, zero, and exactly the wrong exercises' points lost. The CSV grader then
grades the same three submissions, and must agree with nbgrader exercise by exercise.
"""

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kimik3_lessons import exercises, grading
from tools import nbgrader_export

ROOT = Path(__file__).resolve().parent.parent

# The shortest lesson with an exercise of each kind of answer (a helper-using solution, a one-liner):
# Run All in about 5 s on a 2-core CPU (docs/notebook_times.json).
LESSON = "09a"
NOTEBOOK = next(p for p in sorted((ROOT / "notebooks").glob("*.ipynb")) if p.name.startswith(f"{LESSON}_"))
ASSIGNMENT = NOTEBOOK.stem
BIN = Path(sys.executable).parent


def nbgrader(course, *args):
    """Run nbgrader in the course folder; its log is the assertion message when it fails."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # it calls `alembic`
           "MPLBACKEND": "Agg", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=900)
    log = f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{log}"
    return done


def solutions_module():
    path = nbgrader_export.solution_file(LESSON)
    spec = importlib.util.spec_from_file_location(f"solutions_{LESSON}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def answered(release, answers):
    """The release notebook with the solution cell of each exercise in `answers` {id: function name in
    solutions/} holding that function's body (what a student would have written)."""
    nb = json.loads(release.read_text())
    path = nbgrader_export.solution_file(LESSON)
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("solution"):
            continue
        exercise_id = meta["grade_id"].removeprefix("solution_").replace("_", ".")
        exercise = exercises.get(exercise_id)
        source = "".join(cell["source"])
        assert nbgrader_export.STUB in source, source            # the release holds the stub
        if exercise_id in answers:
            body = nbgrader_export.function_region(path, answers[exercise_id])
            cell["source"] = source.replace("    " + nbgrader_export.STUB, body)
            assert f"def {exercise.name}(" in cell["source"]
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    totals = nbgrader_export.export(course, lessons=[LESSON])
    assert totals == {ASSIGNMENT: sum(e.difficulty for e in grading.lesson_exercises(LESSON))}
    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    release = course / "release" / ASSIGNMENT / NOTEBOOK.name
    ids = [e.id for e in grading.lesson_exercises(LESSON)]
    wrong = solutions_module().WRONG_ANSWERS                 # every other exercise: its first wrong answer
    mixed = {i: wrong[i][0].__name__ if n % 2 == 0 else exercises.get(i).name for n, i in enumerate(ids)}
    submissions = {"sol": {i: exercises.get(i).name for i in ids}, "untouched": {}, "mixed": mixed}
    for student, answers in submissions.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / NOTEBOOK.name).write_text(json.dumps(answered(release, answers), indent=1))
    nbgrader(course, "autograde", ASSIGNMENT, "--force")
    expected = {"sol": {i: exercises.get(i).difficulty for i in ids}, "untouched": {i: 0 for i in ids},
                "mixed": {i: (0 if n % 2 == 0 else exercises.get(i).difficulty) for n, i in enumerate(ids)}}
    return course, expected


def test_the_source_holds_solutions_between_markers_and_graded_checks():
    nb = nbgrader_export.source_notebook(NOTEBOOK, {e.id: (e.name, e.difficulty)
                                                    for e in grading.lesson_exercises(LESSON)})
    graded = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    solved = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    lesson = grading.lesson_exercises(LESSON)
    assert [c["metadata"]["nbgrader"]["points"] for c in graded] == [e.difficulty for e in lesson]
    for cell, exercise in zip(solved, lesson, strict=True):
        source = "".join(cell["source"])
        assert source.index(f"def {exercise.name}(") < source.index(nbgrader_export.BEGIN) \
            < source.index(nbgrader_export.END)
        assert "NotImplementedError" not in source
    for cell, exercise in zip(graded, lesson, strict=True):
        assert f'exercises.run("{exercise.id}", {exercise.name})' in "".join(cell["source"])
        assert 'os.environ["KIMIK3_HINTS"] = "0"' in "".join(cell["source"])       # graded: no hints
    assert not nb["metadata"].get("widgets") and all(c.get("outputs", []) == [] for c in nb["cells"])


def test_nbgrader_gives_full_zero_and_exactly_the_lost_points(course):
    from nbgrader.api import Gradebook
    course, expected = course
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student, points in expected.items():
            notebook = gradebook.find_submission_notebook(NOTEBOOK.stem, ASSIGNMENT, student)
            scores = {g.name: g.score for g in notebook.grades}
            assert scores == {f"check_{i.replace('.', '_')}": p for i, p in points.items()}, student
    nbgrader(course, "export", "--to", str(course / "grades.csv"))
    with open(course / "grades.csv") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    maximum = sum(expected["sol"].values())
    for student, points in expected.items():
        assert float(rows[student]["score"]) == sum(points.values()), student
        assert float(rows[student]["max_score"]) == maximum


def test_the_csv_grader_agrees_with_nbgrader(course, tmp_path):
    course, expected = course
    out = tmp_path / "grades.csv"
    assert grading.main([str(course / "submitted"), "-o", str(out)]) == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    ids = [e.id for e in grading.lesson_exercises(LESSON)]
    assert list(rows[0]) == ["student", *ids, "total", "max"]
    assert {row["student"]: {i: int(row[i]) for i in ids} for row in rows} == expected
    assert all(int(row["max"]) == sum(expected["sol"].values()) for row in rows)


def test_the_csv_grader_runs_its_own_checks(tmp_path):
    """A check cell the student edited or deleted is the course's check again when graded."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    lesson = grading.lesson_exercises(LESSON)
    first, second = [i for i, c in enumerate(nb.cells) if c.source.startswith("lab.exercise(")]
    nb.cells[first].source = 'print("✅ exercise passed")'                     # edited: not the check
    del nb.cells[second]                                                      # deleted
    cells = grading.grading_notebook(nb, LESSON)
    assert list(cells) == [e.id for e in lesson]
    assert f'run("{lesson[1].id}", globals().get("{lesson[1].name}"))' in nb.cells[-1].source
    fresh = nbformat.read(NOTEBOOK, as_version=4)
    assert grading.lesson_of_notebook(tmp_path / "alice.ipynb", fresh) == LESSON   # from its check cells
    assert grading.lesson_of_notebook(tmp_path / "alice.ipynb", nb) is None        # no check left to tell
    # nbgrader's layout (a folder per student) and a flat folder of <student>.ipynb
    for name in ("submitted/bob/a/x.ipynb", "carol.ipynb"):
        (tmp_path / "in" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(NOTEBOOK, tmp_path / "in" / name)
    assert [s for s, _ in grading.submissions(tmp_path / "in" / "submitted")] == ["bob"]
    assert [s for s, _ in grading.submissions(tmp_path / "in")] == ["carol", "submitted"]


def test_grade_is_a_subcommand():
    done = subprocess.run([sys.executable, "-m", "kimik3_lessons", "grade", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "grades.csv" in done.stdout


def test_every_lesson_exports_with_its_solutions_and_points(tmp_path):
    totals = nbgrader_export.export(tmp_path / "course")
    assert sorted(totals) == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert sum(totals.values()) == sum(exercises.get(i).difficulty for i in exercises.all_ids())
    assert (tmp_path / "course" / "nbgrader_config.py").exists()
    for path in sorted((tmp_path / "course" / "source").glob("*/*.ipynb")):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader")
            if meta and meta["solution"]:
                source = "".join(cell["source"])
                compile(source, f"{path.name}:{meta['grade_id']}", "exec")     # the solution in place parses
                assert source.count(nbgrader_export.BEGIN) == source.count(nbgrader_export.END) == 1
