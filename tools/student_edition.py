"""Build the student edition of the course: `make student` (or `python tools/student_edition.py [OUT]`).

The edition is the course a teacher hands out: every lesson with its outputs and widget state cleared
(the student runs it), every exercise a stub that raises NotImplementedError, and what stays with the
teacher left out (the solutions, the teaching guide, the tests that need them, the tools that build
editions), together with the package, the figures, the Makefile and a README for students. It stands on
its own: `make lab` opens it and `make test` passes in it (its unit tests, then every lesson run top to
bottom; the exercises then say "not attempted yet"). Ready to zip or push to a class repository:

    python tools/student_edition.py OUT --repo owner/name    # badges and install lines open owner/name
    python tools/student_edition.py OUT --hints 0            # the checks show no hints (graded work)

Standard library only, so it runs before the environment exists.
"""

import argparse
import ast
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import repo_url  # noqa: E402

# What a student gets, and what stays with the teacher.
KEEP = ["kimik3_lessons", "notebooks", "figures", "tests", "benchmarks", "browser_tests", "tools", "docs",
        "Makefile", "constraints.txt", "conftest.py", "pyproject.toml", "environment.yml", ".gitignore"]
# The tests of the course's own making (they need solutions/, the guide or a git checkout): `make test`
# runs them in the course, then the edition's `make test` runs everything else, so nothing runs twice.
TEACHER_TESTS = ["tests/test_exercises.py", "tests/test_teaching_guide.py", "tests/test_student_edition.py",
                 "tests/test_notebook_exercise_cells.py", "tests/test_grading.py",
                 "tests/test_self_contained.py", "tests/test_translations.py"]
LEAVE_OUT = ["solutions", "docs/teaching.md", "docs/notebook_times.json", "tools/student_edition.py",
             "tools/nbgrader_export.py", "tools/notebook_times.py", "tools/site_pages.py",
             "tools/translations.py", *TEACHER_TESTS]
EDITION_FILE = "kimik3_lessons/edition.py"          # HINTS = True / False: the checks' default
STARS = {1: "★", 2: "★★", 3: "★★★"}

README = """# kimik3-lessons — student edition

From GPT-2 (2019) to KimiK3 (2026), by running code: one notebook per lesson in `notebooks/`, in order.
Every lesson ends with {exercise_range} exercises ({exercise_count} in all) that check your code as you write
it.

| lesson | exercises | Run All | |
|---|---|---|---|
{lesson_rows}

★ a few lines · ★★ the lesson's mechanism · ★★★ a stretch. Run All is the time one lesson takes, top to
bottom, on a 2-core CPU without a GPU (measured by the course, {times_date}); all {lesson_count} lessons take
{total_time}.

## On Colab (nothing to install)

1. Click a lesson's **Open in Colab** badge above (each notebook has it at the top too).
2. **Runtime > Change runtime type**, choose a GPU (the free tier's T4 will do), **Save**, before running
   anything: it starts a fresh machine. Without a GPU every lesson still runs (see below).
3. **Runtime > Run all.** The first code cell installs the course's package on Colab only:
   `{install}`.
   Your work stays in the Colab copy: **File > Save a copy in Drive** before you leave.

## On your machine

```bash
make lab     # first run: creates .venv and installs everything (a few minutes), then opens JupyterLab
```

Open `notebooks/01_gpt2_kv_cache.ipynb` and use *Run > Run All Cells*, or run the cells one by one while
you read. You need Python ≥ 3.10 and `make`.

- **Linux (or Windows with WSL 2), no GPU**: every lesson runs on the CPU; the Triton kernels run in
  Triton's interpreter (the same source, executed in numpy). The cells marked `%%needs gpu`, one each in
  lessons {gpu_lessons} (the compiled kernels checked and timed on a GPU), print one line saying
  what they would show, and Run All goes on.
- **Linux with an NVIDIA GPU**: the same, with the kernels compiled and the `%%needs gpu` cells run (they
  compare the course's kernels with those of
  [flash-linear-attention](https://github.com/fla-org/flash-linear-attention)).
- **macOS**: Triton publishes no macOS wheels, and every lesson module with a kernel imports it, so the
  lessons do not run natively on a Mac. Use Colab (above: every lesson, on a CPU or a GPU runtime), or a
  Linux machine or container.

## Exercises

Each exercise is a function whose body is `raise NotImplementedError`, followed by a check cell such as
`lab.exercise("05a.1", forward_substitution_in_place)`. Run the check after you write your code: it calls
your function on fresh random inputs and prints one line,

- ⬜ not attempted yet — the function still raises NotImplementedError;
- {wrong_line}
- ✅ your answer, with the error it measured against the course's reference.

A wrong answer never stops the notebook: Run All always reaches the end.
{hints_note}

## Checking your machine

`make test` runs the unit tests, then every lesson top to bottom, as Run All would (about {test_minutes}
minutes on a 2-core machine, most of it the lessons). It passes on a fresh copy, where every exercise says
"not attempted yet".
"""

# The README's parts that depend on the edition's settings, each a whole sentence (a translated student
# edition translates them, tools/translations.py: its catalog student/README).
PHRASES = {
    "wrong_hint": "❌ what differs (a shape, the first wrong row, a value) and a hint;",
    "wrong": "❌ what differs (a shape, the first wrong row, a value);",
    "hints_off": "This edition's checks give no hints (graded work): a ❌ says what differs, not what to do. "
                 "`KIMIK3_HINTS=1` in the environment turns them back on.",
    "and": "{first} and {last}",
}
# `make test` in a fresh edition on an idle 2-core machine (its unit tests, then nbval over every lesson
# with two workers), in minutes: the course's `make test` runs it last (measure that step when it changes).
TEST_MINUTES = 8   # measured: the edition's `make test` in .ci/run on an idle 2-core machine, 7 min 55 s


def clear_outputs(path):
    """Strip a notebook's outputs, execution counts and saved widget state (the student runs it)."""
    nb = json.loads(path.read_text())
    nb.get("metadata", {}).pop("widgets", None)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cell.get("metadata", {}).pop("execution", None)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def exercise_list(root=ROOT):
    """[(id, function name, title, difficulty)] of every exercise, read from the registry's source
    (`@exercise("03.1", "chunked_loop", "...", difficulty=2)`) without importing it (no torch here)."""
    found = []
    for path in sorted((Path(root) / "kimik3_lessons" / "exercises").glob("lesson*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            for decorator in getattr(node, "decorator_list", []):
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "exercise":
                    args = [ast.literal_eval(a) for a in decorator.args]
                    keywords = {k.arg: ast.literal_eval(k.value) for k in decorator.keywords}
                    difficulty = args[3] if len(args) > 3 else keywords["difficulty"]
                    found.append((*args[:3], difficulty))
    return sorted(found)


def lesson_of(exercise_id):
    return exercise_id.split(".")[0]


def notebook_title(path):
    nb = json.loads(path.read_text())
    return next((line.lstrip("# ").strip() for cell in nb["cells"] if cell["cell_type"] == "markdown"
                 for line in "".join(cell["source"]).splitlines() if line.startswith("# ")), path.stem)


def minutes(seconds):
    """M:SS, as the teaching guide's table writes a measured time (whole seconds, cut)."""
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def lesson_rows(notebooks, exercises, seconds, repo):
    """The lesson table's rows, one per lesson: title, exercises with their difficulty, Run All time, Colab
    badge (the header is the README's)."""
    rows = []
    for path in notebooks:
        own = [e for e in exercises if lesson_of(e[0]) == path.name.split("_")[0]]
        listed = "<br>".join(f"{i} `{name}` {STARS[d]}" for i, name, _, d in own)
        time = minutes(seconds[path.name]) if path.name in seconds else "—"
        badge = (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
                 f"(https://colab.research.google.com/github/{repo}/blob/main/notebooks/{path.name})")
        rows.append(f"| [{notebook_title(path)}](notebooks/{path.name}) | {listed} | {time} | {badge} |")
    return "\n".join(rows)


def gpu_lessons(notebooks, both=PHRASES["and"]):
    """The lessons with a `%%needs gpu` cell: '03, 05b, 06, 07a and 09b' (`both`: how the language joins
    the last two)."""
    found = [p.name.split("_")[0] for p in notebooks
             if any("".join(c["source"]).startswith("%%needs gpu")
                    for c in json.loads(p.read_text())["cells"])]
    return both.format(first=", ".join(found[:-1]), last=found[-1]) if len(found) > 1 else "".join(found)


def readme(out, notebooks, hints, lang=None):
    """The edition's README (in `lang`, through its catalog, when given)."""
    template, phrases = README, PHRASES
    if lang:
        import translations
        template, phrases = translations.student_readme(lang, README, PHRASES)
    exercises = exercise_list(out)
    counts = sorted({sum(lesson_of(e[0]) == p.name.split("_")[0] for e in exercises) for p in notebooks})
    times = json.loads((ROOT / "docs" / "notebook_times.json").read_text())
    _, repos = repo_url.problems(out)
    repo = repos[0] if repos else "kimik3-lessons/kimik3-lessons"
    install = next(line.strip() for path in notebooks for cell in json.loads(path.read_text())["cells"][:3]
                   for line in "".join(cell["source"]).splitlines() if repo_url.INSTALL.search(line))
    return template.format(
        exercise_range=f"{counts[0]}–{counts[-1]}" if counts[0] != counts[-1] else str(counts[0]),
        exercise_count=len(exercises), lesson_rows=lesson_rows(notebooks, exercises, times["seconds"], repo),
        times_date=times["date"], lesson_count=len(notebooks),
        total_time=minutes(sum(times["seconds"].get(p.name, 0) for p in notebooks)),
        install=install, gpu_lessons=gpu_lessons(notebooks, phrases["and"]),
        wrong_line=phrases["wrong_hint" if hints else "wrong"],
        hints_note="" if hints else phrases["hints_off"],
        test_minutes=TEST_MINUTES)


def set_hints(out, hints):
    """Write the edition's default for the checks' hints into its copy of kimik3_lessons/edition.py."""
    path = out / EDITION_FILE
    text, n = re.subn(r"^HINTS = (True|False)$", f"HINTS = {bool(hints)}", path.read_text(), flags=re.M)
    if n != 1:
        raise RuntimeError(f"{EDITION_FILE} has no line `HINTS = True`: cannot set the hints default")
    path.write_text(text)


def translate(out, lang):
    """Put the lessons of the `lang` edition (tools/translations.py: the prose, the exercise texts
    included, translated; code cells, hence the checks, the English ones) in place of `out`'s. Needs the
    docs extra (MyST's parser, Babel), unlike the rest of this file."""
    import tempfile

    import translations

    with tempfile.TemporaryDirectory() as scratch:
        for path in translations.write_edition(lang, out=Path(scratch), badge_dir="notebooks"):
            if path.suffix == ".ipynb":
                shutil.copyfile(path, out / "notebooks" / path.name)


def build(out, repo=None, hints=True, lang=None):
    """Write the student edition into `out` (emptied first); return the list of notebooks written.
    `repo` ("owner/name"): the badges and install lines open that repository; `hints` False: the checks
    show no hints unless KIMIK3_HINTS=1; `lang` ("zh_CN", "de"): the lessons in that language."""
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
    if lang:
        translate(out, lang)
    notebooks = sorted((out / "notebooks").glob("*.ipynb"))
    for path in notebooks:
        clear_outputs(path)
    set_hints(out, hints)
    (out / "README.md").write_text(readme(out, notebooks, hints, lang))
    if repo:
        repo_url.set_repo(repo, out)
    return notebooks


def teacher_tests():
    """The course's tests that the edition leaves out (and that exist), for the Makefile."""
    return [name for name in TEACHER_TESTS if (ROOT / name).exists()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default=str(ROOT / "build" / "student"))
    parser.add_argument("--repo", metavar="OWNER/NAME", help="the class repository the badges open")
    parser.add_argument("--hints", choices=["0", "1"], default="1", help="0: the checks show no hints")
    parser.add_argument("--lang", help="the lessons in this language (zh_CN, de): the translated edition's")
    parser.add_argument("--teacher-tests", action="store_true",
                        help="print the tests the edition leaves out (the course runs them) and exit")
    args = parser.parse_args(argv)
    if args.teacher_tests:
        print(" ".join(teacher_tests()))
        return 0
    try:
        notebooks = build(args.out, repo=args.repo, hints=args.hints == "1", lang=args.lang)
    except ValueError as err:
        parser.error(str(err))
    _, repos = repo_url.problems(Path(args.out))
    language = f" ({args.lang})" if args.lang else ""
    print(f"student edition{language}: {len(notebooks)} lessons in {args.out} (outputs cleared, "
          "solutions left out; "
          f"hints {'on' if args.hints == '1' else 'off'}; badges open github.com/{', '.join(repos)})")
    if not args.repo:
        print("  (the badges open the course's repository, solutions included: pass REPO=owner/name, "
              "the class's repository, to point them there)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
