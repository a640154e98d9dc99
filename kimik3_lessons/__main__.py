"""`python -m kimik3_lessons run-notebooks notebooks/*.ipynb` — execute lessons in place (`make notebooks`);
`python -m kimik3_lessons compile-kernels [--check]` — compile every Triton kernel for GPU targets
(`gpu_targets`: registers, spills, shared memory, compile time; no GPU needed);
`python -m kimik3_lessons grade SUBMISSIONS/ [-o grades.csv]` — grade submitted notebooks into a CSV, a row
per student and a column per exercise (`grading`).

Every code cell runs top to bottom in a fresh kernel and keeps its outputs, so readers on GitHub see
each number and figure. Cells that need a GPU or the internet guard themselves (`%%needs`, see
`lab.needs`): where the need is not met they print one line saying what they would show, and that line
is what the notebook keeps. Figures go to $KIMIK3_FIGURES (`make notebooks` points it at figures/).
"""

import argparse
import sys
import time
from pathlib import Path


def execute(path, timeout=300, attempts=3, on_start=None):
    """Run the notebook at `path` top to bottom in a fresh python3 kernel; return it with its outputs.

    A cell that takes longer than `timeout` seconds stops the run. On a busy machine the client sometimes
    never receives the reply of a cell the kernel has finished (seen with widget cells), so a run that
    times out is started again from the top, in a new kernel, up to `attempts` times. `on_start()`, if
    given, is called as each run starts.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    for attempt in range(1, attempts + 1):
        if on_start is not None:
            on_start()
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:  # timestamps of an earlier run would only add noise to the diff
            cell.metadata.pop("execution", None)
        try:
            NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                           resources={"metadata": {"path": str(Path(path).parent)}}).execute()
            return nb
        except (CellTimeoutError, DeadKernelError) as err:
            if attempt == attempts:
                raise
            print(f"  {type(err).__name__} after {timeout} s; running {Path(path).name} again "
                  f"({attempt + 1}/{attempts})", flush=True)


def run_notebook(path):
    """Execute the notebook at `path` and write it back with its outputs (`make notebooks`)."""
    import nbformat
    nbformat.write(execute(path), path)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compile-kernels"]:   # before a lesson module defines a kernel: compile, not interpret
        from kimik3_lessons import gpu_targets
        gpu_targets.compile_mode()
        return gpu_targets.main(argv[1:])
    if argv[:1] == ["grade"]:             # grade submitted notebooks into a CSV (kimik3_lessons.grading)
        from kimik3_lessons import grading
        return grading.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m kimik3_lessons")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("compile-kernels", help="compile every Triton kernel for sm_75/80/90 (see --help)")
    sub.add_parser("grade", help="grade a folder of submitted notebooks into a CSV (see --help)")
    run = sub.add_parser("run-notebooks", help="execute notebooks in place, keeping their outputs")
    run.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for path in args.notebooks:
        start = time.perf_counter()
        print(f"executing {path} ...", flush=True)
        run_notebook(path)
        print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
