"""Calling the student's function: `attempt` (every call a check makes goes through it), `Watch` (the
operations a call launches and the package functions it calls), `CacheSpy` (a model that checks the cache
it is handed).

While the student's function runs, a profile hook sees every Python call: a call of one of the exercise's
forbidden functions made by the student's own code (not by the package calling its helper) refuses the
answer. Whatever the function returns must be plain data (exact tensors, numbers, strings, lists, tuples,
dicts, the package's own objects): a subclass could answer a comparison with anything.
"""

import contextvars
import inspect
import sys
import sysconfig
import threading
import traceback
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kimik3_lessons import contract
from kimik3_lessons.exercises.verdict import NotAttempted, Refused, Wrong

PACKAGE_DIR = Path(__file__).resolve().parents[1]            # kimik3_lessons/
_LIBRARY_DIRS = tuple({str(Path(p).resolve()) for p in (sysconfig.get_paths()["stdlib"],
                                                        sysconfig.get_paths()["purelib"],
                                                        sysconfig.get_paths()["platlib"])}
                      | {str(Path(torch.__file__).resolve().parents[1])})

# What the running check forbids ({code: "module.function"}: run() sets it) and the Watch around a call.
FORBIDDEN = contextvars.ContextVar("kimik3_forbidden", default=None)
_WATCH = contextvars.ContextVar("kimik3_watch", default=None)

# Calls that would switch the profile hook off, or start code it cannot see.
_TAMPERING = {f for f in (sys.setprofile, sys.settrace, getattr(sys, "monitoring", None) and
                          sys.monitoring.register_callback, getattr(sys, "monitoring", None) and
                          sys.monitoring.set_events) if f}
_TAMPERING_CODES = {f.__code__ for f in (threading.setprofile, threading.settrace, threading.Thread.start,
                                         getattr(threading, "setprofile_all_threads", None),
                                         getattr(threading, "settrace_all_threads", None)) if f}


_CODES = {}


def package_codes():
    """Every code object the package defines (its functions, methods, nested functions, lambdas): a call
    made by one of them is the package calling its own helper, not the student. (Computed again when
    another of the package's modules has been imported.)"""
    modules = {name: module for name, module in list(sys.modules.items())
               if name == "kimik3_lessons" or name.startswith("kimik3_lessons.")}
    key = frozenset(modules)
    if key in _CODES:
        return _CODES[key]
    codes = set()

    def add(code):
        if code not in codes:
            codes.add(code)
            for const in code.co_consts:
                if inspect.iscode(const):
                    add(const)

    def visit(obj, module, seen):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        obj = getattr(obj, "fn", obj)                         # a Triton function's Python source
        if isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                if f is not None:
                    visit(f, module, seen)
        elif isinstance(obj, (staticmethod, classmethod)):
            visit(obj.__func__, module, seen)
        elif inspect.isfunction(obj) and obj.__module__ == module:
            add(obj.__code__)
        elif isinstance(obj, type) and obj.__module__ == module:
            for value in vars(obj).values():
                visit(value, module, seen)

    for name, module in modules.items():
        seen = set()
        for value in list(vars(module).values()):
            visit(value, name, seen)
    _CODES.clear()
    _CODES[key] = codes
    return codes


class _Hook:
    """The profile hook around one call of the student's function: forbidden calls, counted calls,
    tampering with the hook."""

    def __init__(self, forbidden, watch):
        self.forbidden, self.watch = forbidden, watch
        self.counted = watch.counted if watch is not None else {}
        self.called, self.tampered = [], []
        self._own = package_codes() if forbidden or self.counted else set()

    def __call__(self, frame, event, arg):
        if event == "c_call":
            if arg in _TAMPERING and not _is_library(frame.f_code.co_filename):
                self.tampered.append(getattr(arg, "__qualname__", repr(arg)))
            return
        if event != "call":
            return
        code = frame.f_code
        if code in _TAMPERING_CODES:
            if frame.f_back is not None and not _is_library(frame.f_back.f_code.co_filename):
                self.tampered.append(getattr(code, "co_qualname", code.co_name))
            return
        if code not in self.forbidden and code not in self.counted:
            return
        caller = frame.f_back
        if caller is not None and caller.f_code in self._own and caller.f_code is not attempt.__code__:
            return                          # the package calling its own helper: not the student's call
        if code in self.forbidden:
            self.called.append(self.forbidden[code])
        if code in self.counted:
            self.watch.record(self.counted[code], frame)


_SAFE_TYPES = (int, float, bool, complex, str, bytes, type(None), torch.Tensor, torch.nn.Parameter,
               torch.Size, torch.dtype, torch.device)


def plain(x, what="your function's result", depth=0):
    """`x` if it is plain data (exact built-in types, tensors, lists, tuples and dicts of them, the package's
    own classes), else Wrong: a subclass could answer a comparison with anything."""
    kind = type(x)
    if kind in _SAFE_TYPES:
        return x
    if kind in (list, tuple, dict) and depth < 8:
        for item in (x.items() if kind is dict else x):
            for part in (item if kind is dict else (item,)):
                plain(part, what, depth + 1)
        return x
    module = sys.modules.get(kind.__module__ or "")
    owner = module
    for name in kind.__qualname__.split("."):
        owner = getattr(owner, name, None)
    if owner is kind and (kind.__module__.startswith("kimik3_lessons.") or kind.__module__ == "numpy"):
        return x
    raise Wrong(f"{what} is a {kind.__module__}.{kind.__qualname__}: return plain values (tensors, numbers, "
                "lists, tuples, the package's own objects), not a class of your own")


def _short(err, limit=300):
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[:limit] + " …"


def _is_library(filename):
    path = str(Path(filename).resolve()) if not filename.startswith("<") else filename
    return (filename.startswith("<frozen") or path.startswith(_LIBRARY_DIRS)
            or path.startswith(str(PACKAGE_DIR) + "/"))


def _student_frame(tb):
    """The last frame of a traceback that runs the student's code (not torch's, not the package's)."""
    frames = [f for f in traceback.extract_tb(tb) if not _is_library(f.filename)]
    return frames[-1] if frames else None


def _describe(args, kwargs):
    parts = [_fmt_value(a) for a in args] + [f"{k}={_fmt_value(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _fmt_value(x):
    if isinstance(x, torch.Tensor):
        return f"tensor{contract.shape_str(x)}"
    if isinstance(x, (int, float, str, bool)) or x is None:
        return repr(x)
    return type(x).__name__


def attempt(fn, *args, **kwargs):
    """Call the student's function. Its errors become a ❌ line (`Wrong`) naming the file and line of the
    student's code where it raised, instead of stopping Run All; a call that does not fit its signature is
    a ❌ too. The stub's own `raise NotImplementedError` means "not attempted yet"; a call of one of the
    exercise's forbidden functions refuses the answer (`Refused`). A check calls the student's code only
    through here."""
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
    hook = _Hook(FORBIDDEN.get() or {}, _WATCH.get())
    saved = sys.getprofile()
    sys.setprofile(hook)
    try:
        out = fn(*args, **kwargs)
        error = None
    except Wrong as err:   # a check's own helper (a spy the student's code called) found the mistake
        error = err
    except Exception as err:
        error = err
    finally:
        sys.setprofile(saved)
    if hook.tampered:
        raise Refused(f"`{name}` calls {', '.join(dict.fromkeys(hook.tampered))}, which would hide its calls "
                      "from the check: refused")
    if hook.called:
        called = ", ".join(f"`{c}`" for c in dict.fromkeys(hook.called))
        raise Refused(f"`{name}` calls {called}, the package's own version of what this exercise asks for: "
                      "refused (the exercise is to write it yourself)")
    if isinstance(error, Wrong):
        raise error
    if error is not None:
        frames = traceback.extract_tb(error.__traceback__)
        if isinstance(error, NotImplementedError) and getattr(fn, "__code__", None) is not None and \
                frames and frames[-1].filename == fn.__code__.co_filename and \
                frames[-1].name == fn.__code__.co_name:
            raise NotAttempted from None
        where = _student_frame(error.__traceback__)
        at = (f" at {where.filename}, line {where.lineno}, in {where.name}"
              + (f": `{where.line.strip()}`" if where.line else "")) if where else ""
        raise Wrong(f"`{name}` raised {type(error).__name__}{at}: {_short(error)}") from None
    return plain(out, f"what `{name}` returned")


# ---------------------------------------------------------------------------------------------------
# Watching the method: the package functions the student's function calls, the operations it launches


def _code_of(f):
    """The code object a call to `f` (a function, a method, a property or a class) runs."""
    f = f.fget if isinstance(f, property) else getattr(f, "__func__", f)
    if isinstance(f, type):
        f = f.__init__
    return f.__code__


class Watch:
    """Watches the student's function while it runs (`with Watch(...) as watch: attempt(fn, ...)`):

    - `count`: package functions whose direct calls are counted (`watch.calls[f]`, with their arguments
      in `watch.arguments[f]`);
    - every aten operation it launches (`watch.ops`, a Counter by name), the dtypes and shapes it makes,
      and how many of them write into a tensor in place (`watch.writes`).

    `watch.verdict(task)` then raises Wrong naming an op in `forbid_ops` (a method the exercise rules out).
    The exercise's forbidden functions are refused by `attempt` itself, Watch or not."""

    def __init__(self, count=(), forbid_ops=()):
        self.counted = {_code_of(f): f for f in count}
        self.forbid_ops = set(forbid_ops)
        self.calls = Counter()
        self.arguments = {f: [] for f in count}
        self.ops, self.dtypes, self.shapes = Counter(), set(), set()
        self.writes = 0                      # ops that write into a tensor they were given (in place)

    def record(self, f, frame):
        self.calls[f] += 1
        self.arguments[f].append(dict(frame.f_locals))

    def __enter__(self):
        watch = self

        class Ops(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                watch.ops[func.overloadpacket.__name__.rstrip("_")] += 1
                watch.writes += func._schema.is_mutable
                for t in out if isinstance(out, (tuple, list)) else (out,):
                    if isinstance(t, torch.Tensor):
                        watch.dtypes.add(t.dtype)
                        watch.shapes.add(tuple(t.shape))
                return out

        self._mode = Ops()
        self._mode.__enter__()
        self._token = _WATCH.set(self)
        return self

    def __exit__(self, *exc):
        _WATCH.reset(self._token)
        self._mode.__exit__(*exc)
        return False

    @property
    def num_ops(self):
        return sum(self.ops.values())

    def verdict(self, task, name="your function"):
        """Wrong if a forbidden op was launched; `task` (a hint) says what the exercise asks instead."""
        used = sorted(set(self.ops) & self.forbid_ops)
        if used:
            raise Wrong(f"{name} runs {', '.join(used)}, which the exercise rules out", hint=task)


class CacheSpy:
    """Stands in for a model: `model(idx, cache)` runs it and counts the token positions it is fed; the
    first call whose cache is not the one the previous call returned is kept as `misuse` (a Wrong with
    `hint`), for the check's part on the cache. `held(cache)` is how many tokens per sequence a cache holds
    (None: not known from the cache; then the spy compares the cache's entries with the last returned ones
    by identity)."""

    def __init__(self, model, hint, held=None):
        self.config = model.config
        self._model = model
        self._held = held
        self._hint = hint
        self.tokens_fed = 0
        self.calls = 0
        self.seen = 0                     # tokens per sequence in the cache the last call returned
        self.returned = None              # the cache the last call returned
        self.misuse = None                # the first call that did not pass the cache back

    def _same_cache(self, cache):
        if self._held is not None:
            return (0 if cache is None else self._held(cache)) == self.seen
        if self.returned is None:
            return cache is None
        return (cache is not None and len(cache) == len(self.returned)
                and all(a is b for a, b in zip(cache, self.returned, strict=True)))

    def __call__(self, idx, cache=None, **kwargs):
        if self.misuse is None and not self._same_cache(cache):
            self.misuse = Wrong(f"call {self.calls + 1} ran the model without a cache after it had seen "
                                f"{self.seen} tokens: the cache was not used" if cache is None else
                                f"call {self.calls + 1} passed a cache that is not the one the previous call "
                                f"returned (the model had seen {self.seen} tokens by then)", hint=self._hint)
        self.calls += 1
        self.tokens_fed += idx.shape[0] * idx.shape[1]
        logits, cache = self._model(idx, cache, **kwargs)
        self.seen = self._held(cache) if self._held is not None else self.seen + idx.shape[1]
        self.returned = cache
        return logits, cache

    forward = __call__
