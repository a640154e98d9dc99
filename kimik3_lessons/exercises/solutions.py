"""The solutions, kept apart: one file per lesson in the repository's `solutions/` folder (left out of the
student edition), defining each exercise's function and the wrong answers the tests feed the checks."""

import importlib.util
import os
from pathlib import Path

from kimik3_lessons.exercises.registry import get, lesson_of


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
