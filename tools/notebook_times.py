"""Measure how long each lesson takes to run, and write the table into the teaching guide.

    python -m tools.notebook_times            # `make times`: run every notebook, update docs/teaching.md

Each notebook runs top to bottom in a fresh kernel, one after another (nothing else should run on the
machine meanwhile), as a student's Run All would: offline, figures to a scratch folder, outputs thrown
away. The times, the machine (CPU, cores, GPU or none) and the date go to docs/notebook_times.json and
replace the table between the markers in docs/teaching.md, so the guide never holds a typed-in time.
"""

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "teaching.md"
TIMES = ROOT / "docs" / "notebook_times.json"
START, END = "<!-- notebook times: start (tools/notebook_times.py writes this table) -->", \
    "<!-- notebook times: end -->"


def machine():
    """One line about this machine: what the times were measured on."""
    import torch
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    cpu = platform.processor() or platform.machine()
    return (f"{cpu}, {os.cpu_count()} cores, {gpu}, Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def run(path):
    """Seconds to execute the notebook at `path` in a fresh python3 kernel (outputs discarded); a run that
    had to start again (see `execute`) is timed from its last start."""
    from kimik3_lessons.__main__ import execute
    start = []
    execute(path, on_start=lambda: start.append(time.perf_counter()))
    return time.perf_counter() - start[-1]


def table(times):
    """The markdown table of the guide: lesson, minutes:seconds."""
    lines = [f"Measured on {times['machine']} ({times['date']}), one notebook at a time:", "",
             "| notebook | Run All |", "|---|---|"]
    for name, seconds in times["seconds"].items():
        lines.append(f"| [{name}](../notebooks/{name}) | {int(seconds) // 60}:{int(seconds) % 60:02d} |")
    total = sum(times["seconds"].values())
    lines.append(f"| all {len(times['seconds'])} lessons | {int(total) // 60}:{int(total) % 60:02d} |")
    return "\n".join(lines)


def write_guide(times):
    """Replace the table between the markers of docs/teaching.md with `times`."""
    text = GUIDE.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{GUIDE} has no '{START}' ... '{END}' markers for the table")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    GUIDE.write_text(f"{head}{START}\n{table(times)}\n{END}{tail}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="time only these and print the times (the guide's table needs every notebook)")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    times = {"machine": machine(), "date": datetime.date.today().isoformat(), "seconds": {}}
    with tempfile.TemporaryDirectory() as figures:
        os.environ.update(HF_HUB_OFFLINE="1", MPLBACKEND="Agg", KIMIK3_FIGURES=figures)
        for path in paths:
            times["seconds"][path.name] = round(run(path), 1)
            print(f"{path.name}: {times['seconds'][path.name]:.0f} s", flush=True)
    if args.notebooks:
        print("timed a subset: docs/notebook_times.json and the guide are left as they were")
        return 0
    TIMES.write_text(json.dumps(times, indent=1) + "\n")
    write_guide(times)
    print(f"wrote {TIMES.relative_to(ROOT)} and the table in {GUIDE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
