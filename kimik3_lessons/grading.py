"""Grade submitted lessons without nbgrader: `python -m kimik3_lessons grade SUBMISSIONS/ [-o grades.csv]`.

SUBMISSIONS holds the students' notebooks: one folder per student (`SUBMISSIONS/<student>/**/*.ipynb`,
nbgrader's `submitted/<student>/<lesson>/` layout works as it is), or notebooks directly in it, named after
the student (`SUBMISSIONS/<student>.ipynb`). Each notebook is a lesson (05a_delta_rule.ipynb: the lesson is
read from the file name, else from its check cells).

Nothing of a notebook is run as a whole. For each exercise, the student's function and what it uses are
taken out of the notebook (`exercises.isolation`) and checked alone, in a fresh process that imports this
copy of the package, hints off: whatever another cell patches (the checker, the package, torch), the
verdict depends on the function only. An exercise earns its points times the share of its parts that are
right. A notebook that cannot be read, a function that runs past the time limit or crashes its process, a
lesson not handed in: that work earns 0, with the reason, and the run goes on.

The notebooks are graded in parallel (`--workers`, default the machine's cores). Each notebook's result is
kept in `<csv name>-feedback/.results/` with the notebook's hash: run again after an interruption and the
notebooks already graded are not graded again. For every student, `<csv name>-feedback/<student>.md` has
the ✅/❌ line of every exercise (no hints) and their written answers, to grade by hand.

The CSV has one row per student: a column per exercise of every assigned lesson (`--lessons`, default:
every lesson anyone handed in), its points; a column per lesson's written question, empty, for the
points given by hand; the total and the maximum of the exercises (every assigned lesson counts, handed in
or not); notes (the reasons for zeros). It runs the students' code: run it where that is safe (a container,
a throw-away account), as nbgrader's autograder is.
"""

import concurrent.futures
import csv
import hashlib
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

# Python 3.11's parser can fail ("AST constructor recursion depth mismatch") when two threads parse at
# once: the notebooks are taken apart one at a time, and checked in parallel.
_PARSING = threading.Lock()
CHECK = re.compile(r'(?:lab\.exercise|exercises\.run)\("([\w.]+)",\s*(\w+)')
LESSON = re.compile(r"^(\d\d[a-z]?)_")


def lesson_exercises(lesson):
    """The registered exercises of one lesson ('05a'), in order."""
    from kimik3_lessons import exercises
    return [exercises.get(i) for i in exercises.all_ids() if exercises.lesson_of(i) == lesson]


def lesson_of_notebook(path, nb):
    found = LESSON.match(Path(path).name)
    if found:
        return found[1]
    for cell in nb["cells"]:
        check = CHECK.search(_text(cell)) if cell["cell_type"] == "code" else None
        if check:
            return check[1].split(".")[0]
    return None


def _text(cell):
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def written_answer(nb, lesson):
    """The student's answer to the lesson's written question: the cell the edition marks as its answer
    (`metadata.kimik3.written`, or nbgrader's `written_<lesson>` grade id), or None."""
    for cell in nb["cells"]:
        meta = cell.get("metadata", {})
        if meta.get("kimik3", {}).get("written") == lesson or \
                meta.get("nbgrader", {}).get("grade_id") == f"written_{lesson}":
            return _text(cell).strip()
    return None


def exercise_sources(nb, lesson):
    """{exercise id: isolation.Source} for every exercise of the lesson: the student's function taken from
    the code cells before the exercise's check cell (all of them when the student deleted the check)."""
    from kimik3_lessons.exercises import isolation
    code = [_text(c) for c in nb["cells"] if c["cell_type"] == "code"]
    sources = {}
    for exercise in lesson_exercises(lesson):
        at = [i for i, text in enumerate(code) if (m := CHECK.search(text)) and m[1] == exercise.id]
        sources[exercise.id] = isolation.function_source(code[:at[-1]] if at else code, exercise.name)
    return sources


def grade_notebook(path, timeout=None):
    """{"lesson", "results": {exercise id: {"status", "line", "score"}}, "written", "seconds", "problem"}
    for the submitted notebook at `path`; "lesson" None when it is no lesson of the course."""
    from kimik3_lessons.exercises import isolation
    started = time.perf_counter()
    try:
        nb = json.loads(Path(path).read_text())
        nb["cells"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        lesson = LESSON.match(Path(path).name)
        return {"lesson": lesson[1] if lesson else None, "results": {}, "written": None, "seconds": 0.0,
                "problem": f"{Path(path).name} is not a readable notebook ({type(err).__name__})"}
    lesson = lesson_of_notebook(path, nb)
    if lesson is None or not lesson_exercises(lesson):
        return {"lesson": None, "results": {}, "written": None, "seconds": 0.0, "problem": ""}
    with _PARSING:
        sources = exercise_sources(nb, lesson)
    results = isolation.check(sources, timeout=timeout or isolation.TIMEOUT)
    return {"lesson": lesson, "results": results, "written": written_answer(nb, lesson),
            "seconds": round(time.perf_counter() - started, 1), "problem": ""}


def submissions(folder):
    """[(student, notebook path)]: a folder per student, or `<student>.ipynb` directly in `folder`."""
    folder = Path(folder)
    found = []
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        relative = path.relative_to(folder)
        found.append((relative.parts[0] if len(relative.parts) > 1 else path.stem, path))
    return found


def _cached(cache, path, compute):
    """compute() for the notebook at `path`, kept in the file `cache` with the notebook's hash (and this
    package's checks' hash): a notebook already graded is not graded again."""
    from kimik3_lessons import exercises
    kit = Path(exercises.__file__).parent
    key = hashlib.sha256(Path(path).read_bytes() + b"".join(p.read_bytes() for p in sorted(kit.glob("*.py"))))
    key = key.hexdigest()
    if cache.exists():
        try:
            kept = json.loads(cache.read_text())
            if kept.get("key") == key:
                return kept["graded"], True
        except ValueError:
            pass
    graded = compute()
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "graded": graded}))
    return graded, False


def cores():
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def grade(folder, lessons=None, workers=None, timeout=None, feedback=None, log=print):
    """Grade every notebook under `folder`: {student: {lesson: graded notebook}} (the first notebook of a
    lesson per student; a second is noted and ignored) and the assigned lessons, in order."""
    jobs = submissions(folder)
    work = (Path(feedback) / ".results") if feedback else None
    graded, seconds = {}, []

    def one(job):
        student, path = job
        if work is None:
            return job, grade_notebook(path, timeout), False
        cache = work / student / (str(path.relative_to(folder)).replace(os.sep, "__") + ".json")
        result, kept = _cached(cache, path, lambda: grade_notebook(path, timeout))
        return job, result, kept

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers or cores()) as pool:
        for (student, path), result, kept in pool.map(one, jobs):
            row = graded.setdefault(student, {})
            lesson = result["lesson"]
            if lesson is None and not result["problem"]:
                log(f"{student}: {path.name}: no lesson of the course, skipped")
                continue
            if lesson in row:
                log(f"{student}: {path.name}: a second notebook of lesson {lesson}, ignored")
                continue
            row[lesson or path.name] = result
            if not kept:
                seconds.append(result["seconds"])
            said = result["problem"] or ", ".join(f"{i} {r['status']}" for i, r in result["results"].items())
            when = " (graded before)" if kept else f" ({result['seconds']} s)"
            log(f"{student}: {path.name}: {said}{when}")
    if seconds:
        log(f"graded {len(seconds)} notebook(s), {sum(seconds) / len(seconds):.1f} s each on average")
    found = sorted({lesson for row in graded.values() for lesson in row if LESSON.match(lesson + "_")})
    return graded, sorted(lessons) if lessons else found


# Zeros that are not a wrong answer, named in the CSV's notes (the feedback has every line).
TROUBLE = ("ran past the time limit", "process died", "not graded", "the check failed")


def _points(value):
    return int(value) if value == int(value) else round(value, 2)


def table(graded, lessons):
    """The CSV's header and rows (tools and tests read them)."""
    exercises = [e for lesson in lessons for e in lesson_exercises(lesson)]
    maximum = sum(e.difficulty for e in exercises)
    header = ["student", *[e.id for e in exercises], *[f"{lesson}.w" for lesson in lessons], "total", "max",
              "notes"]
    rows = []
    for student in sorted(graded):
        row, notes, earned = {}, [], 0.0
        for lesson in lessons:
            result = graded[student].get(lesson)
            if result is None:
                notes.append(f"{lesson}: not handed in")
            elif result["problem"]:
                notes.append(f"{lesson}: {result['problem']}")
            for e in lesson_exercises(lesson):
                verdict = (result or {}).get("results", {}).get(e.id)
                points = round(e.difficulty * verdict["score"], 2) if verdict else 0.0
                row[e.id] = _points(points)
                earned += points
                if verdict and any(why in verdict["line"] for why in TROUBLE):
                    notes.append(f"{e.id}: {verdict['line'].split(': ', 1)[-1]}")
        rows.append([student, *[row[e.id] for e in exercises], *["" for _ in lessons],
                     _points(round(earned, 2)), maximum, "; ".join(notes)])
    return header, rows


def write_csv(graded, lessons, out):
    header, rows = table(graded, lessons)
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def write_feedback(graded, lessons, folder):
    """One markdown file per student: every assigned lesson, its exercises' lines and points, the written
    answer to grade by hand."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for student in sorted(graded):
        lines = [f"# {student}", ""]
        for lesson in lessons:
            result = graded[student].get(lesson)
            lines += [f"## Lesson {lesson}", ""]
            if result is None:
                lines += ["Not handed in: 0 points.", ""]
                continue
            if result["problem"]:
                lines += [f"{result['problem']}: 0 points.", ""]
            for e in lesson_exercises(lesson):
                verdict = result["results"].get(e.id, {"line": f"❌ exercise {e.id}: not graded", "score": 0})
                earned = _points(round(e.difficulty * verdict["score"], 2))
                lines.append(f"- {verdict['line']} — {earned} of {e.difficulty} point(s)")
            lines += ["", "Written answer (graded by hand):", ""]
            lines += [f"> {line}" for line in (result["written"] or "(no answer)").splitlines()] + [""]
        path = folder / f"{student}.md"
        path.write_text("\n".join(lines))
        written.append(path)
    return written


def main(argv):
    import argparse
    parser = argparse.ArgumentParser(prog="python -m kimik3_lessons grade",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", type=Path, help="a folder of submitted notebooks")
    parser.add_argument("-o", "--output", type=Path, default=Path("grades.csv"), help="the CSV to write")
    parser.add_argument("--lessons", nargs="+", help="the assigned lessons (e.g. 02 09a); default: every "
                                                     "lesson handed in")
    parser.add_argument("--workers", type=int, default=cores(), help="notebooks graded at once (default: "
                                                                     "the machine's cores)")
    parser.add_argument("--timeout", type=int, default=None, help="seconds one exercise's check may run "
                                                                  "(default 300)")
    parser.add_argument("--feedback", type=Path, help="the folder of per-student feedback and kept results "
                                                      "(default: <output>-feedback next to the CSV)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    if args.lessons:
        unknown = [lesson for lesson in args.lessons if not lesson_exercises(lesson)]
        if unknown:
            parser.error(f"no exercises in lesson(s) {', '.join(unknown)}")
    feedback = args.feedback or args.output.with_name(args.output.stem + "-feedback")
    graded, lessons = grade(args.submissions, args.lessons, args.workers, args.timeout, feedback)
    write_csv(graded, lessons, args.output)
    write_feedback(graded, lessons, feedback)
    print(f"{len(graded)} student(s), lessons {', '.join(lessons)}: {args.output}; feedback in {feedback}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
