"""Running one exercise's check on a function: seeded from the exercise's id, its parts scored, one
verdict line whatever the function does."""

import contextlib
import random
import zlib

import torch

from kimik3_lessons.exercises.calling import FORBIDDEN, _short
from kimik3_lessons.exercises.registry import forbidden, get
from kimik3_lessons.exercises.solutions import load_solution
from kimik3_lessons.exercises.verdict import NotAttempted, Refused, Result, Wrong, hints_on, scoring


def seed_of(exercise_id):
    """The seed every run of one exercise's check starts from: a failure reproduces."""
    return zlib.crc32(f"kimik3-lessons exercise {exercise_id}".encode())


@contextlib.contextmanager
def seeded(seed):
    """torch's and Python's random generators seeded with `seed` inside, restored afterwards (the cells
    after a check draw what they would have drawn without it)."""
    state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(state)


def points(ex, score):
    """The points a share `score` of exercise `ex` earns, to the hundredth."""
    return round(ex.difficulty * score, 2)


def run(exercise_id, fn=None, solution=False):
    """Check `fn` (or the solution) for one exercise; return a Result: its `line` is the verdict, its `score`
    the share of the exercise's points earned (its parts right, of all its parts). Never raises: a wrong
    answer, an answer the check cannot use, an error in `fn` each give one ❌ line."""
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
    if not callable(fn):
        return Result("fail", f"❌ {head}: pass the function `{ex.name}` itself, got {type(fn).__name__}")
    hints = hints_on()
    names = ex.parts or (ex.name,)
    error = None
    token = FORBIDDEN.set(forbidden(ex))
    try:
        with seeded(seed_of(exercise_id)), scoring(names) as parts:
            try:
                measured = ex.check(fn)
            except NotAttempted:
                return Result("todo", f"⬜ {head}: not attempted yet (replace `raise NotImplementedError` "
                                      f"in `{ex.name}` above, then run this cell again)")
            except Refused as err:
                return Result("fail", f"❌ {head}: {err.text(hints)}", 0.0, tuple((n, False) for n in names))
            except Wrong as err:            # outside any part: the whole answer is wrong
                error = err
            except Exception as err:        # what `fn` returned broke the check's own code
                if parts.first_wrong() is None:
                    return Result("fail", f"❌ {head}: the check could not use what `{ex.name}` returned "
                                          f"({type(err).__name__}: {_short(err)}); compare its type, shape "
                                          f"and dtype with the docstring", 0.0,
                                  tuple((n, False) for n in names))
    finally:
        FORBIDDEN.reset(token)
    if not ex.parts:                        # one part: the check returning is the part being right
        parts.right.add(ex.name) if error is None else parts.wrong.setdefault(ex.name, error)
    right = parts.passed()
    table = tuple((n, n in right) for n in names)
    if error is not None:
        return Result("fail", f"❌ {head}: {error.text(hints)}", 0.0, tuple((n, False) for n in names))
    if len(right) == len(names):
        return Result("pass", f"✅ {head}: {measured}", 1.0, table)
    score = len(right) / len(names)
    wrong = parts.first_wrong()
    said = wrong.text(hints) if wrong is not None else "not checked (an earlier part failed)"
    if not right:
        return Result("fail", f"❌ {head}: {said}", 0.0, table)
    return Result("partial", f"❌ {head}: {len(right)} of {len(names)} parts right ({points(ex, score):g} of "
                             f"{ex.difficulty} points: {', '.join(right)}); {said}", score, table)
