"""What a check says: a wrong answer (`Wrong`, with an optional hint), a refused one (`Refused`), the stub
(`NotAttempted`), and the parts of an exercise it scores one by one (`part`).

Every hint text is written as `hint("...")` and nowhere else: a graded edition (`make student HINTS=0`,
`make nbgrader`) removes those calls' texts from its copy of the checks (tools/student_edition.py), so no
hint reaches the students' files; `hints_on()` decides whether a hint that is there is shown.
"""

import contextlib
import contextvars
import os
from dataclasses import dataclass

from kimik3_lessons import edition


def hints_on():
    """Whether the ❌ lines carry hints: KIMIK3_HINTS when set (0 hides them, anything else shows them),
    else this copy's default, `edition.HINTS` (False in a `make student HINTS=0` edition)."""
    value = os.environ.get("KIMIK3_HINTS", "").strip()
    return edition.HINTS if not value else value != "0"


def hint(text=None):
    """A hint's text, marked as one (a graded edition's copy of the checks calls `hint()`: no text)."""
    return text


class Wrong(Exception):
    """The student's answer differs: `what` says what differs, `hint` what to do about it (or which
    mistake it is)."""

    def __init__(self, what, hint=None):
        self.what, self.hint = what.strip(), (hint or "").strip()
        super().__init__(self.text())

    def text(self, hints=True):
        """The verdict: what differs, then (with hints) the hint."""
        what = self.what if self.what.endswith((".", ":", "!", "?")) or not self.what else self.what + "."
        return f"{what} Hint: {self.hint[0].upper()}{self.hint[1:]}" if hints and self.hint else what


class Refused(Wrong):
    """The student's function called a package function that computes what the exercise asks for (the
    exercise's `forbid` list): no part of it earns a point."""


class NotAttempted(Exception):
    """The student's function is still the stub (it raised NotImplementedError itself)."""


@dataclass(frozen=True)
class Result:
    status: str              # "pass", "partial" (some parts right), "fail" or "todo"
    line: str                # the one line a check cell prints
    score: float = 0.0       # the share of the exercise's points earned, 0 ... 1
    parts: tuple = ()        # (part, right) for every part the exercise scores


# ---------------------------------------------------------------------------------------------------
# Parts: an exercise declares the parts its check scores (`@exercise(..., parts=(...))`); the check
# scores each inside `with part(name):`. A Wrong inside the block fails that part only and the check goes
# on; a Wrong outside any part (the call itself, a refused call, a wrong type) fails the whole exercise.


class Parts:
    """The parts of one run of a check: which were right, the first Wrong of each that was not."""

    def __init__(self, declared):
        self.declared = tuple(declared)
        self.right, self.wrong = set(), {}

    def passed(self):
        return [name for name in self.declared if name in self.right and name not in self.wrong]

    def first_wrong(self):
        return next((self.wrong[name] for name in self.declared if name in self.wrong), None)


_PARTS = contextvars.ContextVar("kimik3_exercise_parts", default=None)


@contextlib.contextmanager
def scoring(declared):
    """Collect the parts scored inside (run() wraps a check in it)."""
    parts = Parts(declared)
    token = _PARTS.set(parts)
    try:
        yield parts
    finally:
        _PARTS.reset(token)


@contextlib.contextmanager
def part(name, needs=()):
    """Score one declared part: a Wrong raised inside marks it wrong and is not raised further. A refused
    call or the stub still stop the whole check. `needs`: the parts this one is judged on (a part on the
    method counts only once the result it is the method of is right: a function that does nothing launches
    no loop either)."""
    parts = _PARTS.get()
    if parts is not None and name not in parts.declared:
        raise ValueError(f"part {name!r} is not one of the exercise's declared parts {parts.declared}")
    missing = [n for n in needs if parts is not None and (n not in parts.right or n in parts.wrong)]
    try:
        yield
    except (Refused, NotAttempted):
        raise
    except Wrong as err:
        if parts is None:
            raise
        parts.wrong.setdefault(name, err)
    else:
        if parts is not None and missing:
            parts.wrong.setdefault(name, Wrong(f"{name}: judged once {' and '.join(missing)} "
                                               f"{'is' if len(missing) == 1 else 'are'} right"))
        elif parts is not None:
            parts.right.add(name)
