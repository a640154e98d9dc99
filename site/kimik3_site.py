"""The course website's own Sphinx extension (site/conf.py loads it): what the site draws from the course
itself, in the language of the page.

- `{lesson-header} <stem>` (tools/site_pages.py puts it under every lesson's title): the buttons that
  open the notebook on Colab or Kaggle, download it or show it on GitHub (a translation's: its
  edition's), the lessons it builds on and its time (the teaching guide's course plan and minutes,
  docs/notebook_times.json), and its learning goals, the teaching guide's own text, translated through
  the guide's catalog: said once, in every language.
- `{lesson-map}` (the landing page): an SVG of the lessons, a row per step of the course plan's "needs"
  column, an arrow from each lesson to every lesson that needs it; each box opens its lesson and is named
  as the course plan names it (translated through the guide's catalog).
- `{benchmark-chart}` (the benchmarks page): its table's ratios as bars, on a log scale, each with a mark at
  the ratio the script requires; the table is the one source (a ratio that is not its row's times
  divided stops the build).
- `{gpu-results}` (the benchmarks page): the table of every `benchmarks/results/gpu-*.json` that
  `make test-gpu` wrote, or a line saying that none has been published.
- Folds: a code cell whose metadata says `kimik3.fold` (tools/site_pages.py sets it) shows its code or
  its output folded, under a summary saying what is inside.
- Every picture of a cell output gets the title of its section as its alt text, not its file name.
- Each lesson's notebook is copied beside its page, for the download button.
- The site's interface text is in site/locales/<lang>/LC_MESSAGES/sphinx.po, which Sphinx reads with its
  own catalog: the templates' text, the text this extension writes, and what Sphinx's search says that
  its own catalog leaves untranslated (handed to _static/translation-fixes.js).

Nothing here runs a notebook or reaches another host.
"""

import functools
import html
import json
import math
import re
import shutil
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.locale import _
from sphinx.transforms import SphinxTransform
from sphinx.util.docutils import SphinxDirective

from tools import site_pages
from tools.translations.messages import message_of, translate_markdown
from tools.translations.po import translations_of

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def course():
    """{id: lesson} of tools/site_pages.course(), read once per build."""
    return {lesson["id"]: lesson for lesson in site_pages.course(ROOT)}


@functools.cache
def catalog(lang, page, locales):
    """{msgid: msgstr} of page `page`'s catalog in `lang` (tools/translations), read once per build."""
    return translations_of(lang, [page], Path(locales))


def guide_translation(config, markdown):
    """`markdown` from docs/teaching.md in the page's language: each paragraph, heading and table cell
    replaced by its translation in the guide's catalog (the English where it has none: the site's tests
    find English left in a translated page)."""
    if config.language == "en":
        return markdown
    messages = catalog(config.language, "docs/teaching", config.locale_dirs[0])
    return translate_markdown(markdown, lambda content: messages.get(message_of(content)))


def edition_path(config, rel):
    """The repository path of notebook `rel` as a page in this language links it (the edition's)."""
    return rel if config.language == "en" else f"editions/{config.language}/{rel}"


def duration(seconds):
    seconds = round(seconds)      # a no-break space between a number and its unit
    return f"{seconds}\u00a0s" if seconds < 60 else f"{seconds // 60}:{seconds % 60:02d}\u00a0min"


# ---------------------------------------------------------------------------------------------------
# The lesson header


class LessonHeader(SphinxDirective):
    """`{lesson-header} 05a_delta_rule`: see the module docstring. Nothing for the gettext builder: the
    header's text is the guide's and the interface's, not the lesson's."""

    required_arguments = 1

    def run(self):
        if self.env.app.builder.name == "gettext":
            return []
        config, stem = self.config, self.arguments[0]
        lesson = next((lesson for lesson in course().values() if lesson["stem"] == stem), None)
        if lesson is None:
            raise self.error(f"lesson-header: no lesson {stem!r} in notebooks/")
        header = nodes.container(classes=["lesson-header"])
        header += nodes.raw("", self.buttons(stem), format="html")
        header += self.builds_on(lesson)
        header += self.time(lesson)
        if lesson["goals"]:
            goals = nodes.container(classes=["lesson-goals"])
            text = guide_translation(config, lesson["goals"])
            self.state.nested_parse(StringList(text.split("\n")), self.content_offset, goals)
            header += goals
        return [header]

    def buttons(self, stem):
        repo, branch = site_pages.repository(ROOT)
        path = edition_path(self.config, f"notebooks/{stem}.ipynb")
        github = f"https://github.com/{repo}/blob/{branch}/{path}"
        links = [
            ("lesson-colab", f"https://colab.research.google.com/github/{repo}/blob/{branch}/{path}",
             '<img src="../_static/images/logo_colab.png" alt="">', _("Open in Colab"), ""),
            ("lesson-kaggle", f"https://www.kaggle.com/kernels/welcome?src={github}",
             '<i class="fa-brands fa-kaggle" aria-hidden="true"></i>', _("Open in Kaggle"), ""),
            ("lesson-download", f"{stem}.ipynb", '<i class="fa-solid fa-download" aria-hidden="true"></i>',
             _("Download the notebook"), f' download="{stem}.ipynb"'),
            ("lesson-github", github, '<i class="fa-brands fa-github" aria-hidden="true"></i>',
             _("The notebook on GitHub"), ""),
        ]
        return ('<div class="lesson-buttons">' + "".join(
            f'<a class="lesson-button {cls}" href="{html.escape(url)}"{extra}>{icon}<span>{html.escape(text)}'
            "</span></a>" for cls, url, icon, text, extra in links) + "</div>")

    def builds_on(self, lesson):
        line = nodes.paragraph(classes=["lesson-builds-on"])
        line += nodes.strong("", _("Builds on:") + " ")
        if not lesson["builds_on"]:
            line += nodes.Text(_("nothing before it: a place to start."))
        for i, ident in enumerate(lesson["builds_on"]):
            if i:
                line += nodes.Text(", " if self.config.language != "zh_CN" else "、")
            ref = addnodes.pending_xref("", nodes.inline("", ""), refdomain="std", reftype="doc",
                                        reftarget=f"/notebooks/{course()[ident]['stem']}",
                                        refexplicit=False, refwarn=True, refdoc=self.env.docname)
            line += ref
        return line

    def time(self, lesson):
        """Its minutes of class (the teaching guide's) and its Run All (docs/notebook_times.json); nothing
        when the guide gives no minutes (the site's tests say so)."""
        line = nodes.paragraph(classes=["lesson-time"])
        if not lesson["minutes"]:
            return []
        line += nodes.strong("", _("Time:") + " ")
        if lesson["seconds"] is None:
            text = _("a class of {minutes} minutes.")
        else:
            text = _("a class of {minutes} minutes; Run All takes {duration} on a {cores}-core CPU "
                     "without a GPU.")
        line += nodes.Text(text.format(minutes=lesson["minutes"], cores=site_pages.cores(ROOT),
                                       duration=duration(lesson["seconds"] or 0)))
        return line


# ---------------------------------------------------------------------------------------------------
# The lesson map

BOX_W, BOX_H, GAP_X, GAP_Y, LANE, FONT = 150, 70, 30, 36, 8, 13


def rows_of(lessons):
    """[[ids]] of the lessons by row: a lesson's row is one below the lowest row of what it builds on."""
    row = {}
    for ident, lesson in lessons.items():              # course order: what it needs comes first
        row[ident] = 1 + max((row[d] for d in lesson["builds_on"] if d in row), default=-1)
    rows = [[] for _ in range(max(row.values()) + 1)]
    for ident in lessons:
        rows[row[ident]].append(ident)
    return rows


def order_rows(rows, lessons):
    """Each row ordered by where what it builds on sits (the mean of their places), so arrows cross less;
    a lesson no other builds on is kept to the sides."""
    place = {}
    for r, row in enumerate(rows):
        if r:
            def key(ident):
                deps = [place[d] for d in lessons[ident]["builds_on"] if d in place]
                return sum(deps) / len(deps) if deps else 0.5
            row.sort(key=key)
        for i, ident in enumerate(row):
            place[ident] = (i + 0.5) / len(row)
    return rows


def wrap(text, width):
    """`text` in lines of about `width` ems (a CJK character one em, a Latin one about 0.58)."""
    em = lambda s: sum(1.0 if "\u2e80" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef" else 0.58 for c in s)
    words = re.findall(r"[\u2e80-\u9fff\uff00-\uffef]|[^\s\u2e80-\u9fff\uff00-\uffef]+\s*", text)
    lines, line = [], ""
    for word in words:
        if line and em(line + word.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += word
    return lines + [line.rstrip()] if line.strip() else lines


def lesson_map_svg(lessons, labels, titles, aria):
    """The lesson map as inline SVG: `labels` {id: name in the box}, `titles` {id: a box's tooltip}. An
    arrow between two rows next to each other is a curve; a longer one leaves its box downwards and runs
    down a lane of its own beside the boxes (left or right, the side its box is on), so that it crosses
    no box."""
    rows = order_rows(rows_of(lessons), lessons)
    columns = max(len(row) for row in rows)
    inner = columns * BOX_W + (columns - 1) * GAP_X
    box = {}
    for r, row in enumerate(rows):
        left = (inner - (len(row) * BOX_W + (len(row) - 1) * GAP_X)) / 2
        for i, ident in enumerate(row):
            box[ident] = (left + i * (BOX_W + GAP_X), 1 + r * (BOX_H + GAP_Y), r)
    long = [(dep, ident) for ident, lesson in lessons.items() for dep in lesson["builds_on"]
            if box[ident][2] - box[dep][2] > 1]
    side = {edge: "left" if box[edge[0]][0] + BOX_W / 2 < inner / 2 else "right" for edge in long}
    margin = 12 + LANE * max([sum(s == which for s in side.values()) for which in ("left", "right")] + [0])
    width, height = inner + 2 * margin, len(rows) * (BOX_H + GAP_Y) - GAP_Y + 2
    edges, lanes = [], {"left": 0, "right": 0}
    for ident, lesson in lessons.items():
        x1, y1, _ = box[ident]
        for dep in lesson["builds_on"]:
            x0, y0, _ = box[dep]
            sx, sy, tx, ty = margin + x0 + BOX_W / 2, y0 + BOX_H, margin + x1 + BOX_W / 2, y1
            if (dep, ident) not in side:
                mid = (sy + ty) / 2
                d = f"M{sx:.1f},{sy} C{sx:.1f},{mid} {tx:.1f},{mid} {tx:.1f},{ty - 3}"
            else:
                which = side[dep, ident]
                lanes[which] += 1
                k = lanes[which]
                lx = margin - k * LANE if which == "left" else width - margin + k * LANE
                below, above = sy + 6 + 3 * (k % 5), ty - 8 - 3 * (k % 5)
                d = f"M{sx:.1f},{sy} V{below} H{lx:.1f} V{above} H{tx:.1f} V{ty - 3}"
            edges.append(f'<path d="{d}" class="map-edge" marker-end="url(#map-arrow)"/>')
    boxes = []
    for ident in lessons:
        x, y, _ = box[ident]
        x += margin
        name = re.sub(rf"^{re.escape(ident)}\s*", "", labels[ident])
        lines = wrap(name, (BOX_W - 14) / FONT)[:3]
        texts = [f'<tspan x="{x + BOX_W / 2:.1f}" dy="0" class="map-id">{ident}</tspan>']
        texts += [f'<tspan x="{x + BOX_W / 2:.1f}" dy="{FONT + 3}">{html.escape(line)}</tspan>'
                  for line in lines]
        top = y + (BOX_H - (len(lines) + 1) * (FONT + 3)) / 2 + FONT
        boxes.append(f'<a href="notebooks/{lessons[ident]["stem"]}.html" class="map-lesson">'
                     f'<title>{html.escape(titles[ident])}</title>'
                     f'<rect x="{x:.1f}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="7"/>'
                     f'<text y="{top:.1f}" text-anchor="middle">{"".join(texts)}</text></a>')
    return (f'<svg class="lesson-map" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
            f'role="img" aria-label="{html.escape(aria)}" xmlns="http://www.w3.org/2000/svg">'
            '<defs><marker id="map-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>'
            + "".join(edges) + "".join(boxes) + "</svg>")


class LessonMap(SphinxDirective):
    """`{lesson-map}`: see the module docstring."""

    def run(self):
        if self.env.app.builder.name == "gettext":
            return []
        lessons = course()
        labels = {i: guide_translation(self.config, lesson["label"]) for i, lesson in lessons.items()}
        titles = {i: lesson["title"] for i, lesson in lessons.items()}
        if self.config.language != "en":   # a box's tooltip: the lesson's title, as its catalog has it
            lang, locales = self.config.language, self.config.locale_dirs[0]
            for i, lesson in lessons.items():
                found = catalog(lang, f"notebooks/{lesson['stem']}", locales)
                heading = f"Lesson {i} — {lesson['title']}"
                titles[i] = found.get(heading, heading)
        svg = lesson_map_svg(lessons, labels, titles, _("How the lessons build on each other"))
        return [nodes.raw("", f'<div class="lesson-map-frame">{svg}</div>', format="html")]


# ---------------------------------------------------------------------------------------------------
# The benchmarks' chart

BENCH_COLUMNS = ["script", "what is compared", "size", "slower (s)", "faster (s)", "ratio", "required"]


def _number(text):
    return float(re.search(r"\d+(?:\.\d+)?(?:e-?\d+)?", text)[0])


def benchmark_rows(markdown):
    """[(script, what is compared, ratio, required)] of the first table of `markdown` (benchmarks/README.md)
    with BENCH_COLUMNS. A ratio that is not its row's slower over faster time (within 1%, the rounding of
    three digits) is an error: the chart draws what the table says."""
    lines = markdown.split("\n")
    start = next((i for i, line in enumerate(lines)
                  if [c.strip() for c in line.strip().strip("|").split("|")] == BENCH_COLUMNS), None)
    if start is None:
        raise ValueError(f"benchmarks/README.md: no table with the columns {BENCH_COLUMNS}")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        script, what, _size, slower, faster, ratio, required = cells
        measured = _number(slower) / _number(faster)
        if abs(measured - _number(ratio)) > 0.01 * measured:
            raise ValueError(f"benchmarks/README.md: {script}, {what}: the ratio {ratio} is not {slower} / "
                             f"{faster} = {measured:.3g}")
        rows.append((script.strip("`"), what, _number(ratio), _number(required)))
    return rows


def benchmark_chart(rows, translate):
    """HTML bars, one per row, on a log scale from 1x: the measured ratio, a mark at the required one."""
    top = max(max(r[2] for r in rows), max(r[3] for r in rows)) * 1.25
    at = lambda x: 100 * math.log(max(x, 1)) / math.log(top)
    ticks = [t for t in (1, 2, 5, 10, 20, 50, 100) if t <= top]
    out = [f'<figure class="bench-chart" aria-label="{html.escape(_("The ratios of the table, as bars"))}">']
    for script, what, ratio, required in rows:
        out.append(
            f'<div class="bench-row"><div class="bench-label"><code>{html.escape(script)}</code> '
            f"{html.escape(translate(what))}</div>"
            f'<div class="bench-track"><div class="bench-bar" style="width: {at(ratio):.1f}%"></div>'
            f'<div class="bench-bound" style="left: {at(required):.1f}%" '
            f'title="{html.escape(_("required: {ratio}×").format(ratio=_format(required)))}"></div>'
            f'<span class="bench-value" style="left: {at(ratio):.1f}%">{_format(ratio)}×</span></div></div>')
    out.append('<div class="bench-axis">' + "".join(
        f'<span style="left: {at(t):.1f}%">{t}×</span>' for t in ticks) + "</div>")
    caption = _("Each bar is the ratio measured, on a logarithmic scale; each mark, the ratio the script "
                "requires.")
    out.append(f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    return "".join(out)


def _format(x):
    return f"{x:g}"


class BenchmarkChart(SphinxDirective):
    """`{benchmark-chart}` (the benchmarks page, under its table): see benchmark_chart."""

    def run(self):
        if self.env.app.builder.name == "gettext":
            return []
        source = ROOT / "benchmarks" / "README.md"
        self.env.note_dependency(str(source))
        try:
            rows = benchmark_rows(source.read_text())
        except ValueError as err:
            raise self.error(str(err)) from None
        translate = lambda text: text
        if self.config.language != "en":
            messages = catalog(self.config.language, "benchmarks/README", self.config.locale_dirs[0])
            translate = lambda text: messages.get(message_of(text), text)
        return [nodes.raw("", benchmark_chart(rows, translate), format="html")]


# ---------------------------------------------------------------------------------------------------
# The GPU runs

GPU_COLUMNS = [("mixer", None), ("D", None), ("form", None), ("precision", None),
               ("output_error", "{:.1e}"), ("state_error", "{:.1e}"), ("ms", "{:.3f}"), ("vs_fla", "{:.2f}"),
               ("tflops", "{:.2f}")]


def gpu_tables(results):
    """HTML of every gpu-*.json in `results`: a heading per GPU, a table of its rows; None when none."""
    files = sorted(Path(results).glob("gpu-*.json"))
    if not files:
        return None
    heads = {"mixer": _("mixer"), "D": _("head size"), "form": _("form"), "precision": _("precision"),
             "output_error": _("output error"), "state_error": _("state error"), "ms": _("ms"),
             "vs_fla": _("× FLA's time"), "tflops": _("TFLOP/s")}
    out = []
    for path in files:
        run = json.loads(path.read_text())
        rows = run.get("rows", [])
        columns = [(key, fmt) for key, fmt in GPU_COLUMNS if any(key in r for r in rows)]
        first = rows[0] if rows else {}
        out.append(f'<p class="gpu-run"><strong>{html.escape(run.get("gpu", path.stem))}</strong>, torch '
                   f'{html.escape(str(run.get("torch", "?")))}, B = {first.get("B", "?")}, H = '
                   f'{first.get("H", "?")}, T = {first.get("T", "?")} '
                   f'(<code>benchmarks/results/{html.escape(path.name)}</code>)</p>')
        def cell(row, key, fmt):
            value = row.get(key, "–")
            return fmt.format(value) if fmt and isinstance(value, (int, float)) else str(value)

        body = "".join("<tr>" + "".join(f"<td>{html.escape(cell(r, key, fmt))}</td>" for key, fmt in columns)
                       + "</tr>" for r in rows)
        out.append('<div class="table-frame"><table class="table gpu-table"><thead><tr>' + "".join(
            f"<th>{html.escape(heads[key])}</th>" for key, _fmt in columns) + f"</tr></thead><tbody>{body}"
            "</tbody></table></div>")
    return "".join(out)


class GpuResults(SphinxDirective):
    """`{gpu-results}`: see the module docstring."""

    def run(self):
        if self.env.app.builder.name == "gettext":
            return []
        found = gpu_tables(ROOT / "benchmarks" / "results")
        for path in sorted((ROOT / "benchmarks" / "results").glob("gpu-*.json")):
            self.env.note_dependency(str(path))
        if found is None:
            text = _("No GPU run has been published yet: make test-gpu, on a machine with an NVIDIA GPU, "
                     "writes one (benchmarks/results/gpu-<gpu name>.json), and this page then shows its "
                     "table.")
            return [nodes.paragraph("", text, classes=["gpu-none"])]
        return [nodes.raw("", found, format="html")]


# ---------------------------------------------------------------------------------------------------
# Folds, alt texts, downloads, the search's missing words


class OutputsStayAsPrinted(SphinxTransform):
    """What a cell printed or displayed is no message of its page: its text is not extracted for the
    catalogs and stays as the notebook holds it in every language (an edition's outputs are the English
    ones, byte for byte). Runs before Sphinx's translation of the page (priority 20)."""

    default_priority = 10

    def apply(self, **kwargs):
        for output in self.document.findall(nodes.container):
            if output.get("nb_element") == "cell_code_output":
                for node in output.findall(nodes.TextElement):
                    node["translatable"] = False


def fold(app, doctree):
    """Wrap the code or the output of every cell whose metadata says `kimik3.fold` in <details>."""
    for cell in list(doctree.findall(nodes.container)):
        if cell.get("nb_element") != "cell_code":
            continue
        spec = (cell.get("cell_metadata") or {}).get("kimik3")
        if not spec:
            continue
        want = "cell_code_source" if spec["fold"] == "source" else "cell_code_output"
        part = next((c for c in cell.children if c.get("nb_element") == want), None)
        if part is None:
            continue
        if spec["fold"] == "source":
            summary = _("The code, with its {asserts} checks (assert)").format(asserts=spec["asserts"])
        elif spec.get("diff"):
            summary = _("The printed source, {lines} lines, with what changed marked + and −").format(
                lines=spec["lines"])
        else:
            summary = _("The printed source, {lines} lines").format(lines=spec["lines"])
        at = cell.index(part)
        cell.insert(at, nodes.raw("", f'<details class="kimik3-fold fold-{spec["fold"]}"><summary>'
                                      f"{html.escape(summary)}</summary>", format="html"))
        cell.insert(at + 2, nodes.raw("", "</details>", format="html"))


def alt_texts(app, doctree):
    """A picture in a cell output gets its section's title as its alt text (MyST-NB gives it its file
    name); a section with several gets them numbered."""
    seen = {}
    for image in doctree.findall(nodes.image):
        if not any(p.get("nb_element") == "cell_code_output" for p in _parents(image)):
            continue
        section = next((p for p in _parents(image) if isinstance(p, nodes.section)), None)
        title = section[0].astext() if section is not None and section.children else doctree.astext()[:60]
        title = re.sub(r"^\d+\.\s*", "", title)
        seen[title] = seen.get(title, 0) + 1
        image["alt"] = title if seen[title] == 1 else f"{title} ({seen[title]})"


def _parents(node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


def copy_notebooks(app, exception):
    """Each lesson's notebook (a translation's: its edition's) beside its page, for the download button."""
    if exception or app.builder.format != "html":
        return
    for lesson in course().values():
        rel = edition_path(app.config, f"notebooks/{lesson['stem']}.ipynb")
        target = Path(app.outdir) / "notebooks" / f"{lesson['stem']}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, target)


# What Sphinx's search says, in English, where its own catalog of a language has an empty entry: the
# site's catalog translates these (site/locales), _static/translation-fixes.js fills them in.
SEARCH_MESSAGES = [("Search finished, found one page matching the search query.",
                    "Search finished, found ${resultCount} pages matching the search query.")]


def search_messages(app):
    """The translations of SEARCH_MESSAGES, for translation-fixes.js: window.KIMIK3_SEARCH_MESSAGES, an
    inline script before it on every page of a translation."""
    if app.config.language == "en":
        return
    from sphinx.locale import get_translator

    translator = get_translator()
    messages = {}
    for singular, plural in SEARCH_MESSAGES:
        forms = [translator.ngettext(singular, plural, n) for n in (1, 2)]
        if forms != [singular, plural]:
            messages[singular] = forms
    app.add_js_file(None, body=f"window.KIMIK3_SEARCH_MESSAGES = {json.dumps(messages, ensure_ascii=False)};")


def setup(app):
    app.add_directive("lesson-header", LessonHeader)
    app.add_directive("lesson-map", LessonMap)
    app.add_directive("gpu-results", GpuResults)
    app.add_directive("benchmark-chart", BenchmarkChart)
    app.add_transform(OutputsStayAsPrinted)
    app.connect("doctree-read", fold)
    app.connect("doctree-read", alt_texts)
    app.connect("builder-inited", search_messages)
    app.connect("build-finished", copy_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
