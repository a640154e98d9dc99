"""Export the course as an nbgrader course directory: `make nbgrader` (`python tools/nbgrader_export.py OUT`).

nbgrader (https://nbgrader.readthedocs.io) is the grading tool universities run with JupyterHub. The
export writes, for every lesson, `OUT/source/<lesson>/<lesson>.ipynb`: the lesson's notebook (outputs and
widget state cleared, badges and install lines opening the class's repository with `--repo`) in which

- every exercise's stub holds the solution (from solutions/) between nbgrader's solution markers,
  `### BEGIN SOLUTION` / `### END SOLUTION`: `nbgrader generate_assignment` puts back the stub's
  `raise NotImplementedError("your code here")` in the release students get;
- every exercise's check cell is an autograded cell worth the exercise's difficulty in points: it prints the
  check's verdict and ends with the points earned, which nbgrader takes as partial credit;
- the lesson's written question (docs/teaching.md) follows its exercises: the question, read-only, and a
  manually graded answer cell holding the rubric, which the release replaces by "YOUR ANSWER HERE";
- nothing gives an answer away: no hint, no listing of the module's version of an exercise's function, no
  word of the solutions (as in a graded student edition, tools/student_edition.py);

and `OUT/nbgrader_config.py`, unless one is there (yours is kept, course id and all): the course id
(`--course`), the stubs, the exchange and, for autograde, `kimik3_lessons.nbgrader_checks.IsolatedChecks` in
place of nbgrader's Execute: every exercise checked apart from the notebook, in a fresh process. Then, in
OUT:

    nbgrader generate_assignment 03_chunkwise     # release/03_chunkwise/03_chunkwise.ipynb for students
    nbgrader autograde 03_chunkwise               # grades submitted/<student>/03_chunkwise/*.ipynb

A source notebook is written again only if it is still what the last export wrote (a lesson you edited
is refused, by name); other files in OUT are never touched. The hub needs the package installed from the
class's repository, a graded student edition (`make student REPO=... HINTS=0`): docs/teaching.md, "Grading
on a JupyterHub". Standard library only.
"""

import argparse
import ast
import json
import re
import shutil
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import student_edition  # noqa: E402

STUB = 'raise NotImplementedError("your code here")'
CHECK = re.compile(r'^lab\.exercise\("([\w.]+)",\s*(\w+)\)\s*$')
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
COURSE = "kimik3-lessons"
PREPROCESSOR = "kimik3_lessons.nbgrader_checks.IsolatedChecks"
MANIFEST = ".kimik3-nbgrader.json"     # the source notebooks the export wrote, and their hashes

CONFIG = '''"""nbgrader's configuration for the kimik3-lessons course (tools/nbgrader_export.py wrote it; a
second export keeps this file as it is: edit it freely)."""

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = {course!r}
# The exchange folder on the hub (release, fetch, submit, collect go through it): shared by every user.
# c.Exchange.root = "/srv/nbgrader/exchange"
# What `generate_assignment` leaves where the solution was: the course's own stub; and in a written answer.
c.ClearSolutions.code_stub = {{"python": {stub!r}}}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# Autograde checks every exercise apart from the notebook, in a fresh process
# (kimik3_lessons.nbgrader_checks), in place of running the notebook in one kernel (nbgrader's Execute),
# where a cell could patch the checks.
# A cell's result is its points (partial credit). One exercise may run for `timeout` seconds.
c.Autograde.autograde_preprocessors = [
    {preprocessor!r},
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
c.IsolatedChecks.timeout = 300
# Late submissions (past an assignment's due date, `nbgrader db assignment add ... --duedate=...`): by
# default they lose nothing; "zero" gives them 0, or subclass LateSubmissionPlugin for a penalty per hour.
# c.AssignLatePenalties.plugin_class = "nbgrader.plugins.latesubmission.LateSubmissionPlugin"
# c.LateSubmissionPlugin.penalty_method = "zero"
'''

GRADED_CHECK = '''# Exercise {id}, {points} point{s}: graded on your `{name}` alone, apart from the rest
# of the notebook. This cell shows you the verdict now; its last line is the points it earns.
{hints}from kimik3_lessons import exercises

verdict = exercises.run("{id}", {name})
print(verdict.line)
exercises.points(exercises.get("{id}"), verdict.score)'''
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


def source_notebook(path, exercises, hints=False, root=ROOT, questions=None):
    """The nbgrader source of the lesson at `path` (a notebook dict): solutions between the markers,
    checks as autograded cells, the written question with its rubric, nothing that gives an answer away.
    `exercises`: {id: (function name, difficulty)}; `questions`: {lesson: (points, question, rubric)}."""
    nb = json.loads(Path(path).read_text())
    nb.get("metadata", {}).pop("widgets", None)
    lesson = Path(path).name.split("_")[0]
    student_edition.graded_notebook(nb, json.loads(Path(path).read_text()),
                                    student_edition.PHRASES["graded_intro"])
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
    questions = student_edition.written_questions(root) if questions is None else questions
    if lesson in questions:
        points, question, rubric = questions[lesson]
        student_edition.insert_question(nb, student_edition.question_cells(
            lesson, question, "", nbgrader=(points, f"Rubric ({points} points):\n\n{rubric}")))
    for cell in cells:
        if isinstance(cell["source"], str):
            cell["source"] = cell["source"].splitlines(keepends=True)
    return nb


def course_id(config):
    """The course id an nbgrader_config.py sets, or None."""
    found = re.search(r"^c\.CourseDirectory\.course_id\s*=\s*['\"]([^'\"]+)['\"]", config, re.M)
    return found[1] if found else None


def export(out, lessons=None, hints=False, root=ROOT, course=None, repo=None, log=print):
    """Write the nbgrader course directory into `out`; return {assignment: total points (exercises and
    written question)}. An existing nbgrader_config.py is kept; a source notebook is written again only if
    it is what the last export wrote. `repo`: the class's repository, which the badges and install lines
    open."""
    out = Path(out).resolve()
    if out == ROOT or out in ROOT.parents or ROOT in out.parents and out.parts[len(ROOT.parts)] != "build":
        raise ValueError(f"refusing to write the nbgrader course into {out}: use build/... or a folder "
                         f"outside the course")
    exercises = {i: (name, difficulty) for i, name, _, difficulty in student_edition.exercise_list(root)}
    questions = student_edition.written_questions(root)
    config = out / "nbgrader_config.py"
    if config.exists():
        text = config.read_text()
        kept = course_id(text)
        log(f"kept {config} (course id {kept!r}): edit it to change anything")
        if course and course != kept:
            log(f"  COURSE={course!r} ignored: the kept configuration says {kept!r}")
        if PREPROCESSOR not in text:
            log(f"  warning: it does not name {PREPROCESSOR}: autograde will run each submission in one "
                f"kernel, where a cell can patch the checks. Copy the autograde lines of a fresh export "
                f"(`make nbgrader NBGRADER=/tmp/x`) into it")
    _, old_repos = student_edition.repo_url.problems(root)
    manifest = out / MANIFEST
    before = json.loads(manifest.read_text()) if manifest.exists() else {}
    planned, totals = {}, {}
    for path in sorted((Path(root) / "notebooks").glob("*.ipynb")):
        lesson = path.name.split("_")[0]
        if lessons and lesson not in lessons:
            continue
        nb = source_notebook(path, exercises, hints=hints, root=root, questions=questions)
        text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        if repo:
            text = student_edition.repo_url.rewrite(text, student_edition.repo_url.normalize(repo), old_repos)
        planned[f"source/{path.stem}/{path.name}"] = text
        totals[path.stem] = sum(d for i, (_, d) in exercises.items() if i.split(".")[0] == lesson) + \
            (questions[lesson][0] if lesson in questions else 0)
    refused = [rel for rel in planned if (out / rel).exists()
               and student_edition._digest(out / rel) != before.get(rel)]
    if refused:
        raise ValueError(f"refusing to write {', '.join(refused[:5])} in {out}: changed since the last "
                         f"export (or not written by it). Move them away first, or export elsewhere")
    for rel, text in planned.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
        before[rel] = student_edition._digest(out / rel)
    manifest.write_text(json.dumps(before, indent=0, sort_keys=True) + "\n")
    if not config.exists():
        config.write_text(CONFIG.format(course=course or COURSE, stub=STUB, preprocessor=PREPROCESSOR))
    return totals


# What marks a folder as the lecturer's: an nbgrader course (its configuration, gradebook, released,
# submitted, autograded work, feedback, exchange) or a git repository. `make clean` keeps every such folder.
LECTURERS = ("nbgrader_config.py", "gradebook.db", "release", "submitted", "autograded", "feedback",
             "exchange", ".git")


def clean(build, log=print):
    """Remove what the Makefile built under `build`, but never a folder that holds an nbgrader course or a
    git repository (nor a folder above one): those are kept, and named. Returns the folders kept."""
    build = Path(build)
    kept = []

    def lecturers(folder):
        return any((folder / mark).exists() for mark in LECTURERS)

    def sweep(folder):
        if lecturers(folder):
            kept.append(folder)
            return
        for child in sorted(folder.iterdir()):
            if child.is_dir() and not child.is_symlink() and (lecturers(child) or any(
                    lecturers(d) for d in child.rglob("*") if d.is_dir() and not d.is_symlink())):
                sweep(child)
            elif child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        if folder != build and not any(folder.iterdir()):
            folder.rmdir()

    if build.is_dir():
        sweep(build)
    for folder in kept:
        log(f"kept {folder}: it holds an nbgrader course or a git repository (remove it yourself if you mean "
            f"to)")
    return kept


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default=str(ROOT / "build" / "nbgrader"))
    parser.add_argument("--lessons", nargs="*", help="only these lessons (e.g. 03 05b); default: all")
    parser.add_argument("--hints", choices=["0", "1"], default="0",
                        help="1: the graded checks show their hints (default 0: graded work, no hints)")
    parser.add_argument("--course", help=f"the course id of a new configuration (default {COURSE})")
    parser.add_argument("--repo", metavar="OWNER/NAME", help="the class repository the badges open")
    parser.add_argument("--clean", metavar="BUILD", help="empty BUILD but for its nbgrader courses and git "
                                                         "repositories (`make clean`), and exit")
    args = parser.parse_args(argv)
    if args.clean:
        clean(args.clean)
        return 0
    try:
        totals = export(args.out, args.lessons, hints=args.hints == "1", course=args.course, repo=args.repo)
    except ValueError as err:
        parser.error(str(err))
    for assignment, points in totals.items():
        print(f"{assignment}: {points} points")
    print(f"nbgrader course in {args.out}: {len(totals)} assignments (source/<lesson>/); "
          f"then `cd {args.out} && nbgrader generate_assignment <lesson>`")
    if not args.repo:
        print("  (the badges and install lines open the course's public repository, solutions included: pass "
              "REPO=owner/name, the class's repository)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
