"""Exercises that test the student: a registry of checks, one verdict line per check.

Each lesson's checks live in `lessonNN.py` (imported when one of its exercises is first checked):

    @exercise("03.1", "chunked_loop", "the chunked form as a loop over chunks", difficulty=2,
              parts=("o", "the final state"), forbid=("linear_attention.chunked", ...))
    def check_chunked_loop(chunked_loop):
        ...call it on fresh random inputs through `attempt`, compare with the package's reference...
        with part("o"):
            expect_close("o", o_ref, o, hint=hint("the chunk's own tokens need tril(Q_n K_n^T) V_n"))
        ...
        return "relative error 3e-16"            # what was measured, shown after ✅

The kit, by job:

- `registry`: the exercises (`@exercise`: id, function name, title, difficulty = points, the parts the
  check scores, the package functions it forbids);
- `verdict`: what a check says (`Wrong` with a `hint(...)`, `Refused`, `part`, `Result`, `hints_on`);
- `calling`: calling the student's function (`attempt`: errors become a ❌ naming the student's line,
  forbidden calls are refused, results must be plain data; `Watch`: the operations launched and the calls
  counted; `CacheSpy`);
- `compare`: the comparisons with the reference (`expect_close` names the first wrong row, `known_mistake`
  names a classic mistake);
- `runner`: `run(id, fn)`, seeded from the id, every part scored, one line that never raises;
- `solutions`: the solutions, apart in the repository's `solutions/` (not in the student edition);
- `isolation`: the function taken out of a notebook and checked alone in a fresh process (the graders).

`KIMIK3_HINTS=0` in the environment drops the hints from the ❌ lines; a graded edition's copy of the
checks has no hint texts at all.
"""

from kimik3_lessons.exercises.calling import CacheSpy, Watch, attempt
from kimik3_lessons.exercises.compare import expect_close, expect_pair, expect_tensor, known_mistake, matches
from kimik3_lessons.exercises.registry import REGISTRY, Exercise, all_ids, exercise, get, lesson_of
from kimik3_lessons.exercises.runner import points, run, seed_of
from kimik3_lessons.exercises.solutions import load_solution, solutions_dir
from kimik3_lessons.exercises.verdict import NotAttempted, Refused, Result, Wrong, hint, hints_on, part

__all__ = ["REGISTRY", "CacheSpy", "Exercise", "NotAttempted", "Refused", "Result", "Watch", "Wrong",
           "all_ids", "attempt", "exercise", "expect_close", "expect_pair", "expect_tensor", "get", "hint",
           "hints_on", "known_mistake", "lesson_of", "load_solution", "matches", "part", "points", "run",
           "seed_of", "solutions_dir"]
