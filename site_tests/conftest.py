"""Fixtures for the site tests (`make test-site` builds the site, then runs them; `make test` does not
collect this folder).

Settings (environment): KIMIK3_SITE, the built site (default build/site); KIMIK3_SITE_SCRATCH, where the
screenshots (one per page) and report.txt go (default $TMPDIR/kimik3-site-test); CHROMIUM, the browser
(default /usr/bin/chromium, as for browser_tests/).

`make test-site` runs two pytest workers, each with its own server and Chromium; each writes a JSON file
per page checked into the scratch folder's reports/, and the table at the end is assembled from them.
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pytest
import sitecheck

from tools import repo_url, translations

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("KIMIK3_SITE") or ROOT / "build" / "site")
sys.path.insert(0, str(ROOT / "site"))       # site/kimik3_site.py, the site's own Sphinx extension

# The site's translations (tools/translations, which site/conf.py reads too): each under SITE/<lang>/.
LANGUAGES = translations.LANGUAGES


def scratch_folder():
    folder = Path(os.environ.get("KIMIK3_SITE_SCRATCH") or Path(tempfile.gettempdir()) / "kimik3-site-test")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def lessons():
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


def widget_count(notebook):
    """How many widget outputs the repository's notebook holds (each must be a picture with its line)."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    return sum(sitecheck.WIDGET_MIME in out.get("data", {}) for c in cells for out in c.get("outputs", []))


def lesson_links(stem, lang=None):
    """The Colab URL and the notebook-file URL a lesson page must link to, from the repository the badges
    name (tools/repo_url.py); on a translated page (`lang`), the edition's notebook."""
    (repo,) = repo_url.problems(ROOT)[1]
    branch = next(m["branch"] for m in repo_url.BADGE.finditer((ROOT / "README.md").read_text()))
    rel = f"{repo}/blob/{branch}/{f'editions/{lang}/' if lang else ''}notebooks/{stem}.ipynb"
    return f"https://colab.research.google.com/github/{rel}", f"https://github.com/{rel}"


@pytest.fixture(scope="session")
def site():
    if not (SITE / "index.html").exists():
        pytest.fail(f"no site in {SITE}: `make site` builds it (`make test-site` does both)", pytrace=False)
    return SITE


@pytest.fixture(scope="session")
def scratch():
    return scratch_folder()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = sitecheck.launch_chromium(playwright)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def server(site):
    with sitecheck.SiteServer(site) as running:
        yield running


@pytest.fixture()
def check(browser, server, scratch):
    """check(path, **expected) -> Report, with a screenshot in the scratch folder; recorded for the table."""
    def run(path, screenshots=True, **expected):
        started = time.time()
        report = sitecheck.check_page(browser, server, path, scratch / "screenshots" if screenshots else None,
                                      **expected)
        row = {"page": report.notebook, "seconds": report.timings.get("total", 0),
               "kinds": sorted(report.kinds()), "summary": report.summary(), "started": started,
               "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}
        (scratch / "reports").mkdir(exist_ok=True)
        name = f"{started:.4f}-{row['worker']}-{path.replace('/', '__')}.json"
        (scratch / "reports" / name).write_text(json.dumps(row))
        return report
    return run


def pytest_terminal_summary(terminalreporter, config):
    if hasattr(config, "workerinput"):   # a worker: the controller prints the table
        return
    scratch = scratch_folder()
    folder = scratch / "reports"
    rows = sorted((json.loads(p.read_text()) for p in folder.glob("*.json")),
                  key=lambda r: r["started"]) if folder.is_dir() else []
    if not rows:
        return
    lines = [f"{'page':<44} {'worker':>6} {'seconds':>8}  problems"]
    for r in rows:
        found = ", ".join(r["kinds"]) or "none"
        lines.append(f"{r['page']:<44} {r['worker'][-6:]:>6} {r['seconds']:8.1f}  {found}")
    workers = len({r["worker"] for r in rows})
    title = f"sum ({workers} workers side by side)" if workers > 1 else "sum"
    lines.append(f"{title:<51} {sum(r['seconds'] for r in rows):8.1f}")
    lines += ["", f"screenshots: {scratch / 'screenshots'}/  (this report: {scratch / 'report.txt'})"]
    text = "\n".join(lines)
    (scratch / "report.txt").write_text(text + "\n\n" + "\n\n".join(r["summary"] for r in rows) + "\n")
    terminalreporter.write_sep("=", "the site in Chromium: seconds per page")
    terminalreporter.write_line(text)
