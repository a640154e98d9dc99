"""Multi-query associative recall for every mixer (lesson 12): mixer × length × width × learning rate × seed,
controls, and lesson 11's setting, each model trained for a fixed budget as its reference layer trains.

    make sweep                                                # the whole sweep, resumable (one worker)
    .venv/bin/python benchmarks/mqar_sweep.py --grid quick --runs /tmp/q --summary /tmp/q.json  # a smoke run
    .venv/bin/python benchmarks/mqar_sweep.py --list          # the runs, done or not, and nothing else

The design. Stages, done in order (a stage's runs all finish before the next stage starts, so a sweep cut
short misses whole points, never seeds):
- lesson 11's setting: lesson 12's hybrid on lesson 11's task and recipe, gates started both ways;
- T = 64, width 32: the seven models, then the controls (`CONTROLS`);
- T = 128, width 32 and T = 64, width 64: the seven models.
Every point (model, options, width, length) chooses its own learning rate: each rate of `LRS` is trained on
the search seeds (`SEARCH_SEEDS`), the rate with the best held-out accuracy (mean over the search seeds,
the pair counts and the last four evaluations) wins, and the point is then trained at that rate on the
seeds `SEEDS`, which the choice never saw. The budget is fixed (no early stop); held-out accuracy is
recorded every 50 steps and the test accuracy, the kind of every answer and the gates on the task's
tokens at the end, on other sequences.

Resumable: every run writes its own file, benchmarks/results/mqar_sweep/<run>.json, and a run whose file
exists is skipped. After every run the summary, benchmarks/results/mqar_sweep_summary.json, is assembled
from the files: settings, runs, per point the chosen rate and every seed's results; `complete` says
whether every run of the grid is in.

Provenance: before each run, the worker traces two training steps of that point (`executed_code`) and
records, for every function and method of the package and of this script that ran, a digest of its code
as loaded (`code_digest`: bytecode, names and constants; edits to layout, comments and docstrings do not
count); every run carries that map and the Python version. The summary refuses to assemble runs whose
maps disagree on any function (`check_code`), and `stale_code` lists the functions whose code has changed
since (on the same Python version: bytecode differs between versions). Module-level constants and the
configuration dataclasses' defaults are not traced: each run records its resolved configurations.
"""

import argparse
import dataclasses
import hashlib
import importlib
import inspect
import json
import multiprocessing
import os
import platform
import sys
import time
import types
from datetime import datetime, timezone
from pathlib import Path

import torch

from kimik3_lessons import mqar, recall_training
from kimik3_lessons.recall_task import MQARTask

RESULTS = Path(__file__).parent / "results"
RUNS, SUMMARY = RESULTS / "mqar_sweep", RESULTS / "mqar_sweep_summary.json"
WEIGHTS = RESULTS / "mqar_sweep_weights"          # seed 0's trained weights of the gated models, T = 64
TASK = dict(vocab_size=64, min_distance=16)
PAIRS = (4, 8, 16)         # every model trains on the three in turn and is tested on each (as Zoology)
TRAIN = recall_training.TrainConfig(steps=800, batch_size=32, eval_every=50, eval_size=128, test_size=1024)
MODEL = dict(num_heads=2, chunk_size=16)           # chunk 16: the fastest chunked form on a CPU here
LRS = (3e-3, 1e-2, 3e-2)
SEARCH_SEEDS = (100,)
SEEDS = (0, 1, 2, 3, 4)
MAIN = [(m, {}) for m in mqar.MIXERS]
CONTROLS = [("attention", {"conv": False}),                        # which part binds a value to its key
            ("attention", {"positions": 64}), ("attention", {"positions": 64, "conv": False}),
            ("kda", {"conv": False}),
            ("kda", {"gate_start": "fla"}), ("hybrid", {"gate_start": "fla"})]    # does the start matter
LESSON11 = dict(task=dict(seq_len=24, num_pairs=4, vocab_size=32, min_distance=10), lr=1e-2, width=32,
                train=dict(steps=200, eval_every=25, eval_size=128, test_size=512),
                models=[("hybrid", {}), ("hybrid", {"gate_start": "fla"})])
GRIDS = {
    "full": dict(lesson11=LESSON11, search_seeds=SEARCH_SEEDS, seeds=SEEDS, lrs=LRS, train={},
                 stages=[dict(seq_len=64, width=32, models=MAIN), dict(seq_len=64, width=32, models=CONTROLS),
                         dict(seq_len=128, width=32, models=MAIN), dict(seq_len=64, width=64, models=MAIN)]),
    "quick": dict(lesson11={**LESSON11, "train": dict(steps=6, eval_every=3, eval_size=8, test_size=8)},
                  search_seeds=(100,), seeds=(0, 1), lrs=(1e-2, 3e-2),
                  train=dict(steps=6, eval_every=3, eval_size=8, test_size=8),
                  stages=[dict(seq_len=64, width=16, models=[("deltanet", {}), ("kda", {"conv": False})]),
                          dict(seq_len=128, width=16, models=[("attention", {})])]),
}
SELECTION = ("per point, the rate of LRS with the best held-out accuracy on the search seeds (mean over the "
             "seeds, the pair counts and the last four evaluations); ties (within 0.1 point) to the "
             "smaller rate")


# ---------------------------------------------------------------------------------------------------
# The grid


def lesson11_points(grid):
    g = GRIDS[grid]["lesson11"]
    return [dict(task="lesson11", mixer=m, options=o, width=g["width"], seq_len=g["task"]["seq_len"],
                 lr=g["lr"], seed=seed) for m, o in g["models"] for seed in GRIDS[grid]["seeds"]]


def search_points(grid, stage):
    """A stage's learning-rate search: every model at every rate, on the search seeds."""
    g = GRIDS[grid]
    return [dict(task="mqar", mixer=m, options=o, width=stage["width"], seq_len=stage["seq_len"], lr=lr,
                 seed=seed) for m, o in stage["models"] for lr in g["lrs"] for seed in g["search_seeds"]]


def final_points(grid, stage, lrs):
    """A stage's runs at each model's chosen rate `lrs[(mixer, options)]`, on the seeds."""
    return [dict(task="mqar", mixer=m, options=o, width=stage["width"], seq_len=stage["seq_len"],
                 lr=lrs[model_key(m, o)], seed=seed)
            for m, o in stage["models"] for seed in GRIDS[grid]["seeds"]]


def model_key(mixer, options):
    return json.dumps([mixer, options], sort_keys=True)


def points(grid, run_dir=RUNS):
    """Every run of the grid that can be named now, in the order they run: lesson 11's setting, then
    per stage its search and, once the search is in, its final runs. Returns (runs, the grid's total)."""
    g = GRIDS[grid]
    runs = lesson11_points(grid)
    total = len(runs) + sum(len(stage["models"]) * len(g["lrs"]) * len(g["search_seeds"])
                            + len(stage["models"]) * len(g["seeds"]) for stage in g["stages"])
    for stage in g["stages"]:
        runs += search_points(grid, stage)
        lrs = chosen_lrs(grid, stage, run_dir)
        if lrs is not None:
            runs += final_points(grid, stage, lrs)
    return runs, total


def chosen_lrs(grid, stage, run_dir=RUNS):
    """{model key: the rate chosen in the stage's search} once every search run is in, else None."""
    records = [read_run(run_dir, p) for p in search_points(grid, stage)]
    if any(r is None for r in records):
        return None
    return {model_key(m, o): choose_lr([r for r in records if (r["mixer"], r["options"]) == (m, o)])[1]
            for m, o in stage["models"]}


def search_score(record):
    """Held-out accuracy over the pair counts and the last four evaluations of a run."""
    last = [accs for _, _, accs in record["curve"][-4:]]
    return sum(map(sum, last)) / sum(map(len, last))


def choose_lr(runs):
    """({lr: score}, the chosen lr) over one point's search runs: the best mean `search_score`, ties
    (within 0.1 point) to the smaller rate."""
    by_lr = {}
    for r in runs:
        by_lr.setdefault(r["lr"], []).append(search_score(r))
    scores = {lr: sum(s) / len(s) for lr, s in by_lr.items()}
    best = max(scores.values())
    return scores, min(lr for lr, s in scores.items() if s >= best - 1e-3)


def read_run(run_dir, point):
    path = run_dir / f"{run_name(point)}.json"
    return json.loads(path.read_text()) if path.exists() else None


def run_name(point):
    """kda_w32_T64_lr0.01_s0, kda-gate_start-fla_w32_T64_lr0.01_s0, attention-noconv-positions-64_…,
    lesson11-hybrid_w32_T24_lr0.01_s0."""
    p = point
    options = "".join(f"-no{k}" if v is False else f"-{k}-{v}" for k, v in sorted(p["options"].items()))
    task = "" if p["task"] == "mqar" else f"{p['task']}-"
    return f"{task}{p['mixer']}{options}_w{p['width']}_T{p['seq_len']}_lr{p['lr']:g}_s{p['seed']}"


def tasks_of(grid, point):
    if point["task"] == "lesson11":
        return [MQARTask(**GRIDS[grid]["lesson11"]["task"])]
    return [MQARTask(seq_len=point["seq_len"], num_pairs=p, **TASK) for p in PAIRS]


def train_config(grid, point):
    extra = GRIDS[grid]["lesson11"]["train"] if point["task"] == "lesson11" else GRIDS[grid]["train"]
    return dataclasses.replace(TRAIN, lr=point["lr"], **extra)


def model_config(point, tasks):
    return mqar.RecallConfig(point["mixer"], vocab_size=tasks[0].vocab_size, hidden_size=point["width"],
                             **MODEL, **point["options"])


# ---------------------------------------------------------------------------------------------------
# Provenance: the code a run executed


def executed_code(fn, *args, **kwargs):
    """Run fn(*args, **kwargs) and return (its result, {"path:qualname": digest}) for every function and
    method of kimik3_lessons and of this script that ran, each digested as it was loaded (`code_digest`),
    whatever its file says by then. Nested functions, lambdas and comprehensions are left out: their code
    is part of the function that encloses them."""
    roots = (str(Path(mqar.__file__).parent), str(Path(__file__).resolve()))
    seen = set()

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(roots) and "<" not in qualname(code):
            seen.add(code)

    sys.setprofile(profile)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return result, {f"{code_path(c.co_filename)}:{qualname(c)}": code_digest(c) for c in seen}


def qualname(code):
    return getattr(code, "co_qualname", code.co_name)          # Python 3.11 and later name methods fully


def code_path(filename):
    path = Path(filename).resolve()
    return str(path.relative_to(Path(__file__).resolve().parents[1]))


def code_digest(code, docstring=True):
    """sha256 of what a function computes: its bytecode, names, arguments and constants (nested code by its
    own digest), without its docstring (CPython up to 3.13 keeps it as the first constant of a function),
    line numbers or file: edits to layout, comments and docstrings leave it alone."""
    def const(c):
        if isinstance(c, types.CodeType):
            return code_digest(c, docstring=False)
        if isinstance(c, tuple | frozenset):
            items = [const(x) for x in c]
            return (type(c).__name__, sorted(items) if isinstance(c, frozenset) else items)
        return repr(c)

    consts = code.co_consts[1:] if docstring else code.co_consts
    parts = [code.co_code.hex(), code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
             code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, [const(c) for c in consts]]
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def current_code(key):
    """The code today of a function named by `executed_code` ("path:qualname"), or None if it is gone."""
    path, names = key.split(":")
    names = names.split(".")
    if path.startswith("benchmarks/"):                     # this script
        obj, names = globals().get(names[0]), names[1:]
    else:
        obj = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    for name in names:
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    obj = inspect.unwrap(obj.fget if isinstance(obj, property) else obj)
    return getattr(obj, "__code__", None)


# Changes to a function the committed runs executed that compute the same numbers on the machine those runs
# used (a CPU), each read and stated: {function: {digest the runs recorded: why it is the same computation}}.
# A run that recorded such a digest counts as having run the current code (`stale_code`, `check_code`).
SAME_COMPUTATION = {
    "kimik3_lessons/recall_training.py:answer_kinds": {
        "65838ac4d5f6f1d6": "the answer counter is made on the inputs' device (device=inputs.device, for a "
                            "GPU); the runs' inputs were on the CPU, where it is the same tensor as before"},
    "kimik3_lessons/recall_training.py:parameter_groups": {
        "96364560de534327": "the tables a module names in `no_weight_decay_tables` (AttnRes's, lesson "
                            "11) join the undecayed group; no model of the sweep has one (tests/test_mqar.py "
                            "checks), so its groups are the same as before"},
}


def canonical_digest(key, digest):
    """`digest`, or the current code's digest of `key` where SAME_COMPUTATION lists `digest` as the same."""
    now = current_code(key) if digest in SAME_COMPUTATION.get(key, {}) else None
    return digest if now is None else code_digest(now)


def stale_code(code):
    """The functions of a {key: digest} map whose code has changed (or gone) since: [key]."""
    stale = []
    for key, digest in sorted(code.items()):
        now = current_code(key)
        if now is None or code_digest(now) != canonical_digest(key, digest):
            stale.append(key)
    return stale


def check_code(runs):
    """The code map of a set of runs: {key: digest}. A ValueError if two runs executed different sources
    of one function (a mix of code versions)."""
    code, first = {}, {}
    for r in runs:
        for key, digest in r["code"].items():
            digest = canonical_digest(key, digest)
            if code.setdefault(key, digest) != digest:
                raise ValueError(f"runs {first[key]} and {r['run']} executed different sources of {key}: "
                                 f"the summary refuses a mix of code versions; rerun one of them")
            first.setdefault(key, r["run"])
    return code


# ---------------------------------------------------------------------------------------------------
# One run


def build_and_train(point, grid, tc, seed, log=None):
    """The point's model, seeded with `seed`, trained by recall_training.train: (model, result, tasks)."""
    tasks = tasks_of(grid, point)
    torch.manual_seed(seed)
    model = mqar.RecallModel(model_config(point, tasks))
    initial = half_lives(model)
    result = recall_training.train(model, tasks, tc, seed, log=log)
    return model, {**result, "initial_half_lives": initial}, tasks


def half_lives(model):
    """`mqar.zero_input_half_lives` as JSON: [[layer, [tokens per channel or head]]]."""
    return [[i, [round(x, 4) for x in h.tolist()]] for i, h in mqar.zero_input_half_lives(model)]


def gates_on_the_task(model, tasks, seed, size=256):
    """The forget gates of a trained model on test sequences of each task: per gated layer, the median
    half-life (tokens) of its channels (or heads) at keys, values, blanks and queries, and what is left of
    each pair's write when its query reads (`mqar.retention`): quantiles 10/50/90% over queries and
    channels, and the mean share of channels keeping half or more."""
    out = []
    for j, task in enumerate(tasks):
        inputs, targets = recall_training.held_out([task], size, 2 * 10**6 + 1000 * seed + j, "cpu")[0]
        kind = torch.full(inputs.shape, 2)                                         # blank
        kind[:, 0:2 * task.num_pairs:2], kind[:, 1:2 * task.num_pairs:2] = 0, 1     # key, value
        kind[targets != mqar.IGNORE] = 3                                           # query
        for i, g in mqar.task_decays(model, inputs):
            lives = (0.6931471805599453 / -g.double()).flatten(2)                  # [B, T, units]
            kept = mqar.retention(g, inputs, targets, task.num_pairs).flatten(2)   # [B, P, units]
            q = torch.quantile(kept.flatten().float(), torch.tensor([0.1, 0.5, 0.9]))
            out.append(dict(layer=i, pairs=task.num_pairs, half_life={
                name: lives[kind == c].median().item() for c, name in enumerate(TOKEN_KINDS)},
                retained=[round(x, 6) for x in q.tolist()],
                holding_half=(kept >= 0.5).double().mean().item()))
    return out


TOKEN_KINDS = ("key", "value", "blank", "query")


def one_run(point, out_dir, grid="full", weights_dir=None):
    """Train the point in this worker process and write <out_dir>/<run>.json (atomically: a file that
    exists is a finished run). The code it executes is traced first on a two-step run of the same point.
    Returns the record."""
    torch.set_num_threads(1)
    tc = train_config(grid, point)
    probe = dataclasses.replace(tc, steps=2, eval_every=1, eval_size=2, test_size=2)
    _, code = executed_code(build_and_train, point, grid, probe, point["seed"])
    cpu = time.process_time()
    model, result, tasks = build_and_train(point, grid, tc, point["seed"])
    initial = result.pop("initial_half_lives")
    gates = gates_on_the_task(model, tasks, point["seed"]) if mqar.gated_layers(model) else []
    config = model_config(point, tasks)
    record = {"run": run_name(point), **point, "pairs": [t.num_pairs for t in tasks], **result,
              "held_out": result["curve"][-1][2], "cpu_seconds": time.process_time() - cpu,
              "parameters": sum(p.numel() for p in model.parameters()),
              "state_numbers": [sum(mqar.state_numbers(config, t.seq_len)) for t in tasks],
              "half_lives": {"initial": initial, "trained": half_lives(model)},
              "gates": gates, "model": dataclasses.asdict(config), "train": dataclasses.asdict(tc),
              "tasks": [dataclasses.asdict(t) for t in tasks], "code": code, "torch": torch.__version__,
              "python": platform.python_version(),
              "finished": now(), "load_average": os.getloadavg()}
    if weights_dir is not None and gates and point["task"] == "mqar" and point["seed"] == 0 \
            and (point["seq_len"], point["width"]) == (64, 32):
        weights_dir.mkdir(parents=True, exist_ok=True)
        torch.save({k: v.half() for k, v in model.state_dict().items()}, weights_dir / f"{record['run']}.pt")
    path = out_dir / f"{record['run']}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)
    return record


# ---------------------------------------------------------------------------------------------------
# The summary


def assemble(grid, run_dir=RUNS):
    """The summary of `grid`'s run files in run_dir: settings, progress, the runs (without their code
    maps), the code they executed (one map: `check_code` refuses a mix), and per point whose final runs
    are all in: its rate and search scores, and per seed the test accuracy, answer kinds, held-out
    accuracy, steps to 99% held-out, gates on the task."""
    expected, total = points(grid, run_dir)
    records = {run_name(p): read_run(run_dir, p) for p in expected}
    runs = [r for r in records.values() if r is not None]
    code = check_code(runs)
    g = GRIDS[grid]
    summary_points = []
    for p in lesson11_points(grid)[::len(g["seeds"])]:
        done = [records[run_name({**p, "seed": s})] for s in g["seeds"]]
        if all(done):
            summary_points.append(point_summary(p, done, {f"{p['lr']:g}": None}))
    for stage in g["stages"]:
        lrs = chosen_lrs(grid, stage, run_dir)
        if lrs is None:
            continue
        search = [read_run(run_dir, q) for q in search_points(grid, stage)]
        for q in final_points(grid, stage, lrs)[::len(g["seeds"])]:
            done = [records[run_name({**q, "seed": s})] for s in g["seeds"]]
            if all(done):
                mine = [r for r in search if (r["mixer"], r["options"]) == (q["mixer"], q["options"])]
                scores, _ = choose_lr(mine)
                summary_points.append(point_summary(q, done, {f"{k:g}": v for k, v in scores.items()}))
    settings = {"grid": grid, **{k: v for k, v in g.items()}, "task": TASK, "pairs": PAIRS, "model": MODEL,
                "train": dataclasses.asdict(dataclasses.replace(TRAIN, **g["train"])), "selection": SELECTION}
    progress = []       # per stage: its runs done, each model's rate and search scores once its search is in
    for stage in g["stages"]:
        lrs = chosen_lrs(grid, stage, run_dir)
        search = [(q, read_run(run_dir, q)) for q in search_points(grid, stage)]
        final = final_points(grid, stage, lrs) if lrs else []
        rates = []
        for m, o in stage["models"]:
            mine = [r for q, r in search if (q["mixer"], q["options"]) == (m, o)]
            scores, lr = choose_lr(mine) if all(mine) else ({}, None)
            rates.append([m, o, lr, {f"{k:g}": v for k, v in scores.items()}])
        progress.append(dict(seq_len=stage["seq_len"], width=stage["width"],
                             search=[sum(r is not None for _, r in search), len(search)],
                             final=[sum(read_run(run_dir, q) is not None for q in final),
                                    len(stage["models"]) * len(g["seeds"])], rates=rates))
    cpu = sum(r["cpu_seconds"] for r in runs)
    return {"settings": settings, "complete": len(runs) == total, "done": len(runs), "total": total,
            "stages": progress,
            "missing": [name for name, r in records.items() if r is None],
            "cpu_seconds": cpu, "wall_seconds": sum(r["seconds"] for r in runs),
            "machine": machine(), "torch": sorted({r["torch"] for r in runs}), "code": code,
            "points": summary_points, "runs": [{k: v for k, v in r.items() if k != "code"} for r in runs]}


def point_summary(p, done, lr_scores):
    target = 0.99
    reached = [next((s for s, _, accs in r["curve"] if min(accs) >= target), None) for r in done]
    return dict(task=p["task"], mixer=p["mixer"], options=p["options"], width=p["width"],
                seq_len=p["seq_len"], lr=p["lr"], lr_scores=lr_scores, seeds=[r["seed"] for r in done],
                pairs=done[0]["pairs"],
                accuracy=[r["accuracy"] for r in done], answers=[r["answers"] for r in done],
                held_out=[r["held_out"] for r in done], steps_to_99=reached,
                state_numbers=done[0]["state_numbers"], parameters=done[0]["parameters"],
                gates=[r["gates"] for r in done])


def now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def machine():
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor()
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {"cpu": model, "cpu_count": os.cpu_count(), "gpu": gpu, "platform": platform.platform(),
            "python": platform.python_version()}


def next_runs(grid, run_dir):
    """The runs to do now: lesson 11's setting, else the first stage with runs left (its search, or once
    that is in, its final runs). A stage starts only when the one before it is complete."""
    g = GRIDS[grid]
    todo = [p for p in lesson11_points(grid) if read_run(run_dir, p) is None]
    if todo:
        return todo
    for stage in g["stages"]:
        todo = [p for p in search_points(grid, stage) if read_run(run_dir, p) is None]
        if todo:
            return todo
        lrs = chosen_lrs(grid, stage, run_dir)
        todo = [p for p in final_points(grid, stage, lrs) if read_run(run_dir, p) is None]
        if todo:
            return todo
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", choices=GRIDS, default="full")
    parser.add_argument("--workers", type=int, default=1, help="runs trained at once (one thread each)")
    parser.add_argument("--runs", type=Path, default=RUNS, help="the folder of run files")
    parser.add_argument("--summary", type=Path, default=SUMMARY)
    parser.add_argument("--list", action="store_true", help="list the runs and whether each is done")
    args = parser.parse_args()
    if args.grid != "full" and args.runs == RUNS:
        parser.error("--grid quick writes elsewhere: pass --runs and --summary")
    weights = WEIGHTS if args.runs == RUNS else args.runs.parent / (args.runs.name + "_weights")

    args.runs.mkdir(parents=True, exist_ok=True)
    if args.list:
        grid, total = points(args.grid, args.runs)
        for p in grid:
            print(("done " if read_run(args.runs, p) else "todo ") + run_name(p))
        print(f"{total - len(grid)} more runs once the searches before them are complete")
        return 0
    start, finished = time.perf_counter(), 0
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        while todo := next_runs(args.grid, args.runs):
            _, total = points(args.grid, args.runs)
            print(f"{len(todo)} runs in this batch ({total} in the grid), {args.workers} worker(s)",
                  flush=True)
            jobs = [(p, args.runs, args.grid, weights) for p in todo]
            for r in pool.imap_unordered(_one_run_star, jobs):
                finished += 1
                args.summary.write_text(json.dumps(assemble(args.grid, args.runs), indent=1))
                accs = " ".join(f"{a:6.1%}" for a in r["accuracy"])
                elapsed = (time.perf_counter() - start) / 60
                print(f"[{finished}] {r['run']:<44} {accs} at {r['pairs']} pairs, "
                      f"{r['cpu_seconds']:4.0f} s CPU, {r['seconds']:4.0f} s wall ({elapsed:.0f} min)",
                      flush=True)
    summary = assemble(args.grid, args.runs)
    args.summary.write_text(json.dumps(summary, indent=1))
    print(f"wrote {args.summary}: {summary['done']} of {summary['total']} runs")
    return 0


def _one_run_star(args):
    return one_run(*args)


if __name__ == "__main__":
    sys.exit(main())
