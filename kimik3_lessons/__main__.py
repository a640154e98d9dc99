"""`python -m kimik3_lessons run-notebooks notebooks/*.ipynb` — execute lessons in place (`make notebooks`).

Every code cell runs top to bottom in a fresh kernel and keeps its outputs, so readers on GitHub see
each number and figure. Cells tagged `gpu` (without CUDA) or `online` (unless --online) run a one-line
note in their place instead, so the notebook stays fully executed, in order, and says what was skipped.
"""

import argparse
import sys
import time
from pathlib import Path

import torch


def skip_reason(cell, online):
    tags = cell.get("metadata", {}).get("tags", [])
    if "gpu" in tags and not torch.cuda.is_available():
        return "this cell needs a CUDA GPU (tag `gpu`): run it on a GPU machine or Colab"
    if "online" in tags and not online:
        return "this cell needs the internet (tag `online`): run it on Colab or with --online"
    return None


def run_notebook(path, online=False, timeout=1800):
    import nbformat
    from nbclient import NotebookClient

    class LessonClient(NotebookClient):
        async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
            reason = skip_reason(cell, online) if cell.cell_type == "code" else None
            if reason is None:
                return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            source = cell.source
            cell.source = f"print({('skipped here: ' + reason)!r})"
            try:
                return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            finally:
                cell.source = source

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # timestamps of an earlier run would only add noise to the diff
        cell.metadata.pop("execution", None)
    LessonClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                 resources={"metadata": {"path": str(Path(path).parent)}}).execute()
    nbformat.write(nb, path)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kimik3_lessons")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run-notebooks", help="execute notebooks in place, keeping their outputs")
    run.add_argument("notebooks", nargs="+", type=Path)
    run.add_argument("--online", action="store_true", help="also run cells tagged `online`")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        start = time.perf_counter()
        print(f"executing {path} ...", flush=True)
        run_notebook(path, online=args.online)
        print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
