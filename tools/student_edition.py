"""Build the student edition of the course: `make student` (or `python -m tools.student_edition [OUT]`).

The edition is the course a teacher hands out: every lesson with its outputs and widget state cleared
(the student runs it), every exercise a stub that raises NotImplementedError, each lesson's written question
(from docs/teaching.md, without its rubric) after its exercises, and what stays with the teacher left out
(the solutions, the teaching guide, the tests that need them, the tools that build editions), together with
the package, the figures, the Makefile and a README for students. It stands on its own: `make lab` opens it
and `make test` passes in it (its unit tests, then every lesson run top to bottom; the exercises then say
"not attempted yet"). Ready to zip or push to a class repository:

    python -m tools.student_edition OUT --repo owner/name    # badges and install lines open owner/name
    python -m tools.student_edition OUT --hints 0            # graded work: no answer in it (below)

A graded edition (`--hints 0`) holds no answer: its copy of the checks has no hint text (every `hint(...)`
emptied), its lessons no listing of the module's version of an exercise's function and no word of the
solutions, its README no way to turn hints back on.

The edition is written only into a new or empty folder, or one this script wrote before: there it replaces
the files it wrote, if none was changed since, and leaves every other file (a `.git`, a syllabus) alone.
Anything else is refused, with the reason. Standard library only, so it runs before the environment exists.
"""

import argparse
import ast
import hashlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

from tools import repo_url

ROOT = Path(__file__).resolve().parent.parent

# What a student gets, and what stays with the teacher.
KEEP = ["kimik3_lessons", "notebooks", "figures", "tests", "benchmarks", "browser_tests", "tools", "docs",
        "Makefile", "constraints.txt", "conftest.py", "pyproject.toml", "environment.yml", ".gitignore"]
# The tests of the course's own making (they need solutions/, the guide or a git checkout): `make test`
# runs them in the course, then the edition's `make test` runs everything else, so nothing runs twice.
TEACHER_TESTS = ["tests/test_exercises.py", "tests/test_teaching_guide.py", "tests/test_student_edition.py",
                 "tests/test_notebook_exercise_cells.py", "tests/test_grading.py",
                 "tests/test_self_contained.py", "tests/test_translations.py"]
LEAVE_OUT = ["solutions", "docs/teaching.md", "tools/student_edition.py",
             "tools/nbgrader_export.py", "tools/notebook_times.py", "tools/site_pages.py",
             "tools/translations", *TEACHER_TESTS]
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

A wrong answer never stops the notebook: Run All always reaches the end. An exercise whose check scores
several parts earns its points part by part: the ❌ line says how many parts are right.
{hints_note}

After its exercises, every lesson asks a written question: explain or derive, in a few sentences, what the
lesson showed. Write your answer in the cell under it; your teacher grades it by hand.

## Handing in your work

Hand in each lesson's notebook, saved with your answers in it (**File > Save**; on Colab
**File > Download > Download .ipynb**), as your teacher says. On a JupyterHub with nbgrader, the lesson
is in the **Assignments** tab: **Fetch** it, work in it, then **Submit** it (you may submit again until the
deadline: the last one counts). Your functions are graded each on its own, in a fresh Python, with the
course's checks: only what the function itself does counts, so keep every helper it needs in a cell of its
own (a `def` or `import` at the top level of a cell, not inside a loop), and leave out what could reach
into the grader (`os`, `sys`, `inspect`, `exec`, `open`): code that uses it is refused.

## Checking your machine

`make test` runs the unit tests, then every lesson top to bottom, as Run All would (about {test_minutes}
minutes on a 2-core machine, most of it the lessons). It passes on a fresh copy, where every exercise says
"not attempted yet".
"""

# The README's parts that depend on the edition's settings, each a whole sentence (a translated student
# edition translates them, tools/translations: its catalog student/README).
PHRASES = {
    "wrong_hint": "❌ what differs (a shape, the first wrong row, a value) and a hint;",
    "wrong": "❌ what differs (a shape, the first wrong row, a value);",
    "hints_off": "This edition's checks give no hints (graded work): a ❌ says what differs, not what to do.",
    # In a graded edition, in place of a lesson's paragraph on the check cells (which promises hints).
    "graded_intro": "Write each function in the cell under its statement, then run the check cell after it: "
                    "it calls your function on fresh random inputs and prints ✅ with what it measured, ❌ "
                    "with what differs (no hint: this is graded work), or ⬜ while the stub is untouched.",
    # The cell under a lesson's written question, where the student writes the answer.
    "answer": "*Your answer:* write it here, in a few sentences (equations between `$...$`).",
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
                    keywords = {k.arg: ast.literal_eval(k.value) for k in decorator.keywords
                                if k.arg == "difficulty"}
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


def gpu_lessons(notebooks, both=PHRASES["and"], comma=", "):
    """The lessons with a `%%needs gpu` cell: '03, 05b, 06, 07a and 09b' (`both`: how the language joins
    the last two, `comma` the others)."""
    found = [p.name.split("_")[0] for p in notebooks
             if any("".join(c["source"]).startswith("%%needs gpu")
                    for c in json.loads(p.read_text())["cells"])]
    return both.format(first=comma.join(found[:-1]), last=found[-1]) if len(found) > 1 else "".join(found)


def readme(out, notebooks, hints, lang=None, texts=None):
    """The edition's README (in `lang`, through its catalog, when given; `texts`: the template and phrases
    already in that language)."""
    template, phrases = texts or graded_phrases(lang)
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
        install=install, gpu_lessons=gpu_lessons(notebooks, phrases["and"], phrases.get("comma", ", ")),
        wrong_line=phrases["wrong_hint" if hints else "wrong"],
        hints_note="" if hints else phrases["hints_off"],
        test_minutes=TEST_MINUTES)


def written_questions(root=ROOT):
    """{lesson: (points, question, rubric)}: each lesson's written question in the teaching guide, the
    paragraph "**Written question (N points, graded by hand).** ..." of its section (the notebooks get it as
    it is), and the rubric after it (which stays with the teacher)."""
    guide = (Path(root) / "docs" / "teaching.md").read_text()
    found = {}
    for lesson, text in re.findall(r"^## Lesson (\w+) — (.*?)(?=^## )", guide, flags=re.M | re.S):
        question = WRITTEN.search(text)
        if question:
            found[lesson] = (int(question[2]), question[1].strip(), question[3].strip())
    return found


WRITTEN = re.compile(r"^(\*\*Written question \((\d) points?, graded by hand\)\.\*\* [^\n]*(?:\n[^\n]+)*)"
                     r"\n\n\*\*Rubric\.\*\*\n((?:[-*] [^\n]*(?:\n  [^\n]*)*\n?)+)", re.M)


def question_cells(lesson, question, answer, nbgrader=None):
    """The written question's two cells: the question, and the cell the student answers in (metadata
    kimik3.written, which the graders read). `nbgrader`: (points, rubric) for nbgrader's manually graded
    answer cell, which holds the rubric until nbgrader generate_assignment puts the text stub in its place."""
    ask = {"cell_type": "markdown", "id": f"written-question-{lesson}", "source": question,
           "metadata": {"kimik3": {"question": lesson}}}
    reply = {"cell_type": "markdown", "id": f"written-answer-{lesson}", "source": answer,
             "metadata": {"kimik3": {"written": lesson}}}
    if nbgrader:
        points, rubric = nbgrader
        ask["metadata"]["nbgrader"] = {"grade": False, "grade_id": f"written_{lesson}_question",
                                       "locked": True, "schema_version": 3, "solution": False, "task": False}
        reply["source"] = rubric
        reply["metadata"]["nbgrader"] = {"grade": True, "grade_id": f"written_{lesson}", "locked": False,
                                         "points": points, "schema_version": 3, "solution": True,
                                         "task": False}
    for cell in (ask, reply):
        cell["source"] = cell["source"].splitlines(keepends=True)
    return [ask, reply]


def insert_question(nb, cells):
    """Put the written question after the lesson's last exercise check, before its "Next" paragraph."""
    checks = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
              and "".join(c["source"]).startswith(("lab.exercise(", "# Exercise "))]
    start = checks[-1] + 1 if checks else 0
    at = next((i for i in range(start, len(nb["cells"])) if nb["cells"][i]["cell_type"] == "markdown"
               and "".join(nb["cells"][i]["source"]).lstrip().startswith("**Next")), len(nb["cells"]))
    nb["cells"][at:at] = cells
    return nb


# The paragraph on the check cells that promises hints, and the listing of an exercise's answer that a
# lesson prints after the exercise's check: what a graded edition leaves out (found in the English lesson,
# by cell id, so that a translated lesson loses the same cells).
HINT_PROMISE = ("❌ with what differs and a hint", "❌ (what differs, and a hint)")
MODULES_VERSION = "**The module's version.**"


def graded_changes(english):
    """(ids of the cells a graded edition drops, {cell id: the paragraph promising hints}) of an English
    lesson (a notebook dict): each "The module's version" paragraph with the listing under it."""
    cells = english["cells"]
    drop, promise = set(), {}
    for i, cell in enumerate(cells):
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and text.startswith(MODULES_VERSION):
            drop.add(cell.get("id"))
            if i + 1 < len(cells) and cells[i + 1]["cell_type"] == "code" and \
                    "getsource" in "".join(cells[i + 1]["source"]):
                drop.add(cells[i + 1].get("id"))
        elif cell["cell_type"] == "markdown" and any(mark in text for mark in HINT_PROMISE):
            promise[cell.get("id")] = next(p for p in text.split("\n\n") if any(m in p for m in HINT_PROMISE))
    return drop, promise


def graded_notebook(nb, english, graded_intro, translate=None):
    """`nb` (the lesson, maybe translated) as a graded edition has it: the module's-version listings gone,
    the paragraph on the check cells replaced by `graded_intro` (translate(english paragraph) finds the
    paragraph in a translated lesson)."""
    drop, promise = graded_changes(english)
    nb["cells"] = [c for c in nb["cells"] if c.get("id") not in drop]
    for cell in nb["cells"]:
        if cell.get("id") in promise:
            paragraph = promise[cell["id"]]
            shown = translate(paragraph) if translate else paragraph
            text = "".join(cell["source"])
            if shown not in text:
                raise ValueError(f"cannot find the paragraph on the check cells in cell {cell['id']}")
            cell["source"] = text.replace(shown, graded_intro).splitlines(keepends=True)
    return nb


def strip_hints(source):
    """Python source with every `hint(...)` call emptied to `hint()`: the checks of a graded edition, which
    say what differs and never what to do."""
    tree = ast.parse(source)
    data = source.encode()
    starts = [0]
    for line in data.split(b"\n"):
        starts.append(starts[-1] + len(line) + 1)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "hint"
             and (n.args or n.keywords)]
    spans = sorted(((starts[n.lineno - 1] + n.col_offset, starts[n.end_lineno - 1] + n.end_col_offset)
                    for n in calls), reverse=True)
    outer = []
    for start, end in spans:                      # nested calls: the outer one covers them
        if not any(s <= start and end <= e for s, e in outer):
            outer.append((start, end))
    for start, end in sorted(outer, reverse=True):
        data = data[:start] + b"hint()" + data[end:]
    stripped = data.decode()
    ast.parse(stripped)
    return stripped


def set_hints(out, hints):
    """Write the edition's default for the checks' hints into its copy of kimik3_lessons/edition.py."""
    path = out / EDITION_FILE
    text, n = re.subn(r"^HINTS = (True|False)$", f"HINTS = {bool(hints)}", path.read_text(), flags=re.M)
    if n != 1:
        raise RuntimeError(f"{EDITION_FILE} has no line `HINTS = True`: cannot set the hints default")
    path.write_text(text)


def translate(out, lang):
    """Put the lessons of the `lang` edition (tools/translations: the prose, the exercise texts
    included, translated; code cells, hence the checks, the English ones) in place of `out`'s. Needs the
    docs extra (MyST's parser, Babel), unlike the rest of this file."""
    from tools.translations import editions

    with tempfile.TemporaryDirectory() as scratch:
        for path in editions.write_edition(lang, out=Path(scratch), badge_dir="notebooks"):
            if path.suffix == ".ipynb":
                shutil.copyfile(path, out / "notebooks" / path.name)


MANIFEST = ".kimik3-edition.json"     # in a folder the edition was written into: its files and their hashes


def _digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check_output(out, what="the student edition", manifest=MANIFEST):
    """Refuse (ValueError, saying why and what to do) a folder we may not write `what` into: the course
    itself or a folder above it, a folder inside the course but outside build/, a folder that is not empty
    and was not written by this tool, or one whose files written by this tool were changed since. Returns
    the files written there before ({relative path: hash})."""
    out = Path(out).resolve()
    if out == ROOT or out in ROOT.parents:
        raise ValueError(f"refusing to write {what} into {out}: that is the course's own folder or one above "
                         f"it. Give a new or empty folder")
    if ROOT in out.parents and out.parts[len(ROOT.parts)] != "build":
        raise ValueError(f"refusing to write {what} inside the course at {out}: use build/... or a folder "
                         f"outside the course")
    if out.exists() and not out.is_dir():
        raise ValueError(f"refusing to write {what} into {out}: it is a file")
    if not out.exists() or not any(out.iterdir()):
        return {}
    if not (out / manifest).is_file():
        held = ", ".join(sorted(p.name for p in out.iterdir())[:5])
        raise ValueError(f"refusing to write {what} into {out}: it is not empty ({held}, ...) and was not "
                         f"written by this tool, whose files would mix with (or replace) yours. Give a new "
                         f"or empty folder (then `git init` there, or copy the files into your repository)")
    before = json.loads((out / manifest).read_text())
    changed = sorted(rel for rel, digest in before.items()
                     if (out / rel).exists() and _digest(out / rel) != digest)
    if changed:
        raise ValueError(f"refusing to rebuild {what} in {out}: {', '.join(changed[:5])} changed since it "
                         f"was written there, and rebuilding would replace your changes. Move them away (or "
                         f"build into another folder)")
    return before


def write_into(out, built, manifest=MANIFEST):
    """Move the files of the folder `built` into `out` (checked by check_output): the files written there
    before are replaced or removed, every other file is left alone; a file of someone else's in the way is
    refused. Records what was written in `out`'s manifest."""
    out = Path(out).resolve()
    before = check_output(out, manifest=manifest)
    files = sorted(p.relative_to(built).as_posix() for p in Path(built).rglob("*") if p.is_file())
    clashes = [rel for rel in files if (out / rel).exists() and rel not in before]
    if clashes:
        raise ValueError(f"refusing to write into {out}: {', '.join(clashes[:5])} are there and were not "
                         f"written by this tool. Move them away (or build into another folder)")
    for rel in before:
        if rel not in files and (out / rel).exists():
            (out / rel).unlink()
    for rel in sorted(before, reverse=True):          # folders left empty by a file of ours that is gone
        for parent in (out / rel).parents:
            if parent == out or not parent.is_dir() or any(parent.iterdir()):
                break
            parent.rmdir()
    written = {}
    for rel in files:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(built) / rel, out / rel)
        written[rel] = _digest(out / rel)
    (out / manifest).write_text(json.dumps(written, indent=0, sort_keys=True) + "\n")
    return [out / rel for rel in files]


def graded_phrases(lang):
    """The README template and phrases in `lang` (English when None)."""
    if not lang:
        return README, PHRASES
    from tools.translations import editions
    return editions.student_readme(lang, README, PHRASES)


def question_translator(lang):
    """translate(English paragraph) -> the paragraph in `lang` (None: English), through the teaching
    guide's catalog (the written questions) and each lesson's (its paragraphs)."""
    if not lang:
        return None
    from tools.translations.editions import MissingTranslation, translator
    from tools.translations.messages import translate_markdown
    from tools.translations.po import translations_of
    pages = ["docs/teaching", *[f"notebooks/{p.stem}" for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]]
    messages = translations_of(lang, pages)

    def translate(text):
        missing = []
        done = translate_markdown(text, translator(messages, lambda c: c, missing))
        if missing:
            raise MissingTranslation(f"{lang}: no translation of {missing[0][:60]!r}")
        return done
    return translate


def build(out, repo=None, hints=True, lang=None):
    """Write the student edition into `out` (see check_output for where it may go); return the notebooks
    written. `repo` ("owner/name"): the badges and install lines open that repository; `hints` False: a
    graded edition (no hint, no listing of an answer); `lang` ("zh_CN", "de"): the lessons in that
    language."""
    check_output(out)
    with tempfile.TemporaryDirectory() as scratch:
        edition = Path(scratch) / "edition"
        edition.mkdir()
        ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.egg-info", ".pytest_cache")
        for name in KEEP:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, edition / name, ignore=ignore)
            elif source.exists():
                shutil.copy2(source, edition / name)
        for name in LEAVE_OUT:
            target = edition / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        if lang:
            translate(edition, lang)
        template, phrases = graded_phrases(lang)
        in_lang = question_translator(lang)
        questions = written_questions()
        for path in sorted((edition / "notebooks").glob("*.ipynb")):
            clear_outputs(path)
            nb = json.loads(path.read_text())
            if not hints:
                english = json.loads((ROOT / "notebooks" / path.name).read_text())
                graded_notebook(nb, english, phrases["graded_intro"], in_lang)
            lesson = path.name.split("_")[0]
            if lesson in questions:
                question = questions[lesson][1]
                insert_question(nb, question_cells(lesson, in_lang(question) if in_lang else question,
                                                   phrases["answer"]))
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        set_hints(edition, hints)
        if not hints:
            for path in sorted((edition / "kimik3_lessons" / "exercises").glob("*.py")):
                path.write_text(strip_hints(path.read_text()))
        notebooks = sorted((edition / "notebooks").glob("*.ipynb"))
        (edition / "README.md").write_text(readme(edition, notebooks, hints, lang, (template, phrases)))
        if repo:
            repo_url.set_repo(repo, edition)
        write_into(out, edition)
    return sorted((Path(out).resolve() / "notebooks").glob("*.ipynb"))


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
