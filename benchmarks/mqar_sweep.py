"""Multi-query associative recall for every mixer (lesson 12): pairs × width × mixer × seeds, and ablations.

    .venv/bin/python benchmarks/mqar_sweep.py                # the committed sweep: 1-2 h on 2 CPU cores
    .venv/bin/python benchmarks/mqar_sweep.py --grid quick   # a smoke run of a few minutes
    nice .venv/bin/python benchmarks/mqar_sweep.py --workers 2 --resume   # continue an interrupted sweep

Trains one `mqar.RecallModel` per point (`mqar.train`: seeded, a fresh batch per step, early stop at the
target accuracy) and writes benchmarks/results/mqar_sweep.json after every finished run: the settings, the
versions, the machine, the wall time so far, and one record per run (its accuracy on held-out sequences,
steps, seconds, parameters, the state it holds per sequence, its training curve). Lesson 12 plots that file.

On a machine with a CUDA GPU the models train there (picked automatically; the JSON records the device);
the grid stays the same unless you pass a larger one (--widths, --pairs, --seeds), which a GPU makes cheap.
"""

import argparse
import dataclasses
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from kimik3_lessons import mqar

OUT = Path(__file__).parent / "results" / "mqar_sweep.json"
TASK = dict(seq_len=64, vocab_size=64, min_distance=16)      # one sequence length for every point
PAIRS = (4, 8, 16)             # every model trains on the three in turn and is tested on each (as Zoology)
TRAIN = mqar.TrainConfig()     # 800 steps at most, batch 32, AdamW lr 1e-2, stop at 99% on every PAIRS
GRIDS = {   # per seed, the widths every mixer runs at; the ablations run with the first seed
    "full": dict(widths=(64, 32, 16), seeds=(0, 1, 2), seed_widths={0: (64, 32, 16), 1: (64, 32), 2: (64,)},
                 ablation_widths=(64, 32)),
    "quick": dict(widths=(32,), seeds=(0,), seed_widths={0: (32,)}, ablation_widths=()),
}
ABLATIONS = {  # width: [(mixer, options)]: which part does the recall
    64: [("attention", {"conv": False}), ("deltanet", {"conv": False}), ("kda", {"conv": False}),
         ("gated_deltanet", {"decay": False}), ("kda", {"decay": False}), ("hybrid", {"conv": False})],
    32: [("kda", {"decay": False}), ("hybrid", {"decay": False})],
}


def points(grid):
    """Every run of the sweep, as dicts of mixer, options, width, seed (each run tests every PAIRS)."""
    g, s0 = GRIDS[grid], GRIDS[grid]["seeds"][0]
    mixers = lambda w, s: [dict(mixer=m, options={}, width=w, seed=s) for m in mqar.MIXERS]
    ablated = lambda w: [dict(mixer=m, options=o, width=w, seed=s0) for m, o in ABLATIONS[w]]
    runs = []
    for w in g["seed_widths"][s0]:                          # in order of importance: the first seed first
        runs += mixers(w, s0) + (ablated(w) if w in g["ablation_widths"] else [])
    for s in g["seeds"][1:]:
        runs += [point for w in g["seed_widths"][s] for point in mixers(w, s)]
    return runs


def key(point):
    return json.dumps([point["mixer"], point["options"], point["width"], point["seed"]], sort_keys=True)


def one_run(point):
    """Build the point's model (seeded) and train it in this worker process; returns the point with train()'s
    results, the parameter count and what the model holds per sequence (`mqar.state_numbers`)."""
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tasks = [mqar.MQARTask(num_pairs=p, **TASK) for p in PAIRS]
    config = mqar.RecallConfig(point["mixer"], vocab_size=TASK["vocab_size"], hidden_size=point["width"],
                               **point["options"])
    torch.manual_seed(point["seed"])
    model = mqar.RecallModel(config).to(device)
    result = mqar.train(model, tasks, TRAIN, seed=point["seed"], log=None)
    return {**point, "pairs": list(PAIRS), **result, "parameters": sum(p.numel() for p in model.parameters()),
            "state_numbers": [sum(mqar.state_numbers(config, task.seq_len)) for task in tasks]}


def now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def machine():
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor()
    return {"device": "cuda" if gpu else "cpu", "gpu": gpu, "cpu": model, "cpu_count": os.cpu_count(),
            "platform": platform.platform(), "load_average_at_start": os.getloadavg()}


def versions():
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = None
    return {"python": platform.python_version(), "torch": torch.__version__, "kimik3_lessons_commit": commit}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", choices=GRIDS, default="full")
    parser.add_argument("--workers", type=int, default=2, help="runs trained at once (one thread each)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--resume", action="store_true", help="keep the runs already in --out, do the rest")
    args = parser.parse_args()

    todo = points(args.grid)
    before = json.loads(args.out.read_text()) if args.resume and args.out.exists() else {}
    done = before.get("runs", [])
    finished = {key(r) for r in done}
    todo = [p for p in todo if key(p) not in finished]
    report = {"settings": {"grid": args.grid, **GRIDS[args.grid], "task": TASK, "pairs": PAIRS,
                           "train": dataclasses.asdict(TRAIN),
                           "num_heads": mqar.RecallConfig("attention").num_heads,
                           "conv_size": mqar.RecallConfig("attention").conv_size,
                           "ablations": ABLATIONS, "workers": args.workers},
              "versions": versions(), "machine": machine(),
              "started": before.get("started", now()),
              "resumed": before.get("resumed", []) + ([now()] if before else []),
              "wall_seconds": before.get("wall_seconds", 0.0), "runs": done}
    print(f"{len(todo)} runs to do ({len(done)} already done), {args.workers} workers, "
          f"device {report['machine']['device']}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    wall_before = report["wall_seconds"]
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        for i, result in enumerate(pool.imap_unordered(one_run, todo), 1):
            report["runs"].append(result)
            elapsed = time.perf_counter() - start
            report["wall_seconds"] = wall_before + elapsed
            args.out.write_text(json.dumps(report, indent=1))
            options = ",".join(f"{k}={v}" for k, v in result["options"].items()) or "-"
            accs = " ".join(f"{a:6.1%}" for a in result["accuracy"])
            print(f"[{i}/{len(todo)}] {result['mixer']:<16} {options:<12} width {result['width']:>3} "
                  f"seed {result['seed']}: {accs} at {PAIRS} pairs after "
                  f"{result['steps']:>3} steps, {result['seconds']:4.0f} s  (elapsed {elapsed / 60:.0f} min, "
                  f"about {elapsed / i * (len(todo) - i) / 60:.0f} min left)", flush=True)
    minutes = report.get("wall_seconds", 0) / 60
    print(f"wrote {args.out}: {len(report['runs'])} runs, {minutes:.0f} min of wall time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
