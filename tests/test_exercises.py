"""The exercise kit: every check says "not attempted" for the stub, rejects plausible wrong answers and
accepts the solution. Solutions and wrong answers live in solutions/NN_slug.py (WRONG_ANSWERS). A check
never raises: an answer of the wrong dtype, None, a wrong signature or an error in the student's code each
give one ❌ line; KIMIK3_HINTS=0 drops the hints. A check scores the parts it declares (partial credit); a
call of a package function that computes what the exercise asks for is refused, whatever else is right,
and every forbid list is walked against the package's public functions."""

import functools
import importlib
import importlib.util
import inspect
import pkgutil
import random
import sys

import pytest
import torch

import kimik3_lessons
from kimik3_lessons import exercises
from kimik3_lessons.exercises import Wrong, expect_close, registry, runner

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
    with a hint, and less than the exercise's points; with KIMIK3_HINTS=0 the same verdicts carry no hint."""
    wrong = wrong_answers(exercise_id)
    assert len(wrong) >= 3, f"solutions for {exercise_id} list {len(wrong)} WRONG_ANSWERS; want 3 or more"
    lines = {}
    for fn in wrong:
        result = exercises.run(exercise_id, fn)
        assert result.status in ("fail", "partial") and result.score < 1, (fn.__name__, result.line)
        assert result.line.startswith("❌"), (fn.__name__, result.line)
        assert "could not use" not in result.line and "\n" not in result.line, (fn.__name__, result.line)
        lines[fn] = result.line
    hinted = [fn.__name__ for fn, line in lines.items() if "Hint:" in line]
    assert hinted, f"no verdict of {exercise_id} gives a hint"


def _in_place_by_add_(A):
    """05a.1 with an in-place method on a row view instead of an assignment."""
    X = -A.clone()
    for i in range(1, A.shape[-1]):
        X[..., i, :i].add_((X[..., i, None, :i] @ X[..., :i, :i])[..., 0, :])
    return X + torch.eye(A.shape[-1], dtype=A.dtype)


def _in_place_by_index_put(A):
    """05a.1 with rows written through an index tensor (index_put_)."""
    X = -A.clone()
    for i in range(1, A.shape[-1]):
        X[..., i, torch.arange(i)] = X[..., i, :i] + (X[..., i, None, :i] @ X[..., :i, :i])[..., 0, :]
    return X + torch.eye(A.shape[-1], dtype=A.dtype)


def _absorbed_by_matmuls(q_n, q_r, W_uk, W_uv, c, k_r):
    """08.1 written as row-vector products: the same absorbed form, other ops."""
    scores = (c @ (q_n @ W_uk) + (k_r * q_r).sum(-1)) * (q_n.numel() + q_r.numel()) ** -0.5
    return (torch.softmax(scores, 0) @ c) @ W_uv.T


def _situ_by_clamp_and_copysign(g, u, beta=4.0, linear_beta=25.0):
    """09b.2 from exp, abs, clamp and copysign only."""
    def tanh(x):
        a = x.abs()
        E = torch.exp(-2 * a)
        series = x * (1 - x * x * (1 / 3 - x * x * 2 / 15))
        return torch.where(a < 0.125, series, torch.copysign((1 - E) / (1 + E), x))

    def sigmoid(x):
        E = torch.exp(-x.abs())
        return torch.where(x >= 0, torch.ones_like(x), E) / (1 + E)

    up = u if linear_beta is None else linear_beta * tanh(u / linear_beta)
    return beta * tanh(g / beta) * sigmoid(g) * up


@pytest.mark.parametrize("exercise_id, fn", [("05a.1", _in_place_by_add_), ("05a.1", _in_place_by_index_put),
                                             ("08.1", _absorbed_by_matmuls),
                                             ("09b.2", _situ_by_clamp_and_copysign)])
def test_other_right_methods_pass(exercise_id, fn):
    """The checks that watch the method accept it written other ways: an in-place row write by any op, the
    absorbed form as other products, SiTU from exp with other arithmetic."""
    result = exercises.run(exercise_id, fn)
    assert result.status == "pass", result.line


def test_with_hints_off_a_wrong_answer_gets_no_hint(monkeypatch):
    """KIMIK3_HINTS=0 (a graded run): the ❌ lines keep what differs and drop the hints, also the named
    mistakes. Two wrong answers per exercise (every kind of verdict the kit builds occurs among them)."""
    monkeypatch.setenv("KIMIK3_HINTS", "0")
    for exercise_id in IDS:
        for fn in wrong_answers(exercise_id)[:2]:
            result = exercises.run(exercise_id, fn)
            assert result.status in ("fail", "partial"), (exercise_id, fn.__name__, result.line)
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
        monkeypatch.setattr(runner, "seed_of", lambda exercise_id, seed=seed: seed)
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
        assert result.status == "fail" and result.score == 0 and result.line.startswith("❌"), result.line
        assert "\n" not in result.line, result.line
    assert "cannot take the arguments" in exercises.run(exercise_id, takes_nothing).line
    line = exercises.run(exercise_id, broken).line
    assert f"ZeroDivisionError at {__file__}, line" in line and "return 1 / 0" in line, line
    result = exercises.run(exercise_id, _as_float32(exercises.load_solution(exercise_id)))
    assert result.status in ("pass", "partial", "fail") and "\n" not in result.line, result.line


@pytest.mark.parametrize("exercise_id", ["01.1", "08.2", "04.1", "05b.2"])
def test_a_float32_answer_to_a_float64_exercise_fails_with_one_line(exercise_id):
    result = exercises.run(exercise_id, _as_float32(exercises.load_solution(exercise_id)))
    assert result.status in ("fail", "partial") and result.score < 1 and "float32" in result.line, result.line


def test_a_not_implemented_error_inside_torch_is_not_the_stub():
    def calls_something_not_implemented(*args, **kwargs):
        raise_it()

    def raise_it():
        raise NotImplementedError("an op without a CPU kernel")
    result = exercises.run("02.3", calls_something_not_implemented)
    assert result.status == "fail" and "NotImplementedError at" in result.line, result.line


def test_no_import_cycle_between_the_kit_and_lab():
    """The kit reuses lab.relative_error, so it imports lab; lab imports the kit only inside lab.exercise,
    when a check runs: at import time the two never wait for each other (either may be imported first, in a
    fresh interpreter)."""
    import ast
    import subprocess
    from pathlib import Path
    lab = Path(exercises.__file__).parents[1] / "lab.py"
    top = [node for node in ast.parse(lab.read_text()).body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in top for a in n.names]
    names += [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
    assert not [n for n in names if "exercises" in n], names
    for first in ("kimik3_lessons.exercises", "kimik3_lessons.lab"):
        code = (f"import {first}; from kimik3_lessons import lab, exercises; "
                f"print(exercises.run('02.2').status)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0 and done.stdout.split()[-1] == "todo", done.stderr[-2000:]


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


# ---------------------------------------------------------------------------------------------------
# Partial credit: a check scores the parts it declares


def test_every_declared_part_is_scored_by_the_solution():
    for exercise_id in IDS:
        ex = exercises.get(exercise_id)
        result = exercises.run(exercise_id, solution=True)
        names = ex.parts or (ex.name,)
        assert result.parts == tuple((n, True) for n in names), (exercise_id, result.parts)


def _with_z_doubled(fn):
    def normalized_step(S, z, q_t, k_t, v_t):
        o_t, S, z = fn(S, z, q_t, k_t, v_t)
        return o_t, S, 2 * z
    return normalized_step


def test_a_half_right_answer_earns_its_right_parts():
    """02.1 with z doubled (the read divides by phi(q) . z, so o is off too): S alone is right, 1 of 3
    parts; 09a.1 run token by token: y right, the dispatch not, 1 of 2 parts = 1 point; 01.2 without the
    cache: right tokens, 1 of 2."""
    result = exercises.run("02.1", _with_z_doubled(exercises.load_solution("02.1")))
    assert result.status == "partial" and result.parts == (("o", False), ("the final S", True),
                                                           ("the final z", False)), result.line
    assert exercises.points(exercises.get("02.1"), result.score) == 0.67
    assert "1 of 3 parts right (0.67 of 2 points: the final S)" in result.line, result.line
    by_token = solutions_module("09a.1")._sparse_moe_token_by_token
    result = exercises.run("09a.1", by_token)
    assert result.status == "partial" and result.score == 0.5, result.line
    assert "expert" in result.line and "called" in result.line, result.line
    result = exercises.run("01.2", solutions_module("01.2")._generate_without_cache)
    assert result.parts == (("the tokens", True), ("the cache used", False)), result.line


# ---------------------------------------------------------------------------------------------------
# Refused: the package's own version of what an exercise asks


def _calls_then_solves(target, solution):
    """The solution, after a call of `target` (with placeholder arguments, its error swallowed): the numbers
    are the solution's, the call is what must be refused."""
    params = [p for p in inspect.signature(target).parameters.values()
              if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

    @functools.wraps(solution)
    def answer(*args, **kwargs):
        try:
            target(*[None] * len(params))
        except Exception:
            pass
        return solution(*args, **kwargs)
    return answer


FORBIDDEN = sorted({(i, dotted) for i in IDS for dotted in exercises.get(i).forbid})


@pytest.mark.parametrize("exercise_id, dotted", FORBIDDEN)
def test_every_forbidden_function_is_refused_by_name(exercise_id, dotted):
    obj = registry.package_object(dotted)
    assert callable(obj), dotted
    target = obj.__init__ if isinstance(obj, type) else obj
    result = exercises.run(exercise_id, _calls_then_solves(target, exercises.load_solution(exercise_id)))
    assert result.status == "fail" and result.score == 0, result.line
    assert f"`{dotted}`" in result.line and "package's own version" in result.line, result.line
    assert "refused" in result.line, result.line


def _public_functions():
    """Every public function of the lesson modules and subpackages (the package's references), by
    "module.function" ("backward.chunked.state_walk_backward")."""
    skip = {"lab", "exercises", "grading", "edition", "gpu_bench", "gpu_targets", "fla_stand_in", "harness",
            "mixers", "__main__", "nbgrader_checks", "rehearsal"}
    found = {}
    for info in pkgutil.walk_packages(kimik3_lessons.__path__, prefix="kimik3_lessons."):
        name = info.name.removeprefix("kimik3_lessons.")
        if info.ispkg or name.split(".")[0] in skip or any(part.startswith("_") for part in name.split(".")):
            continue
        module = importlib.import_module(info.name)
        for fn_name, obj in vars(module).items():
            if not fn_name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == module.__name__:
                found[f"{name}.{fn_name}"] = obj
    return found


def _first_call(exercise_id):
    """(args, kwargs) of the first call a check makes to the student's function."""
    seen = []

    def recorder(*args, **kwargs):
        seen.append((args, kwargs))
        raise NotImplementedError
    exercises.run(exercise_id, recorder)
    return seen[0]


def test_no_package_function_earns_a_point_unless_it_is_forbidden():
    """The walk: every public function of the package handed in as the answer to every exercise whose call
    it can take. None may earn a point: a function that would (it computes what the exercise asks) must be
    in the exercise's forbid list, and then the answer is refused by name."""
    functions = _public_functions()
    assert len(functions) > 80, sorted(functions)
    tried, earned = 0, []
    for exercise_id in IDS:
        args, kwargs = _first_call(exercise_id)
        # by object: a forbid entry may name a function where its package exports it (chunk_kernels.launch)
        forbid = {registry.package_object(dotted) for dotted in exercises.get(exercise_id).forbid}
        for dotted, fn in functions.items():
            try:
                inspect.signature(fn).bind(*args, **kwargs)
            except TypeError:
                continue
            tried += 1
            result = exercises.run(exercise_id, fn)
            if fn in forbid:
                assert "refused" in result.line and result.score == 0, (exercise_id, dotted, result.line)
            elif result.score > 0:
                earned.append((exercise_id, dotted, result.line))
    print(f"{tried} (exercise, package function) pairs tried")
    assert tried > 40, tried
    assert not earned, earned


def test_an_alias_of_the_package_function_is_refused():
    """`normalized_step = linear_attention.linear_attention_step`-style answers: the package function is
    the answer itself (the kit calling it is the student's call), and so is a functools.partial of it."""
    from kimik3_lessons import gated_deltanet
    result = exercises.run("06.1", gated_deltanet.decay_mask)
    assert "refused" in result.line and "gated_deltanet.decay_mask" in result.line, result.line
    result = exercises.run("06.1", functools.partial(gated_deltanet.decay_mask))
    assert "refused" in result.line, result.line


# ---------------------------------------------------------------------------------------------------
# What an answer may return, and what it may not do


def test_a_tensor_subclass_that_lies_in_comparisons_gets_nothing():
    class Agreeable(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return torch.zeros(()) if func is torch.Tensor.__sub__ else super().__torch_function__(
                func, types, args, kwargs or {})

    def decay_mask(G):
        return torch.zeros(*G.shape, G.shape[-1], dtype=G.dtype).as_subclass(Agreeable)
    result = exercises.run("06.1", decay_mask)
    assert result.status == "fail" and "not a class of your own" in result.line, result.line


def test_switching_the_profile_hook_off_is_refused():
    solution = exercises.load_solution("06.1")

    def decay_mask(G):
        hook = sys.getprofile()
        sys.setprofile(None)
        from kimik3_lessons import gated_deltanet
        out = gated_deltanet.decay_mask(G)       # unseen by the hook, but switching it off was seen
        sys.setprofile(hook)
        return out if out is not None else solution(G)
    result = exercises.run("06.1", decay_mask)
    assert result.status == "fail" and "refused" in result.line and "setprofile" in result.line, result.line
