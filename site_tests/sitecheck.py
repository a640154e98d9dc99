"""Check the built course website (`make site`, build/site/) the way a reader meets it.

`SiteServer` serves the site on 127.0.0.1 (its own free port, a thread of this process); it can serve a
page in place of a file (`overrides`), which the negative controls use. `check_page` opens one page in
headless Chromium (launched by browser_tests/labdriver.py, the browser suite's launcher) and reports:

- console: an error logged to the console, or an exception the page's scripts did not catch;
- request: a request that failed or was answered with a status of 400 or more;
- external: a request to any host but the site's (never sent: the page is cut off from the network);
- figure: an image that did not load (its natural width is 0);
- math: MathJax missing or not done, a formula it did not typeset or could not parse, or `$...$` left
  raw in the text (code and printed outputs aside);
- colab, widget: on a lesson page, its Colab badge and the link to its notebook file missing, or a
  widget's default picture without its line;
- table: a markdown table left as text (`|---|`, anywhere: prose, outputs or code);
- copy: a code block without its copy button;
- code-width: a code block or printed output wider than its column (it must wrap, not scroll);
- sideways: the page wider than the screen.

`check_page` opens a page at a phone's size, 390 × 844 (what fits a phone fits any wider screen: code
wraps at its column, tables scroll in their frame); `navigation` works the header at every width.

`navigation` opens a page at one width and works its header as a reader would: one row, ☰ opens (or, on
a wide screen, hides and shows) the lesson list, the contents button opens the page's contents, nothing
scrolls sideways, and the header is whole after scrolling. `switch_language` checks that the language
switch keeps the section being read; `interface_text` collects the interface text a page shows (buttons,
tooltips, labels, summaries), for a translation's to be compared with its English page's.

`static_problems` reads the HTML files without a browser: a resource (script, stylesheet, image, font,
frame) from another host, or an internal link to a file or an anchor that is not there. `paragraphs`
reads a page's prose (its article's paragraphs, printed outputs aside), which `untranslated` compares
between a page and its translation, and `language_links` reads the language switch. `search` types
a word into the site's search page and returns the pages it lists.
"""

import html.parser
import http.server
import re
import sys
import threading
import time
from functools import partial
from pathlib import Path
from urllib.parse import unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "browser_tests"))
from labdriver import WIDGET_MIME, Report, launch_chromium  # noqa: E402, F401  (the browser suite's, reused)

VIEWPORT = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
WIDTHS = [390, 800, 1024, 1400]         # a phone, a tablet, a small laptop, a desktop


# ---------------------------------------------------------------------------------------------------
# Serving the site


class _Handler(http.server.SimpleHTTPRequestHandler):
    overrides = {}

    def do_GET(self):
        body = self.overrides.get(unquote(urlsplit(self.path).path))
        if body is None:
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(self.path))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A browser that closes a connection before a file is sent (it left the page) is no error of the
        site; anything else is printed, as the standard server does."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class SiteServer:
    """The folder `root` over HTTP on 127.0.0.1 at a port the system picks; `overrides` maps a URL path
    ("/notebooks/control.html") to the bytes served there instead of a file."""

    def __init__(self, root):
        self.root = Path(root)
        self.overrides = {}
        handler = type("Handler", (_Handler,), {"overrides": self.overrides})
        self.httpd = _Server(("127.0.0.1", 0), partial(handler, directory=str(root)))
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------------------------------------------
# One page in the browser

# Images, formulas and raw dollars, read once MathJax is done (it typesets after the page's load event)
# and the fonts it asked for have loaded (or failed: the request check sees that).
JS_PAGE = r"""
async () => {
  const out = {mathjax: null, images: [], untypeset: [], texErrors: [], rawMath: [], widgets: [], links: [],
               rawTables: [], noCopy: [], wide: []};
  const within = (promise, ms) => Promise.race(
    [promise.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), ms))]);
  const formulas = document.querySelectorAll('.math');
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    out.mathjax = await within(MathJax.startup.promise, 60000) ? 'done' : 'timeout';
  } else if (formulas.length) {
    out.mathjax = 'missing';
  }
  await within(document.fonts.ready, 30000);
  for (const img of document.images) {
    if (!(img.complete && img.naturalWidth > 0)) out.images.push(img.getAttribute('src'));
  }
  for (const m of formulas) {
    if (!m.querySelector('mjx-container')) out.untypeset.push(m.textContent.trim().slice(0, 80));
  }
  for (const e of document.querySelectorAll('mjx-merror')) {
    out.texErrors.push((e.getAttribute('data-mjx-error') || e.textContent).slice(0, 120));
  }
  const skip = 'pre, code, script, style, textarea, mjx-container, .highlight, .math';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement && node.parentElement.closest(skip)) continue;
    const raw = node.textContent.match(/\$\$|\$[^$\s][^$]*\$/);
    if (raw) out.rawMath.push(raw[0].slice(0, 80));
  }
  for (const w of document.querySelectorAll('.widget-default')) {
    const cell = w.previousElementSibling;
    const img = cell ? cell.querySelector('.cell_output img') : null;
    out.widgets.push({text: w.innerText, picture: !!img && img.complete && img.naturalWidth > 0});
  }
  out.links = Array.from(document.querySelectorAll('article a[href]')).map((a) => a.href);
  const article = document.querySelector('article') || document.body;
  const all = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let node = all.nextNode(); node; node = all.nextNode()) {
    const rule = node.textContent.match(/\|\s*:?-{3,}:?\s*\|/);
    if (rule) out.rawTables.push(node.textContent.trim().slice(0, 80));
  }
  for (const pre of document.querySelectorAll('article div.highlight pre')) {
    if (pre.parentElement.querySelector('button.copybtn')) continue;
    out.noCopy.push(pre.textContent.trim().slice(0, 60));
  }
  out.wide = WIDE();
  return out;
}
"""
# Code blocks and printed outputs wider than their column (they must wrap): shown ones only.
WIDE = r"""
() => Array.from(document.querySelectorAll('article pre'))
  .filter((pre) => pre.offsetParent !== null && pre.scrollWidth > pre.clientWidth + 2)
  .map((pre) => `${pre.scrollWidth} px in ${pre.clientWidth}: ${pre.textContent.trim().slice(0, 60)}`)
"""
JS_PAGE = JS_PAGE.replace("WIDE()", f"({WIDE.strip()})()")
# On a phone: how much wider than the screen the page is, and what sticks out.
JS_NARROW = r"""
() => {
  const root = document.scrollingElement || document.documentElement;
  const over = root.scrollWidth - root.clientWidth;
  const out = [];
  if (over > 1) {
    for (const el of document.querySelectorAll('body *')) {
      const r = el.getBoundingClientRect();
      if (r.right > root.clientWidth + 1 && r.width > 0 && el.children.length === 0) {
        out.push(`<${el.tagName.toLowerCase()} class="${el.className}"> ends at ${Math.round(r.right)} px`);
        if (out.length >= 3) break;
      }
    }
  }
  return {over, out};
}
"""


def _host(url):
    return urlsplit(url).netloc


def check_page(browser, server, path, screenshot_dir=None, colab=None, notebook=None, widgets=0,
               timeout=60):
    """Open `server.url/path` and check it (see the module docstring). `colab` and `notebook`: the URLs
    its Colab badge and its notebook-file link must have; `widgets`: how many widget pictures, each with
    its line, it must show. Returns a labdriver.Report (no problems: the page passes)."""
    report = Report(path)
    t0 = time.monotonic()
    context = browser.new_context(viewport=PHONE, service_workers="block")
    page = context.new_page()
    own = _host(server.url)
    external = set()

    def route(r):
        if _host(r.request.url) == own:
            return r.continue_()
        external.add(r.request.url)
        return r.abort()

    def console(msg):
        # "Failed to load resource" repeats a failed request, which `request` reports with its URL.
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            report.add("console", path, msg.text[:300])

    def failed(request):
        if request.url not in external:
            report.add("request", path, f"{request.url}: {request.failure}")

    def response(resp):
        if resp.status >= 400:
            report.add("request", path, f"{resp.url}: HTTP {resp.status}")

    page.route("**/*", route)
    page.on("console", console)
    page.on("pageerror", lambda exc: report.add("console", path, f"uncaught: {exc}"[:300]))
    page.on("requestfailed", failed)
    page.on("response", response)
    try:
        page.goto(f"{server.url}/{path}", wait_until="load", timeout=timeout * 1000)
        found = page.evaluate(JS_PAGE)
        _judge(report, path, found, colab, notebook, widgets)
        narrow = page.evaluate(JS_NARROW)
        if narrow["over"] > 1:
            report.add("sideways", path, f"at {PHONE['width']} px the page is {narrow['over']} px wider than "
                       f"the screen: {'; '.join(narrow['out'])}")
        report.timings["load"] = time.monotonic() - t0
        if screenshot_dir is not None:
            folder = Path(screenshot_dir)
            folder.mkdir(parents=True, exist_ok=True)
            report.screenshot = folder / (path.replace("/", "__").removesuffix(".html") + ".png")
            page.screenshot(path=str(report.screenshot))
    except Exception as exc:  # a page that does not load or answer is a failure of that page
        report.add("harness", path, f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
    finally:
        context.close()
    for url in sorted(external):
        report.add("external", path, f"a request to another host: {url}")
    report.timings["total"] = time.monotonic() - t0
    return report


# What JS_PAGE found that is a problem, each: (its key, the kind of problem, what it says of it); the
# first five of each are reported.
LISTED = [("untypeset", "math", "formula not typeset: {!r}"),
          ("texErrors", "math", "MathJax could not parse a formula: {!r}"),
          ("rawMath", "math", "raw math left in the text: {!r}"),
          ("rawTables", "table", "a markdown table left as text: {!r}"),
          ("noCopy", "copy", "a code block without a copy button: {!r}"),
          ("wide", "code-width", "a code block wider than its column: {}")]


def _judge(report, path, found, colab, notebook, widgets):
    for src in found["images"]:
        report.add("figure", path, f"image not loaded (natural width 0): {src}")
    if found["mathjax"] == "missing":
        report.add("math", path, "the page has formulas but MathJax is not loaded")
    elif found["mathjax"] == "timeout":
        report.add("math", path, "MathJax did not finish typesetting in 60 s")
    for key, kind, says in LISTED:
        for text in found[key][:5]:
            report.add(kind, path, says.format(text))
    for url, what in ((colab, "its Colab badge"), (notebook, "the link to its notebook file")):
        if url and url not in found["links"]:
            report.add("colab", path, f"{what} ({url}) is not on the page")
    shown = found["widgets"]
    if len(shown) != widgets:
        report.add("widget", path, f"{widgets} widget(s) in the notebook, {len(shown)} line(s) under "
                   "a default picture")
    for w in shown:
        if not w["picture"]:
            report.add("widget", path, f"a widget's line without its picture above it: {w['text'][:100]!r}")


# ---------------------------------------------------------------------------------------------------
# Search


def search(browser, server, word, timeout=30, prefix=""):
    """The pages (paths) the site's search page (under `prefix`, a translation's folder) lists for `word`."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/{prefix}search.html?q={word}", wait_until="load", timeout=timeout * 1000)
        page.wait_for_function(
            "() => { const s = document.querySelector('#search-results .search-summary');"
            " return s && s.innerText.trim().length > 0; }",
            timeout=timeout * 1000)
        hrefs = page.eval_on_selector_all("#search-results ul.search li a", "(as) => as.map((a) => a.href)")
    finally:
        context.close()
    return [urlsplit(h).path.lstrip("/") for h in hrefs]


# ---------------------------------------------------------------------------------------------------
# The header, the lesson list and the contents at one width; the language switch; the interface text

# The article's header: its shown items (☰, the language switch, the theme's buttons), each a box.
JS_HEADER = r"""
() => {
  const header = document.querySelector('.bd-header-article');
  if (!header) return null;
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, name: el.className};
  };
  const items = Array.from(header.querySelectorAll(
      '.header-article-items__start > .header-article-item > *, ' +
      '.header-article-items__end > .header-article-item > *'))
    .flatMap((el) => el.classList.contains('article-header-buttons') ? Array.from(el.children) : [el])
    .filter((el) => el.offsetParent !== null && el.getBoundingClientRect().width > 0);
  return {header: box(header), items: items.map(box), width: document.documentElement.clientWidth};
}
"""
JS_SHOWN_LINKS = r"""
(selector) => Array.from(document.querySelectorAll(selector)).filter((a) => {
  const r = a.getBoundingClientRect();
  return a.offsetParent !== null && r.width > 0 && r.height > 0 && r.right > 0 && r.left < window.innerWidth
    && r.bottom > 0 && r.top < window.innerHeight && getComputedStyle(a).visibility !== 'hidden';
}).length
"""


def header_problems(found, when):
    """The header's items in one row, inside the screen, not on top of each other (the JS_HEADER box)."""
    if found is None:
        return [f"{when}: the page has no article header"]
    out, items = [], sorted(found["items"], key=lambda b: b["left"])
    if not items:
        return [f"{when}: the header shows no button"]
    middles = [(b["top"] + b["bottom"]) / 2 for b in items]
    if max(middles) - min(middles) > 6:
        out.append(f"{when}: the header's items are not in one row (their middles from {min(middles):.0f} to "
                   f"{max(middles):.0f} px)")
    if found["header"]["bottom"] - found["header"]["top"] > 64:
        out.append(f"{when}: the header is {found['header']['bottom'] - found['header']['top']:.0f} px high")
    for b in items:
        if b["top"] < -1 or b["right"] > found["width"] + 1 or b["left"] < -1:
            out.append(f"{when}: a header item ({b['name'][:40]}) is cut off by the screen's edge")
    for a, b in zip(items, items[1:], strict=False):
        if b["left"] < a["right"] - 1:
            out.append(f"{when}: two header items overlap ({a['name'][:30]}, {b['name'][:30]})")
    return out


# Two animation frames: what a change of size or scroll has laid out is drawn.
FRAMES = "new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


def _until(page, condition, arg=None, ms=3000):
    """Whether `condition` (JavaScript, a function of `arg`) holds within `ms` (checked every frame)."""
    from playwright.sync_api import TimeoutError as Timeout

    try:
        page.wait_for_function(condition, arg=arg, timeout=ms)
        return True
    except Timeout:
        return False


def _shown_toggle(page, which):
    for handle in page.query_selector_all(f".bd-header-article .{which}"):
        if handle.is_visible():
            return handle
    return None


def navigation(browser, server, path, width, timeout=30):
    """Problems of page `path` at `width` px, worked as a reader does: the header in one row (and again
    after scrolling down), ☰ opening the lesson list in a dialog (below 992 px) or hiding and showing the
    sidebar (wider), the contents button opening the page's contents (below 1200 px; wider, the contents
    are shown beside the page), and no sideways scrolling."""
    size = {"width": width, "height": 844 if width < 500 else 900}
    context = browser.new_context(viewport=size, service_workers="block")
    page = context.new_page()
    _own_host_only(page, server)
    out, when = [], f"{path} at {width} px"
    count = JS_SHOWN_LINKS.strip()
    opened = ("([id, links, least]) => document.getElementById(id)?.open === true && "
              f"({count})('#' + id + ' ' + links) >= least")
    closed = "(id) => document.getElementById(id)?.open === false"
    shown = f"([links, least, most]) => {{ const n = ({count})(links); return n >= least && n <= most; }}"
    try:
        page.goto(f"{server.url}/{path}", wait_until="load", timeout=timeout * 1000)
        page.evaluate("document.fonts.ready.then(() => true)")
        out += header_problems(page.evaluate(JS_HEADER), when)
        narrow = page.evaluate(JS_NARROW)
        if narrow["over"] > 1:
            out.append(f"{when}: the page is {narrow['over']} px wider than the screen")
        lessons = "nav.bd-docs-nav a.reference"
        toggle = _shown_toggle(page, "primary-toggle")
        if toggle is None:
            out.append(f"{when}: no ☰ button shown")
        elif width < 992:
            toggle.click()
            if not _until(page, opened, ["pst-primary-sidebar-modal", lessons, 3]):
                out.append(f"{when}: ☰ does not open the lesson list")
            page.keyboard.press("Escape")
            _until(page, closed, "pst-primary-sidebar-modal")
        else:
            before = _until(page, shown, [lessons, 3, 10_000])
            toggle.click()
            hidden = _until(page, shown, [lessons, 0, 0])
            toggle.click()
            again = _until(page, shown, [lessons, 3, 10_000])
            if not (before and hidden and again):
                out.append(f"{when}: ☰ does not hide and show the lesson list (links shown before a click: "
                           f"{before}, none after one: {hidden}, shown after two: {again})")
        contents = "nav.page-toc a"
        toggle = _shown_toggle(page, "secondary-toggle")
        if width < 1200:
            if toggle is None:
                out.append(f"{when}: no contents button shown")
            else:
                toggle.click()
                if not _until(page, opened, ["pst-secondary-sidebar-modal", contents, 1]):
                    out.append(f"{when}: the contents button does not open the page's contents")
                page.keyboard.press("Escape")
                _until(page, closed, "pst-secondary-sidebar-modal")
        elif page.evaluate(JS_SHOWN_LINKS, f".bd-sidebar-secondary {contents}") < 1:
            out.append(f"{when}: the page's contents are not shown beside it")
        page.evaluate("window.scrollBy(0, 2500)")
        page.evaluate(FRAMES)
        out += header_problems(page.evaluate(JS_HEADER), f"{when}, scrolled")
    except Exception as exc:  # a page that does not load or answer fails
        out.append(f"{when}: {type(exc).__name__}: {exc}".splitlines()[0][:300])
    finally:
        context.close()
    return out


def _own_host_only(page, server, typeset=True):
    """Requests to other hosts refused; without `typeset`, MathJax's too (checks of the interface, not of
    the math, load a page in a fraction of the time)."""
    def route(r):
        url = r.request.url
        if _host(url) != _host(server.url) or (not typeset and "/_static/mathjax/" in url):
            return r.abort()
        return r.continue_()
    page.route("**/*", route)


def switch_language(browser, server, path, section, to, scroll=False, timeout=30):
    """The address the language switch of `path` leads to in language `to` ("zh-CN", "de", "en") when the
    reader is at `section` (an id): reached by its #anchor, or with `scroll`, by scrolling to it."""
    context = browser.new_context(viewport=VIEWPORT, service_workers="block")
    page = context.new_page()
    _own_host_only(page, server, typeset=False)
    try:
        page.goto(f"{server.url}/{path}{'' if scroll else '#' + section}", wait_until="load",
                  timeout=timeout * 1000)
        if scroll:
            page.evaluate("(id) => document.getElementById(id).scrollIntoView()", section)
            page.evaluate(FRAMES)
        # Clicked as a reader clicks: Playwright's own click would first scroll the (sticky) header "into
        # view", moving the page away from the section.
        page.dispatch_event(".language-switch button", "click")
        _until(page, "() => document.querySelector('.language-switch .dropdown-menu.show') !== null")
        with page.expect_navigation(timeout=timeout * 1000):
            page.dispatch_event(f'.language-switch a[hreflang="{to}"]', "click")
        return page.url
    finally:
        context.close()


# The interface text of a page: every title, label, placeholder and tooltip, the shown text outside the
# article, and in it what the site writes around the lesson (its header, folds, charts, copy buttons).
JS_INTERFACE = r"""
() => {
  const out = new Set();
  const skip = (el) => el.closest('.onlyprint, script, style, mjx-container');
  for (const el of document.querySelectorAll('[title], [aria-label], [placeholder], [data-tooltip]')) {
    if (skip(el)) continue;
    for (const a of ['title', 'aria-label', 'placeholder', 'data-tooltip']) {
      const v = el.getAttribute(a);
      if (v && !(a === 'title' && el.closest('article .cell_output, svg.lesson-map'))) out.add(v.trim());
    }
  }
  // page titles (the sidebar, the contents, next and previous, search results) are not interface text
  const pages = 'nav.bd-docs-nav, .bd-sidebar-secondary nav.page-toc, .prev-next-area, #search-results ul';
  const ours = '.lesson-header .lesson-buttons, .lesson-header strong, details.kimik3-fold > summary, ' +
               'figure.bench-chart figcaption, .gpu-none';
  const roots = [document.body];
  for (const root of roots) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (!el || skip(el) || (el.closest('article') && !el.closest(ours))) continue;
      if (el.closest(pages)) continue;
      const t = n.textContent.trim();
      if (t) out.add(t);
    }
  }
  const status = document.querySelector('#search-results .search-summary, #search-results p');
  if (status) out.add(status.textContent.trim());
  return Array.from(out);
}
"""


def interface_text(browser, server, path, ready=None, timeout=30):
    """The interface text of page `path` (JS_INTERFACE), once `ready` (a JavaScript condition) holds: a
    search page says what it found only after searching."""
    context = browser.new_context(viewport=VIEWPORT, service_workers="block")
    page = context.new_page()
    _own_host_only(page, server, typeset=False)
    try:
        page.goto(f"{server.url}/{path}", wait_until="load", timeout=timeout * 1000)
        if ready and not _until(page, ready, ms=timeout * 1000):
            raise TimeoutError(f"{path}: not ready in {timeout} s ({ready})")
        page.evaluate(FRAMES)
        return set(page.evaluate(JS_INTERFACE))
    finally:
        context.close()


# Words that stay as they are in every language: names of things and of languages, key labels.
NAMES = {"kimik3-lessons", "English", "Deutsch", "中文", "Ctrl", "K", "Colab", "Kaggle", "GitHub", "Run All"}


def english_left(english, translated):
    """The interface text a translated page shows as its English page shows it: a string with an English
    word of three letters or more in lower case, that is no name (NAMES)."""
    return sorted(t for t in english & translated
                  if t not in NAMES and re.search(r"\b[a-z]{3,}\b", re.sub(r"kimik3-lessons", "", t)))


# ---------------------------------------------------------------------------------------------------
# The HTML files, without a browser

RESOURCE_TAGS = {"script": "src", "img": "src", "iframe": "src", "source": "src", "audio": "src",
                 "video": "src", "embed": "src", "object": "data", "input": "src"}
RESOURCE_RELS = {"stylesheet", "preload", "modulepreload", "prefetch", "icon", "shortcut", "apple-touch-icon",
                 "manifest", "preconnect", "dns-prefetch"}
CSS_URL = re.compile(r"""url\(\s*["']?(https?:)?//""")


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.links, self.resources = set(), [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "a" and a.get("href") is not None:
            self.links.append(a["href"])
        if tag in RESOURCE_TAGS and a.get(RESOURCE_TAGS[tag]):
            self.resources.append(a[RESOURCE_TAGS[tag]])
        if tag == "link" and set((a.get("rel") or "").lower().split()) & RESOURCE_RELS and a.get("href"):
            self.resources.append(a["href"])
        if a.get("style") and CSS_URL.search(a["style"]):
            self.resources.append(a["style"])


def _parse(path):
    page = _Page()
    page.feed(Path(path).read_text(errors="replace"))
    return page


def static_problems(root):
    """[(file, problem)] over every HTML and CSS file under `root`: a resource from another host, an
    internal link to a missing file or to an anchor its page does not have."""
    root = Path(root)
    pages = {p: _parse(p) for p in sorted(root.rglob("*.html"))}
    out = []
    for path, page in pages.items():
        rel = path.relative_to(root).as_posix()
        for url in page.resources:
            if url.startswith(("http:", "https:", "//")) or CSS_URL.search(url):
                out.append((rel, f"loads a resource from another host: {url[:120]}"))
        for href in page.links:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("javascript:", "mailto:")):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                out.append((rel, f"links to a missing file: {href}"))
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    out.append((rel, f"links to a missing anchor: {href}"))
    for css in sorted(root.rglob("*.css")):
        for m in re.finditer(r"""url\(\s*["']?((?:https?:)?//[^)"']+)""", css.read_text(errors="replace")):
            rel = css.relative_to(root).as_posix()
            out.append((rel, f"loads a resource from another host: {m[1][:120]}"))
    return out


# ---------------------------------------------------------------------------------------------------
# A translated page: its prose, its language switch

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


PROSE = {"p", "h1", "h2", "h3", "h4", "h5", "h6"}


class _Prose(html.parser.HTMLParser):
    """The text of every paragraph and heading inside the page's <article>, outside cell outputs (printed
    output and figure labels stay English in every language); a heading without its permalink."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.paragraphs = [], []
        self.current, self.element = None, None     # the text of the element being read, and its tag

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        classes = dict(attrs).get("class") or ""
        inside = (self.stack[-1][1] if self.stack else (False, False))
        article = inside[0] or tag == "article"
        output = inside[1] or "cell_output" in classes or "output" in classes.split()
        self.stack.append((tag, (article, output)))
        if tag in PROSE and article and not output and self.current is None:
            self.current, self.element = [], tag
        elif tag == "a" and "headerlink" in classes and self.current is not None:
            self.current.append("\0")              # the permalink's text, cut below

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        while self.stack:
            open_tag, _ = self.stack.pop()
            if open_tag == tag:
                break
        if tag == self.element and self.current is not None:
            text = " ".join("".join(self.current).split("\0")[0].split())
            if text:
                self.paragraphs.append(text)
            self.current = None

    def handle_data(self, data):
        if self.current is not None:
            self.current.append(data)


def paragraphs(page_html):
    parser = _Prose()
    parser.feed(page_html)
    return parser.paragraphs


def untranslated(english_html, translated_html, words=2):
    """The paragraphs and headings of the English page that its translation shows as they are: prose the
    catalogs did not translate. Prose: `words` words or more, one of them lower case ("1. The recurrence",
    not a name or a menu label such as "Run All", which stay English)."""
    def prose(text):
        found = [w.strip(".,;:!?()\"'") for w in text.split()]
        found = [w for w in found if re.fullmatch(r"[A-Za-z][a-z]+", w)]
        return len(found) >= words and any(re.fullmatch(r"[a-z]{3,}", w) for w in found)

    english = [p for p in paragraphs(english_html) if prose(p)]
    shown = set(paragraphs(translated_html))
    return [p for p in english if p in shown]


def language_links(page_html):
    """{hreflang: href} of the page's language switch (site/_templates/language-switch.html)."""
    switch = re.search(r'<nav class="language-switch[" ].*?</nav>', page_html, re.S)
    found = re.findall(r'href="([^"]+)" hreflang="([^"]+)"', switch[0]) if switch else []
    return {lang: href for href, lang in found}
