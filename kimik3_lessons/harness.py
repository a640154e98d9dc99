"""The benchmark harness of the scripts in benchmarks/ (its rules: benchmarks/maintainers.md, "The
convention every script follows"): one vocabulary of flags, one table, required ratios and agreements
recorded as failures, one exit status. No lesson uses it; the timing itself is `lab.time_in_turn`, the
comparisons `lab.check_close`.

- `bench_arguments`: the flags (--batch, --heads, --seq-len, --head-dim, --chunk-size, --repeat)
- `ratio`, `print_times`: the table of seconds and ratios
- `require_ratio(s)`, `require_close`: a failed requirement is appended to a list, not raised
- `finish`: FAIL lines and the exit status
"""

import argparse
import sys

from kimik3_lessons.lab import check_close

# The benchmarks' flags, spelled one way (benchmarks/maintainers.md): name -> help.
_BENCH_FLAGS = {
    "batch": "sequences per batch",
    "heads": "attention heads",
    "seq_len": "sequence length(s), in tokens",
    "head_dim": "width of one head",
    "chunk_size": "chunk size(s) of the chunked forms",
    "repeat": "rounds of lab.time_in_turn (the median is reported)",
}


def bench_arguments(description, **defaults):
    """An argparse parser with the flags a benchmark takes, from one vocabulary: --batch, --heads,
    --seq-len, --head-dim, --chunk-size, --repeat. Each keyword (batch=2, seq_len=[1024, 4096], ...)
    names a flag the script takes and gives its default; a list default makes the flag take one or more
    values. The script adds its own flags to the parser it gets back, then calls `parse_args()`."""
    unknown = set(defaults) - set(_BENCH_FLAGS)
    if unknown:
        raise ValueError(f"unknown benchmark flags {sorted(unknown)}; the vocabulary is {list(_BENCH_FLAGS)}")
    parser = argparse.ArgumentParser(description=description)
    for name, default in defaults.items():
        nargs = "+" if isinstance(default, (list, tuple)) else None
        parser.add_argument("--" + name.replace("_", "-"), type=int, nargs=nargs, default=default,
                            help=f"{_BENCH_FLAGS[name]} (default: {default})")
    return parser


def ratio(seconds, slow, fast):
    """'3.21x': how many times form `fast` is faster than form `slow`, from {form: seconds} as
    `time_in_turn` returns it; '-' where one of the two was not timed."""
    return f"{seconds[slow] / seconds[fast]:.2f}x" if slow in seconds and fast in seconds else "-"


def print_times(title, results, forms, ratios, key="T", notes=None):
    """Print the table of a benchmark under its `title`: a row per size, from {size: {form: seconds}}
    (what `time_in_turn` returned at each size), with the seconds of each of `forms`, then the ratio of
    each (label, slow, fast, ...) in `ratios`. A form not timed at a size shows its reason from `notes`
    ({(size, form): why}), or '-'. `key` heads the column of sizes."""
    notes = notes or {}
    rows = [[key, *forms, *(label for label, *_ in ratios)]]
    for size, seconds in results.items():
        times = [f"{seconds[f]:.4g}" if f in seconds else notes.get((size, f), "-") for f in forms]
        rows.append([str(size), *times, *(ratio(seconds, slow, fast) for _, slow, fast, *_ in ratios)])
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]))]
    print(f"\n{title}")
    for row in rows:
        print("".join(f"{cell:>{w}}" for cell, w in zip(row, widths, strict=True)))


def require_ratio(failures, label, seconds, slow, fast, minimum):
    """Print `label = <slow/fast> (required >= minimum)`; when the ratio is below `minimum`, append the
    failure, with both times, to the list `failures` (`finish` prints it). A pair that was not timed
    (a size or form the flags left out) is said so, and not checked."""
    if slow not in seconds or fast not in seconds:
        print(f"{label}: not checked ({slow} or {fast} was not timed in this run)")
        return
    measured = ratio(seconds, slow, fast)
    print(f"{label} = {measured} (required >= {minimum:.2g}x)")
    if seconds[slow] / seconds[fast] < minimum:
        failures.append(f"{label} = {measured}: {fast} {seconds[fast]:.4g} s, {slow} {seconds[slow]:.4g} s; "
                        f"required >= {minimum:.2g}x")


def require_ratios(failures, seconds, ratios, where=""):
    """`require_ratio` for each (label, slow, fast, minimum) in `ratios` whose minimum is not None (None:
    a ratio only shown in the table); `where` ("at T=4096") starts each label."""
    for label, slow, fast, minimum in ratios:
        if minimum is not None:
            require_ratio(failures, f"{where}: {label}" if where else label, seconds, slow, fast, minimum)


def require_close(failures, name, ref, out, rtol=None):
    """`check_close`, with a mismatch appended to the list `failures` instead of raised, so that a
    benchmark still times and reports everything else."""
    try:
        check_close(name, ref, out, rtol=rtol)
    except AssertionError as error:
        failures.append(str(error))


def finish(failures):
    """End a benchmark: print the command line that reproduces the run, then one `FAIL: <what>` line
    per failure; return the exit status, 1 if anything failed, else 0 (`sys.exit(main())`)."""
    print("reproduce: .venv/bin/python " + " ".join(sys.argv))
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0
