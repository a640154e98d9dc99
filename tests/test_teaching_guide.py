"""The teaching guide (docs/teaching.md) follows the course: a section for every notebook, every exercise
named in its lesson's section with its difficulty, a written question per lesson with its rubric, the class
plan listing every notebook, the run-time table exactly what `make times` last measured
(docs/notebook_times.json) for the notebooks that exist, and the lecturer's parts: prerequisites, the
setup class (the GPU lessons), grading (every exercise's points, the written questions', how the graders
grade), nbgrader on a JupyterHub, and every class's minutes."""

import importlib.util
import json
import re
import sys
from pathlib import Path

from kimik3_lessons import exercises

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import student_edition  # noqa: E402

GUIDE = (ROOT / "docs" / "teaching.md").read_text()
NOTEBOOKS = sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))


def lesson(name):
    """'05a_delta_rule.ipynb' -> '05a'."""
    return name.split("_")[0]


def sections():
    """{lesson: the text of its '## Lesson NN — ...' section}."""
    found = re.findall(r"^## Lesson (\w+) — (.*?)(?=^## )", GUIDE, flags=re.M | re.S)
    return dict(found)


def notebook_times():
    spec = importlib.util.spec_from_file_location("notebook_times", ROOT / "tools" / "notebook_times.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_section_per_notebook_in_course_order():
    assert list(sections()) == [lesson(name) for name in NOTEBOOKS]
    for name in NOTEBOOKS:
        heading = sections()[lesson(name)].splitlines()[0]
        assert f"`notebooks/{name}`" in heading, heading


def test_every_section_has_the_same_parts():
    parts = ["**Learning goals.**", "**The one idea to draw on the board.**",
             "**Misconceptions students bring, and the cell that dispels each.**", "**Exercises.**",
             "**Written question (", "**Rubric.**", "**What to skip in a short course.**"]
    for key, text in sections().items():
        positions = [text.find(part) for part in parts]
        assert -1 not in positions and positions == sorted(positions), (key, positions)


def test_every_exercise_is_in_its_lessons_section_with_its_name():
    text = sections()
    for exercise_id in exercises.all_ids():
        exercise = exercises.get(exercise_id)
        section = text[exercises.lesson_of(exercise_id)]
        exercise_part = section.split("**Exercises.**")[1].split("**Written question")[0]
        assert f"- {exercise_id} `{exercise.name}" in exercise_part, (exercise_id, exercise.name)
        entry = exercise_part.split(f"- {exercise_id} ")[1].split("\n- ")[0]
        assert f"difficulty {exercise.difficulty}" in entry, (exercise_id, exercise.difficulty, entry)


def test_the_class_plan_lists_every_notebook():
    plan = GUIDE.split("## Course plan")[1].split("## Lesson")[0]
    rows = re.findall(r"^\| \d+ \| (.*?) \|", plan, flags=re.M)
    listed = [re.match(r"(\w+) ", row)[1] for row in rows]
    assert listed == [lesson(name) for name in NOTEBOOKS]


def test_run_time_table_is_what_make_times_measured():
    tool = notebook_times()
    times = json.loads(tool.TIMES.read_text())
    assert sorted(times["seconds"]) == NOTEBOOKS, "run `make times`: the notebooks changed since"
    assert all(seconds > 0 for seconds in times["seconds"].values())
    table = GUIDE.split(tool.START)[1].split(tool.END)[0]
    assert table.strip() == tool.table(times).strip(), "run `make times` (or tools/notebook_times.py)"


def part(title):
    """The text of the guide's '## title' section."""
    return GUIDE.split(f"\n## {title}\n")[1].split("\n## ")[0]


def test_the_lecturer_parts_come_before_the_plan():
    titles = ("How the course is handed out", "Prerequisites", "The first class: setup", "Grading",
              "Grading on a JupyterHub with nbgrader", "Course plan")
    order = [GUIDE.find(f"\n## {title}\n") for title in titles]
    assert -1 not in order and order == sorted(order), order


def test_the_setup_class_names_the_gpu_lessons_and_fills_its_time():
    setup = part("The first class: setup")
    gpu = [lesson(name) for name in NOTEBOOKS if "%%needs gpu" in (ROOT / "notebooks" / name).read_text()]
    assert ", ".join(gpu[:-1]) + f" and {gpu[-1]}" in " ".join(setup.split()), gpu
    assert sum(int(m) for m in re.findall(r"^\| (\d+) \|", setup, flags=re.M)) == 90
    for needed in ("Colab", "make lab", "make test", "on a Mac", "without a GPU"):
        assert needed.lower() in setup.lower(), needed


def test_grading_gives_every_exercise_its_difficulty_in_points():
    grading = part("Grading")
    ids = exercises.all_ids()
    rows = dict(re.findall(r"^  \| (\w+) \| (.*) \|$", grading, flags=re.M))
    for name in NOTEBOOKS:
        own = [i for i in ids if exercises.lesson_of(i) == lesson(name)]
        listed = ", ".join(f"{i} ({exercises.get(i).difficulty})" for i in own)
        total = sum(exercises.get(i).difficulty for i in own)
        assert rows.get(lesson(name)) == f"{listed} | {total}", (lesson(name), rows.get(lesson(name)))
    total = sum(exercises.get(i).difficulty for i in ids)
    written = sum(points for points, _, _ in student_edition.written_questions().values())
    said = " ".join(grading.split())
    assert f"{total} points for the {len(ids)} exercises" in said
    assert f"{written} for the {len(NOTEBOOKS)} written questions" in said, written
    for needed in ("make nbgrader", "nbgrader generate_assignment", "nbgrader autograde",
                   "python -m kimik3_lessons grade", "HINTS=0", "KIMIK3_HINTS", "partial", "refused",
                   "REPO=", "COURSE=", "--lessons", "feedback"):
        assert needed in grading, needed
    assert "make student REPO=owner/name" in " ".join(part("How the course is handed out").split())


def test_every_class_has_its_minutes():
    for key, text in sections().items():
        found = re.search(r"\*\*Minutes \(90\)\.\*\* (.*?)(?:\n\n|\Z)", text, flags=re.S)
        assert found, key
        minutes = " ".join(found[1].split())
        assert sum(int(m) for m in re.findall(r"(\d+) min\b", minutes)) == 90, (key, minutes)
        for exercise_id in (i for i in exercises.all_ids() if exercises.lesson_of(i) == key):
            assert exercise_id in minutes, (key, exercise_id)


def test_every_lesson_has_a_written_question_and_its_rubric():
    """One entry per lesson (a new lesson adds its own): the question the editions insert, and a rubric
    whose points add up to the question's."""
    questions = student_edition.written_questions()
    assert sorted(questions) == sorted(sections()), sorted(set(sections()) ^ set(questions))
    for key, (points, question, rubric) in questions.items():
        assert question.startswith("**Written question") and re.search(r"\b(Explain|Derive)\b", question), key
        given = [int(n) for n in re.findall(r"^- (\d) points?:", rubric, flags=re.M)]
        assert given and sum(given) == points, (key, given, points)


def test_the_hub_section_covers_the_round_trip():
    hub = " ".join(part("Grading on a JupyterHub with nbgrader").split())
    for needed in ("c.Exchange.root", "COURSE=", "course id", "nbgrader release_assignment",
                   "nbgrader fetch_assignment", "nbgrader submit", "nbgrader collect", "nbgrader autograde",
                   "nbgrader generate_feedback", "nbgrader release_feedback", "--duedate", "late",
                   "download.pytorch.org/whl/cpu", "sixty", "make test-hub", "REPO=", "HINTS=0"):
        assert needed in hub, needed
    assert re.search(r"\d+(\.\d)? s of CPU time a notebook", hub), "the measured grading time per notebook"
