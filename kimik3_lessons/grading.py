"""Grade submitted lessons without nbgrader: `python -m kimik3_lessons grade SUBMISSIONS/ [-o grades.csv]`.

SUBMISSIONS holds the students' notebooks: one folder per student (`SUBMISSIONS/<student>/**/*.ipynb`,
nbgrader's `submitted/` layout works as it is), or notebooks directly in it, named after the student
(`SUBMISSIONS/<student>.ipynb`). Each notebook is a lesson (05a_delta_rule.ipynb: the lesson is read
from the file name, else from its check cells) and is run top to bottom in a fresh kernel, with every
exercise's check cell replaced by the course's own check (a check the student edited counts for nothing)
and a check added at the end for an exercise whose check cell was deleted. An error in one cell does not
stop the run. An exercise earns its difficulty in points when its check says ✅, else 0.

The CSV has one row per student and a column per exercise (the points earned; empty where the student
handed in no notebook of that lesson), then the total and the maximum. It runs the students' code: run it
where that is safe (a container, a throw-away account), as nbgrader's autograder is.
"""

import contextlib
import csv
import os
import re
import sys
import tempfile
from pathlib import Path

MARK = "KIMIK3-GRADE"
CHECK = re.compile(r'(?:lab\.exercise|exercises\.run)\("([\w.]+)",\s*(\w+)')
LESSON = re.compile(r"^(\d\d[a-z]?)_")

GRADING_CELL = '''from kimik3_lessons import exercises as _grading
_verdict = _grading.run("{id}", globals().get("{name}"))
print("{mark}", "{id}", _verdict.status)'''


def lesson_exercises(lesson):
    """The registered exercises of one lesson ('05a'), in order."""
    from kimik3_lessons import exercises
    return [exercises.get(i) for i in exercises.all_ids() if exercises.lesson_of(i) == lesson]


def lesson_of_notebook(path, nb):
    found = LESSON.match(Path(path).name)
    if found:
        return found[1]
    for cell in nb.cells:
        check = CHECK.search(cell.source) if cell.cell_type == "code" else None
        if check:
            return check[1].split(".")[0]
    return None


def grading_notebook(nb, lesson):
    """`nb` with every check cell of the lesson replaced by the grading cell, and one appended for an
    exercise that has none; returns {exercise id: the grading cell}."""
    import nbformat
    cells = {}
    for exercise in lesson_exercises(lesson):
        for cell in nb.cells:
            found = CHECK.search(cell.source) if cell.cell_type == "code" else None
            if found and found[1] == exercise.id:
                cell.source = GRADING_CELL.format(id=exercise.id, name=exercise.name, mark=MARK)
                cell.outputs = []
                cells[exercise.id] = cell
        if exercise.id not in cells:
            cell = nbformat.v4.new_code_cell(GRADING_CELL.format(id=exercise.id, name=exercise.name,
                                                                 mark=MARK))
            nb.cells.append(cell)
            cells[exercise.id] = cell
    return cells


@contextlib.contextmanager
def _environment(**values):
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def grade_notebook(path, timeout=600):
    """{exercise id: "pass" | "fail" | "todo" | "error"} for the submitted notebook at `path`; {} when
    it is no lesson of the course."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    lesson = lesson_of_notebook(path, nb)
    if lesson is None or not lesson_exercises(lesson):
        return {}
    cells = grading_notebook(nb, lesson)
    with tempfile.TemporaryDirectory() as figures, \
            _environment(KIMIK3_FIGURES=figures, MPLBACKEND="Agg", KIMIK3_HINTS="0"):
        NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(Path(path).resolve().parent)}}).execute()
    statuses = {}
    for exercise_id, cell in cells.items():
        text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
        found = re.search(rf"^{MARK} {re.escape(exercise_id)} (\w+)$", text, re.M)
        statuses[exercise_id] = found[1] if found else "error"
    return statuses


def submissions(folder):
    """[(student, notebook path)]: a folder per student, or `<student>.ipynb` directly in `folder`."""
    folder = Path(folder)
    found = []
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        relative = path.relative_to(folder)
        found.append((relative.parts[0] if len(relative.parts) > 1 else path.stem, path))
    return found


def grade(folder, timeout=600, log=print):
    """({student: {exercise id: points}}, [the exercises graded]) for every notebook under `folder`."""
    from kimik3_lessons import exercises
    points, graded = {}, set()
    for student, path in submissions(folder):
        statuses = grade_notebook(path, timeout=timeout)
        row = points.setdefault(student, {})
        for exercise_id, status in statuses.items():
            row[exercise_id] = exercises.get(exercise_id).difficulty if status == "pass" else 0
            graded.add(exercise_id)
        log(f"{student}: {path.name}: " + (", ".join(f"{i} {s}" for i, s in statuses.items()) or "no lesson"))
    return points, [exercises.get(i) for i in sorted(graded)]


def write_csv(points, graded, out):
    """One row per student: the points of every exercise graded (empty: not handed in), total, maximum."""
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", *[e.id for e in graded], "total", "max"])
        for student in sorted(points):
            row = points[student]
            handed_in = [e for e in graded if e.id in row]
            writer.writerow([student, *[row.get(e.id, "") for e in graded], sum(row.values()),
                             sum(e.difficulty for e in handed_in)])


def main(argv):
    import argparse
    parser = argparse.ArgumentParser(prog="python -m kimik3_lessons grade",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", type=Path, help="a folder of submitted notebooks")
    parser.add_argument("-o", "--output", type=Path, default=Path("grades.csv"), help="the CSV to write")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one cell may run")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    points, graded = grade(args.submissions, timeout=args.timeout)
    write_csv(points, graded, args.output)
    print(f"{len(points)} student(s), {len(graded)} exercise(s): {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
