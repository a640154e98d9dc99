"""Import order does not matter: a script or notebook may import triton, or flash-linear-attention (which
imports triton), before kimik3_lessons, and the kernels still run (in the interpreter on a CPU). Each case
runs in a fresh interpreter, because the first import of triton is what decides."""

import subprocess
import sys

import pytest
import torch

from kimik3_lessons import mixers

CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU, Triton compiles: no interpreter")
RUN_KERNELS = """
import torch
from kimik3_lessons import deltanet, kda, lab, linear_attention, moe
torch.manual_seed(0)
q, k, v = (torch.randn(1, 2, 37, 16) for _ in range(3))
k = torch.nn.functional.normalize(k, dim=-1)
beta, g = torch.rand(1, 2, 37), -torch.rand(1, 2, 37, 16)
pairs = [(linear_attention.recurrent(q, k, v), linear_attention.triton_chunked(q, k, v, chunk_size=16)),
         (deltanet.recurrent(q, k, v, beta), deltanet.triton_chunked(q, k, v, beta, chunk_size=16)),
         (kda.recurrent(q, k, v, g, beta), kda.triton_chunked(q, k, v, g, beta, chunk_size=16))]
for (o_ref, _), (o, _) in pairs:
    lab.check_close("triton_chunked vs recurrent", o_ref, o, rtol=1e-4)
x = torch.randn(1000)
lab.check_close("situ_triton vs situ", moe.situ(x, x), moe.situ_triton(x, x), rtol=1e-5)
print("kernels ok")
"""


@CPU_ONLY
@pytest.mark.parametrize("first", [
    "",                                                          # the package first: the usual order
    "import triton\nimport triton.language as tl\n",             # triton first
    "import warnings\nwarnings.simplefilter('ignore')\nimport fla.ops.kda.naive\n",   # the reference library
])
def test_kernels_run_whatever_was_imported_first(first):
    done = subprocess.run([sys.executable, "-c", first + RUN_KERNELS], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and "kernels ok" in done.stdout, done.stderr[-3000:]


@CPU_ONLY
def test_a_triton_that_cannot_be_switched_says_what_to_do():
    """If the switch to the interpreter fails (here: a Triton without the class it needs), importing the
    package raises a RuntimeError that names the fix, instead of kernels failing later with a riddle."""
    script = """
import triton, triton.language
import triton.runtime.interpreter as interpreter
del interpreter.InterpretedFunction          # stands in for a Triton whose internals moved
try:
    import kimik3_lessons
except RuntimeError as err:
    print(err)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "import kimik3_lessons before triton" in done.stdout, done.stdout + done.stderr[-2000:]
    assert "TRITON_INTERPRET=1" in done.stdout



def test_the_pytorch_modules_do_not_import_triton():
    """The PyTorch contract (and the lessons that need only its compute_dtype) stand without Triton: the
    kernels and their launcher are `chunk_kernels`."""
    code = ("import sys\nfrom kimik3_lessons import attnres, contract, gpt2, mla  # noqa: F401\n"
            "print(sorted(name for name in sys.modules if name.split('.')[0] == 'triton')[:3])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", f"importing the PyTorch modules imported {done.stdout.strip()}"


# The lesson each lesson module is built in (docs/design.md, "Lessons and modules"): a mixer's from its
# declaration (`Mixer.lesson`, the one place it is written), the others here. The recall task and its
# training loop are lesson 11's, which trains the tiny KimiK3 on them before lesson 12 trains every mixer.
LESSON_OF = {"gpt2": "01", "associative_memory": "04", "kimi_linear": "07b", "mla": "08", "moe": "09a",
             "attnres": "10", "kimik3": "11", "recall_task": "11", "recall_training": "11", "mqar": "12",
             "backward": "13", **{m.name: m.lesson for m in mixers.MIXERS.values()}}


def package_imports(module):
    """The kimik3_lessons modules `module` imports, at any depth of its source (names, not attributes); a
    subpackage's (lesson 13's `backward`) from every module in it, its own modules left out."""
    import ast
    from pathlib import Path
    package = Path(__file__).parent.parent / "kimik3_lessons"
    is_package = (package / module).is_dir()
    files = sorted((package / module).rglob("*.py")) if is_package else [package / f"{module}.py"]
    found = set()
    for node in (node for path in files for node in ast.walk(ast.parse(path.read_text()))):
        if isinstance(node, ast.ImportFrom) and node.module == "kimik3_lessons":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kimik3_lessons."):
            found.add(node.module.split(".")[1])
    return found - {module}


def test_a_lesson_module_imports_no_later_lesson():
    """A lesson module may reuse what an earlier lesson taught, never a later one (lesson 07a's `kda`
    cannot import lesson 07b's `kimi_linear`). docs/design.md names every module of the map."""
    from pathlib import Path
    later = {(module, imported) for module, lesson in LESSON_OF.items()
             for imported in package_imports(module) if LESSON_OF.get(imported, "") > lesson}
    assert not later, f"lesson modules importing a later lesson's module: {sorted(later)}"
    design = (Path(__file__).parent.parent / "docs" / "design.md").read_text()
    assert all(f"`{module}`" in design for module in LESSON_OF), "docs/design.md's lesson map"
