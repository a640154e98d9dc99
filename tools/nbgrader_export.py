"""Export the course as an nbgrader course directory: `make nbgrader` (`python -m tools.nbgrader_export OUT`).

nbgrader (https://nbgrader.readthedocs.io) is the grading tool universities run with JupyterHub. The
export writes, for every lesson, `OUT/source/<lesson>/<lesson>.ipynb`: the lesson's notebook (outputs and
widget state cleared) in which

- every exercise's stub holds the solution (from solutions/) between nbgrader's solution markers,
  `### BEGIN SOLUTION` / `### END SOLUTION`: `nbgrader generate_assignment` puts back the stub's
  `raise NotImplementedError("your code here")` in the release students get;
- every exercise's check cell is an autograded cell worth the exercise's difficulty in points: it runs
  the course's check and fails (an AssertionError) unless the verdict is ✅, so nbgrader gives full marks
  for a right answer and none for a wrong one or a stub (the notebook check prints a ❌ and never raises;
  the graded cell asserts on that verdict);

and nbgrader_config.py in OUT, with the stub text and a cell time limit. Then, in OUT:

    nbgrader generate_assignment 03_chunkwise     # release/03_chunkwise/03_chunkwise.ipynb for students
    nbgrader autograde 03_chunkwise               # grades submitted/<student>/03_chunkwise/*.ipynb

`--hints 0` makes the graded checks show no hints. The students' machines (or the JupyterHub image) need
the package installed (`pip install "kimik3-lessons[ref] @ git+https://github.com/<owner>/<name>"`).
Standard library only.
"""

import argparse
import ast
import json
import re
import shutil
import sys
import textwrap
from pathlib import Path

from tools import student_edition

ROOT = Path(__file__).resolve().parent.parent

STUB = 'raise NotImplementedError("your code here")'
CHECK = re.compile(r'^lab\.exercise\("([\w.]+)",\s*(\w+)\)\s*$')
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"

CONFIG = '''"""nbgrader's configuration for the kimik3-lessons course (tools/nbgrader_export.py wrote it)."""

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = "kimik3-lessons"
# What `generate_assignment` leaves where the solution was: the course's own stub.
c.ClearSolutions.code_stub = {{"python": {stub!r}}}
# A lesson's slowest cell takes well under a minute on a 2-core CPU; a student's loop may take longer.
c.Execute.timeout = 600
c.Execute.interrupt_on_timeout = True
'''

GRADED_CHECK = '''# Exercise {id}, {points} point{s}: the lesson's check, graded; it passes only on a ✅.
{hints}from kimik3_lessons import exercises

verdict = exercises.run("{id}", {name})
print(verdict.line)
assert verdict.status == "pass", verdict.line'''
HINTS_OFF = 'import os\n\nos.environ["KIMIK3_HINTS"] = "0"    # graded: a ❌ says what differs, no hint\n'


def nbgrader_metadata(grade_id, solution=False, points=None):
    meta = {"grade": points is not None, "grade_id": grade_id, "locked": points is not None,
            "schema_version": 3, "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def _used_names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def function_region(path, function, indent="    "):
    """The body of `function` in the Python file at `path`, ready to stand inside another function of the
    same signature: the module-level imports, helpers and constants it uses (recursively) first, then its
    statements (its docstring dropped), indented by `indent`."""
    source = Path(path).read_text()
    tree = ast.parse(source)
    top = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                top[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in _used_names(target):
                    top[name] = node
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    needed, queue = [], [n for stmt in body for n in _used_names(stmt)]
    while queue:
        name = queue.pop()
        node = top.get(name)
        if node is None or node is fn or node in needed:
            continue
        needed.append(node)
        queue.extend(_used_names(node) - {name})
    needed.sort(key=lambda n: n.lineno)
    lines = source.splitlines()

    def segment(first, last):
        return textwrap.dedent("\n".join(lines[first - 1:last]))

    parts = [segment(n.lineno if not getattr(n, "decorator_list", None) else n.decorator_list[0].lineno,
                     n.end_lineno) for n in needed]
    parts.append(segment(body[0].lineno, body[-1].end_lineno))
    return textwrap.indent("\n\n".join(parts), indent)


def solution_file(lesson, root=ROOT):
    (path,) = sorted((Path(root) / "solutions").glob(f"{lesson}_*.py"))
    return path


def with_solution(cell_source, function, region):
    """The stub cell `def function(...): ... raise NotImplementedError(...)` with `region` in place of the
    raise, between the solution markers."""
    lines = cell_source.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {function}("))
    (stub,) = [i for i, line in enumerate(lines)
               if i > start and line.strip().startswith("raise NotImplementedError")]
    indent = lines[stub][:len(lines[stub]) - len(lines[stub].lstrip())]
    block = [indent + BEGIN, textwrap.indent(textwrap.dedent(region), indent), indent + END]
    return "\n".join(lines[:stub] + block + lines[stub + 1:])


def source_notebook(path, exercises, hints=False, root=ROOT):
    """The nbgrader source of the lesson at `path` (a notebook dict): solutions between the markers,
    checks as autograded cells. `exercises`: {id: (function name, difficulty)}."""
    nb = json.loads(Path(path).read_text())
    nb.get("metadata", {}).pop("widgets", None)
    lesson = Path(path).name.split("_")[0]
    cells = nb["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cell.get("metadata", {}).pop("execution", None)
        source = "".join(cell["source"])
        found = CHECK.match(source) if cell["cell_type"] == "code" else None
        if not found:
            continue
        exercise_id, name = found[1], found[2]
        function, points = exercises[exercise_id]
        if name != function:
            raise ValueError(f"{path}: the check of {exercise_id} passes `{name}`, not `{function}`")
        (stub_index,) = [i for i in range(index) if cells[i]["cell_type"] == "code"
                         and re.search(rf"^def {function}\(", "".join(cells[i]["source"]), re.M)]
        stub = cells[stub_index]
        region = function_region(solution_file(lesson, root), function)
        stub["source"] = with_solution("".join(stub["source"]), function, region)
        tag = exercise_id.replace(".", "_")
        stub.setdefault("metadata", {})["nbgrader"] = nbgrader_metadata(f"solution_{tag}", solution=True)
        cell["source"] = GRADED_CHECK.format(id=exercise_id, name=function, points=points,
                                             s="" if points == 1 else "s", hints="" if hints else HINTS_OFF)
        cell.setdefault("metadata", {})["nbgrader"] = nbgrader_metadata(f"check_{tag}", points=points)
    for cell in cells:
        if isinstance(cell["source"], str):
            cell["source"] = cell["source"].splitlines(keepends=True)
    return nb


def export(out, lessons=None, hints=False, root=ROOT):
    """Write the nbgrader course directory into `out`; return {assignment: total points}."""
    out = Path(out).resolve()
    if out == ROOT or ROOT in out.parents and out.parts[len(ROOT.parts)] not in ("build",):
        raise ValueError(f"refusing to write the nbgrader course inside the course at {out}: use build/...")
    exercises = {i: (name, difficulty) for i, name, _, difficulty in student_edition.exercise_list(root)}
    (out / "source").mkdir(parents=True, exist_ok=True)
    (out / "nbgrader_config.py").write_text(CONFIG.format(stub=STUB))
    totals = {}
    for path in sorted((Path(root) / "notebooks").glob("*.ipynb")):
        lesson = path.name.split("_")[0]
        if lessons and lesson not in lessons:
            continue
        assignment = out / "source" / path.stem
        if assignment.exists():
            shutil.rmtree(assignment)
        assignment.mkdir(parents=True)
        nb = source_notebook(path, exercises, hints=hints, root=root)
        (assignment / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        totals[path.stem] = sum(d for i, (_, d) in exercises.items() if i.split(".")[0] == lesson)
    return totals


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default=str(ROOT / "build" / "nbgrader"))
    parser.add_argument("--lessons", nargs="*", help="only these lessons (e.g. 03 05b); default: all")
    parser.add_argument("--hints", choices=["0", "1"], default="0",
                        help="1: the graded checks show their hints (default 0: graded work, no hints)")
    args = parser.parse_args(argv)
    try:
        totals = export(args.out, args.lessons, hints=args.hints == "1")
    except ValueError as err:
        parser.error(str(err))
    for assignment, points in totals.items():
        print(f"{assignment}: {points} points")
    print(f"nbgrader course in {args.out}: {len(totals)} assignments (source/<lesson>/); "
          f"then `cd {args.out} && nbgrader generate_assignment <lesson>`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
