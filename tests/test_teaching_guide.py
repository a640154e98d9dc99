"""The teaching guide (docs/teaching.md) follows the course: a section for every notebook, every exercise
named in its lesson's section with its difficulty, the class plan listing every notebook, and the run-time
table exactly what `make times` last measured (docs/notebook_times.json) for the notebooks that exist."""

import importlib.util
import json
import re
from pathlib import Path

from kimik3_lessons import exercises

ROOT = Path(__file__).resolve().parent.parent
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
             "**What to skip in a short course.**"]
    for key, text in sections().items():
        positions = [text.find(part) for part in parts]
        assert -1 not in positions and positions == sorted(positions), (key, positions)


def test_every_exercise_is_in_its_lessons_section_with_its_name():
    text = sections()
    for exercise_id in exercises.all_ids():
        exercise = exercises.get(exercise_id)
        section = text[exercises.lesson_of(exercise_id)]
        exercise_part = section.split("**Exercises.**")[1].split("**What to skip")[0]
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
