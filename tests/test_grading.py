"""Grading a class: verdicts that only the graded function decides, the nbgrader export (`make nbgrader`)
round trip with its isolated autograde, and the CSV grader (`python -m kimik3_lessons grade`).

- Isolation: a student's function is taken out of the notebook with what it uses and checked alone in a
  fresh process. Three patches that fool a check run in the student's own process (the issue's: the checker
  replaced; the package's comparison replaced; torch patched by a helper the function uses) each fake a pass
  in-process, and earn nothing isolated; a call of the package's own version is refused by name.
- nbgrader: `generate_assignment` on the export, submissions of the release (the solutions; the release
  with a wrong answer in every other exercise; the issue's three-line patch with routing by
  `LatentMoE.route`; a half-right dispatch), `autograde` with the export's configuration, and the grades read
  back from the gradebook and `nbgrader export`: full marks, zero, the lost points, partial credit, nothing
  for a patch or a refused call; the written question is a manually graded cell. The CSV grader grades the
  same submissions and agrees exercise by exercise.
- The CSV grader finishes: a function past the time limit, an unreadable notebook and a lesson not handed in
  each give zero with the reason, the other work is graded; it resumes; it writes one feedback file per
  student, without hints; the maximum counts every assigned lesson.
"""

import csv
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from kimik3_lessons import exercises, grading
from kimik3_lessons.exercises import isolation

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import nbgrader_export  # noqa: E402

# The shortest lesson with an exercise of each kind of answer (a helper-using solution, a one-liner):
# Run All in about 5 s on a 2-core CPU (docs/notebook_times.json).
LESSON = "09a"
NOTEBOOK = next(p for p in sorted((ROOT / "notebooks").glob("*.ipynb")) if p.name.startswith(f"{LESSON}_"))
ASSIGNMENT = NOTEBOOK.stem
BIN = Path(sys.executable).parent
STUB = nbgrader_export.STUB


def nbgrader(course, *args):
    """Run nbgrader in the course folder; its log is the assertion message when it fails."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # it calls `alembic`
           "MPLBACKEND": "Agg", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=900)
    log = f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{log}"
    return done


def solutions_module(lesson):
    path = nbgrader_export.solution_file(lesson)
    spec = importlib.util.spec_from_file_location(f"solutions_{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def solved(source, lesson, name, as_name=None):
    """A stub cell's source with the body of solutions/<lesson>'s `as_name` (default `name`) in place of
    the stub's raise: what a student would have written."""
    body = nbgrader_export.function_region(nbgrader_export.solution_file(lesson), as_name or name)
    assert "    " + STUB in source, source
    return source.replace("    " + STUB, body)


def answered(release, answers, extra=()):
    """The release notebook with each exercise in `answers` {id: function name in solutions/} answered by
    that function's body, and `extra` [(after exercise id, cell source)] inserted after that exercise's
    solution cell."""
    nb = json.loads(release.read_text())
    for cell in list(nb["cells"]):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("solution") or cell["cell_type"] != "code":
            continue
        exercise_id = meta["grade_id"].removeprefix("solution_").replace("_", ".")
        if exercise_id in answers:
            cell["source"] = solved("".join(cell["source"]), LESSON, exercises.get(exercise_id).name,
                                    answers[exercise_id])
        for after, source in extra:
            if after == exercise_id:
                at = nb["cells"].index(cell) + 1
                nb["cells"].insert(at, nbformat.v4.new_code_cell(source).dict())
    return nb


# The issue's three-line patch: the checker replaced by one that always passes, the stubs untouched.
ISSUE_PATCH = ('import kimik3_lessons.exercises as ex\n'
               'ex.run = lambda i, fn=None, solution=False: ex.Result("pass", "✅ passed", 1.0)\n'
               'ex.runner.run = ex.run')
ROUTE_BY_PACKAGE = '''def sparse_moe(x, router_weight, score_bias, top_k, expert):
    import torch
    from kimik3_lessons import moe
    layer = moe.LatentMoE(moe.MoEConfig(x.shape[1], None, router_weight.shape[0], top_k, 0, 4)).double()
    with torch.no_grad():
        layer.router.weight.copy_(router_weight)
        layer.score_bias.copy_(score_bias)
    p, idx, _ = layer.route(x)
    y = torch.zeros_like(x)
    for e in range(router_weight.shape[0]):
        rows, slot = (idx == e).nonzero(as_tuple=True)
        if len(rows):
            y[rows] += p[rows, slot, None] * expert(e, x[rows])
    return y'''


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    totals = nbgrader_export.export(course, lessons=[LESSON], log=lambda *_: None)
    points, question, _ = nbgrader_export.student_edition.written_questions()[LESSON]
    assert totals == {ASSIGNMENT: sum(e.difficulty for e in grading.lesson_exercises(LESSON)) + points}
    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    release = course / "release" / ASSIGNMENT / NOTEBOOK.name
    ids = [e.id for e in grading.lesson_exercises(LESSON)]
    wrong = solutions_module(LESSON).WRONG_ANSWERS        # every other exercise: its first wrong answer
    mixed = {i: wrong[i][0].__name__ if n % 2 == 0 else exercises.get(i).name for n, i in enumerate(ids)}
    everything = {i: exercises.get(i).name for i in ids}
    submissions = {
        "sol": answered(release, everything),
        "mixed": answered(release, mixed),
        # the issue's patch, 09a.1 routed by the package, 09a.2 left as it was released
        "cheat": answered(release, {}, [(ids[0], ISSUE_PATCH)]),
        "half": answered(release, {**everything, ids[0]: "_sparse_moe_token_by_token"}),
    }
    for cell in submissions["cheat"]["cells"]:
        if "".join(cell["source"]).startswith("def sparse_moe("):
            cell["source"] = ROUTE_BY_PACKAGE
    for cell in submissions["sol"]["cells"]:         # a written answer
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == f"written_{LESSON}":
            cell["source"] = "The bias only chooses; the weights are the raw scores, renormalized."
    for student, nb in submissions.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / NOTEBOOK.name).write_text(json.dumps(nb, indent=1))
    started, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    nbgrader(course, "autograde", ASSIGNMENT, "--force")
    seconds = (time.perf_counter() - started) / len(submissions)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime) / len(submissions)
    print(f"nbgrader autograde: {seconds:.1f} s a notebook, {cpu:.1f} s of CPU ({len(submissions)} "
          f"notebooks, lesson {LESSON}, load average {os.getloadavg()[0]:.1f})")
    full = {i: exercises.get(i).difficulty for i in ids}
    expected = {"sol": full, "mixed": {i: (0 if n % 2 == 0 else full[i]) for n, i in enumerate(ids)},
                "cheat": {i: 0 for i in ids}, "half": {**full, ids[0]: full[ids[0]] / 2}}
    return course, expected, question


def test_the_source_holds_solutions_checks_and_the_written_question():
    lesson = grading.lesson_exercises(LESSON)
    nb = nbgrader_export.source_notebook(NOTEBOOK, {e.id: (e.name, e.difficulty) for e in lesson})
    graded = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    solved_cells = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")
                    and c["cell_type"] == "code"]
    points, question, rubric = nbgrader_export.student_edition.written_questions()[LESSON]
    assert [c["metadata"]["nbgrader"]["points"] for c in graded] == [e.difficulty for e in lesson] + [points]
    for cell, exercise in zip(solved_cells, lesson, strict=True):
        source = "".join(cell["source"])
        assert source.index(f"def {exercise.name}(") < source.index(nbgrader_export.BEGIN) \
            < source.index(nbgrader_export.END)
        assert "NotImplementedError" not in source
    for cell, exercise in zip(graded, lesson, strict=False):
        assert f'exercises.run("{exercise.id}", {exercise.name})' in "".join(cell["source"])
        assert 'os.environ["KIMIK3_HINTS"] = "0"' in "".join(cell["source"])       # graded: no hints
    written = graded[-1]
    assert written["cell_type"] == "markdown" and written["metadata"]["nbgrader"]["solution"]
    assert rubric.splitlines()[0] in "".join(written["source"])           # the grader's copy has the rubric
    text = json.dumps(nb)
    assert "solution=True" not in text and "The module's version" not in text
    assert not nb["metadata"].get("widgets") and all(c.get("outputs", []) == [] for c in nb["cells"])


def test_the_release_holds_no_answer(course):
    course, _, question = course
    release = (course / "release" / ASSIGNMENT / NOTEBOOK.name).read_text()
    _, _, rubric = nbgrader_export.student_edition.written_questions()[LESSON]
    assert question.splitlines()[0] in release and "YOUR ANSWER HERE" in release
    flat = " ".join("".join(c["source"]) for c in json.loads(release)["cells"]).split()
    for bullet in rubric.split("\n- "):
        assert " ".join(bullet.lstrip("- ").split()) not in " ".join(flat), bullet
    assert nbgrader_export.BEGIN not in release and "getsource(moe.LatentMoE.forward)" not in release


def test_nbgrader_gives_full_zero_partial_and_nothing_for_a_patch(course):
    from nbgrader.api import Gradebook
    course, expected, _ = course
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student, points in expected.items():
            notebook = gradebook.find_submission_notebook(NOTEBOOK.stem, ASSIGNMENT, student)
            scores = {g.name: g.score for g in notebook.grades if g.name.startswith("check_")}
            assert scores == {f"check_{i.replace('.', '_')}": p for i, p in points.items()}, student
            written = {g.name: g for g in notebook.grades}[f"written_{LESSON}"]
            assert written.needs_manual_grade == (student == "sol"), student    # an answer to grade
    nbgrader(course, "export", "--to", str(course / "grades.csv"))
    with open(course / "grades.csv") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    points, _, _ = nbgrader_export.student_edition.written_questions()[LESSON]
    maximum = sum(expected["sol"].values()) + points
    for student, scores in expected.items():
        assert float(rows[student]["score"]) == sum(scores.values()), student
        assert float(rows[student]["max_score"]) == maximum


def test_the_feedback_shows_the_verdicts(course):
    course, _, _ = course
    nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    html = (course / "feedback" / "cheat" / ASSIGNMENT / f"{NOTEBOOK.stem}.html").read_text()
    assert "refused" in html and "moe.LatentMoE.route" in html
    assert "Hint:" not in (course / "feedback" / "mixed" / ASSIGNMENT / f"{NOTEBOOK.stem}.html").read_text()


def test_the_csv_grader_agrees_with_nbgrader(course, tmp_path):
    course, expected, _ = course
    out = tmp_path / "grades.csv"
    assert grading.main([str(course / "submitted"), "-o", str(out), "--workers", "2"]) == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    ids = [e.id for e in grading.lesson_exercises(LESSON)]
    assert list(rows[0]) == ["student", *ids, f"{LESSON}.w", "total", "max", "notes"]
    assert {row["student"]: {i: float(row[i]) for i in ids} for row in rows} == expected
    assert all(int(row["max"]) == sum(expected["sol"].values()) for row in rows)
    feedback = (tmp_path / "grades-feedback" / "sol.md").read_text()
    assert "The bias only chooses" in feedback and "✅ exercise 09a.1" in feedback


# ---------------------------------------------------------------------------------------------------
# Isolation: the function alone, in a fresh process


def lesson_cells(lesson):
    nb = nbformat.read(next((ROOT / "notebooks").glob(f"{lesson}_*.ipynb")), as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def with_answer(cells, name, source, before=()):
    """The lesson's code cells with the stub of `name` replaced by `source`, `before` cells put first."""
    at = next(i for i, c in enumerate(cells) if c.startswith(f"def {name}("))
    check = next(i for i, c in enumerate(cells) if i > at and c.startswith("lab.exercise("))
    return [*cells[:at], *before, source, *cells[at + 1:check]]


ZEROS = '''def normalized_step(S, z, q_t, k_t, v_t):
    import torch
    return torch.zeros(q_t.shape[:-1] + v_t.shape[-1:], dtype=q_t.dtype), S, z'''
# Three ways to fake 02.1's pass in the student's own process, each with a wrong answer (zeros).
PATCHES = {
    "the checker replaced (the issue's patch)": ["import kimik3_lessons.exercises as ex\n"
                                                 "ex.run = lambda i, fn=None, solution=False: "
                                                 "ex.Result('pass', '✅ passed', 1.0)"],
    "the package's comparison replaced": ["import kimik3_lessons.exercises.compare as compare\n"
                                          "compare.relative_error = lambda ref, out: 0.0"],
    "torch patched by a helper the function uses": [
        "import torch\ndef scale():\n    torch.Tensor.abs = lambda self: self * 0\n    return 1.0"],
}


def in_process(cells):
    """02.1's verdict as a check in the student's own process gives it: the cells run, then the check."""
    code = "\n".join(isolation._python(c) for c in cells)
    code += "\nfrom kimik3_lessons import exercises\nprint(exercises.run('02.1', normalized_step).score)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.split()[-1])


@pytest.mark.parametrize("patch", list(PATCHES))
def test_a_patch_in_another_cell_fakes_a_pass_only_in_the_students_process(patch):
    cells = lesson_cells("02")
    source = ZEROS if "helper" not in patch else ZEROS.replace("return torch", "scale()\n    return torch")
    patched = with_answer(cells, "normalized_step", source, before=PATCHES[patch])
    in_the_kernel = [cells[0], *PATCHES[patch], source]      # the setup cell, the patch, the answer
    assert in_process(in_the_kernel) == 1.0, "negative control: the patch fools a check in the same process"
    result = isolation.check({"02.1": isolation.function_source(patched, "normalized_step")})["02.1"]
    assert result["score"] == 0 and result["status"] == "fail", result["line"]
    if "helper" in patch:
        assert "refused: your code changes torch" in result["line"], result["line"]


def test_the_function_is_taken_with_what_it_uses_and_nothing_else():
    cells = ["import torch\nfrom kimik3_lessons import linear_attention",
             "phi = linear_attention.elu_feature_map",
             "import kimik3_lessons.exercises as ex\nex.run = None",                 # a patch: not taken
             "def outer(a, b):\n    return a[..., :, None] * b[..., None, :]",
             "def normalized_step(S, z, q_t, k_t, v_t):\n    return helper(S, z, q_t, k_t, v_t)",
             "def helper(S, z, q_t, k_t, v_t):\n    fq, fk = phi(q_t), phi(k_t)\n    S = S + outer(fk, v_t)\n"
             "    z = z + fk\n"
             "    return (fq[..., None, :] @ S)[..., 0, :] / (fq * z).sum(-1, keepdim=True), S, z",
             "for i in range(3):\n    loop_bound = i"]
    source = isolation.function_source(cells, "normalized_step")
    assert [number for number, _, _ in source.statements] == [1, 2, 4, 5, 6], source
    result = isolation.check({"02.1": source})["02.1"]
    assert result["status"] == "pass", result["line"]
    uses_loop = [*cells, "def cache_tokens_per_state(config, with_z):\n    return loop_bound"]
    found = isolation.function_source(uses_loop, "cache_tokens_per_state")
    assert "`loop_bound`" in found.problem and "`for` block in cell 7" in found.problem, found
    for reach in ("import os as x", "import sys\nx = sys", "x = open", "x = torch.os",
                  "x = outer.__globals__", "x = getattr", "x = exec"):
        found = isolation.function_source([*cells, reach, "def f():\n    return x"], "f")
        assert found.problem.startswith("refused"), (reach, found)
    assert not isolation.function_source([*cells, "x = torch.ones(2)", "def f():\n    return x"], "f").problem
    assert "defines no `nothing`" in isolation.function_source(cells, "nothing").problem


def test_a_call_of_the_package_is_refused_by_name_in_isolation():
    """The issue's 02.1 done with linear_attention.triton_chunked: refused for the call, not a precision."""
    step = '''def normalized_step(S, z, q_t, k_t, v_t):
    import torch
    from kimik3_lessons import linear_attention as la
    phi = la.elu_feature_map
    state = torch.cat([S, z[..., None]], dim=-1)
    v1 = torch.cat([v_t, torch.ones_like(v_t[..., :1])], dim=-1)
    o, state = la.triton_chunked(phi(q_t)[:, :, None].float(), phi(k_t)[:, :, None].float(),
                                 v1[:, :, None].float(), initial_state=state.float())
    o = o[:, :, 0].double()
    return o[..., :-1] / o[..., -1:], state[..., :-1].double(), state[..., -1].double()'''
    result = isolation.check({"02.1": isolation.function_source([step], "normalized_step")})["02.1"]
    assert result["score"] == 0 and "`linear_attention.triton_chunked`" in result["line"], result["line"]
    assert "refused" in result["line"] and "precision" not in result["line"]


def test_a_child_that_dies_or_runs_too_long_costs_that_exercise_only():
    slow = isolation.Source("normalized_step", ((1, 1, "def normalized_step(*args):\n    while True:\n"
                                                      "        pass"),))
    dies = isolation.Source("cache_tokens_per_state", ((1, 1, "import os\ndef cache_tokens_per_state(c, z):\n"
                                                             "    os.kill(os.getpid(), 9)"),))
    cells = lesson_cells("02")
    stub = next(c for c in cells if c.startswith("def polynomial_features("))
    answer = solved(stub, "02", "polynomial_features")
    right = isolation.function_source(with_answer(cells, "polynomial_features", answer),
                                      "polynomial_features")
    started = time.perf_counter()
    results = isolation.check({"02.1": slow, "02.2": dies, "02.3": right}, timeout=8, workers=3)
    assert time.perf_counter() - started < 90
    assert "ran past the time limit of 8 s" in results["02.1"]["line"], results["02.1"]
    assert "process died" in results["02.2"]["line"], results["02.2"]
    assert results["02.3"]["status"] == "pass", results["02.3"]


# ---------------------------------------------------------------------------------------------------
# The CSV grader finishes, resumes, counts every assigned lesson, writes feedback


def student_notebook(lesson, answers):
    """The lesson's notebook with the stubs of `answers` {function name: source or the solution's name}."""
    nb = json.loads(next((ROOT / "notebooks").glob(f"{lesson}_*.ipynb")).read_text())
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        for name, answer in answers.items():
            if cell["cell_type"] == "code" and text.startswith(f"def {name}("):
                cell["source"] = answer if answer.startswith("def ") else solved(text, lesson, name, answer)
    return nb


def test_the_csv_grader_finishes_resumes_and_counts_every_lesson(tmp_path):
    folder = tmp_path / "submitted"
    names = {e.name: e.name for e in grading.lesson_exercises("02")}
    endless = "def normalized_step(*args):\n    while True:\n        pass"
    works = {"alice": {"02": names}, "bob": {"02": {**names, "normalized_step": endless}},
             "carol": {}, "dave": {"09a": {e.name: e.name for e in grading.lesson_exercises("09a")}}}
    for student, lessons in works.items():
        for lesson, answers in lessons.items():
            path = folder / student / lesson / next((ROOT / "notebooks").glob(f"{lesson}_*.ipynb")).name
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(student_notebook(lesson, answers)))
    (folder / "carol" / "02").mkdir(parents=True)
    (folder / "carol" / "02" / "02_linear_attention.ipynb").write_text('{"cells": [')      # cut short
    out = tmp_path / "grades.csv"
    said = []
    graded, lessons = grading.grade(folder, lessons=["02", "09a"], workers=2, timeout=8,
                                    feedback=tmp_path / "grades-feedback", log=said.append)
    grading.write_csv(graded, lessons, out)
    rows = {row["student"]: row for row in csv.DictReader(out.open())}
    six, three = 6, 3
    assert all(int(row["max"]) == six + three for row in rows.values())      # every assigned lesson
    assert float(rows["alice"]["total"]) == six and "09a: not handed in" in rows["alice"]["notes"]
    assert rows["bob"]["02.1"] == "0" and float(rows["bob"]["total"]) == six - 2
    assert "02.1: ran past the time limit of 8 s" in rows["bob"]["notes"]
    assert float(rows["carol"]["total"]) == 0 and "not a readable notebook" in rows["carol"]["notes"]
    assert float(rows["dave"]["total"]) == three and "02: not handed in" in rows["dave"]["notes"]
    # Resumes: nothing graded again
    said.clear()
    started = time.perf_counter()
    grading.grade(folder, lessons=["02", "09a"], workers=2, timeout=8, feedback=tmp_path / "grades-feedback",
                  log=said.append)
    assert time.perf_counter() - started < 30 and sum("graded before" in line for line in said) == 4, said
    written = grading.write_feedback(graded, lessons, tmp_path / "grades-feedback")
    assert sorted(p.stem for p in written) == sorted(works)
    bob = (tmp_path / "grades-feedback" / "bob.md").read_text()
    assert "ran past the time limit" in bob and "Hint:" not in bob and "✅ exercise 02.3" in bob


def test_grade_is_a_subcommand():
    done = subprocess.run([sys.executable, "-m", "kimik3_lessons", "grade", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "grades.csv" in done.stdout


# ---------------------------------------------------------------------------------------------------
# The export keeps the lecturer's files


def test_every_lesson_exports_with_its_solutions_points_and_question(tmp_path):
    totals = nbgrader_export.export(tmp_path / "course", log=lambda *_: None)
    questions = nbgrader_export.student_edition.written_questions()
    assert sorted(totals) == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert sum(totals.values()) == sum(exercises.get(i).difficulty for i in exercises.all_ids()) + \
        sum(points for points, _, _ in questions.values())
    config = (tmp_path / "course" / "nbgrader_config.py").read_text()
    assert nbgrader_export.PREPROCESSOR in config and "course_id = 'kimik3-lessons'" in config
    for path in sorted((tmp_path / "course" / "source").glob("*/*.ipynb")):
        nb = json.loads(path.read_text())
        assert any(c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "").startswith("written_")
                   for c in nb["cells"]), path.name
        for cell in nb["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader")
            if meta and meta["solution"] and cell["cell_type"] == "code":
                source = "".join(cell["source"])
                compile(source, f"{path.name}:{meta['grade_id']}", "exec")     # the solution in place parses
                assert source.count(nbgrader_export.BEGIN) == source.count(nbgrader_export.END) == 1


def test_a_second_export_keeps_the_configuration_and_the_edited_notebooks(tmp_path):
    course = tmp_path / "course"
    nbgrader_export.export(course, lessons=["09a"], course="ml-2027", repo="class-org/ml-2027",
                           log=lambda *_: None)
    config = course / "nbgrader_config.py"
    assert "course_id = 'ml-2027'" in config.read_text()
    source = course / "source" / ASSIGNMENT / NOTEBOOK.name
    assert "colab.research.google.com/github/class-org/ml-2027/" in source.read_text()
    assert "git+https://github.com/class-org/ml-2027" in source.read_text()
    config.write_text(config.read_text() + "\n# the lecturer's own line\n")
    said = []
    nbgrader_export.export(course, lessons=["09a"], course="other", log=said.append)
    text = config.read_text()
    assert text.endswith("# the lecturer's own line\n") and "course_id = 'ml-2027'" in text
    assert any("kept" in line for line in said) and any("'other' ignored" in line for line in said), said
    source.write_text(source.read_text().replace("Exercise 09a.1", "Exercise 09a.1 (edited)"))
    with pytest.raises(ValueError, match=f"{ASSIGNMENT}.ipynb"):
        nbgrader_export.export(course, lessons=["09a"], log=lambda *_: None)
    assert "(edited)" in source.read_text()


def test_make_clean_keeps_the_nbgrader_course_and_git_repositories(tmp_path):
    build = tmp_path / "build"
    for folder in ("site/html", "nbgrader/submitted/alice/09a", "nbgrader/feedback", "student/.git",
                   "deep/courses/ml/autograded"):
        (build / folder).mkdir(parents=True)
    (build / "nbgrader" / "gradebook.db").write_text("")
    (build / "site" / "index.html").write_text("")
    kept = nbgrader_export.clean(build, log=lambda *_: None)
    assert sorted(p.relative_to(build).as_posix() for p in kept) == ["deep/courses/ml", "nbgrader", "student"]
    assert (build / "nbgrader" / "gradebook.db").exists() and not (build / "site").exists()
    make = subprocess.run(["make", "-n", "clean"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "nbgrader_export.py --clean build" in make.stdout and "rm -rf build" not in make.stdout
