"""Exercises that test the student: a registry of checks, one verdict line per check.

Each lesson's checks live in `lessonNN.py` (imported when one of its exercises is first checked):

    @exercise("03.1", "chunked_loop", "the chunked form as a loop over chunks", difficulty=2)
    def check_chunked_loop(chunked_loop):
        ...call it on fresh random inputs, compare with the package's reference...
        return "relative error 3e-16"            # what was measured, shown after ✅

A check raises `Wrong("what differs", hint="what to do")` for a wrong answer; `expect_close` builds that
message (shape, the first wrong row, the error). A check calls the student's function only through
`attempt` (an error in the student's code becomes a ❌ naming its file and line), and through a `Watch`
where the exercise names a method: the package's own reference for the thing asked may not be called, and
the operations launched can be counted. Every check runs seeded from its exercise id, so a failure
reproduces; `KIMIK3_HINTS=0` in the environment drops the hints from the ❌ lines (graded work). The
solutions live apart, one file per lesson in the repository's `solutions/` folder
(solutions/03_chunkwise.py defines `chunked_loop` and the wrong answers the tests feed the checks), left
out of the student edition (`make student`).
"""

import contextlib
import importlib
import importlib.util
import inspect
import os
import random
import sys
import sysconfig
import traceback
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kimik3_lessons import edition


def hints_on():
    """Whether the ❌ lines carry hints: KIMIK3_HINTS when set (0 hides them, anything else shows them),
    else this copy's default, `edition.HINTS` (False in a `make student HINTS=0` edition)."""
    value = os.environ.get("KIMIK3_HINTS", "").strip()
    return edition.HINTS if not value else value != "0"


class Wrong(Exception):
    """The student's answer differs: `what` says what differs, `hint` what to do about it (or which
    mistake it is). A message written as "what. Hint: ..." is split there."""

    def __init__(self, what, hint=None):
        if hint is None and "Hint:" in what:
            what, hint = what.split("Hint:", 1)
        hint = (hint or "").strip()
        self.what, self.hint = what.strip(), hint[len("Hint:"):].strip() if hint.startswith("Hint:") else hint
        super().__init__(self.text())

    def text(self, hints=True):
        """The verdict: what differs, then (with hints) the hint."""
        what = self.what if self.what.endswith((".", ":", "!", "?")) or not self.what else self.what + "."
        return f"{what} Hint: {self.hint}" if hints and self.hint else what


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


def run(exercise_id, fn=None, solution=False):
    """Check `fn` (or the solution) for one exercise; return a Result whose `line` is the verdict.
    Never raises: a wrong answer, an answer the check cannot use, an error in `fn` each give one ❌ line."""
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
    try:
        with seeded(seed_of(exercise_id)):
            measured = ex.check(fn)
    except NotAttempted:
        return Result("todo", f"⬜ {head}: not attempted yet (replace `raise NotImplementedError` in "
                              f"`{ex.name}` above, then run this cell again)")
    except Wrong as err:
        return Result("fail", f"❌ {head}: {err.text(hints_on())}")
    except Exception as err:  # what `fn` returned broke the check's own code: still one verdict line
        return Result("fail", f"❌ {head}: the check could not use what `{ex.name}` returned "
                              f"({type(err).__name__}: {_short(err)}); compare its type, shape and dtype "
                              f"with the docstring")
    return Result("pass", f"✅ {head}: {measured}")


class NotAttempted(Exception):
    """The student's function is still the stub (it raised NotImplementedError itself)."""


def _short(err, limit=300):
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[:limit] + " …"


_LIBRARY_DIRS = tuple({str(Path(p).resolve()) for p in (sysconfig.get_paths()["stdlib"],
                                                        sysconfig.get_paths()["purelib"],
                                                        sysconfig.get_paths()["platlib"])}
                      | {str(Path(torch.__file__).resolve().parents[1])})
_PACKAGE_DIR = Path(__file__).resolve().parents[1]          # kimik3_lessons/: the references live here


def _is_library(filename):
    path = str(Path(filename).resolve()) if not filename.startswith("<") else filename
    return (filename.startswith("<frozen") or path.startswith(_LIBRARY_DIRS)
            or path.startswith(str(_PACKAGE_DIR) + os.sep))


def _student_frame(tb):
    """The last frame of a traceback that runs the student's code (not torch's, not the package's)."""
    frames = [f for f in traceback.extract_tb(tb) if not _is_library(f.filename)]
    return frames[-1] if frames else None


def _describe(args, kwargs):
    parts = [_fmt_value(a) for a in args] + [f"{k}={_fmt_value(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _fmt_value(x):
    if isinstance(x, torch.Tensor):
        return f"tensor{_fmt_shape(x)}"
    if isinstance(x, (int, float, str, bool)) or x is None:
        return repr(x)
    return type(x).__name__


def attempt(fn, *args, **kwargs):
    """Call the student's function. Its errors become a ❌ line (`Wrong`) naming the file and line of the
    student's code where it raised, instead of stopping Run All; a call that does not fit its signature is
    a ❌ too. The stub's own `raise NotImplementedError` means "not attempted yet". A check calls the
    student's code only through here."""
    name = getattr(fn, "__name__", "your function")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as err:
            raise Wrong(f"`{name}{signature}` cannot take the arguments the exercise passes, "
                        f"({_describe(args, kwargs)}): {err}. Keep the stub's signature.") from None
    try:
        return fn(*args, **kwargs)
    except Wrong:          # a check's own helper (a spy the student's code called) found the mistake
        raise
    except Exception as err:
        frames = traceback.extract_tb(err.__traceback__)
        if isinstance(err, NotImplementedError) and getattr(fn, "__code__", None) is not None and \
                frames and frames[-1].filename == fn.__code__.co_filename and \
                frames[-1].name == fn.__code__.co_name:
            raise NotAttempted from None
        where = _student_frame(err.__traceback__)
        at = (f" at {where.filename}, line {where.lineno}, in {where.name}"
              + (f": `{where.line.strip()}`" if where.line else "")) if where else ""
        raise Wrong(f"`{name}` raised {type(err).__name__}{at}: {_short(err)}") from None


# ---------------------------------------------------------------------------------------------------
# Watching the method: what the student's function calls, and the operations it launches


def _code_of(f):
    """The code object a call to `f` (a function, a method, a property or a class) runs."""
    f = f.fget if isinstance(f, property) else getattr(f, "__func__", f)
    if isinstance(f, type):
        f = f.__init__
    return f.__code__


def _label_of(f):
    f = f.fget if isinstance(f, property) else getattr(f, "__func__", f)
    module = getattr(f, "__module__", "").rsplit(".", 1)[-1]
    return f"{module}.{f.__qualname__}" if module else f.__qualname__


class Watch:
    """Watches the student's function while it runs (`with Watch(...) as watch: attempt(fn, ...)`):

    - `forbid`: the package's functions (or classes) it may not call itself, the references for the very
      thing the exercise asks (a call made inside another package function does not count);
    - `count`: package functions whose direct calls are counted (`watch.calls[f]`, with their arguments
      in `watch.arguments[f]`);
    - every aten operation it launches (`watch.ops`, a Counter by name), the dtypes and shapes it makes.

    `watch.verdict(task)` then raises Wrong naming a forbidden call, or an op in `forbid_ops`."""

    def __init__(self, forbid=(), count=(), forbid_ops=()):
        self._forbidden = {_code_of(f): _label_of(f) for f in forbid}
        self._counted = {_code_of(f): f for f in count}
        self.forbid_ops = set(forbid_ops)
        self.called = []                    # forbidden functions called, in order (labels)
        self.calls = Counter()
        self.arguments = {f: [] for f in count}
        self.ops, self.dtypes, self.shapes = Counter(), set(), set()

    def _profile(self, frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code not in self._forbidden and code not in self._counted:
            return
        caller = frame.f_back
        if caller is not None and Path(caller.f_code.co_filename).resolve().parent == _PACKAGE_DIR:
            return                          # the package calling its own helper: not the student's call
        if code in self._forbidden:
            self.called.append(self._forbidden[code])
        if code in self._counted:
            f = self._counted[code]
            self.calls[f] += 1
            self.arguments[f].append(dict(frame.f_locals))

    def __enter__(self):
        watch = self

        class Ops(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                watch.ops[func.overloadpacket.__name__.rstrip("_")] += 1
                for t in out if isinstance(out, (tuple, list)) else (out,):
                    if isinstance(t, torch.Tensor):
                        watch.dtypes.add(t.dtype)
                        watch.shapes.add(tuple(t.shape))
                return out

        self._mode = Ops()
        self._mode.__enter__()
        self._saved_profile = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._saved_profile)
        self._mode.__exit__(*exc)
        return False

    @property
    def num_ops(self):
        return sum(self.ops.values())

    def verdict(self, task, name="your function"):
        """Wrong if a forbidden function was called or a forbidden op launched; `task` says what the
        exercise asks instead."""
        if self.called:
            called = ", ".join(dict.fromkeys(self.called))
            raise Wrong(f"{name} calls {called}, the package's own version of what this exercise asks: the "
                        f"numbers come out right, the method is not yours", hint=task)
        used = sorted(set(self.ops) & self.forbid_ops)
        if used:
            raise Wrong(f"{name} runs {', '.join(used)}, which the exercise rules out", hint=task)


class CacheSpy:
    """Stands in for a model: `model(idx, cache)` runs it and counts the token positions it is fed; the
    first call whose cache is not the one the previous call returned raises Wrong (with `hint`) at once,
    inside the student's loop. `held(cache)` is how many tokens per sequence a cache holds (None: not known
    from the cache; then the spy compares the cache's entries with the last returned ones by identity)."""

    def __init__(self, model, hint, held=None):
        self.config = model.config
        self._model = model
        self._held = held
        self._hint = hint
        self.tokens_fed = 0
        self.calls = 0
        self.seen = 0                     # tokens per sequence in the cache the last call returned
        self.returned = None              # the cache the last call returned

    def _same_cache(self, cache):
        if self._held is not None:
            return (0 if cache is None else self._held(cache)) == self.seen
        if self.returned is None:
            return cache is None
        return (cache is not None and len(cache) == len(self.returned)
                and all(a is b for a, b in zip(cache, self.returned, strict=True)))

    def __call__(self, idx, cache=None, **kwargs):
        if not self._same_cache(cache):
            raise Wrong(f"call {self.calls + 1} ran the model without a cache after it had seen {self.seen} "
                        f"tokens: the cache was not used" if cache is None else
                        f"call {self.calls + 1} passed a cache that is not the one the previous call "
                        f"returned (the model had seen {self.seen} tokens by then)", hint=self._hint)
        self.calls += 1
        self.tokens_fed += idx.shape[0] * idx.shape[1]
        logits, cache = self._model(idx, cache, **kwargs)
        self.seen = self._held(cache) if self._held is not None else self.seen + idx.shape[1]
        self.returned = cache
        return logits, cache

    forward = __call__


# ---------------------------------------------------------------------------------------------------
# Comparing, with messages that help


def _fmt_shape(x):
    return "[" + ", ".join(map(str, x.shape)) + "]" if isinstance(x, torch.Tensor) else type(x).__name__


def _relative_error(ref, out):
    """max |out - ref| / max |ref| in float64 (|Δ| itself where ref is all zeros)."""
    ref64, out64 = ref.detach().double().cpu(), out.detach().double().cpu()
    if not ref64.numel():
        return 0.0
    scale = ref64.abs().max().item() or 1.0
    return (out64 - ref64).abs().max().item() / scale


def expect_tensor(what, out, shape, dtype=None):
    """`out` must be a tensor of `shape` (and `dtype`, when given), else Wrong naming both."""
    if not isinstance(out, torch.Tensor):
        got = "None (did the function end without `return`?)" if out is None else type(out).__name__
        raise Wrong(f"{what} should be a tensor of shape {list(shape)}, got {got}")
    if tuple(out.shape) != tuple(shape):
        raise Wrong(f"{what} has shape {_fmt_shape(out)}, expected {list(shape)}")
    if dtype is not None and out.dtype != dtype:
        raise Wrong(f"{what} is {out.dtype}, expected {dtype} (the inputs' dtype): compute in the dtype "
                    f"you are given, without .float() or a new tensor of the default dtype")


def expect_pair(what, out, n=2):
    """`out` must be a tuple of n things, else Wrong."""
    if not isinstance(out, tuple) or len(out) != n:
        got = f"a tuple of {len(out)}" if isinstance(out, tuple) else type(out).__name__
        raise Wrong(f"return {what}, got {got}")
    return out


def expect_close(what, ref, out, rtol=1e-9, hint="", row_dim=-2, dtype=None):
    """`out` must equal `ref` to `rtol` relative error (max |Δ| / max |ref|); returns the error.

    On a mismatch the message names the first wrong row along `row_dim` (a token, a chunk row, ...),
    how many rows before it are right, the largest difference, and the hint.
    """
    expect_tensor(what, out, ref.shape, dtype)
    ref64, out64 = ref.detach().double().cpu(), out.detach().double().cpu()
    if not torch.isfinite(out64).all():
        raise Wrong(f"{what} holds NaN or inf. {hint}".strip())
    err = _relative_error(ref64, out64)
    if err <= rtol:
        return err
    scale = ref64.abs().max().item() or 1.0
    diff = (out64 - ref64).abs()
    bad = diff.movedim(row_dim, 0).reshape(diff.shape[row_dim], -1).amax(-1) > rtol * scale
    first = int(bad.nonzero()[0])
    where = f"from row {first} on (rows 0..{first - 1} match)" if first else "from the first row on"
    rounded = (f" (yours is {out.dtype}, the reference {ref.dtype}: compute in the dtype you are given)"
               if out.is_floating_point() and torch.finfo(out.dtype).eps > torch.finfo(ref.dtype).eps else "")
    raise Wrong(f"{what} differs from the reference {where}: relative error {err:.2e} > {rtol:.0e}{rounded}. "
                f"{hint}".strip())


def matches(ref, out, rtol=1e-9):
    """True when `out` is a finite tensor of ref's shape that equals it to `rtol` (no message)."""
    if not isinstance(out, torch.Tensor) or out.shape != ref.shape:
        return False
    return bool(torch.isfinite(out).all()) and _relative_error(ref, out) <= rtol


def known_mistake(what, ref, out, known, rtol=1e-9):
    """If `out` is wrong and equals one of the `known` mistakes {explanation: its result}, raise Wrong
    whose hint is that explanation: a message that names the mistake rather than only the first wrong
    row (in a graded run, without hints, the line says only how far off it is)."""
    if not matches(ref, out, rtol):
        for explanation, wrong in known.items():
            if matches(wrong, out, rtol):
                err = _relative_error(ref, out)
                raise Wrong(f"{what} differs from the reference (relative error {err:.2e})",
                            hint=explanation[0].upper() + explanation[1:] + ".")
