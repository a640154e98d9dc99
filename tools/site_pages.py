"""Write the course website's source pages: `make site` runs this, then Sphinx (config in site/).

    python -m tools.site_pages OUT    # OUT: a scratch folder, emptied first (make site: build/site-work/src)

Nothing here is a hand copy: every page is made from the repository as committed.

- `index.md`, the landing page: site/index.md, with the README's introduction and lesson table put in
  at its two markers, then the table of contents. The lesson map on it is drawn by Sphinx
  (site/kimik3_site.py) from `course()`.
- `notebooks/NN_slug.ipynb`, one page per lesson in course order: the committed, executed notebook
  (Sphinx does not run it), with these changes. Its Colab badge gives way to the lesson header (goals,
  the lessons it builds on, its time, its buttons: site/kimik3_site.py draws it from `course()`). An
  interact's output, a widget that needs a kernel to draw, becomes the picture it drew at its default
  values followed by one line: the defaults, what moving the controls shows (the notebook's own sentence,
  from the markdown before the widget) and how to run it; the same picture printed just before it by the
  cell that saved it is shown once. A printed source is highlighted (a printed diff coloured as one) and,
  when long, folded; a cell of many asserts shows its code folded. `# NBVAL_...` lines, markers for the
  test runner, are dropped.
- `docs/teaching.md`, `benchmarks/README.md` (with its chart, drawn from its own table) and
  `benchmarks/maintainers.md`, as in the repository.
- `running.md`: site/running.md, then the README's "Quick start" and "CPU, GPU, Colab" sections.

Every relative link is resolved as in the repository: a link to a notebook or to one of the pages above
stays a link between pages, a figure is copied beside the page, a link to any other file of the
repository points to it on GitHub, and a link to nothing is left as it is, for Sphinx (run with -W) to
fail on. Standard library only.
"""

import argparse
import ast
import json
import re
import shutil
import textwrap
from pathlib import Path

from tools import repo_url  # the repository the course names

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "site"

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE_FILE = "images/colab-badge.svg"        # where the site's badge lies in OUT
PAGES = ["docs/teaching.md", "benchmarks/README.md", "benchmarks/maintainers.md"]   # pages as they are
# What a page of the repository holds for the site only (an HTML comment, invisible on GitHub): a
# directive of site/kimik3_site.py, which draws it in the page's language.
DIRECTIVES = {"<!-- site: chart -->": "benchmark-chart", "<!-- site: gpu results -->": "gpu-results"}
RUNNING_SECTIONS = ["Quick start", "CPU, GPU, Colab"]  # README sections on the page about running it
IMAGE_SUFFIXES = {".png", ".svg", ".jpg", ".jpeg", ".gif"}
# A markdown link or image target, and an HTML href/src (group 2 is the target).
TARGETS = [re.compile(r"(\]\()([^)\s]+)(?=[)\s])"), re.compile(r"""(\b(?:href|src)=["'])([^"']+)(?=["'])""")]
# The README's linked thumbnails, <a href="A"><img src="B" width="N"></a>, as MyST images with a width.
THUMBNAIL = re.compile(r'<a href="([^"]+)"><img src="([^"]+)" width="(\d+)"></a>')
# A sentence that tells the reader what to do with the controls (the notebook's own words).
IMPERATIVE = re.compile(r"^(?:Move|Try|Drag|Pick|Slide|Change|Set|Choose|Vary)\b")


def lessons(root=ROOT):
    """The lesson notebooks in course order (their names sort in it: 01, ..., 05a, 05b, ...)."""
    return sorted((Path(root) / "notebooks").glob("*.ipynb"))


def repository(root=ROOT):
    """(owner/name, branch) of the one repository the badges name (tools/repo_url.py checks they agree)."""
    found, repos = repo_url.problems(root)
    if found or len(repos) != 1:
        raise SystemExit("the course files do not name one repository: " + "; ".join(found))
    branches = {m["branch"] for m in repo_url.BADGE.finditer((Path(root) / "README.md").read_text())}
    return repos[0], sorted(branches)[0] if branches else "main"


class Links:
    """Rewrites the relative links of a page written from repository file `source` (a path relative to
    the root) to what the site has: pages, copied figures, GitHub."""

    def __init__(self, root, out, repo, branch):
        self.root, self.out, self.repo, self.branch = Path(root).resolve(), Path(out), repo, branch
        self.pages = {f"notebooks/{nb.name}" for nb in lessons(root)} | set(PAGES)

    def github(self, rel, is_dir=False):
        return f"https://github.com/{self.repo}/{'tree' if is_dir else 'blob'}/{self.branch}/{rel}"

    def target(self, target, source):
        if re.match(r"^[a-zA-Z][\w+.-]*:", target) or target.startswith(("#", "/")):
            return target                           # a URL, an anchor in the page, or site-absolute
        path, _, fragment = target.partition("#")
        resolved = (self.root / source).parent.joinpath(path).resolve()
        try:
            rel = resolved.relative_to(self.root).as_posix()
        except ValueError:
            return target                           # outside the repository: Sphinx says it is broken
        if rel in self.pages or not resolved.exists():
            return target                           # a page, as it lies in the site; or nothing (-W fails)
        if resolved.suffix.lower() in IMAGE_SUFFIXES:
            copy = self.out / rel
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(resolved, copy)
            return target
        return self.github(rel, resolved.is_dir()) + (f"#{fragment}" if fragment else "")

    def rewrite(self, text, source, badge):
        """`text` (markdown from `source`) with its links resolved and the Colab badge's image at `badge`
        (the site's copy, relative to the page)."""
        text = text.replace(COLAB_BADGE, badge)
        text = THUMBNAIL.sub(lambda m: f"[![figure]({m[2]}){{w={m[3]}px}}]({m[1]})", text)
        for pattern in TARGETS:
            text = pattern.sub(lambda m: m[1] + (m[2] if m[2] == badge else self.target(m[2], source)), text)
        return text


def without_languages_line(readme):
    """The README without its line of links to the translated editions (🌐 ...): the site has a switch."""
    return re.sub(r"^🌐 .*\n\n?", "", readme, flags=re.M)


def readme_sections(readme):
    """{title: text} of the README's `## ` sections, and the text before the first one."""
    parts = re.split(r"^## (.+)$", readme, flags=re.M)
    return parts[0], {title.strip(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


# ---------------------------------------------------------------------------------------------------
# The course as the teaching guide plans it: what each lesson page's header and the lesson map show

TEACHING = "docs/teaching.md"
TIMES = "docs/notebook_times.json"
PLAN_COLUMNS = ["class", "notebooks", "the idea", "needs"]
# "## Lesson 05a — DeltaNet I: ... (`notebooks/05a_delta_rule.ipynb`)", up to the next section
LESSON_SECTION = re.compile(r"^## Lesson \S+ — .*?\(`(notebooks/[^`]+\.ipynb)`\)\n(.*?)(?=^## |\Z)",
                            re.M | re.S)
# "**Learning goals.** By the end of the class a student can" and its numbered list, to the next bold line
GOALS = re.compile(r"^\*\*Learning goals\.\*\*.*?(?=\n\n\*\*|\Z)", re.M | re.S)
MINUTES = re.compile(r"^\*\*Minutes \((\d+)\)\.\*\*", re.M)


def lesson_id(notebook):
    """"05a" of "05a_delta_rule.ipynb"."""
    return Path(notebook).name.split("_", 1)[0]


def course_plan(teaching):
    """The course plan's table of `teaching` (the guide's text): {class number: (lesson ids, the plan's
    name of them, the class numbers it needs)}, e.g. 6: (["05b"], "05b DeltaNet, chunked", [3, 5]).
    "9–13" in the needs column is every class from 9 to 13; "—" is none."""
    lines = teaching.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("| class | notebooks |")), None)
    if start is None or _cells(lines[start]) != PLAN_COLUMNS:
        raise SystemExit(f"{TEACHING}: no course plan table with the columns {PLAN_COLUMNS}: update "
                         "tools/site_pages.py")
    plan = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        number, notebooks, _, needs = _cells(line)
        ids = re.findall(r"\b(\d\d[a-z]?)\b", notebooks.split(" ", 1)[0])
        classes = []
        for a, b in re.findall(r"(\d+)(?:\s*[–-]\s*(\d+))?", needs):
            classes += range(int(a), int(b or a) + 1)
        plan[int(number)] = (ids, notebooks, classes)
    return plan


def course(root=ROOT):
    """The lessons in course order, each a dict: `id` ("05a"), `stem`, `title` (the notebook's, without
    "Lesson 05a —"), `label` (the course plan's name for it, "05a The delta rule"), `builds_on` (the ids
    of the lessons of the classes it needs), `goals` (the teaching guide's learning goals, markdown),
    `minutes` (of class) and `seconds` (Run All, docs/notebook_times.json; None when not measured)."""
    root = Path(root)
    teaching = (root / TEACHING).read_text()
    times = json.loads((root / TIMES).read_text())
    plan = course_plan(teaching)
    sections = {rel: body for rel, body in LESSON_SECTION.findall(teaching)}
    out = []
    for nb in lessons(root):
        ident, rel = lesson_id(nb.name), f"notebooks/{nb.name}"
        row = next(((name, classes) for ids, name, classes in plan.values() if ident in ids), (None, []))
        body = sections.get(rel, "")
        goals, minutes = GOALS.search(body), MINUTES.search(body)
        first = "".join(json.loads(nb.read_text())["cells"][0]["source"]).splitlines()[0]
        out.append({"id": ident, "stem": nb.stem, "title": re.sub(r"^#\s*(Lesson \w+ —\s*)?", "", first),
                    "label": row[0] or ident,
                    "builds_on": [i for number in row[1] for i in plan[number][0]],
                    "goals": goals[0].strip() if goals else None,
                    "minutes": int(minutes[1]) if minutes else None,
                    "seconds": times["seconds"].get(nb.name)})
    return out


def cores(root=ROOT):
    """The CPU cores of the machine docs/notebook_times.json was measured on ("x86_64, 2 cores, ...")."""
    found = re.search(r"(\d+) cores", json.loads((Path(root) / TIMES).read_text())["machine"])
    return int(found[1]) if found else None


# ---------------------------------------------------------------------------------------------------
# Widgets: the picture an interact drew at its defaults, and one line about it


def widget_state(nb):
    return nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def _descendants(state, model_id):
    for child in state.get(model_id, {}).get("state", {}).get("children", []):
        child = child.removeprefix("IPY_MODEL_")
        yield child
        yield from _descendants(state, child)


def widget_parts(state, model_id):
    """(controls, outputs) of the widget `model_id`, from the notebook's widget state: [(model name,
    description, default value as its readout shows it)] of its controls, and what its Output widgets show
    (the picture drawn at those values)."""
    controls, outputs = [], []
    for child in _descendants(state, model_id):
        model = state.get(child, {})
        s = model.get("state", {})
        if model.get("model_name") == "OutputModel":
            outputs += s.get("outputs", [])
        elif "value" in s or "index" in s:
            labels = s.get("_options_labels")
            chosen = labels is not None and s.get("index") is not None
            value = labels[s["index"]] if chosen else _readout(s.get("value"), s.get("readout_format"))
            controls.append((model.get("model_name", ""), s.get("description", ""), value))
    return controls, outputs


def _paragraphs(markdown):
    for block in re.split(r"\n\s*\n", markdown):
        lines = [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]
        if lines and not lines[0].startswith(("|", "```", "$$", "<")):
            yield " ".join(lines)


# "Try it below: the sliders set ..." sits above the widget in the notebook, under its picture on the page.
BELOW = re.compile(r"^(?:Try|Move|Use) (?:it|them|the \w+) below:\s*")


def what_moving_shows(cells, index, back=3):
    """The sentence of the markdown before cell `index` (at most `back` cells up) that tells the reader to
    move the controls, as the notebook words it (a lead-in that points below, where the page puts the
    picture, left out); None when it has none."""
    for cell in reversed(cells[max(0, index - back):index]):
        if cell["cell_type"] != "markdown":
            continue
        for paragraph in _paragraphs("".join(cell["source"])):
            for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z(*])", paragraph):
                if IMPERATIVE.match(sentence.lstrip("*")):
                    sentence = BELOW.sub("", sentence.strip())
                    return re.sub(r"[:;,]$", ".", sentence[:1].upper() + sentence[1:])
        return None
    return None


def _readout(value, readout_format):
    """A control's value as its readout writes it (readout_format: ".2f", "d", ".3g", ...)."""
    try:
        return format(value, readout_format or "")
    except (TypeError, ValueError):
        return str(value)


def widget_caption(controls, sentence):
    """One line under the default picture: the values it was drawn at, what moving them shows, how."""
    sliders = all(model.endswith("SliderModel") for model, _, _ in controls)
    kind = ("slider" if sliders else "control") + ("s" if len(controls) > 1 else "")
    them = "them" if len(controls) > 1 else "it"
    defaults = ", ".join(f"`{name.strip() or 'value'}` = {value}" for _, name, value in controls)
    shows = sentence or f"Moving the {kind} redraws this figure for the values chosen."
    return (f"*Interactive figure, drawn here at its defaults ({defaults}).* {shows} To move {them}, "
            f"run this lesson: on Colab (the button at the top) or in JupyterLab "
            f"([how to run the course](../running.md)).")


def static_widgets(nb, name):
    """Replace every widget output of `nb` by the picture it drew at its defaults, and put one caption
    cell after each such code cell. Returns the number of widgets replaced."""
    state = widget_state(nb)
    cells, count = [], 0
    for index, cell in enumerate(nb["cells"]):
        cells.append(cell)
        if cell["cell_type"] != "code":
            continue
        captions, outputs = [], []
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_MIME)
            if view is None:
                outputs.append(out)
                continue
            controls, drawn = widget_parts(state, view["model_id"])
            pictures = [o for o in drawn if any(k.startswith("image/") for k in o.get("data", {}))]
            if not pictures:
                raise SystemExit(f"{name}, cell {index + 1}: its widget's default picture is not stored in "
                                 "the notebook (metadata.widgets: execute it with nbclient, which stores it)")
            outputs += [{"output_type": "display_data", "data": o["data"], "metadata": o.get("metadata", {})}
                        for o in pictures]
            captions.append(widget_caption(controls, what_moving_shows(nb["cells"], index)))
            count += 1
        cell["outputs"] = outputs
        if captions:
            picture_shown_once(cells, len(cells) - 1)
        for caption in captions:
            cells.append({"cell_type": "markdown", "id": f"{cell.get('id', index)}-default"[-64:],
                          "metadata": {}, "source": f":::{{container}} widget-default\n{caption}\n:::\n"})
    nb["cells"] = cells
    nb.get("metadata", {}).pop("widgets", None)
    return count


# ---------------------------------------------------------------------------------------------------
# The pages


def lesson_markdown(source, rel, links):
    """Markdown of lesson `rel` ("notebooks/NN_slug.ipynb") as its page shows it: links resolved, a Colab
    badge loaded from the site. (tools/translations applies it to one paragraph at a time, to find
    that paragraph's message.)"""
    return links.rewrite(source, rel, f"../{BADGE_FILE}")


def with_header(first, rel):
    """The lesson's first markdown cell `first` with its Colab badge (a paragraph that is only the badge)
    replaced by the lesson header, a directive site/kimik3_site.py draws after the title."""
    paragraphs = re.split(r"\n\s*\n", first.strip("\n"))
    title, rest = paragraphs[0], paragraphs[1:]
    rest = [p for p in rest if not (p.strip().startswith("[![") and
                                    any(m["path"] == rel for m in repo_url.BADGE.finditer(p)))]
    header = f":::{{lesson-header}} {Path(rel).stem}\n:::"
    return "\n\n".join([title, header, *rest]) + "\n"


# A cell prints source code when it calls inspect.getsource; lines marked + and - make a printed diff.
PRINTS_SOURCE = re.compile(r"\bgetsource\(")
DIFF_LINE = re.compile(r"^[-+]\s", re.M)
DEFINITION = re.compile(r"^\s*(?:@|def |async def |class )")
FOLD_LINES = 40       # a printed source longer than this is folded
FOLD_ASSERTS = 10     # a cell with this many asserts shows its code folded: its output is what it says
ASSERT = re.compile(r"^\s*assert\b", re.M)


def source_lines(printed):
    """How many of the first lines of `printed` are Python source: the most that parse (dedented) and
    start with a definition; 0 when none do."""
    lines = printed.split("\n")
    if not lines or not DEFINITION.match(lines[0]):
        return 0
    for n in range(len(lines), 0, -1):
        try:
            ast.parse(textwrap.dedent("\n".join(lines[:n])))
        except SyntaxError:
            continue
        return n
    return 0


TABLE_ROW = re.compile(r"^\|.*\|\s*$")
TABLE_RULE = re.compile(r"^\|(?:\s*:?-{3,}:?\s*\|)+\s*$")


def printed_tables(text):
    """`text` a cell printed, cut into [(kind, text)]: "table" for every markdown table in it (a header row,
    a rule |---|, rows), "text" for the rest, in order."""
    lines, out, i = text.split("\n"), [], 0
    rest = []
    while i < len(lines):
        if TABLE_ROW.match(lines[i]) and i + 1 < len(lines) and TABLE_RULE.match(lines[i + 1]):
            end = i + 2
            while end < len(lines) and TABLE_ROW.match(lines[end]):
                end += 1
            if rest:
                out.append(("text", "\n".join(rest)))
                rest = []
            out.append(("table", "\n".join(lines[i:end]) + "\n"))
            i = end
        else:
            rest.append(lines[i])
            i += 1
    if rest and "\n".join(rest).strip():
        out.append(("text", "\n".join(rest)))
    return out


def _markdown(text):
    return {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": text}}


def _python_block(code):
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", code)), default=0))
    return _markdown(f"{fence}python\n{code}\n{fence}\n")


def present_cell(cell):
    """Set how the page shows code cell `cell` (a cell of the site's copy). A markdown table it printed
    becomes a markdown output (a table on the page). What it printed of its source code
    (inspect.getsource) becomes a Python code block, highlighted and with a copy button; the rest of what
    it printed is coloured as a diff when it marks lines with + and -, and folded when longer than
    FOLD_LINES lines. The code of a cell of FOLD_ASSERTS asserts or more is folded. kimik3.fold in the
    cell's metadata is read by site/kimik3_site.py, mystnb.text_lexer by MyST-NB."""
    meta = cell.setdefault("metadata", {})
    prints_source = PRINTS_SOURCE.search(cell["source"]) is not None
    outputs, printed, diff = [], "", False
    for out in cell.get("outputs", []):
        if out.get("output_type") != "stream":
            outputs.append(out)
            continue
        text = "".join(out["text"])
        printed += text
        if prints_source and not outputs:           # the source a cell prints comes first
            lines = text.split("\n")
            n = source_lines(text)
            if n:
                outputs.append(_python_block(textwrap.dedent("\n".join(lines[:n])).rstrip()))
                text = "\n".join(lines[n:]).lstrip("\n")
        for kind, part in printed_tables(text):
            if kind == "table":
                outputs.append(_markdown(part))
            elif part.strip():
                outputs.append(dict(out, text=part))
                diff = diff or len(DIFF_LINE.findall(part)) >= 3
    cell["outputs"] = outputs
    if prints_source and diff:
        meta.setdefault("mystnb", {})["text_lexer"] = "diff"
    if prints_source and printed.count("\n") > FOLD_LINES:
        meta["kimik3"] = {"fold": "output", "lines": printed.count("\n"), "diff": diff}
    asserts = len(ASSERT.findall(cell["source"]))
    if asserts >= FOLD_ASSERTS:
        meta["kimik3"] = {"fold": "source", "asserts": asserts}


def _pictures(cell):
    return [out["data"]["image/png"] for out in cell.get("outputs", []) if "image/png" in out.get("data", {})]


def picture_shown_once(cells, index, back=3):
    """Drop from the code cells just before cell `index` (at most `back` cells up) every picture cell
    `index` shows too, byte for byte: the figure a cell saved, then drew again as a widget's default."""
    shown = set(_pictures(cells[index]))
    for cell in cells[max(0, index - back):index]:
        if cell["cell_type"] == "code" and shown & set(_pictures(cell)):
            cell["outputs"] = [out for out in cell["outputs"]
                               if out.get("data", {}).get("image/png") not in shown]


def lesson_page(path, links):
    """The site's copy of one lesson notebook (a dict), as the module docstring says."""
    nb = json.loads(path.read_text())
    rel = f"notebooks/{path.name}"
    static_widgets(nb, path.name)
    for cell in nb["cells"]:
        cell["source"] = "".join(cell["source"])
    first = next(cell for cell in nb["cells"] if cell["cell_type"] == "markdown")
    first["source"] = with_header(first["source"], rel)
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = lesson_markdown(cell["source"], rel, links)
        elif cell["cell_type"] == "code":
            cell["source"] = "\n".join(line for line in cell["source"].split("\n")
                                       if not line.startswith("# NBVAL_"))
            present_cell(cell)
    return nb


def _cells(row):
    return [cell.strip() for cell in row.strip().strip("|").split(" | ")]


def lesson_table(section, notebooks):
    """The README's lesson table (# | notebook | module | what you build | key figure | run), recast for a
    page a third as wide: # | lesson (its title, linked to its page; its module; its Colab badge) | what
    you build | key figure (linked to the lesson's page). The rest of the section is kept."""
    lines = section.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("| # |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    header = _cells(lines[start])
    if header != ["#", "notebook", "module", "what you build", "key figure", "run"]:
        raise SystemExit(f"README.md: the lesson table's columns are {header}: update tools/site_pages.py")
    titles = {}
    for nb in notebooks:
        first = "".join(json.loads(nb.read_text())["cells"][0]["source"]).splitlines()[0]
        titles[f"notebooks/{nb.name}"] = re.sub(r"^#\s*(Lesson \w+ —\s*)?", "", first)
    rows = ["| # | lesson | what you build | key figure |", "|---|---|---|---|"]
    for line in lines[start + 2:end]:
        number, notebook, module, what, figure, run = _cells(line)
        page = re.search(r"\]\(([^)]+)\)", notebook)[1]
        thumb = THUMBNAIL.search(figure)
        figure = f"[![key figure]({thumb[2]}){{w={thumb[3]}px}}]({page})" if thumb else figure
        lesson = f"**[{titles.get(page, page)}]({page})** · {module} · {run}"
        rows.append(f"| {number} | {lesson} | {what} | {figure} |")
    return "\n".join(lines[:start] + rows + lines[end:])


# site/index.md's markers, where the README's introduction and lesson table go
INTRODUCTION, LESSONS = "<!-- README: introduction -->", "<!-- README: lessons -->"


def index_page(readme, links, notebooks):
    """site/index.md with the README's introduction (its title line aside: the page has its own) and its
    lesson table, recast by lesson_table, put in at its markers; then the table of contents."""
    intro, sections = readme_sections(readme)
    intro = re.sub(r"^# .*\n+", "", intro.lstrip())
    table = lesson_table(sections["Lessons"], notebooks)
    page = (SITE / "index.md").read_text()
    for marker in (INTRODUCTION, LESSONS):
        if page.count(marker) != 1:
            raise SystemExit(f"site/index.md: the marker {marker} must be there once")
    page = page.replace(INTRODUCTION, intro.strip()).replace(LESSONS, f"## Lessons\n{table}")
    toc = "\n".join(f"notebooks/{nb.stem}" for nb in notebooks)
    body = (f"{page}\n```{{toctree}}\n:hidden:\n:caption: Lessons\n\n{toc}\n```\n\n"
            "```{toctree}\n:hidden:\n:caption: Running and teaching\n\nrunning\ndocs/teaching\n"
            "benchmarks/README\nbenchmarks/maintainers\n```\n")
    return links.rewrite(body, "README.md", BADGE_FILE)


def running_page(readme, links):
    _, sections = readme_sections(readme)
    text = (SITE / "running.md").read_text().rstrip() + "\n\n"
    text += "".join(f"## {title}\n{sections[title]}" for title in RUNNING_SECTIONS)
    return links.rewrite(text, "README.md", BADGE_FILE)


def write_site_sources(out, root=ROOT):
    """Write every page into `out` (emptied first). Returns the paths written, relative to `out`."""
    root, out = Path(root), Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    repo, branch = repository(root)
    links = Links(root, out, repo, branch)
    readme = without_languages_line((root / "README.md").read_text())
    notebooks = lessons(root)
    written = {"index.md": index_page(readme, links, notebooks), "running.md": running_page(readme, links)}
    for page in PAGES:
        text = (root / page).read_text()
        for marker, directive in DIRECTIVES.items():
            text = text.replace(marker, f":::{{{directive}}}\n:::")
        written[page] = links.rewrite(text, page, "../" + BADGE_FILE)
    for path in notebooks:
        written[f"notebooks/{path.name}"] = json.dumps(lesson_page(path, links), indent=1, ensure_ascii=False)
    for rel, text in written.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    (out / BADGE_FILE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SITE / "colab-badge.svg", out / BADGE_FILE)
    return sorted(written) + [BADGE_FILE]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the scratch folder the pages are written to")
    args = parser.parse_args(argv)
    written = write_site_sources(args.out)
    print(f"{len(written)} site sources written to {args.out}")


if __name__ == "__main__":
    main()
