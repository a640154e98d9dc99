"""The exercise kit: every check says "not attempted" for the stub, rejects plausible wrong answers and
accepts the solution. Solutions and wrong answers live in solutions/NN_slug.py (WRONG_ANSWERS)."""

import importlib.util

import pytest

from kimik3_lessons import exercises
from kimik3_lessons.exercises import Wrong, expect_close

IDS = exercises.all_ids()


def solutions_module(exercise_id):
    lesson = exercises.lesson_of(exercise_id)
    (path,) = sorted(exercises.solutions_dir().glob(f"{lesson}_*.py"))
    spec = importlib.util.spec_from_file_location(f"solutions_{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stub(*args, **kwargs):
    raise NotImplementedError("your code here")


def test_every_lesson_has_two_to_four_exercises_one_of_them_its_mechanism():
    from collections import Counter
    from pathlib import Path
    lessons = {path.name.split("_")[0] for path in Path("notebooks").glob("*.ipynb")}
    assert lessons, "no notebooks found"
    per_lesson = Counter(exercises.lesson_of(i) for i in IDS)
    assert set(per_lesson) == lessons, (set(per_lesson) ^ lessons)
    assert all(2 <= n <= 4 for n in per_lesson.values()), per_lesson
    mechanism = {exercises.lesson_of(i) for i in IDS if exercises.get(i).difficulty >= 2}
    assert mechanism == lessons, lessons - mechanism


@pytest.mark.parametrize("exercise_id", IDS)
def test_the_stub_is_not_attempted(exercise_id):
    result = exercises.run(exercise_id, stub)
    assert result.status == "todo" and "not attempted yet" in result.line, result.line


@pytest.mark.parametrize("exercise_id", IDS)
def test_the_solution_passes(exercise_id):
    result = exercises.run(exercise_id, solution=True)
    assert result.status == "pass" and result.line.startswith("✅"), result.line


@pytest.mark.parametrize("exercise_id", IDS)
def test_plausible_wrong_answers_fail(exercise_id):
    wrong = getattr(solutions_module(exercise_id), "WRONG_ANSWERS", {}).get(exercise_id, [])
    assert wrong, f"solutions file for {exercise_id} lists no WRONG_ANSWERS to prove the check rejects them"
    for fn in wrong:
        result = exercises.run(exercise_id, fn)
        assert result.status == "fail" and result.line.startswith("❌"), (fn.__name__, result.line)


def test_an_error_in_the_students_code_is_a_verdict_not_a_crash():
    def broken(*args, **kwargs):
        return 1 / 0
    result = exercises.run(IDS[0], broken)
    assert result.status == "fail" and "ZeroDivisionError" in result.line


def test_expect_close_names_the_first_wrong_row():
    import torch
    ref = torch.arange(12.0).reshape(4, 3)
    out = ref.clone()
    out[2:] += 1.0
    with pytest.raises(Wrong, match="from row 2 on"):
        expect_close("o", ref, out, rtol=1e-6, row_dim=0)
    with pytest.raises(Wrong, match=r"shape \[4, 2\]"):
        expect_close("o", ref, ref[:, :2])
    assert expect_close("o", ref, ref.clone()) == 0.0
