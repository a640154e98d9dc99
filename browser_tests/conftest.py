"""Fixtures for the browser tests (`make test-browser`; `make test` does not collect this folder).

One JupyterLab server and one headless Chromium per pytest worker (`make test-browser` runs two workers,
so two notebooks run at once; each notebook still gets a fresh kernel: its session is deleted when it is
done), and a scratch folder for screenshots, figures and the report: $KIMIK3_BROWSER_SCRATCH, else
$TMPDIR/kimik3-browser. Each worker writes one JSON file per notebook checked into its reports/ folder; the
timing table at the end is assembled from them.

Settings (environment): NB_TIMEOUT, the time limit of one notebook's Run All in seconds (default 300);
SLIDER_TIMEOUT, how long a slider's output may take to redraw (default 60); CHROMIUM, the browser
(default /usr/bin/chromium).
"""

import json
import os
import tempfile
import time
from pathlib import Path

import labdriver
import pytest

ROOT = Path(__file__).resolve().parent.parent
NB_TIMEOUT = float(os.environ.get("NB_TIMEOUT", 300))
SLIDER_TIMEOUT = float(os.environ.get("SLIDER_TIMEOUT", 60))



def scratch_folder():
    folder = os.environ.get("KIMIK3_BROWSER_SCRATCH") or Path(tempfile.gettempdir()) / "kimik3-browser"
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def scratch():
    return scratch_folder()


@pytest.fixture(scope="session")
def kernel_env(scratch):
    """What the server's kernels see: offline (`%%needs internet` cells print one line), figures into the
    scratch folder (figures/ in the checkout stays clean), one OpenMP thread (2 cores: browser + kernel)."""
    return {"HF_HUB_OFFLINE": "1", "KIMIK3_FIGURES": str(scratch / "figures"), "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = labdriver.launch_chromium(playwright)
        yield chromium
        chromium.close()


def _server(tmp_path_factory, scratch, kernel_env, name, **kwargs):
    home = tmp_path_factory.mktemp(name)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return labdriver.LabServer(home, env=kernel_env, log=scratch / f"{name}-{worker}.log", **kwargs)


def pytest_collection_modifyitems(items):
    """Longest first, so that two workers finish together: each lesson by its time in docs/notebook_times.json
    (`make times`), the negative controls (seconds each) last."""
    times = json.loads((ROOT / "docs" / "notebook_times.json").read_text())["seconds"]

    def cost(item):
        path = getattr(item, "callspec", None) and item.callspec.params.get("path")
        return times.get(Path(path).name, 0.0) if path else 0.0
    items.sort(key=cost, reverse=True)


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory, scratch, kernel_env):
    with _server(tmp_path_factory, scratch, kernel_env, "jupyterlab") as server:
        yield server


@pytest.fixture()
def lab_server_without_widgets(tmp_path_factory, scratch, kernel_env):
    """A server whose JupyterLab does not load the widget manager (as if jupyterlab_widgets were missing)."""
    with _server(tmp_path_factory, scratch, kernel_env, "jupyterlab-no-widgets",
                 disabled_extensions=[labdriver.WIDGET_MANAGER]) as server:
        yield server


@pytest.fixture()
def check(browser, scratch):
    """check(server, notebook_path, as_name=None, **limits) -> Report: copy (as `as_name`), open, Run All,
    check; record the timings."""
    def run(server, path, as_name=None, **limits):
        started = time.time()
        limits.setdefault("timeout", NB_TIMEOUT)
        limits.setdefault("slider_timeout", SLIDER_TIMEOUT)
        name = server.add_notebook(path, as_name)
        report = labdriver.check_notebook(browser, server, name, scratch / "screenshots", **limits)
        report.control = Path(path).parent.name == "controls"
        _record(scratch, report, started)
        return report
    return run


def _record(scratch, report, started):
    """One notebook's report as reports/<start time>-<notebook>.json: the workers' table, assembled later."""
    folder = scratch / "reports"
    folder.mkdir(exist_ok=True)
    row = {"notebook": report.notebook, "timings": report.timings, "kinds": sorted(report.kinds()),
           "sliders": report.sliders, "stderr_cells": report.stderr_cells, "control": report.control,
           "summary": report.summary(), "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
           "started": started}
    (folder / f"{started:.3f}-{Path(report.notebook).stem}.json").write_text(json.dumps(row))


def pytest_terminal_summary(terminalreporter, config):
    if hasattr(config, "workerinput"):   # a worker: the controller prints the table
        return
    scratch = scratch_folder()
    rows = sorted((json.loads(p.read_text()) for p in (scratch / "reports").glob("*.json")),
                  key=lambda r: r["started"]) if (scratch / "reports").is_dir() else []
    if not rows:
        return
    lines = [f"{'notebook':<36} {'worker':>6} {'open':>6} {'run all':>8} {'sliders':>8} {'total':>7}  "
             "problems"]
    for r in rows:
        t = r["timings"]
        found = ", ".join(r["kinds"]) or "none"
        sliders = f"  ({r['sliders']} sliders)" if r["sliders"] else ""
        lines.append(f"{r['notebook']:<36} {r['worker'][-6:]:>6} {t.get('open', 0):6.1f} "
                     f"{t.get('run_all', 0):8.1f} {t.get('sliders', 0):8.1f} {t.get('total', 0):7.1f}  "
                     f"{found}{sliders}")
    total = sum(r["timings"].get("total", 0) for r in rows)
    workers = len({r["worker"] for r in rows})
    title = f"sum ({workers} workers side by side)" if workers > 1 else "sum"
    lines.append(f"{title:<43} {'':>6} {'':>8} {'':>8} {total:7.1f}")
    stderr = [f"{r['notebook']}: {cell}" for r in rows if not r["control"]
              for cell in dict.fromkeys(r["stderr_cells"])]
    if stderr:
        lines += ["", "lesson cells that print to stderr (a pink strip in JupyterLab):"]
        lines += [f"  {s}" for s in stderr]
    lines += ["", f"screenshots: {scratch / 'screenshots'}/  (server logs and this report: {scratch}/)"]
    text = "\n".join(lines)
    (scratch / "report.txt").write_text(text + "\n\n" + "\n\n".join(r["summary"] for r in rows) + "\n")
    terminalreporter.write_sep("=", "JupyterLab in Chromium: seconds per notebook")
    terminalreporter.write_line(text)
