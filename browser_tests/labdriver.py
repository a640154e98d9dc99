"""Drive JupyterLab in headless Chromium the way a student does, and report what they would see.

`LabServer` starts `jupyter lab` on loopback with its own config, runtime, settings and workspace folders
and ends it by its PID. `check_notebook` opens one notebook in a fresh browser context (so a fresh
kernel), waits for the status bar's "Python 3 (ipykernel) | Idle", clicks Run > Run All Cells, waits
until no cell is running, then checks, reading the notebook model through `window.jupyterapp`:

- no error output, no failed check (a "❌" line), no stderr output (a pink strip);
- every code cell has an execution count, 1, 2, 3, ... in order (a fresh kernel, top to bottom);
- every widget output is rendered by the widget manager, with as many sliders as its text form names;
- moving each slider (focus the handle, press ArrowRight) re-renders the output area it drives.

It returns a `Report` listing the problems found (empty when the notebook passes) and its timings, and
saves a screenshot. Why each step is there is in docs/design.md, "Driving JupyterLab in a browser".
"""

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

KERNEL_LABEL = "Python 3 (ipykernel)"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_MANAGER = "@jupyter-widgets/jupyterlab-manager"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                 "--disable-dev-shm-usage"]
# Text that marks a failed check in an output: lab.exercise's verdict for a wrong answer.
FAILED_CHECK = "❌"


# ---------------------------------------------------------------------------------------------------
# The server


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """`jupyter lab` on 127.0.0.1, isolated in `home` (config, runtime, settings, workspaces, notebooks).

    `env` is added to the server's environment, so its kernels see it too. `disabled_extensions` names
    lab extensions this server must not load (a negative control disables the widget manager)."""

    def __init__(self, home, env=None, disabled_extensions=(), log=None):
        self.home = Path(home)
        self.root = self.home / "notebooks"
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra_env = dict(env or {})
        self.disabled_extensions = list(disabled_extensions)
        self.log_path = Path(log) if log else self.home / "server.log"
        self.proc = None

    def _write_config(self):
        config, settings = self.home / "config", self.home / "settings"
        for folder in (self.root, config, self.home / "runtime", settings, self.home / "workspaces",
                       self.home / "ipython"):
            folder.mkdir(parents=True, exist_ok=True)
        if self.disabled_extensions:
            (config / "labconfig").mkdir(exist_ok=True)
            page_config = {"disabledExtensions": {name: True for name in self.disabled_extensions}}
            (config / "labconfig" / "page_config.json").write_text(json.dumps(page_config))
        user_settings = {
            # no news or update pop-ups over the notebook
            "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
            # every cell stays in the page, so the checks can read every output and slider
            "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
        }
        for plugin, values in user_settings.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))

    def environment(self):
        env = dict(os.environ)
        env.pop("MPLBACKEND", None)  # the kernels must draw inline, as for a student
        env.update({
            "JUPYTER_CONFIG_DIR": str(self.home / "config"),
            "JUPYTER_RUNTIME_DIR": str(self.home / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(self.home / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(self.home / "workspaces"),
            "IPYTHONDIR": str(self.home / "ipython"),
        })
        env.update(self.extra_env)
        return env

    def start(self, timeout=90):
        self._write_config()
        jupyter_lab = Path(sys.executable).with_name("jupyter-lab")
        cmd = [str(jupyter_lab), "--no-browser", f"--port={self.port}", "--ServerApp.ip=127.0.0.1",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={self.root}", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.expose_app_in_browser=True"]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, env=self.environment(), stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=self.root)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}; see {self.log_path}")
            try:
                self.api("GET", "/api/status")
                return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer on {self.url} in {timeout} s; see {self.log_path}")

    def api(self, method, path, timeout=10):
        request = urllib.request.Request(self.url + path, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self):
        """End every kernel session (the next notebook starts a fresh kernel)."""
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}", timeout=30)

    def stop(self):
        """End the server by its PID: SIGTERM (it shuts its kernels down), SIGKILL if it hangs."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.shutdown_kernels()
            except OSError:
                pass
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
        self.proc = None

    def add_notebook(self, source, name=None):
        """Copy a notebook into the server's folder (as `name`, default its own) with outputs and execution
        counts removed: a count or an output seen after Run All is then one this run produced."""
        nb = json.loads(Path(source).read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
        nb.get("metadata", {}).pop("widgets", None)
        target = self.root / (name or Path(source).name)
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False))
        return target.name

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def launch_chromium(playwright, executable=None):
    executable = executable or os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not Path(executable).exists():
        raise RuntimeError(f"{executable} not found: `apt-get install -y chromium` (make test-browser does)")
    return playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)


# ---------------------------------------------------------------------------------------------------
# What the checks report


@dataclass
class Problem:
    kind: str      # timeout, kernel, error, failed-check, stderr, no-execution-count, widget, slider
    where: str     # "cell 12 (`from ipywidgets import ...`)"
    message: str

    def __str__(self):
        return f"[{self.kind}] {self.where}: {self.message}"


@dataclass
class Report:
    notebook: str
    problems: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    screenshot: Path = None
    sliders: int = 0
    stderr_cells: list = field(default_factory=list)
    control: bool = False   # a negative control (browser_tests/controls/), not a lesson

    def kinds(self):
        return {p.kind for p in self.problems}

    def add(self, kind, where, message):
        self.problems.append(Problem(kind, where, message))

    def summary(self):
        lines = [f"{self.notebook}: {len(self.problems)} problem(s)"] + [f"  {p}" for p in self.problems]
        if self.screenshot:
            lines.append(f"  screenshot: {self.screenshot}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# JavaScript run in the page (JupyterLab's application object: --LabApp.expose_app_in_browser=True)

_FIND_PANEL = """
const findPanel = (path) => {
  const app = window.jupyterapp;
  if (!app) return null;
  for (const w of app.shell.widgets('main')) {
    if (w.context && w.context.path === path && w.content && w.content.model) return w;
  }
  return null;
};
"""

JS_STATE = _FIND_PANEL + """
(path) => {
  const panel = findPanel(path);
  if (!panel) return null;
  const cells = panel.content.widgets.map((c) => ({
    type: c.model.type,
    running: c.model.type === 'code' && c.model.executionState === 'running',
  }));
  const bar = document.querySelector('#jp-main-statusbar');
  return {kernel: panel.sessionContext.kernelDisplayStatus, statusbar: bar ? bar.innerText : '', cells};
}
"""

JS_MODEL = _FIND_PANEL + "(path) => findPanel(path).context.model.toJSON()"

# Per cell: widget outputs rendered by the widget manager, sliders, and outputs shown as stderr or errors
# (these include what an interact's Output widget shows, which the notebook model does not hold).
JS_DOM = _FIND_PANEL + """
(path) => findPanel(path).content.widgets.map((c) => {
  const n = c.node;
  const sliders = Array.from(n.querySelectorAll('.widget-slider'));
  return {
    widgetOutputs: n.querySelectorAll(
      '.jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output > .jupyter-widgets').length,
    widgetErrors: Array.from(n.querySelectorAll('.jupyter-widgets'))
      .filter((w) => /Error (displaying|rendering) widget/.test(w.textContent)).map((w) => w.textContent),
    sliders: sliders.length,
    visibleSliders: sliders.filter((s) => s.offsetWidth > 0 && s.offsetHeight > 0).length,
    stderr: Array.from(n.querySelectorAll(
      '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')).map((o) => o.innerText),
    failed: n.querySelector('.jp-Cell-outputArea') ?
      n.querySelector('.jp-Cell-outputArea').innerText.includes('%FAILED_CHECK%') : false,
  };
})
""".replace("%FAILED_CHECK%", FAILED_CHECK)

# Tag the sliders in document order (data-bt-slider="i") and say which cell holds each.
JS_TAG_SLIDERS = _FIND_PANEL + """
(path) => {
  const panel = findPanel(path);
  const out = [];
  panel.content.widgets.forEach((c, cell) => {
    c.node.querySelectorAll('.widget-slider').forEach((s) => {
      s.setAttribute('data-bt-slider', String(out.length));
      const label = s.querySelector('.widget-label');
      out.push({cell, label: label ? label.innerText : ''});
    });
  });
  return out;
}
"""

# The slider's value as shown (readout, else the handle's aria value) and what the output area it drives
# shows: the Output widget of its interact, else the Output widgets of its cell, else the cell's outputs
# without the controls. What is shown is compared by content (each output's type, images, drawings and
# text), not by markup: a redraw of the same picture leaves style attributes behind that mean nothing.
JS_SLIDER = """
(i) => {
  const s = document.querySelector(`[data-bt-slider="${i}"]`);
  if (!s) return null;
  const readout = s.querySelector('.widget-readout');
  const handle = s.querySelector('.noUi-handle');
  const value = readout && readout.offsetParent !== null ? readout.innerText
    : (handle ? handle.getAttribute('aria-valuetext') || handle.getAttribute('aria-valuenow') : '');
  const cell = s.closest('.jp-Cell');
  const box = s.closest('.widget-interact');
  let areas = box ? Array.from(box.querySelectorAll('.widget-output')) : [];
  if (!areas.length && cell) areas = Array.from(cell.querySelectorAll('.widget-output'));
  if (!areas.length) areas = [cell.querySelector('.jp-Cell-outputArea')];
  const shown = [];
  for (const area of areas) {
    for (const out of area.querySelectorAll('.jp-OutputArea-output')) {
      if (out.querySelector('.jp-OutputArea-output') || out.closest('.widget-slider')) continue;
      if (out.querySelector('.widget-slider')) continue;  // the controls themselves
      const images = Array.from(out.querySelectorAll('img')).map((img) => img.src);
      const svgs = Array.from(out.querySelectorAll('svg')).map((svg) => svg.outerHTML);
      const canvases = Array.from(out.querySelectorAll('canvas')).map((c) => {
        try { return c.toDataURL(); } catch (e) { return 'canvas'; }
      });
      shown.push([out.getAttribute('data-mime-type') || '', out.innerText, ...images, ...svgs, ...canvases]
        .join('\\u0001'));
    }
  }
  return {value, drawn: shown.join('\\u0002')};
}
"""


# ---------------------------------------------------------------------------------------------------
# Driving one notebook


def _where(nb, index):
    cell = nb["cells"][index] if nb and index < len(nb["cells"]) else None
    if cell is None:
        return f"cell {index + 1}"
    lines = [line for line in "".join(cell["source"]).splitlines()
             if line.strip() and not line.startswith("# NBVAL")]
    first = lines[0].strip() if lines else ""
    return f"cell {index + 1} (`{first[:60]}`)"


def _menu(page, menu, item):
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{re.escape(menu)}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{re.escape(item)}$")).click()


def _statusbar(page):
    return page.locator("#jp-main-statusbar").inner_text(timeout=5000)


def _idle(page):
    return f"{KERNEL_LABEL} | Idle" in _statusbar(page)


def _wait_idle(page, timeout, poll=0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _idle(page):
            return True
        time.sleep(poll)
    return False


def _wait_run_all(page, path, timeout, poll=1.0):
    """Wait until no cell is running and the kernel is idle (twice in a row). Returns the last state, or
    None on timeout."""
    deadline = time.monotonic() + timeout
    settled = 0
    while time.monotonic() < deadline:
        time.sleep(poll)
        state = page.evaluate(JS_STATE, path)
        busy = state is None or any(c["running"] for c in state["cells"]) or \
            f"{KERNEL_LABEL} | Idle" not in state["statusbar"]
        settled = 0 if busy else settled + 1
        if settled >= 2:
            return state
    return None


def _check_model(nb, report):
    """Errors, failed checks, stderr and execution counts, from the notebook model."""
    counts = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "error":
                report.add("error", _where(nb, i), f"{out.get('ename')}: {out.get('evalue')}"[:500])
            elif kind == "stream" and out.get("name") == "stderr":
                text = "".join(out.get("text", ""))
                report.add("stderr", _where(nb, i), repr(text.strip()[:300]))
                report.stderr_cells.append(_where(nb, i))
            data = out.get("data", {})
            text = "".join(out.get("text", "")) if kind == "stream" else \
                "".join(data.get("text/plain", "")) + "".join(data.get("text/html", ""))
            for line in text.splitlines():
                if FAILED_CHECK in line:
                    report.add("failed-check", _where(nb, i), line.strip()[:300])
        if "".join(cell["source"]).strip():
            if cell.get("execution_count") is None:
                report.add("no-execution-count", _where(nb, i), "this code cell did not run")
            else:
                counts.append((i, cell["execution_count"]))
    expected = list(range(1, len(counts) + 1))
    if counts and [c for _, c in counts] != expected:
        report.add("no-execution-count", "notebook",
                   f"execution counts {[c for _, c in counts]} are not 1..{len(counts)} in order "
                   "(not one fresh kernel running top to bottom)")


def _expected_sliders(nb):
    """Sliders each cell's widget outputs name in their text form (`interactive(children=(IntSlider(...`)."""
    expected = {}
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_MIME in data:
                text = "".join(data.get("text/plain", ""))
                expected.setdefault(i, [0, 0])
                expected[i][0] += 1
                expected[i][1] += len(re.findall(r"\b\w*Slider\(", text))
    return expected


def _check_widgets(page, path, nb, report, timeout):
    """Every widget output is rendered by the widget manager, with every slider it names visible."""
    expected = _expected_sliders(nb)
    deadline = time.monotonic() + timeout
    while True:
        dom = page.evaluate(JS_DOM, path)
        missing = []
        for i, (outputs, sliders) in expected.items():
            got = dom[i]
            if got["widgetErrors"]:
                missing.append((i, f"the widget manager failed: {got['widgetErrors'][0][:200]}"))
            elif got["widgetOutputs"] < outputs:
                missing.append((i, f"{outputs} widget output(s) shown as text, not rendered as widgets "
                                   "(is the widget manager, jupyterlab_widgets, installed and enabled?)"))
            elif got["visibleSliders"] < sliders:
                missing.append((i, f"{sliders} slider(s) expected, {got['visibleSliders']} rendered"))
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for i, message in missing:
        report.add("widget", _where(nb, i), message)
    return dom


def _move_slider(page, index, timeout, presses=3, poll=0.5, settle=2.0):
    """Press ArrowRight `presses` times on slider `index` (ArrowLeft if it is at its end); wait until
    what it drives has settled (unchanged for `settle` s, kernel idle) on something other than what it
    showed before, or `timeout` s. Returns (moved, changed, seconds)."""
    start = time.monotonic()
    before = page.evaluate(JS_SLIDER, index)
    handle = page.locator(f'[data-bt-slider="{index}"] .noUi-handle').first
    handle.scroll_into_view_if_needed()
    value = before["value"]
    for key in ("ArrowRight", "ArrowLeft"):
        handle.focus()
        for _ in range(presses):
            page.keyboard.press(key)
            time.sleep(0.1)
        value = page.evaluate(JS_SLIDER, index)["value"]
        if value != before["value"]:
            break
    if value == before["value"]:
        return False, False, time.monotonic() - start
    deadline = time.monotonic() + timeout
    last, stable_since, settled = None, time.monotonic(), None
    while time.monotonic() < deadline:
        time.sleep(poll)
        drawn = page.evaluate(JS_SLIDER, index)["drawn"]
        if drawn != last:
            last, stable_since = drawn, time.monotonic()
        if time.monotonic() - stable_since >= settle and _idle(page):
            settled = last
            if settled != before["drawn"]:
                break
    return True, settled is not None and settled != before["drawn"], time.monotonic() - start


def check_notebook(browser, server, name, screenshot_dir, timeout=300.0, widget_timeout=20.0,
                   slider_timeout=60.0, ready_timeout=120.0):
    """Open `name` (already in the server's folder) in a fresh page and kernel, Run All, check it.
    Returns a Report; its `problems` list is empty when the notebook passes."""
    report = Report(name)
    t0 = time.monotonic()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    nb = None
    try:
        page.goto(f"{server.url}/lab/tree/{name}?token={server.token}&reset", timeout=60_000)
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first.wait_for(timeout=60_000)
        if not _wait_idle(page, ready_timeout):
            report.add("kernel", "notebook", f"the status bar never showed '{KERNEL_LABEL} | Idle' in "
                       f"{ready_timeout:.0f} s (it shows {_statusbar(page)!r})")
            return report
        report.timings["open"] = time.monotonic() - t0

        t1 = time.monotonic()
        _menu(page, "Run", "Run All Cells")
        state = _wait_run_all(page, name, timeout)
        report.timings["run_all"] = time.monotonic() - t1
        if state is None:
            state = page.evaluate(JS_STATE, name)
            running = [i for i, c in enumerate(state["cells"]) if c["running"]] if state else []
            nb = page.evaluate(JS_MODEL, name)
            where = _where(nb, running[0]) if running else "notebook"
            status = _statusbar(page).split("|")[-1].split("\n")[0].strip()
            _menu(page, "Kernel", "Interrupt Kernel")
            interrupted = _wait_idle(page, 30)
            report.add("timeout", where, f"Run All did not finish in {timeout:.0f} s (the time limit of "
                       f"one notebook; kernel {status!r}); the kernel was interrupted"
                       + ("" if interrupted else " but did not return to Idle"))
        nb = page.evaluate(JS_MODEL, name)
        _check_model(nb, report)

        t2 = time.monotonic()
        dom = _check_widgets(page, name, nb, report, widget_timeout)
        sliders = page.evaluate(JS_TAG_SLIDERS, name)
        report.sliders = len(sliders)
        for index, slider in enumerate(sliders):
            where = _where(nb, slider["cell"]) + f", slider {slider['label']!r}"
            moved, changed, _ = _move_slider(page, index, slider_timeout)
            if not moved:
                report.add("slider", where, "ArrowRight/ArrowLeft on its handle did not change its value")
            elif not changed:
                report.add("slider", where, f"moving it did not change what is drawn beside it "
                           f"(waited {slider_timeout:.0f} s)")
        report.timings["sliders"] = time.monotonic() - t2

        # Errors and stderr shown after the sliders moved (an interact's Output widget holds them).
        dom = page.evaluate(JS_DOM, name)
        model_stderr = {p.where for p in report.problems if p.kind in ("stderr", "error")}
        for i, cell in enumerate(dom):
            for text in cell["stderr"] if _where(nb, i) not in model_stderr else []:
                if "Traceback (most recent call last)" in text:  # an error in a widget's callback
                    last = [line for line in text.strip().splitlines() if line.strip()][-1]
                    report.add("error", _where(nb, i), f"raised after moving its widgets: {last[:300]}")
                else:
                    report.add("stderr", _where(nb, i), "shown after moving its widgets: "
                               + repr(text.strip()[:300]))
                    report.stderr_cells.append(_where(nb, i))
            if cell["failed"] and not any(p.kind == "failed-check" and p.where == _where(nb, i)
                                          for p in report.problems):
                report.add("failed-check", _where(nb, i), f"{FAILED_CHECK} shown in its output")
    except Exception as exc:  # a browser or page failure is a failure of this notebook, with a picture
        report.add("harness", "notebook", f"{type(exc).__name__}: {exc}".splitlines()[0][:500])
    finally:
        report.screenshot = _screenshot(page, name, nb, report, screenshot_dir)
        context.close()
        try:
            server.shutdown_kernels()
        except OSError as exc:
            report.add("kernel", "notebook", f"could not shut the kernel down: {exc}")
        report.timings["total"] = time.monotonic() - t0
    return report


def _screenshot(page, name, nb, report, folder):
    """Save what the page shows, scrolled to the first problem's cell when there is one."""
    if folder is None:
        return None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (Path(name).stem + ".png")
    try:
        match = next((re.match(r"cell (\d+)", p.where) for p in report.problems
                      if p.where.startswith("cell ")), None)
        if match:  # the cell's top at the top of the view: its source, then the start of its output
            page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").nth(int(match.group(1)) - 1) \
                .evaluate("(cell) => cell.scrollIntoView({block: 'start'})", timeout=5000)
        page.screenshot(path=str(path), timeout=15_000)
        return path
    except Exception:  # a screenshot is a help, never the reason a notebook fails
        return None
