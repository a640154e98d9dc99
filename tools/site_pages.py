"""Write the course website's source pages: `make site` runs this, then Sphinx (config in site/).

    python -m tools.site_pages OUT    # OUT: a scratch folder, emptied first (make site: build/site-work/src)

Nothing here is a hand copy: every page is made from the repository as committed.

- `index.md`, the landing page: the README's title, introduction and lesson table (its figures and
  Colab badges), then site/index.md (the site's own few lines) and the table of contents.
- `notebooks/NN_slug.ipynb`, one page per lesson in course order: the committed, executed notebook
  (Sphinx does not run it), with three changes. An interact's output, a widget that needs a kernel to draw,
  becomes the picture it drew at its default values followed by one line: the defaults, what moving the
  controls shows (the notebook's own sentence, from the markdown before the widget) and how to run it. The
  Colab badge's image is the site's copy (site/colab-badge.svg: a page loads nothing from another host),
  followed by a link to the notebook file. `# NBVAL_...` lines, markers for the test runner, are dropped.
- `docs/teaching.md` and `benchmarks/README.md`, as in the repository.
- `running.md`: site/running.md, then the README's "Quick start" and "CPU, GPU, Colab" sections.

Every relative link is resolved as in the repository: a link to a notebook or to one of the pages above
stays a link between pages, a figure is copied beside the page, a link to any other file of the
repository points to it on GitHub, and a link to nothing is left as it is, for Sphinx (run with -W) to
fail on. Standard library only.
"""

import argparse
import json
import re
import shutil
from pathlib import Path

from tools import repo_url  # the repository the course names

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "site"

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE_FILE = "images/colab-badge.svg"        # where the site's badge lies in OUT
PAGES = ["docs/teaching.md", "benchmarks/README.md"]   # repository files that are pages as they are
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


def what_moving_shows(cells, index, back=3):
    """The sentence of the markdown before cell `index` (at most `back` cells up) that tells the reader to
    move the controls, as the notebook words it; None when it has none."""
    for cell in reversed(cells[max(0, index - back):index]):
        if cell["cell_type"] != "markdown":
            continue
        for paragraph in _paragraphs("".join(cell["source"])):
            for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z(*])", paragraph):
                if IMPERATIVE.match(sentence.lstrip("*")):
                    return re.sub(r"[:;,]$", ".", sentence.strip())
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
            f"run this lesson: on Colab (the badge at the top) or in JupyterLab "
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
        for caption in captions:
            cells.append({"cell_type": "markdown", "id": f"{cell.get('id', index)}-default"[-64:],
                          "metadata": {}, "source": f":::{{container}} widget-default\n{caption}\n:::\n"})
    nb["cells"] = cells
    nb.get("metadata", {}).pop("widgets", None)
    return count


# ---------------------------------------------------------------------------------------------------
# The pages


def lesson_markdown(source, rel, links):
    """Markdown of lesson `rel` ("notebooks/NN_slug.ipynb") as its page shows it: links resolved, the
    Colab badge the site's copy and followed by a link to the notebook file. (tools/translations
    applies it to one paragraph at a time, to find that paragraph's message.)"""
    source = links.rewrite(source, rel, f"../{BADGE_FILE}")
    match = next((m for m in repo_url.BADGE.finditer(source) if m["path"] == rel), None)
    if match and source[match.end():match.end() + 1] == ")":
        end = match.end() + 1
        source = source[:end] + f" · the notebook file: [{rel}]({links.github(rel)})" + source[end:]
    return source


def lesson_page(path, links):
    """The site's copy of one lesson notebook (a dict), as the module docstring says."""
    nb = json.loads(path.read_text())
    rel = f"notebooks/{path.name}"
    static_widgets(nb, path.name)
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            source = lesson_markdown(source, rel, links)
        elif cell["cell_type"] == "code":
            source = "\n".join(line for line in source.split("\n") if not line.startswith("# NBVAL_"))
        cell["source"] = source
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


def index_page(readme, links, notebooks):
    intro, sections = readme_sections(readme)
    lessons_md = lesson_table(sections["Lessons"], notebooks)
    toc = "\n".join(f"notebooks/{nb.stem}" for nb in notebooks)
    body = (f"{intro}## Lessons\n{lessons_md}\n{(SITE / 'index.md').read_text()}\n"
            f"```{{toctree}}\n:hidden:\n:caption: Lessons\n\n{toc}\n```\n\n"
            "```{toctree}\n:hidden:\n:caption: Running and teaching\n\nrunning\ndocs/teaching\n"
            "benchmarks/README\n```\n")
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
        written[page] = links.rewrite((root / page).read_text(), page, "../" + BADGE_FILE)
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
