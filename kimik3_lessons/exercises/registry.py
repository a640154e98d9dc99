"""The course's exercises, one entry each: `@exercise(...)` on its check, in `lessonNN.py`.

An entry is the exercise's id, the function the student writes, its title, its difficulty (its points),
the parts its check scores, and `forbid`: the package's functions that compute what the exercise asks for
("module.function", "module.Class.method", "module.Class" for building one), which the student's function
may not call (the check refuses the answer, naming the call). A new lesson's exercises are new entries in
a new `lessonNN.py`; nothing else lists them.
"""

import importlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Exercise:
    id: str            # "05.2": lesson 05, exercise 2
    name: str          # the function the student writes (same name in the notebook and in solutions/)
    title: str
    check: object      # check(fn) -> str (what was measured); raises Wrong
    difficulty: int    # 1 (a few lines), 2 (the lesson's mechanism), 3 (a stretch): its points
    parts: tuple = ()  # what the check scores one by one (empty: the exercise is right or wrong as a whole)
    forbid: tuple = () # the package's own versions of what it asks, as "module.function" names


REGISTRY = {}


def exercise(exercise_id, name, title, difficulty, parts=(), forbid=()):
    """Register the decorated check under `exercise_id`."""
    if difficulty not in (1, 2, 3):
        raise ValueError(f"difficulty must be 1, 2 or 3, got {difficulty!r}")
    if len(set(parts)) != len(parts):
        raise ValueError(f"{exercise_id}: the parts must have different names, got {parts!r}")

    def register(check):
        REGISTRY[exercise_id] = Exercise(exercise_id, name, title, check, difficulty, tuple(parts),
                                         tuple(forbid))
        return check
    return register


def lesson_of(exercise_id):
    """'05.2' -> '05', '05b.1' -> '05b'."""
    return exercise_id.split(".")[0]


def get(exercise_id):
    """The registered exercise, importing its lesson's checks on first use."""
    if exercise_id not in REGISTRY:
        try:
            importlib.import_module(f"{__package__}.lesson{lesson_of(exercise_id)}")
        except ModuleNotFoundError:
            pass
    if exercise_id not in REGISTRY:
        raise ValueError(f"no exercise {exercise_id!r}; known: {', '.join(sorted(all_ids()))}")
    return REGISTRY[exercise_id]


def all_ids():
    """Every exercise of the course (imports every lesson's checks)."""
    for path in sorted(Path(__file__).parent.glob("lesson*.py")):
        importlib.import_module(f"{__package__}.{path.stem}")
    return sorted(REGISTRY)


def package_object(dotted):
    """The package object a forbid entry names: "moe.LatentMoE.route" -> kimik3_lessons.moe.LatentMoE.route
    (a property's getter, a Triton function's Python source)."""
    module, *attributes = dotted.split(".")
    obj = importlib.import_module(f"kimik3_lessons.{module}")
    for name in attributes:
        obj = obj.__dict__[name] if isinstance(obj, type) and name in obj.__dict__ else getattr(obj, name)
    obj = getattr(obj, "fget", obj)
    return getattr(obj, "fn", obj)


def forbidden(ex):
    """{code object a call to it runs: its "module.function" name} for the exercise's forbid list."""
    codes = {}
    for dotted in ex.forbid:
        obj = package_object(dotted)
        obj = getattr(obj, "__func__", obj)               # a staticmethod or classmethod
        if isinstance(obj, type):
            obj = obj.__init__
        codes[obj.__code__] = dotted
    return codes
