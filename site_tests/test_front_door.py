"""The built site's pages read as HTML (no browser: seconds), in every language: the landing page as a
front door (a title in words, a start-here box, the lesson map, thumbnails that open their lesson, how to
run before the lessons), each lesson's header (its buttons, what it builds on, its time, its goals from
the teaching guide), markdown tables rendered as tables, printed sources highlighted and folded, a diff
coloured, a cell of many asserts folded, pictures shown once with an alt text that says what they are,
and the benchmarks page for readers, its lab log on a maintainers' page, a GPU run's table when there is
one. Each check is a function of the HTML, so that test_controls.py can show it fail on a broken copy."""

import functools
import json
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from conftest import LANGUAGES, ROOT, lesson_links, lessons
from tools import site_pages

PREFIXES = ["", *(f"{lang}/" for lang in LANGUAGES)]
HAN = re.compile(r"[\u4e00-\u9fff]")
RAW_TABLE = re.compile(r"\|\s*:?-{3,}:?\s*\|")
# The lab log's load averages before and after a run, in any language: "load 0.88, 1.39, 3.18", in German
# with a decimal comma and set apart by semicolons ("Last 0,88; 1,39; 3,18").
LOAD_AVERAGES = re.compile(r"\d[.,]\d\d[,，、;]\s?\d[.,]\d\d[,，、;]\s?\d[.,]\d\d")


def soup(html):
    """`html` (a page's text, or a page already parsed) parsed, the contents of its code blocks left out:
    parsing is most of these checks' time, and most of a lesson page is highlighted code, a tag per token.
    (output_problems reads the text of the code blocks before, diff_problems parses them whole.)"""
    if isinstance(html, BeautifulSoup):
        return html
    return BeautifulSoup(CODE_BLOCK.sub(r"\1\2", html), "html.parser")


CODE_BLOCK = re.compile(r"(<pre[^>]*>).*?(</pre>)", re.S)
TAG = re.compile(r"<[^>]+>")


@functools.cache
def course():
    return {lesson["id"]: lesson for lesson in site_pages.course(ROOT)}


def lang_of(prefix):
    return prefix.strip("/") or "en"


# ---------------------------------------------------------------------------------------------------
# The landing page


def landing_problems(html, prefix=""):
    """What keeps landing page `html` from being a front door."""
    page, out = soup(html), []
    article = page.find("article")
    h1 = article.find("h1")
    title = h1.get_text(" ", strip=True).rstrip("#").strip() if h1 else ""
    if len(re.findall(r"\w+", title)) < 4 or "kimik3-lessons" in title:
        out.append(f"the title is not in words: {title!r}")
    box = article.select_one("div.start-here")
    if box is None or len(box.select("li")) < 4:
        out.append("no start-here box of four points or more")
    else:
        hrefs = [a.get("href", "") for a in box.select("a")]
        for want in ("docs/teaching.html#prerequisites", f"notebooks/{lessons()[0].stem}.html"):
            if want not in hrefs:
                out.append(f"the start-here box does not link to {want}")
    headings = [h.get("id") or h.parent.get("id") for h in article.find_all("h2")]
    cards = article.select("section#lessons table tbody tr")
    run = next((h for h in article.find_all("h2") if (h.parent.get("id") or "").startswith("how-to-run")),
               None)
    if run is None:
        out.append(f"no section on how to run a lesson (sections: {headings})")
    elif cards and run.sourceline > cards[0].sourceline:
        out.append("how to run comes after the first lesson")
    svg = article.select_one("svg.lesson-map")
    plan = course()
    if svg is None:
        out.append("no lesson map")
    else:
        boxes = [a.get("href") for a in svg.find_all("a")]
        want = [f"notebooks/{lesson['stem']}.html" for lesson in plan.values()]
        if sorted(boxes) != sorted(want):
            out.append(f"the lesson map's boxes open {boxes}, not every lesson once")
        arrows, needs = len(svg.select("path.map-edge")), sum(len(x["builds_on"]) for x in plan.values())
        if arrows != needs:
            out.append(f"the lesson map has {arrows} arrows, the course plan {needs}")
        if prefix == "zh_CN/" and not HAN.search(svg.get_text()):
            out.append("the lesson map's boxes are not in Chinese")
    if len(cards) != len(plan):
        out.append(f"{len(cards)} lesson cards for {len(plan)} lessons")
    for card, lesson in zip(cards, plan.values(), strict=False):
        page_href = f"notebooks/{lesson['stem']}.html"
        img = card.select("td")[-1].find("img") if card.select("td") else None
        link = img.find_parent("a") if img else None
        if img is None or link is None or link.get("href") != page_href:
            out.append(f"lesson {lesson['id']}: its thumbnail does not open {page_href}")
        if link is not None and link.find_parent("a") is not None:
            out.append(f"lesson {lesson['id']}: its thumbnail is a link inside a link")
    return out


@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_landing_page_is_a_front_door(site, prefix):
    found = landing_problems((site / prefix / "index.html").read_text(), prefix)
    assert not found, "\n".join(found)


# ---------------------------------------------------------------------------------------------------
# A lesson's header


def header_problems(html, stem, prefix=""):
    """What is wrong with the header of lesson `stem`'s page `html` (in the language of `prefix`)."""
    page, out = soup(html), []
    lesson = next(lesson for lesson in course().values() if lesson["stem"] == stem)
    header = page.select_one("article div.lesson-header")
    h1 = page.find("h1")
    if header is None:
        return [f"{stem}: no lesson header"]
    if h1 is None or h1.find_next("div", class_="lesson-header") is not header or \
            any(p.name == "p" for p in h1.find_next_siblings(limit=1)):
        out.append(f"{stem}: the header is not right under the title")
    lang = lang_of(prefix)
    colab, github = lesson_links(stem, None if lang == "en" else lang)
    buttons = {a.get("class")[-1]: a for a in header.select("a.lesson-button")}
    want = {"lesson-colab": colab, "lesson-github": github, "lesson-download": f"{stem}.ipynb",
            "lesson-kaggle": f"https://www.kaggle.com/kernels/welcome?src={github}"}
    for name, url in want.items():
        if name not in buttons or buttons[name].get("href") != url:
            out.append(f"{stem}: its {name.split('-')[1]} button does not open {url}")
    if "lesson-download" in buttons and buttons["lesson-download"].get("download") is None:
        out.append(f"{stem}: the download button does not download")
    shown = [a.get("href") for a in header.select("p.lesson-builds-on a")]
    expected = [f"{course()[i]['stem']}.html" for i in lesson["builds_on"]]
    if shown != expected:
        out.append(f"{stem}: builds on {shown}, the course plan says {expected}")
    if not lesson["goals"] or not lesson["minutes"] or lesson["seconds"] is None:
        return out + [f"{stem}: the teaching guide has no learning goals or minutes for it, or "
                      f"{site_pages.TIMES} no run time (make times)"]
    time = header.select_one("p.lesson-time")
    duration = f"{round(lesson['seconds'])}\u00a0s" if round(lesson["seconds"]) < 60 else None
    if time is None or str(lesson["minutes"]) not in time.get_text() or \
            (duration and duration not in time.get_text()):
        out.append(f"{stem}: its time does not say {lesson['minutes']} minutes and {duration}")
    goals = header.select("div.lesson-goals ol > li")
    wanted = len(re.findall(r"^\d+\. ", lesson["goals"], re.M))
    if len(goals) != wanted:
        out.append(f"{stem}: {len(goals)} learning goals shown, the teaching guide has {wanted}")
    elif prefix == "zh_CN/" and not all(HAN.search(li.get_text()) for li in goals):
        out.append(f"{stem}: its learning goals are not in Chinese")
    return out


@pytest.mark.parametrize("prefix", PREFIXES)
def test_every_lesson_page_starts_with_its_header_and_shows_its_outputs_well(site, prefix):
    """header_problems and output_problems of every lesson page in one language, and its notebook for the
    download button beside it (a translation's: its edition's)."""
    found = []
    for nb in lessons():
        text = (site / prefix / "notebooks" / f"{nb.stem}.html").read_text()
        page = soup(text)
        found += [f"{prefix}{nb.stem}: {p}" for p in raw_table_problems(text) + output_problems(page, nb)]
        found += header_problems(page, nb.stem, prefix)
        if prefix == "zh_CN/":
            images = page.select("article div.cell_output img")
            found += [f"{prefix}{nb.stem}: an alt text not in Chinese: {img.get('alt')!r}"
                      for img in images if not HAN.search(img.get("alt", ""))]
        download = site / prefix / "notebooks" / f"{nb.stem}.ipynb"
        source = ROOT / (f"editions/{lang_of(prefix)}/" if prefix else "") / "notebooks" / nb.name
        if not download.exists() or download.read_bytes() != source.read_bytes():
            found.append(f"{prefix}notebooks/{nb.stem}.ipynb: not the notebook {source.relative_to(ROOT)}")
    assert not found, "\n".join(found[:30])


# ---------------------------------------------------------------------------------------------------
# What the cells printed and displayed


def html_text(html):
    """The text of `html` (scripts and styles left out), entities decoded."""
    import html as entities

    return entities.unescape(TAG.sub("", re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)))


def raw_table_problems(html):
    """A markdown table left as text anywhere in the article of page `html`: prose, outputs or code."""
    text = html_text(html[html.index("<article"):html.index("</article>")])
    raw = RAW_TABLE.search(text)
    if not raw:
        return []
    return [f"a markdown table left as text: {text[max(0, raw.start() - 40):raw.end() + 40]!r}"]


def output_problems(html, notebook):
    """What is wrong with how lesson page `html` shows the outputs of `notebook` (its repository file)."""
    if not isinstance(html, BeautifulSoup) and (raw := raw_table_problems(html)):
        return raw
    page, out = soup(html), []
    article = page.find("article")
    cells = json.loads(Path(notebook).read_text())["cells"]
    printed = ["".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/markdown", ""))
               for c in cells for o in c.get("outputs", [])]
    tables = sum(len(re.findall(r"^\|(?:\s*:?-{3,}:?\s*\|)+\s*$", text, re.M)) for text in printed)
    shown = len(article.select("div.cell_output table"))
    if shown < tables:
        out.append(f"{tables} markdown tables in the notebook's outputs, {shown} tables in the page's")
    folds = {"source": 0, "output": 0}
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        copy = {"source": "".join(cell["source"]), "metadata": {},
                "outputs": json.loads(json.dumps(cell.get("outputs", [])))}
        site_pages.present_cell(copy)
        fold = copy["metadata"].get("kimik3", {}).get("fold")
        if fold:
            folds[fold] += 1
    for kind, count in folds.items():
        found = len(article.select(f"details.kimik3-fold.fold-{kind} > div.cell_"
                                   f"{'input' if kind == 'source' else 'output'}"))
        if found != count:
            out.append(f"{count} cells with their {kind} to fold, {found} folded")

    def printed_source(text):
        """A definition first: not a whole kernel with its lines marked "+ " or "  " (a diff, coloured as
        one), but a source a diff may follow."""
        marked = text.startswith(" ") and len(re.findall(r"^[-+]\s", text, re.M)) >= 3
        return re.match(r"\s*(@|def |class )", text) and not marked

    sources = sum(bool(re.search(r"\bgetsource\(", "".join(c["source"]))) and any(
        o.get("output_type") == "stream" and printed_source("".join(o["text"])) for o in c.get("outputs", []))
        for c in cells if c["cell_type"] == "code")
    highlighted = len(article.select("div.cell_output div.highlight-python"))
    if highlighted < sources:
        out.append(f"{sources} printed sources, {highlighted} highlighted as Python")
    srcs = [img.get("src") for img in article.select("div.cell_output img")]
    twice = sorted({s for s in srcs if srcs.count(s) > 1})
    if twice:
        out.append(f"a picture shown twice: {twice}")
    for img in article.select("div.cell_output img"):
        alt = img.get("alt") or ""
        if not alt.strip() or alt == img.get("src") or re.search(r"[0-9a-f]{16}|\.png$", alt):
            out.append(f"a picture whose alt text says nothing: {alt!r}")
            break
    return out


def diff_problems(html):
    """A printed diff must be coloured: lines added and lines dropped marked as such."""
    article = BeautifulSoup(html, "html.parser").find("article")
    added = article.select("div.cell_output .highlight .gi")
    dropped = article.select("div.cell_output .highlight .gd")
    if added and dropped:
        return []
    return [f"the printed diff is not coloured ({len(added)} lines marked added, {len(dropped)} dropped)"]


def test_the_kernel_diff_is_coloured(site):
    """Lesson 06 prints what its kernel changes from lesson 05's, a line each, marked - and +."""
    for prefix in PREFIXES:
        found = diff_problems((site / prefix / "notebooks" / "06_gated_deltanet.html").read_text())
        assert not found, (prefix, found)


def test_a_cell_of_many_asserts_shows_its_code_folded(site):
    """Every cell of site_pages.FOLD_ASSERTS asserts or more shows its code folded, and no other: checked on
    the course's cell with the most asserts (folded exactly when it reaches FOLD_ASSERTS)."""
    counts = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for c in json.loads(path.read_text())["cells"]:
            if c["cell_type"] == "code":
                counts.append((len(re.findall(r"^\s*assert\b", "".join(c["source"]), re.M)), path.stem))
    most, stem = max(counts)
    for prefix in PREFIXES:
        article = soup((site / prefix / "notebooks" / f"{stem}.html").read_text()).find("article")
        folded = article.select("details.kimik3-fold.fold-source")
        assert bool(folded) == (most >= site_pages.FOLD_ASSERTS), (prefix, stem, most, len(folded))


def test_lesson_12_shows_its_verdicts_as_a_table(site):
    """Lesson 12's tests print their verdicts as a markdown table (its section 11): the page shows a table
    whose header names the equivalence test, and a row per tested comparison."""
    for prefix in PREFIXES:
        article = soup((site / prefix / "notebooks" / "12_recall.html").read_text()).find("article")
        tables = [t for t in article.select("div.cell_output table") if "equivalence p" in t.get_text()]
        assert tables, f"{prefix}12_recall: the verdicts are not shown as a table"
        kinds = ("above", "below", "equal within 2 points", "no conclusion")
        rows = tables[0].select("tbody tr")
        verdicts = [row for row in rows if row.select("td")[-1].get_text(strip=True) in kinds]
        assert verdicts, f"{prefix}12_recall: the verdicts' table has no verdict"


# ---------------------------------------------------------------------------------------------------
# The benchmarks


def benchmark_problems(readers, maintainers):
    """What keeps the benchmarks page (`readers`, HTML) from being a reader's page, its log (`maintainers`)
    apart."""
    page, out = soup(readers), []
    article = page.find("article")
    text = " ".join(article.get_text(" ").split())
    rows = article.select("table tbody tr")
    bars = article.select("figure.bench-chart .bench-row")
    if not bars or len(bars) != len(rows):
        out.append(f"{len(bars)} bars in the chart for {len(rows)} rows of the table")
    if LOAD_AVERAGES.search(text):
        out.append("the readers' page quotes load averages: a line of the lab log")
    if "make bench" not in text:
        out.append("the readers' page does not say how to rerun the benchmarks")
    if not article.select('a[href="maintainers.html"]'):
        out.append("the readers' page does not link to the maintainers' log")
    gpu = sorted((ROOT / "benchmarks" / "results").glob("gpu-*.json"))
    shown = article.select("table.gpu-table tbody tr")
    if gpu and len(shown) != sum(len(json.loads(p.read_text())["rows"]) for p in gpu):
        out.append(f"{len(gpu)} GPU runs in benchmarks/results/, {len(shown)} rows of them shown")
    if not gpu and not article.select(".gpu-none"):
        out.append("no GPU run, and the page does not say so")
    log = " ".join(soup(maintainers).find("article").get_text(" ").split())
    if not LOAD_AVERAGES.search(log):
        out.append("the maintainers' page does not have the lab log")
    return out


@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_benchmarks_page_is_for_readers_and_the_log_for_maintainers(site, prefix):
    found = benchmark_problems((site / prefix / "benchmarks" / "README.html").read_text(),
                               (site / prefix / "benchmarks" / "maintainers.html").read_text())
    assert not found, "\n".join(found)


def test_a_gpu_run_is_shown_as_a_table(tmp_path):
    """kimik3_site.gpu_tables: a table per gpu-*.json, a row per row of the run; none without a file."""
    import kimik3_site

    assert kimik3_site.gpu_tables(tmp_path) is None
    rows = [dict(mixer="kda", B=2, H=16, T=8192, D=128, form=f"triton ({p})", precision=p, output_error=1e-6,
                 state_error=2e-6, tolerance=1e-3, ms=1.5, vs_fla=1.2, tflops=3.0, gpu="NVIDIA H200")
            for p in ("ieee", "tf32")]
    run = {"gpu": "NVIDIA H200", "torch": "2.9", "rows": rows}
    (tmp_path / "gpu-nvidia-h200.json").write_text(json.dumps(run))
    html = BeautifulSoup(kimik3_site.gpu_tables(tmp_path), "html.parser")
    assert "NVIDIA H200" in html.get_text() and len(html.select("table tbody tr")) == 2
    second = [td.get_text() for td in html.select("tbody tr")[1].find_all("td")]
    assert second[:4] == ["kda", "128", "triton (tf32)", "tf32"], second
