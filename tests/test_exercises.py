"""The exercise kit: every check says "not attempted" for the stub, rejects plausible wrong answers and
accepts the solution. Solutions and wrong answers live in solutions/NN_slug.py (WRONG_ANSWERS). A check
never raises: an answer of the wrong dtype, None, a wrong signature or an error in the student's code each
give one ❌ line; KIMIK3_HINTS=0 drops the hints."""

import importlib.util
import random

import pytest
import torch

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


def wrong_answers(exercise_id):
    return getattr(solutions_module(exercise_id), "WRONG_ANSWERS", {}).get(exercise_id, [])


@pytest.mark.parametrize("exercise_id", IDS)
def test_plausible_wrong_answers_fail(exercise_id):
    """Every wrong answer gets ❌ from the check itself (not from the catch-all for answers it cannot use),
    with a hint; with KIMIK3_HINTS=0 the same verdicts carry no hint."""
    wrong = wrong_answers(exercise_id)
    assert len(wrong) >= 3, f"solutions for {exercise_id} list {len(wrong)} WRONG_ANSWERS; want 3 or more"
    lines = {}
    for fn in wrong:
        result = exercises.run(exercise_id, fn)
        assert result.status == "fail" and result.line.startswith("❌"), (fn.__name__, result.line)
        assert "could not use" not in result.line and "\n" not in result.line, (fn.__name__, result.line)
        lines[fn] = result.line
    hinted = [fn.__name__ for fn, line in lines.items() if "Hint:" in line]
    assert hinted, f"no verdict of {exercise_id} gives a hint"


def test_with_hints_off_a_wrong_answer_gets_no_hint(monkeypatch):
    """KIMIK3_HINTS=0 (a graded run): the ❌ lines keep what differs and drop the hints, also the named
    mistakes. Two wrong answers per exercise (every kind of verdict the kit builds occurs among them)."""
    monkeypatch.setenv("KIMIK3_HINTS", "0")
    for exercise_id in IDS:
        for fn in wrong_answers(exercise_id)[:2]:
            result = exercises.run(exercise_id, fn)
            assert result.status == "fail", (exercise_id, fn.__name__, result.line)
            assert "Hint" not in result.line, (exercise_id, fn.__name__, result.line)
    monkeypatch.setenv("KIMIK3_HINTS", "1")
    result = exercises.run("03.2", wrong_answers("03.2")[0])
    assert "Hint:" in result.line, result.line


def test_the_package_references_called_by_name_fail_as_such():
    """The answers the issue named: the package's own reference for the very thing asked, or a method the
    text rules out, get ❌ for the method although their numbers are right."""
    named = {"01.3": "_parameters_by_building_the_model", "02.1": "_step_by_the_module",
             "03.1": "_chunked_loop_by_recurrence", "03.2": "_chunk_states_with_loop",
             "04.1": "_delta_recall_by_store", "04.2": "_householder_write_by_delta_write",
             "05a.1": "_forward_substitution_by_inverse", "05a.2": "_wy_form_by_module",
             "05b.1": "_state_pass_by_module", "05b.2": "_prefill_then_decode_by_recurrent",
             "05b.3": "_forward_substitution_masked_row_indexing", "06.1": "_decay_mask_exp_before_mask",
             "07a.1": "_scores_exp_before_mask", "08.1": "_absorbed_head_explicit",
             "10.1": "_depth_mix_by_module", "11.1": "_layer_kinds_always_final_mla",
             "11.2": "_crossover_tokens_ceil", "11.3": "_generate_without_cache",
             "12.1": "_mqar_layout_by_module", "12.2": "_query_distances_by_module"}
    says = {"03.2": "loops over them", "05a.1": "linalg_inv", "05b.3": "select", "06.1": "gradient",
            "07a.1": "gradient", "08.1": "builds a tensor of shape", "11.1": "final_mla = False",
            "11.2": "kda_per_cycle", "11.3": "the cache was not used"}
    for exercise_id, name in named.items():
        module = solutions_module(exercise_id)
        fn = getattr(module, name)
        assert fn in module.WRONG_ANSWERS[exercise_id], (exercise_id, name)
        line = exercises.run(exercise_id, fn).line
        assert line.startswith("❌") and says.get(exercise_id, "the package's own version") in line, line


def test_ceil_crossover_fails_on_every_seed(monkeypatch):
    fn = solutions_module("11.2")._crossover_tokens_ceil
    for seed in range(8):
        monkeypatch.setattr(exercises, "seed_of", lambda exercise_id, seed=seed: seed)
        assert exercises.run("11.2", fn).status == "fail", seed


def test_a_check_is_seeded_and_leaves_the_random_state_alone():
    torch.manual_seed(1)
    random.seed(1)
    expected = (torch.rand(3), random.random())
    torch.manual_seed(1)
    random.seed(1)
    first = exercises.run("02.1", wrong_answers("02.1")[0]).line
    assert torch.equal(torch.rand(3), expected[0]) and random.random() == expected[1]
    assert exercises.run("02.1", wrong_answers("02.1")[0]).line == first


def _as_float32(fn):
    def float32_answer(*args, **kwargs):
        out = fn(*args, **kwargs)
        cast = lambda x: x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x  # noqa: E731
        return tuple(cast(x) for x in out) if isinstance(out, tuple) else cast(out)
    return float32_answer


@pytest.mark.parametrize("exercise_id", IDS)
def test_odd_answers_give_one_line_and_never_raise(exercise_id):
    def returns_none(*args, **kwargs):
        return None

    def takes_nothing():
        return 0

    def broken(*args, **kwargs):
        return 1 / 0        # the line the verdict must show

    for fn in (returns_none, takes_nothing, broken):
        result = exercises.run(exercise_id, fn)
        assert result.status == "fail" and result.line.startswith("❌"), result.line
        assert "\n" not in result.line, result.line
    assert "cannot take the arguments" in exercises.run(exercise_id, takes_nothing).line
    line = exercises.run(exercise_id, broken).line
    assert f"ZeroDivisionError at {__file__}, line" in line and "return 1 / 0" in line, line
    result = exercises.run(exercise_id, _as_float32(exercises.load_solution(exercise_id)))
    assert result.status in ("pass", "fail") and "\n" not in result.line, result.line


@pytest.mark.parametrize("exercise_id", ["01.1", "08.2", "04.1", "05b.2"])
def test_a_float32_answer_to_a_float64_exercise_fails_with_one_line(exercise_id):
    result = exercises.run(exercise_id, _as_float32(exercises.load_solution(exercise_id)))
    assert result.status == "fail" and "float32" in result.line, result.line


def test_a_not_implemented_error_inside_torch_is_not_the_stub():
    def calls_something_not_implemented(*args, **kwargs):
        raise_it()

    def raise_it():
        raise NotImplementedError("an op without a CPU kernel")
    result = exercises.run("02.3", calls_something_not_implemented)
    assert result.status == "fail" and "NotImplementedError at" in result.line, result.line


def test_the_kit_does_not_import_lab():
    """lab.exercise imports the kit; the kit (and nothing it imports from the package) imports lab back."""
    import ast
    from pathlib import Path
    package = Path(exercises.__file__).parents[1]
    seen, todo = set(), [Path(exercises.__file__), *Path(exercises.__file__).parent.glob("lesson*.py")]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [f"{node.module}.{a.name}" for a in node.names] + [node.module or ""]
                     if isinstance(node, ast.ImportFrom) and node.col_offset == 0 else [])
            for name in names:
                if name.startswith("kimik3_lessons."):
                    assert name.split(".")[1] != "lab", f"{path.name} imports {name}"
                    module = package / f"{name.split('.')[1]}.py"
                    todo += [module] if module.exists() else []


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
