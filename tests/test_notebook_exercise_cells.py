"""The exercise cells of the lessons.

The root conftest.py makes `pytest --nbval-lax` fail a lesson whose exercise check does not say "not
attempted yet": a solution that leaked into a lesson is caught (negative control), a stub passes. And no
lesson prints the code of an exercise's answer before the exercise's check (the listing comes after it,
as "the module's version")."""

import ast
import importlib
import inspect
import pkgutil
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

import kimik3_lessons

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = str(ROOT / "solutions" / "03_chunkwise.py")


def lesson(tmp_path, body):
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from kimik3_lessons import lab"), nbformat.v4.new_code_cell(body),
                nbformat.v4.new_code_cell('lab.exercise("03.1", chunked_loop)')]
    nbformat.write(nb, tmp_path / "lesson.ipynb")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
               "--nbval-current-env", "lesson.ipynb"]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("body, passes", [
    ("def chunked_loop(q, k, v, chunk_size, initial_state):\n    raise NotImplementedError", True),
    ("import importlib.util\n"
     f"spec = importlib.util.spec_from_file_location('s', {SOLUTION!r})\n"
     "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
     "chunked_loop = m.chunked_loop", False),                                        # the solution leaked
    ("def chunked_loop(q, k, v, chunk_size, initial_state):\n    return q, q", False),  # wrong: ❌, not ⬜
])
def test_an_exercise_cell_must_say_not_attempted(tmp_path, body, passes):
    done = lesson(tmp_path, body)
    assert (done.returncode == 0) == passes, done.stdout[-2000:]
    if not passes:
        assert "not attempted yet" in done.stdout


# ---------------------------------------------------------------------------------------------------
# No answer before its exercise: no cell before an exercise's check prints the source of a package
# function that computes what the exercise asks for (same inputs, same result). Each such listing comes
# after the check, as "the module's version".

# The package's counterparts of an exercise that its lesson lists as "the module's version" after the
# check ("module.function", "module.Class.method"; a Triton helper by its name, its Python source is
# `.fn`): none may be listed before the check. (An exercise not named here lists none; every exercise's
# forbid list, kimik3_lessons/exercises, is what its check refuses.)
ANSWERS = {
    "01.2": ("gpt2.GPT.generate",),
    "05a.2": ("deltanet.wy_representation",),
    "05b.1": ("deltanet.chunk_state_scan",), "05b.3": ("deltanet.forward_substitution_tile",),
    "06.1": ("gated_deltanet.decay_mask",),
    "07a.1": ("kda.decayed_scores", "kda.decayed_scores_tile"),
    "07b.2": ("kimi_linear.KDAConfig.state_numbers",),
    "08.1": ("mla.MultiHeadLatentAttention.attend_absorbed",),
    "09a.1": ("moe.LatentMoE.forward",),
    "09b.2": ("moe._tanh", "moe.situ_kernel"),
    "10.1": ("attnres.attn_res",), "10.2": ("attnres.BlockSums",),
    "11.1": ("kimik3.layer_kinds",),
    "12.1": ("mqar.mqar_layout",), "12.2": ("mqar.query_distances",), "12.3": ("mqar.state_numbers",),
}
# Listings that come before an exercise on purpose: the lesson's subject, of which the exercise asks for
# another form. The exercise's check verifies that form (the method), so the listing is no answer to copy.
OTHER_FORM = {
    "03.1": ("linear_attention.chunked", "the states by one cumsum; the exercise is the loop over chunks"),
    "03.3": ("linear_attention.linear_attention_intra_chunk_kernel", "the kernel the exercise reproduces "
             "in PyTorch, as a [B, H, T, C] tensor"),
    "04.2": ("associative_memory.delta_write", "S + beta k^T (v - kS); the exercise builds I - beta k^T k"),
    "05a.1": ("deltanet.forward_substitution", "appends rows; the exercise overwrites one buffer in place"),
}


def _package_object(dotted):
    module, *attributes = dotted.split(".")
    obj = importlib.import_module(f"kimik3_lessons.{module}")
    for name in attributes:
        obj = getattr(obj, name)
    obj = getattr(obj, "fget", obj)                                    # a property: its getter
    return getattr(obj, "fn", obj)                                     # a Triton function: its Python source


def _listing_head(obj):
    """The first two lines of obj's source as `print(inspect.getsource(obj))` prints them."""
    lines = textwrap.dedent(inspect.getsource(obj)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(("def ", "class ")))
    return "\n".join(lines[start:start + 2])


def _getsource_targets(source, namespace):
    """The objects whose source a code cell prints: every `getsource(X)`, with X an expression of the
    package's modules, a name bound by a `for` over such expressions, or a name assigned one."""
    tree = ast.parse(TransformerManager().transform_cell(source))      # magics become plain calls
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            elts = node.iter.elts if isinstance(node.iter, (ast.Tuple, ast.List)) else [node.iter]
            bound.setdefault(node.target.id, []).extend(elts)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(node.value)
    found = []
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        if getattr(func, "attr", getattr(func, "id", "")) == "getsource":
            for arg in node.args[:1]:
                expressions = bound.get(arg.id, []) if isinstance(arg, ast.Name) else [arg]
                for expression in expressions:
                    try:
                        obj = eval(compile(ast.Expression(expression), "<cell>", "eval"), dict(namespace))
                    except Exception:  # not an expression of the package alone (a local, a loop variable)
                        continue
                    found.append(getattr(getattr(obj, "fget", obj), "fn", getattr(obj, "fget", obj)))
    return found


def answers_shown_early(nb):
    """[(exercise id, "module.function", cell index)] for every listing of an exercise's answer in a cell
    before the exercise's check: found in the code (getsource of it) or in the printed outputs."""
    namespace = {m.name: importlib.import_module(f"kimik3_lessons.{m.name}")
                 for m in pkgutil.iter_modules(kimik3_lessons.__path__) if m.name not in ("__main__",)}
    checks = {}
    for index, cell in enumerate(nb.cells):
        found = re.match(r'lab\.exercise\("([\w.]+)"', cell.source) if cell.cell_type == "code" else None
        if found:
            checks.setdefault(found[1], index)
    early = []
    for exercise_id, check_index in checks.items():
        for dotted in ANSWERS.get(exercise_id, ()):
            obj, head = _package_object(dotted), _listing_head(_package_object(dotted))
            for index, cell in enumerate(nb.cells[:check_index]):
                if cell.cell_type != "code":
                    continue
                printed = "".join(o.get("text", "") for o in cell.get("outputs", []))
                listed = any(target is obj for target in _getsource_targets(cell.source, namespace))
                if listed or head in printed:
                    early.append((exercise_id, dotted, index))
    return early


def test_every_counterpart_named_exists():
    from kimik3_lessons import exercises
    assert set(ANSWERS) <= set(exercises.all_ids())
    for dotted in [d for names in ANSWERS.values() for d in names] + [d for d, _ in OTHER_FORM.values()]:
        _listing_head(_package_object(dotted))          # every name still exists and has a source


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_no_answer_is_printed_before_its_exercise(name):
    early = answers_shown_early(nbformat.read(ROOT / "notebooks" / name, as_version=4))
    assert not early, [f"cell {i} shows {dotted}, the answer of {e}, before its check"
                       for e, dotted, i in early]


def test_a_listing_before_the_check_is_caught():
    """Negative control: the listing moved back before the check, by code and by output."""
    listing = nbformat.v4.new_code_cell("print(inspect.getsource(deltanet.wy_representation))")
    by_loop = nbformat.v4.new_code_cell("for fn in (deltanet.chunked, deltanet.wy_representation):\n"
                                        "    print(inspect.getsource(fn))")
    by_output = nbformat.v4.new_code_cell("show(wy)", outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text=_listing_head(_package_object("deltanet.wy_representation")))])
    check = nbformat.v4.new_code_cell('lab.exercise("05a.2", wy_form)')
    for cell in (listing, by_loop, by_output):
        nb = nbformat.v4.new_notebook(cells=[cell, check])
        assert answers_shown_early(nb) == [("05a.2", "deltanet.wy_representation", 0)]
        assert answers_shown_early(nbformat.v4.new_notebook(cells=[check, cell])) == []
