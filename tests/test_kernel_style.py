"""The kernels and their helpers keep one layout and one naming rule (written where `chunk_kernels` begins):
every @triton.jit function of the package takes one argument per line, in commented groups in a fixed
order; its compile-time arguments are UPPER CASE; a helper of more than one argument is called by keyword;
no name mixes the two cases that tell a pointer or index (lowercase) from a tile (Capitalized)."""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "kimik3_lessons"
GROUPS = ("pointers", "indices", "tiles", "sizes", "scalars", "switches")   # in this order
TILE_MAKERS = {"dot", "zeros", "trans"}          # tl.<these>(...) make a tile


def jit_functions(source):
    """{name: ast.FunctionDef} of the @triton.jit functions of a module's source."""
    return {node.name: node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)
            and any(ast.unparse(d) in ("triton.jit", "jit") for d in node.decorator_list)}


def modules():
    """{dotted module name: source} of the package's modules, subpackages included (the exercise kit's
    kernels are a student's stubs and keep the exercise's own form)."""
    return {str(path.relative_to(PACKAGE).with_suffix("")).replace("/", "."): path.read_text()
            for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE).parts[0] != "exercises"}


def all_jit_functions():
    return {f"{module}.{name}": (source, fn) for module, source in modules().items()
            for name, fn in jit_functions(source).items()}


JIT = all_jit_functions()
HELPERS = {key.rpartition(".")[2] for key in JIT}


def layout_problems(source, fn):
    """What breaks the layout rule in the signature of `fn`: a list of messages."""
    args = fn.args.args
    if len(args) < 2:
        return []
    lines = source.splitlines()
    problems = [f"{a.arg} shares line {a.lineno} with another argument or the def"
                for a in args if a.lineno == fn.lineno or sum(b.lineno == a.lineno for b in args) > 1]
    groups, previous = [], fn.lineno
    for a in args:
        comments = [line.strip() for line in lines[previous:a.lineno - 1] if line.strip().startswith("#")]
        for comment in comments:
            word = comment.lstrip("# ").split(":")[0].split()[0]
            if word not in GROUPS:
                problems.append(f"group comment {comment!r} is none of {GROUPS}")
            else:
                groups.append(word)
        if a is args[0] and not comments:
            problems.append(f"the first argument, {a.arg}, has no group comment above it")
        previous = a.lineno
    order = [GROUPS.index(g) for g in groups]
    if order != sorted(order):
        problems.append(f"groups {groups} are not in the order {GROUPS}")
    constexprs = [a.arg for a in args if a.annotation and "constexpr" in ast.unparse(a.annotation)]
    problems += [f"compile-time argument {name} is not UPPER CASE"
                 for name in constexprs if name != name.upper()]
    return problems


def call_problems(fn):
    """Calls of the package's jit helpers with more than one argument that pass any positionally."""
    found = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in HELPERS and node.args and len(node.args) + len(node.keywords) > 1:
                found.append(f"line {node.lineno}: {ast.unparse(node)[:80]} passes arguments by position")
    return found


def name_problems(fn, gradients=False):
    """Names that mix the cases (a lowercase start with a capital later: dS_top), and tiles (what tl.dot,
    tl.zeros or a helper returns) held by a lowercase name. With `gradients` (the backward's kernels), a
    d-prefix names a gradient and is read past: dS_top is the tile of S_top's gradient, da the pointer
    of a's; a lowercase tile is still one (da = tl.zeros(...))."""
    found = []
    if gradients:
        def bare(name):
            return name[1:] if re.match(r"^d[A-Z]", name) else name
    else:
        def bare(name):
            return name
    names = {a.arg for a in fn.args.args}
    for node in ast.walk(fn):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Name):
                names.add(target.id)
                value = node.value
                if not isinstance(value, ast.Call):
                    continue
                func = value.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if (called in TILE_MAKERS or called in HELPERS) and bare(target.id)[0].islower():
                    found.append(f"{target.id} holds a tile ({called}(...)) but is lowercase")
    found += [f"{name} mixes a lowercase start with capitals" for name in sorted(names)
              if re.match(r"^[a-z].*[A-Z]", bare(name))]
    return found


@pytest.mark.parametrize("key", sorted(JIT))
def test_every_kernel_and_helper_keeps_the_layout_and_naming_rule(key):
    source, fn = JIT[key]
    gradients = key.startswith("backward.")          # the backward's kernels: a d-prefix names a gradient
    problems = layout_problems(source, fn) + call_problems(fn) + name_problems(fn, gradients)
    assert not problems, f"{key}:\n  " + "\n  ".join(problems)


def test_the_rule_fails_what_it_should():
    """A negative control: a helper written the old way (arguments on one line, no groups, called by
    position, a lowercase tile, a mixed-case name) is named on every count."""
    bad = '''
import triton
import triton.language as tl


@triton.jit
def helper(x, t, T, c: tl.constexpr):
    dS_top = tl.zeros([c, c], dtype=tl.float32)
    return dS_top


@triton.jit
def kernel(
    # pointers
    x,
    # switches
    C: tl.constexpr,
    # sizes
    T,
):
    acc = helper(x, 0, T, C)
'''
    fns = jit_functions(bad)
    HELPERS.add("helper")
    try:
        helper, kernel = layout_problems(bad, fns["helper"]), layout_problems(bad, fns["kernel"])
        assert any("shares line" in p for p in helper) and any("no group comment" in p for p in helper)
        assert any("not UPPER CASE" in p for p in helper)
        assert any("not in the order" in p for p in kernel)
        assert call_problems(fns["kernel"]) and any("holds a tile" in p for p in name_problems(fns["kernel"]))
        assert any("dS_top mixes" in p for p in name_problems(fns["helper"]))
        gradient = jit_functions("import triton\n@triton.jit\ndef g(x):\n"
                                 "    dS_top = tl.zeros([2], dtype=tl.float32)\n"
                                 "    da = tl.zeros([2], dtype=tl.float32)\n")["g"]
        assert name_problems(gradient, gradients=True) == ["da holds a tile (zeros(...)) but is lowercase"]
    finally:
        HELPERS.discard("helper")


def test_every_kernel_of_the_package_is_checked():
    """The rule covers each module's kernels and helpers: every mixer's module (`mixers.MIXERS`), the shared
    chunk_kernels, moe's SiTU and the backward's kernels, and among them every helper the launcher's kernels
    call."""
    from kimik3_lessons import mixers
    modules = {key.rpartition(".")[0] for key in JIT}
    assert modules == {*mixers.MIXERS, "chunk_kernels.device", "chunk_kernels.shared", "moe",
                       "backward.kernels.device", "backward.kernels.shared", "backward.kernels.intra",
                       "backward.kernels.intra_decay"}
    assert {"load_rows", "store_rows", "dot_rows", "times_state", "wy_slices", "decayed_scores_tile",
            "forward_substitution_tile"} <= HELPERS
