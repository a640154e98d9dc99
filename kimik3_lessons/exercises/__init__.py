"""Exercises that test the student: a registry of checks, one verdict line per check.

Each lesson's checks live in `lessonNN.py` (imported when one of its exercises is first checked):

    @exercise("03.1", "chunked_loop", "the chunked form as a loop over chunks", difficulty=2)
    def check_chunked_loop(chunked_loop):
        ...call it on fresh random inputs, compare with the package's reference...
        return "relative error 3e-16"            # what was measured, shown after ✅

A check raises `Wrong("what differs. Hint: ...")` for a wrong answer; `expect_close` builds that message
(shape, the first wrong row, the error). The solutions live apart, one file per lesson in the
repository's `solutions/` folder (`solutions/03_chunkwise.py` defines `chunked_loop`), left out of the
student edition (`make student`).
"""

import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from kimik3_lessons.lab import relative_error


class Wrong(Exception):
    """The student's answer differs: the message says what differs, and gives a hint."""


@dataclass(frozen=True)
class Exercise:
    id: str            # "05.2": lesson 05, exercise 2
    name: str          # the function the student writes (same name in the notebook and in solutions/)
    title: str
    check: object      # check(fn) -> str (what was measured); raises Wrong
    difficulty: int    # 1 (a few lines), 2 (the lesson's mechanism), 3 (a stretch)


REGISTRY = {}


def exercise(exercise_id, name, title, difficulty):
    """Register the decorated check under `exercise_id`."""
    if difficulty not in (1, 2, 3):
        raise ValueError(f"difficulty must be 1, 2 or 3, got {difficulty!r}")

    def register(check):
        REGISTRY[exercise_id] = Exercise(exercise_id, name, title, check, difficulty)
        return check
    return register


def lesson_of(exercise_id):
    """'05.2' -> '05', '05b.1' -> '05b'."""
    return exercise_id.split(".")[0]


def get(exercise_id):
    """The registered exercise, importing its lesson's checks on first use."""
    if exercise_id not in REGISTRY:
        try:
            importlib.import_module(f"{__name__}.lesson{lesson_of(exercise_id)}")
        except ModuleNotFoundError:
            pass
    if exercise_id not in REGISTRY:
        raise ValueError(f"no exercise {exercise_id!r}; known: {', '.join(sorted(all_ids()))}")
    return REGISTRY[exercise_id]


def all_ids():
    """Every exercise of the course (imports every lesson's checks)."""
    for path in sorted(Path(__file__).parent.glob("lesson*.py")):
        importlib.import_module(f"{__name__}.{path.stem}")
    return sorted(REGISTRY)


# ---------------------------------------------------------------------------------------------------
# Solutions, kept apart


def solutions_dir():
    """$KIMIK3_SOLUTIONS, else the checkout's solutions/ folder (absent in the student edition)."""
    if os.environ.get("KIMIK3_SOLUTIONS"):
        return Path(os.environ["KIMIK3_SOLUTIONS"])
    return Path(__file__).resolve().parents[2] / "solutions"


def load_solution(exercise_id):
    """The solution function of an exercise, from solutions/<lesson>_*.py."""
    ex = get(exercise_id)
    files = sorted(solutions_dir().glob(f"{lesson_of(exercise_id)}_*.py"))
    if not files:
        raise FileNotFoundError(f"no solutions for lesson {lesson_of(exercise_id)} in {solutions_dir()} "
                                f"(the student edition leaves them out; teachers find them in the course "
                                f"repository's solutions/ folder)")
    spec = importlib.util.spec_from_file_location(f"solutions_{lesson_of(exercise_id)}", files[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, ex.name):
        raise AttributeError(f"{files[0]} defines no `{ex.name}` for exercise {exercise_id}")
    return getattr(module, ex.name)


# ---------------------------------------------------------------------------------------------------
# Running a check


@dataclass(frozen=True)
class Result:
    status: str        # "pass", "fail" or "todo"
    line: str


def run(exercise_id, fn=None, solution=False):
    """Check `fn` (or the solution) for one exercise; return a Result whose `line` is the verdict."""
    ex = get(exercise_id)
    head = f"exercise {ex.id} ({ex.title})"
    if solution:
        try:
            fn = load_solution(exercise_id)
        except (FileNotFoundError, AttributeError) as err:
            return Result("todo", f"⬜ {head}: {err}")
        head += " with the solution from solutions/"
    if fn is None:
        return Result("todo", f"⬜ {head}: not attempted yet (pass your `{ex.name}` to the check)")
    try:
        measured = ex.check(fn)
    except NotImplementedError:
        return Result("todo", f"⬜ {head}: not attempted yet (replace `raise NotImplementedError` in "
                              f"`{ex.name}` above, then run this cell again)")
    except Wrong as err:
        return Result("fail", f"❌ {head}: {err}")
    return Result("pass", f"✅ {head}: {measured}")


def attempt(fn, *args, **kwargs):
    """Call the student's function. Its errors become a ❌ line (`Wrong`) instead of stopping Run All;
    NotImplementedError passes through ("not attempted yet"). A check calls the student's code only
    through here, so an error in the check itself still fails loudly."""
    try:
        return fn(*args, **kwargs)
    except (NotImplementedError, Wrong):  # not attempted yet; or a check's own helper found the mistake
        raise
    except Exception as err:
        name = getattr(fn, "__name__", "your function")
        raise Wrong(f"`{name}` raised {type(err).__name__}: {err}") from err


# ---------------------------------------------------------------------------------------------------
# Comparing, with messages that help


def _fmt_shape(x):
    return "[" + ", ".join(map(str, x.shape)) + "]" if isinstance(x, torch.Tensor) else type(x).__name__


def expect_tensor(what, out, shape):
    """`out` must be a tensor of `shape`, else Wrong naming both shapes."""
    if not isinstance(out, torch.Tensor):
        raise Wrong(f"{what} should be a tensor of shape {list(shape)}, got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise Wrong(f"{what} has shape {_fmt_shape(out)}, expected {list(shape)}")


def expect_close(what, ref, out, rtol=1e-9, hint="", row_dim=-2):
    """`out` must equal `ref` to `rtol` relative error (max |Δ| / max |ref|); returns the error.

    On a mismatch the message names the first wrong row along `row_dim` (a token, a chunk row, ...),
    how many rows before it are right, the largest difference, and the hint.
    """
    expect_tensor(what, out, ref.shape)
    ref64, out64 = ref.detach().double().cpu(), out.detach().double().cpu()
    if not torch.isfinite(out64).all():
        raise Wrong(f"{what} holds NaN or inf. {hint}".strip())
    scale = ref64.abs().max().item() or 1.0
    diff = (out64 - ref64).abs()
    err = diff.max().item() / scale
    if err <= rtol:
        return err
    bad = diff.movedim(row_dim, 0).reshape(diff.shape[row_dim], -1).amax(-1) > rtol * scale
    first = int(bad.nonzero()[0])
    where = f"from row {first} on (rows 0..{first - 1} match)" if first else "from the first row on"
    raise Wrong(f"{what} differs from the reference {where}: relative error {err:.2e} > {rtol:.0e}. "
                f"{hint}".strip())


def matches(ref, out, rtol=1e-9):
    """True when `out` is a finite tensor of ref's shape that equals it to `rtol` (no message)."""
    if not isinstance(out, torch.Tensor) or out.shape != ref.shape:
        return False
    return bool(torch.isfinite(out).all()) and relative_error(ref.detach(), out.detach()) <= rtol


def known_mistake(what, ref, out, known, rtol=1e-9):
    """If `out` is wrong and equals one of the `known` mistakes {explanation: its result}, raise Wrong
    with that explanation: a message that names the mistake rather than only the first wrong row."""
    if not matches(ref, out, rtol):
        for explanation, wrong in known.items():
            if matches(wrong, out, rtol):
                raise Wrong(f"{what} differs from the reference: {explanation}.")
