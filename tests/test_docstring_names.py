"""Every name a docstring puts in backquotes exists: a renamed or removed function leaves no stale mention.

A docstring's `name` or `module.name` is read as code. A dotted name whose head is one of the package's
modules (or torch, triton, numpy, fla) must resolve attribute by attribute; a plain name must be defined
somewhere in the code this test reads (a function, class, argument, variable or attribute), be a builtin,
or be one of the package's modules. Backquoted equations (`o_t = q_t S_t`) and shapes are not names and
are not read.
"""

import ast
import builtins
import importlib
import keyword
import math
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("kimik3_lessons/**/*.py"), *ROOT.glob("tools/**/*.py"),
                  *ROOT.glob("benchmarks/*.py")])
# The exercise kit's modules, named alone in its docstrings (`registry`, `runner`): {name: module}.
KIT_MODULES = {p.stem: f"kimik3_lessons.exercises.{p.stem}"
               for p in ROOT.glob("kimik3_lessons/exercises/*.py") if p.stem != "__init__"}
PACKAGE_MODULES = ({p.stem for p in ROOT.glob("kimik3_lessons/*.py")} | set(KIT_MODULES)
                   | {p.parent.name for p in ROOT.glob("kimik3_lessons/*/__init__.py")} | {"kimik3_lessons"})
LIBRARIES = {"torch", "triton", "tl", "np", "numpy", "fla", "nbformat", "matplotlib", "plt", "F", "nn"}
NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
MATH = re.compile(r"[A-Za-z]{1,2}_[A-Za-z0-9]{1,2}")   # a subscripted symbol: `w_l`, `b_0`, `G_C`
FILE = re.compile(r"[\w/.-]+\.(py|md|json|ipynb|png|toml|yml)")


def docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield node, text


def defined_names(trees):
    """Every identifier the code defines or binds: functions, classes, arguments, targets, attributes."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)   # dict keys and string-named options ("intra", "ieee")
    return names


def backquoted_names(text):
    """The backquoted spans of `text` that are names: `f`, `mod.f`, `f()` or `f(x, y)` (the callee)."""
    for span in re.findall(r"`([^`\n]+)`", text):
        head = span.split("(", 1)[0].strip() if span.endswith(")") else span.strip()
        if FILE.fullmatch(head) or MATH.fullmatch(head) or "NN" in head:
            continue   # a file (checked by `backquoted_files`), a symbol, or a placeholder (`NN_name`)
        if NAME.fullmatch(head) and not keyword.iskeyword(head):
            yield head


def backquoted_files(text):
    """The backquoted spans of `text` that name a file of the repository (`contract.py`, `docs/facts.md`)."""
    for span in re.findall(r"`([^`\n]+)`", text):
        if FILE.fullmatch(span.strip()) and "NN" not in span:
            yield span.strip()


def file_exists(name, source):
    """`name` relative to the repository, the folder of the file that mentions it, or a tracked file
    whose path ends in `name` (`index.md` of the site's sources)."""
    if (ROOT / name).exists() or (source.parent / name).exists():
        return True
    return any(path.as_posix().endswith("/" + name) for path in repository_files())


def repository_files():
    """The repository's own files: everything but hidden folders, builds and caches (a checkout or an
    edition, git or not)."""
    skip = {"build", "dist", "__pycache__", "node_modules"}
    files = []
    for folder, subfolders, names in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in skip]
        files += [Path(folder) / name for name in names]
    return files


def from_transformers(name):
    """Hugging Face's classes a converter names (`GPT2LMHeadModel`, `Conv1D`)."""
    for module in ("transformers", "transformers.pytorch_utils"):
        try:
            if hasattr(importlib.import_module(module), name):
                return True
        except ImportError:
            return False
    return False


def resolve(dotted):
    """Import the head (a package module or a library) and walk the attributes; False where one is missing."""
    head, *rest = dotted.split(".")
    aliases = {"tl": "triton.language", "np": "numpy", "plt": "matplotlib.pyplot", "F": "torch.nn.functional",
               "nn": "torch.nn", "exercises": "kimik3_lessons.exercises", "kimik3_lessons": "kimik3_lessons"}
    module_name = aliases.get(head) or KIT_MODULES.get(head) or (
        f"kimik3_lessons.{head}" if head in PACKAGE_MODULES else head)
    obj = importlib.import_module(module_name)
    for i, part in enumerate(rest):
        if not hasattr(obj, part):
            try:    # a submodule not imported by its package (`fla.ops.kda.naive`)
                obj = importlib.import_module(".".join([module_name, *rest[:i + 1]]))
            except ImportError:
                return False
        else:
            obj = getattr(obj, part)
    return True


def stale_names():
    trees = {path: ast.parse(path.read_text(), filename=str(path)) for path in SOURCES}
    known = defined_names(trees.values()) | set(dir(builtins)) | set(dir(math)) | PACKAGE_MODULES | LIBRARIES
    stale = []
    for path, tree in trees.items():
        for node, text in docstrings(tree):
            for name in backquoted_names(text):
                head = name.split(".")[0]
                if head in PACKAGE_MODULES or head in LIBRARIES:
                    ok = resolve(name)
                else:
                    ok = head in known or from_transformers(head)
                if not ok:
                    where = getattr(node, "name", "module")
                    stale.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)} ({where}): `{name}`")
            for name in backquoted_files(text):
                if not file_exists(name, path):
                    stale.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}: no file `{name}`")
    return stale


def test_every_backquoted_name_in_a_docstring_exists():
    stale = stale_names()
    assert not stale, "docstrings name things that do not exist:\n" + "\n".join(stale)


@pytest.mark.parametrize("text, expected", [
    ("calls `contract.no_such_kernel` in turn", ["contract.no_such_kernel"]),
    ("reads `o_t = q_t S_t` and `[B, H, T, K]`", []),
    ("see `lab.check_close(name, ref, out)`", ["lab.check_close"]),
    ("writes `NN_name.png` with `w_l` in `docs/facts.md`", []),
])
def test_the_reader_finds_names_and_skips_equations(text, expected):
    assert list(backquoted_names(text)) == expected


def test_a_missing_name_is_reported():
    assert resolve("lab.check_close")
    assert not resolve("lab.no_such_function")
    assert not resolve("contract.chunk_walk_kernel")
    assert file_exists("docs/facts.md", ROOT / "tests" / "x.py")
    assert not file_exists("NO_SUCH_NOTE.md", ROOT / "kimik3_lessons" / "contract.py")
