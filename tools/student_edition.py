"""Build the student edition of the course: `make student` (or `python tools/student_edition.py [OUT]`).

The edition is the course a teacher hands out: every lesson with its outputs cleared (the student runs
it), every exercise a stub that raises NotImplementedError, and the solutions left out (solutions/, and
the test of the exercise kit, which needs them), together with the package, the figures the README
shows, the Makefile and a README with a student's quick start. It is ready to zip or push to a class
repository; `make lab` opens it and `make test` checks it (the exercises then say "not attempted yet").

Standard library only, so it runs before the environment exists.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What a student gets, and what stays with the teacher.
KEEP = ["kimik3_lessons", "notebooks", "figures", "tests", "benchmarks", "browser_tests", "tools", "Makefile",
        "conftest.py", "pyproject.toml", "environment.yml", ".gitignore"]
LEAVE_OUT = ["solutions", "tests/test_exercises.py", "tests/test_teaching_guide.py", "docs"]

README = """# kimik3-lessons — student edition

From GPT-2 (2019) to KimiK3 (2026), by running code: one notebook per lesson in `notebooks/`, in order.

## Quick start

```bash
make lab     # first run: creates .venv and installs everything (a few minutes), then opens JupyterLab
```

Open `notebooks/01_gpt2_kv_cache.ipynb` and use *Run > Run All Cells*, or run the cells one by one while
you read. Everything runs on a laptop CPU (each lesson in about a minute); on a machine with an NVIDIA
GPU, or on Colab with a GPU runtime, the cells marked `%%needs gpu` run too (elsewhere they print one
line saying what they would show).

## Exercises

Every lesson ends with exercises. Each is a function whose body is `raise NotImplementedError`, followed
by a check cell such as `lab.exercise("05a.1", forward_substitution_in_place)`. Run the check after you
write your code: it calls your function on fresh random inputs and prints one line,

- ⬜ not attempted yet — the function still raises NotImplementedError;
- ❌ what differs (a shape, the first wrong row, a value) and a hint;
- ✅ your answer, with the error it measured against the course's reference.

A wrong answer never stops the notebook: Run All always reaches the end.

## Checking your machine

`make test` runs the unit tests and every notebook top to bottom (about 10 minutes on 2 cores).
{lessons}
"""


def clear_outputs(path):
    """Strip a notebook's outputs and execution counts (the student runs it), keep everything else."""
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cell.get("metadata", {}).pop("execution", None)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def lesson_list(notebooks):
    """The lessons, one line each, from each notebook's title (its first markdown heading)."""
    lines = ["", "## Lessons", ""]
    for path in notebooks:
        nb = json.loads(path.read_text())
        title = next((line.lstrip("# ").strip() for cell in nb["cells"] if cell["cell_type"] == "markdown"
                      for line in "".join(cell["source"]).splitlines() if line.startswith("# ")), path.stem)
        lines.append(f"- [{title}](notebooks/{path.name})")
    return "\n".join(lines) + "\n"


def build(out):
    """Write the student edition into `out` (emptied first); return the list of notebooks written."""
    out = Path(out).resolve()
    if out == ROOT or ROOT in out.parents and out.parts[len(ROOT.parts)] not in ("build",):
        raise ValueError(f"refusing to write the student edition inside the course at {out}: use build/...")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.egg-info", ".pytest_cache")
    for name in KEEP:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, out / name)
    for name in LEAVE_OUT:
        target = out / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    notebooks = sorted((out / "notebooks").glob("*.ipynb"))
    for path in notebooks:
        clear_outputs(path)
    (out / "README.md").write_text(README.format(lessons=lesson_list(notebooks)))
    return notebooks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default=str(ROOT / "build" / "student"))
    args = parser.parse_args(argv)
    notebooks = build(args.out)
    print(f"student edition: {len(notebooks)} lessons in {args.out} (outputs cleared, solutions left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
