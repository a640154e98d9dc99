"""The rows of `compare` and `compare_training`: printed as a table, recorded one JSON line each to the file
$KIMIK3_GPU_RESULTS names (`record`), and collected into one table per GPU (`write_table`, for `make
test-gpu`)."""

import json
import os
import re
from pathlib import Path

import torch

from kimik3_lessons import lab

RESULTS = "KIMIK3_GPU_RESULTS"


def print_training_rows(rows, title):
    """The table of `compare_training`: per form, its worst gradient error, time, multiple of FLA's."""
    print(title)
    print(f"  {'form':<40}{'precision':>10}{'grad err':>10}{'(of)':>6}{'(tol)':>8}{'ms':>10}{'× FLA':>8}")
    for r in rows:
        vs_fla = f"{r['vs_fla']:8.2f}" if r.get("vs_fla") is not None else f"{'-':>8}"
        print(f"  {r['form']:<40}{r['precision']:>10}{r['gradient_error']:>10.1e}{'d' + r['worst']:>6}"
              f"{r['tolerance']:>8.0e}{r['ms']:>10.3f}{vs_fla}")


def print_rows(rows, title):
    """The table of `compare`: a row per form, errors against float64, time, multiple of FLA's time."""
    print(title)
    print(f"  {'form':<32}{'precision':>10}{'output err':>12}{'state err':>11}{'(tol)':>8}{'ms':>10}"
          f"{'× FLA':>8}{'TFLOP/s':>9}")
    for r in rows:
        tflops = f"{r['tflops']:9.2f}" if r.get("tflops") is not None else f"{'-':>9}"
        vs_fla = f"{r['vs_fla']:8.2f}" if r.get("vs_fla") is not None else f"{'-':>8}"
        print(f"  {r['form']:<32}{r['precision']:>10}{r['output_error']:>12.1e}{r['state_error']:>11.1e}"
              f"{r['tolerance']:>8.0e}{r['ms']:>10.3f}{vs_fla}{tflops}")


def record(rows):
    """Append the rows, one JSON line each, to the file $KIMIK3_GPU_RESULTS names (if set)."""
    path = os.environ.get(RESULTS)
    if path:
        with open(path, "a") as f:
            for row in rows:
                f.write(json.dumps(dict(row, gpu=lab.gpu_name())) + "\n")


def write_table(results, folder="benchmarks/results"):
    """Collect the JSON lines of `results` (one file of $KIMIK3_GPU_RESULTS) into one table: print it and
    write `<folder>/gpu-<gpu name>.json`. Returns the path written."""
    rows = [json.loads(line) for line in Path(results).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{results} holds no rows: did the GPU cells run?")
    gpu = rows[0]["gpu"]
    print(f"One table, {gpu}: every GPU cell's forms, errors against float64 of the same rounded inputs")
    for key in dict.fromkeys((r.get("kind", "forward"), r["mixer"], r["D"]) for r in rows):
        group = [r for r in rows if (r.get("kind", "forward"), r["mixer"], r["D"]) == key]
        first = group[0]
        title = f"{key[1]}, B={first['B']}, H={first['H']}, T={first['T']}, head size {key[2]}"
        if key[0] == "train":
            print_training_rows(group, title + ", forward + backward")
        else:
            print_rows(group, title)
    path = Path(folder) / f"gpu-{re.sub(r'[^a-z0-9]+', '-', gpu.lower()).strip('-')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(gpu=gpu, torch=torch.__version__, rows=rows), indent=1) + "\n")
    print(f"written: {path}")
    return path
