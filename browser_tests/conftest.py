"""Fixtures for the browser tests (`make test-browser`; `make test` does not collect this folder).

One JupyterLab server for all notebooks (each notebook still gets a fresh kernel: its session is deleted
when it is done), one headless Chromium, and a scratch folder for screenshots, figures and the report:
$KIMIK3_BROWSER_SCRATCH, else $TMPDIR/kimik3-browser.

Settings (environment): NB_TIMEOUT, the time limit of one notebook's Run All in seconds (default 300);
SLIDER_TIMEOUT, how long a slider's output may take to redraw (default 60); CHROMIUM, the browser
(default /usr/bin/chromium).
"""

import os
import tempfile
from pathlib import Path

import labdriver
import pytest

ROOT = Path(__file__).resolve().parent.parent
NB_TIMEOUT = float(os.environ.get("NB_TIMEOUT", 300))
SLIDER_TIMEOUT = float(os.environ.get("SLIDER_TIMEOUT", 60))

_reports = []


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
    return labdriver.LabServer(home, env=kernel_env, log=scratch / f"{name}.log", **kwargs)


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
    """check(server, notebook_path, **limits) -> Report: copy, open, Run All, check; record the timings."""
    def run(server, path, **limits):
        limits.setdefault("timeout", NB_TIMEOUT)
        limits.setdefault("slider_timeout", SLIDER_TIMEOUT)
        name = server.add_notebook(path)
        report = labdriver.check_notebook(browser, server, name, scratch / "screenshots", **limits)
        report.control = Path(path).parent.name == "controls"
        _reports.append(report)
        return report
    return run


def pytest_terminal_summary(terminalreporter):
    if not _reports:
        return
    scratch = scratch_folder()
    lines = [f"{'notebook':<36} {'open':>6} {'run all':>8} {'sliders':>8} {'total':>7}  problems"]
    for r in _reports:
        t = r.timings
        found = ", ".join(sorted(r.kinds())) or "none"
        sliders = f"  ({r.sliders} sliders)" if r.sliders else ""
        lines.append(f"{r.notebook:<36} {t.get('open', 0):6.1f} {t.get('run_all', 0):8.1f} "
                     f"{t.get('sliders', 0):8.1f} {t.get('total', 0):7.1f}  {found}{sliders}")
    total = sum(r.timings.get("total", 0) for r in _reports)
    lines.append(f"{'sum':<36} {'':>6} {'':>8} {'':>8} {total:7.1f}")
    stderr = [f"{r.notebook}: {cell}" for r in _reports if not r.control
              for cell in dict.fromkeys(r.stderr_cells)]
    if stderr:
        lines += ["", "lesson cells that print to stderr (a pink strip in JupyterLab):"]
        lines += [f"  {s}" for s in stderr]
    lines += ["", f"screenshots: {scratch / 'screenshots'}/  (server logs and this report: {scratch}/)"]
    text = "\n".join(lines)
    (scratch / "report.txt").write_text(text + "\n\n" + "\n\n".join(r.summary() for r in _reports) + "\n")
    terminalreporter.write_sep("=", "JupyterLab in Chromium: seconds per notebook")
    terminalreporter.write_line(text)
