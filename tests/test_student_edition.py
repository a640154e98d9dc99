"""The student edition (`make student`): the course with outputs cleared and solutions left out, which a
student runs from the top and in which every exercise says "not attempted yet" until they write it.

`make test` builds it and runs the edition's own `make test` there (its unit tests, then its notebooks with
nbval, every cell in a fresh kernel importing the edition's own package; conftest.py fails an exercise
check that does not say "not attempted yet"). The tests here check what makes that run stand for the
course (the same code, nothing of the solutions) and what a class needs of it: no saved outputs or widget
state, badges and install lines that open the class's repository, hints off for graded work, and a README
whose numbers are the course's."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import repo_url  # noqa: E402
import student_edition  # noqa: E402

NOTEBOOKS = sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))
CLASS_REPO = "class-org/ml-2027"


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    out = tmp_path_factory.mktemp("edition") / "student"
    student_edition.build(out)
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """`make student REPO=class-org/ml-2027 HINTS=0`."""
    out = tmp_path_factory.mktemp("graded") / "student"
    student_edition.build(out, repo=CLASS_REPO, hints=False)
    return out


def code_cells(path):
    return [("".join(c["source"]), c) for c in json.loads(Path(path).read_text())["cells"]
            if c["cell_type"] == "code"]


def test_solutions_are_left_out_and_the_course_is_in(edition):
    assert not (edition / "solutions").exists() and not (edition / "docs" / "teaching.md").exists()
    for name in student_edition.LEAVE_OUT:
        assert not (edition / name).exists(), name
    for name in student_edition.TEACHER_TESTS:        # the list names the course's real files
        assert (ROOT / name).exists(), f"{name} is listed in TEACHER_TESTS but the course has no such test"
    for name in ("kimik3_lessons", "Makefile", "pyproject.toml", "figures", "tests", "conftest.py"):
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


def test_no_output_or_widget_state_anywhere(edition):
    course = [json.loads((ROOT / "notebooks" / name).read_text()) for name in NOTEBOOKS]
    assert any(nb["metadata"].get("widgets") for nb in course), "negative control: the course saves widgets"
    for path in edition.rglob("*.ipynb"):
        assert "application/vnd.jupyter.widget-state" not in path.read_text(), path
    for name in NOTEBOOKS:
        nb = json.loads((edition / "notebooks" / name).read_text())
        assert "widgets" not in nb["metadata"], name
        assert all(c.get("outputs", []) == [] and c.get("execution_count") is None for c in nb["cells"]), name


def test_badges_and_install_lines_open_the_class_repository(graded):
    problems, repos = repo_url.problems(graded)
    assert not problems and repos == [CLASS_REPO], problems
    _, course_repos = repo_url.problems(ROOT)
    for path in [graded / "README.md", *sorted((graded / "notebooks").glob("*.ipynb"))]:
        text = path.read_text()
        assert not any(f"github.com/{r}" in text or f"/github/{r}/" in text for r in course_repos), path
    readme = (graded / "README.md").read_text()
    assert f"git+https://github.com/{CLASS_REPO}" in readme
    badge = f"colab.research.google.com/github/{CLASS_REPO}/blob/main/notebooks/"
    assert all(badge + name in readme for name in NOTEBOOKS)


def hints_settings(root):
    """[edition.HINTS, hints_on() with KIMIK3_HINTS unset, set to 1, set to 0] as the package at `root`
    (imported in a fresh interpreter) says them."""
    code = "\n".join(["import os", "from kimik3_lessons import edition, exercises",
                      "out = [edition.HINTS, exercises.hints_on()]",
                      "for value in ('1', '0'):",
                      "    os.environ['KIMIK3_HINTS'] = value",
                      "    out.append(exercises.hints_on())",
                      "print(*out)"])
    environment = {k: v for k, v in os.environ.items() if k != "KIMIK3_HINTS"}
    environment["PYTHONPATH"] = str(root)
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=environment, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()[-4:]


def test_a_graded_edition_hides_the_hints(edition, graded):
    assert hints_settings(graded) == ["False", "False", "True", "False"]     # unset (as on Colab): no hints
    assert hints_settings(edition) == ["True", "True", "True", "False"]
    assert "no hints" in (graded / "README.md").read_text()
    assert "no hints" not in (edition / "README.md").read_text()


def test_the_readme_numbers_are_the_courses(edition):
    from kimik3_lessons import exercises
    readme = (edition / "README.md").read_text()
    registry = [(i, exercises.get(i).name, exercises.get(i).title, exercises.get(i).difficulty)
                for i in exercises.all_ids()]
    assert student_edition.exercise_list(ROOT) == registry          # the README's list, read without torch
    per_lesson = [sum(exercises.lesson_of(i) == n.split("_")[0] for i, *_ in registry) for n in NOTEBOOKS]
    assert f"ends with {min(per_lesson)}–{max(per_lesson)} exercises ({len(registry)} in all)" in readme
    times = json.loads((ROOT / "docs" / "notebook_times.json").read_text())
    rows = {n: next(line for line in readme.splitlines() if f"(notebooks/{n})" in line) for n in NOTEBOOKS}
    for i, name, _, difficulty in registry:
        (notebook,) = [n for n in NOTEBOOKS if n.startswith(exercises.lesson_of(i) + "_")]
        listed = rows[notebook].split(" | ")[1].split("<br>")
        assert f"{i} `{name}` {'★' * difficulty}" in listed, (i, listed)
    for notebook in NOTEBOOKS:
        seconds = int(times["seconds"][notebook])
        assert f"| {seconds // 60}:{seconds % 60:02d} |" in rows[notebook], notebook
    gpu = [n.split("_")[0] for n in NOTEBOOKS
           if "%%needs gpu" in (ROOT / "notebooks" / n).read_text()]
    assert ", ".join(gpu[:-1]) + f" and {gpu[-1]}" in " ".join(readme.split())
    for part in ("## On Colab", "Runtime > Run all", "macOS", "no macOS wheels", "make test", "make lab"):
        assert part in readme, part


def make_dry_run(folder, *args):
    """What `make test` in `folder` would run (a recursive make is echoed, not run)."""
    done = subprocess.run(["make", "-n", "-C", str(folder), "test", "MAKE=echo make", *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_course_runs_the_editions_own_make_test(edition):
    """`make test` in the course runs the teacher's tests, then the edition's `make test` in the edition; in
    the edition, `make test` is its unit tests and nbval over its notebooks (no solutions needed)."""
    course = make_dry_run(ROOT, "STAMP=")
    assert "student_edition.py --teacher-tests" in course and "tools/student_edition.py" in course
    assert re.search(r"make.* -C \S*student\S* test", course)
    own = make_dry_run(edition, "STAMP=", f"BIN={Path(sys.executable).parent}")
    assert re.search(r"pytest -q -n \d+ tests/", own) and "--nbval-lax" in own and "notebooks/" in own
    assert "student_edition" not in own and "solutions" not in own
    kept = {f"tests/{path.name}" for path in (edition / "tests").glob("*.py")}
    assert kept and not set(student_edition.TEACHER_TESTS) & kept


# ---------------------------------------------------------------------------------------------------
# A graded edition holds no answer


def string_constants(path):
    """Every string constant of a Python file, as the interpreter joins it (implicit concatenation and the
    literal parts of f-strings)."""
    import ast
    return [n.value for n in ast.walk(ast.parse(Path(path).read_text()))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def hint_texts():
    """Every hint the course's checks can give, as the literal pieces of its text (20 characters or more):
    the arguments of every `hint(...)` call in kimik3_lessons/exercises."""
    import ast
    found = []
    for path in sorted((ROOT / "kimik3_lessons" / "exercises").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "hint":
                for arg in node.args:
                    for piece in ast.walk(arg):
                        if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
                            found += [part.strip() for part in re.split(r"[{}]", piece.value)
                                      if len(part.strip()) >= 20]
    return found


def text_files(root):
    for path in sorted(Path(root).rglob("*")):
        if path.is_file() and path.suffix in (".py", ".ipynb", ".md", ".txt", ".toml", ".yml", ".json", ""):
            yield path, path.read_text(errors="ignore")


def test_a_graded_edition_has_no_hint_text(edition, graded):
    hints = hint_texts()
    assert len(hints) > 100, len(hints)
    def held(root):
        """The hint pieces found in the edition at `root`: in its Python files' strings, in its other text."""
        found = set()
        for path, text in text_files(root):
            texts = string_constants(path) if path.suffix == ".py" else [text]
            found |= {h for h in hints for t in texts if h in t}
        return found
    assert held(edition) == set(hints), "negative control: every hint is in an edition with hints"
    assert not held(graded), sorted(held(graded))[:3]


def test_a_graded_edition_lists_no_answer_and_no_line_of_the_solutions(edition, graded):
    listed = []
    for name in NOTEBOOKS:
        for root, is_graded in ((edition, False), (graded, True)):
            nb = json.loads((root / "notebooks" / name).read_text())
            sources = ["".join(c["source"]) for c in nb["cells"]]
            first = next(i for i, s in enumerate(sources) if re.search(r"^def \w+\(", s, re.M) and
                         "raise NotImplementedError" in s)
            after = [s for s in sources[first:] if "getsource(" in s or s.startswith("**The module's")]
            text = "\n".join(sources)
            if is_graded:
                assert not after and "solution=True" not in text and "and a hint" not in text, name
            else:
                listed.append(name) if after or "solution=True" in text else None
    assert len(listed) >= 8, f"negative control: the lessons with hints list answers ({listed})"
    readme = (graded / "README.md").read_text()
    assert "KIMIK3_HINTS" not in readme and "## Handing in your work" in readme
    nb = (graded / "notebooks" / next(n for n in NOTEBOOKS if n.startswith("09a"))).read_text()
    assert "with what differs (no hint: this is graded work)" in nb


def test_a_graded_edition_names_only_the_class_repository(graded):
    _, course_repos = repo_url.problems(ROOT)
    for path, text in text_files(graded):
        assert not any(repo in text for repo in course_repos), path


def test_every_lesson_asks_its_written_question_without_the_rubric(edition, graded):
    questions = student_edition.written_questions()
    assert sorted(questions) == sorted(name.split("_")[0] for name in NOTEBOOKS)
    for root in (edition, graded):
        for name in NOTEBOOKS:
            cells = json.loads((root / "notebooks" / name).read_text())["cells"]
            lesson = name.split("_")[0]
            (ask,) = [c for c in cells if c.get("metadata", {}).get("kimik3", {}).get("question") == lesson]
            (reply,) = [c for c in cells if c.get("metadata", {}).get("kimik3", {}).get("written") == lesson]
            assert cells.index(reply) == cells.index(ask) + 1
            assert "".join(ask["source"]) == questions[lesson][1]
            checks = [i for i, c in enumerate(cells) if "".join(c["source"]).startswith("lab.exercise(")]
            assert cells.index(ask) > max(checks), name
            flat = " ".join(json.dumps(cells).split())
            for bullet in questions[lesson][2].split("\n- "):
                assert " ".join(bullet.lstrip("- ").split()) not in flat, (name, bullet)


# ---------------------------------------------------------------------------------------------------
# Nothing of the lecturer's is ever deleted


def test_the_edition_is_written_only_where_nothing_else_is(tmp_path):
    clone = tmp_path / "class-clone"
    (clone / ".git").mkdir(parents=True)
    (clone / "syllabus.md").write_text("week 1")
    for out in (clone, ROOT, ROOT.parent, ROOT / "notebooks"):
        with pytest.raises(ValueError, match="refusing"):
            student_edition.build(out)
    assert (clone / "syllabus.md").read_text() == "week 1" and (clone / ".git").is_dir()
    cli = subprocess.run([sys.executable, str(ROOT / "tools" / "student_edition.py"), str(clone)],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode != 0 and "not empty" in cli.stderr and "syllabus.md" in cli.stderr


def test_a_rebuild_replaces_its_own_files_and_keeps_the_lecturers(tmp_path):
    out = tmp_path / "class"
    student_edition.build(out)
    (out / ".git").mkdir()
    (out / "syllabus.md").write_text("week 1")
    student_edition.build(out, hints=False)                       # its own files replaced
    assert (out / "syllabus.md").read_text() == "week 1" and (out / ".git").is_dir()
    assert "HINTS = False" in (out / "kimik3_lessons" / "edition.py").read_text()
    readme = out / "README.md"
    readme.write_text(readme.read_text() + "\nour office hours\n")
    with pytest.raises(ValueError, match="README.md changed since"):
        student_edition.build(out)
    assert readme.read_text().endswith("our office hours\n")
