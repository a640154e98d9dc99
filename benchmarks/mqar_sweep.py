"""Multi-query associative recall for every mixer (lesson 12): mixer × sequence length × learning rate × seed,
and four ablations, each mixer trained as its reference layer is trained.

    make sweep                                                # the whole sweep: about 2 h on 2 idle CPU cores
    .venv/bin/python benchmarks/mqar_sweep.py --grid quick    # a smoke run of a few minutes, elsewhere
    .venv/bin/python benchmarks/mqar_sweep.py --list          # the runs, done or not, and nothing else

Resumable: every run writes its own file, benchmarks/results/mqar_sweep/<run>.json, and a run whose file
exists is skipped, so an interrupted sweep continues where it stopped. After every run the summary,
benchmarks/results/mqar_sweep_summary.json, is assembled from the files: the settings, the runs, and per
point (mixer, ablation, width, sequence length) the learning rate chosen on held-out accuracy and the test
accuracy of every seed at that rate; `complete` says whether every run of the grid is in.

The recipe (`recall_training.train`): AdamW without weight decay on the gate parameters, norms and
biases; the gates initialised as flash-linear-attention's layers (`mqar`); per mixer, the learning rate
of `LRS` with the best held-out accuracy (the mean over seeds and pair counts of the accuracy on the
held-out sequences the early stop watches, ties to the fewer steps), the same step budget for all.
Test accuracy is measured on other sequences. Two worker processes of one thread each (both cores).
"""

import argparse
import dataclasses
import hashlib
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

from kimik3_lessons import mqar, recall_training
from kimik3_lessons.recall_task import MQARTask

RESULTS = Path(__file__).parent / "results"
RUNS, SUMMARY = RESULTS / "mqar_sweep", RESULTS / "mqar_sweep_summary.json"
TASK = dict(vocab_size=64, min_distance=16)
PAIRS = (4, 8, 16)         # every model trains on the three in turn and is tested on each (as Zoology)
TRAIN = recall_training.TrainConfig()    # 800 steps at most, batch 32, stop at 99% held-out on every PAIRS
LRS = (3e-3, 1e-2, 3e-2)
SEEDS = (0, 1, 2)
GRIDS = {   # stages, done in order: the learning-rate search first, then the points at each mixer's rate
    "full": dict(search=dict(seq_len=64, width=32), seeds=SEEDS, lrs=LRS,
                 stages=[dict(seq_len=128, width=32), dict(seq_len=64, width=32, ablations=True)]),
    "quick": dict(search=dict(seq_len=64, width=16), seeds=(0,), lrs=(1e-2, 3e-2),
                  stages=[dict(seq_len=128, width=16), dict(seq_len=64, width=16, ablations=True)],
                  train=dict(steps=20, eval_every=10, eval_size=32, test_size=32)),
}
SELECTION = ("per mixer, the rate of the search with the best mean held-out accuracy over seeds and pair "
             "counts; ties (within 0.1 point) to the fewer mean steps")
ABLATIONS = [("attention", {"conv": False}), ("kda", {"conv": False}), ("kda", {"decay": False}),
             ("gated_deltanet", {"decay": False}),      # which part does the recall
             ("kda", {"kda_init": "lesson07"})]          # and does the gate's start matter


def search_points(grid):
    """The learning-rate search: every mixer at every rate and seed (seed 0 of all first)."""
    g = GRIDS[grid]
    return [dict(mixer=m, options={}, width=g["search"]["width"], seq_len=g["search"]["seq_len"], lr=lr,
                 seed=seed) for seed in g["seeds"] for m in mqar.MIXERS for lr in g["lrs"]]


def stage_points(grid, stage, lrs):
    """A later stage's runs: each mixer (or ablation, at its mixer's rate) at the rate `lrs[mixer]`."""
    models = ABLATIONS if stage.get("ablations") else [(m, {}) for m in mqar.MIXERS]
    return [dict(mixer=m, options=o, width=stage["width"], seq_len=stage["seq_len"], lr=lrs[m], seed=seed)
            for seed in GRIDS[grid]["seeds"] for m, o in models]


def points(grid, run_dir=RUNS):
    """Every run of the grid that can be named now: the search, then the later stages once the search is
    complete (their rates come from it). Returns (runs, how many runs the whole grid has)."""
    g, runs = GRIDS[grid], search_points(grid)
    later = [stage_points(grid, stage, dict.fromkeys(mqar.MIXERS, 0.0)) for stage in g["stages"]]
    total = len(runs) + sum(map(len, later))
    lrs = chosen_lrs(grid, run_dir)
    if lrs is not None:
        runs += [p for stage in g["stages"] for p in stage_points(grid, stage, lrs)]
    return runs, total


def chosen_lrs(grid, run_dir=RUNS):
    """{mixer: the rate chosen in the search} once every search run is in run_dir, else None."""
    records = [read_run(run_dir, p) for p in search_points(grid)]
    if any(r is None for r in records):
        return None
    return {m: choose_lr([r for r in records if r["mixer"] == m])[1] for m in mqar.MIXERS}


def read_run(run_dir, point):
    path = run_dir / f"{run_name(point)}.json"
    return json.loads(path.read_text()) if path.exists() else None


def run_name(point):
    """The run's file name: kda-nodecay_w32_T64_lr0.01_s0, kda-kda_init-lesson07_w32_T64_lr0.01_s0."""
    options = "".join(f"-no{k}" if v is False else f"-{k}-{v}" for k, v in sorted(point["options"].items()))
    p = point
    return f"{p['mixer']}{options}_w{p['width']}_T{p['seq_len']}_lr{p['lr']:g}_s{p['seed']}"


def tasks_of(seq_len):
    return [MQARTask(seq_len=seq_len, num_pairs=p, **TASK) for p in PAIRS]


def half_lives(model):
    """`mqar.zero_input_half_lives` as JSON: [[layer, [tokens per channel or head]]]."""
    return [[i, [round(x, 4) for x in h.tolist()]] for i, h in mqar.zero_input_half_lives(model)]


def package_digest():
    """sha256 of the package's sources, so that every run says which code trained it."""
    digest = hashlib.sha256()
    for path in sorted((Path(mqar.__file__).parent).glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def train_config(grid, lr):
    return dataclasses.replace(TRAIN, lr=lr, **GRIDS[grid].get("train", {}))


PACKAGE = package_digest()      # at import: the code this process trains with, whatever changes on disk


def one_run(point, out_dir, grid="full"):
    """Build the point's model (seeded), train it in this worker process, write <out_dir>/<run>.json
    (atomically: a file that exists is a finished run). Returns the record."""
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tasks = tasks_of(point["seq_len"])
    config = mqar.RecallConfig(point["mixer"], vocab_size=TASK["vocab_size"], hidden_size=point["width"],
                               **point["options"])
    torch.manual_seed(point["seed"])
    model = mqar.RecallModel(config).to(device)
    initial, cpu = half_lives(model), time.process_time()
    result = recall_training.train(model, tasks, train_config(grid, point["lr"]), point["seed"], log=None)
    record = {"run": run_name(point), **point, "pairs": list(PAIRS), **result,
              "held_out": result["curve"][-1][2], "cpu_seconds": time.process_time() - cpu,
              "parameters": sum(p.numel() for p in model.parameters()),
              "state_numbers": [sum(mqar.state_numbers(config, task.seq_len)) for task in tasks],
              "half_lives": {"initial": initial, "trained": half_lives(model)},
              "device": device, "package": PACKAGE, "finished": now(),
              "load_average": os.getloadavg()}
    path = out_dir / f"{record['run']}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)
    return record


def choose_lr(runs):
    """{lr: (score, mean steps)} over the given runs of one point, and the chosen lr: the best mean held-out
    accuracy (over seeds and pair counts), ties (within 0.1 point) to the fewer mean steps."""
    by_lr = {}
    for r in runs:
        by_lr.setdefault(r["lr"], []).append(r)
    scores = {lr: (sum(sum(r["held_out"]) / len(r["held_out"]) for r in rs) / len(rs),
                   sum(r["steps"] for r in rs) / len(rs)) for lr, rs in by_lr.items()}
    best = max(s for s, _ in scores.values())
    near_best = [lr for lr, (s, _) in scores.items() if s >= best - 1e-3]
    return scores, min(near_best, key=lambda lr: scores[lr][1])


def assemble(grid, run_dir=RUNS):
    """The summary of `grid`'s run files in run_dir: settings, progress, the runs, and per point (mixer,
    options, width, seq_len) whose runs are all in: its rate (chosen in the search), the seeds' test
    accuracy [[per pairs] per seed], held-out accuracy and steps, and what its model holds."""
    expected, total = points(grid, run_dir)
    records = {run_name(p): read_run(run_dir, p) for p in expected}
    runs = [r for r in records.values() if r is not None]
    groups = {}
    for p in expected:
        groups.setdefault(json.dumps([p["mixer"], p["options"], p["width"], p["seq_len"]]), []).append(p)
    summary_points = []
    for key, mine in groups.items():
        mixer, options, width, seq_len = json.loads(key)
        done = [records[run_name(p)] for p in mine if records[run_name(p)] is not None]
        if len(done) < len(mine):
            continue
        scores, lr = choose_lr(done)
        chosen = sorted((r for r in done if r["lr"] == lr), key=lambda r: r["seed"])
        summary_points.append(dict(
            mixer=mixer, options=options, width=width, seq_len=seq_len, lr=lr,
            lr_scores={f"{k:g}": v[0] for k, v in scores.items()}, seeds=[r["seed"] for r in chosen],
            accuracy=[r["accuracy"] for r in chosen], held_out=[r["held_out"] for r in chosen],
            steps=[r["steps"] for r in chosen], state_numbers=chosen[0]["state_numbers"],
            parameters=chosen[0]["parameters"]))
    shape = mqar.RecallConfig("attention")
    return {"settings": {"grid": grid, **GRIDS[grid], "task": TASK, "pairs": PAIRS,
                         "train": dataclasses.asdict(train_config(grid, None)), "num_heads": shape.num_heads,
                         "conv_size": shape.conv_size, "ablations": ABLATIONS,
                         "selection": SELECTION},
            "complete": len(runs) == total, "done": len(runs), "total": total,
            "missing": [name for name, r in records.items() if r is None],
            "run_seconds": sum(r["seconds"] for r in runs), "machine": machine(), "versions": versions(),
            "points": summary_points, "runs": runs}


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
            "platform": platform.platform()}


def versions():
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = None
    return {"python": platform.python_version(), "torch": torch.__version__, "kimik3_lessons_commit": commit,
            "package": PACKAGE}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", choices=GRIDS, default="full")
    parser.add_argument("--workers", type=int, default=2, help="runs trained at once (one thread each)")
    parser.add_argument("--runs", type=Path, default=RUNS, help="the folder of run files")
    parser.add_argument("--summary", type=Path, default=SUMMARY)
    parser.add_argument("--list", action="store_true", help="list the runs and whether each is done")
    args = parser.parse_args()
    if args.grid != "full" and args.runs == RUNS:
        parser.error("--grid quick writes elsewhere: pass --runs and --summary")

    args.runs.mkdir(parents=True, exist_ok=True)
    if args.list:
        grid, total = points(args.grid, args.runs)
        for p in grid:
            print(("done " if read_run(args.runs, p) else "todo ") + run_name(p))
        print(f"{total - len(grid)} more runs once the learning-rate search is complete")
        return 0
    start, finished = time.perf_counter(), 0
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        while True:        # the search, then (its rates known) the later stages
            grid, total = points(args.grid, args.runs)
            todo = [p for p in grid if read_run(args.runs, p) is None]
            if not todo:
                break
            print(f"{len(todo)} runs to do now ({total - len(todo)} of {total} done or waiting), "
                  f"{args.workers} workers", flush=True)
            for r in pool.imap_unordered(_one_run_star, [(p, args.runs, args.grid) for p in todo]):
                finished += 1
                args.summary.write_text(json.dumps(assemble(args.grid, args.runs), indent=1))
                elapsed = time.perf_counter() - start
                accs = " ".join(f"{a:6.1%}" for a in r["accuracy"])
                print(f"[{finished}] {r['run']:<36} {accs} at {PAIRS} pairs after {r['steps']:>3} steps, "
                      f"{r['seconds']:4.0f} s  (elapsed {elapsed / 60:.0f} min)", flush=True)
    summary = assemble(args.grid, args.runs)
    args.summary.write_text(json.dumps(summary, indent=1))
    print(f"wrote {args.summary}: {summary['done']} of {summary['total']} runs")
    return 0


def _one_run_star(args):
    return one_run(*args)


if __name__ == "__main__":
    sys.exit(main())
