"""The graders' way to check an exercise: the student's function taken out of the notebook and checked
alone, in a fresh process that imports the grader's own copy of the package.

A check run inside the student's kernel (Run All, nbgrader's autograde as it comes) believes whatever the
notebook did before it: a cell that replaces `exercises.run`, the package's reference or a torch function
changes the verdict. Here the verdict depends on the function and what it uses, nothing else:

1. `function_source(cells, name)`: from the notebook's code cells before the check, the statements that
   define `name` and, recursively, the top-level names it uses (imports, functions, classes, plain
   assignments), in notebook order. Nothing else of the notebook runs: a patch in another cell is not
   taken along.
2. `check(sources)`: one worker process (`python -I -m kimik3_lessons.exercises.isolation`, in an empty
   folder: no file beside the submission can stand in for the package) imports the package, then runs each
   exercise in a child process of its own: the statements, then the course's check with hints off. Each
   child is watched (`Guard`): if the student's statements or function change a function of the package,
   of the checks, of torch or of Python's own modules, or torch's global settings, the answer is refused.
   A child that runs past the time limit or dies gives that exercise no points, with the reason.
"""

import ast
import builtins
import json
import multiprocessing
import os
import subprocess
import symtable
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

TIMEOUT = 300                       # seconds one exercise's check may take, the student's function included
# Triton is not watched: its interpreter rebinds its own language functions while a kernel runs.
WATCHED = ("kimik3_lessons", "torch", "numpy", "builtins", "math", "random", "inspect", "traceback",
           "sys", "os", "functools", "contextlib", "contextvars", "dataclasses", "collections", "zlib",
           "operator", "threading", "copy", "itertools")


# ---------------------------------------------------------------------------------------------------
# 1. The function out of the notebook


@dataclass(frozen=True)
class Source:
    """What a notebook defines for one exercise: its statements [(cell number, first line, text)] in
    notebook order, or why none could be taken (`problem`)."""
    name: str
    statements: tuple = ()
    problem: str = ""


def _python(cell_source):
    """A code cell as Python: IPython's magics and shell escapes become the calls IPython makes of them."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return cell_source
    return TransformerManager().transform_cell(cell_source)


def _bound(node):
    """The names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _used(text):
    """(names the statement reads from the notebook when it runs, names its functions read from it when
    they are called): the free global names of every scope, by Python's own symbol tables."""
    now, later = set(), set()

    def walk(table, deferred):
        for symbol in table.get_symbols():
            if table.get_type() == "module":
                if symbol.is_referenced():
                    now.add(symbol.get_name())
            elif symbol.is_global() and symbol.is_referenced():
                (later if deferred else now).add(symbol.get_name())
        for child in table.get_children():
            comprehension = child.get_name() in ("listcomp", "setcomp", "dictcomp", "genexpr")
            walk(child, deferred or (child.get_type() == "function" and not comprehension))

    walk(symtable.symtable(text, "<cell>", "exec"), False)
    return now, later


# What an exercise's function has no need of, and what would let it reach into the grader that checks it (its
# frames, its pipe, Python's internals): code that uses any of it is refused before it runs.
BLOCKED_MODULES = {"os", "sys", "gc", "ctypes", "inspect", "subprocess", "multiprocessing", "threading",
                   "signal", "socket", "importlib", "builtins", "io", "pickle", "marshal", "shutil",
                   "pathlib", "types", "code", "codeop", "runpy", "atexit", "faulthandler", "tracemalloc"}
BLOCKED_NAMES = {"exec", "eval", "compile", "__import__", "open", "globals", "locals", "vars", "getattr",
                 "setattr", "delattr", "breakpoint", "input", "__builtins__", "__loader__", "__spec__",
                 "exit", "quit"}
FRAME_ATTRIBUTES = {"f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "tb_frame",
                    "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "co_code",
                    "co_consts", "_getframe", "_exit", "setprofile", "settrace"}
ALLOWED_DUNDERS = {"__init__", "__call__", "__name__", "__len__", "__getitem__", "__setitem__", "__iter__",
                   "__next__", "__repr__", "__str__", "__eq__", "__add__", "__mul__", "__matmul__"}


def _reaching(text):
    """What a statement uses that is blocked (a module, a name, an attribute), or None."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            names = []
        for name in names:
            if name.split(".")[0] in BLOCKED_MODULES or name in BLOCKED_MODULES or \
                    name.startswith("kimik3_lessons.exercises"):
                return f"`import {name}`"
        if isinstance(node, ast.Name) and node.id in BLOCKED_NAMES:
            return f"`{node.id}`"
        if isinstance(node, ast.Attribute):
            attr = node.attr
            if (attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS) or \
                    attr in FRAME_ATTRIBUTES or attr in BLOCKED_MODULES or attr == "ctypeslib":
                return f"`.{attr}`"
    return None


SIMPLE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Assign,
          ast.AnnAssign, ast.AugAssign)


def function_source(cells, name):
    """The statements of `cells` (the notebook's code cells before the check, in order) that define `name`
    and everything it uses: a Source."""
    top = []                                            # (cell, node, text) of every top-level statement
    for number, cell in enumerate(cells, start=1):
        text = _python(cell)
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue                                    # a cell that does not parse defines nothing here
        lines = text.splitlines()
        for node in tree.body:
            top.append((number, node, "\n".join(lines[node.lineno - 1:node.end_lineno])))

    def binding(wanted, before):
        """The index of the last top-level statement before `before` that binds `wanted`, or None."""
        for i in range(before - 1, -1, -1):
            if wanted in _bound_any(top[i][1]):
                return i
        return None

    def _bound_any(node):
        if isinstance(node, SIMPLE):
            return _bound(node)
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | \
            {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}

    end = len(top)
    first = binding(name, end)
    if first is None:
        return Source(name, problem=f"the notebook defines no `{name}` before the check")
    chosen, queue = set(), [(name, end)]
    while queue:
        wanted, before = queue.pop()
        i = binding(wanted, before)
        if i is None or i in chosen:
            continue
        number, node, _ = top[i]
        if not isinstance(node, SIMPLE):
            kind = type(node).__name__.lower()
            return Source(name, problem=f"`{wanted}`, which `{name}` uses, is set inside a `{kind}` block in "
                                        f"cell {number}: define it at the top level of a cell, or inside "
                                        f"`{name}`")
        chosen.add(i)
        now, later = _used(top[i][2])
        queue += [(n, i) for n in now] + [(n, end) for n in later]
        if isinstance(node, ast.AugAssign):
            queue.append((next(iter(_bound(node))), i))
    statements = tuple((top[i][0], top[i][1].lineno, top[i][2]) for i in sorted(chosen))
    for number, _, text in statements:
        reached = _reaching(text)
        if reached:
            return Source(name, problem=f"refused: cell {number} uses {reached}, which an exercise's "
                                        f"function has no need of (it could reach into the grader itself)")
    return Source(name, statements)


# ---------------------------------------------------------------------------------------------------
# 2. The watch on what the student's code may not change


class Guard:
    """What the checks stand on, recorded before the student's code runs: every attribute of the package's
    modules and classes, the public attributes of the public modules of torch, numpy and the standard
    library the checks use (their private state changes as they run: caches, registries), every attribute of
    torch's tensor and module classes, the profile and trace hooks, the threads, torch's global settings.
    `changes()` names what differs now."""

    def __init__(self):
        import torch
        self.torch = torch
        self.modules = {name: (module, {key: value for key, value in vars(module).items()
                                        if own or not key.startswith("_")})
                        for name, module in list(sys.modules.items())
                        for own in [name.split(".")[0] == "kimik3_lessons"]
                        if module is not None and name.split(".")[0] in WATCHED
                        and (own or not any(part.startswith("_") for part in name.split(".")))}
        classes = {torch.Tensor, torch._C.TensorBase, torch.nn.Module, torch.nn.Parameter,
                   torch.autograd.Function}
        for name, (_, namespace) in self.modules.items():
            if name.startswith("kimik3_lessons"):
                classes |= {v for v in namespace.values() if isinstance(v, type) and v.__module__ == name}
        self.classes = {cls: dict(vars(cls)) for cls in classes}
        self.hooks = (sys.getprofile(), sys.gettrace(), tuple(sys.meta_path), tuple(sys.path_hooks))
        self.threads = threading.active_count()
        self.settings = self._settings()

    def _settings(self):
        torch = self.torch
        return {"default dtype": torch.get_default_dtype(), "grad mode": torch.is_grad_enabled(),
                "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
                "float32 matmul precision": torch.get_float32_matmul_precision(),
                "torch function modes": torch._C._len_torch_function_stack(),
                "dispatch modes": len(torch.utils._python_dispatch._get_current_dispatch_mode_stack())}

    def changes(self):
        found = []
        for name, (module, before) in self.modules.items():
            now = vars(module)
            found += [f"{name}.{key}" for key, value in before.items()
                      if key not in now or now[key] is not value]
        for cls, before in self.classes.items():            # a class's new attribute shadows its base's
            now = vars(cls)
            found += [f"{cls.__module__}.{cls.__qualname__}.{key}" for key in before.keys() | now.keys()
                      if key not in now or key not in before or now[key] is not before[key]]
        hooks = (sys.getprofile(), sys.gettrace(), tuple(sys.meta_path), tuple(sys.path_hooks))
        if hooks != self.hooks:
            found.append("the profile, trace or import hooks")
        if threading.active_count() != self.threads:
            found.append("the threads running (it starts one)")
        settings = self._settings()
        found += [f"torch's {key}" for key in settings if settings[key] != self.settings[key]]
        return found


# ---------------------------------------------------------------------------------------------------
# 3. The worker: one child process per exercise


def _run_statements(source):
    """Execute the statements in a fresh namespace (each compiled with its cell and line, so an error names
    them); return the namespace."""
    import linecache

    namespace = {"__name__": "__main__", "__builtins__": builtins}
    for number, lineno, text in source.statements:
        filename = f"notebook cell {number}"
        lines = ["\n"] * (lineno - 1) + [line + "\n" for line in text.split("\n")]
        linecache.cache[filename] = (len("".join(lines)), None, lines, filename)
        exec(compile("".join(lines), filename, "exec"), namespace)
    return namespace


def _failed(head, why):
    return {"status": "fail", "score": 0.0, "line": f"❌ {head}: {why}"}


def _one(exercise_id, source, connection):
    """In the child: run the statements, check the function, say what the guard saw; send a dict."""
    from kimik3_lessons import exercises
    from kimik3_lessons.exercises.calling import _short

    ex = exercises.get(exercise_id)
    head = f"exercise {ex.id} ({ex.title})"
    guard = Guard()
    try:
        if source.problem:
            result = _failed(head, source.problem)
        else:
            try:
                namespace = _run_statements(source)
            except BaseException as err:              # the student's top-level code failed
                result = _failed(head, f"defining `{ex.name}` failed: {type(err).__name__}: {_short(err)}")
            else:
                verdict = exercises.run(exercise_id, namespace.get(ex.name))
                result = {"status": verdict.status, "line": verdict.line, "score": verdict.score,
                          "parts": verdict.parts}
        changed = guard.changes()
        if changed and "refused" not in result["line"]:
            more = " and more" if len(changed) > 3 else ""
            result = _failed(head, f"refused: your code changes {', '.join(changed[:3])}{more} (the checker, "
                                   f"the package, torch or Python itself), which a function of yours has no "
                                   f"business changing")
    except BaseException as err:                      # noqa: BLE001 (nothing may escape a child)
        result = _failed(head, f"the check failed: {type(err).__name__}")
    connection.send(result)
    connection.close()


def _in_children(todo, timeout, workers):
    """{exercise id: result dict} for [(id, Source)], each in a child process, `workers` at a time."""
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    from kimik3_lessons import exercises

    results, running, waiting = {}, {}, list(todo)
    while waiting or running:
        while waiting and len(running) < workers:
            exercise_id, source = waiting.pop(0)
            exercises.get(exercise_id)                   # its checks imported before the child forks
            receive, send = context.Pipe(duplex=False)
            child = context.Process(target=_one, args=(exercise_id, source, send), daemon=True)
            child.start()
            send.close()
            running[exercise_id] = (child, receive, time.monotonic())
        for exercise_id, (child, receive, started) in list(running.items()):
            ex = exercises.get(exercise_id)
            head = f"exercise {ex.id} ({ex.title})"
            died = None
            if receive.poll(0.05):
                try:
                    results[exercise_id] = receive.recv()
                except EOFError:
                    died = True
            elif not child.is_alive():
                died = True
            elif time.monotonic() - started > timeout:
                child.kill()
                results[exercise_id] = _failed(head, f"ran past the time limit of {timeout} s (an endless "
                                                     f"loop, or far too slow)")
            else:
                continue
            child.join(5)
            if died:
                results[exercise_id] = _failed(head, f"the check's process died (exit code "
                                                     f"{child.exitcode}): out of memory, or a crash in the "
                                                     f"student's code")
            receive.close()
            del running[exercise_id]
    return results


def worker_main():
    """`python -I -m kimik3_lessons.exercises.isolation`: JSON in on stdin ({"timeout", "workers",
    "exercises": [{"id", "name", "statements", "problem"}]}), JSON out on stdout ({"package": its folder,
    "results": {id: {"status", "line", "score"}}})."""
    request = json.loads(sys.stdin.read())
    os.environ["KIMIK3_HINTS"] = "0"
    import torch._dynamo  # noqa: F401 (imported on first use, it rewraps torch.manual_seed: before the guard)

    import kimik3_lessons

    todo = [(e["id"], Source(e["name"], tuple(tuple(s) for s in e["statements"]), e["problem"]))
            for e in request["exercises"]]
    results = _in_children(todo, request["timeout"], request["workers"])
    package = str(Path(kimik3_lessons.__file__).resolve().parent)
    json.dump({"package": package, "results": results}, sys.stdout)


# ---------------------------------------------------------------------------------------------------
# The graders' entry point


def check(sources, timeout=TIMEOUT, workers=1, python=None):
    """{exercise id: {"status", "line", "score"}} for {exercise id: Source}: every exercise checked alone,
    in the worker. A worker that fails (it cannot import the package, or the machine kills it) gives every
    exercise no points, with the reason."""
    import kimik3_lessons

    own = Path(kimik3_lessons.__file__).resolve().parent
    request = {"timeout": timeout, "workers": workers,
               "exercises": [{"id": i, "name": s.name, "statements": s.statements, "problem": s.problem}
                             for i, s in sources.items()]}
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "KIMIK3_"))}
    environment.update(OMP_NUM_THREADS="1", MPLBACKEND="Agg", HF_HUB_OFFLINE="1")
    limit = timeout * (len(sources) // max(workers, 1) + 2) + 120
    with tempfile.TemporaryDirectory() as empty:
        try:
            command = [python or sys.executable, "-I", "-m", "kimik3_lessons.exercises.isolation"]
            done = subprocess.run(command, input=json.dumps(request), capture_output=True, text=True,
                                  cwd=empty, env=environment, timeout=limit)
            answer = json.loads(done.stdout) if done.returncode == 0 else None
            why = f"the grading worker failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}"
        except subprocess.TimeoutExpired:
            answer, why = None, f"the grading worker ran past {limit} s"
        except json.JSONDecodeError:
            answer, why = None, "the grading worker answered no verdicts"
    if answer is not None and Path(answer["package"]) != own:
        answer, why = None, (f"the worker imported the package from {answer['package']}, not the "
                             f"grader's {own}")
    if answer is None:
        return {i: {"status": "fail", "score": 0.0, "line": f"❌ exercise {i}: not graded: {why}"}
                for i in sources}
    return answer["results"]


if __name__ == "__main__":
    worker_main()
