"""tools/ is a package: its modules import each other as `from tools import ...`, with no import cycle
(counting the imports inside functions), nothing anywhere puts tools/ on `sys.path` or loads one of its
files by path, and each of its command lines runs as `python -m tools.<name>` from the repository's root.
The cycle check is shown to find the cycle that once joined the student edition and the translations."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"


def module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules():
    return {module_name(path): path for path in sorted(TOOLS.rglob("*.py"))}


def imports_of(path, known):
    """The modules of `known` that the module at `path` imports, anywhere in it (a function's own imports
    included): `from tools import x`, `from tools.x import name`, `import tools.x`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name in known}


def import_graph():
    known = modules()
    return {name: imports_of(path, known) - {name} for name, path in known.items()}


def cycle_in(graph):
    """One import cycle of `graph` ({module: modules it imports}) as a list [a, b, ..., a], or None. A
    package's import of its own modules is not a cycle (its __init__ runs before them)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other.startswith(node + "."):
                continue
            if state.get(other) == "open":
                return stack[stack.index(other):] + [other]
            if other not in state and (found := visit(other)):
                return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_tools_import_each_other_without_a_cycle():
    graph = import_graph()
    assert cycle_in(graph) is None, " -> ".join(cycle_in(graph))
    if "tools.student_edition" in graph and "tools.translations.catalogs" in graph:
        assert "tools.student_edition" in graph["tools.translations.catalogs"]   # the edge read as it is
        spoiled = {name: set(edges) for name, edges in graph.items()}
        spoiled["tools.translations.editions"].add("tools.student_edition")   # the old cycle, put back
        assert cycle_in(spoiled) is not None


def test_nothing_puts_tools_on_sys_path_or_loads_it_by_path():
    edits = re.compile(r"sys\.path\.(insert|append)\([^\n]*tools|spec_from_file_location\([^\n]*tools")
    found = [f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}"
             for folder in ("tools", "tests", "hub_tests", "site", "site_tests", "browser_tests",
                            "benchmarks")
             for path in sorted((ROOT / folder).rglob("*.py")) if path != Path(__file__)
             for text in [path.read_text()] for m in edits.finditer(text)]
    found += [f"{p.relative_to(ROOT)}:{node.lineno}: sys.path" for p in sorted(TOOLS.rglob("*.py"))
              for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.Attribute)
              and node.attr == "path" and getattr(node.value, "id", None) == "sys"]
    assert not found, found
    assert edits.search('sys.path.insert(0, str(ROOT / "tools"))')     # what the check looks for


@pytest.mark.parametrize("name", [name for name, path in modules().items()
                                  if 'if __name__ == "__main__"' in path.read_text()])
def test_each_tool_runs_as_a_module_from_the_root(name):
    if name.startswith("tools.translations"):
        pytest.importorskip("babel", reason="the translations need the docs extra")
    name = name.removesuffix(".__main__")
    done = subprocess.run([sys.executable, "-m", name, "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr[-2000:]
